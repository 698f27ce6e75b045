# SPDX-License-Identifier: MIT
"""A 16 KiB-page arm64 guest for the arm64 build's tests.

Asahi Linux kernels run with 16 KiB pages; qemu-user cannot give a program
another page size than the host's (its -p option is deprecated and ignored:
"cannot change host page size"), so the page-size question is answered
with a real arm64 kernel built for 16 KiB pages: Debian's
linux-image-arm64-16k (config [arch.arm64] guest_kernel), booted by
qemu-system-aarch64 under TCG with an initramfs that holds the guest's
libraries, the installed arm64 prefix at its own path, and a script of
commands. Each command's stdout and the files it names come back on the
serial console between markers. Nothing is installed on the host beyond
qemu-system-arm and cpio; the kernel and the root are unpacked by mmdebstrap.
"""

import base64
import gzip
import os
import re
import shlex
import shutil
import subprocess
import tempfile

from . import cross, distro
from .config import arch_section
from .proc import die, rel

BEGIN = "MFGUEST-BEGIN"
END = "MFGUEST-END"


def conf(fork):
    return fork.conf[arch_section(fork.arch)]


def guest_dir(fork):
    return os.path.join(fork.work, "guest", "%s-%s" % (fork.arch, conf(fork)["guest_flavour"]))


def ensure(fork):
    """The guest's kernel and root, unpacked once into .work/guest/."""
    c = conf(fork)
    cross.require_host_tools(fork)
    d = guest_dir(fork)
    cross.extract_root(fork, c["guest_kernel_suite"], [c["guest_kernel"]],
                       os.path.join(d, "kernel"), "16 KiB-page kernel")
    cross.extract_root(fork, distro.os_release().codename, c["guest_packages"].split(),
                       os.path.join(d, "root"), "guest root")


def kernel_image(fork):
    imgs = [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(guest_dir(fork), "kernel",
                                                                    "boot"))
            for f in fs if f.startswith("vmlinuz-")]
    if len(imgs) != 1:
        die("expected one kernel in %s, found %d; run 'bin/mesa-fork install --arch %s'"
            % (rel(guest_dir(fork)), len(imgs), fork.arch))
    return imgs[0]


def init_script(commands):
    """The guest's /init: mount what the drivers need, run each command with
    its environment, print its stdout, exit status and output files between
    markers (files base64 and gzip, the console mangles nothing then), power
    off."""
    bb = "/bin/busybox"
    lines = ["#!%s sh" % bb,
             "%s mount -t proc proc /proc" % bb,
             "%s mount -t sysfs sys /sys" % bb,
             "%s mount -t devtmpfs dev /dev" % bb,
             # No tmpfs on /tmp: the initramfs is already writable memory,
             # and the prefix may live under /tmp (a CI clone there).
             "export PATH=/usr/bin:/bin",
             "echo %s page-size $(%s grep -m1 KernelPageSize /proc/self/smaps)" % (BEGIN, bb)]
    for i, (env, argv, files) in enumerate(commands):
        envs = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(env.items()))
        lines.append("echo %s %d" % (BEGIN, i))
        # The shims append to their logs: each command starts without them.
        lines += ["%s rm -f %s" % (bb, shlex.quote(path)) for path in files]
        lines.append("%s env -i PATH=/usr/bin:/bin %s %s > /tmp/out 2>/tmp/err; rc=$?"
                     % (bb, envs, " ".join(shlex.quote(a) for a in argv)))
        lines.append("%s gzip -c /tmp/out | %s base64 -w 0; echo" % (bb, bb))
        lines.append("echo rc=$rc")
        lines.append("%s tail -c 2000 /tmp/err | %s gzip -c | %s base64 -w 0; echo" % (bb, bb, bb))
        for path in files:
            lines.append("if [ -e %s ]; then %s gzip -c %s | %s base64 -w 0; fi; echo"
                         % (shlex.quote(path), bb, shlex.quote(path), bb))
        lines.append("echo %s %d" % (END, i))
    lines.append("%s poweroff -f" % bb)
    return "\n".join(lines) + "\n"


def copy_regular(src, dst):
    """shutil.copytree's copy function for a root that mmdebstrap unpacked
    as root: device nodes (dev/zero, dev/full) are never read as files
    (that fills the disk); the guest's devtmpfs provides them."""
    if not os.path.isfile(src):
        return dst
    return shutil.copy2(src, dst)


def initramfs(fork, prefix, script, dest):
    """A gzip'd cpio of the guest root, prefix at its own absolute path and
    /init."""
    with tempfile.TemporaryDirectory(dir=fork.work) as tmp:
        root = os.path.join(tmp, "root")
        shutil.copytree(os.path.join(guest_dir(fork), "root"), root, symlinks=True,
                        ignore=lambda d, names: ["dev"] if d.endswith("/root") else [],
                        copy_function=copy_regular)
        shutil.copytree(prefix, os.path.join(root, prefix.lstrip("/")), symlinks=True,
                        copy_function=copy_regular)
        for d in ("proc", "sys", "dev", "tmp"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        with open(os.path.join(root, "init"), "w") as f:
            f.write(script)
        os.chmod(os.path.join(root, "init"), 0o755)
        files = subprocess.run(["find", "."], cwd=root, stdout=subprocess.PIPE,
                               check=True).stdout
        with open(dest, "wb") as out:
            cpio = subprocess.Popen(["cpio", "--quiet", "-o", "-H", "newc"], cwd=root,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            data, _ = cpio.communicate(files)
            out.write(gzip.compress(data, 1))


def decode(text):
    text = text.strip()
    return gzip.decompress(base64.b64decode(text)).decode("utf-8", "replace") if text else None


def run_commands(fork, prefix, commands, timeout=1800):
    """Boots the guest once and runs commands, a list of (env, argv, [files]).
    Returns (the guest's page-size line, [(exit status, stdout, stderr tail,
    {file: text or None})])."""
    ensure(fork)
    c = conf(fork)
    with tempfile.TemporaryDirectory(dir=fork.work) as tmp:
        initrd = os.path.join(tmp, "initrd.gz")
        initramfs(fork, prefix, init_script(commands), initrd)
        cmd = [c["guest_qemu"], "-M", "virt", "-cpu", "max", "-smp", "2", "-m", "3072",
               "-nographic", "-no-reboot", "-nic", "none", "-kernel", kernel_image(fork),
               "-initrd", initrd, "-append", "console=ttyAMA0 rdinit=/init quiet panic=-1"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
    out = r.stdout.decode("utf-8", "replace").replace("\r", "")
    m = re.search(r"^%s page-size (.*)$" % BEGIN, out, re.M)
    if not m:
        die("the %s guest did not start:\n%s" % (fork.arch, out[-3000:]))
    results = []
    for i, (_, _, files) in enumerate(commands):
        b = re.search(r"^%s %d\n(.*?)^%s %d$" % (BEGIN, i, END, i), out, re.M | re.S)
        if not b:
            die("the %s guest printed nothing for command %d:\n%s" % (fork.arch, i,
                                                                    out[-3000:]))
        body = b.group(1).split("\n")
        rc = int(body[1].split("=", 1)[1])
        results.append((rc, decode(body[0]) or "", decode(body[2]) or "",
                        {p: decode(body[3 + k]) for k, p in enumerate(files)}))
    return m.group(1).strip(), results
