"""Prefilter diagonals: the seeds counted per (target, diagonal) and each target's best diagonals chosen.

The prefilter of HHblits (Remmert et al. 2012, Nat. Methods 9:173) passes a target on its best gapless diagonal; here a
diagonal is a candidate only when it holds at least ``min_hits`` seeds (:mod:`workflow_lib.search.seeds`; a
seed at query window ``i`` and database window ``p`` lies on diagonal ``p - i``), and only the
``diagonals_per_target`` diagonals of a target with the highest summed seed scores are scored
(:mod:`workflow_lib.search.gapless`). Seeds are counted with one dense ``np.bincount`` over a shard's
(sequence, diagonal) space or by sorting, or with the compiled blocked count
(:mod:`workflow_lib.search.prefilter_compiled`); every path gives the same arrays. The layouts the counts
reuse across queries live in a :class:`~workflow_lib.search.shard_cache.ShardCache`.
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner.device import compiled_available
from workflow_lib.search.prefilter_compiled import best_in_sorted_compiled, seed_best_diagonals_compiled, seed_blocks
from workflow_lib.search.shard_cache import ShardCache

DENSE_BINS_PER_SEED = 8
"""Count seeds in a dense (sequence, diagonal) array when it has at most this many bins per seed (+ 2**20)."""


def seed_diagonals(window_scores: np.ndarray, index: dict[str, np.ndarray], kmer_threshold: float,
                   min_hits: int, offsets: np.ndarray | None = None,
                   *, dense_limit: int = DENSE_BINS_PER_SEED,
                   cache: ShardCache | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(sequence, diagonal, hit count, summed seed score) of every diagonal with at least ``min_hits`` seeds.

    Sorted by (sequence, diagonal). Seeds are counted per diagonal with one dense ``np.bincount`` over every
    possible (sequence, diagonal) of the shard when the shard's sequence ``offsets`` are given and that space
    is at most ``dense_limit`` bins per seed plus 2**20 (one linear pass, cheaper than sorting the seeds);
    otherwise with ``np.unique`` (a sort). The dense count takes counts and summed bits from one weighted pass
    when that is exact (:func:`count_scale`), else from two. All paths give the same arrays.
    """
    positions, codes = np.nonzero(window_scores >= kmer_threshold)
    return count_seeds(positions, codes, window_scores[positions, codes], window_scores.shape[0], index,
                       kmer_threshold, min_hits, offsets, dense_limit=dense_limit, cache=cache)


