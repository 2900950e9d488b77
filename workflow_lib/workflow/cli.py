"""Sub-command ``trackfold status``: where a workflow run stands, per proteome and stage, with the CPU and the
time left (:mod:`.status`).

    trackfold status [--results results] [--proteome ecoli] [--logs logs] [--cores 32] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from workflow_lib.errors import InputError
from workflow_lib.workflow.status import format_status, proteome_status, proteomes_of, status_records


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status", help="where a workflow run stands: chunks and proteins done per stage, CPU spent and left",
        description="Per proteome and stage: the chunks and proteins done, the jobs finished, the CPU spent and "
                    "an estimate of the CPU and the time left, from the files the workflow wrote (works while a "
                    "run is going and after a kill; reads nothing of Snakemake's own state).")
    parser.add_argument("--results", default="results", help="the workflow's results folder (default %(default)s)")
    parser.add_argument("--proteome", action="append", default=[],
                        help="a proteome to report (repeatable; default: every proteome with a chunk plan)")
    parser.add_argument("--logs", help="the workflow's logs folder, for each job's exact CPU (default: logs in this "
                                       "folder, where Snakemake writes them, else beside the results folder)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                        help="cores the run has, for the time left (default: this machine's, %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON row per proteome and stage instead")
    parser.set_defaults(handler=run_status)


def run_status(args: argparse.Namespace) -> int:
    results = Path(args.results)
    proteomes = args.proteome or proteomes_of(results)
    if not proteomes:
        raise InputError(f"{results}: no proteome with a chunk plan (results/PROTEOME/chunks/chunks.parquet); "
                         "is this the workflow's results folder?")
    if args.cores < 1:
        raise InputError(f"--cores must be at least 1, got {args.cores}")
    if args.logs:
        logs = Path(args.logs)
        if not logs.is_dir():
            raise InputError(f"--logs {logs}: not a folder")
    else:
        logs = next((path for path in (Path("logs"), results.absolute().parent / "logs") if path.is_dir()), None)
    statuses = [proteome_status(results, name, logs=logs) for name in proteomes]
    if args.json:
        print(json.dumps(status_records(statuses), indent=1))
    else:
        print("\n\n".join(format_status(status, args.cores) for status in statuses))
    return 0
