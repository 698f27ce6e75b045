# SPDX-License-Identifier: MIT
"""Output and processes: every verb says what it does and how long it took,
runs commands through run() and stops with die()."""

import contextlib
import os
import subprocess
import sys
import time


def fmt_time(s):
    return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%.1fs" % s


@contextlib.contextmanager
def step(what):
    print("==> %s" % what, flush=True)
    t0 = time.monotonic()
    yield
    print("    %s (%s)" % (what.split(" (")[0], fmt_time(time.monotonic() - t0)), flush=True)


def die(msg):
    print("mesa-fork: error: %s" % msg, file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd, cwd=None, env=None, quiet=False):
    """Run a command; with quiet, show its output only when it fails."""
    if quiet:
        r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
        if r.returncode != 0:
            sys.stdout.write(r.stdout[-20000:])
    else:
        r = subprocess.run(cmd, cwd=cwd, env=env)
    if r.returncode != 0:
        die("command failed (exit %d): %s" % (r.returncode, " ".join(cmd)))


def capture(cmd, cwd=None, env=None):
    """Run a command and return it with stdout and stderr as one text."""
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")


def rel(path):
    with contextlib.suppress(ValueError):
        r = os.path.relpath(path)
        if not r.startswith(".."):
            return r
    return path


def write_if_changed(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


def mounts_under(root):
    """Mount points at or below root, deepest first, from the kernel's
    table (what an earlier, killed run may have left bind-mounted)."""
    root = os.path.realpath(root)
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def remove_tree(root):
    """rm -rf of a chroot, never through a bind mount into the host: what
    is still mounted below it is unmounted first, and the removal stays on
    the chroot's file system."""
    if not os.path.exists(root):
        return
    for point in mounts_under(root):
        subprocess.run(["umount", "-l", point])
    left = mounts_under(root)
    if left:
        die("%s is still mounted; not removing %s" % (left[0], rel(root)))
    run(["rm", "-rf", "--one-file-system", root], quiet=True)
