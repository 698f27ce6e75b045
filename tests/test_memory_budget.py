# SPDX-License-Identifier: MIT
"""VK_EXT_memory_budget on Honeykrisp and panvk, and Honeykrisp's heap
that follows RAM (docs/changes/memory-budget.md), with mesa-fork-va-probe
on the asahi and panthor drm-shims: nothing executes, and BOs nobody maps
commit no memory, but heapUsage counts what the kernel (the shim) gave the
process and heapBudget reads this machine's MemAvailable, so another
process that touches its pages lowers it."""

import re
import subprocess
import sys
import time
import unittest

from forklib import bin_path, run, shim_env

MiB = 1 << 20
GiB = 1 << 30

# What an idle device holds, the driver's own BOs: 24.6 MiB on hk (M1 Max
# model), 608 KiB on panvk (G610 model), as the probe prints them. The
# tests allow this much on top of what the probe allocates.
INTERNAL_MAX = 64 * MiB

# The most a test makes another process hold, on a machine others share.
HELPER_MAX = 8 * GiB

LINE = re.compile(r"^memory: held=(\d+) heap=(\d+) budget=(\d+|none) usage=(\d+|none)", re.M)


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s in /proc/meminfo" % key)


def probe(driver, *args, **env):
    """Runs the probe on DRIVER's shim; returns [(held, heap, budget,
    usage)] of its memory: lines (budget and usage None without the
    extension) and its stderr."""
    r = run([bin_path("mesa-fork-va-probe")] + list(args), env=shim_env(driver, **env))
    lines = [(int(h), int(s), None if b == "none" else int(b), None if u == "none" else int(u))
             for h, s, b, u in LINE.findall(r.stdout)]
    if r.returncode != 0 or len(lines) < 2:
        raise AssertionError("va-probe exited %d: %s%s" % (r.returncode, r.stdout,
                                                           r.stderr[-2000:]))
    return lines, r.stderr


