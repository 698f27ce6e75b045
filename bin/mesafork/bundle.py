# SPDX-License-Identifier: MIT
"""Prebuilt bundles (docs/bundle.md): `mesa-fork bundle` writes, per
architecture built, one relocatable archive of the drivers, their drm-shims,
manifests whose library_path is relative to the manifest (the Vulkan loader
resolves those), an env.sh that finds its own directory, our programs, a
MANIFEST of sha256 sums (`sha256sum -c MANIFEST` reads it) and a SOURCES
file naming what it was built from; `install --from-bundle` checks one and
installs it into a prefix. The audit of the ELF files (the C library floor
and the allowed sonames of config/fork.ini [bundle]) is here too: bundle
refuses an archive that fails it, and the tests run it."""

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile

from . import build, distro, install, series, sources, uapi
from .config import cross_arches, driver_info_tag, names_release, parse_arches
from .proc import die, make_dirs, rel, remove_tree, run, step, write_if_changed
from .proc import readelf as proc_readelf

BUNDLE_WORD = "bundle"
MANIFEST = "MANIFEST"
SOURCES = "SOURCES"
# A test helper of the tests (a malloc that fails on request), not for users.
LEFT_OUT = ("libmesa-fork-failmalloc.so",)


def bundle_tag(conf, upstream=False):
    """driverInfo's tag in a bundle: the install's, and the word bundle."""
    return "%s, %s" % (driver_info_tag(conf, upstream), BUNDLE_WORD)


