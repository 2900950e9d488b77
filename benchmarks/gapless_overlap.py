"""The gapless stage's diagonal scores over every query column against over each diagonal's overlap with its target.

    python benchmarks/gapless_overlap.py --queries CHUNK.fasta --db DB_DIR [--shard 0] [--repeat 2]
        [--results-md benchmarks/RESULTS.md]

Runs one ``trackfold search-shard`` job (iteration 1, the fast setting, one CPU) on ``--queries`` against shard
``--shard`` of ``--db``, keeps the arguments of every call of the compiled diagonal scorer
(:func:`workflow_lib.search.prefilter_compiled.diagonal_scores_compiled`: one per query), then times both ways of
scoring them, alternating per call, ``--repeat`` times: every diagonal over every query column, and each over its
overlap with its target (diagonals grouped by span class; the default). The scores of the two must be identical
(the script stops otherwise). Seconds per query-length bin, summed over the calls and the repeats; one thread.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_bench.report import publish  # noqa: E402

SECTION = "## Homology search: the gapless stage over each diagonal's overlap"
BINS = ((0, 199), (200, 299), (300, 499), (500, 100_000))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=Path, required=True, help="FASTA of the queries (a chunk)")
    parser.add_argument("--db", type=Path, required=True, help="database directory (trackfold db build)")
    parser.add_argument("--shard", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import workflow_lib.search.gapless as gapless
    import workflow_lib.search.prefilter_compiled as compiled
    from workflow_lib.cli import main as trackfold

    scorer = compiled.diagonal_scores_compiled
    calls = []

    def keep(*call):
        calls.append(call)
        return scorer(*call)

    gapless.diagonal_scores_compiled = keep
    with tempfile.TemporaryDirectory() as scratch:
        trackfold(["search-shard", str(args.queries), "--db", str(args.db), "--shard", str(args.shard),
                   "--iteration", "1", "--pseudocounts", "substitution", "--no-sensitive", "--cpus", "1",
                   "--out", f"{scratch}/hits.parquet", "--times", f"{scratch}/times.parquet"])
    gapless.diagonal_scores_compiled = scorer
    seconds = {label: [0.0, 0.0] for label in BINS}
    cells = {label: [0, 0, 0] for label in BINS}
    for _ in range(args.repeat):
        for table, layout, starts, sequence, diagonal, lengths in calls:
            length = table.shape[0]
            label = next(b for b in BINS if b[0] <= length <= b[1])
            began = time.perf_counter()
            every = scorer(table, layout, starts, sequence, diagonal)
            seconds[label][0] += time.perf_counter() - began
            began = time.perf_counter()
            overlap = scorer(table, layout, starts, sequence, diagonal, lengths)
            seconds[label][1] += time.perf_counter() - began
            if not np.array_equal(every, overlap):
                raise SystemExit("gapless_overlap: the two ways gave different scores")
    for table, layout, starts, sequence, diagonal, lengths in calls:
        length = table.shape[0]
        label = next(b for b in BINS if b[0] <= length <= b[1])
        first = np.clip(-diagonal, 0, length)
        last = np.clip(lengths[sequence] - diagonal, first, length)
        cells[label][0] += 1
        cells[label][1] += int(sequence.size) * length
        cells[label][2] += int((last - first).sum())
    rows = ["| query length | queries | diagonal cells (M) | of them in the overlap | every column (s) | "
            "overlap (s) | every column / overlap |", "|---|---|---|---|---|---|---|"]
    total = [0.0, 0.0]
    for (low, high), (every, overlap) in seconds.items():
        queries, all_cells, in_overlap = cells[(low, high)]
        if not queries:
            continue
        total[0] += every
        total[1] += overlap
        label = f"{low}–{high}" if high < 100_000 else f"≥ {low}"
        rows.append(f"| {label} | {queries} | {all_cells / 1e6:,.0f} | {in_overlap / max(all_cells, 1):.0%} | "
                    f"{every:.2f} | {overlap:.2f} | {every / max(overlap, 1e-9):.2f}× |")
    rows.append(f"| all | {len(calls)} | | | **{total[0]:.2f}** | **{total[1]:.2f}** | "
                f"**{total[0] / max(total[1], 1e-9):.2f}×** |")
    header = (f"`python benchmarks/gapless_overlap.py --queries QUERIES --db DB --shard {args.shard} --repeat "
              f"{args.repeat}`, written {datetime.now():%Y-%m-%d}: {len(calls)} queries ({args.queries.name}) "
              f"against shard {args.shard} of {args.db.name}, iteration 1 of the fast setting; the compiled "
              f"diagonal scorer's calls of that job timed both ways, alternating per call, {args.repeat} times "
              f"(sums). One thread, {platform.machine()}; the scores identical in every call.")
    publish("\n".join([header, "", *rows]), args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
