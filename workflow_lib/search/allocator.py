"""Keep freed array memory inside a search process instead of handing it back to the kernel after every query.

The prefilter's seed counting (:func:`workflow_lib.search.diagonals.count_seeds`) allocates and frees a few
large arrays per query and shard: the seeds' bins and weights (8 bytes per seed, millions of seeds) and
the dense (sequence, diagonal) counts (8 bytes per bin, residues + sequences × query length). glibc serves every
allocation above its mmap threshold (at most 32 MiB) with a private ``mmap`` and returns it with ``munmap`` when
NumPy frees it, so the next query faults the same amount of memory in again and the kernel zeroes it page by
page: system time, nearly all of it under ``count_seeds``.

:func:`keep_freed_memory` sets two glibc options for the running process (inherited by forked workers):
``M_MMAP_MAX = 0`` serves large blocks from the heap, and ``M_TRIM_THRESHOLD`` (1 GiB) keeps freed heap memory
for the next query instead of trimming it: the same hits for less system time and CPU, at a peak RSS that can
grow by the freed heap blocks a larger request cannot reuse. The same settings can be given to any process
through the environment (``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=...``); when the user has set either
variable, it is left alone. On other C libraries (macOS, musl) it does nothing.

The search commands (``trackfold search``, ``msa``, ``search-shard``) call it; library users can too.
``trackfold predict`` calls it with :data:`NEVER_TRIM`: the network's activations for one crop are freed and
allocated again for the next, more than a trim threshold of 1 GiB (or any ``int``, the type ``mallopt``
takes) would keep for a long protein: the same output files for less wall and system time, at a higher peak RSS.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
"""``mallopt`` parameter numbers from glibc's ``malloc.h``."""
TRIM_THRESHOLD_BYTES = 1 << 30
"""Free memory at the top of the heap is returned to the kernel only above this much (1 GiB)."""
NEVER_TRIM = -1
"""``trim_threshold`` that never returns free heap memory to the kernel (glibc's documented ``-1``)."""
ENVIRONMENT = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_")
_applied: list[bool] = []


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
        return None  # musl and others: no glibc mallopt
    return libc


def keep_freed_memory(trim_threshold: int = TRIM_THRESHOLD_BYTES) -> bool:
    """Serve large allocations from the heap and keep freed memory (glibc); True when the options are set.

    ``trim_threshold``: bytes of free memory at the top of the heap kept before any is returned (a positive
    ``int``), or :data:`NEVER_TRIM`. Only the first call in a process sets the options (later calls return its
    result); does nothing (returns False) off glibc or when ``MALLOC_MMAP_MAX_`` or ``MALLOC_TRIM_THRESHOLD_``
    is in the environment (the user's choice wins)."""
    if trim_threshold != NEVER_TRIM and not 0 < trim_threshold < 1 << 31:
        raise ValueError(f"trim_threshold must be a positive C int or NEVER_TRIM, got {trim_threshold}")
    if _applied:
        return _applied[0]
    libc = None if any(name in os.environ for name in ENVIRONMENT) else _glibc()
    done = False
    if libc is not None:
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.mallopt.restype = ctypes.c_int
        done = bool(libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)) and bool(libc.mallopt(M_MMAP_MAX, 0))
        log.debug("glibc mallopt: large blocks from the heap, trim threshold %d bytes: %s",
                  trim_threshold, "set" if done else "refused")
    _applied.append(done)
    return done
