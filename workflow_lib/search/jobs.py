"""The bodies of ``trackfold search`` / ``trackfold msa`` and of the workflow's per-job commands.

User commands:

- :func:`search_job`: one hits table (:data:`~workflow_lib.schemas.search.HITS`) for all queries and iterations,
  and optionally BLAST tabular.
- :func:`msa_job`: ``DIR/{safe_id}.a3m`` per query and ``DIR/msa_stats.parquet``
  (:data:`~workflow_lib.schemas.search.MSA_STATS`).

Workflow jobs (rules/search.smk): :func:`search_profiles_job` (a chunk's query profiles of one iteration with
their E-value calibration, :mod:`~workflow_lib.search.query_store`), :func:`search_shard_job` (those queries ×
one shard), :func:`msa_merge_job` (all shards of an iteration → MSAs and the next state, one
:func:`~workflow_lib.search.iterative.advance` per query) and :func:`msa_final_job` (the final ``{safe_id}.a3m``
files and the chunk's statistics, written last). The iteration a user command runs in one process
(:func:`~workflow_lib.search.iterative.iterations`) is the same step the jobs take one iteration at a time.

Every job takes its settings as one :class:`~workflow_lib.search.settings.Settings`.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import pandas as pd

from workflow_lib.db.profiles import KIND as PROFILE_KIND
from workflow_lib.db.profiles import database_kind
from workflow_lib.errors import InputError
from workflow_lib.schemas.io import read_frame, write_table
from workflow_lib.schemas.search import MSA_STATE, MSA_STATS, SEARCH_TIMES
from workflow_lib.search.allocator import keep_freed_memory
from workflow_lib.search.engine import DatabaseTotals, SearchQuery, make_queries
from workflow_lib.search.hits import Hits
from workflow_lib.search.iterative import MsaResult, QueryState, advance, msa_statistics, output_alignment
from workflow_lib.search.profile_search import ProfileSearchSettings, build_profile_msas
from workflow_lib.search.query_store import read_search_queries, write_search_queries
from workflow_lib.search.searcher import Searcher
from workflow_lib.search.settings import Settings
from workflow_lib.seqio.atomic import atomic_path
from workflow_lib.seqio.fasta import Record, read_fasta
from workflow_lib.seqio.msa import Alignment, read_a3m, write_a3m

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- user commands

def _log_iteration(iteration: int, searched: int) -> None:
    log.info("iteration %d: %d queries searched", iteration, searched)


def iterate_any(records: list[Record], db: str | Path, settings: Settings, *, cpus: int | None = 1,
                device: str | None = "numpy") -> list[MsaResult]:
    """Iterative MSAs of ``records`` against ``db``: a sequence database (:class:`Searcher`) or a profile database
    (``trackfold db cluster``; :func:`~workflow_lib.search.profile_search.build_profile_msas`, one process)."""
    if database_kind(db) == PROFILE_KIND:
        search_settings = ProfileSearchSettings(max_evalue=settings.max_evalue, sensitive=settings.sensitive)
        return build_profile_msas(records, db, settings.msa, search_settings, on_iteration=_log_iteration)
    return Searcher(db, settings=settings, cpus=cpus, device=device).iterate(records, on_iteration=_log_iteration)


def search_job(queries: str | Path, db: str | Path, *, out: str | Path, settings: Settings,
               m8: str | Path | None = None, cpus: int | None = 1, device: str | None = "numpy") -> int:
    """``trackfold search``: every iteration's hits of every query, ranked per iteration, to ``out``."""
    keep_freed_memory()
    records = read_fasta(queries)
    results = iterate_any(records, db, settings, cpus=cpus, device=device)
    hits = Hits.from_iterations(results, query_order=[record.id for record in records])
    hits.write_parquet(out)
    if m8:
        hits.write_m8(m8)
    print(f"{len(records)} queries, {len(hits)} hits -> {out}")
    return 0


