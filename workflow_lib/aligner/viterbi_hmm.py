"""Profile-vs-profile local Viterbi over lanes of templates (HHsearch's log-sum-of-odds score, column score and
HMM–HMM Viterbi, Söding 2005, Bioinformatics 21:951; its correlation score; templates in lanes as in HH-suite3,
Steinegger et al. 2019, BMC Bioinformatics 20:473).

Recurrences, tie-breaking and pair states (MM, GD, IM, DG, MI) are those of
:func:`workflow_lib.aligner.reference.viterbi_profile_reference`. Layout as in the sequence kernel: rows are query
columns i, each row an int64 array ``[Lt + 1, W]`` over template columns j and W lanes. DG and MI depend on the
previous row only; GD and IM are in-row chains with per-position steps (template D->D, resp. query I->I +
template M->M), solved as prefix max-plus scans on per-lane cumulative sums of those steps
(``X(j) = C(j) + cummax_{k≤j}(A(k) − C(k))``, exact in integers). int64 because the cumulative sums of two
profiles' transitions can exceed the int32 margin; this kernel is not the throughput-critical one.

Column scores ``log2 Σ_a q_i(a) t_j(a) / f(a)`` plus HH-suite's shift (−0.03 bits) are one matrix product per
block of query rows. After the Viterbi, the correlation score ``0.1 · Σ_{d=1..4} Σ_k s_k s_{k+d}`` over the
steps k of the best alignment (s_k the column score of an MM step without the shift, 0 otherwise) is added to
the reported score, as HH-suite does after its backtrace.

Secondary structure (HHsearch's secondary structure score, Söding 2005): not scored, on purpose. Its form is
``w · log P(σ; ρ, c) / (P(σ) P(ρ, c))`` for a known template state σ (DSSP, 7 states) against a PSIPRED
prediction ρ with confidence c, and
``w · log Σ_σ P(ρ_q, c_q | σ) P(ρ_t, c_t | σ) P(σ) / (P(ρ_q, c_q) P(ρ_t, c_t))`` for predicted against
predicted; the numbers are frequencies from PSIPRED runs on SCOP domains.
HH-suite 3 hard-codes them in its source (``hhmatrices.cpp``, GPL-3; ``hhalign -ssm 2 -ssw 0.11 -ssa 1`` by
default: scored during the alignment, weight 0.11 on the log-odds, the PSIPRED confusion matrix unmixed).
trackfold's data do not carry those statistics, PSIPRED is not available to derive them, and copying
HH-suite's GPL tables into this code base is a licensing decision, not an engineering one. So ``Profile.ss_pred`` / ``ss_conf`` (read from ``.hhm`` / A3M ``>ss_pred``, ``>ss_conf``) are
carried but not scored, and the HH-suite agreement tests run ``hhalign -ssm 0`` (the comparable setting; the
``.hhm`` files there carry no SS anyway). With a table, the score is one lookup per (i, j) added to the column
score block ``S`` below, before the Viterbi (for every MM state, as HH-suite's ``-ssm 2``).
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner.backtrace import HMM_SELF_BITS, profile_paths
from workflow_lib.aligner.device import compiled_available
from workflow_lib.aligner.hmm_kernels import hmm_traced
from workflow_lib.aligner.scores import (CORRELATION_WEIGHT, HHSUITE_SHIFT, NEG_INF, SCALE, Hit, PairScores,
                                         column_scores, hit_from_path)
from workflow_lib.aligner.transitions import DD, DM, II, IM, MD, MI, MM

QUERY_ROW_BLOCK = 64
CORRELATION_DISTANCES = (1, 2, 3, 4)


def pack_templates(templates: list[PairScores]) -> tuple[np.ndarray, np.ndarray]:
    """Scaled emissions float64 ``[Lt, W, 20]`` (zero rows = padding) and transitions int64 ``[Lt + 1, W, 7]``
    (padding 0: padded columns score :data:`~workflow_lib.aligner.scores.PAD_SCORE` and never reach back)."""
    length = max(t.length for t in templates)
    scaled = np.zeros((length, len(templates), 20), dtype=np.float64)
    transitions = np.zeros((length + 1, len(templates), 7), dtype=np.int64)
    for lane, template in enumerate(templates):
        scaled[:template.length, lane] = template.scaled
        transitions[:template.length + 1, lane] = template.transitions
    return scaled, transitions


def viterbi_profile_lanes(query: PairScores, templates: list[PairScores], *,
                          shift: float = HHSUITE_SHIFT) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Best MM score int64 ``[W]`` (milli-bits), its 1-based cell (``best_i``, ``best_j``) and the backtrace
    uint8 ``[Lq, Lt, W]`` (byte layout in :mod:`workflow_lib.aligner.backtrace`)."""
    scaled, ttr = pack_templates(templates)
    n_target, width = scaled.shape[:2]
    qtr = query.transitions.astype(np.int64)
    n_query = query.length
    shape = (n_target + 1, width)
    prev = {k: np.full(shape, NEG_INF, np.int64) for k in ("MM", "GD", "IM", "DG", "MI")}
    cur = {k: np.full(shape, NEG_INF, np.int64) for k in prev}
    t_prev = ttr[:-1]  # transitions out of template column j-1, for j = 1..Lt
    t_cur = ttr[1:]    # transitions out of template column j
    cum_dd = np.cumsum(t_prev[:, :, DD], axis=0)
    cum_mm = np.cumsum(t_prev[:, :, MM], axis=0)
    positions = np.arange(1, n_target + 1, dtype=np.int64)[:, None]
    best = np.full(width, np.iinfo(np.int64).min, np.int64)
    best_i = np.zeros(width, np.int64)
    best_j = np.zeros(width, np.int64)
    bt = np.zeros((n_query, n_target, width), dtype=np.uint8)
    pointer = np.empty((n_target, width), dtype=np.uint8)
    block = None
    for i in range(1, n_query + 1):
        if (i - 1) % QUERY_ROW_BLOCK == 0:
            rows = PairScores(query.scaled[i - 1:i - 1 + QUERY_ROW_BLOCK], query.transitions, query.emissions)
            block = column_scores(rows, scaled, shift).astype(np.int64)
        S = block[(i - 1) % QUERY_ROW_BLOCK]
        qp, qc = qtr[i - 1], qtr[i]
        value = prev["MM"][:-1] + (qp[MM] + t_prev[:, :, MM])
        pointer.fill(1)
        for code, candidate in ((2, prev["GD"][:-1] + (qp[MM] + t_prev[:, :, DM])),
                                (3, prev["IM"][:-1] + (qp[IM] + t_prev[:, :, MM])),
                                (4, prev["DG"][:-1] + (qp[DM] + t_prev[:, :, MM])),
                                (5, prev["MI"][:-1] + (qp[MM] + t_prev[:, :, IM]))):
            better = candidate > value
            pointer[better] = code
            np.maximum(value, candidate, out=value)
        stop = value <= 0
        pointer[stop] = 0
        value[stop] = 0
        mm_new = cur["MM"][1:]
        np.add(value, S, out=mm_new)
        byte = pointer.copy()
        # DG, MI: from the previous row, same j
        for name, bit, fresh, extend in (
                ("DG", HMM_SELF_BITS[3], prev["MM"][1:] + qp[MD], prev["DG"][1:] + qp[DD]),
                ("MI", HMM_SELF_BITS[4], prev["MM"][1:] + (qp[MM] + t_cur[:, :, MI]),
                 prev["MI"][1:] + (qp[MM] + t_cur[:, :, II]))):
            from_self = extend > fresh
            np.maximum(fresh, extend, out=cur[name][1:])
            byte |= from_self.view(np.uint8) * np.uint8(1 << bit)  # uint8 << has no vectorised loop; * has
        # GD, IM: in-row chains along j, prefix max-plus scans
        mm_left = cur["MM"][:-1]
        for name, bit, fresh, cumulative in (
                ("GD", HMM_SELF_BITS[1], mm_left + t_prev[:, :, MD], cum_dd),
                ("IM", HMM_SELF_BITS[2], mm_left + (qc[MI] + t_prev[:, :, MM]), positions * qc[II] + cum_mm)):
            shifted = fresh - cumulative
            running = np.maximum.accumulate(shifted, axis=0)
            byte |= (running > shifted).view(np.uint8) * np.uint8(1 << bit)
            np.add(running, cumulative, out=cur[name][1:])
        bt[i - 1] = byte
        row_best = mm_new.max(axis=0)
        improved = row_best > best
        if improved.any():
            best[improved] = row_best[improved]
            best_i[improved] = i
            best_j[improved] = mm_new.argmax(axis=0)[improved] + 1
        prev, cur = cur, prev
    return best, best_i, best_j, bt


