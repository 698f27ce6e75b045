# SPDX-License-Identifier: MIT
"""Memory shared through dma-buf fds (issue 39: "no test imports or
exports a BO"; patch 0060). The core drm-shim answers PRIME_HANDLE_TO_FD
and PRIME_FD_TO_HANDLE as the kernel's drm_prime.c does, with the asahi and
panthor rules for objects that may not leave their VM; Honeykrisp and panvk
then share a block between two VkDevices (mesa-fork-va-probe --share):
one object, pinned once, alive while either device holds it.

The ioctl-level checks run a small Python program under the shim (the
shim interposes open, ioctl and mmap for any program); it reports what it
saw as JSON and the expectations, taken from the kernel, are here."""

import json
import re
import sys
import unittest

import forklib
from forklib import run, shim_env

MiB = 1 << 20

# What the child observes. Ioctl numbers and struct layouts: the uAPI
# headers in Mesa's tree (include/drm-uapi/drm.h, panthor_drm.h) and the
# pinned <drm/asahi_drm.h> (config/fork.ini [asahi-uapi]).
CHILD = r'''
import errno, fcntl, json, mmap, os, struct, sys

def ioc(direction, nr, size):
    return (direction << 30) | (size << 16) | (ord("d") << 8) | nr

IOWR = lambda nr, size: ioc(3, nr, size)
PRIME_HANDLE_TO_FD = IOWR(0x2d, 12)       # struct drm_prime_handle
PRIME_FD_TO_HANDLE = IOWR(0x2e, 12)
GEM_CLOSE = ioc(1, 0x09, 8)               # DRM_IOW, struct drm_gem_close
DRM_CLOEXEC, DRM_RDWR = os.O_CLOEXEC, os.O_RDWR
BASE = 0x40                               # DRM_COMMAND_BASE
driver = sys.argv[1]
SIZE = 64 * 1024
out = {}

def name(err):
    return errno.errorcode.get(err, err) if err else None

def open_fds():
    return len(os.listdir("/proc/self/fd"))

def call(fd, req, fmt, *vals):
    buf = bytearray(struct.pack(fmt, *vals))
    try:
        fcntl.ioctl(fd, req, buf, True)
    except OSError as e:
        return e.errno, None
    return 0, struct.unpack(fmt, buf)

VMS = {}

def create(fd, exclusive=False):
    if driver == "panthor":
        vm = 0
        if exclusive and fd not in VMS:
            # DRM_PANTHOR_VM_CREATE: flags, id, user_va_range
            err, r = call(fd, IOWR(BASE + 1, 16), "=IIQ", 0, 0, 0)
            assert not err, err
            VMS[fd] = r[1]
        vm = VMS[fd] if exclusive else 0
        # DRM_PANTHOR_BO_CREATE: size, flags, exclusive_vm_id, handle, pad
        err, r = call(fd, IOWR(BASE + 5, 24), "=QIIII", SIZE, 0, vm, 0, 0)
        assert not err, err
        return r[3]
    if exclusive and fd not in VMS:
        # DRM_ASAHI_VM_CREATE: kernel_start, kernel_end, vm_id, pad. The
        # kernel's range: 512 MiB (file.rs VM_KERNEL_MIN_SIZE) inside the
        # user window (mmu.rs IOVA_USER_USABLE_RANGE), 16 KiB aligned.
        err, r = call(fd, IOWR(BASE + 2, 24), "=QQII", 1 << 38, (1 << 38) + (512 << 20), 0, 0)
        assert not err, err
        VMS[fd] = r[2]
    vm = VMS[fd] if exclusive else 0
    # DRM_ASAHI_GEM_CREATE: size, flags (VM_PRIVATE = 1 << 1), vm_id, handle, pad
    err, r = call(fd, IOWR(BASE + 5, 24), "=QIIII", SIZE, 2 if exclusive else 0, vm, 0, 0)
    assert not err, err
    return r[3]

def mapping(fd, handle):
    # DRM_PANTHOR_BO_MMAP_OFFSET / DRM_ASAHI_GEM_MMAP_OFFSET: handle, pad or
    # flags, offset
    err, r = call(fd, IOWR(BASE + 6, 16), "=IIQ", handle, 0, 0)
    assert not err, err
    return mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=r[2])

def export(fd, handle, flags):
    err, r = call(fd, PRIME_HANDLE_TO_FD, "=IIi", handle, flags, -1)
    return (err, None) if err else (0, r[2])

def import_(fd, dmabuf):
    err, r = call(fd, PRIME_FD_TO_HANDLE, "=IIi", 0, 0, dmabuf)
    return (err, None) if err else (0, r[0])

def close_handle(fd, handle):
    err, _ = call(fd, GEM_CLOSE, "=II", handle, 0)
    assert not err, err

node = "/dev/dri/" + sorted(n for n in os.listdir("/dev/dri") if n.startswith("renderD"))[0]
f1 = os.open(node, os.O_RDWR)
f2 = os.open(node, os.O_RDWR)
fds_before = open_fds()
h1 = create(f1)
err, fd_a = export(f1, h1, DRM_CLOEXEC | DRM_RDWR)
out["export"] = name(err)
err, fd_b = export(f1, h1, 0)
out["cloexec"] = [bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC) for fd in (fd_a, fd_b)]
out["same_dmabuf"] = os.fstat(fd_a).st_ino == os.fstat(fd_b).st_ino
out["dmabuf_size"] = os.lseek(fd_a, 0, os.SEEK_END)
out["size"] = SIZE
out["unknown_flag"] = name(export(f1, h1, 0x4)[0])
out["no_handle"] = name(export(f1, 9999, 0)[0])
out["import_in_exporter"] = import_(f1, fd_a)[1] == h1
h2 = import_(f2, fd_a)[1]
out["import_again"] = import_(f2, fd_b)[1] == h2
m1, m2 = mapping(f1, h1), mapping(f2, h2)
m1[0:8] = b"exporter"
m1[SIZE - 8:SIZE] = b"lastpage"
out["shared"] = m2[0:8] == b"exporter" and m2[SIZE - 8:SIZE] == b"lastpage"
close_handle(f1, h1)
m2[0:8] = b"importer"
out["after_exporter_closed"] = m2[0:8] + m1[SIZE - 8:SIZE] == b"importerlastpage"
h1 = import_(f1, fd_b)[1]
out["reimport_while_held"] = h1 is not None and mapping(f1, h1)[0:8] == b"importer"
close_handle(f1, h1)
close_handle(f2, h2)
out["after_all_closed"] = name(import_(f1, fd_a)[0])
del m1, m2
os.close(fd_a)
os.close(fd_b)
# The shim's own copy of the dma-buf went with the object.
out["fds_left"] = open_fds() - fds_before
null = os.open("/dev/null", os.O_RDONLY)
out["not_a_dmabuf"] = name(import_(f1, null)[0])
os.close(null)
out["closed_fd"] = name(import_(f1, 1000)[0])
# Objects bound to one VM are refused; once one is gone, an ordinary one
# exports, also where the allocator gives it the same address (glibc's
# calloc takes no chunk from the thread cache: a few rounds fill it).
out["exclusive"], out["after_exclusive_closed"] = set(), set()
for _ in range(16):
    hx = create(f1, exclusive=True)
    out["exclusive"].add(name(export(f1, hx, 0)[0]))
    close_handle(f1, hx)
    h = create(f1)
    err, fd_c = export(f1, h, 0)
    out["after_exclusive_closed"].add(name(err))
    if fd_c is not None:
        os.close(fd_c)
    close_handle(f1, h)
out["exclusive"], out["after_exclusive_closed"] = (sorted(out[k], key=str) for k in
                                                   ("exclusive", "after_exclusive_closed"))
print(json.dumps(out))
'''


