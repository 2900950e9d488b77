"""The sequence–profile lane Viterbi in torch, so that a GPU node can run it (lanes of targets as in HH-suite3,
Steinegger et al. 2019, BMC Bioinformatics 20:473; recurrences, tie-breaking and backtrace bytes as in
:mod:`workflow_lib.aligner.reference` and :mod:`workflow_lib.aligner.backtrace`).

Same lane layout as :mod:`workflow_lib.aligner.viterbi_seq` (rows = query columns, ``[Lt + 1, W]`` per row,
int32 milli-bits; int64 above :data:`~workflow_lib.aligner.viterbi_seq.INT32_MAX_TARGET`), written for few
kernel launches and no host synchronisation inside the row loop rather than for NumPy's call overhead:

- M, D as in the reference (unshifted), the local start as ``max(·, 0)``;
- the in-row I chain as one ``torch.cummax`` over the shifted fresh values ``M(i, l−1) + t.MI − l·t.II``
  (exact in integers; the full chain, no bound needed);
- the best cell (first maximum in row-major order) with ``torch.where`` updates per row;
- the backtrace byte per cell packed on the device, copied to the host once at the end and decoded by
  :func:`workflow_lib.aligner.backtrace.sequence_hits` (shared with the NumPy kernel).

:func:`resolve_device` picks the backend: ``None`` = CUDA when ``torch.cuda.is_available()``, else NumPy;
``"numpy"`` forces NumPy; any torch device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``) runs this kernel
there. The tests run it on CPU tensors and require scores and alignments equal to the NumPy kernel's.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np

from workflow_lib.aligner import triton_kernels
from workflow_lib.aligner.backtrace import sequence_hits, sequence_hits_from_states
from workflow_lib.aligner.device import cuda_available
from workflow_lib.aligner.scores import NEG_INF, Hit, SequenceScores
from workflow_lib.aligner.transitions import DD, DM, II, IM, MD, MI, MM

NUMPY = "numpy"
TORCH_LANE_CELLS = 1 << 22
"""Cells per DP row on a GPU (4M: enough work per launch; far above the CPU cache-sized rows)."""
TORCH_MAX_LANES = 1 << 14
TORCH_BACKTRACE_BYTES = 1 << 30
"""Backtrace bytes per bucket on a GPU (copied to host memory once per bucket)."""

def resolve_device(device: str | None) -> str:
    """``None`` → ``"cuda"`` when available, else :data:`NUMPY`; other values are returned as given."""
    if device is None:
        return "cuda" if cuda_available() else NUMPY
    if not isinstance(device, str) or not device:
        raise ValueError(f"device must be None, 'numpy' or a torch device string, not {device!r}")
    return device


def viterbi_seq_lanes_torch(scores: SequenceScores, residues: np.ndarray, *, backtrace: bool,
                            device: str = "cpu") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Torch twin of :func:`workflow_lib.aligner.viterbi_seq.viterbi_seq_lanes` (same inputs and outputs;
    ``residues`` intp ``[Lt, W]`` padded with ``PAD_CODE``, any ``Lt``): one profile in every lane."""
    residues = np.asarray(residues)
    if residues.ndim != 2:
        raise ValueError("residues must be a matrix [Lt, W]")
    return viterbi_mixed_lanes_torch([scores], np.zeros(residues.shape[1], dtype=np.int64), residues,
                                     backtrace=backtrace, device=device)


KERNELS = ("auto", "torch", "triton")
KERNEL_VARIABLE = "TRACKFOLD_VITERBI_KERNEL"
"""Environment variable choosing the device kernel: ``auto`` (the fused Triton kernel on CUDA when Triton is
installed, else the torch one), ``torch`` or ``triton``."""


def kernel_choice(kernel: str | None, device: str) -> str:
    """``torch`` or ``triton`` for ``device`` (``kernel`` None: from :data:`KERNEL_VARIABLE`, default auto)."""
    kernel = kernel or os.environ.get(KERNEL_VARIABLE, "auto")
    if kernel not in KERNELS:
        raise ValueError(f"{KERNEL_VARIABLE} must be one of {', '.join(KERNELS)}, got {kernel!r}")
    if kernel == "auto":
        return "triton" if device.startswith("cuda") and triton_kernels.triton_available() else "torch"
    return kernel


