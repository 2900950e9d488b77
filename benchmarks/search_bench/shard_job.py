"""One ``trackfold search-shard`` job in this process, for the benchmarks that time a kernel on its real calls.

:func:`shard_job_calls` patches one function of a module for the length of the job, keeps the arguments of every
call (the function still runs, so the job is the workflow's job) and returns them; the caller then times
alternatives on exactly those calls (``benchmarks/gapless_overlap.py``, ``benchmarks/striped_sw.py``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from types import ModuleType


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's command-line options: ``--queries``, ``--db``, ``--shard``, ``--repeat``, ``--results-md``."""
    parser.add_argument("--queries", type=Path, required=True, help="FASTA of the queries (a chunk)")
    parser.add_argument("--db", type=Path, required=True, help="database directory (trackfold db build)")
    parser.add_argument("--shard", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--results-md", type=Path)


def shard_job_calls(module: ModuleType, name: str, queries: Path, db: Path, shard: int,
                    iteration: int = 1) -> list[tuple[tuple, dict]]:
    """``(args, kwargs)`` of every call of ``module.name`` during one search-shard job of ``queries`` against
    shard ``shard`` of ``db`` (the fast setting, iteration ``iteration``, one CPU)."""
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    from workflow_lib.cli import main as trackfold

    original = getattr(module, name)
    calls = []

    def keep(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    setattr(module, name, keep)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            trackfold(["search-shard", str(queries), "--db", str(db), "--shard", str(shard),
                       "--iteration", str(iteration), "--pseudocounts", "substitution", "--no-sensitive",
                       "--cpus", "1", "--out", f"{scratch}/hits.parquet", "--times", f"{scratch}/times.parquet"])
    finally:
        setattr(module, name, original)
    return calls


LENGTH_BINS = ((0, 199), (200, 299), (300, 499), (500, 100_000))
"""Query-length bins of the kernel tables."""


def length_bin(length: int) -> tuple[int, int]:
    """The :data:`LENGTH_BINS` bin of a query of ``length`` residues."""
    return next(b for b in LENGTH_BINS if b[0] <= length <= b[1])


def bin_label(low: int, high: int) -> str:
    """A bin as the tables print it: ``200–299``, or ``≥ 500`` for the last."""
    return f"{low}–{high}" if high < 100_000 else f"≥ {low}"
