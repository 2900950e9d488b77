"""What a workflow run cost per stage, from its rules' `benchmark:` files, and what the whole proteome would cost.

    python benchmarks/stage_costs.py --results RESULTS --proteome ecoli --chunks 7,13 [--logs LOGS] \\
        [--machine "AMD EPYC, 2 cores"] [--results-md benchmarks/RESULTS.md]

Reads ``RESULTS/benchmarks/{rule}/{proteome}/...`` of the given chunks (a chunk's jobs are those whose benchmark
file names it: ``0007.tsv``, ``0007_2_013.tsv``, ...), sums CPU and wall seconds per stage, takes the peak
resident memory, and divides by the chunks' proteins and residues. The projection scales each stage by residues
(the search, the template search and the features grow with the residues searched; inference with its forward
passes, which the residues approximate) to the proteome's planned proteins, for 2 and 32 cores (CPU-seconds /
cores: the stages' jobs are independent within a stage). The shared database and template database builds are
listed once, not scaled. With ``--logs`` (the workflow's ``logs`` folder), each job's CPU and peak memory come
from the resources line its trackfold command logged (exact); Snakemake's benchmark samples CPU time (every 0.5 s
for 15 s, then every 30 s), so jobs of a few tens of seconds can lose much of theirs.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.report.collect import job_log, read_benchmark, stage_of_rule  # noqa: E402
from workflow_lib.schemas.db import CHUNKS  # noqa: E402
from workflow_lib.schemas.io import read_frame  # noqa: E402

SECTION = "## Proteome end to end: E. coli against UniProt-2014, per stage"
ONCE = ("db_build", "templates_build")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True, help="the workflow's results folder")
    parser.add_argument("--proteome", required=True)
    parser.add_argument("--chunks", required=True, help="comma-separated chunk numbers that ran end to end")
    parser.add_argument("--logs", type=Path, help="the workflow's logs folder (exact CPU per job)")
    parser.add_argument("--machine", default="AMD EPYC, 2 cores")
    parser.add_argument("--results-md", type=Path, help="write the table into this Markdown file")
    args = parser.parse_args()
    chunks = [int(c) for c in args.chunks.split(",")]
    plan = read_frame(args.results / args.proteome / "chunks" / "chunks.parquet", CHUNKS)
    members = plan[plan["chunk"].isin(chunks)]
    planned = plan[plan["chunk"] >= 0]
    scale = planned["length"].sum() / members["length"].sum()

    rows = []
    for path in sorted((args.results / "benchmarks").glob("*/**/*.tsv")):
        rule = path.relative_to(args.results / "benchmarks").parts[0]
        relative = path.relative_to(args.results / "benchmarks" / rule).as_posix()
        if rule not in ONCE:
            if not relative.startswith(f"{args.proteome}/"):
                continue
            number = re.match(r"(\d{4})", Path(relative).name)
            if number is None or int(number.group(1)) not in chunks:
                continue
        log = job_log(args.logs, rule, relative) if args.logs else None
        rows.append({"rule": rule, "stage": "database" if rule in ONCE else stage_of_rule(rule),
                     "from_log": log is not None, **read_benchmark(path, log)})
    jobs = pd.DataFrame(rows)
    lines = []
    total_cpu = 0.0
    for stage, group in jobs.groupby("stage", sort=False):
        cpu = float(group["cpu_seconds"].sum())
        per_protein = cpu / len(members)
        projected = cpu if stage == "database" else cpu * scale
        total_cpu += projected
        lines.append(f"| {stage} | {', '.join(sorted(set(group['rule'])))} | {len(group)} | {cpu:,.0f} | "
                     f"{group['seconds'].sum():,.0f} | {group['max_rss_mb'].max():,.0f} | "
                     f"{'-' if stage == 'database' else f'{per_protein:.1f}'} | {projected / 3600:.1f} |")
    body = "\n".join([
        f"`python benchmarks/stage_costs.py --results RESULTS --proteome {args.proteome} --chunks {args.chunks}`: "
        f"chunks {args.chunks} ({len(members)} proteins, {members['length'].sum():,} residues) of the "
        f"{len(planned):,}-protein proteome run end to end through the workflow. {args.machine}; wall seconds "
        "from the rules' `benchmark:` files, CPU seconds and peak memory from "
        + (f"the jobs' own logs ({int(jobs['from_log'].sum())} of {len(jobs)} jobs; the others' from their "
           "benchmark files, which sample CPU time)" if args.logs else "the benchmark files (sampled)")
        + f". Projection: every stage but the builds scaled by residues to the whole proteome (x{scale:.1f}).",
        "",
        "| stage | rules | jobs | CPU s | wall s | peak RSS (MB) | CPU s per protein | whole proteome, CPU h |",
        "|---|---|---|---|---|---|---|---|",
        *lines,
        "",
        f"- Whole proteome: about {total_cpu / 3600:.0f} CPU-hours: {total_cpu / 3600 / 2:.0f} h of wall time on "
        f"2 cores, {total_cpu / 3600 / 32:.1f} h on 32 (the jobs of a stage are independent; the search's "
        "iterations and the stages follow one another per chunk, not across the proteome).",
    ])
    publish(body, args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
