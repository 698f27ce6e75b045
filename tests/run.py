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
A test that could not run is a failure, never a skip, except one that this
run cannot have by its nature (root in a user's run, an architecture not
under test, sid's archive out of reach: forklib.SKIP_CAUSES) and says so
through forklib.skip_optional: it is listed as skipped with its cause, and
counted on the line before the last, never as passed. Any other skip, a
meson SKIP included, is a failure.
"""

import argparse
import json
import os
import re
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

    def skip(self, name, cause, detail):
        self.skipped.append((name, cause, detail))
        print("SKIP %s: [%s] %s" % (name, cause, (detail.splitlines() or [""])[0]),
              flush=True)

    def skip_line(self):
        """'N skipped' and how many of each cause."""
        if not self.skipped:
            return "0 skipped"
        causes = {}
        for _, cause, _ in self.skipped:
            causes[cause] = causes.get(cause, 0) + 1
        return "%d skipped (%s)" % (len(self.skipped), ", ".join(
            "%d %s" % (n, c) for c, n in sorted(causes.items())))

    def add(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed.append((name, detail))
        print("%s %s%s" % ("PASS" if ok else "FAIL", name,
                           (": " + detail.splitlines()[0]) if (detail and not ok) else ""),
              flush=True)


def judge_meson(tests, rows, returncode, suites):
    """What one `meson test` run proves, as (name, ok, detail) per test.
    tests: `meson introspect --tests` (name and suites of every test the
    build defines); rows: testlog.json; suites: the --suite arguments
    (none: all). One rule with the Python tests: only OK passes (an
    EXPECTEDFAIL or a SKIP fails); each suite asked for must hold a test;
    every test selected must have a row; and meson's exit code must agree
    with the rows."""
    def picked(t):
        return not suites or any(x == s or x.endswith(":" + s) for s in suites
                                 for x in t["suite"])
    out = []
    for s in suites:
        if not any(x == s or x.endswith(":" + s) for t in tests for x in t["suite"]):
            out.append(("suite %s" % s, False, "the build defines no test in suite %r "
                        "(renamed or no longer built?)" % s))
    seen = set()
    for r in rows:
        short = r["name"].partition(" / ")[2] or r["name"]
        seen.add(short)
        stdout = r.get("stdout", "")
        # A gtest binary exits 0 when cases skipped (GTEST_SKIP): a skip
        # the run did not choose is a failure here as in Python.
        skipped = re.findall(r"^\[  SKIPPED \] (\S+)", stdout, re.M)
        ok = r["result"] == "OK" and not skipped
        why = r["result"] if r["result"] != "OK" else "gtest cases skipped: %s" % skipped
        out.append((r["name"], ok, "" if ok else "%s: %s" % (why, stdout[-3000:])))
    for t in tests:
        if picked(t) and t["name"] not in seen:
            out.append((t["name"], False, "selected but meson test did not report it"))
    if returncode != 0 and all(ok for _, ok, _ in out):
        out.append(("meson test", False, "exited %d though every test it reported passed"
                    % returncode))
    if not rows:
        out.append(("meson test", False, "ran nothing (exit %d)" % returncode))
    return out


def disabled_gtests(rows):
    """(row name, number) of gtest cases Mesa itself disables (DISABLED_),
    which a gtest binary reports and does not run."""
    out = []
    for r in rows:
        m = re.search(r"YOU HAVE (\d+) DISABLED TESTS?", r.get("stdout", ""))
        if m:
            out.append((r["name"], int(m.group(1))))
    return out


def meson_suite(tally, label, build, suites, pattern, slow=1):
    """Run `meson test` and count every test from its testlog.json, judged
    by judge_meson. slow multiplies the tests' timeouts (qemu-user)."""
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
    intro = subprocess.run(["meson", "introspect", "--tests", build], env=forklib.build_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if intro.returncode != 0:
        tally.add(label, False, "meson introspect --tests failed: " + intro.stderr[-2000:])
        return
    r = subprocess.run(cmd, env=forklib.build_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    rows = []
    if os.path.exists(log):
        with open(log) as f:
            rows = [json.loads(l) for l in f if l.strip()]
    verdicts = judge_meson(json.loads(intro.stdout), rows, r.returncode, suites)
    row_names = {row["name"] for row in rows}
    for name, ok, detail in verdicts:
        # -k selects tests, never the verdicts about the run itself (a
        # suite that held nothing, an exit code the rows do not explain).
        if pattern and name in row_names and pattern not in "%s: %s" % (label, name):
            continue
        name = "%s: %s" % (label, name)
        if not ok and not rows:
            detail += "\n" + r.stdout[-2000:]
        tally.add(name, ok, detail)
    for name, n in disabled_gtests(rows):
        name = "%s: %s" % (label, name)
        if not pattern or pattern in name:
            tally.skip(name, "mesa-disabled", "%d gtest case%s disabled in Mesa's source "
                       "(DISABLED_), not run" % (n, "s" if n > 1 else ""))
    print("  (%s: %d tests in %.0fs)" % (label, len(rows), time.monotonic() - t0))


class Collect(unittest.TestResult):
    """Counts each Python test into a Tally under the runner's rules."""

    def __init__(self, tally):
        super().__init__()
        self.tally = tally

    def addSuccess(self, test):
        self.tally.add(test.id(), True)

    def addFailure(self, test, err):
        self.tally.add(test.id(), False, self._exc_info_to_string(err, test))
        print(self._exc_info_to_string(err, test))

    def addError(self, test, err):
        self.addFailure(test, err)

    def addSkip(self, test, reason):
        known = forklib.parse_skip(reason)
        if known:
            self.tally.skip(test.id(), *known)
            return
        self.tally.add(test.id(), False, "a skip without one of the causes of "
                       "forklib.SKIP_CAUSES counts as a failure: " + reason)

    def addExpectedFailure(self, test, err):
        self.tally.add(test.id(), False, "expected failures are not allowed")

    def addUnexpectedSuccess(self, test):
        self.tally.add(test.id(), False, "unexpected success")

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self.tally.add(subtest.id(), False, self._exc_info_to_string(err, test))
            print(self._exc_info_to_string(err, test))


def python_tests(tally, pattern):
    loader = unittest.TestLoader()
    if pattern:
        loader.testNamePatterns = ["*%s*" % pattern]
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    suite.run(Collect(tally))


def summary(tally, elapsed):
    """The runner's closing lines: failures, skips by cause, the time, the
    skip count, and last the line CI reads, "N passed, N failed"."""
    out = []
    if tally.failed:
        out += ["", "Failed:"] + ["  %s" % name for name, _ in tally.failed]
    if tally.skipped:
        out += ["", "Skipped (not run, not counted as passed), by cause:"]
        for cause in sorted({c for _, c, _ in tally.skipped}):
            out.append("  %s: %s" % (cause, forklib.SKIP_CAUSES[cause]))
            out += ["    %s: %s" % (name, (detail.splitlines() or [""])[0])
                    for name, c, detail in tally.skipped if c == cause]
    out.append("test: took %s" % fmt_time(elapsed))
    out.append(tally.skip_line())
    out.append("%d passed, %d failed" % (tally.passed, len(tally.failed)))
    return out


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
    print("\n".join(summary(tally, time.monotonic() - t0)))
    return 1 if tally.failed or tally.passed == 0 else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        # Ctrl-C reaches the whole process group: `mesa-fork test` says it.
        sys.exit(130)
