"""What a workflow run cost per stage, from its rules' `benchmark:` files, and what the whole proteome would cost.

    python benchmarks/stage_costs.py --results RESULTS --proteome ecoli --chunks 7,13|finished \\
        [--logs LOGS [--logs LOGS2]] [--receipt-window W] [--receipt-checkpoint CKPT] [--project-receipts]
        [--machine "AMD EPYC, 2 cores"]
        [--results-md benchmarks/RESULTS.md] [--heading "Proteome end to end: ..."]

Reads ``RESULTS/benchmarks/{rule}/{proteome}/...`` of the given chunks (a chunk's jobs are those whose benchmark
file names it: ``0007.tsv``, ``0007_2_013.tsv``, ...), sums CPU and wall seconds per stage, takes the peak
resident memory, and divides by the chunks' proteins and residues. ``--chunks finished`` takes, per stage, the
chunks that stage has finished (its ``chunk_NNNN.stats.parquet`` is there, as ``trackfold status`` counts them;
the search's jobs of a chunk still searching are left out), for a run still going: each stage is then scaled by
its own chunks' residues. The projection scales each stage by residues
(the search, the template search and the features grow with the residues searched; inference with its forward
passes, which the residues approximate) to the proteome's planned proteins, for 2 and 32 cores (CPU-seconds /
cores: the stages' jobs are independent within a stage). The shared database and template database builds are
listed once, not scaled. With ``--logs`` (the workflow's ``logs`` folder; repeat it when the stages ran from
different working directories), each job's CPU and peak memory come from the resources line its trackfold
command logged (exact); Snakemake's benchmark samples CPU time (every 0.5 s for 15 s, then every 30 s), so jobs
of a few tens of seconds can lose much of theirs.

For the template, feature and inference stages, the proteins finished inside chunks that have not finished
(their per-protein receipts ``*.done.json``) are counted too, in a line under the table: how many, their
residues and their own seconds (wall time per protein, start-up excluded). ``--receipt-window W`` keeps only the
inference receipts of window ``W`` (and of proteins that fit it), e.g. after the window was changed mid-run;
``--receipt-checkpoint CKPT`` only those of that checkpoint (the others are predicted again).
``--project-receipts`` also projects those stages' unfinished chunks from the receipts by length (seconds
interpolated linearly between the finished proteins' lengths, in proportion to L² beyond the longest): a job
runs the proteins that fit one pass (or one window) shortest first and the others in input order, so use it
only once the finished proteins span the lengths.

Writes the section "Proteome end to end: E. coli against UniProt-2014, per stage" (given chunks) or "Proteome
end to end: every finished chunk of PROTEOME, per stage" (``--chunks finished``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.report.collect import job_log, read_benchmark, stage_of_rule  # noqa: E402
from workflow_lib.schemas.db import CHUNKS  # noqa: E402
from workflow_lib.schemas.io import read_frame  # noqa: E402
from workflow_lib.seqio.receipts import file_fingerprint  # noqa: E402
from workflow_lib.workflow.paths import STAGE_FOLDERS, WorkflowPaths  # noqa: E402

SECTION = "## Proteome end to end: E. coli against UniProt-2014, per stage"
FINISHED_SECTION = "## Proteome end to end: every finished chunk of {proteome}, per stage"
ONCE = ("db_build", "templates_build")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True, help="the workflow's results folder")
    parser.add_argument("--proteome", required=True)
    parser.add_argument("--chunks", required=True,
                        help="comma-separated chunk numbers that ran end to end, or 'finished' (per stage)")
    parser.add_argument("--logs", type=Path, action="append", default=[],
                        help="a logs folder of the workflow (exact CPU per job); may be repeated")
    parser.add_argument("--machine", default="AMD EPYC, 2 cores")
    parser.add_argument("--receipt-window", type=int, help="count only inference receipts of this window")
    parser.add_argument("--receipt-checkpoint", type=Path, help="count only inference receipts of this checkpoint")
    parser.add_argument("--project-receipts", action="store_true",
                        help="project unfinished chunks from the finished proteins' receipts by length")
    parser.add_argument("--results-md", type=Path, help="write the table into this Markdown file")
    parser.add_argument("--heading", help="the section's heading (default: by --chunks, see above)")
    args = parser.parse_args()
    finished = args.chunks == "finished"
    chunks = None if finished else {int(c) for c in args.chunks.split(",")}
    plan = read_frame(args.results / args.proteome / "chunks" / "chunks.parquet", CHUNKS)
    planned = plan[plan["chunk"] >= 0]

    rows = []
    for path in sorted((args.results / "benchmarks").glob("*/**/*.tsv")):
        rule = path.relative_to(args.results / "benchmarks").parts[0]
        relative = path.relative_to(args.results / "benchmarks" / rule).as_posix()
        chunk = -1
        if rule not in ONCE:
            if not relative.startswith(f"{args.proteome}/"):
                continue
            number = re.match(r"(\d{4})", Path(relative).name)
            if number is None or (chunks is not None and int(number.group(1)) not in chunks):
                continue
            chunk = int(number.group(1))
        log = next((found for logs in args.logs if (found := job_log(logs, rule, relative)) is not None), None)
        rows.append({"rule": rule, "stage": "database" if rule in ONCE else stage_of_rule(rule), "chunk": chunk,
                     "from_log": log is not None, **read_benchmark(path, log)})
    jobs = pd.DataFrame(rows)
    if finished:   # a stage's jobs of the chunks it has finished (the builds stay)
        paths = WorkflowPaths(str(args.results))
        done = {(stage, c) for stage in STAGE_FOLDERS for c in planned["chunk"].unique()
                if Path(paths.chunk_stats(stage, args.proteome, f"chunk_{int(c):04d}")).exists()}
        keep = [row.stage == "database" or row.stage not in STAGE_FOLDERS or (row.stage, row.chunk) in done
                for row in jobs.itertuples()]
        jobs = jobs[keep]
    lines = []
    total_cpu = 0.0
    stage_chunks = {}
    for stage, group in jobs.groupby("stage", sort=False):
        members = planned[planned["chunk"].isin(set(group["chunk"]))]
        stage_chunks[stage] = set(group["chunk"])
        cpu = float(group["cpu_seconds"].sum())
        scale = planned["length"].sum() / max(members["length"].sum(), 1)
        projected = cpu if stage == "database" else cpu * scale
        total_cpu += projected
        done = "-" if stage == "database" else f"{group['chunk'].nunique()} ({len(members):,})"
        lines.append(f"| {stage} | {', '.join(sorted(set(group['rule'])))} | {done} | {len(group)} | {cpu:,.0f} | "
                     f"{group['seconds'].sum():,.0f} | {group['max_rss_mb'].max():,.0f} | "
                     f"{'-' if stage == 'database' else f'{cpu / max(len(members), 1):.1f}'} | "
                     f"{projected / 3600:.1f} |")
    model = None if args.receipt_checkpoint is None else file_fingerprint(args.receipt_checkpoint)
    notes = in_progress(args.results, args.proteome, planned, stage_chunks, window=args.receipt_window,
                        model=model, project=args.project_receipts) if finished else []
    missing = [stage for stage in RECEIPT_FOLDERS if finished and stage not in stage_chunks]
    unfinished = f" without {', '.join(missing)} (no finished chunk yet)" if missing else ""
    if finished:
        which = "the chunks each stage has finished (per stage, in the chunks column)"
    else:
        members = planned[planned["chunk"].isin(chunks)]
        which = (f"chunks {args.chunks} ({len(members)} proteins, {members['length'].sum():,} residues), run end to "
                 "end")
    body = "\n".join([
        f"`python benchmarks/stage_costs.py --results RESULTS --proteome {args.proteome} --chunks {args.chunks}"
        + " --logs LOGS" * len(args.logs)
        + (f" --receipt-window {args.receipt_window}" if args.receipt_window else "")
        + (f" --receipt-checkpoint {args.receipt_checkpoint.name}" if args.receipt_checkpoint else "")
        + (" --project-receipts" if args.project_receipts else "") + f"`: {which}, of the "
        f"{len(planned):,}-protein proteome through the workflow. {args.machine}; wall seconds "
        "from the rules' `benchmark:` files, CPU seconds and peak memory from "
        + (f"the jobs' own logs ({int(jobs['from_log'].sum())} of {len(jobs)} jobs; the others' from their "
           "benchmark files, which sample CPU time)" if args.logs else "the benchmark files (sampled)")
        + ". Projection: every stage but the builds scaled by residues to the whole proteome.",
        "",
        "| stage | rules | chunks (proteins) | jobs | CPU s | wall s | peak RSS (MB) | CPU s per protein | "
        "whole proteome, CPU h |",
        "|---|---|---|---|---|---|---|---|---|",
        *lines,
        "",
        f"- Whole proteome{unfinished}: about {total_cpu / 3600:.0f} CPU-hours: {total_cpu / 3600 / 2:.0f} h of wall time on "
        f"2 cores, {total_cpu / 3600 / 32:.1f} h on 32 (the jobs of a stage are independent; the search's "
        "iterations and the stages follow one another per chunk, not across the proteome).",
        *notes,
    ])
    heading = FINISHED_SECTION.format(proteome=args.proteome) if finished else SECTION
    publish(body, args.results_md, f"## {args.heading}" if args.heading else heading)
    return 0


RECEIPT_FOLDERS = {"templates": ("templates", "templates"), "features": ("features", "features"),
                   "predict": ("structures", "predict")}
"""Stage -> (results sub-folder, receipt stage) of the per-protein receipts ``{protein}.{stage}.done.json``."""


def in_progress(results: Path, proteome: str, planned: pd.DataFrame, stage_chunks: dict, *,
                window: int | None = None, model: str | None = None, project: bool = False) -> list[str]:
    """Lines on the proteins finished (receipts) inside chunks a stage has not finished, and with ``project``
    the stage's unfinished chunks projected from them by length (module docstring)."""
    lines = []
    for stage, (folder, receipt) in RECEIPT_FOLDERS.items():
        open_chunks = planned[~planned["chunk"].isin(stage_chunks.get(stage, set()))]
        if open_chunks.empty:
            continue
        lengths = dict(zip(open_chunks["safe_id"], open_chunks["length"]))
        done: dict[str, float] = {}
        for path in (results / proteome / folder).glob(f"*.{receipt}.done.json"):
            name = path.name[: -len(f".{receipt}.done.json")]
            if name not in lengths:
                continue
            content = json.loads(path.read_text())
            if stage == "predict" and window is not None \
                    and content["key"]["settings"].get("window") not in (None, window):
                continue
            if stage == "predict" and model is not None and content["key"]["inputs"].get("model") != model:
                continue
            done[name] = float(content["row"]["seconds"])
        seconds, count = sum(done.values()), len(done)
        residues = sum(int(lengths[name]) for name in done)
        lines.append(f"- {stage}: {count:,} of the {len(open_chunks):,} proteins of its unfinished chunks are done "
                     f"({residues:,} residues, {seconds:,.0f} s of their own, "
                     f"{seconds / max(count, 1):.1f} s per protein)" if count else
                     f"- {stage}: none of the {len(open_chunks):,} proteins of its unfinished chunks is done yet")
        if project and count >= 2:
            total = project_by_length(done, lengths)
            lines.append(f"  - projected from them by length: {total / 3600:,.1f} CPU-h for the "
                         f"{len(open_chunks):,} proteins ({total / len(open_chunks):.1f} s per protein; finished "
                         f"proteins of {min(lengths[n] for n in done)}-{max(lengths[n] for n in done)} residues)")
    return lines


def project_by_length(done: dict[str, float], lengths: dict[str, int]) -> float:
    """Seconds of every protein of ``lengths``: its own where done, else interpolated over length from the done
    ones (linear between their lengths, in proportion to L² beyond the longest; the shortest's below it)."""
    xs = np.array([lengths[name] for name in done], dtype=float)
    ys = np.array(list(done.values()))
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    total = 0.0
    for name, length in lengths.items():
        if name in done:
            total += done[name]
        elif length > xs[-1]:
            total += ys[-1] * (length / xs[-1]) ** 2
        else:
            total += float(np.interp(length, xs, ys))
    return total

if __name__ == "__main__":
    raise SystemExit(main())
