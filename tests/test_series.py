# SPDX-License-Identifier: MIT
"""The patch series and the CLI verbs that manage it: fetch verifies what it
downloads, prepare and export round-trip, patches carry git mail and DEP-3."""

import contextlib
import email
import glob
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import forklib
from forklib import run
from mesafork import build, config, sources

PATCHES = sorted(glob.glob(os.path.join(forklib.TOP, "patches", "*.patch")))
COMPONENTS = ("hk", "asahi", "asahi/drm-shim", "panvk", "panfrost", "panfrost/drm-shim", "util",
              "drm-shim",
              "anv", "intel", "intel/drm-shim", "meson", "docs", "vulkan", "hk, panvk, anv",
              "pan/va", "pan/bi")


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
                if prefix.startswith("nir/"):
                    # Mesa names a NIR pass by its file: nir/opt_algebraic
                    # for src/compiler/nir/nir_opt_algebraic.c, which the
                    # patch must change
                    self.assertIn("+++ b/src/compiler/nir/nir_%s.c" % prefix[len("nir/"):],
                                  text, "subject names a NIR pass the patch does not touch")
                else:
                    self.assertIn(prefix, COMPONENTS, "subject prefix is not a Mesa component")
                self.assertLessEqual(len(subject) - len("[PATCH] "), 75, subject)
                forwarded = mail["Forwarded"] or ""
                if forwarded.startswith("http"):
                    # A merge request or a mailing-list post: a whole URL
                    self.assertRegex(forwarded, r"^https://[a-z0-9.-]+\.[a-z]{2,}/\S+$")
                else:
                    self.assertIn(forwarded, ("no", "not-needed", "yes"))
                self.assertRegex(mail["Last-Update"] or "", r"^\d{4}-\d\d-\d\d$")
                self.assertNotIn("\n-- \n", text, "version signature makes churn")

    def test_readme_lists_every_patch_once(self):
        readme = open(os.path.join(forklib.TOP, "patches", "README.md")).read()
        listed = re.findall(r"\((\d{4}-[^)]*\.patch)\)", readme)
        self.assertEqual(sorted(listed), [os.path.basename(p) for p in PATCHES])

    def test_no_message_claims_a_hardware_measurement(self):
        """The project has no Apple, Mali or Intel GPU: a figure from such
        hardware is cited ("reported", with its source), never written as
        measured by the patch's author. A message that says "measured on
        an M2 Ultra" (or an RK3588, Arrow Lake, ...) is a false claim."""
        hardware = r"(an? )?(M[1-4]\b|M[1-4] (Max|Ultra|Pro)|RK3588|Mali|Apple|Arrow Lake|" \
            r"Meteor Lake|Lunar Lake|Intel|MTL|ARL|G6[1-9]0|such a machine)"
        claim = re.compile(r"\bmeasured\s+(on|with)\s+" + hardware.replace(" ", r"\s+") +
                           # a speed or time written as the author's measurement
                           r"|\bmeasured\s+[0-9.]+\s*(GB/s|MB/s|tok/s|us\b|ms\b)",
                           re.IGNORECASE)
        for p in PATCHES:
            body = open(p).read().split("\n\n", 1)[1].split("\n---\n", 1)[0]
            with self.subTest(patch=os.path.basename(p)):
                self.assertIsNone(claim.search(body), claim.search(body) and
                                  body[max(0, claim.search(body).start() - 80):
                                       claim.search(body).end() + 40])

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


def fake_repo(tmp, **sections):
    """A copy of bin/ and config/ under tmp/repo whose config/fork.ini has
    the given sections' keys replaced; returns the copied CLI."""
    top = os.path.join(tmp, "repo")
    for d in ("bin", "config"):
        shutil.copytree(os.path.join(forklib.TOP, d), os.path.join(top, d))
    # The package table the CLI reads (deps, the LLVM meson's native file names).
    os.makedirs(os.path.join(top, "docs"))
    shutil.copy(os.path.join(forklib.TOP, "docs", "build-deps.md"), os.path.join(top, "docs"))
    conf = forklib.config()
    for section, keys in sections.items():
        if section in conf and section == "drivers":
            conf.remove_section(section)
            conf.add_section(section)
        for k, v in keys.items():
            conf[section][k] = v
    with open(os.path.join(top, "config", "fork.ini"), "w") as f:
        conf.write(f)
    return os.path.join(top, "bin", "mesa-fork")


