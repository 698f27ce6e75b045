# SPDX-License-Identifier: MIT
"""`mesa-fork bench hk`: per-token kernel traffic of llama.cpp decode on
Honeykrisp over the asahi shim, each HK_SETTINGS setting side by side with
sid's Honeykrisp, and the driver's instructions per recorded dispatch
(callgrind). Nothing here is a test: it prints figures and ratios."""

import json
import os
import re
import subprocess
import tempfile

from ..proc import die, make_dirs, step
from .shim import (chroot_shim_env, ensure_models, host_env, llama_root, print_arch_columns,
                   shim_settings, sid_root)

# Published M2 Ultra figures (Qwen3-4B decode with llama.cpp), printed for
# comparison, never combined with the shim's counts into a time. Cited, not
# measured here; where they come from: docs/changes/hk-lazy-barrier.md,
# "Why": 547 dispatches and 547 barriers per token, about 366 barriers
# asked for by the application, about 18 us per barrier, 52.4 -> 63.3
# tok/s (Q4_0) with barriers at sync points only.
M2U_LAUNCHES_PER_TOKEN = 547
M2U_BARRIERS_STOCK = 547
M2U_BARRIERS_ASKED = 366
M2U_US_PER_BARRIER = 18
M2U_TOK_S = (52.4, 63.3)


def llama_counts(runner, shim_env, model, tokens):
    """Decodes `tokens` tokens with llama-bench in runner (a chroot or a sid
    root) on the asahi shim and returns the totals seen by the shim's
    capture. shim_env(capture_path) is the environment of the run."""
    with tempfile.TemporaryDirectory(dir=os.path.join(runner.work, "tmp")) as tmp:
        log = os.path.join(tmp, "cap.jsonl")
        r = runner.run_in(["llama-bench", "-m", model, "-p", "0", "-n", str(tokens), "-r", "1",
                           "-o", "json"], env=shim_env(log), capture=True)
        if r.returncode != 0:
            die("llama-bench failed:\n" + r.stderr[-3000:])
        bench = json.loads(r.stdout)
        with open(log) as f:
            cmds = [json.loads(l) for l in f]
    # One line per hardware command; "submit" numbers the SUBMIT ioctls.
    cmds = [c for c in cmds if c["type"] in ("compute", "render")]
    errors = [c for c in cmds if c.get("errors")]
    if errors:
        die("the capture could not decode a stream: %s" % errors[0])
    unterminated = [c for c in cmds if c["type"] == "compute" and not c["terminated"]]
    bad_end = [c for c in cmds if c["type"] == "compute" and c["launches"] and
               not c["blocks"][-2].startswith("B")]
    return {
        "submissions": len({c["submit"] for c in cmds}),
        "commands": len(cmds),
        "compute_commands": sum(c["type"] == "compute" for c in cmds),
        "launches": sum(c.get("launches", 0) for c in cmds),
        "barriers": sum(c.get("barriers", 0) for c in cmds),
        "unterminated": len(unterminated),
        "streams_without_final_barrier": len(bad_end),
        "tokens_per_s_shim": bench[0].get("avg_ts") if bench else None,
        "model_bytes": bench[0].get("model_size") if bench else None,
    }


def per_token(runner, shim_env, model, tokens):
    """Per-token figures: the difference of a tokens[1]- and a
    tokens[0]-token decode, divided by the difference in tokens."""
    a = llama_counts(runner, shim_env, model, tokens[0])
    b = llama_counts(runner, shim_env, model, tokens[1])
    per = {k: (b[k] - a[k]) / (tokens[1] - tokens[0])
           for k in ("submissions", "commands", "compute_commands", "launches", "barriers")}
    per["unterminated"] = a["unterminated"] + b["unterminated"]
    per["streams_without_final_barrier"] = (a["streams_without_final_barrier"] +
                                            b["streams_without_final_barrier"])
    per["model_bytes"] = a["model_bytes"]
    return per


