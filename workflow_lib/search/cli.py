"""``trackfold search`` / ``trackfold msa`` and the workflow's per-job commands.

User commands:

- ``search --db DB --out HITS.parquet [--iterations N] [--cpus N] [--m8 FILE] QUERIES.fasta``: one hits table
  (:data:`~workflow_lib.seqio.schemas.HITS`) for all queries and iterations; ``--m8`` also writes BLAST tabular.
- ``msa --db DB --out-dir DIR [--iterations N] [--cpus N] QUERIES.fasta``: ``DIR/{safe_id}.a3m`` per query and
  ``DIR/msa_stats.parquet`` (:data:`~workflow_lib.seqio.schemas.MSA_STATS`).

Workflow commands (one job each; rules/search.smk): ``search-profiles`` (a chunk's query profiles of one
iteration with their E-value calibration, :mod:`~workflow_lib.search.query_store`), ``search-shard`` (those
queries × one shard), ``msa-merge`` (all shards of an iteration → MSAs and the next state), ``msa-final`` (the final
``{safe_id}.a3m`` files and the chunk's statistics, written last).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path

import pandas as pd

from workflow_lib.errors import InputError
from workflow_lib.search.allocator import keep_freed_memory
from workflow_lib.search.engine import (HIT_COLUMNS, SENSITIVE_PREFILTER, DatabaseTotals, SearchQuery, SearchSettings,
                                        make_queries, prefilter_settings, rank_hits, search_shard)
from workflow_lib.search.iterative import (PSEUDOCOUNTS, MsaSettings, build_msas, msa_statistics, msa_step,
                                          output_alignment, profile_for)
from workflow_lib.search.evalue import CALIBRATIONS
from workflow_lib.search.kmer_index import DEFAULT_SHAPE
from workflow_lib.search.prefilter import CONTEXT_PREFILTER_COMPOSITION, SPACED_EXTRA_BITS, default_kmer_threshold
from workflow_lib.search.query_store import read_search_queries, write_search_queries
from workflow_lib.seqio.atomic import atomic_path, write_text_atomic
from workflow_lib.seqio.fasta import Record, read_fasta
from workflow_lib.seqio.msa import Alignment, read_a3m, write_a3m
from workflow_lib.schemas.io import read_frame, write_table
from workflow_lib.schemas.search import HITS, MSA_STATE, MSA_STATS, SEARCH_TIMES

log = logging.getLogger(__name__)


CLI_PSEUDOCOUNTS = "context"
"""The command line's (and the workflow's) default pseudocounts. With :data:`CLI_SENSITIVE` this is the
configuration level with hhblits on the Pfam benchmark at jackhmmer -N 3's CPU (benchmarks/RESULTS.md, "peers");
the library's dataclass defaults (:class:`~workflow_lib.search.iterative.MsaSettings`,
:class:`~workflow_lib.search.engine.SearchSettings`) stay the fast settings, so an API caller asks for these
with ``MsaSettings(pseudocounts="context")`` and ``prefilter_settings(sensitive=True)``."""
CLI_SENSITIVE = True
"""The command line's (and the workflow's) default for ``--sensitive`` (see :data:`CLI_PSEUDOCOUNTS`)."""


def _settings_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("search settings")
    defaults, msa = SearchSettings(), MsaSettings()
    group.add_argument("--iterations", type=int, default=msa.iterations, help="search iterations (default %(default)s)")
    group.add_argument("--inclusion-evalue", type=float, default=msa.inclusion_evalue,
                       help="E-value to include a hit in the MSA (default %(default)s)")
    group.add_argument("--max-evalue", type=float, default=defaults.max_evalue,
                       help="report hits up to this E-value (default %(default)s)")
    group.add_argument("--max-identity", type=float, default=msa.max_identity,
                       help="redundancy filter: maximum pairwise identity (default %(default)s)")
    group.add_argument("--min-coverage", type=float, default=msa.min_coverage,
                       help="coverage filter of the output MSA: minimum fraction of query columns "
                            "(default %(default)s)")
    group.add_argument("--profile-min-coverage", type=float, default=msa.profile_min_coverage,
                       help="coverage filter of the MSA the next iteration's profile is built from "
                            "(default %(default)s, as HHblits' -cov)")
    sensitive = SENSITIVE_PREFILTER
    group.add_argument("--sensitive", action=argparse.BooleanOptionalAction, default=CLI_SENSITIVE,
                       help=f"sensitive prefilter: seeds {sensitive['kmer_slack']} bits below the fast one, "
                            f"{sensitive['diagonals_per_target']} diagonals per target, gapless pass at "
                            f"{sensitive['gapless_offset']} + log2(Lq*Lt) bits, from iteration 2 on when "
                            f"iterating (with --pseudocounts context: level with hhblits on the Pfam benchmark at "
                            f"jackhmmer -N 3's CPU); --no-sensitive: the fast prefilter (with --pseudocounts "
                            f"substitution 1/2 the CPU on Pfam and 1/2.7 on E. coli proteins, 0.006 lower ROC AUC on "
                            f"Pfam); a value given with "
                            f"the options below holds in every iteration (default: sensitive)")
    group.add_argument("--kmer-threshold", type=float, default=None,
                       help=f"prefilter seed threshold in bits (default: 1.5 * (k - 1) for the database's k-mers, "
                            f"+ {SPACED_EXTRA_BITS} for a spaced seed shape: {default_kmer_threshold(4, spaced=True)} "
                            f"for the default {DEFAULT_SHAPE}, {default_kmer_threshold(4)} for 4-mers; --sensitive: "
                            f"{sensitive['kmer_slack']} lower from iteration 2 on)")
    group.add_argument("--diagonals-per-target", type=int, default=None,
                       help=f"gapless prefilter: diagonals scored per target (--no-sensitive: "
                            f"{defaults.diagonals_per_target}; --sensitive: {sensitive['diagonals_per_target']} from "
                            f"iteration 2 on)")
    group.add_argument("--gapless-offset", type=float, default=None,
                       help=f"gapless prefilter: pass directly above this + log2(Lq*Lt) bits (--no-sensitive: "
                            f"{defaults.gapless_offset}; the seed's single pass is 2.5; --sensitive: "
                            f"{sensitive['gapless_offset']} from iteration 2 on)")
    group.add_argument("--band-gate", type=float, default=None,
                       help=f"banded Smith-Waterman stage: targets whose gapless score is above this + "
                            f"log2(Lq*Lt) bits but not above the direct pass are scored in a band of "
                            f"{defaults.band_width} diagonals around their best one (default {defaults.band_gate}; "
                            f"at or above --gapless-offset the stage is off)")
    group.add_argument("--band-offset", type=float, default=None,
                       help=f"banded stage: pass above this + log2(Lq*Lt) bits (default {defaults.band_offset})")
    group.add_argument("--max-sequences", type=int, default=msa.max_sequences,
                       help="cap on MSA sequences after filtering (default %(default)s)")
    group.add_argument("--pseudocounts", choices=PSEUDOCOUNTS, default=CLI_PSEUDOCOUNTS,
                       help="emission pseudocounts of the searched profiles: the Gonnet substitution matrix, or "
                            "context-specific ones predicted from the 13 columns around each column (more remote "
                            "homologs for about 1.15x the CPU, see benchmarks/RESULTS.md) (default %(default)s)")
    group.add_argument("--context-model", default=None,
                       help="with --pseudocounts context: the model's .npz (default: the shipped one)")
    group.add_argument("--calibration", choices=("auto",) + CALIBRATIONS, default="auto",
                       help="E-value calibration sequences: i.i.d. random, or windows of reversed real proteins "
                            "(which keep the local structure context-specific pseudocounts reward in every "
                            "protein; their heavier tail is fitted with 0.9 times the i.i.d. λ); auto: reversed "
                            "with --pseudocounts context, else random (default %(default)s)")
    group.add_argument("--prefilter-composition", default="auto",
                       help="weight w in [0, 1] of the profile's own mean composition in the null model the "
                            "prefilter scores against (f^(1-w) * c^w): targets that score by composition alone, "
                            "which the hits' composition-bias correction removes, stop before the Viterbi; auto: "
                            f"{CONTEXT_PREFILTER_COMPOSITION} with --pseudocounts context, else 0 "
                            "(default %(default)s)")


def _device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="numpy",
                        help="where the Viterbi stages run: numpy, a torch device (cuda, cuda:1, cpu), or auto "
                             "(CUDA when torch sees a GPU, else NumPy); hits are identical on every backend; on a "
                             "GPU machine's 16 cores the CUDA path used fewer CPU seconds but more wall time than "
                             "NumPy (benchmarks/RESULTS.md) (default %(default)s)")


def _device(args: argparse.Namespace) -> str | None:
    device = args.device.strip()
    if device == "auto":
        return None
    if device != "numpy":
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            raise InputError(f"--device {device} needs torch, which is not installed")
        import torch
        try:
            torch.device(device)
        except RuntimeError:
            raise InputError(f"--device: {device!r} is not a torch device (auto, numpy, cpu, cuda, cuda:N)") from None
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise InputError(f"--device {device}: torch sees no CUDA device on this machine")
    return device


def calibration_for(calibration: str, pseudocounts: str) -> str:
    """The calibration a search uses: ``auto`` is ``reversed`` with context pseudocounts, else ``random``."""
    if calibration == "auto":
        return "reversed" if pseudocounts == "context" else "random"
    return calibration


def prefilter_composition_for(value: str | float, pseudocounts: str) -> float:
    """The prefilter's composition weight: ``auto`` is
    :data:`~workflow_lib.search.prefilter.CONTEXT_PREFILTER_COMPOSITION` with context pseudocounts, else 0."""
    if value == "auto":
        return CONTEXT_PREFILTER_COMPOSITION if pseudocounts == "context" else 0.0
    try:
        return float(value)
    except ValueError:
        raise InputError(f"--prefilter-composition must be auto or a weight in [0, 1], got {value!r}") from None


def _settings(args: argparse.Namespace) -> tuple[SearchSettings, MsaSettings]:
    if args.iterations < 1:
        raise InputError(f"--iterations must be at least 1, got {args.iterations}")
    if not 0 < args.max_identity <= 1 or not 0 <= args.min_coverage <= 1:
        raise InputError("--max-identity must be in (0, 1] and --min-coverage in [0, 1]")
    if not 0 <= args.profile_min_coverage <= args.min_coverage:
        raise InputError(f"--profile-min-coverage must be in [0, --min-coverage = {args.min_coverage}], "
                         f"got {args.profile_min_coverage}")
    try:
        search = prefilter_settings(sensitive=args.sensitive, kmer_threshold=args.kmer_threshold,
                                    diagonals_per_target=args.diagonals_per_target,
                                    gapless_offset=args.gapless_offset, band_gate=args.band_gate,
                                    band_offset=args.band_offset,
                                    max_evalue=max(args.max_evalue, args.inclusion_evalue),
                                    calibration=calibration_for(args.calibration, args.pseudocounts),
                                    prefilter_composition=prefilter_composition_for(args.prefilter_composition,
                                                                                    args.pseudocounts))
    except ValueError as error:
        raise InputError(f"--{str(error).replace('_', '-')}") from None
    msa = MsaSettings(iterations=args.iterations, inclusion_evalue=args.inclusion_evalue,
                      max_identity=args.max_identity, min_coverage=args.min_coverage,
                      profile_min_coverage=args.profile_min_coverage, max_sequences=args.max_sequences,
                      pseudocounts=args.pseudocounts, context_model=args.context_model)
    if args.context_model is not None and args.pseudocounts != "context":
        raise InputError("--context-model needs --pseudocounts context")
    msa.context()  # a bad model file fails here, before any search
    return search, msa


def register(subparsers: argparse._SubParsersAction) -> None:
    search = subparsers.add_parser("search", help="search a database with each query; one hits table",
                                   description="Iterative profile search (prefilter → Viterbi → E-values).")
    search.add_argument("queries", help="protein FASTA")
    search.add_argument("--db", required=True, help="database directory (trackfold db build)")
    search.add_argument("--out", required=True, help="hits table (.parquet)")
    search.add_argument("--m8", help="also write BLAST tabular (outfmt 6) here")
    search.add_argument("--cpus", type=int, default=1, help="processes (0 = all cores)")
    _device_argument(search)
    _settings_arguments(search)
    search.set_defaults(handler=run_search)

    msa = subparsers.add_parser("msa", help="iterative MSAs: DIR/{id}.a3m and DIR/msa_stats.parquet",
                                description="Iterative MSA assembly against a database (HHblits-style).")
    msa.add_argument("queries", help="protein FASTA")
    msa.add_argument("--db", required=True, help="database directory (trackfold db build)")
    msa.add_argument("--out-dir", required=True, help="output directory")
    msa.add_argument("--cpus", type=int, default=1, help="processes (0 = all cores)")
    _device_argument(msa)
    _settings_arguments(msa)
    msa.set_defaults(handler=run_msa)

    profiles = subparsers.add_parser("search-profiles",
                                     help="(workflow) a chunk's calibrated query profiles for one iteration")
    _query_arguments(profiles)
    profiles.add_argument("--out", required=True, help="query profiles (.npz) for search-shard --profiles")
    _device_argument(profiles)
    _settings_arguments(profiles)
    profiles.set_defaults(handler=run_search_profiles)

    shard = subparsers.add_parser("search-shard", help="(workflow) one chunk's queries against one shard")
    _query_arguments(shard)
    shard.add_argument("--shard", type=int, required=True)
    shard.add_argument("--profiles", help="the chunk's queries from search-profiles (else built here)")
    shard.add_argument("--out", required=True, help="hits table")
    shard.add_argument("--times", required=True, help="per-query time table")
    shard.add_argument("--cpus", type=int, default=1)
    _device_argument(shard)
    _settings_arguments(shard)
    shard.set_defaults(handler=run_search_shard)

    merge = subparsers.add_parser("msa-merge", help="(workflow) merge shard hits of one iteration into MSAs")
    merge.add_argument("queries", help="chunk FASTA")
    merge.add_argument("--iteration", type=int, required=True)
    merge.add_argument("--hits", nargs="+", required=True, help="hits tables of every shard")
    merge.add_argument("--times", nargs="+", required=True, help="time tables of every shard")
    merge.add_argument("--state", help="state table of the previous iteration")
    merge.add_argument("--precomputed", help="directory of precomputed A3Ms (iteration 1)")
    merge.add_argument("--a3m-dir", required=True, help="where this iteration's A3Ms go")
    merge.add_argument("--out-state", required=True)
    _settings_arguments(merge)
    merge.set_defaults(handler=run_msa_merge)

    final = subparsers.add_parser("msa-final", help="(workflow) final A3Ms and MSA statistics of a chunk")
    final.add_argument("queries", help="chunk FASTA")
    final.add_argument("--state", required=True, help="state table of the last iteration")
    final.add_argument("--out-dir", required=True)
    final.add_argument("--stats", required=True, help="statistics table (written last)")
    _settings_arguments(final)
    final.set_defaults(handler=run_msa_final)


# --------------------------------------------------------------------------------------------- user commands

def m8_lines(hits: pd.DataFrame) -> list[str]:
    """BLAST tabular (outfmt 6) rows: query, target, %id, length, mismatches, gap opens, ranges, E, bits."""
    lines = []
    for hit in hits.itertuples(index=False):
        states = hit.alignment
        length = len(states)
        mismatches = int(round(hit.aligned_cols * (1.0 - hit.identity)))
        gap_opens = sum(1 for k, s in enumerate(states) if s != "M" and (k == 0 or states[k - 1] != s))
        lines.append(f"{hit.query}\t{hit.target}\t{100.0 * hit.identity:.1f}\t{length}\t{mismatches}\t"
                     f"{gap_opens}\t{hit.qstart}\t{hit.qend}\t{hit.tstart}\t{hit.tend}\t{hit.evalue:.2e}\t"
                     f"{hit.bitscore:.1f}")
    return lines


def run_search(args: argparse.Namespace) -> int:
    keep_freed_memory()
    records = read_fasta(args.queries)
    search_settings, msa_settings = _settings(args)
    results = build_msas(records, args.db, search_settings, msa_settings, cpus=args.cpus, device=_device(args),
                         on_iteration=lambda i, n: log.info("iteration %d: %d queries searched", i, n))
    frames = [it.hits for result in results for it in result.iterations if not it.hits.empty]
    hits = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(HIT_COLUMNS))
    hits = hits.sort_values("iteration", kind="mergesort")
    hits = pd.concat([rank_hits(g, [r.id for r in records]) for _, g in hits.groupby("iteration")]) \
        if not hits.empty else hits
    write_table(args.out, hits.reset_index(drop=True), HITS)
    if args.m8:
        write_text_atomic(args.m8, "".join(line + "\n" for line in m8_lines(hits)))
    print(f"{len(records)} queries, {len(hits)} hits -> {args.out}")
    return 0


def run_msa(args: argparse.Namespace) -> int:
    keep_freed_memory()
    records = read_fasta(args.queries)
    search_settings, msa_settings = _settings(args)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = build_msas(records, args.db, search_settings, msa_settings, cpus=args.cpus, device=_device(args),
                         on_iteration=lambda i, n: log.info("iteration %d: %d queries searched", i, n))
    rows = []
    for record, result in zip(records, results):
        write_a3m(out_dir / f"{record.safe_id}.a3m", result.alignment)
        stats = msa_statistics(result.alignment)
        rows.append({"protein": record.id, "safe_id": record.safe_id, "length": len(record.sequence), **stats,
                     "iterations": len(result.iterations), "reason": result.reason, "seconds": result.seconds,
                     "source": "search"})
    write_table(out_dir / "msa_stats.parquet", pd.DataFrame(rows), MSA_STATS)
    print(f"{len(records)} MSAs -> {out_dir}")
    return 0


# --------------------------------------------------------------------------------------------- workflow jobs

def _precomputed_path(directory: str | None, record: Record) -> Path | None:
    if not directory:
        return None
    for name in (record.safe_id, record.id):
        path = Path(directory) / f"{name}.a3m"
        if path.is_file():
            return path
    return None


def load_precomputed(path: Path, record: Record) -> Alignment:
    """A user's A3M for ``record``, checked: its query row must be the protein's sequence."""
    alignment = read_a3m(path)
    if alignment.query != record.sequence.upper():
        raise InputError(f"the first row is not the sequence of protein {record.id} "
                         f"({len(alignment.query)} vs {len(record.sequence)} residues)", path=path,
                         record=alignment.names[0])
    return alignment


def _read_state(path: str | None, records: list[Record]) -> dict[str, dict]:
    if not path:
        return {}
    frame = read_frame(path, MSA_STATE)
    state = {row["protein"]: row for row in frame.to_dict("records")}
    missing = [r.id for r in records if r.id not in state]
    if missing:
        raise InputError(f"state table has no row for protein(s) {missing[:5]}", path=path)
    return state


def _query_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queries", help="chunk FASTA")
    parser.add_argument("--db", required=True)
    parser.add_argument("--iteration", type=int, required=True)
    parser.add_argument("--state", help="state table of the previous iteration (iterations > 1)")
    parser.add_argument("--precomputed", help="directory of precomputed A3Ms; those proteins are not searched")


def _chunk_queries(args: argparse.Namespace, records: list[Record], totals: DatabaseTotals,
                   search_settings: SearchSettings, msa_settings: MsaSettings) -> list[SearchQuery]:
    """The chunk's proteins still searched in this iteration, as calibrated query profiles."""
    state = _read_state(args.state, records)
    context = msa_settings.context()
    names, profiles = [], []
    for record in records:
        if args.iteration == 1:
            if _precomputed_path(args.precomputed, record) is not None:
                continue
            alignment = None
        else:
            row = state.get(record.id)
            if row is None:
                raise InputError(f"--state is required for iteration {args.iteration}")
            if row["converged"]:
                continue
            alignment = read_a3m(row["a3m"])
        names.append(record.id)
        profiles.append(profile_for(alignment, record.sequence, context))
    return make_queries(names, profiles, totals, search_settings, device=_device(args))


