"""Prefilter stage 2: gapped Smith–Waterman scores of the query profile against the gapless survivors.

The second prefilter of HHblits (Remmert et al. 2012, Nat. Methods 9:173) aligns the query profile to each target that
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
kernel's insert chains (:mod:`workflow_lib.aligner.viterbi_seq`). Score-only, float32, two rows; faster than
the first layout (targets as rows, ``np.maximum.accumulate`` along them: a scalar loop). The compiled kernels run
stage 2 in Farrar's striped layout instead (:func:`~workflow_lib.search.gapped_compiled.sw_striped_compiled`:
the query profile's row of a target residue is read whole, with no gather per cell; the same scores to the bit).

Stage 1b (not in HHblits; :func:`band_split`, :func:`banded_scores_many`, :func:`band_decide`): the same local
alignment restricted to a band of diagonals around the target's best gapless diagonal, ``Lq · band`` cells
instead of ``Lq · Lt``. It scores the targets whose gapless score is near the threshold, where a single diagonal
says little about a remote homolog; the search (:mod:`workflow_lib.search.engine`) passes them on this score.
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner.device import compiled_available
from workflow_lib.aligner.lanes import ROW_COST_CELLS, min_cost_buckets
from workflow_lib.aligner.viterbi_seq import LANE_MAX_FOLD, lane_max, reduce_max
from workflow_lib.search.gapped_compiled import (band_codes_compiled, banded_block_compiled, sw_block_compiled,
                                                  sw_striped_compiled)
from workflow_lib.seqio.alphabet import N_AMINO

GAP_OPEN_BITS = 5.0
GAP_EXTEND_BITS = 1.0
GAPPED_MAX_EVALUE = 1000.0
"""HHblits' pass rule for stage 2: keep targets with ``N_db · Lq · Lt · 2^-S`` below this."""
SURE_PASS_MARGIN_BITS = 0.1
"""A target whose gapless score is this far above the stage-2 threshold passes without its Smith–Waterman run
(the margin covers float32 rounding: the diagonal scorer sums by prefix differences, the SW row by row)."""
LANE_CELLS = 48 * 1024
"""Cells of one ``[W, T]`` row block, so a block stays in cache (a cell costs more once it does not)."""
MAX_SCAN_PAD = 1 << 12
"""Longest gap the doubling scan covers (``-inf`` rows ahead of the scan buffers); longer ones use a full scan."""
_PAD = -1.0e4


