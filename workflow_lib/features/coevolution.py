"""Co-evolution pair features from weighted single and pair frequencies, with the average product correction.

Co-evolved columns of an MSA show correlated substitutions (Morcos et al. 2011, PNAS 108:E1293; Jones et al.
2012, Bioinformatics 28:184), the signal RoseTTAFold's MSA2Pair block learns from (Baek et al. 2021, Science
373:871); these two classic statistics give the pair track that signal at the start.

With normalised sequence weights ``w`` (Σ w = 1), states ``s`` (20 aa + gap-or-X, see
:mod:`workflow_lib.features.states`) and a pseudocount fraction ``λ`` (default 0: raw weighted frequencies):

- ``f_i(a)    = (1 − λ) Σ_n w_n [s_ni = a] + λ / 21``
- ``f_ij(a,b) = (1 − λ) Σ_n w_n [s_ni = a][s_nj = b] + λ / 21²``
- covariance norm ``C_ij = sqrt(Σ_{a,b < 20} (f_ij(a,b) − f_i(a) f_j(b))²)`` -- amino acids only, so
  gap-gap blocks (termini, indels) do not look like co-evolution;
- mutual information ``MI_ij = Σ_{a,b < 21} f_ij(a,b) log(f_ij(a,b) / (f_i(a) f_j(b)))`` in nats, 0·log 0 = 0;
- APC (Dunn, Wahl & Gloor 2008): ``S'_ij = S_ij − S̄_i S̄_j / S̄`` with ``S̄_i`` the mean of row i off the
  diagonal and ``S̄`` the mean of all off-diagonal entries; the diagonal is set to 0 (and the correction to 0
  when ``S̄ = 0``, e.g. a single-sequence MSA).

Cost and memory. The pair frequencies of a block of ``B`` columns against columns ``i0..L`` are one matrix
product of weighted one-hots, ``[B·21, n] @ [n, (L − i0)·21]`` (the einsum ``nia,njb->ijab``), accumulated over
blocks of ``n`` sequences; only the upper triangle (j ≥ i0) is computed and then mirrored. Operations
O(N·L²·21²)/2 in float64. Holding all pair frequencies would need L²·21²·8 bytes (1.7 GB at L = 700); the
blocks keep one block of pair frequencies (``B`` chosen so ``B·L·21²·8 ≤ block_bytes``) and one block of
one-hot rows (≤ ``block_bytes``) alive, plus per-column temporaries of L·21²·8 bytes: peak about
2·``block_bytes`` (3· when the sequences need more than one block, for the product being added).

Where the compiled kernels run (:mod:`workflow_lib.features.compiled`), the pair frequencies are accumulated row by
row instead (``O(N·L²/2 + L²·21²/2)``, one ``[21, L, 21]`` table in memory), with the same scores to float64
rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from workflow_lib.features.compiled import raw_coevolution_compiled, use_compiled
from workflow_lib.features.states import DEFAULT_BLOCK_BYTES, GAP_STATE, one_hot_states, rows_per_block, to_states
from workflow_lib.schemas.features import PROFILE_STATES

if TYPE_CHECKING:
    import torch

_PAIR_STATES = PROFILE_STATES * PROFILE_STATES


def _normalised(weights: np.ndarray, depth: int) -> np.ndarray:
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (depth,):
        raise ValueError(f"weights have shape {weights.shape}, expected ({depth},)")
    total = weights.sum()
    if not total > 0 or np.any(weights < 0):
        raise ValueError("weights must be non-negative with a positive sum")
    return weights / total


def single_frequencies(states: np.ndarray, weights: np.ndarray, pseudocount: float = 0.0) -> np.ndarray:
    """float64 ``[L, 21]``: ``f_i(a)`` as in the module docstring (``weights`` already sum to 1)."""
    counts = np.stack([weights @ (states == a) for a in range(PROFILE_STATES)], axis=1)
    return (1.0 - pseudocount) * counts + pseudocount / PROFILE_STATES


def raw_coevolution(codes: np.ndarray, weights: np.ndarray, *, pseudocount: float = 0.0,
                    block_bytes: int = DEFAULT_BLOCK_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Uncorrected covariance norm and MI, float64 ``[L, L]`` each (symmetric, zero diagonal).

    ``codes``: residue codes ``[N, L]`` (0..21); ``weights``: ``[N]`` non-negative sequence weights.
    """
    if not 0.0 <= pseudocount < 1.0:
        raise ValueError(f"pseudocount must be in [0, 1), got {pseudocount}")
    states = to_states(codes)
    if states.ndim != 2:
        raise ValueError(f"codes must be [N, L], got shape {states.shape}")
    depth, length = states.shape
    w = _normalised(weights, depth)
    f_single = single_frequencies(states, w, pseudocount)
    log_single = np.log(f_single, out=np.full_like(f_single, -np.inf), where=f_single > 0)
    if use_compiled():
        return raw_coevolution_compiled(states, w, f_single, log_single, pseudocount)
    cov_norm = np.zeros((length, length))
    mutual_info = np.zeros((length, length))
    col_block = rows_per_block(length * _PAIR_STATES * 8, block_bytes)
    seq_block = rows_per_block(length * PROFILE_STATES * 8, block_bytes)
    whole = one_hot_states(states, np.float64) if depth <= seq_block else None
    for i0 in range(0, length, col_block):
        i1 = min(length, i0 + col_block)
        width, rest = i1 - i0, length - i0
        pair = product = None  # [B·21, (L − i0)·21] over sequence blocks; frees the previous block first
        for n0 in range(0, depth, seq_block):
            right = (whole[n0:n0 + seq_block, i0:] if whole is not None
                     else one_hot_states(states[n0:n0 + seq_block, i0:], np.float64))
            left = right[:, :width] * w[n0:n0 + seq_block, None, None]
            product = left.reshape(left.shape[0], -1).T @ right.reshape(right.shape[0], -1)
            pair = product if pair is None else np.add(pair, product, out=pair)
        pair = pair.reshape(width, PROFILE_STATES, rest, PROFILE_STATES)
        for offset in range(width):
            i = i0 + offset
            f_pair = (1.0 - pseudocount) * pair[offset].transpose(1, 0, 2) + pseudocount / _PAIR_STATES  # [J,21,21]
            f_outer = f_single[i][None, :, None] * f_single[i0:][:, None, :]
            deviation = (f_pair - f_outer)[:, :GAP_STATE, :GAP_STATE]
            cov_norm[i, i0:] = np.sqrt(np.einsum("jab,jab->j", deviation, deviation))
            positive = f_pair > 0
            log_pair = np.log(f_pair, out=np.zeros_like(f_pair), where=positive)
            log_ratio = log_pair - log_single[i][None, :, None] - log_single[i0:][:, None, :]
            mutual_info[i, i0:] = np.einsum("jab,jab->j", f_pair, np.where(positive, log_ratio, 0.0))
    return _symmetric_upper(cov_norm), _symmetric_upper(mutual_info)


