"""Compiled CPU lane kernels (numba): the sequence–profile Viterbi of :mod:`workflow_lib.aligner.viterbi_seq`
as one loop nest (the profile-HMM log-odds Viterbi of Söding 2005, Bioinformatics 21:951, over several
targets at once as in HH-suite3, Steinegger et al. 2019, BMC Bioinformatics 20:473).

Same layout as the NumPy kernel: rows are query columns i, each row an int32 array ``[Lt + 1, W]`` over target
positions l and W lanes (targets of similar length, lanes contiguous). The innermost loop runs over the lanes,
which LLVM turns into SIMD instructions (8 int32 lanes per AVX2 instruction), as HH-suite packs targets into
one register. Compiled, a row costs no fixed overhead of NumPy calls, and the in-row I chain is the plain
recurrence ``I(l) = max(M(l−1) + t.MI, I(l−1) + t.II)`` instead of doubling scans, so every I value is exact
(the NumPy kernel leaves I below its true value in cells no optimal path reads: scores and alignments are the
same, a few backtrace bits of such cells may differ).

Recurrences, tie-breaking and the best cell (first maximum in row-major order) are those of
:func:`workflow_lib.aligner.reference.viterbi_sequence_reference`; the backtrace byte is
:mod:`workflow_lib.aligner.backtrace`'s. int32 is exact at any target length here: no shifted values are
stored; M ≥ ``PAD_SCORE``, I and D ≥ ``NEG_INF`` less two transitions, and M ≤ Lq times the largest emission.

numba is imported lazily (:mod:`workflow_lib.aligner.device`); without it (or with ``TRACKFOLD_KERNELS=numpy`` in
the environment) the NumPy kernels run, with the same results. The first call in a process compiles a kernel
(about a second each) or loads it from numba's on-disk cache (``__pycache__``, or ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from functools import lru_cache

import numpy as np

from workflow_lib.aligner.device import numba_module
from workflow_lib.aligner.scores import NEG_INF, PAD_CODE, SequenceScores
from workflow_lib.aligner.transitions import DD, DM, II, IM, MD, MI, MM

LANE_MULTIPLE = 8
"""Lanes per bucket are padded up to a multiple of this (8 int32 lanes fill one AVX2 vector)."""


def _make_kernel(numba, backtrace: bool):
    """The kernel, compiled for one value of ``backtrace`` (a closure constant: the other branch is gone).

    Per row i one pass over l computes M, I and D (D(i, l) from row i − 1, kept in a second buffer, so the D
    values of row i − 1 are still there for the M of the next position); the innermost loop runs over the lanes
    with selects only, which LLVM vectorises. The sums are written ``np.int32(a + b)`` (numba adds int32 values in
    int64; the casts keep the loop in int32 lanes, 8 per AVX2 vector; no sum overflows, see the module
    docstring). What kept it from vectorising (several times slower: benchmarks/RESULTS.md, "Homology search:
    compiled CPU kernels"): DP buffers passed in as arguments or a row split into functions (LLVM cannot rule
    out overlaps), the in-row left neighbours read from the row being written (hence the ``m_left``/``i_left``
    lane buffers), and the best cell tracked inside the lane loop (hence a lane maximum per row, and the column
    of a better row maximum looked up after the row: a lane improves in few rows). The kernel is compiled with
    a vector width of 8 (:func:`_vector_width`)."""

    @numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
    def kernel(emission, transitions, residues, bt, best, best_i, best_l):
        n_query = emission.shape[0]
        n_target, width = residues.shape
        ninf = np.int32(NEG_INF)
        zero = np.int32(0)
        one, two, three = np.int32(1), np.int32(2), np.int32(3)
        four, eight = np.int32(4), np.int32(8)
        m_prev = np.full((n_target + 1, width), ninf, np.int32)
        m_cur = np.full((n_target + 1, width), ninf, np.int32)
        i_prev = np.full((n_target + 1, width), ninf, np.int32)
        i_cur = np.full((n_target + 1, width), ninf, np.int32)
        d_prev = np.full((n_target + 1, width), ninf, np.int32)
        d_cur = np.full((n_target + 1, width), ninf, np.int32)
        gathered = np.empty(width, np.int32)
        # M(i, l − 1) and I(i, l − 1) in buffers of their own: read from the rows, LLVM could not rule out an
        # overlap with the row being written and did not vectorise (the same for the Smith–Waterman kernels)
        m_left = np.empty(width, np.int32)
        i_left = np.empty(width, np.int32)
        lane_best = np.full(width, np.int32(-2 ** 31), np.int32)
        row_max = np.empty(width, np.int32)
        row_of = np.zeros(width, np.int64)
        column_of = np.zeros(width, np.int64)
        for i in range(1, n_query + 1):
            t_mm = np.int32(transitions[i - 1, MM])
            t_im = np.int32(transitions[i - 1, IM])
            t_dm = np.int32(transitions[i - 1, DM])
            t_md = np.int32(transitions[i - 1, MD])
            t_dd = np.int32(transitions[i - 1, DD])
            t_mi = np.int32(transitions[i, MI])
            t_ii = np.int32(transitions[i, II])
            row = emission[i - 1]
            m_left[:] = ninf
            i_left[:] = ninf
            row_max[:] = ninf
            for l in range(1, n_target + 1):
                codes = residues[l - 1]
                for w in range(width):
                    gathered[w] = row[codes[w]]
                if backtrace:
                    bytes_out = bt[i - 1, l - 1]
                m_diag = m_prev[l - 1]
                i_diag = i_prev[l - 1]
                d_diag = d_prev[l - 1]
                m_up = m_prev[l]
                d_up = d_prev[l]
                m_out = m_cur[l]
                i_out = i_cur[l]
                d_out = d_cur[l]
                for w in range(width):
                    from_m = np.int32(m_diag[w] + t_mm)
                    from_i = np.int32(i_diag[w] + t_im)
                    value = from_i if from_i > from_m else from_m
                    from_d = np.int32(d_diag[w] + t_dm)
                    start = from_d if from_d > value else value
                    if start < zero:
                        start = zero
                    m = np.int32(gathered[w] + start)
                    m_out[w] = m
                    fresh = np.int32(m_left[w] + t_mi)
                    extend = np.int32(i_left[w] + t_ii)
                    i_value = extend if extend > fresh else fresh
                    i_out[w] = i_value
                    m_left[w] = m
                    i_left[w] = i_value
                    row_max[w] = m if m > row_max[w] else row_max[w]
                    # D(i, l) = max(M(i − 1, l) + t.MD, D(i − 1, l) + t.DD)
                    d_fresh = np.int32(m_up[w] + t_md)
                    d_extend = np.int32(d_up[w] + t_dd)
                    d_out[w] = d_extend if d_extend > d_fresh else d_fresh
                    if backtrace:
                        pointer = three if from_d > value else (two if from_i > from_m else one)
                        pointer = pointer if start > zero else zero
                        pointer = pointer | (four if extend > fresh else zero)
                        bytes_out[w] = np.uint8(pointer | (eight if d_extend > d_fresh else zero))
            # a lane's best so far, and its first cell in row-major order: the first column of a better row max
            # (looked up here: tracking the cell inside the lane loop kept LLVM from vectorising it below 64 lanes)
            for w in range(width):
                if row_max[w] > lane_best[w]:
                    lane_best[w] = row_max[w]
                    row_of[w] = i
                    if backtrace:
                        for l in range(1, n_target + 1):
                            if m_cur[l, w] == row_max[w]:
                                column_of[w] = l
                                break
            m_prev, m_cur = m_cur, m_prev
            i_prev, i_cur = i_cur, i_prev
            d_prev, d_cur = d_cur, d_prev
        for w in range(width):
            best[w] = lane_best[w]
            best_i[w] = row_of[w] if backtrace else 0
            best_l[w] = column_of[w]

    return kernel


VECTOR_WIDTH = 8
"""Lanes per vector LLVM compiles the lane loops with (:func:`_vector_width`): 8 int32 or float32 lanes, one AVX2
register. Left to choose, LLVM gave the Viterbi lane loop 32 lanes per step (it holds a byte store) and ran
buckets of 8–24 lanes through its scalar remainder, 2.5 times slower per cell."""


@contextmanager
def _vector_width(width: int = VECTOR_WIDTH):
    """LLVM's loop vector width forced to ``width`` while a kernel is compiled (or loaded from the cache)
    in this block, and back to LLVM's own choice after it."""
    binding = importlib.import_module("llvmlite.binding")
    binding.set_option("", f"-force-vector-width={int(width)}")
    try:
        yield
    finally:
        binding.set_option("", "-force-vector-width=0")