def fake_mesa_tree(tree, *commits):
    """A git tree tagged 'base' (a meson project building two files) with one
    commit per (subject, meson.build text or None) on top."""
    os.makedirs(tree)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    git = lambda *a: subprocess.run(["git", "-C", tree] + list(a), env=env, check=True,
                                    capture_output=True)
    with open(os.path.join(tree, "meson.build"), "w") as f:
        f.write("project('fake', 'c')\n"
                "foreach o : ['icd.so', 'shim.so']\n"
                "  custom_target(o, output : o, command : ['touch', '@OUTPUT@'])\n"
                "endforeach\n")
    with open(os.path.join(tree, "meson_options.txt"), "w") as f:
        f.write("option('fake', type : 'string', value : 'default')\n")
    git("init", "-q", "-b", "mesa-fork")
    git("add", "-A")
    git("commit", "-qm", "base")
    git("tag", "base")
    for subject, text in commits:
        if text is None:
            with open(os.path.join(tree, "README"), "a") as f:
                f.write(subject + "\n")
        else:
            with open(os.path.join(tree, "meson.build"), "w") as f:
                f.write(text)
        git("add", "-A")
        git("commit", "-qm", subject)


class Build(unittest.TestCase):
    def _option(self, bdir):
        r = subprocess.run(["meson", "introspect", "--buildoptions", bdir],
                           capture_output=True, text=True, check=True)
        return {o["name"]: o["value"] for o in json.loads(r.stdout)}["fake"]

    def test_an_option_dropped_from_the_config_leaves_the_build(self):
        with tempfile.TemporaryDirectory() as tmp:
            tree = os.path.join(tmp, "tree")
            fake_mesa_tree(tree)
            bdir = os.path.join(tmp, "build")
            env = forklib.build_env()
            native = ["--native-file", build.write_native_file(tmp)]
            with contextlib.redirect_stdout(io.StringIO()):
                build.configure(bdir, tree, ["-Dfake=fork"], native, env)
                self.assertEqual(self._option(bdir), "fork")
                build.configure(bdir, tree, ["-Dfake=changed"], native, env)
                self.assertEqual(self._option(bdir), "changed")
                build.configure(bdir, tree, [], native, env)
                self.assertEqual(self._option(bdir), "default")


