# SPDX-License-Identifier: MIT
"""`mesa-fork report` on this machine, which has no GPU: the dry mode on the
drm-shims, its labels and its structure; and, with stand-ins for llama.cpp's
programs, that each knob is turned off for the stock runs and the ratio is
fork over stock."""

import os
import re
import stat
import tempfile
import textwrap
import unittest

import forklib
from forklib import run

# Stand-ins: llama-bench reports 10 t/s when every knob of one driver is
# off (its stock), 11 when only some are, and 12 otherwise;
# test-backend-ops reports two cases and one unsupported op.
FAKE_BENCH = textwrap.dedent("""\
    #!/bin/sh
    ts=12
    [ "$HK_LAZY_BARRIER$HK_MERGE_STREAMS$PANVK_SHARED_TLS$PANVK_WLS_REUSE$ANV_CACHED_COHERENT" \\
      != "" ] && ts=11
    if [ "$HK_LAZY_BARRIER$HK_MERGE_STREAMS" = 00 ] || \\
       [ "$PANVK_SHARED_TLS$PANVK_WLS_REUSE" = 00 ] || \\
       [ "$ANV_CACHED_COHERENT" = 0 ]; then ts=10; fi
    echo "[{\\"avg_ts\\": $ts}]"
    """)
FAKE_OPS = textwrap.dedent("""\
    #!/bin/sh
    echo "  ADD(type=f32,ne=[4,1,1,1]): OK"
    echo "[MUL] ERR = 0.5 > 0.0000001   MUL(type=f32,ne=[4,1,1,1]): FAIL"
    echo "  ROPE(type=f16): not supported [Vulkan0] "
    echo "  Failing tests:"
    echo "    MUL(type=f32,ne=[4,1,1,1])"
    echo "  Backend Vulkan0: FAIL"
    """)


