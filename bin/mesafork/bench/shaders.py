# SPDX-License-Identifier: MIT
"""`mesa-fork bench shaders`: what the compilers make of llama.cpp's
shaders, stock vs fork vs Debian sid's Mesa (the yardstick), in one run.

Debian sid's llama.cpp runs llama-bench on the fork's drm-shims (nothing
executes) for small random models, dense and MoE, in F16, Q4_0, Q4_K_M
and Q8_0, at ubatch 64 and 512 (prompt processing) and 1 (token
generation). ggml-vulkan compiles each pipeline on first use and, with
GGML_VK_PIPELINE_STATS, prints the driver's statistics of it
(VK_KHR_pipeline_executable_properties) under the pipeline's name: the
rows below are matched by that name, which is the same SPIR-V on each
side where ggml-vulkan's device lines agree. The compilers' shader-db
lines (BIFROST_MESA_DEBUG / AGX_MESA_DEBUG=shaderdb) are counted too, with
the shader cache off. The fork's own columns run llama.cpp natively, by
sid's own loader, where its root is this machine's architecture; sid's
Mesa, and another architecture's root, run under qemu-user;
the fork's Valhall compiler reports its compile time, which the bound of
issue 38 compares between the fork and stock-ra columns: those two run
every model several times in turns (natively), each pipeline's time the
least of its runs. Not a test: it prints figures and ratios."""

import os
import re

from ..config import stock_knobs
from ..proc import die, make_dirs, step
from .shim import chroot_shim_env, fork_installed, optional_sid_root, sid_root

# Random-weight models written by llama.cpp's test-llama-archs with a fixed
# seed (the same tensors on every run and machine), then quantized by
# llama-quantize: (name, architecture regex, file test-llama-archs writes).
BASES = (("dense", "^qwen3$", "qwen3-dense.gguf"), ("moe", "^qwen3moe$", "qwen3moe-moe.gguf"))
TYPES = ("F16", "Q4_0", "Q4_K_M", "Q8_0")
MODELS = ["%s-%s" % (b[0], t.lower()) for b in BASES for t in TYPES]
SEED = "20261204"
UBATCHES = (1, 64, 512)

# Substring of the pipeline names whose statistics ggml-vulkan prints (it
# needs a non-empty one): every name of ggml's pipelines has an underscore
# but a few element-wise ones; the shader-db count shows what it missed.
STATS_FILTER = "_"
DEBUG_ENV = {"panfrost": "BIFROST_MESA_DEBUG", "asahi": "AGX_MESA_DEBUG"}
# The fork's Valhall compiler checks every register allocation it makes
# (bi_validate_ra.c) when asked; a rejected one prints this and aborts.
FORK_DEBUG = {"panfrost": "shaderdb,validatera", "asahi": "shaderdb"}
RA_REJECTED = "register allocation check failed"

DEVICE_RE = re.compile(r"^ggml_vulkan: 0 = (.*)$", re.M)
HEADER_RE = re.compile(r"^ggml_vulkan: pipeline stats for (\S+):$")
STAT_RE = re.compile(r"^ggml_vulkan:   (.+?): (\S+)$")
SHADERDB_RE = re.compile(r"SHADER-DB: .*")

# The statistic names each driver reports (25.0.7 + the fork, and upstream),
# under one name each.
NAMES = {
    "Instructions": "instrs", "Instruction Count": "instrs",
    "Cycles": "cycles",
    "Register Count": "regs", "Registers used": "regs", "Number of GPRs": "regs",
    "GPRs": "regs",
    "Threads": "threads", "Spills": "spills", "Fills": "fills",
    "Code Size": "code", "Code size": "code",
    # The fork's Valhall compiler: most 32-bit values live at once when
    # allocation starts, an estimate of the registers a shader needs.
    "Register Demand": "demand",
    # The fork's Valhall compiler: thread CPU time of the backend, NIR to
    # binary, in microseconds, without the allocation check (patch 0063).
    "Compile Time": "compile_us",
}
FIELDS = ("instrs", "cycles", "regs", "threads", "spills", "fills", "code", "demand",
          "compile_us")
