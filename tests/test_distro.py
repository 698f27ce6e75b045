# SPDX-License-Identifier: MIT
"""Systems that are not Debian: `deps` refuses to touch apt there and
prints that distribution's build dependencies (docs/build-deps.md), and
`install --no-deps` builds from Mesa's release tarball with no apt at all.

The machine's own apt is never touched: every test points the CLI at an
os-release file (MESA_FORK_OS_RELEASE) and an apt configuration directory
(MESA_FORK_APT_ETC) of its own, and puts recording fakes of apt-get, apt,
apt-cache, dpkg and dpkg-query first on PATH, or no apt at all."""

import glob
import os
import shutil
import subprocess
import tempfile
import unittest

import forklib
from forklib import run
from mesafork import apt, config, distro, proc, sources, uapi


def made_files(d):
    """What is in directory d besides the mark that says mesa-fork made it."""
    return sorted(n for n in os.listdir(d) if n != proc.MARK)

OS_RELEASES = {
    "debian": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
              'VERSION_CODENAME=bookworm\nID=debian\n',
    "ubuntu": 'PRETTY_NAME="Ubuntu 26.04 LTS"\nNAME="Ubuntu"\nVERSION_ID="26.04"\n'
              'VERSION_CODENAME=resolute\nID=ubuntu\nID_LIKE=debian\n',
    "mint": 'NAME="Linux Mint"\nPRETTY_NAME="Linux Mint 22.2"\nID=linuxmint\n'
            'ID_LIKE="ubuntu debian"\nVERSION_CODENAME=zara\n',
    "kali": 'PRETTY_NAME="Kali GNU/Linux Rolling"\nID=kali\nID_LIKE=debian\n'
            'VERSION_CODENAME=kali-rolling\n',
    "fedora": 'NAME="Fedora Linux Asahi Remix"\nID=fedora\nVERSION_ID=42\n'
              'PRETTY_NAME="Fedora Linux Asahi Remix 42 (Workstation Edition)"\n',
    "plan9": 'NAME="Plan 9"\nID=plan9\n',
    "no-id": 'NAME="Something"\n',
}

# What the fakes answer: enough for deps on Debian to run through.
FAKE = """#!/bin/sh
echo "$(basename "$0") $*" >> {log}
case "$(basename "$0") $1" in
  "apt-cache show") case "$3" in
                      *-${{FAKE_LLVM:-15}}|*-${{FAKE_LLVM:-15}}-dev|*cpp${{FAKE_LLVM:-15}}-dev) ;;
                      *) exit 100 ;;
                    esac ;;
  "dpkg-query "*) [ -n "$FAKE_MISSING" ] && [ "$3" = "$FAKE_MISSING" ] ||
                  printf 'install ok installed' ;;
esac
exit 0
"""
FAKE_NAMES = ("apt-get", "apt", "apt-cache", "dpkg", "dpkg-query")


class Sandbox:
    """A temporary os-release, apt directory, work directory and recording
    fakes of the apt tools."""

    def __init__(self, tmp, osr):
        self.tmp = tmp
        os.makedirs(tmp, exist_ok=True)
        self.osr = os.path.join(tmp, "os-release")
        with open(self.osr, "w") as f:
            f.write(OS_RELEASES[osr])
        self.apt = os.path.join(tmp, "apt")
        os.makedirs(os.path.join(self.apt, "sources.list.d"))
        with open(os.path.join(self.apt, "sources.list"), "w") as f:
            f.write("deb http://deb.debian.org/debian bookworm main\n"
                    if osr == "debian" else
                    "deb http://archive.ubuntu.com/ubuntu resolute main\n")
        self.work = os.path.join(tmp, "work")
        os.makedirs(self.work)
        self.log = os.path.join(tmp, "apt-calls.log")
        self.bin = os.path.join(tmp, "fakebin")
        os.makedirs(self.bin)
        version = forklib.config()["base"]["version"]
        for name in FAKE_NAMES:
            path = os.path.join(self.bin, name)
            with open(path, "w") as f:
                f.write(FAKE.format(log=self.log, version=version))
            os.chmod(path, 0o755)

    def env(self, **extra):
        env = dict(os.environ, MESA_FORK_OS_RELEASE=self.osr, MESA_FORK_APT_ETC=self.apt,
                   MESA_FORK_WORK=self.work, PATH=self.bin + ":" + os.environ["PATH"])
        env.pop("MESA_FORK_ASAHI_UAPI", None)
        env.update(extra)
        return env

    def apt_calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return f.read().splitlines()

    def apt_files(self):
        """Every file under the apt directory with its content."""
        out = {}
        for path in glob.glob(os.path.join(self.apt, "**"), recursive=True):
            if os.path.isfile(path):
                with open(path) as f:
                    out[os.path.relpath(path, self.apt)] = f.read()
        return out


