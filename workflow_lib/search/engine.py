"""One search pass: query profiles against a sharded database → ranked hits with E-values.

HHblits (Remmert et al. 2012, Nat. Methods 9:173): for each query profile and each database shard,

1. gapless prefilter on k-mer-seeded diagonals (:mod:`workflow_lib.search.gapless`). HHblits passes a target
   whose best diagonal scores above ``2.5 + log2(Lq · Lt)`` bits. Here a target passes directly above
   ``gapless_offset`` (4.5; in a large database no lower than 4 bits below step 2's bar,
   :func:`workflow_lib.search.gapped.direct_pass_offset`) and, between ``band_gate`` (−2) and that, only when
1b. its banded Smith–Waterman score (a band of ``band_width`` = 16 diagonals around its best gapless diagonal,
   :func:`workflow_lib.search.gapped.banded_scores_many`) is above ``band_offset + log2(Lq · Lt)`` (6) bits.
   A remote homolog's alignment is split by indels over nearby diagonals, so its best single diagonal can
   score low; the band sums the pieces. For no more CPU this finds more homologs than HHblits' single
   pass (benchmarks/RESULTS.md, "Prefilter: seed shape and the banded stage"). ``band_gate >= gapless_offset``
   turns 1b off (HHblits' stage 1 at ``gapless_offset``). The queries of one task share the banded kernel's rows;
   Stages 1 and 2 score the profile against a null model with some of the profile's own mean composition
   (``prefilter_composition``, :func:`workflow_lib.search.seeds.prefilter_background`; context-specific
   profiles only, by default), so that targets whose score comes from composition, which step 4 would take
   away, do not reach the Viterbi;
2. gapped Smith–Waterman with the query profile (:mod:`workflow_lib.search.gapped`), pass if
   ``N_db · Lq · Lt · 2^-S < 1000`` (targets whose gapless score already clears that pass without the SW run);
3. Viterbi (sequence–profile, :func:`workflow_lib.aligner.align_targets`) with backtrace on the survivors; the
   paths are traced only for targets that can be reported (:func:`reportable_bits`: raw score at least the one
   where the E-value reaches ``max_evalue``; NumPy backend);
4. composition-bias correction of the Viterbi score (:mod:`workflow_lib.search.bias`, HMMER's null2): the
   reported ``bitscore`` is the corrected score;
5. E-value from the query's Gumbel calibration (:mod:`workflow_lib.search.evalue`) and the whole-database
   sequence count from the manifest.

Every number depends only on the query profile, the target and the database totals, never on which shard a
target sits in, so the hits of several shards concatenated and ranked (:func:`rank_hits`) equal an unsharded
search. Queries are spread over processes with ``cpus``; results come back in query order.

``device`` (every search function): where the Viterbi stages run. ``"numpy"`` (the default) or a torch device
string (``"cuda"``, ``"cpu"``), or ``None`` for CUDA when ``torch.cuda.is_available()``, else NumPy. With NumPy
each worker process runs whole queries (prefilter and Viterbi). On a torch device the ``cpus`` processes run the
prefilter only, and this process, the only one that touches the device, aligns the survivors of all queries of
the shard in shared buckets (:func:`workflow_lib.aligner.align_pairs`; on CUDA the fused Triton kernel with the
traceback on the device); the calibration of all queries of a batch is batched the same way
(:func:`make_queries`). The hits are identical on every backend. (A CUDA context cannot cross ``fork``: the
worker processes never touch the device.) NumPy is the default because the device path, though it saves CPU
seconds, took more wall time on a GPU machine (benchmarks/RESULTS.md, "Homology search on a GPU").
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.aligner import Hit, Profile, align_pairs, align_targets
from workflow_lib.aligner.lanes import resolve_cpus
from workflow_lib.aligner.torch_kernels import NUMPY, resolve_device
from workflow_lib.db.build import Shard, load_kmer_index, load_shard, read_manifest
from workflow_lib.db.kmer_index import index_is_spaced
from workflow_lib.search.bias import composition_bias_bits
from workflow_lib.search.evalue import (REVERSED_LAMBDA_SCALE, Calibration, calibration_samples,
                                        decoy_windows, fit_mu, gumbel_lambda, length_slope, load_decoy_pool,
                                        profile_seed, random_sequences)
from workflow_lib.search.gapless import GaplessHits, gapless_prefilter, padded_residues
from workflow_lib.search.gapped import (band_decide, band_split, banded_scores_many, direct_pass_offset,
                                        gapped_pass)
from workflow_lib.search.seeds import prefilter_background, profile_scores_bits
from workflow_lib.search.settings import SearchSettings
from workflow_lib.search.shard_cache import ShardCache
from workflow_lib.seqio.alphabet import decode

HIT_COLUMNS = ("query", "target", "evalue", "bitscore", "qstart", "qend", "tstart", "tend", "qlen", "tlen",
               "identity", "aligned_cols", "alignment", "iteration", "database", "tseq")


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


def calibration_targets(profile: Profile, totals: DatabaseTotals, samples: int | None = None,
                        calibration: str = "random") -> list[np.ndarray]:
    """The sequences ``profile`` is calibrated against (seeded by the profile's contents): i.i.d. from its
    background, or (``reversed``) windows of the shipped reversed proteins; ``samples`` of them (None: the
    calibration's default, :func:`~workflow_lib.search.evalue.calibration_samples`)."""
    samples = calibration_samples(calibration, samples)
    seed = profile_seed(profile.sequence, profile.emissions)
    if calibration == "reversed":
        return decoy_windows(load_decoy_pool(), totals.mean_length, samples, seed)
    return random_sequences(profile.background, totals.mean_length, samples, seed)


def fit_calibration(profile: Profile, targets: list[np.ndarray], scores: np.ndarray,
                    calibration: str = "random") -> Calibration:
    """Gumbel μ of ``profile`` from its Viterbi ``scores`` (bits) against its ``calibration`` ``targets``, with
    λ from :func:`gumbel_lambda` (times :data:`REVERSED_LAMBDA_SCALE` for ``reversed`` decoys)."""
    lam = gumbel_lambda(profile.neff, profile.length)
    if calibration == "reversed":
        lam *= REVERSED_LAMBDA_SCALE
    model = Calibration(0.0, lam, length_slope(profile.neff, profile.length), float(targets[0].size))
    return dataclasses.replace(model, mu=fit_mu(model.corrected(np.asarray(scores, np.float64),
                                                                [t.size for t in targets]), lam))


def calibrate(profile: Profile, totals: DatabaseTotals, samples: int | None = None, *,
              device: str | None = NUMPY, calibration: str = "random") -> Calibration:
    """Gumbel μ of ``profile`` against its calibration sequences (:func:`calibration_targets`: i.i.d. ``random``
    or ``reversed`` proteins; deterministic; see :mod:`~workflow_lib.search.evalue`)."""
    return calibrate_many([profile], totals, samples, device=device, calibration=calibration)[0]


def calibrate_many(profiles: list[Profile], totals: DatabaseTotals, samples: int | None = None, *,
                   device: str | None = NUMPY, calibration: str = "random", cpus: int | None = 1) -> list[Calibration]:
    """:func:`calibrate` of every profile; on a torch device all profiles' samples in shared buckets. With NumPy,
    ``cpus`` processes (``0``/``None`` = all cores) calibrate whole profiles; the results do not depend on it."""
    target_sets = [calibration_targets(profile, totals, samples, calibration) for profile in profiles]
    if resolve_device(device) == NUMPY:
        workers = min(resolve_cpus(cpus), max(len(profiles), 1))
        _WORKER["calibration"] = list(zip(profiles, target_sets))
        try:
            score_sets = _map(_calibration_task, list(range(len(profiles))), workers)
        finally:
            _WORKER.pop("calibration", None)
    else:
        pair_profile = np.repeat(np.arange(len(profiles)), [len(t) for t in target_sets])
        flat = align_pairs(profiles, pair_profile, [t for targets in target_sets for t in targets], device=device)
        bounds = np.cumsum([0] + [len(t) for t in target_sets])
        score_sets = [[hit.score for hit in flat[bounds[k]:bounds[k + 1]]] for k in range(len(profiles))]
    return [fit_calibration(profile, targets, np.array(scores, dtype=np.float64), calibration)
            for profile, targets, scores in zip(profiles, target_sets, score_sets)]


def make_query(name: str, profile: Profile, totals: DatabaseTotals,
               settings: SearchSettings = SearchSettings(), *, device: str | None = NUMPY) -> SearchQuery:
    return SearchQuery(name, profile, calibrate(profile, totals, settings.calibration_samples, device=device,
                                                calibration=settings.calibration))


def make_queries(names: list[str], profiles: list[Profile], totals: DatabaseTotals,
                 settings: SearchSettings = SearchSettings(), *, device: str | None = NUMPY,
                 cpus: int | None = 1) -> list[SearchQuery]:
    """:func:`make_query` of every (name, profile), calibrated together (:func:`calibrate_many`, ``cpus``
    processes)."""
    calibrations = calibrate_many(list(profiles), totals, settings.calibration_samples, device=device, cpus=cpus,
                                  calibration=settings.calibration)
    return [SearchQuery(name, profile, calibration)
            for name, profile, calibration in zip(names, profiles, calibrations)]


@dataclass
class QueryResult:
    """Hits of one query on one shard, with the prefilter's counts and the time it took."""

    hits: pd.DataFrame
    candidates: int
    gapless: int
    gapped: int
    seconds: float


@dataclass
class Prefiltered:
    """One query's prefilter result on one shard: the gapless survivors, which of them passed the gapped
    stage (indices into ``gapless``), and the seconds it took."""

    gapless: GaplessHits
    passed: np.ndarray
    seconds: float


def prefilter_query_shard(query: SearchQuery, shard: Shard, index: dict[str, np.ndarray], totals: DatabaseTotals,
                          settings: SearchSettings = SearchSettings(), *,
                          cache: ShardCache | None = None) -> Prefiltered:
    """Steps 1–2 of the module docstring for one query (:func:`prefilter_queries_shard`)."""
    return prefilter_queries_shard([query], shard, index, totals, settings, cache=cache)[0]


@dataclass
class _GaplessStage:
    """One query's stage-1 result inside :func:`prefilter_queries_shard`."""

    scores: np.ndarray              # [Lq, 21] bits
    gapless: GaplessHits
    candidates: list[np.ndarray]    # residue codes of gapless.sequence
    seconds: float


def prefilter_queries_shard(queries: list[SearchQuery], shard: Shard, index: dict[str, np.ndarray],
                            totals: DatabaseTotals, settings: SearchSettings = SearchSettings(), *,
                            cache: ShardCache | None = None) -> list[Prefiltered]:
    """Steps 1–2 of the module docstring for several queries: the gapless stage per query, the banded stage
    (1b) for all of them in one kernel call (its cost is per DP row, so the lanes of many queries share the
    rows), then the gapped stage per query. A query's seconds include its share of the banded call (by
    cells). ``cache``: the shard's prefilter layouts (:class:`~workflow_lib.search.shard_cache.ShardCache`)."""
    cache = ShardCache.of(cache)
    direct = direct_pass_offset(settings.gapless_offset, totals.sequences, settings.gapped_max_evalue)
    stages = [_gapless_stage(query, shard, index, settings, cache, totals, direct) for query in queries]
    if settings.band_gate < direct and stages:
        _band_stage(stages, settings, direct)
    out = []
    for stage in stages:
        started = time.perf_counter()
        passed, _ = gapped_pass(stage.scores, stage.candidates, stage.gapless.score, totals.sequences,
                                max_evalue=settings.gapped_max_evalue, gap_open=settings.gap_open,
                                gap_extend=settings.gap_extend)
        out.append(Prefiltered(stage.gapless, np.asarray(passed, dtype=np.int64),
                               stage.seconds + time.perf_counter() - started))
    return out


def shard_seed_budget(per_column: float, columns: int, shard_residues: int, total_residues: int) -> float | None:
    """A query's seed budget on one shard: ``per_column`` seeds per query column
    (:attr:`~workflow_lib.search.settings.SearchSettings.seed_budget`) times the shard's share of the database's
    residues (None when ``per_column`` is 0: no budget)."""
    if not per_column:
        return None
    return per_column * columns * shard_residues / max(total_residues, 1)


def _gapless_stage(query: SearchQuery, shard: Shard, index: dict[str, np.ndarray],
                   settings: SearchSettings, cache: ShardCache, totals: DatabaseTotals,
                   direct: float) -> _GaplessStage:
    """Stage 1, down to the band gate when stage 1b is on (else to the direct pass at ``direct`` bits above
    ``log2(Lq · Lt)``, :func:`~workflow_lib.search.gapped.direct_pass_offset`)."""
    started = time.perf_counter()
    profile = query.profile
    scores = profile_scores_bits(profile.emissions, prefilter_background(profile.emissions, profile.background,
                                                                         settings.prefilter_composition))
    gapless = gapless_prefilter(scores, index, shard.residues, shard.offsets,
                                kmer_threshold=settings.seed_threshold(int(index["k"]), index_is_spaced(index)),
                                diagonals_per_target=settings.diagonals_per_target,
                                offset_bits=min(direct, settings.band_gate),
                                max_seeds=shard_seed_budget(settings.seed_budget, profile.length,
                                                            int(shard.offsets[-1]), totals.residues),
                                min_hits=2 if settings.two_hit == "always" else 1,
                                two_hit_over_budget=settings.two_hit == "auto", cache=cache)
    candidates = [shard.sequence(int(s)) for s in gapless.sequence]
    return _GaplessStage(scores, gapless, candidates, time.perf_counter() - started)


def _band_stage(stages: list[_GaplessStage], settings: SearchSettings, direct: float) -> None:
    """Stage 1b for every query's gapless survivors at once (those below the direct pass at ``direct``); keeps
    the ones that pass, in place."""
    started = time.perf_counter()
    splits = [band_split(stage.scores.shape[0], np.array([t.size for t in stage.candidates], dtype=np.int64),
                         stage.gapless.score, direct) for stage in stages]
    unsure = [np.flatnonzero(~sure) for _, sure in splits]
    banded = banded_scores_many([stage.scores for stage in stages],
                                np.repeat(np.arange(len(stages)), [u.size for u in unsure]),
                                [stage.candidates[k] for stage, u in zip(stages, unsure) for k in u],
                                np.concatenate([stage.gapless.diagonal[u] for stage, u in zip(stages, unsure)]),
                                band=settings.band_width, gap_open=settings.gap_open, gap_extend=settings.gap_extend)
    cells = np.array([stage.scores.shape[0] * u.size for stage, u in zip(stages, unsure)], dtype=np.float64)
    shares = (time.perf_counter() - started) * cells / max(cells.sum(), 1.0)
    bounds = np.cumsum([0] + [u.size for u in unsure])
    for k, (stage, (space, sure)) in enumerate(zip(stages, splits)):
        g = stage.gapless
        kept, bits = band_decide(g.score, space, sure, banded[bounds[k]:bounds[k + 1]], settings.band_offset)
        stage.gapless = GaplessHits(g.sequence[kept], bits[kept], g.diagonal[kept], g.seeds[kept], g.seeded_targets)
        stage.candidates = [stage.candidates[j] for j in kept]
        stage.seconds += float(shares[k])


def survivors(shard: Shard, prefiltered: Prefiltered) -> list[np.ndarray]:
    """The residue codes of the targets that passed the prefilter, in ``passed`` order."""
    return [shard.sequence(int(prefiltered.gapless.sequence[k])) for k in prefiltered.passed]


REPORT_MARGIN_BITS = 1e-3
"""Targets within this many bits below the reporting score are traced too (the hit table decides exactly)."""


def reportable_bits(query: SearchQuery, targets: list[np.ndarray], totals: DatabaseTotals,
                    settings: SearchSettings = SearchSettings()) -> np.ndarray:
    """Per target, the Viterbi score below which it cannot be reported: its E-value exceeds ``max_evalue``
    even before the composition-bias correction, which only lowers scores (:mod:`workflow_lib.search.bias`).
    The search traces alignments only from this score up (step 3 of the module docstring)."""
    lengths = np.array([t.size for t in targets], dtype=np.float64)
    return query.calibration.min_bits(settings.max_evalue, lengths, totals.sequences) - REPORT_MARGIN_BITS


def hit_table(query: SearchQuery, shard: Shard, prefiltered: Prefiltered, targets: list[np.ndarray],
              hits: list[Hit], totals: DatabaseTotals,
              settings: SearchSettings = SearchSettings(), *, iteration: int = 1) -> pd.DataFrame:
    """Steps 4–5 of the module docstring: the reported hits (``targets``: :func:`survivors`; ``hits``: their
    Viterbi hits with backtrace, in the same order)."""
    profile = query.profile
    rows = []
    if targets:
        lengths = np.array([t.size for t in targets], dtype=np.int64)
        # a hit without an alignment (not traced: it cannot be reported, see reportable_bits) keeps its raw score
        bits = np.array([h.score - composition_bias_bits(profile.emissions, profile.background, target, h.pairs)
                         if h.aligned_columns else h.score for h, target in zip(hits, targets)], dtype=np.float64)
        evalues = query.calibration.evalues(bits, lengths, totals.sequences)
        query_codes = profile.sequence
        for k, hit, target, score, evalue in zip(prefiltered.passed, hits, targets, bits, evalues):
            if evalue > settings.max_evalue or hit.aligned_columns == 0:
                continue
            pairs = hit.pairs
            identity = float(np.mean(query_codes[pairs[:, 0]] == target[pairs[:, 1]]))
            rows.append((query.name, shard.ids[int(prefiltered.gapless.sequence[k])], float(evalue), float(score),
                         hit.query_start + 1, hit.query_end, hit.target_start + 1, hit.target_end,
                         profile.length, int(target.size), identity, hit.aligned_columns, hit.states, iteration,
                         totals.name, decode(target[hit.target_start:hit.target_end])))
    return pd.DataFrame(rows, columns=list(HIT_COLUMNS))


def _result(frame: pd.DataFrame, prefiltered: Prefiltered, seconds: float) -> QueryResult:
    gapless = prefiltered.gapless
    return QueryResult(frame, gapless.seeded_targets, int(gapless.sequence.size), int(prefiltered.passed.size),
                       seconds)


def search_query_shard(query: SearchQuery, shard: Shard, index: dict[str, np.ndarray], totals: DatabaseTotals,
                       settings: SearchSettings = SearchSettings(), *, iteration: int = 1,
                       device: str | None = NUMPY, cache: ShardCache | None = None) -> QueryResult:
    """Prefilter → Viterbi → E-values for one query on one shard (see the module docstring)."""
    return search_queries_shard([query], shard, index, totals, settings, iteration=iteration, device=device,
                                cache=cache)[0]


def search_queries_shard(queries: list[SearchQuery], shard: Shard, index: dict[str, np.ndarray],
                         totals: DatabaseTotals, settings: SearchSettings = SearchSettings(), *, iteration: int = 1,
                         device: str | None = NUMPY, cache: ShardCache | None = None) -> list[QueryResult]:
    """:func:`search_query_shard` for several queries, prefiltered together (:func:`prefilter_queries_shard`)."""
    results = []
    for query, prefiltered in zip(queries, prefilter_queries_shard(queries, shard, index, totals, settings,
                                                                   cache=cache)):
        started = time.perf_counter()
        targets = survivors(shard, prefiltered)
        hits = align_targets(query.profile, targets, backtrace=True, cpus=1, device=device,
                             trace_from=reportable_bits(query, targets, totals, settings))
        frame = hit_table(query, shard, prefiltered, targets, hits, totals, settings, iteration=iteration)
        results.append(_result(frame, prefiltered, prefiltered.seconds + time.perf_counter() - started))
    return results


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


QUERY_BATCH = 16
"""Queries prefiltered together (their banded stage shares one kernel call) per task of :func:`search_shard`."""


def _batches(count: int, workers: int) -> list[range]:
    """Consecutive query ranges of at most :data:`QUERY_BATCH`, at least two per worker when there are enough."""
    size = max(1, min(QUERY_BATCH, -(-count // max(2 * workers, 1)) if workers > 1 else QUERY_BATCH))
    return [range(lo, min(lo + size, count)) for lo in range(0, count, size)]


def _query_task(batch: range) -> list[QueryResult]:
    return search_queries_shard([_WORKER["queries"][k] for k in batch], _WORKER["shard"],  # type: ignore[index]
                                _WORKER["index"], _WORKER["totals"], _WORKER["settings"],  # type: ignore[arg-type]
                                iteration=_WORKER["iteration"], device=NUMPY,  # type: ignore[arg-type]
                                cache=_WORKER["cache"])  # type: ignore[arg-type]


def _calibration_task(position: int) -> list[float]:
    profile, targets = _WORKER["calibration"][position]  # type: ignore[index]
    return [hit.score for hit in align_targets(profile, targets, cpus=1, device=NUMPY)]


def _prefilter_task(batch: range) -> list[Prefiltered]:
    return prefilter_queries_shard([_WORKER["queries"][k] for k in batch], _WORKER["shard"],  # type: ignore[index]
                                   _WORKER["index"], _WORKER["totals"], _WORKER["settings"],  # type: ignore[arg-type]
                                   cache=_WORKER["cache"])  # type: ignore[arg-type]


def _map(task, items: list, workers: int) -> list:
    if workers <= 1:
        return [task(item) for item in items]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(task, items, chunksize=1)


def _map_batches(task, count: int, workers: int) -> list:
    """``task`` over :func:`_batches` of ``count`` queries; the results flattened back to one per query."""
    return [result for batch in _map(task, _batches(count, workers), workers) for result in batch]


def by_length(queries: list[SearchQuery]) -> list[int]:
    """Query positions, shortest profile first (ties in the given order)."""
    return sorted(range(len(queries)), key=lambda k: queries[k].profile.length)


def search_shard(queries: list[SearchQuery], shard: Shard, index: dict[str, np.ndarray], totals: DatabaseTotals,
                 settings: SearchSettings = SearchSettings(), *, iteration: int = 1,
                 cpus: int | None = 1, device: str | None = NUMPY, cache: ShardCache | None = None
                 ) -> list[QueryResult]:
    """All queries against one loaded shard (the shard is read once for the whole batch); query order kept.

    The queries are searched shortest first (:func:`by_length`): the prefilter's per-shard seed layouts are
    built per query-length class and kept in ``cache`` (:class:`~workflow_lib.search.shard_cache.ShardCache`,
    one for the shard; None: a new one for this call), so in that order each is built once per class instead of
    again whenever the class changes, and a batch's banded stage shares rows among similar lengths. The padded
    residues are built once, for the longest query, before the worker processes start (they share it).
    NumPy: each process searches whole queries. A torch device: the processes prefilter, then this process
    aligns every query's survivors together
    (:func:`workflow_lib.aligner.align_pairs`); a query's seconds are its prefilter time plus its share of the
    shared Viterbi time (by its survivors' cells)."""
    cache = ShardCache.of(cache)
    order = by_length(queries)
    if order != list(range(len(queries))):
        results = search_shard([queries[k] for k in order], shard, index, totals, settings, iteration=iteration,
                               cpus=cpus, device=device, cache=cache)
        out: list[QueryResult] = [None] * len(queries)  # type: ignore[list-item]
        for k, result in zip(order, results):
            out[k] = result
        return out
    if queries:   # one residue layout for the whole batch, padded for its longest query, built before any fork
        cache.layout_pad = max(cache.layout_pad, 1 << int(queries[-1].profile.length).bit_length())
        padded_residues(shard.residues, shard.offsets, queries[-1].profile.length, cache)
    workers = min(resolve_cpus(cpus), max(len(queries), 1))
    backend = resolve_device(device)
    _WORKER.update(queries=queries, shard=shard, index=index, totals=totals, settings=settings,
                   iteration=iteration, cache=cache)
    try:
        if backend == NUMPY:
            return _map_batches(_query_task, len(queries), workers)
        prefiltered = _map_batches(_prefilter_task, len(queries), workers)
    finally:
        _WORKER.clear()
    started = time.perf_counter()
    target_sets = [survivors(shard, p) for p in prefiltered]
    pair_profile = np.repeat(np.arange(len(queries)), [len(t) for t in target_sets])
    flat = align_pairs([q.profile for q in queries], pair_profile, [t for ts in target_sets for t in ts],
                       backtrace=True, device=backend)
    bounds = np.cumsum([0] + [len(t) for t in target_sets])
    frames = [hit_table(query, shard, p, target_sets[k], flat[bounds[k]:bounds[k + 1]], totals, settings,
                        iteration=iteration) for k, (query, p) in enumerate(zip(queries, prefiltered))]
    shared = time.perf_counter() - started
    cells = np.array([q.profile.length * sum(t.size for t in ts) for q, ts in zip(queries, target_sets)], float)
    shares = cells / cells.sum() if cells.sum() > 0 else np.full(len(queries), 1.0 / max(len(queries), 1))
    return [_result(frame, p, p.seconds + shared * share) for frame, p, share in zip(frames, prefiltered, shares)]


def search_database(queries: list[SearchQuery], db_dir: str | Path, settings: SearchSettings = SearchSettings(),
                    *, iteration: int = 1, cpus: int | None = 1, shards: list[int] | None = None,
                    device: str | None = NUMPY) -> tuple[pd.DataFrame, dict[str, float]]:
    """Every shard (or the listed ones) in turn; returns the ranked hits and search seconds per query."""
    manifest = read_manifest(db_dir)
    totals = DatabaseTotals.from_manifest(db_dir)
    frames, seconds = [], {q.name: 0.0 for q in queries}
    for shard_index in (range(manifest.n_shards) if shards is None else shards):
        shard = load_shard(db_dir, shard_index)
        index = load_kmer_index(db_dir, shard_index)
        for query, result in zip(queries, search_shard(queries, shard, index, totals, settings,
                                                       iteration=iteration, cpus=cpus, device=device)):
            frames.append(result.hits)
            seconds[query.name] += result.seconds
    frames = [f for f in frames if not f.empty]
    merged = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(HIT_COLUMNS))
    return rank_hits(merged, [q.name for q in queries]), seconds