@lru_cache(maxsize=None)
def _kernel(backtrace: bool):
    return _make_kernel(numba_module(), backtrace)


@lru_cache(maxsize=None)
def _trace_kernel():
    numba = numba_module()

    @numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
    def trace(bt, best_i, best_l):
        """Every lane's path from its best cell back to its start (the records of ``backtrace._paths``)."""
        n_query, n_target, width = bt.shape
        limit = n_query + n_target + 1
        rows = np.empty((limit, width), np.int64)
        positions = np.empty((limit, width), np.int64)
        states = np.full((limit, width), -1, np.int64)
        longest = 0
        for w in range(width):
            i = max(best_i[w], 1)
            l = max(best_l[w], 1)
            step = 0
            if best_i[w] > 0:
                state = 0
                while True:
                    rows[step, w] = i
                    positions[step, w] = l
                    states[step, w] = state
                    step += 1
                    byte = bt[i - 1, l - 1, w]
                    if state == 0:
                        pointer = byte & 3
                        if pointer == 0:
                            break
                        state = pointer - 1
                        i -= 1
                        l -= 1
                    elif state == 1:
                        state = 1 if (byte >> 2) & 1 else 0
                        l -= 1
                    else:
                        state = 2 if (byte >> 3) & 1 else 0
                        i -= 1
            longest = max(longest, step)
            for k in range(step, limit):   # a stopped lane stays on its last cell
                rows[k, w] = i
                positions[k, w] = l
        return rows[:longest], positions[:longest], states[:longest]

    return trace


