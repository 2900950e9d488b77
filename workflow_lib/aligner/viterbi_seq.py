"""Sequence-vs-profile local Viterbi over lanes of targets (seed "Log-Odds Score with Viterbi Algorithm",
"Dynamic Programming Matrices", "SIMD and Vectorized Viterbi Algorithm").

The recurrences are those of :mod:`workflow_lib.aligner.reference`. Layout: the DP runs over query columns i
(one row at a time); each row is an int32 array ``[Lt + 1, W]`` over target positions l (row 0 is the
boundary) and W lanes = targets of similar length packed side by side, lanes contiguous. Per row:

- M: the emission scores of all lanes are gathered at once from the row's 22-entry table (``np.take``) with
  the M->M transition out of the row folded in; the predecessors are combined with in-place maxima and the
  local start as ``A = max(g, g + X)`` (two array-array passes; an int32 maximum with a scalar is ~3× slower);
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

Several profiles in one batch (:func:`viterbi_seq_lanes_mixed`): lane w is aligned to its own profile. The
rows' gather tables of all profiles sit side by side (a lane's residue codes are offset to its profile's
columns), and every per-row constant becomes a per-lane array. A search's queries with few prefilter survivors
each then share buckets: fewer rows pay the ~40 calls of a row, and lanes are padded less
(:func:`workflow_lib.aligner.lanes.align_shared`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workflow_lib.aligner.backtrace import sequence_hits
from workflow_lib.aligner.profile import DD, DM, II, IM, MD, MI, MM
from workflow_lib.aligner.scores import NEG_INF, PAD_CODE, PAD_SCORE, SCALE, Hit, SequenceScores

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
of W elements per position, 26–32 µs for 12k cells at W = 2–4 against ~3 µs per full pass."""


LANE_MAX_FOLD = 8
"""Positions folded into the lane axis by :func:`lane_max`; packed targets are padded to a multiple of it."""


