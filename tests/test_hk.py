# SPDX-License-Identifier: MIT
"""Honeykrisp CDM barriers (HK_LAZY_BARRIER, HK_CDM_BARRIER_MASK), end to end
on the asahi drm-shim: the control streams hk submits, decoded by the shim's
capture (ASAHI_SHIM_CAPTURE), for each synchronization pattern."""

import json
import os
import tempfile
import unittest

from forklib import bin_path, run, shim_env

STOCK = "B:0x000fffff"
MASK = "B:0x000000f0"
SCENARIOS = ("dispatches", "base", "barrier", "chain", "event", "timestamp", "statistics",
             "indirect-fill", "indirect-update", "secondary", "empty")


def capture(scenario, count=4, model="m1max", **env):
    """Runs one scenario under the validation layer; returns the compute
    streams (lists of blocks) it submitted, and the client's stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "cap.jsonl")
        e = shim_env("asahi", ASAHI_SHIM_CAPTURE=log, ASAHI_SHIM_DEVICE=model, **env)
        r = run([bin_path("mesa-fork-scenarios"), "--validate", "--count", str(count),
                 scenario], env=e)
        if r.returncode != 0:
            raise AssertionError("%s failed (%d): %s%s" % (scenario, r.returncode, r.stdout,
                                                          r.stderr[-3000:]))
        cmds = [json.loads(l) for l in open(log)] if os.path.exists(log) else []
    for c in cmds:
        if c["type"] == "compute":
            assert not c["errors"], c
            assert c["terminated"], c
    return [c["blocks"] for c in cmds if c["type"] == "compute"], r.stderr


def launches(stream):
    return [b for b in stream if b.startswith("L")]


class Invariants(unittest.TestCase):
    """What must hold for every scenario, lazy or stock."""

    def test_every_stream_with_a_launch_ends_with_a_barrier(self):
        for sc in SCENARIOS:
            for lazy in ("1", "0"):
                with self.subTest(scenario=sc, HK_LAZY_BARRIER=lazy):
                    streams, _ = capture(sc, HK_LAZY_BARRIER=lazy)
                    for s in streams:
                        self.assertEqual(s[-1], "T", s)
                        if launches(s):
                            self.assertTrue(s[-2].startswith("B:"), s)

    def test_stock_mode_barrier_after_every_launch(self):
        """HK_LAZY_BARRIER=0: exactly one stock barrier right after every launch."""
        for sc in SCENARIOS:
            with self.subTest(scenario=sc):
                streams, _ = capture(sc, HK_LAZY_BARRIER="0")
                for s in streams:
                    for i, b in enumerate(s):
                        if b.startswith("L"):
                            self.assertEqual(s[i + 1], STOCK, s)

    def test_lazy_never_has_more_barriers_than_stock(self):
        for sc in SCENARIOS:
            with self.subTest(scenario=sc):
                lazy, _ = capture(sc)
                stock, _ = capture(sc, HK_LAZY_BARRIER="0")
                n = lambda streams: sum(b.startswith("B") for s in streams for b in s)
                self.assertEqual([len(launches(s)) for s in lazy],
                                 [len(launches(s)) for s in stock])
                self.assertLessEqual(n(lazy), n(stock))


class LazyBarrier(unittest.TestCase):
    def test_dispatches_without_sync_get_one_barrier(self):
        for n in (1, 8, 64):
            with self.subTest(dispatches=n):
                lazy, _ = capture("dispatches", count=n)
                self.assertEqual(lazy, [["L"] * n + [STOCK, "T"]])
                stock, _ = capture("dispatches", count=n, HK_LAZY_BARRIER="0")
                self.assertEqual(stock, [["L", STOCK] * n + ["T"]])

    def test_dispatch_base_is_an_application_dispatch(self):
        lazy, _ = capture("base", count=4)
        self.assertEqual(lazy, [["L"] * 4 + [STOCK, "T"]])

    def test_pipeline_barriers_are_where_the_barriers_go(self):
        streams, _ = capture("barrier")
        self.assertEqual(streams, [["L", STOCK, "T"], ["L", STOCK, "T"]])
        streams, _ = capture("chain", count=5)
        self.assertEqual(streams, [["L", STOCK, "T"]] * 5)

    def test_events_order_the_dispatches(self):
        streams, _ = capture("event")
        first, last = streams[0], streams[-1]
        self.assertEqual(first, ["L", STOCK, "T"])
        self.assertEqual(last, ["L", STOCK, "T"])

    def test_secondary_command_buffers(self):
        streams, _ = capture("secondary", count=3)
        self.assertEqual(streams, [["L"] * 4 + [STOCK, "T"]])
        stock, _ = capture("secondary", count=3, HK_LAZY_BARRIER="0")
        self.assertEqual(stock, [["L", STOCK] * 4 + ["T"]])

    def test_empty_command_buffer_submits_no_compute_stream(self):
        for lazy in ("1", "0"):
            streams, _ = capture("empty", HK_LAZY_BARRIER=lazy)
            self.assertEqual(streams, [])

    def test_indirect_grid_written_by_the_driver_is_flushed_first(self):
        """vkCmdFillBuffer/vkCmdUpdateBuffer are meta dispatches: their write is
        followed by a stock barrier before the indirect launch reads it."""
        for sc in ("indirect-fill", "indirect-update"):
            with self.subTest(scenario=sc):
                streams, _ = capture(sc)
                self.assertEqual(streams, [["L", STOCK, "T"], ["LI", STOCK, "T"]])

    def test_queries_keep_internal_barriers(self):
        """Timestamp and statistics queries add internal launches (query resets,
        counter increments); each keeps its stock barrier in lazy mode."""
        for sc, app in (("timestamp", 2), ("statistics", 2)):
            with self.subTest(scenario=sc):
                lazy, _ = capture(sc, HK_CDM_BARRIER_MASK="0xf0")
                internal = 0
                for s in lazy:
                    for i, b in enumerate(s):
                        if b.startswith("L") and s[i + 1] == STOCK:
                            internal += 1
                total = sum(len(launches(s)) for s in lazy)
                # Only the application's own dispatches may go without a
                # stock barrier right after them.
                self.assertGreaterEqual(internal, total - app, lazy)
                self.assertGreater(total, app, "expected internal launches: %s" % lazy)

    def test_chips_with_an_extra_launch_word(self):
        """G14X (M2 Max, M2 Ultra) launches carry one more word."""
        for model in ("m2max", "m2ultra"):
            with self.subTest(model=model):
                streams, _ = capture("dispatches", count=3, model=model)
                self.assertEqual(streams, [["L"] * 3 + [STOCK, "T"]])

    def test_malformed_knob_is_stock(self):
        streams, err = capture("dispatches", count=3, HK_LAZY_BARRIER="lazy")
        self.assertIn('HK_LAZY_BARRIER="lazy" is not a boolean', err)
        self.assertEqual(streams, [["L", STOCK] * 3 + ["T"]])


class BarrierMask(unittest.TestCase):
    def test_mask_applies_to_application_ordering_only(self):
        streams, _ = capture("dispatches", count=3, HK_CDM_BARRIER_MASK="0xf0")
        self.assertEqual(streams, [["L"] * 3 + [MASK, "T"]])
        streams, _ = capture("indirect-fill", HK_CDM_BARRIER_MASK="0xf0")
        self.assertEqual(streams, [["L", STOCK, "T"], ["LI", MASK, "T"]])

    def test_mask_with_stock_mode(self):
        streams, _ = capture("dispatches", count=3, HK_CDM_BARRIER_MASK="240",
                             HK_LAZY_BARRIER="0")
        self.assertEqual(streams, [["L", MASK] * 3 + ["T"]])

    def test_bits_outside_stock_are_kept_pending(self):
        """A mask with bit 24 is not settled by an internal stock barrier."""
        streams, _ = capture("dispatches", count=2, HK_CDM_BARRIER_MASK="0x010000f0")
        self.assertEqual(streams, [["L", "L", "B:0x010000f0", "T"]])

    def test_bad_masks_warn_and_are_stock(self):
        for bad, why in (("banana", "is not a 32-bit number"),
                         ("0x8000000", "sets bits outside the barrier flags"),
                         ("0x100000000", "is not a 32-bit number")):
            with self.subTest(mask=bad):
                streams, err = capture("dispatches", count=2, HK_CDM_BARRIER_MASK=bad)
                self.assertIn(why, err)
                self.assertEqual(streams, [["L", "L", STOCK, "T"]])

    def test_risky_masks_warn_and_are_used(self):
        for risky in ("0x70", "0x80"):
            with self.subTest(mask=risky):
                streams, err = capture("dispatches", count=2, HK_CDM_BARRIER_MASK=risky)
                self.assertIn("wrong results on some chips", err)
                self.assertEqual(streams, [["L", "L", "B:0x%08x" % int(risky, 16), "T"]])

    def test_default_mask_is_silent(self):
        _, err = capture("dispatches", count=1)
        self.assertNotIn("HK_CDM_BARRIER_MASK", err)



class DispatchProbe(unittest.TestCase):
    """The hardware probe runs on the shim as a smoke test (nothing executes)."""

    def test_prints_stock_lazy_and_mask_rows(self):
        r = run([bin_path("mesa-fork-dispatch-probe"), "--dispatches", "16", "--runs", "1",
                 "--mask", "0xf0"], env=shim_env("asahi"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("driver Honeykrisp", r.stdout)
        rows = [l for l in r.stdout.splitlines() if " us " in l]
        self.assertEqual([l.split("  ")[0] for l in rows],
                         ["stock (HK_LAZY_BARRIER=0)", "lazy (default)", "lazy + mask 0xf0"])

    def test_rejects_bad_arguments(self):
        r = run([bin_path("mesa-fork-dispatch-probe"), "--dispatches", "0"],
                env=shim_env("asahi"))
        self.assertEqual(r.returncode, 64)


if __name__ == "__main__":
    unittest.main()
