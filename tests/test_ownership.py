# SPDX-License-Identifier: MIT
"""Nothing the CLI did not make is ever deleted (issue 31, item 4).

MESA_FORK_WORK may name a directory of the user's: with $HOME, a Mesa
clone of theirs sits where prepare keeps its tree ($WORK/mesa), and a
build/ of theirs where the builds go. What the CLI makes it marks
(proc.make_dirs writes .mesa-fork-made into the topmost directory it
creates); every removal goes through proc.remove_owned or
proc.remove_tree, which stop in one line when neither the directory nor
one above it holds the mark."""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import forklib
from forklib import CLI

sys.path.insert(0, os.path.join(forklib.TOP, "bin"))
from mesafork import config as fork_config, proc  # noqa: E402

PACKAGE = os.path.join(forklib.TOP, "bin", "mesafork")


def call(code, *args, env=None):
    """Run code (Python, with bin/ on the path) in a process of its own:
    die() ends the process, and its stderr is what a user sees."""
    return subprocess.run([sys.executable, "-c",
                           "import sys; sys.path.insert(0, %r)\n" % os.path.join(
                               forklib.TOP, "bin") + code] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env, timeout=120)


def a_users_tree(path):
    """A directory the user made, with a file that must survive."""
    os.makedirs(path)
    with open(os.path.join(path, "mine.txt"), "w") as f:
        f.write("the user's\n")
    return os.path.join(path, "mine.txt")


