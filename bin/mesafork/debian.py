# SPDX-License-Identifier: MIT
"""`mesa-fork debsrc`: Debian's source package of the base with our series
appended to its quilt series, the driverInfo tag, Honeykrisp and the build
profile pkg.mesa.forkonly in debian/rules and debian/control, the fork's
packager as its maintainer, and a changelog entry by them for the fork's
distribution ([debsrc] distribution); the .dsc and the _source.changes an
upload takes. Run as root, it does all of this as the invoking user
(proc.invoking_user), so what it writes stays theirs."""

import datetime
import email.utils
import glob
import os
import shutil
import tempfile
import textwrap

from . import series, sources
from .config import cross_native_tools, debian_version, fork_release
from .proc import as_user, die, invoking_user, rel, run, step, user_dir


# Build-dependencies a build with the profile does not need: the gallium,
# video, OpenCL (rusticl), NVK, Direct3D, Teflon and GLX parts.
PROFILE_SKIPS_BUILD_DEPS = (
    "directx-headers-dev", "flatbuffers-compiler", "libflatbuffers-dev",
    "libxtensor-dev", "libsensors-dev", "libva-dev", "libvdpau-dev",
    "libglvnd-core-dev", "libxxf86vm-dev", "libxcb-glx0-dev", "python3-pycparser",
    "rustc", "rustfmt", "bindgen", "cbindgen", "librust-paste-dev", "librust-syn-dev")

# Binary packages a build with the profile makes; it skips all others.
PROFILE_PACKAGES = ("mesa-vulkan-drivers", "mesa-drm-shim")


def _replace_once(text, old, new, what):
    if old not in text:
        die("debsrc: debian/rules has no %s to change" % what)
    return text.replace(old, new, 1)


def profile_driver_lines(drivers, driver_archs):
    """VULKAN_DRIVERS of the profile, in make: each driver, inside an
    architecture test where driver_archs ({driver: [arch]}) restricts it."""
    lines = ["  VULKAN_DRIVERS =\n"]
    for d in drivers:
        if d in driver_archs:
            lines.append("  ifneq (,$(filter $(DEB_HOST_ARCH), %s))\n"
                         "    VULKAN_DRIVERS += %s\n  endif\n" % (" ".join(driver_archs[d]), d))
        else:
            lines.append("  VULKAN_DRIVERS += %s\n" % d)
    return "".join(lines)


# Where the native build of a cross build puts the meson native file that
# names its compilers (debian/rules variable MESA_FORK_NATIVE_FILE).
NATIVE_DIR = "build-native"
NATIVE_FILE = NATIVE_DIR + "/mesa-fork-tools.ini"