# A pipeline's compile may take at most this many times stock's (issue 38).
COMPILE_TIME_LIMIT = 2.0
REGISTER_FILE = 64
# The fork's build with only its register allocation switched back to
# 25.0.7's (the fast paths stay on, so the SPIR-V is the fork column's):
# the column issue 38's fill and compile-time bounds are measured against.
RA_STOCK_LABEL = "stock-ra"
# The compiler's switches are the BIFROST_* ones of config [stock].
RA_KNOB_PREFIX = "BIFROST_"
# Issue 38: the fork's total fills at most this share of stock's allocation's
FILLS_LIMIT = 0.5
# Where llama.cpp runs natively, the fork and stock-ra columns run this many
# times each, a row's compile time the least of its runs: the same compile
# varies by tens of per cent between runs (first touches of memory, the
# other compile threads, the clock), and the least is the run least
# disturbed. Both columns run in the same rounds, so that neither gets
# the quieter moments.
NATIVE_RUNS = 5


def model_files(root, work, names):
    """The GGUF of each name in names, made once in .work/models/shaders."""
    d = os.path.join(work, "models", "shaders")
    make_dirs(d)
    paths = {}
    for base, arch_re, written in BASES:
        wanted = [n for n in names if n.startswith(base + "-")]
        if not wanted:
            continue
        src = os.path.join(d, written)
        if not os.path.exists(src):
            with step("write a random-weight %s model (test-llama-archs -s %s)" % (base, SEED)):
                r = root.run_in([root.libexec("llama.cpp-tests/test-llama-archs"), "-a", arch_re,
                                 "-s", SEED, "-o", d], env={"VK_DRIVER_FILES": "/nonexistent"},
                                capture=True, timeout=1800)
                if r.returncode != 0 or not os.path.exists(src):
                    die("bench shaders: test-llama-archs wrote no %s:\n%s"
                        % (written, (r.stdout + r.stderr)[-2000:]))
        for n in wanted:
            qtype = n.split("-", 1)[1].upper()
            out = os.path.join(d, n + ".gguf")
            if not os.path.exists(out):
                with step("llama-quantize %s to %s" % (written, qtype)):
                    r = root.run_in(["llama-quantize", src, out + ".part", qtype],
                                    env={"VK_DRIVER_FILES": "/nonexistent"}, capture=True,
                                    timeout=1800)
                    if r.returncode != 0:
                        die("bench shaders: llama-quantize %s failed:\n%s"
                            % (qtype, (r.stdout + r.stderr)[-2000:]))
                    os.rename(out + ".part", out)
            paths[n] = out
    return paths


def parse_run(text):
    """(device line, {pipeline: {field: value}}, shader-db line count) of
    one llama-bench run's output. ggml-vulkan gives some pipelines of
    different SPIR-V one name (the dequantizing matmuls of every type are
    matmul_quant_*): the second compile of a name in one run is NAME#2."""
    m = DEVICE_RE.search(text)
    device = m.group(1).strip() if m else None
    pipes, current, seen = {}, None, {}
    for line in text.splitlines():
        h = HEADER_RE.match(line)
        if h:
            n = seen[h.group(1)] = seen.get(h.group(1), 0) + 1
            current = pipes.setdefault(h.group(1) + ("#%d" % n if n > 1 else ""), {})
            continue
        s = STAT_RE.match(line)
        if s and current is not None:
            field = NAMES.get(s.group(1))
            if field:
                try:
                    current[field] = float(s.group(2))
                except ValueError:
                    pass
            continue
        current = None
    return device, pipes, len(SHADERDB_RE.findall(text))


# ggml's line for each backend it loads; a native run must load them from
# the root of sid's packages, never from the host.
BACKEND_RE = re.compile(r"^load_backend: loaded (\S+) backend from (\S+)$", re.M)


def _figures(stats):
    """A row's figures but its compile time: the same compile gives the
    same ones in every run."""
    return sorted((f, v) for f, v in stats.items() if f != "compile_us")


def _base(key):
    """The pipeline name of a row key ("MODEL NAME#2" -> "MODEL NAME")."""
    return key.split("#")[0]


def check_native_backends(root, text):
    """Dies unless a native run's ggml loaded its Vulkan backend, and every
    backend it loaded, from root. ggml looks in its built-in directory
    (the host's, natively), in its executable's (the root's loader's) and
    in the working directory (the root's backend directory); a host with
    a ggml of its own would give it another build of the backends, and
    llama.cpp other SPIR-V."""
    inside = os.path.realpath(root.root) + os.sep
    loaded = BACKEND_RE.findall(text)
    strays = [p for _, p in loaded if not os.path.realpath(p).startswith(inside)]
    if strays:
        die("bench shaders: natively, ggml loaded backends from outside %s (a ggml installed "
            "on this machine?): %s" % (root.root, ", ".join(strays)))
    if "Vulkan" not in [b for b, _ in loaded]:
        die("bench shaders: natively, ggml loaded no Vulkan backend from %s:\n%s"
            % (root.root, text[-2000:]))


