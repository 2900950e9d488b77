"""Iterative MSA assembly: search → include hits → filter → profile → search again (HHblits / jackhmmer style).

HHblits (Remmert et al. 2012, Nat. Methods 9:173): each iteration searches the database with the current query profile,
adds the hits with E-value ≤ the inclusion threshold to the query-anchored MSA, and rebuilds the profile from the MSA
(:func:`workflow_lib.aligner.profile_from_alignment`: cluster weights, pseudocounts). Defaults follow HHblits as
RoseTTAFold runs it (``make_msa.sh``):

- inclusion E-value 1e-3, at most 3 iterations;
- stop early when the filtered MSA holds ≥ 2000 sequences with ≥ 75% query coverage, or ≥ 5000 with ≥ 50%;
- converged when the filtered MSA holds no sequence that the previous one did not (then the next profile
  could only differ by re-aligned rows). A hit dropped by the redundancy filter does not count as new: the
  query's own database entry, or a 95%-identical ortholog, is found again in every iteration but never
  changes the profile;
- filters: redundancy — greedily (query first, then by E-value) drop a sequence whose identity to an already
  kept one exceeds 90%, identity counted over the columns where both have a residue; coverage — drop sequences
  covering less than a fraction of the query's columns.

Two MSAs come out of every iteration. The *search MSA*, which the next profile is built from, has only the
redundancy filter (``profile_min_coverage`` = 0, as in HHblits, whose ``-cov`` defaults to 0, and jackhmmer,
which has no coverage filter): a homolog that shares one domain of a multi-domain query covers a small part of
it, yet it is what carries the profile to the rest of that domain's family. The *output MSA*, the A3M users and
the feature stage get, is the search MSA without the rows covering less than ``min_coverage`` = 50% of the
query (RoseTTAFold's ``make_msa.sh`` filters hhblits' output with ``hhfilter -id 90 -cov 50``). The stop rules
count rows by their own coverage thresholds, so they read the same on either MSA.

A hit becomes an A3M row (query-anchored): the target's residues on match steps in upper case, ``-`` for a
deleted query column, inserted target residues in lower case, and ``-`` outside the aligned range. A target hit
twice keeps its best-E-value alignment; targets included in an earlier iteration and not found again keep
their earlier row (the MSA only grows).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workflow_lib.aligner import Profile, profile_from_alignment, profile_from_sequence
from workflow_lib.aligner.context import ContextModel
from workflow_lib.aligner.device import compiled_available
from workflow_lib.aligner.identity_compiled import greedy_filter_compiled
from workflow_lib.aligner.profile import alignment_neff
from workflow_lib.aligner.render import hit_row  # noqa: F401  (the rows of an MSA; re-exported)
from workflow_lib.search.settings import MsaSettings, SearchSettings, Settings
from workflow_lib.seqio.alphabet import GAP_CODE
from workflow_lib.seqio.msa import Alignment


@dataclass
class IterationResult:
    """One iteration: the profile searched with, its hits, the MSA after inclusion and filters.

    ``alignment`` is the output MSA (coverage-filtered); ``search_alignment`` the one the next profile is built
    from (see the module docstring). ``profile`` is None where the step was taken without it (the workflow's
    merge job, whose profiles were built by another job).
    """

    iteration: int
    profile: Profile | None
    hits: pd.DataFrame
    alignment: Alignment
    included: int
    new: int
    converged: bool
    reason: str
    seconds: float
    search_alignment: Alignment | None = None


def coverage(alignment: Alignment) -> np.ndarray:
    """Fraction of the query's match columns each row covers with a residue (float64 [N])."""
    return (alignment.matches != GAP_CODE).mean(axis=1)


