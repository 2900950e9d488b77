"""Prefilter stage 2: gapped Smith–Waterman scores of the query profile against the gapless survivors.

Seed "Iterative MSA Alignment": the second HHblits prefilter aligns the query profile to each target that
passed the gapless stage with Smith–Waterman (affine gaps: open 5 bits, extend 1 bit) and keeps targets whose
E-value ``E = N_db · Lq · Lt · 2^-S`` is below 1000, where ``N_db`` is the number of sequences in the *whole*
database (from the manifest, whatever shard is searched). Here a gap of ``g`` residues costs
``open + (g - 1) · extend`` bits.

Kernel layout (the aligner's lane idea, :mod:`workflow_lib.aligner.lanes`): targets of similar length are packed
side by side as the lanes of one ``[W, T]`` array (target positions × targets, lanes contiguous, about
:data:`LANE_CELLS` cells so a row stays in cache); the recursion advances one query position at a time for all
targets at once. Blocks are cut where padded cells plus a fixed cost per row are fewest
(:func:`~workflow_lib.aligner.lanes.min_cost_buckets`). The vertical gap chain (``F``) is carried from row to row;
the horizontal chain (``E``) inside a row is a prefix max-plus scan over ``H' + extend · j``, exact because a gap is
never opened from a cell whose value came from another gap when ``open ≥ extend``. An ``E`` value matters only where
it is positive (``H`` is floored at 0), so only gaps shorter than ``(max H' − open) / extend + 1`` can matter: the
scan is a few doubling steps (``max(x(j), x(j − s))`` for s = 1, 2, 4, …, one array pass each), as in the Viterbi
kernel's insert chains (:mod:`workflow_lib.aligner.viterbi_seq`). Score-only, float32, two rows; 2.5–3× faster than
the first layout (targets as rows, ``np.maximum.accumulate`` along them: a scalar loop).
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner.lanes import ROW_COST_CELLS, min_cost_buckets
from workflow_lib.aligner.viterbi_seq import LANE_MAX_FOLD, lane_max
from workflow_lib.seqio.alphabet import N_AMINO

GAP_OPEN_BITS = 5.0
GAP_EXTEND_BITS = 1.0
GAPPED_MAX_EVALUE = 1000.0
"""The seed's pass rule for stage 2: keep targets with ``N_db · Lq · Lt · 2^-S`` below this."""
SURE_PASS_MARGIN_BITS = 0.1
"""A target whose gapless score is this far above the stage-2 threshold passes without its Smith–Waterman run
(the margin covers float32 rounding: the diagonal scorer sums by prefix differences, the SW row by row)."""
LANE_CELLS = 48 * 1024
"""Cells of one ``[W, T]`` row block (~3 ns per cell at 32–64k cells here; 5 ns at 1M, out of cache)."""
MAX_SCAN_PAD = 1 << 12
"""Longest gap the doubling scan covers (``-inf`` rows ahead of the scan buffers); longer ones use a full scan."""
_PAD = -1.0e4


