# SPDX-License-Identifier: MIT
"""VK_EXT_memory_budget on Honeykrisp and panvk, and Honeykrisp's heap
that follows RAM (docs/changes/memory-budget.md), with mesa-fork-va-probe
on the asahi and panthor drm-shims: nothing executes, and BOs nobody maps
commit no memory, but heapUsage counts what the kernel (the shim) gave the
process and heapBudget follows MemAvailable. The machine's memory is the
shim's model (DRM_SHIM_RAM, DRM_SHIM_MEM_AVAILABLE: patch 0053), so that
the verdicts do not depend on the host's RAM or on what else runs on it;
one test reads the host's own MemAvailable, within a slack. ShimModel
tests the model's DRM_SHIM_MEM_ANON itself."""

import os
import re
import sys
import tempfile
import unittest

from forklib import bin_path, run, shim_env

MiB = 1 << 20
GiB = 1 << 30

# What an idle device holds, the driver's own BOs: 24.6 MiB on hk (M1 Max
# model), 608 KiB on panvk (G610 model), as the probe prints them. The
# tests allow this much on top of what the probe allocates.
INTERNAL_MAX = 64 * MiB

LINE = re.compile(r"^memory: held=(\d+) heap=(\d+) budget=(\d+|none) usage=(\d+|none)", re.M)


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s in /proc/meminfo" % key)


