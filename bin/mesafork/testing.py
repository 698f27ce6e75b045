# SPDX-License-Identifier: MIT
"""`mesa-fork test`: tests/run.py, which runs everything CI runs and ends
with its elapsed time and the line "N passed, N failed"."""

import os
import subprocess
import sys

from .config import cross_arches
from .install import parse_arches, prefix_arch


def installed_arches(fork):
    """This machine's architecture and every cross architecture whose build
    `install --arch` put into its default prefix."""
    arches = [fork.host_arch]
    for a in cross_arches(fork.conf):
        if a != fork.host_arch and prefix_arch(fork.for_arch(a).default_prefix) == a:
            arches.append(a)
    return arches


def test(fork, pattern=None, arch=None):
    """Everything CI runs: series check, Mesa's unit suites, our end-to-end tests,
    for every architecture installed (a cross build's under qemu-user).
    Returns the runner's exit status."""
    arches = parse_arches(fork, arch) if arch else installed_arches(fork)
    cmd = [sys.executable, os.path.join(fork.top, "tests", "run.py")]
    if pattern:
        cmd += ["-k", pattern]
    env = dict(os.environ, MESA_FORK_WORK=fork.work, MESA_FORK_TEST_ARCHES=" ".join(arches))
    return subprocess.run(cmd, env=env).returncode
