# SPDX-License-Identifier: MIT
"""`mesa-fork bench sync`: is llama.cpp correct under Vulkan's rules, the
rules HK_LAZY_BARRIER relies on? llama.cpp (Debian sid, in the cached
chroot) decodes and prefills on each driver's drm-shim under the Khronos
validation layer with synchronization validation and its shader-access
heuristic on, and our VK_LAYER_MESAFORK_synctrace next to it for the byte
ranges the layer does not print. Prints each hazard pattern with its ggml
ops, buffer and ranges, and whether the ranges overlap only because a
binding runs to the end of its buffer."""

import collections
import os
import re

from .. import syncval
from ..proc import die, make_dirs, step
from .shim import DRIVERS, chroot_shim_env, llama_chroot, synctrace_env

SYNCVAL_ENV = {
    "VK_LAYER_VALIDATE_SYNC": "1",
    "VK_LAYER_SYNCVAL_SHADER_ACCESSES_HEURISTIC": "1",
    "VK_LAYER_DUPLICATE_MESSAGE_LIMIT": "100000",
    # ggml labels every node and names its pipelines with this set.
    "GGML_VK_DEBUG_MARKERS": "1",
    "MESA_FORK_SYNCTRACE": "stdout",
}
WORKLOADS = (("decode", ["-p", "0", "-n", "4"]), ("prefill", ["-p", "64", "-n", "0"]))


def run(chroot, prefix, conf, driver, cmd):
    env = chroot_shim_env(prefix, conf, driver, **SYNCVAL_ENV)
    env.update(synctrace_env(prefix, khronos=True))
    r = chroot.run_in(cmd, env=env, capture=True)
    dispatches, unplaced = syncval.parse(r.stdout)
    errors = re.findall(r"^Validation Error: \[ ([\w-]+) \]", r.stdout, re.M)
    return r, dispatches, unplaced, errors


def op_of(node):
    """'RMS_NORM+MUL+ROPE norm-0' -> 'RMS_NORM+MUL+ROPE': the ggml ops,
    without the per-layer tensor name."""
    return node.split(" ", 1)[0]


def word(d, i):
    return int.from_bytes(d.push[4 * i:4 * i + 4], "little")


# What the ggml pipelines seen in llama.cpp's hazards write, and how many
# bytes from the binding's offset, from their push constants (ggml 0.27's
# layouts): the fused RMS_NORM+MUL+ROPE with an f32 result writes its
# result (binding 5), word 0 elements of f32; the f32 matrix multiply writes
# its result (binding 2), N (word 1) columns of stride_d (word 5) f32.
WRITES = (
    (re.compile(r"^rms_norm_mul_rope_f32_f32$"), lambda d: {5: 4 * word(d, 0)}),
    (re.compile(r"^matmul_f32_f32(_aligned)?(_\d+)?$"),
     lambda d: {2: 4 * word(d, 1) * word(d, 5)}),
)


def written_extents(d):
    """{binding: (buffer, offset, end)} the dispatch writes, when its
    pipeline is one of WRITES; None otherwise."""
    for name, sizes in WRITES:
        if name.match(d.pipeline):
            out = {}
            for b, size in sizes(d).items():
                binding = next((v for (_, n, _), v in d.bindings.items() if n == b), None)
                if binding is None:
                    return None
                out[b] = (binding.buffer, binding.offset, binding.offset + size)
            return out
    return None


def classify(h):
    """The hazard's class:
    'disjoint (checked)': the prior's pipeline is one whose writes we know
      (WRITES) and none of them meets the current binding's bound range,
      which holds every byte the current access can touch;
    'open-ended (unresolved)': every overlap of bound ranges involves a
      binding that runs to the end of its buffer (ggml binds fused
      operands so), but the writes are not known: checked by hand or not;
    'bounded overlap': two bounded ranges overlap, a likely real hazard;
    'unknown': the trace cannot place the hazard."""
    if not h["prior"] or not h["current_ranges"]:
        return "unknown"
    pairs = [(c, p) for c in h["current_ranges"] for p in h["prior_ranges"] if c.overlaps(p)]
    if not pairs:
        return "unknown"
    writes = written_extents(h["prior"])
    if writes is not None and not any(buf == c.buffer and o < c.end and c.offset < e
                                      for c in h["current_ranges"]
                                      for buf, o, e in writes.values()):
        return "disjoint (checked)"
    if all(c.open_ended or p.open_ended for c, p in pairs):
        return "open-ended (unresolved)"
    return "bounded overlap"


def patterns(dispatches):
    """Hazards grouped by what they are about, with one example each."""
    groups = collections.OrderedDict()
    for d in dispatches:
        for h in d.hazards:
            prior = h["prior"]
            key = (h["kind"], "between command buffers" if h["at_submit"] else "within one command buffer",
                   op_of(d.node()), d.pipeline, h["binding"],
                   op_of(prior.node()) if prior else h["prior_label"],
                   prior.pipeline if prior else None, classify(h))
            g = groups.setdefault(key, {"count": 0, "example": h})
            g["count"] += 1
    return groups


def scenario_proof(chroot, prefix, conf, driver):
    """Hazards the layer reports on our own client: two dispatches writing
    one buffer with nothing between them, and the same with a barrier."""
    exe = os.path.join(prefix, "bin", "mesa-fork-scenarios")
    out = {}
    for scenario in ("dispatches", "barrier"):
        r, _, _, errors = run(chroot, prefix, conf, driver, [exe, "--count", "2", scenario])
        if r.returncode != 0:
            die("bench sync: mesa-fork-scenarios %s failed on %s:\n%s"
                % (scenario, driver, r.stderr[-2000:]))
        out[scenario] = sum(e.startswith("SYNC-HAZARD") for e in errors)
    return out


