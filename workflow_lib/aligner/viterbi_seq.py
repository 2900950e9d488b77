"""Sequence-vs-profile local Viterbi over lanes of targets (the profile-HMM log-odds Viterbi, Söding 2005,
Bioinformatics 21:951; targets in lanes as in HH-suite3, Steinegger et al. 2019, BMC Bioinformatics 20:473).

The recurrences are those of :mod:`workflow_lib.aligner.reference`. Layout: the DP runs over query columns i
(one row at a time); each row is an int32 array ``[Lt + 1, W]`` over target positions l (row 0 is the
boundary) and W lanes = targets of similar length packed side by side, lanes contiguous. Per row:

- M: the emission scores of all lanes are gathered at once from the row's 22-entry table (``np.take`` with
  ``mode="wrap"``: every code is in range, and wrap is NumPy's cheapest index mode)
  with the M->M transition out of the row folded in; the predecessors are combined with in-place maxima and the
  local start as ``A = max(g, g + X)`` (two array-array passes; an int32 maximum with a scalar is slower);
- D depends on the previous row only (two ops, updated in place);
- I is the in-row chain ``I(l) = max(M(l-1) + t.MI, I(l-1) + t.II)`` with a constant step t.II, kept in the
  shifted form ``B = I − l·t.II`` where the chain is a plain cumulative maximum. Only I values with
  ``I + t.IM > 0`` can change a score or an optimal path, which bounds the chain lengths that matter by
  ``(row max of M + t.MI + t.IM) / |t.II|`` (:func:`chain_steps`): doubling steps (``max(B(l), B(l − s))``
  for s = 1, 2, 4, …; one contiguous array pass each) resolve them, 3–4 on random targets, 8–10 on the rows of
  strong hits, at most ``log2(Lt)`` (the scan is then the full cumulative maximum). Cells whose I is left below
  its true value are exactly the cells no score and no optimal path reads, so scores and alignments equal the
  reference's.
- Stored: ``A = M + t_i.MM``, ``B`` and ``C = D − t_{i−1}.MD + t_{i−1}.MM``; the shifts fold into per-row
  constants. Five ``[Lt + 1, W]`` buffers (A twice, B twice, C) and one work row: a 48k-cell row then stays in
  L2 cache (``LANE_CELLS`` in :mod:`workflow_lib.aligner.lanes`).

Overflow: values stay in [NEG_INF − 2^31/4, 2^26·…]; the shifted scan adds ``l·|t.II| ≤ Lt·2^15``, so targets
longer than :data:`INT32_MAX_TARGET` use int64 arrays (same code, slower).
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner.backtrace import sequence_hits
from workflow_lib.aligner.compiled import viterbi_seq_lanes_compiled
from workflow_lib.aligner.device import compiled_available
from workflow_lib.aligner.scores import NEG_INF, PAD_CODE, Hit, SequenceScores
from workflow_lib.aligner.transitions import DD, DM, II, IM, MD, MI, MM

INT32_MAX_TARGET = 16000
SCAN_PAD_ROWS = 128
"""``NEG_INF`` rows ahead of the I-chain buffers: a doubling step with a shift up to this is one call; longer
shifts (chains of more than 128 positions) take two."""
ROW_BLOCK = 64
"""Query rows whose in-row ramps are computed together."""
PACK_ROWS = 8
"""Query rows whose backtrace bytes are packed by one set of NumPy calls."""
FULL_RAMP_WIDTH = 16
"""Buckets with fewer lanes add the in-row ramps as full ``[Lt, W]`` rows (a multiply and an add with scalars,
then an array add) instead of a broadcast ``[Lt, 1]`` column: NumPy runs a column broadcast as one inner loop
of W elements per position, several times slower than a full pass when W is small."""


LANE_MAX_FOLD = 8
"""Positions folded into the lane axis by :func:`lane_max`; packed targets are padded to a multiple of it."""


reduce_max = np.maximum.reduce
"""The ufunc's reduction, called directly: ``ndarray.max`` goes through two Python-level wrappers (a fixed cost per
call, several calls per DP row)."""


def padded_length(n_positions: int) -> int:
    """``n_positions`` rounded up to a multiple of :data:`LANE_MAX_FOLD` (rows of at most 8 stay as they are)."""
    if n_positions <= LANE_MAX_FOLD:
        return max(n_positions, 1)
    return -(-n_positions // LANE_MAX_FOLD) * LANE_MAX_FOLD


def lane_max(values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``values.max(axis=0)`` for a C-contiguous ``[n, W]`` array, faster when W is small.

    NumPy reduces over the first axis with one inner loop of W elements per position, so a bucket of a few
    long targets (W = 8) pays that loop's fixed cost at every position. Viewed as ``[n / 8, 8 · W]`` the inner
    loops are 8× longer, and the last ``[8, W]`` maxima are a second, tiny reduction: faster for narrow buckets,
    the same for wide ones. Maxima are exact, so the result is identical.
    """
    n, width = values.shape
    if n % LANE_MAX_FOLD or n == LANE_MAX_FOLD or not values.flags.c_contiguous:
        return reduce_max(values, axis=0, out=out)
    folded = reduce_max(values.reshape(n // LANE_MAX_FOLD, LANE_MAX_FOLD * width), axis=0)
    return reduce_max(folded.reshape(LANE_MAX_FOLD, width), axis=0, out=out)


def chain_steps(excess: int, step: int, n_positions: int) -> int:
    """Doubling steps (shifts 1, 2, 4, …) that resolve every in-row I chain that can matter.

    ``excess`` bounds ``F(k) + t.IM`` over the row (F the fresh I values, ``M(i, k−1) + t.MI``); a chain of
    length d from k yields ``F(k) + d·step``, which can matter only while ``F(k) + d·step + t.IM > 0`` (else the
    next row's M takes its 0 start or another predecessor, and no optimal path visits the cell). So chains up
    to ``d = ceil(excess / |step|) − 1`` are needed (every chain when ``step ≥ 0``): ``d.bit_length()`` doubling
    steps, each one array pass. Capped by the row: at most ``(n_positions − 1).bit_length()`` steps, which make
    the scan the full cumulative maximum.

    A blocked full scan for rows needing more than 8 steps was measured and not taken: its strided passes cost
    more than the 9–11 contiguous doubling passes it would replace.
    """
    if excess <= 0:
        return 0
    longest = n_positions - 1 if step >= 0 else min((excess - 1) // -step, n_positions - 1)
    return longest.bit_length()


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

    ``residues``: intp ``[Lt, W]`` residue codes (0..20, :data:`PAD_CODE` after each target's end); ``Lt`` as
    :func:`pack_targets` pads it (:func:`padded_length`).
    Returns ``best`` int64 ``[W]`` (milli-bits), ``best_i`` / ``best_l`` int64 ``[W]`` (1-based cell of the best
    M score: first maximum in row-major order; zeros without backtrace), and the backtrace uint8
    ``[Lq, Lt, W]`` (or None).

    Stored per row i (t_i = transitions out of query column i): ``A = M + t_i.MM`` (so the local start is the
    constant 0 and ``A = max(g, g + X)`` with ``g = e + t_i.MM`` gathered once), ``B = I − l·t_i.II`` (the
    in-row scan is a plain cumulative maximum) and ``C = D − t_{i−1}.MD + t_{i−1}.MM``; the shifts fold into
    per-row constants.
    """
    residues = np.asarray(residues)
    if residues.ndim != 2 or residues.dtype != np.intp:
        raise ValueError("residues must be an intp matrix [Lt, W]")
    n_target, width = residues.shape
    dtype = np.int32 if n_target <= INT32_MAX_TARGET else np.int64
    emission = scores.emission.astype(np.int64)
    tr = scores.transitions.astype(np.int64)
    n_query = emission.shape[0]
    # per-row constants (index r = i − 1); "previous" terms of row 1 are 0 (its predecessors are NEG_INF)
    mm_out = tr[1:, MM]                                   # t_i.MM
    gathered_table = (emission + mm_out[:, None]).astype(dtype)
    table_rows = list(gathered_table)
    prev_ii = tr[:-1, II]                                 # t_{i−1}.II
    prev_shift = np.concatenate([[0], tr[:n_query - 1, MD] - tr[:n_query - 1, MM]])  # t_{i−2}.MD − t_{i−2}.MM
    k_dm = (prev_shift + tr[:-1, DM]).tolist()            # C(i−1) → D(i−1) + t_{i−1}.DM
    k_dd = (prev_shift + tr[:-1, DD] - tr[:-1, MD] + tr[:-1, MM]).tolist()
    mm_list = mm_out.tolist()
    positions = np.arange(1, n_target + 1, dtype=np.int64)[None, :]
    full_ramps = width < FULL_RAMP_WIDTH
    if full_ramps:
        # ramp_im(r) = l·t_r.II + (t_r.IM − t_r.II), ramp_mi(r) = l·(−t_{r+1}.II) + (t_{r+1}.MI − t_{r+1}.MM)
        lane_positions = np.repeat(positions.T.astype(dtype), width, axis=1)
        ramp_buf = np.empty((n_target, width), dtype)
        im_slope, im_const = prev_ii.tolist(), (tr[:n_query, IM] - prev_ii).tolist()
        mi_const = (tr[1:, MI] - tr[1:, MM]).tolist()  # slope −t_{r+1}.II: −ii_list[r]
    # rows whose in-row ramps equal the middle row's (every inner row of a one-sequence profile: its transitions
    # are the same in all columns) add a full [Lt, W] ramp built once, a plain array pass instead of a broadcast
    # column (or of three passes below FULL_RAMP_WIDTH lanes); any choice of the shared row gives the same scores
    middle = n_query // 2
    im_ii, im_im = int(prev_ii[middle]), int(tr[middle, IM])
    mi_ii, mi_mi, mi_mm = (int(v) for v in tr[middle + 1, [II, MI, MM]])
    lane_column = np.arange(1, n_target + 1, dtype=np.int64)[:, None]
    common_im = np.ascontiguousarray(np.broadcast_to(((lane_column - 1) * im_ii + im_im).astype(dtype),
                                                     (n_target, width)))
    common_mi = np.ascontiguousarray(np.broadcast_to((mi_mi - mi_mm - lane_column * mi_ii).astype(dtype),
                                                     (n_target, width)))
    im_common = ((prev_ii == im_ii) & (tr[:n_query, IM] == im_im)).tolist()
    mi_common = ((tr[1:, II] == mi_ii) & (tr[1:, MI] == mi_mi) & (tr[1:, MM] == mi_mm)).tolist()
    shape = (n_target + 1, width)
    # C(i, l) and B(i, l) overwrite C(i−1, l) and B(i−1, l) in place once the row's A has read them; A needs
    # two rows (A(i, l) reads A(i−1, l−1), C(i, l) reads A(i−1, l)). Fewer buffers keep a row in L2 cache.
    a_prev, a_cur = np.full(shape, NEG_INF, dtype), np.full(shape, NEG_INF, dtype)
    # B rows and the work row carry `pad` leading NEG_INF rows (positions l ≤ 0), so that a doubling step is
    # one call over all positions: max(B(l), B(l − s)) with B(l − s) = NEG_INF for l ≤ s
    pad = min(SCAN_PAD_ROWS, n_target)
    b_row = np.full((pad + n_target + 1, width), NEG_INF, dtype)
    b_alt = np.full((pad + n_target + 1, width), NEG_INF, dtype)
    c_row = np.full(shape, NEG_INF, dtype)
    work_full = np.full((pad + n_target, width), NEG_INF, dtype)
    work = work_full[pad:]
    # I(i, l) matters only where I + t_i.IM > 0 (else neither the score nor an optimal path uses it): per row,
    # the longest chain that can matter follows from the row's best A (see chain_steps)
    excess_offset = (tr[1:, MI] - tr[1:, MM] + tr[1:, IM]).tolist()
    ii_list = tr[1:, II].tolist()
    # each row's per-lane maximum of A (best score and row follow from them after the last row); with a
    # backtrace, the running best of A − t.MM tells which lanes improve in a row, and their argmax along l is
    # taken then (the row is not kept)
    row_max = np.empty((n_query, width), dtype)
    running = np.full(width, np.iinfo(np.int64).min, dtype=np.int64)
    shifted_row, improved = np.empty(width, np.int64), np.empty(width, bool)
    best_l = np.zeros(width, dtype=np.int64)
    bt = np.empty((n_query, n_target, width), dtype=np.uint8) if backtrace else None
    if backtrace:
        # the five comparison masks of PACK_ROWS rows, packed into backtrace bytes together (fewer calls)
        beats_rows = [np.empty((PACK_ROWS, n_target, width), dtype=bool) for _ in range(5)]
        beats_slots = [tuple(mask[slot] for mask in beats_rows) for slot in range(PACK_ROWS)]
        byte = np.empty((PACK_ROWS, n_target, width), dtype=np.uint8)
    for r in range(n_query):
        if r % ROW_BLOCK == 0 and not full_ramps:
            rows = slice(r, r + ROW_BLOCK)
            # I(i−1, l−1) + t_{i−1}.IM = B(i−1, l−1) + (l−1)·t_{i−1}.II + t_{i−1}.IM
            ramp_im = ((positions - 1) * prev_ii[rows, None]
                       + tr[:n_query][rows, IM][:, None]).astype(dtype)[:, :, None]
            # B(i, l) = cummax_k (A(i, k−1) − t_i.MM + t_i.MI − k·t_i.II)
            rows_out = slice(r + 1, r + 1 + ROW_BLOCK)
            ramp_mi = (tr[rows_out, MI][:, None] - tr[rows_out, MM][:, None]
                       - positions * tr[rows_out, II][:, None]).astype(dtype)[:, :, None]
        ramp_row = r % ROW_BLOCK
        a_new = a_cur[1:]
        # --- X = max(M', I' + im, D' + dm) at (i−1, l−1), in A terms; then A = max(g, g + X)
        np.add(c_row[:-1], k_dm[r], out=a_new)
        if im_common[r]:
            np.add(b_row[pad:-1], common_im, out=work)
        elif full_ramps:
            np.multiply(lane_positions, im_slope[r], out=ramp_buf)
            np.add(ramp_buf, im_const[r], out=ramp_buf)
            np.add(b_row[pad:-1], ramp_buf, out=work)
        else:
            np.add(b_row[pad:-1], ramp_im[ramp_row], out=work)
        if backtrace:
            slot = r % PACK_ROWS
            m_beats_i, d_beats, stop, from_i, from_d = beats_slots[slot]
            np.greater(work, a_prev[:-1], out=m_beats_i)
        np.maximum(work, a_prev[:-1], out=work)
        if backtrace:
            np.greater(a_new, work, out=d_beats)
        np.maximum(work, a_new, out=work)
        if backtrace:
            np.less_equal(work, 0, out=stop)
        table_rows[r].take(residues, out=a_new, mode="wrap")
        np.add(work, a_new, out=work)
        np.maximum(work, a_new, out=a_new)
        # --- C(i, l) = max(A(i−1, l), C(i−1, l) + k_dd), in place
        c_new = c_row[1:]
        np.add(c_new, k_dd[r], out=c_new)
        if backtrace:
            np.greater(c_new, a_prev[1:], out=from_d)
        np.maximum(c_new, a_prev[1:], out=c_new)
        row_best = lane_max(a_new, out=row_max[r])
        # --- B(i, l) = cummax along l of the fresh values (A(i, l−1) + ramp): a doubling scan over the
        # chain lengths that can matter
        steps = chain_steps(int(reduce_max(row_best)) + excess_offset[r], ii_list[r], n_target)
        fresh = work if backtrace else b_alt[pad + 1:]
        if mi_common[r]:
            np.add(a_cur[:-1], common_mi, out=fresh)
        elif full_ramps:
            np.multiply(lane_positions, -ii_list[r], out=ramp_buf)
            np.add(ramp_buf, mi_const[r], out=ramp_buf)
            np.add(a_cur[:-1], ramp_buf, out=fresh)
        else:
            np.add(a_cur[:-1], ramp_mi[ramp_row], out=fresh)
        current, start = (work_full, pad) if backtrace else (b_alt, pad + 1)
        for k in range(steps):
            shift = 1 << k
            target = b_row if k % 2 == 0 else b_alt
            if shift <= pad:
                np.maximum(current[start:start + n_target], current[start - shift:start + n_target - shift],
                           out=target[pad + 1:])
            else:  # beyond the NEG_INF rows: the first `shift` positions have nothing to their left
                np.copyto(target[pad + 1:pad + 1 + shift], current[start:start + shift])
                np.maximum(current[start + shift:start + n_target], current[start:start + n_target - shift],
                           out=target[pad + 1 + shift:])
            current, start = target, pad + 1
        if steps == 0 and backtrace:
            np.copyto(b_row[pad + 1:], work)
        elif steps % 2 == 0:
            b_row, b_alt = b_alt, b_row
        if backtrace:
            np.greater(b_row[pad + 1:], work, out=from_i)
            if slot == PACK_ROWS - 1 or r == n_query - 1:
                _pack_seq_byte(bt[r - slot:r + 1], byte[:slot + 1], *(mask[:slot + 1] for mask in beats_rows))
            np.subtract(row_best, mm_list[r], out=shifted_row)
            lanes = np.greater(shifted_row, running, out=improved).nonzero()[0]
            if lanes.size:
                np.maximum(running, shifted_row, out=running)
                # argmax over the improved lanes only (usually a few): first maximum along l
                if 4 * lanes.size < width:
                    best_l[lanes] = a_new[:, lanes].argmax(axis=0) + 1
                else:
                    best_l[lanes] = a_new.argmax(axis=0)[lanes] + 1
        a_prev, a_cur = a_cur, a_prev
    # best row: the first that reaches the lane's maximum (a later equal row does not improve it)
    shifted = row_max.astype(np.int64) - mm_out[:, None]
    best = shifted.max(axis=0)
    best_i = shifted.argmax(axis=0) + 1 if backtrace else np.zeros(width, dtype=np.int64)
    return best, best_i, best_l, bt


def _pack_seq_byte(out: np.ndarray, scratch: np.ndarray, m_beats_i: np.ndarray, d_beats: np.ndarray,
                   stop: np.ndarray, from_i: np.ndarray, from_d: np.ndarray) -> None:
    """M pointer = STOP if stop else (D if d_beats else (I if m_beats_i else M)); plus the I and D bits."""
    np.add(m_beats_i.view(np.uint8), 1, out=out)
    np.multiply(d_beats.view(np.uint8), 3, out=scratch)
    np.maximum(out, scratch, out=out)
    np.subtract(stop.view(np.uint8), 1, out=scratch)  # 0 where STOP, 255 elsewhere
    np.bitwise_and(out, scratch, out=out)
    # the bits by multiplication: NumPy's uint8 left_shift has no vectorised loop (many times slower)
    np.multiply(from_i.view(np.uint8), 1 << 2, out=scratch)
    np.bitwise_or(out, scratch, out=out)
    np.multiply(from_d.view(np.uint8), 1 << 3, out=scratch)
    np.bitwise_or(out, scratch, out=out)


def align_lane_batch(scores: SequenceScores, targets: list[np.ndarray], indices: list[int], *,
                     backtrace: bool, trace_from: np.ndarray | None = None) -> list[Hit]:
    """Hits for the targets ``indices`` (one lane each), in the order of ``indices``: the compiled kernel
    (:mod:`workflow_lib.aligner.compiled`) where numba is installed, else :func:`viterbi_seq_lanes`.

    ``trace_from`` (with ``backtrace``): int64 milli-bits per lane; a lane whose score is below its value comes
    back as a score-only hit (its path is not traced)."""
    residues = pack_targets(targets, indices)
    kernel = viterbi_seq_lanes_compiled if compiled_available() else viterbi_seq_lanes
    best, best_i, best_l, bt = kernel(scores, residues, backtrace=backtrace)
    if backtrace:
        if trace_from is not None:
            best_i = np.where(best >= trace_from, best_i, 0)  # a lane with best_i = 0 has no path to follow
        return sequence_hits(bt, best, best_i, best_l, indices)
    return [Hit(index, int(best[lane]) / 1000.0, int(best[lane])) for lane, index in enumerate(indices)]
