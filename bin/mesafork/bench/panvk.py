# SPDX-License-Identifier: MIT
"""`mesa-fork bench panvk`: the private GPU VA panvk binds (TLS, WLS) with
command buffers in flight and threads recording, on the panthor shim, stock
vs fork; then llama.cpp's prefill sweep (micro-batch, flash attention) with
sid's panvk beside them where Debian builds it. Nothing here is a test: it
prints figures and ratios."""

import json
import os
import re
import subprocess
import tempfile

from ..config import stock_knobs
from ..proc import die, make_dirs, step
from .shim import (chroot_shim_env, ensure_models, host_env, llama_root, print_arch_columns,
                   shim_settings, sid_root)


def shim_run(fork, prefix, program, args, knobs):
    """(the panthor shim's VM log, the client's summary line) of one run of
    one of our clients on the panthor shim (a cross build's under
    qemu-user)."""
    exe = os.path.join(prefix, "bin", program)
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "vm.jsonl")
        env = host_env(prefix, fork.conf, "panfrost", PAN_SHIM_VM_LOG=log)
        env.update(knobs)
        r = subprocess.run(fork.exe_wrapper + [exe] + args, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, errors="replace", timeout=1800)
        lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        summary = [l for l in lines if l.get("summary")]
        if not summary:
            die("%s failed:\n%s" % (program, r.stderr[-3000:]))
        with open(log) as f:
            ops = [json.loads(l) for l in f]
    return ops, summary[0]


def inflight_args(kind, cmdbufs, opts):
    args = ["--cmdbufs", str(cmdbufs)]
    for k, v in opts.items():
        args += ["--" + k.replace("_", "-")] + ([] if v is True else [str(v)])
    return args + [kind]


def inflight_peak(fork, prefix, kind, cmdbufs, knobs, **opts):
    """Peak bound GPU VA (bytes) and the summary of one mesa-fork-inflight run."""
    ops, summary = shim_run(fork, prefix, "mesa-fork-inflight",
                            inflight_args(kind, cmdbufs, opts), knobs)
    return max(o["peak"] for o in ops), summary


# The size of the buffer `mesa-fork-inflight --mark` creates once its
# command buffers are freed.
MARK_SIZE = 5 << 20


def held_after_free(fork, prefix, knobs):
    """Bound VA (bytes) once the command buffers of 3 in flight, 608 MiB of
    TLS each, are freed: at the map of the --mark buffer."""
    ops, summary = shim_run(fork, prefix, "mesa-fork-inflight",
                            inflight_args("tls", 3, dict(tls_kib=4, submit=True, mark=True)),
                            knobs)
    marks = [o for o in ops if o["op"] == "map" and o["size"] == MARK_SIZE]
    if len(marks) != 1:
        die("mesa-fork-inflight --mark: expected one %d-byte map, found %d"
                 % (MARK_SIZE, len(marks)))
    return marks[0]["bound"] - MARK_SIZE, summary


def threads_peak(fork, prefix, knobs, threads=4, rounds=6):
    ops, summary = shim_run(fork, prefix, "mesa-fork-threads",
                            ["--threads", str(threads), "--rounds", str(rounds),
                             "--tls-kib", "1"], knobs)
    return max(o["peak"] for o in ops), summary


def _inflight_case(kind, n, **opts):
    return lambda fork, prefix, knobs: inflight_peak(fork, prefix, kind, n, knobs, **opts)


# (section, row label, run(fork, prefix, knobs) -> (bytes, summary))
PANVK_CASES = (
    [("tls", "%d" % n, _inflight_case("tls", n, tls_kib=4)) for n in (1, 4, 12, 32)] +
    [("released", "3 freed", held_after_free)] +
    [("wls-dispatches", "%d%s" % (d, " + barriers" if barrier else ""),
      _inflight_case("wls", 1, groups=4096, dispatches=d,
                     **({"barrier": True} if barrier else {})))
     for d, barrier in ((1, False), (4, False), (4, True), (16, True))] +
    [("wls-dispatches", "12, 2 per epoch",
      _inflight_case("wls", 1, groups=4096, dispatches=12, barrier=True, epoch=2))] +
    [("wls-grid", "%d, %dx%d" % (local, gx, gy),
      _inflight_case("wls", 1, groups=gx, groups_y=gy, local_size=local))
     for local, gx, gy in ((256, 4096, 1), (64, 4096, 1), (1, 8192, 1), (256, 65535, 65535))] +
    [("threads", "4 threads, 6 rounds", threads_peak)])


