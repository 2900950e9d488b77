"""The prefilter's stage 2 (full Smith–Waterman of the targets near the bar): lane blocks against the striped kernel.

    python benchmarks/striped_sw.py --queries CHUNK.fasta --db DB_DIR [--shard 0] [--iteration 1] [--repeat 3]
        [--results-md benchmarks/RESULTS.md]

Runs one ``trackfold search-shard`` job (the fast setting, one CPU) on ``--queries`` against shard ``--shard`` of
``--db``, keeps the arguments of every stage-2 call (:func:`workflow_lib.search.gapped.gapped_scores`: one per
query with targets to score), then times both kernels on them, alternating per call, ``--repeat`` times: the lane
blocks (targets side by side, a gathered score per cell; ``striped=False``) and the striped query profile
(:func:`workflow_lib.search.gapped_compiled.sw_striped_compiled`, the default). The scores must be identical to the
bit (the script stops otherwise). Seconds per query-length bin, summed over the calls and the repeats; one thread.
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

SECTION = "## Homology search: the striped Smith–Waterman"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(parser)
    parser.add_argument("--iteration", type=int, default=1, help="1: single-sequence profiles")
    parser.set_defaults(repeat=3)
    args = parser.parse_args()
    import workflow_lib.search.gapped as gapped

    scorer = gapped.gapped_scores
    calls = [(scores, list(targets), options) for (scores, targets), options
             in shard_job_calls(gapped, "gapped_scores", args.queries, args.db, args.shard, args.iteration)]
    calls = [call for call in calls if call[1]]
    if not calls:
        raise SystemExit("striped_sw: the job ran no stage-2 Smith-Waterman (no target near the bar)")
    seconds = {label: [0.0, 0.0] for label in LENGTH_BINS}
    counts = {label: [0, 0, 0] for label in LENGTH_BINS}
    for _ in range(args.repeat):
        for scores, targets, options in calls:
            label = length_bin(scores.shape[0])
            began = time.perf_counter()
            lanes = scorer(scores, targets, striped=False, **options)
            seconds[label][0] += time.perf_counter() - began
            began = time.perf_counter()
            striped = scorer(scores, targets, striped=True, **options)
            seconds[label][1] += time.perf_counter() - began
            if not np.array_equal(lanes, striped):
                raise SystemExit("striped_sw: the two kernels gave different scores")
    for scores, targets, _ in calls:
        label = length_bin(scores.shape[0])
        counts[label][0] += 1
        counts[label][1] += len(targets)
        counts[label][2] += scores.shape[0] * sum(t.size for t in targets)
    rows = ["| query length | queries | targets | cells (M) | lane blocks (s) | striped (s) | "
            "lane blocks / striped | striped ns per cell |", "|---|---|---|---|---|---|---|---|"]
    total = [0.0, 0.0, 0]
    for (low, high), (lanes, striped) in seconds.items():
        queries, targets, cells = counts[(low, high)]
        if not queries:
            continue
        total[0] += lanes
        total[1] += striped
        total[2] += cells
        label = bin_label(low, high)
        rows.append(f"| {label} | {queries} | {targets:,} | {cells / 1e6:,.0f} | {lanes:.2f} | {striped:.2f} | "
                    f"{lanes / max(striped, 1e-9):.2f}× | {striped / args.repeat / max(cells, 1) * 1e9:.2f} |")
    rows.append(f"| all | {len(calls)} | {sum(c[1] for c in counts.values()):,} | {total[2] / 1e6:,.0f} | "
                f"**{total[0]:.2f}** | **{total[1]:.2f}** | **{total[0] / max(total[1], 1e-9):.2f}×** | "
                f"{total[1] / args.repeat / max(total[2], 1) * 1e9:.2f} |")
    header = (f"`python benchmarks/striped_sw.py --queries QUERIES --db DB --shard {args.shard} --iteration "
              f"{args.iteration} --repeat {args.repeat}`, written {datetime.now():%Y-%m-%d}: the stage-2 calls of "
              f"one search job ({len(calls)} of the queries of {args.queries.name} had targets near the bar) "
              f"against shard {args.shard} of {args.db.name}, iteration {args.iteration} of the fast setting, "
              f"timed both ways, alternating per call, {args.repeat} times (sums). One thread, "
              f"{platform.machine()}; the scores identical in every call.")
    publish("\n".join([header, "", *rows]), args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
