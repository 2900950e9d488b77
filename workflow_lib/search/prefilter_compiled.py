"""Compiled (numba) twins of the steps of the prefilter's gapless stage (after HHblits' first prefilter):
counting the seeds per (sequence, diagonal) together with choosing each target's best seeded diagonals
(:func:`workflow_lib.search.diagonals.count_seeds` followed by
:func:`workflow_lib.search.diagonals.best_diagonals`), and the best gapless segment on each chosen diagonal
(:func:`workflow_lib.search.gapless.diagonal_scores`).

Seed counting, blocked: NumPy's ``bincount`` adds every seed into one dense array of all (sequence, diagonal) bins of
the shard (14 million bins, 112 MB, for a 300-residue query against 15,000 sequences) at a random place, so each seed
waits on memory; a compiled scatter into the same array is no faster (benchmarks/RESULTS.md,
"Homology search: settings measured and not taken"). Here the shard's sequences are cut into blocks of consecutive
sequences with at most :data:`SEED_BLOCK_BINS` bins each (:func:`seed_blocks`), and the seeds are counted in three
passes: seeds per block; the seeds written block by block (a stable counting sort: each block's seeds keep their order);
then, per block, the seeds added into bins that stay in the core's cache, and each bin visited once through its seeds,
offering its diagonal to its target's short list of the best ``per_target``. The sums are float64 in seed order, as
``bincount`` adds them, so counts, summed bits and the chosen diagonals are identical to the NumPy path (ranked by the
float32 sum, ties to the smaller diagonal, as :func:`~workflow_lib.search.diagonals.best_diagonals` takes the earlier
one).

Best diagonals per target (for seeds counted by NumPy): one pass keeps each target's ``per_target``
highest-ranked diagonals in a small sorted list (ties to the earlier index).

Diagonal scores: Kadane's recurrence ``run = max(run, 0) + s``, ``best = max(best, run)`` over the query columns, for
:data:`DIAGONAL_LANES` diagonals at once (the innermost loop runs over them; each reads its residue codes from
the padded layout at its own position, so no transposed copy of the codes is made). The float32 operations are
the NumPy kernel's, in the same order, so the scores are identical. Used when
:func:`workflow_lib.aligner.compiled.available`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from workflow_lib.aligner.device import numba_module

DIAGONAL_LANES = 32
"""Diagonals advanced together, one query column at a time (their running values stay in registers)."""
SPAN_CLASSES = 16
"""The gapless stage groups diagonals by where their overlap with the target starts and where it ends, each in
sixteenths of the query (256 classes; an empty span falls in the last), keeping the shard's order within a class (the layout is read in order)."""
MIN_SPAN_QUERY = 300
"""Queries shorter than this score every diagonal over every column: their diagonals mostly overlap their targets
over the whole query, and grouping them costs more than it saves."""
SEED_BLOCK_BINS = 1 << 15
"""Bins (diagonals) per block of sequences when counting seeds: int32 counts and float64 sums, 384 KB, stay in a core's
L2 cache. Smaller and larger blocks measured the same (benchmarks/RESULTS.md, "Prefilter: blocked seed counting")."""
COARSE_SHIFT = 6
"""A block's bins are mapped to their sequence through a table with one entry per 2**6 bins."""


@lru_cache(maxsize=None)
def _kernel():
    return _kernels()[0]