def table():
    return distro.deps_table(forklib.TOP)


class DepsTable(unittest.TestCase):
    def test_debian_column_is_what_deps_installs(self):
        """The table has the four columns, only Debian's marked tested, and
        the Debian column holds the build essentials deps needs."""
        t = table()
        self.assertEqual(list(t), ["debian", "ubuntu", "fedora", "arch"])
        self.assertEqual([c.tested for c in t.values()], [True, False, False, False])
        self.assertEqual([c.install for c in t.values()],
                         ["apt-get install", "apt-get install", "dnf install",
                          "pacman -S --needed"])
        deb = t["debian"].packages
        for p in ("meson", "ninja-build", "llvm-15-dev", "libdrm-dev", "python3-mako",
                  "vulkan-validationlayers"):
            self.assertIn(p, deb)
        for col in t.values():
            self.assertNotIn("-", col.packages)
            self.assertEqual(len(col.packages), len(set(col.packages)), col.key)

    def test_the_config_holds_no_second_list(self):
        self.assertFalse(forklib.config().has_section("deps"),
                         "package names live in docs/build-deps.md only")


class DepsRefusesOffDebian(unittest.TestCase):
    def refuse(self, osr, verb=("deps",)):
        """Runs a verb on a system playing osr; it must stop, touching no
        apt file and running no apt tool. Returns its stderr."""
        with tempfile.TemporaryDirectory() as tmp:
            box = Sandbox(tmp, osr)
            before = box.apt_files()
            r = run([forklib.CLI] + list(verb), env=box.env())
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertEqual(box.apt_calls(), [], "an apt tool ran")
            self.assertEqual(box.apt_files(), before, "the apt configuration changed")
            self.assertEqual(os.listdir(os.path.join(box.apt, "sources.list.d")), [])
            return r.stderr

    def assert_lists(self, err, col, others=()):
        self.assertIn("%s %s" % (col.install, " ".join(col.packages)), err)
        for name in others:
            self.assertNotIn(name, err.split())

    def test_ubuntu_refuses_and_lists_ubuntu_names(self):
        err = self.refuse("ubuntu")
        self.assertIn("this system is Ubuntu 26.04 LTS (ID=ubuntu ID_LIKE=debian", err)
        self.assertIn("not Debian", err)
        self.assertIn("leaves this system's package sources alone", err)
        self.assert_lists(err, table()["ubuntu"], others=("llvm-15-dev",))
        self.assertIn("untested, a starting point", err)
        self.assertIn("install --no-deps --tarball https://archive.mesa3d.org/"
                      "mesa-%s.tar.xz" % forklib.MESA_VERSION, err)

    def test_install_on_ubuntu_stops_at_deps(self):
        """install (without --no-deps) stops before fetch: no apt-get source
        of Ubuntu's Mesa."""
        err = self.refuse("ubuntu", verb=("install",))
        self.assertIn("not Debian", err)

    def test_fetch_on_ubuntu_wants_the_tarball(self):
        err = self.refuse("ubuntu", verb=("fetch",))
        self.assertIn("this system is not Debian", err)
        self.assertIn("fetch --tarball", err)

    def test_mint_takes_the_ubuntu_column(self):
        self.assert_lists(self.refuse("mint"), table()["ubuntu"])

    def test_a_debian_derivative_gets_debian_names_but_no_debian_suites(self):
        err = self.refuse("kali")
        self.assert_lists(err, table()["debian"])
        self.assertIn("tested on Debian, not on this system", err)

    def test_fedora_refuses_and_lists_fedora_names(self):
        err = self.refuse("fedora")
        self.assertIn("Fedora Linux Asahi Remix 42", err)
        self.assert_lists(err, table()["fedora"],
                          others=("libexpat1-dev", "g++", "apt-get", "llvm-15-dev"))
        for name in ("dnf", "gcc-c++", "python3-pyyaml", "kernel-headers", "libdrm-devel"):
            self.assertIn(name, err.split())
        self.assertIn("untested", err)

    def test_unknown_distribution_is_a_clear_error(self):
        err = self.refuse("plan9")
        self.assertIn("this system is Plan 9 (ID=plan9", err)
        self.assertIn("has no column for this distribution", err)
        self.assertIn(" ".join(table()["debian"].packages), err)

    def test_os_release_without_id_is_a_clear_error(self):
        err = self.refuse("no-id")
        self.assertIn("has no ID= line", err)

    def test_missing_os_release_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            box = Sandbox(tmp, "ubuntu")
            missing = os.path.join(tmp, "nothing")
            r = run([forklib.CLI, "deps"], env=box.env(MESA_FORK_OS_RELEASE=missing))
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot read %s: no such file" % missing, r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertEqual(box.apt_calls(), [])


