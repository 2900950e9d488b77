"""Sequence-vs-profile local Viterbi over lanes of targets (seed "Log-Odds Score with Viterbi Algorithm",
"Dynamic Programming Matrices", "SIMD and Vectorized Viterbi Algorithm").

The recurrences are those of :mod:`workflow_lib.aligner.reference`. Layout: the DP runs over query columns i
(one row at a time, two rows kept per state); each row is an int32 array ``[Lt + 1, W]`` over target positions l
(row 0 is the boundary) and W lanes = targets of similar length packed side by side, lanes contiguous. Per row:

- M: the emission scores of all lanes are gathered at once from the row's 22-entry table (``np.take``) with the
  M->M transition folded in; the three predecessors and the local 0 are combined with in-place maxima;
- D depends on the previous row only (two ops);
- I is the in-row chain ``I(l) = max(M(l-1) + t.MI, I(l-1) + t.II)`` with a constant step t.II, solved as a
  prefix max-plus scan: ``I(l) = l·t.II + cummax_{k≤l}(M(k-1) + t.MI − k·t.II)`` (:func:`prefix_max`, a blocked
  ``np.maximum.accumulate``).
  We keep I in that shifted form (Î = I − l·t.II) and D as ``D − t.MD``: the shifts fold into the next row's
  constants and save an array pass each.

Overflow: values stay in [NEG_INF − 2^31/4, 2^26·…]; the shifted scan adds ``l·|t.II| ≤ Lt·2^15``, so targets
longer than :data:`INT32_MAX_TARGET` use int64 arrays (same code, slower).
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner.backtrace import sequence_hits
from workflow_lib.aligner.profile import DD, DM, II, IM, MD, MI, MM
from workflow_lib.aligner.scores import NEG_INF, PAD_CODE, Hit, SequenceScores

INT32_MAX_TARGET = 16000


def scan_block(n_positions: int) -> int:
    """Block length of :func:`prefix_max` for ``n_positions`` rows (about sqrt(n): fewest NumPy calls)."""
    return max(1, int(np.ceil(np.sqrt(n_positions))))


def padded_length(n_positions: int) -> int:
    """``n_positions`` rounded up to a multiple of its :func:`scan_block`."""
    block = scan_block(n_positions)
    return -(-n_positions // block) * block


def prefix_max(values: np.ndarray, out: np.ndarray, block: int) -> None:
    """``out = np.maximum.accumulate(values, axis=0)`` for ``[n, W]`` arrays with ``n % block == 0``.

    ``np.maximum.accumulate`` along the position axis runs a scalar loop (~2.4 ns/cell measured); this blocked
    form does ``block`` strided maxima over all blocks at once, a carry across the ``n / block`` block ends,
    and one broadcast maximum (~1 ns/cell at 256 lanes, see ``benchmarks/RESULTS.md``).
    """
    n, width = values.shape
    n_blocks = n // block
    v = values.reshape(n_blocks, block, width)
    o = out.reshape(n_blocks, block, width)
    o[:, 0] = v[:, 0]
    for r in range(1, block):
        np.maximum(o[:, r - 1], v[:, r], out=o[:, r])
    if n_blocks > 1:
        carry = np.empty((n_blocks, width), dtype=values.dtype)
        carry[0] = np.iinfo(values.dtype).min
        for b in range(1, n_blocks):
            np.maximum(carry[b - 1], o[b - 1, -1], out=carry[b])
        np.maximum(o, carry[:, None, :], out=o)


def pack_targets(targets: list[np.ndarray], indices: list[int]) -> np.ndarray:
    """Targets (uint8 code arrays) as an intp matrix ``[n, W]``, padded with :data:`PAD_CODE`; ``n`` is the
    longest target rounded up by :func:`padded_length` (padding never changes a score)."""
    length = padded_length(max(len(targets[k]) for k in indices))
    packed = np.full((length, len(indices)), PAD_CODE, dtype=np.intp)
    for lane, k in enumerate(indices):
        packed[:len(targets[k]), lane] = targets[k]
    return packed


def viterbi_seq_lanes(scores: SequenceScores, residues: np.ndarray, *,
                      backtrace: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Run the local Viterbi of one profile against W packed targets.

    ``residues``: intp ``[Lt, W]`` residue codes (0..20, :data:`PAD_CODE` after each target's end); ``Lt`` a
    multiple of ``scan_block(Lt)`` (as :func:`pack_targets` makes it).
    Returns ``best`` int64 ``[W]`` (milli-bits), ``best_i`` / ``best_l`` int64 ``[W]`` (1-based cell of the best
    M score: first maximum in row-major order), and the backtrace uint8 ``[Lq, Lt, W]`` (or None).
    """
    residues = np.asarray(residues)
    if residues.ndim != 2 or residues.dtype != np.intp:
        raise ValueError("residues must be an intp matrix [Lt, W]")
    n_target, width = residues.shape
    block = scan_block(n_target)
    if n_target % block:
        raise ValueError(f"target axis {n_target} is not a multiple of its scan block {block}; use pack_targets")
    dtype = np.int32 if n_target <= INT32_MAX_TARGET else np.int64
    emission = scores.emission.astype(np.int64)
    tr = scores.transitions.astype(np.int64)
    n_query = emission.shape[0]
    shape = (n_target + 1, width)
    m_prev, m_cur = np.full(shape, NEG_INF, dtype), np.full(shape, NEG_INF, dtype)
    ihat_prev, ihat_cur = np.full(shape, NEG_INF, dtype), np.full(shape, NEG_INF, dtype)
    dhat_prev, dhat_cur = np.full(shape, NEG_INF, dtype), np.full(shape, NEG_INF, dtype)
    work = np.empty((n_target, width), dtype)
    gathered = np.empty((n_target, width), dtype)
    positions = np.arange(1, n_target + 1, dtype=np.int64)[:, None]
    best = np.full(width, np.iinfo(np.int64).min, dtype=np.int64)
    best_i = np.zeros(width, dtype=np.int64)
    best_l = np.zeros(width, dtype=np.int64)
    bt = np.empty((n_query, n_target, width), dtype=np.uint8) if backtrace else None
    if backtrace:
        beats = [np.empty((n_target, width), dtype=bool) for _ in range(5)]
        byte = np.empty((n_target, width), dtype=np.uint8)
    prev_ii = 0      # t.II of the previous row (Î_prev(l) = I(i-1, l) − l·prev_ii)
    prev_md = 0      # t.MD of the row before the previous one (D̂_prev = D(i-1, ·) − prev_md)
    for i in range(1, n_query + 1):
        tp, tc = tr[i - 1], tr[i]
        mm = int(tp[MM])
        # --- M(i, l) = e + mm + max(-mm, M', I' + im - mm, D' + dm - mm) at (i-1, l-1)
        np.take((emission[i - 1] + mm).astype(dtype), residues, out=gathered, mode="clip")
        i_ramp = ((positions - 1) * prev_ii + (int(tp[IM]) - mm)).astype(dtype)
        np.add(ihat_prev[:-1], i_ramp, out=work)
        m_new = m_cur[1:]
        if backtrace:
            m_beats_i, d_beats, stop, from_i, from_d = beats
            np.greater(work, m_prev[:-1], out=m_beats_i)
        np.maximum(work, m_prev[:-1], out=work)
        np.add(dhat_prev[:-1], prev_md + int(tp[DM]) - mm, out=m_new)
        if backtrace:
            np.greater(m_new, work, out=d_beats)
        np.maximum(work, m_new, out=work)
        if backtrace:
            np.greater_equal(-mm, work, out=stop)
        np.maximum(work, -mm, out=work)
        np.add(work, gathered, out=m_new)
        # --- D̂(i, l) = max(M(i-1, l), D(i-1, l) + dd - md)
        md = int(tp[MD])
        np.add(dhat_prev[1:], prev_md + int(tp[DD]) - md, out=work)
        if backtrace:
            np.greater(work, m_prev[1:], out=from_d)
        np.maximum(work, m_prev[1:], out=dhat_cur[1:])
        # --- Î(i, l) = cummax_k (M(i, k-1) + mi - k·ii)
        ii = int(tc[II])
        np.add(m_cur[:-1], (int(tc[MI]) - positions * ii).astype(dtype), out=work)
        prefix_max(work, ihat_cur[1:], block)
        if backtrace:
            np.greater(ihat_cur[1:], work, out=from_i)
            _pack_seq_byte(bt[i - 1], byte, m_beats_i, d_beats, stop, from_i, from_d)
        row_best = m_new.max(axis=0)
        improved = row_best > best
        if improved.any():
            best[improved] = row_best[improved]
            best_i[improved] = i
            if backtrace:
                best_l[improved] = m_new.argmax(axis=0)[improved] + 1
        m_prev, m_cur = m_cur, m_prev
        ihat_prev, ihat_cur = ihat_cur, ihat_prev
        dhat_prev, dhat_cur = dhat_cur, dhat_prev
        prev_ii, prev_md = ii, md
    return best, best_i, best_l, bt


