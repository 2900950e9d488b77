"""The compiled (numba) profile–profile Viterbi loop nest (the HMM–HMM Viterbi, log-sum-of-odds and column score
of HHsearch, Söding 2005, Bioinformatics 21:951; several profiles at once as in HH-suite3, Steinegger et al. 2019,
BMC Bioinformatics 20:473), shared by the score-only search (:func:`workflow_lib.aligner.hmm_compiled.hmm_scores`)
and the traceback of the templates a search reports (:func:`hmm_traced`).

The column scores ``log2 Σ_a q_i(a) t_j(a) / f(a)`` + shift of a batch of templates come from one matrix product
(the query's rows against all their columns stacked), and the recurrences of :mod:`workflow_lib.aligner.viterbi_hmm`
(pair states MM, GD, IM, DG, MI; the same transitions, local start at 0) run as one loop nest per template, each
in-row chain as its plain recurrence, in integers: the scores of the NumPy kernel exactly. :func:`hmm_traced` runs
the same loop nest writing every cell's backtrace byte and keeping the best cell (the first maximum in row-major
order): the scores, best cells and bytes of :func:`workflow_lib.aligner.viterbi_hmm.viterbi_profile_lanes` (same
tie-breaking: the pointer keeps the earlier of equal predecessors in the order MM, GD, IM, DG, MI; a self bit is
set where extending beats opening strictly; tested byte for byte).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from workflow_lib.aligner.backtrace import HMM_SELF_BITS
from workflow_lib.aligner.device import compiled_available, numba_module
from workflow_lib.aligner.scores import HHSUITE_SHIFT, MIN_SCORE, NEG_INF, SCALE, PairScores, log2_safe, quantize
from workflow_lib.aligner.transitions import DD, DM, II, IM, MD, MI, MM

MAX_STACKED_CELLS = 1 << 20
"""Column scores computed per batch of candidates: the float64 products of a batch (8 MiB) stay in the cache
through the in-place passes of :func:`_column_scores` (larger batches ran those passes from memory, slower)."""
DISTINCT_FRACTION = 0.25
"""A batch's column scores come from its distinct template columns when they are at most this fraction of its
columns (:func:`distinct_columns`); otherwise from every column, which skips the lookup's indirection."""
_ROW_HASH = (np.random.default_rng(20261207).integers(1, 1 << 62, size=64, dtype=np.uint64) | np.uint64(1))
"""Odd 64-bit multipliers, one per column of a row, for :func:`distinct_columns`'s exact row hash."""


