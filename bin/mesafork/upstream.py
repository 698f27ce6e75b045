# SPDX-License-Identifier: MIT
"""The yardstick: the newest Mesa Debian ships, run on the fork's drm-shims.

Users who do not install the fork run their distribution's Mesa. The
newest Debian has is sid's binary mesa-vulkan-drivers (sid serves the
binaries but not the source package, so it is never rebuilt here). It is
taken as a user gets it:

- Which version: a private apt state for sid and the architecture
  (apt.private_state, .work/apt/sid-ARCH), updated on every use, says what
  sid serves now and the sha256 its index gives the .deb. No version is
  pinned: when sid moves on, the next run uses and prints the new one.
- Where it runs: a root of sid packages for the architecture,
  .work/chroot/sid-ARCH, unpacked by mmdebstrap's extract variant (nothing
  executes, so no binfmt is needed; it runs as root today) with exactly
  that version, its dependencies, the Vulkan loader, Khronos' validation
  layer and llama.cpp. apt checks every .deb against the signed index as
  it downloads; the root keeps the downloaded .debs (the cache), and on
  every use ensure() checks the sha256 of the Mesa .deb the root was
  unpacked from against the index. A new version makes a new root.
- How it runs: under qemu-user with the root as its library prefix, this
  machine's architecture included, so that sid's C library and Vulkan
  loader are the ones sid's Mesa was built for. The fork's programs (the
  clients, the drm-shims) run there unchanged: they need an older C
  library than sid's. `bench shaders` runs the fork's own columns, whose
  compile times it compares, natively instead where the root is this
  machine's architecture: by the root's own dynamic loader
  (SidRoot.native_command).
"""

import contextlib
import glob
import os
import re
import shutil
import socket
import subprocess
import urllib.parse

from . import apt, cross
from .config import host_arch, multiarch
from .install import shim_env_pairs, shim_lib
from .proc import die, readelf, rel, run
from .sources import sha256

# llama.cpp and its Vulkan backend and gguf's Python module (bench), the
# Vulkan loader and the validation layer (tests, bench sync) and the
# libraries the fork's own drivers link, besides sid's Mesa.
PACKAGES = ["llama.cpp-tools", "llama.cpp-tests", "libggml0-backend-vulkan", "python3-gguf",
            "libdrm2", "libexpat1", "libzstd1", "libvulkan1", "vulkan-validationlayers"]

# What a Mesa driver of the fork is called in sid's package: the ICD file
# usr/share/vulkan/icd.d/<name>_icd.json.
ICD_NAMES = {"asahi": "asahi", "panfrost": "panfrost", "intel": "intel"}


def _conf(fork):
    return fork.conf["upstream"]


def qemu_for(fork):
    """The qemu-user program that runs fork.arch's programs."""
    pairs = dict(p.split(":", 1) for p in _conf(fork)["qemu"].split())
    if fork.arch not in pairs:
        die("config/fork.ini [upstream] qemu names no qemu-user program for %s" % fork.arch)
    return pairs[fork.arch]


def missing_tools(fork):
    return [t for t in (qemu_for(fork), "mmdebstrap", "apt-get") if not shutil.which(t)]


class Unavailable(SystemExit):
    """sid's Mesa cannot be had for a reason of the run's own nature, not a
    fault: the archive cannot be reached (and no root was made before), sid
    does not serve the architecture, or the root would have to be made and
    this run is not root's. cause is the tests' name for it
    (tests/forklib.py SKIP_CAUSES). Every other failure to make or check
    the root (a tool missing, apt failing against an archive that
    answers, mmdebstrap failing, a .deb whose sha256 is not the index's)
    stays a plain die(): the tests count it as failed."""

    def __init__(self, cause, reason):
        # Uncaught, Python prints the message and exits with 1, as die().
        super().__init__("mesa-fork: error: %s" % reason)
        self.cause, self.reason = cause, reason


class Index:
    """What sid's index says of the Mesa package for one architecture."""

    def __init__(self, fields):
        self.version = fields["Version"]
        self.sha256 = fields["SHA256"]
        self.filename = fields["Filename"]


