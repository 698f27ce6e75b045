# SPDX-License-Identifier: MIT
"""`mesa-fork test`: tests/run.py, which runs everything CI runs and ends
with its elapsed time and the line "N passed, N failed"."""

import contextlib
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


# What prepare_upstream found, per architecture under test, for the tests
# that run sid's Mesa (tests/test_upstream.py, test_anv's memtypes test,
# through forklib.Yardstick): the roots it made and checked in this run
# ("ARCH=VERSION ..."), those it could not make for a reason of the run's
# nature ("ARCH: [CAUSE] why", one a line: upstream.Unavailable; the tests
# skip), and those it failed to make or check ("ARCH: why": the tests
# fail).
UPSTREAM_ENV = "MESA_FORK_UPSTREAM_VERIFIED"
UNAVAILABLE_ENV = "MESA_FORK_UPSTREAM_UNAVAILABLE"
BROKEN_ENV = "MESA_FORK_UPSTREAM_BROKEN"


def recorded_upstream(conf):
    """The version of sid's Mesa the upstream checks were last read
    against (config/fork.ini [upstream] recorded), or None."""
    return conf["upstream"].get("recorded") or None


class _LastError:
    """sys.stderr, also keeping the last line die() wrote (its reason)."""

    def __init__(self, stream):
        self.stream, self.last = stream, None

    def write(self, text):
        for line in text.splitlines():
            if line.startswith("mesa-fork: error: "):
                self.last = line[len("mesa-fork: error: "):].strip()
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def prepare_upstream(fork, arches):
    """The root with the Mesa sid serves now, for each architecture under
    test; returns the environment that tells the tests what came of it
    (UPSTREAM_ENV, UNAVAILABLE_ENV, BROKEN_ENV). Nothing here stops the
    run, and each outcome is said in one line: a root this run cannot have
    by its nature (upstream.Unavailable: the archive out of reach, the
    architecture not served, no root) makes the tests that need it skip;
    any other failure (a tool missing, mmdebstrap failing, a checksum that
    disagrees with the index) makes them fail; a version other than
    config/fork.ini [upstream] recorded makes their failures findings
    (forklib.Yardstick)."""
    recorded = recorded_upstream(fork.conf)
    verified, unavailable, broken = [], [], []
    for a in arches:
        root = upstream.SidRoot(fork.for_arch(a))
        err = _LastError(sys.stderr)
        try:
            with contextlib.redirect_stderr(err):
                root.ensure()
        except upstream.Unavailable as e:
            why = " ".join(e.reason.split())
            unavailable.append("%s: [%s] %s" % (a, e.cause, why))
            print("test: sid's Mesa for %s cannot be had (%s), so the tests that run it "
                  "will be listed as skipped" % (a, why))
            continue
        except (SystemExit, OSError) as e:
            why = str(e) if isinstance(e, OSError) else (err.last or "see the error above")
            why = " ".join(why.split())
            broken.append("%s: %s" % (a, why))
            print("test: sid's Mesa for %s could not be prepared (%s), so the tests that run "
                  "it will fail" % (a, why))
            continue
        verified.append("%s=%s" % (a, root.version))
        print("test: upstream for %s: %s" % (a, root.describe()))
        if root.version != recorded:
            print("test: sid's Mesa for %s is now %s (recorded %s in config/fork.ini "
                  "[upstream]): a check of it that fails is listed as a skipped finding; "
                  "read the findings, then record %s there"
                  % (a, root.version, recorded or "nothing", root.version))
    return {UPSTREAM_ENV: " ".join(verified), UNAVAILABLE_ENV: "\n".join(unavailable),
            BROKEN_ENV: "\n".join(broken)}


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
    sid = prepare_upstream(fork, arches)
    prepare_checks(fork)
    cmd = [sys.executable, os.path.join(fork.top, "tests", "run.py")]
    if pattern:
        cmd += ["-k", pattern]
    env = dict(os.environ, MESA_FORK_WORK=fork.work, MESA_FORK_TEST_ARCHES=" ".join(arches))
    env.update(sid)
    return subprocess.run(cmd, env=env).returncode
