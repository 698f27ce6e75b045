# SPDX-License-Identifier: MIT
"""`mesa-fork bench memory`: what llama.cpp learns of device memory on each
shim, stock vs fork (and sid's Mesa where it builds the driver), in one
run. Debian sid's llama.cpp, run under qemu-user with sid's root as its
library prefix (upstream.SidRoot, through bench.shim), asks the driver through
ggml_backend_vk_get_device_memory(): the heap's size as total, and as free
the budget minus the usage with VK_EXT_memory_budget, the whole heap
without it. Not a test: it prints figures."""

import math
import os
import re
import select
import subprocess
import sys

from ..config import stock_knobs
from ..proc import die, make_dirs, step
from .shim import OFFLOADED_RE, chroot_shim_env, ensure_models, sid_root

LIST_RE = re.compile(r"Vulkan0: (.*) \((\d+) MiB, (\d+) MiB free\)")
# common_memory_breakdown_print: | - Vulkan0 (NAME) | total = free + (self = model +
# context + compute) + unaccounted |
BREAKDOWN_RE = re.compile(r"- Vulkan0 \(.*\)\s*\|\s*(\d+) =\s*(\d+) \+ \(\s*(\d+) =\s*(\d+) \+"
                          r"\s*(\d+) \+\s*(\d+)\) \+\s*(-?\d+) \|")

# Another process's memory: anonymous pages, each touched, so that they are
# committed (the shims' BOs, by contrast, commit nothing until written).
HOLDER = ("import sys\n"
          "b = bytearray(int(float(sys.argv[1]) * (1 << 30)))\n"
          "for i in range(0, len(b), 4096):\n"
          "    b[i] = 1\n"
          "print('held', flush=True)\n"
          "sys.stdin.read()\n")
# The largest hold the bench makes; a machine with more available memory
# than the heap by more than this shows no held row. And what it always
# leaves available to the rest of the machine.
MAX_HOLD_GIB = 8
FLOOR_MIB = 2048
# What --fit is left beside what llama.cpp projects for the tiny model on
# the GPU (its compute buffer alone is about 350 MiB at this context).
FIT_ROOM_MIB = 100
# A context large enough to show in the breakdown, kept by --fit (-fitc).
CTX = 262144


def mem_available_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    die("bench memory: no MemAvailable in /proc/meminfo")


class Holder:
    """A process holding gib GiB of touched memory while the block runs."""

    def __init__(self, gib):
        self.gib = gib

    def __enter__(self):
        before = mem_available_mib()
        self.p = subprocess.Popen([sys.executable, "-c", HOLDER, str(self.gib)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.p.stdout], [], [], 120)
        if not ready or self.p.stdout.readline().strip() != "held":
            self.p.kill()
            self.p.wait()
            die("bench memory: the process meant to hold %g GiB did not get there in 2 "
                "minutes" % self.gib)
        # Swap or reclaim may absorb a hold: then the row would claim what
        # did not happen.
        self.dropped = before - mem_available_mib()
        if self.dropped < self.gib * 1024 // 2:
            self.__exit__()
            die("bench memory: holding %g GiB lowered MemAvailable by only %d MiB (swap?); "
                "the held rows would mean nothing" % (self.gib, self.dropped))
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait()


class Column:
    """One driver build on one shim: stock (the fork's build with [stock]'s
    knobs), fork, or upstream (sid's)."""

    def __init__(self, label, runner, env):
        self.label, self.runner, self.env = label, runner, env

    def _run(self, args, timeout=900):
        r = self.runner.run_in(args, env=self.env, capture=True, timeout=timeout)
        if r.returncode != 0:
            die("bench memory: %s: %s failed (exit %d):\n%s"
                % (self.label, args[0], r.returncode, r.stderr[-3000:]))
        return r.stdout + r.stderr

    def list_devices(self):
        """(total, free) in MiB from llama-cli --list-devices."""
        out = self._run(["llama-cli", "--list-devices"])
        m = LIST_RE.search(out)
        if not m:
            die("bench memory: %s: --list-devices listed no Vulkan0:\n%s"
                % (self.label, out[-2000:]))
        return int(m.group(2)), int(m.group(3))

    def completion(self, model, extra=()):
        """llama-completion on the tiny model: the memory breakdown it prints
        at exit (total, free, self, model, context, compute, unaccounted)
        and the layers the last load offloaded (n, of)."""
        out = self._run(["llama-completion", "-m", model, "-p", "hi", "-n", "1", "-no-cnv",
                         "--no-warmup", "-c", str(CTX), "-fitc", str(CTX), "-v"] + list(extra))
        # --fit's dry run (no allocation) prints a breakdown first: the
        # last one and the last load are the real ones.
        breakdowns = BREAKDOWN_RE.findall(out)
        loads = OFFLOADED_RE.findall(out)
        if not breakdowns or not loads:
            die("bench memory: %s: llama-completion printed no memory breakdown or load:\n%s"
                % (self.label, out[-2000:]))
        return tuple(int(x) for x in breakdowns[-1]), tuple(int(x) for x in loads[-1])


def columns(fork, prefix, driver, sid):
    """The columns for driver on fork.arch, and what upstream ran (or why not).
    sid is fork.arch's root of sid's packages, made (ensure) once per run."""
    conf = fork.conf
    # As the upstream column runs (upstream.SidRoot.shim_env): no shader
    # cache shared with other runs.
    run = lambda **knobs: chroot_shim_env(prefix, conf, driver,
                                          MESA_SHADER_CACHE_DISABLE="true", **knobs)
    cols = [Column("stock", sid, run(**stock_knobs(conf, driver))), Column("fork", sid, run())]
    if driver == "panfrost" and fork.arch not in conf["upstream"]["panvk_arches"].split():
        note = "sid builds no panvk for %s" % fork.arch
    else:
        cols.append(Column("upstream", sid, sid.shim_env(prefix, conf, driver)))
        note = sid.describe()
    return cols, note


