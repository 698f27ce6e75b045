# SPDX-License-Identifier: MIT
"""The runner's own accounting (tests/run.py): a green run means what it
says. Skips are counted and must name a cause this run cannot have by its
nature; meson's EXPECTEDFAIL and SKIP fail as the Python side's do; a
suite that ran nothing, a test that vanished, or meson's exit code
disagreeing with its log is a failure."""

import contextlib
import io
import json
import os
import re
import subprocess
import unittest

import forklib
import run


def tally_of(*cases):
    """The Tally of running these TestCase classes through the runner's
    Collect, its output swallowed."""
    tally = run.Tally()
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(c)
                               for c in cases)
    with contextlib.redirect_stdout(io.StringIO()):
        suite.run(run.Collect(tally))
    return tally


class Skips(unittest.TestCase):
    def test_a_skip_with_a_listed_cause_is_counted_not_passed(self):
        class T(unittest.TestCase):
            def test_x(self):
                forklib.skip_optional("root", "chroot needs root")
        t = tally_of(T)
        self.assertEqual((t.passed, t.failed), (0, []))
        self.assertEqual([(c, d) for _, c, d in t.skipped], [("root", "chroot needs root")])
        self.assertEqual(t.skip_line(), "1 skipped (1 root)")

    def test_a_plain_skip_fails(self):
        class T(unittest.TestCase):
            def test_x(self):
                self.skipTest("the heap is too large")

            @unittest.skip("not today")
            def test_y(self):
                pass
        t = tally_of(T)
        self.assertEqual((t.passed, len(t.failed), t.skipped), (0, 2, []))
        self.assertIn("counts as a failure", t.failed[0][1])

    def test_a_skip_naming_another_cause_fails(self):
        with self.assertRaises(AssertionError):
            forklib.skip_optional("slow", "the machine is busy")

        # Nor does a hand-made reason with the prefix and an unknown cause
        # pass as one.
        class T(unittest.TestCase):
            def test_x(self):
                raise unittest.SkipTest(forklib.OPTIONAL_SKIP + "[slow] the machine is busy")
        t = tally_of(T)
        self.assertEqual((len(t.failed), t.skipped), (1, []))

    def test_failing_subtests_and_errors_fail(self):
        class T(unittest.TestCase):
            def test_sub(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertNotEqual(i, 1)

            def test_error(self):
                raise KeyError("harness bug")
        t = tally_of(T)
        names = sorted(n for n, _ in t.failed)
        self.assertEqual(len(names), 2, names)
        self.assertTrue(any("(i=1)" in n for n in names), names)
        self.assertTrue(any("test_error" in n for n in names), names)
        self.assertEqual(t.passed, 0)

    def test_an_empty_skip_detail_is_counted(self):
        class T(unittest.TestCase):
            def test_x(self):
                forklib.skip_optional("root", "")
        t = tally_of(T)
        self.assertEqual(t.skip_line(), "1 skipped (1 root)")
        self.assertEqual(run.summary(t, 0)[-1], "0 passed, 0 failed")

    def test_expected_failures_and_unexpected_successes_fail(self):
        class T(unittest.TestCase):
            @unittest.expectedFailure
            def test_x(self):
                self.fail("known")

            @unittest.expectedFailure
            def test_y(self):
                pass
        t = tally_of(T)
        self.assertEqual((t.passed, len(t.failed)), (0, 2))

    def test_the_last_lines_count_skips_then_passes_and_failures(self):
        class T(unittest.TestCase):
            def test_a(self):
                pass

            def test_b(self):
                forklib.skip_optional("arch", "arm64 is not under test")

            def test_c(self):
                forklib.skip_optional("root", "chroot needs root")

            def test_d(self):
                forklib.skip_optional("root", "chown needs root")

            def test_e(self):
                self.fail("red")
        lines = run.summary(tally_of(T), 1.0)
        self.assertEqual(lines[-1], "1 passed, 1 failed")
        self.assertRegex(lines[-1], r"\A\d+ passed, \d+ failed\Z")
        self.assertEqual(lines[-2], "3 skipped (1 arch, 2 root)")
        listed = "\n".join(lines)
        for name in ("test_b", "test_c", "test_d"):
            self.assertRegex(listed, r"    \S+\.%s: " % name)
        self.assertIn("  root: " + forklib.SKIP_CAUSES["root"], listed)
        self.assertEqual(run.summary(tally_of(), 0)[-2:], ["0 skipped", "0 passed, 0 failed"])


def test(name, *suites):
    return {"name": name, "suite": list(suites)}


def row(name, result="OK"):
    return {"name": name, "result": result, "stdout": "out of " + name}


class MesonRule(unittest.TestCase):
    """judge_meson: one rule for meson's results and Python's."""

    TESTS = [test("a", "mesa:asahi"), test("b", "mesa:panfrost"), test("c", "mesa:other")]

    def failures(self, rows, rc=0, suites=("asahi", "panfrost")):
        return [(n, d) for n, ok, d in run.judge_meson(self.TESTS, rows, rc, list(suites))
                if not ok]

    def test_all_ok_passes(self):
        verdicts = run.judge_meson(self.TESTS, [row("mesa:asahi / a"), row("mesa:panfrost / b")],
                                   0, ["asahi", "panfrost"])
        self.assertEqual([(n, ok) for n, ok, _ in verdicts],
                         [("mesa:asahi / a", True), ("mesa:panfrost / b", True)])

    def test_expectedfail_and_skip_fail(self):
        for result in ("EXPECTEDFAIL", "SKIP", "UNEXPECTEDPASS", "FAIL", "TIMEOUT"):
            f = self.failures([row("mesa:asahi / a", result), row("mesa:panfrost / b")])
            self.assertEqual([n for n, _ in f], ["mesa:asahi / a"], result)
            self.assertIn(result, f[0][1])

    def test_a_skipped_gtest_case_fails_and_a_disabled_one_is_listed(self):
        skipped = row("mesa:asahi / a")
        skipped["stdout"] = "[ RUN      ] X.y\n[  SKIPPED ] X.y\n[  PASSED  ] 0 tests.\n"
        f = self.failures([skipped, row("mesa:panfrost / b")])
        self.assertEqual([n for n, _ in f], ["mesa:asahi / a"])
        self.assertIn("gtest cases skipped: ['X.y']", f[0][1])
        disabled = row("mesa:panfrost / b")
        disabled["stdout"] = "[  PASSED  ] 3 tests.\n\n  YOU HAVE 2 DISABLED TESTS\n"
        self.assertEqual(self.failures([row("mesa:asahi / a"), disabled]), [])
        self.assertEqual(run.disabled_gtests([row("mesa:asahi / a"), disabled]),
                         [("mesa:panfrost / b", 2)])

    def test_a_renamed_suite_fails(self):
        f = self.failures([row("mesa:asahi / a"), row("mesa:panfrost / b")],
                          suites=("asahi", "panfrost", "panvk"))
        self.assertEqual([n for n, _ in f], ["suite panvk"])

    def test_a_selected_test_without_a_row_fails(self):
        f = self.failures([row("mesa:asahi / a")])
        self.assertEqual([n for n, _ in f], ["b"])
        # With no suite named every test is selected.
        f = self.failures([row("mesa:asahi / a"), row("mesa:panfrost / b")], suites=())
        self.assertEqual([n for n, _ in f], ["c"])

    def test_an_exit_code_the_rows_do_not_explain_fails(self):
        f = self.failures([row("mesa:asahi / a"), row("mesa:panfrost / b")], rc=1)
        self.assertEqual([n for n, _ in f], ["meson test"])

    def test_nothing_run_fails(self):
        f = self.failures([], suites=())
        self.assertIn("meson test", [n for n, _ in f])

    def test_a_suite_no_build_defines_fails_on_a_real_build(self):
        """The mutation 'a suite renamed in [meson] test_suites', on the
        machine's Mesa build: meson runs the other suite's tests, exits 0
        and says nothing of the one it could not find."""
        build = forklib.HOST.mesa_build
        self.assertTrue(os.path.exists(os.path.join(build, "build.ninja")),
                        "%s is not built: run 'bin/mesa-fork install'" % build)
        tally = run.Tally()
        with contextlib.redirect_stdout(io.StringIO()):
            run.meson_suite(tally, "mesa", build, ["asahi"], "")
        self.assertGreater(tally.passed, 0)
        self.assertEqual(tally.failed, [])
        ran = tally.passed
        tally = run.Tally()
        with contextlib.redirect_stdout(io.StringIO()):
            run.meson_suite(tally, "mesa", build, ["asahi", "no-such-suite"], "")
        self.assertEqual([n for n, _ in tally.failed], ["mesa: suite no-such-suite"])
        self.assertEqual(tally.passed, ran)
        # -k selects tests, not the verdicts about the run.
        tally = run.Tally()
        with contextlib.redirect_stdout(io.StringIO()):
            run.meson_suite(tally, "mesa", build, ["asahi", "no-such-suite"], "NoSuchTest")
        self.assertEqual(([n for n, _ in tally.failed], tally.passed),
                         (["mesa: suite no-such-suite"], 0))

    def test_the_configured_suites_each_hold_a_test(self):
        for arch in forklib.tested_arches():
            t = forklib.Target(arch)
            suites = t.conf["meson"]["test_suites"].split()
            self.assertTrue(suites)
            intro = subprocess.run(["meson", "introspect", "--tests", t.mesa_build],
                                   env=forklib.build_env(), stdout=subprocess.PIPE, text=True)
            self.assertEqual(intro.returncode, 0)
            tests = json.loads(intro.stdout)
            for s in suites:
                self.assertTrue(any(re.search(r"(^|:)%s$" % re.escape(s), x)
                                    for t_ in tests for x in t_["suite"]),
                                "%s: no test in suite %s" % (arch, s))


if __name__ == "__main__":
    unittest.main()