def _make_kernel(numba, traced: bool):
    """The profile–profile loop nest, compiled for one value of ``traced`` (a closure constant: the other
    branch is gone). Without ``traced`` it keeps each template's best score; with it also the first best cell in
    row-major order and every cell's backtrace byte (:mod:`workflow_lib.aligner.backtrace`'s layout). The GD
    and IM chains of the first column have no in-row predecessor (the NumPy kernel's prefix scans start there):
    their value is the fresh one and their bit 0."""
    gd_bit, im_bit, dg_bit, mi_bit = (np.uint8(1 << bit) for bit in HMM_SELF_BITS[1:])

    @numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
    def viterbi_hmm(S, codes, starts, lengths, qtr, ttr, tstarts, bt, best, best_i, best_j):  # pragma: no cover
        n_query = S.shape[0]
        neg = np.int64(NEG_INF)
        pointer = np.uint8(0)
        for k in range(starts.size):
            lt = lengths[k]
            c0 = starts[k]
            t0 = tstarts[k]
            mm_prev = np.full(lt + 1, neg, np.int64)
            gd_prev = np.full(lt + 1, neg, np.int64)
            im_prev = np.full(lt + 1, neg, np.int64)
            dg_prev = np.full(lt + 1, neg, np.int64)
            mi_prev = np.full(lt + 1, neg, np.int64)
            mm_cur = np.full(lt + 1, neg, np.int64)
            gd_cur = np.full(lt + 1, neg, np.int64)
            im_cur = np.full(lt + 1, neg, np.int64)
            dg_cur = np.full(lt + 1, neg, np.int64)
            mi_cur = np.full(lt + 1, neg, np.int64)
            top = np.int64(np.iinfo(np.int64).min)
            top_i = 0
            top_j = 0
            for i in range(1, n_query + 1):
                qp_mm = qtr[i - 1, MM]
                qp_im = qtr[i - 1, IM]
                qp_dm = qtr[i - 1, DM]
                qp_md = qtr[i - 1, MD]
                qp_dd = qtr[i - 1, DD]
                qc_mi = qtr[i, MI]
                qc_ii = qtr[i, II]
                for j in range(1, lt + 1):
                    tp = t0 + j - 1
                    tc = t0 + j
                    # MM: the earlier of equal predecessors in the order MM, GD, IM, DG, MI (pointer 1-5), 0 = start
                    value = mm_prev[j - 1] + qp_mm + ttr[tp, MM]
                    if traced:
                        pointer = np.uint8(1)
                    candidate = gd_prev[j - 1] + qp_mm + ttr[tp, DM]
                    if candidate > value:
                        value = candidate
                        if traced:
                            pointer = np.uint8(2)
                    candidate = im_prev[j - 1] + qp_im + ttr[tp, MM]
                    if candidate > value:
                        value = candidate
                        if traced:
                            pointer = np.uint8(3)
                    candidate = dg_prev[j - 1] + qp_dm + ttr[tp, MM]
                    if candidate > value:
                        value = candidate
                        if traced:
                            pointer = np.uint8(4)
                    candidate = mi_prev[j - 1] + qp_mm + ttr[tp, IM]
                    if candidate > value:
                        value = candidate
                        if traced:
                            pointer = np.uint8(5)
                    if value <= 0:
                        value = 0
                        if traced:
                            pointer = np.uint8(0)
                    mm = value + S[i - 1, codes[c0 + j - 1]]
                    mm_cur[j] = mm
                    if mm > top:
                        top = mm
                        if traced:
                            top_i = i
                            top_j = j
                    # DG, MI from the previous row; GD, IM along the row (a self bit where extending wins strictly)
                    fresh = mm_prev[j] + qp_md
                    extend = dg_prev[j] + qp_dd
                    dg_cur[j] = extend if extend > fresh else fresh
                    if traced and extend > fresh:
                        pointer |= dg_bit
                    fresh = mm_prev[j] + qp_mm + ttr[tc, MI]
                    extend = mi_prev[j] + qp_mm + ttr[tc, II]
                    mi_cur[j] = extend if extend > fresh else fresh
                    if traced and extend > fresh:
                        pointer |= mi_bit
                    fresh = mm_cur[j - 1] + ttr[tp, MD]
                    extend = gd_cur[j - 1] + ttr[tp, DD]
                    from_self = j > 1 and extend > fresh
                    gd_cur[j] = extend if from_self else fresh
                    if traced and from_self:
                        pointer |= gd_bit
                    fresh = mm_cur[j - 1] + qc_mi + ttr[tp, MM]
                    extend = im_cur[j - 1] + qc_ii + ttr[tp, MM]
                    from_self = j > 1 and extend > fresh
                    im_cur[j] = extend if from_self else fresh
                    if traced:
                        if from_self:
                            pointer |= im_bit
                        bt[i - 1, j - 1, k] = pointer
                mm_prev, mm_cur = mm_cur, mm_prev
                gd_prev, gd_cur = gd_cur, gd_prev
                im_prev, im_cur = im_cur, im_prev
                dg_prev, dg_cur = dg_cur, dg_prev
                mi_prev, mi_cur = mi_cur, mi_prev
            best[k] = top
            if traced:
                best_i[k] = top_i
                best_j[k] = top_j

    return viterbi_hmm


@lru_cache(maxsize=None)
def kernel(traced: bool = False):
    """The compiled loop nest (:func:`_make_kernel`) for ``traced``."""
    return _make_kernel(numba_module(), traced)