def profile_rules(profile, drivers, driver_archs=None):
    """The debian/rules block that makes the profile build only `drivers`
    and Mesa's Vulkan layers and drm-shims: no OpenGL, EGL, GBM, gallium
    driver, VA-API, VDPAU, XA, Nine, OpenCL or Teflon. In a cross build
    Mesa's compilers come from a native build (native_tools_rule)."""
    return (
        "# mesa-fork: with the build profile %(p)s, only the Vulkan drivers\n"
        "# the fork changes (%(d)s), Mesa's Vulkan layers and the drm-shims\n"
        "# are built: mesa-vulkan-drivers and mesa-drm-shim. Build without the\n"
        "# profile for the whole of Mesa.\n"
        "DEB_BUILD_ARCH     ?= $(shell dpkg-architecture -qDEB_BUILD_ARCH)\n"
        "DEB_BUILD_GNU_TYPE ?= $(shell dpkg-architecture -qDEB_BUILD_GNU_TYPE)\n"
        "ifneq (,$(filter %(p)s,$(DEB_BUILD_PROFILES)))\n"
        "  GALLIUM_DRIVERS =\n"
        "%(v)s"
        "  confflags_GALLIUM := $(filter -Dllvm=%% -Dintel-clc=%% -Dvideo-codecs=%%,\\\n"
        "\t$(confflags_GALLIUM))\n"
        "  confflags_DIRECT_RENDERING =\n"
        "  confflags_GBM = -Dgbm=disabled\n"
        "  confflags_OSMESA = -Dosmesa=false\n"
        "  confflags_TEFLON = -Dteflon=false\n"
        "  # Later -D options win in meson: these override the GL ones below.\n"
        "  confflags_PROFILE = -Dopengl=false -Dglx=disabled -Degl=disabled \\\n"
        "\t-Dgles1=disabled -Dgles2=disabled -Dglvnd=disabled \\\n"
        "\t-Dgallium-va=disabled -Dgallium-vdpau=disabled -Dgallium-xa=disabled \\\n"
        "\t-Dgallium-nine=false -Dgallium-opencl=disabled -Dgallium-rusticl=false\n"
        "  ifneq (,$(filter nocheck,$(DEB_BUILD_OPTIONS)))\n"
        "    confflags_PROFILE += -Dbuild-tests=false\n"
        "  endif\n"
        "  ifneq ($(DEB_BUILD_ARCH),$(DEB_HOST_ARCH))\n"
        "    # Cross build: Mesa's compilers that run during the build come from\n"
        "    # a native build of this tree, named in a meson native file (Mesa's\n"
        "    # \"system\" choice), so the target's drivers need no LLVM. The\n"
        "    # cross profile selects the build machine's LLVM in debian/control.\n"
        "    ifeq (,$(filter cross,$(DEB_BUILD_PROFILES)))\n"
        "      $(error a cross build with %(p)s needs the cross build profile too: \\\n"
        "\tdpkg-buildpackage -a $(DEB_HOST_ARCH) -Pcross,nocheck,%(p)s)\n"
        "    endif\n"
        "    MESA_FORK_NATIVE_FILE = %(nf)s\n"
        "    confflags_GALLIUM := $(filter-out -Dllvm=%%,$(confflags_GALLIUM))\n"
        "    confflags_PROFILE += -Dllvm=disabled -Dmesa-clc=system \\\n"
        "\t-Dprecomp-compiler=system --native-file=$(CURDIR)/$(MESA_FORK_NATIVE_FILE)\n"
        "  endif\n"
        "endif\n\n" % {"p": profile, "d": " ".join(drivers), "nf": NATIVE_FILE,
                       "v": profile_driver_lines(drivers, driver_archs or {})})


def native_tools_rule(tools):
    """The rule of debian/rules that makes MESA_FORK_NATIVE_FILE: a meson
    build of this tree for the build machine with only what Mesa's
    compilers need, the compilers tools ({name: path in the build tree}),
    and the native file naming them. The package build's CFLAGS, CPPFLAGS
    and LDFLAGS are the target's (dpkg-buildpackage -a), so they are
    unset; CC is the build machine's compiler."""
    binaries = "".join("%s = '$(CURDIR)/%s/%s'\\n" % (n, NATIVE_DIR, p)
                       for n, p in sorted(tools.items()))
    return (
        "# mesa-fork: the native build of a cross build with the profile (see\n"
        "# MESA_FORK_NATIVE_FILE above).\n"
        "%(nf)s:\n"
        "\trm -rf %(nd)s\n"
        "\tenv -u CFLAGS -u CXXFLAGS -u CPPFLAGS -u LDFLAGS -u PKG_CONFIG \\\n"
        "\t    -u PKG_CONFIG_PATH -u PKG_CONFIG_LIBDIR \\\n"
        "\t    CC=$(DEB_BUILD_GNU_TYPE)-gcc CXX=$(DEB_BUILD_GNU_TYPE)-g++ \\\n"
        "\t  meson setup %(nd)s . --wrap-mode=nodownload --buildtype=release \\\n"
        "\t    -Dvulkan-drivers=asahi -Dgallium-drivers= -Dplatforms= -Dvulkan-layers= \\\n"
        "\t    -Dtools= -Dopengl=false -Dglx=disabled -Degl=disabled -Dgbm=disabled \\\n"
        "\t    -Dgles1=disabled -Dgles2=disabled -Dglvnd=disabled -Dllvm=enabled \\\n"
        "\t    -Dshared-llvm=enabled -Dmesa-clc=enabled -Dprecomp-compiler=enabled \\\n"
        "\t    -Dbuild-tests=false -Dvalgrind=disabled -Dlibunwind=disabled \\\n"
        "\t    -Dlmsensors=disabled -Dzstd=disabled -Dexpat=disabled -Dxmlconfig=disabled \\\n"
        "\t    -Dvideo-codecs=\n"
        "\tninja -C %(nd)s $(patsubst parallel=%%,-j%%,$(filter parallel=%%,$(DEB_BUILD_OPTIONS))) \\\n"
        "\t    %(targets)s\n"
        "\tprintf \"[binaries]\\n%(bin)s\" >$@\n\n"
        % {"nf": NATIVE_FILE, "nd": NATIVE_DIR, "bin": binaries,
           "targets": " ".join(p for _, p in sorted(tools.items()))})