def gapped_scores(scores: np.ndarray, targets: list[np.ndarray], *, gap_open: float = GAP_OPEN_BITS,
                  gap_extend: float = GAP_EXTEND_BITS, lane_cells: int = LANE_CELLS, striped: bool = True) -> np.ndarray:
    """Best local (Smith–Waterman) score in bits of each target against position-specific ``scores``.

    ``scores``: float32 ``[Lq, 21]`` bits per query position and residue code (column 20 = X), as made by
    :func:`workflow_lib.search.seeds.profile_scores_bits`; ``targets``: uint8 code arrays. Returns
    float32 ``[T]`` in input order (0 for an empty target). With the compiled kernels, ``striped`` (the default)
    runs :func:`~workflow_lib.search.gapped_compiled.sw_striped_compiled` (the same scores to the bit) instead
    of the lane blocks.
    """
    if gap_open < gap_extend:
        raise ValueError(f"gap_open ({gap_open}) must be at least gap_extend ({gap_extend})")
    out = np.zeros(len(targets), dtype=np.float32)
    if not targets:
        return out
    table = np.full((scores.shape[0], N_AMINO + 2), _PAD, dtype=np.float32)
    table[:, :N_AMINO + 1] = scores[:, :N_AMINO + 1]
    if compiled_available() and striped:
        return sw_striped_compiled(table, targets, gap_open, gap_extend, max_code=N_AMINO)
    lengths = np.array([t.size for t in targets], dtype=np.int64)
    widths = np.maximum(lane_cells // np.maximum(lengths, 1), 1)
    for bucket in min_cost_buckets(lengths, widths, ROW_COST_CELLS):
        members = np.asarray(bucket, dtype=np.int64)
        width = -(-max(int(lengths[members].max()), 1) // LANE_MAX_FOLD) * LANE_MAX_FOLD  # for lane_max
        packed = np.full((width, members.size), N_AMINO + 1, dtype=np.intp)
        for lane, k in enumerate(members):
            packed[:lengths[k], lane] = np.minimum(targets[k], N_AMINO)
        out[members] = (sw_block_compiled if compiled_available() else _sw_block)(table, packed, gap_open, gap_extend)
    return out


def _sw_block(table: np.ndarray, packed: np.ndarray, gap_open: float, gap_extend: float) -> np.ndarray:
    """Smith–Waterman over one packed block ``[W, T]`` (positions × lanes, pad code ``N_AMINO + 1``); returns
    ``[T]`` bits."""
    width, n_targets = packed.shape
    ext, open_ = np.float32(gap_extend), np.float32(gap_open)
    h_prev = np.zeros((width + 1, n_targets), dtype=np.float32)   # row 0: the left boundary (position 0)
    h_cur = np.zeros((width + 1, n_targets), dtype=np.float32)
    f = np.full((width, n_targets), -np.inf, dtype=np.float32)
    tmp = np.empty((width, n_targets), dtype=np.float32)
    pad = min(1 << max(width - 1, 0).bit_length(), MAX_SCAN_PAD)
    scans = [np.full((pad + width, n_targets), -np.inf, dtype=np.float32) for _ in range(2)]
    # the ramp as a full block: NumPy adds a broadcast [W, 1] column with an inner loop of T elements per
    # position, several times slower than an array add
    ramp = np.repeat((np.arange(width, dtype=np.float32) * ext)[:, None], n_targets, axis=1)
    best = np.zeros(n_targets, dtype=np.float32)
    lane_best = np.empty(n_targets, dtype=np.float32)
    zeros = np.zeros((width, n_targets), dtype=np.float32)  # NumPy's float maximum against a scalar is slower
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
        _horizontal_gaps(h, top, ramp, scans, pad, tmp, gap_open, gap_extend)
    return best


def _horizontal_gaps(h: np.ndarray, top: float, ramp: np.ndarray, scans: list[np.ndarray], pad: int,
                     tmp: np.ndarray, gap_open: float, gap_extend: float) -> None:
    """Gaps along axis 0 of one DP row ``h`` (``[W, T]``, in place): ``H = max(H', E)`` with
    ``E(j) = max_{k<j} H'(k) − open − (j − k − 1)·ext = scan(j − 1) − ramp(j) − (open − ext)``, the prefix max
    of ``H' + ramp``. Only ``k`` within ``reach`` of ``j`` can give ``E(j) > 0`` (``top``: the row's best
    ``H'``), so the scan is that many doubling steps (``max(x(j), x(j − s))``, s = 1, 2, 4, …), or one
    ``np.maximum.accumulate`` when they would reach past the ``pad`` rows of ``-inf`` ahead of ``scans``."""
    width = h.shape[0]
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
    np.subtract(tmp[1:], np.float32(gap_open - gap_extend), out=tmp[1:])
    np.maximum(h[1:], tmp[1:], out=h[1:])


BAND_WIDTH = 16
"""Diagonals in the band of :func:`banded_scores`. 32 found the same Pfam pairs for more CPU; 8 lost pairs
(benchmarks/RESULTS.md, "Homology search: settings measured and not taken")."""
BAND_GATE_BITS = -2.0
"""Stage 1b's gate: targets whose best gapless score is above ``gate + log2(Lq · Lt)`` bits (and below the direct pass)
get the banded Smith–Waterman score (benchmarks/RESULTS.md, "Prefilter: seed shape and the banded stage")."""
BAND_OFFSET_BITS = 6.0
"""Stage 1b's pass: a banded score above ``offset + log2(Lq · Lt)`` bits."""
BAND_SURE_PASS_BITS = 4.5
"""With stage 1b on, gapless scores above ``this + log2(Lq · Lt)`` bits pass without it (the search's default
``gapless_offset``; HHblits' single gapless pass is 2.5)."""


DIRECT_PASS_MARGIN_BITS = 4.0
"""A gapless score within this many bits of the stage-2 bar (:func:`direct_pass_offset`) passes directly."""


def direct_pass_offset(gapless_offset: float, db_sequences: int, max_evalue: float = GAPPED_MAX_EVALUE,
                       margin: float = DIRECT_PASS_MARGIN_BITS) -> float:
    """The offset (bits above ``log2(Lq · Lt)``) at which a gapless score passes without stage 1b:
    ``gapless_offset``, or ``margin`` bits below the stage-2 bar ``log2(N_db / max_evalue)`` when that is higher.

    Stage 2 needs ``S > log2(Lq · Lt) + log2(N_db / 1000)``: its bar rises with the database, a fixed direct pass
    does not. Against UniProt-2014 (448,000 sequences) the sensitive prefilter's direct pass at ``0 + log2(Lq ·
    Lt)`` sent targets 9 bits below the bar straight to Smith–Waterman: a large share of the default search's
    CPU, for almost no hit. With the margin those targets take the banded stage first (the same MSA depth, less
    CPU). Below ``1000 · 2^(offset + margin)`` sequences (16,000 for the sensitive offset 0, 360,000 for the fast
    4.5) nothing changes, so no small-database benchmark does."""
    if not np.isfinite(max_evalue):     # no stage-2 bar: the gapless offset alone
        return float(gapless_offset)
    return max(float(gapless_offset), float(np.log2(max(db_sequences, 1) / max_evalue)) - margin)


def band_split(query_length: int, target_lengths: np.ndarray, gapless_bits: np.ndarray,
               gapless_offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Stage 1b's first step: per target ``log2(Lq · Lt)`` and whether its gapless score passes directly
    (above ``gapless_offset`` + that); the others need their banded score."""
    space = np.log2(float(query_length) * np.maximum(np.asarray(target_lengths, dtype=np.float64), 1.0))
    return space, np.asarray(gapless_bits, dtype=np.float64) > gapless_offset + space


def band_decide(gapless_bits: np.ndarray, space: np.ndarray, sure: np.ndarray, banded: np.ndarray,
                band_offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Stage 1b's second step: indices of the targets that pass (``sure`` ones, and the others whose banded
    score ``banded``, given for the non-sure targets in order, is above ``band_offset + space``), and each
    target's score, the banded one where it was computed (a lower bound of the stage-2 Smith–Waterman score)."""
    bits = np.asarray(gapless_bits, dtype=np.float32).copy()
    unsure = np.flatnonzero(~sure)
    passed = sure.copy()
    bits[unsure] = np.maximum(bits[unsure], banded)
    passed[unsure] = banded > band_offset + space[unsure]
    return np.flatnonzero(passed), bits


def band_pass(scores: np.ndarray, targets: list[np.ndarray], centers: np.ndarray, gapless_bits: np.ndarray, *,
              gapless_offset: float, band_offset: float = BAND_OFFSET_BITS, band: int = BAND_WIDTH,
              gap_open: float = GAP_OPEN_BITS, gap_extend: float = GAP_EXTEND_BITS) -> tuple[np.ndarray, np.ndarray]:
    """Stage 1b for one query (:func:`band_split`, :func:`banded_scores` on the non-sure targets,
    :func:`band_decide`); the search batches the banded scores of many queries instead."""
    space, sure = band_split(scores.shape[0], np.array([t.size for t in targets]), gapless_bits, gapless_offset)
    unsure = np.flatnonzero(~sure)
    banded = banded_scores(scores, [targets[k] for k in unsure], np.asarray(centers)[unsure], band=band,
                           gap_open=gap_open, gap_extend=gap_extend)
    return band_decide(gapless_bits, space, sure, banded, band_offset)


def banded_scores(scores: np.ndarray, targets: list[np.ndarray], centers: np.ndarray, *, band: int = BAND_WIDTH,
                  gap_open: float = GAP_OPEN_BITS, gap_extend: float = GAP_EXTEND_BITS,
                  lane_cells: int = LANE_CELLS) -> np.ndarray:
    """Best local (Smith–Waterman) score in bits of each target within a band of ``band`` diagonals.

    ``centers``: per target, the diagonal ``target position − query position`` the band is laid around (the
    prefilter's best gapless diagonal); the band holds the ``band`` diagonals from ``center − band // 2``.
    The score is that of the best local alignment whose cells all lie in the band: at most the full
    :func:`gapped_scores`, at least the best gapless segment on any diagonal of the band. One query's
    ``scores``; :func:`banded_scores_many` takes several queries' targets at once.
    """
    return banded_scores_many([scores], np.zeros(len(targets), dtype=np.int64), targets, centers, band=band,
                              gap_open=gap_open, gap_extend=gap_extend, lane_cells=lane_cells)


def banded_scores_many(score_tables: list[np.ndarray], query_of: np.ndarray, targets: list[np.ndarray],
                       centers: np.ndarray, *, band: int = BAND_WIDTH, gap_open: float = GAP_OPEN_BITS,
                       gap_extend: float = GAP_EXTEND_BITS, lane_cells: int = LANE_CELLS) -> np.ndarray:
    """:func:`banded_scores` for targets of several queries: target ``k`` against ``score_tables[query_of[k]]``.

    Kernel: the band in sheared coordinates ``[band, T]`` (band offset × targets, lanes contiguous), one query
    position per step, as :func:`gapped_scores` but ``Lq · band`` cells per target instead of ``Lq · Lt``. In
    these coordinates a match keeps the offset, a gap in the target (``E``) moves to the next offset in the
    same row (the same doubling prefix scan), and a gap in the query (``F``) comes from the previous row's
    next offset. A lane's residue codes along its band are one column of a ``[R + band, T]`` array, so a row's
    codes are a contiguous slice. One query has few targets near the gapless threshold (~100–200), and a DP
    row costs ~20 NumPy calls whatever its width, so the lanes of many queries share each block: targets are
    ordered by their query's length and cut into blocks of about ``lane_cells`` cells per row; a block stacks
    its queries' score rows, each padded to the block's ``R`` rows with scores that end every alignment, and
    a lane's codes carry its query's offset into that stack, so a row's scores are one gather.
    """
    if gap_open < gap_extend:
        raise ValueError(f"gap_open ({gap_open}) must be at least gap_extend ({gap_extend})")
    if band < 1:
        raise ValueError(f"band must be at least 1 diagonal, got {band}")
    centers = np.asarray(centers, dtype=np.int64)
    query_of = np.asarray(query_of, dtype=np.int64)
    if centers.shape != (len(targets),) or query_of.shape != (len(targets),):
        raise ValueError("centers and query_of must give one value per target")
    out = np.zeros(len(targets), dtype=np.float32)
    lengths = np.array([int(t.shape[0]) for t in score_tables], dtype=np.int64)
    if not targets:
        return out
    n_codes = N_AMINO + 2
    per_block = max(lane_cells // band, 1)
    order = np.argsort(lengths[query_of], kind="stable")
    for lo in range(0, order.size, per_block):
        members = order[lo:lo + per_block]
        block_queries, lane_query = np.unique(query_of[members], return_inverse=True)
        rows = int(lengths[block_queries].max())
        if rows == 0:
            continue
        stack = np.full((block_queries.size, rows, n_codes), _PAD, dtype=np.float32)
        for slot, q in enumerate(block_queries):
            stack[slot, :lengths[q], :N_AMINO + 1] = score_tables[q][:, :N_AMINO + 1]
        # lane codes from band position 0 (target position center − band // 2 in query row 0); each lane
        # reads its own query's rows of the stack
        codes = band_codes([targets[k] for k in members], centers[members] - band // 2,
                           lane_query * rows * n_codes, rows + band)
        kernel = banded_block_compiled if compiled_available() else _banded_block
        out[members] = kernel(stack.reshape(-1), n_codes, rows, codes, band, gap_open, gap_extend)
    return out


def band_codes(targets: list[np.ndarray], first: np.ndarray, base: np.ndarray, span: int) -> np.ndarray:
    """``[span, T]`` codes along each lane's band, as the banded block reads them: row ``p`` of lane ``t`` is
    target ``t``'s residue at position ``first[t] + p`` (clipped to ``N_AMINO``; ``N_AMINO + 1``, the scores
    that end every alignment, outside the target), plus ``base[t]`` (where the lane's query rows start in the
    stacked score rows)."""
    if compiled_available():
        return band_codes_compiled(targets, first, base, span, N_AMINO)
    codes = np.full((span, len(targets)), N_AMINO + 1, dtype=np.intp)
    for lane, target in enumerate(targets):
        start, stop = max(-int(first[lane]), 0), min(target.size - int(first[lane]), span)
        if stop > start:
            codes[start:stop, lane] = np.minimum(target[first[lane] + start:first[lane] + stop], N_AMINO)
    codes += np.asarray(base, dtype=np.intp)[None, :]
    return codes


def _banded_block(flat: np.ndarray, n_codes: int, rows: int, codes: np.ndarray, band: int, gap_open: float,
                  gap_extend: float) -> np.ndarray:
    """Banded Smith–Waterman over one block; ``flat`` the stacked score rows (row ``i`` of a lane's query at
    ``codes + i · n_codes``), ``codes`` ``[rows + band, T]`` (row ``i`` reads ``codes[i:i + band]``); returns
    ``[T]`` bits. The ``H`` and ``F`` buffers carry one ``-inf`` offset past the band (the shifted ``F`` update
    needs no edge write), and the best cells are kept as an elementwise maximum, reduced once at the end."""
    n_targets = codes.shape[1]
    ext = np.float32(gap_extend)
    open_minus_ext = np.float32(gap_open - gap_extend)
    h_prev = np.full((band + 1, n_targets), -np.inf, dtype=np.float32)
    h_cur = np.full((band + 1, n_targets), -np.inf, dtype=np.float32)
    h_prev[:band] = 0.0
    f_prev = np.full((band + 1, n_targets), -np.inf, dtype=np.float32)
    f_cur = np.full((band + 1, n_targets), -np.inf, dtype=np.float32)
    tmp = np.empty((band, n_targets), dtype=np.float32)
    index = np.empty((band, n_targets), dtype=np.intp)
    pad = 1 << band.bit_length()                                 # every doubling step stays in the pad
    scans = [np.full((pad + band, n_targets), -np.inf, dtype=np.float32) for _ in range(2)]
    ramp = np.repeat((np.arange(band, dtype=np.float32) * ext)[:, None], n_targets, axis=1)
    best = np.zeros((band, n_targets), dtype=np.float32)
    zeros = np.zeros((band, n_targets), dtype=np.float32)
    for i in range(rows):
        h, f = h_cur[:band], f_cur[:band]
        np.add(codes[i:i + band], i * n_codes, out=index)
        np.take(flat, index, out=h, mode="wrap")                  # substitution scores (indices in range)
        # F(i, d) = max(H(i−1, d+1) − open, F(i−1, d+1) − ext): the same target position, one row up
        np.subtract(h_prev[1:], open_minus_ext, out=tmp)
        np.maximum(f_prev[1:], tmp, out=f)
        np.subtract(f, ext, out=f)
        np.add(h, h_prev[:band], out=h)                           # a match keeps the band offset
        np.maximum(h, f, out=h)
        np.maximum(h, zeros, out=h)
        top = float(reduce_max(h, axis=None))
        if top > gap_open:                                        # E along the band offsets
            _horizontal_gaps(h, top, ramp, scans, pad, tmp, gap_open, gap_extend)
        np.maximum(best, h, out=best)
        h_prev, h_cur = h_cur, h_prev
        f_prev, f_cur = f_cur, f_prev
    return reduce_max(best, axis=0)


def banded_reference(scores: np.ndarray, target: np.ndarray, center: int, *, band: int = BAND_WIDTH,
                     gap_open: float = GAP_OPEN_BITS, gap_extend: float = GAP_EXTEND_BITS) -> float:
    """Plain-loop Gotoh local alignment restricted to the band of :func:`banded_scores` (the tests' reference)."""
    return smith_waterman_reference(scores, target, gap_open=gap_open, gap_extend=gap_extend,
                                    diagonals=(center - band // 2, center - band // 2 + band - 1))


def gapped_evalues(bits: np.ndarray, query_length: int, target_lengths: np.ndarray, db_sequences: int) -> np.ndarray:
    """HHblits' stage-2 E-value ``N_db · Lq · Lt · 2^-S`` (float64)."""
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
    without the SW run, with the same result. With HHblits' settings this
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
                             gap_extend: float = GAP_EXTEND_BITS,
                             diagonals: tuple[int, int] | None = None) -> float:
    """Plain-loop Gotoh local alignment, the tests' reference for :func:`gapped_scores`; ``diagonals``: only
    cells with ``low ≤ target position − query position ≤ high`` (:func:`banded_reference`)."""
    lq, lt = scores.shape[0], int(target.size)
    low, high = diagonals if diagonals is not None else (-lq, lt)
    h = [[0.0] * (lt + 1) for _ in range(lq + 1)]
    e = [[-np.inf] * (lt + 1) for _ in range(lq + 1)]
    f = [[-np.inf] * (lt + 1) for _ in range(lq + 1)]
    best = 0.0
    for i in range(1, lq + 1):
        for j in range(1, lt + 1):
            if not low <= j - i <= high:
                continue                                        # outside the band: H 0, E and F -inf
            e[i][j] = max(h[i][j - 1] - gap_open, e[i][j - 1] - gap_extend)
            f[i][j] = max(h[i - 1][j] - gap_open, f[i - 1][j] - gap_extend)
            residue = min(int(target[j - 1]), N_AMINO)
            h[i][j] = max(0.0, h[i - 1][j - 1] + float(scores[i - 1, residue]), e[i][j], f[i][j])
            best = max(best, h[i][j])
    return best