def hold_for(heap_mib):
    """GiB another process must hold for the fork's free (budget - usage,
    and budget = usage + 9/10 of MemAvailable, at most the heap) to fall
    below the heap: 1 GiB more than MemAvailable exceeds 10/9 of the heap.
    None when that would leave less than FLOOR_MIB available or take more
    than MAX_HOLD_GIB."""
    avail = mem_available_mib()
    gib = max(1, math.ceil((avail - heap_mib * 10 / 9) / 1024) + 1)
    if gib > MAX_HOLD_GIB or avail - gib * 1024 < FLOOR_MIB:
        return None, gib
    return gib, gib


def shim_rows(fork, prefix, driver, model, sid):
    cols, note = columns(fork, prefix, driver, sid)
    rows = []
    with step("%s, %s shim: llama.cpp --list-devices, idle" % (fork.arch, driver)):
        avail = mem_available_mib()
        idle = {c.label: c.list_devices() for c in cols}
    rows.append(("total MiB (the heap)", {k: v[0] for k, v in idle.items()}))
    rows.append(("free MiB, idle (MemAvailable %d MiB)" % avail,
                 {k: v[1] for k, v in idle.items()}))
    with step("%s, %s shim: llama-completion, context %d, memory breakdown at exit"
              % (fork.arch, driver, CTX)):
        runs = {c.label: c.completion(model) for c in cols}
    rows.append(("llama.cpp's breakdown at exit: free MiB", {k: v[0][1] for k, v in runs.items()}))
    rows.append(("  self MiB (model + context + compute)", {k: v[0][2] for k, v in runs.items()}))
    rows.append(("  total - free - self MiB (not in llama.cpp's accounts)",
                 {k: v[0][6] for k, v in runs.items()}))
    layers = lambda fit: {k: "%d/%d" % v[1] for k, v in fit.items()}
    # Room for less than the model beside what stock reports: a model
    # between the two heaps, in miniature.
    margin = max(1, idle["stock"][1] - FIT_ROOM_MIB)
    with step("%s, %s shim: --fit, target margin %d MiB" % (fork.arch, driver, margin)):
        fit = {c.label: c.completion(model, ["-fit", "on", "-fitt", str(margin)])
               for c in cols}
    rows.append(("--fit, margin %d MiB (stock's free less %d): layers on the GPU"
                 % (margin, FIT_ROOM_MIB), layers(fit)))
    gib, wanted = hold_for(idle["fork"][0])
    if gib is None:
        rows.append(("held rows not shown: another process would have to hold %d GiB "
                     "(at most %d, leaving %d MiB)" % (wanted, MAX_HOLD_GIB, FLOOR_MIB), {}))
        return rows, note
    with step("%s, %s shim: --list-devices and --fit while another process holds %d GiB"
              % (fork.arch, driver, gib)):
        with Holder(gib):
            avail = mem_available_mib()
            held = {c.label: c.list_devices() for c in cols}
            # Room for less than the model beside what the fork reports now.
            margin = held["fork"][1] - FIT_ROOM_MIB
            fit = {c.label: c.completion(model, ["-fit", "on", "-fitt", str(margin)])
                   for c in cols} if margin > 0 else None
    rows.append(("free MiB, another process holds %d GiB (MemAvailable %d MiB)"
                 % (gib, avail), {k: v[1] for k, v in held.items()}))
    if fit:
        rows.append(("--fit, margin %d MiB (the fork's free less %d): layers on the GPU"
                     % (margin, FIT_ROOM_MIB), layers(fit)))
    return rows, note


def print_table(title, rows, labels):
    print(title)
    width = max(len(r[0]) for r in rows) + 2
    print("  %-*s %s" % (width, "", " ".join("%10s" % l for l in labels)))
    for name, vals in rows:
        print("  %-*s %s" % (width, name, " ".join("%10s" % vals.get(l, "") for l in labels)))


def bench_memory(fork, prefix, arches):
    """Each architecture's build on the asahi and panthor shims."""
    make_dirs(os.path.join(fork.work, "tmp"))
    # One root per architecture, made (or checked against sid's index)
    # once: both shims' tables then run the same sid Mesa.
    roots = {a: sid_root(fork.for_arch(a)) for a in arches}
    model, _ = ensure_models(roots[fork.arch], fork.work, q4=False)
    llama = None
    for a in arches:
        f = fork.for_arch(a)
        p = prefix if a == fork.arch else f.default_prefix
        sid = roots[a]
        for driver in ("asahi", "panfrost"):
            rows, note = shim_rows(f, p, driver, model, sid)
            llama = llama or sid.package_version("llama.cpp-tools")
            print()
            print_table("bench memory: %s, %s shim; upstream: %s" % (a, driver, note), rows,
                        ["stock", "fork", "upstream"])
    print()
    print("llama.cpp: Debian sid's llama.cpp-tools %s under qemu-user, the tiny random "
          "qwen3 (%d KiB; llama.cpp counts its 2 blocks and the output as 3 layers); free is what ggml's Vulkan backend reports "
          "(budget - usage with VK_EXT_memory_budget, else the heap). Nothing executes on "
          "a GPU; on a Mac or an RK3588 run 'bin/mesa-fork report'."
          % (llama or "?", os.path.getsize(model) // 1024))