def _symmetric_upper(matrix: np.ndarray) -> np.ndarray:
    """The strict upper triangle mirrored below the diagonal; the diagonal is 0."""
    upper = np.triu(matrix, 1)
    return upper + upper.T


def apc(raw: np.ndarray) -> np.ndarray:
    """Average product correction of a symmetric ``[L, L]`` score (module docstring); float64, zero diagonal."""
    scores = np.array(raw, dtype=np.float64)
    length = scores.shape[0]
    np.fill_diagonal(scores, 0.0)
    if length < 2:
        return scores
    row_mean = scores.sum(axis=1) / (length - 1)
    total_mean = scores.sum() / (length * (length - 1))
    if total_mean > 0:
        scores = scores - np.outer(row_mean, row_mean) / total_mean
    np.fill_diagonal(scores, 0.0)
    return scores


def coevolution_features(codes: np.ndarray, weights: np.ndarray, *, pseudocount: float = 0.0,
                         block_bytes: int = DEFAULT_BLOCK_BYTES) -> np.ndarray:
    """float32 ``[L, L, 2]``: APC-corrected covariance norm (channel 0) and APC-corrected MI (channel 1)."""
    cov_norm, mutual_info = raw_coevolution(codes, weights, pseudocount=pseudocount, block_bytes=block_bytes)
    return np.stack([apc(cov_norm), apc(mutual_info)], axis=-1).astype(np.float32)


def coevolution_features_torch(codes: torch.Tensor, weights: torch.Tensor, *,
                               dtype: torch.dtype | None = None) -> torch.Tensor:
    """:func:`coevolution_features` (pseudocount 0) in torch, on the tensors' device: ``[L, L, 2]`` float32.

    For building features where the data are (a GPU during training on a training pack): the pair frequencies
    are one ``[L·21, L·21]`` matrix product, so memory is ``L²·21²`` numbers (0.6 GB at L = 400 in float64,
    the default ``dtype``, which matches the NumPy path to rounding).
    """
    import torch

    dtype = dtype or torch.float64
    states = torch.where(codes.long() >= GAP_STATE, GAP_STATE, codes.long())
    depth, length = states.shape
    w = weights.to(dtype)
    if not bool(torch.all(w >= 0)) or not float(w.sum()) > 0:
        raise ValueError("weights must be non-negative with a positive sum")
    w = w / w.sum()
    one_hot = torch.nn.functional.one_hot(states, PROFILE_STATES).to(dtype)            # [N, L, 21]
    f_single = torch.einsum("n,nla->la", w, one_hot)                                   # [L, 21]
    flat = one_hot.reshape(depth, length * PROFILE_STATES)
    f_pair = ((flat * w[:, None]).T @ flat).reshape(length, PROFILE_STATES, length, PROFILE_STATES)
    f_pair = f_pair.permute(0, 2, 1, 3)                                                # [L, L, 21, 21]
    f_outer = f_single[:, None, :, None] * f_single[None, :, None, :]
    deviation = (f_pair - f_outer)[..., :GAP_STATE, :GAP_STATE]
    cov_norm = torch.sqrt((deviation * deviation).sum(dim=(-1, -2)))
    positive = (f_pair > 0) & (f_outer > 0)
    ratio = torch.where(positive, f_pair / torch.where(positive, f_outer, torch.ones_like(f_outer)),
                        torch.ones_like(f_pair))
    mutual_info = (f_pair * torch.log(ratio)).sum(dim=(-1, -2))
    return torch.stack([apc_torch(cov_norm), apc_torch(mutual_info)], dim=-1).to(torch.float32)


def apc_torch(raw: torch.Tensor) -> torch.Tensor:
    """:func:`apc` of a symmetric ``[L, L]`` tensor, on its device and in its dtype."""
    import torch

    length = raw.shape[0]
    eye = torch.eye(length, dtype=torch.bool, device=raw.device)
    scores = raw.masked_fill(eye, 0.0)
    if length < 2:
        return scores
    row_mean = scores.sum(dim=1) / (length - 1)
    total_mean = scores.sum() / (length * (length - 1))
    if float(total_mean) > 0:
        scores = scores - torch.outer(row_mean, row_mean) / total_mean
    return scores.masked_fill(eye, 0.0)
