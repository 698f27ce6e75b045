# SPDX-License-Identifier: MIT
"""Honeykrisp CDM barriers (HK_LAZY_BARRIER, HK_CDM_BARRIER_MASK) and merged
compute control streams (HK_MERGE_STREAMS), end to end on the asahi drm-shim:
the control streams hk submits, decoded by the shim's capture
(ASAHI_SHIM_CAPTURE), for each synchronization pattern.

Three settings are compared: stock (HK_LAZY_BARRIER=0: a barrier after every
launch, a stream per pipeline barrier), lazy (HK_MERGE_STREAMS=0: barriers
only where Vulkan asks, still a stream per pipeline barrier) and the default,
lazy + merge (one stream across pipeline barriers between compute work)."""

import json
import os
import tempfile
import unittest

import forklib
from forklib import HOST, bin_path, run, shim_env

STOCK = "B:0x000fffff"
MASK = "B:0x000000f0"
SCENARIOS = ("dispatches", "base", "barrier", "chain", "event", "timestamp", "statistics",
             "indirect-fill", "indirect-update", "indirect-dispatch", "secondary", "empty", "exec-barrier",
             "exec-barrier2", "empty-barrier2", "sync2", "events2", "render", "host",
             "meta", "timestamp-barrier", "mixed", "subpass-query", "reset-event",
             "query-copy", "query-barrier", "timeline-waits", "submit-oom",
             "subpass-queries")
STOCK_ENV = {"HK_LAZY_BARRIER": "0"}
LAZY_ENV = {"HK_MERGE_STREAMS": "0"}
SETTINGS = (("stock", STOCK_ENV), ("lazy", LAZY_ENV), ("lazy + merge", {}))


def capture(scenario, count=4, model="m1max", target=HOST, **env):
    """Runs one scenario under the validation layer; returns the compute
    streams (lists of blocks) it submitted, and the client's stderr."""
    commands, err = capture_commands(scenario, count, model, target, **env)
    return [blocks for kind, blocks in commands if kind == "compute"], err


