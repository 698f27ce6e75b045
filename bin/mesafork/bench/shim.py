# SPDX-License-Identifier: MIT
"""The bottom of `mesa-fork bench`: how a driver runs on its drm-shim, for
every measurement above it. The fork's build in a prefix (its ICD, its
shim preloaded, config/fork.ini's [shim] settings), in the llama.cpp
chroot (Debian sid, mmdebstrap) or on the host; sid's Mesa in its root
(upstream.SidRoot); the models several measurements load; and what they
print alike. Imports nothing of bench/."""

import contextlib
import os
import re
import shutil

from .. import chroot, upstream
from ..apt import debian_mirror, os_codename
from ..config import host_arch, multiarch
from ..install import fork_env, icd_json, layer_dir, shim_env_pairs, shim_lib
from ..proc import die, make_dirs, step

# What the chroot holds. vulkan-validationlayers is sid's Khronos layer, for
# `bench sync` (synchronization validation of llama.cpp).
SID_PACKAGES = ["llama.cpp-tools", "llama.cpp-tests", "libggml0-backend-vulkan",
                "python3-gguf", "libdrm2", "libexpat1", "libzstd1", "libvulkan1",
                "vulkan-validationlayers"]

# The shims `bench sync` and `bench ops` run llama.cpp on, each in turn.
DRIVERS = ("asahi", "panfrost", "intel")

# llama.cpp's line of how many layers a load put on the GPU (`bench memory`
# and `bench macs` read it).
OFFLOADED_RE = re.compile(r"load_tensors: offloaded (\d+)/(\d+) layers to GPU")


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


def sid_chroot(work):
    """The llama.cpp chroot of this machine's build (not made yet: ensure)."""
    return Chroot(work, os_codename())


def llama_root(fork):
    """Where llama.cpp runs for fork.arch: the sid chroot natively, a
    qemu-user root for a cross build."""
    return upstream.SidRoot(fork) if fork.cross else sid_chroot(fork.work)


def sid_root(fork, chroot=None):
    """The root with sid's Mesa for fork.arch: chroot itself when llama.cpp
    already runs in one (a cross build's), else one made for it."""
    if isinstance(chroot, upstream.SidRoot):
        return chroot
    sid = upstream.SidRoot(fork)
    sid.ensure()
    return sid


def optional_sid_root(fork):
    """(sid_root(fork), None), or (None, why) where sid's Mesa cannot be had
    for a reason of the run's own nature (upstream.Unavailable): a column
    that only compares with it is left out, and the reason printed."""
    try:
        return sid_root(fork), None
    except upstream.Unavailable as e:
        return None, e.reason


def fork_installed(prefix, driver):
    """Whether the fork's build in prefix has driver's ICD."""
    return os.path.exists(icd_json(prefix, driver))


@contextlib.contextmanager
def llama_chroot(work):
    """The cached sid chroot with llama.cpp, mounted, and the random qwen3
    model in it: (chroot, model path)."""
    chroot = sid_chroot(work)
    chroot.ensure()
    make_dirs(os.path.join(work, "tmp"))
    with chroot.mounted():
        tiny, _ = ensure_models(chroot, work)
        yield chroot, tiny


def chroot_shim_env(prefix, conf, driver, **extra):
    """The environment (inside the chroot, which starts from an empty one)
    that runs a program on the fork's `driver` over its drm-shim."""
    env = {"VK_DRIVER_FILES": icd_json(prefix, driver),
           "LD_PRELOAD": shim_lib(prefix, conf, driver)}
    env.update(shim_env_pairs(conf, driver))
    env.update(extra)
    return env


def host_env(prefix, conf, driver, **extra):
    """This process's environment with the fork's ICDs in prefix and
    `driver`'s drm-shim preloaded, and extra: one of our programs runs on
    the host (a cross build's under qemu-user) with it."""
    env = fork_env(prefix, conf, shim=driver)
    env.update(extra)
    return env


def shim_settings(conf, driver):
    """What config/fork.ini [shim] sets for driver's drm-shim (the device it
    models), as the tables' headings print it."""
    return shim_env_pairs(conf, driver)


def synctrace_env(prefix, khronos=False):
    """Our VK_LAYER_MESAFORK_synctrace from prefix, with khronos above the
    chroot's Khronos validation layer."""
    if khronos:
        return {"VK_INSTANCE_LAYERS": "VK_LAYER_MESAFORK_synctrace:VK_LAYER_KHRONOS_validation",
                "VK_LAYER_PATH": "/usr/share/vulkan/explicit_layer.d:" + layer_dir(prefix)}
    return {"VK_INSTANCE_LAYERS": "VK_LAYER_MESAFORK_synctrace",
            "VK_LAYER_PATH": layer_dir(prefix)}


QWEN2_MODEL = "qwen2-3b-shapes-q4_0.gguf"


def qwen2_script(work):
    """make_qwen2_model.py (next to this module), copied to .work/tmp where
    the chroot and sid's root see it: its path."""
    script = os.path.join(work, "tmp", "make_qwen2_model.py")
    make_dirs(os.path.dirname(script))
    shutil.copyfile(os.path.join(os.path.dirname(__file__), "make_qwen2_model.py"), script)
    return script


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
        script = qwen2_script(work)
        f16 = os.path.join(models, "qwen2-3b-shapes-f16.gguf")
        with step("write a random qwen2 with Qwen2.5-3B shapes (python3-gguf), F16"):
            chroot.run_in(["python3", script, tiny, f16, "20"], quiet=True)
        with step("llama-quantize to Q4_0"):
            chroot.run_in(["llama-quantize", f16, q4, "Q4_0"], quiet=True)
        os.unlink(f16)
    return tiny, q4


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