def profile_overrides(profile):
    """dh overrides for the profile: Debian's own move and delete files of
    packages the profile does not build."""
    return (
        "ifneq (,$(filter %s,$(DEB_BUILD_PROFILES)))\n"
        "override_dh_installchangelogs:\n"
        "\tdh_installchangelogs -a\n\n"
        "override_dh_install:\n"
        "\tfind debian/tmp/ -name '*.la' -exec rm '{}' ';'\n"
        "\t# mesa-vulkan-drivers ships RADV's drirc file; without RADV, the\n"
        "\t# same file is taken from the source.\n"
        "\tinstall -D -m644 src/util/00-radv-defaults.conf \\\n"
        "\t\tdebian/tmp/usr/share/drirc.d/00-radv-defaults.conf\n"
        "\tdh_install -a\n"
        "\tset -e; for p in $(allpkg); do \\\n"
        "\t\tinstall -d debian/$$p/usr/share/bug/$$p && \\\n"
        "\t\tinstall -m 644 debian/local/control debian/$$p/usr/share/bug/$$p && \\\n"
        "\t\tinstall -m 755 debian/local/script  debian/$$p/usr/share/bug/$$p; \\\n"
        "\tdone\n\n"
        "# Files of the packages the profile skips are expected to be left over.\n"
        "override_dh_missing:\n"
        "\tdh_missing --list-missing\n\n"
        "else\n" % profile)


def patch_debian_rules(path, tag, asahi_archs, profile, profile_drivers,
                       driver_archs=None, native_tools=None):
    """Name the build in driverInfo, build Honeykrisp on asahi_archs inside
    the block where Debian builds the other Arm Vulkan drivers, and add the
    build profile, which can cross-build with native_tools."""
    with open(path) as f:
        text = f.read()
    anchor = "\t-Dvulkan-drivers=\"[$(VULKAN_DRIVERS_LIST)]\" \\\n"
    text = _replace_once(text, anchor, anchor + "\t-Dvulkan-driver-info=\"%s\" \\\n" % tag,
                         "-Dvulkan-drivers line to extend")
    arm = "\tVULKAN_DRIVERS += broadcom freedreno panfrost\n"
    text = _replace_once(text, arm, arm + "    ifneq (,$(filter $(DEB_HOST_ARCH), %s))\n"
                         "\tVULKAN_DRIVERS += asahi\n    endif\n" % " ".join(asahi_archs),
                         "Arm Vulkan driver line")
    text = _replace_once(text, "empty:=\n",
                         profile_rules(profile, profile_drivers, driver_archs) + "empty:=\n",
                         "'empty:=' line (driver lists quoted)")
    text = _replace_once(text, "\t$(confflags_TEFLON)\n",
                         "\t$(confflags_TEFLON) \\\n\t$(confflags_PROFILE)\n",
                         "$(confflags_TEFLON) line ending confflags")
    start = "override_dh_installchangelogs:\n"
    end = "override_dh_makeshlibs:\n"
    text = _replace_once(text, start, native_tools_rule(native_tools or {}) +
                         profile_overrides(profile) + start, "override_dh_installchangelogs")
    text = _replace_once(text, "override_dh_auto_configure: rewrite_wrap_files\n",
                         "override_dh_auto_configure: rewrite_wrap_files "
                         "$(MESA_FORK_NATIVE_FILE)\n", "override_dh_auto_configure")
    text = _replace_once(text, "\trm -rf build\n", "\trm -rf build %s\n" % NATIVE_DIR,
                         "'rm -rf build' in override_dh_clean")
    text = _replace_once(text, end, "endif\n\n" + end, "override_dh_makeshlibs")
    with open(path, "w") as f:
        f.write(text)


