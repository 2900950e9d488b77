"""Prefilter stage 1: gapless alignment scores on diagonals seeded by the k-mer index.

The first prefilter of HHblits (Remmert et al. 2012, Nat. Methods 9:173) computes, for every target, the log-odds score
of the best gapless (single-diagonal) local alignment with the query profile and passes targets scoring above ``2.5 +
log2(Nq · Nt)`` bits to the gapped stage. Here the diagonals are not all scanned: a diagonal is considered only when it
holds at least ``min_hits`` k-mer seeds, each a query window whose profile score for a database k-mer is at least
``kmer_threshold`` bits (BLAST/MMseqs2-style seeding from :mod:`workflow_lib.db.kmer_index`; the k-mers are read through
the index's seed shape, spaced by default, and a seed at query window ``i`` and database window ``p`` lies on diagonal
``p - i``), and only the ``diagonals_per_target`` diagonals of a target with the highest summed seed scores are scored.
The score on a seeded diagonal is exact: the best-scoring segment of the whole diagonal (maximum subarray, Kadane over
many diagonals at once), the same number an exhaustive scan gives for that diagonal. With ``kmer_threshold=-inf`` and
``min_hits=1`` every diagonal is seeded and the stage is exhaustive (the tests compare that with a plain loop).

The stage runs in three modules: :mod:`~workflow_lib.search.seeds` (profile scores, seeding k-mers),
:mod:`~workflow_lib.search.diagonals` (seeds per diagonal, each target's best diagonals) and this one (the
exact scores on those diagonals, the pass). Kernels are pure: arrays in, arrays out; the layouts reused across
the queries of a shard are held in a :class:`~workflow_lib.search.shard_cache.ShardCache`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from workflow_lib.aligner.device import compiled_available
from workflow_lib.db.kmer_index import index_is_spaced, index_offsets
from workflow_lib.search.diagonals import seeded_best_diagonals
from workflow_lib.search.prefilter_compiled import diagonal_scores_compiled, padded_layout_compiled
from workflow_lib.search.seeds import kmer_neighbourhood, kmer_scores
from workflow_lib.search.settings import DIAGONALS_PER_TARGET, default_kmer_threshold
from workflow_lib.search.shard_cache import ShardCache
from workflow_lib.seqio.alphabet import N_AMINO

GAPLESS_OFFSET_BITS = 2.5
"""HHblits' threshold: keep targets scoring above 2.5 + log2(Lq · Lt) bits."""


@dataclass(frozen=True)
class GaplessHits:
    """Per target that passed: shard sequence index, best gapless score (bits), its diagonal and k-mer hits."""

    sequence: np.ndarray   # int64 [T]
    score: np.ndarray      # float32 [T]
    diagonal: np.ndarray   # int64 [T], target position - query position
    seeds: np.ndarray      # int32 [T], k-mer hits on that diagonal
    seeded_targets: int    # targets with at least one seeded diagonal


PAD_RESIDUE = N_AMINO + 1
"""Code of the padding between sequences in :func:`padded_residues`; it scores 0 in every column."""


