# SPDX-License-Identifier: MIT
"""The pieces of `deb` and `bench` that do not need a package build: the
chroots (mmdebstrap, the unprivileged build user), their apt sources,
lintian's output, the drivers `deb` checks per architecture and profile,
the host user its host steps run as, how apt treats the fork's version
next to Debian's security updates, and the arithmetic of `bench hk`'s
per-token figures."""

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import aptlab
import forklib
from mesafork import apt, chroot, config, deb, proc, upstreaming
from mesafork.bench import hk

SAMPLE_LINTIAN = """\
running with root privileges is not recommended!
E: mesa-vulkan-drivers: shared-library-lacks-prerequisites usr/lib/x/libvulkan_asahi.so
W: mesa-vulkan-drivers: shared-library-lacks-version usr/lib/x/libvulkan_asahi.so a.so
W: mesa-vulkan-drivers: shared-library-lacks-version usr/lib/x/libvulkan_panfrost.so b.so
W: mesa source: newer-standards-version 4.7.2 (current is 4.7.0)
I: mesa-drm-shim: hardening-no-bindnow [usr/lib/x/libasahi_noop_drm_shim.so]
O: mesa-drm-shim: package-name-doesnt-match-sonames libasahi-noop-drm-shim
N:
N:   The listed shared library lacks a version in its SONAME.
"""


class Lintian(unittest.TestCase):
    def test_tags_are_counted_by_severity_package_and_tag(self):
        counts, tags = deb.lintian_tags(SAMPLE_LINTIAN)
        self.assertEqual(counts, {"E": 1, "W": 3, "I": 1, "O": 1})
        self.assertEqual(tags[("W", "mesa-vulkan-drivers", "shared-library-lacks-version")], 2)
        # A source package's lines are the source's, not a binary's.
        self.assertEqual(tags[("W", "mesa source", "newer-standards-version")], 1)
        self.assertNotIn(("W", "mesa", "source:"), tags)
        self.assertEqual(len(tags), 5)


def sources_dir(tmp, text):
    etc = os.path.join(tmp, "etc-apt")
    os.makedirs(os.path.join(etc, "sources.list.d"))
    with open(os.path.join(etc, "sources.list.d", "debian.sources"), "w") as f:
        f.write(text)
    return etc


