# SPDX-License-Identifier: MIT
"""Cross builds (config/fork.ini [arch.NAME]): the host's cross compiler and
qemu-user from apt, a sysroot of the target's Debian packages unpacked by
mmdebstrap (the host does not become a multiarch system), and the meson
cross and native files that make Mesa's own exe_wrapper run the target's
unit tests under qemu and take mesa_clc, vtn_bindgen and asahi_clc from
the native build."""

import os
import re
import shutil
import subprocess

from . import apt, distro
from .config import arch_section, cross_native_tools
from .proc import die, make_dirs, mark, rel, remove_tree, run, step, write_if_changed


def arch_conf(fork):
    return fork.conf[arch_section(fork.arch)]


def gcc(fork):
    return "%s-gcc" % arch_conf(fork)["triplet"]


def gcc_major(fork):
    """The major version of the cross compiler (its libstdc++ in the sysroot
    must be the same)."""
    r = subprocess.run([gcc(fork), "-dumpversion"], stdout=subprocess.PIPE, text=True)
    return r.stdout.strip().split(".")[0]


def host_packages(fork, codename):
    """The host's packages for the cross build, as (from the release, from
    its backports): on bookworm qemu comes from backports (10.0; bookworm's
    7.2 qemu-user is dynamically linked and would see the target's
    LD_PRELOAD)."""
    a = arch_conf(fork)
    backports = set(a.get("host_backports", "").split()) if codename == "bookworm" else set()
    pkgs = a["host_packages"].split()
    return [p for p in pkgs if p not in backports], [p for p in pkgs if p in backports]


