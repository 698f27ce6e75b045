# SPDX-License-Identifier: MIT
"""The fork's drm-shims against the Mesa real machines run.

The asahi shim refuses what the mainline drm/asahi kernel refuses, and its
capture decodes the command streams; every other test runs the fork's own
Honeykrisp on it, so a rule the fork happens never to break, or a stream
only the fork writes the way the decoder expects, would go unnoticed.
Here the newest Mesa Debian ships (sid's binary mesa-vulkan-drivers,
whatever version sid serves today; `bin/mesa-fork test` puts it in
.work/chroot/sid-ARCH, bin/mesafork/upstream.py) runs every
mesa-fork-scenarios scenario and mesa-fork-vkcheck under the validation
layer on the fork's shim, on every architecture under test: no request
refused, every command decoded, no validation message. sid's ANV comes up
on the intel shim of stub Meteor Lake and Arrow Lake with no refusal but
the one documented, and lists its memory types.

sid uploads a new Mesa every few weeks, so what these checks mean depends
on the version (forklib.Yardstick holds the policy, once):

- the version config/fork.ini [upstream] recorded names: strict, a failure
  is a failure;
- another version: a check that passes is a pass; one that fails (a
  failed assertion, or sid's program running past its timeout) is listed
  as skipped, as a finding that names both versions and what differed,
  neither passed nor failed; any other error is our bug and stays one. Read the findings (a refusal is a shim bug,
  fix the shim, or an upstream bug, say so in docs/changes/hk-uapi.md with
  the kernel rule it breaks), then set `recorded` to the new version;
- sid's Mesa cannot be had (offline without a root made before, an
  architecture sid dropped, mmdebstrap failing, not root; `test` prints
  why): listed as skipped with that cause, never passed.

The checks of our own harness stay strict whatever the version: a device
that comes up is sid's driver, not the fork's (driverInfo); the root holds
the version `test` verified; the scenario list is test_hk's; the cached
.deb check. What upstream has that the fork changes (ANV's cached + coherent
type, bench figures) is not asserted here: `bin/mesa-fork memtypes` and
`bench` print it with the version they measured. YardstickPolicy and
PrepareUpstreamMessages test the policy and what `test` prints about sid's
Mesa without it (no root, no network)."""

import contextlib
import configparser
import io
import json
import os
import subprocess
import tempfile
import unittest
from unittest import mock

import forklib
import test_hk
from mesafork import proc, testing, upstream

SHIM_LINE = "drm-shim:"


def roots():
    """(Target, SidRoot with sid's Mesa or None, Yardstick) of every
    architecture under test. A root `test` could not make is None (its
    Yardstick says why); one it made must hold the version `test`
    verified."""
    out = []
    for arch in forklib.tested_arches():
        t = forklib.target(arch)
        ys = forklib.Yardstick.from_env(arch)
        root = None
        if not ys.unavailable and not ys.broken:
            root = upstream.SidRoot(t.fork)
            info = os.path.join(root.root, ".mesa-fork-upstream")
            if not os.path.exists(info):
                raise AssertionError("'bin/mesa-fork test' verified sid's Mesa %s for %s, but "
                                     "%s is gone" % (ys.version, arch, info))
            with open(info) as f:
                root.version, root.sha256 = f.read().split()
            if root.version != ys.version:
                raise AssertionError("%s holds %s, but this run verified %s"
                                     % (info, root.version, ys.version))
        out.append((t, root, ys))
    return out


