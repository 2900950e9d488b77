"""Sub-command ``trackfold features``: one A3M in, one ``{stem}.npz`` feature file out, per input.

With ``--templates DIR --template-hits HITS``, template features come from the template database DIR and the
hits of ``trackfold templates search``: HITS is one ``.hits.parquet`` file (one A3M) or a directory holding
``{stem}.hits.parquet`` for every A3M.

A rerun resumes: after each feature file a receipt ``{stem}.features.done.json``
(:mod:`workflow_lib.seqio.receipts`) records the fingerprints of its A3M, hits and template database and the
settings; a file with a matching receipt is not built again (``--no-resume`` rebuilds all).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from workflow_lib.cli_args import add_chunk_options, chunk_inputs, positive_int, unique_outputs
from workflow_lib.errors import InputError
from workflow_lib.features.build import build_features, write_features
from workflow_lib.features.msa_features import DEFAULT_MAX_SEQS, DEFAULT_MAX_STATS_SEQS
from workflow_lib.features.templates import DEFAULT_MAX_TEMPLATES
from workflow_lib.schemas.features import FEATURE_STATS
from workflow_lib.schemas.io import write_table
from workflow_lib.seqio.msa import a3m_stem
from workflow_lib.seqio.receipts import directory_fingerprint, file_fingerprint, finished_row, work_key, write_receipt
from workflow_lib.templates.database import load_template_db

def register(subparsers: argparse._SubParsersAction) -> None:
    features = subparsers.add_parser("features", help="A3M files -> per-protein feature npz files")
    features.add_argument("a3m", nargs="+", help="A3M alignments, query first (plain or .gz), or with --chunk-plan "
                                                 "the folder holding them")
    features.add_argument("--out-dir", required=True, help="directory for {stem}.npz")
    features.add_argument("--max-seqs", type=positive_int, default=DEFAULT_MAX_SEQS,
                          help=f"MSA rows kept for the network, query included (default {DEFAULT_MAX_SEQS})")
    features.add_argument("--max-stats-seqs", type=positive_int, default=DEFAULT_MAX_STATS_SEQS,
                          help="rows the weights, profile and co-evolution are computed from "
                               f"(default {DEFAULT_MAX_STATS_SEQS}; at least --max-seqs)")
    features.add_argument("--seed", type=int, default=0, help="salt of the deterministic row sampling")
    features.add_argument("--templates", help="template database directory (trackfold templates build)")
    features.add_argument("--template-hits", help="hits table (one A3M) or directory of {stem}.hits.parquet")
    features.add_argument("--max-templates", type=int, default=DEFAULT_MAX_TEMPLATES,
                          help=f"best template hits used (default {DEFAULT_MAX_TEMPLATES})")
    add_chunk_options(features, "{protein}.a3m")
    features.add_argument("--no-resume", action="store_true",
                          help="rebuild every feature file, even those whose receipt ({protein}.features.done.json) "
                               "shows the same inputs and settings")
    features.add_argument("--stats", help="also write this table: one row per feature file (L, rows, Neff, "
                                          "templates, seconds), after every feature file (the workflow's "
                                          "per-chunk output)")
    features.set_defaults(handler=run_features)


RECEIPT_STAGE = "features"
"""Receipts ``{protein}.features.done.json`` (:mod:`workflow_lib.seqio.receipts`): a rerun skips those files."""


def _hits_for(args: argparse.Namespace, stems: dict[str, str]) -> dict[str, Path | None]:
    if (args.templates is None) != (args.template_hits is None):
        raise InputError("--templates and --template-hits go together")
    if args.max_templates < 0:
        raise InputError(f"--max-templates must be at least 0, got {args.max_templates}")
    if args.template_hits is None:
        return {stem: None for stem in stems}
    hits = Path(args.template_hits)
    if hits.is_dir():
        return {stem: hits / f"{stem}.hits.parquet" for stem in stems}
    if len(stems) != 1:
        raise InputError("with several A3M files, --template-hits must be a directory", path=hits)
    return {stem: hits for stem in stems}


def run_features(args: argparse.Namespace) -> int:
    if args.max_stats_seqs < args.max_seqs:
        raise InputError(f"--max-stats-seqs ({args.max_stats_seqs}) is smaller than --max-seqs ({args.max_seqs})")
    stems = unique_outputs(chunk_inputs(args.a3m, args.chunk_plan, args.chunk, ".a3m"), a3m_stem, ".npz")
    hits = _hits_for(args, stems)
    database = load_template_db(args.templates) if args.templates is not None else None
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    database_print = directory_fingerprint(args.templates) if args.templates is not None else None
    settings = {"max_seqs": args.max_seqs, "max_stats_seqs": args.max_stats_seqs, "seed": args.seed,
                "max_templates": args.max_templates}
    stats = []
    reused = 0
    for stem, path in stems.items():
        out = out_dir / f"{stem}.npz"
        prints = {"a3m": file_fingerprint(path)}
        if hits[stem] is not None:
            prints.update(hits=file_fingerprint(hits[stem]), templates=database_print)
        key = work_key(RECEIPT_STAGE, prints, settings)
        row = finished_row(out_dir, stem, key, resume=not args.no_resume)
        if row is not None:
            stats.append(row)
            reused += 1
            continue
        start = time.perf_counter()
        features = build_features(path, max_seqs=args.max_seqs, max_stats_seqs=args.max_stats_seqs, seed=args.seed,
                                  templates=database, template_hits=hits[stem], max_templates=args.max_templates)
        write_features(out, features)
        depth, length = features["msa"].shape
        row = {"protein": stem, "length": length, "rows": depth,
               "alignments": int(features["num_alignments"]), "neff": float(features["neff"]),
               "templates": int(features["template_mask"].size), "seconds": time.perf_counter() - start}
        write_receipt(out_dir, stem, key, [out], row)
        stats.append(row)
        print(f"{out}: N={depth} (of {int(features['num_alignments'])}) L={length} "
              f"Neff={float(features['neff']):.1f} T={features['template_mask'].size}")
    if reused:
        print(f"resumed: {reused} of {len(stems)} feature files were finished with the same inputs and settings")
    if args.stats:
        write_table(args.stats, pd.DataFrame(stats, columns=FEATURE_STATS.schema.names), FEATURE_STATS)
    return 0