def capture_commands(scenario, count=4, model="m1max", target=HOST, **env):
    """Like capture(), but returns every kernel command in submission order:
    ("compute", blocks) or ("render", None). target: the architecture's
    build (forklib.Target) that runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "cap.jsonl")
        e = target.shim_env("asahi", ASAHI_SHIM_CAPTURE=log, ASAHI_SHIM_DEVICE=model, **env)
        r = target.run([target.bin_path("mesa-fork-scenarios"), "--validate", "--count",
                        str(count), scenario], env=e)
        if r.returncode != 0:
            raise AssertionError("%s failed (%d): %s%s" % (scenario, r.returncode, r.stdout,
                                                          r.stderr[-3000:]))
        # The shim writes a line when the driver makes its queue: no file
        # means nothing was captured, and every check on it would be vacuous
        if not os.path.exists(log):
            raise AssertionError("%s: the shim wrote no capture (%s)" % (scenario, log))
        with open(log) as f:
            text = f.read()
        if not text.strip():
            raise AssertionError("%s: the capture is empty, not even the queue" % scenario)
    return kernel_commands(text), r.stderr


def kernel_commands(capture_text):
    """The kernel commands of an ASAHI_SHIM_CAPTURE file, in submission order:
    ("compute", blocks) or ("render", None); every compute stream decoded
    without error and terminated."""
    cmds = [json.loads(l) for l in capture_text.splitlines() if l.strip()]
    for c in cmds:
        # Explicit failures: a bare assert vanishes under python -O
        if c["type"] == "compute" and c["errors"]:
            raise AssertionError("a compute stream did not decode: %s" % c)
        if c["type"] == "compute" and not c["terminated"]:
            raise AssertionError("a compute stream is not terminated: %s" % c)
    return [(c["type"], c["blocks"] if c["type"] == "compute" else None)
            for c in cmds if c["type"] in ("compute", "render")]


def launches(stream):
    return [b for b in stream if b.startswith("L")]


def barriers(streams):
    return sum(b.startswith("B") for s in streams for b in s)


def flat(streams):
    """Every block of every stream in order, stream ends dropped."""
    return [b for s in streams for b in s if b != "T"]


_cache = {}


def cached(scenario, count=4, **env):
    """capture() of the default model, remembered for this test run."""
    key = (scenario, count, tuple(sorted(env.items())))
    if key not in _cache:
        _cache[key] = capture(scenario, count, **env)[0]
    return _cache[key]


class Invariants(unittest.TestCase):
    """What must hold for every scenario, in each of the three settings."""

    def test_every_stream_with_a_launch_ends_with_a_barrier(self):
        for sc in SCENARIOS:
            for name, env in SETTINGS:
                with self.subTest(scenario=sc, setting=name):
                    for s in cached(sc, **env):
                        self.assertEqual(s[-1], "T", s)
                        self.assertNotIn("T", s[:-1], s)
                        if launches(s):
                            self.assertTrue(s[-2].startswith("B:"), s)

    def test_stock_mode_barrier_after_every_launch(self):
        """HK_LAZY_BARRIER=0: exactly one stock barrier right after every launch."""
        for sc in SCENARIOS:
            with self.subTest(scenario=sc):
                for s in cached(sc, **STOCK_ENV):
                    for i, b in enumerate(s):
                        if b.startswith("L"):
                            self.assertEqual(s[i + 1], STOCK, s)

    def test_three_settings_side_by_side(self):
        """The same launches in the same order in all three settings; lazy
        never has more barriers than stock; merging never adds a barrier or
        a stream, and without it the streams are stock's."""
        for sc in SCENARIOS:
            with self.subTest(scenario=sc):
                stock, lazy, merged = (cached(sc, **env) for _, env in SETTINGS)
                seq = lambda streams: [b for b in flat(streams) if b.startswith("L")]
                self.assertEqual(seq(lazy), seq(stock))
                self.assertEqual(seq(merged), seq(stock))
                self.assertEqual([len(launches(s)) for s in lazy],
                                 [len(launches(s)) for s in stock])
                self.assertLessEqual(barriers(lazy), barriers(stock))
                self.assertEqual(barriers(merged), barriers(lazy))
                self.assertLessEqual(len(merged), len(lazy))

    def test_merged_streams_are_the_lazy_streams_joined(self):
        """Merging only joins consecutive lazy streams: the blocks, barriers
        included, are the same in the same order, so every former seam keeps
        the barrier that ended its stream."""
        for sc in SCENARIOS:
            with self.subTest(scenario=sc):
                self.assertEqual(flat(cached(sc)), flat(cached(sc, **LAZY_ENV)))


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
        self.assertEqual(cached("barrier", **LAZY_ENV), [["L", STOCK, "T"]] * 2)
        self.assertEqual(cached("chain", 5, **LAZY_ENV), [["L", STOCK, "T"]] * 5)

    def test_every_kind_of_pipeline_barrier_orders(self):
        """A sync1 barrier with stages only (an execution dependency; the
        runtime passes it on as a memory barrier without accesses), the same
        in sync2, a sync2 buffer barrier, and a sync2 barrier with no
        structures at all (hk does not look inside: every barrier orders)."""
        for sc in ("barrier", "exec-barrier", "exec-barrier2", "sync2", "empty-barrier2"):
            with self.subTest(scenario=sc):
                self.assertEqual(cached(sc, **STOCK_ENV), [["L", STOCK, "T"]] * 2)
                self.assertEqual(cached(sc, **LAZY_ENV), [["L", STOCK, "T"]] * 2)
                self.assertEqual(cached(sc), [["L", STOCK, "L", STOCK, "T"]])

    def test_events_order_the_dispatches(self):
        streams, _ = capture("event")
        first, last = streams[0], streams[-1]
        self.assertEqual(first, ["L", STOCK, "T"])
        self.assertEqual(last, ["L", STOCK, "T"])

    def test_set_and_wait_events2_each_end_the_stream(self):
        """dispatch, vkCmdSetEvent2, dispatch, vkCmdWaitEvents2, dispatch: the
        three application launches are in three streams, in every setting.
        The middle stream starts with the event write (an internal launch
        between two stock barriers)."""
        for name, env in SETTINGS:
            with self.subTest(setting=name):
                streams = cached("events2", **env)
                self.assertEqual(streams[0], ["L", STOCK, "T"])
                self.assertEqual(streams[1][-3:], ["L", STOCK, "T"])
                self.assertEqual(streams[-1], ["L", STOCK, "T"])
                self.assertEqual(len(streams), 3)

    def test_render_pass_ends_the_compute_stream(self):
        """dispatch, render pass, dispatch, barrier, dispatch: the first
        dispatch runs before the render command, the others after it."""
        for name, env in SETTINGS:
            with self.subTest(setting=name):
                cmds, _ = capture_commands("render", **env)
                kinds = [k for k, _ in cmds]
                self.assertEqual(kinds.count("render"), 1, cmds)
                r = kinds.index("render")
                before = [b for k, s in cmds[:r] if k == "compute" for b in launches(s)]
                after = [b for k, s in cmds[r + 1:] if k == "compute" for b in launches(s)]
                self.assertEqual((len(before), len(after)), (1, 2), cmds)
        cmds, _ = capture_commands("render")
        self.assertEqual(cmds[-1], ("compute", ["L", STOCK, "L", STOCK, "T"]))

    def test_barrier_to_the_host_before_the_fence(self):
        for name, env in SETTINGS:
            with self.subTest(setting=name):
                self.assertEqual(cached("host", **env), [["L", STOCK, "T"]])

    def test_secondary_command_buffers(self):
        streams, _ = capture("secondary", count=3)
        self.assertEqual(streams, [["L"] * 4 + [STOCK, "T"]])
        stock, _ = capture("secondary", count=3, HK_LAZY_BARRIER="0")
        self.assertEqual(stock, [["L", STOCK] * 4 + ["T"]])

    def test_empty_command_buffer_submits_no_compute_stream(self):
        for name, env in SETTINGS:
            with self.subTest(setting=name):
                self.assertEqual(cached("empty", **env), [])

    def test_meta_dispatches_keep_their_barrier(self):
        """fill, dispatch, copy, dispatch, update with nothing between them:
        each transfer is a meta dispatch followed by a stock barrier, which
        also orders the application dispatch before it, so the stream needs
        no barrier of its own at the end. A meta dispatch treated as an
        application one would leave only the final barrier."""
        for name, env in SETTINGS[1:]:
            with self.subTest(setting=name):
                self.assertEqual(cached("meta", **env),
                                 [["L", STOCK, "L", "L", STOCK, "L", "L", STOCK, "T"]])
        self.assertEqual(cached("meta", **STOCK_ENV), [["L", STOCK] * 5 + ["T"]])

    def test_indirect_grid_written_by_the_driver_is_flushed_first(self):
        """vkCmdFillBuffer/vkCmdUpdateBuffer write the grid with a meta
        dispatch. With a mask that tells the two apart, the meta dispatch is
        followed by a stock barrier of its own, and only the application's
        indirect launch is ordered with the mask; merged, the stock barrier
        sits between the write and the launch that reads it."""
        for sc in ("indirect-fill", "indirect-update"):
            with self.subTest(scenario=sc):
                self.assertEqual(cached(sc, HK_CDM_BARRIER_MASK="0xf0", **LAZY_ENV),
                                 [["L", STOCK, "T"], ["LI", MASK, "T"]])
                self.assertEqual(cached(sc, HK_CDM_BARRIER_MASK="0xf0"),
                                 [["L", STOCK, "LI", MASK, "T"]])

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
                streams, _ = capture("chain", count=3, model=model)
                self.assertEqual(streams, [["L", STOCK] * 3 + ["T"]])

    def test_malformed_knob_is_stock(self):
        streams, err = capture("dispatches", count=3, HK_LAZY_BARRIER="lazy")
        self.assertIn('HK_LAZY_BARRIER="lazy" is not a boolean', err)
        self.assertEqual(streams, [["L", STOCK] * 3 + ["T"]])

    def test_nobarrier_perftest_keeps_the_ordering_in_stream(self):
        """HK_PERFTEST=nobarrier drops the stream ends at pipeline barriers;
        the pending barrier is still emitted where the barrier was."""
        for merge in ("0", "1"):
            with self.subTest(HK_MERGE_STREAMS=merge):
                streams, _ = capture("chain", count=3, HK_PERFTEST="nobarrier",
                                     HK_MERGE_STREAMS=merge)
                self.assertEqual(streams, [["L", STOCK] * 3 + ["T"]])
                # Kept open across barriers, the barriers there are seams:
                # the stock bits whatever the mask, the mask at the end.
                streams, _ = capture("chain", count=3, HK_PERFTEST="nobarrier",
                                     HK_MERGE_STREAMS=merge, HK_CDM_BARRIER_MASK="0xf0")
                self.assertEqual(streams, [["L", STOCK, "L", STOCK, "L", MASK, "T"]])


