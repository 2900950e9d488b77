"""One search pass: query profiles against a sharded database → ranked hits with E-values.

Seed "Iterative MSA Alignment" (HHblits): for each query profile and each database shard,

1. gapless prefilter on k-mer-seeded diagonals (:mod:`workflow_lib.search.prefilter`), pass if the best
   diagonal scores above ``2.5 + log2(Lq · Lt)`` bits;
2. gapped Smith–Waterman with the query profile (:mod:`workflow_lib.search.gapped`), pass if
   ``N_db · Lq · Lt · 2^-S < 1000`` (targets whose gapless score already clears that pass without the SW run);
3. Viterbi (sequence–profile) with backtrace on the survivors. Queries are searched in groups of similar
   length (:func:`search_query_group`): a group's survivors go through
   :func:`workflow_lib.aligner.lanes.align_shared`, where queries with few survivors each share lane buckets
   (the mixed-profile kernel), with exactly the hits of aligning each query alone;
4. composition-bias correction of the Viterbi score (:mod:`workflow_lib.search.bias`, HMMER's null2): the
   reported ``bitscore`` is the corrected score;
5. E-value from the query's Gumbel calibration (:mod:`workflow_lib.search.evalue`) and the whole-database
   sequence count from the manifest.

Every number depends only on the query profile, the target and the database totals, never on which shard a
target sits in, so the hits of several shards concatenated and ranked (:func:`rank_hits`) equal an unsharded
search. Query groups are spread over processes with ``cpus``; results come back in query order.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.aligner import Profile, align_targets
from workflow_lib.aligner.lanes import align_shared, resolve_cpus
from workflow_lib.db.build import Shard, load_kmer_index, load_shard, read_manifest
from workflow_lib.search.bias import composition_bias_bits
from workflow_lib.search.evalue import (CALIBRATION_SAMPLES, Calibration, fit_mu, gumbel_lambda, length_slope,
                                        profile_seed, random_sequences)
from workflow_lib.search.gapped import GAP_EXTEND_BITS, GAP_OPEN_BITS, GAPPED_MAX_EVALUE, gapped_pass
from workflow_lib.search.prefilter import (DIAGONALS_PER_TARGET, GAPLESS_OFFSET_BITS, SENSITIVE_PREFILTER,
                                           GaplessHits, check_prefilter_values, default_kmer_threshold,
                                           gapless_prefilter, profile_scores_bits)
from workflow_lib.seqio.alphabet import decode

HIT_COLUMNS = ("query", "target", "evalue", "bitscore", "qstart", "qend", "tstart", "tend", "qlen", "tlen",
               "identity", "aligned_cols", "alignment", "iteration", "database", "tseq")


@dataclass(frozen=True)
class SearchSettings:
    """Thresholds of one search pass (defaults: the seed's prefilter, HHblits' reporting)."""

    kmer_threshold: float | None = None  # None: default_kmer_threshold(k of the database's index, kmer_slack)
    kmer_slack: float = 0.0
    diagonals_per_target: int = DIAGONALS_PER_TARGET
    gapless_offset: float = GAPLESS_OFFSET_BITS
    gap_open: float = GAP_OPEN_BITS
    gap_extend: float = GAP_EXTEND_BITS
    gapped_max_evalue: float = GAPPED_MAX_EVALUE
    max_evalue: float = 10.0
    calibration_samples: int = CALIBRATION_SAMPLES

    def seed_threshold(self, k: int) -> float:
        """The seed threshold (bits) on an index of ``k``-mers: the one given, else the default for ``k``."""
        return self.kmer_threshold if self.kmer_threshold is not None else default_kmer_threshold(k, self.kmer_slack)


def prefilter_settings(*, sensitive: bool = False, kmer_threshold: float | None = None,
                       diagonals_per_target: int | None = None, gapless_offset: float | None = None,
                       **other) -> SearchSettings:
    """:class:`SearchSettings` from the default or the sensitive prefilter, with any value given overriding it.

    Raises ``ValueError`` for a non-finite threshold or fewer than one diagonal per target."""
    base = SearchSettings(**SENSITIVE_PREFILTER) if sensitive else SearchSettings()
    given = {"kmer_threshold": kmer_threshold, "diagonals_per_target": diagonals_per_target,
             "gapless_offset": gapless_offset}
    check_prefilter_values(**given)
    values = {key: value for key, value in given.items() if value is not None}
    return dataclasses.replace(base, **values, **other)


@dataclass(frozen=True)
class DatabaseTotals:
    """Whole-database numbers every shard search uses (from ``manifest.json``)."""

    name: str
    sequences: int
    residues: int

    @property
    def mean_length(self) -> float:
        return self.residues / max(self.sequences, 1)

    @classmethod
    def from_manifest(cls, db_dir: str | Path) -> DatabaseTotals:
        manifest = read_manifest(db_dir)
        return cls(Path(db_dir).name, int(manifest.total_sequences), int(manifest.total_residues))


@dataclass(frozen=True)
class SearchQuery:
    """A query profile with its calibration."""

    name: str
    profile: Profile
    calibration: Calibration


def calibrate(profile: Profile, totals: DatabaseTotals, samples: int = CALIBRATION_SAMPLES) -> Calibration:
    """Gumbel μ of ``profile`` against random sequences (deterministic; see :mod:`~workflow_lib.search.evalue`)."""
    targets = random_sequences(profile.background, totals.mean_length, samples,
                               profile_seed(profile.sequence, profile.emissions))
    scores = np.array([hit.score for hit in align_targets(profile, targets, cpus=1)], dtype=np.float64)
    lam = gumbel_lambda(profile.neff, profile.length)
    model = Calibration(0.0, lam, length_slope(profile.neff, profile.length), float(targets[0].size))
    return dataclasses.replace(model, mu=fit_mu(model.corrected(scores, [t.size for t in targets]), lam))


def make_query(name: str, profile: Profile, totals: DatabaseTotals,
               settings: SearchSettings = SearchSettings()) -> SearchQuery:
    return SearchQuery(name, profile, calibrate(profile, totals, settings.calibration_samples))


@dataclass
class QueryResult:
    """Hits of one query on one shard, with the prefilter's counts and the time it took."""

    hits: pd.DataFrame
    candidates: int
    gapless: int
    gapped: int
    seconds: float


