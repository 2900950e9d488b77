"""Confidence of a structure folded from a predicted distogram: the lDDT the structure expects under it.

When the backbone is folded from the distogram (:mod:`workflow_lib.inference.fold`), the network's pLDDT head
scored a different structure (its own structure module's). The distogram itself says how sure the network is
of each distance, and how well the folded model satisfies it: per residue ``i``, the expected lDDT of the
model against a structure drawn from the predicted distance distributions (seed 000, "Representing Protein
Structure": the 6D maps are what the network predicts best; the lDDT convention is
:func:`workflow_lib.structure.metrics.lddt_ca`'s, on the distogram's Cβ):

    E_i = Σ_j Σ_t P(d_ij < R and |d_ij − m_ij| < t) / T  /  Σ_j P(d_ij < R)

over the residues ``j ≠ i``, the lDDT thresholds ``t`` (0.5, 1, 2, 4 Å, ``T = 4``) and the inclusion radius
``R = 15 Å``, with ``m_ij`` the model's Cβ–Cβ distance and ``P`` the predicted distogram, uniform inside each
0.5 Å bin (:data:`~workflow_lib.structure.geometry.DIST_EDGES`; the first bin holds everything below 2.5 Å, the
last, "≥ 20 Å", lies beyond ``R``). It is a ratio of expectations (lDDT's own numerator and denominator, each
expected), exact for a distogram that puts all its mass in one bin. A residue the distogram places near no
other (denominator below :data:`MIN_NEIGHBOURS`) gets 0: lDDT has nothing to score there, and such a residue is
not confidently placed. It costs O(L² · bins), in row blocks.
"""

from __future__ import annotations

import numpy as np

from workflow_lib.structure.geometry import DIST_EDGES
from workflow_lib.structure.metrics import LDDT_THRESHOLDS

INCLUSION_RADIUS = 15.0
"""lDDT's inclusion radius (Å): pairs whose true distance is below it are scored."""
MIN_NEIGHBOURS = 1e-3
"""Expected number of neighbours within the inclusion radius below which a residue's confidence is 0."""
ROW_BLOCK = 128
"""Rows of the ``[rows, L, bins]`` overlap arrays computed at once."""


def expected_lddt(dist_probs: np.ndarray, cb: np.ndarray, *, radius: float = INCLUSION_RADIUS,
                  thresholds: tuple[float, ...] = LDDT_THRESHOLDS) -> np.ndarray:
    """Per residue, the expected lDDT (0–1) of a model with Cβ ``cb [L, 3]`` under the predicted Cβ distogram
    ``dist_probs [L, L, bins]`` (probabilities over :data:`~workflow_lib.structure.geometry.DIST_EDGES`' bins
    and the last, "≥ 20 Å"); see the module docstring. Residues with a non-finite Cβ get 0 and are no one's
    neighbour."""
    probs = np.asarray(dist_probs, dtype=np.float64)
    cb = np.asarray(cb, dtype=np.float64)
    length = cb.shape[0]
    if probs.ndim != 3 or probs.shape[:2] != (length, length) or probs.shape[2] != DIST_EDGES.size:
        raise ValueError(f"dist_probs must have shape [{length}, {length}, {DIST_EDGES.size}] for {length} "
                         f"residues, got {probs.shape}")
    if cb.ndim != 2 or cb.shape[1] != 3:
        raise ValueError(f"cb must have shape [L, 3], got {cb.shape}")
    low = DIST_EDGES[:-1].copy()
    high = DIST_EDGES[1:]
    density = 1.0 / (high - low)                       # probability per Å of a bin's mass, uniform inside it
    inside = low < radius
    low, high, density = low[inside], np.minimum(high[inside], radius), density[inside]
    n_bins = low.size
    placed = np.isfinite(cb).all(axis=1)
    out = np.zeros(length, dtype=np.float64)
    if length < 2 or not placed.any():
        return out.astype(np.float32)
    safe_cb = np.where(placed[:, None], cb, 0.0)
    for start in range(0, length, ROW_BLOCK):
        rows = slice(start, min(start + ROW_BLOCK, length))
        mass = probs[rows, :, :n_bins] * density                               # [b, L, bins] per Å
        valid = placed[rows, None] & placed[None, :]
        valid[np.arange(rows.stop - rows.start), np.arange(rows.start, rows.stop)] = False
        model = np.linalg.norm(safe_cb[rows, None, :] - safe_cb[None, :, :], axis=-1)[..., None]  # [b, L, 1]
        reference = (mass * (high - low)).sum(axis=-1)                          # P(d < radius)
        preserved = np.zeros_like(reference)
        for t in thresholds:
            overlap = np.clip(np.minimum(high, model + t) - np.maximum(low, model - t), 0.0, None)
            preserved += (mass * overlap).sum(axis=-1)
        reference = np.where(valid, reference, 0.0).sum(axis=1)
        preserved = np.where(valid, preserved, 0.0).sum(axis=1) / len(thresholds)
        scored = placed[rows] & (reference >= MIN_NEIGHBOURS)
        out[rows] = np.where(scored, preserved / np.where(scored, reference, 1.0), 0.0)
    return np.clip(out, 0.0, 1.0).astype(np.float32)