def strong(block):
    """A barrier with every stock bit (HK_CDM_BARRIER_MASK may add bits)."""
    return block.startswith("B:") and int(block[2:], 16) & 0xfffff == 0xfffff


def separated_gaps(streams):
    """For the launches of a submission in order, the indices i such that
    launch i and launch i + 1 are separated by a kernel command boundary or
    by a barrier with the stock bits; and the launch count."""
    gaps, n, strong_since = set(), 0, False
    for s in streams:
        new_stream = True
        for b in s:
            if b.startswith("L"):
                if n and (new_stream or strong_since):
                    gaps.add(n - 1)
                n += 1
                new_stream = strong_since = False
            elif strong(b):
                strong_since = True
    return gaps, n


# Every combination of the three knobs of the seam rule.
PERFTEST = (("", {}), ("nobarrier", {"HK_PERFTEST": "nobarrier"}))
LAZY = (("lazy", {}), ("stock", {"HK_LAZY_BARRIER": "0"}))
MASKS = (("stock mask", {}), ("0xf0", {"HK_CDM_BARRIER_MASK": "0xf0"}),
         ("0x1000f0", {"HK_CDM_BARRIER_MASK": "0x1000f0"}))


# The ordering points each scenario's own API sequence asks for (count 4),
# written down by hand from src/scenarios/scenarios.c and the Vulkan rules
# of each barrier's stages: launch i and launch i + 1 must be separated
# (separated_gaps), whatever the knobs. Read from the application's
# commands, not from the driver's output, so that a sync point lost in
# every mode at once still fails; the driver may separate more. Launches are the driver's, so a
# transfer (fill, copy, update) or a query write counts as one; the indices
# say which.
APP_ORDERING = {
    "dispatches": set(), "base": set(),        # four dispatches, nothing between
    "barrier": {0},                            # dispatch, barrier, dispatch
    "chain": {0, 1, 2},                        # a barrier between each of four
    # dispatch, vkCmdSetEvent (a launch that writes the event after the
    # dispatch), vkCmdWaitEvents, dispatch
    "event": {0, 1},
    # dispatch, set (a launch), dispatch, wait, dispatch: the set after the
    # first, the last after the wait
    "events2": {0, 2},
    # dispatch, vkCmdResetEvent (a launch, after the first), dispatch: the
    # reset orders nothing after it
    "reset-event": {0},
    # the fill / update / argument writer, a barrier to DRAW_INDIRECT, the
    # indirect dispatch
    "indirect-fill": {0}, "indirect-update": {0}, "indirect-dispatch": {0},
    "secondary": set(),                        # four in a secondary, one after
    "empty": set(),
    "exec-barrier": {0}, "exec-barrier2": {0}, "sync2": {0},
    # an empty VkDependencyInfo defines no dependency: the driver may
    # separate the dispatches (the oracle does), the application asked
    # for nothing
    "empty-barrier2": set(),
    # dispatch, clear pass, dispatch, barrier, dispatch: only the barrier
    # (the pass is a render command of its own, which separates the first
    # two anyway)
    "render": {1},
    "host": set(), "timeline-waits": set(),    # one dispatch
    "submit-oom": {0, 1, 2},                   # four dispatches, a barrier between each
    # fill, dispatch, copy, dispatch, update on ranges of their own:
    # nothing is asked
    "meta": set(),
    # four rounds of: dispatch, a compute-to-compute barrier, fill (a
    # transfer, which that barrier does not order), a transfer-to-indirect
    # barrier, the indirect dispatch, a barrier to the next round's fill
    # and dispatch: in round r (launches 3r, 3r + 1, 3r + 2) the fill
    # before the indirect dispatch (3r + 1) and the indirect dispatch
    # before the next round (3r + 2); the first dispatch comes before the
    # indirect one through 3r + 1
    "mixed": {1, 2, 4, 5, 7, 8, 10},
    # four query writes, then the two dispatches: nothing between them;
    # with a barrier between them (launches 4 and 5)
    "timestamp": set(), "timestamp-barrier": {4},
    # reset, dispatch, timestamp, copy of the timestamp: the copy (launch
    # 3) reads what the dispatch's command writes when it ends
    "query-copy": {2},
    # The dispatches of these cannot be told from the query writes in the
    # capture (blocks carry no grid): what they ask for is written down by
    # QueriesAndEvents and SubpassQueries, stream by stream.
    "statistics": set(), "subpass-query": set(), "subpass-queries": set(),
    "query-barrier": set(),
}


