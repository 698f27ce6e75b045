# SPDX-License-Identifier: MIT
"""panvk on boards with little memory (issue 39, item 4; patches 0056,
0057): the panthor drm-shim pins an object's pages when it is mapped and
fails the map with ENOMEM when they do not fit the modelled machine, as
panthor does (panthor_mmu.c panthor_vm_prepare_map_op_ctx); panvk, which
maps every BO at creation, now refuses an allocation the heap or the
machine cannot hold before creating it (PANVK_MEMORY_LIMITS), where it
used to ignore its heap and let the map fail in the kernel."""

import re
import unittest

from forklib import bin_path, run, shim_env

MiB = 1 << 20
GiB = 1 << 30
STOCK = {"PANVK_MEMORY_LIMITS": "0"}


def board(ram, available):
    return {"DRM_SHIM_RAM": str(ram), "DRM_SHIM_MEM_AVAILABLE": str(available)}


def probe(args, status, **env):
    """(blocks held, VkResult that stopped it, stderr) of
    mesa-fork-va-probe on the panthor shim (G610 model)."""
    r = run([bin_path("mesa-fork-va-probe")] + list(args), env=shim_env("panfrost", **env))
    m = re.search(r"^held: ([0-9.]+) GiB in (\d+) blocks; stopped by (.*): (\S+)$",
                  r.stdout, re.M)
    if r.returncode != status or not m:
        raise AssertionError("va-probe %s exited %d, expected %d: %s%s"
                             % (" ".join(args), r.returncode, status, r.stdout,
                                r.stderr[-3000:]))
    return int(m.group(2)), m.group(4), r.stderr


def pin_failures(err):
    return [l for l in err.splitlines() if "panthor drm-shim: VM_BIND cannot pin" in l]


class SmallBoards(unittest.TestCase):
    def test_512_mib_blocks_on_an_8_gb_board_with_2_5_gib_available(self):
        """The fork refuses the block that does not fit what the machine
        can still give before creating it, with the numbers; stock
        creates it and the map fails in the kernel (the shim) with
        ENOMEM, which panvk's kmod layer reports with its errno. (Blocks
        of 512 MiB, as 3 GiB is about what the shim's VM leaves panvk's
        allocations.)"""
        env = board(8 * GiB, 5 * GiB // 2)
        args = ["--block-mib", "512", "--target-gib", "8"]
        n, result, err = probe(args, 2, **env)
        self.assertEqual(result, "VK_ERROR_OUT_OF_DEVICE_MEMORY")
        self.assertGreaterEqual(n, 3)
        self.assertEqual(pin_failures(err), [], err)
        self.assertRegex(err, r"panvk: vkAllocateMemory of 512 MiB refused: the memory budget "
                              r"is \d+ MiB, \d+ MiB are in use, and the system has \d+ MiB "
                              r"available")
        n_stock, result, err = probe(args, 2, **dict(env, **STOCK))
        self.assertEqual(result, "VK_ERROR_OUT_OF_DEVICE_MEMORY")
        self.assertEqual(len(pin_failures(err)), 1, err)
        self.assertIn("DRM_IOCTL_PANTHOR_VM_BIND failed (err=12)", err)
        self.assertNotIn("refused", err)

    def test_the_heap_is_enforced(self):
        """A 4 GiB board: panvk's heap is half of it. The fork holds
        2 GiB and refuses the third block, naming the heap; stock ignores
        its heap and holds what the machine lets it pin."""
        env = board(4 * GiB, 4 * GiB)
        args = ["--block-mib", "512", "--target-gib", "4"]
        n, result, err = probe(args, 2, **env)
        self.assertEqual((n, result), (4, "VK_ERROR_OUT_OF_DEVICE_MEMORY"))
        self.assertIn("panvk: vkAllocateMemory of 512 MiB refused: the heap holds 2048 MiB, "
                      "of which 2048 MiB are allocated", err)
        n_stock, _, _ = probe(args, 2, **dict(env, **STOCK))
        self.assertGreater(n_stock, n)

    def test_a_malformed_knob_is_reported_and_stock(self):
        env = board(4 * GiB, 4 * GiB)
        n, _, err = probe(["--block-mib", "512", "--target-gib", "4"], 2,
                          PANVK_MEMORY_LIMITS="of", **env)
        self.assertGreater(n, 4)
        self.assertEqual(err.count('PANVK_MEMORY_LIMITS="of"'), 1, err)


if __name__ == "__main__":
    unittest.main()