def panvk_rows(fork, prefix):
    """{(section, label): {"stock": (bytes, summary), "fork": (bytes, summary)}}."""
    rows = {}
    for section, label, run_case in PANVK_CASES:
        with step("%s: %s, %s" % (fork.arch, section, label)):
            rows[(section, label)] = {"stock": run_case(fork, prefix, stock_knobs(fork.conf, "panfrost")),
                                      "fork": run_case(fork, prefix, {})}
    return rows


def bench_panvk(fork, prefix, arches=None):
    conf = fork.conf
    mib = lambda b: b / (1 << 20)
    rows = panvk_rows(fork, prefix)
    others = {a: panvk_rows(fork.for_arch(a), fork.for_arch(a).default_prefix)
              for a in (arches or []) if a != fork.arch}

    def cell(peak, s):
        return "%7.0f MiB%s" % (mib(peak), "" if not s["out_of_device_memory"] else
                                " (%d OOM)" % s["out_of_device_memory"])

    def table(section, head):
        print("%-24s %22s %22s %10s" % (head, "stock", "fork", "fork/stock"))
        for (sec, label), r in rows.items():
            if sec == section:
                s, f = r["stock"], r["fork"]
                print("%-24s %22s %22s %10.3f" % (label, cell(*s), cell(*f), f[0] / s[0]))

    print("panvk on the panthor drm-shim (%s), %s: peak GPU VA bound by the driver,"
          % (" ".join("%s=%s" % kv for kv in shim_settings(conf, "panfrost").items()),
             fork.arch))
    print("stock = PANVK_SHARED_TLS=0 PANVK_WLS_REUSE=0, same build, one run")
    print()
    print("TLS: command buffers kept in flight, each one dispatch of a shader with a "
          "4 KiB private array")
    print("(the compiler gives it 16 KiB per thread: 16 KiB x 2048 threads x core id "
          "range 19 = 608 MiB)")
    table("tls", "in flight")
    print()
    print("TLS: bound VA once the 3 command buffers of the row above are freed "
          "(the device's share)")
    table("released", "command buffers")
    print()
    print("WLS: one command buffer, dispatches of 4096 workgroups with 32 KiB shared memory")
    table("wls-dispatches", "dispatches")
    print()
    print("WLS: one dispatch, 32 KiB shared memory, by workgroup size and grid")
    print("(fork: instances per core = what one core keeps resident, "
          "x core id range 19)")
    table("wls-grid", "local size, grid")
    print()
    print("Threads: mesa-fork-threads, each thread with its own command pool records,")
    print("submits, waits on, resets and frees command buffers needing 4, 8 and 16 KiB "
          "of TLS and 32 KiB of WLS")
    table("threads", "threads, rounds")
    print("(this peak depends on how the threads interleave: it differs from run to run "
          "and is not compared between architectures)")
    print()
    print("(peak = largest bound VA the shim saw; 'OOM' = command buffers whose "
          "vkEndCommandBuffer returned VK_ERROR_OUT_OF_DEVICE_MEMORY)")
    if others:
        print()
        arches = [fork.arch] + list(others)
        flat = {a: {"%s %s" % k: {"stock MiB": mib(r["stock"][0]),
                                  "fork MiB": mib(r["fork"][0]),
                                  "stock OOM": r["stock"][1]["out_of_device_memory"],
                                  "fork OOM": r["fork"][1]["out_of_device_memory"]}
                    for k, r in rs.items() if k[0] != "threads"}
                for a, rs in dict({fork.arch: rows}, **others).items()}
        print_arch_columns(
            "The same runs on each architecture's build (peak VA in MiB, OOM command "
            "buffers; a cross build runs under qemu-user):", arches, flat,
            ("stock MiB", "fork MiB", "stock OOM", "fork OOM"), "%12.1f")
    return rows, others


def llama_prefill_peak(runner, shim_env, model, ubatch, fa):
    """llama-bench -p 1024 -n 0 -b 1024 in runner on the panthor shim, in
    the environment shim_env(vm_log_path): (ok, peak bytes, why not ok)."""
    with tempfile.TemporaryDirectory(dir=os.path.join(runner.work, "tmp")) as tmp:
        log = os.path.join(tmp, "vm.jsonl")
        r = runner.run_in(["llama-bench", "-m", model, "-p", "1024", "-n", "0", "-b", "1024",
                           "-ub", str(ubatch), "-fa", str(fa), "-r", "1", "-o", "json"],
                          env=shim_env(log), capture=True)
        peak = max((json.loads(l)["peak"] for l in open(log)), default=0) \
            if os.path.exists(log) else 0
    ok = r.returncode == 0
    why = ""
    if not ok:
        m = re.search(r"what\(\):\s*(.*)", r.stderr)
        why = m.group(1).strip() if m else "exit %d" % r.returncode
    return ok, peak, why


