# SPDX-License-Identifier: MIT
"""Honeykrisp on 8 and 16 GB Macs (issue 39, patches 0053-0055): what an
application can really get, and a clear error when it cannot. On the asahi
drm-shim with the machine modelled (DRM_SHIM_RAM, DRM_SHIM_MEM_AVAILABLE):
the shim pins an object's pages at its first bind and fails the bind with
ENOMEM when they do not fit, as drm/asahi does (mmu.rs Vm::bind_object);
MemAvailable falls by what is pinned. mesa-fork-va-probe allocates blocks
as ggml-vulkan does (1 GiB by default), the fork with HK_MEMORY_LIMITS on
(the default) and off (stock)."""

import json
import os
import re
import tempfile
import unittest

import forklib
from forklib import bin_path, run, shim_env

MiB = 1 << 20
GiB = 1 << 30

# MemTotal of a Mac with this much RAM: a little below it (firmware
# carve-outs; docs/changes/memory-budget.md).
CARVE_OUT = 300 * MiB
STOCK = {"HK_MEMORY_LIMITS": "0"}
INTERNAL_MAX = 64 * MiB
# What an idle device holds on the shim (M1 Max model), as the probe's
# first memory line prints it: 25755648 bytes.
INTERNAL_HK = 25755648
BUDGET_LINE = re.compile(r"^(memory|freed): held=(\d+) heap=(\d+) budget=(\d+) usage=(\d+)",
                         re.M)


def mac(ram_gb, available):
    """The environment of a Mac with ram_gb GB of which `available` bytes
    are available to the process when it starts."""
    return {"DRM_SHIM_RAM": str(ram_gb * GiB - CARVE_OUT),
            "DRM_SHIM_MEM_AVAILABLE": str(available)}


class Probe:
    """One run of mesa-fork-va-probe: what it held, what stopped it, its
    memory lines, its limits, its stderr and the shim's capture."""

    def __init__(self, args, status=None, target=None, **env):
        t = target or forklib.HOST
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "cap.jsonl")
            r = t.run([t.bin_path("mesa-fork-va-probe")] + list(args),
                      env=t.shim_env("asahi", ASAHI_SHIM_CAPTURE=log, **env))
            self.capture = []
            if os.path.exists(log):
                with open(log) as f:
                    self.capture = [json.loads(l) for l in f if l.strip()]
        self.stdout, self.stderr, self.status = r.stdout, r.stderr, r.returncode
        m = re.search(r"^held: ([0-9.]+) GiB in (\d+) blocks; stopped by (.*): (\S+)$",
                      r.stdout, re.M)
        lim = re.search(r"^limits: maxMemoryAllocationSize=(\d+) maxBufferSize=(\d+)$",
                        r.stdout, re.M)
        if not m or not lim or (status is not None and r.returncode != status):
            raise AssertionError("va-probe %s exited %d (expected %s): %s%s"
                                 % (" ".join(args), r.returncode, status, r.stdout,
                                    r.stderr[-3000:]))
        self.blocks, self.why, self.result = int(m.group(2)), m.group(3), m.group(4)
        again = re.search(r"^again: [0-9.]+ GiB in (\d+) blocks of (\d+) MiB; stopped by "
                          r"(.*): (\S+)$", r.stdout, re.M)
        if ("--again" in args or "--again-block-mib" in args) != bool(again):
            raise AssertionError("va-probe %s: an again line %s: %s"
                                 % (" ".join(args), "missing" if not again else "unasked",
                                    r.stdout))
        self.again = int(again.group(1)) if again else None
        self.max_alloc, self.max_buffer = int(lim.group(1)), int(lim.group(2))
        rows = [(k, int(h), int(s), int(b), int(u)) for k, h, s, b, u in
                BUDGET_LINE.findall(r.stdout)]
        self.memory = [row[1:] for row in rows if row[0] == "memory"]
        self.freed = [row[1:] for row in rows if row[0] == "freed"]
        if not self.memory or len(self.freed) != 1:
            raise AssertionError("no memory or freed line: %s" % r.stdout)

    def binds_of(self, size):
        return [c for c in self.capture if c.get("type") == "bind" and c["bo_size"] == size]

    def pin_failures(self):
        return [l for l in self.stderr.splitlines()
                if "asahi drm-shim: VM_BIND" in l and "cannot pin" in l]