def python3_debian():
    """python3-debian's deb822 and changelog modules (Debian's own parsers
    for control files and changelogs), or one line saying how to get them."""
    try:
        from debian import changelog, deb822
    except ImportError:
        die("debsrc: python3-debian is missing (Debian's parser of control files and "
            "changelogs): run 'bin/mesa-fork deps', or apt-get install python3-debian")
    return deb822, changelog


def read_control(path):
    """The paragraphs of a control file (deb822) and the comment lines
    after the last one, which deb822 does not keep (Debian's ends with a
    vim modeline)."""
    deb822, _ = python3_debian()
    with open(path) as f:
        text = f.read()
    lines = text.rstrip("\n").split("\n")
    tail = []
    while lines and (lines[-1].startswith("#") or not lines[-1].strip()):
        tail.insert(0, lines.pop())
    paragraphs = list(deb822.Deb822.iter_paragraphs("\n".join(lines).split("\n"),
                                                    use_apt_pkg=False))
    return paragraphs, tail


def write_control(path, paragraphs, tail):
    with open(path, "w") as f:
        f.write("\n".join(p.dump() for p in paragraphs))
        if tail:
            f.write("\n".join(tail) + "\n")


def patch_debian_control(path, profile, libc_min, asahi_archs):
    """Mark the binary packages and build-dependencies the profile does not
    need with Build-Profiles: <!profile>, and require the kernel headers
    with <drm/asahi_drm.h> wherever Honeykrisp is built."""
    paragraphs, tail = read_control(path)
    for p in paragraphs:
        if "Source" in p:
            p["Build-Depends"] = "\n".join(_profile_build_deps(
                p["Build-Depends"].split("\n"), profile, libc_min, asahi_archs))
            continue
        pkg = p.get("Package")
        if pkg is None or pkg in PROFILE_PACKAGES:
            continue
        if "Build-Profiles" in p:
            value = p["Build-Profiles"].strip()
            if not value.endswith(">"):
                die("debsrc: %s: cannot extend Build-Profiles: %r" % (pkg, value))
            p["Build-Profiles"] = value[:-1] + " !%s>" % profile
        else:
            if "Architecture" not in p:
                die("debsrc: debian/control: package %s has no Architecture" % pkg)
            p["Build-Profiles"] = "<!%s>" % profile
            p.order_after("Build-Profiles", "Architecture")
    write_control(path, paragraphs, tail)


# Build-dependencies that run on the build machine in a cross build with
# the profile (Mesa's compilers and their LLVM, the Python of Mesa's code
# generators) and are not Multi-Arch: foreign (those already serve the
# build machine, and dpkg refuses :native on them: libclc, python3-ply):
# by name, or by prefix where the name carries LLVM's version
# (debian/control.in writes it @LLVM_VERSION@).
CROSS_NATIVE_BUILD_DEPS = ("spirv-tools", "python3", "python3-mako", "python3-yaml")
CROSS_NATIVE_PREFIXES = ("llvm-", "libclang-", "libllvmspirvlib-")

# What the native build of a cross build links besides those (libdrm for
# Honeykrisp's configure, zlib for Mesa's util, wayland-scanner.pc, which
# meson looks up for the build machine).
CROSS_NATIVE_EXTRA = ("libdrm-dev", "zlib1g-dev", "libwayland-dev")


def _is_cross_native(name):
    return name in CROSS_NATIVE_BUILD_DEPS or name.startswith(CROSS_NATIVE_PREFIXES)