class Column:
    """One driver build on one shim: stock (the fork's build with [stock]'s
    knobs), fork, or upstream (sid's). root is where llama-bench runs for
    it when that is not the section's own (upstream's, from another
    architecture); own says it is the fork's build (which runs natively
    where it can); runs is how many times it runs every model, its
    compile times the least of those runs' (the timed columns); done once
    it has run them all."""

    def __init__(self, label, env, root=None, runs=1, own=False):
        self.label, self.env, self.root, self.runs, self.own = label, env, root, runs, own
        self.devices, self.pipes, self.failed = set(), {}, []
        # Shader-db lines of each model's first run; RA check rejections
        # in every run.
        self.shaderdb, self.ra_rejected = 0, 0
        # Each row's compile time in every run that printed it; the rows
        # whose other figures were not the same in every run, or that
        # some run lacked; those printed under another NAME#N than in
        # the first run.
        self.times, self.unstable, self.reordered = {}, set(), set()
        self.model_runs = {}
        self.done = False
        self.native = None

    def run(self, root, model, name, ubatches, native=False):
        root = self.root or root
        pp = [u for u in ubatches if u > 1]
        args = ["llama-bench", "-m", model, "-r", "1", "-o", "csv"]
        args += ["-p", str(max(pp)), "-ub", ",".join(map(str, pp)), "-b", str(max(pp))] \
            if pp else ["-p", "0"]
        args += ["-n", "4"] if 1 in ubatches else ["-n", "0"]
        r = root.run_in(args, env=self.env, capture=True, timeout=7200, native=native)
        self.native = native
        text = r.stdout + r.stderr
        if native:
            check_native_backends(root, text)
        device, pipes, shaderdb = parse_run(text)
        n = self.model_runs.get(name, 0) + 1
        if device:
            self.devices.add(device)
        if r.returncode != 0:
            tail = [l for l in text.splitlines() if l.strip()][-3:]
            self.failed.append("%s%s (exit %d: %s)" % (name, ", run %d" % n if n > 1 else "",
                                                        r.returncode, " / ".join(tail)))
        if n == 1:
            self.shaderdb += shaderdb
        self.ra_rejected += text.count(RA_REJECTED)
        self.merge(name, pipes)

    def merge(self, name, pipes):
        """Adds one run's rows of model name (the first run's, where
        merge() has not seen the model). A row per model and pipeline:
        the same name can be another SPIR-V for another model (another
        quantization type). A later run's row is matched to the first
        row, in sorted order, of the first run with the same pipeline name
        and the same figures not matched yet, and keeps the least compile
        time of the two. Where another NAME#N matches, the row is
        reordered: ggml-vulkan printed that name's pipelines in another
        order. A row that matches none is unstable, listed as "NAME (run
        N)" and not added; so is a first-run row some run did not print."""
        prefix = name + " "
        n = self.model_runs[name] = self.model_runs.get(name, 0) + 1
        if not any(k.startswith(prefix) for k in self.pipes):
            for p, stats in pipes.items():
                self.pipes[prefix + p] = dict(stats)
                self.times[prefix + p] = [stats["compile_us"]] if "compile_us" in stats else []
            return
        free = {k for k in self.pipes if k.startswith(prefix)}
        for p, stats in sorted(pipes.items()):
            same = sorted(k for k in free if _base(k) == _base(prefix + p)
                          and _figures(self.pipes[k]) == _figures(stats))
            if not same:
                self.unstable.add("%s%s (run %d)" % (prefix, p, n))
                continue
            # Both sorted alike, rows of one name and the same figures in
            # the first run's order each match their own NAME#N
            key = same[0]
            if key != prefix + p:
                self.reordered.add(key)
            free.discard(key)
            if "compile_us" in stats:
                self.times.setdefault(key, []).append(stats["compile_us"])
                self.pipes[key]["compile_us"] = min(self.times[key])
        self.unstable |= free

    def timed(self, key):
        """Whether row key's compile time is the least of all the column's
        runs of a compile whose figures and NAME#N held in every run: a
        model whose first run printed no row has its later runs taken as
        the first, and fewer times than runs."""
        model = key.split(" ", 1)[0]
        return (key in self.pipes and "compile_us" in self.pipes[key]
                and len(self.times.get(key, ())) == self.model_runs.get(model) == self.runs
                and key not in self.unstable
                and not any(_base(k) == _base(key) for k in self.reordered))

    def spread(self):
        """(median, largest) over the rows timed more than once of the
        ratio of a row's slowest run to its fastest, or None."""
        r = sorted(max(t) / max(min(t), 1) for t in self.times.values() if len(t) > 1)
        return (r[len(r) // 2], r[-1]) if r else None


def debug_env(driver):
    """What every column sets: the compilers' shader-db lines and
    ggml-vulkan's statistics, with no shader cache."""
    return {DEBUG_ENV[driver]: "shaderdb", "GGML_VK_PIPELINE_STATS": STATS_FILTER,
            "MESA_SHADER_CACHE_DISABLE": "true"}


def ra_stock_knobs(conf):
    """The stock-ra column's environment: of config [stock]'s panfrost
    switches, the compiler's (register allocation and spilling)."""
    return {k: v for k, v in stock_knobs(conf, "panfrost").items()
            if k.startswith(RA_KNOB_PREFIX)}


def columns(fork, prefix, driver, runs=1):
    """The columns of the fork's build in prefix: stock, stock-ra (Valhall
    only) and fork. Where the compiler reports its compile time (Valhall),
    the two columns the bound compares, fork and stock-ra, run runs
    times."""
    conf = fork.conf
    fork_debug = dict(debug_env(driver), **{DEBUG_ENV[driver]: FORK_DEBUG[driver]})
    run = lambda **knobs: chroot_shim_env(prefix, conf, driver, **fork_debug, **knobs)
    timed = runs if driver == "panfrost" else 1
    cols = [Column("stock", run(**stock_knobs(conf, driver)), own=True),
            Column("fork", run(), runs=timed, own=True)]
    if driver == "panfrost":
        cols.insert(1, Column(RA_STOCK_LABEL, run(**ra_stock_knobs(conf)), runs=timed, own=True))
    return cols


def upstream_arch(fork, driver, installed):
    """The architecture whose Debian sid Mesa gives driver's upstream
    column for fork.arch's section, or None: fork.arch's own where sid
    builds the driver for it, else the first architecture sid builds it
    for (config [upstream] panvk_arches) of which installed(arch) says the
    fork's build is there, its drm-shim to run sid's driver under
    qemu-user. The pipelines are llama.cpp's SPIR-V, the same on every
    architecture, and compiling them does not depend on the host: the
    rows stand side by side by name, the device lines printed for each
    column showing the features llama.cpp chose its shaders by."""
    if driver != "panfrost":
        return fork.arch
    sid_arches = fork.conf["upstream"]["panvk_arches"].split()
    if fork.arch in sid_arches:
        return fork.arch
    return next((a for a in sid_arches if installed(a)), None)


# The package of llama.cpp's Vulkan backend, whose SPIR-V each column
# compiles: one version in every root whose rows stand side by side.
GGML_VULKAN = "libggml0-backend-vulkan"


def upstream_column(fork, prefix, driver, roots, cache):
    """(the upstream column for fork.arch's section of driver or None, a
    note of where it comes from or why there is none). One column per
    (architecture, driver) for the whole run, in cache: an arm64 section
    after an amd64 one reuses the column the amd64 one ran. roots holds
    each architecture's root of sid's packages (fork.arch's among them),
    made once."""
    installed = lambda a: a == fork.arch or fork_installed(fork.for_arch(a).default_prefix,
                                                           driver)
    ua = upstream_arch(fork, driver, installed)
    sid_arches = fork.conf["upstream"]["panvk_arches"].split()
    if ua is None:
        return None, ("none: sid builds no panvk for %s; with the fork's %s build installed "
                      "('bin/mesa-fork install --arch %s,%s') this column is sid's %s panvk "
                      "under qemu-user" % (fork.arch, sid_arches[0], fork.arch, sid_arches[0],
                                           sid_arches[0]))
    if ua not in roots:
        root, why = optional_sid_root(fork.for_arch(ua))
        if not root:
            return None, "none: %s" % why
        roots[ua] = root
    root = roots[ua]
    if ua != fork.arch:
        # llama.cpp's SPIR-V is its Vulkan backend's: the rows compare
        # only where both roots hold the same version of it
        here, there = roots[fork.arch].package_version(GGML_VULKAN), \
            root.package_version(GGML_VULKAN)
        if not here or here != there:
            return None, ("none: sid builds no panvk for %s, and the %s root's %s %s is not "
                          "this one's %s (other SPIR-V): remake the roots to compare"
                          % (fork.arch, ua, GGML_VULKAN, there or "?", here or "?"))
    if (ua, driver) not in cache:
        cache[ua, driver] = Column(
            "upstream", root.shim_env(prefix if ua == fork.arch else fork.for_arch(ua)
                                      .default_prefix, fork.conf, driver, **debug_env(driver)),
            root=root)
    note = root.describe()
    if ua != fork.arch:
        note += ("; sid builds no panvk for %s: sid's %s one under qemu-user, its rows "
                 "compared by model and pipeline name with this build's (both roots' %s "
                 "is %s: the same SPIR-V)" % (fork.arch, ua, GGML_VULKAN,
                                              root.package_version(GGML_VULKAN)))
    return cache[ua, driver], note


def run_columns(section, driver, cols, root, paths, ubatches):
    """llama-bench on every model of paths for each column of cols not run
    before in this run (a column reused from another section is), in
    root or the column's own. The fork's build runs natively where that
    root is this machine's architecture; sid's Mesa, and anything in
    another architecture's root, under qemu-user. The columns that run
    several times go first, in rounds: each round runs every model on
    each of them in turn, model by model, the first of them in one round
    the last in the next, so that the two times of a model stand close
    together and what else the machine does falls on both sides alike.
    The columns that run once follow."""
    todo = [c for c in cols if not c.done]
    rounds = [c for c in todo if c.runs > 1]
    for i in range(max([c.runs for c in rounds] + [0])):
        order = [c for c in (rounds if i % 2 == 0 else rounds[::-1]) if i < c.runs]
        for m, path in paths.items():
            for c in order:
                _run(section, driver, c, root, m, path, ubatches, i)
    for c in todo:
        if c.runs == 1:
            for m, path in paths.items():
                _run(section, driver, c, root, m, path, ubatches, 0)
        c.done = True


def _run(section, driver, c, root, model, path, ubatches, i):
    r = c.root or root
    native = c.own and r.can_run_natively()
    with step("%s, %s shim, %s: llama-bench %s at ubatch %s%s%s"
              % (section, driver, c.label if c.root is None or c.root.arch == section
                 else "%s, sid %s" % (c.label, c.root.arch), model,
                 ",".join(map(str, ubatches)),
                 ", run %d of %d" % (i + 1, c.runs) if c.runs > 1 else "",
                 "" if native else ", under qemu-user")):
        c.run(root, path, model, ubatches, native=native)


def fmt(stats):
    if not stats:
        return "-"
    parts = []
    if "instrs" in stats:
        parts.append("%di" % stats["instrs"])
    if "cycles" in stats:
        parts.append("%.2fc" % stats["cycles"])
    if "regs" in stats:
        parts.append("%dr" % stats["regs"])
    if "threads" in stats:
        parts.append("%dt" % stats["threads"])
    if "spills" in stats or "fills" in stats:
        parts.append("%d:%d" % (stats.get("spills", 0), stats.get("fills", 0)))
    if "demand" in stats:
        parts.append("%dd" % stats["demand"])
    if "compile_us" in stats:
        parts.append("%.1fms" % (stats["compile_us"] / 1000))
    if "code" in stats and "instrs" not in stats:
        parts.append("%dB" % stats["code"])
    return " ".join(parts)


def totals(pipes):
    spilling = [s for s in pipes.values() if s.get("spills", 0) or s.get("fills", 0)]
    t = {"pipelines": len(pipes), "spilling": len(spilling),
         "spilling, fits": None, "over the file": None}
    # Where the driver reports its demand: over the file, and spilling
    # though it fits
    if any("demand" in s for s in pipes.values()):
        t["spilling, fits"] = sum(1 for s in spilling
                                  if s.get("demand", REGISTER_FILE + 1) <= REGISTER_FILE)
        t["over the file"] = sum(1 for s in pipes.values()
                                 if s.get("demand", 0) > REGISTER_FILE)
    for f in FIELDS:
        vals = [s[f] for s in pipes.values() if f in s]
        t[f] = sum(vals) if vals else None
    return t


def ratio(cols, a, b, field):
    """field summed over the pipelines both a and b built, a / b."""
    ca = next((c for c in cols if c.label == a), None)
    cb = next((c for c in cols if c.label == b), None)
    if not ca or not cb:
        return None
    common = [p for p in ca.pipes if p in cb.pipes
              and field in ca.pipes[p] and field in cb.pipes[p]]
    sa = sum(ca.pipes[p][field] for p in common)
    sb = sum(cb.pipes[p][field] for p in common)
    return (len(common), sa, sb, sa / sb if sb else None)


def compile_time_outliers(cols):
    """([(pipeline, fork ms, stock ms, ratio)] of the pipelines the fork
    compiled in more than COMPILE_TIME_LIMIT times stock's time, number
    compared, number left out), or None where the driver reports no
    compile time. Stock is the stock-ra column where there is one (the
    same SPIR-V), else stock. A row is compared where both columns timed
    it in every run with the same figures (Column.timed) and report the
    same register demand; the others are left out and counted. Rows are
    paired by model and NAME#N, the order ggml-vulkan printed pipelines of
    one name in: the demand, measured before allocation, is the same for
    the same SPIR-V in both columns, and tells the pipelines of one name
    apart where they are not the same shader."""
    fork = next((c for c in cols if c.label == "fork"), None)
    stock = next((c for c in cols if c.label == RA_STOCK_LABEL), None) or \
        next((c for c in cols if c.label == "stock"), None)
    if not fork or not stock:
        return None
    both = [p for p in fork.pipes if p in stock.pipes
            and "compile_us" in fork.pipes[p] and "compile_us" in stock.pipes[p]]
    common = [p for p in both if fork.timed(p) and stock.timed(p)
              and fork.pipes[p].get("demand") == stock.pipes[p].get("demand")]
    if not both:
        return None
    out = []
    for p in common:
        f, s = fork.pipes[p]["compile_us"], stock.pipes[p]["compile_us"]
        if f > COMPILE_TIME_LIMIT * max(s, 1):
            out.append((p, f / 1000, s / 1000, f / max(s, 1)))
    return sorted(out, key=lambda o: -o[3]), len(common), len(both) - len(common)


def goal_report(cols):
    """Issue 38's conditions on the fork column, or None without a
    stock-ra column: (pipelines spilling with a demand of at most 64,
    [(pipeline, field, fork, upstream)] where the fork has more spills,
    fills or cycles than upstream on a row both built (None where they
    built no row alike: no upstream column, or its runs failed), the
    fork/stock-ra fills ratio or None, whether it is within FILLS_LIMIT)."""
    by = {c.label: c for c in cols}
    fork, ra = by.get("fork"), by.get(RA_STOCK_LABEL)
    if not fork or not ra:
        return None
    fits = sorted(p for p, s in fork.pipes.items()
                  if (s.get("spills", 0) or s.get("fills", 0))
                  and s.get("demand", REGISTER_FILE + 1) <= REGISTER_FILE)
    up = by.get("upstream")
    common = [p for p in sorted(fork.pipes) if up and p in up.pipes]
    worse = [] if common else None
    for p in common:
        for field in ("spills", "fills", "cycles"):
            f, u = fork.pipes[p].get(field), up.pipes[p].get(field)
            if f is not None and u is not None and f > u:
                worse.append((p, field, f, u))
    r = ratio(cols, "fork", RA_STOCK_LABEL, "fills")
    share = r[3] if r and r[0] else None
    return fits, worse, share, share is not None and share <= FILLS_LIMIT


def timing_note(timed):
    """How the timed columns' compile times were taken, for the verdict
    line: natively, the least of each row's runs; under qemu-user, whose
    first run of a piece of code translates it and charges that to
    whichever compile thread runs it first, only an indication."""
    runs = min(c.runs for c in timed)
    if all(c.native for c in timed):
        return ("natively, least of %d runs each" % runs if runs > 1
                else "natively, one run each")
    return ("under qemu-user, which charges translating code to the first compile that "
            "runs it: an indication, the bound is judged on a native run")


def compile_time_verdict(slow, timed):
    """The compile-time bound's verdict on compile_time_outliers()'s
    result: met only where every row was compared, natively, and none is
    over; not met where one is over; else not judged, and why."""
    over, compared, left_out = slow
    if over:
        return "not met"
    if not all(c.native for c in timed):
        return "not judged (under qemu-user)"
    if left_out or not compared:
        return "not judged (%d of %d rows left out)" % (left_out, compared + left_out)
    return "met"


def print_driver(arch, driver, cols, note):
    labels = [c.label for c in cols]
    print()
    print("bench shaders: %s, %s shim; upstream: %s" % (arch, driver, note))
    print("ggml-vulkan's device line:")
    for c in cols:
        for d in sorted(c.devices) or ["(none printed)"]:
            print("  %-9s %s" % (c.label, d))
    for c in cols:
        for f in c.failed:
            print("  %-9s FAILED: %s" % (c.label, f))
    names = sorted(set().union(*(c.pipes for c in cols)))
    # The same SPIR-V compiles to the same figures, but for its time
    distinct = {c.label: len({tuple(sorted((f, v) for f, v in s.items() if f != "compile_us"))
                              + (k.split(" ", 1)[1].split("#")[0],)
                              for k, s in c.pipes.items()}) for c in cols}
    print("per model and pipeline (in the order ggml-vulkan compiled them; NAME#2 is the "
          "second pipeline of that name in the run): instructions (i), cycle estimate (c), "
          "registers (r), threads (t), spills:fills, register demand before allocation (d, "
          "the fork's Valhall compiler only), backend compile time (ms, thread CPU time, "
          "the fork's Valhall compiler only); code bytes (B) where that is all the driver "
          "reports")
    width = max([len(n) for n in names] + [8])
    print("  %-*s  %s" % (width, "pipeline", "  ".join("%-36s" % l for l in labels)))
    for n in names:
        print("  %-*s  %s" % (width, n, "  ".join("%-36s" % fmt(c.pipes.get(n)) for c in cols)))
    print("totals:")
    print("  %-20s %s" % ("distinct pipelines", " ".join("%12d" % distinct[l] for l in labels)))
    rows = [("model x pipeline", "pipelines", "%d"), ("spilling", "spilling", "%d"),
            ("demand > 64", "over the file", "%d"),
            ("spilling, demand<=64", "spilling, fits", "%d"),
            ("spills", "spills", "%d"), ("fills", "fills", "%d"), ("cycles", "cycles", "%.1f"),
            ("instructions", "instrs", "%d"), ("registers", "regs", "%d"),
            ("code bytes", "code", "%d"), ("compile us", "compile_us", "%d")]
    tot = {c.label: totals(c.pipes) for c in cols}
    for title, key, f in rows:
        vals = [tot[l][key] for l in labels]
        if all(v is None for v in vals):
            continue
        print("  %-20s %s" % (title, " ".join("%12s" % ("-" if v is None else f % v)
                                               for v in vals)))
    # Every run compiles its pipelines anew (the shader cache is off).
    print("  %-20s %s" % ("compiles, first runs", " ".join("%12d" % c.shaderdb for c in cols)))
    if driver == "panfrost":
        # Only the fork's build has the check: upstream's column is blank.
        print("  %-20s %s" % ("RA check rejected", " ".join(
            "%12s" % (c.ra_rejected if c.label != "upstream" else "-") for c in cols)))
    several = [c.label for c in cols if c.runs > 1]
    if several:
        print("  (%s: compile us sums each row's least of %d runs, RA check rejected counts "
              "every run; the other columns ran once)"
              % (" and ".join(several), max(c.runs for c in cols)))
    print("ratios over the rows both sides built (same model, same pipeline name: the same "
          "SPIR-V where the device lines agree):")
    for a, b in (("fork", "stock"), ("fork", RA_STOCK_LABEL), ("fork", "upstream")):
        runs = {c.label: c.runs for c in cols}
        for field in ("cycles", "instrs", "regs", "spills", "fills", "code", "compile_us"):
            # Times are the least of several runs in some columns only
            if field == "compile_us" and runs.get(a) != runs.get(b):
                continue
            r = ratio(cols, a, b, field)
            if r and r[0] and r[3] is not None:
                print("  %s/%s %-10s %.3f (%d pipelines: %g vs %g)"
                      % (a, b, field, r[3], r[0], r[1], r[2]))
    goal = goal_report(cols)
    if goal is not None:
        fits, worse, share, ok = goal
        print("issue 38 (fork column): spilling with a demand of at most %d: %d%s"
              % (REGISTER_FILE, len(fits), "".join("\n  %s" % p for p in fits)))
        if worse is None:
            print("  more spills, fills or cycles than upstream on the same pipeline: not "
                  "compared (no row built by both)")
        else:
            print("  more spills, fills or cycles than upstream on the same pipeline: %d%s"
                  % (len(worse), "".join("\n  %s %s: %g vs %g" % w for w in worse)))
        print("  fills, fork/%s: %s (goal: at most %.2f): %s"
              % (RA_STOCK_LABEL, "-" if share is None else "%.3f" % share, FILLS_LIMIT,
                 "met" if ok else "not met"))
    slow = compile_time_outliers(cols)
    if slow is not None:
        timed = [c for c in cols if c.label in ("fork", RA_STOCK_LABEL)]
        print("compile time, fork vs stock%s per pipeline (thread CPU time, the check "
              "left out; %s): %d of %d over %.0fx%s: %s%s"
              % ("-ra" if any(c.label == RA_STOCK_LABEL for c in cols) else "",
                 timing_note(timed), len(slow[0]), slow[1], COMPILE_TIME_LIMIT,
                 "; %d left out (not timed alike in every run, or another demand)" % slow[2]
                 if slow[2] else "", compile_time_verdict(slow, timed),
                 "".join("\n  %s: %.1f ms vs %.1f ms (%.2fx)" % o for o in slow[0])))
        for c in timed:
            sp = c.spread()
            if sp:
                print("  %s: a row's slowest run / its fastest: median %.2f, largest %.2f"
                      % (c.label, sp[0], sp[1]))
            if c.unstable:
                print("  %s: figures not the same in every run, or not printed in every run: "
                      "%s" % (c.label, ", ".join(sorted(c.unstable))))
            if c.reordered:
                print("  %s: pipelines of one name printed in another order than in the "
                      "first run: %s" % (c.label, ", ".join(sorted(c.reordered))))


def bench_shaders(fork, prefix, arches, models=None, ubatches=None, drivers=("panfrost", "asahi"),
                  runs=None):
    models = models or MODELS
    if runs is not None and not 1 <= runs <= 10:
        die("bench shaders: --runs is 1..10")
    bad = [m for m in models if m not in MODELS]
    if bad:
        die("bench shaders: unknown model %s (known: %s)" % (", ".join(bad), ", ".join(MODELS)))
    ubatches = sorted(set(ubatches or UBATCHES))
    if any(u < 1 or u > 4096 for u in ubatches):
        die("bench shaders: --ubatch sizes are 1..4096")
    make_dirs(os.path.join(fork.work, "tmp"))
    roots = {a: sid_root(fork.for_arch(a)) for a in arches}
    paths = model_files(roots[fork.arch], fork.work, models)
    upstream_cols = {}
    for a in arches:
        f = fork.for_arch(a)
        p = prefix if a == fork.arch else f.default_prefix
        for driver in drivers:
            # Several runs natively only: under qemu-user a run takes ten
            # times as long or more, and its times are only an indication.
            n = runs or (NATIVE_RUNS if roots[a].can_run_natively() else 1)
            cols = columns(f, p, driver, runs=n)
            up, note = upstream_column(f, p, driver, roots, upstream_cols)
            if up:
                cols.append(up)
            run_columns(a, driver, cols, roots[a], {m: paths[m] for m in models}, ubatches)
            print_driver(a, driver, cols, note)
    llama = roots[fork.arch].package_version("llama.cpp-tools")
    ggml = roots[fork.arch].package_version(GGML_VULKAN)
    print()
    print("llama.cpp: Debian sid's llama.cpp-tools %s (%s %s, the SPIR-V), for the fork's "
          "columns natively by the root's own loader where the root is this machine's "
          "architecture, else under qemu-user; "
          "models: %s (random weights, test-llama-archs -s %s, llama-quantize); ubatch %s. "
          "Statistics are the "
          "drivers' own (VK_KHR_pipeline_executable_properties, executable 0), printed by "
          "ggml-vulkan at compile time; cycles are each compiler's estimate, not a "
          "measurement. Nothing executes on a shim."
          % (llama or "?", GGML_VULKAN, ggml or "?", ", ".join(models), SEED,
             ",".join(map(str, ubatches))))
