"""The sequence–profile lane Viterbi as one fused GPU kernel (Triton), for CUDA devices (lanes of targets as in
HH-suite3, Steinegger et al. 2019, BMC Bioinformatics 20:473; recurrences, tie-breaking and backtrace bytes as in
:mod:`workflow_lib.aligner.reference` and :mod:`workflow_lib.aligner.torch_kernels`).

The torch kernel issues ~30 tensor operations per DP row, each reading and writing whole ``[Lt, W]`` rows of
device memory (both kernels' speed: benchmarks/RESULTS.md, "Homology search on a GPU"). Here one GPU thread
owns one lane and walks its DP matrix row by row, cell by cell, with the diagonal and left neighbours in
registers; only the previous row's M, I, D values go through memory (one load and one store each per cell,
contiguous across the lanes of a block), plus the residue code, its emission score, and the backtrace byte when
asked for. Lanes may use different profiles (``lane_profile``), so one launch serves the pairs of many queries.

The I state runs as the plain recurrence ``I(i, l) = max(M(i, l−1) + MI, I(i, l−1) + II)``, equal in integers
to the torch kernel's cummax form (ties keep M, i.e. the "I came from I" bit is set only when the chain is
strictly better); the best cell is the first maximum in row-major order; rows past a lane's profile are
``NEG_INF``, as in :func:`~workflow_lib.aligner.torch_kernels.viterbi_mixed_lanes_torch`.

Triton ships with torch's CUDA builds; without it (or for scores that need int64) the torch kernel runs.
``TRITON_INTERPRET=1`` runs this kernel on the CPU (slowly): the tests use it to check it against NumPy on
machines without a GPU.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np

from workflow_lib.aligner.device import cuda_available
from workflow_lib.aligner.scores import NEG_INF
from workflow_lib.aligner.transitions import DD, DM, II, IM, MD, MI, MM

BLOCK_LANES = 64
"""Lanes per Triton program (one thread each)."""
CHAIN_START = -(2 ** 30)
"""I(i, 0): below ``NEG_INF + MI`` for any transition score, so the chain starts from M(i, 0) as in the
cummax form."""

_KERNEL = None
_TRACEBACK = None
STOPPED = 255
"""State code of a traceback step after the lane's path has ended."""


def triton_available() -> bool:
    """Triton importable, and either a CUDA device or the interpreter (``TRITON_INTERPRET=1``) to run it on."""
    if importlib.util.find_spec("triton") is None:
        return False
    if os.environ.get("TRITON_INTERPRET") == "1":
        return True
    return cuda_available()