# Written for this machine's release ({c}), which deb_sources looks for.
MAIN = ("Types: deb\nURIs: http://mirror.example/debian\nSuites: {c} {c}-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
SECURITY = ("\nTypes: deb\nURIs: http://security-mirror.example/debian-security\n"
            "Suites: {c}-security\nComponents: main\n")


class DebSources(unittest.TestCase):
    """The chroots' apt sources: the host's mirror, and the security
    archive the host really uses, not one guessed from the mirror."""

    def sources(self, text):
        fork = config.Fork(forklib.TOP)
        with tempfile.TemporaryDirectory() as tmp:
            old = os.environ.get(apt.APT_ETC_ENV)
            codename = apt.os_codename()
            os.environ[apt.APT_ETC_ENV] = sources_dir(tmp, text.replace("{c}", codename))
            try:
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    mirror, _ = apt.debian_mirror(codename)
                    lines = deb.deb_sources(fork, mirror, ["trixie", "trixie-updates"])
            finally:
                if old is None:
                    del os.environ[apt.APT_ETC_ENV]
                else:
                    os.environ[apt.APT_ETC_ENV] = old
        return lines.splitlines(), out.getvalue(), fork.conf["deb"]["suite"]

    def test_security_comes_from_the_hosts_security_entry(self):
        lines, said, suite = self.sources(MAIN + SECURITY)
        key = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        self.assertEqual(lines, [
            "deb %shttp://mirror.example/debian trixie main" % key,
            "deb %shttp://mirror.example/debian trixie-updates main" % key,
            "deb %shttp://security-mirror.example/debian-security %s-security main"
            % (key, suite)])
        self.assertEqual(said, "")

    def test_the_hosts_own_release_is_preferred_and_deb_src_ignored(self):
        text = MAIN + (
            "\nTypes: deb-src\nURIs: http://src-only.example/debian-security\n"
            "Suites: {c}-security\nComponents: main\n"
            "\nTypes: deb\nURIs: http://other.example/debian-security\n"
            "Suites: another-release-security\nComponents: main\n"
            "\nTypes: deb\nURIs: http://right.example/debian-security\n"
            "Suites: {c}-security\nComponents: main\n")
        lines, _, _ = self.sources(text)
        self.assertIn("http://right.example/debian-security", lines[-1])

    def test_no_security_entry_no_security_suite_and_it_is_said(self):
        lines, said, suite = self.sources(MAIN)
        self.assertEqual([l for l in lines if "security" in l], [])
        self.assertIn("no -security entry; the chroots get no %s-security" % suite, said)


# The environment of a root process not started by sudo.
NO_SUDO = {"PATH": "/usr/bin:/bin"}


class BuildUser(unittest.TestCase):
    def test_the_build_user_owns_what_the_owner_of_work_owns(self):
        if os.geteuid() != 0:
            forklib.skip_optional("root", "chown needs root")
        with tempfile.TemporaryDirectory() as tmp:
            fork = config.Fork(forklib.TOP, work=tmp)
            os.chown(tmp, 1234, 1234)
            self.assertEqual(deb.build_uid(fork, NO_SUDO), 1234)
            os.chown(tmp, 0, 0)
            self.assertEqual(deb.build_uid(fork, NO_SUDO), deb.FALLBACK_BUILD_UID)
            self.assertNotEqual(deb.FALLBACK_BUILD_UID, 0)
            # Under sudo: the user who ran it.
            self.assertEqual(deb.build_uid(fork, dict(NO_SUDO, SUDO_UID="1500",
                                                      SUDO_GID="1501")), 1500)

    def test_commands_as_the_user_change_uid_and_home(self):
        c = chroot.Chroot("/srv/root")
        as_user = c.command(["id", "-u"], user="builder")
        self.assertEqual(as_user[:3], ["chroot", "--userspec=builder:builder", "/srv/root"])
        self.assertIn("HOME=/home/builder", as_user)
        as_root = c.command(["id", "-u"])
        self.assertEqual(as_root[:2], ["chroot", "/srv/root"])
        self.assertIn("HOME=/root", as_root)


class HostUser(unittest.TestCase):
    """Run as root, debsrc (and deb outside its chroots) works as the
    invoking user: who ran sudo, else the owner of .work; root only when
    that is root too."""

    def test_who_the_invoking_user_is(self):
        if os.geteuid() != 0:
            self.assertIsNone(proc.invoking_user("/nonexistent", NO_SUDO))
            forklib.skip_optional("root", "the rest chowns, which needs root")
        with tempfile.TemporaryDirectory() as tmp:
            work = os.path.join(tmp, "work")
            os.chown(tmp, 2000, 2001)
            # No .work yet: the owner of the directory it will be made in.
            self.assertEqual(proc.invoking_user(work, NO_SUDO), (2000, 2001))
            os.mkdir(work)
            os.chown(work, 1234, 1235)
            self.assertEqual(proc.invoking_user(work, NO_SUDO), (1234, 1235))
            sudo = dict(NO_SUDO, SUDO_UID="1500", SUDO_GID="1501", SUDO_USER="someone")
            self.assertEqual(proc.invoking_user(work, sudo), (1500, 1501))
            os.chown(work, 0, 0)
            self.assertIsNone(proc.invoking_user(work, NO_SUDO))
            # sudo run by root: root.
            self.assertIsNone(proc.invoking_user(work, dict(NO_SUDO, SUDO_UID="0",
                                                            SUDO_GID="0")))

    def test_host_steps_run_as_that_user(self):
        """What a step run through proc.as_user writes, by Python and by the
        commands it runs, is the user's; its result comes back, and its
        die() ends the caller with the same status."""
        if os.geteuid() != 0:
            forklib.skip_optional("root", "changing uid needs root")
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            out = os.path.join(tmp, "out", "deeper")
            user = (2000, 2000)
            proc.user_dir(out, user)

            def step(where):
                with open(os.path.join(where, "by-python"), "w") as f:
                    f.write("x")
                # A stand-in for dpkg-source, quilt and dpkg-genchanges.
                subprocess.run(["sh", "-c", "mkdir sub && touch sub/by-command"], cwd=where,
                               check=True)
                return os.getuid(), os.getgid(), os.getgroups()

            self.assertEqual(proc.as_user(user, step, out), (2000, 2000, []))
            for path in (os.path.join(tmp, "out"), out, os.path.join(out, "by-python"),
                         os.path.join(out, "sub"), os.path.join(out, "sub", "by-command")):
                st = os.stat(path)
                self.assertEqual((st.st_uid, st.st_gid), user, path)
            self.assertEqual(os.stat(tmp).st_uid, 0)   # existed: left as it was
            self.assertEqual(os.geteuid(), 0)          # the caller stays root
            with self.assertRaises(SystemExit) as e:
                proc.as_user(user, proc.die, "(expected) stopped as uid 2000")
            self.assertEqual(e.exception.code, 1)
            # The child wrote what root wrote later: handed back.
            root_file = os.path.join(out, "by-root")
            open(root_file, "w").close()
            proc.hand_back(user, [os.path.join(tmp, "out")])
            self.assertEqual(os.stat(root_file).st_uid, 2000)
            # Without a user (everything root's): in this process, as root.
            self.assertEqual(proc.as_user(None, os.getuid), 0)


# The fork's drivers each build ships (the issue: deb --full on amd64 and
# deb on arm64 checked all three): with the profile, panvk and Honeykrisp
# everywhere and ANV on x86; without it, what Debian's rules build (panvk
# on Arm, ANV on x86) and Honeykrisp on arm64.
PROFILE = forklib.config()["debsrc"]["profile"]
SHIPPED = {("amd64", PROFILE): ["asahi", "panfrost", "intel"],
           ("arm64", PROFILE): ["asahi", "panfrost"],
           ("amd64", None): ["intel"],
           ("arm64", None): ["asahi", "panfrost"]}
# Manifests of drivers that are not the fork's, as a full build ships them.
OTHERS = {"amd64": ["radeon", "lvp", "intel_hasvk", "nouveau"],
          "arm64": ["broadcom", "freedreno", "radeon", "lvp"]}


def manifest(lib):
    return json.dumps({"file_format_version": "1.0.1",
                       "ICD": {"library_path": lib, "api_version": "1.4.305"}})


def package_with_manifests(outdir, arch, drivers, conf):
    """A stand-in mesa-vulkan-drivers for arch whose ICD manifests (named
    as Debian's merge script names them) name drivers' libraries."""
    files = {}
    for drv in drivers:
        lib = os.path.basename(conf["drivers"][drv].split()[0]) if drv in conf["drivers"] \
            else "libvulkan_%s.so" % drv
        files["usr/share/vulkan/icd.d/%s_icd.json" % drv] = manifest(lib)
    files["usr/share/vulkan/implicit_layer.d/VkLayer_MESA_device_select.json"] = "{}"
    return aptlab.standin_deb(outdir, forklib.DEBIAN_VERSION + "+mesafork1", arch=arch,
                              files=files)


class FakeTestChroot:
    """Stands in for deb's test chroot: vulkaninfo answers as the driver
    whose shim is preloaded would, vkcheck passes; records the drivers."""

    def __init__(self, conf):
        self.conf = conf
        self.shims = {os.path.basename(conf["drivers"][d].split()[1]): d for d in conf["drivers"]}
        self.seen = []

    def capture(self, cmd, env=None, cwd="/", user=None):
        drv = self.shims[os.path.basename(env["LD_PRELOAD"])]
        if cmd[0] == "vulkaninfo":
            if drv not in self.seen:
                self.seen.append(drv)
            out = "Devices:\n  driverName = %s\n  driverInfo = Mesa %s (%s)\n" % (
                deb.DRIVER_NAMES[drv], config.debian_version(self.conf),
                config.fork_release(self.conf))
        else:
            out = "0 validation message(s)\n"
        return subprocess.CompletedProcess(cmd, 0, out, "")


class ShippedDrivers(unittest.TestCase):
    """`deb` checks exactly the drivers whose ICD manifests the built
    packages ship, per architecture and profile: derived from [debsrc]
    (what the debian/rules edit uses), and read from the .debs."""

    def test_expected_per_architecture_and_profile(self):
        for (arch, profile), want in SHIPPED.items():
            for conf in (forklib.config(), config.load(forklib.TOP, arch)):
                self.assertEqual(deb.expected_drivers(conf, arch, profile), want,
                                 (arch, profile))
        # Outside amd64 and arm64 too: i386 (Steam) and armhf.
        conf = forklib.config()
        self.assertEqual(deb.expected_drivers(conf, "i386", None), ["intel"])
        self.assertEqual(deb.expected_drivers(conf, "armhf", None), ["panfrost"])
        self.assertEqual(deb.expected_drivers(conf, "armhf", PROFILE), ["asahi", "panfrost"])

    def test_show_drivers_checks_what_the_packages_ship(self):
        """show_drivers, on stand-in packages for each architecture and
        profile, runs vulkaninfo and vkcheck for exactly the drivers their
        manifests name; one the build should ship and does not stops it."""
        with tempfile.TemporaryDirectory() as tmp:
            for (arch, profile), want in SHIPPED.items():
                fork = config.Fork(forklib.TOP, work=tmp, arch=arch if arch != forklib.HOST.arch
                                   else None)
                d = os.path.join(tmp, "%s-%s" % (arch, profile))
                os.makedirs(d)
                debs = [package_with_manifests(d, arch, want + ([] if profile else OTHERS[arch]),
                                               fork.conf),
                        aptlab.standin_deb(d, forklib.DEBIAN_VERSION + "+mesafork1",
                                           "mesa-drm-shim", arch=arch)]
                self.assertEqual(deb.shipped_drivers(fork.conf, debs)[0], want)
                fake = FakeTestChroot(fork.conf)
                with contextlib.redirect_stdout(io.StringIO()):
                    ok = deb.show_drivers(fork, fake, "/opt/prefix", debs, arch, profile)
                self.assertTrue(ok, (arch, profile))
                self.assertEqual(fake.seen, want, (arch, profile))
            # arm64 packages without Honeykrisp's manifest: stopped, saying so.
            fork = config.Fork(forklib.TOP, work=tmp)
            d = os.path.join(tmp, "broken")
            os.makedirs(d)
            debs = [package_with_manifests(d, "arm64", ["panfrost"], fork.conf)]
            with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
                deb.show_drivers(fork, FakeTestChroot(fork.conf), "/opt/prefix", debs, "arm64",
                                 PROFILE)
            self.assertIn("ship the manifests of panfrost (panfrost_icd.json); a build for "
                          "arm64 with the profile must ship asahi, panfrost", err.getvalue())


def version_lt(a, b):
    return subprocess.run(["dpkg", "--compare-versions", a, "lt", b]).returncode == 0


class ForkVersion(unittest.TestCase):
    """The fork's version, <base>+mesaforkN, sorts above the base and below
    every later upload Debian can make of the same upstream release, so a
    Debian security update is an upgrade over the fork (docs/shipping.md,
    section 4)."""

    def test_the_fork_sorts_between_the_base_and_any_debian_update(self):
        conf = forklib.config()
        base = conf["base"]["version"]
        ours = config.debian_version(conf)
        self.assertTrue(version_lt(base, ours))
        # +deb13u2 ... +deb13u12: two digits too (u10 < u9 as text, not as a version).
        for n in range(1, 12):
            self.assertTrue(version_lt(ours, deb.next_update(base, n)), n)
        self.assertEqual(deb.next_update("1.2-3+deb99u1", 9), "1.2-3+deb99u10")
        # A new Debian revision (sid's next upload) and forky's Mesa.
        upstream, revision = base.rsplit("-", 1)
        self.assertTrue(version_lt(ours, "%s-%d" % (upstream, int(revision.split("+")[0]) + 1)))
        self.assertTrue(version_lt(ours, "%d.0.0-1" % (int(upstream.split(".")[0]) + 1)))
        # The fork's next release upgrades the fork and still yields to Debian.
        c = config.load(forklib.TOP)
        c["fork"]["release"] = str(int(c["fork"]["release"]) + 1)
        self.assertTrue(version_lt(ours, config.debian_version(c)))
        self.assertTrue(version_lt(config.debian_version(c), deb.next_update(base)))
        # The fork rebuilt on the update sorts above it, below the one after.
        c["base"]["version"] = deb.next_update(base)
        self.assertTrue(version_lt(deb.next_update(base), config.debian_version(c)))
        self.assertTrue(version_lt(config.debian_version(c), deb.next_update(base, 2)))
        # The exception docs/shipping.md names: a binNMU of the base (a
        # rebuild without a source change) sorts below the fork.
        self.assertTrue(version_lt(base + "+b1", ours))
        with open(os.path.join(forklib.TOP, "docs", "shipping.md")) as f:
            self.assertTrue("`%s+b1`" % base in f.read(), "docs/shipping.md does not say so")


def doc_apt_preferences():
    """{path: text} of each file under /etc/apt/preferences.d/ that
    docs/shipping.md gives users (a code block whose first line is
    '# /etc/apt/preferences.d/NAME')."""
    with open(os.path.join(forklib.TOP, "docs", "shipping.md")) as f:
        doc = f.read()
    return {m.group(1): m.group(2) for m in re.finditer(
        r"```\n# (/etc/apt/preferences\.d/\S+)\n(.*?)```", doc, re.S)}


class SecurityUpdates(unittest.TestCase):
    """A Debian security update of Mesa is never hidden behind the fork:
    in a small trixie root, from signed stand-in archives (Debian's, with
    the base, a stand-in trixie-security and forky; the fork's), with
    whatever apt preferences docs/shipping.md gives users in place."""

    def setUp(self):
        if os.geteuid() != 0:
            forklib.skip_optional("root", "mmdebstrap in root mode and chroot need root")
        aptlab.need("reprepro", "gpg", "mmdebstrap")
        conf = forklib.config()
        self.base = conf["base"]["version"]
        self.ours = config.debian_version(conf)
        self.update = deb.next_update(self.base)
        upstream = self.base.split("-")[0]
        self.forky = "%d.0.0-1" % (int(upstream.split(".")[0]) + 1)
        os.makedirs(os.path.join(forklib.WORK, "tmp"), exist_ok=True)
        self.tmp = tempfile.mkdtemp(dir=os.path.join(forklib.WORK, "tmp"))
        os.chmod(self.tmp, 0o755)
        self.addCleanup(shutil.rmtree, self.tmp)
        self.key = aptlab.Key(self.tmp)
        self.addCleanup(self.key.close)
        repos = os.path.join(self.tmp, "repos")
        os.makedirs(repos)
        self.key.export(os.path.join(repos, "archive-key.gpg"))
        debs = os.path.join(self.tmp, "debs")
        os.makedirs(debs)
        self.deb = {v: aptlab.standin_deb(debs, v) for v in
                    (self.base, self.ours, self.update, deb.next_update(self.base, 2),
                     self.forky)}
        self.debian = aptlab.Archive(os.path.join(repos, "debian"), self.key,
                                     ["trixie", "trixie-security", "forky"], "Debian-stand-in")
        self.fork = aptlab.Archive(os.path.join(repos, "fork"), self.key, ["trixie"],
                                   "mesa-fork")
        self.debian.reprepro(["includedeb", "trixie", self.deb[self.base]])
        self.fork.reprepro(["includedeb", "trixie", self.deb[self.ours]])
        with contextlib.redirect_stdout(io.StringIO()):
            self.root = aptlab.AptRoot("updates", repos)
        self.addCleanup(self.root.remove)
        key = "/etc/apt/keyrings/archive-key.gpg"
        shutil.copy(os.path.join(repos, "archive-key.gpg"), self.root.path(key))
        self.sources("trixie")
        for path, text in doc_apt_preferences().items():
            self.root.write(path, text)
        mounted = self.root.chroot.mounted()
        mounted.__enter__()
        self.addCleanup(mounted.__exit__, None, None, None)
        # A user of the fork: Debian's trixie and the fork's archive; apt
        # takes the fork's package, the higher version.
        self.apt(["update"])
        self.apt(["install", "mesa-vulkan-drivers"])
        self.assertEqual(self.root.installed(), self.ours)

    def sources(self, release):
        key = "/etc/apt/keyrings/archive-key.gpg"
        debian = "file:%s/debian" % aptlab.AptRoot.INSIDE
        lines = [aptlab.sources_line(debian, release, key)]
        if release == "trixie":
            lines.append(aptlab.sources_line(debian, "trixie-security", key))
        lines.append(aptlab.sources_line("file:%s/fork" % aptlab.AptRoot.INSIDE, "trixie", key))
        self.root.write("/etc/apt/sources.list.d/test.list", "".join(lines))

    def apt(self, args, ok=True):
        r = self.root.apt(args)
        if ok:
            self.assertEqual(r.returncode, 0, "%s: %s" % (args, r.stdout))
        return r

    def publish(self, codename, version):
        self.debian.reprepro(["includedeb", codename, self.deb[version]])
        self.apt(["update"])

    def upgradable(self):
        return deb.upgradable(self.root.chroot)

    def test_a_security_update_replaces_the_fork(self):
        self.publish("trixie-security", self.update)
        # Listed, and the candidate...
        self.assertEqual(self.upgradable(), {"mesa-vulkan-drivers": (self.update, self.ours)})
        self.assertEqual(deb.candidate(self.root.chroot)[0], self.update)
        # ... and `apt upgrade` installs it over the fork.
        r = self.apt(["apt", "upgrade", "-y"])
        self.assertEqual(self.root.installed(), self.update, r.stdout)
        # The fork rebuilt on it (docs/shipping.md: [base] moved, debsrc,
        # build) sorts above it: the next `apt upgrade` takes it back.
        c = config.load(forklib.TOP)
        c["base"]["version"] = self.update
        rebuilt = config.debian_version(c)
        self.fork.reprepro(["includedeb", "trixie", aptlab.standin_deb(
            os.path.dirname(self.deb[self.base]), rebuilt)])
        self.apt(["update"])
        self.assertEqual(self.upgradable(), {"mesa-vulkan-drivers": (rebuilt, self.update)})
        self.apt(["apt", "upgrade", "-y"])
        self.assertEqual(self.root.installed(), rebuilt)

    def test_held_the_fork_shows_the_update_as_held_back(self):
        """The documented alternative: apt-mark hold keeps the fork, and
        apt still lists the update and says it is held back."""
        self.apt(["apt-mark", "hold", "mesa-vulkan-drivers"])
        self.publish("trixie-security", self.update)
        self.assertEqual(self.upgradable(), {"mesa-vulkan-drivers": (self.update, self.ours)})
        r = self.apt(["upgrade"])
        self.assertIn("The following packages have been kept back:\n  mesa-vulkan-drivers",
                      r.stdout)
        self.assertEqual(self.root.installed(), self.ours)
        r = self.apt(["apt", "upgrade", "-y"])
        self.assertIn("Not upgrading:\n  mesa-vulkan-drivers", r.stdout)
        self.assertEqual(self.root.installed(), self.ours)
        # Before an upgrade to forky: held, it stays trixie's fork; unheld,
        # forky's Mesa replaces it.
        self.debian.reprepro(["includedeb", "forky", self.deb[self.forky]])
        self.sources("forky")
        self.apt(["update"])
        r = self.apt(["-s", "dist-upgrade"])
        self.assertIn("kept back:\n  mesa-vulkan-drivers", r.stdout)
        self.apt(["apt-mark", "unhold", "mesa-vulkan-drivers"])
        self.apt(["dist-upgrade"])
        self.assertEqual(self.root.installed(), self.forky)

    def test_an_upgrade_to_forky_replaces_the_fork(self):
        self.debian.reprepro(["includedeb", "forky", self.deb[self.forky]])
        self.sources("forky")
        self.apt(["update"])
        self.assertEqual(self.upgradable(), {"mesa-vulkan-drivers": (self.forky, self.ours)})
        self.apt(["dist-upgrade"])
        self.assertEqual(self.root.installed(), self.forky)


class ChrootStamp(unittest.TestCase):
    """A tree is made again exactly when what it was made from changes."""

    ARGS = ("trixie", "minbase", "deb http://mirror.example/debian trixie main\n",
            ["ccache"], "amd64")

    def test_a_matching_stamp_makes_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            c = chroot.Chroot(os.path.join(tmp, "root"))
            os.makedirs(c.root)
            with open(os.path.join(c.root, chroot.STAMP), "w") as f:
                f.write(c.stamp_text(*self.ARGS, foreign=()))
            # mmdebstrap is not on PATH: anything that would run it fails.
            old = os.environ["PATH"]
            os.environ["PATH"] = "/nonexistent"
            try:
                self.assertFalse(c.ensure(*self.ARGS))
            finally:
                os.environ["PATH"] = old

    def test_each_input_is_in_the_stamp(self):
        c = chroot.Chroot("/x")
        base = c.stamp_text(*self.ARGS, foreign=())
        changed = [
            ("sid",) + self.ARGS[1:],
            self.ARGS[:1] + ("buildd",) + self.ARGS[2:],
            self.ARGS[:2] + ("deb http://other.example/debian trixie main\n",) + self.ARGS[3:],
            self.ARGS[:3] + (["ccache", "lintian"],) + self.ARGS[4:],
            self.ARGS[:4] + ("arm64",)]
        for args in changed:
            self.assertNotEqual(c.stamp_text(*args, foreign=()), base, args)
        self.assertNotEqual(c.stamp_text(*self.ARGS, foreign=("arm64",)), base)
        self.assertNotEqual(c.stamp_text(*self.ARGS, foreign=(),
                                         apt_options=['Acquire::Languages "none"']), base)

    def test_a_changed_stamp_as_a_user_is_one_line(self):
        if os.geteuid() != 0:
            forklib.skip_optional("root", "becoming nobody needs root")
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            code = ("import sys; sys.path.insert(0, %r); from mesafork import chroot; "
                    "chroot.Chroot(%r).ensure('trixie', 'minbase', '', [], 'amd64')"
                    % (os.path.join(forklib.TOP, "bin"), os.path.join(tmp, "root")))
            r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                "/usr/bin/python3", "-c", code], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertIn("needs root (mmdebstrap in root mode, then chroot and bind mounts)",
                          r.stderr)