def filter_alignment(alignment: Alignment, *, max_identity: float, min_coverage: float,
                     max_sequences: int | None = None, block: int = 256) -> Alignment:
    """Coverage then greedy redundancy filter, in row order, keeping row 0 (the query) always."""
    covered = coverage(alignment)
    candidates = [0] + [k for k in range(1, alignment.depth) if covered[k] >= min_coverage]
    matches = alignment.matches
    if compiled_available():
        return alignment.subset(greedy_filter_compiled(matches, candidates, GAP_CODE, max_identity, max_sequences))
    kept = [0]
    kept_rows = np.empty((min(len(candidates), max_sequences or len(candidates)), alignment.length), np.uint8)
    kept_rows[0] = matches[0]
    for k in candidates[1:]:
        if max_sequences is not None and len(kept) >= max_sequences:
            break
        row = matches[k]
        residue = row != GAP_CODE
        too_similar = False
        for lo in range(0, len(kept), block):
            other = kept_rows[lo:min(len(kept), lo + block)]
            both = residue[None, :] & (other != GAP_CODE)
            overlap = both.sum(axis=1)
            same = (both & (other == row[None, :])).sum(axis=1)
            if np.any((overlap > 0) & (same > max_identity * overlap)):
                too_similar = True
                break
        if not too_similar:
            kept_rows[len(kept)] = row
            kept.append(k)
    return alignment.subset(kept)


def output_alignment(search_alignment: Alignment, settings: MsaSettings) -> Alignment:
    """The output MSA: the search MSA's rows (query always) covering at least ``settings.min_coverage``.

    The search MSA is already redundancy-filtered, so only the coverage filter is left to apply.
    """
    if settings.min_coverage <= settings.profile_min_coverage:
        return search_alignment
    covered = coverage(search_alignment)
    return search_alignment.subset([0] + [k for k in range(1, search_alignment.depth)
                                          if covered[k] >= settings.min_coverage])


def build_alignment(name: str, description: str, sequence: str, hits: pd.DataFrame,
                    previous: Alignment | None, inclusion_evalue: float) -> tuple[Alignment, int]:
    """Query + included hits (best per target, by E-value) + earlier rows not found again.

    Returns (alignment before filtering, number of included targets).
    """
    included = hits[hits["evalue"] <= inclusion_evalue]
    included = included.sort_values(["evalue", "bitscore", "target"], ascending=[True, False, True],
                                     kind="mergesort").drop_duplicates("target", keep="first")
    length = len(sequence)
    names, descriptions, rows = [name], [description], [sequence]
    seen = set()
    for hit in included.itertuples(index=False):
        seen.add(hit.target)
        names.append(hit.target)
        descriptions.append(f"evalue={hit.evalue:.3g} bits={hit.bitscore:.1f} iteration={hit.iteration}")
        rows.append(hit_row(hit.alignment, int(hit.qstart), int(hit.qend), hit.tseq, length))
    if previous is not None:
        for k in range(1, previous.depth):
            if previous.names[k] not in seen:
                names.append(previous.names[k])
                descriptions.append(previous.descriptions[k])
                rows.append(previous.rows[k])
    alignment = Alignment.from_a3m_rows(names, descriptions, rows)
    return alignment, len(seen)


def stop_reason(alignment: Alignment, rules: tuple[tuple[int, float], ...]) -> str:
    """The first depth rule the MSA meets (``""`` if none)."""
    covered = coverage(alignment)[1:]
    for depth, min_cov in rules:
        if int((covered >= min_cov).sum()) >= depth:
            return f"{depth} sequences with coverage >= {min_cov:.0%}"
    return ""


def msa_step(name: str, description: str, sequence: str, hits: pd.DataFrame, previous: Alignment | None,
             iteration: int, settings: MsaSettings, *,
             deferred: bool = False) -> tuple[Alignment, int, int, bool, str]:
    """One iteration's bookkeeping, shared by :func:`iterate` and the workflow's merge job.

    ``previous`` is the last iteration's *search* MSA. Returns (search MSA, included, new, converged, reason),
    ``new`` counting the rows of the filtered MSA that ``previous`` did not hold; :func:`output_alignment` turns
    the search MSA into the output MSA.

    ``deferred``: this iteration searched with a cheaper prefilter than the next ones (iteration 1 of a
    ``--sensitive`` search, :meth:`~workflow_lib.search.settings.SearchSettings.defers`). Then "no new sequences"
    does not stop the query: the next iteration searches the same profile (its MSA holds the query alone) with
    the sensitive prefilter, so that the query's last search, whose hits it reports, is a sensitive one.
    """
    raw, included = build_alignment(name, description, sequence, hits, previous, settings.inclusion_evalue)
    alignment = filter_alignment(raw, max_identity=settings.max_identity,
                                 min_coverage=settings.profile_min_coverage, max_sequences=settings.max_sequences)
    before = set(previous.names[1:]) if previous is not None else set()
    new = sum(1 for row_name in alignment.names[1:] if row_name not in before)
    reason = stop_reason(alignment, settings.stop_rules)
    if not reason and new == 0 and not deferred:
        reason = "no new sequences"
    if not reason and iteration >= settings.iterations:
        reason = "last iteration"
    return alignment, included, new, bool(reason), reason