def probe(driver, *args, statuses=(0,), **env):
    """Runs the probe on DRIVER's shim; returns [(held, heap, budget,
    usage)] of its memory: lines (budget and usage None without the
    extension) and its stderr. statuses: the exit statuses allowed (2: a
    target missed)."""
    r = run([bin_path("mesa-fork-va-probe")] + list(args), env=shim_env(driver, **env))
    lines = [(int(h), int(s), None if b == "none" else int(b), None if u == "none" else int(u))
             for h, s, b, u in LINE.findall(r.stdout)]
    if r.returncode not in statuses or len(lines) < 2:
        raise AssertionError("va-probe exited %d: %s%s" % (r.returncode, r.stdout,
                                                           r.stderr[-2000:]))
    return lines, r.stderr


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

    def first(self, statuses=(0,), **env):
        lines, err = probe(self.driver, "--target-gib", "1", statuses=statuses,
                           **dict(self.env, **env))
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
            self.assertGreaterEqual(budget, usage)
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

    def test_budget_follows_memavailable(self):
        """On a 16 GiB machine, whatever the host: as what the process
        finds available falls from all of RAM to 1 GiB, the budget is
        usage plus nine tenths of MemAvailable (that in whole MiB), at most
        the heap; it falls with MemAvailable, and the heap does not move. A
        budget computed from the total memory would not move. On both
        shims MemAvailable is already lower by what the driver's own BOs
        pinned (patches 0054, 0056)."""
        ram = 16 * GiB
        seen = []
        for avail in (ram, 12 * GiB, 6 * GiB, 3 * GiB, GiB):
            with self.subTest(available=avail):
                (_, heap, budget, usage), _ = self.first(
                    statuses=(0, 2), DRM_SHIM_RAM=str(ram), DRM_SHIM_MEM_AVAILABLE=str(avail))
                self.assertEqual(heap, self.model_heap(ram))
                mem_available = avail - usage if self.pins else avail
                want = min(heap, usage + (mem_available - mem_available // 10) // MiB * MiB)
                self.assertEqual(budget, want, "usage %d, MemAvailable %d" % (usage, avail))
                seen.append(budget)
        self.assertEqual(seen[0], self.model_heap(ram), "all of RAM free: the heap")
        self.assertEqual(seen, sorted(seen, reverse=True))
        self.assertGreater(seen[-2] - seen[-1], GiB)

    def test_unreadable_meminfo_is_said_once_and_the_budget_is_the_usage(self):
        """/proc/meminfo that cannot be opened: nothing more is offered, so
        the budget is exactly the usage (never below it, as rounding the
        sum down to a MiB made it), and the driver says so once for the
        probe's many queries."""
        lines, err = probe(self.driver, "--target-gib", "2", DRM_SHIM_MEMINFO="unreadable",
                           **self.env)
        self.assertGreater(len(lines), 2)
        for held, heap, budget, usage in lines:
            self.assertEqual(budget, usage, lines)
        self.assertEqual(err.count("cannot read MemAvailable from /proc/meminfo"), 1, err)

    def test_budget_reads_the_hosts_memavailable(self):
        """Without the model the budget follows this machine's
        MemAvailable, read just before the probe (within 160 MiB: the rest
        of the machine moves it while the probe runs)."""
        available = meminfo("MemAvailable")
        (_, heap, budget, usage), _ = self.first(**self.host_env)
        want = min(heap, usage + available * 9 // 10)
        self.assertLessEqual(abs(budget - want), 160 * MiB,
                             "budget %d MiB, min(heap, usage + 9/10 of MemAvailable) %d MiB"
                             % (budget // MiB, want // MiB))


class HkMemoryBudget(Common, unittest.TestCase):
    driver = "asahi"
    knob = "HK_MEMORY_BUDGET"
    pins = True
    # On the host, a heap larger than the machine, so that the budget, not
    # the heap, is what its available memory bounds.
    host_env = {"HK_SYSMEM": str(4 * meminfo("MemTotal"))}

    @staticmethod
    def model_heap(ram):
        return working_set_heap(ram)

    def heap(self, **env):
        lines, _ = probe("asahi", "--target-gib", "1", **env)
        return lines[0][1]

    def test_heap_follows_ram_as_metal(self):
        """Two thirds of RAM (three quarters from 48 GiB) on every shim
        model, for the RAM sizes Macs ship with (MemTotal a little below
        them) and this machine's own; half with HK_WORKING_SET_HEAP=0, as
        stock."""
        sizes = [(None, meminfo("MemTotal"))] + [
            (gb, gb * GiB - 300 * MiB) for gb in (8, 16, 24, 32, 64, 128)]
        for model in ("m1", "m1max", "m2max", "m2ultra"):
            for gb, total in sizes:
                env = {"ASAHI_SHIM_DEVICE": model}
                if gb:
                    env["DRM_SHIM_RAM"] = str(total)
                with self.subTest(model=model, ram_gb=gb or "host"):
                    self.assertEqual(self.heap(**env), working_set_heap(total))
                    self.assertEqual(self.heap(HK_WORKING_SET_HEAP="0", **env),
                                     total // 2 // MiB * MiB)
        # The 16 GB Mac of the users' reports: 10922 MiB, Metal's 10922.67 MB
        # less the carve-out.
        self.assertEqual(working_set_heap(16 * GiB), 10922 * MiB)

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
    pins = True
    host_env = {}

    @staticmethod
    def model_heap(ram):
        """Stock panvk's heap: half of RAM up to 4 GiB, three quarters
        above."""
        return ram // 2 if ram <= 4 * GiB else ram * 3 // 4

    def test_heap_stays(self):
        """panvk's heap is stock's, with the knob on or off, on this
        machine and on 4 and 8 GiB boards."""
        for ram in (None, 4 * GiB, 8 * GiB):
            env = {"DRM_SHIM_RAM": str(ram)} if ram else {}
            want = self.model_heap(ram or meminfo("MemTotal"))
            for knob in ("1", "0"):
                with self.subTest(PANVK_MEMORY_BUDGET=knob, ram=ram or "host"):
                    (_, heap, _, _), _ = self.first(PANVK_MEMORY_BUDGET=knob, **env)
                    self.assertEqual(heap, want)


# Reads MemAvailable, fills 512 MiB of its own (touched), reads it again.
FILL = """
def avail():
    with open("/proc/meminfo") as f:
        return int(dict(l.split(":", 1) for l in f)["MemAvailable"].split()[0]) * 1024
a = avail()
b = bytearray(512 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
print(a, avail())
"""


class ShimModel(unittest.TestCase):
    """The shim's model of the machine (patch 0053) itself, in a Python
    process with the asahi shim preloaded."""

    def fill(self, **env):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "fill.py")
            with open(script, "w") as f:
                f.write(FILL)
            r = run([sys.executable, script],
                    env=shim_env("asahi", DRM_SHIM_RAM=str(8 * GiB),
                                 DRM_SHIM_MEM_AVAILABLE=str(4 * GiB), **env))
        if r.returncode != 0:
            raise AssertionError("the fill script failed: %s" % r.stderr[-2000:])
        before, after = map(int, r.stdout.split())
        return before, after, r.stderr

    def test_the_process_own_memory_counts_on_request(self):
        """With DRM_SHIM_MEM_ANON=count, 512 MiB the process fills lower
        MemAvailable by that much (a few MiB of the interpreter's own
        aside); without it, or with a malformed value (said once),
        MemAvailable stays the modelled 4 GiB."""
        before, after, _ = self.fill(DRM_SHIM_MEM_ANON="count")
        self.assertLessEqual(before, 4 * GiB)
        self.assertAlmostEqual(before - after, 512 * MiB, delta=32 * MiB)
        for value in (None, "yes"):
            with self.subTest(DRM_SHIM_MEM_ANON=value):
                env = {"DRM_SHIM_MEM_ANON": value} if value else {}
                before, after, err = self.fill(**env)
                self.assertEqual((before, after), (4 * GiB, 4 * GiB))
                self.assertEqual(err.count('DRM_SHIM_MEM_ANON="yes" is not "count"'),
                                 1 if value else 0, err)


if __name__ == "__main__":
    unittest.main()
