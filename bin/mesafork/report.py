# SPDX-License-Identifier: MIT
"""`mesa-fork report`: what the fork does on the user's machine, as one
Markdown file to paste into a bug report. It runs every check and probe we
ship against each fork device the machine has, and llama.cpp's own tests and
a short benchmark with each knob off and on when llama.cpp is installed.

Without the GPU (here, in CI) it runs the same steps on the drm-shims in a
dry mode whose every heading says so: nothing executes on a GPU there, so
no figure in a dry report is a hardware measurement."""

import datetime
import json
import os
import platform
import re
import subprocess

from .backendops import BACKEND_OPS as LLAMA_OPS, backend_ops_counts
from .config import driver_info_tag, host_arch, multiarch, names_release, stock_knobs
from .install import fork_env, icd_json, list_devices, require_manifests
from .proc import die, rel

DRIVERS = {"asahi": "Honeykrisp", "panfrost": "panvk", "intel": "ANV"}


def sh(cmd, env=None, timeout=600):
    """(exit code, stdout, stderr); a missing program or a timeout is an
    exit code of its own (127, 124), never an exception. A program that
    hangs (a GPU hang is what the report may meet) is killed with its whole
    process group."""
    try:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    except OSError as e:
        return 127, "", "%s: %s" % (cmd[0], e.strerror)
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        rc = 124
        err += b"\n(killed after %d s)" % timeout
    return rc, out.decode(errors="replace"), err.decode(errors="replace")


# Variables that would change what a run measures; the report sets its own.
FORK_VARS = ("HK_", "PANVK_", "ANV_", "ASAHI_SHIM", "PAN_SHIM", "PAN_GPU_ID", "INTEL_STUB",
             "VK_", "GGML_VK_", "LD_PRELOAD")


def clean_environ():
    return {k: v for k, v in os.environ.items() if not k.startswith(FORK_VARS)}


def machine():
    rows = [("kernel", " ".join(platform.uname()[i] for i in (0, 2, 3, 4)))]
    text = ""
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            text = f.read()
    pretty = re.search(r'^PRETTY_NAME="?([^"\n]*)', text, re.M)
    rows.append(("system", pretty.group(1) if pretty else "unknown"))
    cpu = "unknown"
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^(model name|Model|Hardware)\s*:\s*(.+)$", f.read(), re.M)
            cpu = m.group(2) if m else cpu
    rows.append(("CPU", cpu))
    if os.path.exists("/proc/device-tree/model"):       # Apple and Arm boards
        with open("/proc/device-tree/model", "rb") as f:
            rows.append(("model", f.read().rstrip(b"\0").decode(errors="replace")))
    return rows