def panvk_llama_rows(fork, prefix, ubatches, fas=(0, 1)):
    """Per flash-attention setting and micro-batch: the prefill's (ok, peak,
    why) for stock (PANVK_*=0), the fork, and sid's panvk when sid's
    package for fork.arch has it (arm64), else None. Returns the rows and
    what ran upstream (None without it)."""
    conf = fork.conf
    chroot = llama_root(fork)
    chroot.ensure()
    # Debian builds panvk on Arm only: sid's package for another
    # architecture has none, and no root is made for it.
    has_upstream = fork.arch in conf["upstream"]["panvk_arches"].split()
    sid = sid_root(fork, chroot) if has_upstream else None
    if has_upstream and not os.path.exists(sid.icd("panfrost")):
        die("%s: sid's %s has no panvk" % (sid.root, conf["upstream"]["package"]))
    make_dirs(os.path.join(fork.work, "tmp"))
    rows = []
    fork_run = lambda knobs: lambda log: chroot_shim_env(prefix, conf, "panfrost",
                                                          PAN_SHIM_VM_LOG=log, **knobs)
    sid_env = lambda log: sid.shim_env(prefix, conf, "panfrost", PAN_SHIM_VM_LOG=log)
    with chroot.mounted():
        _, model = ensure_models(chroot, fork.work)
        for fa in fas:
            for ub in ubatches:
                with step("%s: llama-bench pp1024, ubatch %d, flash attention %s"
                               % (fork.arch, ub, "on" if fa else "off")):
                    s = llama_prefill_peak(chroot, fork_run(stock_knobs(conf, "panfrost")), model,
                                           ub, fa)
                    f = llama_prefill_peak(chroot, fork_run({}), model, ub, fa)
                    u = llama_prefill_peak(sid, sid_env, model, ub, fa) if has_upstream \
                        else None
                rows.append((fa, ub, s, f, u))
    return rows, sid.describe() if has_upstream else None


# llama-bench -b 1024 caps the micro-batch at 1024: a larger -ub would
# repeat the 1024 row.
UBATCHES = (64, 128, 256, 512, 1024)


def bench_panvk_llama(fork, prefix, ubatches=UBATCHES, arches=None, fas=(0, 1)):
    rows, up = panvk_llama_rows(fork, prefix, ubatches, fas)
    others = {a: panvk_llama_rows(fork.for_arch(a), fork.for_arch(a).default_prefix,
                                  ubatches, fas)
              for a in (arches or []) if a != fork.arch}
    chroot = llama_root(fork)
    cell = lambda r: "n/a" if r is None else ("ok   %5d MiB" % (r[1] >> 20)) if r[0] else \
        ("FAIL %5d MiB  %s" % (r[1] >> 20, r[2][:26]))

    def table(arch, rows, up):
        print("%s: peak GPU VA bound; VA heap of the device: [32 MiB, 4 GiB)" % arch)
        print("upstream: %s" % (up or "n/a: Debian's %s package has no panvk" % arch))
        print("%-4s %-8s %-36s %-36s %-12s" % ("fa", "ubatch", "stock (PANVK_*=0)", "upstream",
                                              "fork"))
        for fa, ub, s, f, u in rows:
            print("%-4s %-8d %-36s %-36s %-12s" % ("on" if fa else "off", ub, cell(s), cell(u),
                                                  cell(f)))

    print()
    print("llama.cpp (Debian sid: %s) prefill, llama-bench -p 1024 -n 0 -b 1024, random qwen2"
          % ", ".join("%s %s" % (p, chroot.package_version(p))
                      for p in ("llama.cpp-tools", "libggml0")))
    print("with Qwen2.5-3B shapes (20 layers, Q4_0), panvk on the panthor shim (G610).")
    table(fork.arch, rows, up)
    for a, (rs, u) in others.items():
        print()
        table(a, rs, u)
    if others:
        print()
        arches = [fork.arch] + list(others)
        flat = {a: {"fa %s ub %d" % ("on" if fa else "off", ub):
                    {"stock MiB": s[1] >> 20, "fork MiB": f[1] >> 20,
                     "stock ok": int(s[0]), "fork ok": int(f[0])}
                    for fa, ub, s, f, u in rs}
                for a, rs in dict({fork.arch: rows}, **{a: o[0] for a, o in others.items()}).items()}
        print_arch_columns(
            "The same prefill sweep on each architecture's build (peak VA in MiB, 1 = "
            "llama-bench succeeded):", arches, flat,
            ("stock MiB", "fork MiB", "stock ok", "fork ok"), "%12d")
    return rows, others
