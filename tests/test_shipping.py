# SPDX-License-Identifier: MIT
"""The Debian shipping form: `mesa-fork debsrc` makes a source package that
dpkg-source unpacks with Debian's series and ours applied."""

import glob
import os
import subprocess
import tempfile
import unittest

import forklib
from forklib import run


class DebianSourcePackage(unittest.TestCase):
    MAINTAINER = "Jane Packager <jane@example.org>"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        out = os.path.join(cls.tmp.name, "out")
        # Only the fetched sources, no patch-queue tree: debsrc needs none.
        work = os.path.join(cls.tmp.name, "work")
        os.makedirs(work)
        os.symlink(os.path.join(forklib.WORK, "cache"), os.path.join(work, "cache"))
        cls.env = {k: v for k, v in os.environ.items()
                   if k not in ("DEBFULLNAME", "DEBEMAIL", "NAME", "EMAIL")}
        cls.env["MESA_FORK_WORK"] = work
        env = dict(cls.env, DEBEMAIL=cls.MAINTAINER, SOURCE_DATE_EPOCH="1764633600")
        cls.make = run([forklib.CLI, "debsrc", "--output", out], env=env, timeout=600)
        c = forklib.config()
        cls.version = "%s+mesafork%s" % (c["base"]["version"], c["fork"]["release"])
        cls.dsc = os.path.join(out, "mesa_%s.dsc" % cls.version)
        cls.tree = os.path.join(cls.tmp.name, "x")
        cls.unpack = subprocess.run(["dpkg-source", "--no-check", "-x", cls.dsc, cls.tree],
                                    capture_output=True, text=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_source_package_is_made(self):
        self.assertEqual(self.make.returncode, 0, self.make.stderr)
        self.assertTrue(os.path.exists(self.dsc))

    def test_dpkg_source_applies_debian_and_fork_series(self):
        self.assertEqual(self.unpack.returncode, 0, self.unpack.stderr)
        self.assertNotIn("fuzz", self.unpack.stdout + self.unpack.stderr)
        series = open(os.path.join(self.tree, "debian", "patches", "series")).read().split()
        ours = sorted(os.path.basename(p) for p in glob.glob(
            os.path.join(forklib.TOP, "patches", "*.patch")))
        self.assertEqual([s.split("/", 1)[1] for s in series if s.startswith("mesa-fork/")], ours)
        # Debian's own series comes first and stays whole.
        self.assertIn("CVE-2026-40393-part2.patch", series)
        self.assertLess(series.index("CVE-2026-40393-part2.patch"),
                        series.index("mesa-fork/" + ours[0]))
        # The applied tree carries the fork's code.
        self.assertIn("debug_get_bool_option_strict",
                      open(os.path.join(self.tree, "src", "util", "u_debug.h")).read())

    def test_rules_and_changelog(self):
        with open(os.path.join(self.tree, "debian", "rules")) as f:
            rules = f.read()
        c = forklib.config()["fork"]
        self.assertIn('-Dvulkan-driver-info="%s %s, Debian $(DEB_VERSION)"'
                      % (c["name"], c["release"]), rules)
        archs = forklib.config()["debsrc"]["asahi_architectures"]
        self.assertIn("    ifneq (,$(filter $(DEB_HOST_ARCH), %s))\n"
                      "\tVULKAN_DRIVERS += asahi\n" % archs, rules)
        with open(os.path.join(self.tree, "debian", "changelog")) as f:
            entry = f.read().split("\nmesa (", 1)[0].splitlines()
        self.assertEqual(entry[0], "mesa (%s) UNRELEASED; urgency=medium" % self.version)
        # The packager and the time of SOURCE_DATE_EPOCH, not the patches' author.
        trailers = [l for l in entry if l.startswith(" -- ")]
        self.assertEqual(trailers, [" -- %s  Tue, 02 Dec 2025 00:00:00 +0000" % self.MAINTAINER])

    def test_refuses_without_a_changelog_author(self):
        with tempfile.TemporaryDirectory() as out:
            r = run([forklib.CLI, "debsrc", "--output", out], env=self.env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("set DEBFULLNAME and DEBEMAIL", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    unittest.main()