def reachable(uri, timeout=10):
    """Whether the archive at uri answers a connection at all (a local
    path: whether it exists)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        return os.path.exists(parts.path or uri)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def index(fork):
    """sid's Mesa for fork.arch as the archive's index has it now, or None
    when the archive cannot be reached. apt failing to update the index
    from an archive that answers (a signature apt does not trust, a
    mirror mid-sync, a lock held by another run) is a fault: dies with
    apt's first error."""
    c = _conf(fork)
    uri, _ = apt.debian_mirror(apt.os_codename())
    try:
        _, opts = apt.private_state(fork.work, c["suite"], apt.os_codename(), fork.arch,
                                    required=False)
    except apt.StateError as e:
        if not reachable(uri):
            return None
        die("apt could not update %s's index from %s, which answers: %s"
            % (c["suite"], uri, e))
    fields = apt.index_fields(opts, "%s:%s" % (c["package"], fork.arch))
    if not fields.get("Version") and not fields.get("SHA256"):
        raise Unavailable("sid-unreachable", "%s's index has no %s for %s"
                          % (c["suite"], c["package"], fork.arch))
    if not fields.get("Version") or not fields.get("SHA256"):
        die("%s's index lists %s for %s without both a version and a sha256: %r"
            % (c["suite"], c["package"], fork.arch, fields))
    return Index(fields)


def verify_cached_deb(root, package, arch, entry):
    """The sha256 of the .deb of package entry.version in root's apt cache
    (what the root was unpacked from), which must be the index's; dies
    otherwise."""
    debs = glob.glob(os.path.join(root, "var", "cache", "apt", "archives",
                                  "%s_*_%s.deb" % (package, arch)))
    debs = [d for d in debs if deb_version(d) == entry.version]
    if not debs:
        die("%s: no %s %s .deb in its apt cache" % (rel(root), package, entry.version))
    got = sha256(debs[0])
    if got != entry.sha256:
        die("%s: sha256 %s, but the index says %s; the root will be made anew"
            % (rel(debs[0]), got, entry.sha256))
    return got


def deb_version(name):
    """The version in a .deb file name as apt saves it (package_version_arch.deb,
    an epoch's colon written %3a)."""
    return os.path.basename(name)[:-len(".deb")].split("_")[1].replace("%3a", ":")


def dpkg_status_version(root, package):
    """The version of package in root's dpkg status (a chroot whose
    packages dpkg installed), or None."""
    try:
        with open(os.path.join(root, "var", "lib", "dpkg", "status")) as f:
            stanzas = f.read().split("\n\n")
    except OSError:
        return None
    for st in stanzas:
        fields = dict(l.split(": ", 1) for l in st.splitlines() if ": " in l and l[0] != " ")
        if fields.get("Package") == package and "installed" in fields.get("Status", ""):
            return fields.get("Version")
    return None


