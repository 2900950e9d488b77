"""Plain-loop reference implementations of the Viterbi recurrences (slow; the tests check the lane kernels
against them cell for cell: same scores, same tie-breaking, same alignments).

Sequence vs profile (the profile-HMM log-odds Viterbi that HHsearch generalises; Söding 2005, Bioinformatics
21:951), rows i = query columns 1..Lq, columns l = target residues 1..Lt, transitions ``t[i]`` out of column i::

    M(i,l) = e(i, x_l) + max(0 [STOP], M(i-1,l-1) + t[i-1].MM, I(i-1,l-1) + t[i-1].IM, D(i-1,l-1) + t[i-1].DM)
    I(i,l) = max(M(i,l-1) + t[i].MI, I(i,l-1) + t[i].II)
    D(i,l) = max(M(i-1,l) + t[i-1].MD, D(i-1,l) + t[i-1].DD)

Profile vs profile (HHsearch's HMM–HMM Viterbi, Söding 2005; q = query, t = template, S = column score
plus shift)::

    MM(i,j) = S(i,j) + max(0, MM(i-1,j-1) + q.MM + t.MM, GD(i-1,j-1) + q.MM + t.DM, IM(i-1,j-1) + q.IM + t.MM,
                           DG(i-1,j-1) + q.DM + t.MM, MI(i-1,j-1) + q.MM + t.IM)      [q at i-1, t at j-1]
    GD(i,j) = max(MM(i,j-1) + t[j-1].MD, GD(i,j-1) + t[j-1].DD)
    IM(i,j) = max(MM(i,j-1) + q[i].MI + t[j-1].MM, IM(i,j-1) + q[i].II + t[j-1].MM)
    DG(i,j) = max(MM(i-1,j) + q[i-1].MD, DG(i-1,j) + q[i-1].DD)
    MI(i,j) = max(MM(i-1,j) + q[i-1].MM + t[j].MI, MI(i-1,j) + q[i-1].MM + t[j].II)

Ties: predecessors are tried in the order listed and replace the running best only when strictly greater;
then STOP replaces it when 0 ≥ best (an alignment starts fresh rather than carry a zero-sum prefix). The
two-way states prefer the transition from the match state on ties. The best cell is the first maximum of
the M (MM) matrix in row-major order (i, then l).
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner.scores import NEG_INF, PairScores, SequenceScores, column_scores
from workflow_lib.aligner.transitions import DD, DM, II, IM, MD, MI, MM

STOP = 0


def viterbi_sequence_reference(scores: SequenceScores, target: np.ndarray) -> tuple[int, list[tuple[int, int, str]]]:
    """Best local score (int milli-bits) and the path ``[(i, l, 'M'|'I'|'D'), ...]`` (1-based, forward)."""
    emission, tr = scores.emission.astype(np.int64), scores.transitions.astype(np.int64)
    n_query, n_target = emission.shape[0], len(target)
    shape = (n_query + 1, n_target + 1)
    M = np.full(shape, NEG_INF, dtype=np.int64)
    I = np.full(shape, NEG_INF, dtype=np.int64)
    D = np.full(shape, NEG_INF, dtype=np.int64)
    back_m = np.zeros(shape, dtype=np.int8)
    back_i = np.zeros(shape, dtype=np.int8)
    back_d = np.zeros(shape, dtype=np.int8)
    best, best_cell = None, (0, 0)
    for i in range(1, n_query + 1):
        prev, cur = tr[i - 1], tr[i]
        for l in range(1, n_target + 1):
            value, pointer = M[i - 1, l - 1] + prev[MM], 1
            for code, candidate in ((2, I[i - 1, l - 1] + prev[IM]), (3, D[i - 1, l - 1] + prev[DM])):
                if candidate > value:
                    value, pointer = candidate, code
            if 0 >= value:
                value, pointer = 0, STOP
            M[i, l] = emission[i - 1, target[l - 1]] + value
            back_m[i, l] = pointer
            fresh, extend = M[i, l - 1] + cur[MI], I[i, l - 1] + cur[II]
            I[i, l], back_i[i, l] = (extend, 1) if extend > fresh else (fresh, 0)
            fresh, extend = M[i - 1, l] + prev[MD], D[i - 1, l] + prev[DD]
            D[i, l], back_d[i, l] = (extend, 1) if extend > fresh else (fresh, 0)
            if best is None or M[i, l] > best:
                best, best_cell = int(M[i, l]), (i, l)
    steps = []
    i, l = best_cell
    state = "M"
    while True:
        steps.append((i, l, state))
        if state == "M":
            pointer = back_m[i, l]
            if pointer == STOP:
                break
            state = {1: "M", 2: "I", 3: "D"}[int(pointer)]
            i, l = i - 1, l - 1
        elif state == "I":
            state = "I" if back_i[i, l] else "M"
            l -= 1
        else:
            state = "D" if back_d[i, l] else "M"
            i -= 1
    return int(best), steps[::-1]


HMM_STATE_LETTERS = {1: "M", 2: "G", 3: "J", 4: "D", 5: "I"}
"""MM-pointer codes → state letters (1 MM, 2 GD, 3 IM, 4 DG, 5 MI), as in :class:`~workflow_lib.aligner.scores.Hit`."""


def viterbi_profile_reference(query: PairScores, template: PairScores, *,
                              shift: float) -> tuple[int, list[tuple[int, int, str]]]:
    """Best local log-sum-of-odds score (int milli-bits, without the correlation score) and the path."""
    S = column_scores(query, template.scaled, shift).astype(np.int64)
    q, t = query.transitions.astype(np.int64), template.transitions.astype(np.int64)
    n_query, n_template = S.shape
    shape = (n_query + 1, n_template + 1)
    mats = {name: np.full(shape, NEG_INF, dtype=np.int64) for name in ("MM", "GD", "IM", "DG", "MI")}
    MMm, GD, IMm, DG, MIm = (mats[k] for k in ("MM", "GD", "IM", "DG", "MI"))
    back = {name: np.zeros(shape, dtype=np.int8) for name in mats}
    best, best_cell = None, (0, 0)
    for i in range(1, n_query + 1):
        qp, qc = q[i - 1], q[i]
        for j in range(1, n_template + 1):
            tp, tc = t[j - 1], t[j]
            value, pointer = MMm[i - 1, j - 1] + qp[MM] + tp[MM], 1
            for code, candidate in ((2, GD[i - 1, j - 1] + qp[MM] + tp[DM]),
                                    (3, IMm[i - 1, j - 1] + qp[IM] + tp[MM]),
                                    (4, DG[i - 1, j - 1] + qp[DM] + tp[MM]),
                                    (5, MIm[i - 1, j - 1] + qp[MM] + tp[IM])):
                if candidate > value:
                    value, pointer = candidate, code
            if 0 >= value:
                value, pointer = 0, STOP
            MMm[i, j] = S[i - 1, j - 1] + value
            back["MM"][i, j] = pointer
            for name, matrix, fresh, extend in (
                    ("GD", GD, MMm[i, j - 1] + tp[MD], GD[i, j - 1] + tp[DD]),
                    ("IM", IMm, MMm[i, j - 1] + qc[MI] + tp[MM], IMm[i, j - 1] + qc[II] + tp[MM]),
                    ("DG", DG, MMm[i - 1, j] + qp[MD], DG[i - 1, j] + qp[DD]),
                    ("MI", MIm, MMm[i - 1, j] + qp[MM] + tc[MI], MIm[i - 1, j] + qp[MM] + tc[II])):
                matrix[i, j], back[name][i, j] = (extend, 1) if extend > fresh else (fresh, 0)
            if best is None or MMm[i, j] > best:
                best, best_cell = int(MMm[i, j]), (i, j)
    steps = []
    i, j = best_cell
    state = "M"
    moves = {"M": (1, 1), "G": (0, 1), "J": (0, 1), "D": (1, 0), "I": (1, 0)}
    names = {"M": "MM", "G": "GD", "J": "IM", "D": "DG", "I": "MI"}
    while True:
        steps.append((i, j, state))
        if state == "M":
            pointer = int(back["MM"][i, j])
            if pointer == STOP:
                break
            di, dj = moves["M"]
            state = HMM_STATE_LETTERS[pointer]
        else:
            di, dj = moves[state]
            state = state if back[names[state]][i, j] else "M"
        i, j = i - di, j - dj
    return int(best), steps[::-1]
