# SPDX-License-Identifier: MIT
"""`mesa-fork bench`: which measurement to run (each in its own module of
this package: hk, panvk, sync, ops, anv, memory, macs, shaders), each stock
vs fork side by side in one run, with the upstream column where there is
one. Not a test."""

import os

from ..config import parse_arches
from ..install import icd_json
from ..proc import die
from .anv import bench_anv
from .hk import bench_hk
from .macs import bench_macs
from .memory import bench_memory
from .ops import bench_ops
from .panvk import bench_panvk, bench_panvk_llama
from .shaders import bench_shaders
from .sync import bench_sync


def bench_verb(fork, driver, prefix=None, tokens=(8, 24), no_llama=False, ops=None,
               arch=None, ubatch=None, fa=None, models=None, runs=None):
    """Side-by-side stock vs fork measurements in one run (not part of the tests)."""
    if not 0 < tokens[0] < tokens[1] <= 4096:
        die("bench: --tokens A B: two decode lengths with 0 < A < B <= 4096 (per-token "
            "counts are the difference of the two runs), not %d %d" % tuple(tokens))
    # This machine's build always runs: it is the reference the other
    # architectures' figures are printed next to.
    arches = parse_arches(fork, "%s,%s" % (fork.arch, arch) if arch else None)
    if len(arches) > 1 and driver not in ("hk", "panvk", "memory", "macs", "shaders"):
        die("bench %s: --arch is for hk, panvk, memory, macs and shaders" % driver)
    if models and driver != "shaders":
        die("bench %s: --models is for shaders" % driver)
    if runs is not None and driver != "shaders":
        die("bench %s: --runs is for shaders" % driver)
    for a in arches[1:]:
        other = fork.for_arch(a)
        if not os.path.exists(icd_json(other.default_prefix, "asahi")):
            die("bench: nothing installed in %s; run 'bin/mesa-fork install --arch %s'"
                % (other.default_prefix, a))
    prefix = fork.prefix(prefix)
    if not os.path.exists(icd_json(prefix, "asahi")):
        die("bench: nothing installed in %s; run 'bin/mesa-fork install'" % prefix)
    if driver == "sync":
        bench_sync(fork.work, prefix, fork.conf)
    elif driver == "ops":
        bench_ops(fork.work, prefix, fork.conf, **({"ops": ops} if ops else {}))
    elif driver == "anv":
        bench_anv(fork.work, prefix, fork.conf)
    elif driver == "memory":
        bench_memory(fork, prefix, arches)
    elif driver == "macs":
        bench_macs(fork, prefix, arches)
    elif driver == "shaders":
        bench_shaders(fork, prefix, arches, models=models, ubatches=ubatch, runs=runs)
    elif driver == "hk":
        bench_hk(fork, prefix, tokens=tuple(tokens), arches=arches)
    else:
        bench_panvk(fork, prefix, arches=arches)
        if not no_llama:
            print()
            bench_panvk_llama(fork, prefix, arches=arches,
                              **({"ubatches": ubatch} if ubatch else {}),
                              **({"fas": tuple(fa)} if fa else {}))