def bundle_name(conf, arch):
    return "%s-%s-%s" % (conf["fork"]["name"], conf["fork"]["release"], arch)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_top(fork, *args):
    return subprocess.run(["git", "-C", fork.top] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


# ---------------------------------------------------------------- the audit

def elf_needs(path, readelf="readelf"):
    """(sonames path needs, {version name, ...} it needs of them), from
    readelf's dynamic section and version-needs section."""
    d = proc_readelf(["-d"], path, readelf)
    if d.returncode != 0:
        die("bundle: readelf cannot read %s: %s" % (path, d.stderr.strip()))
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", d.stdout)
    v = proc_readelf(["-V"], path, readelf)
    versions = set()
    # Only the version-needs section (.gnu.version_r): the names a file
    # defines itself are not requirements.
    section = v.stdout.split("Version needs section", 1)
    if len(section) == 2:
        body = re.split(r"\n\s*\n", section[1], maxsplit=1)[0]
        versions = set(re.findall(r"Name: (\S+)\s+Flags", body))
    return needed, versions


def version_key(name):
    """GLIBC_2.36 -> ('GLIBC', (2, 36)); a name without a number -> None."""
    m = re.match(r"^([A-Z]+)_([0-9][0-9.]*)$", name)
    if not m:
        return None
    return m.group(1), tuple(int(x) for x in m.group(2).split("."))


def parse_floor(text):
    """config's floor, 'GLIBC_2.36 GLIBCXX_3.4.30 ...', as {family: version}."""
    floor = {}
    for word in text.split():
        k = version_key(word)
        if not k:
            die("config/fork.ini [bundle] floor: %r is not NAME_VERSION" % word)
        floor[k[0]] = k[1]
    return floor


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


# e_machine of each architecture a bundle is made for (the ELF spec's
# EM_X86_64 and EM_AARCH64) and its dynamic loader.
MACHINES = {"amd64": (62, "ld-linux-x86-64.so.2"), "arm64": (183, "ld-linux-aarch64.so.1")}


def elf_machine(path):
    """(ELF class: 1 32-bit, 2 64-bit, e_machine) of path."""
    with open(path, "rb") as f:
        head = f.read(20)
    endian = "little" if head[5] == 1 else "big"
    return head[4], int.from_bytes(head[18:20], endian)


def elf_dynamic_faults(path, shown, readelf):
    """RPATH/RUNPATH (a relocatable bundle names no directory of the build
    machine) and an executable stack (which glibc 2.41 refuses to dlopen)."""
    faults = []
    d = proc_readelf(["-d", "-l"], path, readelf).stdout
    for kind, value in re.findall(r"\((RPATH|RUNPATH)\)\s+Library \w+: \[([^\]]*)\]", d):
        faults.append("%s has %s %s: a bundle's files find their libraries by soname"
                      % (shown, kind, value))
    for flags in re.findall(r"^\s*GNU_STACK(?:\s+\S+){5}\s+(\S+)", d, re.M):
        if "E" in flags:
            faults.append("%s asks for an executable stack (GNU_STACK %s)" % (shown, flags))
    return faults


def audit(root, conf, readelf="readelf", arch=None):
    """The faults of every ELF file under root: a needed symbol version newer
    than the floor, of a family the floor does not name, or without a
    version number (GLIBC_PRIVATE); a needed library outside the allowed
    list, or the other architecture's loader; another architecture than
    arch (default: root's share/mesa-fork/arch); an RPATH or RUNPATH; an
    executable stack. Returns a list of lines, empty when the bundle
    passes."""
    floor = parse_floor(conf["bundle"]["floor"])
    allowed = set(conf["bundle"]["allowed_libraries"].split())
    if arch is None:
        with open(os.path.join(root, "share", "mesa-fork", "arch")) as f:
            arch = f.read().strip()
    machine, loader = MACHINES[arch]
    other_loaders = {ld for a, (_, ld) in MACHINES.items() if a != arch}
    faults = []
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not is_elf(path):
                continue
            shown = os.path.relpath(path, root)
            cls, em = elf_machine(path)
            if (cls, em) != (2, machine):
                faults.append("%s is an ELF file of machine %d (class %d), not %s's %d"
                              % (shown, em, cls, arch, machine))
            needed, versions = elf_needs(path, readelf)
            for lib in needed:
                if lib not in allowed or lib in other_loaders:
                    faults.append("%s needs %s, which is not in [bundle] allowed_libraries%s"
                                  % (shown, lib, " for %s" % arch if lib in allowed else ""))
            for ver in sorted(versions):
                k = version_key(ver)
                if k is None:
                    faults.append("%s needs %s, a symbol version without a number (private "
                                  "to the library's build)" % (shown, ver))
                    continue
                family, number = k
                if family not in floor:
                    faults.append("%s needs %s, a symbol version family [bundle] floor does "
                                  "not name" % (shown, ver))
                elif number > floor[family]:
                    faults.append("%s needs %s, newer than the floor %s_%s"
                                  % (shown, ver, family, ".".join(map(str, floor[family]))))
            faults += elf_dynamic_faults(path, shown, readelf)
    return faults


# ---------------------------------------------------------------- clean tree

def dirty_reasons(fork):
    """Why the bundle would not be what its SOURCES says: uncommitted or
    untracked files in the repository, a Mesa tree that is not the base
    plus patches/."""
    reasons = []
    r = git_top(fork, "status", "--porcelain", "--untracked-files=normal")
    if r.returncode != 0:
        reasons.append("%s is not a git checkout (SOURCES names a commit)" % fork.top)
    elif r.stdout.strip():
        paths = [line[3:] for line in r.stdout.splitlines()]
        reasons.append("the repository has uncommitted or untracked files (%s%s)"
                       % (", ".join(paths[:3]), ", ..." if len(paths) > 3 else ""))
    if not series.tree_is_prepared(fork):
        reasons.append("no Mesa tree; run 'bin/mesa-fork install' first")
    else:
        untracked = [line[3:] for line in series.git(
            fork, "status", "--porcelain", "--untracked-files=normal").splitlines()
            if line.startswith("??")]
        if untracked:
            reasons.append("untracked files in %s, which the build may read (%s)"
                           % (rel(fork.tree), ", ".join(untracked[:3])))
        state, msg = series.tree_state(fork)
        if state != "current":
            reasons.append("the Mesa tree is not the base plus patches/: %s" % msg)
    return reasons


# ---------------------------------------------------------------- building

def strip_tool(fork):
    """objcopy for the architecture: the cross binutils for a cross build."""
    if fork.cross:
        return "%s-objcopy" % fork.conf["arch." + fork.arch]["triplet"]
    return "objcopy"


def copy_stripped(fork, src, dst):
    """src without its debug sections (the symbol table stays, for
    backtraces): what a distribution's package holds, at a sixth of the
    size."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    run([strip_tool(fork), "--strip-debug", src, dst], quiet=True)
    os.chmod(dst, 0o755)


def install_options(fork):
    """The options install configures the build with (build.meson_options)."""
    return build.meson_options(fork)


@contextlib.contextmanager
def signals_as_exceptions():
    """SIGTERM and SIGHUP (a closed terminal, a CI job cancelled) raise
    SystemExit here, so that the finally clauses below run."""
    def raise_exit(signum, frame):
        raise SystemExit("bundle: stopped by signal %d" % signum)
    old = {sig: signal.signal(sig, raise_exit) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def build_drivers(fork, env, tag):
    """Builds the drivers and their drm-shims with tag in driverInfo and
    yields their paths; the build directory's options are put back (and the
    drivers rebuilt) afterwards, so that install keeps installing what it
    did. The build must be what install configures (not an assertion build,
    not an older configuration): then the tag is the one option that
    differs, and only the three physical-device files that include it are
    compiled again. A bundle killed in between leaves its tag in the build
    directory; install and build put theirs back, and install --no-build
    refuses such a build (install.check_built_tag)."""
    stamp = os.path.join(fork.build, ".mesa-fork-options")
    if not os.path.exists(os.path.join(fork.build, "build.ninja")) or \
            not os.path.exists(stamp):
        die("bundle: the %s build is not set up; run 'bin/mesa-fork install%s' first"
            % (fork.arch, "" if not fork.cross else " --arch " + fork.arch))
    before = install_options(fork)
    with open(stamp) as f:
        configured = json.load(f)
    ignore = "-Dvulkan-driver-info="
    if sorted(o for o in configured if not o.startswith(ignore)) != \
            sorted(o for o in before if not o.startswith(ignore)):
        die("bundle: the %s build directory is not configured as install configures it "
            "(an assertion build, or config/fork.ini changed since); run 'bin/mesa-fork "
            "install%s' first" % (fork.arch, "" if not fork.cross else " --arch " + fork.arch))
    machine = build.machine_files(fork, env)
    targets = []
    for paths in fork.conf["drivers"].values():
        targets += paths.split()
    opts = build.override(before, [ignore + tag])
    failed = True
    try:
        build.configure(fork.build, fork.tree, opts, machine, env)
        with step("ninja: the %s drivers with driverInfo tag '%s'" % (fork.arch, tag)):
            run(["ninja", "-C", fork.build] + targets, env=env, quiet=True)
        yield {p: os.path.join(fork.build, p) for p in targets}
        failed = False
    finally:
        try:
            build.configure(fork.build, fork.tree, before, machine, env)
            with step("ninja: the %s drivers with the install's options again" % fork.arch):
                run(["ninja", "-C", fork.build] + targets, env=env, quiet=True)
        except (SystemExit, Exception):
            print("bundle: could not put the %s build directory back; 'bin/mesa-fork "
                  "build%s' does" % (fork.arch, "" if not fork.cross else " --arch " + fork.arch),
                  file=sys.stderr)
            if not failed:
                raise


# The start of a bundle's env.sh and env-add.sh: they find their own
# directory (bash, zsh, or MESA_FORK_BUNDLE for any POSIX shell), then do
# what install's do, with every path under that directory.
RELOCATE = r'''# A bundle can be anywhere: find it. bash and zsh say which file they
# source; in another shell set MESA_FORK_BUNDLE to the bundle's directory:
#   MESA_FORK_BUNDLE=/path/to/bundle; . /path/to/bundle/share/mesa-fork/env.sh
# No cd: CDPATH, chpwd hooks and cd wrappers cannot get in the way.
if [ -n "${BASH_SOURCE:-}" ]; then
    _mesa_fork_prefix=$BASH_SOURCE
elif [ -n "${ZSH_VERSION:-}" ]; then
    eval '_mesa_fork_prefix=${(%):-%x}'
elif [ -n "${MESA_FORK_BUNDLE:-}" ]; then
    _mesa_fork_prefix=$MESA_FORK_BUNDLE/share/mesa-fork/env.sh
else
    _mesa_fork_prefix=
fi
unset MESA_FORK_BUNDLE
case $_mesa_fork_prefix in
    */*) _mesa_fork_prefix=${_mesa_fork_prefix%/*} ;;
    ?*) _mesa_fork_prefix=. ;;
esac
case $_mesa_fork_prefix in
    /*) ;;
    ?*) _mesa_fork_prefix=$PWD/$_mesa_fork_prefix ;;
esac
case $_mesa_fork_prefix in
    */share/mesa-fork) _mesa_fork_prefix=${_mesa_fork_prefix%/share/mesa-fork} ;;
    ?*) _mesa_fork_prefix=$_mesa_fork_prefix/../.. ;;
esac
if [ -z "$_mesa_fork_prefix" ] || [ ! -f "$_mesa_fork_prefix/share/mesa-fork/release" ]; then
    echo "mesa-fork: cannot tell where this bundle is; source env.sh from bash or zsh, or set MESA_FORK_BUNDLE to the bundle's directory first" >&2
    unset _mesa_fork_prefix
    return 1 2>/dev/null || exit 1
fi
case $_mesa_fork_prefix in
    *:*) echo "mesa-fork: $_mesa_fork_prefix holds a ':', which separates entries of PATH and VK_DRIVER_FILES; move the bundle" >&2
         unset _mesa_fork_prefix
         return 1 2>/dev/null || exit 1 ;;
esac
'''


def stage_bundle(fork, stage, drivers, client_files, tag, upstream):
    """Lays the bundle out in stage (the top directory): an install's
    layout, every path inside relative."""
    conf = fork.conf
    libdir = os.path.join(stage, "lib", "mesa-fork")
    share = os.path.join(stage, "share", "mesa-fork")
    icds = []
    for drv, paths in conf["drivers"].items():
        icd, shim = paths.split()
        copy_stripped(fork, drivers[icd], os.path.join(libdir, os.path.basename(icd)))
        copy_stripped(fork, drivers[shim], os.path.join(libdir, "drm-shim",
                                                        os.path.basename(shim)))
        doc = {"file_format_version": "1.0.1",
               "ICD": {"library_path": os.path.join("..", "..", "..", "lib", "mesa-fork",
                                                    os.path.basename(icd)),
                       "api_version": install.built_api_version(
                           os.path.dirname(drivers[icd]), drv)}}
        name = os.path.basename(install.icd_json("", drv))
        write_if_changed(os.path.join(share, "icd.d", name), json.dumps(doc, indent=4) + "\n")
        icds.append(name)
    for src, relpath in client_files:
        dst = os.path.join(stage, relpath)
        if is_elf(src):
            copy_stripped(fork, src, dst)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
    # The layer's manifest names the library relative to itself too.
    for path in sorted(os.listdir(os.path.join(share, "explicit_layer.d"))
                       if os.path.isdir(os.path.join(share, "explicit_layer.d")) else []):
        path = os.path.join(share, "explicit_layer.d", path)
        with open(path) as f:
            doc = json.load(f)
        lib = os.path.basename(doc["layer"]["library_path"])
        doc["layer"]["library_path"] = os.path.join("..", "..", "..", "lib", "mesa-fork", lib)
        with open(path, "w") as f:
            f.write(json.dumps(doc, indent=4) + "\n")
    for add in (False, True):
        name = "env-add.sh" if add else "env.sh"
        files = ":".join('"$_mesa_fork_prefix"/share/mesa-fork/icd.d/%s' % n for n in icds)
        text = install.env_script_text(files, '"$_mesa_fork_prefix"/bin', add,
                                       "path/to/%s/share/mesa-fork/%s"
                                       % (os.path.basename(stage), name),
                                       preamble=RELOCATE, cleanup=["_mesa_fork_prefix"])
        write_if_changed(os.path.join(share, name), text)
    write_if_changed(os.path.join(share, "release"), tag + "\n")
    write_if_changed(os.path.join(share, "arch"), fork.arch + "\n")
    write_if_changed(os.path.join(share, "shims"), install.shims_file(conf))


def client_files(fork, env):
    """Our programs and the layer, as the client's meson install lays them
    out: [(built file, path in the prefix)], without the tests' helpers."""
    prefix = fork.prefix(None)
    build.build_client(fork, env, prefix)
    out = []
    with tempfile.TemporaryDirectory(dir=fork.work) as tmp:
        run(["meson", "install", "-C", fork.client_build, "--quiet", "--destdir", tmp],
            env=env, quiet=True)
        root = os.path.join(tmp, prefix.lstrip(os.sep))
        keep = os.path.join(fork.work, "bundle", "client-" + fork.arch)
        remove_tree(keep) if os.path.exists(keep) else None
        shutil.copytree(root, keep, symlinks=True)
    for dirpath, _, files in os.walk(keep):
        for name in files:
            if name in LEFT_OUT:
                continue
            path = os.path.join(dirpath, name)
            out.append((path, os.path.relpath(path, keep)))
    return sorted(out, key=lambda x: x[1])


