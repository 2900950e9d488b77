"""One-byte backtrace cells and their decoding, for all lanes at once (seed "SIMD and Vectorized Viterbi
Algorithm": "we condense all backtracing information into a single N_q x N_t matrix where each entry is a
single byte").

Sequence–profile byte: bits 0-1 the M pointer (0 STOP, 1 M, 2 I, 3 D), bit 2 "I came from I" (else from M),
bit 3 "D came from D" (else from M).

Profile–profile byte (the seed's layout): bits 0-2 the MM pointer (0 STOP, 1 MM, 2 GD, 3 IM, 4 DG, 5 MI),
bits 3-6 "came from itself" for GD, IM, DG, MI (else from MM), bit 7 the cell-off flag of the seed (always 0
here: we never switch cells off).

Backtrace matrices are ``uint8 [Lq, Lt, W]`` (query row, target position, lane), 1-based DP cell (i, l)
stored at ``[i - 1, l - 1]``.
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner.scores import Hit, hit_from_path

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


def _paths(bt: np.ndarray, best_i: np.ndarray, best_l: np.ndarray, step_fn) -> list[list[tuple[int, int, str]]]:
    """Follow pointers from (best_i, best_l) in every lane at once; ``step_fn`` maps (state, byte) to
    (next state, di, dj, stopped)."""
    width = best_i.shape[0]
    lanes = np.arange(width)
    i = best_i.astype(np.int64).copy()
    l = best_l.astype(np.int64).copy()
    state = np.zeros(width, dtype=np.int64)
    active = i > 0
    rec_i, rec_l, rec_s = [], [], []
    while active.any():
        rec_i.append(i.copy())
        rec_l.append(l.copy())
        rec_s.append(np.where(active, state, -1))
        byte = bt[np.maximum(i - 1, 0), np.maximum(l - 1, 0), lanes]
        next_state, di, dl, stopped = step_fn(state, byte)
        active &= ~stopped
        i = np.where(active, i - di, i)
        l = np.where(active, l - dl, l)
        state = np.where(active, next_state, state)
    return [rec_i, rec_l, rec_s]


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
    """Hits (with alignments) of a sequence–profile lane batch; ``indices`` are the targets' input indices."""
    records = _paths(bt, best_i, best_l, _seq_step)
    return [hit_from_path(index, int(best[lane]), _collect(*records, SEQ_STATES, lane))
            for lane, index in enumerate(indices)]


def profile_paths(bt: np.ndarray, best_i: np.ndarray, best_l: np.ndarray) -> list[list[tuple[int, int, str]]]:
    """Forward paths ``[(i, j, letter), ...]`` of a profile–profile lane batch."""
    records = _paths(bt, best_i, best_l, _hmm_step)
    return [_collect(*records, HMM_STATES, lane) for lane in range(best_i.shape[0])]