class Ownership(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mesa-fork-own-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def assert_refused(self, r, path):
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(lines[0], r"^mesa-fork: error: refusing to delete %s: mesa-fork did "
                         r"not make it" % re.escape(path))

    def test_make_dirs_marks_the_topmost_directory_it_creates(self):
        user = os.path.join(self.tmp, "home")
        os.makedirs(user)
        deep = os.path.join(user, "build", "mesa", "sub")
        proc.make_dirs(deep)
        self.assertTrue(os.path.isdir(deep))
        self.assertFalse(os.path.exists(os.path.join(user, proc.MARK)))
        self.assertTrue(os.path.isfile(os.path.join(user, "build", proc.MARK)))
        self.assertEqual(proc.made_by_us(deep), os.path.join(user, "build"))
        self.assertIsNone(proc.made_by_us(user))
        # Again, with everything there: no new mark above or below.
        proc.make_dirs(deep)
        self.assertFalse(os.path.exists(os.path.join(deep, proc.MARK)))

    def test_an_unmarked_directory_is_refused_and_kept(self):
        d = os.path.join(self.tmp, "home", "mesa")
        mine = a_users_tree(d)
        for fn in ("remove_owned", "remove_tree"):
            with self.subTest(fn=fn):
                r = call("from mesafork import proc; proc.%s(sys.argv[1])" % fn, d)
                self.assert_refused(r, d)
                self.assertTrue(os.path.isfile(mine))

    def test_what_make_dirs_made_is_removed(self):
        d = proc.make_dirs(os.path.join(self.tmp, "home", "build", "mesa"))
        with open(os.path.join(d, "x.o"), "w") as f:
            f.write("x")
        proc.remove_owned(d)
        self.assertFalse(os.path.exists(d))
        # Nothing to remove is no error.
        proc.remove_owned(d)

    def test_a_link_is_unlinked_only_where_mesa_fork_made_it(self):
        mine = a_users_tree(os.path.join(self.tmp, "headers"))
        # In a directory of the user's: the link is theirs, refused.
        users = os.path.join(self.tmp, "home")
        os.makedirs(users)
        link = os.path.join(users, "mesa")
        os.symlink(os.path.dirname(mine), link)
        for fn in ("remove_owned", "remove_tree"):
            with self.subTest(fn=fn):
                r = call("from mesafork import proc; proc.%s(sys.argv[1])" % fn, link)
                self.assert_refused(r, link)
                self.assertTrue(os.path.islink(link))
        # In one mesa-fork made: only the link goes, never what it points to.
        ours = proc.make_dirs(os.path.join(self.tmp, "work", "deps"))
        for fn in (proc.remove_owned, proc.remove_tree):
            link = os.path.join(ours, "asahi-uapi")
            os.symlink(os.path.dirname(mine), link)
            fn(link)
            self.assertFalse(os.path.lexists(link))
            self.assertTrue(os.path.isfile(mine))

    def test_a_link_inside_the_work_directory_is_followed_to_whose_it_is(self):
        """$WORK is mesa-fork's, $WORK/build a link to the user's
        /scratch/builds: $WORK/build/mesa is really theirs."""
        work = proc.make_dirs(os.path.join(self.tmp, "work"))
        scratch = os.path.join(self.tmp, "scratch")
        mine = a_users_tree(os.path.join(scratch, "mesa"))
        os.symlink(scratch, os.path.join(work, "build"))
        target = os.path.join(work, "build", "mesa")
        r = call("from mesafork import proc; proc.remove_owned(sys.argv[1])", target)
        self.assert_refused(r, target)
        self.assertTrue(os.path.isfile(mine))

    def test_no_mark_lands_above_the_work_directory(self):
        """MESA_FORK_WORK=~/projects/mf with no ~/projects: ~/projects is
        made, unmarked; the work directory is marked."""
        work = os.path.join(self.tmp, "projects", "mf")
        proc.WORK_ROOTS.add(work)
        self.addCleanup(proc.WORK_ROOTS.discard, work)
        proc.make_dirs(os.path.join(work, "build", "mesa"))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "projects", proc.MARK)))
        self.assertTrue(os.path.isfile(os.path.join(work, proc.MARK)))
        self.assertIsNone(proc.made_by_us(os.path.join(self.tmp, "projects")))

    def test_export_output_leaves_a_users_directory_alone(self):
        """export --output replaces the *.patch files of its directory: never
        in one the CLI did not make."""
        d = os.path.join(self.tmp, "my patches")
        mine = a_users_tree(d)
        patch = os.path.join(d, "0001-my-own-work.patch")
        with open(patch, "w") as f:
            f.write("mine\n")
        r = subprocess.run([CLI, "export", "--output", d], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("not empty and not made by mesa-fork", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertTrue(os.path.isfile(mine) and os.path.isfile(patch))

    def test_prepare_leaves_a_users_mesa_clone_alone(self):
        """MESA_FORK_WORK=$HOME with the user's own Mesa clone in $HOME/mesa.
        The verified base is at hand (the cache is linked in), so without
        the guard prepare would go on to replace the clone."""
        cache = os.path.join(forklib.WORK, "cache")
        self.assertTrue(os.path.isdir(cache), "no %s: run 'bin/mesa-fork install'" % cache)
        home = os.path.join(self.tmp, "home")
        clone = os.path.join(home, "mesa")
        mine = a_users_tree(clone)
        subprocess.run(["git", "init", "-q", clone], check=True)
        os.symlink(cache, os.path.join(home, "cache"))
        env = dict(os.environ, MESA_FORK_WORK=home)
        for args in ([], ["--force"]):
            with self.subTest(args=args):
                r = subprocess.run([CLI, "prepare"] + args, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, timeout=600)
                self.assert_refused(r, clone)
                self.assertTrue(os.path.isfile(mine))
                self.assertTrue(os.path.isdir(os.path.join(clone, ".git")))
        self.assertFalse(os.path.exists(os.path.join(home, proc.MARK)))
        # Once the clone is moved away prepare makes its tree there (no false
        # refusal in a work directory of the user's), marked, and the mark
        # is in no commit of the series.
        os.rename(clone, clone + ".mine")
        r = subprocess.run([CLI, "prepare"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=1200)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:])
        self.assertTrue(os.path.isfile(os.path.join(clone, proc.MARK)))
        committed = subprocess.run(["git", "-C", clone, "log", "--all", "--name-only",
                                    "--format="], stdout=subprocess.PIPE, text=True,
                                   check=True).stdout.split()
        self.assertTrue(committed)
        self.assertNotIn(proc.MARK, [os.path.basename(p) for p in committed])
        self.assertEqual(subprocess.run(["git", "-C", clone, "status", "--porcelain"],
                                        stdout=subprocess.PIPE, text=True).stdout, "")

    def test_a_build_directory_of_the_users_is_not_set_up_anew(self):
        """build.configure() sets a build directory up anew when its
        options are unknown: never one the CLI did not make."""
        d = os.path.join(self.tmp, "home", "build", "mesa")
        mine = a_users_tree(d)
        open(os.path.join(d, "build.ninja"), "w").close()
        r = call("from mesafork import build\n"
                 "build.configure(sys.argv[1], sys.argv[2], [], [], dict())",
                 d, os.path.join(forklib.WORK, "mesa"))
        self.assert_refused(r, d)
        self.assertTrue(os.path.isfile(mine))

    def test_the_clones_own_work_directory_is_adopted_and_no_other(self):
        """An older mesa-fork made .work/ without marks: the clone's own is
        marked on first use; a MESA_FORK_WORK directory never is."""
        top = os.path.join(self.tmp, "clone")
        os.makedirs(os.path.join(top, ".work"))
        os.symlink(os.path.join(forklib.TOP, "config"), os.path.join(top, "config"))
        other = os.path.join(self.tmp, "home")
        os.makedirs(other)
        fork_config.Fork(top, work=other).adopt_default_work()
        self.assertFalse(os.path.exists(os.path.join(other, proc.MARK)))
        self.assertFalse(os.path.exists(os.path.join(top, ".work", proc.MARK)))
        fork_config.Fork(top, work=os.path.join(top, ".work")).adopt_default_work()
        self.assertTrue(os.path.isfile(os.path.join(top, ".work", proc.MARK)))

    def test_every_removal_goes_through_the_guard(self):
        """A tree removal added later without the guard fails here:
        rmtree, rm, git clean and rmdir appear only in proc.py; in
        upstreaming.py, whose export --upstream only replaces a series
        directory its check_dest() recognised as its own; and in
        series.py's scratch worktree (checked, then the worktree it adds)."""
        allowed = {"proc.py": None, "upstreaming.py": 1, "series.py": 2}
        found = {}
        # Subpackages (bench/) too, by their paths under bin/mesafork.
        for path in sorted(glob.glob(os.path.join(PACKAGE, "**", "*.py"), recursive=True)):
            name = os.path.relpath(path, PACKAGE)
            with open(path) as f:
                text = f.read()
            n = len(re.findall(r"rmtree\(|\"rm\",|\"clean\"|\"worktree\", \"remove\"|"
                               r"os\.rmdir\(|os\.removedirs\(", text))
            if n:
                found[name] = n
        for name, n in found.items():
            if name not in allowed:
                self.fail("%s removes a tree %d time(s) without proc.remove_owned()" % (name, n))
            if allowed[name] is not None:
                self.assertEqual(n, allowed[name], name)


if __name__ == "__main__":
    unittest.main()