def package_versions(fork, packages):
    """'package version' of each package, from its Debian changelog in the
    build's root (this machine's, or the cross build's sysroot): the first
    line names the source version the file came from."""
    import gzip
    root = fork.sysroot if fork.cross else "/"
    lines = []
    for pkg in packages:
        path = os.path.join(root, "usr", "share", "doc", pkg, "changelog.Debian.gz")
        try:
            with gzip.open(path, "rt", errors="replace") as f:
                first = f.readline().strip()
            m = re.match(r"^(\S+) \(([^)]+)\)", first)
            lines.append("%s %s (source %s)" % (pkg, m.group(2), m.group(1)) if m
                         else "%s ?" % pkg)
        except OSError:
            lines.append("%s: not found in %s" % (pkg, root))
    return lines


def compiler_version(fork, env):
    """The C compiler the build directory was set up with, as meson found
    it (a CC of the environment then included), and its version."""
    info = os.path.join(fork.build, "meson-info", "intro-compilers.json")
    try:
        with open(info) as f:
            c = json.load(f)["host"]["c"]
        return "%s %s (%s)" % (c["id"], c["full_version"], " ".join(c["exelist"]))
    except (OSError, ValueError, KeyError):
        return "unknown (no %s)" % info


def public_url(url):
    """A remote's URL without credentials: a CI runner's origin may hold
    its job token (https://gitlab-ci-token:TOKEN@host/...)."""
    if "://" in url:
        scheme, rest = url.split("://", 1)
        host, _, path = rest.partition("/")
        return "%s://%s/%s" % (scheme, host.rpartition("@")[2], path)
    return url


