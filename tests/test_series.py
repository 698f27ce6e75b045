# SPDX-License-Identifier: MIT
"""The patch series and the CLI verbs that manage it: fetch verifies what it
downloads, prepare and export round-trip, patches carry git mail and DEP-3."""

import email
import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import forklib
from forklib import run

PATCHES = sorted(glob.glob(os.path.join(forklib.TOP, "patches", "*.patch")))
COMPONENTS = ("hk", "asahi", "asahi/drm-shim", "panvk", "panfrost", "panfrost/drm-shim", "util",
              "drm-shim",
              "anv", "intel", "intel/drm-shim", "meson", "docs", "vulkan", "hk, panvk, anv")


class Series(unittest.TestCase):
    def test_series_is_not_empty(self):
        self.assertGreaterEqual(len(PATCHES), 4)

    def test_patches_are_git_mails_with_dep3_fields(self):
        for p in PATCHES:
            with self.subTest(patch=os.path.basename(p)):
                text = open(p).read()
                self.assertTrue(text.startswith("From 0000000000000000000000000000000000000000 "),
                                "not a zero-commit git mail")
                mail = email.message_from_string(text.split("\n", 1)[1])
                self.assertRegex(" ".join(mail["From"].split()), r"^.+ <[^ ]+@[^ ]+>$")
                subject = " ".join(mail["Subject"].split())
                self.assertTrue(subject.startswith("[PATCH] "), subject)
                prefix = subject[len("[PATCH] "):].split(":", 1)[0]
                self.assertIn(prefix, COMPONENTS, "subject prefix is not a Mesa component")
                self.assertLessEqual(len(subject) - len("[PATCH] "), 75, subject)
                self.assertIn(mail["Forwarded"], ("no", "not-needed", "yes")
                              if not (mail["Forwarded"] or "").startswith("http") else [mail["Forwarded"]])
                self.assertRegex(mail["Last-Update"] or "", r"^\d{4}-\d\d-\d\d$")
                self.assertNotIn("\n-- \n", text, "version signature makes churn")

    def test_readme_lists_every_patch_once(self):
        readme = open(os.path.join(forklib.TOP, "patches", "README.md")).read()
        listed = re.findall(r"\((\d{4}-[^)]*\.patch)\)", readme)
        self.assertEqual(sorted(listed), [os.path.basename(p) for p in PATCHES])

    def test_commit_messages_wrap_at_75_columns(self):
        for p in PATCHES:
            body = open(p).read().split("\n\n", 1)[1].split("\n---\n", 1)[0]
            for line in body.splitlines():
                with self.subTest(patch=os.path.basename(p), line=line[:30]):
                    self.assertLessEqual(len(line), 75)

    def test_export_check_matches_branch(self):
        r = run([forklib.CLI, "export", "--check"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("matches branch", r.stdout)

    def test_export_is_idempotent(self):
        """Exporting twice gives the same bytes: no dates or ids that churn."""
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            for d in (a, b):
                r = run([forklib.CLI, "export", "--output", d])
                self.assertEqual(r.returncode, 0, r.stderr)
            names = sorted(os.listdir(a))
            self.assertEqual(names, sorted(os.listdir(b)))
            self.assertEqual(names, [os.path.basename(p) for p in PATCHES])
            for n in names:
                self.assertEqual(open(os.path.join(a, n)).read(), open(os.path.join(b, n)).read())

    def test_series_applies_onto_the_base(self):
        """git am of patches/ onto the base gives exactly the branch's tree,
        and quilt-style patch -p1 takes every file too."""
        tree = os.path.join(forklib.WORK, "mesa")
        with tempfile.TemporaryDirectory() as tmp:
            wt = os.path.join(tmp, "wt")
            git = lambda *a, **kw: subprocess.run(["git", "-C", wt] + list(a), capture_output=True,
                                                  text=True, **kw)
            r = subprocess.run(["git", "-C", tree, "worktree", "add", "--detach", wt, "base"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            try:
                env = dict(os.environ, GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
                for p in PATCHES:
                    r = git("apply", "--check", "-p1", p)
                    self.assertEqual(r.returncode, 0, "%s: %s" % (os.path.basename(p), r.stderr))
                    r = git("am", "-q", p, env=env)
                    self.assertEqual(r.returncode, 0, "%s: %s" % (os.path.basename(p), r.stderr))
                r = subprocess.run(["git", "-C", tree, "rev-parse", "HEAD^{tree}"],
                                   capture_output=True, text=True)
                self.assertEqual(git("rev-parse", "HEAD^{tree}").stdout, r.stdout)
            finally:
                subprocess.run(["git", "-C", tree, "worktree", "remove", "--force", wt],
                               capture_output=True)

    def test_prepare_keeps_a_tree_that_matches(self):
        r = run([forklib.CLI, "prepare"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already holds base + patches/", r.stdout)


class Fetch(unittest.TestCase):
    def _work_with_cache(self, tmp):
        cache = os.path.join(tmp, "cache")
        shutil.copytree(os.path.join(forklib.WORK, "cache"), cache,
                        ignore=shutil.ignore_patterns("*.rejected", "upstream*"))
        return tmp

    def test_fetch_accepts_verified_cache(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, MESA_FORK_WORK=self._work_with_cache(tmp))
            r = run([forklib.CLI, "fetch"], env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("sha256 verified", r.stdout)

    def test_fetch_refuses_a_checksum_mismatch(self):
        """Flip one byte of the Debian tarball; fetch must refuse, not repair silently
        against a config that names other checksums."""
        with tempfile.TemporaryDirectory() as tmp:
            top = os.path.join(tmp, "repo")
            shutil.copytree(os.path.join(forklib.TOP, "bin"), os.path.join(top, "bin"))
            shutil.copytree(os.path.join(forklib.TOP, "config"), os.path.join(top, "config"))
            ini = os.path.join(top, "config", "fork.ini")
            text = open(ini).read()
            good = forklib.config()["base"]["sha256_orig"]
            open(ini, "w").write(text.replace(good, "0" * 64))
            work = self._work_with_cache(os.path.join(tmp, "work"))
            env = dict(os.environ, MESA_FORK_WORK=work)
            r = run([os.path.join(top, "bin", "mesa-fork"), "fetch"], env=env)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("checksums do not match", r.stderr)
            self.assertIn("expected " + "0" * 64, r.stderr)
            rejected = glob.glob(os.path.join(work, "cache", "*.rejected"))
            self.assertTrue(rejected, "the refused download must not stay usable")

    def test_pristine_tarball_and_prepare_after_a_pull(self):
        """fetch --tarball + prepare: the series applies to Mesa 25.0.7 without
        Debian's patches (Debian's orig tarball is the upstream release). Then
        the prepare cases: a tree behind patches/ (a pull) is rebuilt; a tree
        with unexported work is refused."""
        c = forklib.config()["base"]
        orig = os.path.join(forklib.WORK, "cache", "mesa_%s.orig.tar.xz" % c["upstream_version"])
        with tempfile.TemporaryDirectory() as tmp:
            top = os.path.join(tmp, "repo")
            for d in ("bin", "config"):
                shutil.copytree(os.path.join(forklib.TOP, d), os.path.join(top, d))
            os.makedirs(os.path.join(top, "patches"))
            for p in PATCHES[:-1]:
                shutil.copy(p, os.path.join(top, "patches"))
            cli = os.path.join(top, "bin", "mesa-fork")
            env = dict(os.environ, MESA_FORK_WORK=os.path.join(tmp, "work"))
            r = run([cli, "fetch", "--tarball", orig], env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run([cli, "prepare"], env=env, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("= base + %d patches" % (len(PATCHES) - 1), r.stdout)
            tree = os.path.join(tmp, "work", "mesa")
            base_msg = subprocess.run(["git", "-C", tree, "log", "-1", "--format=%s", "base"],
                                      capture_output=True, text=True).stdout
            self.assertIn("upstream tarball", base_msg)
            self.assertFalse(os.path.exists(os.path.join(tree, "debian")))

            # A pull brings the last patch: the untouched tree is rebuilt.
            shutil.copy(PATCHES[-1], os.path.join(top, "patches"))
            r = run([cli, "prepare"], env=env, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("patches/ changed since the tree was prepared", r.stdout)
            self.assertIn("= base + %d patches" % len(PATCHES), r.stdout)

            # Work committed in the tree and not exported: refused.
            with open(os.path.join(tree, "README.rst"), "a") as f:
                f.write("\nlocal work\n")
            g = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                     GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
            subprocess.run(["git", "-C", tree, "commit", "-qam", "docs: local work"],
                           env=g, check=True)
            r = run([cli, "prepare"], env=env, timeout=600)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("refusing to overwrite it", r.stderr)

    def test_fetch_tarball_refuses_other_version(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "mesa-24.0.0")
            os.makedirs(src)
            open(os.path.join(src, "VERSION"), "w").write("24.0.0\n")
            tarball = os.path.join(tmp, "mesa-24.0.0.tar.xz")
            subprocess.run(["tar", "cJf", tarball, "-C", tmp, "mesa-24.0.0"], check=True)
            env = dict(os.environ, MESA_FORK_WORK=os.path.join(tmp, "work"))
            r = run([forklib.CLI, "fetch", "--tarball", tarball], env=env)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("is Mesa 24.0.0, the series is for 25.0.7", r.stderr)


if __name__ == "__main__":
    unittest.main()