def profile_for(alignment: Alignment | None, sequence: str, context: ContextModel | None = None) -> Profile:
    """The profile searched with: the single sequence first, then the MSA's (``context``: context-specific
    pseudocounts)."""
    if alignment is None or alignment.depth == 1:
        return profile_from_sequence(sequence, context=context)
    return profile_from_alignment(alignment, context=context)


@dataclass
class QueryState:
    """One query between iterations: its last search MSA and where it stands (the workflow keeps it as a row of
    :data:`~workflow_lib.schemas.search.MSA_STATE` with the MSA in an A3M)."""

    name: str
    description: str
    sequence: str
    alignment: Alignment | None = None
    """The last iteration's search MSA (None before the first)."""
    iteration: int = 0
    converged: bool = False
    reason: str = ""
    included: int = 0
    seconds: float = 0.0

    def profile(self, context: ContextModel | None = None) -> Profile:
        """The profile the next iteration searches with (:func:`profile_for`)."""
        return profile_for(self.alignment, self.sequence, context)


def advance(state: QueryState, hits: pd.DataFrame, iteration: int, settings: MsaSettings, *,
            deferred: bool = False, seconds: float = 0.0, profile: Profile | None = None) -> IterationResult:
    """The step of one iteration for one query, after its search: :func:`msa_step` on ``hits`` (the query's
    ranked hits of iteration ``iteration``), ``state`` updated in place (``seconds`` added to its time). Every
    way of iterating goes through here: :func:`iterations` and the workflow's ``msa-merge`` job."""
    alignment, included, new, converged, reason = msa_step(state.name, state.description, state.sequence, hits,
                                                           state.alignment, iteration, settings, deferred=deferred)
    state.alignment, state.iteration, state.converged, state.reason = alignment, iteration, converged, reason
    state.included = included
    state.seconds += seconds
    return IterationResult(iteration, profile, hits, output_alignment(alignment, settings), included, new, converged,
                           reason, seconds, alignment)


SearchStep = Callable[[list[str], list[Profile], int], tuple[pd.DataFrame, dict[str, float]]]
"""``search(names, profiles, iteration)`` → (ranked hits of those profiles, search seconds per name)."""


def iterations(states: list[QueryState], search: SearchStep, settings: MsaSettings, *,
               defers: Callable[[int], bool] = lambda iteration: False
               ) -> Iterator[tuple[int, list[tuple[int, IterationResult]]]]:
    """The iteration loop: per iteration, the profiles of the queries not yet converged, one ``search`` of them
    all, and :func:`advance` of each. Yields ``(iteration, [(state position, result), …])`` after each
    iteration, until every query converged or ``settings.iterations`` ran.

    ``defers(iteration)``: whether that iteration searched with a cheaper prefilter than the next ones
    (:meth:`~workflow_lib.search.settings.SearchSettings.defers`, see :func:`msa_step`). A query's seconds are
    its search seconds plus an equal share of the iteration's other time (profiles, MSAs)."""
    context = settings.context()
    for iteration in range(1, settings.iterations + 1):
        active = [k for k, state in enumerate(states) if not state.converged]
        if not active:
            return
        started = time.perf_counter()
        profiles = [states[k].profile(context) for k in active]
        hits, query_seconds = search([states[k].name for k in active], profiles, iteration)
        grouped = dict(tuple(hits.groupby("query", sort=False))) if not hits.empty else {}
        steps = []
        for k, profile in zip(active, profiles):
            own = grouped.get(states[k].name, hits.iloc[0:0]).reset_index(drop=True)
            steps.append((k, advance(states[k], own, iteration, settings, deferred=defers(iteration),
                                     profile=profile)))
        overhead = (time.perf_counter() - started - sum(query_seconds.values())) / len(active)
        for k, result in steps:
            result.seconds = query_seconds.get(states[k].name, 0.0) + overhead
            states[k].seconds += result.seconds
        yield iteration, steps