class Holder:
    """Another process holding N bytes of anonymous memory, every page
    written, until closed."""

    def __init__(self, n):
        code = ("import mmap, sys\n"
                "n = int(sys.argv[1]); m = mmap.mmap(-1, n)\n"
                "for i in range(0, n, 4096): m[i] = 1\n"
                "print('ready', flush=True); sys.stdin.read()\n")
        self.p = subprocess.Popen([sys.executable, "-c", code, str(n)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.p.stdout.readline().strip() != "ready":
            self.close()
            raise AssertionError("the helper could not hold %d MiB" % (n // MiB))

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)
        self.p.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def working_set_heap(total):
    """Honeykrisp's default heap (agx_default_heap_size): two thirds of
    MemTotal, three quarters from 48 GiB, in whole MiB. The VA window's
    408 GiB main heap bounds it only above 544 GiB of RAM."""
    heap = total * 3 // 4 if total >= 48 * GiB else total * 2 // 3
    return min(heap, 0x65ffff8000) // MiB * MiB


class Common:
    driver = None
    knob = None
    env = {}

    def first(self, **env):
        lines, err = probe(self.driver, "--target-gib", "1", **dict(self.env, **env))
        return lines[0], err

    def test_extension_and_usage(self):
        """With the knob on (the default) the extension is there; usage
        starts at the driver's own BOs, not zero, and grows by exactly what
        the probe allocates; budget is never above the heap."""
        lines, _ = probe(self.driver, "--target-gib", "2", **self.env)
        held0, heap, budget0, usage0 = lines[0]
        self.assertIsNotNone(budget0, "no VK_EXT_memory_budget")
        self.assertEqual(held0, 0)
        self.assertGreater(usage0, 0, "usage leaves out the driver's own BOs")
        self.assertLess(usage0, INTERNAL_MAX)
        for held, size, budget, usage in lines:
            self.assertEqual(size, heap)
            self.assertLessEqual(budget, heap)
            self.assertGreater(budget, 0)
            self.assertGreaterEqual(usage - usage0, held)
            self.assertLess(usage - usage0, held + INTERNAL_MAX)
        self.assertEqual(lines[-1][0], 2 * GiB)

    def test_knob_off_hides_the_extension(self):
        (_, _, budget, usage), err = self.first(**{self.knob: "0"})
        self.assertEqual((budget, usage), (None, None))
        self.assertNotIn(self.knob, err)

    def test_malformed_knob_is_reported_and_stock(self):
        (_, _, budget, _), err = self.first(**{self.knob: "of"})
        self.assertIsNone(budget)
        self.assertEqual(err.count('%s="of" is not a boolean' % self.knob), 1, err)

    def budget_holding(self, n):
        """(budget, usage, MemAvailable) while another process holds n
        bytes; MemAvailable is read just before the probe runs."""
        with Holder(n):
            available = meminfo("MemAvailable")
            (_, heap, budget, usage), _ = self.first()
        return heap, budget, usage, available

    def test_budget_drops_when_another_process_holds_memory(self):
        """Another process holds H, then H + 1 GiB of touched anonymous
        memory, H chosen so that the budget is below the heap: each time
        the budget is usage + nine tenths of MemAvailable as read just
        before the probe (within 160 MiB: the rest of the machine moves it
        while the probe runs), and it drops by nine tenths of what the
        extra GiB took from MemAvailable. A budget computed from the total
        memory would not move. MemAvailable also moves with the rest of the
        machine between the sizing of H and the probe (a process that just
        exited, memory being freed); a try where the budget did not come
        below the heap is repeated, with H sized anew."""
        misses = []
        slack = 160 * MiB
        for _ in range(3):
            (_, heap, _, usage), _ = self.first()
            hold = max(0, meminfo("MemAvailable") - (heap - usage) * 10 // 9) + GiB
            if hold + GiB > HELPER_MAX:
                self.skipTest("the heap is %.1f GiB: %.1f GiB would have to be held to bring "
                              "the budget below it" % (heap / GiB, (hold + GiB) / GiB))
            runs = [self.budget_holding(hold), self.budget_holding(hold + GiB)]
            for heap, budget, usage, available in runs:
                want = min(heap, usage + available * 9 // 10)
                self.assertLessEqual(abs(budget - want), slack,
                                     "budget %d MiB, usage + 9/10 of MemAvailable %d MiB "
                                     "(heap %d MiB)" % (budget // MiB, want // MiB, heap // MiB))
            (_, before, _, avail0), (_, after, _, avail1) = runs
            if before + slack >= heap:
                misses.append("MemAvailable %d MiB while %d MiB held: the budget is the heap"
                              % (avail0 // MiB, hold // MiB))
                time.sleep(2)
                continue
            self.assertGreater(avail0 - avail1, GiB // 2,
                               "holding 1 GiB more took %d MiB from MemAvailable"
                               % ((avail0 - avail1) // MiB))
            self.assertAlmostEqual(before - after, (avail0 - avail1) * 9 // 10, delta=2 * slack)
            return
        self.fail("the budget never came below the heap: %s" % "; ".join(misses))


class HkMemoryBudget(Common, unittest.TestCase):
    driver = "asahi"
    knob = "HK_MEMORY_BUDGET"
    # A heap larger than the machine, so that the budget, not the heap,
    # is what available memory bounds.
    env = {"HK_SYSMEM": str(4 * meminfo("MemTotal"))}

    def heap(self, **env):
        lines, _ = probe("asahi", "--target-gib", "1", **env)
        return lines[0][1]

    def test_heap_follows_ram_as_metal(self):
        """Two thirds of this machine's RAM (three quarters from 48 GiB) on
        every shim model; half with HK_WORKING_SET_HEAP=0, as stock."""
        total = meminfo("MemTotal")
        for model in ("m1", "m1max", "m2max", "m2ultra"):
            with self.subTest(model=model):
                self.assertEqual(self.heap(ASAHI_SHIM_DEVICE=model), working_set_heap(total))
                self.assertEqual(self.heap(ASAHI_SHIM_DEVICE=model, HK_WORKING_SET_HEAP="0"),
                                 total // 2 // MiB * MiB)

    def test_hk_sysmem_overrides(self):
        for knob in ("1", "0"):
            with self.subTest(HK_WORKING_SET_HEAP=knob):
                self.assertEqual(self.heap(HK_SYSMEM=str(5 * GiB), HK_WORKING_SET_HEAP=knob),
                                 5 * GiB)

    def test_malformed_hk_sysmem_is_reported_and_ignored(self):
        lines, err = probe("asahi", "--target-gib", "1", HK_SYSMEM="8G")
        self.assertEqual(lines[0][1], working_set_heap(meminfo("MemTotal")))
        self.assertEqual(err.count('HK_SYSMEM="8G" is not a size in bytes'), 1, err)


class PanvkMemoryBudget(Common, unittest.TestCase):
    driver = "panfrost"
    knob = "PANVK_MEMORY_BUDGET"

    def test_heap_stays(self):
        """panvk's heap is stock's: three quarters of RAM above 4 GiB, with
        the knob on or off."""
        total = meminfo("MemTotal")
        want = total // 2 if total <= 4 * GiB else total * 3 // 4
        for knob in ("1", "0"):
            with self.subTest(PANVK_MEMORY_BUDGET=knob):
                (_, heap, _, _), _ = self.first(PANVK_MEMORY_BUDGET=knob)
                self.assertEqual(heap, want)


if __name__ == "__main__":
    unittest.main()