def msa_job(queries: str | Path, db: str | Path, *, out_dir: str | Path, settings: Settings,
            cpus: int | None = 1, device: str | None = "numpy", stats: str | Path | None = None) -> int:
    """``trackfold msa``: the output MSA of every query, then their statistics (``stats``, default
    ``out_dir/msa_stats.parquet``; written last, so a complete table means complete A3Ms)."""
    keep_freed_memory()
    records = read_fasta(queries)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = iterate_any(records, db, settings, cpus=cpus, device=device)
    rows = []
    for record, result in zip(records, results):
        write_a3m(out_dir / f"{record.safe_id}.a3m", result.alignment)
        numbers = msa_statistics(result.alignment)
        rows.append({"protein": record.id, "safe_id": record.safe_id, "length": len(record.sequence), **numbers,
                     "iterations": len(result.iterations), "reason": result.reason, "seconds": result.seconds,
                     "source": "search"})
    write_table(stats or out_dir / "msa_stats.parquet", pd.DataFrame(rows), MSA_STATS)
    print(f"{len(records)} MSAs -> {out_dir}")
    return 0


# --------------------------------------------------------------------------------------------- workflow jobs

def precomputed_path(directory: str | Path | None, record: Record) -> Path | None:
    """The user's A3M for ``record`` in ``directory`` (named by its safe ID or its ID), or None."""
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


def read_state(path: str | Path | None, records: list[Record]) -> dict[str, dict]:
    """The rows of a state table (:data:`~workflow_lib.schemas.search.MSA_STATE`) by protein; every record needs
    one (no path: none)."""
    if not path:
        return {}
    frame = read_frame(path, MSA_STATE)
    state = {row["protein"]: row for row in frame.to_dict("records")}
    missing = [r.id for r in records if r.id not in state]
    if missing:
        raise InputError(f"state table has no row for protein(s) {missing[:5]}", path=path)
    return state


def query_state(record: Record, row: dict | None) -> QueryState:
    """The :class:`~workflow_lib.search.iterative.QueryState` of ``record`` from its state-table row (None: before
    iteration 1)."""
    state = QueryState(record.id, record.description, record.sequence)
    if row is not None:
        state.alignment = read_a3m(row["a3m"])
        state.iteration, state.converged, state.reason = int(row["iteration"]), bool(row["converged"]), row["reason"]
        state.included, state.seconds = int(row["included"]), row["seconds"]
    return state


def state_row(record: Record, iteration: int, converged: bool, reason: str, stats: dict, included: int,
              seconds: float, a3m: str, source: str) -> dict:
    """A row of the state table (:data:`~workflow_lib.schemas.search.MSA_STATE`)."""
    return {"protein": record.id, "safe_id": record.safe_id, "length": len(record.sequence),
            "iteration": iteration, "converged": converged, "reason": reason, "depth": stats["depth"],
            "included": included, "neff": stats["neff"], "coverage": stats["coverage"], "seconds": seconds,
            "a3m": a3m, "source": source}


def chunk_queries(records: list[Record], totals: DatabaseTotals, settings: Settings, *, iteration: int,
                  state: str | Path | None = None, precomputed: str | Path | None = None,
                  device: str | None = "numpy") -> list[SearchQuery]:
    """The chunk's proteins still searched in ``iteration``, as calibrated query profiles."""
    rows = read_state(state, records)
    msa = settings.msa
    context = msa.context()
    names, profiles = [], []
    for record in records:
        if iteration == 1:
            if precomputed_path(precomputed, record) is not None:
                continue
            row = None
        else:
            row = rows.get(record.id)
            if row is None:
                raise InputError(f"--state is required for iteration {iteration}")
            if row["converged"]:
                continue
        names.append(record.id)
        profiles.append(query_state(record, row).profile(context))
    return make_queries(names, profiles, totals, settings.search.for_iteration(iteration, msa.iterations),
                        device=device)


def search_profiles_job(queries: str | Path, db: str | Path, *, iteration: int, out: str | Path,
                        settings: Settings, state: str | Path | None = None, precomputed: str | Path | None = None,
                        device: str | None = "numpy") -> int:
    """``search-profiles``: the chunk's calibrated query profiles of ``iteration``."""
    records = read_fasta(queries)
    search_queries = chunk_queries(records, DatabaseTotals.from_manifest(db), settings, iteration=iteration,
                                   state=state, precomputed=precomputed, device=device)
    write_search_queries(out, search_queries, records)
    return 0