def correlation_score(query: PairScores, template: PairScores, steps: list[tuple[int, int, str]]) -> float:
    """HHsearch's correlation score: ``0.1 · Σ_{d=1..4} Σ_k s_k·s_{k+d}`` along the alignment steps (bits)."""
    s = np.zeros(len(steps), dtype=np.float64)
    for k, (i, j, letter) in enumerate(steps):
        if letter == "M":
            s[k] = np.log2(max(float(query.scaled[i - 1] @ template.scaled[j - 1]), 1e-300))
    total = sum(float(s[:-d] @ s[d:]) for d in CORRELATION_DISTANCES if d < s.size)
    return CORRELATION_WEIGHT * total


def align_template_batch(query: PairScores, templates: list[PairScores], indices: list[int], *,
                         shift: float = HHSUITE_SHIFT, correlation: bool = True) -> list[Hit]:
    """Hits (always with alignments) of the given templates, in the order given: the compiled traced kernel
    (:func:`workflow_lib.aligner.hmm_kernels.hmm_traced`) where numba is installed, else
    :func:`viterbi_profile_lanes` (same scores, cells and paths)."""
    if compiled_available():
        best, best_i, best_j, bt = hmm_traced(query, templates, shift=shift)
    else:
        best, best_i, best_j, bt = viterbi_profile_lanes(query, templates, shift=shift)
    paths = profile_paths(bt, best_i, best_j)
    hits = []
    for lane, index in enumerate(indices):
        raw = int(best[lane])
        bonus = correlation_score(query, templates[lane], paths[lane]) if correlation else 0.0
        hits.append(hit_from_path(index, raw, paths[lane], score=raw / SCALE + bonus))
    return hits
