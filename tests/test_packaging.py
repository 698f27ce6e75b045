# SPDX-License-Identifier: MIT
"""The pieces of `deb` and `bench` that do not need a package build: the
chroots (mmdebstrap, the unprivileged build user), their apt sources,
lintian's output, and the arithmetic of `bench hk`'s per-token figures."""

import contextlib
import io
import json
import os
import subprocess
import tempfile
import unittest

import forklib
from mesafork import apt, bench, chroot, config, deb, upstreaming

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


class BuildUser(unittest.TestCase):
    def test_the_build_user_owns_what_the_owner_of_work_owns(self):
        if os.geteuid() != 0:
            forklib.skip_optional("chown needs root")
        with tempfile.TemporaryDirectory() as tmp:
            fork = config.Fork(forklib.TOP, work=tmp)
            os.chown(tmp, 1234, 1234)
            self.assertEqual(deb.build_uid(fork), 1234)
            os.chown(tmp, 0, 0)
            self.assertEqual(deb.build_uid(fork), deb.FALLBACK_BUILD_UID)
            self.assertNotEqual(deb.FALLBACK_BUILD_UID, 0)

    def test_commands_as_the_user_change_uid_and_home(self):
        c = chroot.Chroot("/srv/root")
        as_user = c.command(["id", "-u"], user="builder")
        self.assertEqual(as_user[:3], ["chroot", "--userspec=builder:builder", "/srv/root"])
        self.assertIn("HOME=/home/builder", as_user)
        as_root = c.command(["id", "-u"])
        self.assertEqual(as_root[:2], ["chroot", "/srv/root"])
        self.assertIn("HOME=/root", as_root)


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
            forklib.skip_optional("becoming nobody needs root")
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
            forklib.skip_optional("mmdebstrap in root mode and chroot need root")
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
            per = bench.per_token(runner, lambda log: {"CAPTURE": log}, "m.gguf", (8, 24))
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
            per = bench.per_token(runner, lambda log: {"CAPTURE": log}, "m.gguf", (1, 2))
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