def padded_residues(residues: np.ndarray, offsets: np.ndarray, query_length: int,
                    cache: ShardCache | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The shard's residues with ``pad ≥ query_length`` :data:`PAD_RESIDUE` codes before, between and after the
    sequences, and where each sequence starts in it: a diagonal read through the layout runs into padding,
    never into a neighbour, so no bounds test is needed. ``pad`` is a power of two so queries of similar
    length share one layout, kept in ``cache`` (:class:`~workflow_lib.search.shard_cache.ShardCache`; at least
    its ``layout_pad``, so that a batch of queries can share one layout)."""
    cache = ShardCache.of(cache)
    pad = max(1 << int(query_length).bit_length(), cache.layout_pad)

    def build() -> tuple[np.ndarray, np.ndarray]:
        if compiled_available():
            return padded_layout_compiled(residues, offsets, pad, PAD_RESIDUE)
        n = offsets.size - 1
        starts = offsets[:-1] + pad * np.arange(1, n + 1, dtype=np.int64)
        layout = np.full(int(offsets[-1]) + pad * (n + 1), PAD_RESIDUE, dtype=np.uint8)
        layout[np.repeat(starts - offsets[:-1], np.diff(offsets)) + np.arange(int(offsets[-1]))] = \
            residues[:offsets[-1]]
        return layout, starts
    return cache.get("padded", pad, build)


COLUMN_SPAN = 512
"""Query columns whose residue codes :func:`diagonal_scores` gathers and transposes at once (bounds the
``[span, block]`` code matrix: 4 MB at the default block)."""
COLUMN_CHUNK = 16
"""Query columns whose score gathers :func:`diagonal_scores` issues as one call."""


def diagonal_scores(scores: np.ndarray, layout: np.ndarray, starts: np.ndarray, sequence: np.ndarray,
                    diagonal: np.ndarray, *, block: int = 8192, lengths: np.ndarray | None = None) -> np.ndarray:
    """Best gapless segment score (bits) on each (sequence, diagonal), vectorised over candidates.

    ``scores`` float32 [Lq, 21]; ``layout``/``starts`` the shard's padded residues (:func:`padded_residues`);
    returns float32 [C] (≥ 0): per diagonal, the maximum segment sum of its column scores (padding scores 0).

    Kadane's recurrence ``run = max(run, 0) + s_i``, ``best = max(best, run)`` advances one query column at a time over
    ``block`` diagonals at once (three contiguous float32 passes per column; the 0 is an array of zeros, as NumPy's
    float ``maximum`` against a scalar runs slower), with no ``accumulate`` along a diagonal (NumPy runs those as scalar
    loops). The inputs of a column come from gathers that are cheaper in bulk than per column:

    - residue codes: a diagonal's codes for :data:`COLUMN_SPAN` columns are one contiguous run of the layout,
      so the runs of a block are copied as rows (a sliding-window view indexed by the diagonals' start
      positions) and transposed once to ``[span, block]``, instead of one scattered gather per column;
    - column scores: one ``np.take`` per :data:`COLUMN_CHUNK` columns from the flattened ``[Lq, 23]`` table
      (code + 23 · column).

    This costs fewer nanoseconds per cell than one gather of codes and one of scores per column; the sums are the
    same float32 operations in the same order, so the scores are identical. ``lengths`` (the shard's sequence
    lengths), with the compiled kernels: each diagonal is scored over its overlap with its target only
    (:func:`~workflow_lib.search.prefilter_compiled.diagonal_scores_compiled`), the same scores. The gathers use ``mode="wrap"``, the
    cheapest of NumPy's index modes: every read is in range by construction (the layout holds ``pad ≥ Lq`` padding
    codes after the last sequence), so no index is ever wrapped. This kernel's cost per cell and that of its
    compiled twin: benchmarks/RESULTS.md, "Homology search: compiled CPU kernels".
    """
    query_length = scores.shape[0]
    n_codes = PAD_RESIDUE + 1
    table = np.zeros((query_length, n_codes), dtype=np.float32)
    table[:, :scores.shape[1]] = scores
    if compiled_available():
        return diagonal_scores_compiled(table, layout, starts, sequence, diagonal, lengths)
    flat = table.ravel()
    row_base = (np.arange(query_length, dtype=np.intp) * n_codes)[:, None]
    out = np.zeros(sequence.size, dtype=np.float32)
    width = min(block, sequence.size)
    spans = [(c0, min(COLUMN_SPAN, query_length - c0)) for c0 in range(0, query_length, COLUMN_SPAN)]
    windows = {span: sliding_window_view(layout, span) for span in {span for _, span in spans}}
    index = np.empty((COLUMN_CHUNK, width), dtype=np.intp)
    column = np.empty((COLUMN_CHUNK, width), dtype=np.float32)
    zeros = np.zeros(width, dtype=np.float32)  # max(run, 0) against an array: faster than against a scalar
    for lo in range(0, sequence.size, block):
        position = starts[sequence[lo:lo + block]] + diagonal[lo:lo + block]   # layout index of column 0
        n = position.size
        run = np.zeros(n, dtype=np.float32)
        best = np.zeros(n, dtype=np.float32)
        for c0, span in spans:
            codes = np.ascontiguousarray(windows[span][position + c0].T)        # [span, n] residue codes
            for k0 in range(0, span, COLUMN_CHUNK):
                m = min(COLUMN_CHUNK, span - k0)
                np.add(codes[k0:k0 + m], row_base[c0 + k0:c0 + k0 + m], out=index[:m, :n])
                np.take(flat, index[:m, :n], out=column[:m, :n], mode="wrap")
                for r in range(m):
                    np.maximum(run, zeros[:n], out=run)
                    np.add(run, column[r, :n], out=run)
                    np.maximum(best, run, out=best)
        out[lo:lo + block] = best
    return out


def best_per_target(sequence: np.ndarray, score: np.ndarray, hits: np.ndarray) -> np.ndarray:
    """Per target of ``sequence`` (sorted ascending, as the seed count returns its diagonals), the index of its
    best diagonal: highest ``score``, then most ``hits``, then the first; ascending. The same indices as
    ``np.lexsort((-hits, -score, sequence))`` keeping each target's first, in three segment passes instead of a
    three-key sort (the sort was a visible share of a search against UniProt)."""
    n = sequence.size
    if n == 0:
        return np.zeros(0, np.int64)
    if np.any(sequence[1:] < sequence[:-1]):
        order = np.lexsort((-hits, -score, sequence))
        first = np.concatenate([[True], sequence[order][1:] != sequence[order][:-1]])
        return np.sort(order[first])
    starts = np.flatnonzero(np.concatenate([[True], sequence[1:] != sequence[:-1]]))
    sizes = np.diff(np.append(starts, n))
    candidate = score == np.repeat(np.maximum.reduceat(score, starts), sizes)
    seeds = np.where(candidate, hits, np.iinfo(np.int64).min).astype(np.int64)
    candidate &= seeds == np.repeat(np.maximum.reduceat(seeds, starts), sizes)
    return np.minimum.reduceat(np.where(candidate, np.arange(n), n), starts)


CUT_BINS_PER_BIT = 64
CUT_MAX_BINS = 1 << 16
""":func:`strongest_seeds` finds its cut in a histogram of the seeds' scores at 1/64 bit (scores beyond 1,024
bits above the weakest share the top bin)."""


def strongest_seeds(window: np.ndarray, code: np.ndarray, bits: np.ndarray, entry_offsets: np.ndarray,
                    max_seeds: float | None, *, entries: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (query window, k-mer code, bits) pairs whose index entries (the seeds) number at most ``max_seeds``:
    all when they fit, else those scoring above the cut where the strongest-first count first exceeds the budget
    (ties at the cut all dropped), in their input order. The same pairs as a threshold just above the cut, per
    query; ``entry_offsets``: the index's ``offsets`` (entries of code ``c``: ``offsets[c]:offsets[c + 1]``);
    ``entries``: each pair's entry count when already known."""
    if max_seeds is None or code.size == 0:
        return window, code, bits
    if entries is None:
        entries = entry_offsets[code + 1] - entry_offsets[code]
    if int(entries.sum()) <= max_seeds:
        return window, code, bits
    # the cut lies in one narrow bin of a histogram of the entries by score (strongest first); only that bin's
    # pairs are sorted (a sort of every pair was a visible share of a search)
    values = np.asarray(bits, dtype=np.float64)
    low = float(values.min())
    slot = np.minimum(((values - low) * CUT_BINS_PER_BIT).astype(np.int64), CUT_MAX_BINS - 1)
    from_top = np.cumsum(np.bincount(slot, weights=entries, minlength=int(slot.max()) + 1)[::-1])
    top = int(np.searchsorted(from_top, max_seeds, side="right"))       # bins taken whole, counted from the top
    cut_slot = from_top.size - 1 - top
    above = float(from_top[top - 1]) if top > 0 else 0.0               # entries of the bins above the cut's
    inside = np.flatnonzero(slot == cut_slot)
    order = inside[np.argsort(-values[inside], kind="stable")]
    over = int(np.searchsorted(above + np.cumsum(entries[order]), max_seeds, side="right"))
    keep = bits > bits[order[over]]
    return window[keep], code[keep], bits[keep]