def bench_sync(work, prefix, conf):
    results = {}
    with llama_chroot(work) as (chroot, tiny):
        proof = {}
        for drv in DRIVERS:
            with step("syncval on mesa-fork-scenarios, %s shim" % drv):
                proof[drv] = scenario_proof(chroot, prefix, conf, drv)
        for drv in DRIVERS:
            for name, args in WORKLOADS:
                with step("llama-bench %s on the %s shim under synchronization validation"
                          % (name, drv)):
                    results[(drv, name)] = run(chroot, prefix, conf, drv,
                                               ["llama-bench", "-m", tiny, "-r", "1"] + args)
    listing = os.path.join(work, "tmp", "bench-sync")
    make_dirs(listing)
    for (drv, name), (_, ds, unplaced, _) in results.items():
        with open(os.path.join(listing, "%s-%s.txt" % (drv, name)), "w") as f:
            for d in ds:
                for h in d.hazards:
                    f.write("%s %s: %s binding %s %s <- %s %s\n" % (
                        classify(h), h["kind"], d.label(), h["binding"],
                        " ".join(b.text() for b in h["current_ranges"]),
                        h["prior"].label() if h["prior"] else h["prior_label"],
                        " ".join(b.text() for b in h["prior_ranges"])))
            for func, block in unplaced:
                f.write("unplaced at %s: %s\n" % (func, block.splitlines()[1][:300]))
    report(proof, results)
    print("every hazard, one per line: %s/" % listing)
    return proof, results


def report(proof, results):
    print()
    print("Khronos validation layer (Debian sid), VK_LAYER_VALIDATE_SYNC=1 with")
    print("VK_LAYER_SYNCVAL_SHADER_ACCESSES_HEURISTIC=1; the fork's defaults on each shim.")
    print()
    print("The layer sees a missing dependency (mesa-fork-scenarios, 2 dispatches):")
    print("%-10s %28s %30s" % ("shim", "write, write: hazards", "write, barrier, write: hazards"))
    for drv, p in proof.items():
        print("%-10s %28d %30d" % (drv, p["dispatches"], p["barrier"]))
    print()
    print("llama.cpp (llama-bench, random qwen3; decode -n 4, prefill -p 64):")
    print("%-10s %-8s %5s %10s %8s %8s %11s %8s %8s %7s" % (
        "shim", "run", "exit", "dispatches", "hazards", "checked", "unresolved", "bounded",
        "unknown", "other"))
    for (drv, name), (r, ds, unplaced, errors) in results.items():
        pats = patterns(ds)
        cls = collections.Counter()
        for key, g in pats.items():  # the class is the key's last field
            cls[key[-1]] += g["count"]
        other = [e for e in errors if not e.startswith("SYNC-HAZARD")]
        print("%-10s %-8s %5d %10d %8d %8d %11d %8d %8d %7d" % (
            drv, name, r.returncode, len(ds), sum(len(d.hazards) for d in ds),
            cls["disjoint (checked)"], cls["open-ended (unresolved)"], cls["bounded overlap"],
            cls["unknown"], len(other)))
        for func, n in collections.Counter(f for f, _ in unplaced).items():
            print("  %d hazard(s) at %s not placed on a traced dispatch" % (n, func))
        for e, n in collections.Counter(other).items():
            print("  other validation error: %s x%d" % (e, n))
        if r.returncode != 0:
            print("  llama-bench exited with %d; stderr ends: %s"
                  % (r.returncode, r.stderr.strip().splitlines()[-1:] or ""))
    print()
    print("checked: disjoint once the prior's known writes replace its bound ranges;")
    print("unresolved: only ranges that run to the end of the buffer overlap (see the docs);")
    print("other: validation messages that are not hazards.")
    print()
    print("Hazard patterns (all runs): kind, current op/pipeline/binding <- prior op/pipeline")
    seen = collections.OrderedDict()
    for (drv, name), (_, ds, _, _) in results.items():
        for key, g in patterns(ds).items():
            s = seen.setdefault(key, {"count": 0, "runs": [], "example": g["example"]})
            s["count"] += g["count"]
            s["runs"].append("%s/%s" % (drv, name))
    for key, s in seen.items():
        kind, where, op, pipe, binding, prior_op, prior_pipe, cls = key
        h = s["example"]
        print("%s %s [%s] binding %s <- %s [%s]" % (kind, op, pipe, binding, prior_op,
                                                    prior_pipe))
        print("    %s, %s; %d hazard(s) in %s" % (
            cls, where, s["count"], ", ".join(sorted(set(s["runs"])))))
        # ggml's element-wise ops put their element count in the first
        # push constant word; other ops put other things there.
        print("    e.g. buffer %#x: current %s (push constant word 0: %d); prior's overlapping "
              "bindings %s (word 0: %s)" % (
                  h["current_ranges"][0].buffer if h["current_ranges"] else 0,
                  ", ".join(b.text() for b in h["current_ranges"]) or "?",
                  h["current"].count,
                  ", ".join(b.text() for b in h["prior_ranges"]) or "?",
                  h["prior"].count if h["prior"] else "?"))
