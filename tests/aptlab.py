# SPDX-License-Identifier: MIT
"""What the tests of the fork's packages in apt's hands share: stand-in
binary packages made with dpkg-deb, apt archives made with reprepro and
signed with a throwaway key (apt trusts it through signed-by, as a user
trusts the fork's archive), and a small root of the fork's suite with apt
in it (mmdebstrap --variant=apt, made once under .work/chroot and copied
fresh for each test), in which apt sees only those archives: no network
after the root is made.

Used by test_packaging (Debian's security updates next to the fork) and
test_shipping (the fork's archive taking the real source package)."""

import contextlib
import io
import os
import shutil
import subprocess
import tempfile

import forklib
from mesafork import apt, chroot, proc


def need(*programs):
    """Fails, naming the package, when a program the test drives is not
    installed (docs/build-deps.md, the tests row: `deps` installs them)."""
    packages = {"reprepro": "reprepro", "gpg": "gpg", "gpgconf": "gpgconf",
                "dpkg-deb": "dpkg", "mmdebstrap": "mmdebstrap"}
    missing = [p for p in programs if not shutil.which(p)]
    if missing:
        raise AssertionError("%s missing: apt-get install %s (docs/build-deps.md, tests row)"
                             % (", ".join(missing), " ".join(packages.get(p, p)
                                                            for p in missing)))