def _column_scores(products: np.ndarray, shift: float) -> np.ndarray:
    """``quantize(log2_safe(products) + shift)`` (:func:`~workflow_lib.aligner.scores.column_scores`), in place
    where every product is positive (profiles with pseudocounts): the same numbers in a third of the time."""
    if not np.all(products > 0):
        return quantize(log2_safe(products) + shift)
    np.log2(products, out=products)
    products += shift
    products *= SCALE
    np.rint(products, out=products)
    np.maximum(products, MIN_SCORE, out=products)
    return products.astype(np.int32)


def distinct_columns(stacked: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(rows, codes)`` with ``rows[codes]`` equal to ``stacked`` (float64 ``[n, 20]``) value for value, when its
    distinct rows are at most :data:`DISTINCT_FRACTION` of them; else None.

    Template profiles made from one sequence (a template database without template MSAs) have one emission row
    per residue type, so a batch's thousands of columns hold about 20 distinct rows: their column scores are then
    a lookup instead of a matrix product and a logarithm per cell. Rows are grouped by an exact integer hash of
    their bits and the grouping is checked, so equal scores come only from equal rows. The distinct rows'
    products come from a smaller matrix product, whose last bit may differ from the full product's; at a
    rounding tie that moves a quantized score by 1 milli-bit, as a different batch width already could."""
    if stacked.shape[0] == 0:
        return None
    bits = np.ascontiguousarray(stacked).view(np.uint64)
    keys = (bits * _ROW_HASH[:bits.shape[1]]).sum(axis=1, dtype=np.uint64)
    _, first, codes = np.unique(keys, return_index=True, return_inverse=True)
    if first.size > DISTINCT_FRACTION * stacked.shape[0]:
        return None
    rows = stacked[first]
    codes = codes.reshape(-1).astype(np.int64)
    if not np.array_equal(rows[codes], stacked):
        return None
    return rows, codes


def stacked_inputs(query_scores: PairScores, batch: list[PairScores], shift: float):
    """The kernels' inputs for one batch of templates: column scores ``S`` int32 ``[Lq, C]`` and each stacked
    template column's index ``codes`` into them (the column's score for query row i is ``S[i, codes[c]]``), each
    template's first column in ``codes`` and its length, its first row in the stacked transitions ``ttr`` (L + 1
    rows each). ``S`` holds the scores of the batch's distinct columns (:func:`distinct_columns`) or of every
    column (``codes`` then counts them)."""
    lengths = np.array([t.length for t in batch], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    tstarts = starts + np.arange(len(batch), dtype=np.int64)   # transitions have L + 1 rows
    stacked = np.concatenate([t.scaled for t in batch])
    distinct = distinct_columns(stacked)
    if distinct is None:
        columns, codes = stacked, np.arange(stacked.shape[0], dtype=np.int64)
    else:
        columns, codes = distinct
    S = _column_scores(query_scores.scaled @ columns.T, shift)
    ttr = np.concatenate([t.transitions for t in batch]).astype(np.int64)
    return S, codes, starts, lengths, ttr, tstarts


def hmm_traced(query: PairScores, templates: list[PairScores], *, shift: float = HHSUITE_SHIFT
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~workflow_lib.aligner.viterbi_hmm.viterbi_profile_lanes`, compiled: best MM score int64 ``[W]``
    (milli-bits), its 1-based cell (``best_i``, ``best_j``) and the backtrace uint8 ``[Lq, max Lt, W]`` (bytes
    past a template's end are 0 and never read). ``query`` and ``templates`` as :func:`align_profiles` makes
    them. Raises ``RuntimeError`` when numba is not importable."""
    if not compiled_available():
        raise RuntimeError("the compiled kernels need numba (pip install numba)")
    width = len(templates)
    widest = max(t.length for t in templates)
    S, codes, starts, lengths, ttr, tstarts = stacked_inputs(query, templates, shift)
    bt = np.zeros((query.length, widest, width), dtype=np.uint8)
    best = np.empty(width, np.int64)
    best_i = np.empty(width, np.int64)
    best_j = np.empty(width, np.int64)
    kernel(True)(S, codes, starts, lengths, query.transitions.astype(np.int64), ttr, tstarts, bt, best, best_i, best_j)
    return best, best_i, best_j, bt
