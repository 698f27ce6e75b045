# SPDX-License-Identifier: MIT
"""ANV i915 cached+coherent memory type (ANV_CACHED_COHERENT), end to end on
the Intel drm-shim: what vulkaninfo lists and in which order, which PAT
index and CPU mapping the driver asks the kernel for, which type real
allocators pick for readback, and the readback probe."""

import json
import os
import re
import tempfile
import unittest

import forklib
from forklib import bin_path, run, shim_env

DL, HV, HC, CA = 0x1, 0x2, 0x4, 0x8
WC = DL | HV | HC          # coherent, write-combined
NC = DL | HV | CA          # cached, not coherent
CC = DL | HV | HC | CA     # cached and coherent: the new type

PROTECTED = 0x20
PR = DL | PROTECTED        # protected, which the shim's kernel supports on Gfx12

# Base types (the shim reports protected-content support on Gfx12, so a
# protected type follows the stock types), then ANV's descriptor-buffer copy
# of each non-protected base type.
EXPECTED = {
    # platform: (stock, fork)
    "mtl": ([WC, NC, PR, WC, NC], [WC, NC, PR, CC, WC, NC, CC]),
    "arl": ([WC, NC, PR, WC, NC], [WC, NC, PR, CC, WC, NC, CC]),
    "tgl": ([DL, WC, CC, PR, DL, WC, CC],) * 2,    # LLC: unchanged
    "adl": ([DL, WC, CC, PR, DL, WC, CC],) * 2,    # LLC: unchanged
    "glk": ([WC, NC, WC, NC],) * 2,                # Atom-class, no set-PAT uAPI
}

# The PAT of MTL/ARL (BSpec 45101; Linux's i915 programs the same table in
# xelpg_setup_private_ppat()): index 0 is write-back without coherency, 3 is
# write-back and 1-way coherent (the GPU snoops the CPU's caches).
MTL_ARL_WRITEBACK_INCOHERENT_PAT = 0
MTL_ARL_CACHED_COHERENT_PAT = 3
# Index 1 is the entry ANV uses for write-combined and scanout memory there
# (write-through in L4, uncached in the CPU's view: mapped write-combined).
MTL_ARL_WC_PAT = 1

# The i915 uAPI's mmap modes, as the intel drm-shim names them.
WB, WCMAP = "wb", "wc"


def intel_env(platform, knob=None, **extra):
    env = shim_env("intel", INTEL_STUB_GPU_PLATFORM=platform, **extra)
    if knob is not None:
        env["ANV_CACHED_COHERENT"] = knob
    return env


def vulkaninfo_memory_types(env):
    r = run(["vulkaninfo"], env=env)
    if r.returncode != 0:
        raise AssertionError("vulkaninfo failed: " + r.stderr[-2000:])
    section = r.stdout.split("VkPhysicalDeviceMemoryProperties:", 1)[1]
    section = section.split("VkPhysicalDeviceFeatures:", 1)[0]
    types = re.split(r"memoryTypes\[\d+\]:", section)[1:]
    flags = []
    for t in types:
        m = re.search(r"propertyFlags\s*=\s*0x([0-9a-fA-F]+)", t)
        flags.append(int(m.group(1), 16))
    return flags, r


