# SPDX-License-Identifier: MIT
"""`mesa-fork test`: tests/run.py, which runs everything CI runs and ends
with its elapsed time and the line "N passed, N failed"."""

import os
import subprocess
import sys

from . import build, upstream
from .config import cross_arches, parse_arches
from .install import prefix_arch


def installed_arches(fork):
    """This machine's architecture and every cross architecture whose build
    `install --arch` put into its default prefix."""
    arches = [fork.host_arch]
    for a in cross_arches(fork.conf):
        if a != fork.host_arch and prefix_arch(fork.for_arch(a).default_prefix) == a:
            arches.append(a)
    return arches


# What prepare_upstream verified in this run, per architecture
# ("ARCH=VERSION ..."): tests/test_upstream.py runs only that.
UPSTREAM_ENV = "MESA_FORK_UPSTREAM_VERIFIED"


def prepare_upstream(fork, arches):
    """The root with the Mesa sid serves now, for each architecture under
    test (tests/test_upstream.py runs it); returns "ARCH=VERSION ..." of
    those verified. A failure is printed, not fatal: those tests then fail
    and say where to look, and the rest still run."""
    verified = []
    for a in arches:
        root = upstream.SidRoot(fork.for_arch(a))
        try:
            root.ensure()
        except (SystemExit, OSError) as e:
            print("test: sid's Mesa for %s is not ready (%s), so tests/test_upstream.py will "
                  "fail" % (a, e if isinstance(e, OSError) else "the error above"))
            continue
        verified.append("%s=%s" % (a, root.version))
        print("test: upstream for %s: %s" % (a, root.describe()))
    return " ".join(verified)


def prepare_checks(fork):
    """The assertion build of panvk two tests need (build.build_checks). A
    failure is printed, not fatal: those tests then fail."""
    host = fork.for_arch(fork.host_arch)
    try:
        build.build_checks(host)
    except (SystemExit, OSError) as e:
        # Nothing of an earlier build may stand in for this one.
        for p in host.conf["drivers"][host.conf["meson"]["checks_driver"]].split():
            path = os.path.join(build.checks_build(host), p)
            if os.path.exists(path):
                os.unlink(path)
        print("test: the assertion build of %s failed (%s), so the tests that need it will "
              "fail" % (fork.conf["meson"]["checks_driver"],
                        e if isinstance(e, OSError) else "the error above"))


def test(fork, pattern=None, arch=None):
    """Everything CI runs: series check, Mesa's unit suites, our end-to-end tests,
    for every architecture installed (a cross build's under qemu-user).
    Returns the runner's exit status."""
    arches = parse_arches(fork, arch) if arch else installed_arches(fork)
    verified = prepare_upstream(fork, arches)
    prepare_checks(fork)
    cmd = [sys.executable, os.path.join(fork.top, "tests", "run.py")]
    if pattern:
        cmd += ["-k", pattern]
    env = dict(os.environ, MESA_FORK_WORK=fork.work, MESA_FORK_TEST_ARCHES=" ".join(arches))
    env[UPSTREAM_ENV] = verified
    return subprocess.run(cmd, env=env).returncode
