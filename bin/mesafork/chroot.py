# SPDX-License-Identifier: MIT
"""Debian chroots made with mmdebstrap, for `bench` (sid with llama.cpp)
and `deb` (the build chroots and the test chroot): one class, so both
make, mount and enter their trees the same way.

A tree is made once by mmdebstrap and cached under .work/chroot/; a stamp
in it lists what it was made from (suite, variant, architectures, apt
sources, packages), and any change makes a new tree. What a verb does
inside it afterwards (build dependencies, a dist-upgrade) stays on top.
Entering needs root (chroot(2), bind mounts), so the verbs that use this
say so in one line before they start.
"""

import contextlib
import os
import shutil
import subprocess

from .proc import die, make_dirs, mark, rel, remove_tree, run, step

PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
STAMP = ".mesa-fork-ready"


def sources_list(mirror, suites, keyring=None, security=None):
    """sources.list lines: main of each suite from mirror, and with
    security=(uri, suite), that suite from uri."""
    opt = "[signed-by=%s] " % keyring if keyring else ""
    lines = ["deb %s%s %s main" % (opt, mirror, s) for s in suites]
    if security:
        lines.append("deb %s%s %s main" % (opt, security[0], security[1]))
    return "\n".join(lines) + "\n"


class Chroot:
    """A Debian tree at root; binds are (host path, path inside) mounted
    while in mounted(), besides /proc, /dev and /dev/pts."""

    def __init__(self, root, binds=()):
        self.root = root
        self.binds = list(binds)

    def stamp_text(self, suite, variant, sources, packages, arch, foreign, apt_options=()):
        return "mmdebstrap\nsuite %s\nvariant %s\narchitectures %s\n%spackages %s\n%s" % (
            suite, variant, ",".join([arch] + list(foreign)), sources,
            " ".join(sorted(packages)), "".join("apt %s\n" % o for o in apt_options))

    def ensure(self, suite, variant, sources, packages, arch, foreign=(), apt_options=()):
        """The tree, made by mmdebstrap unless the stamp says it already
        holds exactly this. sources: sources.list text, which also stays
        in the tree for apt; foreign: architectures added with dpkg
        --add-architecture; apt_options: apt configuration lines
        ('Acquire::Check-Valid-Until "false"'), for mmdebstrap's apt and,
        as mmdebstrap keeps them in /etc/apt/apt.conf.d/99mmdebstrap, the
        tree's."""
        want = self.stamp_text(suite, variant, sources, packages, arch, foreign, apt_options)
        stamp = os.path.join(self.root, STAMP)
        if os.path.exists(stamp):
            with open(stamp) as f:
                if f.read() == want:
                    return False
        if os.geteuid() != 0:
            die("making the chroot %s needs root (mmdebstrap in root mode, then chroot and "
                "bind mounts): run this command with sudo" % rel(self.root))
        if not shutil.which("mmdebstrap"):
            die("mmdebstrap is missing: run 'bin/mesa-fork deps' (or apt-get install "
                "mmdebstrap)")
        tmp = self.root + ".new"
        remove_tree(tmp)
        make_dirs(os.path.dirname(tmp))
        cmd = ["mmdebstrap", "--mode=root", "--variant=" + variant,
               "--architectures=" + ",".join([arch] + list(foreign)),
               # Keep apt's lists: the verbs install more from them.
               "--skip=cleanup/apt/lists"]
        cmd += ["--aptopt=" + o for o in apt_options]
        if packages:
            cmd.append("--include=" + ",".join(packages))
        cmd += [suite, tmp] + [l for l in sources.splitlines() if l.strip()]
        with step("mmdebstrap --variant=%s %s (%s) into %s: %s"
                  % (variant, suite, ",".join([arch] + list(foreign)), rel(self.root),
                     " ".join(packages) or "no extra packages")):
            run(cmd, quiet=True)
        mark(tmp)
        remove_tree(self.root)
        os.rename(tmp, self.root)
        with open(stamp, "w") as f:
            f.write(want)
        return True

    @contextlib.contextmanager
    def mounted(self):
        mounts = []
        try:
            for src, dst in [("/proc", "/proc"), ("/dev", "/dev"), ("/dev/pts", "/dev/pts")] + \
                    self.binds:
                path = os.path.join(self.root, dst.lstrip("/"))
                os.makedirs(path, exist_ok=True)
                r = subprocess.run(["mount", "--bind", src, path])
                if r.returncode != 0:
                    die("cannot bind-mount %s at %s (run as root)" % (src, path))
                mounts.append(path)
            shutil.copyfile("/etc/resolv.conf", os.path.join(self.root, "etc", "resolv.conf"))
            yield self
        finally:
            for m in reversed(mounts):
                subprocess.run(["umount", "-l", m])

    def command(self, cmd, env=None, cwd="/", user=None):
        """cmd inside the chroot with only PATH, HOME, LANG and env set; as
        user (a name of the tree's passwd) instead of root when given."""
        home = "/home/%s" % user if user else "/root"
        spec = ["--userspec=%s:%s" % (user, user)] if user else []
        return ["chroot"] + spec + [self.root, "env", "-i", "PATH=" + PATH, "HOME=" + home,
                                    "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive"] + \
            ["%s=%s" % kv for kv in (env or {}).items()] + \
            ["sh", "-c", 'cd "$0" && exec "$@"', cwd] + list(cmd)

    def run_in(self, cmd, env=None, cwd="/", quiet=False, user=None, capture=False):
        """Runs cmd inside; with capture, returns the CompletedProcess with
        stdout and stderr apart (text), else stops on failure."""
        full = self.command(cmd, env, cwd, user)
        if capture:
            return subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, errors="replace")
        run(full, quiet=quiet)

    def capture(self, cmd, env=None, cwd="/", user=None):
        """cmd inside, stdout and stderr together (text)."""
        return subprocess.run(self.command(cmd, env, cwd, user), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace")

    def apt_install(self, packages, *extra):
        self.run_in(["apt-get", "install", "-y", "--no-install-recommends"] + list(extra) +
                    list(packages), quiet=True)

    def add_user(self, name, uid):
        """A user of the tree with that uid (and a group of the same
        name and id), for what must not run as root: the package build,
        lintian. Returns nothing; idempotent."""
        def entry(db, key):
            r = self.capture(["getent", db, str(key)])
            return r.stdout.strip().split(":") if r.returncode == 0 else None

        user = entry("passwd", name)
        if user and user[2] == str(uid):
            return
        if user:   # made for another invoking user: made again
            self.run_in(["userdel", "--remove", name], quiet=True)
        if entry("group", name):
            self.run_in(["groupdel", name], quiet=True)
        clash = entry("passwd", uid) or entry("group", uid)
        if clash:
            die("chroot %s: id %d is taken by %s there; cannot add the build user %s"
                % (rel(self.root), uid, clash[0], name))
        self.run_in(["groupadd", "--gid", str(uid), name], quiet=True)
        self.run_in(["useradd", "--uid", str(uid), "--gid", str(uid), "--create-home",
                     "--shell", "/bin/sh", name], quiet=True)
