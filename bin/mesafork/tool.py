# SPDX-License-Identifier: MIT
"""The helpers bench.py and uapi.py reach as tool.<name>. Each lives in
the module of its concern (proc, apt, install); new code imports it from
there."""

from .apt import debian_mirror, os_codename  # noqa: F401
from .config import host_arch  # noqa: F401
from .install import fork_env, icd_json, shim_env_pairs, shim_lib  # noqa: F401
from .proc import die, rel, run, step  # noqa: F401