@lru_cache(maxsize=None)
def _kernels():
    numba = numba_module()
    jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")

    @jit
    def best_kernel(sequence, rank_by, per_target):
        """Per run of equal ``sequence`` values, the indices of its ``per_target`` highest ``rank_by`` values
        (ties: the earlier index), all runs' indices in ascending order."""
        n = sequence.size
        chosen = np.zeros(n, np.bool_)
        top_rank = np.empty(per_target, np.float32)
        top_index = np.empty(per_target, np.int64)
        start = 0
        while start < n:
            stop = start + 1
            while stop < n and sequence[stop] == sequence[start]:
                stop += 1
            if stop - start <= per_target:
                for j in range(start, stop):
                    chosen[j] = True
            else:
                filled = 0
                for j in range(start, stop):
                    value = rank_by[j]
                    if filled == per_target and not value > top_rank[filled - 1]:
                        continue                      # not above the weakest kept (a tie keeps the earlier)
                    slot = filled if filled < per_target else per_target - 1
                    while slot > 0 and value > top_rank[slot - 1]:
                        if slot < per_target:
                            top_rank[slot] = top_rank[slot - 1]
                            top_index[slot] = top_index[slot - 1]
                        slot -= 1
                    top_rank[slot] = value
                    top_index[slot] = j
                    if filled < per_target:
                        filled += 1
                for t in range(per_target):
                    chosen[top_index[t]] = True
            start = stop
        return np.flatnonzero(chosen)

    @jit
    def diagonal_kernel(table, layout, starts, sequence, diagonal, first, last, out):
        n = sequence.size
        zero = np.float32(0.0)
        position = np.empty(DIAGONAL_LANES, np.int64)
        run = np.empty(DIAGONAL_LANES, np.float32)
        best = np.empty(DIAGONAL_LANES, np.float32)
        for lo in range(0, n, DIAGONAL_LANES):
            lanes = min(DIAGONAL_LANES, n - lo)
            c_first = first[lo]
            c_last = last[lo]
            for k in range(lanes):
                position[k] = starts[sequence[lo + k]] + diagonal[lo + k]
                run[k] = zero
                best[k] = zero
                c_first = min(c_first, first[lo + k])
                c_last = max(c_last, last[lo + k])
            for c in range(c_first, c_last):
                row = table[c]
                for k in range(lanes):
                    value = run[k]
                    value = value if value > zero else zero
                    value = value + row[layout[position[k] + c]]
                    run[k] = value
                    best[k] = value if value > best[k] else best[k]
            for k in range(lanes):
                out[lo + k] = best[k]

    @jit
    def blocks_kernel(lengths, pad, block_bins):
        """Greedy blocks of consecutive sequences (span = length + pad bins each, at most ``block_bins`` per
        block unless one sequence alone exceeds it); the owner table of each block's 2**COARSE_SHIFT-bin
        chunks (index of the sequence within the block holding the chunk's first bin)."""
        n = lengths.size
        block = np.empty(n, np.int32)
        local = np.empty(n, np.int64)
        span = np.empty(n, np.int64)
        first = np.empty(n + 1, np.int64)
        n_blocks = 0
        used = 0
        widest = block_bins
        for s in range(n):
            span[s] = lengths[s] + pad
            if s == 0 or (used > 0 and used + span[s] > block_bins):
                first[n_blocks] = s
                n_blocks += 1
                used = 0
            block[s] = n_blocks - 1
            local[s] = used
            used += span[s]
            widest = max(widest, used)
        first[n_blocks] = n
        chunks = block_bins >> COARSE_SHIFT
        coarse = np.zeros(n_blocks * chunks, np.int32)
        most = 1
        for b in range(n_blocks):
            members = first[b + 1] - first[b]
            most = max(most, members)
            q = 0
            for g in range(chunks):
                position = g << COARSE_SHIFT
                while q + 1 < members and local[first[b] + q + 1] <= position:
                    q += 1
                coarse[b * chunks + g] = q
        return block, local, span, first[:n_blocks + 1].copy(), coarse, widest, most

    @jit
    def seeds_kernel(window, code, bits, index_offsets, entry_sequence, entry_position, block, local, span,
                     first, coarse, widest, most, block_bins, pad, min_hits, per_target):
        n_triples = window.size
        n_blocks = first.size - 1
        # pass 1: seeds per block
        block_start = np.zeros(n_blocks + 1, np.int64)
        for t in range(n_triples):
            c = code[t]
            for e in range(index_offsets[c], index_offsets[c + 1]):
                block_start[block[entry_sequence[e]] + 1] += 1
        for b in range(n_blocks):
            block_start[b + 1] += block_start[b]
        # pass 2: each seed's bin within its block (diagonal p - i of sequence s at local[s] + p - i + pad) and
        # its (window, code) triple, written block by block in seed order
        cursor = block_start[:n_blocks].copy()
        seed_bin = np.empty(block_start[n_blocks], np.int32)
        seed_triple = np.empty(block_start[n_blocks], np.int32)
        for t in range(n_triples):
            c = code[t]
            shift = pad - window[t]
            for e in range(index_offsets[c], index_offsets[c + 1]):
                s = entry_sequence[e]
                b = block[s]
                j = cursor[b]
                seed_bin[j] = local[s] + entry_position[e] + shift
                seed_triple[j] = t
                cursor[b] = j + 1
        # pass 3: per block, count and sum in cached bins, then visit each bin once through its seeds
        counts = np.zeros(widest, np.int32)
        sums = np.zeros(widest, np.float64)
        n_sequences = block.size
        out_sequence = np.empty(n_sequences * per_target, np.int64)
        out_diagonal = np.empty(n_sequences * per_target, np.int64)
        out_hits = np.empty(n_sequences * per_target, np.int32)
        out_bits = np.empty(n_sequences * per_target, np.float32)
        top_rank = np.empty((most, per_target), np.float32)
        top_bin = np.empty((most, per_target), np.int64)
        top_hits = np.empty((most, per_target), np.int32)
        filled = np.zeros(most, np.int64)
        chunks = block_bins >> COARSE_SHIFT
        taken = np.iinfo(np.int64).max                        # above every bin: marks an emitted diagonal
        n_out = 0
        seeded = 0
        for b in range(n_blocks):
            lo = block_start[b]
            hi = block_start[b + 1]
            if lo == hi:
                continue
            head = first[b]
            members = first[b + 1] - head
            for j in range(lo, hi):
                x = seed_bin[j]
                counts[x] += 1
                sums[x] += bits[seed_triple[j]]
            q = 0
            for j in range(lo, hi):
                x = seed_bin[j]
                h = counts[x]
                if h == 0:
                    continue                                  # visited through an earlier seed
                counts[x] = 0
                value = np.float32(sums[x])
                sums[x] = 0.0
                if h < min_hits:
                    continue
                if members > 1:
                    q = coarse[b * chunks + (x >> COARSE_SHIFT)]
                    while x >= local[head + q] + span[head + q]:
                        q += 1
                f = filled[q]
                if f == per_target:                           # full: must beat the weakest (ties: smaller bin)
                    weakest = top_rank[q, f - 1]
                    if value < weakest or (value == weakest and x > top_bin[q, f - 1]):
                        continue
                    slot = f - 1
                else:
                    slot = f
                    filled[q] = f + 1
                while slot > 0 and (value > top_rank[q, slot - 1]
                                    or (value == top_rank[q, slot - 1] and x < top_bin[q, slot - 1])):
                    top_rank[q, slot] = top_rank[q, slot - 1]
                    top_bin[q, slot] = top_bin[q, slot - 1]
                    top_hits[q, slot] = top_hits[q, slot - 1]
                    slot -= 1
                top_rank[q, slot] = value
                top_bin[q, slot] = x
                top_hits[q, slot] = h
            for q in range(members):
                f = filled[q]
                if f == 0:
                    continue
                filled[q] = 0
                seeded += 1
                s = head + q
                for _ in range(f):                            # ascending diagonals: the smallest bin left
                    m = 0
                    for a in range(1, f):
                        if top_bin[q, a] < top_bin[q, m]:
                            m = a
                    out_sequence[n_out] = s
                    out_diagonal[n_out] = top_bin[q, m] - local[s] - pad
                    out_hits[n_out] = top_hits[q, m]
                    out_bits[n_out] = top_rank[q, m]
                    top_bin[q, m] = taken
                    n_out += 1
        return (out_sequence[:n_out].copy(), out_diagonal[:n_out].copy(), out_hits[:n_out].copy(),
                out_bits[:n_out].copy(), seeded)

    @jit
    def layout_kernel(residues, offsets, pad, layout, starts):
        """Copy each sequence into ``layout`` (filled with padding) at ``starts``."""
        for s in range(offsets.size - 1):
            begin = offsets[s] + pad * (s + 1)
            starts[s] = begin
            for j in range(offsets[s + 1] - offsets[s]):
                layout[begin + j] = residues[offsets[s] + j]

    return diagonal_kernel, best_kernel, blocks_kernel, seeds_kernel, layout_kernel


