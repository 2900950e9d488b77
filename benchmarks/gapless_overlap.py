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
import platform
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_bench.report import publish  # noqa: E402
from search_bench.shard_job import (LENGTH_BINS, add_job_arguments, bin_label, length_bin,  # noqa: E402
                                    shard_job_calls)

SECTION = "## Homology search: the gapless stage over each diagonal's overlap"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(parser)
    args = parser.parse_args()
    import workflow_lib.search.gapless as gapless
    import workflow_lib.search.prefilter_compiled as compiled

    scorer = compiled.diagonal_scores_compiled
    calls = [call for call, _ in shard_job_calls(gapless, "diagonal_scores_compiled", args.queries, args.db,
                                                 args.shard)]
    seconds = {label: [0.0, 0.0] for label in LENGTH_BINS}
    cells = {label: [0, 0, 0] for label in LENGTH_BINS}
    for _ in range(args.repeat):
        for table, layout, starts, sequence, diagonal, lengths in calls:
            length = table.shape[0]
            label = length_bin(length)
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
        label = length_bin(length)
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
        label = bin_label(low, high)
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