class Bisect(unittest.TestCase):
    def test_a_commit_meson_cannot_configure_is_a_failing_commit(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli = fake_repo(tmp, meson={"options": "-Dfake=fork", "test_suites": "fake"},
                            drivers={"fake": "icd.so shim.so"})
            work = os.path.join(tmp, "work")
            fake_mesa_tree(os.path.join(work, "mesa"), ("fake: a good commit", None),
                           ("fake: break meson.build", "project('fake', 'c'\n"))
            r = run([cli, "bisect"], env=dict(os.environ, MESA_FORK_WORK=work))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertIn("1/2 fake: a good commit", r.stdout)
            self.assertIn("bisect: fake: break meson.build fails to configure", r.stderr)


class ExportKeepsPatches(unittest.TestCase):
    def test_a_branch_behind_patches_is_refused_until_drop(self):
        """patches/ holds a patch the branch lacks (the branch is behind a
        pull): export refuses to delete it and says what to do; --drop
        deletes it on purpose."""
        with tempfile.TemporaryDirectory() as tmp:
            cli = fake_repo(tmp)
            work = os.path.join(tmp, "work")
            fake_mesa_tree(os.path.join(work, "mesa"), ("fake: kept", None))
            patches = os.path.join(tmp, "repo", "patches")
            os.makedirs(patches)
            env = dict(os.environ, MESA_FORK_WORK=work)
            r = run([cli, "export"], env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(patches, "0002-fake-pulled.patch"), "w") as f:
                f.write("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
                        "Subject: [PATCH] fake: pulled from\n elsewhere\n\nbody\n")
            r = run([cli, "export"], env=env)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("holds 1 patch(es) the branch mesa-fork lacks "
                          "(0002-fake-pulled.patch)", r.stderr)
            self.assertIn("export --drop", r.stderr)
            self.assertTrue(os.path.exists(os.path.join(patches, "0002-fake-pulled.patch")))
            r = run([cli, "export", "--drop"], env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(sorted(os.listdir(patches)), ["0001-fake-kept.patch"])


def commit_tree(tree, commits):
    """Commits (subject, {path: text}, Forwarded trailer or None) on top of
    the tree's current branch."""
    env = dict(os.environ, GIT_AUTHOR_NAME="A U Thor", GIT_AUTHOR_EMAIL="author@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    for subject, files, fwd in commits:
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(tree, path)), exist_ok=True)
            with open(os.path.join(tree, path), "w") as f:
                f.write(text)
        subprocess.run(["git", "-C", tree, "add", "-A"], env=env, check=True)
        msg = subject + "\n\nWhy it matters.\n" + ("\nForwarded: %s\n" % fwd if fwd else "")
        subprocess.run(["git", "-C", tree, "commit", "-qF", "-"], input=msg, text=True, env=env,
                       check=True)


class ExportUpstream(unittest.TestCase):
    """`export --upstream DIR`: the patches marked 'Forwarded: no', in
    Mesa's style, on the prerequisites, without the shim scaffolding."""

    SERIES = [
        ("util: add a helper", {"src/util/helper.c": "int helper;\n"}, "no"),
        ("fake/drm-shim: model the kernel", {"src/drm-shim/model.c": "model v1\n"},
         "not-needed"),
        ("hk: use the helper", {"src/asahi/vulkan/hk.c": "helper();\n"}, "no"),
        ("asahi: backport what main has", {"src/asahi/lib/port.c": "port\n"}, "not-needed"),
        ("hk: fork-only knob", {"src/asahi/vulkan/knob.c": "knob\n"}, "not-needed"),
        ("hk: fix the port", {"src/asahi/lib/port.c": "port, fixed\n"}, "no"),
        ("fake/drm-shim: model more", {"src/drm-shim/model.c": "model v2\n"}, "not-needed"),
    ]

    def _repo(self, tmp, commits, left_out=""):
        cli = fake_repo(tmp, upstream_mr={"scaffolding": "src/drm-shim/", "left_out": left_out})
        work = os.path.join(tmp, "work")
        tree = os.path.join(work, "mesa")
        fake_mesa_tree(tree)
        commit_tree(tree, commits)
        return cli, dict(os.environ, MESA_FORK_WORK=work), tree

    def test_merge_request_series(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli, env, tree = self._repo(tmp, self.SERIES, left_out="hk: fork-only knob")
            out = os.path.join(tmp, "mr")
            r = run([cli, "export", "--upstream", out], env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(sorted(os.listdir(out)), [
                "0001-util-add-a-helper.patch", "0002-hk-use-the-helper.patch",
                "0003-hk-fix-the-port.patch", "README.md", "prerequisites", "series"])
            self.assertEqual(os.listdir(os.path.join(out, "prerequisites")),
                             ["0001-asahi-backport-what-main-has.patch"])
            order = [l for l in open(os.path.join(out, "series")).read().splitlines()
                     if not l.startswith("#")]
            self.assertEqual(order, ["0001-util-add-a-helper.patch", "0002-hk-use-the-helper.patch",
                                     "prerequisites/0001-asahi-backport-what-main-has.patch",
                                     "0003-hk-fix-the-port.patch"])
            for name in order:
                text = open(os.path.join(out, name)).read()
                self.assertNotIn("Forwarded:", text, name)
                self.assertIn("From: A U Thor <author@example.org>", text)
                self.assertIn("Why it matters.", text)
            readme = open(os.path.join(out, "README.md")).read()
            scaffolding = readme.split("## Left out: test scaffolding")[1].split("## ")[0]
            self.assertIn("- fake/drm-shim: model the kernel", scaffolding)
            self.assertIn("- fake/drm-shim: model more", scaffolding)
            self.assertIn("- hk: fork-only knob", readme.split("## Left out: fork-only")[1])
            # The branch bisect --upstream builds: no scaffolding in it.
            git = lambda *a: subprocess.run(["git", "-C", tree] + list(a), capture_output=True,
                                            text=True, check=True).stdout
            subjects = git("log", "--reverse", "--format=%s", "base..upstream-mr").splitlines()
            self.assertEqual(subjects, ["util: add a helper", "hk: use the helper",
                                        "asahi: backport what main has", "hk: fix the port"])
            files = git("ls-tree", "-r", "--name-only", "upstream-mr")
            self.assertNotIn("src/drm-shim/model.c", files)
            self.assertNotIn("src/asahi/vulkan/knob.c", files)
            # The series applies with git am on the base, in its order, and
            # gives the branch's tree.
            git("worktree", "add", "-q", "--detach", os.path.join(tmp, "am"), "base")
            am = subprocess.run(["git", "-C", os.path.join(tmp, "am"), "am", "-q"] +
                                [os.path.join(out, n) for n in order], capture_output=True,
                                text=True, env=dict(os.environ, GIT_COMMITTER_NAME="t",
                                                    GIT_COMMITTER_EMAIL="t@t"))
            self.assertEqual(am.returncode, 0, am.stderr)
            self.assertEqual(git("-C", os.path.join(tmp, "am"), "rev-parse", "HEAD^{tree}"),
                             git("rev-parse", "upstream-mr^{tree}"))
            # Again: the same files, the branch the same commits.
            first = {n: open(os.path.join(out, n)).read() for n in order}
            head = git("rev-parse", "upstream-mr")
            r = run([cli, "export", "--upstream", out], env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual({n: open(os.path.join(out, n)).read() for n in order}, first)
            self.assertEqual(git("rev-parse", "upstream-mr"), head)
            # A patch the branch no longer sends leaves the directory.
            git("reset", "-q", "--hard", "HEAD~2")
            commit_tree(tree, [self.SERIES[5][:2] + ("not-needed",), self.SERIES[6]])
            r = run([cli, "export", "--upstream", out], env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertFalse(os.path.exists(os.path.join(out, "0003-hk-fix-the-port.patch")))
            self.assertTrue(os.path.exists(os.path.join(out, "prerequisites",
                                                        "0002-hk-fix-the-port.patch")))

    def test_a_commit_without_forwarded_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli, env, _ = self._repo(tmp, self.SERIES[:1] +
                                     [("hk: unmarked", {"src/a.c": "a\n"}, None)])
            r = run([cli, "export", "--upstream", os.path.join(tmp, "mr")], env=env)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertIn("hk: unmarked (Forwarded: '')", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "mr")))

    def test_a_patch_on_the_scaffolding_is_refused(self):
        """A merge-request patch that changes a shim file the series left
        out cannot be cut; export says which and leaves no cherry-pick
        behind."""
        with tempfile.TemporaryDirectory() as tmp:
            cli, env, tree = self._repo(tmp, self.SERIES[:2] + [
                ("hk: also touch the shim", {"src/drm-shim/model.c": "model v1, and hk\n"},
                 "no")])
            r = run([cli, "export", "--upstream", os.path.join(tmp, "mr")], env=env)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("'hk: also touch the shim' does not apply without the commits "
                          "left out (fake/drm-shim: model the kernel)", r.stderr)
            wt = subprocess.run(["git", "-C", tree, "worktree", "list"], capture_output=True,
                                text=True).stdout
            self.assertEqual(len(wt.splitlines()), 1, wt)

    def test_the_trailer_is_read_in_any_case_and_only_the_trailer_goes(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli, env, tree = self._repo(tmp, [], left_out="")
            env_c = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@a",
                         GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
            with open(os.path.join(tree, "x.c"), "w") as f:
                f.write("x\n")
            subprocess.run(["git", "-C", tree, "add", "-A"], check=True)
            subprocess.run(["git", "-C", tree, "commit", "-qF", "-"], env=env_c, check=True,
                           text=True, input="hk: x\n\nThis line of the body says\nForwarded: "
                           "is a DEP-3 field.\n\nforwarded: no\n")
            out = os.path.join(tmp, "mr")
            r = run([cli, "export", "--upstream", out], env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            text = open(os.path.join(out, "0001-hk-x.patch")).read()
            self.assertIn("This line of the body says\nForwarded: is a DEP-3 field.\n---", text)
            self.assertNotIn("forwarded: no", text)

    def test_a_directory_with_other_files_or_patches_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli, env, tree = self._repo(tmp, self.SERIES[:1])
            mine = os.path.join(tmp, "outgoing")
            os.makedirs(mine)
            with open(os.path.join(mine, "0001-my-own.patch"), "w") as f:
                f.write("mine\n")
            for dest in (mine, os.path.join(tmp, "repo", "patches"), tree):
                r = run([cli, "export", "--upstream", dest], env=env)
                self.assertEqual(r.returncode, 1, dest + r.stdout + r.stderr)
                self.assertNotIn("Traceback", r.stderr)
            self.assertEqual(open(os.path.join(mine, "0001-my-own.patch")).read(), "mine\n")
            # Refused before anything was cut.
            self.assertEqual(subprocess.run(["git", "-C", tree, "branch", "--list",
                                             "upstream-mr"], capture_output=True,
                                            text=True).stdout, "")

    def test_a_left_out_subject_the_branch_lacks_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli, env, _ = self._repo(tmp, self.SERIES, left_out="hk: no such commit")
            r = run([cli, "export", "--upstream", os.path.join(tmp, "mr")], env=env)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("left_out names 'hk: no such commit'", r.stderr)

    def test_bisect_upstream_refuses_a_stale_branch(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli, env, tree = self._repo(tmp, self.SERIES[:1])
            r = run([cli, "export", "--upstream", os.path.join(tmp, "mr")], env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            commit_tree(tree, [("hk: later", {"src/later.c": "later\n"}, "no")])
            r = run([cli, "bisect", "--upstream"], env=env)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("was cut from", r.stderr)
            self.assertIn("run 'bin/mesa-fork export --upstream DIR' again", r.stderr)

    def test_bisect_upstream_needs_the_branch(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli, env, _ = self._repo(tmp, self.SERIES[:1])
            r = run([cli, "bisect", "--upstream"], env=env)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("no branch upstream-mr; run 'bin/mesa-fork export --upstream DIR' "
                          "first", r.stderr)


class ExportUpstreamOfTheSeries(unittest.TestCase):
    """The fork's own series cuts into a merge-request series: every patch
    marked 'Forwarded: no' lands in it, none needing a left-out patch's
    lines (a hunk whose context only a fork-only patch adds stops the cut)."""

    def test_the_real_branch_cuts(self):
        forwarded = [p for p in PATCHES
                     if re.search(r"^Forwarded: no$", open(p).read(), re.M)]
        self.assertTrue(forwarded)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "mr")
            r = run([forklib.CLI, "export", "--upstream", out], timeout=600)
            self.assertEqual(r.returncode, 0, (r.stdout + r.stderr)[-3000:])
            cut = [l for l in open(os.path.join(out, "series")).read().splitlines()
                   if l and not l.startswith("#") and not l.startswith("prerequisites/")]
        subject = lambda p: re.sub(r"^\d{4}-", "", os.path.basename(p))
        self.assertEqual(sorted(map(subject, cut)), sorted(map(subject, forwarded)))


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
            orig = "mesa_%s.orig.tar.xz" % forklib.MESA_VERSION
            self.assertIn("no source had %s with the pinned sha256" % orig, r.stderr)
            # The cached copy and each download with the real bytes are refused.
            self.assertIn("%s had sha256 %s, not %s" % (orig, good[:16], "0" * 16), r.stderr)
            self.assertIn("(refused)", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertFalse(os.path.exists(os.path.join(work, "cache", orig)),
                             "the refused file must not stay usable")
            rejected = glob.glob(os.path.join(work, "cache", "*.rejected"))
            self.assertTrue(rejected, "the cached copy is kept aside, not used")

    def _work_linking_cache(self, tmp):
        """A work directory whose cache links to the fetched files (Debian's
        sources and VMA's), so that nothing is downloaded or written back."""
        work = os.path.join(tmp, "work")
        cache = os.path.join(work, "cache")
        os.makedirs(cache)
        real = os.path.join(forklib.WORK, "cache")
        for name in os.listdir(real):
            if not name.startswith("upstream") and not name.endswith(".rejected"):
                os.symlink(os.path.join(real, name), os.path.join(cache, name))
        return work

    def _orig(self):
        c = forklib.config()["base"]
        return os.path.join(forklib.WORK, "cache", "mesa_%s.orig.tar.xz" % c["upstream_version"])

    def test_a_patch_that_does_not_apply_keeps_the_work_and_says_what_to_do(self):
        """prepare stops where git am stops, with the commands that finish
        or drop it; a second prepare refuses to remove the tree while that
        am is in progress (someone may be resolving it), and --force
        starts over."""
        with tempfile.TemporaryDirectory() as tmp:
            top = os.path.join(tmp, "repo")
            for d in ("bin", "config"):
                shutil.copytree(os.path.join(forklib.TOP, d), os.path.join(top, d))
            os.makedirs(os.path.join(top, "patches"))
            for p in PATCHES[:4]:
                shutil.copy(p, os.path.join(top, "patches"))
            # The third patch's first context line no longer matches.
            broken = os.path.join(top, "patches", os.path.basename(PATCHES[2]))
            with open(broken) as f:
                text = f.read()
            lines = text.split("\n")
            first = next(i for i, l in enumerate(lines) if l.startswith("@@")) + 1
            while not lines[first].startswith(" "):
                first += 1
            lines[first] = " this line is not in Mesa" + lines[first]
            with open(broken, "w") as f:
                f.write("\n".join(lines))
            cli = os.path.join(top, "bin", "mesa-fork")
            work = self._work_linking_cache(tmp)
            env = dict(os.environ, MESA_FORK_WORK=work)
            r = run([cli, "fetch", "--tarball", self._orig()], env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run([cli, "prepare"], env=env, timeout=600)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertIn("git am stopped on %s" % os.path.basename(broken), r.stderr)
            self.assertIn("am --continue", r.stderr)
            self.assertIn("then apply the 1 after it", r.stderr)
            self.assertIn("am --abort' and 'bin/mesa-fork prepare --force'", r.stderr)
            tree = os.path.join(work, "mesa")
            self.assertTrue(os.path.isdir(os.path.join(tree, ".git", "rebase-apply")))
            r = run([cli, "prepare"], env=env, timeout=600)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("a git am or rebase is in progress", r.stderr)
            self.assertIn("refusing to overwrite it", r.stderr)
            self.assertTrue(os.path.isdir(os.path.join(tree, ".git", "rebase-apply")))
            subjects = subprocess.run(["git", "-C", tree, "log", "--format=%s", "base..HEAD"],
                                      capture_output=True, text=True).stdout.splitlines()
            self.assertEqual(len(subjects), 2)

    def test_pristine_tarball_and_prepare_after_a_pull(self):
        """fetch --tarball + prepare: the series applies to Mesa 25.0.7 without
        Debian's patches (Debian's orig tarball is the upstream release), even
        with Debian's sources in the cache. Then the prepare cases: a tree
        behind patches/ (a pull) is rebuilt; a tree with unexported work is
        refused; a plain fetch brings Debian's base back."""
        with tempfile.TemporaryDirectory() as tmp:
            top = os.path.join(tmp, "repo")
            for d in ("bin", "config"):
                shutil.copytree(os.path.join(forklib.TOP, d), os.path.join(top, d))
            os.makedirs(os.path.join(top, "patches"))
            for p in PATCHES[:-1]:
                shutil.copy(p, os.path.join(top, "patches"))
            cli = os.path.join(top, "bin", "mesa-fork")
            work = self._work_linking_cache(tmp)
            env = dict(os.environ, MESA_FORK_WORK=work)
            r = run([cli, "fetch", "--tarball", self._orig()], env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("prepare will use the upstream tarball", r.stdout)
            r = run([cli, "prepare"], env=env, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("= base + %d patches" % (len(PATCHES) - 1), r.stdout)
            tree = os.path.join(work, "mesa")
            base = subprocess.run(["git", "-C", tree, "log", "-1", "--format=%s%n%cI", "base"],
                                  capture_output=True, text=True).stdout.split()
            self.assertEqual(" ".join(base[:-1]),
                             "Mesa %s (upstream tarball, Debian's security fixes)"
                             % forklib.MESA_VERSION)
            self.assertFalse(os.path.exists(os.path.join(tree, "debian")))
            # The base commit carries the release's date: that of its VERSION file.
            listing = subprocess.run(["tar", "tvf", self._orig(), "--full-time",
                                      "mesa-%s/VERSION" % forklib.MESA_VERSION],
                                     capture_output=True, text=True, env=dict(os.environ, TZ="UTC"))
            day, time_ = listing.stdout.split()[3:5]
            self.assertEqual(base[-1], "%sT%s+00:00" % (day, time_))

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
            subprocess.run(["git", "-C", tree, "reset", "-q", "--hard", "HEAD~"], check=True)

            # fetch without --tarball: Debian's source again, and prepare follows.
            r = run([cli, "fetch"], env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("prepare will use Debian's source again", r.stdout)
            r = run([cli, "prepare"], env=env, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("fetch chose 'Debian mesa", r.stdout)
            self.assertTrue(os.path.exists(os.path.join(tree, "debian")))

    def test_install_keeps_the_base_fetch_chose(self):
        """install fetches what it needs without undoing fetch --tarball."""
        with tempfile.TemporaryDirectory() as tmp:
            work = self._work_linking_cache(tmp)
            r = run([forklib.CLI, "fetch", "--tarball", self._orig()],
                    env=dict(os.environ, MESA_FORK_WORK=work))
            self.assertEqual(r.returncode, 0, r.stderr)
            fork = config.Fork(forklib.TOP, work)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                sources.fetch_chosen(fork)
            self.assertTrue(sources.uses_upstream(fork))
            self.assertIn("the upstream tarball 'fetch --tarball' verified is the base",
                          out.getvalue())

    def test_prepare_refuses_a_changed_upstream_tarball(self):
        with tempfile.TemporaryDirectory() as tmp:
            work = self._work_linking_cache(tmp)
            env = dict(os.environ, MESA_FORK_WORK=work)
            r = run([forklib.CLI, "fetch", "--tarball", self._orig()], env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(work, "cache", "upstream.tar.xz"), "ab") as f:
                f.write(b"\0")
            r = run([forklib.CLI, "prepare"], env=env)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("is not the tarball 'fetch --tarball' verified", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(work, "mesa")))

    def test_fetch_tarball_refuses_another_tarball_of_the_version(self):
        """A tarball that says it is the base's version but is not the
        release's bytes."""
        v = forklib.MESA_VERSION
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "mesa-" + v)
            os.makedirs(src)
            with open(os.path.join(src, "VERSION"), "w") as f:
                f.write(v + "\n")
            tarball = os.path.join(tmp, "mesa-%s.tar.xz" % v)
            subprocess.run(["tar", "cJf", tarball, "-C", tmp, "mesa-" + v], check=True)
            work = self._work_linking_cache(tmp)
            r = run([forklib.CLI, "fetch", "--tarball", tarball],
                    env=dict(os.environ, MESA_FORK_WORK=work))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("not that of Mesa %s's release tarball" % v, r.stderr)
            self.assertFalse(os.path.exists(os.path.join(work, "cache", "upstream.sha256")))

    def test_fetch_tarball_refuses_what_is_not_a_tarball(self):
        with tempfile.TemporaryDirectory() as tmp:
            junk = os.path.join(tmp, "mesa.tar.xz")
            with open(junk, "w") as f:
                f.write("not a tarball\n")
            r = run([forklib.CLI, "fetch", "--tarball", junk],
                    env=dict(os.environ, MESA_FORK_WORK=self._work_linking_cache(tmp)))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("is not a readable tarball", r.stderr)
            self.assertNotIn("Traceback", r.stderr)

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
            self.assertIn("is Mesa 24.0.0, the series is for " + forklib.MESA_VERSION, r.stderr)


if __name__ == "__main__":
    unittest.main()