def is_static(path):
    """Whether the ELF file at path has no program interpreter (PT_INTERP):
    a statically linked qemu-user never sees the target's LD_PRELOAD."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:
                return False
            phoff = int.from_bytes(head[32:40], "little")
            phentsize = int.from_bytes(head[54:56], "little")
            phnum = int.from_bytes(head[56:58], "little")
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    return all(int.from_bytes(table[i * phentsize:i * phentsize + 4], "little") != 3
               for i in range(phnum))


def missing_host_tools(fork, guest=True):
    """The host programs a cross build (and, with guest, the 16 KiB-page
    guest) needs and this machine lacks; a dynamically linked qemu-user
    (bookworm's 7.2) counts as missing."""
    a = arch_conf(fork)
    tools = [gcc(fork), "%s-g++" % a["triplet"], "mmdebstrap"]
    if guest and "guest_qemu" in a:
        tools += [a["guest_qemu"], "cpio"]
    missing = [t for t in tools if not shutil.which(t)]
    qemu = shutil.which(a["qemu"])
    if not qemu or not is_static(qemu):
        missing.append("%s (statically linked)" % a["qemu"])
    return missing


def require_host_tools(fork, guest=True):
    missing = missing_host_tools(fork, guest)
    if missing:
        die("cross build for %s: %s missing; run 'bin/mesa-fork deps --arch %s' (as root) "
            "first" % (fork.arch, ", ".join(missing), fork.arch))


def deps(fork):
    """apt-get install what the host needs to cross-build for fork.arch.
    Only this step needs root."""
    if not missing_host_tools(fork):
        print("deps: the %s cross tools are installed already" % fork.arch)
        return
    osr = distro.os_release()
    if not osr.is_debian:
        die("cross build for %s: install %s (a cross compiler for %s, qemu-user and "
            "mmdebstrap) with your distribution's tools; 'deps' installs them on Debian only"
            % (fork.arch, ", ".join(missing_host_tools(fork)), arch_conf(fork)["triplet"]))
    if os.geteuid() != 0:
        die("cross build for %s needs %s: run 'bin/mesa-fork deps --arch %s' as root once"
            % (fork.arch, ", ".join(missing_host_tools(fork)), fork.arch))
    plain, backports = host_packages(fork, osr.codename)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for pkgs, target in ((plain, []), (backports, ["-t", osr.codename + "-backports"])):
        if pkgs:
            with step("apt-get install %s%s" % (" ".join(target + [""]), " ".join(pkgs))):
                run(["apt-get", "install", "-y", "--no-install-recommends"] + target + pkgs,
                    env=env, quiet=True)
    left = missing_host_tools(fork)
    if left:
        die("cross build for %s: still missing after apt-get: %s" % (fork.arch, ", ".join(left)))


def sysroot_packages(fork):
    return [p.replace("{gcc}", gcc_major(fork))
            for p in arch_conf(fork)["sysroot_packages"].split()]


def _stamp(fork, suite, pkgs, dest):
    return (os.path.join(dest, ".mesa-fork-ready"),
            "%s %s merged-usr\n%s\n" % (suite, fork.arch, "\n".join(sorted(pkgs))))


def root_ready(fork, suite, pkgs, dest):
    """Whether extract_root would keep dest as it is."""
    stamp, want = _stamp(fork, suite, pkgs, dest)
    return os.path.exists(stamp) and open(stamp).read() == want


def extract_root(fork, suite, pkgs, dest, what, apt_options=(), keep_apt=False):
    """Debian packages of fork.arch and their dependencies, unpacked by
    mmdebstrap's extract variant (no maintainer script runs, nothing
    executes, so no binfmt is needed) into dest, from the host's mirror.
    Kept while suite, architecture and packages are the same. The extract
    variant makes no merged-/usr links (trixie and later ship the dynamic
    loader only under /usr/lib), so they are added: qemu-user's -L and the
    guest kernel look for /lib/ld-linux-*.so.1 (/lib64 on amd64) and
    /bin/busybox. With keep_apt, apt's package lists and downloaded .debs
    stay in the root (var/lib/apt/lists, var/cache/apt/archives)."""
    if root_ready(fork, suite, pkgs, dest):
        return
    stamp, want = _stamp(fork, suite, pkgs, dest)
    uri, _ = apt.debian_mirror(distro.os_release().codename)
    tmp = dest + ".new"
    remove_tree(tmp)
    make_dirs(os.path.dirname(tmp))
    # As a user, mmdebstrap's unshare mode would hand the tree to a
    # subordinate uid, which this code could then not finish (links, stamp):
    # not supported yet, and said so.
    if os.geteuid() != 0:
        die("unpacking Debian %s packages for %s (%s) with mmdebstrap needs root here: run "
            "this command with sudo" % (suite, fork.arch, what))
    mode = ["--mode=root"]
    with step("mmdebstrap: %s %s %s into %s (mirror %s)" % (suite, fork.arch, what,
                                                          rel(dest), uri)):
        run(["mmdebstrap", "--variant=extract", "--architectures=" + fork.arch] + mode +
            ["--aptopt=" + o for o in apt_options] +
            (["--skip=cleanup/apt"] if keep_apt else []) +
            ["--include=" + ",".join(pkgs), suite, tmp, uri], quiet=True)
    for d in ("bin", "sbin", "lib", "lib64"):
        if not os.path.lexists(os.path.join(tmp, d)) and \
                os.path.isdir(os.path.join(tmp, "usr", d)):
            os.symlink(os.path.join("usr", d), os.path.join(tmp, d))
    mark(tmp)
    remove_tree(dest)
    os.rename(tmp, dest)
    with open(stamp, "w") as f:
        f.write(want)


def ensure_sysroot(fork):
    """The target's libraries and programs (config sysroot_packages) from
    the host's suite, so that its glibc is the one the cross compiler was
    built for."""
    pkgs = sysroot_packages(fork)
    extract_root(fork, distro.os_release().codename, pkgs, fork.sysroot,
                 "sysroot, %d packages" % len(pkgs))


def cross_file(fork):
    """meson's cross file for fork.arch: the cross compiler (found through
    PATH, where /usr/lib/ccache comes first), pkg-config in the sysroot, and
    qemu-user as exe_wrapper."""
    a = arch_conf(fork)
    t = a["triplet"]
    s = fork.sysroot
    q = lambda x: "'%s'" % x
    lst = lambda xs: "[" + ", ".join(q(x) for x in xs) + "]"
    text = "\n".join([
        "# Written by bin/mesa-fork (cross.py) for %s; do not edit." % fork.arch,
        "[binaries]",
        # --sysroot with the compiler, not in c_args: the build's own -Dc_args
        # (the uAPI header's directory) would replace it.
        "c = %s" % lst([t + "-gcc", "--sysroot=" + s]),
        "cpp = %s" % lst([t + "-g++", "--sysroot=" + s]),
        "ar = %s" % q(t + "-ar"),
        "strip = %s" % q(t + "-strip"),
        "pkg-config = 'pkg-config'",
        # Debian's python3 with python3-mako & co., whatever comes first on
        # PATH (a pyenv or venv one): find_program('python3') of the host
        # machine reads it here, not from the native file.
        "python = '/usr/bin/python3'",
        "python3 = '/usr/bin/python3'",
        "exe_wrapper = %s" % lst(fork.exe_wrapper),
        "",
        "[properties]",
        "sys_root = %s" % q(s),
        "pkg_config_libdir = %s" % lst([os.path.join(s, "usr", "lib", t, "pkgconfig"),
                                         os.path.join(s, "usr", "share", "pkgconfig")]),
        "",
        "[host_machine]",
        "system = 'linux'",
        "cpu_family = %s" % q(a["cpu_family"]),
        "cpu = %s" % q(a["cpu_family"]),
        "endian = 'little'",
        ""])
    path = os.path.join(os.path.dirname(fork.build), "cross-%s.ini" % fork.arch)
    make_dirs(os.path.dirname(path))
    write_if_changed(path, text)
    return path


def native_tools(fork):
    """{program: path} of the native build's tools the cross build runs."""
    host = fork.for_arch(fork.host_arch)
    return {name: os.path.join(host.build, path)
            for name, path in cross_native_tools(fork.conf).items()}


def native_file_entries(fork):
    return ["%s = '%s'" % kv for kv in sorted(native_tools(fork).items())]


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def is_target_elf(fork, path):
    """Whether path is an ELF executable of fork.arch (else a script or a
    host program)."""
    machine = {"aarch64": 183}.get(arch_conf(fork)["cpu_family"])
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == machine


def wrap(fork, cmd, prefix=None):
    """cmd as it runs on this machine: a program of the target architecture
    under qemu-user. A bare name is looked up in prefix/bin, then in the
    sysroot's /usr/bin (vulkaninfo)."""
    if not fork.cross or not cmd:
        return list(cmd)
    exe = cmd[0]
    if os.sep not in exe:
        dirs = ([os.path.join(prefix, "bin")] if prefix else []) + [
            os.path.join(fork.sysroot, "usr", "bin")]
        for d in dirs:
            if os.path.exists(os.path.join(d, exe)):
                exe = os.path.join(d, exe)
                break
        else:
            die("no %s program %s in %s" % (fork.arch, exe, ", ".join(dirs)))
    elif os.path.isabs(exe) and is_target_elf(fork, os.path.join(fork.sysroot, exe[1:])):
        # As qemu -L sees it: the sysroot's /usr/bin/vulkaninfo.
        exe = os.path.join(fork.sysroot, exe[1:])
    if is_target_elf(fork, exe):
        return fork.exe_wrapper + [exe] + list(cmd[1:])
    if is_elf(exe):
        # A host program would load the host's Vulkan loader, never the
        # target's drivers: refuse rather than measure another driver.
        die("%s is a program of this machine, not of %s: the %s build's drivers load only "
            "in %s programs (run under %s)" % (exe, fork.arch, fork.arch, fork.arch,
                                                " ".join(fork.exe_wrapper)))
    return [exe] + list(cmd[1:])


def describe(fork):
    """One line for output: what runs the target's programs."""
    if not fork.cross:
        return "%s, native" % fork.arch
    r = subprocess.run([arch_conf(fork)["qemu"], "--version"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"version (\S+)", r.stdout)
    return "%s under qemu-user %s, sysroot %s" % (fork.arch, m.group(1) if m else "?",
                                                  rel(fork.sysroot))