class SmallMacs(unittest.TestCase):
    def test_1_gib_blocks_on_an_8_gb_mac_with_5_gib_available(self):
        """AsahiLinux/linux #468's shape: ggml's 1 GiB blocks on an 8 GB
        Mac where the desktop and another process leave 5 GiB. The fork
        refuses the block that does not fit the budget before creating
        or binding it, in one line naming its size, the budget, the usage
        and what is available; no bind fails. Stock binds it, the kernel
        (the shim) cannot pin it, and the message now names the ioctl and
        its errno."""
        env = mac(8, 5 * GiB)
        fork = Probe(["--block-mib", "1024", "--target-gib", "8"], status=2, **env)
        stock = Probe(["--block-mib", "1024", "--target-gib", "8"], status=2,
                      **dict(env, **STOCK))
        for p in (fork, stock):
            self.assertEqual((p.why, p.result),
                             ("vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY"), p.stdout)
            self.assertGreaterEqual(p.blocks, 3, p.stdout)
        self.assertEqual(fork.pin_failures(), [], fork.stderr)
        refusal = re.search(r"hk: vkAllocateMemory of 1024 MiB refused: the memory budget is "
                            r"(\d+) MiB, (\d+) MiB are in use, and the system has (\d+) MiB "
                            r"available", fork.stderr)
        self.assertTrue(refusal, fork.stderr)
        budget, usage, available = map(int, refusal.groups())
        self.assertGreater(usage + 1024, budget)
        # What the shim leaves is 5 GiB less what is pinned: every BO the
        # process holds, the usage.
        self.assertAlmostEqual(available, 5 * 1024 - usage, delta=1)
        # Nothing was bound for the refused block.
        self.assertEqual(len(fork.binds_of(GiB)), fork.blocks)
        # (stock's agx_bo_create() tries once more after emptying its cache)
        self.assertGreaterEqual(len(stock.pin_failures()), 1, stock.stderr)
        self.assertIn("hk: vkAllocateMemory of 1024 MiB failed: DRM_IOCTL_ASAHI_VM_BIND "
                      "failed: Cannot allocate memory", stock.stderr)
        self.assertNotIn("refused", stock.stderr)

    def test_353_mib_blocks_on_a_16_gb_mac_with_10_gib_available(self):
        """llama.cpp #29270's shape: 353 MiB blocks on a 16 GB Mac with
        10 GiB available. 8 GiB fit the budget and are had, with no
        refusal and no failed bind, stock and fork."""
        env = mac(16, 10 * GiB)
        for knobs in ({}, STOCK):
            with self.subTest(knobs=knobs):
                p = Probe(["--block-mib", "353", "--target-gib", "8"], status=0,
                          **dict(env, **knobs))
                self.assertEqual(p.why, "target reached")
                self.assertEqual((p.pin_failures(), "refused" in p.stderr), ([], False),
                                 p.stderr)

    def test_the_heap_is_checked_before_the_bo_is_bound(self):
        """A 3 GiB heap (HK_SYSMEM) on a machine with room: the fourth
        1 GiB block is refused by the heap. The fork binds three BOs of
        1 GiB and names the heap in its message; stock binds (pins) the
        fourth before refusing it."""
        env = dict(mac(64, 60 * GiB), HK_SYSMEM=str(3 * GiB))
        fork = Probe(["--block-mib", "1024", "--target-gib", "8"], status=2, **env)
        stock = Probe(["--block-mib", "1024", "--target-gib", "8"], status=2,
                      **dict(env, **STOCK))
        for p in (fork, stock):
            self.assertEqual((p.blocks, p.result), (3, "VK_ERROR_OUT_OF_DEVICE_MEMORY"))
        self.assertEqual(len(fork.binds_of(GiB)), 3, fork.capture)
        self.assertIn("hk: vkAllocateMemory of 1024 MiB refused: the heap holds 3072 MiB, "
                      "of which 3072 MiB are allocated", fork.stderr)
        self.assertEqual(len(stock.binds_of(GiB)), 4, stock.capture)

    def test_freed_memory_comes_back_at_once(self):
        """2 GiB in 1 GiB blocks, then freed: with the fork the usage and
        what the shim has pinned fall back at once (no BO above 4 MiB is
        cached), so a model unloaded and planned again sees its memory;
        stock keeps them in the BO cache, pinned."""
        env = mac(16, 12 * GiB)
        fork = Probe(["--block-mib", "1024", "--target-gib", "2"], status=0, **env)
        stock = Probe(["--block-mib", "1024", "--target-gib", "2"], status=0,
                      **dict(env, **STOCK))
        for p in (fork, stock):
            self.assertGreaterEqual(p.memory[-1][3], p.memory[0][3] + 2 * GiB)
        self.assertLess(fork.freed[0][3], fork.memory[0][3] + INTERNAL_MAX, fork.stdout)
        self.assertGreaterEqual(stock.freed[0][3], stock.memory[0][3] + 2 * GiB, stock.stdout)

    def test_the_bo_cache_is_bounded(self):
        """512 blocks of 2 MiB (small enough to be cached), freed: the
        fork's cache keeps at most 64 MiB of them, stock's all 1 GiB."""
        env = mac(16, 12 * GiB)
        fork = Probe(["--block-mib", "2", "--target-gib", "1"], status=0, **env)
        stock = Probe(["--block-mib", "2", "--target-gib", "1"], status=0,
                      **dict(env, **STOCK))
        self.assertLessEqual(fork.freed[0][3], fork.memory[0][3] + 64 * MiB, fork.stdout)
        self.assertGreater(fork.freed[0][3], fork.memory[0][3], "nothing cached at all")
        self.assertGreaterEqual(stock.freed[0][3], stock.memory[0][3] + GiB, stock.stdout)

    def test_the_largest_allocation_is_the_heap(self):
        """maxMemoryAllocationSize and maxBufferSize are the heap's size,
        never below the spec's 1 GiB; 128 GiB in stock."""
        for ram_gb in (8, 16):
            with self.subTest(ram_gb=ram_gb):
                env = mac(ram_gb, ram_gb * GiB - CARVE_OUT)
                p = Probe(["--target-gib", "1"], status=0, **env)
                heap = p.memory[0][1]
                self.assertEqual((p.max_alloc, p.max_buffer), (heap, heap))
                s = Probe(["--target-gib", "1"], status=0, **dict(env, **STOCK))
                self.assertEqual((s.max_alloc, s.max_buffer), (128 * GiB, 128 * GiB))
        p = Probe(["--block-mib", "64", "--target-gib", "1"], **mac(1, 500 * MiB))
        self.assertLess(p.memory[0][1], GiB)
        self.assertEqual((p.max_alloc, p.max_buffer), (GiB, GiB))

    def test_threads_allocating_at_once_cannot_overcommit_the_budget(self):
        """Eight threads allocate 1 GiB each at the same moment on an
        8 GB Mac with 5 GiB available: each allocation counts the others
        in flight, so at most four are had (4.5 GiB of budget) and the
        rest refused, and no bind is left for the kernel to fail. One of
        the four may be refused too, when it was checked while one to be
        refused was still in flight: the check errs on the side of the
        machine. Stock creates them all and the shim cannot pin the fifth
        and later ones."""
        env = mac(8, 5 * GiB)
        args = ["--block-mib", "1024", "--target-gib", "8", "--threads", "8"]
        fork = Probe(args, status=2, **env)
        stock = Probe(args, status=2, **dict(env, **STOCK))
        self.assertEqual(fork.pin_failures(), [], fork.stderr)
        self.assertIn(fork.blocks, (3, 4), fork.stdout)
        self.assertEqual(fork.result, "VK_ERROR_OUT_OF_DEVICE_MEMORY", fork.stdout)
        self.assertEqual(len(fork.binds_of(GiB)), fork.blocks, fork.capture)
        self.assertGreaterEqual(len(stock.pin_failures()), 1, stock.stderr)

    def test_a_refused_allocation_gives_back_what_it_reserved(self):
        """After a refusal and freeing every block, the same allocations
        are had again: neither the heap's reservation nor the allocation
        in flight of a refused block stays counted. Refused by the budget
        (8 GB Mac, 5 GiB available) and by the heap (HK_SYSMEM of 3 GiB)."""
        for name, env, blocks in (("budget", mac(8, 5 * GiB), 4),
                                  ("heap", dict(mac(64, 60 * GiB), HK_SYSMEM=str(3 * GiB)), 3)):
            with self.subTest(refused_by=name):
                p = Probe(["--block-mib", "1024", "--target-gib", "8", "--again"], status=2,
                          **env)
                self.assertIn("refused: the %s" % ("memory budget" if name == "budget"
                                                   else "heap holds"), p.stderr)
                self.assertEqual((p.blocks, p.again), (blocks, blocks), p.stdout)
                self.assertEqual(p.pin_failures(), [], p.stderr)

    def test_the_bo_cache_is_emptied_before_an_allocation_is_refused(self):
        """An 8 GB Mac with 1 GiB available: 64 MiB in 2 MiB blocks, freed
        into the BO cache, where they stay pinned; then one block of
        870 MiB, which fits the budget only once the cache gives its
        64 MiB back (841 MiB of room beside a full cache, 899 MiB beside
        an empty one). The fork empties the cache and has it, with no
        failed bind."""
        p = Probe(["--block-mib", "2", "--target-mib", "64", "--again-block-mib", "870"],
                  status=0, **mac(8, GiB))
        # The cache did hold the small blocks when the big one came.
        self.assertGreaterEqual(p.freed[0][3], p.memory[0][3] + 60 * MiB, p.stdout)
        self.assertEqual(p.again, 1, p.stdout + p.stderr)
        self.assertNotIn("refused", p.stderr)
        self.assertEqual(p.pin_failures(), [], p.stderr)

    def test_the_driver_keeps_64_mib_for_its_own_bos(self):
        """With 400 MiB left beside the device's own BOs, a block of
        350 MiB fits nine tenths of it but would leave the driver less than
        the 64 MiB it keeps for the BOs it creates while the application
        runs (shaders, command buffers): refused, no bind failed. 330 MiB
        is had."""
        env = mac(8, 400 * MiB + INTERNAL_HK)
        p = Probe(["--block-mib", "350", "--target-mib", "350"], status=2, **env)
        self.assertEqual(p.blocks, 0, p.stdout)
        m = re.search(r"refused: the memory budget is (\d+) MiB, (\d+) MiB are in use, and "
                      r"the system has (\d+) MiB available", p.stderr)
        self.assertTrue(m, p.stderr)
        budget, usage, available = map(int, m.groups())
        self.assertEqual(available, 400)
        self.assertEqual(budget - usage, 400 - 64)
        self.assertEqual(p.pin_failures(), [], p.stderr)
        Probe(["--block-mib", "330", "--target-mib", "330"], status=0, **env)

    def test_the_usage_is_never_past_the_budget(self):
        """A 64 MiB heap (HK_SYSMEM) with 40 MiB allocated: the device's
        own BOs take the usage past the heap. It is reported as the heap,
        so that the budget (at most the heap) is never below it and a
        client's budget - usage does not wrap (patch 0039)."""
        p = Probe(["--block-mib", "40", "--target-mib", "40"], status=0,
                  HK_SYSMEM=str(64 * MiB))
        for held, heap, budget, usage in p.memory + p.freed:
            self.assertLessEqual(usage, budget, p.stdout)
            self.assertLessEqual(budget, heap, p.stdout)
        held, heap, budget, usage = p.memory[-1]
        self.assertEqual((held, usage), (40 * MiB, heap), p.stdout)

    def test_a_malformed_knob_is_reported_and_stock(self):
        p = Probe(["--target-gib", "1"], status=0, HK_MEMORY_LIMITS="of")
        self.assertEqual(p.max_alloc, 128 * GiB)
        self.assertEqual(p.stderr.count('HK_MEMORY_LIMITS="of"'), 1, p.stderr)


