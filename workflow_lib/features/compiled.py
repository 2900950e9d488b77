"""Compiled (numba) twins of the feature stage's per-pair loops over the MSA: the 80%-identity neighbour counts
of the sequence weights (:func:`workflow_lib.features.msa_features.sequence_weights`; Morcos et al. 2011, PNAS
108:E1293), the covariance norm and mutual information of every column pair
(:func:`workflow_lib.features.coevolution.raw_coevolution`; Jones et al. 2012, Bioinformatics 28:184), and the two
products with the centred one-hot matrix ``U`` of the direct couplings
(:func:`workflow_lib.features.couplings.coupling_blocks`).

The NumPy functions turn the states into one-hot matrices and multiply them, which spends 21 (or 21², or 20)
multiply-adds per residue where one addition or comparison does. Here:

- neighbour counts compare two rows' state bytes directly (one branch-free, vectorised count per row pair);
  the counts are integers, so the weights are identical to the NumPy function's;
- the pair frequencies of column i against every column j > i are accumulated row by row into one
  ``[21, L, 21]`` table (``N·(L − i)`` additions for column i instead of ``N·(L − i)·21²``), and the two scores
  of each pair are read off that table in one pass over its 21² cells;
- ``U Uᵀ`` needs, per row pair, the number of columns with the same amino acid (:func:`shared_residues_compiled`,
  an integer count as above), and ``Qᵀ U`` per column and state the sum of the coefficients of the rows in that
  state (:func:`row_sums_by_state_compiled`).

The last three are the same sums in another order, so they agree with the NumPy path to float64 rounding
(tests/test_features_compiled.py bounds the difference).

numba is imported lazily (:mod:`workflow_lib.aligner.device`); without it, or with ``TRACKFOLD_KERNELS=numpy`` in
the environment, the NumPy functions run. The first call in a process compiles the kernels or loads them from
numba's on-disk cache.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from workflow_lib.aligner.device import compiled_available, numba_module
from workflow_lib.features.states import GAP_STATE
from workflow_lib.schemas.features import PROFILE_STATES


def use_compiled() -> bool:
    """Whether the compiled kernels run (numba importable and ``TRACKFOLD_KERNELS`` not ``numpy``)."""
    return compiled_available()


@lru_cache(maxsize=None)
def _kernels():
    numba = numba_module()
    jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")

    @jit
    def neighbour_counts(states, threshold):
        depth, length = states.shape
        counts = np.zeros(depth, np.int64)
        self_close = np.int64(length >= threshold)
        for n in range(depth):
            counts[n] += self_close
            row_n = states[n]
            for m in range(n + 1, depth):
                row_m = states[m]
                same = np.int32(0)
                for j in range(length):
                    same += np.int32(row_n[j] == row_m[j])
                if same >= threshold:
                    counts[n] += 1
                    counts[m] += 1
        return counts

    @jit
    def pair_scores(states, weights, f_single, log_single, pseudocount, n_states, n_amino):
        depth, length = states.shape
        cov_norm = np.zeros((length, length))
        mutual_info = np.zeros((length, length))
        table = np.zeros((n_states, length, n_states))   # [a, j, b]: Σ_n w_n [s_ni = a][s_nj = b], j > i
        present = np.zeros(n_states, np.bool_)
        scale = 1.0 - pseudocount
        floor = pseudocount / (n_states * n_states)
        for i in range(length):
            for a in range(n_states):
                if present[a]:
                    table[a] = 0.0
                    present[a] = False
            for n in range(depth):
                a = states[n, i]
                present[a] = True
                weight = weights[n]
                row = states[n]
                block = table[a]
                for j in range(i + 1, length):
                    block[j, row[j]] += weight
            for j in range(i + 1, length):
                squares = 0.0
                information = 0.0
                for a in range(n_states):
                    if floor == 0.0 and not present[a]:
                        continue   # no row has state a in column i: every term of row a is 0
                    f_a = f_single[i, a]
                    log_a = log_single[i, a]
                    for b in range(n_states):
                        f_ab = scale * table[a, j, b] + floor
                        if a < n_amino and b < n_amino:
                            deviation = f_ab - f_a * f_single[j, b]
                            squares += deviation * deviation
                        if f_ab > 0:
                            information += f_ab * (np.log(f_ab) - log_a - log_single[j, b])
                cov_norm[i, j] = np.sqrt(squares)
                mutual_info[i, j] = information
        for i in range(length):
            for j in range(i + 1, length):
                cov_norm[j, i] = cov_norm[i, j]
                mutual_info[j, i] = mutual_info[i, j]
        return cov_norm, mutual_info

    @jit
    def shared_residues(states, n_amino):
        depth, length = states.shape
        counts = np.empty((depth, depth), np.int32)
        for n in range(depth):
            row_n = states[n]
            for m in range(n, depth):
                row_m = states[m]
                same = np.int32(0)
                for j in range(length):
                    same += np.int32((row_n[j] == row_m[j]) & (row_n[j] < n_amino))
                counts[n, m] = same
                counts[m, n] = same
        return counts

    @jit
    def scatter_rows(states_by_column, coefficients, n_amino, chunk):
        length, depth = states_by_column.shape
        rank = coefficients.shape[1]
        sums = np.zeros((length, n_amino, rank))
        table = np.zeros((n_amino + 1, chunk))   # one row per state; the gap row is discarded
        for r0 in range(0, rank, chunk):
            width = min(rank, r0 + chunk) - r0
            part = np.ascontiguousarray(coefficients[:, r0:r0 + width])
            for i in range(length):
                column = states_by_column[i]
                table[:] = 0.0
                for n in range(depth):
                    target = table[column[n]]
                    source = part[n]
                    for r in range(width):
                        target[r] += source[r]
                for a in range(n_amino):
                    for r in range(width):
                        sums[i, a, r0 + r] = table[a, r]
        return sums

    return neighbour_counts, pair_scores, shared_residues, scatter_rows


def neighbour_counts_compiled(states: np.ndarray, threshold: int) -> np.ndarray:
    """int64 ``[N]``: rows (itself included) sharing at least ``threshold`` column states with each row.

    ``states``: uint8 ``[N, L]`` (:func:`~workflow_lib.features.states.to_states`)."""
    neighbour_counts = _kernels()[0]
    return neighbour_counts(np.ascontiguousarray(states, dtype=np.uint8), np.int64(threshold))


def raw_coevolution_compiled(states: np.ndarray, weights: np.ndarray, f_single: np.ndarray,
                             log_single: np.ndarray, pseudocount: float) -> tuple[np.ndarray, np.ndarray]:
    """Covariance norm and MI, float64 ``[L, L]`` each (symmetric, zero diagonal), of
    :func:`~workflow_lib.features.coevolution.raw_coevolution`.

    ``states`` uint8 ``[N, L]``, ``weights`` float64 ``[N]`` summing to 1, ``f_single`` / ``log_single`` float64
    ``[L, 21]`` (the single frequencies with the pseudocount and their logarithms, −inf where 0)."""
    pair_scores = _kernels()[1]
    return pair_scores(np.ascontiguousarray(states, dtype=np.uint8), np.ascontiguousarray(weights, np.float64),
                       np.ascontiguousarray(f_single, np.float64), np.ascontiguousarray(log_single, np.float64),
                       float(pseudocount), PROFILE_STATES, GAP_STATE)


def shared_residues_compiled(states: np.ndarray) -> np.ndarray:
    """int32 ``[N, N]``: columns in which two rows have the same amino acid (states below the gap state)."""
    return _kernels()[2](np.ascontiguousarray(states, dtype=np.uint8), GAP_STATE)


def row_sums_by_state_compiled(states: np.ndarray, coefficients: np.ndarray, *, chunk: int = 64) -> np.ndarray:
    """float64 ``[L, 20, R]``: ``Σ_n [s_ni = a] · coefficients[n, r]`` for the amino-acid states ``a``.

    ``states`` uint8 ``[N, L]`` (0..20), ``coefficients`` float64 ``[N, R]``; rows are added in order, ``chunk``
    values of ``r`` at a time (a contiguous copy of those columns of ``coefficients`` stays in cache)."""
    return _kernels()[3](np.ascontiguousarray(np.asarray(states, dtype=np.uint8).T),
                         np.ascontiguousarray(coefficients, dtype=np.float64), GAP_STATE, int(chunk))
