# SPDX-License-Identifier: MIT
"""Shared helpers for mesa-fork's end-to-end tests: paths, environments for
running a client on one driver's drm-shim, and process helpers."""

import os
import subprocess
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "bin"))

from mesafork import build, config as fork_config, install, sources  # noqa: E402

WORK = os.environ.get("MESA_FORK_WORK", os.path.join(TOP, ".work"))
MESA_BUILD = os.path.join(WORK, "build", "mesa")
CLIENT_BUILD = os.path.join(WORK, "build", "client")
PREFIX = os.environ.get("MESA_FORK_PREFIX", os.path.join(WORK, "prefix"))
CLI = os.path.join(TOP, "bin", "mesa-fork")


def config():
    return fork_config.load(TOP)


def build_env():
    return build.build_env(TOP)


def shim_env(driver, **extra):
    """Environment that runs a client on the installed fork, on DRIVER's shim."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("VK_", "ASAHI_", "PAN_", "INTEL_", "HK_", "PANVK_", "ANV_"))}
    base.pop("LD_PRELOAD", None)
    env = install.fork_env(PREFIX, config(), shim=driver, base=base)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def bin_path(name):
    return os.path.join(PREFIX, "bin", name)


def run(cmd, env=None, timeout=300):
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def list_devices(env):
    """The devices mesa-fork-vkcheck --list sees, as `mesa-fork run` lists them."""
    return install.list_devices(PREFIX, env)


def fork_tag():
    """What driverInfo ends with: the release and the base the work
    directory's build is made from (Debian's, or the release tarball)."""
    upstream = sources.uses_upstream(fork_config.Fork(TOP, WORK))
    return "(%s)" % fork_config.driver_info_tag(config(), upstream)


# tests/run.py counts a skipped test as a failure, except one that needs
# what another verb makes and says so with this prefix: it is reported as
# skipped, never as passed.
OPTIONAL_SKIP = "optional, not run: "


def skip_optional(reason):
    """Skip a test whose prerequisite another verb makes (the build chroot
    of `mesa-fork deb`); the runner reports it as skipped."""
    raise unittest.SkipTest(OPTIONAL_SKIP + reason)
