"""Direct-coupling pair features: a regularised inverse of the weighted covariance of the MSA's one-hot states.

Correlated columns are not always in contact: a chain of contacts i-k-j makes i and j covary too. Direct
coupling analysis separates direct from transitive correlation by inverting the covariance matrix of the
alignment (the couplings of a Gaussian or mean-field Potts model are minus the inverse covariance): mean-field
DCA (Morcos et al. 2011, PNAS 108:E1293), PSICOV's shrunk sparse inverse covariance (Jones et al. 2012,
Bioinformatics 28:184), the Gaussian DCA of Baldassi et al. (2014, PLoS ONE 9:e92721).

Notation: ``N`` statistics rows with normalised weights ``w`` (Σ w = 1; the 80%-identity reweighting of the
feature stage), ``L`` columns, ``q = 20`` amino-acid states per column (gap and X are the reference state, as
mfDCA drops one state), centred weighted one-hots ``U[n, (i, a)] = √w_n ([s_ni = a] − f_i(a))``, so the
covariance is ``C = Uᵀ U`` (``[qL, qL]``, rank ≤ N).

Regularisation: ``C_λ = C + λ I`` with ``λ = shrinkage · mean_i tr(C_ii) / q`` (a ridge in units of the mean
per-state variance; PSICOV shrinks towards the diagonal in the same spirit). The shrinkage follows the
alignment's depth, ``clip(10 · (100 / Neff)², 10, 300)`` (:func:`default_shrinkage`; Neff = the sum of the
rows' weights): a shallow alignment's inverse is mostly noise and needs a strong ridge (at 300 the couplings
are close to the covariance itself), a deep one's carries the direct couplings. Chosen by measurement on
training chains (benchmarks/RESULTS.md, "Direct couplings: contacts from the alignment alone"). The couplings
are the off-diagonal blocks of ``−C_λ⁻¹``. Where the alignment is shallower than ``qL`` (nearly always: an MSA of
N = 1,000 rows for 300 columns has rank ≤ 1,000 against 6,000 dimensions), the Woodbury identity gives them
without ever forming the ``[qL, qL]`` matrix:

    C_λ⁻¹ = (1/λ) (I − Uᵀ (λ I_N + U Uᵀ)⁻¹ U)
    so, for i ≠ j,   J_ij = (1/λ) U_iᵀ M U_j,  M = (λ I_N + U Uᵀ)⁻¹

With the eigendecomposition ``U Uᵀ = Q diag(e) Qᵀ`` and ``V = diag((λ + e)^-½) Qᵀ U`` (``[N, qL]``),
``J_ij = (1/λ) V_iᵀ V_j``. Each block is put in the zero-sum gauge (rows and columns centred over the q
states, as mfDCA does before scoring; it is ``V_i`` centred over its q states) and scored by its Frobenius norm;
the scores then get the average product correction (Dunn et al. 2008), as in PSICOV, CCMpred and GREMLIN.

Cost: ``O(N² qL + N³)`` for ``V`` plus the scores, the cheaper of
- ``O(L² N²)``: ``||V_iᵀ V_j||²_F = ⟨V_i V_iᵀ, V_j V_jᵀ⟩`` (Gram matrices of the N×N blocks), or
- ``O((qL)² N)``: the blocks ``V_iᵀ V_j`` themselves,
in blocks of columns so memory stays within ``block_bytes`` (about 2× that at the peak). Deep alignments are
capped at ``max_rows`` statistics rows (a deterministic sample, the query kept): beyond a few hundred effective
sequences the couplings of a 300-residue protein change little and the cost grows as N².
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from workflow_lib.features.coevolution import apc, apc_torch
from workflow_lib.features.states import DEFAULT_BLOCK_BYTES, GAP_STATE, rows_per_block, to_states

if TYPE_CHECKING:
    import torch

Q_STATES = GAP_STATE
"""States per column in the couplings: the 20 amino acids (gap and X are the reference state)."""
SHRINKAGE_AT_NEFF_100 = 10.0
"""Ridge ``λ`` in units of the mean per-state variance at Neff 100 (:func:`default_shrinkage`)."""
SHRINKAGE_RANGE = (10.0, 300.0)
"""The depth-following shrinkage is kept within these bounds."""


def default_shrinkage(neff: float) -> float:
    """The ridge of an alignment of ``neff`` effective sequences: ``clip(10 · (100 / Neff)², 10, 300)``."""
    low, high = SHRINKAGE_RANGE
    return float(np.clip(SHRINKAGE_AT_NEFF_100 * (100.0 / max(neff, 1e-9)) ** 2, low, high))
DEFAULT_MAX_ROWS = 1024
"""Statistics rows the couplings are computed from at most (a deterministic sample beyond, the query kept)."""


def _centred_one_hot(states: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``U`` of the module docstring: float64 ``[N, L, q]``."""
    one_hot = (states[:, :, None] == np.arange(Q_STATES)[None, None, :]).astype(np.float64)
    frequencies = np.einsum("n,nla->la", weights, one_hot)
    one_hot -= frequencies[None]
    one_hot *= np.sqrt(weights)[:, None, None]
    return one_hot