def padded_length(n_positions: int) -> int:
    """``n_positions`` rounded up to a multiple of :data:`LANE_MAX_FOLD` (rows of at most 8 stay as they are)."""
    if n_positions <= LANE_MAX_FOLD:
        return max(n_positions, 1)
    return -(-n_positions // LANE_MAX_FOLD) * LANE_MAX_FOLD


def lane_max(values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``values.max(axis=0)`` for a C-contiguous ``[n, W]`` array, faster when W is small.

    NumPy reduces over the first axis with one inner loop of W elements per position, so a bucket of a few
    long targets (W = 8, n = 1,100) pays ~27 ns per position. Viewed as ``[n / 8, 8 · W]`` the inner loops are
    8× longer, and the last ``[8, W]`` maxima are a second, tiny reduction: 2–3× faster for W ≤ 40, the same
    at W = 160 (measured in benchmarks/RESULTS.md, session 18). Maxima are exact, so the result is identical.
    """
    n, width = values.shape
    if n % LANE_MAX_FOLD or n == LANE_MAX_FOLD or not values.flags.c_contiguous:
        return values.max(axis=0, out=out)
    folded = values.reshape(n // LANE_MAX_FOLD, LANE_MAX_FOLD * width).max(axis=0)
    return folded.reshape(LANE_MAX_FOLD, width).max(axis=0, out=out)


def chain_steps(excess: int, step: int, n_positions: int) -> int:
    """Doubling steps (shifts 1, 2, 4, …) that resolve every in-row I chain that can matter.

    ``excess`` bounds ``F(k) + t.IM`` over the row (F the fresh I values, ``M(i, k−1) + t.MI``); a chain of
    length d from k yields ``F(k) + d·step``, which can matter only while ``F(k) + d·step + t.IM > 0`` (else the
    next row's M takes its 0 start or another predecessor, and no optimal path visits the cell). So chains up
    to ``d = ceil(excess / |step|) − 1`` are needed (every chain when ``step ≥ 0``): ``d.bit_length()`` doubling
    steps, each one array pass. Capped by the row: at most ``(n_positions − 1).bit_length()`` steps, which make
    the scan the full cumulative maximum.

    Until session 20, rows needing more than 8 steps used a blocked full scan instead; its strided passes cost
    2–2.5× more than 9–11 contiguous doubling passes (``benchmarks/RESULTS.md``).
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


@dataclass
class _RowTerms:
    """What the row loop of :func:`_viterbi_rows` reads per query row r (index r = i − 1).

    One profile: Python lists of scalars (every lane alike). Mixed profiles: ``[Lq, F·W]`` arrays, each lane's
    value tiled ``F`` times so that, on buffers viewed as ``[Lt / F, F·W]``, a per-lane add runs inner loops of
    ``F·W`` elements (NumPy adds a broadcast ``[W]`` row with one inner loop of W elements per position).
    Rows where every lane has the same ramps (one profile in a wide bucket; in a mixed batch, rows where the
    profiles' insert transitions agree, e.g. first-iteration profiles, whose transitions are all alike) add
    them as ``[Lt, 1]`` columns computed per :data:`ROW_BLOCK` rows, one pass each instead of three.
    """

    table: np.ndarray           # [Lq, K] gathered scores e + t_i.MM, indexed by the (offset) residue codes
    k_dm: object                # C(i−1) → D(i−1) + t_{i−1}.DM
    k_dd: object                # C(i−1) + k_dd → D(i) in C terms
    im_slope: object            # ramp_im = l·im_slope + im_const: I(i−1, l−1) + t_{i−1}.IM from B(i−1, l−1)
    im_const: object
    mi_slope: object            # ramp_mi = l·mi_slope + mi_const (mi_slope = −t_i.II)
    mi_const: object
    excess: list                # per row, the largest t_i.MI − t_i.MM + t_i.IM over the lanes (chain_steps)
    step: list                  # per row, the largest t_i.II over the lanes (the longest chains)
    mm: object                  # t_i.MM (running best with a backtrace)
    mm_rows: np.ndarray         # [Lq, 1] or [Lq, W] t_i.MM for the best after the last row
    fold: int                   # F (1: buffers used as they are)
    columns: list               # per row: ramps as broadcast [Lt, 1] columns (every lane has the same ramps)
    column_terms: tuple         # (im_slope, im_const, mi_slope, mi_const) lists for the column ramps


def _row_terms(tr: np.ndarray, table: np.ndarray, dtype, *, per_lane: bool, fold: int = 1,
               columns: bool = False) -> _RowTerms:
    """Row terms from transitions ``tr`` (``[Lq + 1, 7]``, or ``[Lq + 1, W, 7]`` per lane)."""
    n_query = table.shape[0]
    mm_out = tr[1:, ..., MM]
    prev_ii = tr[:-1, ..., II]
    prev_shift = np.concatenate([np.zeros_like(tr[:1, ..., MD]), tr[:n_query - 1, ..., MD] - tr[:n_query - 1, ..., MM]])
    k_dm = prev_shift + tr[:-1, ..., DM]
    k_dd = prev_shift + tr[:-1, ..., DD] - tr[:-1, ..., MD] + tr[:-1, ..., MM]
    im_const = tr[:n_query, ..., IM] - prev_ii
    mi_slope = -tr[1:, ..., II]
    mi_const = tr[1:, ..., MI] - tr[1:, ..., MM]
    excess = mi_const + tr[1:, ..., IM]
    step = tr[1:, ..., II]
    if per_lane:
        def lanes(values):
            return np.ascontiguousarray(np.tile(values.astype(dtype), (1, fold)))
        ramps = (prev_ii, im_const, mi_slope, mi_const)
        uniform = np.logical_and.reduce([(v == v[:, :1]).all(axis=1) for v in ramps])
        return _RowTerms(table, lanes(k_dm), lanes(k_dd), *(lanes(v) for v in ramps),
                         excess.max(axis=1).tolist(), step.max(axis=1).tolist(), mm_out.astype(np.int64),
                         mm_out.astype(np.int64), fold, (uniform & columns).tolist(),
                         tuple(v[:, 0].tolist() for v in ramps))
    ramps = (prev_ii.tolist(), im_const.tolist(), mi_slope.tolist(), mi_const.tolist())
    return _RowTerms(table, k_dm.tolist(), k_dd.tolist(), *ramps, excess.tolist(), step.tolist(), mm_out.tolist(),
                     mm_out[:, None], 1, [columns] * n_query, ramps)


def _dtype_for(n_target: int):
    return np.int32 if n_target <= INT32_MAX_TARGET else np.int64


def _check_residues(residues: np.ndarray) -> np.ndarray:
    residues = np.asarray(residues)
    if residues.ndim != 2 or residues.dtype != np.intp:
        raise ValueError("residues must be an intp matrix [Lt, W]")
    return residues


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
    residues = _check_residues(residues)
    n_target, width = residues.shape
    dtype = _dtype_for(n_target)
    tr = scores.transitions.astype(np.int64)
    table = (scores.emission.astype(np.int64) + tr[1:, MM][:, None]).astype(dtype)
    terms = _row_terms(tr, table, dtype, per_lane=False, columns=width >= FULL_RAMP_WIDTH)
    return _viterbi_rows(terms, residues, backtrace=backtrace)


PAD_ROW_II = -SCALE
"""t.II of the rows after a shorter profile's end in a mixed batch (any finite value is exact there: those rows
emit :data:`PAD_SCORE` in every lane of that profile; a negative one keeps their insert chains short)."""


def viterbi_seq_lanes_mixed(scores: Sequence[SequenceScores], lane_profile: np.ndarray, residues: np.ndarray, *,
                            backtrace: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`viterbi_seq_lanes` with a profile per lane: lane w is aligned to ``scores[lane_profile[w]]``.

    Every lane gets what it gets alone against its profile: the same score, best cell and alignment. (Its
    backtrace bytes can differ only in cells no optimal path visits: a row's insert chains are resolved as far
    as the lane needing the longest one requires; see :func:`chain_steps`.) The batch runs ``max Lq`` rows;
    rows after a shorter profile's end emit :data:`PAD_SCORE` (no cell there can reach a lane's best). What it buys: queries with few targets each
    share buckets, so fewer DP rows pay the per-row calls and lanes are padded less. The price: every per-row
    constant is a per-lane array, and the in-row ramps are built every row (four more array passes).
    """
    residues = _check_residues(residues)
    lane_profile = np.asarray(lane_profile, dtype=np.intp)
    n_target, width = residues.shape
    if lane_profile.shape != (width,):
        raise ValueError(f"lane_profile must have one entry per lane ({width}), got shape {lane_profile.shape}")
    dtype = _dtype_for(n_target)
    n_query = max(s.length for s in scores)
    n_codes = scores[0].emission.shape[1]
    tables, transitions = [], []
    for s in scores:
        tr = s.transitions.astype(np.int64)
        padded = np.zeros((n_query + 1, tr.shape[1]), np.int64)
        padded[:, II] = PAD_ROW_II
        padded[:tr.shape[0]] = tr
        emission = np.full((n_query, n_codes), PAD_SCORE, np.int64)
        emission[:s.length] = s.emission
        tables.append(emission + padded[1:, MM][:, None])
        transitions.append(padded)
    table = np.concatenate(tables, axis=1).astype(dtype)
    per_lane = np.stack(transitions)[lane_profile].transpose(1, 0, 2)     # [Lq + 1, W, 7]
    fold = LANE_MAX_FOLD if n_target % LANE_MAX_FOLD == 0 and n_target > LANE_MAX_FOLD else 1
    terms = _row_terms(per_lane, table, dtype, per_lane=True, fold=fold, columns=width >= FULL_RAMP_WIDTH)
    return _viterbi_rows(terms, residues + (lane_profile * n_codes)[None, :], backtrace=backtrace)


def _viterbi_rows(terms: _RowTerms, residues: np.ndarray, *,
                  backtrace: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The row loop shared by :func:`viterbi_seq_lanes` and :func:`viterbi_seq_lanes_mixed`."""
    n_target, width = residues.shape
    dtype = terms.table.dtype
    n_query = terms.table.shape[0]
    gathered_table = terms.table
    k_dm, k_dd = terms.k_dm, terms.k_dd
    positions = np.arange(1, n_target + 1, dtype=np.int64)[None, :]
    if terms.fold > 1:
        folded_width = terms.fold * width

        def folded(x: np.ndarray) -> np.ndarray:
            return x.reshape(-1, folded_width)
    else:
        def folded(x: np.ndarray) -> np.ndarray:
            return x
    use_columns = terms.columns
    if not all(use_columns):
        # ramp_im(r) = l·t_r.II + (t_r.IM − t_r.II), ramp_mi(r) = l·(−t_{r+1}.II) + (t_{r+1}.MI − t_{r+1}.MM)
        lane_positions = np.repeat(positions.T.astype(dtype), width, axis=1)
        ramp_buf = np.empty((n_target, width), dtype)
        lane_positions_f, ramp_f = folded(lane_positions), folded(ramp_buf)
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
    excess_offset, step_list = terms.excess, terms.step
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
        byte = np.empty((PACK_ROWS, n_target, width), dtype=np.uint8)
    for r in range(n_query):
        column = use_columns[r]
        if r % ROW_BLOCK == 0 and any(use_columns[r:r + ROW_BLOCK]):
            rows = slice(r, r + ROW_BLOCK)
            im_slope, im_const, mi_slope, mi_const = (np.array(v[rows])[:, None] for v in terms.column_terms)
            # I(i−1, l−1) + t_{i−1}.IM = B(i−1, l−1) + (l−1)·t_{i−1}.II + t_{i−1}.IM
            ramp_im = (positions * im_slope + im_const).astype(dtype)[:, :, None]
            # B(i, l) = cummax_k (A(i, k−1) − t_i.MM + t_i.MI − k·t_i.II)
            ramp_mi = (positions * mi_slope + mi_const).astype(dtype)[:, :, None]
        ramp_row = r % ROW_BLOCK
        a_new = a_cur[1:]
        # --- X = max(M', I' + im, D' + dm) at (i−1, l−1), in A terms; then A = max(g, g + X)
        np.add(folded(c_row[:-1]), k_dm[r], out=folded(a_new))
        if column:
            np.add(b_row[pad:-1], ramp_im[ramp_row], out=work)
        else:
            np.multiply(lane_positions_f, terms.im_slope[r], out=ramp_f)
            np.add(ramp_f, terms.im_const[r], out=ramp_f)
            np.add(b_row[pad:-1], ramp_buf, out=work)
        if backtrace:
            slot = r % PACK_ROWS
            m_beats_i, d_beats, stop, from_i, from_d = (mask[slot] for mask in beats_rows)
            np.greater(work, a_prev[:-1], out=m_beats_i)
        np.maximum(work, a_prev[:-1], out=work)
        if backtrace:
            np.greater(a_new, work, out=d_beats)
        np.maximum(work, a_new, out=work)
        if backtrace:
            np.less_equal(work, 0, out=stop)
        np.take(gathered_table[r], residues, out=a_new, mode="clip")
        np.add(work, a_new, out=work)
        np.maximum(work, a_new, out=a_new)
        # --- C(i, l) = max(A(i−1, l), C(i−1, l) + k_dd), in place
        c_new = c_row[1:]
        np.add(folded(c_new), k_dd[r], out=folded(c_new))
        if backtrace:
            np.greater(c_new, a_prev[1:], out=from_d)
        np.maximum(c_new, a_prev[1:], out=c_new)
        row_best = lane_max(a_new, out=row_max[r])
        # --- B(i, l) = cummax along l of the fresh values (A(i, l−1) + ramp): a doubling scan over the
        # chain lengths that can matter (with lanes of several profiles: the longest any lane may need)
        steps = chain_steps(int(row_best.max()) + excess_offset[r], step_list[r], n_target)
        fresh = work if backtrace else b_alt[pad + 1:]
        if column:
            np.add(a_cur[:-1], ramp_mi[ramp_row], out=fresh)
        else:
            np.multiply(lane_positions_f, terms.mi_slope[r], out=ramp_f)
            np.add(ramp_f, terms.mi_const[r], out=ramp_f)
            np.add(a_cur[:-1], ramp_buf, out=fresh)
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
            np.subtract(row_best, terms.mm[r], out=shifted_row)
            lanes = np.flatnonzero(np.greater(shifted_row, running, out=improved))
            if lanes.size:
                np.maximum(running, shifted_row, out=running)
                # argmax over the improved lanes only (usually a few): first maximum along l
                if 4 * lanes.size < width:
                    best_l[lanes] = a_new[:, lanes].argmax(axis=0) + 1
                else:
                    best_l[lanes] = a_new.argmax(axis=0)[lanes] + 1
        a_prev, a_cur = a_cur, a_prev
    # best row: the first that reaches the lane's maximum (a later equal row does not improve it)
    shifted = row_max.astype(np.int64) - terms.mm_rows
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
    np.left_shift(from_i.view(np.uint8), 2, out=scratch)
    np.bitwise_or(out, scratch, out=out)
    np.left_shift(from_d.view(np.uint8), 3, out=scratch)
    np.bitwise_or(out, scratch, out=out)


def align_lane_batch(scores: SequenceScores, targets: list[np.ndarray], indices: list[int], *,
                     backtrace: bool) -> list[Hit]:
    """Hits for the targets ``indices`` (one lane each), in the order of ``indices``."""
    residues = pack_targets(targets, indices)
    return _lane_hits(viterbi_seq_lanes(scores, residues, backtrace=backtrace), indices, backtrace)


def align_mixed_batch(scores: Sequence[SequenceScores], owners: np.ndarray, targets: list[np.ndarray],
                      indices: list[int], *, backtrace: bool) -> list[Hit]:
    """:func:`align_lane_batch` with target k aligned to ``scores[owners[k]]``."""
    residues = pack_targets(targets, indices)
    lane_profile = np.asarray(owners, dtype=np.intp)[np.asarray(indices, dtype=np.intp)]
    return _lane_hits(viterbi_seq_lanes_mixed(scores, lane_profile, residues, backtrace=backtrace), indices,
                      backtrace)


def _lane_hits(result, indices: list[int], backtrace: bool) -> list[Hit]:
    best, best_i, best_l, bt = result
    if backtrace:
        return sequence_hits(bt, best, best_i, best_l, indices)
    return [Hit(index, int(best[lane]) / SCALE, int(best[lane])) for lane, index in enumerate(indices)]
