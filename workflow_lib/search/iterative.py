"""Iterative MSA assembly: search → include hits → filter → profile → search again (HHblits / jackhmmer style).

Seed "Iterative MSA Alignment": each iteration searches the database with the current query profile, adds the
hits with E-value ≤ the inclusion threshold to the query-anchored MSA, and rebuilds the profile from the MSA
(:func:`workflow_lib.aligner.profile_from_alignment`: cluster weights, pseudocounts). Defaults follow
HHblits as RoseTTAFold runs it (``make_msa.sh``):

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
from workflow_lib.aligner.context import ContextModel, load_context_model
from workflow_lib.seqio.alphabet import GAP_CODE
from workflow_lib.seqio.msa import Alignment


PSEUDOCOUNTS = ("substitution", "context")
"""Emission pseudocounts a search can use (:attr:`MsaSettings.pseudocounts`)."""


@dataclass(frozen=True)
class MsaSettings:
    iterations: int = 3
    inclusion_evalue: float = 1e-3
    max_identity: float = 0.90
    min_coverage: float = 0.50
    profile_min_coverage: float = 0.0
    stop_rules: tuple[tuple[int, float], ...] = ((2000, 0.75), (5000, 0.50))
    max_sequences: int = 10000
    pseudocounts: str = "substitution"
    """Emission pseudocounts of the searched profiles: ``substitution`` (the Gonnet matrix) or ``context``
    (context-specific, :mod:`workflow_lib.aligner.context`)."""
    context_model: str | None = None
    """With ``context``: the model's npz (None: the shipped one)."""

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError("iterations must be at least 1")
        if not 0.0 < self.max_identity <= 1.0 or not 0.0 <= self.min_coverage <= 1.0:
            raise ValueError("max_identity must be in (0, 1] and min_coverage in [0, 1]")
        if not 0.0 <= self.profile_min_coverage <= self.min_coverage:
            raise ValueError(f"profile_min_coverage must be in [0, min_coverage = {self.min_coverage}] (the output "
                             f"MSA is filtered from the search MSA), got {self.profile_min_coverage}")
        if self.pseudocounts not in PSEUDOCOUNTS:
            raise ValueError(f"pseudocounts must be one of {', '.join(PSEUDOCOUNTS)}, got {self.pseudocounts!r}")

    def context(self) -> ContextModel | None:
        """The context model the profiles use (loaded once per path), or None for substitution pseudocounts."""
        return load_context_model(self.context_model) if self.pseudocounts == "context" else None


@dataclass
class IterationResult:
    """One iteration: the profile searched with, its hits, the MSA after inclusion and filters.

    ``alignment`` is the output MSA (coverage-filtered); ``search_alignment`` the one the next profile is built
    from (see the module docstring).
    """

    iteration: int
    profile: Profile
    hits: pd.DataFrame
    alignment: Alignment
    included: int
    new: int
    converged: bool
    reason: str
    seconds: float
    search_alignment: Alignment | None = None


def hit_row(states: str, qstart: int, qend: int, tseq: str, query_length: int) -> str:
    """The A3M row of one hit (1-based inclusive ``qstart``/``qend``; ``tseq``: the aligned target segment)."""
    pieces = ["-" * (qstart - 1)]
    position = 0
    for state in states:
        if state == "M":
            pieces.append(tseq[position].upper())
            position += 1
        elif state == "I":
            pieces.append(tseq[position].lower())
            position += 1
        elif state == "D":
            pieces.append("-")
        else:
            raise ValueError(f"unknown alignment state {state!r}")
    pieces.append("-" * (query_length - qend))
    return "".join(pieces)


def coverage(alignment: Alignment) -> np.ndarray:
    """Fraction of the query's match columns each row covers with a residue (float64 [N])."""
    return (alignment.matches != GAP_CODE).mean(axis=1)


def filter_alignment(alignment: Alignment, *, max_identity: float, min_coverage: float,
                     max_sequences: int | None = None, block: int = 256) -> Alignment:
    """Coverage then greedy redundancy filter, in row order, keeping row 0 (the query) always."""
    covered = coverage(alignment)
    candidates = [0] + [k for k in range(1, alignment.depth) if covered[k] >= min_coverage]
    matches = alignment.matches
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
    ``--sensitive`` search, :meth:`~workflow_lib.search.engine.SearchSettings.defers`). Then "no new sequences"
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