@dataclass
class _Prefiltered:
    """A query's prefilter survivors on one shard (before Viterbi)."""

    gapless: GaplessHits
    candidates: list[np.ndarray]
    passed: np.ndarray
    seconds: float


def _prefilter(query: SearchQuery, shard: Shard, index: dict[str, np.ndarray], totals: DatabaseTotals,
               settings: SearchSettings) -> _Prefiltered:
    """Stages 1–2 (gapless on k-mer-seeded diagonals, then gapped Smith–Waterman) for one query."""
    started = time.perf_counter()
    profile = query.profile
    scores = profile_scores_bits(profile.emissions, profile.background)
    gapless = gapless_prefilter(scores, index, shard.residues, shard.offsets,
                                kmer_threshold=settings.seed_threshold(int(index["k"])),
                                diagonals_per_target=settings.diagonals_per_target,
                                offset_bits=settings.gapless_offset)
    candidates = [shard.sequence(int(s)) for s in gapless.sequence]
    passed, _ = gapped_pass(scores, candidates, gapless.score, totals.sequences,
                            max_evalue=settings.gapped_max_evalue, gap_open=settings.gap_open,
                            gap_extend=settings.gap_extend)
    return _Prefiltered(gapless, candidates, passed, time.perf_counter() - started)


def _report(query: SearchQuery, found: _Prefiltered, hits: list, shard: Shard, totals: DatabaseTotals,
            settings: SearchSettings, iteration: int) -> pd.DataFrame:
    """Steps 4–5 for one query's Viterbi hits: bias-corrected scores, E-values, the rows of the hits table."""
    profile = query.profile
    rows = []
    if found.passed.size:
        targets = [found.candidates[k] for k in found.passed]
        lengths = np.array([t.size for t in targets], dtype=np.int64)
        bits = np.array([h.score - composition_bias_bits(profile.emissions, profile.background, target, h.pairs)
                         for h, target in zip(hits, targets)], dtype=np.float64)
        evalues = query.calibration.evalues(bits, lengths, totals.sequences)
        query_codes = profile.sequence
        for k, hit, target, score, evalue in zip(found.passed, hits, targets, bits, evalues):
            if evalue > settings.max_evalue or hit.aligned_columns == 0:
                continue
            pairs = hit.pairs
            identity = float(np.mean(query_codes[pairs[:, 0]] == target[pairs[:, 1]]))
            rows.append((query.name, shard.ids[int(found.gapless.sequence[k])], float(evalue), float(score),
                         hit.query_start + 1, hit.query_end, hit.target_start + 1, hit.target_end,
                         profile.length, int(target.size), identity, hit.aligned_columns, hit.states, iteration,
                         totals.name, decode(target[hit.target_start:hit.target_end])))
    return pd.DataFrame(rows, columns=list(HIT_COLUMNS))


def search_query_group(queries: list[SearchQuery], shard: Shard, index: dict[str, np.ndarray],
                       totals: DatabaseTotals, settings: SearchSettings = SearchSettings(), *,
                       iteration: int = 1) -> list[QueryResult]:
    """Prefilter → Viterbi → E-values for several queries on one shard (see the module docstring).

    Each query is prefiltered alone; the survivors' Viterbi runs for all of them at once through
    :func:`~workflow_lib.aligner.lanes.align_shared`, so queries with few survivors share lane buckets. The hits
    are exactly those of searching each query alone. A query's ``seconds`` are its own prefilter and E-value
    time plus the shared Viterbi time split by its share of the Viterbi cells.
    """
    found = [_prefilter(query, shard, index, totals, settings) for query in queries]
    started = time.perf_counter()
    hits = align_shared([q.profile for q in queries],
                        [[f.candidates[k] for k in f.passed] for f in found], backtrace=True)
    viterbi_seconds = time.perf_counter() - started
    cells = np.array([q.profile.length * sum(int(f.candidates[k].size) for k in f.passed)
                      for q, f in zip(queries, found)], dtype=np.float64)
    shares = cells / cells.sum() if cells.sum() > 0 else np.full(len(queries), 1.0 / max(len(queries), 1))
    results = []
    for query, f, query_hits, share in zip(queries, found, hits, shares):
        started = time.perf_counter()
        frame = _report(query, f, query_hits, shard, totals, settings, iteration)
        seconds = f.seconds + share * viterbi_seconds + time.perf_counter() - started
        results.append(QueryResult(frame, f.gapless.seeded_targets, int(f.gapless.sequence.size),
                                   int(f.passed.size), seconds))
    return results


