"""Prefilter stage 1: gapless alignment scores on diagonals seeded by the k-mer index.

Seed "Iterative MSA Alignment": the first HHblits prefilter computes, for every target, the log-odds score of
the best gapless (single-diagonal) local alignment with the query profile and passes targets scoring above
``2.5 + log2(Nq · Nt)`` bits to the gapped stage. Here the diagonals are not all scanned: a diagonal is
considered only when it holds at least ``min_hits`` k-mer seeds, each a query window whose profile score for
a database k-mer is at least ``kmer_threshold`` bits (BLAST/MMseqs2-style seeding from
:mod:`workflow_lib.db.kmer_index`; the k-mers are read through the index's seed shape, spaced by default,
and a seed at query window ``i`` and database window ``p`` lies on diagonal ``p - i``), and only the
``diagonals_per_target`` diagonals of a target with the highest summed seed scores are scored. The score on a seeded diagonal is exact: the best-scoring segment of
the whole diagonal (maximum subarray, Kadane over many diagonals at once), the same number an exhaustive scan
gives for that diagonal. With ``kmer_threshold=-inf`` and ``min_hits=1`` every diagonal is seeded and the stage
is exhaustive (the tests compare that with a plain loop).

Kernels are pure: arrays in, arrays out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from workflow_lib.aligner.compiled import available as compiled_available
from workflow_lib.db.kmer_index import index_is_spaced, index_offsets
from workflow_lib.search.prefilter_compiled import (best_in_sorted_compiled, diagonal_scores_compiled, seed_blocks,
                                                    seed_best_diagonals_compiled)
from workflow_lib.search.settings import DIAGONALS_PER_TARGET, default_kmer_threshold
from workflow_lib.seqio.alphabet import N_AMINO

GAPLESS_OFFSET_BITS = 2.5
"""The seed's threshold: keep targets scoring above 2.5 + log2(Lq · Lt) bits."""
DENSE_BINS_PER_SEED = 8
"""Count seeds in a dense (sequence, diagonal) array when it has at most this many bins per seed (+ 2**20)."""
X_SCORE_BITS = -1.0
"""Score of an unknown residue (X) in any column: a small penalty, so runs of X never seed or extend."""


def _offsets(k: int, shape: np.ndarray | None) -> np.ndarray:
    offsets = np.arange(k, dtype=np.int64) if shape is None else np.asarray(shape, dtype=np.int64)
    if offsets.size != k:
        raise ValueError(f"a seed shape of weight {k} needs {k} offsets, got {offsets.size}")
    return offsets


def prefilter_background(emissions: np.ndarray, background: np.ndarray, weight: float) -> np.ndarray:
    """The null model the prefilter scores a profile against: float64 ``[20]``, ``f(a)^(1 − w) · c(a)^w``
    normalised, where ``c`` is the profile's mean emission distribution over its columns and ``w = weight``.

    The Viterbi hits pay HMMER's null2 composition correction (:mod:`workflow_lib.search.bias`), whose
    alternative null model is that mean emission distribution over the aligned columns; the prefilter scored
    with ``f`` alone and passed targets whose score came from composition, which the correction then removed.
    HMMER's MSV filter is followed by a bias filter for the same reason (Eddy 2011, *PLoS Comput Biol*
    7:e1002195, "bias filter"). Context-specific profiles need it most: their mean emissions stray further from
    ``f`` (Kullback–Leibler divergence 0.07 bits against 0.01 for Gonnet profiles of single sequences), and
    64% of their prefilter survivors were never reported (survivors 2.7× the default's, 1.1× with w = 0.5).
    ``weight = 0`` gives ``f`` back."""
    background = np.asarray(background, dtype=np.float64)
    if weight == 0.0:
        return background
    mean = np.asarray(emissions, dtype=np.float64).mean(axis=0)
    mean = np.maximum(mean / mean.sum(), 1e-30)
    mixed = np.exp((1.0 - weight) * np.log(background) + weight * np.log(mean))
    return mixed / mixed.sum()


def profile_scores_bits(emissions: np.ndarray, background: np.ndarray) -> np.ndarray:
    """Position-specific scores ``log2(q_i(a) / f(a))`` as float32 ``[L, 21]`` (column 20 = X)."""
    emissions = np.asarray(emissions, dtype=np.float64)
    scores = np.log2(np.maximum(emissions, 1e-30) / np.asarray(background, dtype=np.float64)[None, :])
    return np.concatenate([scores, np.full((scores.shape[0], 1), X_SCORE_BITS)], axis=1).astype(np.float32)