def prime(driver):
    shim = {"panthor": "panfrost", "asahi": "asahi"}[driver]
    r = run([sys.executable, "-c", CHILD, driver], env=shim_env(shim))
    if r.returncode != 0:
        raise AssertionError("the PRIME check on the %s shim failed: %s%s"
                             % (driver, r.stdout, r.stderr[-3000:]))
    return json.loads(r.stdout.splitlines()[-1]), r.stderr


class ShimPrime(unittest.TestCase):
    """drm_prime.c's rules, on both shims (this machine's build)."""

    def check(self, driver):
        seen, err = prime(driver)
        # drm_prime_handle_to_fd_ioctl: flags other than DRM_CLOEXEC and
        # DRM_RDWR are EINVAL; drm_gem_prime_handle_to_fd: no object ENOENT.
        self.assertEqual(seen["export"], None)
        self.assertEqual(seen["unknown_flag"], "EINVAL")
        self.assertEqual(seen["no_handle"], "ENOENT")
        # dma_buf_fd(dmabuf, flags): O_CLOEXEC as asked.
        self.assertEqual(seen["cloexec"], [True, False])
        # One dma-buf per object (obj->dma_buf), whose size lseek gives.
        self.assertTrue(seen["same_dmabuf"])
        self.assertEqual(seen["dmabuf_size"], seen["size"])
        # drm_prime_lookup_buf_handle: a file gets back the handle it has.
        self.assertTrue(seen["import_in_exporter"])
        self.assertTrue(seen["import_again"])
        # gem_prime_import of its own dma-buf: the same object, the same
        # pages, alive while a handle holds it.
        self.assertTrue(seen["shared"])
        self.assertTrue(seen["after_exporter_closed"])
        self.assertTrue(seen["reimport_while_held"])
        # dma_buf_get: EINVAL for a file that is no dma-buf, EBADF for no
        # file. And a freed object is never handed back (the shim's limit:
        # it cannot see the last close of the fd, see device.c).
        self.assertEqual(seen["not_a_dmabuf"], "EINVAL")
        self.assertEqual(seen["closed_fd"], "EBADF")
        self.assertEqual(seen["after_all_closed"], "EINVAL")
        self.assertEqual(seen["fds_left"], 0)
        # Objects bound to one VM are not exported; others are, after one
        # such was freed.
        self.assertEqual(seen["exclusive"], ["EINVAL"])
        self.assertEqual(seen["after_exclusive_closed"], [None])
        return err

    def test_panthor(self):
        """panthor_gem_prime_export refuses an object with an exclusive VM."""
        err = self.check("panthor")
        self.assertIn("PRIME_HANDLE_TO_FD of an object with an exclusive VM", err)

    def test_asahi(self):
        """gem.rs AsahiObject::export refuses a VM-private object."""
        err = self.check("asahi")
        self.assertIn("PRIME_HANDLE_TO_FD: a VM-private object", err)


