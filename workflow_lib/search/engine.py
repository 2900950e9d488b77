"""One search pass: query profiles against a sharded database → ranked hits with E-values.

Seed "Iterative MSA Alignment" (HHblits): for each query profile and each database shard,

1. gapless prefilter on k-mer-seeded diagonals (:mod:`workflow_lib.search.prefilter`), pass if the best
   diagonal scores above ``2.5 + log2(Lq · Lt)`` bits;
2. gapped Smith–Waterman with the query profile (:mod:`workflow_lib.search.gapped`), pass if
   ``N_db · Lq · Lt · 2^-S < 1000`` (targets whose gapless score already clears that pass without the SW run);
3. Viterbi (sequence–profile, :func:`workflow_lib.aligner.align_targets`) with backtrace on the survivors;
4. composition-bias correction of the Viterbi score (:mod:`workflow_lib.search.bias`, HMMER's null2): the
   reported ``bitscore`` is the corrected score;
5. E-value from the query's Gumbel calibration (:mod:`workflow_lib.search.evalue`) and the whole-database
   sequence count from the manifest.

Every number depends only on the query profile, the target and the database totals, never on which shard a
target sits in, so the hits of several shards concatenated and ranked (:func:`rank_hits`) equal an unsharded
search. Queries are spread over processes with ``cpus``; results come back in query order.
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
from workflow_lib.aligner.lanes import resolve_cpus
from workflow_lib.db.build import Shard, load_kmer_index, load_shard, read_manifest
from workflow_lib.search.bias import composition_bias_bits
from workflow_lib.search.evalue import (CALIBRATION_SAMPLES, Calibration, fit_mu, gumbel_lambda, length_slope,
                                        profile_seed, random_sequences)
from workflow_lib.search.gapped import GAP_EXTEND_BITS, GAP_OPEN_BITS, GAPPED_MAX_EVALUE, gapped_pass
from workflow_lib.search.kmer_index import index_is_spaced
from workflow_lib.search.prefilter import (DIAGONALS_PER_TARGET, GAPLESS_OFFSET_BITS, SENSITIVE_PREFILTER,
                                           check_prefilter_values, default_kmer_threshold, gapless_prefilter,
                                           profile_scores_bits)
from workflow_lib.seqio.alphabet import decode

HIT_COLUMNS = ("query", "target", "evalue", "bitscore", "qstart", "qend", "tstart", "tend", "qlen", "tlen",
               "identity", "aligned_cols", "alignment", "iteration", "database", "tseq")


@dataclass(frozen=True)
class SearchSettings:
    """Thresholds of one search pass (defaults: the seed's prefilter, HHblits' reporting)."""

    kmer_threshold: float | None = None  # None: default_kmer_threshold(k and shape of the database's index, kmer_slack)
    kmer_slack: float = 0.0
    diagonals_per_target: int = DIAGONALS_PER_TARGET
    gapless_offset: float = GAPLESS_OFFSET_BITS
    gap_open: float = GAP_OPEN_BITS
    gap_extend: float = GAP_EXTEND_BITS
    gapped_max_evalue: float = GAPPED_MAX_EVALUE
    max_evalue: float = 10.0
    calibration_samples: int = CALIBRATION_SAMPLES

    def seed_threshold(self, k: int, spaced: bool = False) -> float:
        """The seed threshold (bits) on an index of weight ``k`` (``spaced``: its shape has gaps): the one
        given, else the default for that index."""
        if self.kmer_threshold is not None:
            return self.kmer_threshold
        return default_kmer_threshold(k, self.kmer_slack, spaced=spaced)


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


def search_query_shard(query: SearchQuery, shard: Shard, index: dict[str, np.ndarray], totals: DatabaseTotals,
                       settings: SearchSettings = SearchSettings(), *, iteration: int = 1) -> QueryResult:
    """Prefilter → Viterbi → E-values for one query on one shard (see the module docstring)."""
    started = time.perf_counter()
    profile = query.profile
    scores = profile_scores_bits(profile.emissions, profile.background)
    gapless = gapless_prefilter(scores, index, shard.residues, shard.offsets,
                                kmer_threshold=settings.seed_threshold(int(index["k"]), index_is_spaced(index)),
                                diagonals_per_target=settings.diagonals_per_target,
                                offset_bits=settings.gapless_offset)
    candidates = [shard.sequence(int(s)) for s in gapless.sequence]
    passed, _ = gapped_pass(scores, candidates, gapless.score, totals.sequences,
                            max_evalue=settings.gapped_max_evalue, gap_open=settings.gap_open,
                            gap_extend=settings.gap_extend)
    lengths = np.array([c.size for c in candidates], dtype=np.int64)
    rows = []
    if passed.size:
        targets = [candidates[k] for k in passed]
        hits = align_targets(profile, targets, backtrace=True, cpus=1)
        bits = np.array([h.score - composition_bias_bits(profile.emissions, profile.background, target, h.pairs)
                         for h, target in zip(hits, targets)], dtype=np.float64)
        evalues = query.calibration.evalues(bits, lengths[passed], totals.sequences)
        query_codes = profile.sequence
        for k, hit, score, evalue in zip(passed, hits, bits, evalues):
            if evalue > settings.max_evalue or hit.aligned_columns == 0:
                continue
            target = candidates[k]
            pairs = hit.pairs
            identity = float(np.mean(query_codes[pairs[:, 0]] == target[pairs[:, 1]]))
            rows.append((query.name, shard.ids[int(gapless.sequence[k])], float(evalue), float(score),
                         hit.query_start + 1, hit.query_end, hit.target_start + 1, hit.target_end,
                         profile.length, int(target.size), identity, hit.aligned_columns, hit.states, iteration,
                         totals.name, decode(target[hit.target_start:hit.target_end])))
    frame = pd.DataFrame(rows, columns=list(HIT_COLUMNS))
    return QueryResult(frame, gapless.seeded_targets, int(gapless.sequence.size), int(passed.size),
                       time.perf_counter() - started)


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


def _query_task(position: int) -> QueryResult:
    return search_query_shard(_WORKER["queries"][position], _WORKER["shard"], _WORKER["index"],  # type: ignore[index]
                              _WORKER["totals"], _WORKER["settings"], iteration=_WORKER["iteration"])  # type: ignore[arg-type]


def search_shard(queries: list[SearchQuery], shard: Shard, index: dict[str, np.ndarray], totals: DatabaseTotals,
                 settings: SearchSettings = SearchSettings(), *, iteration: int = 1,
                 cpus: int | None = 1) -> list[QueryResult]:
    """All queries against one loaded shard (the shard is read once for the whole batch); query order kept."""
    workers = min(resolve_cpus(cpus), max(len(queries), 1))
    _WORKER.update(queries=queries, shard=shard, index=index, totals=totals, settings=settings,
                   iteration=iteration)
    try:
        if workers <= 1:
            return [_query_task(k) for k in range(len(queries))]
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(_query_task, range(len(queries)), chunksize=1)
    finally:
        _WORKER.clear()


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