def _sample_rows(depth: int, max_rows: int, seed: int) -> np.ndarray:
    if depth <= max_rows:
        return np.arange(depth)
    rest = np.random.default_rng(seed).choice(np.arange(1, depth), size=max_rows - 1, replace=False)
    return np.concatenate([[0], np.sort(rest)])


def coupling_blocks(codes: np.ndarray, weights: np.ndarray, *, shrinkage: float | None = None,
                    max_rows: int = DEFAULT_MAX_ROWS, seed: int = 0) -> tuple[np.ndarray, float]:
    """``(V, λ)`` of the module docstring: ``V`` float64 ``[R, L, q]`` (``R`` ≤ rows kept), already in the
    zero-sum gauge, such that the coupling block of columns i ≠ j is ``V[:, i].T @ V[:, j] / λ``. ``shrinkage``
    None follows the kept rows' Neff (:func:`default_shrinkage`)."""
    if shrinkage is not None and not shrinkage > 0:
        raise ValueError(f"shrinkage must be positive, got {shrinkage}")
    states = to_states(codes)
    if states.ndim != 2:
        raise ValueError(f"codes must be [N, L], got shape {states.shape}")
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (states.shape[0],) or np.any(weights < 0) or not weights.sum() > 0:
        raise ValueError("weights must be [N], non-negative, with a positive sum")
    rows = _sample_rows(states.shape[0], max_rows, seed)
    if shrinkage is None:
        shrinkage = default_shrinkage(float(weights[rows].sum()))
    states, weights = states[rows], weights[rows] / weights[rows].sum()
    depth, length = states.shape
    u = _centred_one_hot(states, weights)                                  # [N, L, q]
    flat = u.reshape(depth, length * Q_STATES)
    variance = float(np.einsum("ij,ij->", flat, flat)) / (length * Q_STATES)
    lam = shrinkage * variance if variance > 0 else shrinkage
    gram = flat @ flat.T                                                   # [N, N] = U Uᵀ
    eigenvalues, eigenvectors = np.linalg.eigh(gram)
    eigenvalues = np.clip(eigenvalues, 0.0, None)
    keep = eigenvalues > 1e-12 * max(float(eigenvalues.max()), 1e-300)
    v = (eigenvectors[:, keep] / np.sqrt(lam + eigenvalues[keep])).T @ flat   # [R, qL]
    v = v.reshape(-1, length, Q_STATES)
    v -= v.mean(axis=2, keepdims=True)                                     # zero-sum gauge
    return v, lam


def raw_coupling_norms(codes: np.ndarray, weights: np.ndarray, *, shrinkage: float | None = None,
                       max_rows: int = DEFAULT_MAX_ROWS, seed: int = 0,
                       block_bytes: int = DEFAULT_BLOCK_BYTES) -> np.ndarray:
    """Frobenius norms ``||J_ij||_F`` of the couplings, float64 ``[L, L]`` (symmetric, zero diagonal)."""
    v, lam = coupling_blocks(codes, weights, shrinkage=shrinkage, max_rows=max_rows, seed=seed)
    rank, length, q = v.shape
    scores = np.zeros((length, length))
    if rank == 0:
        return scores
    if rank <= q * q:                       # Gram route: O(L² R²) against O((qL)² R)
        per_column = rows_per_block(rank * rank * 8, block_bytes)
        by_column = v.transpose(1, 0, 2)                                  # [L, R, q]
        grams = [np.matmul(by_column[i0:i0 + per_column], by_column[i0:i0 + per_column].transpose(0, 2, 1))
                 .reshape(-1, rank * rank) for i0 in range(0, length, per_column)]
        if len(grams) == 1:
            squared = grams[0] @ grams[0].T
        else:
            squared = np.zeros((length, length))
            starts = list(range(0, length, per_column))
            for a, (i0, left) in enumerate(zip(starts, grams)):
                for j0, right in zip(starts[a:], grams[a:]):
                    block = left @ right.T
                    squared[i0:i0 + len(left), j0:j0 + len(right)] = block
                    squared[j0:j0 + len(right), i0:i0 + len(left)] = block.T
    else:
        flat = v.reshape(rank, length * q)
        per_column = rows_per_block(length * q * q * 8, block_bytes)
        squared = np.zeros((length, length))
        for i0 in range(0, length, per_column):
            i1 = min(length, i0 + per_column)
            product = (flat[:, i0 * q:i1 * q].T @ flat).reshape(i1 - i0, q, length, q)
            squared[i0:i1] = np.einsum("iajb,iajb->ij", product, product)
    scores = np.sqrt(np.clip(squared, 0.0, None)) / lam
    np.fill_diagonal(scores, 0.0)
    return scores


