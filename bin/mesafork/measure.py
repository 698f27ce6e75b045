# SPDX-License-Identifier: MIT
"""Measurements against an installed prefix, not tests: `mesa-fork memtypes`
(ANV's memory types and what allocators pick, stock vs fork, on the intel
drm-shim) and `mesa-fork bench` (hk and panvk, in bench.py)."""

import json
import os
import subprocess

from .install import fork_env, icd_json
from .proc import die

ABBREV = {"DEVICE_LOCAL": "DL", "HOST_VISIBLE": "HV", "HOST_COHERENT": "HC",
          "HOST_CACHED": "CA", "PROTECTED": "PR", "LAZILY_ALLOCATED": "LA"}


def short_flags(flags):
    return "|".join(ABBREV.get(f, f) for f in flags.split("|"))


def memtypes_facts(cmd, env):
    """The JSON lines mesa-fork-memtypes prints (cmd runs it), or None."""
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="replace", timeout=300)
    facts = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    return (facts if r.returncode == 0 and facts else None), r.stderr


def memtypes(fork, platforms, prefix=None):
    """Memory types and readback choices of VMA and gpu-allocator: stock,
    upstream (the ANV of Debian sid's Mesa) and fork."""
    from . import upstream
    prefix = fork.prefix(prefix)
    exe = os.path.join(prefix, "bin", "mesa-fork-memtypes")
    if not os.path.exists(exe):
        die("memtypes: %s is not installed; run 'bin/mesa-fork install'" % exe)
    sid = upstream.SidRoot(fork)
    sid.ensure()
    print("DL=DEVICE_LOCAL HV=HOST_VISIBLE HC=HOST_COHERENT CA=HOST_CACHED PR=PROTECTED; "
          "intel drm-shim, stock = ANV_CACHED_COHERENT=0,")
    print("upstream = %s" % sid.describe())
    print("%-8s %-8s %-86s %-14s %s" % ("platform", "mode", "memory types (index:flags)",
                                        "VMA readback", "gpu-allocator GpuToCpu"))
    for plat in platforms:
        for mode, knob in (("stock", "0"), ("upstream", None), ("fork", None)):
            if mode == "upstream":
                env = sid.shim_env(prefix, fork.conf, "intel", INTEL_STUB_GPU_PLATFORM=plat)
                facts, err = memtypes_facts(sid.command([exe]), env)
            else:
                env = fork_env(prefix, fork.conf, shim="intel")
                env["INTEL_STUB_GPU_PLATFORM"] = plat
                env.pop("ANV_CACHED_COHERENT", None)
                if knob is not None:
                    env["ANV_CACHED_COHERENT"] = knob
                facts, err = memtypes_facts([exe], env)
            if not facts:
                die("memtypes: %s %s failed: %s" % (plat, mode, err[-1000:]))
            types = " ".join("%d:%s" % (f["index"], short_flags(f["flags"]))
                             for f in facts if f["kind"] == "type")
            choice = {f["allocator"]: "%d:%s" % (f["index"], short_flags(f["flags"]))
                      for f in facts if f["kind"] == "choice"}
            print("%-8s %-8s %-86s %-14s %s" % (plat, mode, types, choice["vma"],
                                                choice["gpu-allocator"]))


def bench(fork, driver, prefix=None, tokens=(8, 24), no_llama=False, ops=None, arch=None,
          ubatch=None):
    """Side-by-side stock vs fork measurements in one run (not part of the tests)."""
    from . import bench as measurements
    from .install import parse_arches
    if not 0 < tokens[0] < tokens[1] <= 4096:
        die("bench: --tokens A B: two decode lengths with 0 < A < B <= 4096 (per-token "
            "counts are the difference of the two runs), not %d %d" % tuple(tokens))
    # This machine's build always runs: it is the reference the other
    # architectures' figures are printed next to.
    arches = parse_arches(fork, "%s,%s" % (fork.arch, arch) if arch else None)
    if len(arches) > 1 and driver not in ("hk", "panvk"):
        die("bench %s: --arch is for hk and panvk" % driver)
    for a in arches[1:]:
        other = fork.for_arch(a)
        if not os.path.exists(icd_json(other.default_prefix, "asahi")):
            die("bench: nothing installed in %s; run 'bin/mesa-fork install --arch %s'"
                % (other.default_prefix, a))
    prefix = fork.prefix(prefix)
    if not os.path.exists(icd_json(prefix, "asahi")):
        die("bench: nothing installed in %s; run 'bin/mesa-fork install'" % prefix)
    if driver == "sync":
        from .benchsync import bench_sync
        bench_sync(fork.work, prefix, fork.conf)
    elif driver == "ops":
        from .benchsync import bench_ops
        bench_ops(fork.work, prefix, fork.conf, **({"ops": ops} if ops else {}))
    elif driver == "anv":
        from .benchsync import bench_anv
        bench_anv(fork.work, prefix, fork.conf)
    elif driver == "hk":
        measurements.bench_hk(fork, prefix, tokens=tuple(tokens), arches=arches)
    else:
        measurements.bench_panvk(fork, prefix, arches=arches)
        if not no_llama:
            print()
            measurements.bench_panvk_llama(fork, prefix, arches=arches,
                                           **({"ubatches": ubatch} if ubatch else {}))