class BuildChroot(unittest.TestCase):
    """A real chroot made by mmdebstrap, as `deb` makes its build chroot:
    the build user runs unprivileged, and what it writes into the bound
    directory belongs to it on the host."""

    def test_the_build_user_is_unprivileged(self):
        if os.geteuid() != 0:
            forklib.skip_optional("root", "mmdebstrap in root mode and chroot need root")
        fork = config.Fork(forklib.TOP)
        suite = fork.conf["deb"]["suite"]
        mirror, _ = apt.debian_mirror(apt.os_codename())
        os.makedirs(os.path.join(forklib.WORK, "tmp"), exist_ok=True)
        shared = tempfile.mkdtemp(dir=os.path.join(forklib.WORK, "tmp"))
        try:
            c = chroot.Chroot(os.path.join(forklib.WORK, "chroot", "%s-test-user" % suite),
                              [(shared, "/srv/shared")])
            with contextlib.redirect_stdout(io.StringIO()):
                c.ensure(suite, "minbase",
                         chroot.sources_list(mirror, [suite], chroot.DEBIAN_KEYRING), [],
                         fork.host_arch, apt_options=['Acquire::Languages "none"'])
            # The apt options stay in the tree for its own apt.
            conf = os.path.join(c.root, "etc", "apt", "apt.conf.d", "99mmdebstrap")
            self.assertIn('Acquire::Languages "none"', open(conf).read())
            uid = 4321
            with c.mounted():
                c.add_user("builder", uid)
                keep = os.path.join(c.root, "home", "builder", "kept")
                open(keep, "w").close()
                c.add_user("builder", uid)   # again: nothing to do, the home stays
                self.assertTrue(os.path.exists(keep))
                # Another name for a uid the tree already gives out: one line.
                with self.assertRaises(SystemExit), \
                        contextlib.redirect_stderr(io.StringIO()) as err:
                    c.add_user("other", uid)
                self.assertIn("id %d is taken by builder there" % uid, err.getvalue())
                os.chown(shared, uid, uid)
                r = c.capture(["sh", "-c", "id -u; id -g; echo $HOME; touch /srv/shared/made; "
                               "touch /etc/mesa-fork-test 2>/dev/null && echo ROOT || "
                               "echo refused"], user="builder")
                self.assertEqual(r.stdout.split(), [str(uid), str(uid), "/home/builder",
                                                    "refused"], r.stdout)
                st = os.stat(os.path.join(shared, "made"))
                self.assertEqual((st.st_uid, st.st_gid), (uid, uid))
                self.assertEqual(c.capture(["id", "-u"]).stdout.strip(), "0")
            self.assertFalse(os.path.exists(os.path.join(c.root, "proc", "self")),
                             "left /proc mounted")
        finally:
            subprocess.run(["rm", "-rf", shared])