def standin_deb(outdir, version, package="mesa-vulkan-drivers", arch=None, files=None,
                what="stand-in"):
    """An empty binary package of source mesa (with files: {path: text}
    in it), made with dpkg-deb; returns its path."""
    arch = arch or forklib.HOST.arch
    pkg = tempfile.mkdtemp(dir=outdir)
    os.makedirs(os.path.join(pkg, "DEBIAN"))
    with open(os.path.join(pkg, "DEBIAN", "control"), "w") as f:
        f.write("Package: %s\nSource: mesa\nVersion: %s\nArchitecture: %s\n"
                "Multi-Arch: same\nSection: libs\nPriority: optional\n"
                "Maintainer: nobody <nobody@invalid>\nDescription: %s\n"
                % (package, version, arch, what))
    for path, text in (files or {}).items():
        full = os.path.join(pkg, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    out = os.path.join(outdir, "%s_%s_%s.deb" % (package, version, arch))
    r = subprocess.run(["dpkg-deb", "--root-owner-group", "--build", pkg, out],
                       capture_output=True, text=True)
    shutil.rmtree(pkg)
    if r.returncode != 0:
        raise AssertionError("dpkg-deb --build: " + r.stderr)
    return out


class Key:
    """A throwaway OpenPGP signing key in a GNUPGHOME of its own (ed25519,
    no passphrase, valid for a day), and its public key exported for
    signed-by. close() stops the gpg-agent it started."""

    def __init__(self, parent, name="mesa-fork test archive <archive@invalid>"):
        need("gpg", "gpgconf")
        self.home = tempfile.mkdtemp(dir=parent, prefix="gnupg-")
        os.chmod(self.home, 0o700)
        self.env = dict(os.environ, GNUPGHOME=self.home)
        self.gpg(["--quick-gen-key", name, "ed25519", "sign", "1d"])
        out = self.gpg(["--list-keys", "--with-colons"]).stdout
        self.fingerprint = [l.split(":")[9] for l in out.splitlines() if l.startswith("fpr:")][0]

    def gpg(self, args):
        r = subprocess.run(["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase",
                            ""] + args, env=self.env, capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("gpg %s: %s" % (" ".join(args), r.stderr))
        return r

    def export(self, path):
        """The public key, binary, as apt's signed-by takes it."""
        r = subprocess.run(["gpg", "--batch", "--export", self.fingerprint], env=self.env,
                           capture_output=True)
        with open(path, "wb") as f:
            f.write(r.stdout)
        os.chmod(path, 0o644)
        return path

    def close(self):
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=self.env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Archive:
    """A reprepro archive in basedir, signed with key, with one
    distribution per codename (its Suite the same), for architectures."""

    def __init__(self, basedir, key, codenames, origin, architectures=None):
        need("reprepro")
        self.base = basedir
        self.key = key
        archs = architectures or ["source", forklib.HOST.arch]
        os.makedirs(os.path.join(basedir, "conf"))
        with open(os.path.join(basedir, "conf", "distributions"), "w") as f:
            f.write("\n".join(
                "Origin: %s\nLabel: %s\nSuite: %s\nCodename: %s\nArchitectures: %s\n"
                "Components: main\nDescription: %s %s (mesa-fork tests)\nSignWith: %s\n"
                % (origin, origin, c, c, " ".join(archs), origin, c, key.fingerprint)
                for c in codenames))
        self.reprepro(["export"])

    def reprepro(self, args, check=True):
        r = subprocess.run(["reprepro", "-b", self.base] + args, env=self.key.env,
                           capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError("reprepro %s: exit %d\n%s%s" % (
                " ".join(args), r.returncode, r.stdout, r.stderr))
        # apt reads file: archives as its sandbox user, _apt.
        subprocess.run(["chmod", "-R", "a+rX", self.base])
        return r

    def list(self, codename):
        """{(package, architecture): version} of reprepro list."""
        out = {}
        for line in self.reprepro(["list", codename]).stdout.splitlines():
            # "trixie|main|amd64: mesa-vulkan-drivers 25.0.7-2+deb13u1"
            where, what = line.split(": ", 1)
            name, version = what.split()
            out[(name, where.split("|")[2])] = version
        return out


def sources_line(uri, codename, keyring):
    return "deb [signed-by=%s] %s %s main\n" % (keyring, uri, codename)


class AptRoot:
    """A fresh copy of the small root of the fork's suite with apt
    (.work/chroot/<suite>-apt, made once by mmdebstrap), the directory
    repos bound at /srv/repos, and no apt sources but those a test
    writes. Needs root: the caller skips (forklib.skip_optional) without."""

    INSIDE = "/srv/repos"

    def __init__(self, name, repos):
        need("mmdebstrap")
        suite = forklib.config()["deb"]["suite"]
        mirror, _ = apt.debian_mirror(apt.os_codename())
        base = chroot.Chroot(os.path.join(forklib.WORK, "chroot", "%s-apt" % suite))
        with contextlib.redirect_stdout(io.StringIO()):
            base.ensure(suite, "apt", chroot.sources_list(mirror, [suite], chroot.DEBIAN_KEYRING),
                        [], forklib.HOST.arch, apt_options=['Acquire::Languages "none"'])
        self.root = os.path.join(forklib.WORK, "chroot", "%s-apt-%s" % (suite, name))
        proc.remove_tree(self.root)
        subprocess.run(["cp", "-a", "--reflink=auto", base.root, self.root], check=True)
        etc = os.path.join(self.root, "etc", "apt")
        for f in ["sources.list"] + [os.path.join("sources.list.d", n) for n in
                                     os.listdir(os.path.join(etc, "sources.list.d"))]:
            if os.path.exists(os.path.join(etc, f)):
                os.unlink(os.path.join(etc, f))
        os.makedirs(os.path.join(etc, "keyrings"), exist_ok=True)
        os.chmod(repos, 0o755)
        self.chroot = chroot.Chroot(self.root, [(repos, self.INSIDE)])

    def path(self, inside):
        return os.path.join(self.root, inside.lstrip("/"))

    def write(self, inside, text):
        with open(self.path(inside), "w") as f:
            f.write(text)

    def apt(self, args):
        """apt-get (or apt, when args start with it) in the root; the
        CompletedProcess, stdout and stderr together."""
        cmd = args if args[0] in ("apt", "apt-mark", "apt-cache", "dpkg-query") else \
            ["apt-get", "-y", "-o", "APT::Color=0"] + args
        return self.chroot.capture(cmd)

    def installed(self, package="mesa-vulkan-drivers"):
        r = self.chroot.capture(["dpkg-query", "-W", "-f=${Version}", package])
        return r.stdout.strip() if r.returncode == 0 else None

    def remove(self):
        proc.remove_tree(self.root)