def run_on_sid(t, root, argv, driver="asahi", timeout=1200, **env):
    """argv (a program of t's prefix) on sid's driver over t's drm-shim of
    it, with the asahi shim's capture on; returns (process, capture lines)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "cap.jsonl")
        if driver == "asahi":
            env["ASAHI_SHIM_CAPTURE"] = log
        e = root.shim_env(t.prefix, t.conf, driver, **env)
        r = root.run_in([t.bin_path(argv[0])] + list(argv[1:]), env=e, capture=True,
                        timeout=timeout)
        lines = []
        if os.path.exists(log):
            with open(log) as f:
                lines = [json.loads(l) for l in f if l.strip()]
    return r, lines


def assert_sids_driver(test, t, root, ys, driver, **env):
    """The device that comes up is sid's driver (driverInfo names sid's
    version), not the fork's: an ICD path that fell back to the fork would
    compare the fork with itself. That is about our harness: strict at
    every version. That sid's driver comes up on our shim at all, one
    device of its kind, is a check of it: under ys's policy."""
    r, _ = run_on_sid(t, root, ["mesa-fork-vkcheck", "--list"], driver=driver, **env)
    devs = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    upstream_version = root.version.split(":")[-1].split("-")[0]
    # Strict too: with no device, the loop below would check nothing
    test.assertGreaterEqual(len(devs), 1, (r.stdout + r.stderr)[-2000:])
    for dev in devs:
        test.assertNotIn("mesa-fork", dev["info"])
        test.assertTrue(dev["info"].startswith("Mesa " + upstream_version),
                        (dev["info"], root.version))
    with ys.check():
        test.assertEqual(r.returncode, 0, r.stderr[-2000:])
        test.assertEqual(len(devs), 1, r.stdout)
        test.assertEqual(devs[0]["driver_kind"], driver)


class SidsHoneykrisp(unittest.TestCase):

    def assert_clean(self, r, lines, what, commands=True):
        """Exit 0, nothing from the shim on stderr (it prints a line for
        every refusal), the capture on (a queue made), kernel commands
        captured unless the run has none to send, every one decoded."""
        self.assertEqual(r.returncode, 0, "%s: %s%s" % (what, r.stdout[-2000:],
                                                        r.stderr[-3000:]))
        shim = [l for l in r.stderr.splitlines() if SHIM_LINE in l]
        self.assertEqual(shim, [], what)
        self.assertTrue([c for c in lines if c["type"] == "queue"], what)
        cmds = [c for c in lines if c["type"] in ("compute", "render")]
        if commands:
            self.assertTrue(cmds, "%s: no kernel command captured" % what)
        for c in cmds:
            self.assertFalse(c.get("errors"), "%s: %s" % (what, c))
            if c["type"] == "compute":
                self.assertTrue(c["terminated"], "%s: %s" % (what, c))

    def test_it_is_sids_honeykrisp_that_runs(self):
        for t, root, ys in roots():
            with self.subTest(arch=t.arch):
                ys.require()
                assert_sids_driver(self, t, root, ys, "asahi")

    def test_every_scenario(self):
        for t, root, ys in roots():
            with self.subTest(arch=t.arch):
                ys.require()
            if root is None:
                continue
            listed = forklib.run(t.command([t.bin_path("mesa-fork-scenarios"), "--list"]))
            names = listed.stdout.split()
            self.assertGreater(len(names), 20, listed.stderr)
            for sc in names:
                with self.subTest(arch=t.arch, scenario=sc), ys.check():
                    r, lines = run_on_sid(t, root, ["mesa-fork-scenarios", "--validate",
                                                    "--count", "4", sc])
                    # "empty" submits an empty command buffer: nothing to send.
                    self.assert_clean(r, lines, sc, commands=sc != "empty")
                    self.assertIn("validation messages: 0", r.stdout)

    def test_vkcheck(self):
        for t, root, ys in roots():
            with self.subTest(arch=t.arch), ys.check():
                r, lines = run_on_sid(t, root, ["mesa-fork-vkcheck", "--validate"])
                self.assert_clean(r, lines, "mesa-fork-vkcheck")
                self.assertIn("validation on, 0 validation message(s)", r.stdout)


class ScenarioList(unittest.TestCase):
    def test_the_program_lists_what_the_tests_run(self):
        """mesa-fork-scenarios --list (what the test above runs on sid's
        driver) and test_hk's list (what runs on the fork's) are the same,
        but for submit-oom-batches, which means something only on a shim
        failing a SUBMIT (test_hk_uapi runs it)."""
        r = forklib.run([forklib.bin_path("mesa-fork-scenarios"), "--list"])
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout.split(), list(test_hk.SCENARIOS) + ["submit-oom-batches"])
        bad = forklib.run([forklib.bin_path("mesa-fork-scenarios"), "no-such-scenario"],
                          env=forklib.shim_env("asahi"))
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("unknown scenario", bad.stderr)