def run_search_profiles(args: argparse.Namespace) -> int:
    records = read_fasta(args.queries)
    search_settings, msa_settings = _settings(args)
    queries = _chunk_queries(args, records, DatabaseTotals.from_manifest(args.db), search_settings, msa_settings)
    write_search_queries(args.out, queries, records)
    return 0


def run_search_shard(args: argparse.Namespace) -> int:
    keep_freed_memory()
    from workflow_lib.db.build import load_kmer_index, load_shard
    records = read_fasta(args.queries)
    search_settings, msa_settings = _settings(args)
    totals = DatabaseTotals.from_manifest(args.db)
    if args.profiles:
        queries = read_search_queries(args.profiles, records)
    else:
        queries = _chunk_queries(args, records, totals, search_settings, msa_settings)
    shard = load_shard(args.db, args.shard)
    index = load_kmer_index(args.db, args.shard)
    started = time.perf_counter()
    results = search_shard(queries, shard, index, totals,
                           search_settings.for_iteration(args.iteration, msa_settings.iterations),
                           iteration=args.iteration, cpus=args.cpus, device=_device(args))
    frames = [r.hits for r in results if not r.hits.empty]
    hits = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(HIT_COLUMNS))
    times = pd.DataFrame({"query": [q.name for q in queries], "iteration": args.iteration, "shard": args.shard,
                          "seconds": [r.seconds for r in results], "candidates": [r.candidates for r in results],
                          "gapless": [r.gapless for r in results], "gapped": [r.gapped for r in results]})
    write_table(args.times, times, SEARCH_TIMES)
    write_table(args.out, rank_hits(hits, [q.name for q in queries]), HITS)
    log.info("%d queries on shard %d in %.1f s", len(queries), args.shard, time.perf_counter() - started)
    return 0


