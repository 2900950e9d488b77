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

Cost: ``O(N² qL + N³)`` for ``V`` plus the scores. Each ``V_i`` in the zero-sum gauge is ``W_i Hᵀ`` for the
``q − 1`` orthonormal columns ``H`` of :func:`zero_sum_basis`, and ``||V_iᵀ V_j||_F = ||W_iᵀ W_j||_F``, so the scores
are taken on ``W`` (``q' = q − 1`` states), the cheaper of (only the upper triangle ``j ≥ i`` of either)
- ``O(L² R²/4)``: ``||W_iᵀ W_j||²_F = ⟨W_i W_iᵀ, W_j W_jᵀ⟩`` (Gram matrices of the R×R blocks, symmetric, so
  their upper triangles), or
- ``O(q'² L² R/2)``: the blocks ``W_iᵀ W_j`` themselves,
in blocks so memory stays within ``block_bytes`` (about 2× that at the peak). Deep alignments are
capped at ``max_rows`` statistics rows (a deterministic sample, the query kept): beyond a few hundred effective
sequences the couplings of a 300-residue protein change little and the cost grows as N².

Where the compiled kernels run (:mod:`workflow_lib.features.compiled`), ``U`` is never formed: ``U Uᵀ`` comes from
the rows' shared amino acids (an integer count per row pair) and ``Qᵀ U`` from per-state sums of the rows'
coefficients, ``O(N² L + N L R)`` instead of ``O(N² qL)`` each; the couplings agree with the NumPy path's to
float64 rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from workflow_lib.features.coevolution import apc, apc_torch
from workflow_lib.features.compiled import row_sums_by_state_compiled, shared_residues_compiled, use_compiled
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


def _covariance_gram_compiled(states: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(f, U Uᵀ)``: the amino-acid frequencies ``f`` ``[L, q]`` and the ``[N, N]`` Gram matrix of ``U`` without
    forming ``U``: ``(U Uᵀ)_nm = √(w_n w_m) (S_nm − g_n − g_m + Σ_ia f_i(a)²)``, with ``S_nm`` the columns in
    which rows n and m have the same amino acid and ``g_n = Σ_i f_i(s_ni)`` over the row's amino acids."""
    depth, length = states.shape
    frequencies = np.stack([weights @ (states == a) for a in range(Q_STATES)], axis=1)     # [L, q]
    padded = np.concatenate([frequencies, np.zeros((length, 1))], axis=1)                 # gap and X: 0
    own = padded[np.arange(length)[None, :], np.minimum(states, Q_STATES)].sum(axis=1)   # g_n
    shared = shared_residues_compiled(states).astype(np.float64)
    centred = (shared + float(np.sum(frequencies * frequencies))) - (own[:, None] + own[None, :])
    root = np.sqrt(weights)
    return frequencies, (root[:, None] * root[None, :]) * centred


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
    if use_compiled():
        frequencies, gram = _covariance_gram_compiled(states, weights)
        variance = float(np.trace(gram)) / (length * Q_STATES)
    else:
        u = _centred_one_hot(states, weights)                              # [N, L, q]
        flat = u.reshape(depth, length * Q_STATES)
        variance = float(np.einsum("ij,ij->", flat, flat)) / (length * Q_STATES)
        gram = flat @ flat.T                                               # [N, N] = U Uᵀ
    lam = shrinkage * variance if variance > 0 else shrinkage
    eigenvalues, eigenvectors = np.linalg.eigh(gram)
    eigenvalues = np.clip(eigenvalues, 0.0, None)
    keep = eigenvalues > 1e-12 * max(float(eigenvalues.max()), 1e-300)
    coefficients = eigenvectors[:, keep] / np.sqrt(lam + eigenvalues[keep])  # [N, R]
    if use_compiled():
        scaled = coefficients * np.sqrt(weights)[:, None]
        sums = row_sums_by_state_compiled(states, scaled)                 # [L, q, R]
        sums -= frequencies[:, :, None] * scaled.sum(axis=0)[None, None, :]
        v = sums.transpose(2, 0, 1)                                        # [R, L, q]
    else:
        v = (coefficients.T @ flat).reshape(-1, length, Q_STATES)          # [R, L, q]
    v -= v.mean(axis=2, keepdims=True)                                     # zero-sum gauge
    return v, lam


def zero_sum_basis(q: int = Q_STATES) -> np.ndarray:
    """float64 ``[q, q − 1]``: the Helmert basis, orthonormal columns orthogonal to the all-ones vector.

    A block in the zero-sum gauge has rows in the span of these columns, so ``V_i = W_i Hᵀ`` with
    ``W_i = V_i H`` (``[R, q − 1]``) and ``||V_iᵀ V_j||_F = ||W_iᵀ W_j||_F``: the scores need ``(q − 1)²`` instead
    of ``q²`` products per row and column pair (Helmert 1876; Lancaster 1965, Am. Math. Monthly 72:4)."""
    basis = np.zeros((q, q - 1))
    for k in range(1, q):
        basis[:k, k - 1] = 1.0
        basis[k, k - 1] = -float(k)
        basis[:, k - 1] /= np.sqrt(k * (k + 1.0))
    return basis


def gram_route(rank: int, q: int = Q_STATES - 1) -> bool:
    """Whether the Gram route scores ``rank`` rows of ``q`` states per column more cheaply than the direct blocks:
    ``L²/2 · R(R+1)/2`` against ``L²/2 · q² R`` multiply-adds (symmetric halves of both)."""
    return rank + 1 < 2 * q * q


def _squared_norms_gram(by_column: np.ndarray, block_bytes: int) -> np.ndarray:
    """``||W_iᵀ W_j||²_F = ⟨G_i, G_j⟩`` with ``G_i = W_i W_iᵀ`` (``by_column``: ``[L, R, q]``), float64 ``[L, L]``.

    ``G`` is symmetric, so ``⟨G_i, G_j⟩`` sums its upper triangle, the off-diagonal entries weighted √2 on both
    sides; the triangle is taken in chunks of rows ``r0..r1`` (``[L, r1 − r0, R − r0]`` each, ≤ ``block_bytes``)
    and each chunk adds its symmetric product ``P Pᵀ``."""
    length, rank, _ = by_column.shape
    squared = np.zeros((length, length))
    chunk = rows_per_block(length * rank * 8, block_bytes)
    for r0 in range(0, rank, chunk):
        r1 = min(rank, r0 + chunk)
        grams = np.matmul(by_column[:, r0:r1], by_column[:, r0:].transpose(0, 2, 1))   # [L, r1 − r0, R − r0]
        upper = np.triu(np.full((r1 - r0, rank - r0), np.sqrt(2.0)), 1)
        upper[np.arange(r1 - r0), np.arange(r1 - r0)] = 1.0
        grams *= upper
        flat = grams.reshape(length, -1)
        squared += flat @ flat.T
    return squared


def _squared_norms_direct(flat: np.ndarray, q: int, block_bytes: int) -> np.ndarray:
    """``||W_iᵀ W_j||²_F`` from the blocks ``W_iᵀ W_j`` themselves (``flat``: ``[R, L·q]``), float64 ``[L, L]``:
    the upper triangle in row blocks of columns ``i0..i1`` against ``j ≥ i0``, mirrored."""
    length = flat.shape[1] // q
    per_column = min(rows_per_block(length * q * q * 8, block_bytes), max(1, -(-length // 16)))
    squared = np.zeros((length, length))
    for i0 in range(0, length, per_column):
        i1 = min(length, i0 + per_column)
        product = (flat[:, i0 * q:i1 * q].T @ flat[:, i0 * q:]).reshape(i1 - i0, q, length - i0, q)
        np.square(product, out=product)
        squared[i0:i1, i0:] = product.sum(axis=(1, 3))
    upper = np.triu(squared)
    return upper + np.triu(upper, 1).T


def raw_coupling_norms(codes: np.ndarray, weights: np.ndarray, *, shrinkage: float | None = None,
                       max_rows: int = DEFAULT_MAX_ROWS, seed: int = 0,
                       block_bytes: int = DEFAULT_BLOCK_BYTES) -> np.ndarray:
    """Frobenius norms ``||J_ij||_F`` of the couplings, float64 ``[L, L]`` (symmetric, zero diagonal)."""
    v, lam = coupling_blocks(codes, weights, shrinkage=shrinkage, max_rows=max_rows, seed=seed)
    rank, length, q = v.shape
    scores = np.zeros((length, length))
    if rank == 0:
        return scores
    reduced = (v.reshape(-1, q) @ zero_sum_basis(q)).reshape(rank, length, q - 1)   # W of zero_sum_basis
    if gram_route(rank, q - 1):
        squared = _squared_norms_gram(np.ascontiguousarray(reduced.transpose(1, 0, 2)), block_bytes)
    else:
        squared = _squared_norms_direct(reduced.reshape(rank, length * (q - 1)), q - 1, block_bytes)
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