def kmer_scores(scores: np.ndarray, k: int, shape: np.ndarray | None = None) -> np.ndarray:
    """Score of every k-mer code at every query window: float32 ``[L - span + 1, 20**k]``, the k-mer read
    through the window offsets ``shape`` (``None``: contiguous, ``span = k``)."""
    offsets = _offsets(k, shape)
    n = scores.shape[0] - int(offsets[-1])
    if n <= 0:
        return np.zeros((0, N_AMINO ** k), dtype=np.float32)
    total = scores[offsets[0]:offsets[0] + n, :N_AMINO]
    for o in offsets[1:].tolist():
        total = (total[:, :, None] + scores[o:o + n, None, :N_AMINO]).reshape(n, -1)
    return np.ascontiguousarray(total, dtype=np.float32)


def kmer_neighbourhood(scores: np.ndarray, k: int, threshold: float, shape: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (query window, k-mer code) whose profile score is at least ``threshold``, without the dense table.

    Branch and bound (as BLAST/MMseqs2 enumerate a similar-k-mer list): a prefix of ``t`` residues at window
    ``i`` is extended only while its score plus the best possible score of the remaining ``k - t`` columns can
    still reach the threshold. The k-mer's columns are ``i + shape[t]`` (``None``: contiguous). Returns
    ``(window int64, code int64, score float32)`` sorted by window; the same triples as
    ``np.nonzero(kmer_scores(scores, k, shape) >= threshold)`` with the scores summed in the same order.
    """
    offsets = _offsets(k, shape)
    standard = np.ascontiguousarray(scores[:, :N_AMINO], dtype=np.float32)
    n = standard.shape[0] - int(offsets[-1])
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    best = standard.max(axis=1).astype(np.float64)
    # remaining[t][i]: the most columns t+1 .. k-1 of window i can add (float64, a slack keeps rounding safe)
    remaining = [sum((best[o:o + n] for o in offsets[t + 1:].tolist()), np.zeros(n)) for t in range(k)]
    window = np.arange(n, dtype=np.int64)
    code = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.float32)
    for t in range(k):
        extended = total[:, None] + standard[window + int(offsets[t])]        # [m, 20]
        if t < k - 1:
            keep = (remaining[t][window][:, None] + extended) >= threshold - 1e-4
        else:
            keep = extended >= threshold
        # flat indices in row-major order, split by division: 4-5x faster than a 2-D np.nonzero
        flat = np.flatnonzero(keep)
        row = flat // N_AMINO
        residue = flat - row * N_AMINO
        window, total = window[row], extended.reshape(-1)[flat]
        code = code[row] * N_AMINO + residue
    return window, code, total


@dataclass(frozen=True)
class GaplessHits:
    """Per target that passed: shard sequence index, best gapless score (bits), its diagonal and k-mer hits."""

    sequence: np.ndarray   # int64 [T]
    score: np.ndarray      # float32 [T]
    diagonal: np.ndarray   # int64 [T], target position - query position
    seeds: np.ndarray      # int32 [T], k-mer hits on that diagonal
    seeded_targets: int    # targets with at least one seeded diagonal


def seed_diagonals(window_scores: np.ndarray, index: dict[str, np.ndarray], kmer_threshold: float,
                   min_hits: int, offsets: np.ndarray | None = None,
                   *, dense_limit: int = DENSE_BINS_PER_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(sequence, diagonal, hit count, summed seed score) of every diagonal with at least ``min_hits`` seeds.

    Sorted by (sequence, diagonal). Seeds are counted per diagonal with one dense ``np.bincount`` over every
    possible (sequence, diagonal) of the shard when the shard's sequence ``offsets`` are given and that space
    is at most ``dense_limit`` bins per seed plus 2**20 (≈ 4× faster than sorting the seeds); otherwise with
    ``np.unique`` (a sort). The dense count takes counts and summed bits from one weighted pass when that is
    exact (:func:`_count_scale`), else from two. All paths give the same arrays.
    """
    positions, codes = np.nonzero(window_scores >= kmer_threshold)
    return count_seeds(positions, codes, window_scores[positions, codes], window_scores.shape[0], index,
                       kmer_threshold, min_hits, offsets, dense_limit=dense_limit)


def count_seeds(positions: np.ndarray, codes: np.ndarray, seed_bits: np.ndarray, windows: int,
                index: dict[str, np.ndarray], kmer_threshold: float, min_hits: int,
                offsets: np.ndarray | None = None, *, dense_limit: int = DENSE_BINS_PER_SEED
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`seed_diagonals` from the seeding k-mers given as (query window, code, score ≥ threshold) triples,
    ``positions`` ascending, out of ``windows`` query windows."""
    seed_bits = np.asarray(seed_bits).astype(np.float64)
    starts = index["offsets"][codes]
    counts = index["offsets"][codes + 1] - starts
    total = int(counts.sum())
    if total == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty.astype(np.int32), np.zeros(0, np.float32)
    if offsets is not None:
        offsets = np.asarray(offsets, dtype=np.int64)
        # sequence s owns bins [s * pad + offsets[s], (s + 1) * pad + offsets[s + 1]): its diagonals shifted by
        # pad > number of query windows; pad is the window count rounded up to a power of two, so queries of
        # similar length share the cached per-entry bin base (index entry e of sequence s at position p has
        # base s * pad + offsets[s] + p + pad, and seed (e, query window i) lands in bin base[e] - i)
        pad = 1 << int(windows).bit_length()
        n_bins = int(offsets[-1]) + (offsets.size - 1) * pad
        if n_bins <= dense_limit * total + (1 << 20):
            bins = _seed_bins(_entry_bin_base(index, offsets, pad), starts, counts, positions, total)
            scale = _count_scale(seed_bits, kmer_threshold, windows)
            if scale is None:
                hits = np.bincount(bins, minlength=n_bins)
                keep = np.flatnonzero(hits >= min_hits)
                bits = np.bincount(bins, weights=np.repeat(seed_bits, counts), minlength=n_bins)[keep]
                hits = hits[keep]
            else:  # one pass: each seed adds scale + its bits, so a bin holds count * scale + summed bits
                sums = np.bincount(bins, weights=np.repeat(seed_bits + scale, counts), minlength=n_bins)
                keep = np.flatnonzero(sums >= scale * min_hits)
                sums = sums[keep]
                hits = np.floor(sums / scale)
                bits = sums - hits * scale
            # keep is sorted: each sequence's bins are one run, found by a search per sequence (not per bin)
            starts_of_sequences = offsets + np.arange(offsets.size, dtype=np.int64) * pad
            runs = np.diff(np.searchsorted(keep, starts_of_sequences))
            owner = np.repeat(np.arange(offsets.size - 1, dtype=np.int64), runs)
            return (owner, keep - np.repeat(starts_of_sequences[:-1] + pad, runs), hits.astype(np.int32),
                    bits.astype(np.float32))
    entries = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    entries += np.arange(total, dtype=np.int64)
    weights = np.repeat(seed_bits, counts)
    sequence = index["sequence"][entries].astype(np.int64)
    diagonal = index["position"][entries].astype(np.int64) - np.repeat(positions, counts)
    shift = int(windows) + 1
    keys, inverse, hits = np.unique(sequence * (1 << 32) + (diagonal + shift), return_inverse=True,
                                    return_counts=True)
    bits = np.bincount(inverse.reshape(-1), weights=weights, minlength=keys.size)
    keep = hits >= min_hits
    keys, hits, bits = keys[keep], hits[keep], bits[keep]
    return keys >> 32, (keys & ((1 << 32) - 1)) - shift, hits.astype(np.int32), bits.astype(np.float32)


SLICE_MIN_ENTRIES = 32
"""Concatenate per-k-mer slices when the seeding k-mers average at least this many index entries each; below
that, Python's cost per slice exceeds the gather's extra passes."""


def _seed_bins(base: np.ndarray, starts: np.ndarray, counts: np.ndarray, positions: np.ndarray,
               total: int) -> np.ndarray:
    """``base[e] - i`` for every seed (index entry e of a k-mer scored at query window i), in seed order.

    The entries of one k-mer are one contiguous run of ``base``, and ``positions`` (from ``np.nonzero``) is
    sorted: per query window, the runs of its k-mers are concatenated into their slice of the output and the
    window subtracted in place. Two passes over the seeds instead of the six of gathering by an entry array
    (``np.repeat``, ``arange``, add, gather, ``np.repeat``, subtract): 1.2-2.6x faster on 0.4-30 million seeds
    of 3-mers. With few entries per k-mer (below :data:`SLICE_MIN_ENTRIES` on average) the Python cost per slice
    dominates and the gather is used.
    """
    if total < SLICE_MIN_ENTRIES * counts.size:  # few entries per k-mer (4-mers): one gather beats the slices
        entries = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        entries += np.arange(total, dtype=np.int64)
        bins = base[entries]
        bins -= np.repeat(positions, counts)
        return bins
    bins = np.empty(total, dtype=np.int64)
    ends = (starts + counts).tolist()
    starts_list = starts.tolist()
    edges = np.concatenate([[0], np.cumsum(counts)]).tolist()
    cut = (np.flatnonzero(positions[1:] != positions[:-1]) + 1).tolist()
    for first, last in zip([0, *cut], [*cut, positions.size]):
        out = bins[edges[first]:edges[last]]
        np.concatenate([base[starts_list[k]:ends[k]] for k in range(first, last)], out=out)
        out -= int(positions[first])
    return bins


def _count_scale(seed_bits: np.ndarray, kmer_threshold: float, windows: int) -> float | None:
    """A power of two ``C`` such that one weighted ``np.bincount`` of ``C + bits`` per seed gives both numbers
    of a diagonal exactly (``count = floor(sum / C)``, ``bits = sum - count * C``), or None when that cannot be
    guaranteed.

    A diagonal holds at most one seed per query window, so its summed bits stay below ``windows * max(bits)
    < C``. Exactness: seed scores are float32 values ≥ ``kmer_threshold`` > 0, hence multiples of the float32
    spacing ``g`` at the threshold, and so is every partial sum; float64 adds them exactly while the largest
    sum ``< 2 · windows · C`` is below ``2**53 · g``. Then the arrays equal those of two separate counts.
    """
    if not kmer_threshold > 0 or seed_bits.size == 0:
        return None
    spacing = 2.0 ** (np.floor(np.log2(np.float32(kmer_threshold))) - 23)
    scale = 2.0 ** np.ceil(np.log2(float(seed_bits.max()) * windows + 1.0))
    return float(scale) if 2.0 * windows * scale < 2.0 ** 53 * spacing else None


_BIN_BASE_CACHE = 4
"""Padded bin bases kept per index (one int64 per index entry each), for queries of different lengths."""


def _cached(index: dict, prefix: str, pad: int, limit: int, build):
    """``index[prefix + pad]``, built by ``build()`` on first use; at most ``limit`` entries with ``prefix`` are
    kept per index (the oldest dropped), one per query-length class."""
    key = f"{prefix}{pad}"
    value = index.get(key)
    if value is None:
        older = [k for k in index if k.startswith(prefix)]
        for old in older[:max(len(older) - limit + 1, 0)]:
            del index[old]
        value = index[key] = build()
    return value


def _entry_bin_base(index: dict[str, np.ndarray], offsets: np.ndarray, pad: int) -> np.ndarray:
    """``s * pad + offsets[s] + p + pad`` for every index entry (sequence s, position p), cached in ``index``
    under ``_bin_base_<pad>`` (at most :data:`_BIN_BASE_CACHE` pads, oldest dropped)."""
    def build() -> np.ndarray:
        sequence = index["sequence"].astype(np.int64)
        return sequence * pad + offsets[sequence] + index["position"].astype(np.int64) + pad
    return _cached(index, "_bin_base_", pad, _BIN_BASE_CACHE, build)


def seeded_best_diagonals(window: np.ndarray, code: np.ndarray, bits: np.ndarray, windows: int,
                          index: dict[str, np.ndarray], kmer_threshold: float, min_hits: int, offsets: np.ndarray,
                          per_target: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`count_seeds` and then :func:`best_diagonals`: (sequence, diagonal, hits, summed seed bits) of each
    target's ``per_target`` best diagonals with at least ``min_hits`` seeds, sorted by (sequence, diagonal), and
    the number of targets with such a diagonal.

    With the compiled kernels (and a ``per_target``), one blocked count that chooses the diagonals as it goes
    (:func:`~workflow_lib.search.prefilter_compiled.seed_best_diagonals_compiled`, 3× faster, the same arrays);
    the block layout is cached in ``index`` per query-length class, like the dense path's bin base.
    """
    if per_target is not None and compiled_available():
        pad = 1 << int(windows).bit_length()
        blocks = _cached(index, "_seed_blocks_", pad, _BIN_BASE_CACHE, lambda: seed_blocks(offsets, pad))
        bits = np.asarray(bits, dtype=np.float64)        # once: the scale check and the kernel read float64
        if _count_scale(bits, kmer_threshold, windows) is not None:
            # the sums are exact (see _count_scale), so the seed order is free: by k-mer code, the index is
            # read in ascending order (20% faster than in window order)
            order = np.argsort(code, kind="stable")
            window, code, bits = window[order], code[order], bits[order]
        return seed_best_diagonals_compiled(window, code, bits, index, blocks, pad, min_hits, per_target)
    sequence, diagonal, hits, seed_bits = count_seeds(window, code, bits, windows, index, kmer_threshold,
                                                      min_hits, offsets)
    seeded_targets = int(sequence.size > 0) + int(np.count_nonzero(sequence[1:] != sequence[:-1]))  # sorted
    chosen = best_diagonals(sequence, seed_bits, per_target)
    return sequence[chosen], diagonal[chosen], hits[chosen], seed_bits[chosen], seeded_targets


def best_diagonals(sequence: np.ndarray, rank_by: np.ndarray, per_target: int | None) -> np.ndarray:
    """Indices (ascending) of the ``per_target`` highest-ranked diagonals of each target (all when ``None``).

    Ties go to the earlier index, as a stable sort by (target, rank descending) would. When ``sequence`` is
    sorted (as :func:`seed_diagonals` returns it) and ``per_target`` is small, ``per_target`` linear passes of
    segment maxima (``np.maximum.reduceat``) replace the sort (≈ 3× faster on millions of diagonals).
    """
    if per_target is None or sequence.size == 0:
        return np.arange(sequence.size)
    sequence = np.asarray(sequence)
    if per_target <= 16 and bool(np.all(sequence[1:] >= sequence[:-1])):
        if compiled_available():
            return best_in_sorted_compiled(sequence, rank_by, per_target)
        return _best_in_sorted_by_strong_first(sequence, np.asarray(rank_by, np.float32), per_target)
    # one stable integer sort instead of a two-key lexsort (4x faster, same order, ties included): the
    # float32 rank mapped to an order-preserving uint32, inverted so the best comes first within a target
    bits = np.ascontiguousarray(rank_by, np.float32).view(np.uint32).astype(np.int64)
    monotone = np.where(bits & 0x80000000, 0xFFFFFFFF - bits, bits | 0x80000000)
    order = np.argsort((sequence.astype(np.int64) << 32) | (0xFFFFFFFF - monotone), kind="stable")
    ordered = sequence[order]
    group_start = np.concatenate([[0], np.nonzero(ordered[1:] != ordered[:-1])[0] + 1])
    sizes = np.diff(np.concatenate([group_start, [ordered.size]]))
    rank = np.arange(ordered.size) - np.repeat(group_start, sizes)
    return np.sort(order[rank < per_target])


STRONG_SAMPLE_STEP = 64
"""Every this many diagonals are sampled to estimate the rank quantile of the strong set (see below)."""


def _best_in_sorted_by_strong_first(sequence: np.ndarray, rank_by: np.ndarray, per_target: int) -> np.ndarray:
    """:func:`_best_in_sorted_segments` on a fraction of the diagonals, with the same result.

    Take a cut ``c`` near the rank quantile that leaves ~4 strong diagonals per wanted one (estimated on a
    sample). A target with at least ``per_target`` diagonals ranked ≥ ``c`` takes its best among those only
    (every other diagonal ranks below all of them); the other targets take theirs among all their diagonals.
    On a 46k-sequence shard 1.8 M seeded diagonals shrink to ~15% for the segment passes (about 2× faster).
    """
    n = sequence.size
    starts = np.flatnonzero(np.concatenate([[True], sequence[1:] != sequence[:-1]]))
    wanted = 4.0 * per_target * starts.size / max(n, 1)
    if n < 8 * STRONG_SAMPLE_STEP * per_target or wanted >= 0.5:
        return _best_in_sorted_segments(sequence, rank_by, per_target)
    cut = np.float32(np.quantile(rank_by[::STRONG_SAMPLE_STEP], 1.0 - wanted))
    strong = rank_by >= cut
    rich = np.add.reduceat(strong.astype(np.int32), starts) >= per_target
    in_rich = np.repeat(rich, np.diff(np.append(starts, n)))
    parts = []
    for subset in (np.flatnonzero(in_rich & strong), np.flatnonzero(~in_rich)):
        if subset.size:
            parts.append(subset[_best_in_sorted_segments(sequence[subset], rank_by[subset], per_target)])
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def _best_in_sorted_segments(sequence: np.ndarray, rank_by: np.ndarray, per_target: int) -> np.ndarray:
    """:func:`best_diagonals` for a sorted ``sequence``: per pass, the first maximum of every segment."""
    n = sequence.size
    starts = np.flatnonzero(np.concatenate([[True], sequence[1:] != sequence[:-1]]))
    sizes = np.diff(np.append(starts, n))
    chosen = np.repeat(sizes <= per_target, sizes)          # small targets keep every diagonal
    big = np.flatnonzero(sizes > per_target)
    if big.size:
        members = np.flatnonzero(~chosen)                     # the diagonals of the big targets, in order
        rank = np.asarray(rank_by, np.float32)[members].astype(np.float64)
        sub_sizes = sizes[big]
        sub_starts = np.concatenate([[0], np.cumsum(sub_sizes)[:-1]])
        taken = np.zeros(members.size, dtype=bool)
        position = np.arange(members.size)
        for _ in range(per_target):
            top = np.maximum.reduceat(rank, sub_starts)
            candidate = (rank == np.repeat(top, sub_sizes)) & ~taken
            first = np.minimum.reduceat(np.where(candidate, position, members.size), sub_starts)
            first = first[first < members.size]
            taken[first] = True
            rank[first] = -np.inf
        chosen[members[taken]] = True
    return np.flatnonzero(chosen)


PAD_RESIDUE = N_AMINO + 1
"""Code of the padding between sequences in :func:`_padded_residues`; it scores 0 in every column."""
_PADDED_CACHE = 2
"""Padded residue layouts kept per index (one byte per residue plus the padding), for queries of different lengths."""


def _padded_residues(index: dict[str, np.ndarray], residues: np.ndarray, offsets: np.ndarray,
                     query_length: int) -> tuple[np.ndarray, np.ndarray]:
    """The shard's residues with ``pad ≥ query_length`` :data:`PAD_RESIDUE` codes before, between and after the
    sequences, and where each sequence starts in it: a diagonal read through the layout runs into padding,
    never into a neighbour, so no bounds test is needed. ``pad`` is a power of two so queries of similar
    length share one layout, cached in ``index`` (at most :data:`_PADDED_CACHE`, oldest dropped)."""
    pad = 1 << int(query_length).bit_length()

    def build() -> tuple[np.ndarray, np.ndarray]:
        n = offsets.size - 1
        starts = offsets[:-1] + pad * np.arange(1, n + 1, dtype=np.int64)
        layout = np.full(int(offsets[-1]) + pad * (n + 1), PAD_RESIDUE, dtype=np.uint8)
        layout[np.repeat(starts - offsets[:-1], np.diff(offsets)) + np.arange(int(offsets[-1]))] = \
            residues[:offsets[-1]]
        return layout, starts
    return _cached(index, "_padded_", pad, _PADDED_CACHE, build)


COLUMN_SPAN = 512
"""Query columns whose residue codes :func:`diagonal_scores` gathers and transposes at once (bounds the
``[span, block]`` code matrix: 4 MB at the default block)."""
COLUMN_CHUNK = 16
"""Query columns whose score gathers :func:`diagonal_scores` issues as one call."""


def diagonal_scores(scores: np.ndarray, layout: np.ndarray, starts: np.ndarray, sequence: np.ndarray,
                    diagonal: np.ndarray, *, block: int = 8192) -> np.ndarray:
    """Best gapless segment score (bits) on each (sequence, diagonal), vectorised over candidates.

    ``scores`` float32 [Lq, 21]; ``layout``/``starts`` the shard's padded residues (:func:`_padded_residues`);
    returns float32 [C] (≥ 0): per diagonal, the maximum segment sum of its column scores (padding scores 0).

    Kadane's recurrence ``run = max(run, 0) + s_i``, ``best = max(best, run)`` advances one query column at a
    time over ``block`` diagonals at once (three contiguous float32 passes per column; the 0 is an array of
    zeros, as NumPy's float ``maximum`` against a scalar runs ~4× slower), with no ``accumulate`` along a
    diagonal (NumPy runs those as scalar loops: ~2–4 ns per cell). The inputs of a column come from gathers
    that are cheaper in bulk than per column:

    - residue codes: a diagonal's codes for :data:`COLUMN_SPAN` columns are one contiguous run of the layout,
      so the runs of a block are copied as rows (a sliding-window view indexed by the diagonals' start
      positions) and transposed once to ``[span, block]``, instead of one scattered gather per column;
    - column scores: one ``np.take`` per :data:`COLUMN_CHUNK` columns from the flattened ``[Lq, 23]`` table
      (code + 23 · column).

    5.5–6.2 against 6.3–7.4 ns per cell for one gather of codes and one of scores per column (12 shard scans
    of 4 *E. coli* queries replayed alone; in whole searches the stage took 24–30% less time, benchmarks/
    RESULTS.md, session 18); the sums are the same float32 operations in the same order, so the scores are
    identical. The gathers use ``mode="wrap"``, the cheapest of NumPy's index modes (~40% faster than
    ``"clip"`` per element, measured session 32): every read is in range by construction (the layout holds
    ``pad ≥ Lq`` padding codes after the last sequence), so no index is ever wrapped.
    """
    query_length = scores.shape[0]
    n_codes = PAD_RESIDUE + 1
    table = np.zeros((query_length, n_codes), dtype=np.float32)
    table[:, :scores.shape[1]] = scores
    if compiled_available():
        return diagonal_scores_compiled(table, layout, starts, sequence, diagonal)
    flat = table.ravel()
    row_base = (np.arange(query_length, dtype=np.intp) * n_codes)[:, None]
    out = np.zeros(sequence.size, dtype=np.float32)
    width = min(block, sequence.size)
    spans = [(c0, min(COLUMN_SPAN, query_length - c0)) for c0 in range(0, query_length, COLUMN_SPAN)]
    windows = {span: sliding_window_view(layout, span) for span in {span for _, span in spans}}
    index = np.empty((COLUMN_CHUNK, width), dtype=np.intp)
    column = np.empty((COLUMN_CHUNK, width), dtype=np.float32)
    zeros = np.zeros(width, dtype=np.float32)  # max(run, 0) against an array: ~4x faster than against a scalar
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


def gapless_prefilter(scores: np.ndarray, index: dict[str, np.ndarray], residues: np.ndarray,
                      offsets: np.ndarray, *, kmer_threshold: float | None = None, min_hits: int = 1,
                      diagonals_per_target: int | None = DIAGONALS_PER_TARGET,
                      offset_bits: float = GAPLESS_OFFSET_BITS) -> GaplessHits:
    """Stage 1 of the prefilter for one query against one indexed shard (see the module docstring).

    ``kmer_threshold``: seed threshold in bits (``None``: :func:`default_kmer_threshold` for the index's k and
    shape). ``diagonals_per_target``: score only the diagonals of each target with the highest summed seed
    scores (``None``: every seeded diagonal, the exhaustive setting when ``kmer_threshold=-inf``).
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
    sequence, diagonal, hits, _, seeded_targets = seeded_best_diagonals(
        window, code, bits, windows, index, kmer_threshold, min_hits, offsets, diagonals_per_target)
    score = diagonal_scores(scores, *_padded_residues(index, residues, offsets, scores.shape[0]), sequence,
                            diagonal)
    if score.size == 0:
        empty = np.zeros(0, np.int64)
        return GaplessHits(empty, np.zeros(0, np.float32), empty, np.zeros(0, np.int32), 0)
    order = np.lexsort((-hits, -score, sequence))  # per target: best score, then most seeds
    first = np.concatenate([[True], sequence[order][1:] != sequence[order][:-1]])
    best = order[first]
    lengths = (offsets[sequence[best] + 1] - offsets[sequence[best]]).astype(np.float64)
    threshold = offset_bits + np.log2(scores.shape[0] * lengths)
    keep = best[score[best] > threshold]
    return GaplessHits(sequence[keep], score[keep], diagonal[keep], hits[keep], seeded_targets)
