# SPDX-License-Identifier: MIT
"""panvk device-shared TLS (PANVK_SHARED_TLS) and WLS reuse (PANVK_WLS_REUSE),
end to end on the panthor drm-shim (G610): GPU virtual address the driver
binds, read from the shim's VM_BIND log, with command buffers kept in flight
and shaders whose TLS and WLS sizes come from panvk's compiler."""

import json
import os
import tempfile
import unittest

import forklib
from forklib import HOST
from mesafork import build

MiB = 1 << 20


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f]


def inflight_args(kind, cmdbufs, opts):
    """mesa-fork-inflight's arguments after the program, and the knobs (the
    upper-case keys of opts) for its environment."""
    env_knobs = {k: v for k, v in opts.items() if k.isupper()}
    args = []
    for k, v in opts.items():
        if k.isupper():
            continue
        flag = "--" + k.replace("_", "-")
        args += [flag] if v is True else [flag, str(v)]
    return ["--cmdbufs", str(cmdbufs)] + args + [kind], env_knobs


def summary_of(stdout):
    lines = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
    return [l for l in lines if l.get("summary")]


def _run(kind, cmdbufs, validate, valgrind, expect_messages, opts, target=HOST, checks=False,
         **logs):
    """checks: on the assertion build of panvk (forklib.checks_env), not the
    installed one."""
    args, env_knobs = inflight_args(kind, cmdbufs, opts)
    env = forklib.checks_env(**logs, **env_knobs) if checks else \
        target.shim_env("panfrost", **logs, **env_knobs)
    cmd = [target.bin_path("mesa-fork-inflight")] + args
    if validate:
        cmd.insert(1, "--validate")
    if valgrind:
        cmd = ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite",
               "--error-exitcode=99"] + cmd
    r = target.run(cmd, env=env, timeout=600)
    summary = summary_of(r.stdout)
    if r.returncode not in (0, 3) or not summary:
        raise AssertionError("inflight failed (%d): %s %s" % (r.returncode, r.stdout,
                                                             r.stderr[-3000:]))
    # Under the validation layer, every message is a finding unless the test
    # expects the driver to report an error (which arrives the same way).
    if validate and not expect_messages:
        if summary[0]["validation_messages"]:
            raise AssertionError("validation messages: %s" % r.stderr[-3000:])
    return summary[0], r


def inflight(kind, cmdbufs=1, validate=True, valgrind=False, expect_messages=False,
             target=HOST, **opts):
    """Runs mesa-fork-inflight; returns (summary, VM peak in bytes, big
    map/unmap operations, the completed process). target: the architecture's
    build (forklib.Target) that runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "vm.jsonl")
        s, r = _run(kind, cmdbufs, validate, valgrind, expect_messages, opts, target,
                    PAN_SHIM_VM_LOG=log)
        ops = read_jsonl(log)
    return s, max(o["peak"] for o in ops), ops, r


def captured(kind, cmdbufs=1, validate=True, expect_messages=False, target=HOST, **opts):
    """Runs mesa-fork-inflight with the panthor shim's submit capture; returns
    (summary, device model, every capture line in order, the completed
    process)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "capture.jsonl")
        s, r = _run(kind, cmdbufs, validate, False, expect_messages, opts, target,
                    PAN_SHIM_CAPTURE=log)
        lines = read_jsonl(log)
    devices = [l["device"] for l in lines if "device" in l]
    if len(devices) != 1:
        raise AssertionError("no device line in the capture: %s" % lines[:3])
    return s, devices[0], lines, r


def jobs(lines):
    return [l for l in lines if "job" in l]


def pow2(n):
    """The power of two at or above n."""
    return 1 << max(0, (n - 1).bit_length())


def wls_range(job, dev):
    """[start, end) of the WLS a job's descriptor gives it: instances per
    core of instance_size bytes, for every core id."""
    w = job["wls"]
    return w["base"], w["base"] + w["instance_size"] * w["instances"] * dev["core_id_range"]