def tool_version(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return (r.stdout.splitlines() or ["?"])[0]


def sources_text(fork, env, tag, name, commit, upstream):
    """What a distribution needs to rebuild the bundle."""
    conf = fork.conf
    b = conf["base"]
    date = git_top(fork, "log", "-1", "--format=%cI", commit).stdout.strip()
    origin = public_url(os.environ.get("CI_PROJECT_URL") or
                        git_top(fork, "remote", "get-url", "origin").stdout.strip() or
                        "REPOSITORY (this checkout has no remote)")
    lines = ["%s: built from" % name, "",
             "driverInfo tag: %s" % tag,
             "repository: %s" % origin,
             "commit: %s (%s)" % (commit, date)]
    if upstream:
        lines.append("base: Mesa %s release tarball, sha256 %s, with Debian's security "
                     "fixes %s" % (b["upstream_version"], sources.upstream_sha256(fork),
                                   ", ".join(sources.security_patches(fork))))
    else:
        lines += ["base: Debian source package %s %s (apt-get source)" % (b["package"],
                                                                         b["version"]),
                  "  sha256 of the .dsc: %s" % b["sha256_dsc"],
                  "  sha256 of the .orig.tar: %s" % b["sha256_orig"],
                  "  sha256 of the .debian.tar: %s" % b["sha256_debian"]]
    patches = series.patch_files(fork.patches)
    lines.append("series: patches/ of that commit, %d patches, applied with git am "
                 "(sha256 over names and contents: %s)" % (len(patches),
                                                          series.series_hash(fork.patches)))
    for p in patches:
        lines.append("  %s  %s" % (sha256_file(p), os.path.basename(p)))
    lines.append("asahi uAPI header (drm/asahi_drm.h): sha256 %s (config/fork.ini "
                 "[asahi_uapi])" % uapi.pinned_sha256(conf))
    # Paths of the build machine's work directory as the checkout names them.
    opts = build.override(build.meson_options(fork), ["-Dvulkan-driver-info=" + tag])
    lines.append("meson options (.work: the work directory): %s" % " ".join(
        shlex.quote(o.replace(fork.work, ".work")) for o in opts))
    lines.append("compiler: %s" % compiler_version(fork, env))
    codename = distro.os_release().codename or "?"
    lines.append("archiver: %s; %s" % (tool_version(["tar", "--version"]),
                                       tool_version(["zstd", "--version"])))
    lines.append("build root: %s (%s)" % (
        "the cross build's sysroot, Debian %s %s packages" % (codename, fork.arch) if fork.cross
        else "this machine, Debian %s %s" % (codename, fork.arch),
        "libraries and headers the drivers were built against"))
    for line in package_versions(fork, ["libc6", "libstdc++6", "libdrm2", "libexpat1",
                                        "zlib1g", "libzstd1", "libvulkan1"]):
        lines.append("  " + line)
    lines.append("debug sections: removed (objcopy --strip-debug); rebuild with the "
                 "commands below to have them")
    lines += ["", "To rebuild:",
              "  git clone %s mesa-fork && cd mesa-fork && git checkout %s" % (
                  origin, commit),
              "  bin/mesa-fork install --arch %s && bin/mesa-fork bundle --arch %s"
              % (fork.arch, fork.arch), ""]
    return "\n".join(lines)


def write_manifest(stage):
    """MANIFEST: 'sha256  path' for every file under stage but itself, as
    sha256sum prints them, sorted by path."""
    entries = []
    for dirpath, _, files in os.walk(stage):
        for name in files:
            path = os.path.join(dirpath, name)
            relpath = os.path.relpath(path, stage)
            if relpath != MANIFEST:
                entries.append((relpath, sha256_file(path)))
    with open(os.path.join(stage, MANIFEST), "w") as f:
        for relpath, digest in sorted(entries):
            f.write("%s  %s\n" % (digest, relpath))
    return len(entries)


def write_archive(stage, out, epoch):
    """out (.tar.zst) from stage, reproducibly: sorted names, the commit's
    time, owner root, no group or other write bits."""
    tmp = out + ".tmp"
    with step("tar | zstd -19 into %s" % rel(out)):
        tar = subprocess.Popen(["tar", "--sort=name", "--mtime=@%d" % epoch, "--owner=0",
                                "--group=0", "--numeric-owner", "--mode=u+rwX,go=rX",
                                "--format=gnu", "-C", os.path.dirname(stage), "-cf", "-",
                                os.path.basename(stage)], stdout=subprocess.PIPE)
        z = subprocess.run(["zstd", "-19", "-T0", "-q", "-f", "-o", tmp], stdin=tar.stdout)
        tar.stdout.close()
        if tar.wait() != 0 or z.returncode != 0:
            die("bundle: tar or zstd failed writing %s" % out)
    os.replace(tmp, out)


SUMS = "SHA256SUMS"


def write_sums(out, name, digest):
    """out/SHA256SUMS, as sha256sum writes it: the archives written there,
    this one's line replaced."""
    path = os.path.join(out, SUMS)
    lines = []
    if os.path.exists(path):
        with open(path) as f:
            lines = [line for line in f.read().splitlines()
                     if not line.endswith("  " + name)]
    lines.append("%s  %s" % (digest, name))
    with open(path, "w") as f:
        f.write("\n".join(sorted(lines, key=lambda x: x.split("  ", 1)[-1])) + "\n")


def bundle(fork, arch=None, out=None):
    """Write one relocatable archive per architecture installed (default:
    those built), for users who do not build: the drivers, their drm-shims
    and manifests, env.sh, mesa-fork-check, the probes, a MANIFEST of sha256
    sums and a SOURCES file. Refuses a repository with uncommitted files or
    a Mesa tree that is not the base plus patches/."""
    arches = parse_arches(fork, arch) if arch else [
        a for a in [fork.host_arch] + cross_arches(fork.conf)
        if os.path.exists(os.path.join(fork.for_arch(a).build, "build.ninja"))]
    if not arches:
        die("bundle: nothing is built; run 'bin/mesa-fork install [--arch amd64,arm64]' first")
    reasons = dirty_reasons(fork)
    if reasons:
        die("bundle: refusing: a bundle names the commit it was built from, and:\n  %s"
            % "\n  ".join(reasons))
    commit = git_top(fork, "rev-parse", "HEAD").stdout.strip()
    epoch = int(git_top(fork, "log", "-1", "--format=%ct", "HEAD").stdout.strip())
    out = os.path.abspath(out or os.path.join(fork.work, "bundles"))
    os.makedirs(out, exist_ok=True)
    env = build.build_env(fork.top)
    upstream = sources.uses_upstream(fork)
    for a in arches:
        f = fork.for_arch(a)
        name = bundle_name(f.conf, a)
        tag = bundle_tag(f.conf, upstream)
        work = os.path.join(f.work, "bundle", a)
        stage = os.path.join(work, name)
        if os.path.exists(work):
            remove_tree(work)
        make_dirs(work)
        with step("client and probes for %s" % a):
            files = client_files(f, env)
        with signals_as_exceptions(), build_drivers(f, env, tag) as drivers:
            with step("stage %s" % rel(stage)):
                stage_bundle(f, stage, drivers, files, tag, upstream)
        with open(os.path.join(stage, SOURCES), "w") as fh:
            fh.write(sources_text(f, env, tag, name, commit, upstream))
        faults = audit(stage, f.conf)
        if faults:
            die("bundle: the %s bundle fails the audit (config/fork.ini [bundle]):\n  %s"
                % (a, "\n  ".join(faults)))
        n = write_manifest(stage)
        archive = os.path.join(out, name + ".tar.zst")
        write_archive(stage, archive, epoch)
        digest = sha256_file(archive)
        write_sums(out, os.path.basename(archive), digest)
        print("bundle: %s: %d files, %.1f MiB (sha256 %s); passed the audit (%s; %d "
              "allowed libraries)" % (rel(archive), n, os.path.getsize(archive) / 2**20,
                                      digest, f.conf["bundle"]["floor"],
                                      len(f.conf["bundle"]["allowed_libraries"].split())))
    print("bundle: %s lists the archives' sha256 (publish it with them: MANIFEST inside "
          "an archive only tells a damaged file from a good one)" % rel(os.path.join(out, SUMS)))
    print("bundle: unpack with 'tar --zstd -xf FILE', check with 'sha256sum -c MANIFEST' in "
          "its directory, then '. DIR/share/mesa-fork/env.sh' and 'mesa-fork-check'; or "
          "'bin/mesa-fork install --from-bundle FILE'")


# ---------------------------------------------------------------- unpacking

def safe_extract(archive, dest):
    """Unpacks archive (.tar.zst) into dest, refusing anything but regular
    files and directories inside one top directory: returns that
    directory. Modes are the archive's without group or other write and
    special bits; owners are the caller's."""
    if not shutil.which("zstd"):
        die("install --from-bundle: zstd is not installed (Debian and Ubuntu: apt install "
            "zstd; Fedora: dnf install zstd; Arch: pacman -S zstd)")
    z = subprocess.Popen(["zstd", "-dcq", archive], stdout=subprocess.PIPE)
    tops = set()
    try:
        with tarfile.open(fileobj=z.stdout, mode="r|") as tar:
            for m in tar:
                parts = m.name.rstrip("/").split("/")
                if m.name.startswith("/") or ".." in parts or "" in parts or \
                        not (m.isfile() or m.isdir()):
                    die("install --from-bundle: refusing %s: it holds %s, which a bundle "
                        "never does" % (archive, m.name))
                tops.add(parts[0])
                if len(tops) > 1:
                    die("install --from-bundle: refusing %s: more than one top directory"
                        % archive)
                tar.extract(m, dest, set_attrs=False)
                os.chmod(os.path.join(dest, m.name),
                         0o755 if m.isdir() else (0o755 if m.mode & 0o100 else 0o644))
        # Read to the end: tar stops at its end-of-archive blocks, zstd may
        # have more of the last record to write.
        while z.stdout.read(1 << 16):
            pass
    except tarfile.TarError as e:
        die("install --from-bundle: %s is not a bundle: %s" % (archive, e))
    except OSError as e:
        die("install --from-bundle: refusing %s: %s: %s" % (archive, e.filename or "",
                                                           e.strerror))
    finally:
        z.stdout.close()
    if z.wait() != 0:
        die("install --from-bundle: zstd could not decompress %s" % archive)
    if not tops:
        die("install --from-bundle: %s is empty" % archive)
    return os.path.join(dest, tops.pop())


def verify(top):
    """Checks every sha256 of top's MANIFEST, and that it lists every file:
    returns the list of files, or dies naming the first that differs."""
    manifest = os.path.join(top, MANIFEST)
    if not os.path.isfile(manifest):
        die("install --from-bundle: %s has no %s: not a bundle" % (top, MANIFEST))
    listed = {}
    with open(manifest) as f:
        for n, line in enumerate(f, 1):
            m = re.match(r"^([0-9a-f]{64})  (.+)$", line.rstrip("\n"))
            parts = m.group(2).split("/") if m else []
            if not m or m.group(2).startswith("/") or ".." in parts or "" in parts:
                die("install --from-bundle: %s line %d is not 'sha256  path' with a path "
                    "inside the bundle" % (manifest, n))
            listed[m.group(2)] = m.group(1)
    present = set()
    for dirpath, _, files in os.walk(top):
        for name in files:
            path = os.path.join(dirpath, name)
            relpath = os.path.relpath(path, top)
            if os.path.islink(path) or not os.path.isfile(path):
                die("install --from-bundle: refusing: %s is not a regular file" % relpath)
            if relpath != MANIFEST:
                present.add(relpath)
    for relpath in sorted(present - set(listed)):
        die("install --from-bundle: refusing: %s is not in %s (added after the bundle was "
            "made)" % (relpath, MANIFEST))
    for relpath, want in sorted(listed.items()):
        path = os.path.join(top, relpath)
        if relpath not in present:
            die("install --from-bundle: refusing: %s is missing" % relpath)
        got = sha256_file(path)
        if got != want:
            die("install --from-bundle: refusing: %s changed (sha256 %s, %s says %s)"
                % (relpath, got, MANIFEST, want))
    return sorted(listed)


def check_command(top, wrapper=()):
    """The bundle's own mesa-fork-check, run from top (under wrapper, a
    command that runs the bundle's architecture here)."""
    env = dict(os.environ)
    if wrapper:
        env["MESA_FORK_WRAPPER"] = " ".join(shlex.quote(w) for w in wrapper)
    return subprocess.run([os.path.join(top, "bin", "mesa-fork-check")], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)


def read_field(top, name):
    try:
        with open(os.path.join(top, "share", "mesa-fork", name)) as f:
            return f.read().strip()
    except OSError as e:
        die("install --from-bundle: not a bundle: %s: %s" % (e.filename, e.strerror))


def from_bundle_verb(fork, path, prefix=None, no_demo=False):
    """install --from-bundle FILE|DIR: copies the bundle into a directory of
    its own (a directory given is copied first, so that what is checked is
    what is installed), checks every sha256 of its MANIFEST, copies it into
    the prefix of its architecture (or --prefix), writes env.sh with the
    prefix's absolute paths, and runs its mesa-fork-check."""
    path = os.path.abspath(path)
    with tempfile.TemporaryDirectory(prefix="mesa-fork-bundle-") as tmp:
        if os.path.isdir(path):
            top = os.path.join(tmp, "bundle")
            with step("copy %s" % path):
                try:
                    shutil.copytree(path, top, symlinks=True)
                except (OSError, shutil.Error) as e:
                    die("install --from-bundle: cannot copy %s: %s" % (path, e))
        elif os.path.isfile(path):
            with step("unpack %s" % path):
                top = safe_extract(path, tmp)
        else:
            die("install --from-bundle: %s: no such file or directory" % path)
        with step("check the sha256 of every file in %s" % MANIFEST):
            files = verify(top)
        print("install --from-bundle: %d files match %s" % (len(files), MANIFEST))
        arch, tag = read_field(top, "arch"), read_field(top, "release")
        if arch not in [fork.host_arch] + cross_arches(fork.conf):
            die("install --from-bundle: the bundle is for %s, which this checkout does not "
                "build" % arch)
        f = fork.for_arch(arch)
        if not names_release(f.conf, "(%s)" % tag):
            die("install --from-bundle: the bundle is %s, not %s of this checkout: 'run' "
                "would refuse its drivers" % (tag, f.release))
        dest = f.prefix(prefix)
        install.check_prefix(dest)
        other = install.prefix_arch(dest)
        if other and other != arch:
            die("install --from-bundle: %s holds the %s build; the bundle is %s's: choose "
                "another --prefix" % (dest, other, arch))
        with step("install %s into %s" % (tag, dest)):
            for relpath in files:
                if relpath in (MANIFEST, SOURCES):
                    continue
                install.install_file(os.path.join(top, relpath), os.path.join(dest, relpath))
            # Where it came from, next to the release (a later install
            # removes them).
            for name in (MANIFEST, SOURCES):
                install.install_file(os.path.join(top, name),
                                     os.path.join(dest, install.BUNDLE_DIR, name))
            # The bundle's env.sh finds itself in bash and zsh; the prefix's
            # names its paths, for every shell, as install's does.
            files_var = ":".join(install.icd_json(dest, d) for d in f.conf["drivers"])
            for add in (False, True):
                write_if_changed(os.path.join(dest, "share", "mesa-fork",
                                              "env-add.sh" if add else "env.sh"),
                                 install.env_script(dest, files_var, add=add))
            install.remove_old_manifests(dest)
        if prefix:
            f.remember_prefix(dest)
        print("install --from-bundle: installed into %s; '. %s' uses it" % (
            dest, shlex.quote(os.path.join(dest, "share", "mesa-fork", "env.sh"))))
        if no_demo:
            return
        wrapper = f.exe_wrapper if f.cross and os.path.isdir(f.sysroot) else None
        if f.cross and wrapper is None:
            print("install --from-bundle: not shown working: %s programs run here only "
                  "under qemu-user with the sysroot 'install --arch %s' makes" % (arch, arch))
            return
        r = check_command(dest, wrapper or ())
        print("\n".join("  " + line for line in r.stdout.splitlines()))
        if r.returncode != 0:
            die("install --from-bundle: mesa-fork-check failed in %s" % dest)


def install_verb(fork, from_bundle=None, prefix=None, no_demo=False, **build_opts):
    """Install the drivers as an alternate ICD into a prefix and show them
    working: built here, or with --from-bundle, from a bundle."""
    if from_bundle is None:
        return install.install(fork, prefix=prefix, no_demo=no_demo, **build_opts)
    given = sorted("--" + k.replace("_", "-") for k, v in build_opts.items() if v)
    if given:
        die("install --from-bundle installs what the bundle holds, for its architecture; "
            "it takes no %s" % ", ".join(given))
    return from_bundle_verb(fork, from_bundle, prefix, no_demo)