def _profile_build_deps(lines, profile, libc_min, asahi_archs):
    """The Build-Depends value's lines (the first empty: the value starts
    on the next line) with the profile's annotations and additions."""
    if not lines or lines[0].strip():
        die("debsrc: debian/control: Build-Depends does not start on its own line")
    i = 1
    cross = "<cross %s>" % profile
    while i < len(lines) and lines[i].startswith(" "):
        dep = lines[i].strip().rstrip(",")
        name = dep.split()[0]
        if name in PROFILE_SKIPS_BUILD_DEPS:
            if dep.endswith(">"):
                dep = dep[:-1] + " !%s>" % profile
            else:
                dep += " <!%s>" % profile
            lines[i] = " %s," % dep
        elif _is_cross_native(name):
            if dep.endswith(">"):
                die("debsrc: debian/control: %s already has build profiles" % dep)
            # Build-Profiles: groups are alternatives, terms in one group
            # all hold. Debian's own builds (native, or cross without the
            # profile) keep the dependency as it was.
            lines[i] = " %s <!cross> <!%s>," % (dep, profile)
            native = name + ":native" + dep[len(name):]
            lines.insert(i + 1, " %s %s," % (native, cross))
            i += 1
        i += 1
    if not lines[i - 1].rstrip().endswith(","):
        lines[i - 1] = lines[i - 1].rstrip() + ","
    lines[i:i] = [" linux-libc-dev (>= %s) [%s] <!%s>," % (libc_min, " ".join(asahi_archs),
                                                            profile),
                  " linux-libc-dev (>= %s) <%s>," % (libc_min, profile)] + \
        [" %s:native %s," % (n, cross) for n in CROSS_NATIVE_EXTRA]
    return lines


def profile_driver_archs(d):
    """{driver: [arch]} of [debsrc] profile_driver_architectures."""
    out = {}
    for item in d.get("profile_driver_architectures", "").split():
        drv, archs = item.split("=", 1)
        out[drv] = archs.split(",")
    return out


def changelog_maintainer():
    """'Name <email>' of whoever makes the package, from the variables dch
    reads: DEBFULLNAME and DEBEMAIL (which may hold both), else NAME and
    EMAIL."""
    name, addr = email.utils.parseaddr(os.environ.get("DEBEMAIL") or
                                       os.environ.get("EMAIL") or "")
    name = os.environ.get("DEBFULLNAME") or os.environ.get("NAME") or name
    if not name or "@" not in addr:
        die("debsrc: the changelog entry needs its author: set DEBFULLNAME and "
            "DEBEMAIL, as for dch (found name %r, email %r)" % (name, addr))
    return "%s <%s>" % (name, addr)