class SidsAnv(unittest.TestCase):
    """The ANV of Debian sid's Mesa on the fork's intel shim, stub Meteor
    Lake and Arrow Lake (what `bin/mesa-fork memtypes` prints as
    "upstream"): it comes up, meets no refusal but the one documented, and
    lists host-visible memory types and the allocators' choices. Which
    types it has is upstream's business: whether it has a cached +
    coherent one is printed, with its version, by `memtypes`
    (docs/changes/anv-cached-coherent.md), not asserted here."""

    PLATFORMS = ("mtl", "arl")

    def amd64(self):
        if "amd64" not in forklib.tested_arches():
            forklib.skip_optional("arch", "the intel shim is built for amd64 only")
        return [(t, r, ys) for t, r, ys in roots() if t.arch == "amd64"][0]

    def test_it_is_sids_anv_that_runs(self):
        t, root, ys = self.amd64()
        ys.require()
        for plat in self.PLATFORMS:
            with self.subTest(platform=plat):
                assert_sids_driver(self, t, root, ys, "intel", INTEL_STUB_GPU_PLATFORM=plat)

    def test_comes_up_on_i915_mtl_and_arl(self):
        t, root, ys = self.amd64()
        ys.require()
        for plat in self.PLATFORMS:
            with self.subTest(platform=plat), ys.check():
                r, _ = run_on_sid(t, root, ["mesa-fork-memtypes"], driver="intel",
                                  timeout=600, INTEL_STUB_GPU_PLATFORM=plat)
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                # The only refusal allowed is the probe ANV makes on purpose
                # since 26.x: a zero-size GEM_USERPTR, which i915 answers
                # -EINVAL (patch 0038 taught the shim to).
                refusals = [l for l in r.stderr.splitlines() if "refused" in l]
                for l in refusals:
                    self.assertIn("GEM_USERPTR refused: zero size", l)
                facts = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
                types = {f["index"]: set(f["flags"].split("|"))
                         for f in facts if f["kind"] == "type"}
                self.assertIn(True, ["HOST_VISIBLE" in ty for ty in types.values()],
                              r.stdout)
                choices = {f["allocator"]: f["index"] for f in facts if f["kind"] == "choice"}
                self.assertEqual(sorted(choices), ["gpu-allocator", "vma"], r.stdout)
                for index in choices.values():
                    self.assertIn("HOST_VISIBLE", types.get(index, ()), r.stdout)


class CachedDebCheck(unittest.TestCase):
    """The check of the .deb a root was unpacked from against the index
    (upstream.verify_cached_deb), on a stand-in root."""

    def test_the_index_sha256_or_nothing(self):
        import hashlib
        with tempfile.TemporaryDirectory() as root:
            cache = os.path.join(root, "var", "cache", "apt", "archives")
            os.makedirs(cache)
            with open(os.path.join(cache, "mesa-vulkan-drivers_1%3a2.0-1_amd64.deb"), "wb") as f:
                f.write(b"the package")
            good = hashlib.sha256(b"the package").hexdigest()
            entry = upstream.Index({"Version": "1:2.0-1", "SHA256": good, "Filename": "x"})
            self.assertEqual(upstream.verify_cached_deb(root, "mesa-vulkan-drivers", "amd64",
                                                        entry), good)
            entry.sha256 = hashlib.sha256(b"another package").hexdigest()
            with self.assertRaises(SystemExit):
                upstream.verify_cached_deb(root, "mesa-vulkan-drivers", "amd64", entry)
            entry.version = "1:2.0-2"
            with self.assertRaises(SystemExit):
                upstream.verify_cached_deb(root, "mesa-vulkan-drivers", "amd64", entry)