class DepsOnDebian(unittest.TestCase):
    def setUp(self):
        # deps with something to do stops before writing anything when it is
        # not root (what a user meets is DepsAsUser's).
        if os.geteuid() != 0:
            forklib.skip_optional("root", "deps with packages to install or apt to update "
                                  "needs root")

    def test_debian_adds_bookworm_backports_in_the_apt_directory_given(self):
        """The control for the refusals: with a Debian os-release, the same
        sandbox does get its sources entry (bookworm-backports, for meson)
        and apt-get runs, so the overrides really steer where deps writes
        and what it runs. No deb-src entry: fetch needs none."""
        with tempfile.TemporaryDirectory() as tmp:
            box = Sandbox(tmp, "debian")
            r = run([forklib.CLI, "deps"], env=box.env(FAKE_MISSING="valgrind"))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            written = box.apt_files().get(os.path.join("sources.list.d", "mesa-fork.sources"))
            self.assertIsNotNone(written, box.apt_files())
            self.assertIn("Types: deb\nURIs: http://deb.debian.org/debian\n"
                          "Suites: bookworm-backports\n", written)
            self.assertNotIn("deb-src", written)
            self.assertIn("apt-get update", box.apt_calls())
            queried = [c.split()[-1] for c in box.apt_calls() if c.startswith("dpkg-query")]
            self.assertEqual(sorted(set(queried)),
                             sorted(p for p in table()["debian"].packages if p != "meson"))
            self.assertIn("apt-get install -y --no-install-recommends valgrind",
                          box.apt_calls())

    def test_an_earlier_deb_src_entry_of_ours_goes_and_a_foreign_file_stays(self):
        with tempfile.TemporaryDirectory() as tmp:
            box = Sandbox(tmp, "debian")
            ours = os.path.join(box.apt, "sources.list.d", "mesa-fork.sources")
            with open(ours, "w") as f:
                f.write("# Written by mesa-fork deps: Mesa's source suite.\n\n"
                        "Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: trixie\n")
            r = run([forklib.CLI, "deps", "--update"], env=box.env())
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(ours) as f:
                self.assertNotIn("deb-src", f.read())
            with open(ours, "w") as f:
                f.write("Types: deb-src\nURIs: http://example.invalid/debian\nSuites: x\n")
            r = run([forklib.CLI, "deps", "--update"], env=box.env())
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("was not written by mesa-fork: left as it is", r.stdout)
            with open(ours) as f:
                self.assertIn("example.invalid", f.read())


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


