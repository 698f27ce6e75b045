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

    def __init__(self, args, status=None, **env):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "cap.jsonl")
            r = run([bin_path("mesa-fork-va-probe")] + list(args),
                    env=shim_env("asahi", ASAHI_SHIM_CAPTURE=log, **env))
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

    def test_a_malformed_knob_is_reported_and_stock(self):
        p = Probe(["--target-gib", "1"], status=0, HK_MEMORY_LIMITS="of")
        self.assertEqual(p.max_alloc, 128 * GiB)
        self.assertEqual(p.stderr.count('HK_MEMORY_LIMITS="of"'), 1, p.stderr)


if __name__ == "__main__":
    unittest.main()