def search_shard_job(queries: str | Path, db: str | Path, *, shard: int, iteration: int, out: str | Path,
                     times: str | Path, settings: Settings, profiles: str | Path | None = None,
                     state: str | Path | None = None, precomputed: str | Path | None = None,
                     cpus: int | None = 1, device: str | None = "numpy") -> int:
    """``search-shard``: the chunk's queries (``profiles``, else built here) against one shard."""
    keep_freed_memory()
    records = read_fasta(queries)
    searcher = Searcher(db, settings=settings, cpus=cpus, device=device)
    if profiles:
        search_queries = read_search_queries(profiles, records)
    else:
        search_queries = chunk_queries(records, searcher.totals, settings, iteration=iteration, state=state,
                                       precomputed=precomputed, device=device)
    started = time.perf_counter()
    hits, results = searcher.search_shard(search_queries, shard, iteration=iteration)
    frame = pd.DataFrame({"query": [q.name for q in search_queries], "iteration": iteration, "shard": shard,
                          "seconds": [r.seconds for r in results], "candidates": [r.candidates for r in results],
                          "gapless": [r.gapless for r in results], "gapped": [r.gapped for r in results]})
    write_table(times, frame, SEARCH_TIMES)
    hits.write_parquet(out)
    log.info("%d queries on shard %d in %.1f s", len(search_queries), shard, time.perf_counter() - started)
    return 0


def msa_merge_job(queries: str | Path, *, iteration: int, hits: list[str | Path], times: list[str | Path],
                  a3m_dir: str | Path, out_state: str | Path, settings: Settings, state: str | Path | None = None,
                  precomputed: str | Path | None = None) -> int:
    """``msa-merge``: the shards' hits of ``iteration`` → one :func:`~workflow_lib.search.iterative.advance` per
    protein still searched → its MSA and the next state table."""
    records = read_fasta(queries)
    msa = settings.msa
    previous = read_state(state, records)
    merged = Hits.merge([Hits.read_parquet(path) for path in hits], query_order=[r.id for r in records]).to_frame()
    shard_times = pd.concat([read_frame(path, SEARCH_TIMES) for path in times], ignore_index=True)
    seconds = shard_times.groupby("query")["seconds"].sum().to_dict()
    grouped = dict(tuple(merged.groupby("query", sort=False))) if not merged.empty else {}
    a3m_dir = Path(a3m_dir)
    a3m_dir.mkdir(parents=True, exist_ok=True)
    deferred = settings.search.defers(iteration, msa.iterations)
    rows = []
    for record in records:
        before = previous.get(record.id)
        precomputed_a3m = precomputed_path(precomputed, record) if iteration == 1 else None
        if precomputed_a3m is not None:
            stats = msa_statistics(load_precomputed(precomputed_a3m, record))
            rows.append(state_row(record, 0, True, "precomputed", stats, 0, 0.0, str(precomputed_a3m),
                                  "precomputed"))
            continue
        if before is not None and before["converged"]:
            rows.append(dict(before))
            continue
        progress = query_state(record, before)
        step = advance(progress, grouped.get(record.id, merged.iloc[0:0]), iteration, msa, deferred=deferred,
                       seconds=float(seconds.get(record.id, 0.0)))
        path = a3m_dir / f"{record.safe_id}.a3m"
        write_a3m(path, progress.alignment)
        rows.append(state_row(record, iteration, step.converged, step.reason, msa_statistics(progress.alignment),
                              step.included, progress.seconds, str(path), "search"))
    write_table(out_state, pd.DataFrame(rows), MSA_STATE)
    return 0


def msa_final_job(queries: str | Path, *, state: str | Path, out_dir: str | Path, stats: str | Path,
                  settings: Settings) -> int:
    """``msa-final``: a searched protein's last search MSA through the output coverage filter; a precomputed
    A3M as the user gave it; then the chunk's statistics."""
    records = read_fasta(queries)
    msa = settings.msa
    rows_in = read_state(state, records)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for record in records:
        row = rows_in[record.id]
        source = Path(row["a3m"])
        alignment = read_a3m(source)   # validates the file before it becomes a final output
        target = out_dir / f"{record.safe_id}.a3m"
        if row["source"] == "precomputed":
            with atomic_path(target) as tmp:
                shutil.copyfile(source, tmp)
        else:
            alignment = output_alignment(alignment, msa)
            write_a3m(target, alignment)
        rows.append({"protein": record.id, "safe_id": record.safe_id, "length": len(record.sequence),
                     **msa_statistics(alignment), "iterations": int(row["iteration"]), "reason": row["reason"],
                     "seconds": row["seconds"], "source": row["source"]})
    write_table(stats, pd.DataFrame(rows), MSA_STATS)
    return 0