class FakeRunner:
    """Stands in for the chroot bench runs llama-bench in: answers with
    the llama-bench JSON and writes the capture lines given per token
    count."""

    def __init__(self, work, per_tokens):
        self.work = work
        self.per_tokens = per_tokens

    def run_in(self, cmd, env=None, capture=False):
        tokens = int(cmd[cmd.index("-n") + 1])
        with open(env["CAPTURE"], "w") as f:
            for line in self.per_tokens[tokens]:
                f.write(json.dumps(line) + "\n")
        out = json.dumps([{"avg_ts": 12.5, "model_size": 1000}])
        return subprocess.CompletedProcess(cmd, 0, out, "")


def compute(submit, launches, barriers, terminated=True, last="B"):
    return {"type": "compute", "submit": submit, "launches": launches, "barriers": barriers,
            "terminated": terminated, "blocks": ["L"] * launches + [last, "T"]}


class BenchArithmetic(unittest.TestCase):
    """bench hk's per-token figures: the difference of two decodes divided
    by the difference in tokens, from the shim's capture."""

    def test_per_token_is_the_difference_over_the_tokens(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "tmp"))
            # 8 tokens: 3 SUBMITs, 4 commands; 24 tokens: 7 SUBMITs, 12 commands.
            runner = FakeRunner(tmp, {
                8: [compute(0, 5, 2), compute(0, 3, 1), compute(1, 2, 2),
                    {"type": "render", "submit": 2}],
                24: [compute(s, 4, 2) for s in range(6)] + [compute(6, 6, 3)] +
                    [{"type": "render", "submit": 6}] * 4 + [{"type": "bo"}]})
            per = hk.per_token(runner, lambda log: {"CAPTURE": log}, "m.gguf", (8, 24))
        self.assertEqual(per["submissions"], (7 - 3) / 16)
        self.assertEqual(per["commands"], (11 - 4) / 16)
        self.assertEqual(per["compute_commands"], (7 - 3) / 16)
        self.assertEqual(per["launches"], (30 - 10) / 16)
        self.assertEqual(per["barriers"], (15 - 5) / 16)
        self.assertEqual(per["unterminated"], 0)
        self.assertEqual(per["model_bytes"], 1000)

    def test_streams_without_a_final_barrier_and_unterminated_are_counted(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "tmp"))
            runner = FakeRunner(tmp, {
                1: [compute(0, 2, 1, last="L")],
                2: [compute(0, 2, 1, terminated=False), compute(1, 1, 1)]})
            per = hk.per_token(runner, lambda log: {"CAPTURE": log}, "m.gguf", (1, 2))
        self.assertEqual(per["streams_without_final_barrier"], 1)
        self.assertEqual(per["unterminated"], 1)