def best_in_sorted_compiled(sequence: np.ndarray, rank_by: np.ndarray, per_target: int) -> np.ndarray:
    """:func:`workflow_lib.search.diagonals.best_diagonals` for a sorted ``sequence``: indices (ascending) of
    each target's ``per_target`` highest-ranked diagonals, ties to the earlier index."""
    return _kernels()[1](np.asarray(sequence, dtype=np.int64), np.asarray(rank_by, dtype=np.float32),
                         int(per_target))


def diagonal_scores_compiled(table: np.ndarray, layout: np.ndarray, starts: np.ndarray, sequence: np.ndarray,
                             diagonal: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
    """Best gapless segment score (float32 ``[C]``) per (sequence, diagonal); ``table`` float32 ``[Lq, codes]``
    (padding codes score 0), ``layout``/``starts`` as :func:`workflow_lib.search.gapless.padded_residues`.

    With the shard's sequence ``lengths`` and a query of at least :data:`MIN_SPAN_QUERY` residues, each diagonal
    is scored over the query columns where it overlaps its target: the diagonals are grouped by that span
    (:data:`SPAN_CLASSES`, a stable radix sort on a 16-bit class), so the :data:`DIAGONAL_LANES` advanced together
    share most of it, and each group of lanes runs over the union of their spans. Outside its own span a lane
    reads padding, which scores 0 and so changes neither its running nor its best value: the scores are those
    over every column, to the bit (benchmarks/RESULTS.md, "Homology search: the gapless stage over each
    diagonal's overlap")."""
    out = np.zeros(sequence.size, dtype=np.float32)
    if not sequence.size:
        return out
    table = np.ascontiguousarray(table, dtype=np.float32)
    sequence = sequence.astype(np.int64, copy=False)
    diagonal = diagonal.astype(np.int64, copy=False)
    starts = starts.astype(np.int64, copy=False)
    query_length = table.shape[0]
    if lengths is None or query_length < MIN_SPAN_QUERY:
        first = np.zeros(sequence.size, dtype=np.int64)
        last = np.full(sequence.size, query_length, dtype=np.int64)
        _kernel()(table, layout, starts, sequence, diagonal, first, last, out)
        return out
    first = np.clip(-diagonal, 0, query_length)
    last = np.clip(np.asarray(lengths, dtype=np.int64)[sequence] - diagonal, first, query_length)
    top = SPAN_CLASSES - 1
    key = (np.minimum(first * SPAN_CLASSES // query_length, top) * SPAN_CLASSES
           + np.minimum((query_length - last) * SPAN_CLASSES // query_length, top))
    order = np.argsort(key.astype(np.int16), kind="stable")
    scored = np.zeros(sequence.size, dtype=np.float32)
    _kernel()(table, layout, starts, sequence[order], diagonal[order], first[order], last[order], scored)
    out[order] = scored
    return out


def padded_layout_compiled(residues: np.ndarray, offsets: np.ndarray, pad: int, pad_code: int) -> tuple:
    """:func:`workflow_lib.search.gapless.padded_residues`' layout and starts, one copy per sequence (no
    residue-sized index arrays)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    n = offsets.size - 1
    layout = np.full(int(offsets[-1]) + pad * (n + 1), pad_code, dtype=np.uint8)
    starts = np.empty(n, dtype=np.int64)
    _kernels()[4](np.asarray(residues, dtype=np.uint8), offsets, int(pad), layout, starts)
    return layout, starts


def seed_blocks(offsets: np.ndarray, pad: int, block_bins: int = SEED_BLOCK_BINS) -> tuple:
    """The block layout :func:`seed_best_diagonals_compiled` counts seeds in, for a shard's sequence
    ``offsets`` and a query's bin ``pad`` (see :func:`workflow_lib.search.diagonals.count_seeds`)."""
    lengths = np.diff(np.asarray(offsets, dtype=np.int64))
    return _kernels()[2](lengths, int(pad), int(block_bins)) + (int(block_bins),)


def seed_best_diagonals_compiled(window: np.ndarray, code: np.ndarray, bits: np.ndarray,
                                 index: dict[str, np.ndarray], blocks: tuple, pad: int, min_hits: int,
                                 per_target: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Each sequence's ``per_target`` best diagonals with at least ``min_hits`` seeds: (sequence, diagonal, seed
    count, summed seed bits as float32, number of sequences with such a diagonal), sorted by (sequence,
    diagonal). The seeds are the index entries of the (query window, k-mer code, score) triples ``window``,
    ``code``, ``bits`` (window ascending, as :func:`~workflow_lib.search.seeds.kmer_neighbourhood` returns
    them); ``blocks`` from :func:`seed_blocks` with the query's ``pad`` (> number of query windows)."""
    block, local, span, first, coarse, widest, most, block_bins = blocks
    return _kernels()[3](np.asarray(window, dtype=np.int64), np.asarray(code, dtype=np.int64),
                         np.asarray(bits, dtype=np.float64), index["offsets"], index["sequence"], index["position"],
                         block, local, span, first, coarse, widest, most, block_bins, int(pad), int(min_hits),
                         int(per_target))
