# SPDX-License-Identifier: MIT
"""`mesa-fork bench macs`: what llama.cpp loads on an 8 GB and a 16 GB Mac
while other processes hold memory, stock vs fork vs Debian sid's Mesa, in
one run. The asahi shim models the Mac (patch 0053: the RAM and what is
available to the process when it starts) and pins an object's pages at its
first bind as drm/asahi does (patch 0054), so a bind the machine cannot
back fails with ENOMEM; the memory llama.cpp fills on the CPU is taken
from what is available too (DRM_SHIM_MEM_ANON=count). Each cell is one llama-completion run of Debian
sid's llama.cpp under qemu-user: with its defaults (--fit on: it places
layers by the free memory the driver reports) and with every layer forced
onto the GPU (-fit off -ngl 99, as older llama.cpp and most guides do).
ggml's own block size; no workaround variables. Not a test: it prints
what happened, and the driver's message when a run failed."""

import os
import re
import signal

from ..config import stock_knobs
from ..proc import make_dirs, step
from .shim import OFFLOADED_RE, chroot_shim_env, ensure_models, qwen2_script, sid_root

MiB = 1 << 20
GiB = 1 << 30
# What the kernel of a Mac with N GB reports as MemTotal is a little less
# (firmware carve-outs); the same figure as tests/test_hk_memory.py.
CARVE_OUT = 300 * MiB
# (RAM in GB, the model's layers, the GiB available to llama.cpp when it
# starts). The model is a random qwen2 with Qwen2.5-3B's shapes in F16,
# about 147 MiB a layer: 20 layers take three of ggml's 1 GiB blocks on an
# 8 GB Mac, 58 layers nine on a 16 GB one (llama.cpp #29270's machine
# reported 10 GB free). The availabilities run from an idle machine down
# to one where the weights alone do not fit; 3.1 GiB on the 8 GB Mac is
# just above what the 20 layers, their KV cache and the compute buffer
# pin, where only the command buffers' memory is left to find.
MACS = ((8, 20, (6.0, 4.5, 3.5, 3.1, 2.5)),
        (16, 58, (13.0, 10.0, 9.0, 8.0, 6.0)))
MODES = (("default (--fit on)", []), ("all layers (-fit off -ngl 99)", ["-fit", "off", "-ngl", "99"]))
COLUMNS = ("stock", "fork", "upstream")
MESA_ERROR_RE = re.compile(r"^MESA: error: (.*)$", re.M)
THROWN_RE = re.compile(r"what\(\):\s*(.*)$", re.M)


def mac_env(ram_gb, available_gib):
    """The Mac: its RAM, what is available when llama.cpp starts, and that
    llama.cpp's own buffers (the layers it keeps on the CPU when the GPU
    cannot have them) are taken from it as the GPU's pinned pages are."""
    return {"DRM_SHIM_RAM": str(ram_gb * GiB - CARVE_OUT),
            "DRM_SHIM_MEM_AVAILABLE": str(int(available_gib * GiB)),
            "DRM_SHIM_MEM_ANON": "count"}


def ensure_model(root, work, layers):
    """The random qwen2 of `layers` F16 blocks in .work/models, written once
    (every block holds the same weights: the runs only load and decode it)."""
    tiny, _ = ensure_models(root, work, q4=False)
    path = os.path.join(work, "models", "qwen2-3b-shapes-f16-%d.gguf" % layers)
    if not os.path.exists(path):
        script = qwen2_script(work)
        with step("write a random qwen2 with Qwen2.5-3B shapes, %d layers, F16" % layers):
            root.run_in(["python3", script, tiny, path + ".part", str(layers), "repeat"],
                        quiet=True)
        os.rename(path + ".part", path)
    return path


class Outcome:
    """One llama-completion run: how it ended, where, and what the driver
    or ggml said."""

    def __init__(self, returncode, out):
        self.rc = returncode
        loads = OFFLOADED_RE.findall(out)
        # --fit's dry runs print loads too; the last one is the real load.
        self.layers = "%s/%s" % loads[-1] if loads else "?"
        self.decoding = re.search(r"\bI generate: n_ctx", out) is not None
        mesa = MESA_ERROR_RE.findall(out)
        thrown = THROWN_RE.findall(out)
        self.message = (mesa[0] if mesa else thrown[0] if thrown else None)
        if self.rc == 0:
            self.cell = self.layers
            self.where = None
        else:
            if "failed to load model" in out:
                self.where = "load"
            elif not self.decoding:
                self.where = "context"
            else:
                self.where = "decode"
            if self.rc < 0:
                self.cell = "%s %s" % (self.where, signal.Signals(-self.rc).name)
            else:
                self.cell = "%s failed" % self.where
        # A run that decoded after the driver refused or failed an
        # allocation (ggml tried another memory type, or llama.cpp another
        # placement) is marked: the message is still worth reading.
        if self.rc == 0 and self.message:
            self.cell += " *"


