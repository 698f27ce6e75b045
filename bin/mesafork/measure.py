# SPDX-License-Identifier: MIT
"""`mesa-fork memtypes`, a measurement against an installed prefix, not a
test: ANV's memory types and what allocators pick, stock, upstream and
fork, on the intel drm-shim."""

import json
import os
import subprocess

from . import upstream
from .install import fork_env
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
    upstream (the ANV of Debian sid's Mesa, its version in the header and
    in each platform's line of cached + coherent types) and fork. An
    upstream run that fails is a row saying so, not the end: sid's Mesa
    may change under the shim (tests/test_upstream.py SidsAnv)."""
    prefix = fork.prefix(prefix)
    exe = os.path.join(prefix, "bin", "mesa-fork-memtypes")
    if not os.path.exists(exe):
        die("memtypes: %s is not installed; run 'bin/mesa-fork install'" % exe)
    sid = upstream.SidRoot(fork)
    try:
        sid.ensure()
    except upstream.Unavailable as e:
        print("memtypes: no upstream row: sid's Mesa is not at hand (%s)" % e.reason)
        sid = None
    except SystemExit:
        print("memtypes: no upstream row: sid's Mesa is not at hand (the error above)")
        sid = None
    print("DL=DEVICE_LOCAL HV=HOST_VISIBLE HC=HOST_COHERENT CA=HOST_CACHED PR=PROTECTED; "
          "intel drm-shim, stock = ANV_CACHED_COHERENT=0,")
    print("upstream = %s" % (sid.describe() if sid else "n/a"))
    print("%-8s %-8s %-86s %-14s %s" % ("platform", "mode", "memory types (index:flags)",
                                        "VMA readback", "gpu-allocator GpuToCpu"))
    for plat in platforms:
        # The indices of each row's cached + coherent host-visible types:
        # what the fork adds on MTL/ARL, printed with upstream's version.
        cached_coherent = {}
        for mode, knob in (("stock", "0"), ("upstream", None), ("fork", None)):
            if mode == "upstream" and not sid:
                continue
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
            if not facts and mode == "upstream":
                # sid's Mesa is not ours: its failure is a line, not the end.
                last = (err.strip().splitlines() or ["no output"])[-1]
                print("%-8s %-8s failed on the shim: %s" % (plat, mode, last[:200]))
                cached_coherent[mode] = "failed"
                continue
            if not facts:
                die("memtypes: %s %s failed: %s" % (plat, mode, err[-1000:]))
            types = " ".join("%d:%s" % (f["index"], short_flags(f["flags"]))
                             for f in facts if f["kind"] == "type")
            choice = {f["allocator"]: "%d:%s" % (f["index"], short_flags(f["flags"]))
                      for f in facts if f["kind"] == "choice"}
            print("%-8s %-8s %-86s %-14s %s" % (plat, mode, types, choice["vma"],
                                                choice["gpu-allocator"]))
            cached_coherent[mode] = " ".join(
                str(f["index"]) for f in facts if f["kind"] == "type"
                and {"HOST_VISIBLE", "HOST_COHERENT", "HOST_CACHED"} <= set(f["flags"].split("|"))
            ) or "none"
        print("  cached+coherent types (HV|HC|CA) on %s: stock %s; upstream %s; fork %s"
              % (plat, cached_coherent["stock"],
                 "%s %s" % (sid.version, cached_coherent["upstream"]) if sid else "n/a",
                 cached_coherent["fork"]))