def _pack_seq_byte(out: np.ndarray, scratch: np.ndarray, m_beats_i: np.ndarray, d_beats: np.ndarray,
                   stop: np.ndarray, from_i: np.ndarray, from_d: np.ndarray) -> None:
    """M pointer = STOP if stop else (D if d_beats else (I if m_beats_i else M)); plus the I and D bits."""
    np.add(m_beats_i.view(np.uint8), 1, out=out)
    np.multiply(d_beats.view(np.uint8), 3, out=scratch)
    np.maximum(out, scratch, out=out)
    np.subtract(stop.view(np.uint8), 1, out=scratch)  # 0 where STOP, 255 elsewhere
    np.bitwise_and(out, scratch, out=out)
    np.left_shift(from_i.view(np.uint8), 2, out=scratch)
    np.bitwise_or(out, scratch, out=out)
    np.left_shift(from_d.view(np.uint8), 3, out=scratch)
    np.bitwise_or(out, scratch, out=out)


def align_lane_batch(scores: SequenceScores, targets: list[np.ndarray], indices: list[int], *,
                     backtrace: bool) -> list[Hit]:
    """Hits for the targets ``indices`` (one lane each), in the order of ``indices``."""
    residues = pack_targets(targets, indices)
    best, best_i, best_l, bt = viterbi_seq_lanes(scores, residues, backtrace=backtrace)
    if backtrace:
        return sequence_hits(bt, best, best_i, best_l, indices)
    return [Hit(index, int(best[lane]) / 1000.0, int(best[lane])) for lane, index in enumerate(indices)]