def stack_scores(scores_list: list[SequenceScores]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Profiles stacked for the mixed-lane kernels: emissions int64 ``[Lq, P · codes]``, transitions int64
    ``[Lq + 1, 7, P]`` (zero past each profile's end) and the lengths ``[P]``; ``Lq`` is the longest."""
    n_profiles = len(scores_list)
    lengths = np.array([s.length for s in scores_list], dtype=np.int64)
    n_query = int(lengths.max())
    n_codes = scores_list[0].emission.shape[1]
    emission = np.zeros((n_query, n_profiles * n_codes), dtype=np.int64)
    transitions = np.zeros((n_query + 1, 7, n_profiles), dtype=np.int64)
    for k, s in enumerate(scores_list):
        emission[:s.length, k * n_codes:(k + 1) * n_codes] = s.emission
        transitions[:s.length + 1, :, k] = s.transitions
    return emission, transitions, lengths


def _use_triton(kernel: str | None, device: str, n_target: int) -> bool:
    """The fused kernel for this call: chosen (:func:`kernel_choice`) and int32 scores (``n_target``)."""
    from workflow_lib.aligner.viterbi_seq import INT32_MAX_TARGET
    return kernel_choice(kernel, device) == "triton" and n_target <= INT32_MAX_TARGET


def viterbi_mixed_lanes_torch(scores_list: list[SequenceScores], lane_profile: np.ndarray, residues: np.ndarray, *,
                              backtrace: bool, device: str = "cpu", kernel: str | None = None
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The lane Viterbi with a profile per lane: lane ``w`` aligns ``residues[:, w]`` to
    ``scores_list[lane_profile[w]]``, so one call serves the pairs of many queries (on a GPU a DP row costs its
    ~30 launches whatever the lanes hold, so many queries' lanes in one call divide that cost among them).

    The profiles the lanes use are stacked and padded to the longest of them, ``Lq``; rows past a lane's own
    profile are set to ``NEG_INF`` (they can neither start nor end an alignment, and its backtrace never
    reaches them). Each lane's score, best cell and backtrace bytes are those of its profile alone. Returns
    ``best`` int64 ``[W]``, ``best_i``/``best_l`` ``[W]`` and the backtrace bytes ``uint8 [Lq, Lt, W]`` (or None).

    ``kernel`` (:func:`kernel_choice`): ``triton`` runs the fused kernel of
    :mod:`workflow_lib.aligner.triton_kernels` (int32 scores only; longer targets take the torch kernel).
    """
    import torch

    from workflow_lib.aligner.viterbi_seq import INT32_MAX_TARGET

    residues = np.asarray(residues)
    lane_profile = np.asarray(lane_profile, dtype=np.int64)
    if residues.ndim != 2 or lane_profile.shape != (residues.shape[1],):
        raise ValueError("residues must be a matrix [Lt, W] and lane_profile a vector [W]")
    if not scores_list or lane_profile.size and not 0 <= int(lane_profile.min()) <= int(lane_profile.max()) < len(
            scores_list):
        raise ValueError("lane_profile must index scores_list")
    # only the profiles these lanes use: the row loop runs to the longest of them, not of the whole list
    used, lane_profile = np.unique(lane_profile, return_inverse=True)
    scores_list = [scores_list[k] for k in used]
    n_target, width = residues.shape
    n_profiles = len(scores_list)
    emission_np, transitions_np, lengths = stack_scores(scores_list)
    n_query, n_codes = int(lengths.max()), scores_list[0].emission.shape[1]
    if _use_triton(kernel, device, n_target):
        return triton_kernels.viterbi_mixed_lanes_triton(emission_np, transitions_np, lengths, lane_profile,
                                                         residues, backtrace=backtrace, device=device)
    dtype = torch.int32 if n_target <= INT32_MAX_TARGET else torch.int64
    dev = torch.device(device)
    emission = torch.as_tensor(emission_np, device=dev).to(dtype)
    tr = torch.as_tensor(transitions_np, device=dev).to(dtype)
    lanes = torch.as_tensor(lane_profile, device=dev)
    code_index = torch.as_tensor(residues.astype(np.int64), device=dev) + lanes * n_codes   # [Lt, W]
    lane_length = torch.as_tensor(lengths[lane_profile], device=dev)
    shortest = int(lengths[lane_profile].min()) if width else n_query
    positions = torch.arange(1, n_target + 1, device=dev, dtype=dtype)[:, None]
    zero = torch.zeros((), dtype=dtype, device=dev)
    neg = torch.full((), NEG_INF, dtype=dtype, device=dev)
    m_prev = torch.full((n_target + 1, width), NEG_INF, dtype=dtype, device=dev)
    i_prev = m_prev.clone()
    d_prev = m_prev.clone()
    best = torch.full((width,), np.iinfo(np.int64).min, dtype=torch.int64, device=dev)
    best_i = torch.zeros(width, dtype=torch.int64, device=dev)
    best_l = torch.zeros(width, dtype=torch.int64, device=dev)
    bt = torch.empty((n_query, n_target, width), dtype=torch.uint8, device=dev) if backtrace else None
    boundary = torch.full((1, width), NEG_INF, dtype=dtype, device=dev)
    # per-lane transitions [7, W] (one gather per row), or [7, 1] broadcast when every lane has one profile
    row_transitions = ((lambda r: tr[r]) if n_profiles == 1 else (lambda r: tr[r].index_select(1, lanes)))
    tc = row_transitions(0)
    for r in range(n_query):
        tp, tc = tc, row_transitions(r + 1)
        # M(i, l) = e + max(0, M' + MM, I' + IM, D' + DM) at (i−1, l−1); ties keep the earlier candidate
        from_m = m_prev[:-1] + tp[MM]
        from_i = i_prev[:-1] + tp[IM]
        from_d = d_prev[:-1] + tp[DM]
        m_beats_i = from_i > from_m
        value = torch.maximum(from_m, from_i)
        d_beats = from_d > value
        value = torch.maximum(value, from_d)
        stop = value <= 0
        m_new = emission[r][code_index] + torch.maximum(value, zero)
        # D(i, l) = max(M(i−1, l) + MD, D(i−1, l) + DD)
        d_fresh = m_prev[1:] + tp[MD]
        d_extend = d_prev[1:] + tp[DD]
        d_self = d_extend > d_fresh
        d_new = torch.maximum(d_fresh, d_extend)
        if r >= shortest:  # rows past some lanes' profiles: nothing starts, ends or passes there
            inside = lane_length > r
            m_new = torch.where(inside, m_new, neg)
            d_new = torch.where(inside, d_new, neg)
        # I(i, l) = l·II + cummax_k (M(i, k−1) + MI − k·II)
        m_left = torch.cat([boundary, m_new[:-1]])
        shifted = m_left + tc[MI] - positions * tc[II]
        running = torch.cummax(shifted, dim=0).values
        i_self = running > shifted
        i_new = running + positions * tc[II]
        if r >= shortest:
            i_new = torch.where(inside, i_new, neg)
        if backtrace:
            pointer = torch.where(d_beats, 3, torch.where(m_beats_i, 2, 1)).to(torch.uint8)
            pointer = torch.where(stop, torch.zeros_like(pointer), pointer)
            bt[r] = pointer | (i_self.to(torch.uint8) << 2) | (d_self.to(torch.uint8) << 3)
        row_best, row_arg = m_new.max(dim=0)
        row_best = row_best.to(torch.int64)
        improved = row_best > best
        best = torch.where(improved, row_best, best)
        best_i = torch.where(improved, torch.full_like(best_i, r + 1), best_i)
        best_l = torch.where(improved, row_arg.to(torch.int64) + 1, best_l)
        m_prev = torch.cat([boundary, m_new])
        i_prev = torch.cat([boundary, i_new])
        d_prev = torch.cat([boundary, d_new])
    bt_host = bt.cpu().numpy() if backtrace else None
    return best.cpu().numpy(), best_i.cpu().numpy(), best_l.cpu().numpy(), bt_host


@contextmanager
def _cpu_threads(device: str):
    """One intra-op thread while the kernel runs on a CPU device: its row tensors are small, and on a busy
    machine torch's OpenMP threads stall each of the ~20 operations per row (measured: an int32 add of 70k
    elements took 26 ms with 2 threads on a loaded 2-core machine, 18 µs with 1). GPU devices: unchanged."""
    import torch
    if not device.startswith("cpu"):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def align_mixed_batch_torch(scores_list: list[SequenceScores], pair_profile: np.ndarray, targets: list[np.ndarray],
                            indices: list[int], *, backtrace: bool, device: str) -> list[Hit]:
    """Hits for the pairs ``indices`` (target ``targets[k]`` against ``scores_list[pair_profile[k]]``, one lane
    each, in that order), computed with :func:`viterbi_mixed_lanes_torch`; ``Hit.index`` is the pair's index.
    With the Triton kernel the alignments are traced on the device (only the paths are copied back)."""
    from workflow_lib.aligner.viterbi_seq import pack_targets
    residues = pack_targets(targets, indices)
    lanes = np.asarray(pair_profile)[indices]
    with _cpu_threads(device):
        if backtrace and _use_triton(None, device, residues.shape[0]):
            used, lanes = np.unique(lanes, return_inverse=True)   # as viterbi_mixed_lanes_torch: the bucket's profiles
            best, best_i, best_l, states = triton_kernels.viterbi_mixed_lanes_triton(
                *stack_scores([scores_list[k] for k in used]), lanes, residues, backtrace=True, device=device,
                trace=True)
            return sequence_hits_from_states(states, best, best_i, best_l, indices)
        best, best_i, best_l, bt = viterbi_mixed_lanes_torch(scores_list, lanes, residues, backtrace=backtrace,
                                                             device=device)
    if backtrace:
        return sequence_hits(bt, best, best_i, best_l, indices)
    return [Hit(index, int(best[lane]) / 1000.0, int(best[lane])) for lane, index in enumerate(indices)]


def align_lane_batch_torch(scores: SequenceScores, targets: list[np.ndarray], indices: list[int], *,
                           backtrace: bool, device: str) -> list[Hit]:
    """Hits for the targets ``indices`` (one lane each, in that order), computed with the torch kernel."""
    from workflow_lib.aligner.viterbi_seq import pack_targets
    residues = pack_targets(targets, indices)
    with _cpu_threads(device):
        best, best_i, best_l, bt = viterbi_seq_lanes_torch(scores, residues, backtrace=backtrace, device=device)
    if backtrace:
        return sequence_hits(bt, best, best_i, best_l, indices)
    return [Hit(index, int(best[lane]) / 1000.0, int(best[lane])) for lane, index in enumerate(indices)]