def share(t, shim, **env):
    """The "share:" lines of mesa-fork-va-probe --share 64 on target t:
    {step: (MemAvailable, usage or None, contents)}, and the process."""
    r = t.run([t.bin_path("mesa-fork-va-probe"), "--share", "64"],
              env=t.shim_env(shim, DRM_SHIM_RAM=str(8 << 30),
                             DRM_SHIM_MEM_AVAILABLE=str(4 << 30), **env))
    steps = {}
    for m in re.finditer(r"^share: (\S+) avail=(-?\d+) usage=(\S+) contents=(\S+)$",
                         r.stdout, re.M):
        usage = None if m.group(3) == "none" else int(m.group(3))
        steps[m.group(1)] = (int(m.group(2)), usage, m.group(4))
    return steps, r


class SharedBetweenDevices(unittest.TestCase):
    """One block of 64 MiB, exported by one VkDevice and imported by
    another of the same GPU, and by the exporter itself."""

    def check(self, arch, shim):
        t = forklib.target(arch)
        steps, r = share(t, shim)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-3000:])
        order = ["before", "exported", "imported", "written-by-importer",
                 "imported-by-exporter", "exporter-freed", "importer-freed"]
        self.assertEqual(sorted(steps), sorted(order), r.stdout)
        # What one device wrote, the other reads, also once the exporter
        # freed its handles (the importer's keeps the object).
        for step in order[1:-1]:
            self.assertEqual(steps[step][2], "ok", (step, r.stdout))
        avail = {s: steps[s][0] for s in order}
        # The object is pinned once, when the exporter binds it: importing
        # it, twice, pins nothing more; the exporter's free gives nothing
        # back while the importer holds it; the importer's gives it all.
        self.assertEqual(avail["before"] - avail["exported"], 64 * MiB, r.stdout)
        for s in ("imported", "written-by-importer", "imported-by-exporter", "exporter-freed"):
            self.assertEqual(avail[s], avail["exported"], (s, r.stdout))
        self.assertEqual(avail["importer-freed"], avail["before"], r.stdout)
        # Usage counts the block once, on the exporter's side: not again
        # when imported, and no more once the exporter freed it, although
        # the importer still holds it (docs/changes/small-macs.md).
        usage = {s: steps[s][1] for s in order}
        if usage["before"] is not None:
            self.assertEqual(usage["exported"] - usage["before"], 64 * MiB, r.stdout)
            self.assertEqual(usage["imported"], usage["exported"], r.stdout)
            self.assertEqual(usage["exporter-freed"], usage["before"], r.stdout)
            self.assertEqual(usage["importer-freed"], usage["before"], r.stdout)
        return steps

    def test_honeykrisp_amd64(self):
        self.check("amd64", "asahi")

    def test_panvk_amd64(self):
        self.check("amd64", "panfrost")

    def test_honeykrisp_arm64(self):
        self.check("arm64", "asahi")

    def test_panvk_arm64(self):
        self.check("arm64", "panfrost")


if __name__ == "__main__":
    unittest.main()