def ordering_check(sc, oracle_streams, streams):
    """Raises unless streams (a knob setting's capture of scenario sc)
    separates every launch the oracle (HK_MERGE_STREAMS=0, lazy) and the
    hand-written APP_ORDERING separate, has the oracle's launch count,
    and ends each stream with a barrier and its terminator."""
    oracle, n = separated_gaps(oracle_streams)
    if APP_ORDERING[sc] - oracle:
        raise AssertionError("%s: the oracle lacks the ordering points %s the application "
                             "asks for: %s" % (sc, sorted(APP_ORDERING[sc] - oracle),
                                               oracle_streams))
    oracle |= APP_ORDERING[sc]
    got, m = separated_gaps(streams)
    if m != n:
        raise AssertionError("%s: %d launches, the oracle %d: %s" % (sc, m, n, streams))
    if oracle - got:
        raise AssertionError("%s: launches %s not separated: %s" % (sc, sorted(oracle - got),
                                                                   streams))
    for st in streams:
        if st[-1] != "T" or (launches(st) and not st[-2].startswith("B:")):
            raise AssertionError("%s: a stream not ended by a barrier and its terminator: "
                                 "%s" % (sc, st))


class KnobMatrix(unittest.TestCase):
    """HK_PERFTEST=nobarrier, HK_LAZY_BARRIER and HK_CDM_BARRIER_MASK in
    every combination, on every scenario: wherever the application asked
    for ordering, a kernel command boundary or a barrier with the stock bits
    lies between the launches. The reduced masks reported correct were
    measured with a boundary after them (lab notes of github
    joshuaswarren/mesa-1: 0x178, 0x1f8 and 0xf0178 read stale data on a
    build without stream splitting), so a reduced mask may never be all
    that separates them. Where the application asked for ordering is read
    from HK_MERGE_STREAMS=0 with lazy barriers: every ordering point ends
    a stream there."""

    def test_the_hand_written_ordering_points_cover_every_scenario(self):
        self.assertEqual(sorted(APP_ORDERING), sorted(SCENARIOS))

    def test_every_ordering_point_has_a_boundary_or_the_stock_bits(self):
        for sc in SCENARIOS:
            for pname, penv in PERFTEST:
                for lname, lenv in LAZY:
                    for mname, menv in MASKS:
                        env = dict(penv, **lenv, **menv)
                        with self.subTest(scenario=sc, perftest=pname, barrier=lname,
                                          mask=mname):
                            ordering_check(sc, cached(sc, **LAZY_ENV), cached(sc, **env))

    def test_a_sync_point_lost_in_every_mode_fails(self):
        """The mutation the hand-written points are for: the barrier of
        'chain' between its second and third dispatch gone from the oracle
        and the mode alike (as a driver change dropping it everywhere
        would) passes the comparison with the oracle, not the check."""
        def merged(streams, at):
            flat_ = [b for s in streams for b in s[:-1]]
            cut = [i for i, b in enumerate(flat_) if b.startswith("L")][at]
            # the stream boundary and stock barrier before launch `at` gone
            head = [b for b in flat_[:cut] if b != "T"]
            while head and head[-1].startswith("B:"):
                head.pop()
            return [head + flat_[cut:] + ["T"]]
        good = cached("chain", **LAZY_ENV)
        ordering_check("chain", good, good)
        lost = merged(good, 2)
        self.assertEqual(separated_gaps(lost), ({0, 1, 2} - {1}, 4), lost)
        with self.assertRaises(AssertionError):
            ordering_check("chain", lost, lost)

    def test_nobarrier_stock_mode_with_a_reduced_mask(self):
        """HK_PERFTEST=nobarrier HK_LAZY_BARRIER=0 HK_CDM_BARRIER_MASK=0xf0:
        each dispatch keeps its masked barrier, and each pipeline barrier,
        which no longer ends the stream, adds one with the stock bits."""
        streams = cached("chain", 3, HK_PERFTEST="nobarrier", HK_LAZY_BARRIER="0",
                         HK_CDM_BARRIER_MASK="0xf0")
        self.assertEqual(streams, [["L", MASK, STOCK] * 2 + ["L", MASK, "T"]])
        # With the stock mask nothing is added: the stock streams.
        self.assertEqual(cached("chain", 3, HK_PERFTEST="nobarrier", HK_LAZY_BARRIER="0"),
                         [["L", STOCK] * 3 + ["T"]])


