# SPDX-License-Identifier: MIT
"""The asahi drm-shim against the Honeykrisp real Macs run.

The shim refuses what the mainline drm/asahi kernel refuses, and its
capture decodes the command streams; every other test runs the fork's own
Honeykrisp on it, so a rule the fork happens never to break, or a stream
only the fork writes the way the decoder expects, would go unnoticed.
Here the newest Mesa Debian ships (sid's binary mesa-vulkan-drivers,
whatever version sid serves today; `bin/mesa-fork test` puts it in
.work/chroot/sid-ARCH, bin/mesafork/upstream.py) runs every
mesa-fork-scenarios scenario and mesa-fork-vkcheck under the validation
layer on the fork's shim, on every architecture under test: no request
refused, every command decoded, no validation message.

A refusal here is a shim bug (fix the shim) or an upstream bug (say so in
docs/changes/hk-uapi.md with the kernel rule it breaks)."""

import json
import os
import tempfile
import unittest

import forklib
import test_hk
from mesafork import testing, upstream

SHIM_LINE = "drm-shim:"


def roots():
    """(Target, SidRoot with sid's Mesa) of every architecture under test."""
    if testing.UPSTREAM_ENV not in os.environ:
        forklib.skip_optional("run through 'bin/mesa-fork test', which makes and checks sid's "
                              "roots first (%s)" % testing.UPSTREAM_ENV)
    verified = dict(v.split("=", 1) for v in os.environ[testing.UPSTREAM_ENV].split())
    out = []
    for arch in forklib.tested_arches():
        t = forklib.target(arch)
        root = upstream.SidRoot(t.fork)
        info = os.path.join(root.root, ".mesa-fork-upstream")
        if arch not in verified or not os.path.exists(info):
            raise AssertionError("no root with sid's Mesa for %s verified in this run: "
                                 "'bin/mesa-fork test' makes and checks it in %s before the "
                                 "tests run (see its output)" % (arch, root.root))
        with open(info) as f:
            root.version, root.sha256 = f.read().split()
        if root.version != verified[arch]:
            raise AssertionError("%s holds %s, but this run verified %s"
                                 % (info, root.version, verified[arch]))
        out.append((t, root))
    return out


def run_on_sid(t, root, argv, **env):
    """argv (a program of t's prefix) on sid's Honeykrisp over t's asahi
    shim with its capture on; returns (process, capture lines)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "cap.jsonl")
        e = root.shim_env(t.prefix, t.conf, "asahi", ASAHI_SHIM_CAPTURE=log, **env)
        r = root.run_in([t.bin_path(argv[0])] + list(argv[1:]), env=e, capture=True,
                        timeout=1200)
        lines = []
        if os.path.exists(log):
            with open(log) as f:
                lines = [json.loads(l) for l in f if l.strip()]
    return r, lines


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
        """The device is sid's driver (driverInfo names sid's version), not
        the fork's: an ICD path that fell back to the fork would make every
        other test here compare the fork with itself."""
        for t, root in roots():
            with self.subTest(arch=t.arch):
                r, _ = run_on_sid(t, root, ["mesa-fork-vkcheck", "--list"])
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                devs = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
                self.assertEqual(len(devs), 1, r.stdout)
                self.assertEqual(devs[0]["driver_kind"], "asahi")
                upstream_version = root.version.split(":")[-1].split("-")[0]
                self.assertTrue(devs[0]["info"].startswith("Mesa " + upstream_version),
                                (devs[0]["info"], root.version))
                self.assertNotIn("mesa-fork", devs[0]["info"])

    def test_every_scenario(self):
        for t, root in roots():
            listed = forklib.run(t.command([t.bin_path("mesa-fork-scenarios"), "--list"]))
            names = listed.stdout.split()
            self.assertGreater(len(names), 20, listed.stderr)
            for sc in names:
                with self.subTest(arch=t.arch, scenario=sc):
                    r, lines = run_on_sid(t, root, ["mesa-fork-scenarios", "--validate",
                                                    "--count", "4", sc])
                    # "empty" submits an empty command buffer: nothing to send.
                    self.assert_clean(r, lines, sc, commands=sc != "empty")
                    self.assertIn("validation messages: 0", r.stdout)

    def test_vkcheck(self):
        for t, root in roots():
            with self.subTest(arch=t.arch):
                r, lines = run_on_sid(t, root, ["mesa-fork-vkcheck", "--validate"])
                self.assert_clean(r, lines, "mesa-fork-vkcheck")
                self.assertIn("validation on, 0 validation message(s)", r.stdout)


class ScenarioList(unittest.TestCase):
    def test_the_program_lists_what_the_tests_run(self):
        """mesa-fork-scenarios --list (what the test above runs on sid's
        driver) and test_hk's list (what runs on the fork's) are the same."""
        r = forklib.run([forklib.bin_path("mesa-fork-scenarios"), "--list"])
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout.split(), list(test_hk.SCENARIOS))
        bad = forklib.run([forklib.bin_path("mesa-fork-scenarios"), "no-such-scenario"],
                          env=forklib.shim_env("asahi"))
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("unknown scenario", bad.stderr)


class SidsAnv(unittest.TestCase):
    """The ANV of Debian sid's Mesa on the fork's intel shim, stub Meteor
    Lake and Arrow Lake (what `bin/mesa-fork memtypes` prints as
    "upstream"). Upstream's i915 backend gives integrated parts without an
    LLC a write-combined type and a cached, non-coherent one, and no
    cached + coherent type: the fork's ANV_CACHED_COHERENT type is not
    upstream (patches/README.md)."""

    def test_no_cached_coherent_type_on_i915_mtl_and_arl(self):
        if "amd64" not in forklib.tested_arches():
            forklib.skip_optional("the intel shim is built for amd64 only")
        t, root = [(t, r) for t, r in roots() if t.arch == "amd64"][0]
        for plat in ("mtl", "arl"):
            with self.subTest(platform=plat):
                env = root.shim_env(t.prefix, t.conf, "intel", INTEL_STUB_GPU_PLATFORM=plat)
                r = root.run_in([t.bin_path("mesa-fork-memtypes")], env=env, capture=True,
                                timeout=600)
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                # The only refusal allowed is the probe 26.x makes on purpose:
                # a zero-size GEM_USERPTR, which i915 answers -EINVAL.
                refusals = [l for l in r.stderr.splitlines() if "refused" in l]
                for l in refusals:
                    self.assertIn("GEM_USERPTR refused: zero size", l)
                types = [set(f["flags"].split("|")) for f in map(json.loads, (
                    l for l in r.stdout.splitlines() if l.startswith("{")))
                    if f["kind"] == "type"]
                visible = [ty for ty in types if "HOST_VISIBLE" in ty]
                self.assertTrue(visible, r.stdout)
                self.assertIn(True, ["HOST_COHERENT" in ty and "HOST_CACHED" not in ty
                                     for ty in visible], visible)
                self.assertIn(True, ["HOST_CACHED" in ty and "HOST_COHERENT" not in ty
                                     for ty in visible], visible)
                self.assertNotIn(True, ["HOST_CACHED" in ty and "HOST_COHERENT" in ty
                                        for ty in visible], visible)


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
