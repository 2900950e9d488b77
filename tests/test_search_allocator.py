"""The search processes keep freed memory (glibc): a large array freed and allocated again is not faulted in afresh."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from workflow_lib.search import allocator

pytestmark = pytest.mark.skipif(allocator._glibc() is None, reason="glibc mallopt only")

SCRIPT = """
import resource, sys
import numpy as np
from workflow_lib.search.allocator import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
counts = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = np.ones(96 << 20, dtype=np.uint8)   # 96 MiB: above glibc's largest mmap threshold (32 MiB)
    counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    del block
print(int(applied), *counts)
"""


def _faults(mode: str, script: str = SCRIPT, **environment: str) -> tuple[int, list[int]]:
    """Run ``script`` in a child process without the user's malloc variables: (options applied, faults per round)."""
    env = {key: value for key, value in os.environ.items() if key not in allocator.ENVIRONMENT}
    env.update(environment)
    out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, check=True, env=env)
    applied, *counts = (int(word) for word in out.stdout.split())
    return applied, counts


def test_freed_blocks_are_reused_without_page_faults():
    applied, counts = _faults("keep")
    assert applied == 1
    assert counts[0] > 0 and max(counts[1:]) <= counts[0] // 4, counts
    # without the options every allocation maps and faults the block again
    applied, counts = _faults("plain")
    assert applied == 0 and min(counts[1:]) > counts[0] // 4, counts


def test_the_users_malloc_environment_is_left_alone():
    applied, _ = _faults("keep", MALLOC_TRIM_THRESHOLD_="0")
    assert applied == 0


NEVER_TRIM_SCRIPT = """
import resource, sys
import numpy as np
from workflow_lib.search.allocator import NEVER_TRIM, keep_freed_memory
applied = keep_freed_memory(trim_threshold=NEVER_TRIM) if sys.argv[1] == "never" else keep_freed_memory()
counts = []
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [np.ones(512 << 20, dtype=np.uint8), np.ones(1400 << 20, dtype=np.uint8)]  # 1.9 GiB, like a crop
    counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    del blocks
print(int(applied), *counts)
"""


def test_never_trim_keeps_blocks_that_the_default_threshold_hands_back():
    # trackfold predict frees and reallocates a crop's activations (GBs): with the default 1 GiB threshold the
    # heap top is handed back and faulted in again for every crop; NEVER_TRIM keeps it
    applied, counts = _faults("never", NEVER_TRIM_SCRIPT)
    assert applied == 1
    assert counts[0] > 0 and max(counts[1:]) <= counts[0] // 4, counts
    applied, counts = _faults("default", NEVER_TRIM_SCRIPT)
    assert applied == 1 and min(counts[1:]) > counts[0] // 4, counts


@pytest.mark.parametrize("threshold", [0, -2, 1 << 31])
def test_trim_threshold_outside_a_c_int_is_refused(threshold):
    with pytest.raises(ValueError, match="trim_threshold"):
        allocator.keep_freed_memory(trim_threshold=threshold)
