# SPDX-License-Identifier: MIT
"""`mesa-fork bench`: side-by-side measurements, stock vs fork, same build,
one run. Nothing here is a test: it prints figures and ratios."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from . import chroot, upstream
from .apt import debian_mirror, os_codename
from .config import host_arch, multiarch, stock_knobs
from .install import fork_env, icd_json, shim_env_pairs, shim_lib
from .proc import die, make_dirs, step

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

# What the chroot holds. vulkan-validationlayers is sid's Khronos layer, for
# `bench sync` (synchronization validation of llama.cpp).
SID_PACKAGES = ["llama.cpp-tools", "llama.cpp-tests", "libggml0-backend-vulkan",
                "python3-gguf", "libdrm2", "libexpat1", "libzstd1", "libvulkan1",
                "vulkan-validationlayers"]


class Chroot(chroot.Chroot):
    """A Debian sid chroot with llama.cpp, made once with mmdebstrap and
    cached in .work/chroot/sid; the fork's .work is bind-mounted at the same
    path so the drivers and shims built on the host load inside it."""

    def __init__(self, work, codename):
        super().__init__(os.path.join(work, "chroot", "sid"), [(work, work)])
        self.work = work
        self.codename = codename
        self.arch = host_arch()

    def libexec(self, rel_path):
        """A program of Debian's libexec directory for this architecture."""
        return os.path.join("/usr/libexec", multiarch(self.arch), rel_path)

    def ensure(self):
        if os.geteuid() != 0:
            die("bench: llama.cpp runs on this machine's build in a Debian sid chroot, which "
                "needs root (mmdebstrap, chroot, bind mounts): run it with sudo. The "
                "upstream column and a cross build's runs (qemu-user) need no root.")
        uri, signed = debian_mirror(self.codename)
        # A snapshot mirror serves an expired sid Release file: accepted.
        super().ensure("sid", "minbase",
                       chroot.sources_list(uri, ["sid"], signed or chroot.DEBIAN_KEYRING),
                       SID_PACKAGES, self.arch,
                       apt_options=['Acquire::Check-Valid-Until "false"'])

    def package_version(self, package):
        """The installed version of one of the chroot's packages, or None."""
        return upstream.dpkg_status_version(self.root, package)


def llama_root(fork):
    """Where llama.cpp runs for fork.arch: the sid chroot natively, a
    qemu-user root for a cross build."""
    return upstream.SidRoot(fork) if fork.cross else Chroot(fork.work, os_codename())


def chroot_shim_env(prefix, conf, driver, **extra):
    """The environment (inside the chroot, which starts from an empty one)
    that runs a program on the fork's `driver` over its drm-shim."""
    env = {"VK_DRIVER_FILES": icd_json(prefix, driver),
           "LD_PRELOAD": shim_lib(prefix, conf, driver)}
    env.update(shim_env_pairs(conf, driver))
    env.update(extra)
    return env


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
    env = fork_env(prefix, conf, shim="asahi")
    env["HK_LAZY_BARRIER"] = lazy
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


def sid_root(fork, chroot):
    """The root with sid's Mesa for fork.arch: chroot itself when llama.cpp
    already runs in one (a cross build's), else one made for it."""
    if isinstance(chroot, upstream.SidRoot):
        return chroot
    sid = upstream.SidRoot(fork)
    sid.ensure()
    return sid


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


def print_arch_columns(title, arches, rows_by_arch, keys, fmt, names=None):
    """One table: per row label and figure, each architecture's value side by
    side and whether they are equal, then a verdict line. Returns the
    figures that differ."""
    base = arches[0]
    print(title)
    print("%-30s" % "" + "".join("%12s" % a for a in arches) + "   equal")
    differ = []
    for label in rows_by_arch[base]:
        for k in keys:
            vals = [rows_by_arch[a][label][k] for a in arches]
            same = all(v == vals[0] for v in vals)
            if not same:
                differ.append((label, k))
            print("%-30s" % ("%s, %s" % (label, (names or {}).get(k, k)))[:30] +
                  "".join(fmt % v for v in vals) + "   %s" % ("yes" if same else "NO"))
    print("every figure equal on %s" % " and ".join(arches) if not differ
          else "DIFFERENT: %s" % ", ".join("%s %s" % d for d in differ))
    return differ


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
          % (shim_env_pairs(conf, "asahi").get("ASAHI_SHIM_DEVICE", "m1max"),
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


def shim_run(fork, prefix, program, args, knobs):
    """(the panthor shim's VM log, the client's summary line) of one run of
    one of our clients on the panthor shim (a cross build's under
    qemu-user)."""
    exe = os.path.join(prefix, "bin", program)
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "vm.jsonl")
        env = fork_env(prefix, fork.conf, shim="panfrost")
        env["PAN_SHIM_VM_LOG"] = log
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
          % (" ".join("%s=%s" % kv for kv in shim_env_pairs(conf, "panfrost").items()),
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


QWEN2_MODEL = "qwen2-3b-shapes-q4_0.gguf"


def ensure_models(chroot, work, q4=True):
    """The random qwen3 model (its tokenizer seeds the others) and, with q4, a
    Q4_0 qwen2 with Qwen2.5-3B's shapes, 20 layers; both cached in
    .work/models and shared by every architecture's bench."""
    models = os.path.join(work, "models")
    make_dirs(models)
    tiny = os.path.join(models, "qwen3-dense.gguf")
    if not os.path.exists(tiny):
        with step("write a random-weight qwen3 model (test-llama-archs)"):
            chroot.run_in([chroot.libexec("llama.cpp-tests/test-llama-archs"),
                           "-a", "^qwen3$", "-o", models],
                          env={"VK_DRIVER_FILES": "/nonexistent"}, quiet=True)
    if not q4:
        return tiny, None
    q4 = os.path.join(models, QWEN2_MODEL)
    if not os.path.exists(q4):
        script = os.path.join(work, "tmp", "make_qwen2_model.py")
        make_dirs(os.path.dirname(script))
        shutil.copyfile(os.path.join(os.path.dirname(__file__), "make_qwen2_model.py"), script)
        f16 = os.path.join(models, "qwen2-3b-shapes-f16.gguf")
        with step("write a random qwen2 with Qwen2.5-3B shapes (python3-gguf), F16"):
            chroot.run_in(["python3", script, tiny, f16, "20"], quiet=True)
        with step("llama-quantize to Q4_0"):
            chroot.run_in(["llama-quantize", f16, q4, "Q4_0"], quiet=True)
        os.unlink(f16)
    return tiny, q4


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