def changelog_date():
    """Now, or SOURCE_DATE_EPOCH for a reproducible package, in the
    changelog's RFC 2822 form."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None and not epoch.isdigit():
        die("debsrc: SOURCE_DATE_EPOCH=%r is not a number of seconds" % epoch)
    if epoch:
        dt = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
    else:
        dt = datetime.datetime.now().astimezone()
    return email.utils.format_datetime(dt)


# Fields of Debian's Source paragraph that name Debian's people and
# repository: a package another archive publishes drops them (its
# Maintainer is the fork's packager).
DEBIAN_ONLY_FIELDS = ("Uploaders", "Vcs-Git", "Vcs-Browser")


def set_maintainer(path, who):
    """The fork's packager maintains the package: Debian's Uploaders (Debian
    developers, who did not upload this package) and Vcs-* fields (Debian's
    repository) are dropped. Debian's maintainer is named in the changelog
    entry (XSBC-Original-Maintainer, as Ubuntu keeps it, is a field
    Debian's lintian does not know). Returns Debian's."""
    paragraphs, tail = read_control(path)
    source = paragraphs[0] if paragraphs and "Source" in paragraphs[0] else None
    if source is None or "Maintainer" not in source:
        die("debsrc: %s has no Maintainer field in its Source paragraph" % path)
    debian_maintainer = source["Maintainer"]
    source["Maintainer"] = who
    for field in DEBIAN_ONLY_FIELDS:
        if field in source:
            del source[field]
    write_control(path, paragraphs, tail)
    return debian_maintainer


def changelog_items(patches, changes):
    """The entry's lines: the series, then each change wrapped as dch
    wraps within 80 columns."""
    lines = ["  * Apply the mesa-fork series (%d patches):" % len(patches)]
    lines += ["    - %s" % os.path.basename(p) for p in patches]
    for c in changes:
        lines += textwrap.wrap(c, 78, initial_indent="  * ", subsequent_indent="    ")
    return lines


def prepend_changelog(path, package, version, patches, date, who, distribution, changes=()):
    """A new entry for distribution on top of debian/changelog, written
    with python3-debian's changelog module. (dch would do it too, but takes
    the date only from the clock: a reproducible package needs
    SOURCE_DATE_EPOCH's.)"""
    _, changelog = python3_debian()
    try:
        with open(path) as f:
            log = changelog.Changelog(f, strict=True)
    except changelog.ChangelogParseError as e:
        die("debsrc: python3-debian cannot parse %s: %s" % (path, e))
    log.new_block(package=package, version=version, distributions=distribution,
                  urgency="medium", author=who, date=date,
                  changes=[""] + changelog_items(patches, changes) + [""])
    with open(path, "w") as f:
        log.write_to_open_file(f)


def check_against_dsc(dsc, paths):
    """Each of paths has the sha256 that the (verified) .dsc lists for it."""
    deb822, _ = python3_debian()
    with open(dsc) as f:
        listed = {e["name"]: e["sha256"] for e in deb822.Dsc(f).get("Checksums-Sha256", [])}
    for path in paths:
        name = os.path.basename(path)
        if listed.get(name) != sources.sha256(path):
            die("debsrc: %s is not the file %s lists (sha256 %s, listed %s); run "
                "'bin/mesa-fork fetch' again" % (rel(path), os.path.basename(dsc),
                                                  sources.sha256(path), listed.get(name)))


def distribution(conf):
    """The changelog entry's distribution: [debsrc] distribution, never
    UNRELEASED (dput, dupload and reprepro refuse an upload for it)."""
    dist = conf["debsrc"]["distribution"].strip()
    if not dist or dist == "UNRELEASED" or len(dist.split()) != 1:
        die("debsrc: [debsrc] distribution in config/fork.ini is %r: name the one suite "
            "the fork's archive publishes the package in (trixie)" % dist)
    return dist


def debsrc(fork, output=None):
    """Make a Debian source package: Debian's mesa with our series appended.
    As root, the work is done by the invoking user (proc.invoking_user):
    root only makes the output directory when it is missing, for them."""
    if sources.verify_debian(fork):
        die("debsrc: run 'bin/mesa-fork fetch' first")
    maintainer = changelog_maintainer()
    dist = distribution(fork.conf)
    out = os.path.abspath(output or os.path.join(fork.work, "debsrc"))
    user = invoking_user(fork.work)
    user_dir(out, user)
    as_user(user, make_source_package, fork, out, maintainer, dist)


def make_source_package(fork, out, maintainer, dist):
    """debsrc's work, as whoever runs it: dpkg-source -x, quilt, the
    debian/ changes, dpkg-source -b and dpkg-genchanges -S, in a temporary
    directory; the results are copied into out."""
    if not os.access(out, os.W_OK):
        die("debsrc: %s is not writable by uid %d (made by an earlier run as root?): "
            "remove it, or pass --output" % (rel(out), os.geteuid()))
    b = fork.conf["base"]
    version = debian_version(fork.conf)
    patches = series.patch_files(fork.patches)
    dsc_in = sources.debian_file(fork, "dsc")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "%s-%s" % (b["package"], b["upstream_version"]))
        with step("dpkg-source -x %s" % os.path.basename(dsc_in)):
            run(["dpkg-source", "--no-check", "-x", dsc_in, src], quiet=True)
        with step("append %d patches to debian/patches/series" % len(patches)):
            pdir = os.path.join(src, "debian", "patches", "mesa-fork")
            os.makedirs(pdir)
            with open(os.path.join(src, "debian", "patches", "series"), "a") as f:
                f.write("# %s\n" % fork.release)
                for p in patches:
                    shutil.copy(p, pdir)
                    f.write("mesa-fork/%s\n" % os.path.basename(p))
            env = dict(os.environ, QUILT_PATCHES="debian/patches", QUILT_PC=".pc")
            run(["quilt", "push", "-a", "-q"], cwd=src, env=env, quiet=True)
        d = fork.conf["debsrc"]
        archs = d["asahi_architectures"].split()
        with step("debian/rules: driverInfo tag, Honeykrisp on %s, profile %s"
                  % (" ".join(archs), d["profile"])):
            # Debian's rules write the package version into Mesa's VERSION,
            # so driverInfo starts "Mesa 25.0.7-2+deb13u1+mesafork1": the tag
            # adds only the fork's name and release.
            patch_debian_rules(os.path.join(src, "debian", "rules"), fork_release(fork.conf),
                               archs, d["profile"], d["profile_vulkan_drivers"].split(),
                               profile_driver_archs(d), cross_native_tools(fork.conf))
        with step("debian/control, control.in: what profile %s skips; Maintainer, no Uploaders"
                  % d["profile"]):
            for name in ("control", "control.in"):
                patch_debian_control(os.path.join(src, "debian", name), d["profile"],
                                     d["asahi_linux_libc_dev"], archs)
                debian_maintainer = set_maintainer(os.path.join(src, "debian", name),
                                                   maintainer)
        changes = [
            "debian/rules: driverInfo tag '%s'; build Honeykrisp (asahi) on %s."
            % (fork_release(fork.conf), " ".join(archs)),
            "debian/control: Build-Depends on linux-libc-dev (>= %s) where Honeykrisp"
            " is built, for <drm/asahi_drm.h>." % d["asahi_linux_libc_dev"],
            "Build profile %s: only mesa-vulkan-drivers (ANV on x86, panvk,"
            " Honeykrisp) and mesa-drm-shim; cross-builds with -Pcross,nocheck,%s,"
            " Mesa's compilers from a native build; see the fork's docs/shipping.md."
            % (d["profile"], d["profile"]),
            "Maintainer: the fork's packager (the package is Debian's, maintained by"
            " %s); Uploaders and Vcs-* dropped." % debian_maintainer]
        with step("debian/changelog: %s by %s" % (version, maintainer)):
            prepend_changelog(os.path.join(src, "debian", "changelog"), b["package"],
                              version, patches, changelog_date(), maintainer, dist, changes)
        with step("dpkg-source -b and dpkg-genchanges -S -sa (for %s) into %s" % (dist, rel(out))):
            orig = sources.debian_file(fork, "orig")
            # Mesa's signature of the release tarball, which Debian's .dsc
            # lists (and dpkg-source -x checked against it): dpkg-source -b
            # lists it in ours too when it lies next to the tarball.
            upstream = [orig] + [orig + ".asc"] * os.path.exists(orig + ".asc")
            check_against_dsc(dsc_in, upstream[1:])
            for f in upstream:
                shutil.copy(f, tmp)
            run(["dpkg-source", "-b", os.path.basename(src)], cwd=tmp, quiet=True)
            # What an upload (dput, dupload, reprepro include) takes: the
            # source-only .changes, with the release tarball and its
            # signature (-sa), which the fork's archive does not have yet.
            run(["dpkg-genchanges", "-S", "-sa", "-O" + os.path.join(
                tmp, "%s_%s_source.changes" % (b["package"], version))], cwd=src, quiet=True)
            for f in glob.glob(os.path.join(tmp, "*%s*" % version)) + \
                    [os.path.join(tmp, os.path.basename(f)) for f in upstream]:
                dest = os.path.join(out, os.path.basename(f))
                if os.path.lexists(dest):   # a file of an earlier run, maybe root's
                    os.unlink(dest)
                shutil.copy(f, dest)
    dsc = os.path.join(out, "%s_%s.dsc" % (b["package"], version))
    print("debsrc: %s (for %s; upload %s)" % (rel(dsc), dist, rel(os.path.join(
        out, "%s_%s_source.changes" % (b["package"], version)))))
    print("build it with: dpkg-source -x %s && cd %s-%s && dpkg-buildpackage -b"
          % (rel(dsc), b["package"], b["upstream_version"]))
