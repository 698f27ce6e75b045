# SPDX-License-Identifier: MIT
"""Honeykrisp on the mainline drm/asahi uAPI, end to end on the asahi
drm-shim: what hk asks the kernel for (queues, binds, timestamp objects,
commands), recorded by the shim's capture (ASAHI_SHIM_CAPTURE). The shim
refuses what the mainline kernel refuses, so every run here also checks
that hk's requests are ones the kernel accepts."""

import json
import os
import re
import struct
import tempfile
import unittest

import forklib
from forklib import WORK, bin_path, build_env, config, run, shim_env

FOUR_GIB = 1 << 32
READ, WRITE = 1 << 1, 1 << 2


def capture(argv, **env):
    """Runs argv on the asahi shim; returns (capture lines, process)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "cap.jsonl")
        r = run(argv, env=shim_env("asahi", ASAHI_SHIM_CAPTURE=log, **env))
        lines = []
        if os.path.exists(log):
            with open(log) as f:
                lines = [json.loads(l) for l in f]
    return lines, r


def of_type(lines, *types):
    return [l for l in lines if l["type"] in types]


def hk_uapi(check, **env):
    lines, r = capture([bin_path("mesa-fork-hk-uapi"), check], **env)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d): %s%s" % (check, r.returncode, r.stdout,
                                                       r.stderr[-3000:]))
    return lines, r


def scenario(name, count=4, **env):
    lines, r = capture([bin_path("mesa-fork-scenarios"), "--validate", "--count",
                        str(count), name], **env)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d): %s%s" % (name, r.returncode, r.stdout,
                                                      r.stderr[-3000:]))
    return lines, r


class GlobalPriority(unittest.TestCase):
    def test_high_and_realtime_are_not_permitted(self):
        """The kernel refuses HIGH and REALTIME queues to every process
        (queue_create in AsahiLinux/linux drivers/gpu/drm/asahi/file.rs: "TODO:
        Allow with CAP_SYS_NICE"): hk lists LOW and MEDIUM only, and says
        VK_ERROR_NOT_PERMITTED at vkCreateDevice for the others without
        asking the kernel."""
        lines, r = hk_uapi("priority")
        got = dict(l.split(": ", 1) for l in r.stdout.splitlines()
                   if l.startswith("priority "))
        self.assertEqual(got, {
            "priority LOW": "VK_SUCCESS",
            "priority MEDIUM": "VK_SUCCESS",
            "priority HIGH": "VK_ERROR_NOT_PERMITTED_KHR",
            "priority REALTIME": "VK_ERROR_NOT_PERMITTED_KHR",
        }, r.stdout + r.stderr[-2000:])
        # What the kernel grants is what the queue family lists.
        self.assertIn("listed priorities: LOW MEDIUM\n", r.stdout)
        # The mainline enum: LOW = 0, MEDIUM = 1 (25.0.7 sent 3 and 2).
        self.assertEqual([q["priority"] for q in of_type(lines, "queue")], [0, 1])

    def test_default_queue_is_medium(self):
        lines, _ = scenario("dispatches", count=1)
        self.assertEqual([q["priority"] for q in of_type(lines, "queue")], [1])


class UscBase(unittest.TestCase):
    def test_given_once_per_queue_and_4gib_aligned(self):
        """Every queue gets the USC heap base, 4 GiB aligned, inside the VA
        window; every launch's pipeline, taken from it, is mapped (the
        capture reports an error otherwise)."""
        for model in ("m1", "m1max", "m2ultra"):
            with self.subTest(model=model):
                lines, _ = scenario("dispatches", count=3, ASAHI_SHIM_DEVICE=model)
                queues = of_type(lines, "queue")
                self.assertEqual(len(queues), 1, queues)
                base = queues[0]["usc_exec_base"]
                self.assertEqual(base % FOUR_GIB, 0, hex(base))
                self.assertGreaterEqual(base, 1 << 36, "below the robustness carve-out")
                compute = of_type(lines, "compute")
                self.assertTrue(compute)
                for c in compute:
                    self.assertEqual(c["errors"], [], c)
                    self.assertEqual(c["launches"], 3)


class Binds(unittest.TestCase):
    def test_new_flag_bits(self):
        """Every bind is READ or READ|WRITE in the mainline bit positions."""
        lines, _ = scenario("dispatches", count=1)
        binds = of_type(lines, "bind")
        self.assertGreater(len(binds), 5)
        for b in binds:
            self.assertIn(b["flags"], (READ, READ | WRITE), b)
            self.assertEqual(b["addr"] % 16384, 0)
            self.assertLessEqual(b["offset"] + b["range"], b["bo_size"], b)
        self.assertIn(READ | WRITE, [b["flags"] for b in binds])

    def test_buffer_va_bound_within_its_memory_and_unbound_at_destroy(self):
        """A buffer with a VA of its own (capture/replay, later sparse) is bound
        read-write over its own VA, rounded up to the 16 KiB page, but never
        over the guard page after it nor past the end of the memory, and its
        VA is unbound when the buffer is destroyed. Twice: on memory that
        ends where the buffer does (the bind stops there) and on memory that
        reaches past the VA and its guard page (the bind stops at the
        guard page, which stays unmapped so that an overread faults)."""
        lines, r = hk_uapi("replay-buffer")
        info = [l for l in r.stdout.splitlines() if l.startswith("replay-buffer: size")]
        self.assertEqual(len(info), 2, r.stdout)
        ranges = []
        seen = []
        for line in info:
            words = line.replace(",", "").split()
            size, memory, offset, addr = (int(words[2]), int(words[4]), int(words[6]),
                                          int(words[8], 16))
            self.assertGreater(offset, 0)
            self.assertEqual(memory % 16384, 0)
            va = (size + 16383) // 16384 * 16384

            # The second buffer may get the first one's VA back: one bind at
            # the address per buffer, in order.
            binds = [(i, b) for i, b in enumerate(lines)
                     if b["type"] == "bind" and b["addr"] == addr]
            self.assertEqual(len(binds), [l.split()[-1] for l in info].count(words[8]),
                             "one bind at the buffer's address per buffer")
            at, b = binds[seen.count(addr)]
            seen.append(addr)
            self.assertEqual((b["offset"], b["bo_size"]), (offset, memory))
            self.assertEqual(b["range"], min(va, memory - offset), line)
            self.assertGreaterEqual(b["range"], size)
            self.assertEqual(b["flags"], READ | WRITE)
            ranges.append((b["range"], memory - offset))

            unbinds = [(i, u) for i, u in enumerate(lines)
                       if u["type"] == "unbind" and u["addr"] == addr]
            unbound_at, u = unbinds[seen.count(addr) - 1]
            self.assertEqual(u["range"], b["range"])
            self.assertGreater(unbound_at, at)
        # The first memory ends with the buffer, the second goes on past its
        # VA and guard page.
        self.assertEqual(ranges[0][0], ranges[0][1])
        self.assertGreaterEqual(ranges[1][1], ranges[1][0] + 2 * 16384)

    def test_a_failed_bind_is_reported_and_nothing_is_unbound(self):
        """The kernel refuses the buffer's VM_BIND (ASAHI_SHIM_FAIL fails the
        N-th VM_BIND, N counted up until it is the buffer's):
        vkBindBufferMemory2 returns VK_ERROR_OUT_OF_DEVICE_MEMORY, the bind's
        VkBindMemoryStatus says the same, and destroying the buffer unbinds
        nothing at its address, where nothing was bound."""
        argv = [bin_path("mesa-fork-hk-uapi"), "replay-buffer"]
        for n in range(1, 41):
            lines, r = capture(argv, ASAHI_SHIM_FAIL="VM_BIND:%d" % n)
            failed = [l for l in r.stdout.splitlines()
                      if l.startswith("replay-buffer: bind failed")]
            if failed:
                break
        else:
            self.fail("no VM_BIND:N up to 40 failed the buffer's bind")
        self.assertIn("VM_BIND: call %d fails on request" % n, r.stderr)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr[-2000:])
        words = failed[0].replace(",", "").split()
        self.assertEqual(words[3:6], ["VK_ERROR_OUT_OF_DEVICE_MEMORY", "status",
                                      "VK_ERROR_OUT_OF_DEVICE_MEMORY"], failed[0])
        addr = int(words[-1], 16)
        self.assertIn("replay-buffer: destroyed", r.stdout)
        at_addr = [l for l in lines if l["type"] in ("bind", "unbind") and l["addr"] == addr]
        self.assertEqual(at_addr, [], "a bind or unbind at the buffer's address")


class Timestamps(unittest.TestCase):
    def test_timestamp_period_is_the_kernels_tick(self):
        """timestampPeriod is nanoseconds per tick of the kernel's
        command_timestamp_frequency_hz: 1 at the 1 GHz every kernel reports
        today, 41.67 at 24 MHz and 0.5 at 2 GHz (ASAHI_SHIM_TIMESTAMP_HZ)."""
        for hz, period in ((None, "1.000000"), ("24000000", "41.666668"),
                           ("2000000000", "0.500000")):
            with self.subTest(hz=hz):
                env = {"ASAHI_SHIM_TIMESTAMP_HZ": hz} if hz else {}
                _, r = scenario("query-copy", **env)
                self.assertIn("timestampPeriod: %s ns\n" % period, r.stdout)

    def test_through_bind_object_handles(self):
        """Timestamp queries write through objects the kernel handed out with
        GEM_BIND_OBJECT; handles start at 1."""
        lines, _ = scenario("timestamp")
        objects = of_type(lines, "object")
        self.assertTrue(objects, "the query pool is bound as a timestamp object")
        handles = {o["object"] for o in objects}
        self.assertTrue(all(h >= 1 for h in handles), handles)
        for o in objects:
            self.assertEqual(o["range"] % 16384, 0)
        stamped = [c for c in of_type(lines, "compute") if c["ts_end"]]
        self.assertTrue(stamped, "a compute command carries the end timestamp")
        self.assertTrue({c["ts_end"] for c in stamped} <= handles, (stamped, handles))
        # The two vkCmdWriteTimestamp queries land in two slots of the pool.
        offsets = [c["ts_end_offset"] for c in stamped]
        self.assertEqual(len(set(offsets)), 2, offsets)
        for off in offsets:
            self.assertEqual(off % 8, 0)
            self.assertLessEqual(off + 8, objects[0]["range"])


class RenderCommand(unittest.TestCase):
    def test_render_pass_reaches_the_kernel_in_the_new_form(self):
        lines, _ = hk_uapi("render")
        renders = of_type(lines, "render")
        self.assertEqual(len(renders), 1, lines)
        r = renders[0]
        self.assertEqual((r["width"], r["height"], r["layers"], r["samples"]),
                         (64, 32, 1, 1))
        self.assertIn(r["utile"], ([32, 32], [32, 16], [16, 16]))
        self.assertEqual(r["flags"] & ~0x40007, 0, "only flags the kernel knows")
        # A pass without draws only clears: every tile must still be processed.
        self.assertTrue(r["flags"] & 0x2, "DRM_ASAHI_RENDER_PROCESS_EMPTY_TILES")
        # The kernel sizes the tilebuffer from the per-sample size.
        self.assertGreater(r["sample_size"], 0)
        # ISP ZLS pixels: width - 1 in bits 0-14, height - 1 from bit 15.
        self.assertEqual(r["isp_zls_pixels"] & 0x7fff, 64 - 1)
        self.assertEqual(r["isp_zls_pixels"] >> 15, 32 - 1)
        # dispatch, render, dispatch: three commands, ordered on both subqueues.
        cmds = of_type(lines, "compute", "render")
        self.assertEqual([c["type"] for c in cmds], ["compute", "render", "compute"])


class RenderFields(unittest.TestCase):
    """The render command's buffers and programs, field by field, for the
    pass that clears and stores a 64x32 colour and a D32_SFLOAT depth
    image (mesa-fork-hk-uapi render)."""

    @classmethod
    def setUpClass(cls):
        lines, _ = hk_uapi("render")
        (cls.r,) = of_type(lines, "render")
        cls.computes = of_type(lines, "compute")

    def test_depth_buffer_and_its_metadata(self):
        d = self.r["depth"]
        self.assertNotEqual(d["base"], 0)
        # Compressed: the metadata follows the data in the same image.
        self.assertGreater(d["comp_base"], d["base"])
        # The data stride counts pages, with bit 0 set; the metadata stride
        # counts cache lines from bit 14, the low bits clear (hk_cmd_draw.c
        # encodes both). One field each for load, store and partial
        # renders in the mainline uAPI.
        self.assertEqual(d["stride"] & 1, 1, d)
        self.assertEqual(d["comp_stride"] & 0x3fff, 0, d)
        # No stencil attachment: nothing to load or store.
        self.assertEqual(self.r["stencil"], {"base": 0, "stride": 0, "comp_base": 0,
                                             "comp_stride": 0})
        # The background object's depth is the clear value, as raw bits.
        self.assertEqual(self.r["isp_bgobjdepth"], struct.unpack("<I", struct.pack("<f", 0.5))[0])

    def test_background_and_end_of_tile_programs(self):
        """The USC word of each program carries 4 in its low bits, as
        25.0.7 passed it (load_pipeline = usc | 4); programs are aligned,
        so the bits are not part of the address. Main and partial
        programs differ."""
        progs = {k: self.r[k] for k in ("bg", "eot", "partial_bg", "partial_eot")}
        for name, p in progs.items():
            self.assertEqual(p["usc"] & 7, 4, (name, p))
            self.assertNotEqual(p["rsrc_spec"], 0, (name, p))
        self.assertEqual(len({p["usc"] for p in progs.values()}), 4, progs)

    def test_payloads_have_the_sizes_the_kernel_reads(self):
        """The kernel reads sizeof(struct drm_asahi_cmd_render) = 240 and
        sizeof(struct drm_asahi_cmd_compute) = 64 bytes of a command, the
        sizes of the uAPI merged in Linux 6.16, and takes whatever follows
        for the next header. hk sends the size of the header it was built
        with, so a newer header with larger structs would break every
        SUBMIT on these kernels: the shim refuses it, and this says which
        sizes went out."""
        self.assertEqual(self.r["size"], 240)
        self.assertEqual({c["size"] for c in self.computes}, {64})

    def test_samplers_and_helpers(self):
        """Every command of the device gets the same sampler heap; with no
        shader that spills, neither helper program is set."""
        self.assertNotEqual(self.r["sampler_heap"], 0)
        self.assertGreater(self.r["sampler_count"], 0)
        for c in self.computes:
            self.assertEqual((c["sampler_heap"], c["sampler_count"]),
                             (self.r["sampler_heap"], self.r["sampler_count"]))
        for h in ("vertex_helper", "fragment_helper"):
            self.assertEqual(self.r[h], {"binary": 0, "cfg": 0, "data": 0})


class Syncs(unittest.TestCase):
    def test_waits_on_the_first_ioctl_signals_on_the_last(self):
        """A vkQueueSubmit of three compute streams goes as three ioctls (one
        command each without batching, streams kept apart at pipeline
        barriers): the first waits on the semaphore, the last signals the
        semaphore, the fence and the queue's timeline, the one in between has
        no sync at all."""
        lines, _ = hk_uapi("semaphores", **SEPARATE)
        cmds = of_type(lines, "compute")
        self.assertEqual(len(cmds), 4, cmds)
        first, second = cmds[0], cmds[1:]
        self.assertEqual(len(first["signals"]), 2, "semaphore and queue timeline")
        semaphore, timeline = first["signals"]
        self.assertEqual([c["waits"] for c in second], [[semaphore], [], []])
        self.assertEqual([len(c["signals"]) for c in second], [0, 0, 3])
        last = second[-1]["signals"]
        self.assertEqual(last[-1], timeline)
        self.assertEqual(len(set(last + [semaphore])), 4,
                         "signals a new semaphore and the fence: %s" % last)

    def test_repeated_timeline_waits_keep_the_highest_of_each(self):
        """One vkQueueSubmit waits twice on each of three timeline semaphores:
        on 2^32 and 2^32 - 1, on 2^32 + 5 then 5 (equal low halves), and
        twice on 7. The SUBMIT waits once per semaphore, on the higher value
        (2^32, 2^32 + 5, 7): values compared in 32 bits would keep 2^32 - 1
        and 5; two equal waits must leave one, not none."""
        lines, r = scenario("timeline-waits")
        (cmd,) = of_type(lines, "compute")
        self.assertEqual(len(set(cmd["waits"])), 3, cmd)
        self.assertEqual(len(cmd["waits"]), 3, cmd)
        self.assertEqual(sorted(cmd["wait_points"]), [7, 1 << 32, (1 << 32) + 5], cmd)
        self.assertNotIn("asahi drm-shim", r.stderr)

    def test_sync_debug_after_a_failed_submit_does_not_hang(self):
        """ASAHI_MESA_DEBUG=sync waits for each submission. After a SUBMIT the
        kernel refused, the queue's timeline has not moved on, so the wait
        is for work the kernel took, not for a point no submission signals,
        which the kernel would wait for forever (the shim says so and fails
        the wait instead). mesa-fork-hk-uapi semaphores submits one stream,
        then three: the GPU crashes after the first two SUBMITs, in the
        middle of the second vkQueueSubmit (after the first, the queue's
        point 1 is signalled both ways)."""
        _, r = capture([bin_path("mesa-fork-hk-uapi"), "semaphores"],
                       ASAHI_SHIM_CRASH_AFTER="2", ASAHI_MESA_DEBUG="sync", **SEPARATE)
        self.assertEqual(r.returncode, 2, r.stderr[-2000:])
        self.assertIn("VK_ERROR_DEVICE_LOST", r.stderr)
        self.assertIn("the GPU has crashed", r.stderr)
        self.assertNotIn("no submission signals", r.stderr)
        self.assertNotIn("would block", r.stderr)
        # And each accepted submission is waited on without complaint.
        _, ok = capture([bin_path("mesa-fork-scenarios"), "--count", "3", "chain"],
                        ASAHI_MESA_DEBUG="sync", **SEPARATE)
        self.assertEqual(ok.returncode, 0, ok.stderr[-2000:])
        self.assertNotIn("asahi drm-shim", ok.stderr)

    def test_out_of_host_memory_keeps_the_queue(self):
        """With libmesa-fork-failmalloc.so preloaded, mesa-fork-scenarios
        submit-oom fails the driver's 1st, 2nd, ... host allocation inside
        vkQueueSubmit: each submission says VK_ERROR_OUT_OF_HOST_MEMORY
        (never VK_ERROR_DEVICE_LOST), its fence is untouched, and an empty
        submission behind it signals its own fence (it would carry a
        timeline point no SUBMIT signals if the failed submission had moved
        the queue's timeline: the shim reports such a wait). Then the
        submission goes through."""
        preload = os.path.join(forklib.PREFIX, "lib", "mesa-fork",
                               "libmesa-fork-failmalloc.so")
        self.assertTrue(os.path.exists(preload), preload)
        for streams in ("4", "1"):
            with self.subTest(streams=streams):
                env = shim_env("asahi", HK_MERGE_STREAMS="0")
                env["LD_PRELOAD"] += ":" + preload
                r = run([bin_path("mesa-fork-scenarios"), "--count", streams,
                         "submit-oom"], env=env)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-2000:])
                failed = [l for l in r.stdout.splitlines() if l.startswith("allocation ")]
                # The runtime's submission, the command array and the barrier
                # indices at least.
                self.assertGreaterEqual(len(failed), 3, r.stdout)
                for l in failed:
                    self.assertTrue(l.endswith(": VK_ERROR_OUT_OF_HOST_MEMORY"), l)
                self.assertIn("submit-oom: %d submissions out of host memory, 0 out of "
                              "device memory, then submitted" % len(failed), r.stdout)
                self.assertNotIn("asahi drm-shim", r.stderr)

    def test_out_of_device_memory_at_the_first_submit_keeps_the_queue(self):
        """A SUBMIT the kernel fails with ENOMEM has queued nothing (the
        asahi driver's File::submit and Queue::submit allocate everything
        before they push the ioctl's one scheduler job): when it is the first
        ioctl of a vkQueueSubmit, the application gets
        VK_ERROR_OUT_OF_DEVICE_MEMORY with the ioctl and its errno named, the
        fence untouched and the queue usable, and submits again. With one
        command stream (one ioctl) and with four (four ioctls, the first
        failing)."""
        for streams in ("1", "4"):
            with self.subTest(streams=streams):
                lines, r = capture([bin_path("mesa-fork-scenarios"), "--count", streams,
                                    "submit-oom"], ASAHI_SHIM_FAIL="SUBMIT:1", **SEPARATE)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-2000:])
                self.assertIn("submission 1: VK_ERROR_OUT_OF_DEVICE_MEMORY", r.stdout)
                self.assertIn("submit-oom: 0 submissions out of host memory, 1 out of "
                              "device memory, then submitted", r.stdout)
                self.assertIn("DRM_IOCTL_ASAHI_SUBMIT failed: Cannot allocate memory; the "
                              "kernel queued nothing of it, the queue is kept", r.stderr)
                # The retry, whole: every stream once (the failed ioctl
                # queued nothing, so nothing of it is in the capture).
                self.assertEqual(len(of_type(lines, "compute")), int(streams),
                                 r.stderr[-2000:])
        # After a submission that went (SUBMIT 1), two batches the runtime
        # submits apart, the first failing: nothing of the call went, and
        # it goes whole the second time. (After the first submission, a
        # failure that moved the queue's timeline would leave a point
        # nothing signals, which the fence of the retry waits for.)
        lines, r = capture([bin_path("mesa-fork-scenarios"), "submit-oom-batches"],
                           ASAHI_SHIM_FAIL="SUBMIT:2", **SEPARATE)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-2000:])
        self.assertIn("submission 1: VK_ERROR_OUT_OF_DEVICE_MEMORY", r.stdout)
        self.assertIn("submitted: submit-oom-batches", r.stdout)
        self.assertEqual(len(of_type(lines, "compute")), 3, r.stderr[-2000:])

    def test_out_of_device_memory_after_a_first_submit_loses_the_queue(self):
        """When a later ioctl of a vkQueueSubmit fails with ENOMEM, or the
        first of a later batch of the call, the earlier ones went to the
        GPU: VK_ERROR_DEVICE_LOST, as before (Vulkan wants a failed call to
        have changed nothing). So too for render commands (the kernel keeps
        state of a failed one) and, with HK_MEMORY_LIMITS=0 (stock), for
        the first ioctl's ENOMEM."""
        # (The render scenario's first stream is compute: batched, its one
        # ioctl holds the render command too. No scenario has more than the
        # kernel's 64 commands per ioctl with a render command among the
        # first 64, so the looped path's render check is not exercised.)
        for fail, scenario, streams, limits, more in (
                ("SUBMIT:2", "submit-oom", "4", "1", SEPARATE),
                ("SUBMIT:3", "submit-oom-batches", "1", "1", SEPARATE),
                ("SUBMIT:1", "render", "1", "1", dict(SEPARATE, HK_PERFTEST="batch")),
                ("SUBMIT:1", "submit-oom", "1", "0", SEPARATE)):
            with self.subTest(fail=fail, scenario=scenario, limits=limits):
                _, r = capture([bin_path("mesa-fork-scenarios"), "--count", streams,
                                scenario], ASAHI_SHIM_FAIL=fail, HK_MEMORY_LIMITS=limits,
                               **more)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr[-2000:])
                self.assertRegex(r.stderr, r"vkQueueSubmit.*: VK_ERROR_DEVICE_LOST")
                self.assertIn("DRM_IOCTL_ASAHI_SUBMIT failed: Cannot allocate memory",
                              r.stderr)
                self.assertNotIn("queue is kept", r.stderr)

    def test_submit_failure_is_device_lost(self):
        """The kernel fails every SUBMIT once the GPU has crashed (ENODEV): the
        application gets VK_ERROR_DEVICE_LOST, not an abort or a hang."""
        _, r = capture([bin_path("mesa-fork-scenarios"), "--count", "3", "chain"],
                       ASAHI_SHIM_CRASH_AFTER="1", **SEPARATE)
        self.assertEqual(r.returncode, 2, r.stderr[-2000:])
        self.assertIn("VK_ERROR_DEVICE_LOST", r.stderr)
        self.assertIn("the GPU has crashed", r.stderr)

    def test_a_fence_goes_through_a_sync_file_and_a_timeline_reads_back(self):
        """A fence signalled by a submission, exported as a sync file
        (SYNCOBJ_HANDLE_TO_FD) and imported into another fence
        (SYNCOBJ_FD_TO_HANDLE), which waits without complaint; a timeline
        semaphore signalled to 5 reads 5 (SYNCOBJ_QUERY). The shim answers
        those ioctls as the kernel's drm_syncobj.c does (patch 0059): a
        stub there would give the fence no payload and the counter 0."""
        _, r = capture([bin_path("mesa-fork-hk-uapi"), "sync-fd"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-2000:])
        for line in ("sync-fd: vkGetFenceFdKHR: VK_SUCCESS",
                     "sync-fd: exported a file: yes",
                     "sync-fd: vkImportFenceFdKHR: VK_SUCCESS",
                     "sync-fd: vkWaitForFences on the imported payload: VK_SUCCESS",
                     "sync-fd: timeline counter 5"):
            self.assertIn(line, r.stdout.splitlines())
        self.assertNotIn("asahi drm-shim", r.stderr)

    def test_a_failed_transfer_of_an_empty_submission_loses_the_queue(self):
        """A submission of no command buffer passes its waits and signals
        on with SYNCOBJ_TRANSFER, which the kernel can refuse (ENOMEM, or
        EINVAL from a point with no fence). A refused transfer must not
        leave the queue's timeline, or the fence, on a point nothing
        signals: vkQueueSubmit says VK_ERROR_DEVICE_LOST, and
        ASAHI_MESA_DEBUG=sync's wait for the queue's last point ends (the
        shim reports a wait that could never end, instead of hanging)."""
        argv = [bin_path("mesa-fork-hk-uapi"), "empty-submit"]
        _, ok = capture(argv, ASAHI_MESA_DEBUG="sync")
        self.assertEqual(ok.returncode, 0, ok.stderr[-2000:])
        self.assertIn("empty-submit: its fence signalled", ok.stdout)
        self.assertNotIn("asahi drm-shim", ok.stderr)
        for fail in ("SYNCOBJ_TRANSFER:1", "SYNCOBJ_TRANSFER:2", "SYNCOBJ_TRANSFER:1+"):
            for debug in ("sync", ""):
                with self.subTest(fail=fail, debug=debug):
                    _, r = capture(argv, ASAHI_SHIM_FAIL=fail, ASAHI_MESA_DEBUG=debug)
                    self.assertIn("SYNCOBJ_TRANSFER: call", r.stderr, "no transfer failed")
                    self.assertEqual(r.returncode, 2, r.stdout + r.stderr[-2000:])
                    self.assertIn("empty-submit: vkQueueSubmit: VK_ERROR_DEVICE_LOST",
                                  r.stdout)
                    self.assertNotIn("no submission", r.stderr)
                    self.assertNotIn("would block", r.stderr)


# A chain of N dispatches with a pipeline barrier between each pair is N
# kernel commands when streams are not merged across pipeline barriers.
SEPARATE = {"HK_MERGE_STREAMS": "0"}


class Submission(unittest.TestCase):
    def submits(self, lines):
        by = {}
        for c in of_type(lines, "compute", "render"):
            by.setdefault(c["submit"], []).append(c)
        return [by[k] for k in sorted(by)]

    def test_one_command_per_submit_by_default(self):
        """Without HK_PERFTEST=batch each kernel command is its own ioctl."""
        lines, _ = scenario("chain", count=5, **SEPARATE)
        subs = self.submits(lines)
        self.assertEqual([len(s) for s in subs], [1] * 5)
        # Only the last ioctl of the vkQueueSubmit signals; each waits on the
        # compute work of the previous ones (barrier 0 = earlier ioctls).
        self.assertEqual([s[0]["cdm_barrier"] for s in subs], [0] * 5)
        self.assertEqual([s[0]["out_syncs"] > 0 for s in subs], [False] * 4 + [True])

    def test_batched_submission_splits_and_rebases_barriers(self):
        """HK_PERFTEST=batch: 70 compute commands go as 64 + 6 in two ioctls;
        barrier indices are relative to each ioctl (the shim refuses one
        beyond the commands it has seen), the first ioctl waits, the last
        signals."""
        stock, _ = scenario("chain", count=70, **SEPARATE)
        lines, _ = scenario("chain", count=70, HK_PERFTEST="batch", **SEPARATE)
        subs = self.submits(lines)
        self.assertEqual([len(s) for s in subs], [64, 6])
        self.assertEqual([c["cdm_barrier"] for c in subs[0]], list(range(64)))
        self.assertEqual([c["cdm_barrier"] for c in subs[1]], list(range(6)))
        self.assertEqual([c["vdm_barrier"] for s in subs for c in s], [0] * 70)
        self.assertEqual(subs[0][0]["out_syncs"], 0)
        self.assertGreater(subs[1][0]["out_syncs"], 0)
        # Same streams as one command per ioctl, in the same order.
        self.assertEqual([c["blocks"] for c in of_type(lines, "compute")],
                         [c["blocks"] for c in of_type(stock, "compute")])

    def test_batched_with_no_command_limit_reported(self):
        """A kernel whose parameters end before max_commands_per_submission
        (it reads 0): batching still submits, one command per ioctl."""
        lines, _ = scenario("chain", count=3, HK_PERFTEST="batch",
                            ASAHI_SHIM_PARAMS_BYTES="576", **SEPARATE)
        self.assertEqual([len(s) for s in self.submits(lines)], [1, 1, 1])

    def test_batched_render_and_compute_wait_on_each_other(self):
        """dispatch, render pass, dispatch in one ioctl: each command waits
        on every earlier command of both subqueues. Barrier index N is the
        N-th command of that subqueue in the ioctl (drm_asahi_cmd_header),
        so the render waits on compute 1 and no render, the last dispatch
        on render 1 and compute 1; the shim refuses an index past the
        commands it has seen."""
        for model in ("m1", "m2ultra"):
            with self.subTest(model=model):
                lines, _ = hk_uapi("render", HK_PERFTEST="batch", ASAHI_SHIM_DEVICE=model)
                (sub,) = self.submits(lines)
                self.assertEqual([c["type"] for c in sub], ["compute", "render", "compute"])
                self.assertEqual([(c["vdm_barrier"], c["cdm_barrier"]) for c in sub],
                                 [(0, 0), (0, 1), (1, 1)])

    def test_batched_small_submission_is_one_ioctl(self):
        lines, _ = scenario("chain", count=3, HK_PERFTEST="batch", **SEPARATE)
        subs = self.submits(lines)
        self.assertEqual([len(s) for s in subs], [3])
        self.assertEqual([c["cdm_barrier"] for c in subs[0]], [0, 1, 2])


class Sparse(unittest.TestCase):
    def test_nothing_sparse_is_advertised_on_any_chip(self):
        for model in ("m1", "m1max", "m2max", "m2ultra"):
            with self.subTest(model=model):
                _, r = hk_uapi("sparse", ASAHI_SHIM_DEVICE=model)
                self.assertIn("sparse features: 0, sparse properties: 0, "
                              "sparse queue families: 0", r.stdout)

    def test_sparse_resources_are_refused_before_any_allocation(self):
        """hk has no sparse support: a buffer or an image with any sparse
        flag fails with VK_ERROR_OUT_OF_DEVICE_MEMORY (the one code that both
        vkCreateBuffer and vkCreateImage may return and that is true; not
        VK_ERROR_FEATURE_NOT_PRESENT, which neither lists), sparse image formats
        list nothing, and a 256 MiB block still allocates after four 128 GiB
        sparse buffers were asked for (25.0.7 created them, reserving more
        VA than the main heap has)."""
        lines, r = hk_uapi("sparse")
        for flag in ("binding", "residency", "aliased"):
            self.assertIn("sparse buffer (%s): VK_ERROR_OUT_OF_DEVICE_MEMORY" % flag,
                          r.stdout)
            self.assertIn("sparse image (%s): VK_ERROR_OUT_OF_DEVICE_MEMORY" % flag,
                          r.stdout)
        self.assertIn("sparse 128 GiB buffers created: 0 of 4", r.stdout)
        self.assertIn("sparse image formats: 0", r.stdout)
        self.assertIn("sparse: allocated the 256 MiB block again", r.stdout)


class OpenDeviceErrors(unittest.TestCase):
    """agx_open_device() when an ioctl of it fails (ASAHI_SHIM_FAIL): for the
    physical device, then for the device. Each is one clear error, no
    crash, and no host memory lost (valgrind: no leak whose allocation went
    through agx_open_device)."""

    # The ioctls agx_open_device() makes, in order: the VM, the printf
    # buffer (created, bound at its VA and at the printf address, mapped);
    # then the same for the device.
    CASES = (("VM_CREATE:1", "DRM_IOCTL_ASAHI_VM_CREATE failed"),
             ("GEM_CREATE:1+", "cannot create the printf buffer"),
             # A failed bind of a new BO's VA is retried once, with a new BO.
             ("VM_BIND:1+", "cannot create the printf buffer"),
             ("VM_BIND:2", "cannot bind the printf buffer"),
             ("GEM_MMAP_OFFSET:1", "cannot map the printf buffer"),
             ("VM_CREATE:2", "DRM_IOCTL_ASAHI_VM_CREATE failed"),
             ("VM_BIND:4", "cannot bind the printf buffer"),
             ("GEM_MMAP_OFFSET:2", "cannot map the printf buffer"))

    def test_each_failing_ioctl(self):
        for fail, message in self.CASES:
            with self.subTest(fail=fail):
                env = shim_env("asahi", ASAHI_SHIM_FAIL=fail)
                r = run(["valgrind", "--leak-check=full",
                         "--show-leak-kinds=definite,indirect", "--num-callers=40",
                         bin_path("mesa-fork-scenarios"), "--count", "1", "dispatches"],
                        env=env, timeout=600)
                self.assertIn("fails on request (ASAHI_SHIM_FAIL)", r.stderr)
                self.assertIn(message, r.stderr)
                # A clear failure: no device, or vkCreateDevice failing.
                self.assertIn(r.returncode, (1, 2), r.stderr[-3000:])
                self.assertTrue("no Vulkan device" in r.stderr or
                                "VK_ERROR_INITIALIZATION_FAILED" in r.stderr,
                                r.stderr[-3000:])
                self.assertNotIn("Process terminating", r.stderr)
                # Valgrind's records are separated by its empty lines.
                records = re.split(r"\n==\d+== \n", r.stderr)
                leaks = [rec for rec in records if " lost in loss record " in rec
                         and "agx_open_device" in rec]
                self.assertEqual(leaks, [], "\n".join(leaks)[:4000])

    def test_malformed_knob(self):
        r = run([bin_path("mesa-fork-scenarios"), "dispatches"],
                env=shim_env("asahi", ASAHI_SHIM_FAIL="VM_BIND"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('ASAHI_SHIM_FAIL="VM_BIND" is not IOCTL:N', r.stderr)


class BuildChecks(unittest.TestCase):
    """Mesa's meson stops with a message naming the problem, before anything
    is compiled, when the uAPI header lacks what hk needs or when the asahi
    gallium driver (still on the downstream uAPI) is asked for."""

    def setup(self, *extra):
        """meson setup of the Mesa tree as the build runs it: the build's
        environment and machine files (its native file names Debian's
        python3), config/fork.ini's options, then extra."""
        from mesafork import build
        with tempfile.TemporaryDirectory() as tmp:
            opts = config()["meson"]["options"].split()
            machine = build.machine_files(forklib.HOST.fork, build_env())
            return run(["meson", "setup", os.path.join(tmp, "build"),
                        os.path.join(WORK, "mesa")] + machine + opts + list(extra),
                       env=build_env(), timeout=600)

    def test_header_without_the_mainline_uapi(self):
        with tempfile.TemporaryDirectory() as inc:
            os.makedirs(os.path.join(inc, "drm"))
            with open(os.path.join(inc, "drm", "asahi_drm.h"), "w") as f:
                f.write("#include <linux/types.h>\n"
                        "struct drm_asahi_params_global { __u64 features; };\n")
            # -I: searched before the system's headers, which may hold a
            # mainline asahi_drm.h (Linux 6.16 and later) of their own.
            r = self.setup("-Dc_args=-I" + inc, "-Dcpp_args=-I" + inc)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("<drm/asahi_drm.h> lacks DRM_IOCTL_ASAHI_VM_BIND", r.stdout + r.stderr)

    def test_gallium_asahi_is_refused(self):
        inc = "-idirafter" + os.path.join(WORK, "deps", "asahi-uapi", "include")
        r = self.setup("-Dgallium-drivers=asahi", "-Dc_args=" + inc, "-Dcpp_args=" + inc)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("The asahi gallium driver still speaks the downstream asahi uAPI",
                      r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