def gapless_prefilter(scores: np.ndarray, index: dict[str, np.ndarray], residues: np.ndarray,
                      offsets: np.ndarray, *, kmer_threshold: float | None = None, min_hits: int = 1,
                      diagonals_per_target: int | None = DIAGONALS_PER_TARGET,
                      offset_bits: float = GAPLESS_OFFSET_BITS, max_seeds: float | None = None,
                      two_hit_over_budget: bool = False, cache: ShardCache | None = None) -> GaplessHits:
    """Stage 1 of the prefilter for one query against one indexed shard (see the module docstring).

    ``kmer_threshold``: seed threshold in bits (``None``: :func:`default_kmer_threshold` for the index's k and
    shape). ``diagonals_per_target``: score only the diagonals of each target with the highest summed seed
    scores (``None``: every seeded diagonal, the exhaustive setting when ``kmer_threshold=-inf``). ``cache``:
    the shard's layouts kept across queries (:class:`~workflow_lib.search.shard_cache.ShardCache`; None: built
    for this call). ``max_seeds``: the shard's seed budget (:func:`strongest_seeds`; None: every seed).
    ``two_hit_over_budget``: when the query's seeds exceed ``max_seeds``, a diagonal needs at least two seeds
    (BLAST's two-hit rule, Altschul et al. 1997, *Nucleic Acids Res.* 25:3389), whatever ``min_hits`` says.
    """
    k = int(index["k"])
    shape = index_offsets(index)
    if kmer_threshold is None:
        kmer_threshold = default_kmer_threshold(k, spaced=index_is_spaced(index))
    windows = max(scores.shape[0] - int(shape[-1]), 0)
    if np.isfinite(kmer_threshold):  # the seeding k-mers only: 20**k scores per window are 3 GB for k = 5
        window, code, bits = kmer_neighbourhood(scores, k, kmer_threshold, shape)
    else:
        table = kmer_scores(scores, k, shape)
        window, code = np.nonzero(table >= kmer_threshold)
        bits = table[window, code]
    entries = None if max_seeds is None else index["offsets"][code + 1] - index["offsets"][code]
    if two_hit_over_budget and entries is not None and code.size and int(entries.sum()) > max_seeds:
        min_hits = max(min_hits, 2)
    window, code, bits = strongest_seeds(window, code, bits, index["offsets"], max_seeds, entries=entries)
    sequence, diagonal, hits, _, seeded_targets = seeded_best_diagonals(
        window, code, bits, windows, index, kmer_threshold, min_hits, offsets, diagonals_per_target, cache=cache)
    score = diagonal_scores(scores, *padded_residues(residues, offsets, scores.shape[0], cache), sequence,
                            diagonal, lengths=np.diff(offsets))
    if score.size == 0:
        empty = np.zeros(0, np.int64)
        return GaplessHits(empty, np.zeros(0, np.float32), empty, np.zeros(0, np.int32), 0)
    best = best_per_target(sequence, score, hits)
    lengths = (offsets[sequence[best] + 1] - offsets[sequence[best]]).astype(np.float64)
    threshold = offset_bits + np.log2(scores.shape[0] * lengths)
    keep = best[score[best] > threshold]
    return GaplessHits(sequence[keep], score[keep], diagonal[keep], hits[keep], seeded_targets)
