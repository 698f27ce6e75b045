# SPDX-License-Identifier: MIT
"""`mesa-fork deps`, the one step that needs root: on Debian, every build
and test package of the Debian column of docs/build-deps.md, installed with
apt-get (on bookworm, meson from bookworm-backports, whose entry it adds
from the mirror already configured on the machine); with --arch, what a
cross build needs. The base's source needs no entry of the machine's:
fetch asks apt through private states (sources.py). On any other system it touches nothing and stops with what to
install (distro.py).

`install` runs as the user: it asks what is missing (needed(), which needs
no root) and only when something is, runs `deps` (directly as root, else
through sudo, which asks for the password), so that only this step runs
as root and .work/ stays the user's."""

import os
import shlex
import shutil
import subprocess
import sys

from . import apt, cross, distro
from .config import parse_arches
from .proc import die, run, step


def needed(fork, arch=None):
    """What `deps` would do on this machine, one line each (empty: nothing).
    Reads dpkg's and apt's state only, so it needs no root."""
    osr = distro.os_release()
    if not osr.is_debian:
        distro.refuse(fork, osr)
    out = []
    llvm = apt.llvm_version(fork, required=False)
    if llvm is None:
        out.append("run apt-get update (apt offers no LLVM Mesa builds with yet)")
    else:
        missing = apt.missing_debs(apt.debian_packages(fork, llvm))
        if missing:
            out.append("install %s" % " ".join(missing))
    if distro.meson_version() < distro.MESON_MIN:
        out.append("install meson >= %s" % ".".join(map(str, distro.MESON_MIN)))
    # fetch needs no deb-src entry of the machine's: it asks apt through a
    # private state (apt.source_states), then Debian's pool and snapshot
    # archive, so a base gone from the pool is not something deps can fix.
    for a in parse_arches(fork, arch):
        if a != fork.host_arch:
            left = cross.missing_host_tools(fork.for_arch(a))
            if left:
                out.append("install the %s cross tools (%s)" % (a, ", ".join(left)))
    return out


def deps(fork, update=False, arch=None):
    """Install every build and test dependency with apt-get (Debian only;
    elsewhere it prints what to install); with --arch, also what a cross
    build for those architectures needs. The only step that needs root."""
    todo = needed(fork, arch)
    if not todo and not update:
        print("deps: everything is installed already")
        return
    if os.geteuid() != 0:
        die("deps needs root to %s: run 'sudo %s' once" % ("; ".join(todo) or "update apt",
                                                          command(arch, update)))
    native_deps(fork, update)
    for a in parse_arches(fork, arch):
        if a != fork.host_arch:
            cross.deps(fork.for_arch(a))


def command(arch=None, update=False):
    """The deps command line, as the user would type it."""
    cli = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "mesa-fork")
    return " ".join([shlex.quote(os.path.relpath(cli)), "deps"] +
                    (["--arch", arch] if arch else []) + (["--update"] if update else []))


def ensure(fork, arch=None):
    """For install, run as the user: nothing when nothing is missing; else
    `deps`, directly as root, or through sudo (only this step asks for
    root); else one line saying what to run."""
    todo = needed(fork, arch)
    if not todo:
        print("install: build and test dependencies are installed")
        return
    if os.geteuid() == 0:
        deps(fork, arch=arch)
        return
    cmd = command(arch)
    print("install: needs root once, for 'deps', to %s" % "; ".join(todo))
    if not shutil.which("sudo") or not sys.stdin.isatty():
        die("run 'sudo %s' (or as root: %s), then this command again" % (cmd, cmd))
    print("install: running sudo %s" % cmd)
    if subprocess.run(["sudo"] + shlex.split(cmd)).returncode != 0:
        die("'sudo %s' failed; see above" % cmd)
    left = needed(fork, arch)
    if left:
        die("still missing after deps: %s" % "; ".join(left))


def native_deps(fork, update=False):
    osr = distro.os_release()
    if not osr.is_debian:
        distro.refuse(fork, osr)
    codename = osr.codename
    with step("apt sources%s" % (" (bookworm-backports)" if codename == "bookworm" else "")):
        changed = apt.ensure_apt_sources(codename)
        if changed or update or apt.llvm_version(fork, required=False) is None:
            run(["apt-get", "update"], quiet=True)
    missing = apt.missing_debs(apt.debian_packages(fork))
    if distro.meson_version() < distro.MESON_MIN:
        missing.insert(0, "meson/bookworm-backports" if codename == "bookworm" else "meson")
    if not missing:
        print("deps: every package is installed already")
        return
    with step("apt-get install %d packages" % len(missing)):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        run(["apt-get", "install", "-y", "--no-install-recommends"] + missing,
            env=env, quiet=True)
    if distro.meson_version() < distro.MESON_MIN:
        die("meson >= %s is required; found %s" % (".".join(map(str, distro.MESON_MIN)),
                                                   ".".join(map(str, distro.meson_version()))))
