# SPDX-License-Identifier: MIT
"""Shared helpers for mesa-fork's end-to-end tests: paths, environments for
running a client on one driver's drm-shim, and process helpers."""

import contextlib
import os
import re
import subprocess
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "bin"))

from mesafork import build, config as fork_config, cross, install, sources, testing  # noqa: E402

WORK = os.environ.get("MESA_FORK_WORK", os.path.join(TOP, ".work"))
MESA_BUILD = os.path.join(WORK, "build", "mesa")
CLIENT_BUILD = os.path.join(WORK, "build", "client")
PREFIX = os.environ.get("MESA_FORK_PREFIX", os.path.join(WORK, "prefix"))
CLI = os.path.join(TOP, "bin", "mesa-fork")
# The architectures `mesa-fork test` tests (tests/run.py sets it).
ARCHES_ENV = "MESA_FORK_TEST_ARCHES"


def config():
    return fork_config.load(TOP)


# The base, as config/fork.ini owns it: Mesa's version (25.0.7) and
# Debian's package version (25.0.7-2+deb13u1). Tests name them through
# these, never as literals.
MESA_VERSION = config()["base"]["upstream_version"]
DEBIAN_VERSION = config()["base"]["version"]


def build_env():
    return build.build_env(TOP)


class Target:
    """One architecture's installed build: its prefix, its build trees, and
    how its programs run here (natively, or a cross build's under qemu-user
    with its sysroot)."""

    def __init__(self, arch=None):
        self.fork = fork_config.Fork(TOP, WORK, arch)
        self.arch = self.fork.arch
        self.cross = self.fork.cross
        self.prefix = PREFIX if not self.cross else self.fork.default_prefix
        self.mesa_build = self.fork.build
        self.client_build = self.fork.client_build
        self.conf = self.fork.conf

    def installed(self):
        return install.prefix_arch(self.prefix) == self.arch or (
            not self.cross and os.path.exists(os.path.join(self.prefix, "bin")))

    def shim_env(self, driver, **extra):
        """Environment that runs a client on the installed fork, on DRIVER's shim."""
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("VK_", "ASAHI_", "PAN_", "INTEL_", "HK_", "PANVK_",
                                     "ANV_"))}
        base.pop("LD_PRELOAD", None)
        env = install.fork_env(self.prefix, self.conf, shim=driver, base=base)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def bin_path(self, name):
        return os.path.join(self.prefix, "bin", name)

    def command(self, cmd):
        """cmd as it runs here: the target's programs under qemu-user."""
        return cross.wrap(self.fork, cmd, self.prefix)

    def run(self, cmd, env=None, timeout=300):
        # qemu-user translates every instruction: give it more time.
        return run(self.command(cmd), env=env, timeout=timeout * (4 if self.cross else 1))

    def list_devices(self, env):
        return install.list_devices(self.prefix, env, self.fork.exe_wrapper)


HOST = Target()


def checks_env(**extra):
    """Environment that runs a client on the assertion build of panvk and
    its drm-shim (.work/build/mesa-checks, which `mesa-fork test` makes:
    config/fork.ini [meson] checks_options), not on the installed,
    optimised one."""
    conf = HOST.conf
    drv = conf["meson"]["checks_driver"]
    lib, shim = [os.path.join(build.checks_build(HOST.fork), p)
                 for p in conf["drivers"][drv].split()]
    for f in (lib, shim):
        if not os.path.exists(f):
            raise AssertionError("no %s: 'bin/mesa-fork test' builds it first" % f)
    # Built from the tree the installed driver was (driverInfo's git-<sha>),
    # not left over from an earlier one.
    installed = os.path.join(HOST.prefix, "lib", "mesa-fork", os.path.basename(lib))
    shas = [set(re.findall(rb"git-[0-9a-f]{7,}", open(f, "rb").read())) for f in (lib, installed)]
    if not shas[0] or shas[0] != shas[1]:
        raise AssertionError("%s is of %s, the installed %s of %s: the tree changed since "
                             "'install'; run 'bin/mesa-fork install', then 'test'"
                             % (lib, sorted(shas[0]), installed, sorted(shas[1])))
    env = HOST.shim_env(drv, **extra)
    tmp = os.path.join(WORK, "tmp")
    os.makedirs(tmp, exist_ok=True)
    icd = os.path.join(tmp, "checks_%s_icd.json" % drv)
    with open(icd, "w") as f:
        f.write('{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", '
                '"api_version": "1.3.0"}}\n' % lib)
    env["VK_DRIVER_FILES"] = env["VK_ICD_FILENAMES"] = icd
    env["LD_PRELOAD"] = shim
    return env