def block(text, limit=60):
    lines = (text or "").rstrip().splitlines()
    if len(lines) > limit:
        lines = lines[:limit // 2] + ["[... %d lines ...]" % (len(lines) - limit)] + \
            lines[-limit // 2:]
    return ["```", *lines, "```"]


def probe_cmd(prefix, drv):
    exe = lambda name: os.path.join(prefix, "bin", name)  # noqa: E731
    if drv == "asahi":
        return "dispatch timing, stock vs lazy vs fork", [exe("mesa-fork-dispatch-probe")]
    if drv == "intel":
        return "readback and coherency per memory type", [exe("mesa-fork-readback-probe")]
    return "command buffers in flight with scratch memory", \
        [exe("mesa-fork-inflight"), "--submit", "--cmdbufs", "8", "tls"]


# mesa-fork-barrier-probe's exit status: what it says about the assumption
# HK_LAZY_BARRIER and HK_MERGE_STREAMS rest on.
BARRIER_VERDICTS = {
    0: "holds: one CDM barrier waited for every earlier launch of the stream",
    1: "DOES NOT HOLD: stale data after one CDM barrier; run with HK_LAZY_BARRIER=0 "
       "and report this",
    3: "is undecided: the device executed nothing (a drm-shim runs no shader); "
       "only Apple hardware can answer",
}


def barrier_probe_section(prefix, env):
    """hk: mesa-fork-barrier-probe checks, on the GPU, that one CDM barrier
    waits for and flushes every earlier launch of its control stream."""
    rc, so, se = sh([os.path.join(prefix, "bin", "mesa-fork-barrier-probe")], env)
    verdict = BARRIER_VERDICTS.get(rc, "the probe failed (exit %d)" % rc)
    return ["### mesa-fork-barrier-probe: the lazy barrier's hardware assumption %s"
            % verdict, ""] + block(so + se, 30) + [""]


def llama_tools(llama_bin):
    """Paths of test-backend-ops and llama-bench, from --llama-bin, PATH or
    Debian's llama.cpp-tests directory; None for each one not found."""
    dirs = [llama_bin] if llama_bin else os.environ.get("PATH", "").split(":") + \
        ["/usr/libexec/%s/llama.cpp-tests" % multiarch(host_arch())]
    found = {}
    for tool in ("test-backend-ops", "llama-bench"):
        found[tool] = next((os.path.join(d, tool) for d in dirs
                            if d and os.access(os.path.join(d, tool), os.X_OK)), None)
    return found


def tps(stdout):
    """Tokens per second of a llama-bench -o json run, or None."""
    try:
        rows = json.loads(stdout)
        return rows[0]["avg_ts"] if rows else None
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def report(fork, output=None, prefix=None, model=None, llama_bin=None, dry=False):
    """Run every check and probe on this machine's fork devices; write a Markdown report."""
    prefix = fork.prefix(prefix)
    if not os.path.exists(os.path.join(prefix, "bin", "mesa-fork-vkcheck")):
        die("report: nothing installed in %s; run 'bin/mesa-fork install'" % prefix)
    if model and not os.path.isfile(model):
        die("report: --model %s: no such file" % model)
    if output and not os.path.isdir(os.path.dirname(os.path.abspath(output))):
        die("report: --output %s: no directory %s; create it first"
            % (output, os.path.dirname(os.path.abspath(output))))
    # Real devices first: only those whose driverInfo names the fork. A
    # machine without any runs on the shims, labelled, and says why.
    require_manifests(prefix, fork.conf, "report")
    envs, missing = {}, {}
    if not dry:
        for drv in DRIVERS:
            env = fork_env(prefix, fork.conf, base=clean_environ())
            env["VK_DRIVER_FILES"] = icd_json(prefix, drv)
            devs, r = list_devices(prefix, env)
            devs = [d for d in devs if names_release(fork.conf, d.get("info"))]
            if devs:
                envs[drv] = (env, devs)
            else:
                missing[drv] = (r.stderr or "").strip()
    dry = dry or not envs
    if dry:
        for drv in DRIVERS:
            env = fork_env(prefix, fork.conf, shim=drv, base=clean_environ())
            envs[drv] = (env, list_devices(prefix, env)[0])
    tools = llama_tools(llama_bin)
    now = datetime.datetime.now(datetime.timezone.utc)
    out = os.path.abspath(output or "mesa-fork-report-%s.md" % now.strftime("%Y%m%d-%H%M%S"))

    md = ["# mesa-fork report", ""]
    if dry:
        md += ["**DRY RUN on drm-shim: no GPU was found, so every step ran on the fork's "
               "drm-shims, where nothing executes on a GPU. No figure below is a hardware "
               "measurement; this report only shows that the steps run.**", ""]
    # What the prefix was built as (the Debian base or the release tarball).
    release = os.path.join(prefix, "share", "mesa-fork", "release")
    built = open(release).read().strip() if os.path.exists(release) \
        else driver_info_tag(fork.conf)
    md += ["| | |", "|---|---|", "| fork | %s |" % built,
           "| date | %s |" % now.strftime("%Y-%m-%d %H:%M UTC"),
           "| mode | %s |" % ("dry run on drm-shim" if dry else "hardware")]
    md += ["| %s | %s |" % kv for kv in machine()]
    md += ["| llama.cpp | %s |" % (", ".join(p for p in tools.values() if p) or
                                   "not found (pass --llama-bin DIR)"), ""]
    if missing:
        md += ["## Fork drivers without a device here", ""]
        for drv, err in missing.items():
            md += ["- %s: %s" % (DRIVERS[drv], "no device" if not err else "no device; "
                                 "`mesa-fork-vkcheck --list` said:")]
            if err:
                md += [""] + ["  " + l for l in block(err, 12)] + [""]
        md.append("")
    ratios = []
    for drv, (env, devs) in envs.items():
        md += ["## %s%s" % (DRIVERS[drv], " (dry run on drm-shim)" if dry else ""), ""]
        if not devs:
            md += ["No device: the fork's %s driver did not load." % DRIVERS[drv], ""]
            continue
        for d in devs:
            md += ["- device: %s, driver %s, driverInfo `%s`, apiVersion %s" % (
                d.get("name"), d.get("driver"), d.get("info"), d.get("api"))]
        md.append("")
        rc, so, se = sh([os.path.join(prefix, "bin", "mesa-fork-vkcheck"), "--verify"], env)
        verdict = "passed" if rc == 0 else "FAILED (exit %d)" % rc
        if dry and rc != 0:
            # A shim executes nothing: the data check must fail there.
            verdict += ", as it must on a drm-shim, which executes nothing"
        md += ["### mesa-fork-vkcheck --verify: %s" % verdict, ""] + block(so + se, 30) + [""]
        what, cmd = probe_cmd(prefix, drv)
        rc, so, se = sh(cmd, env)
        md += ["### %s: %s (exit %d)" % (os.path.basename(cmd[0]), what, rc), ""] + \
            block(so + se) + [""]
        if drv == "asahi":
            md += barrier_probe_section(prefix, env)
        md += fastpath_section(prefix, drv, env, fork.conf)
        md += memory_section(prefix, drv, env, fork.conf)
        md += llama_section(drv, env, tools, model, ratios, fork.conf)
    md += ["## Fork/stock ratios", ""]
    if ratios:
        md += ["| driver | measurement | stock | fork | fork/stock |", "|---|---|---|---|---|"]
        md += ["| %s | %s | %.2f | %.2f | %.3f |" % r for r in ratios]
    else:
        md += ["None: llama.cpp's llama-bench and a model (--model) are needed."]
    if dry:
        md += ["", "(dry run: these numbers come from a drm-shim and mean nothing)"]
    with open(out, "w") as f:
        f.write("\n".join(md) + "\n")
    print("report: wrote %s%s" % (rel(out), " (dry run on drm-shim)" if dry else ""))
    return 0


MEMORY_LINE = re.compile(r"^memory: .*$", re.M)


# The fast paths a driver has knobs for: what llama.cpp's device line shows
# and what the probe computes, with the knobs at the fork's defaults and off.
FASTPATH_KNOBS = {"panfrost": ("PANVK_SHADER_FLOAT16", "PANVK_INTEGER_DOT_PRODUCT"),
                  "asahi": ("HK_REQUIRED_SUBGROUP_SIZE",)}


def fastpath_section(prefix, drv, env, conf):
    """mesa-fork-fastpath-probe --compute, fork vs its fast-path knobs off:
    which paths llama.cpp takes (ggml-vulkan's fp16 and int dot) and
    whether the GPU's fp16 and integer dot product results match the CPU's."""
    knobs = FASTPATH_KNOBS.get(drv)
    if not knobs:
        return []
    md = ["### mesa-fork-fastpath-probe --compute: llama.cpp's fast paths, fork vs %s"
          % " ".join("%s=0" % k for k in knobs), "",
          "| | ggml fp16 | ggml int dot | fp16 on the GPU | int dot on the GPU | "
          "required subgroup size | exit |", "|---|---|---|---|---|---|---|"]
    outputs = []
    for label, extra in (("fork", {}), ("knobs off", dict.fromkeys(knobs, "0"))):
        rc, so, se = sh([os.path.join(prefix, "bin", "mesa-fork-fastpath-probe"), "--compute"],
                        dict(env, **extra))
        outputs.append((label, so + se))
        dev, checks = {}, {}
        for line in so.splitlines():
            if line.startswith("{"):
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                if "device" in j:
                    dev = j
                elif "check" in j:
                    checks[j["check"]] = j

        def result(name):
            c = checks.get(name)
            if not c:
                return "?"
            if not c.get("ran"):
                return "not run (%s)" % c.get("why", "")
            if "wrong" in c:
                return "%d of %d words wrong" % (c["wrong"], c["compared"])
            return "%s, %d validation message(s)" % (c.get("result"),
                                                    c.get("validation_messages", 0))

        g = dev.get("ggml", {})
        md.append("| %s | %s | %s | %s | %s | %s | %d |" % (
            label, g.get("fp16", "?"), g.get("int_dot", "?"), result("fp16"), result("int_dot"),
            result("required_subgroup_size"), rc))
    md.append("")
    for label, text in outputs:
        md += ["%s:" % label, ""] + block(text, 12) + [""]
    return md


def memory_section(prefix, drv, env, conf):
    """hk and panvk: the heap, and the budget and usage of
    VK_EXT_memory_budget, as mesa-fork-va-probe allocates 1 GiB, stock
    (the [stock] knobs: no extension, hk's heap half of RAM) vs fork:
    its first memory: line (nothing allocated) and its last (1 GiB)."""
    if drv not in ("asahi", "panfrost"):
        return []
    md = ["### mesa-fork-va-probe --target-gib 1: heap, budget and usage, stock vs fork", "",
          "The first line is before the first allocation, the last after 1 GiB; the fork's "
          "usage should grow by about 1 GiB and its budget stay at or below the heap "
          "(docs/changes/memory-budget.md).", ""]
    for label, knobs in (("stock", stock_knobs(conf, drv)), ("fork", {})):
        rc, so, se = sh([os.path.join(prefix, "bin", "mesa-fork-va-probe"), "--target-gib", "1"],
                        dict(env, **knobs))
        lines = MEMORY_LINE.findall(so)
        shown = [lines[0], lines[-1]] if len(lines) >= 2 else lines
        md += ["%s (exit %d):" % (label, rc), ""] + block("\n".join(shown) if shown
                                                         else so + se, 12) + [""]
    return md


def llama_section(drv, env, tools, model, ratios, conf):
    md = []
    stock = dict(env, **stock_knobs(conf, drv))
    ops = tools.get("test-backend-ops")
    knobs = " ".join("%s=%s" % kv for kv in stock_knobs(conf, drv).items())
    if not ops:
        md += ["### llama.cpp test-backend-ops: not run (not installed)", ""]
    else:
        md += ["### llama.cpp test-backend-ops -o %s" % LLAMA_OPS, "",
               "| setting | exit | cases run | not supported | failed |", "|---|---|---|---|---|"]
        for label, e in (("stock (%s)" % knobs, stock), ("fork", env)):
            rc, so, se = sh([ops, "test", "-b", "Vulkan0", "-o", LLAMA_OPS], e, timeout=1800)
            c = backend_ops_counts(so)
            md.append("| %s | %d | %d | %d | %d |" % (label, rc, c["run"], c["unsupported"],
                                                       c["failed"]))
        md.append("")
    bench = tools.get("llama-bench")
    if not bench or not model:
        md += ["### llama-bench: not run (%s)" % ("no --model" if bench else "not installed"),
               ""]
        return md
    md += ["### llama-bench -p 64 and -n 16, -r 3; stock, fork, fork, stock (means)", "",
           "| setting | pp t/s | tg t/s |",
           "|---|---|---|"]
    # Stock, fork, fork, stock: a machine that heats up (a fanless Mac) slows
    # the later runs, and the order spreads that over both settings.
    runs = {"stock": [], "fork": []}
    for label in ("stock", "fork", "fork", "stock"):
        row = []
        for args in (["-p", "64", "-n", "0"], ["-p", "0", "-n", "16"]):
            rc, so, _ = sh([bench, "-m", model, "-r", "3", "-o", "json"] + args,
                           stock if label == "stock" else env, timeout=1800)
            row.append(tps(so) if rc == 0 else None)
        runs[label].append(row)
    got = {}
    for label, rows in runs.items():
        got[label] = [sum(r[i] for r in rows) / len(rows) if all(r[i] for r in rows) else None
                      for i in range(2)]
        md.append("| %s | %s | %s |" % (label, *("%.2f" % v if v else "failed"
                                                 for v in got[label])))
    md.append("")
    for i, what in enumerate(("prompt processing t/s", "token generation t/s")):
        s, f = got["stock"][i], got["fork"][i]
        if s and f:
            ratios.append((DRIVERS[drv], what, s, f, f / s))
    return md