class UpstreamClassification(unittest.TestCase):
    """export --upstream's reading of a commit: its Forwarded trailer and
    whether every file it touches is scaffolding."""

    PREFIXES = ["src/drm-shim/", "src/asahi/drm-shim/"]

    def test_classes(self):
        c = upstreaming.classify
        self.assertEqual(c("no", ["src/drm-shim/device.c"], self.PREFIXES), upstreaming.MR)
        self.assertEqual(c("not-needed", ["src/asahi/drm-shim/a.c", "src/drm-shim/b.c"],
                           self.PREFIXES), upstreaming.SCAFFOLDING)
        self.assertEqual(c("not-needed", ["src/asahi/drm-shim/a.c", "src/asahi/lib/b.c"],
                           self.PREFIXES), upstreaming.PREREQUISITE)
        self.assertEqual(c("not-needed", [], self.PREFIXES), upstreaming.PREREQUISITE)
        self.assertEqual(c("Not-Needed", ["src/asahi/lib/b.c"], self.PREFIXES, "hk: knob",
                           ["hk: knob"]), upstreaming.FORK_ONLY)
        self.assertEqual(c("not-needed", ["src/asahi/lib/b.c"], self.PREFIXES, "hk: other",
                           ["hk: knob"]), upstreaming.PREREQUISITE)
        # A merge-request patch stays one even when named as fork-only.
        self.assertEqual(c("no", ["src/a.c"], self.PREFIXES, "hk: knob", ["hk: knob"]),
                         upstreaming.MR)
        with self.assertRaises(ValueError):
            c("yes", ["src/a.c"], self.PREFIXES)

    def test_forwarded_is_removed_and_nothing_else(self):
        msg = "hk: x\n\nBody says Forwarded: in a sentence.\n\nForwarded: no\n"
        self.assertEqual(upstreaming.strip_forwarded(msg),
                         "hk: x\n\nBody says Forwarded: in a sentence.\n")
        msg = "hk: x\n\nBody.\n\nReviewed-by: A <a@b>\nForwarded: no\n"
        self.assertEqual(upstreaming.strip_forwarded(msg),
                         "hk: x\n\nBody.\n\nReviewed-by: A <a@b>\n")
        msg = "hk: x\n\nThe patch was\nForwarded: upstream long ago.\n\nforwarded: no\n"
        self.assertEqual(upstreaming.strip_forwarded(msg),
                         "hk: x\n\nThe patch was\nForwarded: upstream long ago.\n")


if __name__ == "__main__":
    unittest.main()
