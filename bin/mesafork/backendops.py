# SPDX-License-Identifier: MIT
"""llama.cpp's test-backend-ops: the ops `bench ops` and `report` run by
default, and what a run's output says it did."""

import re

# The element-wise and data-movement ops of llama.cpp's dense decode and
# prefill (see `bench sync`), about 1,700 cases. MUL_MAT (2,469 cases on
# Honeykrisp) and FLASH_ATTN_EXT (5,332) take --ops: each case also runs
# on the CPU for the comparison.
BACKEND_OPS = "ADD,MUL,RMS_NORM,ROPE,SOFT_MAX,SWIGLU,SET_ROWS,GET_ROWS,CPY,SCALE"


CASE_RE = re.compile(r"(?:^|\s)([A-Z][A-Z0-9_]*)\(.*\): (OK|FAIL|not supported)")


def backend_ops_counts(text):
    """What a test-backend-ops test run did: cases it ran on the backend
    (each result line, OK or FAIL), cases the backend does not support,
    failed cases, and the ops it ran at least one case of."""
    counts = {"run": 0, "unsupported": 0, "failed": 0, "ops": set()}
    for line in re.sub(r"\x1b\[[0-9;]*m", "", text or "").splitlines():
        m = CASE_RE.search(line)
        if not m:
            continue
        if m.group(2) == "not supported":
            counts["unsupported"] += 1
            continue
        counts["run"] += 1
        counts["failed"] += m.group(2) == "FAIL"
        counts["ops"].add(m.group(1))
    return counts
