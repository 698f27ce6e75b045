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
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        out = os.path.join(cls.tmp.name, "out")
        cls.make = run([forklib.CLI, "debsrc", "--output", out], timeout=600)
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
        rules = open(os.path.join(self.tree, "debian", "rules")).read()
        self.assertIn('-Dvulkan-driver-info="mesa-fork 1, Debian $(DEB_VERSION)"', rules)
        self.assertIn("VULKAN_DRIVERS += asahi", rules)
        head = open(os.path.join(self.tree, "debian", "changelog")).readline()
        self.assertEqual(head.strip(), "mesa (%s) UNRELEASED; urgency=medium" % self.version)


if __name__ == "__main__":
    unittest.main()
