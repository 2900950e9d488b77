"""Sub-commands ``trackfold templates build | search | sequences``.

``search`` resumes: after each query's hits a receipt ``{stem}.templates.done.json``
(:mod:`workflow_lib.seqio.receipts`) records the fingerprints of its A3M and of the template database and the
settings; a query with a matching receipt is not searched again (``--no-resume`` searches all).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from workflow_lib.aligner.profile import profile_from_alignment
from workflow_lib.cli_args import add_chunk_options, chunk_inputs, unique_outputs
from workflow_lib.schemas.io import write_table
from workflow_lib.schemas.templates import TEMPLATE_SEARCH_STATS
from workflow_lib.seqio.fasta import write_fasta
from workflow_lib.seqio.receipts import (
    directory_fingerprint,
    file_fingerprint,
    finished_row,
    work_key,
    write_receipt,
)
from workflow_lib.seqio.msa import a3m_stem, read_a3m
from workflow_lib.templates.build import DEFAULT_MIN_LENGTH, build_template_db, template_chains
from workflow_lib.templates.calibration import DEFAULT_DECOYS, MIN_DECOYS
from workflow_lib.templates.database import load_template_db
from workflow_lib.templates.search import (
    DEFAULT_MAX_CANDIDATES,
    DEFAULT_MAX_HITS,
    DEFAULT_MIN_ALIGNED,
    PREFILTER_MIN_TEMPLATES,
    search_templates,
    write_hits,
)


def _at_least(minimum: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("templates", help="build a template database; search it with query A3Ms")
    commands = parser.add_subparsers(dest="templates_command", metavar="ACTION", required=True)

    build = commands.add_parser("build", help="structures (PDB/mmCIF, .gz) -> template database")
    build.add_argument("structures", nargs="+", help="PDB or mmCIF files (plain or .gz; every protein chain) or "
                                                     "backbone archives (.npz, sequences and DSSP beside it)")
    build.add_argument("--out", required=True, help="template database directory")
    build.add_argument("--msa-dir", help="A3M files {template}.a3m for the chains' profiles (others: single "
                                         "sequence)")
    build.add_argument("--min-length", type=_at_least(1), default=DEFAULT_MIN_LENGTH,
                       help=f"skip chains with fewer observed residues (default {DEFAULT_MIN_LENGTH})")
    build.add_argument("--no-dssp", action="store_true", help="do not run mkdssp (secondary structure unknown)")
    build.add_argument("--force", action="store_true", help="rebuild even when the inputs are unchanged")
    build.set_defaults(handler=run_build)

    search = commands.add_parser("search", help="query A3Ms -> {stem}.hits.parquet (profile-profile Viterbi)")
    search.add_argument("a3m", nargs="+", help="query A3M files (query first; plain or .gz), or with --chunk-plan "
                                               "the folder holding them")
    search.add_argument("--templates", required=True, help="template database directory")
    search.add_argument("--out-dir", required=True, help="directory for {stem}.hits.parquet")
    search.add_argument("--max-hits", type=_at_least(1), default=DEFAULT_MAX_HITS,
                        help=f"best hits kept per query (default {DEFAULT_MAX_HITS})")
    search.add_argument("--min-aligned", type=_at_least(1), default=DEFAULT_MIN_ALIGNED,
                        help=f"minimum aligned columns of a hit (default {DEFAULT_MIN_ALIGNED})")
    search.add_argument("--decoys", type=_at_least(MIN_DECOYS), default=DEFAULT_DECOYS,
                        help=f"shuffled templates for the E-value fit (default {DEFAULT_DECOYS})")
    search.add_argument("--prefilter", action=argparse.BooleanOptionalAction, default=None,
                        help=f"gapless k-mer prefilter before Viterbi (default: on for databases of more than "
                             f"{PREFILTER_MIN_TEMPLATES} templates)")
    search.add_argument("--max-candidates", type=_at_least(1), default=DEFAULT_MAX_CANDIDATES,
                        help=f"prefilter candidates aligned by Viterbi per query (default {DEFAULT_MAX_CANDIDATES})")
    search.add_argument("--seed", type=int, default=0, help="seed of the decoy shuffles")
    search.add_argument("--cpus", type=int, default=1, help="processes (0 = all cores; default 1)")
    add_chunk_options(search, "{protein}.a3m")
    search.add_argument("--no-resume", action="store_true",
                        help="search every query again, even those whose receipt ({protein}.templates.done.json) "
                             "shows the same A3M, database and settings")
    search.add_argument("--stats", help="also write this table: one row per query (hits, best template, "
                                        "seconds), after every hits table (the workflow's per-chunk output)")
    search.set_defaults(handler=run_search)

    sequences = commands.add_parser("sequences", help="FASTA of the chains a build would use (for their MSAs)")
    sequences.add_argument("structures", nargs="+", help="PDB or mmCIF files (plain or .gz)")
    sequences.add_argument("--out", required=True, help="FASTA file; IDs are the template IDs")
    sequences.add_argument("--min-length", type=_at_least(1), default=DEFAULT_MIN_LENGTH)
    sequences.set_defaults(handler=run_sequences)


SEARCH_SCORE = "viterbi"
"""What the E-values are computed from, recorded in every receipt: hits searched with another score (HHsearch's
correlation score added, as earlier versions did) are searched again rather than reused."""
RECEIPT_STAGE = "templates"
"""Receipts ``{protein}.templates.done.json`` (:mod:`workflow_lib.seqio.receipts`): a rerun skips those queries."""


def run_build(args: argparse.Namespace) -> int:
    manifest, rebuilt = build_template_db(args.structures, args.out, msa_dir=args.msa_dir,
                                          min_length=args.min_length, dssp=not args.no_dssp, force=args.force)
    state = "built" if rebuilt else "up to date"
    print(f"{args.out}: {state}: {manifest['templates']} templates, {manifest['residues']} residues, "
          f"{manifest['profiles_from_a3m']} profiles from A3M, DSSP: {manifest['dssp']} "
          f"({manifest['dssp_from_archive']} chains with states from a backbone archive)")
    return 0


def run_search(args: argparse.Namespace) -> int:
    stems = unique_outputs(chunk_inputs(args.a3m, args.chunk_plan, args.chunk, ".a3m"), a3m_stem, ".hits.parquet")
    database = load_template_db(args.templates)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    database_print = directory_fingerprint(args.templates)
    settings = {"max_hits": args.max_hits, "min_aligned": args.min_aligned, "decoys": args.decoys, "seed": args.seed,
                "prefilter": args.prefilter, "max_candidates": args.max_candidates, "score": SEARCH_SCORE}
    stats = []
    reused = 0
    for stem, path in stems.items():
        out = out_dir / f"{stem}.hits.parquet"
        key = work_key(RECEIPT_STAGE, {"a3m": file_fingerprint(path), "templates": database_print}, settings)
        row = finished_row(out_dir, stem, key, resume=not args.no_resume)
        if row is not None:
            stats.append(row)
            reused += 1
            continue
        start = time.perf_counter()
        query = profile_from_alignment(read_a3m(path), name=stem)
        hits, null = search_templates(query, database, query_name=stem, max_hits=args.max_hits,
                                      min_aligned=args.min_aligned, n_decoys=args.decoys, seed=args.seed,
                                      cpus=args.cpus, prefilter=args.prefilter, max_candidates=args.max_candidates)
        write_hits(out, hits)
        row = search_stats_row(stem, hits, time.perf_counter() - start)
        write_receipt(out_dir, stem, key, [out], row)
        stats.append(row)
        best = (f"best {hits['template'].iloc[0]} E={hits['evalue'].iloc[0]:.3g}" if len(hits) else "no hits")
        print(f"{out}: {len(hits)} hits of {len(database)} templates ({best}); null lambda={null.lam:.3f} "
              f"mu={null.mu:.2f}")
    if reused:
        print(f"resumed: {reused} of {len(stems)} queries had finished searches with the same inputs and settings")
    if args.stats:
        write_table(args.stats, pd.DataFrame(stats, columns=TEMPLATE_SEARCH_STATS.schema.names), TEMPLATE_SEARCH_STATS)
    return 0


def search_stats_row(query: str, hits: pd.DataFrame, seconds: float) -> dict:
    """One row of :data:`~workflow_lib.schemas.templates.TEMPLATE_SEARCH_STATS` from a query's hits table."""
    best = hits.iloc[0] if len(hits) else None
    return {"protein": query, "hits": len(hits),
            "best_template": None if best is None else str(best["template"]),
            "best_evalue": None if best is None else float(best["evalue"]),
            "best_identity": None if best is None else float(best["identity"]),
            "seconds": seconds}


def run_sequences(args: argparse.Namespace) -> int:
    records = []
    for path in args.structures:
        records += [(chain.name, chain.sequence) for chain, _ in template_chains(path) if len(chain) >= args.min_length]
    write_fasta(args.out, records)
    print(f"{args.out}: {len(records)} chains")
    return 0