class QueriesAndEvents(unittest.TestCase):
    """Synchronization commands and query commands next to compute work."""

    def test_reset_event_ends_the_stream(self):
        """dispatch, vkCmdResetEvent, dispatch: the reset is a synchronization
        command like vkCmdSetEvent. The first dispatch's stream ends with its
        barrier; the event's write starts the next stream, after a flush."""
        for name, env in SETTINGS:
            with self.subTest(setting=name):
                self.assertEqual(cached("reset-event", **env),
                                 [["L", STOCK, "T"],
                                  [STOCK, "L", STOCK, "L", STOCK, "T"]])

    def test_timestamp_is_copied_from_a_later_command(self):
        """dispatch, vkCmdWriteTimestamp, vkCmdCopyQueryPoolResults: the
        timestamp is written when its kernel command ends, so the copy runs
        in a later command, in every setting."""
        for name, env in SETTINGS:
            with self.subTest(setting=name):
                with tempfile.TemporaryDirectory() as tmp:
                    log = os.path.join(tmp, "cap.jsonl")
                    e = shim_env("asahi", ASAHI_SHIM_CAPTURE=log, **env)
                    r = run([bin_path("mesa-fork-scenarios"), "--validate", "query-copy"],
                            env=e)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    with open(log) as f:
                        cmds = [json.loads(l) for l in f]
                compute = [c for c in cmds if c["type"] == "compute"]
                stamped = [i for i, c in enumerate(compute) if c["ts_end"]]
                self.assertEqual(len(stamped), 1, compute)
                after = compute[stamped[0] + 1:]
                self.assertEqual([c["blocks"] for c in after], [["L", STOCK, "T"]])
                # The stamped command holds the dispatch and the query reset.
                self.assertEqual(compute[stamped[0]]["blocks"][-3:], ["L", STOCK, "T"])

    def test_end_query_then_barrier_then_copy(self):
        """A compute-invocation query around a dispatch, a pipeline barrier
        right after vkCmdEndQuery, a dispatch, the copy of the result:
        merged, all of it is one stream. The query's availability write is
        flushed before (the stock barrier before it orders the dispatch in
        the query) and after; the copy, a driver-internal launch, needs no
        barrier before it: nothing the second dispatch writes is read by
        it, so only the application's barrier could order them, and there
        is none. Each W below is a write of hk_queue_write."""
        W = [STOCK, "L", STOCK]
        reset = W * 3             # availability and the 64-bit report
        count = ["L", STOCK]      # the invocation counter's increment
        expect = reset + count + ["L"] + W + count + ["L", "L", STOCK, "T"]
        self.assertEqual(cached("query-barrier"), [expect])
        # Not merged, the pipeline barrier is a stream end: the same blocks.
        lazy = cached("query-barrier", **LAZY_ENV)
        self.assertEqual(len(lazy), 2)
        self.assertEqual(flat(lazy), flat([expect]))

    def test_a_query_in_a_subpass_ends_at_its_barrier(self):
        """Inside a render pass: clear, compute-invocation query (its write
        opens a compute stream behind the open graphics one), self-dependency
        barrier, clear, query. The barrier ends that compute stream, so the
        second query's write goes behind the second clear, not before it."""
        for name, env in SETTINGS:
            with self.subTest(setting=name):
                cmds, _ = capture_commands("subpass-queries", **env)
                kinds = [k for k, _ in cmds]
                renders = [i for i, k in enumerate(kinds) if k == "render"]
                self.assertEqual(len(renders), 2, cmds)
                between = cmds[renders[0] + 1:renders[1]]
                self.assertEqual([len(launches(s)) for _, s in between], [1], cmds)
                self.assertEqual(cmds[renders[1] + 1][0], "compute", cmds)
                self.assertEqual(cmds[renders[1] + 1][1][:3], [STOCK, "L", STOCK], cmds)