def callgrind_ir_per_dispatch(prefix, conf, lazy, n=512):
    """Instructions the driver executes per recorded dispatch (vkCmdDispatch
    plus its share of vkEndCommandBuffer), counted by callgrind."""
    exe = os.path.join(prefix, "bin", "mesa-fork-scenarios")
    env = host_env(prefix, conf, "asahi", HK_LAZY_BARRIER=lazy)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                            "--toggle-collect=hk_CmdDispatchBase",
                            "--toggle-collect=hk_EndCommandBuffer",
                            exe, "--count", str(n), "dispatches"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            die("callgrind run failed:\n" + r.stderr[-3000:])
        text = open(out).read()
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    if not m:
        die("no callgrind summary")
    return int(m.group(1)) / n


# The settings bench hk compares, side by side in one run.
HK_SETTINGS = (("stock", {"HK_LAZY_BARRIER": "0"}),
               ("lazy", {"HK_MERGE_STREAMS": "0"}),
               ("fork", {}),
               ("fork+batch", {"HK_PERFTEST": "batch"}))


def hk_rows(fork, prefix, tokens):
    """Per-token counts of each HK_SETTINGS setting, and of sid's
    Honeykrisp ("upstream"): llama.cpp decoding on fork.arch's Honeykrisp
    over the fork's asahi shim. Returns the rows and what ran them."""
    conf = fork.conf
    chroot = llama_root(fork)
    chroot.ensure()
    sid = sid_root(fork, chroot)
    make_dirs(os.path.join(fork.work, "tmp"))
    rows = {}
    with chroot.mounted():
        model, _ = ensure_models(chroot, fork.work, q4=False)
        what = " and ".join(map(str, tokens)) + " tokens"
        for label, env in HK_SETTINGS:
            with step("%s: llama-bench decode %s, %s" % (fork.arch, what, label)):
                rows[label] = per_token(
                    chroot, lambda log, env=env: chroot_shim_env(
                        prefix, conf, "asahi", ASAHI_SHIM_CAPTURE=log, **env), model, tokens)
    with step("%s: llama-bench decode %s, upstream (%s %s)" % (
            fork.arch, what, conf["upstream"]["package"], sid.version)):
        rows["upstream"] = per_token(
            sid, lambda log: sid.shim_env(prefix, conf, "asahi", ASAHI_SHIM_CAPTURE=log),
            model, tokens)
    versions = lambda r: {p: r.package_version(p) for p in ("llama.cpp-tools", "libggml0")}
    meta = {"upstream": sid.describe(), "upstream_runs": " ".join(sid.command(["llama-bench"])[:3]),
            "llama": versions(chroot), "llama_upstream": versions(sid)}
    return rows, meta


HK_FIGURES = ("submissions", "commands", "compute_commands", "launches", "barriers",
              "streams_without_final_barrier")