def iterate(name: str, description: str, sequence: str, search: Callable[[Profile, int], pd.DataFrame],
            settings: MsaSettings = MsaSettings()) -> Iterator[IterationResult]:
    """Yield one :class:`IterationResult` per iteration until converged (the last one has ``converged``).

    ``search(profile, iteration)`` returns the ranked hits of that profile (columns of
    :data:`workflow_lib.search.engine.HIT_COLUMNS`).
    """
    alignment: Alignment | None = None
    context = settings.context()
    for iteration in range(1, settings.iterations + 1):
        started = time.perf_counter()
        profile = profile_for(alignment, sequence, context)
        hits = search(profile, iteration)
        alignment, included, new, converged, reason = msa_step(name, description, sequence, hits, alignment,
                                                               iteration, settings)
        yield IterationResult(iteration, profile, hits, output_alignment(alignment, settings), included, new,
                              converged, reason, time.perf_counter() - started, alignment)
        if converged:
            return


def msa_statistics(alignment: Alignment) -> dict[str, float | int]:
    """Depth, Neff (HH-suite's: mean column Neff of the profile, as ``hhblits`` reports it) and coverage."""
    covered = coverage(alignment)[1:]
    per_column = (alignment.matches[1:] != GAP_CODE).any(axis=0) if alignment.depth > 1 else \
        np.zeros(alignment.length, bool)
    neff = profile_from_alignment(alignment, pseudocounts=False).neff if alignment.depth > 1 else 1.0
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


def build_msas(records, db_dir, search_settings=None, settings: MsaSettings = MsaSettings(), *,
               cpus: int | None = 1, on_iteration: Callable[[int, int], None] | None = None,
               device: str | None = "numpy") -> list[MsaResult]:
    """Iterative MSAs for many queries, batched: every iteration reads each shard once for all active queries.

    ``records``: :class:`workflow_lib.seqio.fasta.Record`; returns one :class:`MsaResult` per record, in order.
    ``device``: where the Viterbi stages run (:mod:`workflow_lib.search.engine`; default NumPy, None = CUDA
    when available).
    """
    from workflow_lib.search.engine import DatabaseTotals, SearchSettings, make_queries, search_database
    search_settings = search_settings or SearchSettings()
    totals = DatabaseTotals.from_manifest(db_dir)
    state: dict[int, Alignment | None] = {k: None for k in range(len(records))}
    history: dict[int, list[IterationResult]] = {k: [] for k in range(len(records))}
    seconds = {k: 0.0 for k in range(len(records))}
    active = list(range(len(records)))
    context = settings.context()
    for iteration in range(1, settings.iterations + 1):
        if not active:
            break
        started = time.perf_counter()
        profiles = {k: profile_for(state[k], records[k].sequence, context) for k in active}
        iteration_settings = search_settings.for_iteration(iteration, settings.iterations)
        deferred = search_settings.defers(iteration, settings.iterations)
        queries = make_queries([records[k].id for k in active], [profiles[k] for k in active], totals,
                               iteration_settings, device=device, cpus=cpus)
        hits, query_seconds = search_database(queries, db_dir, iteration_settings, iteration=iteration, cpus=cpus,
                                              device=device)
        overhead = (time.perf_counter() - started - sum(query_seconds.values())) / len(active)
        grouped = dict(tuple(hits.groupby("query", sort=False))) if not hits.empty else {}
        still = []
        for k in active:
            record = records[k]
            own = grouped.get(record.id, hits.iloc[0:0])
            alignment, included, new, converged, reason = msa_step(
                record.id, record.description, record.sequence, own, state[k], iteration, settings, deferred=deferred)
            state[k] = alignment
            elapsed = query_seconds[record.id] + overhead
            seconds[k] += elapsed
            history[k].append(IterationResult(iteration, profiles[k], own.reset_index(drop=True),
                                              output_alignment(alignment, settings), included, new, converged,
                                              reason, elapsed, alignment))
            if not converged:
                still.append(k)
        if on_iteration is not None:
            on_iteration(iteration, len(active))
        active = still
    return [MsaResult(records[k].id, output_alignment(state[k], settings), history[k], seconds[k])
            for k in range(len(records))]