def count_seeds(positions: np.ndarray, codes: np.ndarray, seed_bits: np.ndarray, windows: int,
                index: dict[str, np.ndarray], kmer_threshold: float, min_hits: int,
                offsets: np.ndarray | None = None, *, dense_limit: int = DENSE_BINS_PER_SEED,
                cache: ShardCache | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`seed_diagonals` from the seeding k-mers given as (query window, code, score ≥ threshold) triples,
    ``positions`` ascending, out of ``windows`` query windows (``cache``: the shard's, for the bin base)."""
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
            bins = seed_bins(entry_bin_base(index, offsets, pad, cache), starts, counts, positions, total)
            scale = count_scale(seed_bits, kmer_threshold, windows)
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


def seed_bins(base: np.ndarray, starts: np.ndarray, counts: np.ndarray, positions: np.ndarray,
               total: int) -> np.ndarray:
    """``base[e] - i`` for every seed (index entry e of a k-mer scored at query window i), in seed order.

    The entries of one k-mer are one contiguous run of ``base``, and ``positions`` (from ``np.nonzero``) is
    sorted: per query window, the runs of its k-mers are concatenated into their slice of the output and the
    window subtracted in place. Two passes over the seeds instead of the six of gathering by an entry array
    (``np.repeat``, ``arange``, add, gather, ``np.repeat``, subtract): faster on the millions of seeds
    that 3-mers give. With few entries per k-mer (below :data:`SLICE_MIN_ENTRIES` on average) the Python cost per slice
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


def count_scale(seed_bits: np.ndarray, kmer_threshold: float, windows: int) -> float | None:
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


def entry_bin_base(index: dict[str, np.ndarray], offsets: np.ndarray, pad: int,
                   cache: ShardCache | None = None) -> np.ndarray:
    """``s * pad + offsets[s] + p + pad`` for every index entry (sequence s, position p), kept in ``cache`` per
    ``pad`` (:class:`~workflow_lib.search.shard_cache.ShardCache`)."""
    def build() -> np.ndarray:
        sequence = index["sequence"].astype(np.int64)
        return sequence * pad + offsets[sequence] + index["position"].astype(np.int64) + pad
    return ShardCache.of(cache).get("bin_base", pad, build)


def seeded_best_diagonals(window: np.ndarray, code: np.ndarray, bits: np.ndarray, windows: int,
                          index: dict[str, np.ndarray], kmer_threshold: float, min_hits: int, offsets: np.ndarray,
                          per_target: int | None, *, cache: ShardCache | None = None
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`count_seeds` and then :func:`best_diagonals`: (sequence, diagonal, hits, summed seed bits) of each
    target's ``per_target`` best diagonals with at least ``min_hits`` seeds, sorted by (sequence, diagonal), and
    the number of targets with such a diagonal.

    With the compiled kernels (and a ``per_target``), one blocked count that chooses the diagonals as it goes
    (:func:`~workflow_lib.search.prefilter_compiled.seed_best_diagonals_compiled`, the same arrays; its cost:
    benchmarks/RESULTS.md, "Prefilter: blocked seed counting"); the block layout is kept in ``cache`` per
    query-length class, like the dense path's bin base.
    """
    if per_target is not None and compiled_available():
        pad = 1 << int(windows).bit_length()
        blocks = ShardCache.of(cache).get("seed_blocks", pad, lambda: seed_blocks(offsets, pad))
        bits = np.asarray(bits, dtype=np.float64)        # once: the scale check and the kernel read float64
        if count_scale(bits, kmer_threshold, windows) is not None:
            # the sums are exact (see count_scale), so the seed order is free: by k-mer code, the index is
            # read in ascending order (faster than in window order)
            order = np.argsort(code, kind="stable")
            window, code, bits = window[order], code[order], bits[order]
        return seed_best_diagonals_compiled(window, code, bits, index, blocks, pad, min_hits, per_target)
    sequence, diagonal, hits, seed_bits = count_seeds(window, code, bits, windows, index, kmer_threshold,
                                                      min_hits, offsets, cache=cache)
    seeded_targets = int(sequence.size > 0) + int(np.count_nonzero(sequence[1:] != sequence[:-1]))  # sorted
    chosen = best_diagonals(sequence, seed_bits, per_target)
    return sequence[chosen], diagonal[chosen], hits[chosen], seed_bits[chosen], seeded_targets


def best_diagonals(sequence: np.ndarray, rank_by: np.ndarray, per_target: int | None) -> np.ndarray:
    """Indices (ascending) of the ``per_target`` highest-ranked diagonals of each target (all when ``None``).

    Ties go to the earlier index, as a stable sort by (target, rank descending) would. When ``sequence`` is
    sorted (as :func:`seed_diagonals` returns it) and ``per_target`` is small, ``per_target`` linear passes of
    segment maxima (``np.maximum.reduceat``) replace the sort (cheaper on millions of diagonals).
    """
    if per_target is None or sequence.size == 0:
        return np.arange(sequence.size)
    sequence = np.asarray(sequence)
    if per_target <= 16 and bool(np.all(sequence[1:] >= sequence[:-1])):
        if compiled_available():
            return best_in_sorted_compiled(sequence, rank_by, per_target)
        return best_in_sorted_by_strong_first(sequence, np.asarray(rank_by, np.float32), per_target)
    # one stable integer sort instead of a two-key lexsort (several times faster, same order, ties included): the
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


def best_in_sorted_by_strong_first(sequence: np.ndarray, rank_by: np.ndarray, per_target: int) -> np.ndarray:
    """:func:`best_in_sorted_segments` on a fraction of the diagonals, with the same result.

    Take a cut ``c`` near the rank quantile that leaves ~4 strong diagonals per wanted one (estimated on a
    sample). A target with at least ``per_target`` diagonals ranked ≥ ``c`` takes its best among those only
    (every other diagonal ranks below all of them); the other targets take theirs among all their diagonals.
    On a large shard the segment passes then read a small fraction of the seeded diagonals.
    """
    n = sequence.size
    starts = np.flatnonzero(np.concatenate([[True], sequence[1:] != sequence[:-1]]))
    wanted = 4.0 * per_target * starts.size / max(n, 1)
    if n < 8 * STRONG_SAMPLE_STEP * per_target or wanted >= 0.5:
        return best_in_sorted_segments(sequence, rank_by, per_target)
    cut = np.float32(np.quantile(rank_by[::STRONG_SAMPLE_STEP], 1.0 - wanted))
    strong = rank_by >= cut
    rich = np.add.reduceat(strong.astype(np.int32), starts) >= per_target
    in_rich = np.repeat(rich, np.diff(np.append(starts, n)))
    parts = []
    for subset in (np.flatnonzero(in_rich & strong), np.flatnonzero(~in_rich)):
        if subset.size:
            parts.append(subset[best_in_sorted_segments(sequence[subset], rank_by[subset], per_target)])
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def best_in_sorted_segments(sequence: np.ndarray, rank_by: np.ndarray, per_target: int) -> np.ndarray:
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
