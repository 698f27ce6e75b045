# SPDX-License-Identifier: MIT
"""panvk device-shared TLS (PANVK_SHARED_TLS) and WLS reuse (PANVK_WLS_REUSE),
end to end on the panthor drm-shim (G610): GPU virtual address the driver
binds, read from the shim's VM_BIND log, with command buffers kept in flight
and shaders whose TLS and WLS sizes come from panvk's compiler."""

import json
import os
import tempfile
import unittest

from forklib import bin_path, run, shim_env

MiB = 1 << 20


def inflight(kind, cmdbufs=1, validate=True, valgrind=False, **opts):
    """Runs mesa-fork-inflight; returns (summary, VM peak in bytes, big
    map/unmap operations, stderr)."""
    env_knobs = {k: v for k, v in opts.items() if k.isupper()}
    args = []
    for k, v in opts.items():
        if k.isupper():
            continue
        flag = "--" + k.replace("_", "-")
        args += [flag] if v is True else [flag, str(v)]
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "vm.jsonl")
        env = shim_env("panfrost", PAN_SHIM_VM_LOG=log, **env_knobs)
        cmd = [bin_path("mesa-fork-inflight"), "--cmdbufs", str(cmdbufs)] + args + [kind]
        if validate:
            cmd.insert(1, "--validate")
        if valgrind:
            cmd = ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite",
                   "--error-exitcode=99"] + cmd
        r = run(cmd, env=env, timeout=600)
        lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        summary = [l for l in lines if l.get("summary")]
        if r.returncode not in (0, 3) or not summary:
            raise AssertionError("inflight failed (%d): %s %s" % (r.returncode, r.stdout,
                                                                 r.stderr[-3000:]))
        ops = [json.loads(l) for l in open(log)]
    return summary[0], max(o["peak"] for o in ops), ops, r


class SharedTLS(unittest.TestCase):
    def test_stock_grows_with_command_buffers_until_out_of_memory(self):
        peaks = []
        for n in (1, 2, 3):
            s, peak, _, _ = inflight("tls", n, tls_kib=4, PANVK_SHARED_TLS="0")
            self.assertEqual(s["ok"], n)
            peaks.append(peak)
        # Each command buffer adds its own TLS: 608 MiB at 4 KiB per thread.
        self.assertGreater(peaks[1] - peaks[0], 512 * MiB, peaks)
        self.assertGreater(peaks[2] - peaks[1], 512 * MiB, peaks)
        s, _, _, _ = inflight("tls", 12, validate=False, tls_kib=4, PANVK_SHARED_TLS="0")
        self.assertGreater(s["out_of_device_memory"], 0, s)

    def test_shared_stays_flat_and_succeeds(self):
        peaks = []
        for n in (1, 12, 32):
            s, peak, _, _ = inflight("tls", n, tls_kib=4)
            self.assertEqual((s["ok"], s["out_of_device_memory"], s["validation_messages"]),
                             (n, 0, 0))
            peaks.append(peak)
        self.assertLess(max(peaks) - min(peaks), 16 * MiB, peaks)

    def test_buffer_grows_only_to_the_power_of_two_needed(self):
        s, _, ops, _ = inflight("tls", 4, tls_kib=1, tls_grow=True)
        self.assertEqual(s["ok"], 4)
        maps = [o["size"] // MiB for o in ops if o["op"] == "map" and o["size"] >= 64 * MiB]
        # 1, 2, 3 and 4 KiB per thread: 3 rounds up to 4, so the last reuses it.
        self.assertEqual(maps, [152, 304, 608])

    def test_replaced_buffers_are_freed_and_nothing_leaks(self):
        """Valgrind clean at device destroy, with buffers replaced while older
        command buffers still held them; every big mapping is unmapped."""
        s, _, ops, r = inflight("tls", 4, tls_kib=1, tls_grow=True, valgrind=True)
        self.assertIn("definitely lost: 0 bytes", r.stderr)
        big = [o for o in ops if o["size"] >= 64 * MiB]
        self.assertEqual(sorted(o["size"] for o in big if o["op"] == "map"),
                         sorted(o["size"] for o in big if o["op"] == "unmap"))

    def test_malformed_knob_warns_and_is_stock(self):
        s, peak, _, r = inflight("tls", 3, tls_kib=4, PANVK_SHARED_TLS="shared")
        self.assertIn('PANVK_SHARED_TLS="shared" is not a boolean', r.stderr)
        _, stock_peak, _, _ = inflight("tls", 3, tls_kib=4, PANVK_SHARED_TLS="0")
        self.assertEqual(peak, stock_peak)

    def test_submitted_command_buffers(self):
        s, _, _, _ = inflight("tls", 12, tls_kib=4, submit=True)
        self.assertEqual((s["ok"], s["validation_messages"]), (12, 0))


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
        _, large, _, _ = inflight("wls", groups=1 << 16)
        self.assertEqual(small, large)
        self.assertLess(large, 64 * MiB)

    def test_concurrent_dispatches_get_disjoint_memory(self):
        """Without barriers the dispatches may overlap: their WLS must not."""
        _, one, _, _ = inflight("wls", groups=4096)
        _, eight, _, _ = inflight("wls", groups=4096, dispatches=8)
        # Each of the seven extra dispatches binds a range of its own.
        self.assertGreater((eight - one) / 7, 8 * MiB, (one, eight))

    def test_dispatches_after_a_barrier_reuse_it(self):
        _, one, _, _ = inflight("wls", groups=4096)
        s, eight, _, _ = inflight("wls", groups=4096, dispatches=8, barrier=True)
        self.assertEqual((s["ok"], s["validation_messages"]), (1, 0))
        self.assertEqual(eight, one)

    def test_grid_sized_wls_over_4_gib_is_an_error_not_a_wrap(self):
        """65536 workgroups x 32 KiB x cores exceeds 32 bits: stock used to wrap
        the size and allocate a fraction of it; now it fails cleanly."""
        s, peak, _, _ = inflight("wls", validate=False, groups=1 << 16, PANVK_WLS_REUSE="0")
        self.assertEqual((s["ok"], s["out_of_device_memory"]), (0, 1))
        s, peak, _, _ = inflight("wls", groups=1 << 16)
        self.assertEqual(s["ok"], 1)
        self.assertLess(peak, 64 * MiB)

    def test_malformed_knob_warns_and_is_stock(self):
        _, peak, _, r = inflight("wls", groups=4096, PANVK_WLS_REUSE="2")
        self.assertIn('PANVK_WLS_REUSE="2" is not a boolean', r.stderr)
        self.assertGreater(peak, 2 << 30)


if __name__ == "__main__":
    unittest.main()
