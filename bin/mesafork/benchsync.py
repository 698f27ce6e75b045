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
import contextlib
import json
import os
import re

from . import bench, syncval
from .apt import os_codename
from .config import stock_knobs
from .install import fork_env, layer_dir
from .measure import memtypes_facts, short_flags
from .proc import die, make_dirs, step

SYNCVAL_ENV = {
    "VK_LAYER_VALIDATE_SYNC": "1",
    "VK_LAYER_SYNCVAL_SHADER_ACCESSES_HEURISTIC": "1",
    "VK_LAYER_DUPLICATE_MESSAGE_LIMIT": "100000",
    # ggml labels every node and names its pipelines with this set.
    "GGML_VK_DEBUG_MARKERS": "1",
    "MESA_FORK_SYNCTRACE": "stdout",
}
DRIVERS = ("asahi", "panfrost", "intel")
WORKLOADS = (("decode", ["-p", "0", "-n", "4"]), ("prefill", ["-p", "64", "-n", "0"]))


def layer_env(prefix):
    return {"VK_INSTANCE_LAYERS": "VK_LAYER_MESAFORK_synctrace:VK_LAYER_KHRONOS_validation",
            "VK_LAYER_PATH": "/usr/share/vulkan/explicit_layer.d:" + layer_dir(prefix)}


def run(chroot, prefix, conf, driver, cmd):
    env = bench.chroot_shim_env(prefix, conf, driver, **SYNCVAL_ENV)
    env.update(layer_env(prefix))
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


@contextlib.contextmanager
def llama_chroot(work):
    """The cached sid chroot with llama.cpp, mounted, and the random qwen3
    model in it: (chroot, model path)."""
    chroot = bench.Chroot(work, os_codename())
    chroot.ensure()
    make_dirs(os.path.join(work, "tmp"))
    with chroot.mounted():
        tiny, _ = bench.ensure_models(chroot, work)
        yield chroot, tiny


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


def memtype_flags(prefix, conf, knob):
    """index -> flags of the intel shim's memory types, as
    mesa-fork-memtypes prints them."""
    env = fork_env(prefix, conf, shim="intel")
    env["ANV_CACHED_COHERENT"] = knob
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
            env = bench.chroot_shim_env(prefix, conf, "intel", INTEL_STUB_GPU_PLATFORM=platform,
                                        INTEL_STUB_GPU_LOG="/dev/stdout",
                                        ANV_CACHED_COHERENT=knob, MESA_FORK_SYNCTRACE="stdout",
                                        VK_INSTANCE_LAYERS="VK_LAYER_MESAFORK_synctrace")
            env["VK_LAYER_PATH"] = layer_dir(prefix)
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


# The element-wise and data-movement ops of llama.cpp's dense decode and
# prefill (see `bench sync`), about 1,700 cases. MUL_MAT (2,469 cases on
# Honeykrisp) and FLASH_ATTN_EXT (5,332) take --ops: each case also runs
# on the CPU for the comparison.
BACKEND_OPS = "ADD,MUL,RMS_NORM,ROPE,SOFT_MAX,SWIGLU,SET_ROWS,GET_ROWS,CPY,SCALE"


CASE_RE = re.compile(r"(?:^|\s)([A-Z][A-Z0-9_]*)\(.*\): (OK|FAIL|not supported)")


def backend_ops_counts(text):
    """What a test-backend-ops test run did: cases it ran on the backend
    (each result line, OK or FAIL), cases the backend does not support,
    failed cases, and the ops it ran at least one case of."""
    counts = {"run": 0, "unsupported": 0, "failed": 0, "ops": set()}
    for line in re.sub(r"\x1b\[[0-9;]*m", "", text or "").splitlines():
        m = CASE_RE.search(line)
        if not m:
            continue
        if m.group(2) == "not supported":
            counts["unsupported"] += 1
            continue
        counts["run"] += 1
        counts["failed"] += m.group(2) == "FAIL"
        counts["ops"].add(m.group(1))
    return counts


def bench_ops(work, prefix, conf, ops=BACKEND_OPS):
    """llama.cpp's test-backend-ops on each shim, stock and fork: every
    case is recorded and submitted once; a shim executes nothing, so the
    comparison with the CPU backend fails and is ignored. What counts is
    that nothing crashes, the validation layer stays silent, and how many
    cases and ops the driver takes."""
    chroot = bench.Chroot(work, os_codename())
    chroot.ensure()
    exe = chroot.libexec("llama.cpp-tests/test-backend-ops")
    rows = []
    with chroot.mounted():
        for drv in DRIVERS:
            # ggml crashes under the layer on panvk (see `bench sync`).
            layer = drv != "panfrost"
            for label, knobs in (("stock", stock_knobs(conf, drv)), ("fork", {})):
                env = bench.chroot_shim_env(prefix, conf, drv, **knobs)
                if layer:
                    env.update(VK_INSTANCE_LAYERS="VK_LAYER_KHRONOS_validation",
                               VK_LAYER_PATH="/usr/share/vulkan/explicit_layer.d",
                               VK_LAYER_DUPLICATE_MESSAGE_LIMIT="100000")
                with step("test-backend-ops -o %s on the %s shim, %s" % (ops, drv, label)):
                    r = chroot.run_in([exe, "test", "-b", "Vulkan0", "-o", ops], env=env,
                                      capture=True)
                c = backend_ops_counts(r.stdout)
                c["errors"] = len(re.findall(r"^Validation Error: ", r.stdout, re.M))
                rows.append((drv, label, layer, r.returncode, c))
    print()
    print("llama.cpp (Debian sid 0.7.0) test-backend-ops test -o %s" % ops)
    print("on each drm-shim: each case recorded and submitted once; nothing executes, so")
    print("the CPU comparison is meaningless and ignored. stock = the driver's knobs off.")
    print("%-10s %-6s %-10s %5s %10s %14s %5s %18s" % (
        "shim", "run", "layer", "exit", "cases run", "not supported", "ops",
        "validation errors"))
    for drv, label, layer, rc, c in rows:
        print("%-10s %-6s %-10s %5d %10d %14d %5d %18s" % (
            drv, label, "on" if layer else "off (*)", rc, c["run"], c["unsupported"],
            len(c["ops"]), c["errors"] if layer else "-"))
    print("(*) ggml crashes under the validation layer on panvk, a Vulkan 1.1 device;")
    print("    see docs/changes/hk-lazy-barrier.md")
    return rows