def make_report(*args, env=None):
    """`report` as on a machine without the GPUs (forklib.hide_gpus)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.md")
        r = run(forklib.hide_gpus([forklib.CLI, "report", "--output", out] + list(args)),
                env=env, timeout=600)
        text = open(out).read() if os.path.exists(out) else ""
    return r, text


class DryReport(unittest.TestCase):
    """Without a GPU: any this machine has is hidden (forklib.hide_gpus)."""

    @classmethod
    def setUpClass(cls):
        cls.r, cls.text = make_report()

    def test_written_and_labelled_dry(self):
        self.assertEqual(self.r.returncode, 0, self.r.stderr)
        self.assertIn("(dry run on drm-shim)", self.r.stdout)
        self.assertTrue(self.text.startswith("# mesa-fork report\n\n**DRY RUN on drm-shim"))
        self.assertIn("| mode | dry run on drm-shim |", self.text)
        self.assertIn("| fork | %s |" % forklib.fork_tag()[1:-1], self.text)
        for row in ("kernel", "system", "CPU", "date", "llama.cpp"):
            self.assertRegex(self.text, r"\n\| %s \| \S" % re.escape(row))

    def test_one_section_per_driver_with_its_device_and_probe(self):
        sections = re.split(r"\n## ", self.text)[1:]
        heads = [s.split("\n", 1)[0] for s in sections]
        # No GPU here: first why, per driver, then the dry run on each shim.
        self.assertEqual(heads[0], "Fork drivers without a device here")
        for drv in ("Honeykrisp", "panvk", "ANV"):
            self.assertIn("\n- %s: no device" % drv, sections[0])
        sections = sections[1:]
        heads = heads[1:]
        self.assertEqual(heads, ["Honeykrisp (dry run on drm-shim)", "panvk (dry run on drm-shim)",
                                 "ANV (dry run on drm-shim)", "Fork/stock ratios"])
        probes = ("mesa-fork-dispatch-probe", "mesa-fork-inflight", "mesa-fork-readback-probe")
        for body, probe in zip(sections, probes):
            self.assertIn("driverInfo `Mesa " + forklib.MESA_VERSION, body)
            self.assertIn(forklib.fork_tag(), body)
            # A shim executes nothing, so the data check fails, and says why.
            self.assertIn("### mesa-fork-vkcheck --verify: FAILED (exit 4), as it must on a "
                          "drm-shim", body)
            self.assertIn("### %s: " % probe, body)
            self.assertRegex(body, r"### %s: .* \(exit 0\)" % probe)

    def test_memory_budget_stock_vs_fork_on_hk_and_panvk(self):
        """hk and panvk sections show the probe's first and last memory:
        lines, stock without the extension, the fork with a budget at
        most the heap and a usage grown by about the GiB allocated."""
        sections = dict(s.split("\n", 1) for s in re.split(r"\n## ", self.text)[1:])
        line = re.compile(r"^memory: held=(\d+) heap=(\d+) budget=(\d+|none) "
                          r"usage=(\d+|none)", re.M)
        for head in ("Honeykrisp (dry run on drm-shim)", "panvk (dry run on drm-shim)"):
            body = sections[head]
            self.assertIn("### mesa-fork-va-probe --target-gib 1", body)
            stock = body.split("\nstock (exit 0):", 1)[1].split("\nfork (exit 0):", 1)
            self.assertEqual(len(stock), 2, body)
            stock, fork = [line.findall(t.split("\n### ", 1)[0]) for t in stock]
            self.assertEqual(len(stock), 2, body)
            self.assertEqual(len(fork), 2, body)
            self.assertTrue(all(b == "none" and u == "none" for _, _, b, u in stock), stock)
            (h0, heap, b0, u0), (h1, _, b1, u1) = [[int(x) for x in l] for l in fork]
            self.assertEqual((h0, h1), (0, 1 << 30))
            self.assertLessEqual(max(b0, b1), heap)
            self.assertAlmostEqual(u1 - u0, 1 << 30, delta=64 << 20)
        self.assertNotIn("va-probe", sections["ANV (dry run on drm-shim)"])

    def test_no_ratio_without_llama(self):
        ratios = self.text.split("\n## Fork/stock ratios\n", 1)[1]
        self.assertIn("None: llama.cpp's llama-bench and a model (--model) are needed.", ratios)
        self.assertIn("(dry run: these numbers come from a drm-shim and mean nothing)", ratios)


class ReportWithLlama(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        for name, body in (("llama-bench", FAKE_BENCH), ("test-backend-ops", FAKE_OPS)):
            path = os.path.join(cls.tmp.name, name)
            with open(path, "w") as f:
                f.write(body)
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        model = os.path.join(cls.tmp.name, "m.gguf")
        open(model, "w").close()
        # The user's own knobs must not leak into either setting.
        env = dict(os.environ, HK_LAZY_BARRIER="0", ANV_CACHED_COHERENT="0",
                   PANVK_WLS_REUSE="0")
        cls.r, cls.text = make_report("--llama-bin", cls.tmp.name, "--model", model, env=env)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_ratio_is_fork_over_stock_per_driver(self):
        self.assertEqual(self.r.returncode, 0, self.r.stderr)
        for drv in ("Honeykrisp", "panvk", "ANV"):
            for what in ("prompt processing t/s", "token generation t/s"):
                self.assertIn("| %s | %s | 10.00 | 12.00 | 1.200 |" % (drv, what), self.text)

    def test_backend_ops_counted_stock_and_fork(self):
        # Stock is every knob of config/fork.ini [stock] for the driver.
        stock = forklib.config()["stock"]
        for drv in ("asahi", "panfrost", "intel"):
            self.assertIn("| stock (%s) | 0 | 2 | 1 | 1 |" % " ".join(stock[drv].split()),
                          self.text)
        self.assertIn("HK_LAZY_BARRIER=0", stock["asahi"])
        self.assertIn("ANV_CACHED_COHERENT=0", stock["intel"])
        self.assertEqual(self.text.count("| fork | 0 | 2 | 1 | 1 |"), 3)

    def test_a_hanging_program_is_killed_and_reported(self):
        from mesafork.report import sh
        # 5 s for sh to start and print, on a machine the rest of the suite
        # loads; it then waits for a minute unless killed.
        rc, out, err = sh(["sh", "-c", "echo partial; sleep 60 & wait"], timeout=5)
        self.assertEqual((rc, out), (124, "partial\n"))
        self.assertIn("killed after 5 s", err)

    def test_missing_model_is_a_clear_error(self):
        r, _ = make_report("--model", "/nonexistent.gguf")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--model /nonexistent.gguf: no such file", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    unittest.main()
