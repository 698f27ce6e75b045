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
    holds threads_per_core / tasks_per_core threads, so that many workgroups
    (rounded up), times the tasks of a core, rounded up to a power of two as
    the descriptor encodes the count."""
    threads_per_task = dev["threads_per_core"] // dev["tasks_per_core"]
    wg_per_task = -(-threads_per_task // local_size)
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

    def test_a_secondary_brings_its_own_need_to_its_primary(self):
        """mesa-fork-tls-secondary: a secondary needing 4 KiB per thread is
        recorded against a 16 KiB buffer, which a 32 KiB one replaces and the
        device then drops; the primary executing the secondary needs 4 KiB
        per thread and gets 4 KiB x 2048 x 19 = 152 MiB, not the 608 MiB of
        the buffer the secondary was recorded against."""
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "vm.jsonl")
            r = HOST.run([HOST.bin_path("mesa-fork-tls-secondary"), "--validate"],
                         env=HOST.shim_env("panfrost", PAN_SHIM_VM_LOG=log))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-3000:])
            ops = read_jsonl(log)
        maps = [o["size"] // MiB for o in ops if o["op"] == "map" and o["size"] >= 64 * MiB]
        self.assertEqual(maps, [608, 1216, 152])

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
        """local_size_x = 1 and 32 KiB: 512 workgroups per task, 2048 per core,
        1216 MiB in all; counting them for all 4 cores asked for 4864 MiB and
        failed vkEndCommandBuffer."""
        s, peak, _, _ = inflight("wls", groups=8192, local_size=1)
        self.assertEqual((s["ok"], s["out_of_device_memory"]), (1, 0))
        self.assertAlmostEqual(peak, 32 * 1024 * 2048 * 19, delta=16 * MiB)

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


def threads(args, valgrind_tool=None, validate=True, checks=False, **knobs):
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
        r = HOST.run(cmd, env=env, timeout=900)
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
        buffer at the same moment, while each map takes 200 ms: one thread
        creates it and the others wait for it. Were each to create its own,
        three 608 MiB buffers would be bound at once."""
        s, ops, _ = threads(["--threads", "3", "--rounds", "1", "--same", "--end-together",
                             "--no-wls"], PAN_SHIM_VM_MAP_DELAY_MS="200")
        self.assertEqual((s["ok"], s["out_of_device_memory"]), (3, 0))
        big = [o for o in ops if o["size"] >= 64 * MiB]
        self.assertEqual([o["op"] for o in big], ["map", "unmap"], big)
        self.assertLess(max(o["peak"] for o in ops), big[0]["size"] + 64 * MiB)

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
        scoreboard entry of the earlier one lies between them. Returns how
        many overlapping (ordered) pairs there were."""
        reused = 0
        js = [j for j in jobs(lines) if j["wls"]]
        for a in range(len(js)):
            for b in range(a + 1, len(js)):
                ja, jb = js[a], js[b]
                if ja["submit"] != jb["submit"]:
                    continue
                (sa, ea), (sb, eb) = wls_range(ja, dev), wls_range(jb, dev)
                if not (sa < eb and sb < ea):
                    continue
                waited = any(js[k]["waited"] & (1 << ja["sb"]) for k in range(a + 1, b + 1))
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

    def test_an_epoch_past_the_arena_list_stays_disjoint(self):
        """Two epochs of 20 dispatches, each needing a buffer of its own,
        past the arena's list of 16 buffers: the 17th and later replace the
        16th entry in turn. The first epoch's 20 ranges are disjoint; the
        second takes the 15 first ones and the last, the 16 the list still
        names, then 4 new ones, each reuse after a wait on its earlier
        user."""
        s, dev, lines, _ = captured("wls", groups=4096, dispatches=40, barrier=True, epoch=20,
                                    submit=True)
        self.assertEqual(s["ok"], 1)
        starts = [wls_range(j, dev)[0] for j in jobs(lines) if j["wls"]]
        self.assertEqual(len(starts), 40)
        first, second = starts[:20], starts[20:]
        self.assertEqual(len(set(first)), 20)
        self.assertEqual(second[:16], first[:15] + first[19:])
        self.assertEqual(len(set(second[16:]) - set(first)), 4)
        self.assertEqual(self.check_wls_reuse_waits(lines, dev), 16)

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