def memtypes(env, *args):
    r = run([bin_path("mesa-fork-memtypes")] + list(args), env=env)
    if r.returncode != 0:
        raise AssertionError("mesa-fork-memtypes failed: " + r.stderr[-2000:])
    return [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")], r


class VulkaninfoMemoryTypes(unittest.TestCase):
    def test_types_per_platform_stock_and_fork(self):
        for plat, (stock, fork) in EXPECTED.items():
            for label, knob, want in (("fork", None, fork), ("stock", "0", stock)):
                with self.subTest(platform=plat, mode=label):
                    got, _ = vulkaninfo_memory_types(intel_env(plat, knob))
                    self.assertEqual([hex(f) for f in got], [hex(f) for f in want])

    def test_knob_on_is_the_default(self):
        got, _ = vulkaninfo_memory_types(intel_env("arl", "1"))
        self.assertEqual(got, EXPECTED["arl"][1])

    def test_malformed_knob_warns_and_is_stock(self):
        got, r = vulkaninfo_memory_types(intel_env("arl", "cached"))
        self.assertEqual(got, EXPECTED["arl"][0])
        self.assertIn('ANV_CACHED_COHERENT="cached" is not a boolean', r.stderr)


def buffers_by_type(facts, log):
    """{memory type index: (flags, PAT index, mmap mode)} for the allocations
    of mesa-fork-memtypes --alloc-each, from the intel drm-shim's log: each
    allocation is the GEM_CREATE_EXT of its size (ANV may round it up, never
    by the 4 MiB that separates two types) and the CPU mapping of that handle
    requested next."""
    with open(log) as f:
        gem = [json.loads(l) for l in f]
    types = {f["index"]: f["flags"] for f in facts if f["kind"] == "type"}
    out = {}
    for a in (f for f in facts if f["kind"] == "alloc"):
        if a["result"] != "VK_SUCCESS":
            raise AssertionError("allocation failed: %s" % a)
        created = [n for n, g in enumerate(gem) if g["ioctl"] == "GEM_CREATE_EXT" and
                   a["size"] <= g["size"] < a["size"] + (4 << 20)]
        if len(created) != 1:
            raise AssertionError("no unique GEM_CREATE_EXT for %s: %s" % (a, gem))
        create = gem[created[0]]
        maps = [g for g in gem[created[0] + 1:]
                if g["ioctl"] in ("GEM_MMAP_OFFSET", "GEM_MMAP") and
                g["handle"] == create["handle"]]
        if not maps:
            raise AssertionError("memory of type %d was never mapped: %s" % (a["index"], gem))
        out[a["index"]] = (types[a["index"]], create["pat_index"], maps[0]["mode"])
    return out


def order_violations(flags):
    """Pairs (i, j), i < j, that break the order the Vulkan spec sets for
    VkPhysicalDeviceMemoryProperties::memoryTypes: a type whose flags are a
    strict subset of another's must come before it."""
    return [(i, j) for j in range(len(flags)) for i in range(j)
            if flags[j] & flags[i] == flags[j] and flags[j] != flags[i]]


class KernelRules(unittest.TestCase):
    """The intel shim refuses what i915 refuses: the SET_PAT extension
    before graphics IP 12.70 and PAT indices above the platform's largest
    (i915_gem_create.c ext_set_pat(), i915_pci.c mtl_info; xe's
    xe2_pat_table for the Xe2 stubs, which i915 does not drive), FIXED mmaps of
    system-memory objects and other modes of local-memory ones
    (i915_gem_mman.c __assign_mmap_offset()), and prints each refusal. The
    fork must not meet one on any platform."""

    def test_no_platform_meets_a_refusal(self):
        for platform in list(EXPECTED) + ["lnl"]:
            for knob in ("0", "1"):
                with self.subTest(platform=platform, knob=knob):
                    _, r = vulkaninfo_memory_types(intel_env(platform, knob))
                    self.assertNotIn("refused", r.stderr)
                    rb = run([bin_path("mesa-fork-readback-probe"), "--size", "1", "--runs", "1"],
                             env=intel_env(platform, knob))
                    self.assertEqual(rb.returncode, 0, rb.stdout + rb.stderr[-2000:])
                    self.assertNotIn("refused", rb.stderr)


def exported_and_plain(testcase, platform):
    """Runs mesa-fork-readback-probe --export on PLATFORM's stub with the
    fork's knob on, and returns (types, created): types maps each memory
    type the probe allocated from to its flags, created(type, exported)
    gives the (PAT index, mmap mode) the driver asked the kernel for. Fails
    the test if the probe fails or the shim refused anything."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "gem.jsonl")
        env = intel_env(platform, "1", INTEL_STUB_GPU_LOG=log)
        r = run([bin_path("mesa-fork-readback-probe"), "--export"], env=env)
        testcase.assertEqual(r.returncode, 0, r.stdout + r.stderr[-2000:])
        testcase.assertNotIn("refused", r.stderr)
        allocs = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        with open(log) as f:
            ops = [json.loads(l) for l in f]
    MiB = 1 << 20

    def created(type_index, exported):
        """(PAT index, mmap mode) of the allocation the probe made: ANV
        adds a little to the size (aux data), and reuses handles, so the
        mapping is the first one of that handle after the creation. The
        probe allocates after the device made its own buffers, one of which
        may have the same size (1 MiB on Xe2): the probe's is the last."""
        size = (2 * type_index + (1 if exported else 2)) * MiB
        i = [i for i, o in enumerate(ops) if o["ioctl"] == "GEM_CREATE_EXT"
             and size <= o["size"] < size + MiB // 2][-1]
        m = next(o for o in ops[i:] if o["ioctl"] == "GEM_MMAP_OFFSET"
                 and o["handle"] == ops[i]["handle"])
        return ops[i]["pat_index"], m["mode"]

    return {a["type"]: a["flags"] for a in allocs}, created


# Mesa's PAT choices for Xe2 (intel_device_info.c, XE2_FEATURES): scanout
# 6, write-combined 0, cached and coherent 1. The kernel that drives Lunar
# Lake (xe, xe2_pat_table in xe_pat.c) has 32 entries; the intel shim once
# held the Lunar Lake stub to Meteor Lake's largest index, 4, and refused
# every exportable allocation.
LNL_SCANOUT_PAT = 6
LNL_WC_PAT = 0
LNL_CACHED_COHERENT_PAT = 1


class Export(unittest.TestCase):
    def test_exported_memory_of_the_new_type_is_write_combined(self):
        """Memory that may be shared with another process keeps the
        kernel's defaults: an exportable allocation from the cached and
        coherent type gets the PAT entry and CPU mapping of a plain
        allocation from the write-combined type, in the same run; a plain
        allocation from the new type gets its own write-back ones."""
        for platform in ("mtl", "arl"):
            with self.subTest(platform=platform):
                types, created = exported_and_plain(self, platform)
                cc = [t for t, f in types.items() if "HOST_CACHED" in f and "HOST_COHERENT" in f]
                wc = [t for t, f in types.items() if "HOST_CACHED" not in f]
                self.assertTrue(cc and wc, types)
                self.assertEqual(created(cc[0], True), created(wc[0], False))
                self.assertEqual(created(wc[0], False), (MTL_ARL_WC_PAT, WCMAP))
                self.assertEqual(created(cc[0], False), (MTL_ARL_CACHED_COHERENT_PAT, WB))

    def test_exportable_allocations_on_lunar_lake_are_not_refused(self):
        """On the Lunar Lake stub every exportable allocation takes Xe2's
        scanout PAT entry, which the shim must accept as xe does; the
        plain ones keep their own entries."""
        types, created = exported_and_plain(self, "lnl")
        self.assertTrue(types, "the probe allocated nothing")
        for t, flags in types.items():
            with self.subTest(type=t, flags=flags):
                self.assertEqual(created(t, True), (LNL_SCANOUT_PAT, WCMAP))
        cc = [t for t, f in types.items() if "HOST_CACHED" in f and "HOST_COHERENT" in f]
        wc = [t for t, f in types.items() if "HOST_CACHED" not in f]
        self.assertTrue(cc and wc, types)
        self.assertEqual(created(wc[0], False), (LNL_WC_PAT, WCMAP))
        self.assertEqual(created(cc[0], False), (LNL_CACHED_COHERENT_PAT, WB))


class WhatAClientGets(unittest.TestCase):
    """The table "Which type a client gets" of
    docs/changes/anv-cached-coherent.md: a first-match search over the
    listed types, per requested flags, with the fork and in stock."""

    @staticmethod
    def first_match(types, required):
        return next(i for i, f in enumerate(types) if f & required == required)

    def test_first_match_per_request(self):
        for plat in ("mtl", "arl"):
            for label, knob, want in (("fork", None, {HV | HC: 0, HV | CA: 1, HV | HC | CA: 3}),
                                      ("stock", "0", {HV | HC: 0, HV | CA: 1})):
                with self.subTest(platform=plat, mode=label):
                    types, _ = vulkaninfo_memory_types(intel_env(plat, knob))
                    got = {req: self.first_match(types, req) for req in want}
                    self.assertEqual(got, want, types)
                    if label == "stock":
                        self.assertFalse(any(f & (HC | CA) == HC | CA for f in types))


class MemoryTypeOrder(unittest.TestCase):
    """The new type is placed legally among the base types; the
    descriptor-buffer copies ANV appends after them break the order rule,
    on LLC parts already in stock and on MTL/ARL with the fork."""

    # Worked out by hand from EXPECTED: the copy of a type that comes after
    # a base type with more flags.
    VIOLATIONS = {
        # platform: (stock, fork)
        "mtl": ([], [(3, 4), (3, 5)]),       # copies of WC and NC after CC
        "arl": ([], [(3, 4), (3, 5)]),
        "tgl": ([(1, 4), (2, 4), (3, 4), (2, 5)],) * 2,   # copy of DL, of WC
        "adl": ([(1, 4), (2, 4), (3, 4), (2, 5)],) * 2,
        "glk": ([], []),
    }

    def test_order_per_platform(self):
        for plat, (stock, fork) in self.VIOLATIONS.items():
            for label, knob, want in (("fork", None, fork), ("stock", "0", stock)):
                with self.subTest(platform=plat, mode=label):
                    got, _ = vulkaninfo_memory_types(intel_env(plat, knob))
                    # Every violation involves a descriptor-buffer copy,
                    # which comes after all base types.
                    base = len(got) - sum(1 for f in got if not f & PROTECTED) // 2
                    self.assertEqual(order_violations(got[:base]), [], got)
                    self.assertEqual(order_violations(got), want, got)


class Caching(unittest.TestCase):
    """The PAT index and CPU mapping the driver asks the kernel for, per
    memory type: the new type's speed comes from a write-back mapping."""

    def _buffers(self, plat, knob):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "gem.jsonl")
            facts, _ = memtypes(intel_env(plat, knob, INTEL_STUB_GPU_LOG=log), "--alloc-each")
            return buffers_by_type(facts, log)

    def _of(self, buffers, flags):
        return [(pat, mode) for f, pat, mode in buffers.values() if f == flags]

    def test_new_type_is_the_cached_coherent_entry_mapped_write_back(self):
        for plat in ("mtl", "arl"):
            with self.subTest(platform=plat):
                got = self._of(self._buffers(plat, None),
                               "DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT|HOST_CACHED")
                # The base type and its descriptor-buffer copy.
                self.assertEqual(got, [(MTL_ARL_CACHED_COHERENT_PAT, WB)] * 2)

    def test_stock_coherent_type_is_mapped_write_combined(self):
        for plat in ("mtl", "arl"):
            for knob in (None, "0"):
                with self.subTest(platform=plat, knob=knob):
                    got = self._of(self._buffers(plat, knob),
                                   "DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT")
                    self.assertEqual(len(got), 2, got)
                    self.assertEqual({mode for _, mode in got}, {WCMAP})
                    self.assertNotIn(MTL_ARL_CACHED_COHERENT_PAT, [pat for pat, _ in got])

    def test_cached_type_is_the_incoherent_write_back_entry(self):
        for plat in ("mtl", "arl"):
            for knob in (None, "0"):
                with self.subTest(platform=plat, knob=knob):
                    got = self._of(self._buffers(plat, knob),
                                   "DEVICE_LOCAL|HOST_VISIBLE|HOST_CACHED")
                    self.assertEqual(got, [(MTL_ARL_WRITEBACK_INCOHERENT_PAT, WB)] * 2)

    def test_stock_never_asks_for_the_cached_coherent_entry(self):
        buffers = self._buffers("arl", "0")
        self.assertEqual(len(buffers), 4, buffers)   # 2 host-visible types + copies
        self.assertNotIn(MTL_ARL_CACHED_COHERENT_PAT, [pat for _, pat, _ in buffers.values()])


class AllocatorOracle(unittest.TestCase):
    def _choices(self, plat, knob):
        facts, _ = memtypes(intel_env(plat, knob))
        return {f["allocator"]: f["flags"] for f in facts if f["kind"] == "choice"}

    def test_gpu_allocator_readback_on_arl(self):
        """gpu-allocator's GpuToCpu rule: write-combined in stock, the new type with the fork."""
        self.assertEqual(self._choices("arl", "0")["gpu-allocator"],
                         "DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT")
        self.assertEqual(self._choices("arl", None)["gpu-allocator"],
                         "DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT|HOST_CACHED")

    def test_vma_readback_is_cached_on_arl(self):
        """docs/changes/anv-cached-coherent.md, "Which type a client gets":
        VMA with HOST_ACCESS_RANDOM takes type 1, cached non-coherent, with
        and without the new type."""
        for knob in ("0", None):
            with self.subTest(knob=knob):
                facts, _ = memtypes(intel_env("arl", knob))
                (vma,) = [f for f in facts if f["kind"] == "choice" and f["allocator"] == "vma"]
                self.assertEqual((vma["index"], vma["flags"]),
                                 (1, "DEVICE_LOCAL|HOST_VISIBLE|HOST_CACHED"))

    def test_llc_platform_choices_unchanged(self):
        self.assertEqual(self._choices("tgl", "0"), self._choices("tgl", None))

    def test_memtypes_verb_prints_stock_and_fork(self):
        """On i915 ARL: stock has no cached+coherent type and gpu-allocator
        picks the write-combined coherent type; the fork adds one and
        gpu-allocator picks it."""
        r = memtypes_verb()
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {row[1]: row for row in (l.split() for l in r.stdout.splitlines()
                                        if l.startswith("arl "))}
        self.assertTrue(rows["stock"][-1].endswith("DL|HV|HC"), rows["stock"])
        self.assertNotIn("HV|HC|CA", " ".join(rows["stock"]))
        self.assertTrue(rows["fork"][-1].endswith("DL|HV|HC|CA"), rows["fork"])
        line = [l for l in r.stdout.splitlines() if "cached+coherent types" in l and " arl:" in l]
        self.assertEqual(len(line), 1, r.stdout)
        self.assertRegex(line[0], r"on arl: stock none; upstream .*; fork [0-9]", r.stdout)

    def test_memtypes_verb_labels_the_upstream_row_with_its_version(self):
        """The upstream row is the ANV of Debian sid's Mesa, between stock
        and fork, and the output names the version it measured (the one its
        root holds after the run), in the header and in the line of cached
        + coherent types. What upstream's types are is printed, not
        asserted: a new upload may change them (test_upstream.SidsAnv)."""
        ys = forklib.Yardstick.from_env("amd64")
        ys.require()
        r = memtypes_verb()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("no upstream row", r.stdout)
        with open(os.path.join(forklib.WORK, "chroot", "sid-amd64", ".mesa-fork-upstream")) as f:
            version = f.read().split()[0]
        self.assertIn("upstream = Debian sid mesa-vulkan-drivers %s (amd64), .deb sha256 "
                      % version, r.stdout)
        modes = [l.split()[1] for l in r.stdout.splitlines() if l.startswith("arl ")]
        self.assertEqual(modes, ["stock", "upstream", "fork"], r.stdout)
        self.assertIn("; upstream %s " % version, r.stdout)
        with ys.check():
            self.assertNotIn("failed on the shim", r.stdout)


_MEMTYPES_VERB = []


def memtypes_verb():
    """`bin/mesa-fork memtypes arl`, run once for the tests that read it."""
    if not _MEMTYPES_VERB:
        _MEMTYPES_VERB.append(run([forklib.CLI, "memtypes", "--prefix", forklib.PREFIX, "arl"],
                                  timeout=600))
    return _MEMTYPES_VERB[0]


class ReadbackProbe(unittest.TestCase):
    def _probe(self, *args):
        return run([bin_path("mesa-fork-readback-probe"), "--validate", "--size", "1"] +
                   list(args), env=intel_env("arl"))

    def test_probe_covers_the_host_visible_types_a_buffer_may_use(self):
        """Under the validation layer: the host-visible base types are
        probed; ANV's descriptor-buffer copies, which a transfer buffer may
        not be bound to (VUID-vkBindBufferMemory-memory-01035), are not."""
        r = self._probe("--runs", "3")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-3000:])
        self.assertNotIn("validation error", r.stderr)
        self.assertIn("validation: 0 message(s)", r.stdout)
        fork = EXPECTED["arl"][1]
        copies = sum(1 for f in fork if not f & PROTECTED) // 2
        base = len(fork) - copies
        visible = [i for i, f in enumerate(fork) if f & HV]
        probed = [int(l.split()[1]) for l in r.stdout.splitlines()
                  if l.startswith("type ") and "host/readback" in l]
        skipped = [int(l.split()[1]) for l in r.stdout.splitlines()
                   if l.startswith("type ") and "skipped" in l]
        self.assertEqual(probed, [i for i in visible if i < base], r.stdout)
        self.assertEqual(skipped, [i for i in visible if i >= base], r.stdout)

    def test_upload_and_readback_of_both_coherent_types_side_by_side(self):
        """Every probed type gets an upload and a readback figure, and the
        run ends with the cached+coherent / write-combined ratio of both,
        where the two types exist (fork), and without it in stock."""
        for knob, ratio in (("1", True), ("0", False)):
            r = run([bin_path("mesa-fork-readback-probe"), "--size", "1", "--runs", "1"],
                    env=intel_env("mtl", knob))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-3000:])
            rows = [l for l in r.stdout.splitlines() if "host/readback" in l]
            self.assertEqual(len(rows), 3 if ratio else 2, r.stdout)
            self.assertTrue(all(re.search(r"upload +[0-9.]+ GB/s +readback +[0-9.]+ GB/s", l)
                                for l in rows), rows)
            self.assertEqual(bool(re.search(r"cached\+coherent / write-combined: upload "
                                            r"[0-9.]+x, readback [0-9.]+x", r.stdout)),
                             ratio, r.stdout)

    def test_coherency_check_detects_stale_data(self):
        """Nothing executes on the shim, so every GPU write is 'lost': --strict must fail."""
        r = self._probe("--runs", "1", "--strict")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr[-3000:])
        self.assertIn("coherency FAIL", r.stdout)
        self.assertIn("validation: 0 message(s)", r.stdout)

    def test_bad_arguments_are_a_usage_error(self):
        r = run([bin_path("mesa-fork-readback-probe"), "--size"], env=intel_env("arl"))
        self.assertEqual(r.returncode, 64)
        self.assertIn("usage: mesa-fork-readback-probe", r.stderr)


if __name__ == "__main__":
    unittest.main()