def coupling_features(codes: np.ndarray, weights: np.ndarray, *, shrinkage: float | None = None,
                      max_rows: int = DEFAULT_MAX_ROWS, seed: int = 0,
                      block_bytes: int = DEFAULT_BLOCK_BYTES) -> np.ndarray:
    """float32 ``[L, L, 1]``: the APC-corrected coupling norms, scaled to unit standard deviation off the diagonal
    (so the network sees the same range whatever the alignment's depth)."""
    scores = apc(raw_coupling_norms(codes, weights, shrinkage=shrinkage, max_rows=max_rows, seed=seed,
                                    block_bytes=block_bytes))
    length = scores.shape[0]
    if length > 1:
        spread = scores[~np.eye(length, dtype=bool)].std()
        if spread > 0:
            scores = scores / spread
    return scores[..., None].astype(np.float32)


def coupling_features_torch(codes: torch.Tensor, weights: torch.Tensor, *, shrinkage: float | None = None,
                            max_rows: int = DEFAULT_MAX_ROWS, seed: int = 0,
                            dtype: torch.dtype | None = None) -> torch.Tensor:
    """:func:`coupling_features` in torch on the tensors' device (a GPU while training on a pack): float32
    ``[L, L, 1]``, equal to the NumPy features to rounding in float64 (the default ``dtype``). The coupling norms
    are one ``[L, R²]`` Gram product (R ≤ rows kept), so memory is ``L·R²`` numbers."""
    import torch

    dtype = dtype or torch.float64
    depth, length = codes.shape
    rows = torch.from_numpy(_sample_rows(depth, max_rows, seed)).to(codes.device)
    states = torch.where(codes.long() >= GAP_STATE, GAP_STATE, codes.long())[rows]
    w = weights.to(dtype)[rows]
    if not bool(torch.all(w >= 0)) or not float(w.sum()) > 0:
        raise ValueError("weights must be [N], non-negative, with a positive sum")
    if shrinkage is None:
        shrinkage = default_shrinkage(float(w.sum()))
    w = w / w.sum()
    one_hot = torch.nn.functional.one_hot(states, GAP_STATE + 1)[..., :Q_STATES].to(dtype)     # [R, L, q]
    u = (one_hot - torch.einsum("n,nla->la", w, one_hot)[None]) * w.sqrt()[:, None, None]
    flat = u.reshape(len(rows), length * Q_STATES)
    variance = float((flat * flat).sum()) / (length * Q_STATES)
    lam = shrinkage * variance if variance > 0 else shrinkage
    eigenvalues, eigenvectors = torch.linalg.eigh(flat @ flat.T)
    eigenvalues = eigenvalues.clamp(min=0.0)
    keep = eigenvalues > 1e-12 * max(float(eigenvalues.max()), 1e-300)
    v = ((eigenvectors[:, keep] / torch.sqrt(lam + eigenvalues[keep])).T @ flat).reshape(-1, length, Q_STATES)
    v = v - v.mean(dim=2, keepdim=True)
    by_column = v.permute(1, 0, 2)                                          # [L, R, q]
    grams = (by_column @ by_column.transpose(1, 2)).reshape(length, -1)
    scores = torch.sqrt((grams @ grams.T).clamp(min=0.0)) / lam
    scores = apc_torch(scores)
    if length > 1:
        spread = scores[~torch.eye(length, dtype=torch.bool, device=codes.device)].std(unbiased=False)
        if float(spread) > 0:
            scores = scores / spread
    return scores[..., None].to(torch.float32)
