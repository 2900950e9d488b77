"""One-byte backtrace cells and their decoding, for all lanes at once (as HH-suite3 keeps one byte of
backtrace per DP cell instead of one matrix per pair state; Steinegger et al. 2019, BMC Bioinformatics 20:473).

Sequence–profile byte: bits 0-1 the M pointer (0 STOP, 1 M, 2 I, 3 D), bit 2 "I came from I" (else from M),
bit 3 "D came from D" (else from M).

Profile–profile byte (HH-suite3's layout): bits 0-2 the MM pointer (0 STOP, 1 MM, 2 GD, 3 IM, 4 DG, 5 MI),
bits 3-6 "came from itself" for GD, IM, DG, MI (else from MM), bit 7 HH-suite3's cell-off flag (always 0
here: we never switch cells off).

Backtrace matrices are ``uint8 [Lq, Lt, W]`` (query row, target position, lane), 1-based DP cell (i, l)
stored at ``[i - 1, l - 1]``.
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner import compiled
from workflow_lib.aligner.device import compiled_available
from workflow_lib.aligner.scores import SCALE, Hit

SEQ_STATES = "MID"
SEQ_M_POINTER_MASK = 0b11
SEQ_I_BIT = 2
SEQ_D_BIT = 3

HMM_STATES = "MGJDI"
"""State letters by code 0..4 (MM, GD, IM, DG, MI); MM-pointer value p (1..5) names state ``p - 1``."""
HMM_M_POINTER_MASK = 0b111
HMM_SELF_BITS = (None, 3, 4, 5, 6)  # GD, IM, DG, MI
HMM_MOVES = np.array([(1, 1), (0, 1), (0, 1), (1, 0), (1, 0)], dtype=np.int64)  # (di, dj) by state code


def _collect(records_i: list[np.ndarray], records_l: list[np.ndarray], records_s: list[np.ndarray],
             letters: str, lane: int) -> list[tuple[int, int, str]]:
    steps = []
    for i_arr, l_arr, s_arr in zip(records_i, records_l, records_s):
        if s_arr[lane] < 0:
            break
        steps.append((int(i_arr[lane]), int(l_arr[lane]), letters[int(s_arr[lane])]))
    return steps[::-1]


PATH_CHECK_STEPS = 8
""":func:`_paths` tests whether every lane has stopped once per this many steps (a stopped lane stays put)."""


def _paths(bt: np.ndarray, best_i: np.ndarray, best_l: np.ndarray, step_fn,
           n_states: int) -> list[np.ndarray]:
    """Follow pointers from (best_i, best_l) in every lane at once; ``step_fn`` maps arrays (state, byte) to
    (next state, di, dj, stopped). Returns int64 ``[steps, W]`` arrays of i, l and state (−1 once a lane has
    stopped; a lane's path is the prefix before its first −1, from its last cell backwards).

    ``step_fn`` is evaluated once for every (state, byte) pair into two lookup tables over ``state · 256 + byte``:
    the next state's key base and the flat move. A stop leads to an extra state that maps to itself without
    moving, so a step is a gather of the byte, an add, two table gathers and a subtract over the W lanes, with
    no bookkeeping of which lanes are still walking (half the calls of tracking an ``active`` mask)."""
    n_query, n_target, width = bt.shape
    flat = bt.reshape(-1)
    state_grid, byte_grid = np.divmod(np.arange(n_states * 256, dtype=np.int64), 256)
    next_table, di, dl, stop_table = (np.asarray(v, dtype=np.int64)
                                      for v in step_fn(state_grid, byte_grid.astype(np.uint8)))
    stop_table = stop_table.astype(bool)
    stopped = n_states * 256                                     # key base of the extra state
    next_base = np.concatenate([np.where(stop_table, stopped, next_table * 256), np.full(256, stopped)])
    move = np.concatenate([np.where(stop_table, 0, (di * n_target + dl) * width), np.zeros(256, np.int64)])
    best_i, best_l = np.asarray(best_i, dtype=np.int64), np.asarray(best_l, dtype=np.int64)
    cell = (np.maximum(best_i - 1, 0) * n_target + np.maximum(best_l - 1, 0)) * width + np.arange(width)
    base = np.where(best_i > 0, 0, stopped)                      # state M, or stopped from the start
    limit = n_query + n_target + PATH_CHECK_STEPS + 1            # every step moves i or l, the last one stops
    cells = np.empty((limit, width), dtype=np.int64)
    bases = np.empty((limit, width), dtype=np.int64)
    steps = 0
    while steps % PATH_CHECK_STEPS or (base != stopped).any():
        cells[steps] = cell
        bases[steps] = base
        key = base + flat[cell]
        cell -= move[key]
        base = next_base[key]
        steps += 1
    walking = (bases[:steps] != stopped).any(axis=1)
    steps = int(walking.nonzero()[0][-1]) + 1 if walking.any() else 0  # the steps taken while a lane walked
    if steps == 0:
        empty = np.zeros((0, width), dtype=np.int64)
        return [empty, empty, empty]
    cells_array, states = cells[:steps], bases[:steps] // 256
    states[states == n_states] = -1
    return [cells_array // (n_target * width) + 1, (cells_array // width) % n_target + 1, states]


def _seq_step(state: np.ndarray, byte: np.ndarray):
    pointer = (byte & SEQ_M_POINTER_MASK).astype(np.int64)
    from_self_i = ((byte >> SEQ_I_BIT) & 1).astype(np.int64)
    from_self_d = ((byte >> SEQ_D_BIT) & 1).astype(np.int64)
    is_m, is_i = state == 0, state == 1
    next_state = np.where(is_m, pointer - 1, np.where(is_i, np.where(from_self_i, 1, 0), np.where(from_self_d, 2, 0)))
    di = np.where(is_i, 0, 1)
    dl = np.where(state == 2, 0, 1)
    stopped = is_m & (pointer == 0)
    return next_state, di, dl, stopped


def _hmm_step(state: np.ndarray, byte: np.ndarray):
    pointer = (byte & HMM_M_POINTER_MASK).astype(np.int64)
    self_bit = np.zeros_like(state)
    for code, bit in enumerate(HMM_SELF_BITS):
        if bit is not None:
            self_bit = np.where(state == code, (byte >> bit) & 1, self_bit)
    is_m = state == 0
    next_state = np.where(is_m, pointer - 1, np.where(self_bit == 1, state, 0))
    di = HMM_MOVES[state, 0]
    dl = HMM_MOVES[state, 1]
    stopped = is_m & (pointer == 0)
    return next_state, di, dl, stopped


def sequence_hits(bt: np.ndarray, best: np.ndarray, best_i: np.ndarray, best_l: np.ndarray,
                  indices: list[int]) -> list[Hit]:
    """Hits (with alignments) of a sequence–profile lane batch; ``indices`` are the targets' input indices. The
    paths are followed by the compiled tracer where numba is installed (:mod:`workflow_lib.aligner.compiled`)."""
    if compiled_available():
        return _lane_hits(compiled.sequence_paths_compiled(bt, best_i, best_l), best, indices, SEQ_STATES)
    return _lane_hits(_paths(bt, best_i, best_l, _seq_step, len(SEQ_STATES)), best, indices, SEQ_STATES)


def sequence_hits_from_states(states: np.ndarray, best: np.ndarray, best_i: np.ndarray, best_l: np.ndarray,
                              indices: list[int]) -> list[Hit]:
    """:func:`sequence_hits` from the path states alone, as a device traceback writes them: ``states`` uint8
    ``[steps, W]``, lane w's path read backwards from its best cell (0 M, 1 I, 2 D; 255 once it has stopped).
    The cells are recovered from the moves (M: (−1, −1), I: (0, −1), D: (−1, 0)), so the hits equal
    :func:`sequence_hits` on the backtrace bytes the states were read from."""
    codes = np.asarray(states).astype(np.int64)
    codes[codes == 255] = -1
    best_i, best_l = np.asarray(best_i, dtype=np.int64), np.asarray(best_l, dtype=np.int64)
    if codes.shape[0] == 0:
        empty = np.zeros((0, codes.shape[1]), dtype=np.int64)
        return _lane_hits([empty, empty, empty], best, indices, SEQ_STATES)
    di = (codes != 1) & (codes >= 0)
    dl = (codes != 2) & (codes >= 0)
    # the cell of step k: the best cell less the moves of steps 0 .. k−1
    rows = best_i[None, :] - np.cumsum(di, axis=0) + di
    positions = best_l[None, :] - np.cumsum(dl, axis=0) + dl
    return _lane_hits([rows, positions, codes], best, indices, SEQ_STATES)


def _lane_hits(records: list[np.ndarray], best: np.ndarray, indices: list[int], letters: str) -> list[Hit]:
    """The :class:`Hit` of every lane from the step records of :func:`_paths` (state code 0 = match).

    The same hits as :func:`~workflow_lib.aligner.scores.hit_from_path` on each lane's :func:`_collect` steps,
    with the per-step work done on ``[steps, W]`` arrays: each lane's path is a prefix of its records (a lane
    stops for good), reversed into forward order, so a lane costs a few array slices instead of a Python loop
    over its steps."""
    # [W, steps], each lane's path read backwards from its last cell
    rows, positions, states = (np.ascontiguousarray(record.T) for record in records)
    lengths = (states >= 0).sum(axis=1)
    codes = np.frombuffer(letters.encode("ascii"), dtype=np.uint8)[np.maximum(states, 0)]
    hits = []
    for lane, index in enumerate(indices):
        raw, n = int(best[lane]), int(lengths[lane])
        if n == 0:
            hits.append(Hit(index, raw / SCALE, raw))
            continue
        lane_rows, lane_positions = rows[lane, n - 1::-1], positions[lane, n - 1::-1]
        match = states[lane, n - 1::-1] == 0
        pairs = np.empty((int(match.sum()), 2), dtype=np.int32)
        np.subtract(lane_rows[match], 1, out=pairs[:, 0], casting="unsafe")
        np.subtract(lane_positions[match], 1, out=pairs[:, 1], casting="unsafe")
        hits.append(Hit(index, raw / SCALE, raw, int(lane_rows[0]) - 1, int(lane_rows[-1]),
                        int(lane_positions[0]) - 1, int(lane_positions[-1]),
                        codes[lane, n - 1::-1].tobytes().decode("ascii"), pairs))
    return hits


def profile_paths(bt: np.ndarray, best_i: np.ndarray, best_l: np.ndarray) -> list[list[tuple[int, int, str]]]:
    """Forward paths ``[(i, j, letter), ...]`` of a profile–profile lane batch."""
    records = _paths(bt, best_i, best_l, _hmm_step, len(HMM_STATES))
    return [_collect(*records, HMM_STATES, lane) for lane in range(best_i.shape[0])]
