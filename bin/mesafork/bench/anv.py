# SPDX-License-Identifier: MIT
"""`mesa-fork bench anv`: which memory types and PAT indices llama.cpp's
buffers land on, on the intel shim, stock (ANV_CACHED_COHERENT=0) vs
fork: each vkAllocateMemory (our VK_LAYER_MESAFORK_synctrace) paired with
the kernel buffer ANV made for it (the shim's log). Not a test."""

import json
import os

from ..measure import memtypes_facts, short_flags
from ..proc import die, step
from .shim import chroot_shim_env, host_env, llama_chroot, synctrace_env


def memtype_flags(prefix, conf, knob):
    """index -> flags of the intel shim's memory types, as
    mesa-fork-memtypes prints them."""
    env = host_env(prefix, conf, "intel", ANV_CACHED_COHERENT=knob)
    facts, err = memtypes_facts([os.path.join(prefix, "bin", "mesa-fork-memtypes")], env)
    if not facts:
        die("bench anv: mesa-fork-memtypes failed: %s" % err[-1000:])
    return {f["index"]: f["flags"] for f in facts if f["kind"] == "type"}


def pair_allocations(lines):
    """Each vkAllocateMemory with the kernel buffer ANV made for it. The
    shim's log and our layer's events share stdout, both flushed per line,
    so the buffer is the last GEM_CREATE before the allocation's event; its
    CPU mapping is the GEM_MMAP_OFFSET of that handle. Returns
    [(alloc event, create line or None, mmap mode)]."""
    events = [json.loads(l) for l in lines if l.startswith("{")]
    # Handles are reused once closed: a mapping belongs to the buffer that
    # holds the handle when it is made.
    holder, out, create = {}, [], None
    for e in events:
        if e.get("ioctl") == "GEM_CREATE_EXT":
            create = dict(e, mode="-")
            holder[e["handle"]] = create
        elif e.get("ioctl") == "GEM_MMAP_OFFSET" and e["handle"] in holder:
            holder[e["handle"]]["mode"] = e["mode"]
        elif e.get("ev") == "alloc":
            # A failed allocation made no buffer.
            out.append((e, create if e.get("result") == 0 else None))
            create = None
    return [(a, c, c["mode"] if c else "-") for a, c in out]


def bench_anv(work, prefix, conf, platform="arl"):
    """Which memory types and PAT indices llama.cpp's buffers land on, on
    the intel shim, stock (ANV_CACHED_COHERENT=0) vs fork."""
    rows = {}
    with llama_chroot(work) as (chroot, tiny):
        for label, knob in (("stock", "0"), ("fork", "1")):
            env = chroot_shim_env(prefix, conf, "intel", INTEL_STUB_GPU_PLATFORM=platform,
                                  INTEL_STUB_GPU_LOG="/dev/stdout",
                                  ANV_CACHED_COHERENT=knob, MESA_FORK_SYNCTRACE="stdout")
            env.update(synctrace_env(prefix))
            with step("llama-bench decode on the intel shim (%s), %s" % (platform, label)):
                r = chroot.run_in(["llama-bench", "-m", tiny, "-p", "0", "-n", "4", "-r", "1"],
                                  env=env, capture=True)
            if r.returncode != 0:
                die("bench anv: llama-bench failed:\n" + r.stderr[-2000:])
            rows[label] = (pair_allocations(r.stdout.splitlines()),
                           memtype_flags(prefix, conf, knob))
    print()
    print("llama.cpp's allocations on ANV (intel drm-shim, %s): memory type, the PAT index"
          % platform)
    print("ANV asks the kernel for, and the CPU mapping; stock = ANV_CACHED_COHERENT=0")
    print("(ggml allocates its weights, KV cache and compute buffers, then host-visible")
    print("staging; order as ggml allocates)")
    print("%-10s | %-44s | %-44s" % ("bytes", "stock: type flags / PAT / map",
                                     "fork: type flags / PAT / map"))
    (s_rows, s_types), (f_rows, f_types) = rows["stock"], rows["fork"]

    def cell(row, types):
        a, c, mode = row
        flags = short(types.get(a["type"], "?"))
        return "%d %s / %s / %s" % (a["type"], flags, c["pat_index"] if c else "?", mode)

    if len(s_rows) != len(f_rows):
        print("(stock made %d allocations and the fork %d: the rows below pair them in order)"
              % (len(s_rows), len(f_rows)))
    for s, f in zip(s_rows, f_rows):
        print("%-10d | %-44s | %-44s" % (s[0]["size"], cell(s, s_types), cell(f, f_types)))
    return rows


def short(flags):
    return short_flags(flags)