def resident_instances(dev, local_size):
    """WLS instances one core keeps resident, from the device model: a task
    holds threads_per_core / tasks_per_core threads, in warps of warp_size
    (a workgroup takes whole warps: panvk does not let the hardware merge
    workgroups), so that many workgroups (rounded up), times the tasks of a
    core, rounded up to a power of two as the descriptor encodes the
    count."""
    threads_per_task = dev["threads_per_core"] // dev["tasks_per_core"]
    warp = dev["warp_size"]
    wg_threads = -(-local_size // warp) * warp
    wg_per_task = -(-threads_per_task // wg_threads)
    return pow2(wg_per_task * dev["tasks_per_core"])


class SharedTLS(unittest.TestCase):
    def test_stock_grows_with_command_buffers_until_out_of_memory(self):
        peaks = []
        for n in (1, 2, 3):
            s, peak, _, _ = inflight("tls", n, tls_kib=4, PANVK_SHARED_TLS="0")
            self.assertEqual(s["ok"], n)
            peaks.append(peak)
        # Each command buffer adds its own TLS: 608 MiB at the 16 KiB per
        # thread the compiler gives a 4 KiB private array.
        self.assertGreater(peaks[1] - peaks[0], 512 * MiB, peaks)
        self.assertGreater(peaks[2] - peaks[1], 512 * MiB, peaks)
        s, _, _, _ = inflight("tls", 12, validate=False, tls_kib=4, PANVK_SHARED_TLS="0")
        self.assertGreater(s["out_of_device_memory"], 0, s)

    def test_shared_stays_flat_and_succeeds(self):
        peaks = []
        for n in (1, 12, 32):
            s, peak, _, _ = inflight("tls", n, tls_kib=4)
            self.assertEqual((s["ok"], s["out_of_device_memory"]), (n, 0))
            peaks.append(peak)
        self.assertLess(max(peaks) - min(peaks), 16 * MiB, peaks)

    def test_buffer_grows_only_to_the_power_of_two_needed(self):
        s, _, ops, _ = inflight("tls", 4, tls_kib=1, tls_grow=True)
        self.assertEqual(s["ok"], 4)
        maps = [o["size"] // MiB for o in ops if o["op"] == "map" and o["size"] >= 64 * MiB]
        # Arrays of 1, 2, 3 and 4 KiB: 4, 8, 12 and 16 KiB per thread; 12
        # rounds up to 16, so the last command buffer reuses that buffer.
        self.assertEqual(maps, [152, 304, 608])

    def test_replaced_buffers_are_freed_and_nothing_leaks(self):
        """Valgrind clean at device destroy, with buffers replaced while older
        command buffers still held them; every big mapping is unmapped."""
        s, _, ops, r = inflight("tls", 4, tls_kib=1, tls_grow=True, valgrind=True)
        self.assertIn("definitely lost: 0 bytes", r.stderr)
        big = [o for o in ops if o["size"] >= 64 * MiB]
        self.assertEqual(sorted(o["size"] for o in big if o["op"] == "map"),
                         sorted(o["size"] for o in big if o["op"] == "unmap"))

    def test_freed_command_buffers_leave_what_stock_leaves(self):
        """After the last command buffer holding the shared buffer is freed,
        the device holds no more VA than stock: it drops the buffer too. The
        client creates a 5 MiB buffer once its command buffers are freed;
        bound VA at that map is compared."""
        held = {}
        for knob in ("0", "1"):
            s, _, ops, _ = inflight("tls", 3, tls_kib=4, submit=True, mark=True,
                                    PANVK_SHARED_TLS=knob)
            self.assertEqual(s["ok"], 3)
            (m,) = [o for o in ops if o["op"] == "map" and o["size"] == 5 * MiB]
            held[knob] = m["bound"] - m["size"]
        self.assertEqual(held["1"], held["0"], held)

    def test_only_a_command_buffer_s_own_jobs_take_the_shared_buffer(self):
        """mesa-fork-tls-secondary (its header has the sequence): a primary
        that only executes a secondary takes no shared buffer, so the 1216
        MiB one goes at the reset of the last command buffer recorded
        against it, and a second such primary creates none; a primary with
        a dispatch of its own needing 4 KiB per thread that also executes
        the secondary (16 KiB) creates a 152 MiB buffer, for its own need;
        freeing a command buffer that holds a replaced buffer leaves the
        current one to its holders, so the last primary creates nothing.
        Before: the first primary kept the 1216 MiB buffer and every later
        one took it; folding the secondary's need into its primary makes
        608 of the 152; a release without the guard on the current buffer
        drops the last 608 and makes a new 152."""
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "vm.jsonl")
            r = HOST.run([HOST.bin_path("mesa-fork-tls-secondary"), "--validate"],
                         env=HOST.shim_env("panfrost", PAN_SHIM_VM_LOG=log))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-3000:])
            ops = read_jsonl(log)
        big = [(o["op"], o["size"] // MiB) for o in ops if o["size"] >= 64 * MiB]
        self.assertEqual([b for b in big if b[0] == "map"],
                         [("map", 608), ("map", 1216), ("map", 152), ("map", 608)])
        self.assertEqual(big[:4], [("map", 608), ("map", 1216), ("unmap", 1216),
                                   ("map", 152)])

    def test_a_secondary_s_jobs_use_its_own_buffer(self):
        """The same run captured: the secondary's job, run by three
        primaries, uses the 608 MiB buffer it was recorded against, at its
        stride, bound at every submission; the primary's own job uses its
        152 MiB buffer at 4 KiB per thread."""
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "capture.jsonl")
            r = HOST.run([HOST.bin_path("mesa-fork-tls-secondary"), "--validate"],
                         env=HOST.shim_env("panfrost", PAN_SHIM_CAPTURE=log))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-3000:])
            lines = read_jsonl(log)
        (dev,) = [l["device"] for l in lines if "device" in l]
        slots = dev["threads_per_core"] * dev["core_id_range"]
        sizes = [(j["tls"]["thread_size"], j["tls"]["bo_size"] // MiB)
                 for j in jobs(lines)]
        for j in jobs(lines):
            self.assertTrue(j["tls"]["bound"], j)
            self.assertEqual(j["tls"]["thread_size"] * slots, j["tls"]["bo_size"], j)
        # P1, P2: the secondary's; Q: its own, then the secondary's; X, Y.
        self.assertEqual(sizes, [(16384, 608)] * 2 + [(4096, 152), (16384, 608)] +
                         [(16384, 608)] * 2)

    def test_malformed_knob_warns_and_is_stock(self):
        s, peak, _, r = inflight("tls", 3, tls_kib=4, PANVK_SHARED_TLS="shared")
        self.assertIn('PANVK_SHARED_TLS="shared" is not a boolean', r.stderr)
        _, stock_peak, _, _ = inflight("tls", 3, tls_kib=4, PANVK_SHARED_TLS="0")
        self.assertEqual(peak, stock_peak)

    def test_submitted_command_buffers(self):
        s, _, _, _ = inflight("tls", 12, tls_kib=4, submit=True)
        self.assertEqual(s["ok"], 12)

    def test_reset_and_rerecord_hold_one_reference_each(self):
        """vkResetCommandBuffer drops the command buffer's reference on the
        shared buffer and the next recording takes one: three command
        buffers recorded, submitted, reset and recorded again twice. A
        reset that forgets the pointer drops the reference a second time at
        the next recording (the buffer is freed while in use: valgrind
        errors); one that keeps the reference leaks the buffer (never
        unmapped). The buffer is mapped once and unmapped once, last."""
        s, _, ops, r = inflight("tls", 3, tls_kib=4, submit=True, rerecord=2, valgrind=True)
        self.assertEqual((s["ok"], s["out_of_device_memory"]), (9, 0))
        self.assertIn("ERROR SUMMARY: 0 errors", r.stderr)
        self.assertIn("definitely lost: 0 bytes", r.stderr)
        big = [o["op"] for o in ops if o["size"] >= 64 * MiB]
        self.assertEqual(big, ["map", "unmap"], big)

    def test_a_command_pool_reset_drops_every_reference(self):
        """The same through vkResetCommandPool, which resets all three at
        once: the last reference goes with the reset, so the device
        releases the buffer and the next round creates it again, once per
        round (never two bound at once). Stock, in the same run, creates
        and frees one buffer per command buffer per round: its pool frees
        large BOs at reset too."""
        s, _, ops, r = inflight("tls", 3, tls_kib=4, submit=True, rerecord=2,
                                reset_pool=True, valgrind=True)
        self.assertEqual((s["ok"], s["out_of_device_memory"]), (9, 0))
        self.assertIn("ERROR SUMMARY: 0 errors", r.stderr)
        self.assertIn("definitely lost: 0 bytes", r.stderr)
        big = [o["op"] for o in ops if o["size"] >= 64 * MiB]
        self.assertEqual(big, ["map", "unmap"] * 3, big)
        s, _, stock_ops, _ = inflight("tls", 3, tls_kib=4, submit=True, rerecord=2,
                                      reset_pool=True, PANVK_SHARED_TLS="0")
        self.assertEqual(s["ok"], 9)
        stock_maps = [o for o in stock_ops if o["size"] >= 64 * MiB and o["op"] == "map"]
        self.assertEqual(len(stock_maps), 9)

    def test_tls_over_4_gib_is_an_error_not_a_wrap(self):
        """128 KiB per thread (a 32 KiB private array) for 2048 threads on a
        core id range of 19 is 4.75 GiB, which wrapped to 0.75 GiB in 32 bits
        and became the device-wide buffer; now it fails cleanly, with either
        knob setting."""
        for knob in ("1", "0"):
            s, peak, _, r = inflight("tls", tls_kib=32, expect_messages=True,
                                     PANVK_SHARED_TLS=knob)
            self.assertEqual((s["ok"], s["out_of_device_memory"]), (0, 1), knob)
            self.assertIn("TLS of", r.stderr)
            self.assertIn("VA heap", r.stderr)
            self.assertLess(peak, 64 * MiB, knob)


class WLSReuse(unittest.TestCase):
    def test_stock_wls_is_sized_from_the_grid(self):
        _, small, _, _ = inflight("wls", groups=64, PANVK_WLS_REUSE="0")
        _, large, _, _ = inflight("wls", groups=4096, PANVK_WLS_REUSE="0")
        self.assertGreater(large - small, 2 << 30)
        s, _, _, _ = inflight("wls", validate=False, groups=4096, dispatches=8,
                              PANVK_WLS_REUSE="0")
        self.assertEqual(s["out_of_device_memory"], 1)

    def test_reuse_is_independent_of_the_grid(self):
        _, small, _, _ = inflight("wls", groups=64)
        _, large, _, _ = inflight("wls", groups=65535)
        _, square, _, _ = inflight("wls", groups=65535, groups_y=65535)
        self.assertEqual(small, large)
        self.assertEqual(small, square)
        self.assertLess(large, 64 * MiB)

    def test_one_dispatch_binds_the_resident_instances_of_every_core(self):
        """32 KiB, 256 invocations: 8 instances per core on the G610 model
        (2 workgroups per task, 4 tasks), 4.75 MiB for a core id range of 19,
        not 19 MiB (instances counted for all cores, then again per core)."""
        _, base, _, _ = inflight("wls", groups=1, shared_kib=1, local_size=1024)
        s, one, _, _ = inflight("wls", groups=4096)
        self.assertEqual(s["ok"], 1)
        expect = 32 * 1024 * pow2(2 * 4) * 19
        self.assertAlmostEqual(one - base, expect, delta=MiB)

    def test_single_invocation_workgroups_fit(self):
        """local_size_x = 1 and 32 KiB: each workgroup takes a warp of 16
        threads, so 32 workgroups per task, 128 per core, 76 MiB in all.
        Counting invocations instead of warps gave 2048 per core, 1216 MiB
        per dispatch: three without a barrier bound 3650 MiB of the 4 GiB VA
        heap and four could not fit; counting them for all 4 cores asked for
        4864 MiB for one."""
        _, base, _, _ = inflight("wls", groups=1, shared_kib=1, local_size=1024)
        for n in (1, 3, 4):
            s, peak, _, _ = inflight("wls", groups=8192, local_size=1, dispatches=n)
            self.assertEqual((s["ok"], s["out_of_device_memory"]), (1, 0), n)
            self.assertAlmostEqual(peak - base, n * 32 * 1024 * 128 * 19,
                                   delta=MiB, msg=n)

    def test_concurrent_dispatches_get_disjoint_memory(self):
        """Without barriers the dispatches may overlap: their WLS must not."""
        _, one, _, _ = inflight("wls", groups=4096)
        _, eight, _, _ = inflight("wls", groups=4096, dispatches=8)
        # Each of the seven extra dispatches binds a range of its own.
        self.assertAlmostEqual((eight - one) / 7, 32 * 1024 * 8 * 19, delta=MiB / 7)

    def test_dispatches_after_a_barrier_reuse_it(self):
        _, one, _, _ = inflight("wls", groups=4096)
        s, eight, _, _ = inflight("wls", groups=4096, dispatches=8, barrier=True)
        self.assertEqual(s["ok"], 1)
        self.assertEqual(eight, one)

    def test_grid_sized_wls_over_4_gib_is_an_error_not_a_wrap(self):
        """65535 workgroups x 32 KiB x 19 exceeds 32 bits: stock used to wrap
        the size and allocate a fraction of it; now it fails cleanly."""
        s, peak, _, r = inflight("wls", groups=65535, expect_messages=True,
                                 PANVK_WLS_REUSE="0")
        self.assertEqual((s["ok"], s["out_of_device_memory"]), (0, 1))
        self.assertIn("exceeds the VA heap", r.stderr)
        s, peak, _, _ = inflight("wls", groups=65535)
        self.assertEqual(s["ok"], 1)
        self.assertLess(peak, 64 * MiB)

    def test_instance_count_does_not_wrap_at_32_bits(self):
        """65535 x 65535 workgroups (the device limit on each axis) is 2^32
        instances for the whole grid: 0 in 32 bits, a WLS of 0 bytes, for
        which 25.0.7 allocated nothing and silently dropped the dispatch
        (vkEndCommandBuffer succeeded). Stock sizing now fails cleanly,
        reuse clamps."""
        s, peak, _, r = inflight("wls", groups=65535, groups_y=65535,
                                 expect_messages=True, PANVK_WLS_REUSE="0")
        self.assertEqual((s["ok"], s["out_of_device_memory"]), (0, 1))
        self.assertIn("WLS of 4294967296 instances per core", r.stderr)
        s, dev, lines, _ = captured("wls", groups=65535, groups_y=65535, submit=True)
        self.assertEqual(s["ok"], 1)
        (job,) = jobs(lines)
        self.assertEqual(job["grid"], [65535, 65535, 1])
        self.assertEqual(job["wls"]["instances"], resident_instances(dev, 256))

    def test_malformed_knob_warns_and_is_stock(self):
        _, peak, _, r = inflight("wls", groups=4096, PANVK_WLS_REUSE="2")
        self.assertIn('PANVK_WLS_REUSE="2" is not a boolean', r.stderr)
        self.assertGreater(peak, 2 << 30)


def threads(args, valgrind_tool=None, validate=True, checks=False, timeout=900, **knobs):
    """Runs mesa-fork-threads with the panthor shim's VM log (with checks, on
    the assertion build of panvk); returns (its summary, the VM log's
    operations, the completed process)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "vm.jsonl")
        env = (forklib.checks_env if checks else
               lambda **kw: HOST.shim_env("panfrost", **kw))(PAN_SHIM_VM_LOG=log, **knobs)
        cmd = [HOST.bin_path("mesa-fork-threads")] + (["--validate"] if validate else []) + args
        if valgrind_tool:
            cmd = ["valgrind", "--tool=" + valgrind_tool, "--error-exitcode=99",
                   "--suppressions=" + os.path.join(forklib.TOP, "tests", "helgrind.supp")] + cmd
        r = HOST.run(cmd, env=env, timeout=timeout)
        summary = summary_of(r.stdout)
        if r.returncode != 0 or not summary:
            raise AssertionError("mesa-fork-threads failed (%d): %s %s"
                                 % (r.returncode, r.stdout, r.stderr[-4000:]))
        return summary[0], read_jsonl(log), r


class Threads(unittest.TestCase):
    """Several threads recording on one device (mesa-fork-threads): each
    with its own command pool, recording, submitting, waiting on, resetting
    and freeing command buffers whose TLS and WLS needs differ between
    threads and grow between rounds."""

    def test_threads_needing_the_same_growth_create_one_buffer(self):
        """Three threads end command buffers that need the same first TLS
        buffer at the same moment, while the shim delays each VM map by
        1 s: one thread creates it and the others wait for it. Were each to
        create its own, three 608 MiB buffers would be bound at once.

        That they contended at all is checked, not assumed. vkEndCommandBuffer
        maps other, small buffers too, so its duration alone proves
        nothing: one thread alone, which grows the buffer itself, takes T.
        A thread that found the buffer grown takes about T - 1 s (no
        growth map); one that waited for another's growth takes about T.
        So each of the three must take more than T - 0.5 s, while only one
        buffer was mapped."""
        alone, _, _ = threads(["--threads", "1", "--rounds", "1", "--same", "--no-wls"],
                              PAN_SHIM_VM_MAP_DELAY_MS="1000")
        (t,) = alone["first_end_ms"]
        self.assertGreater(t, 900, "the growth made no map: %s" % alone)
        s, ops, _ = threads(["--threads", "3", "--rounds", "1", "--same", "--end-together",
                             "--no-wls"], PAN_SHIM_VM_MAP_DELAY_MS="1000")
        self.assertEqual((s["ok"], s["out_of_device_memory"]), (3, 0))
        big = [o for o in ops if o["size"] >= 64 * MiB]
        self.assertEqual([o["op"] for o in big], ["map", "unmap"], big)
        self.assertLess(max(o["peak"] for o in ops), big[0]["size"] + 64 * MiB)
        self.assertEqual(len(s["first_end_ms"]), 3, s)
        self.assertGreater(min(s["first_end_ms"]), t - 500,
                           "a thread ended without waiting for the growth (alone: %.0f ms): "
                           "no contention %s" % (t, s["first_end_ms"]))

    def test_threads_record_reset_and_free_without_failing(self):
        """Four threads, six rounds, needs of 4, 8 and 16 KiB per thread and
        a WLS dispatch each: every command buffer ends, no TLS buffer is
        larger than the largest need, and every buffer mapped is unmapped.
        (The peak depends on how the threads interleave, so it is printed
        by `bench panvk`, not asserted.)"""
        s, ops, _ = threads(["--threads", "4", "--rounds", "6", "--tls-kib", "1"])
        self.assertEqual((s["ok"], s["out_of_device_memory"], s["other"]), (24, 0, 0))
        big = [o for o in ops if o["size"] >= 64 * MiB]
        self.assertEqual(max(o["size"] // MiB for o in big), 608, big)
        self.assertEqual(sorted(o["size"] for o in big if o["op"] == "map"),
                         sorted(o["size"] for o in big if o["op"] == "unmap"))

    def test_a_failed_growth_wakes_the_threads_waiting_for_it(self):
        """Three threads need the same first buffer at once; the shim fails
        every BO of 512 MiB or more, after 200 ms: the growing thread fails
        and must wake the two waiting for it, which then try (and fail)
        their own. Were the wake-up only on success, they would wait for
        ever: the run is given 120 s."""
        s, ops, _ = threads(["--threads", "3", "--rounds", "1", "--same", "--end-together",
                             "--no-wls"], validate=False, timeout=120,
                            PAN_SHIM_VM_MAP_DELAY_MS="200",
                            PAN_SHIM_BO_FAIL_FROM=str(512 * MiB))
        self.assertEqual((s["ok"], s["out_of_device_memory"], s["other"]), (0, 3, 0))
        self.assertFalse([o for o in ops if o["size"] >= 64 * MiB])

    def test_no_data_race_under_helgrind(self):
        """The same work under helgrind: no report, except those
        tests/helgrind.supp names (none in panvk's scratch code). Without
        the validation layer, whose own locking helgrind reports. On the
        assertion build of panvk: Mesa's futex-based simple_mtx tells
        helgrind about its locks only there (and only with valgrind's
        headers, which the build has)."""
        s, _, r = threads(["--threads", "3", "--rounds", "3", "--tls-kib", "1"],
                          valgrind_tool="helgrind", validate=False, checks=True)
        self.assertEqual(s["ok"], 9)
        self.assertIn("ERROR SUMMARY: 0 errors from 0 contexts", r.stderr)


class PanthorBinds(unittest.TestCase):
    """The panthor shim answers VM_BIND as panthor does (panthor_mmu.c,
    panthor_drv.c): the rules themselves are unit-tested in Mesa's tree
    (panthor_shim_vm_test per op, panthor_shim_ioctl_test through the
    preloaded shim, in the panfrost suite `test` runs). Here the driver
    meets them: every ioctl panvk makes while the clients run must be one
    panthor accepts, or the client would fail on a real kernel."""

    RUNS = [
        (["mesa-fork-vkcheck", "--validate"], {}),
        # A 256-byte and a 12-byte buffer: memory smaller than a page.
        (["mesa-fork-scenarios", "--validate", "indirect-fill"], {}),
        (["mesa-fork-inflight", "--validate", "--cmdbufs", "2", "--indirect",
          "--dispatches", "2", "wls"], {}),
        (["mesa-fork-inflight", "--validate", "--cmdbufs", "3", "--tls-grow",
          "--tls-kib", "1", "tls"], {}),
        (["mesa-fork-threads", "--validate", "--threads", "2", "--rounds", "2",
          "--tls-kib", "1"], {}),
    ]

    def test_every_bind_the_driver_makes_is_one_panthor_accepts(self):
        for cmd, knobs in self.RUNS:
            with self.subTest(cmd=cmd[0] + " " + cmd[-1]), \
                    tempfile.TemporaryDirectory() as tmp:
                log = os.path.join(tmp, "vm.jsonl")
                env = HOST.shim_env("panfrost", PAN_SHIM_VM_LOG=log, **knobs)
                r = HOST.run([HOST.bin_path(cmd[0])] + cmd[1:], env=env, timeout=600)
                # The shim prints "panthor drm-shim: <IOCTL> refused: ..." for
                # each ioctl or op that panthor would refuse.
                self.assertNotIn("refused", r.stderr)
                self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-3000:])
                ops = [o for o in read_jsonl(log) if o["op"] in ("map", "unmap")]
                self.assertTrue(ops)
                # panvk maps each BO once, at a VA of its own.
                self.assertEqual(max(o["replaced"] for o in ops), 0)


class Invariants(unittest.TestCase):
    """What the sharing rests on, checked by the driver."""

    def test_more_than_one_queue_turns_both_knobs_off_loudly(self):
        """Both knobs rest on the device having one queue, which panvk
        exposes. A device asked for two (invalid usage, so without the
        validation layer) gets stock behaviour and a message."""
        s, peak, _, r = inflight("tls", 3, tls_kib=4, queues=2, validate=False)
        self.assertEqual(s["ok"], 3)
        self.assertIn("2 queues asked for", r.stderr)
        # Three command buffers with 608 MiB each, as stock.
        self.assertGreater(peak, 3 * 600 * MiB)
        s, peak, _, r = inflight("tls", 3, tls_kib=4, validate=False)
        self.assertNotIn("queues asked for", r.stderr)
        self.assertLess(peak, 700 * MiB)


class CommandStreamChecks(unittest.TestCase):
    """PANVK_DEBUG=cs turns on the checks of Mesa's command stream builder
    (cs_builder.h): among them, that no instruction reads a register an
    asynchronous load has not finished writing (a cs_wait_slot on the
    load/store scoreboard entry must come between). The shim's capture
    runs loads at once and cannot see a missing wait; these checks can.
    They are assertions: these tests run on the assertion build of panvk
    that `mesa-fork test` makes (.work/build/mesa-checks), not on the
    installed, optimised one."""

    def test_the_checks_are_in_the_assertion_build_only(self):
        """The check's message is in the assertion build's panvk, and not in
        the installed one (NDEBUG removes it: what users run)."""
        conf = HOST.conf
        lib = os.path.join(build.checks_build(HOST.fork),
                           conf["drivers"]["panfrost"].split()[0])
        installed = os.path.join(HOST.prefix, "lib", "mesa-fork", "libvulkan_panfrost.so")
        msg = b"register used as a source before flushing loads"
        with open(lib, "rb") as f:
            self.assertIn(msg, f.read(), "%s has no command stream checks" % lib)
        with open(installed, "rb") as f:
            self.assertNotIn(msg, f.read(), "%s is an assertion build" % installed)

    def test_loads_are_waited_on_before_their_registers_are_used(self):
        for kind, opts in (("tls", {}), ("tls", dict(dispatches=3, tls_mixed=True, tls_kib=1)),
                           ("tls", dict(tls_grow=True, tls_kib=1)), ("wls", dict(dispatches=3)),
                           ("wls", dict(dispatches=3, barrier=True))):
            s, r = _run(kind, 3 if opts.get("tls_grow") else 1, True, False, False,
                        dict(opts, submit=True, PANVK_DEBUG="cs"), checks=True)
            self.assertEqual(s["other"], 0, (kind, opts))
            self.assertNotIn("before flushing loads", r.stderr)


class Capture(unittest.TestCase):
    """What the submitted jobs point at, decoded by the panthor shim from the
    command streams (PAN_SHIM_CAPTURE)."""

    def test_device_model(self):
        _, dev, _, _ = captured("wls", submit=True)
        # The G610 the shim models: cores 0, 2, 16 and 18 (0x50005).
        self.assertEqual((dev["core_count"], dev["core_id_range"]), (4, 19))
        self.assertEqual((dev["threads_per_core"], dev["tasks_per_core"]), (2048, 4))
        self.assertEqual(dev["warp_size"], 16)

    def test_every_job_on_the_shared_tls_uses_its_stride(self):
        """Command buffers needing less than the buffer has must still encode
        the buffer's per-thread size: different strides on one buffer let a
        thread's slot of one job overlap another thread's slot of another."""
        s, dev, lines, _ = captured("tls", 3, tls_kib=1, tls_shrink=True,
                                    dispatches=2, submit=True)
        self.assertEqual(s["ok"], 3)
        tls_jobs = [j for j in jobs(lines) if j["tls"]]
        self.assertEqual(len(tls_jobs), 6)
        slots = dev["threads_per_core"] * dev["core_id_range"]
        for j in tls_jobs:
            t = j["tls"]
            self.assertTrue(t["bound"], j)
            self.assertEqual(t["base"], t["bo_va"], j)
            self.assertEqual(t["thread_size"] * slots, t["bo_size"], j)
        # One buffer for all three, sized for the first (largest) need.
        self.assertEqual(len({j["tls"]["base"] for j in tls_jobs}), 1)

    def test_jobs_of_one_command_buffer_share_its_stride(self):
        """Three dispatches of one command buffer whose shaders need 1, 2
        and 3 KiB per thread: one TLS buffer, sized at vkEndCommandBuffer
        for the largest, and every job addresses it with that per-thread
        size, with the per-command-buffer buffer of PANVK_SHARED_TLS=0 too
        (patch 0015: a job with its shader's smaller stride would lay its
        thread slots across those of a job running beside it)."""
        for knob in ("0", "1"):
            s, dev, lines, _ = captured("tls", 1, tls_kib=1, dispatches=3, tls_mixed=True,
                                        submit=True, PANVK_SHARED_TLS=knob)
            self.assertEqual(s["ok"], 1)
            tls_jobs = [j["tls"] for j in jobs(lines) if j["tls"]]
            self.assertEqual(len(tls_jobs), 3, knob)
            slots = dev["threads_per_core"] * dev["core_id_range"]
            self.assertEqual(len({(t["base"], t["thread_size"]) for t in tls_jobs}), 1,
                             (knob, tls_jobs))
            for t in tls_jobs:
                self.assertTrue(t["bound"], t)
                self.assertEqual(t["thread_size"] * slots, t["bo_size"], (knob, t))

    def test_a_job_with_tls_and_wls_keeps_its_own_wls_words(self):
        """A shader spilling and using shared memory: the TLS copy of patch
        0015 takes descriptor word 0 (the per-thread size) and words 2-3
        (the pointer) from the command buffer, and must leave word 1, the
        job's WLS instances and size, as the dispatch packed it. Copying
        words 0-1 as one 64-bit value would give the job the command
        buffer descriptor's empty WLS fields."""
        for knob in ("0", "1"):
            s, dev, lines, _ = captured("both", 1, tls_kib=1, dispatches=2, tls_mixed=True,
                                        local_size=64, shared_kib=4, groups=8,
                                        submit=True, PANVK_WLS_REUSE=knob)
            self.assertEqual(s["ok"], 1)
            js = jobs(lines)
            self.assertEqual(len(js), 2, knob)
            # One stride, the larger shader's.
            self.assertEqual(len({j["tls"]["thread_size"] for j in js}), 1, knob)
            self.assertGreaterEqual(js[0]["tls"]["thread_size"], 2048, knob)
            for j in js:
                w = j["wls"]
                self.assertTrue(w and w["bound"], (knob, j))
                self.assertEqual(w["instance_size"], 4096, (knob, j))
                self.assertEqual(w["instances"], 8 if knob == "0" else
                                 min(8, resident_instances(dev, 64)), (knob, j))

    def test_mixed_shaders_need_different_strides(self):
        """The premise of the test above: the three shaders alone do need
        different per-thread sizes (one command buffer each)."""
        s, dev, lines, _ = captured("tls", 3, tls_kib=1, tls_grow=True, submit=True,
                                    PANVK_SHARED_TLS="0")
        sizes = [j["tls"]["thread_size"] for j in jobs(lines)]
        self.assertEqual(len(sizes), 3)
        self.assertEqual(sorted(sizes), sizes)
        self.assertLess(sizes[0], sizes[2])

    def test_replaced_buffer_stays_bound_while_its_work_is_pending(self):
        """Each command buffer is submitted right after it is recorded, and
        the next one replaces the shared buffer: the replaced one must stay
        bound until the queue is waited on, which the client does only after
        its last submission."""
        s, dev, lines, _ = captured("tls", 4, tls_kib=1, tls_grow=True, submit=True)
        self.assertEqual(s["ok"], 4)
        last_submit = max(i for i, l in enumerate(lines)
                          if "job" in l and l["tls"])
        used = []
        for i, l in enumerate(lines[:last_submit + 1]):
            if "job" in l and l["tls"]:
                self.assertTrue(l["tls"]["bound"], l)
                used.append((l["tls"]["bo_va"], l["tls"]["bo_size"], l["job"]))
            if "unbind" in l:
                u = l["unbind"]
                for va, size, job in used:
                    self.assertFalse(u["va"] < va + size and va < u["va"] + u["size"],
                                     "buffer of pending job %d unbound: %s" % (job, u))
        # Four different buffers were in use: the test saw replacements.
        self.assertEqual(len({u[0] for u in used}), 3)

    def check_wls_reuse_waits(self, lines, dev):
        """Two jobs whose WLS overlap must be ordered: a wait on the
        scoreboard entry of the earlier one lies between them, on their
        queue, in the same submission or across submissions (the shim's
        "waited" carries over from one submission of a queue to the next,
        as the queue runs them in order). Returns how many overlapping
        (ordered) pairs there were."""
        reused = 0
        js = jobs(lines)
        for a in range(len(js)):
            for b in range(a + 1, len(js)):
                ja, jb = js[a], js[b]
                if not ja["wls"] or not jb["wls"]:
                    continue
                self.assertEqual(ja["queue"], jb["queue"])
                (sa, ea), (sb, eb) = wls_range(ja, dev), wls_range(jb, dev)
                if not (sa < eb and sb < ea):
                    continue
                waited = any(js[k]["waited"] & (1 << ja["sb"]) for k in range(a + 1, b + 1)
                             if js[k]["queue"] == ja["queue"])
                self.assertTrue(waited, "jobs %d and %d share WLS and may run together"
                                % (ja["job"], jb["job"]))
                reused += 1
        return reused

    def test_wls_of_concurrent_dispatches_is_disjoint(self):
        # Host-to-compute and fragment-to-fragment barriers make the compute
        # subqueue wait for nothing: no reuse after them.
        for opts in ({}, {"host_barrier": True}, {"graphics_barrier": True}):
            s, dev, lines, _ = captured("wls", groups=4096, dispatches=8, submit=True, **opts)
            self.assertEqual(s["ok"], 1)
            js = jobs(lines)
            self.assertEqual(len(js), 8)
            for j in js:
                start, end = wls_range(j, dev)
                self.assertTrue(j["wls"]["bound"], j)
                self.assertLessEqual(end, j["wls"]["bo_va"] + j["wls"]["bo_size"], j)
            self.assertEqual(self.check_wls_reuse_waits(lines, dev), 0, opts)

    def test_wls_is_reused_only_after_a_wait_on_every_earlier_job(self):
        s, dev, lines, _ = captured("wls", groups=4096, dispatches=8, barrier=True,
                                    submit=True)
        self.assertEqual(s["ok"], 1)
        # All eight share one range, each after the barrier's wait.
        self.assertEqual(self.check_wls_reuse_waits(lines, dev), 8 * 7 // 2)

    def test_epochs_reuse_the_wls_of_the_first(self):
        """Six epochs of two dispatches each, a compute barrier between
        epochs: every epoch takes the first epoch's two ranges again, in
        order, instead of a new buffer per epoch."""
        s, dev, lines, _ = captured("wls", groups=4096, dispatches=12, barrier=True, epoch=2,
                                    submit=True)
        self.assertEqual(s["ok"], 1)
        starts = [wls_range(j, dev)[0] for j in jobs(lines) if j["wls"]]
        self.assertEqual(len(starts), 12)
        self.assertNotEqual(starts[0], starts[1])
        self.assertEqual(starts, starts[:2] * 6)
        # Each reuse comes after a wait on the earlier user.
        self.assertEqual(self.check_wls_reuse_waits(lines, dev), 2 * (6 * 5 // 2))

    def test_epochs_of_many_dispatches_reuse_every_buffer(self):
        """Three epochs of 20 dispatches, each needing a buffer of its own
        (the arena once kept 16, so every later epoch allocated 4 more):
        the first epoch's 20 ranges are disjoint, the later ones take the
        same 20 in order, each reuse after a wait on its earlier user, and
        bound VA does not grow after the first epoch."""
        s, dev, lines, _ = captured("wls", groups=4096, dispatches=60, barrier=True, epoch=20,
                                    submit=True)
        self.assertEqual(s["ok"], 1)
        starts = [wls_range(j, dev)[0] for j in jobs(lines) if j["wls"]]
        self.assertEqual(len(starts), 60)
        self.assertEqual(len(set(starts[:20])), 20)
        self.assertEqual(starts, starts[:20] * 3)
        self.assertEqual(self.check_wls_reuse_waits(lines, dev), 20 * 3)
        _, one, _, _ = inflight("wls", groups=4096, dispatches=20, barrier=True, epoch=20)
        _, three, _, _ = inflight("wls", groups=4096, dispatches=60, barrier=True, epoch=20)
        self.assertEqual(one, three)

    def test_re_executions_reuse_wls_only_after_the_end_of_stream_wait(self):
        """A command buffer of three WLS dispatches without barriers, run
        three times in one vkQueueSubmit, three times in three of them, and
        as a secondary executed three times by one primary: every
        execution uses the same three ranges (as stock 25.0.7 does), so each
        must come after a wait on the earlier execution's jobs, which only
        the wait on every scoreboard slot at the end of each command
        buffer's stream provides (finish_cs())."""
        for opts in ({}, {"separate": True}, {"secondary": True}):
            s, dev, lines, _ = captured("wls", groups=4096, dispatches=3, executions=3,
                                        submit=True, **opts)
            self.assertEqual(s["ok"], 1, opts)
            js = [j for j in jobs(lines) if j["wls"]]
            self.assertEqual(len(js), 9, opts)
            starts = [wls_range(j, dev)[0] for j in js]
            self.assertEqual(len(set(starts[:3])), 3, opts)
            self.assertEqual(starts, starts[:3] * 3, opts)
            # 3 pairs between executions 1-2, 2-3 and 1-3 for each range.
            self.assertEqual(self.check_wls_reuse_waits(lines, dev), 9, opts)

    def test_a_spilling_draw_and_a_dispatch_share_one_stride(self):
        """Patch 0015's case: a draw whose vertex shader needs 16 KiB per
        thread next to a dispatch needing 4 KiB, in one command buffer. The
        draw addresses the command buffer's TLS with the largest size, so
        the dispatch's job must too, with either knob setting."""
        for knob in ("0", "1"):
            s, dev, lines, _ = captured("tls", tls_kib=1, draw_kib=4, submit=True,
                                        PANVK_SHARED_TLS=knob)
            self.assertEqual(s["ok"], 1, knob)
            (j,) = jobs(lines)
            t = j["tls"]
            slots = dev["threads_per_core"] * dev["core_id_range"]
            self.assertTrue(t["bound"], t)
            self.assertEqual(t["thread_size"] * slots, t["bo_size"], (knob, t))
            # The draw's need, not the dispatch's own 4 KiB.
            self.assertGreaterEqual(t["thread_size"], 16384, (knob, t))

    def test_freeing_a_pending_command_buffer_leaves_the_others_bound(self):
        """Invalid usage, recorded: three command buffers submitted, the
        first freed before vkQueueWaitIdle. The shared buffer stays bound
        for the two others (they hold it); with PANVK_SHARED_TLS=0 the freed
        one's own TLS goes at once, as in 25.0.7, and the others' stay."""
        for knob in ("1", "0"):
            s, dev, lines, _ = captured("tls", 3, tls_kib=1, submit=True, free_pending=True,
                                        validate=False, PANVK_SHARED_TLS=knob)
            self.assertEqual(s["ok"], 3, knob)
            js = jobs(lines)
            self.assertEqual(len(js), 3, knob)
            (mark,) = [i for i, l in enumerate(lines)
                       if "unbind" in l and l["unbind"]["size"] == 5 * MiB]
            unbound = [l["unbind"] for l in lines[:mark] if "unbind" in l]
            def hit(j):
                t = j["tls"]
                return [u for u in unbound
                        if u["va"] < t["bo_va"] + t["bo_size"] and t["bo_va"] < u["va"] + u["size"]]
            for j in js[1:]:
                self.assertFalse(hit(j), (knob, j))
            self.assertEqual(bool(hit(js[0])), knob == "0", knob)

    def test_indirect_dispatches_get_the_wls_of_direct_ones(self):
        """vkCmdDispatchIndirect: the same per-core instances, ranges and
        reuse as the direct dispatch of the same grid."""
        for barrier in (False, True):
            got = {}
            for indirect in (False, True):
                flags = {k: True for k, on in (("barrier", barrier), ("indirect", indirect))
                         if on}
                s, dev, lines, _ = captured("wls", groups=4096, dispatches=4, submit=True,
                                            **flags)
                self.assertEqual(s["ok"], 1)
                js = [j for j in jobs(lines) if j["wls"]]
                self.assertEqual(len(js), 4)
                base = wls_range(js[0], dev)[0]
                got[indirect] = [(j["wls"]["instances"], j["wls"]["instance_size"],
                                  wls_range(j, dev)[0] - base) for j in js]
                self.assertEqual(self.check_wls_reuse_waits(lines, dev),
                                 4 * 3 // 2 if barrier else 0, (barrier, indirect))
            self.assertEqual(got[True], got[False], barrier)
            self.assertEqual(got[True][0][0], resident_instances(dev, 256))

    def test_wls_instances_per_core_are_what_a_core_keeps_resident(self):
        for local_size in (1, 64, 256, 1024):
            for shared_kib in (1, 16, 32):
                for groups in (4, 8192):
                    s, dev, lines, _ = captured("wls", groups=groups, local_size=local_size,
                                                shared_kib=shared_kib, submit=True)
                    (j,) = jobs(lines)
                    what = (local_size, shared_kib, groups)
                    self.assertEqual(j["wg_size"], [local_size, 1, 1], what)
                    w = j["wls"]
                    self.assertEqual(w["instances"],
                                     min(pow2(groups), resident_instances(dev, local_size)),
                                     what)
                    self.assertEqual(w["instance_size"], pow2(shared_kib * 1024), what)
                    start, end = wls_range(j, dev)
                    self.assertTrue(w["bound"], what)
                    self.assertLessEqual(end, w["bo_va"] + w["bo_size"], what)


if __name__ == "__main__":
    unittest.main()