def gapped_scores(scores: np.ndarray, targets: list[np.ndarray], *, gap_open: float = GAP_OPEN_BITS,
                  gap_extend: float = GAP_EXTEND_BITS, lane_cells: int = LANE_CELLS) -> np.ndarray:
    """Best local (Smith–Waterman) score in bits of each target against position-specific ``scores``.

    ``scores``: float32 ``[Lq, 21]`` bits per query position and residue code (column 20 = X), as made by
    :func:`workflow_lib.search.prefilter.profile_scores_bits`; ``targets``: uint8 code arrays. Returns
    float32 ``[T]`` in input order (0 for an empty target).
    """
    if gap_open < gap_extend:
        raise ValueError(f"gap_open ({gap_open}) must be at least gap_extend ({gap_extend})")
    out = np.zeros(len(targets), dtype=np.float32)
    if not targets:
        return out
    table = np.full((scores.shape[0], N_AMINO + 2), _PAD, dtype=np.float32)
    table[:, :N_AMINO + 1] = scores[:, :N_AMINO + 1]
    lengths = np.array([t.size for t in targets], dtype=np.int64)
    widths = np.maximum(lane_cells // np.maximum(lengths, 1), 1)
    for bucket in min_cost_buckets(lengths, widths, ROW_COST_CELLS):
        members = np.asarray(bucket, dtype=np.int64)
        width = -(-max(int(lengths[members].max()), 1) // LANE_MAX_FOLD) * LANE_MAX_FOLD  # for lane_max
        packed = np.full((width, members.size), N_AMINO + 1, dtype=np.intp)
        for lane, k in enumerate(members):
            packed[:lengths[k], lane] = np.minimum(targets[k], N_AMINO)
        out[members] = _sw_block(table, packed, gap_open, gap_extend)
    return out


def _sw_block(table: np.ndarray, packed: np.ndarray, gap_open: float, gap_extend: float) -> np.ndarray:
    """Smith–Waterman over one packed block ``[W, T]`` (positions × lanes, pad code ``N_AMINO + 1``); returns
    ``[T]`` bits."""
    width, n_targets = packed.shape
    ext, open_ = np.float32(gap_extend), np.float32(gap_open)
    open_minus_ext = np.float32(gap_open - gap_extend)
    h_prev = np.zeros((width + 1, n_targets), dtype=np.float32)   # row 0: the left boundary (position 0)
    h_cur = np.zeros((width + 1, n_targets), dtype=np.float32)
    f = np.full((width, n_targets), -np.inf, dtype=np.float32)
    tmp = np.empty((width, n_targets), dtype=np.float32)
    pad = min(1 << max(width - 1, 0).bit_length(), MAX_SCAN_PAD)
    scans = [np.full((pad + width, n_targets), -np.inf, dtype=np.float32) for _ in range(2)]
    # the ramp as a full block: NumPy adds a broadcast [W, 1] column with an inner loop of T elements per
    # position, 2-6x slower than an array add
    ramp = np.repeat((np.arange(width, dtype=np.float32) * ext)[:, None], n_targets, axis=1)
    best = np.zeros(n_targets, dtype=np.float32)
    lane_best = np.empty(n_targets, dtype=np.float32)
    zeros = np.zeros((width, n_targets), dtype=np.float32)  # NumPy's float maximum against a scalar is ~4x slower
    for row in table:
        h = h_cur[1:]
        np.take(row, packed, out=h, mode="wrap")  # substitution scores (codes in range: wrap = no bounds work)
        np.subtract(f, ext, out=f)
        np.subtract(h_prev[1:], open_, out=tmp)
        np.maximum(f, tmp, out=f)                                 # F = max(H(i−1, j) − open, F(i−1, j) − ext)
        np.add(h, h_prev[:-1], out=h)
        np.maximum(h, f, out=h)
        np.maximum(h, zeros, out=h)                               # H' = H without horizontal gaps
        lane_max(h, out=lane_best)
        np.maximum(best, lane_best, out=best)                     # E(j) < max H', so H' holds the row maxima
        h_prev, h_cur = h_cur, h_prev
        top = float(lane_best.max())
        if top <= open_ or width < 2:                             # every E(j) ≤ 0: H = H'
            continue
        # E(j) = max_{k<j} H'(k) − open − (j − k − 1)·ext = scan(j − 1) − ramp(j) − (open − ext), scan the
        # prefix max of H' + ramp; only k within `reach` of j can give E(j) > 0
        reach = (top - gap_open) / gap_extend + 1.0 if gap_extend > 0 else np.inf
        steps = int(np.ceil(np.log2(min(reach, width) + 1.0)))
        current, other = scans
        np.add(h, ramp, out=current[pad:])
        if (1 << steps) > pad:
            np.maximum.accumulate(current[pad:], axis=0, out=current[pad:])
        else:
            for k in range(steps):
                shift = 1 << k
                np.maximum(current[pad:], current[pad - shift:pad + width - shift], out=other[pad:])
                current, other = other, current
        np.subtract(current[pad:pad + width - 1], ramp[1:], out=tmp[1:])
        np.subtract(tmp[1:], open_minus_ext, out=tmp[1:])
        np.maximum(h[1:], tmp[1:], out=h[1:])
    return best


def gapped_evalues(bits: np.ndarray, query_length: int, target_lengths: np.ndarray, db_sequences: int) -> np.ndarray:
    """The seed's stage-2 E-value ``N_db · Lq · Lt · 2^-S`` (float64)."""
    bits = np.asarray(bits, dtype=np.float64)
    space = float(db_sequences) * float(query_length) * np.asarray(target_lengths, dtype=np.float64)
    return space * np.exp2(-bits)


def gapped_pass(scores: np.ndarray, targets: list[np.ndarray], gapless_bits: np.ndarray, db_sequences: int, *,
                max_evalue: float = GAPPED_MAX_EVALUE, gap_open: float = GAP_OPEN_BITS,
                gap_extend: float = GAP_EXTEND_BITS) -> tuple[np.ndarray, int]:
    """Stage 2 for the gapless survivors ``targets``: indices of those with ``E < max_evalue``, and how many
    Smith–Waterman runs that took.

    A local gapped alignment can always take the gapless segment, so its score is at least the target's best
    gapless score ``gapless_bits``: targets that pass on that score (less :data:`SURE_PASS_MARGIN_BITS`) pass
    without the SW run, with the same result. With the seed's settings this
    skips every target of a database of at most ``1000 · 2^2.5 ≈ 5,600`` sequences and, in larger ones, the
    strong hits; the SW runs only for targets near the threshold.
    """
    lengths = np.array([t.size for t in targets], dtype=np.int64)
    lower_bound = np.asarray(gapless_bits, np.float64) - SURE_PASS_MARGIN_BITS
    sure = gapped_evalues(lower_bound, scores.shape[0], lengths, db_sequences) < max_evalue
    unsure = np.flatnonzero(~sure)
    passed = sure.copy()
    if unsure.size:
        bits = gapped_scores(scores, [targets[k] for k in unsure], gap_open=gap_open, gap_extend=gap_extend)
        evalue = gapped_evalues(bits, scores.shape[0], lengths[unsure], db_sequences)
        passed[unsure] = evalue < max_evalue
    return np.flatnonzero(passed), int(unsure.size)


def smith_waterman_reference(scores: np.ndarray, target: np.ndarray, *, gap_open: float = GAP_OPEN_BITS,
                             gap_extend: float = GAP_EXTEND_BITS) -> float:
    """Plain-loop Gotoh local alignment, the tests' reference for :func:`gapped_scores`."""
    lq, lt = scores.shape[0], int(target.size)
    h = [[0.0] * (lt + 1) for _ in range(lq + 1)]
    e = [[-np.inf] * (lt + 1) for _ in range(lq + 1)]
    f = [[-np.inf] * (lt + 1) for _ in range(lq + 1)]
    best = 0.0
    for i in range(1, lq + 1):
        for j in range(1, lt + 1):
            e[i][j] = max(h[i][j - 1] - gap_open, e[i][j - 1] - gap_extend)
            f[i][j] = max(h[i - 1][j] - gap_open, f[i - 1][j] - gap_extend)
            residue = min(int(target[j - 1]), N_AMINO)
            h[i][j] = max(0.0, h[i - 1][j - 1] + float(scores[i - 1, residue]), e[i][j], f[i][j])
            best = max(best, h[i][j])
    return best