class DepsAsUser(unittest.TestCase):
    """Only `deps` needs root, and only when it has something to do: as a
    user (nobody here), it says so in one line instead of failing with a
    PermissionError, runs no apt-get, and `install` asks for it the same
    way. The sandbox is opened to nobody; the apt tools are the fakes."""

    def sandbox(self, tmp):
        if os.geteuid() != 0:
            forklib.skip_optional("root", "run as a user already: becoming nobody needs root")
        box = Sandbox(tmp, "debian")
        for d, _, files in os.walk(tmp):
            os.chmod(d, 0o777)
            for f in files:
                os.chmod(os.path.join(d, f), 0o777)
        return box

    def test_nothing_to_do_needs_no_root(self):
        with tempfile.TemporaryDirectory() as tmp:
            box = self.sandbox(tmp)
            r = run(NOBODY + [forklib.CLI, "deps"], env=box.env())
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("everything is installed already", r.stdout)
            self.assertNotIn("apt-get", " ".join(box.apt_calls()))

    def test_deps_with_work_to_do_asks_for_root_in_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            box = self.sandbox(tmp)
            r = run(NOBODY + [forklib.CLI, "deps", "--arch", "amd64"],
                    env=box.env(FAKE_MISSING="valgrind"))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertIn("deps needs root to install valgrind", r.stderr)
            self.assertIn("run 'sudo ", r.stderr)
            self.assertIn("mesa-fork deps --arch amd64' once", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertNotIn("apt-get", " ".join(box.apt_calls()))
            self.assertFalse(box.apt_files().get(os.path.join("sources.list.d",
                                                              "mesa-fork.sources")))

    def test_install_as_a_user_stops_at_deps_without_a_terminal(self):
        """No terminal to ask sudo's password on: install says what to run
        as root, and has run no apt-get and fetched nothing."""
        with tempfile.TemporaryDirectory() as tmp:
            box = self.sandbox(tmp)
            r = subprocess.run(NOBODY + [forklib.CLI, "install"],
                               env=box.env(FAKE_MISSING="valgrind"),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=300)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertIn("install: needs root once, for 'deps'", r.stdout)
            self.assertIn("then this command again", r.stderr)
            self.assertNotIn("apt-get", " ".join(box.apt_calls()))
            self.assertEqual(os.listdir(box.work), [])


class AsahiUapiPin(unittest.TestCase):
    """<drm/asahi_drm.h> is pinned by its own sha256 (config/fork.ini
    [asahi_uapi] header_sha256) for every build; tests/test_archive.py
    checks where it is taken from when the archive moves on."""

    def conf(self):
        return config.load(forklib.TOP)

    def test_the_install_unpacked_the_pinned_header(self):
        pin = uapi.pinned_sha256(self.conf())
        with open(os.path.join(uapi.include_dir(forklib.WORK), ".source")) as f:
            self.assertIn("sha256 %s, from linux-libc-dev " % pin[:16], f.read())
        for d in (uapi.include_dir(forklib.WORK), uapi.first_dir(forklib.WORK)):
            self.assertEqual(sources.sha256(os.path.join(d, "drm", "asahi_drm.h")), pin)

    def test_the_build_reads_the_pinned_header(self):
        """hk_queue.c, compiled as the build compiles it, reads the pinned
        package's asahi_drm.h, not a host's own copy (which would come
        first if the pinned headers were searched after the system's)."""
        import json
        import shlex
        with open(os.path.join(forklib.WORK, "build", "mesa", "compile_commands.json")) as f:
            cmds = json.load(f)
        (entry,) = [c for c in cmds if c["file"].endswith("asahi/vulkan/hk_queue.c")]
        args = shlex.split(entry["command"])
        keep, skip = [], False
        for a in args:
            if skip:
                skip = False
                continue
            if a in ("-o", "-MF", "-MQ"):
                skip = True
                continue
            if a in ("-c", "-MD"):
                continue
            keep.append(a)
        r = subprocess.run(keep + ["-M"], cwd=entry["directory"], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        first = os.path.realpath(uapi.first_dir(forklib.WORK))
        deps = r.stdout.replace("\\\n", " ").split()
        used = [os.path.realpath(os.path.join(entry["directory"], d)) for d in deps
                if d.endswith("/drm/asahi_drm.h")]
        self.assertTrue(used, r.stdout[:2000])
        self.assertTrue(all(u.startswith(first + os.sep) for u in used), used)

def path_without_apt(tmp):
    """A directory of links to every command on PATH except apt* and dpkg*."""
    farm = os.path.join(tmp, "noapt-bin")
    os.makedirs(farm)
    for d in os.environ["PATH"].split(":"):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            src = os.path.join(d, name)
            dst = os.path.join(farm, name)
            if name.startswith(("apt", "dpkg")) or os.path.lexists(dst):
                continue
            if os.path.isfile(src) and os.access(src, os.X_OK):
                os.symlink(src, dst)
    return farm


def fake_release(tmp, content=forklib.MESA_VERSION + "\n"):
    """A tarball that says it is the base's Mesa and is not the release."""
    src = os.path.join(tmp, "fake", "mesa-" + forklib.MESA_VERSION)
    os.makedirs(src)
    with open(os.path.join(src, "VERSION"), "w") as f:
        f.write(content)
    tarball = os.path.join(tmp, "mesa-%s.tar.xz" % forklib.MESA_VERSION)
    subprocess.run(["tar", "cJf", tarball, "-C", os.path.dirname(src), os.path.basename(src)],
                   check=True)
    return tarball


def uapi_dir(tmp):
    d = os.path.join(tmp, "kernel-headers")
    os.makedirs(os.path.join(d, "drm"))
    open(os.path.join(d, "drm", "asahi_drm.h"), "w").close()
    return d


class InstallWithoutApt(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.farm_dir = tempfile.TemporaryDirectory()
        cls.farm = path_without_apt(cls.farm_dir.name)

    @classmethod
    def tearDownClass(cls):
        cls.farm_dir.cleanup()

    def no_apt(self, tmp, args, osr="ubuntu"):
        """install --no-deps ARGS on a system playing osr with neither apt
        nor dpkg on PATH."""
        box = Sandbox(tmp, osr)
        # Debian's debian.tar.xz (the security fixes) comes from a mirror's
        # pool: a file:// one here, so that the test needs no network.
        pool = os.path.join(tmp, "mirror", "pool", "main", "m", "mesa")
        os.makedirs(pool)
        for kind in ("dsc", "debian"):
            os.symlink(sources.debian_file(forklib.HOST.fork, kind),
                       os.path.join(pool, os.path.basename(
                           sources.debian_file(forklib.HOST.fork, kind))))
        env = box.env(PATH=self.farm, MESA_FORK_DEBIAN_POOL="file://" + os.path.join(
            tmp, "mirror"))
        for tool in ("apt-get", "apt", "apt-cache", "dpkg", "dpkg-query"):
            self.assertIsNone(shutil.which(tool, path=env["PATH"]))
        r = run([forklib.CLI, "install", "--no-deps"] + args, env=env, timeout=900)
        self.assertNotIn("Traceback", r.stderr)
        return box, r

    def test_prepares_the_release_tarball_with_our_series_only(self):
        orig = os.path.join(forklib.WORK, "cache", "mesa_%s.orig.tar.xz" % forklib.MESA_VERSION)
        debian_tar = "mesa_%s.debian.tar.xz" % forklib.DEBIAN_VERSION
        with tempfile.TemporaryDirectory() as tmp:
            headers = uapi_dir(tmp)
            # As a URL: downloaded with urllib, then verified (a plain path
            # is what test_series gives fetch --tarball).
            box, r = self.no_apt(tmp, ["--tarball", "file://" + orig, "--asahi-uapi",
                                       headers, "--prepare-only"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("download file://" + orig, r.stdout)
            self.assertIn("Debian's pool: file://%s/mirror/pool/main/m/mesa/" % tmp, r.stdout)
            self.assertIn("sha256 of %s, %s match config/fork.ini"
                          % (os.path.basename(sources.debian_file(forklib.HOST.fork, "dsc")),
                             debian_tar), r.stdout)
            self.assertEqual(made_files(os.path.join(box.work, "cache")),
                             sorted([debian_tar, os.path.basename(sources.debian_file(
                                 forklib.HOST.fork, "dsc")), "upstream.sha256",
                                 "upstream.tar.xz"]))
            self.assertIn("with Debian's security fixes (backport_STACK_ARRAY.patch, "
                          "CVE-2026-40393-part1.patch, CVE-2026-40393-part2.patch) and none "
                          "of %s's other patches" % forklib.DEBIAN_VERSION, r.stdout)
            self.assertIn("drm/asahi_drm.h in %s" % headers, r.stdout)
            self.assertIn("mesa-fork-memtypes will not be built", r.stdout)
            patches = sorted(glob.glob(os.path.join(forklib.TOP, "patches", "*.patch")))
            self.assertIn("= base + %d patches" % len(patches), r.stdout)
            self.assertIn("--prepare-only", r.stdout)
            tree = os.path.join(box.work, "mesa")

            def git(*a):
                return subprocess.run(["git", "-C", tree] + list(a), capture_output=True,
                                      text=True, check=True).stdout

            self.assertEqual(git("log", "-1", "--format=%s", "base").strip(),
                             "Mesa %s (upstream tarball, Debian's security fixes)"
                             % forklib.MESA_VERSION)
            self.assertFalse(os.path.exists(os.path.join(tree, "debian")))
            # Our series, in order, and nothing else above the base.
            subjects = []
            for p in patches:
                with open(p) as f:
                    subj = next(l for l in f if l.startswith("Subject: "))
                subjects.append(subj[len("Subject: [PATCH] "):].strip())
            got = git("log", "--reverse", "--format=%s", "base..HEAD").splitlines()
            self.assertEqual([g[:40] for g in got], [s[:40] for s in subjects])
            # Debian's security fixes are applied (each reverses cleanly) and
            # none of its other patches (each still applies forward).
            deb = os.path.join(tmp, "deb")
            os.makedirs(deb)
            subprocess.run(["tar", "xJf", os.path.join(forklib.WORK, "cache", debian_tar),
                            "-C", deb], check=True)
            pdir = os.path.join(deb, "debian", "patches")
            with open(os.path.join(pdir, "series")) as f:
                series = [l.split()[0] for l in f if l.strip() and not l.startswith("#")]
            self.assertTrue(series)
            fixes = forklib.config()["base"]["security_patches"].split()
            self.assertEqual(len(fixes), 3)
            for p in series:
                applied = p in fixes
                c = subprocess.run(["patch", "-p1", "--dry-run", "-s", "-i",
                                    os.path.join(pdir, p)] + (["-R"] if applied else ["-N"]),
                                   cwd=tree, capture_output=True)
                self.assertEqual(c.returncode, 0, "Debian's %s is %s" % (
                    p, "not applied" if applied else "applied, or does not apply"))
            # What the build then tells driverInfo.
            self.assertTrue(sources.uses_upstream(config.Fork(forklib.TOP, box.work)))

    def test_refuses_a_tarball_with_the_wrong_checksum(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = fake_release(tmp)
            for n, given in enumerate((fake, "file://" + fake)):
                with self.subTest(tarball=given):
                    run_dir = os.path.join(tmp, "run%d" % n)
                    box, r = self.no_apt(run_dir, ["--tarball", given,
                                                   "--asahi-uapi", uapi_dir(run_dir)])
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertIn("%s has sha256 " % given, r.stderr)
                    self.assertIn("not that of Mesa %s's release tarball"
                                  % forklib.MESA_VERSION, r.stderr)
                    cache = os.path.join(box.work, "cache")
                    self.assertEqual(made_files(cache), [],
                                     "a refused tarball must leave nothing usable")
                    self.assertFalse(os.path.exists(os.path.join(box.work, "mesa")))

    def test_bad_input_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            junk = os.path.join(tmp, "junk.tar.xz")
            with open(junk, "w") as f:
                f.write("not a tarball\n")
            headers = ["--asahi-uapi", uapi_dir(tmp)]
            cases = [
                (headers, "pass --tarball FILE or --tarball URL"),
                (headers + ["--tarball", os.path.join(tmp, "missing.tar.xz")],
                 "no such file"),
                (headers + ["--tarball", junk], "is not a readable tarball"),
                (headers + ["--tarball", "file://" + os.path.join(tmp, "missing.tar.xz")],
                 "cannot download"),
                (["--tarball", junk, "--asahi-uapi", tmp], "--asahi-uapi %s: no drm/" % tmp),
            ]
            if not os.path.exists("/usr/include/drm/asahi_drm.h"):
                cases.append((["--tarball", junk], "Honeykrisp needs <drm/asahi_drm.h>"))
            for n, (args, message) in enumerate(cases):
                with self.subTest(args=args):
                    _, r = self.no_apt(os.path.join(tmp, "case%d" % n), args)
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertIn(message, r.stderr)


class DebianLlvm(unittest.TestCase):
    """The LLVM deps installs is the newest of config/fork.ini's
    llvm_versions of which the machine's apt offers every package: 15 on
    bookworm (16 and 19 lack the SPIR-V translator there), 19 on trixie.
    apt's answers are stood in for (apt.apt_offers)."""

    BOOKWORM = {"15": "all", "16": "no spirv", "19": "no spirv", "14": "all"}
    TRIXIE = {"19": "all", "18": "no spirv", "17": "no spirv"}

    def offers(self, table):
        """apt_offers as a machine whose apt has, per LLVM version, every
        package ("all") or all but the SPIR-V translator's."""
        def offered(pkg):
            for v, what in table.items():
                if pkg in apt.with_llvm(table_llvm_packages(), v):
                    return what == "all" or "spirv" not in pkg
            return False
        return offered

    def pick(self, table):
        fork = config.Fork(forklib.TOP)
        saved = apt.apt_offers
        apt.apt_offers = self.offers(table)
        try:
            return apt.llvm_version(fork), apt.debian_packages(fork)
        finally:
            apt.apt_offers = saved

    def test_bookworm_gets_15_and_trixie_19(self):
        v, bookworm = self.pick(self.BOOKWORM)
        self.assertEqual(v, "15")
        self.assertIn("llvm-15-dev", bookworm)
        v, trixie = self.pick(self.TRIXIE)
        self.assertEqual(v, "19")
        self.assertEqual([p for p in trixie if "15" in p], [])
        self.assertEqual(sorted(set(trixie) - set(bookworm)),
                         ["clang-19", "libclang-19-dev", "libclang-cpp19-dev", "libclc-19",
                          "libclc-19-dev", "libllvmspirvlib-19-dev", "llvm-19-dev",
                          "llvm-spirv-19"])
        # Nothing else changes.
        self.assertEqual(len(trixie), len(bookworm))

    def test_no_complete_llvm_is_a_clear_error(self):
        with self.assertRaises(SystemExit):
            self.pick({"19": "no spirv", "16": "no spirv"})

    def test_this_machine_gets_a_version_of_the_list(self):
        """The control: the real apt of this machine answers."""
        fork = config.Fork(forklib.TOP)
        self.assertIn(apt.llvm_version(fork), fork.conf["base"]["llvm_versions"].split())


def table_llvm_packages():
    return [p for p in table()["debian"].packages if apt.with_llvm([p], "X") != [p]]


class DebianMirror(unittest.TestCase):
    """Which mirror the machine uses, from its own apt sources: an entry for
    the release's codename, or one that says stable, testing or sid, as
    Debian's installer may write; otherwise one clear line."""

    def mirror(self, text, codename="bookworm"):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "sources.list.d"))
            with open(os.path.join(tmp, "sources.list"), "w") as f:
                f.write(text)
            saved = os.environ.get(apt.APT_ETC_ENV)
            os.environ[apt.APT_ETC_ENV] = tmp
            try:
                return apt.debian_mirror(codename)[0]
            finally:
                if saved is None:
                    del os.environ[apt.APT_ETC_ENV]
                else:
                    os.environ[apt.APT_ETC_ENV] = saved

    def test_codename_and_aliases(self):
        self.assertEqual(self.mirror("deb http://a/debian bookworm main\n"
                                     "deb http://b/debian stable main\n"), "http://a/debian")
        for alias in ("stable", "testing", "sid", "unstable"):
            with self.subTest(alias=alias):
                self.assertEqual(self.mirror("deb http://m/debian-security stable-security "
                                             "main\ndeb http://m/debian %s main\n" % alias),
                                 "http://m/debian")

    def test_no_main_suite_is_a_clear_error(self):
        with self.assertRaises(SystemExit):
            self.mirror("deb http://m/debian bookworm-updates main\n")



class BuildTools(unittest.TestCase):
    def test_an_old_meson_is_missing_and_the_users_path_comes_first(self):
        """missing_build_tools finds an old meson first on PATH, as the build
        would run it; build_env keeps the user's PATH ahead of /usr/bin."""
        from mesafork import build
        with tempfile.TemporaryDirectory() as tmp:
            meson = os.path.join(tmp, "meson")
            with open(meson, "w") as f:
                f.write("#!/bin/sh\necho 0.63.0\n")
            os.chmod(meson, 0o755)
            saved = os.environ["PATH"]
            os.environ["PATH"] = tmp + ":" + saved
            try:
                env = build.build_env(forklib.TOP)
            finally:
                os.environ["PATH"] = saved
            dirs = env["PATH"].split(":")
            self.assertEqual(dirs[:2], ["/usr/lib/ccache", tmp])
            self.assertLess(dirs.index(tmp), dirs.index("/usr/bin"))
            self.assertIn("meson >= 1.1 (found 0.63.0)", distro.missing_build_tools(env))
            self.assertFalse([m for m in distro.missing_build_tools(build.build_env(forklib.TOP))
                              if m.startswith("meson")])


if __name__ == "__main__":
    unittest.main()