class SmallMacsArm64(unittest.TestCase):
    """The arm64 build, under qemu-user, on #468's and #29270's shapes and
    with eight threads allocating at once: what the Macs run. The other
    tests above run on this machine's build only (the arithmetic is the
    same code; test_arm64 compares the two builds' kernel traffic)."""

    def setUp(self):
        self.t = forklib.target("arm64")

    def test_468_and_29270_shapes(self):
        env = mac(8, 5 * GiB)
        p = Probe(["--block-mib", "1024", "--target-gib", "8"], status=2, target=self.t,
                  **env)
        self.assertEqual((p.blocks, p.pin_failures()), (4, []), p.stdout + p.stderr)
        self.assertIn("hk: vkAllocateMemory of 1024 MiB refused: the memory budget is",
                      p.stderr)
        p = Probe(["--block-mib", "353", "--target-gib", "8"], status=0, target=self.t,
                  **mac(16, 10 * GiB))
        self.assertEqual((p.pin_failures(), "refused" in p.stderr), ([], False), p.stderr)

    def test_threads_allocating_at_once(self):
        p = Probe(["--block-mib", "1024", "--target-gib", "8", "--threads", "8"], status=2,
                  target=self.t, **mac(8, 5 * GiB))
        self.assertEqual(p.pin_failures(), [], p.stderr)
        self.assertIn(p.blocks, (3, 4), p.stdout)