def run_cell(root, env, model, extra):
    r = root.run_in(["llama-completion", "-m", model, "-p", "hi", "-n", "1", "-no-cnv",
                     "--no-warmup", "-v"] + extra, env=env, capture=True, timeout=1800)
    return Outcome(r.returncode, r.stdout + r.stderr)


def envs(fork, prefix, sid, mac):
    conf = fork.conf
    run = lambda **knobs: chroot_shim_env(prefix, conf, "asahi",
                                          MESA_SHADER_CACHE_DISABLE="true",
                                          **dict(mac, **knobs))
    return {"stock": run(**stock_knobs(conf, "asahi")), "fork": run(),
            "upstream": sid.shim_env(prefix, conf, "asahi", **mac)}


def mac_table(fork, prefix, sid, ram_gb, layers, availables, crashes):
    """The rows of one Mac, the first message of each column and way of
    ending, and each column's crashes counted into `crashes`."""
    model = ensure_model(sid, fork.work, layers)
    rows, notes = [], {}
    for avail in availables:
        mac = mac_env(ram_gb, avail)
        e = envs(fork, prefix, sid, mac)
        cells = []
        with step("%s: %d GB Mac, %g GiB available, %d-layer model"
                  % (fork.arch, ram_gb, avail, layers)):
            for _, extra in MODES:
                for c in COLUMNS:
                    o = run_cell(sid, e[c], model, extra)
                    cells.append(o.cell)
                    crashes[c] = crashes.get(c, 0) + (o.rc < 0)
                    if o.message:
                        notes.setdefault((c, o.cell.split()[0] if o.rc else "decoded"),
                                         (avail, o.message))
        rows.append(("%g GiB" % avail, cells))
    return model, rows, notes


def print_mac(arch, ram_gb, model, rows, notes):
    size = os.path.getsize(model)
    print("bench macs: %s, %d GB Mac (MemTotal %d MiB), %s (%.2f GiB of weights)"
          % (arch, ram_gb, (ram_gb * GiB - CARVE_OUT) // MiB, os.path.basename(model),
             size / GiB))
    print("  %-10s %s" % ("", "   ".join("%-47s" % m for m, _ in MODES)))
    print("  %-10s %s" % ("available", "   ".join(
        " ".join("%-15s" % c for c in COLUMNS) + "  " for _ in MODES)))
    for name, cells in rows:
        half = len(COLUMNS)
        print("  %-10s %s   %s" % (name, " ".join("%-15s" % c for c in cells[:half]),
                                   " ".join("%-15s" % c for c in cells[half:])))
    for (col, what), (avail, msg) in sorted(notes.items()):
        print("  %s, %s (first at %g GiB): %s" % (col, what, avail, msg[:200]))


def bench_macs(fork, prefix, arches):
    make_dirs(os.path.join(fork.work, "tmp"))
    crashes = {}
    for a in arches:
        f = fork.for_arch(a)
        p = prefix if a == fork.arch else f.default_prefix
        sid = sid_root(f)
        for ram_gb, layers, availables in MACS:
            model, rows, notes = mac_table(f, p, sid, ram_gb, layers, availables, crashes)
            print()
            print_mac(a, ram_gb, model, rows, notes)
    print()
    print("runs that crashed (a signal): %s" % ", ".join("%s %d" % (c, crashes.get(c, 0))
                                                      for c in COLUMNS))
    print("Each cell: the layers on the GPU of a run that decoded a token, or where it "
          "failed (load: a weight block; context: the KV cache or compute buffer; decode: "
          "after loading, while recording or submitting work) and how (failed: llama.cpp "
          "reported the error and exited; SIGABRT, SIGSEGV: it crashed). '*': it decoded "
          "after the driver refused or failed an allocation (ggml fell back). stock: the "
          "fork's build with [stock]'s knobs (HK_MEMORY_LIMITS=0 among them), which keeps "
          "what has no knob: the errno in the message and patch 0058, so a BO the kernel "
          "cannot give fails a call instead of crashing in the driver; upstream: %s, on "
          "the same shim. What llama.cpp fills on the CPU counts against what is available "
          "(DRM_SHIM_MEM_ANON=count). Nothing executes on a GPU: on a Mac run "
          "'bin/mesa-fork report'." % sid.describe())