def _build_kernel():
    """The jitted kernel, built on first use (``TRITON_INTERPRET`` is read then)."""
    import triton
    import triton.language as tl

    @triton.jit
    def viterbi_kernel(emission, transitions, lane_profile, lane_length, residues, m_row, i_row, d_row,
                       best_out, best_i_out, best_l_out, backtrace, n_query, n_target, width, n_codes, n_profiles,
                       NEG: tl.constexpr, CHAIN: tl.constexpr, T_MM: tl.constexpr, T_MI: tl.constexpr,
                       T_MD: tl.constexpr, T_IM: tl.constexpr, T_II: tl.constexpr, T_DM: tl.constexpr,
                       T_DD: tl.constexpr, BLOCK: tl.constexpr, BACKTRACE: tl.constexpr):
        lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        valid = lanes < width
        profile = tl.load(lane_profile + lanes, mask=valid, other=0)
        length = tl.load(lane_length + lanes, mask=valid, other=0)
        best = tl.full([BLOCK], -2147483647, tl.int32)
        best_i = tl.full([BLOCK], 0, tl.int32)
        best_l = tl.full([BLOCK], 0, tl.int32)
        neg = tl.full([BLOCK], NEG, tl.int32)
        for i in range(0, n_query):
            inside = valid & (i < length)
            t_prev = transitions + (i * 7) * n_profiles + profile        # [Lq + 1, 7, P]: row i, then i + 1
            t_cur = transitions + ((i + 1) * 7) * n_profiles + profile
            mm = tl.load(t_prev + T_MM * n_profiles, mask=valid, other=0)
            im = tl.load(t_prev + T_IM * n_profiles, mask=valid, other=0)
            dm = tl.load(t_prev + T_DM * n_profiles, mask=valid, other=0)
            md = tl.load(t_prev + T_MD * n_profiles, mask=valid, other=0)
            dd = tl.load(t_prev + T_DD * n_profiles, mask=valid, other=0)
            mi = tl.load(t_cur + T_MI * n_profiles, mask=valid, other=0)
            ii = tl.load(t_cur + T_II * n_profiles, mask=valid, other=0)
            row_emission = emission + i * (n_profiles * n_codes) + profile * n_codes
            m_diag = neg
            i_diag = neg
            d_diag = neg
            m_left = neg
            i_left = tl.full([BLOCK], CHAIN, tl.int32)
            for l in range(1, n_target + 1):
                cell = l * width + lanes
                m_up = tl.load(m_row + cell, mask=valid, other=NEG)
                i_up = tl.load(i_row + cell, mask=valid, other=NEG)
                d_up = tl.load(d_row + cell, mask=valid, other=NEG)
                code = tl.load(residues + (l - 1) * width + lanes, mask=valid, other=0)
                score = tl.load(row_emission + code, mask=valid, other=0)
                # M(i, l) = e + max(0, M' + MM, I' + IM, D' + DM) at (i−1, l−1); ties keep the earlier candidate
                from_m = m_diag + mm
                from_i = i_diag + im
                from_d = d_diag + dm
                m_beats_i = from_i > from_m
                value = tl.maximum(from_m, from_i)
                d_beats = from_d > value
                value = tl.maximum(value, from_d)
                m_new = tl.where(inside, score + tl.maximum(value, 0), neg)
                # D(i, l) = max(M(i−1, l) + MD, D(i−1, l) + DD)
                d_fresh = m_up + md
                d_extend = d_up + dd
                d_self = d_extend > d_fresh
                d_new = tl.where(inside, tl.maximum(d_fresh, d_extend), neg)
                # I(i, l) = max(M(i, l−1) + MI, I(i, l−1) + II)
                i_open = m_left + mi
                i_extend = i_left + ii
                i_self = i_extend > i_open
                i_new = tl.where(inside, tl.maximum(i_open, i_extend), neg)
                if BACKTRACE:
                    pointer = tl.where(d_beats, 3, tl.where(m_beats_i, 2, 1))
                    pointer = tl.where(value <= 0, 0, pointer)
                    byte = pointer | (i_self.to(tl.int32) << 2) | (d_self.to(tl.int32) << 3)
                    tl.store(backtrace + (i * n_target + (l - 1)).to(tl.int64) * width + lanes, byte.to(tl.uint8),
                             mask=valid)
                improved = m_new > best
                best = tl.where(improved, m_new, best)
                best_i = tl.where(improved, i + 1, best_i)
                best_l = tl.where(improved, l, best_l)
                tl.store(m_row + cell, m_new, mask=valid)
                tl.store(i_row + cell, i_new, mask=valid)
                tl.store(d_row + cell, d_new, mask=valid)
                m_diag = m_up
                i_diag = i_up
                d_diag = d_up
                m_left = m_new
                i_left = i_new
        tl.store(best_out + lanes, best, mask=valid)
        tl.store(best_i_out + lanes, best_i, mask=valid)
        tl.store(best_l_out + lanes, best_l, mask=valid)

    return viterbi_kernel


def _build_traceback():
    """The jitted traceback kernel (one thread per lane walks its path through the device's byte matrix)."""
    import triton
    import triton.language as tl

    @triton.jit
    def traceback_kernel(backtrace, best_i_in, best_l_in, states_out, n_target, width, n_steps,
                         STOP: tl.constexpr, BLOCK: tl.constexpr):
        lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        valid = lanes < width
        i = tl.load(best_i_in + lanes, mask=valid, other=0)
        l = tl.load(best_l_in + lanes, mask=valid, other=0)
        active = valid & (i > 0)
        state = tl.full([BLOCK], 0, tl.int32)
        for step in range(0, n_steps):
            cell = ((tl.maximum(i, 1) - 1) * n_target + tl.maximum(l, 1) - 1).to(tl.int64) * width + lanes
            byte = tl.load(backtrace + cell, mask=active, other=0).to(tl.int32)
            tl.store(states_out + (step * width).to(tl.int64) + lanes, tl.where(active, state, STOP).to(tl.uint8),
                     mask=valid)
            pointer = byte & 3
            stop = (state == 0) & (pointer == 0)
            following = tl.where(state == 0, pointer - 1,
                                 tl.where(state == 1, ((byte >> 2) & 1) * 1, ((byte >> 3) & 1) * 2))
            active = active & (stop == 0)
            i = tl.where(active & (state != 1), i - 1, i)
            l = tl.where(active & (state != 2), l - 1, l)
            state = tl.where(active, following, state)

    return traceback_kernel