# The scenarios of mesa-fork-scenarios that record compute work (and
# events, queries and timestamps), whose every BO the tests below fail in
# turn. Rendering is left out: hk links graphics shaders at draw time and
# that path still assumes success (patch 0058).
COMPUTE_SCENARIOS = ("dispatches", "barrier", "chain", "event", "timestamp", "statistics",
                     "indirect-fill", "indirect-dispatch", "secondary", "host", "meta",
                     "mixed", "query-copy", "reset-event", "timeline-waits", "sync2")
# A scenario's run exits 0 when every call succeeded, 2 when one failed
# (it names the call and its VkResult), 1 when no device could be made
# (the physical device's first BOs failed), 77 when the device lacks what
# it needs; anything else, a signal above all, is a crash.
CLEAN_EXITS = (0, 1, 2, 77)


class OutOfMemoryEverywhere(unittest.TestCase):
    """Patch 0058: with every BO from the N-th on failing to be created
    (ASAHI_SHIM_FAIL=GEM_CREATE:N+) or bound (VM_BIND:N+, the kernel
    failing to pin), for N from the first until the scenario no longer
    meets a failure, each scenario ends with a Vulkan error or succeeds:
    never a crash. Stock's crashes are the same runs' signals."""

    def sweep(self, scenario, ioctl, argv=None):
        """(N, exit status, the line naming the failed call, stdout) of
        each run."""
        argv = argv or [bin_path("mesa-fork-scenarios"), "--count", "3", scenario]
        runs = []
        for n in range(1, 200):
            r = run(argv, env=shim_env("asahi", ASAHI_SHIM_FAIL="%s:%d+" % (ioctl, n)),
                    timeout=60)
            failed = [l for l in r.stderr.splitlines() if " failed: VK_" in l]
            runs.append((n, r.returncode, failed[-1] if failed else "", r.stdout))
            if "fails on request (ASAHI_SHIM_FAIL)" not in r.stderr:
                if r.returncode != 0:
                    raise AssertionError("%s with %s:%d+ met no failure and exited %d: %s"
                                         % (scenario, ioctl, n, r.returncode, r.stderr[-2000:]))
                return runs
        raise AssertionError("%s: still meeting failures at %s:200+" % (scenario, ioctl))

    def test_no_crash_when_the_scratch_cannot_grow(self):
        """mesa-fork-threads' shader spills: its first dispatch needs the
        device's scratch, a BO of 2 GiB on the M1 Max model. With it
        failing, the round's command buffer ends in
        VK_ERROR_OUT_OF_DEVICE_MEMORY (the probe counts it) and the next
        round goes on; stock crashed mapping the missing BO."""
        argv = [bin_path("mesa-fork-threads"), "--threads", "1", "--rounds", "2"]
        oom_rounds = 0
        for ioctl in ("GEM_CREATE", "VM_BIND"):
            with self.subTest(ioctl=ioctl):
                runs = self.sweep("threads", ioctl, argv)
                crashes = [(n, rc) for n, rc, _, _ in runs if rc not in CLEAN_EXITS]
                self.assertEqual(crashes, [], "threads %s: N and exit status" % ioctl)
                for _, rc, _, out in runs:
                    m = re.search(r'"out_of_device_memory": (\d+)', out)
                    if rc == 0 and m:
                        oom_rounds += int(m.group(1))
        self.assertGreater(oom_rounds, 0, "no round ended out of device memory")

    def test_no_crash_when_memory_runs_out_anywhere(self):
        seen = set()
        for scenario in COMPUTE_SCENARIOS:
            for ioctl in ("GEM_CREATE", "VM_BIND"):
                with self.subTest(scenario=scenario, ioctl=ioctl):
                    runs = self.sweep(scenario, ioctl)
                    crashes = [(n, rc) for n, rc, _, _ in runs if rc not in CLEAN_EXITS]
                    self.assertEqual(crashes, [], "%s %s: N and exit status" % (scenario, ioctl))
                    for _, rc, line, _ in runs:
                        if rc == 2 and "OUT_OF_DEVICE_MEMORY" in line:
                            seen.add(line.split(" failed:")[0].split(": ", 1)[-1].split("(")[0])
        # The calls the fixed paths fail: a pipeline, an event, a query
        # pool, a descriptor pool and a recorded command buffer.
        for call in ("vkCreateComputePipelines", "vkCreateEvent", "vkCreateQueryPool",
                     "vkCreateDescriptorPool", "vkEndCommandBuffer"):
            self.assertIn(call, seen, sorted(seen))


if __name__ == "__main__":
    unittest.main()
