# SPDX-License-Identifier: MIT
"""`mesa-fork bench ops`: llama.cpp's test-backend-ops on each shim, stock
vs fork, the Khronos validation layer on where ggml runs under it. Not a
test: it prints what ran, what the driver does not support and what the
layer said."""

import re

from ..backendops import BACKEND_OPS, backend_ops_counts
from ..config import stock_knobs
from ..proc import step
from .shim import DRIVERS, chroot_shim_env, sid_chroot


def bench_ops(work, prefix, conf, ops=BACKEND_OPS):
    """llama.cpp's test-backend-ops on each shim, stock and fork: every
    case is recorded and submitted once; a shim executes nothing, so the
    comparison with the CPU backend fails and is ignored. What counts is
    that nothing crashes, the validation layer stays silent, and how many
    cases and ops the driver takes."""
    chroot = sid_chroot(work)
    chroot.ensure()
    exe = chroot.libexec("llama.cpp-tests/test-backend-ops")
    rows = []
    with chroot.mounted():
        for drv in DRIVERS:
            # ggml crashes under the layer on panvk (see `bench sync`).
            layer = drv != "panfrost"
            for label, knobs in (("stock", stock_knobs(conf, drv)), ("fork", {})):
                env = chroot_shim_env(prefix, conf, drv, **knobs)
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