def viterbi_mixed_lanes_triton(emission_np: np.ndarray, transitions_np: np.ndarray, lengths: np.ndarray,
                               lane_profile: np.ndarray, residues: np.ndarray, *, backtrace: bool, device: str,
                               block: int | None = None, trace: bool = False
                               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The fused kernel on stacked profiles: ``emission_np`` int ``[Lq, P · codes]``, ``transitions_np`` int
    ``[Lq + 1, 7, P]``, ``lengths`` ``[P]``, ``lane_profile`` ``[W]``, ``residues`` ``[Lt, W]`` (int32 scores:
    the caller checks the target length). Returns what
    :func:`~workflow_lib.aligner.torch_kernels.viterbi_mixed_lanes_torch` returns; with ``trace`` the fourth
    item is instead each lane's path states ``uint8 [steps, W]`` (read backwards from the best cell, 0 M, 1 I,
    2 D, :data:`STOPPED` after its end), traced on the device: the byte matrix (up to a gigabyte per bucket)
    never leaves it, only ``Lq + Lt`` bytes per lane do (decoded by
    :func:`~workflow_lib.aligner.backtrace.sequence_hits_from_states`)."""
    import torch

    global _KERNEL, _TRACEBACK
    if _KERNEL is None:
        _KERNEL = _build_kernel()
    block = block or BLOCK_LANES
    n_target, width = residues.shape
    n_query = emission_np.shape[0]
    n_profiles = transitions_np.shape[2]
    n_codes = emission_np.shape[1] // n_profiles
    dev = torch.device(device)

    def tensor(array, dtype):
        return torch.as_tensor(np.ascontiguousarray(array), device=dev).to(dtype)

    emission = tensor(emission_np, torch.int32)
    transitions = tensor(transitions_np, torch.int32)
    profile = tensor(lane_profile, torch.int32)
    length = tensor(np.asarray(lengths)[lane_profile], torch.int32)
    codes = tensor(residues, torch.int32)
    rows = [torch.full((n_target + 1, width), NEG_INF, dtype=torch.int32, device=dev) for _ in range(3)]
    best = torch.empty(width, dtype=torch.int32, device=dev)
    best_i = torch.empty(width, dtype=torch.int32, device=dev)
    best_l = torch.empty(width, dtype=torch.int32, device=dev)
    bt = torch.empty((n_query, n_target, width) if backtrace else (1,), dtype=torch.uint8, device=dev)
    grid = ((width + block - 1) // block,)
    _KERNEL[grid](emission, transitions, profile, length, codes, *rows, best, best_i, best_l, bt,
                  n_query, n_target, width, n_codes, n_profiles,
                  NEG=NEG_INF, CHAIN=CHAIN_START, T_MM=MM, T_MI=MI, T_MD=MD, T_IM=IM, T_II=II, T_DM=DM, T_DD=DD,
                  BLOCK=block, BACKTRACE=backtrace, num_warps=max(1, min(4, block // 32)))
    best_np, best_i_np, best_l_np = (x.cpu().numpy().astype(np.int64) for x in (best, best_i, best_l))
    if not backtrace:
        return best_np, best_i_np, best_l_np, None
    if not trace:
        return best_np, best_i_np, best_l_np, bt.cpu().numpy()
    if _TRACEBACK is None:
        _TRACEBACK = _build_traceback()
    n_steps = int((best_i_np + best_l_np).max()) if width else 0   # a path makes at most i + l − 1 steps
    states = torch.empty((n_steps, width), dtype=torch.uint8, device=dev)
    if n_steps:
        _TRACEBACK[grid](bt, best_i, best_l, states, n_target, width, n_steps, STOP=STOPPED, BLOCK=block,
                         num_warps=max(1, min(4, block // 32)))
    return best_np, best_i_np, best_l_np, states.cpu().numpy()