class InRoot(unittest.TestCase):
    """SidRoot.in_root(): a path as the root's programs see it, as a host
    path, on a stand-in root whose links are Debian's (a relative
    /lib64 -> usr/lib64, an absolute loader link)."""

    def test_links_are_followed_inside_the_root(self):
        with tempfile.TemporaryDirectory() as work:
            fork = mock.Mock(work=work, arch="amd64")
            root = upstream.SidRoot(fork)
            lib = os.path.join(root.root, "usr", "lib", "x86_64-linux-gnu")
            os.makedirs(lib)
            os.makedirs(os.path.join(root.root, "usr", "lib64"))
            open(os.path.join(lib, "ld-linux-x86-64.so.2"), "w").close()
            os.symlink("usr/lib64", os.path.join(root.root, "lib64"))
            # Relative to the link's own directory, as sid has it
            os.symlink("../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                       os.path.join(root.root, "usr", "lib64", "ld-linux-x86-64.so.2"))
            os.symlink("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                       os.path.join(root.root, "usr", "lib64", "absolute"))
            loader = os.path.join(lib, "ld-linux-x86-64.so.2")
            self.assertEqual(root.in_root("/lib64/ld-linux-x86-64.so.2"), loader)
            self.assertEqual(root.in_root("/lib64/absolute"), loader)
            # The host's /usr/lib is never reached, even through ..
            self.assertEqual(root.in_root("/usr/../../../usr/lib"),
                             os.path.join(root.root, "usr", "lib"))
            os.symlink("/lib64/loop", os.path.join(root.root, "usr", "lib64", "loop"))
            with self.assertRaises(SystemExit):
                root.in_root("/lib64/loop")


class NoSkip(unittest.TestCase):
    """A test of the skip policy must not itself end up skipped (an
    optional skip is listed, never failed): any skip that escapes one of
    its test methods is a failure."""

    def _callTestMethod(self, method):
        try:
            method()
        except unittest.SkipTest as e:
            self.fail("a skip escaped the test of the policy: %s" % e)


class YardstickPolicy(NoSkip):
    """forklib.Yardstick, the policy of the checks above, without sid's
    Mesa: strict at the recorded version, a finding (an optional skip) at
    another, an optional skip with its cause when sid's Mesa is not at
    hand. Every outcome is caught and compared, so that a skip the policy
    makes wrongly cannot skip the test that checks it."""

    RECORDED = "26.2.6-1"
    NEW = "26.3.0-1"

    @staticmethod
    def outcome(ys, body):
        """("pass", None), ("fail", message), ("skip", reason) or
        ("error", exception type) of body run as a check under ys."""
        try:
            with ys.check():
                body()
        except unittest.SkipTest as e:
            return "skip", str(e)
        except (AssertionError, subprocess.TimeoutExpired) as e:
            return "fail", str(e)
        except Exception as e:  # noqa: BLE001: the outcome under test
            return "error", type(e).__name__
        return "pass", None

    @staticmethod
    def refused():
        raise AssertionError("['asahi drm-shim: SUBMIT refused'] != []\nmore")

    @staticmethod
    def hangs():
        subprocess.run(["sleep", "5"], timeout=0.1)

    def finding(self, ys, body):
        """The reason of the optional skip ys.check() makes of body."""
        kind, reason = self.outcome(ys, body)
        self.assertEqual(kind, "skip", reason)
        cause, detail = forklib.parse_skip(reason) or (None, reason)
        self.assertEqual(cause, "sid-moved" if ys.version else ys.cause, reason)
        return detail

    def test_recorded_version_failure_is_a_failure(self):
        ys = forklib.Yardstick("amd64", self.RECORDED, self.RECORDED)
        self.assertEqual(self.outcome(ys, self.refused),
                         ("fail", "['asahi drm-shim: SUBMIT refused'] != []\nmore"))
        self.assertEqual(self.outcome(ys, self.hangs)[0], "fail")
        self.assertEqual(self.outcome(ys, lambda: None), ("pass", None))

    def test_moved_version_failure_is_a_finding(self):
        ys = forklib.Yardstick("arm64", self.NEW, self.RECORDED)
        reason = self.finding(ys, self.refused)
        self.assertTrue(reason.startswith(
            "finding: sid's Mesa for arm64 is now 26.3.0-1, recorded 26.2.6-1: "
            "['asahi drm-shim: SUBMIT refused'] != []; check the shim against it, then "
            "record 26.3.0-1 in [upstream] recorded of config/fork.ini"), reason)
        self.assertTrue(reason.endswith("\nmore"), reason)
        self.assertIn("timed out", self.finding(ys, self.hangs))
        # A long first line is cut on the finding's line and given whole below it.
        long = "'validation on, 0' not found in '%s'" % ("x" * 1000)
        first, _, rest = self.finding(ys, lambda: self.fail(long)).partition("\n")
        self.assertTrue(first.endswith(" [...]; check the shim against it, then record "
                                       "26.3.0-1 in [upstream] recorded of config/fork.ini"),
                        first)
        self.assertEqual(rest, long)

    def test_moved_version_pass_is_a_pass(self):
        ys = forklib.Yardstick("arm64", self.NEW, self.RECORDED)
        ran = []
        self.assertEqual(self.outcome(ys, lambda: ran.append(True)), ("pass", None))
        self.assertEqual(ran, [True])

    def test_harness_errors_stay_errors(self):
        """Only a failed check becomes a finding; a bug of ours does not."""
        for version in (self.NEW, self.RECORDED):
            ys = forklib.Yardstick("arm64", version, self.RECORDED)
            self.assertEqual(self.outcome(ys, lambda: {}["driver_kind"]), ("error", "KeyError"))

    def test_unavailable_is_an_optional_skip(self):
        ys = forklib.Yardstick("arm64", recorded=self.RECORDED,
                               unavailable="sid's index has no mesa-vulkan-drivers for arm64",
                               cause="sid-unreachable")
        ran = []
        for body in (lambda: ran.append(True), self.refused):
            self.assertEqual(self.finding(ys, body),
                             "sid's Mesa for arm64 cannot be had in this run: sid's index "
                             "has no mesa-vulkan-drivers for arm64")
        self.assertEqual(ran, [])
        try:
            ys.require()
            self.fail("require() did not skip")
        except unittest.SkipTest as e:
            self.assertEqual(forklib.parse_skip(str(e))[0], "sid-unreachable", e)
        # Unavailable for a cause that is not a skip's is our bug.
        with self.assertRaises(AssertionError):
            forklib.Yardstick("arm64", unavailable="mmdebstrap failed", cause="broken")

    def test_broken_is_a_failure(self):
        """A root that could not be prepared for a reason other than the
        run's nature fails every check that needs it, run or not."""
        ys = forklib.Yardstick("arm64", recorded=self.RECORDED,
                               broken="sha256 1234, but the index says 5678")
        ran = []
        for body in (lambda: ran.append(True), self.refused):
            kind, reason = self.outcome(ys, body)
            self.assertEqual(kind, "fail", reason)
            self.assertIn("could not be prepared, a failure of the run, not a skip: sha256 "
                          "1234, but the index says 5678", reason)
        self.assertEqual(ran, [])
        with self.assertRaises(AssertionError):
            ys.require()

    def test_from_env(self):
        env = {testing.UPSTREAM_ENV: "amd64=26.2.6-1 arm64=26.3.0-1",
               testing.UNAVAILABLE_ENV: "riscv64: [sid-unreachable] sid's index has no "
                                        "mesa-vulkan-drivers\nppc64el: [root] mmdebstrap "
                                        "needs root",
               testing.BROKEN_ENV: "armhf: sha256 1234, but the index says 5678"}
        ys = forklib.Yardstick.from_env("amd64", env, self.RECORDED)
        self.assertEqual((ys.version, ys.unavailable, ys.moved()), ("26.2.6-1", None, False))
        ys = forklib.Yardstick.from_env("arm64", env, self.RECORDED)
        self.assertEqual((ys.version, ys.unavailable, ys.moved()), ("26.3.0-1", None, True))
        ys = forklib.Yardstick.from_env("riscv64", env, self.RECORDED)
        self.assertEqual((ys.unavailable, ys.cause, ys.broken),
                         ("sid's index has no mesa-vulkan-drivers", "sid-unreachable", None))
        ys = forklib.Yardstick.from_env("ppc64el", env, self.RECORDED)
        self.assertEqual((ys.unavailable, ys.cause), ("mmdebstrap needs root", "root"))
        ys = forklib.Yardstick.from_env("armhf", env, self.RECORDED)
        self.assertEqual((ys.unavailable, ys.broken),
                         (None, "sha256 1234, but the index says 5678"))
        # tests/run.py by itself: nothing was prepared, which fails.
        ys = forklib.Yardstick.from_env("amd64", {}, self.RECORDED)
        self.assertIn("run through 'bin/mesa-fork test'", ys.broken)
        # `test` says something of every architecture: silence is our bug.
        with self.assertRaises(AssertionError):
            forklib.Yardstick.from_env("s390x", env, self.RECORDED)
        # An unavailable line without its cause too.
        with self.assertRaises(AssertionError):
            forklib.Yardstick.from_env("riscv64", dict(env, **{
                testing.UNAVAILABLE_ENV: "riscv64: sid's index has no mesa-vulkan-drivers"}),
                self.RECORDED)
        # The recorded version is config/fork.ini's.
        self.assertEqual(forklib.Yardstick.from_env("amd64", env).recorded,
                         forklib.config()["upstream"]["recorded"])

    def test_the_runner_counts_a_finding_as_neither(self):
        """Through unittest as tests/run.py runs it, in subtests as the
        checks above use them: at another version a failing subtest is an
        optional skip and its test no success, and all passing is a
        success; at the recorded version the same failure fails."""
        class Checks(unittest.TestCase):
            ys, names = None, ()

            def test_one(self):
                for sc in self.names:
                    with self.subTest(scenario=sc), self.ys.check():
                        self.assertEqual(sc, "fine")

        def outcome(version, names):
            Checks.ys = forklib.Yardstick("amd64", version, self.RECORDED)
            Checks.names = names
            result = unittest.TestResult()
            successes = []
            result.addSuccess = successes.append
            unittest.TestLoader().loadTestsFromTestCase(Checks).run(result)
            return (len(successes), len(result.failures) + len(result.errors),
                    [r for _, r in result.skipped])

        passed, failed, skipped = outcome(self.NEW, ("fine", "refused"))
        self.assertEqual((passed, failed, len(skipped)), (0, 0, 1), skipped)
        self.assertTrue(skipped[0].startswith(forklib.OPTIONAL_SKIP + "[sid-moved] finding: "),
                        skipped)
        self.assertEqual(outcome(self.NEW, ("fine", "fine")), (1, 0, []))
        self.assertEqual(outcome(self.RECORDED, ("fine", "refused")), (0, 1, []))
        self.assertEqual(outcome(self.RECORDED, ("fine", "fine")), (1, 0, []))


class PrepareUpstreamMessages(NoSkip):
    """What testing.prepare_upstream prints and hands the tests, with a
    stand-in for the roots of sid's Mesa (no root, no network)."""

    RECORDED = "26.2.6-1"

    class Fork:
        def __init__(self, recorded):
            self.conf = configparser.ConfigParser(interpolation=None)
            self.conf.read_dict({"upstream": {"recorded": recorded}})

        def for_arch(self, arch):
            return arch

    def prepare(self, outcomes, recorded=RECORDED):
        """prepare_upstream over stand-in roots: outcomes maps an
        architecture to the version ensure() finds, or to an exception it
        raises (a string: the message die() stops with)."""
        class Root:
            def __init__(self, arch):
                self.arch, self.version = arch, None

            def ensure(self):
                o = outcomes[self.arch]
                if isinstance(o, BaseException):
                    raise o
                if o.startswith("die:"):
                    proc.die(o[len("die:"):])
                self.version = o

            def describe(self):
                return "Debian sid mesa-vulkan-drivers %s (%s)" % (self.version, self.arch)

        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(testing.upstream, "SidRoot", Root), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            env = testing.prepare_upstream(self.Fork(recorded), list(outcomes))
        return env, out.getvalue().splitlines()

    def test_the_recorded_version(self):
        env, lines = self.prepare({"amd64": self.RECORDED})
        self.assertEqual(lines, ["test: upstream for amd64: Debian sid mesa-vulkan-drivers "
                                 "26.2.6-1 (amd64)"])
        self.assertEqual(env, {testing.UPSTREAM_ENV: "amd64=26.2.6-1",
                               testing.UNAVAILABLE_ENV: "", testing.BROKEN_ENV: ""})
        self.assertFalse(forklib.Yardstick.from_env("amd64", env, self.RECORDED).moved())

    def test_a_new_version_is_said(self):
        env, lines = self.prepare({"amd64": self.RECORDED, "arm64": "26.3.0-1"})
        moved = [l for l in lines if "is now" in l]
        self.assertEqual(len(moved), 1, lines)
        self.assertTrue(moved[0].startswith(
            "test: sid's Mesa for arm64 is now 26.3.0-1 (recorded 26.2.6-1 in config/fork.ini "
            "[upstream])"), moved)
        self.assertTrue(moved[0].endswith("then record 26.3.0-1 there"), moved)
        self.assertEqual(env[testing.UPSTREAM_ENV], "amd64=26.2.6-1 arm64=26.3.0-1")
        self.assertTrue(forklib.Yardstick.from_env("arm64", env, self.RECORDED).moved())

    def test_what_the_run_cannot_have_skips_and_the_rest_fails(self):
        env, lines = self.prepare({
            "amd64": upstream.Unavailable("root", "unpacking Debian sid packages for amd64 "
                                          "with mmdebstrap needs root here"),
            "arm64": upstream.Unavailable("sid-unreachable",
                                          "sid's index has no mesa-vulkan-drivers for arm64"),
            "riscv64": OSError(28, "No space left on device"),
            "s390x": "die:x.deb: sha256 1234, but the index says 5678"})
        self.assertEqual(lines, [
            "test: sid's Mesa for amd64 cannot be had (unpacking Debian sid packages for amd64 "
            "with mmdebstrap needs root here), so the tests that run it will be listed as "
            "skipped",
            "test: sid's Mesa for arm64 cannot be had (sid's index has no mesa-vulkan-drivers "
            "for arm64), so the tests that run it will be listed as skipped",
            "test: sid's Mesa for riscv64 could not be prepared ([Errno 28] No space left on "
            "device), so the tests that run it will fail",
            "test: sid's Mesa for s390x could not be prepared (x.deb: sha256 1234, but the "
            "index says 5678), so the tests that run it will fail"])
        self.assertEqual(env[testing.UPSTREAM_ENV], "")
        for arch, cause in (("amd64", "root"), ("arm64", "sid-unreachable")):
            ys = forklib.Yardstick.from_env(arch, env, self.RECORDED)
            kind, reason = YardstickPolicy.outcome(ys, lambda: None)
            self.assertEqual(kind, "skip", reason)
            self.assertEqual(forklib.parse_skip(reason)[0], cause, reason)
        for arch in ("riscv64", "s390x"):
            ys = forklib.Yardstick.from_env(arch, env, self.RECORDED)
            kind, reason = YardstickPolicy.outcome(ys, lambda: None)
            self.assertEqual(kind, "fail", reason)


class SidRootOutcomes(NoSkip):
    """upstream.SidRoot.ensure() on a stand-in work directory, its archive
    a stand-in index (no network, no mmdebstrap): which of its failures
    are the run's nature (upstream.Unavailable, a skip) and which are
    faults (a failure)."""

    DEB = b"sid's mesa-vulkan-drivers"

    class Fork:
        def __init__(self, work, arch):
            self.work, self.arch = work, arch
            self.conf = forklib.config()

        def for_arch(self, arch):
            return self

    def ensure(self, entry, euid=0, ready=True, tools=()):
        """prepare_upstream over a real SidRoot whose archive index says
        entry (an upstream.Index, or an exception index() raises); the
        root's apt cache holds DEB as version 26.2.6-1."""
        with tempfile.TemporaryDirectory(dir=os.path.join(forklib.WORK, "tmp")) as work:
            fork = self.Fork(work, "amd64")
            cache = os.path.join(work, "chroot", "sid-amd64", "var", "cache", "apt", "archives")
            os.makedirs(cache)
            with open(os.path.join(cache, "mesa-vulkan-drivers_26.2.6-1_amd64.deb"), "wb") as f:
                f.write(self.DEB)
            stamp = os.path.join(work, "chroot", "sid-amd64", ".mesa-fork-ready")
            open(stamp, "w").close()

            def index(_):
                if isinstance(entry, BaseException):
                    raise entry
                return entry
            with mock.patch.object(upstream, "index", index), \
                    mock.patch.object(upstream, "missing_tools", lambda _: list(tools)), \
                    mock.patch.object(upstream.cross, "root_ready", lambda *a: ready), \
                    mock.patch.object(upstream.cross, "extract_root", lambda *a, **k: None), \
                    mock.patch.object(upstream.os, "geteuid", lambda: euid), \
                    contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                env = testing.prepare_upstream(fork, ["amd64"])
            self.stamp_kept = os.path.exists(stamp)
        ys = forklib.Yardstick.from_env("amd64", env, "26.2.6-1")
        return ys, YardstickPolicy.outcome(ys, lambda: None)

    def entry(self, data=DEB):
        import hashlib
        return upstream.Index({"Version": "26.2.6-1", "SHA256": hashlib.sha256(data).hexdigest(),
                               "Filename": "x"})

    def test_the_index_checksum_verifies_the_root(self):
        ys, outcome = self.ensure(self.entry())
        self.assertEqual((ys.version, outcome), ("26.2.6-1", ("pass", None)))
        self.assertTrue(self.stamp_kept)

    def test_a_checksum_the_index_disagrees_with_fails(self):
        """The mutation 'a checksum flipped in the stand-in sid index'."""
        ys, (kind, reason) = self.ensure(self.entry(b"another package"))
        self.assertEqual(kind, "fail", reason)
        self.assertIn("but the index says", reason)
        # The root that failed its check is made anew next time.
        self.assertFalse(self.stamp_kept)

    def test_a_missing_tool_fails(self):
        ys, (kind, reason) = self.ensure(self.entry(), tools=["mmdebstrap"])
        self.assertEqual(kind, "fail", reason)
        self.assertIn("needs mmdebstrap", reason)

    def test_an_unreachable_archive_skips(self):
        ys, (kind, reason) = self.ensure(upstream.Unavailable(
            "sid-unreachable", "cannot reach the Debian archive"))
        self.assertEqual(kind, "skip", reason)
        self.assertEqual(forklib.parse_skip(reason)[0], "sid-unreachable")

    def index_outcome(self, state_error=None, answers=True, fields=None):
        """upstream.index() itself, its apt stood in for: apt-get update
        failing with state_error (or not), the archive answering a
        connection (or not), apt-cache's fields."""
        class Fork:
            work, arch = "/nonexistent", "amd64"
            conf = forklib.config()

        def private_state(*a, **k):
            if state_error:
                raise upstream.apt.StateError(state_error)
            return "/nonexistent", []
        with mock.patch.object(upstream.apt, "debian_mirror",
                               lambda _: ("http://deb.debian.org/debian", None)), \
                mock.patch.object(upstream.apt, "private_state", private_state), \
                mock.patch.object(upstream.apt, "index_fields", lambda *a: fields or {}), \
                mock.patch.object(upstream, "reachable", lambda uri: answers), \
                contextlib.redirect_stderr(io.StringIO()):
            try:
                return upstream.index(Fork())
            except upstream.Unavailable as e:
                return ("unavailable", e.cause)
            except SystemExit as e:
                return ("fault", str(e.code))

    def test_only_an_archive_that_does_not_answer_is_unreachable(self):
        """apt failing against an archive that answers (an untrusted
        signature, a mirror mid-sync, a lock) is a fault, not a skip."""
        self.assertIsNone(self.index_outcome("E: Failed to fetch", answers=False))
        self.assertEqual(self.index_outcome("E: The repository is not signed.",
                                            answers=True)[0], "fault")
        # An index without the package: sid does not serve the architecture.
        self.assertEqual(self.index_outcome(fields={}), ("unavailable", "sid-unreachable"))
        # A version without its sha256 is a broken index.
        self.assertEqual(self.index_outcome(fields={"Version": "1"})[0], "fault")
        entry = self.index_outcome(fields={"Version": "1", "SHA256": "ab", "Filename": "f"})
        self.assertEqual((entry.version, entry.sha256), ("1", "ab"))

    def test_a_users_run_skips_only_where_the_root_must_be_made(self):
        ys, (kind, reason) = self.ensure(self.entry(), euid=1000, ready=False)
        self.assertEqual(kind, "skip", reason)
        self.assertEqual(forklib.parse_skip(reason)[0], "root")
        ys, outcome = self.ensure(self.entry(), euid=1000, ready=True)
        self.assertEqual(outcome, ("pass", None))