def bench_hk(fork, prefix, tokens=(8, 24), arches=None):
    """Per-token kernel traffic of llama.cpp decode, stock vs fork, and the
    same for every other architecture asked (a cross build's under qemu-user),
    printed side by side with the machine's own."""
    conf = fork.conf
    arches = arches or [fork.arch]
    rows, meta = hk_rows(fork, prefix, tokens)
    others, others_meta = {}, {}
    for a in arches:
        if a != fork.arch:
            other = fork.for_arch(a)
            others[a], others_meta[a] = hk_rows(other, other.default_prefix, tokens)
    with step("callgrind: driver instructions per recorded dispatch"):
        ir = {"stock": callgrind_ir_per_dispatch(prefix, conf, "0"),
              "fork": callgrind_ir_per_dispatch(prefix, conf, "1")}

    s, f = rows["stock"], rows["fork"]
    labels = [label for label, _ in HK_SETTINGS] + ["upstream"]
    u = rows["upstream"]
    print()
    print("llama.cpp (Debian sid: %s) decoding a random-weight qwen3 model on Honeykrisp,"
          % ", ".join("%s %s" % kv for kv in sorted(meta["llama"].items())))
    print("asahi drm-shim %s; per token = difference of %d- and %d-token runs."
          % (shim_settings(conf, "asahi").get("ASAHI_SHIM_DEVICE", "m1max"),
             tokens[1], tokens[0]))
    print("stock: HK_LAZY_BARRIER=0. lazy: HK_MERGE_STREAMS=0 (a control stream per")
    print("pipeline barrier). fork: the defaults (lazy barriers, merged streams).")
    print("fork+batch: HK_PERFTEST=batch (up to the kernel's limit of commands per")
    print("SUBMIT ioctl; off by default, see docs/changes/hk-uapi.md).")
    print("upstream: the newest Honeykrisp Debian ships, on the same shim, model and")
    print("tokens: %s," % meta["upstream"])
    print("run as %s ... (its own C library and loader)." % meta["upstream_runs"])
    if meta["llama_upstream"] != meta["llama"]:
        print("WARNING: the upstream row ran another llama.cpp (%s): its graph may differ, "
              "so its figures are not comparable with the others"
              % ", ".join("%s %s" % kv for kv in sorted(meta["llama_upstream"].items())))
    ratio = lambda a, b: a / b if b else 0
    print("%-34s" % "per token" + "".join("%12s" % l for l in labels) +
          "%11s %11s %11s" % ("fork/stock", "batch/stock", "fork/upstr."))
    names = {"submissions": "SUBMIT ioctls", "commands": "kernel commands",
             "compute_commands": "  of which compute"}
    fb = rows["fork+batch"]
    for k in ("submissions", "commands", "compute_commands", "launches", "barriers"):
        print("%-34s" % names.get(k, k) + "".join("%12.1f" % rows[l][k] for l in labels) +
              "%11.3f %11.3f %11.3f" % (ratio(f[k], s[k]), ratio(fb[k], s[k]), ratio(f[k], u[k])))
    bpl = lambda r: r["barriers"] / r["launches"] if r["launches"] else 0
    print("%-34s" % "barriers per launch" + "".join("%12.3f" % bpl(rows[l]) for l in labels) +
          "%11.3f %11.3f %11.3f" % (ratio(bpl(f), bpl(s)), ratio(bpl(fb), bpl(s)),
                                    ratio(bpl(f), bpl(u))))
    print("%-34s" % "streams with a launch, no end barrier" +
          "".join("%12d" % rows[l]["streams_without_final_barrier"] for l in labels))
    # With batching every vkQueueSubmit here fits in one ioctl (far fewer
    # commands than the kernel's limit), so its ioctls count the submits.
    submits = fb["submissions"]
    print()
    print("vkQueueSubmit per token (= SUBMIT ioctls with batching): %.1f" % submits)
    for l in labels:
        rows[l]["compute_per_submit"] = ratio(rows[l]["compute_commands"], submits)
    print("%-34s" % "compute commands per vkQueueSubmit" +
          "".join("%12.2f" % rows[l]["compute_per_submit"] for l in labels))
    print()
    print("published, M2 Ultra, Qwen3-4B (cited, docs/changes/hk-lazy-barrier.md): %d "
          "launches and %d barriers per token stock, about %d asked for by llama.cpp "
          "(%.3f per launch), about %d us per barrier; %.1f -> %.1f tok/s with barriers "
          "at sync points only"
          % (M2U_LAUNCHES_PER_TOKEN, M2U_BARRIERS_STOCK, M2U_BARRIERS_ASKED,
             M2U_BARRIERS_ASKED / M2U_LAUNCHES_PER_TOKEN, M2U_US_PER_BARRIER, *M2U_TOK_S))
    print()
    print("%-34s %12.0f %12.0f %10.3f" % ("driver instructions per dispatch",
                                          ir["stock"], ir["fork"], ir["fork"] / ir["stock"]))
    print("  (callgrind, vkCmdDispatch + share of vkEndCommandBuffer, 512 dispatches)")
    if others:
        print()
        all_rows = dict({fork.arch: rows}, **others)
        print_arch_columns(
            "The same decode on each architecture's build (per token; a cross build "
            "runs under qemu-user):", [fork.arch] + list(others), all_rows, HK_FIGURES,
            "%12.1f", {"submissions": "SUBMIT", "commands": "kernel cmds",
                       "compute_commands": "compute cmds",
                       "streams_without_final_barrier": "no end barrier"})
        for a, m in others_meta.items():
            print("upstream on %s: %s" % (a, m["upstream"]))
    return rows, ir