def sequence_paths_compiled(bt: np.ndarray, best_i: np.ndarray,
                            best_l: np.ndarray) -> list[np.ndarray]:
    """:func:`workflow_lib.aligner.backtrace._paths` for sequence–profile bytes, compiled: int64 ``[steps, W]``
    rows, positions and states (0 M, 1 I, 2 D; −1 once a lane has stopped), each lane's path read backwards from
    its best cell; lanes with ``best_i = 0`` have none."""
    rows, positions, states = _trace_kernel()(bt, np.asarray(best_i, np.int64), np.asarray(best_l, np.int64))
    return [rows, positions, states]


def viterbi_seq_lanes_compiled(scores: SequenceScores, residues: np.ndarray, *,
                               backtrace: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`~workflow_lib.aligner.viterbi_seq.viterbi_seq_lanes`, compiled: the same ``best`` (int64 ``[W]``,
    milli-bits), ``best_i``/``best_l`` (zeros without ``backtrace``) and backtrace uint8 ``[Lq, Lt, W]`` (or
    None). ``residues``: intp ``[Lt, W]`` as :func:`~workflow_lib.aligner.viterbi_seq.pack_targets` packs them.
    Raises ``RuntimeError`` when numba is not importable."""
    if numba_module() is None:
        raise RuntimeError("the compiled kernels need numba (pip install numba)")
    residues = np.asarray(residues)
    if residues.ndim != 2 or residues.dtype != np.intp:
        raise ValueError("residues must be an intp matrix [Lt, W]")
    emission = np.ascontiguousarray(scores.emission, dtype=np.int32)
    transitions = np.ascontiguousarray(scores.transitions, dtype=np.int32)
    n_target, width = residues.shape
    # whole SIMD vectors: a lane count short of a multiple of LANE_MULTIPLE runs a scalar remainder loop per cell
    # column, which costs more than the padding lanes (all PAD_CODE: they score PAD_SCORE and are dropped)
    padded = -(-width // LANE_MULTIPLE) * LANE_MULTIPLE
    if padded != width:
        residues = np.concatenate([residues, np.full((n_target, padded - width), PAD_CODE, dtype=np.intp)], axis=1)
    n_query = emission.shape[0]
    best = np.empty(padded, np.int64)
    best_i = np.empty(padded, np.int64)
    best_l = np.empty(padded, np.int64)
    bt = np.empty((n_query, n_target, padded) if backtrace else (1, 1, 1), dtype=np.uint8)
    with _vector_width():   # uint8 codes: a lane row of them stays in the L1 cache (intp rows did not)
        _kernel(bool(backtrace))(emission, transitions, np.ascontiguousarray(residues, np.uint8), bt, best, best_i,
                                 best_l)
    if not backtrace:
        return best[:width], np.zeros(width, np.int64), np.zeros(width, np.int64), None
    return best[:width], best_i[:width], best_l[:width], bt if padded == width else bt[:, :, :width]