class SidRoot:
    """sid's packages for fork.arch, sid's Mesa among them, run under
    qemu-user with the root as the library prefix (or natively by the
    root's loader, where asked and the root is this machine's). The fork's prefix, the
    models and every path outside the root are the host's own."""

    def __init__(self, fork):
        self.fork = fork
        self.work = fork.work
        self.arch = fork.arch
        self.root = os.path.join(fork.work, "chroot", "sid-" + fork.arch)
        self.version = self.sha256 = None
        # native_command()'s loader and library path per program
        self._native = {}

    def _info_path(self):
        return os.path.join(self.root, ".mesa-fork-upstream")

    def libexec(self, rel_path):
        return os.path.join("/usr/libexec", multiarch(self.arch), rel_path)

    def ensure(self):
        """Makes the root hold the Mesa sid serves now, checked against the
        index. Offline, a root made before is used, and said so."""
        c = _conf(self.fork)
        missing = missing_tools(self.fork)
        if missing:
            die("running Debian %s's packages for %s needs %s: run 'bin/mesa-fork deps' "
                "as root once" % (c["suite"], self.arch, ", ".join(missing)))
        entry = index(self.fork)
        if entry is None:
            if not os.path.exists(self._info_path()):
                raise Unavailable("sid-unreachable", "cannot reach the Debian archive to learn "
                                  "which %s %s serves, and no root was made before (%s)"
                                  % (c["package"], c["suite"], rel(self.root)))
            with open(self._info_path()) as f:
                self.version, self.sha256 = f.read().split()
            # At least the .deb the root came from is the one verified then.
            verify_cached_deb(self.root, c["package"], self.arch, Index(
                {"Version": self.version, "SHA256": self.sha256, "Filename": ""}))
            print("upstream: warning: apt could not update %s's index (above); using %s %s "
                  "of the root made before, checked against the index of then, not today's"
                  % (c["suite"], c["package"], self.version))
            return
        # The record of a verified root goes first: written again only
        # once this root is verified, so a failure below leaves none.
        if os.path.exists(self._info_path()):
            os.unlink(self._info_path())
        pkgs = PACKAGES + ["%s=%s" % (c["package"], entry.version)]
        if os.geteuid() != 0 and not cross.root_ready(self.fork, c["suite"], pkgs, self.root):
            raise Unavailable("root", "unpacking Debian %s's %s %s for %s with mmdebstrap "
                              "needs root here: run this command with sudo"
                              % (c["suite"], c["package"], entry.version, self.arch))
        # A snapshot mirror serves an expired sid Release file; accept it.
        cross.extract_root(self.fork, c["suite"], pkgs, self.root,
                           "root with %s %s and llama.cpp" % (c["package"], entry.version),
                           apt_options=['Acquire::Check-Valid-Until "false"'], keep_apt=True)
        try:
            got = verify_cached_deb(self.root, c["package"], self.arch, entry)
        except SystemExit:
            os.unlink(os.path.join(self.root, ".mesa-fork-ready"))
            raise
        self.version, self.sha256 = entry.version, got
        with open(self._info_path(), "w") as f:
            f.write("%s %s\n" % (self.version, self.sha256))

    def describe(self):
        c = _conf(self.fork)
        return ("Debian %s %s %s (%s), .deb sha256 %s... as in the archive's index"
                % (c["suite"], c["package"], self.version, self.arch, self.sha256[:16]))

    def package_version(self, package):
        """The version of one of the root's packages, from its apt cache."""
        debs = glob.glob(os.path.join(self.root, "var", "cache", "apt", "archives",
                                      "%s_*.deb" % package))
        return deb_version(debs[0]) if debs else None

    def icd(self, driver):
        """The ICD file of sid's `driver`, as a host path."""
        return os.path.join(self.root, "usr", "share", "vulkan", "icd.d",
                            "%s_icd.json" % ICD_NAMES[driver])

    def shim_env(self, prefix, conf, driver, **extra):
        """The environment that runs a program on sid's `driver` over the
        fork's drm-shim (from prefix). The loader is pointed at the root's
        files by host path: qemu-user's -L does not redirect every call the
        loader makes to look for them."""
        share = os.path.join(self.root, "usr", "share", "vulkan")
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ.get("HOME", "/root"),
               "VK_DRIVER_FILES": self.icd(driver),
               "VK_LAYER_PATH": os.path.join(share, "explicit_layer.d"),
               "VK_IMPLICIT_LAYER_PATH": os.path.join(share, "implicit_layer.d"),
               "LD_PRELOAD": shim_lib(prefix, conf, driver),
               # Nothing shared with other Mesa builds' caches in HOME.
               "MESA_SHADER_CACHE_DISABLE": "true"}
        env.update(shim_env_pairs(conf, driver))
        env.update({k: str(v) for k, v in extra.items()})
        return env

    # The interface bench's llama.cpp runs use (the sid chroot has it too).
    def mounted(self):
        return contextlib.nullcontext(self)

    def command(self, cmd):
        """cmd under qemu-user with this root as its library prefix: a bare
        name is the root's /usr/bin program, an absolute path the root's
        file if it has one (else the host's: the fork's prefix)."""
        exe = cmd[0] if cmd[0].startswith("/") else "/usr/bin/" + cmd[0]
        inside = os.path.join(self.root, exe.lstrip("/"))
        return [qemu_for(self.fork), "-L", self.root,
                inside if os.path.exists(inside) else exe] + list(cmd[1:])

    def can_run_natively(self):
        """Whether the root's programs can run on this machine without
        qemu-user: the root is this machine's architecture."""
        return self.arch == host_arch()

    def in_root(self, path):
        """path (absolute, as the root's programs see it) as a host path,
        its symbolic links followed inside the root: an absolute link
        (/lib64/ld-linux-x86-64.so.2 -> /usr/lib/...) is the root's file,
        not the host's."""
        parts, done, hops = [p for p in path.split("/") if p], [], 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                done = done[:-1]
                continue
            if part == ".":
                continue
            host = os.path.join(self.root, *done, part)
            if os.path.islink(host):
                hops += 1
                if hops > 40:
                    die("%s: too many symbolic links in %s" % (rel(self.root), path))
                target = os.readlink(host)
                parts = [p for p in target.split("/") if p] + parts
                if target.startswith("/"):
                    done = []
                continue
            done.append(part)
        return os.path.join(self.root, *done)

    def _elf(self, path, option):
        if not shutil.which("readelf"):
            die("running %s's programs natively needs readelf (binutils, which the build's "
                "compilers bring): run 'bin/mesa-fork deps' as root once" % self.arch)
        r = readelf([option], path)
        if r.returncode != 0:
            die("readelf %s %s failed: %s" % (option, rel(path), r.stderr.strip()))
        return r.stdout

    def native_command(self, cmd):
        """cmd run by the root's own dynamic loader, natively: the root's C
        library and libraries, as under qemu-user, at the machine's speed.
        The loader is given the root's library directories and the
        RUNPATHs of the program and of the libraries it links (their
        absolute directories taken inside the root), and ignores the
        host's ld.so.cache; `ld.so --list` must then find every library it
        links inside the root, or this dies. A bare name is the root's
        /usr/bin program; an absolute path the root's file where it has
        one, else the host's (the fork's own programs). What the program
        opens later by absolute path is the host's, where qemu-user's -L
        would look in the root first: run_in() points the Vulkan loader's
        layer search at the root and starts in ggml's backend directory,
        and `bench shaders` checks where ggml loaded its backends from."""
        key = tuple(cmd[:1])
        if key not in self._native:
            self._native[key] = self._native_prefix(cmd[0])
        return self._native[key] + list(cmd[1:])

    def _native_prefix(self, name):
        exe = self.in_root(name if name.startswith("/") else "/usr/bin/" + name)
        if name.startswith("/") and not os.path.exists(exe):
            exe = name
        interp = re.search(r"\[Requesting program interpreter: (\S+)\]",
                           self._elf(exe, "-l"))
        if not interp:
            die("%s has no program interpreter: not a dynamically linked program"
                % rel(exe))
        ma = multiarch(self.arch)
        dirs = [self.in_root(d) for d in ("/usr/lib/" + ma, "/usr/lib")]
        seen, todo = set(), [exe]
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            dyn = self._elf(f, "-d")
            for paths in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]",
                                    dyn):
                for d in paths.split(":"):
                    d = d.replace("$ORIGIN", os.path.dirname(f)) if "$ORIGIN" in d \
                        else self.in_root(d)
                    if d not in dirs:
                        dirs.append(d)
            for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dyn):
                found = next((os.path.join(d, lib) for d in dirs
                              if os.path.exists(os.path.join(d, lib))), None)
                if found:
                    todo.append(os.path.realpath(found))
        loader = [self.in_root(interp.group(1)), "--inhibit-cache", "--library-path",
                  ":".join(dirs)]
        r = subprocess.run(loader + ["--list", exe], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace",
                           env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
        inside = os.path.realpath(self.root) + os.sep
        outside = [l.strip() for l in r.stdout.splitlines() if "=>" in l and not os.path.realpath(
            l.split("=>", 1)[1].split("(")[0].strip()).startswith(inside)]
        if r.returncode != 0 or outside:
            die("%s: the root's loader does not find every library of %s inside %s:\n%s"
                % (self.arch, name, rel(self.root), "\n".join(outside) or r.stdout[-2000:]))
        return loader + ["--argv0", name, exe]

    def ggml_backend_dir(self):
        """Where sid's ggml loads its backends from (GGML_BACKEND_DIR, a
        path built into libggml: /usr/lib/MULTIARCH/ggml/backendsN), as a
        host path."""
        found = sorted(glob.glob(os.path.join(self.in_root("/usr/lib/" + multiarch(self.arch)),
                                              "ggml", "backends*")))
        if len(found) != 1:
            die("%s: expected one ggml backend directory, found %s"
                % (rel(self.root), ", ".join(found) or "none"))
        return found[0]

    def run_in(self, cmd, env=None, quiet=False, capture=False, timeout=None, native=False):
        """cmd with env (over a bare PATH and HOME), under qemu-user, or
        with native (where can_run_natively()) by the root's own loader.
        Natively, the Vulkan loader looks for layers in the root's
        directories unless env says where (as under qemu-user, where the
        root's are found first), and the run starts in the root's ggml
        backend directory: ggml looks for its backends in its built-in
        directory, not the host's, then in the working directory."""
        full_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
        if native:
            share = os.path.join(self.root, "usr", "share", "vulkan")
            full_env.update({"VK_LAYER_PATH": os.path.join(share, "explicit_layer.d"),
                             "VK_IMPLICIT_LAYER_PATH": os.path.join(share, "implicit_layer.d")})
        full_env.update(env or {})
        if native and not self.can_run_natively():
            die("%s's programs cannot run natively on %s" % (self.arch, host_arch()))
        command = self.native_command(cmd) if native else self.command(cmd)
        cwd = self.ggml_backend_dir() if native else None
        if capture:
            return subprocess.run(command, env=full_env, cwd=cwd, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, errors="replace",
                                  timeout=timeout)
        run(command, cwd=cwd, env=full_env, quiet=quiet)
