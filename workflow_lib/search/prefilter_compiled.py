"""Compiled (numba) twins of two steps of the prefilter's gapless stage (seed "Iterative MSA Alignment"):
choosing each target's best seeded diagonals (:func:`workflow_lib.search.prefilter.best_diagonals`) and the
best gapless segment on each of them (:func:`workflow_lib.search.prefilter.diagonal_scores`).

Not compiled: counting the seeds per (sequence, diagonal) (:func:`~workflow_lib.search.prefilter.count_seeds`).
A compiled scatter into the dense bins ran no faster than NumPy's ``bincount`` (both wait on memory: 20 MB of
bins per Pfam query, random access; benchmarks/RESULTS.md, session 38).

Best diagonals per target: one pass keeps each target's ``per_target`` highest-ranked diagonals in a small
sorted list (ties to the earlier index), the selection :func:`~workflow_lib.search.prefilter.best_diagonals`
makes with segment maxima.

Diagonal scores: Kadane's recurrence ``run = max(run, 0) + s``, ``best = max(best, run)`` over the query columns, for
:data:`DIAGONAL_LANES` diagonals at once (the innermost loop runs over them; each reads its residue codes from
the padded layout at its own position, so no transposed copy of the codes is made). The float32 operations are
the NumPy kernel's, in the same order, so the scores are identical. Used when
:func:`workflow_lib.aligner.compiled.available`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from workflow_lib.aligner.compiled import _numba

DIAGONAL_LANES = 32
"""Diagonals advanced together, one query column at a time (their running values stay in registers)."""


@lru_cache(maxsize=None)
def _kernel():
    return _kernels()[0]


@lru_cache(maxsize=None)
def _kernels():
    numba = _numba()
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
    def diagonal_kernel(table, layout, starts, sequence, diagonal, out):
        n = sequence.size
        n_columns = table.shape[0]
        zero = np.float32(0.0)
        position = np.empty(DIAGONAL_LANES, np.int64)
        run = np.empty(DIAGONAL_LANES, np.float32)
        best = np.empty(DIAGONAL_LANES, np.float32)
        for lo in range(0, n, DIAGONAL_LANES):
            lanes = min(DIAGONAL_LANES, n - lo)
            for k in range(lanes):
                position[k] = starts[sequence[lo + k]] + diagonal[lo + k]
                run[k] = zero
                best[k] = zero
            for c in range(n_columns):
                row = table[c]
                for k in range(lanes):
                    value = run[k]
                    value = value if value > zero else zero
                    value = value + row[layout[position[k] + c]]
                    run[k] = value
                    best[k] = value if value > best[k] else best[k]
            for k in range(lanes):
                out[lo + k] = best[k]

    return diagonal_kernel, best_kernel


def best_in_sorted_compiled(sequence: np.ndarray, rank_by: np.ndarray, per_target: int) -> np.ndarray:
    """:func:`workflow_lib.search.prefilter.best_diagonals` for a sorted ``sequence``: indices (ascending) of
    each target's ``per_target`` highest-ranked diagonals, ties to the earlier index."""
    return _kernels()[1](np.asarray(sequence, dtype=np.int64), np.asarray(rank_by, dtype=np.float32),
                         int(per_target))


def diagonal_scores_compiled(table: np.ndarray, layout: np.ndarray, starts: np.ndarray, sequence: np.ndarray,
                             diagonal: np.ndarray) -> np.ndarray:
    """Best gapless segment score (float32 ``[C]``) per (sequence, diagonal); ``table`` float32 ``[Lq, codes]``
    (padding codes score 0), ``layout``/``starts`` as :func:`workflow_lib.search.prefilter._padded_residues`."""
    out = np.zeros(sequence.size, dtype=np.float32)
    if sequence.size:
        _kernel()(np.ascontiguousarray(table, dtype=np.float32), layout, starts.astype(np.int64, copy=False),
                  sequence.astype(np.int64, copy=False), diagonal.astype(np.int64, copy=False), out)
    return out
