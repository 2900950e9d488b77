"""Score-only profile–profile Viterbi, compiled (numba), for searching many profiles (the HMM–HMM
Viterbi, log-sum-of-odds and column score of HHsearch, Söding 2005, Bioinformatics 21:951; several profiles at
once as in HH-suite3, Steinegger et al. 2019, BMC Bioinformatics 20:473).

A profile database search scores a query against hundreds of candidate and decoy profiles and traces the path
of only the few it reports. :func:`hmm_scores` gives the best local Viterbi score (milli-bits, the ``raw_score``
of :func:`workflow_lib.aligner.align_profiles`, without the correlation score) of one query against many
profiles: the column scores ``log2 Σ_a q_i(a) t_j(a) / f(a)`` + shift of all candidates come from one matrix
product (the query's rows against all candidates' columns stacked), and the recurrences of
:mod:`workflow_lib.aligner.viterbi_hmm` (pair states MM, GD, IM, DG, MI; the same transitions, local start at
0) run as one loop nest per candidate, each in-row chain as its plain recurrence. The scores equal the NumPy
kernel's exactly (integer arithmetic; tested); only the traceback is left out.

Without numba (or with ``TRACKFOLD_KERNELS=numpy``) the NumPy kernel computes the same scores.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from workflow_lib.aligner.device import compiled_available, numba_module
from workflow_lib.aligner.profile import Profile
from workflow_lib.aligner.scores import (HHSUITE_SHIFT, MIN_SCORE, NEG_INF, SCALE, PairScores, log2_safe,
                                         pair_scores, quantize)
from workflow_lib.aligner.transitions import DD, DM, II, IM, MD, MI, MM

MAX_STACKED_CELLS = 1 << 20
"""Column scores computed per batch of candidates: the float64 products of a batch (8 MiB) stay in the cache
through the in-place passes of :func:`_column_scores` (larger batches ran those passes from memory, slower)."""


@lru_cache(maxsize=None)
def _kernel():
    numba = numba_module()

    @numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
    def viterbi_hmm_scores(S, starts, lengths, qtr, ttr, tstarts):  # pragma: no cover - compiled
        n_query = S.shape[0]
        n_templates = starts.size
        out = np.empty(n_templates, np.int64)
        neg = np.int64(NEG_INF)
        for k in range(n_templates):
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
            best = np.int64(-(1 << 62))
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
                    value = mm_prev[j - 1] + qp_mm + ttr[tp, MM]
                    candidate = gd_prev[j - 1] + qp_mm + ttr[tp, DM]
                    if candidate > value:
                        value = candidate
                    candidate = im_prev[j - 1] + qp_im + ttr[tp, MM]
                    if candidate > value:
                        value = candidate
                    candidate = dg_prev[j - 1] + qp_dm + ttr[tp, MM]
                    if candidate > value:
                        value = candidate
                    candidate = mi_prev[j - 1] + qp_mm + ttr[tp, IM]
                    if candidate > value:
                        value = candidate
                    if value <= 0:
                        value = 0
                    mm = value + S[i - 1, c0 + j - 1]
                    mm_cur[j] = mm
                    if mm > best:
                        best = mm
                    fresh = mm_prev[j] + qp_md
                    extend = dg_prev[j] + qp_dd
                    dg_cur[j] = fresh if fresh >= extend else extend
                    fresh = mm_prev[j] + qp_mm + ttr[tc, MI]
                    extend = mi_prev[j] + qp_mm + ttr[tc, II]
                    mi_cur[j] = fresh if fresh >= extend else extend
                    fresh = mm_cur[j - 1] + ttr[tp, MD]
                    extend = gd_cur[j - 1] + ttr[tp, DD]
                    gd_cur[j] = fresh if fresh >= extend else extend
                    fresh = mm_cur[j - 1] + qc_mi + ttr[tp, MM]
                    extend = im_cur[j - 1] + qc_ii + ttr[tp, MM]
                    im_cur[j] = fresh if fresh >= extend else extend
                mm_prev, mm_cur = mm_cur, mm_prev
                gd_prev, gd_cur = gd_cur, gd_prev
                im_prev, im_cur = im_cur, im_prev
                dg_prev, dg_cur = dg_cur, dg_prev
                mi_prev, mi_cur = mi_cur, mi_prev
            out[k] = best
        return out

    return viterbi_hmm_scores


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


def _numpy_scores(query: PairScores, templates: list[PairScores], shift: float) -> np.ndarray:
    """The NumPy lane kernel's best scores, templates in the length buckets :func:`align_profiles` uses."""
    from workflow_lib.aligner.lanes import ALIGN_PROFILES_LANE_CELLS, length_buckets
    from workflow_lib.aligner.viterbi_hmm import viterbi_profile_lanes
    out = np.empty(len(templates), np.int64)
    for bucket in length_buckets([t.length for t in templates], query.length, backtrace=True,
                                 lane_cells=ALIGN_PROFILES_LANE_CELLS):
        out[bucket] = viterbi_profile_lanes(query, [templates[k] for k in bucket], shift=shift)[0]
    return out


def hmm_scores(query: Profile, templates: list[Profile | PairScores], *, shift: float = HHSUITE_SHIFT) -> np.ndarray:
    """int64 ``[len(templates)]``: the best local profile–profile Viterbi score of ``query`` against each
    template, milli-bits (no correlation score; the query's null model, as :func:`align_profiles` uses).
    A template given as :class:`PairScores` must have been made with the query's background
    (:func:`~workflow_lib.aligner.scores.pair_scores`): a search keeps them across queries."""
    if not templates:
        return np.zeros(0, np.int64)
    query_scores = pair_scores(query)
    template_scores = [t if isinstance(t, PairScores) else pair_scores(t, query.background) for t in templates]
    if not compiled_available():
        return _numpy_scores(query_scores, template_scores, shift)
    kernel = _kernel()
    qtr = query_scores.transitions.astype(np.int64)
    out = np.empty(len(templates), np.int64)
    per_batch = max(1, MAX_STACKED_CELLS // max(query_scores.length, 1))
    start = 0
    while start < len(templates):
        stop, cells = start, 0
        while stop < len(templates) and (stop == start or cells + template_scores[stop].length <= per_batch):
            cells += template_scores[stop].length
            stop += 1
        batch = template_scores[start:stop]
        lengths = np.array([t.length for t in batch], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        tstarts = starts + np.arange(len(batch), dtype=np.int64)   # transitions have L + 1 rows
        stacked = np.concatenate([t.scaled for t in batch])
        S = _column_scores(query_scores.scaled @ stacked.T, shift)
        ttr = np.concatenate([t.transitions for t in batch]).astype(np.int64)
        out[start:stop] = kernel(S, starts, lengths, qtr, ttr, tstarts)
        start = stop
    return out
