#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Run every test mesa-fork has and end with one line: 'N passed, N failed'.

Three kinds of test are counted one by one:
  1. Mesa's own unit suites (config/fork.ini test_suites) plus the unit
     tests our series adds, through `meson test` in the Mesa build;
  2. the drm-shim tests registered in our top-level meson.build;
  3. the Python end-to-end tests in tests/test_*.py.
The first two run for every architecture under test ($MESA_FORK_TEST_ARCHES,
set by `mesa-fork test`): a cross build's through meson's exe_wrapper
(qemu-user); test_arm64.py compares the arm64 build's results with the
machine's own.
A test that could not run is a failure, never a skip, except one that
needs what another verb makes and skips through forklib.skip_optional (the
build chroot of `mesa-fork deb`): it is listed as skipped, never passed.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import forklib  # noqa: E402
from mesafork.proc import fmt_time  # noqa: E402


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = []
        self.skipped = []

    def skip(self, name, reason):
        self.skipped.append((name, reason))
        print("SKIP %s: %s" % (name, reason), flush=True)

    def add(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed.append((name, detail))
        print("%s %s%s" % ("PASS" if ok else "FAIL", name,
                           (": " + detail.splitlines()[0]) if (detail and not ok) else ""),
              flush=True)


def meson_suite(tally, label, build, suites, pattern, slow=1):
    """Run `meson test` and count every test from its testlog.json. slow
    multiplies the tests' timeouts (qemu-user)."""
    if not os.path.exists(os.path.join(build, "build.ninja")):
        tally.add(label, False, "%s is not built: run 'bin/mesa-fork install'" % build)
        return
    cmd = ["meson", "test", "-C", build, "--no-rebuild", "--print-errorlogs",
           "--num-processes", str(os.cpu_count() or 2), "--timeout-multiplier", str(slow)]
    for s in suites:
        cmd += ["--suite", s]
    log = os.path.join(build, "meson-logs", "testlog.json")
    if os.path.exists(log):
        os.unlink(log)
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=forklib.build_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    results = []
    if os.path.exists(log):
        with open(log) as f:
            results = [json.loads(l) for l in f if l.strip()]
    if not results:
        tally.add(label, False, "meson test ran nothing (exit %d): %s" % (
            r.returncode, r.stdout[-2000:]))
        return
    for t in results:
        name = "%s: %s" % (label, t["name"])
        if pattern and pattern not in name:
            continue
        ok = t["result"] in ("OK", "EXPECTEDFAIL")
        tally.add(name, ok, t.get("stdout", "")[-3000:] if not ok else "")
    print("  (%s: %d tests in %.0fs)" % (label, len(results), time.monotonic() - t0))


class Result(unittest.TextTestResult):
    pass


def python_tests(tally, pattern):
    loader = unittest.TestLoader()
    if pattern:
        loader.testNamePatterns = ["*%s*" % pattern]
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)

    class Collect(unittest.TestResult):
        def addSuccess(self, test):
            tally.add(test.id(), True)

        def addFailure(self, test, err):
            tally.add(test.id(), False, self._exc_info_to_string(err, test))
            print(self._exc_info_to_string(err, test))

        def addError(self, test, err):
            self.addFailure(test, err)

        def addSkip(self, test, reason):
            if reason.startswith(forklib.OPTIONAL_SKIP):
                tally.skip(test.id(), reason[len(forklib.OPTIONAL_SKIP):])
                return
            tally.add(test.id(), False, "skipped tests count as failures: " + reason)

        def addExpectedFailure(self, test, err):
            tally.add(test.id(), False, "expected failures are not allowed")

        def addUnexpectedSuccess(self, test):
            tally.add(test.id(), False, "unexpected success")

        def addSubTest(self, test, subtest, err):
            if err is not None:
                tally.add(subtest.id(), False, self._exc_info_to_string(err, test))
                print(self._exc_info_to_string(err, test))

    suite.run(Collect())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", dest="pattern", default="")
    args = ap.parse_args()
    t0 = time.monotonic()
    tally = Tally()
    arches = forklib.tested_arches()
    print("== architectures under test: %s" % " ".join(arches), flush=True)
    for arch in arches:
        t = forklib.Target(arch)
        # The machine's own build keeps its labels; a cross build's say its
        # architecture (its tests run under qemu-user, meson's exe_wrapper).
        sfx = "" if arch == forklib.HOST.arch else "-" + arch
        suites = t.conf["meson"]["test_suites"].split()
        print("== Mesa unit suites, %s (%s)" % (arch, ", ".join(suites)), flush=True)
        slow = 4 if t.cross else 1
        meson_suite(tally, "mesa" + sfx, t.mesa_build, suites, args.pattern, slow)
        print("== drm-shim tests, %s (top-level meson.build)" % arch, flush=True)
        meson_suite(tally, "shim" + sfx, t.client_build, [], args.pattern, slow)
    print("== end-to-end tests (tests/test_*.py)", flush=True)
    python_tests(tally, args.pattern)
    if tally.failed:
        print("\nFailed:")
        for name, detail in tally.failed:
            print("  %s" % name)
    if tally.skipped:
        print("\nSkipped (not run, not counted as passed):")
        for name, reason in tally.skipped:
            print("  %s: %s" % (name, reason))
    print("test: took %s" % fmt_time(time.monotonic() - t0))
    print("%d passed, %d failed" % (tally.passed, len(tally.failed)))
    return 1 if tally.failed or tally.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