class MergedStreams(unittest.TestCase):
    """HK_MERGE_STREAMS: what still ends a compute stream, and the knob."""

    def test_pipeline_barriers_between_compute_work_do_not_end_the_stream(self):
        self.assertEqual(cached("barrier"), [["L", STOCK, "L", STOCK, "T"]])
        self.assertEqual(cached("chain", 5), [["L", STOCK] * 5 + ["T"]])
        self.assertEqual(cached("mixed", 3),
                         [["L", STOCK, "L", STOCK, "LI", STOCK] * 3 + ["T"]])
        self.assertEqual(len(cached("mixed", 3, **LAZY_ENV)), 9)

    def test_stream_count_per_scenario(self):
        """Streams that must stay apart: events (set, wait), timestamps,
        render passes; pipeline barriers between compute work join."""
        expect = {"barrier": 1, "chain": 1, "exec-barrier": 1, "sync2": 1,
                  "indirect-fill": 1, "indirect-update": 1, "mixed": 1,
                  "event": 3, "events2": 3, "timestamp": 2,
                  "timestamp-barrier": 2, "host": 1, "meta": 1}
        for sc, n in expect.items():
            with self.subTest(scenario=sc):
                self.assertEqual(len(cached(sc)), n, cached(sc))

    def test_no_launch_overtakes_a_stream_queued_behind_its_stream(self):
        """A subpass self-dependency barrier ends the graphics stream; the
        query then opens a compute stream and the second clear queues a
        graphics stream behind it. The barrier after the pass must not keep
        that compute stream: the dispatch (the submission's last launch)
        has to run after the second clear."""
        for name, env in SETTINGS:
            with self.subTest(setting=name):
                cmds, _ = capture_commands("subpass-query", **env)
                kinds = [k for k, _ in cmds]
                self.assertEqual(kinds.count("render"), 2, cmds)
                last_render = max(i for i, k in enumerate(kinds) if k == "render")
                last_launch = max(i for i, (k, s) in enumerate(cmds)
                                  if k == "compute" and launches(s))
                self.assertGreater(last_launch, last_render, cmds)
                self.assertEqual(cmds[-1][1][-2:], [STOCK, "T"])

    def test_a_seam_barrier_keeps_the_stock_bits_whatever_the_mask(self):
        """Merged, the barrier where a stream used to end is followed by
        the next launch, not by a kernel command boundary; the masks that
        were reported correct were measured with the boundary after them.
        So a mask may add bits there but not clear any; at the stream's
        end, where the boundary still follows, the mask applies as
        before."""
        self.assertEqual(cached("chain", 3, HK_CDM_BARRIER_MASK="0xf0"),
                         [["L", STOCK, "L", STOCK, "L", MASK, "T"]])
        self.assertEqual(cached("chain", 3, HK_CDM_BARRIER_MASK="0xf0", **LAZY_ENV),
                         [["L", MASK, "T"]] * 3)
        # Bit 20 added: the seams have it with the stock bits.
        self.assertEqual(cached("chain", 3, HK_CDM_BARRIER_MASK="0x1000f0"),
                         [["L", "B:0x001fffff"] * 2 + ["L", "B:0x001000f0", "T"]])

    def test_an_indirect_grid_written_by_a_dispatch_is_read_after_a_stock_barrier(self):
        """A dispatch writes the grid that an indirect dispatch reads after
        a pipeline barrier (shader write to indirect-command read): the
        launch that reads it follows a barrier with the stock bits, merged
        or not, with a reduced mask too (then a command boundary comes
        between them instead, as stock hk had)."""
        for name, env in SETTINGS:
            for mask in ("0x000fffff", "0xf0"):
                with self.subTest(setting=name, mask=mask):
                    streams = cached("indirect-dispatch", HK_CDM_BARRIER_MASK=mask, **env)
                    blocks = flat(streams)
                    self.assertEqual([b for b in blocks if b.startswith("L")], ["L", "LI"])
                    i = blocks.index("LI")
                    if len(streams) == 1:
                        self.assertEqual(blocks[i - 1], STOCK, streams)
                    else:
                        # The grid's writer ends its own kernel command.
                        self.assertEqual([launches(s) for s in streams], [["L"], ["LI"]])
                        self.assertIn(streams[0][-2], (STOCK, MASK))
        self.assertEqual(len(cached("indirect-dispatch")), 1)

    def test_a_pending_timestamp_ends_the_stream_at_a_barrier(self):
        """timestamp, dispatch, barrier, dispatch, timestamp: the first
        timestamp is written when its stream ends, so that stream ends at the
        barrier instead of taking in the dispatch after it."""
        merged = cached("timestamp-barrier")
        self.assertEqual(merged, cached("timestamp-barrier", **LAZY_ENV))
        self.assertEqual(merged[1], ["L", STOCK, "T"])

    def test_only_with_lazy_barriers(self):
        """HK_LAZY_BARRIER=0 gives stock streams whatever HK_MERGE_STREAMS says."""
        for sc in ("barrier", "mixed"):
            with self.subTest(scenario=sc):
                streams, _ = capture(sc, 2, HK_LAZY_BARRIER="0", HK_MERGE_STREAMS="1")
                self.assertEqual(streams, cached(sc, 2, **STOCK_ENV))

    def test_malformed_knob_warns_and_is_stock(self):
        streams, err = capture("chain", count=3, HK_MERGE_STREAMS="yes please")
        self.assertIn('HK_MERGE_STREAMS="yes please" is not a boolean', err)
        self.assertEqual(streams, [["L", STOCK, "T"]] * 3)


