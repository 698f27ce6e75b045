# SPDX-License-Identifier: MIT
"""config/fork.ini and the paths under .work/: one Fork object that every
verb receives, and the names the fork gives itself."""

import configparser
import os

from .proc import die

BRANCH = "mesa-fork"
BASE_TAG = "base"

# INTEL_STUB_GPU_PLATFORM names `memtypes` shows by default.
MEMTYPES_PLATFORMS = ("mtl", "arl", "tgl", "adl", "glk")


def load(top):
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    path = os.path.join(top, "config", "fork.ini")
    if not cp.read(path):
        die("cannot read %s" % path)
    return cp


def fork_release(conf):
    """'mesa-fork 1': what the driverInfo of every fork driver names."""
    return "%s %s" % (conf["fork"]["name"], conf["fork"]["release"])


def driver_info_tag(conf, upstream=False):
    """The text -Dvulkan-driver-info appends to driverInfo: the fork's
    release and the base it is built on (upstream: Mesa's release tarball,
    without Debian's patches)."""
    if upstream:
        return "%s, upstream tarball" % fork_release(conf)
    return "%s, Debian %s" % (fork_release(conf), conf["base"]["version"])


def debian_version(conf):
    """The version of the source package debsrc makes: 25.0.7-2+deb13u1+mesafork1."""
    return "%s+%s%s" % (conf["base"]["version"], conf["fork"]["name"].replace("-", ""),
                        conf["fork"]["release"])


class Fork:
    """The repository at top, its configuration and its work directory
    (work, else MESA_FORK_WORK, else .work/)."""

    def __init__(self, top, work=None):
        self.top = top
        self.conf = load(top)
        self.work = work or os.environ.get("MESA_FORK_WORK", os.path.join(top, ".work"))
        self.patches = os.path.join(top, "patches")
        self.cache = os.path.join(self.work, "cache")
        self.tree = os.path.join(self.work, "mesa")
        self.build = os.path.join(self.work, "build", "mesa")
        self.client_build = os.path.join(self.work, "build", "client")
        self.default_prefix = os.path.join(self.work, "prefix")

    def prefix(self, arg):
        """The install prefix a --prefix argument names (None: the default)."""
        return os.path.abspath(arg or self.default_prefix)

    @property
    def release(self):
        return fork_release(self.conf)

    @property
    def drivers(self):
        return list(self.conf["drivers"])