def search_query_shard(query: SearchQuery, shard: Shard, index: dict[str, np.ndarray], totals: DatabaseTotals,
                       settings: SearchSettings = SearchSettings(), *, iteration: int = 1) -> QueryResult:
    """Prefilter → Viterbi → E-values for one query on one shard (see the module docstring)."""
    return search_query_group([query], shard, index, totals, settings, iteration=iteration)[0]


def rank_hits(frame: pd.DataFrame, query_order: list[str] | None = None) -> pd.DataFrame:
    """Hits sorted by query (in ``query_order`` or by name), then E-value, bit score (desc), target."""
    if frame.empty:
        return frame.reset_index(drop=True)
    frame = frame.copy()
    if query_order is not None:
        rank = {name: k for k, name in enumerate(query_order)}
        frame["_q"] = frame["query"].map(rank)
    else:
        frame["_q"] = frame["query"]
    frame = frame.sort_values(["_q", "evalue", "bitscore", "target"], ascending=[True, True, False, True],
                              kind="mergesort")
    return frame.drop(columns="_q").reset_index(drop=True)


_WORKER: dict[str, object] = {}
SHARED_QUERIES = 16
"""Queries (consecutive by profile length) searched together by one task, so that their Viterbi survivors can
share lane buckets (:func:`search_query_group`)."""


def query_groups(lengths: list[int], workers: int) -> list[list[int]]:
    """Query indices in groups of similar profile length: at most :data:`SHARED_QUERIES` per group, and at least
    two groups per worker when there are enough queries (so the pool stays busy)."""
    if not lengths:
        return []
    size = max(1, min(SHARED_QUERIES, len(lengths) // (2 * workers) if workers > 1 else SHARED_QUERIES))
    order = sorted(range(len(lengths)), key=lambda q: (lengths[q], q))
    return [order[k:k + size] for k in range(0, len(order), size)]


def _group_task(members: list[int]) -> list[QueryResult]:
    return search_query_group([_WORKER["queries"][k] for k in members], _WORKER["shard"],  # type: ignore[index]
                              _WORKER["index"], _WORKER["totals"], _WORKER["settings"],  # type: ignore[arg-type]
                              iteration=_WORKER["iteration"])  # type: ignore[arg-type]


def search_shard(queries: list[SearchQuery], shard: Shard, index: dict[str, np.ndarray], totals: DatabaseTotals,
                 settings: SearchSettings = SearchSettings(), *, iteration: int = 1,
                 cpus: int | None = 1) -> list[QueryResult]:
    """All queries against one loaded shard (the shard is read once for the whole batch); query order kept.

    Queries run in groups of similar length (:func:`query_groups`, :func:`search_query_group`); ``cpus``
    processes take groups."""
    workers = min(resolve_cpus(cpus), max(len(queries), 1))
    groups = query_groups([q.profile.length for q in queries], workers)
    _WORKER.update(queries=queries, shard=shard, index=index, totals=totals, settings=settings,
                   iteration=iteration)
    try:
        if workers <= 1 or len(groups) <= 1:
            outputs = [_group_task(members) for members in groups]
        else:
            with multiprocessing.get_context("fork").Pool(min(workers, len(groups))) as pool:
                outputs = pool.map(_group_task, groups, chunksize=1)
    finally:
        _WORKER.clear()
    results: list[QueryResult | None] = [None] * len(queries)
    for members, output in zip(groups, outputs):
        for k, result in zip(members, output):
            results[k] = result
    return results  # type: ignore[return-value]


def search_database(queries: list[SearchQuery], db_dir: str | Path, settings: SearchSettings = SearchSettings(),
                    *, iteration: int = 1, cpus: int | None = 1,
                    shards: list[int] | None = None) -> tuple[pd.DataFrame, dict[str, float]]:
    """Every shard (or the listed ones) in turn; returns the ranked hits and search seconds per query."""
    manifest = read_manifest(db_dir)
    totals = DatabaseTotals.from_manifest(db_dir)
    frames, seconds = [], {q.name: 0.0 for q in queries}
    for shard_index in (range(manifest.n_shards) if shards is None else shards):
        shard = load_shard(db_dir, shard_index)
        index = load_kmer_index(db_dir, shard_index)
        for query, result in zip(queries, search_shard(queries, shard, index, totals, settings,
                                                       iteration=iteration, cpus=cpus)):
            frames.append(result.hits)
            seconds[query.name] += result.seconds
    frames = [f for f in frames if not f.empty]
    merged = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(HIT_COLUMNS))
    return rank_hits(merged, [q.name for q in queries]), seconds