class BarrierMask(unittest.TestCase):
    def test_mask_applies_to_application_ordering_only(self):
        streams, _ = capture("dispatches", count=3, HK_CDM_BARRIER_MASK="0xf0")
        self.assertEqual(streams, [["L"] * 3 + [MASK, "T"]])
        self.assertEqual(cached("meta", HK_CDM_BARRIER_MASK="0xf0"),
                         [["L", STOCK, "L", "L", STOCK, "L", "L", STOCK, "T"]])

    def test_mask_with_stock_mode(self):
        streams, _ = capture("dispatches", count=3, HK_CDM_BARRIER_MASK="240",
                             HK_LAZY_BARRIER="0")
        self.assertEqual(streams, [["L", MASK] * 3 + ["T"]])

    def test_bits_outside_stock_are_kept_pending(self):
        """With bit 24 in the mask, the stock barrier of a meta dispatch does
        not order the application dispatch before it: the stream still ends
        with the mask's barrier (the "meta" scenario ends with a transfer)."""
        streams, _ = capture("meta", HK_CDM_BARRIER_MASK="0x010fffff")
        self.assertEqual(streams, [["L", STOCK, "L", "L", STOCK, "L", "L", STOCK,
                                    "B:0x010fffff", "T"]])
        streams, _ = capture("dispatches", count=2, HK_CDM_BARRIER_MASK="0x010000f0")
        self.assertEqual(streams, [["L", "L", "B:0x010000f0", "T"]])

    def test_bad_masks_warn_and_are_stock(self):
        for bad, why in (("banana", "is not a 32-bit number"),
                         ("0240", "decimal without leading zeros"),
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

    def test_knob_warnings_are_printed_once_per_process(self):
        """mesa-fork-hk-uapi priority creates a device per queue priority in
        one process: each malformed knob is reported once, not per device."""
        r = run([bin_path("mesa-fork-hk-uapi"), "priority"],
                env=shim_env("asahi", HK_LAZY_BARRIER="banana", HK_MERGE_STREAMS="kiwi",
                             HK_CDM_BARRIER_MASK="0240"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(r.stdout.count("VK_SUCCESS"), 2, r.stdout)
        for knob in ('HK_LAZY_BARRIER="banana"', 'HK_MERGE_STREAMS="kiwi"',
                     'HK_CDM_BARRIER_MASK="0240"'):
            self.assertEqual(r.stderr.count(knob), 1, r.stderr)

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
                         ["stock (HK_LAZY_BARRIER=0)", "lazy (HK_MERGE_STREAMS=0)",
                          "lazy + merge (default)", "default + mask 0xf0"])

    def test_each_row_runs_with_its_knobs(self):
        """The probe sets the knobs per device: with 4 dispatches and one
        run (plus a warm-up), the chained workload is 4 kernel commands per
        submission in the stock and lazy rows, one merged."""
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "cap.jsonl")
            r = run([bin_path("mesa-fork-dispatch-probe"), "--dispatches", "4", "--runs",
                     "1"], env=shim_env("asahi", ASAHI_SHIM_CAPTURE=log))
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(log) as f:
                cmds = [json.loads(l) for l in f]
        per_submit = {}
        for c in cmds:
            if c["type"] == "compute":
                per_submit.setdefault(c["submit"], []).append(c["launches"])
        got = [per_submit[k] for k in sorted(per_submit)]
        independent = [[4], [4]]
        separate = independent + [[1]] * 8
        merged = independent + [[4], [4]]
        self.assertEqual(got, separate + separate + merged)

    def test_rejects_bad_arguments(self):
        r = run([bin_path("mesa-fork-dispatch-probe"), "--dispatches", "0"],
                env=shim_env("asahi"))
        self.assertEqual(r.returncode, 64)


class BarrierProbe(unittest.TestCase):
    """mesa-fork-barrier-probe checks on hardware that one CDM barrier waits
    for every earlier launch of its stream. Nothing executes on the shim: it
    must say it cannot decide, and what it records must be what it claims
    to test."""

    def test_on_the_shim_it_cannot_decide(self):
        r = run([bin_path("mesa-fork-barrier-probe"), "--rounds", "2"], env=shim_env("asahi"))
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("verdict: cannot decide: the device executed nothing", r.stdout)
        self.assertNotIn("no stale data", r.stdout)

    def test_the_launches_share_one_barrier_in_one_stream(self):
        """Each round's K launches have no barrier between them, one stock
        barrier after them, then the check: all rounds one kernel command
        with the defaults."""
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "cap.jsonl")
            r = run([bin_path("mesa-fork-barrier-probe"), "--rounds", "3", "--launches", "4",
                     "--record-only"], env=shim_env("asahi", ASAHI_SHIM_CAPTURE=log))
            self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
            self.assertIn("cannot decide (--record-only)", r.stdout)
            streams = [c["blocks"] for c in map(json.loads, open(log))
                       if c["type"] == "compute"]
        # The execution check first, then the rounds.
        self.assertEqual(streams, [["L", STOCK, "T"],
                                   (["L"] * 4 + [STOCK, "L", STOCK]) * 3 + ["T"]])

    def test_report_says_the_shim_cannot_decide(self):
        """`bin/mesa-fork report` runs the probe in its Honeykrisp section
        and states its verdict: on the shim, that only hardware can tell."""
        from mesafork import report
        md = "\n".join(report.barrier_probe_section(forklib.PREFIX, shim_env("asahi")))
        self.assertIn("### mesa-fork-barrier-probe: the lazy barrier's hardware assumption "
                      "is undecided: the device executed nothing", md)
        self.assertIn("verdict: cannot decide", md)
        self.assertNotIn("holds", md)

    def test_rejects_bad_arguments(self):
        for args in (["--rounds", "0"], ["--launches", "x"], ["--spin"]):
            with self.subTest(args=args):
                r = run([bin_path("mesa-fork-barrier-probe")] + args, env=shim_env("asahi"))
                self.assertEqual(r.returncode, 64)


if __name__ == "__main__":
    unittest.main()
