# SPDX-License-Identifier: MIT
"""`mesa-fork test`: tests/run.py, which runs everything CI runs and ends
with its elapsed time and the line "N passed, N failed"."""

import os
import subprocess
import sys


def test(fork, pattern=None):
    """Everything CI runs: series check, Mesa's unit suites, our end-to-end tests.
    Returns the runner's exit status."""
    cmd = [sys.executable, os.path.join(fork.top, "tests", "run.py")]
    if pattern:
        cmd += ["-k", pattern]
    return subprocess.run(cmd, env=dict(os.environ, MESA_FORK_WORK=fork.work)).returncode