def iterate(name: str, description: str, sequence: str, search: Callable[[Profile, int], pd.DataFrame],
            settings: MsaSettings = MsaSettings()) -> Iterator[IterationResult]:
    """Yield one :class:`IterationResult` per iteration until converged (the last one has ``converged``): the
    loop of :func:`iterations` for one query.

    ``search(profile, iteration)`` returns the ranked hits of that profile (columns of
    :data:`workflow_lib.search.engine.HIT_COLUMNS`).
    """
    def batch(names: list[str], profiles: list[Profile], iteration: int) -> tuple[pd.DataFrame, dict[str, float]]:
        started = time.perf_counter()
        hits = search(profiles[0], iteration)
        return hits, {names[0]: time.perf_counter() - started}

    for _, steps in iterations([QueryState(name, description, sequence)], batch, settings):
        yield steps[0][1]


def msa_statistics(alignment: Alignment) -> dict[str, float | int]:
    """Depth, Neff (HH-suite's: mean column Neff of the profile, as ``hhblits`` reports it) and coverage."""
    covered = coverage(alignment)[1:]
    per_column = (alignment.matches[1:] != GAP_CODE).any(axis=0) if alignment.depth > 1 else \
        np.zeros(alignment.length, bool)
    neff = alignment_neff(alignment.matches) if alignment.depth > 1 else 1.0
    return {"depth": alignment.depth, "neff": float(neff), "coverage": float(per_column.mean()),
            "mean_coverage": float(covered.mean()) if covered.size else 0.0}


@dataclass
class MsaResult:
    """The outcome for one query of :func:`build_msas` (``alignment``: the output MSA)."""

    name: str
    alignment: Alignment
    iterations: list[IterationResult]
    seconds: float

    @property
    def reason(self) -> str:
        return self.iterations[-1].reason if self.iterations else ""


def build_msas(records, db_dir, search_settings: SearchSettings | None = None,
               settings: MsaSettings | None = None, *, cpus: int | None = 1,
               on_iteration: Callable[[int, int], None] | None = None,
               device: str | None = "numpy") -> list[MsaResult]:
    """Iterative MSAs for many queries, batched: every iteration reads each shard once for all active queries
    (:func:`iterations` with :func:`~workflow_lib.search.engine.search_database`).

    ``records``: :class:`workflow_lib.seqio.fasta.Record`; returns one :class:`MsaResult` per record, in order.
    ``search_settings``/``settings``: None for the defaults (:mod:`workflow_lib.search.settings`); search
    settings left out follow the MSA settings' pseudocounts (calibration and prefilter composition as
    :class:`~workflow_lib.search.settings.Settings` pairs them).
    ``device``: where the Viterbi stages run (:mod:`workflow_lib.search.engine`; default NumPy, None = CUDA
    when available).
    """
    from workflow_lib.search.engine import DatabaseTotals, make_queries, search_database
    settings = settings or MsaSettings()
    if search_settings is None:
        search_settings = Settings(pseudocounts=settings.pseudocounts, context_model=settings.context_model).search
    totals = DatabaseTotals.from_manifest(db_dir)

    def search(names: list[str], profiles: list[Profile], iteration: int) -> tuple[pd.DataFrame, dict[str, float]]:
        iteration_settings = search_settings.for_iteration(iteration, settings.iterations)
        queries = make_queries(names, profiles, totals, iteration_settings, device=device, cpus=cpus)
        return search_database(queries, db_dir, iteration_settings, iteration=iteration, cpus=cpus, device=device)

    return run_iterations(records, search, settings, on_iteration=on_iteration,
                          defers=lambda k: search_settings.defers(k, settings.iterations))


def run_iterations(records, search: SearchStep, settings: MsaSettings, *,
                   on_iteration: Callable[[int, int], None] | None = None,
                   defers: Callable[[int], bool] = lambda iteration: False) -> list[MsaResult]:
    """:func:`iterations` over ``records`` with the search step ``search`` (a sequence database's or a profile
    database's), collected into one :class:`MsaResult` per record, in order; ``on_iteration(iteration, queries
    searched)`` after each iteration."""
    states = [QueryState(record.id, record.description, record.sequence) for record in records]
    history: list[list[IterationResult]] = [[] for _ in records]
    for iteration, steps in iterations(states, search, settings, defers=defers):
        for k, result in steps:
            history[k].append(result)
        if on_iteration is not None:
            on_iteration(iteration, len(steps))
    return [MsaResult(record.id, output_alignment(state.alignment, settings), history[k], state.seconds)
            for k, (record, state) in enumerate(zip(records, states))]