def run_msa_merge(args: argparse.Namespace) -> int:
    records = read_fasta(args.queries)
    search_settings, msa_settings = _settings(args)
    previous = _read_state(args.state, records)
    hits = [read_frame(path, HITS) for path in args.hits]
    hits = [h for h in hits if not h.empty]
    merged = pd.concat(hits, ignore_index=True) if hits else pd.DataFrame(columns=list(HIT_COLUMNS))
    merged = rank_hits(merged, [r.id for r in records])
    times = pd.concat([read_frame(path, SEARCH_TIMES) for path in args.times], ignore_index=True)
    seconds = times.groupby("query")["seconds"].sum().to_dict()
    grouped = dict(tuple(merged.groupby("query", sort=False))) if not merged.empty else {}
    a3m_dir = Path(args.a3m_dir)
    a3m_dir.mkdir(parents=True, exist_ok=True)
    deferred = search_settings.defers(args.iteration, msa_settings.iterations)
    rows = []
    for record in records:
        before = previous.get(record.id)
        precomputed = _precomputed_path(args.precomputed, record) if args.iteration == 1 else None
        if precomputed is not None:
            alignment = load_precomputed(precomputed, record)
            stats = msa_statistics(alignment)
            rows.append(_state_row(record, 0, True, "precomputed", stats, 0, 0.0, str(precomputed), "precomputed"))
            continue
        if before is not None and before["converged"]:
            rows.append(dict(before))
            continue
        own = grouped.get(record.id, merged.iloc[0:0])
        earlier = read_a3m(before["a3m"]) if before is not None else None
        alignment, included, _, converged, reason = msa_step(
            record.id, record.description, record.sequence, own, earlier, args.iteration, msa_settings,
            deferred=deferred)
        path = a3m_dir / f"{record.safe_id}.a3m"
        write_a3m(path, alignment)
        total = (before["seconds"] if before is not None else 0.0) + float(seconds.get(record.id, 0.0))
        rows.append(_state_row(record, args.iteration, converged, reason, msa_statistics(alignment), included,
                               total, str(path), "search"))
    write_table(args.out_state, pd.DataFrame(rows), MSA_STATE)
    return 0


