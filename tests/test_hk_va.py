# SPDX-License-Identifier: MIT
"""Honeykrisp's VA window (change 3): the main heap is the whole window
that is not reserved, so one process holds far more than the 64 GiB wall
newer Mesa's sparse alias imposes. mesa-fork-va-probe on the asahi drm-shim
(nothing executes; BOs nobody maps cost no memory)."""

import re
import unittest

from forklib import bin_path, run, shim_env

GiB = 1 << 30


def probe(*args, sysmem_gib=80, model="m1max", status=0):
    """Runs the probe, on a machine the shim models with 2 TiB of RAM, so
    that the heap or the VA window stops it, not the memory budget
    (HK_MEMORY_LIMITS); returns (GiB held, what stopped it, VkResult, RSS
    MiB, stderr)."""
    r = run([bin_path("mesa-fork-va-probe")] + list(args),
            env=shim_env("asahi", ASAHI_SHIM_DEVICE=model, HK_SYSMEM=str(sysmem_gib * GiB),
                         DRM_SHIM_RAM=str(2 << 40)))
    m = re.search(r"^held: ([0-9.]+) GiB in (\d+) blocks; stopped by (.*): (\S+)$",
                  r.stdout, re.M)
    rss = re.search(r"^rss: (\d+) MiB$", r.stdout, re.M)
    if r.returncode != status or not m or not rss:
        raise AssertionError("va-probe exited %d, expected %d: %s%s" % (
            r.returncode, status, r.stdout, r.stderr[-2000:]))
    return float(m.group(1)), m.group(3), m.group(4), int(rss.group(1)), r.stderr


class VaWindow(unittest.TestCase):
    def test_more_than_64_gib_on_max_models(self):
        """72 GiB in 256 MiB blocks on an M1 Max and an M2 Max layout, with
        HK_SYSMEM raised to 80 GiB; the shim commits nothing for them."""
        for model in ("m1max", "m2max"):
            with self.subTest(model=model):
                held, why, result, rss, _ = probe("--target-gib", "72", model=model)
                self.assertEqual((held, why, result), (72.0, "target reached", "VK_SUCCESS"))
                self.assertLess(rss, 512, "MiB resident for 72 GiB nobody mapped")

    def test_heap_limit_is_a_clean_out_of_device_memory(self):
        """HK_SYSMEM sets the heap: the allocation past it fails cleanly,
        before the driver looks for VA."""
        held, why, result, _, err = probe()
        self.assertEqual((held, why, result),
                         (80.0, "vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY"))
        self.assertNotIn("Failed to allocate BO VMA", err)

    def test_a_missed_target_is_exit_status_2(self):
        held, why, result, _, _ = probe("--target-gib", "100", status=2)
        self.assertEqual((held, result), (80.0, "VK_ERROR_OUT_OF_DEVICE_MEMORY"))

    def test_the_va_wall_is_the_whole_main_heap(self):
        """With a heap larger than the window, what stops the probe is the VA
        window itself: the 408 GiB main heap of the 512 GiB window, never
        halved, less what the device allocated for itself."""
        held, why, result, _, err = probe(sysmem_gib=1000)
        self.assertEqual((why, result), ("vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY"))
        self.assertIn("Failed to allocate BO VMA", err)
        # 408 GiB less 32 KiB, less the 256 MiB block that no longer fits
        # beside what the device allocated for itself.
        self.assertEqual(held, 407.75)

    def test_touching_blocks(self):
        held, why, _, _, _ = probe("--target-gib", "1", "--touch")
        self.assertEqual((held, why), (1.0, "target reached"))

    def test_bad_arguments(self):
        for args in (["--block-mib", "0"], ["--block-mib", "4097"], ["--target-gib", "5000"],
                     ["--target-gib", "1x"], ["--frobnicate"]):
            with self.subTest(args=args):
                r = run([bin_path("mesa-fork-va-probe")] + args, env=shim_env("asahi"))
                self.assertEqual(r.returncode, 64)


if __name__ == "__main__":
    unittest.main()
