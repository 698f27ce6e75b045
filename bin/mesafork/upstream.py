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
  library than sid's.
"""

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import urllib.parse

from . import apt, cross
from .config import multiarch
from .install import shim_env_pairs, shim_lib
from .proc import die, rel, run
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
    qemu-user with the root as the library prefix. The fork's prefix, the
    models and every path outside the root are the host's own."""

    def __init__(self, fork):
        self.fork = fork
        self.work = fork.work
        self.arch = fork.arch
        self.root = os.path.join(fork.work, "chroot", "sid-" + fork.arch)
        self.version = self.sha256 = None

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

    def run_in(self, cmd, env=None, quiet=False, capture=False, timeout=None):
        full_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
        full_env.update(env or {})
        if capture:
            return subprocess.run(self.command(cmd), env=full_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, errors="replace",
                                  timeout=timeout)
        run(self.command(cmd), env=full_env, quiet=quiet)