def _state_row(record: Record, iteration: int, converged: bool, reason: str, stats: dict, included: int,
               seconds: float, a3m: str, source: str) -> dict:
    return {"protein": record.id, "safe_id": record.safe_id, "length": len(record.sequence),
            "iteration": iteration, "converged": converged, "reason": reason, "depth": stats["depth"],
            "included": included, "neff": stats["neff"], "coverage": stats["coverage"], "seconds": seconds,
            "a3m": a3m, "source": source}


def run_msa_final(args: argparse.Namespace) -> int:
    """The output MSAs: a searched protein's last search MSA through the output coverage filter; a precomputed
    A3M as the user gave it."""
    records = read_fasta(args.queries)
    _, msa_settings = _settings(args)
    state = _read_state(args.state, records)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for record in records:
        row = state[record.id]
        source = Path(row["a3m"])
        alignment = read_a3m(source)   # validates the file before it becomes a final output
        target = out_dir / f"{record.safe_id}.a3m"
        if row["source"] == "precomputed":
            with atomic_path(target) as tmp:
                shutil.copyfile(source, tmp)
        else:
            alignment = output_alignment(alignment, msa_settings)
            write_a3m(target, alignment)
        stats = msa_statistics(alignment)
        rows.append({"protein": record.id, "safe_id": record.safe_id, "length": len(record.sequence), **stats,
                     "iterations": int(row["iteration"]), "reason": row["reason"], "seconds": row["seconds"],
                     "source": row["source"]})
    write_table(args.stats, pd.DataFrame(rows), MSA_STATS)
    return 0