def tested_arches():
    """The architectures under test: what tests/run.py was asked for, else
    this machine's."""
    return os.environ.get(ARCHES_ENV, HOST.arch).split()


def target(arch):
    """The Target of arch, or an optional skip when this run does not test
    it (another verb makes it: bin/mesa-fork install --arch ARCH)."""
    if arch not in tested_arches():
        skip_optional("arch", "%s is not under test: 'bin/mesa-fork install --arch %s' builds it, "
                      "then 'bin/mesa-fork test' tests it" % (arch, arch))
    t = Target(arch)
    if not t.installed():
        raise AssertionError("%s is under test but not installed in %s" % (arch, t.prefix))
    return t


def shim_env(driver, **extra):
    """Environment that runs a client on the installed fork, on DRIVER's shim."""
    return HOST.shim_env(driver, **extra)


def bin_path(name):
    return HOST.bin_path(name)


def hide_gpus(cmd):
    """cmd as it runs with no GPU visible: this machine's /dev/dri covered by
    an empty tmpfs in a mount namespace of its own (a user namespace too
    when not root), so that a test of what happens without hardware gives
    the same result on a machine that has some. Unchanged on a machine
    without /dev/dri. Skipped, as optional, where no namespace can be
    made."""
    if not os.path.isdir("/dev/dri"):
        return list(cmd)
    ns = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
    probe = subprocess.run(ns + ["true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        skip_optional("namespace", "this machine has a GPU (/dev/dri) and no mount namespace to hide it in")
    return ns + ["sh", "-c", 'mount -t tmpfs none /dev/dri && exec "$@"', "sh"] + list(cmd)


def run(cmd, env=None, timeout=300):
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def list_devices(env):
    """The devices mesa-fork-vkcheck --list sees, as `mesa-fork run` lists them."""
    return HOST.list_devices(env)


def fork_tag():
    """What driverInfo ends with: the release and the base the work
    directory's build is made from (Debian's, or the release tarball)."""
    upstream = sources.uses_upstream(fork_config.Fork(TOP, WORK))
    return "(%s)" % fork_config.driver_info_tag(config(), upstream)


# tests/run.py counts a skipped test as a failure, except one whose cause
# is one of these: what this run cannot have by its nature. Each skip names
# its cause (a key below) and its detail; a cause not listed here, or a
# plain unittest skip, is a failure. The runner counts the skips by cause
# on the line before its last.
OPTIONAL_SKIP = "optional, not run: "
SKIP_CAUSES = {
    "root": "needs root, and this run is a user's",
    "arch": "an architecture this run does not test (mesa-fork test --arch)",
    "host": "what this machine's own architecture rules out",
    "namespace": "a GPU to hide and no mount namespace to hide it in",
    "sid-unreachable": "Debian sid's archive cannot be reached, or does not serve the architecture",
    "sid-moved": "a finding: sid serves another Mesa than config/fork.ini records",
    "mesa-disabled": "gtest cases Mesa's own source disables (DISABLED_), which no run runs",
}


def skip_optional(cause, detail):
    """Skip a test this run cannot have by its nature (cause, a key of
    SKIP_CAUSES); the runner reports it as skipped, never as passed."""
    if cause not in SKIP_CAUSES:
        raise AssertionError("a skip must name one of the causes %s, not %r (%s)"
                             % (", ".join(sorted(SKIP_CAUSES)), cause, detail))
    raise unittest.SkipTest("%s[%s] %s" % (OPTIONAL_SKIP, cause, detail))


def parse_skip(reason):
    """(cause, detail) of a skip reason skip_optional made, else None."""
    m = re.match(re.escape(OPTIONAL_SKIP) + r"\[([a-z-]+)\] (.*)\Z", reason, re.S)
    if not m or m.group(1) not in SKIP_CAUSES:
        return None
    return m.group(1), m.group(2)


class Yardstick:
    """Debian sid's Mesa for one architecture as `bin/mesa-fork test` found
    it before the tests (testing.prepare_upstream), and the one policy for
    the checks that run it:

    - sid's Mesa cannot be had for a reason of the run's nature (the
      archive out of reach, an architecture sid does not serve, no root to
      make the root with): the check is an optional skip naming the cause,
      never a pass;
    - it could not be prepared for any other reason (a tool missing,
      mmdebstrap failing, a checksum that disagrees with the index), or the
      tests run without `bin/mesa-fork test` preparing it: the check fails;
    - sid serves the version config/fork.ini [upstream] recorded names:
      the check is strict, a failure is a failure;
    - sid serves another version: a passing check is a pass, a failing one
      an optional skip that reports what differed (a finding), neither a
      pass nor a failure: a new upload may differ for reasons of its own.

    Checks about our own harness (that the root holds sid's driver, not
    the fork's) do not go through check(): they stay strict."""

    def __init__(self, arch, version=None, recorded=None, unavailable=None, cause=None,
                 broken=None):
        self.arch, self.version, self.recorded = arch, version, recorded
        self.unavailable, self.cause, self.broken = unavailable, cause, broken
        if unavailable and cause not in SKIP_CAUSES:
            raise AssertionError("sid's Mesa for %s is unavailable for a cause that is no "
                                 "skip's: %r (%s)" % (arch, cause, unavailable))

    @classmethod
    def from_env(cls, arch, environ=None, recorded=None):
        """What the environment tests/run.py got from `bin/mesa-fork test`
        says of arch; recorded defaults to config/fork.ini's."""
        environ = os.environ if environ is None else environ
        if recorded is None:
            recorded = testing.recorded_upstream(config())
        if testing.UPSTREAM_ENV not in environ:
            return cls(arch, recorded=recorded, broken=(
                "run through 'bin/mesa-fork test' (-k PATTERN for a few), which makes and "
                "checks sid's roots first (%s unset)" % testing.UPSTREAM_ENV))

        def by_arch(name):
            return dict(l.split(": ", 1) for l in environ.get(name, "").splitlines()
                        if ": " in l)
        verified = dict(v.split("=", 1) for v in environ[testing.UPSTREAM_ENV].split())
        missing, broken = by_arch(testing.UNAVAILABLE_ENV), by_arch(testing.BROKEN_ENV)
        if arch in verified:
            return cls(arch, verified[arch], recorded)
        if arch in missing:
            m = re.match(r"\[([a-z-]+)\] (.*)\Z", missing[arch], re.S)
            if not m:
                raise AssertionError("%s=%r names no cause for %s" % (
                    testing.UNAVAILABLE_ENV, environ[testing.UNAVAILABLE_ENV], arch))
            return cls(arch, recorded=recorded, unavailable=m.group(2), cause=m.group(1))
        if arch in broken:
            return cls(arch, recorded=recorded, broken=broken[arch])
        raise AssertionError("'bin/mesa-fork test' said nothing of sid's Mesa for %s (%s=%r, "
                             "%s=%r)" % (arch, testing.UPSTREAM_ENV,
                                         environ[testing.UPSTREAM_ENV], testing.UNAVAILABLE_ENV,
                                         environ.get(testing.UNAVAILABLE_ENV)))

    def moved(self):
        return self.version != self.recorded

    def require(self):
        """A failure when preparing sid's Mesa failed, an optional skip
        with its cause when this run cannot have it, else nothing."""
        if self.broken:
            raise AssertionError("sid's Mesa for %s could not be prepared, a failure of the "
                                 "run, not a skip: %s" % (self.arch, self.broken))
        if self.unavailable:
            skip_optional(self.cause, "sid's Mesa for %s cannot be had in this run: %s"
                          % (self.arch, self.unavailable))

    @contextlib.contextmanager
    def check(self):
        """A check of sid's Mesa against the fork's shim, under the policy
        above (a failed assertion, or sid's program hanging past its
        timeout)."""
        self.require()
        try:
            yield
        except (AssertionError, subprocess.TimeoutExpired) as e:
            if not self.moved():
                raise
            # One line that says it all, what differed in full below it.
            detail = str(e).strip() or type(e).__name__
            first, _, rest = detail.partition("\n")
            if len(first) > 300:
                first, rest = first[:300] + " [...]", detail
            skip_optional("sid-moved", "finding: sid's Mesa for %s is now %s, recorded %s: %s; check the "
                          "shim against it, then record %s in [upstream] recorded of "
                          "config/fork.ini%s" % (self.arch, self.version, self.recorded,
                                                 first, self.version,
                                                 "\n" + rest[:3000] if rest else ""))
