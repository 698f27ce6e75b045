# SPDX-License-Identifier: MIT
"""`mesa-fork debsrc`: Debian's source package of the base with our series
appended to its quilt series, the driverInfo tag and Honeykrisp in
debian/rules, and a changelog entry by whoever makes it."""

import datetime
import email.utils
import glob
import os
import shutil
import tempfile

from . import series, sources
from .config import debian_version, fork_release
from .proc import die, rel, run, step


def patch_debian_rules(path, tag, asahi_archs):
    """Name the build in driverInfo and build Honeykrisp on asahi_archs,
    inside the block where Debian builds the other Arm Vulkan drivers."""
    with open(path) as f:
        text = f.read()
    anchor = "\t-Dvulkan-drivers=\"[$(VULKAN_DRIVERS_LIST)]\" \\\n"
    if anchor not in text:
        die("debsrc: debian/rules has no -Dvulkan-drivers line to extend")
    text = text.replace(anchor, anchor + "\t-Dvulkan-driver-info=\"%s, Debian $(DEB_VERSION)\" \\\n"
                        % tag, 1)
    arm = "\tVULKAN_DRIVERS += broadcom freedreno panfrost\n"
    if arm not in text:
        die("debsrc: debian/rules has no Arm Vulkan driver line")
    text = text.replace(arm, arm + "    ifneq (,$(filter $(DEB_HOST_ARCH), %s))\n"
                        "\tVULKAN_DRIVERS += asahi\n    endif\n" % " ".join(asahi_archs), 1)
    with open(path, "w") as f:
        f.write(text)


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


def prepend_changelog(path, package, version, patches, date, who):
    lines = ["%s (%s) UNRELEASED; urgency=medium" % (package, version), "",
             "  * Apply the mesa-fork series (%d patches):" % len(patches)]
    for p in patches:
        lines.append("    - %s" % os.path.basename(p))
    lines += ["", " -- %s  %s" % (who, date), "", ""]
    with open(path) as f:
        old = f.read()
    with open(path, "w") as f:
        f.write("\n".join(lines) + old)


def debsrc(fork, output=None):
    """Make a Debian source package: Debian's mesa with our series appended."""
    if sources.verify_debian(fork):
        die("debsrc: run 'bin/mesa-fork fetch' first")
    maintainer = changelog_maintainer()
    out = os.path.abspath(output or os.path.join(fork.work, "debsrc"))
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
        archs = fork.conf["debsrc"]["asahi_architectures"].split()
        with step("debian/rules: driverInfo tag, Honeykrisp on %s" % " ".join(archs)):
            patch_debian_rules(os.path.join(src, "debian", "rules"), fork_release(fork.conf),
                               archs)
        with step("debian/changelog: %s by %s" % (version, maintainer)):
            prepend_changelog(os.path.join(src, "debian", "changelog"), b["package"],
                              version, patches, changelog_date(), maintainer)
        os.makedirs(out, exist_ok=True)
        with step("dpkg-source -b into %s" % rel(out)):
            orig = sources.debian_file(fork, "orig")
            shutil.copy(orig, tmp)
            run(["dpkg-source", "-b", os.path.basename(src)], cwd=tmp, quiet=True)
            for f in glob.glob(os.path.join(tmp, "*%s*" % version)) + \
                    [os.path.join(tmp, os.path.basename(orig))]:
                shutil.copy(f, out)
    dsc = os.path.join(out, "%s_%s.dsc" % (b["package"], version))
    print("debsrc: %s" % rel(dsc))
    print("build it with: dpkg-source -x %s && cd %s-%s && dpkg-buildpackage -b"
          % (rel(dsc), b["package"], b["upstream_version"]))
