"""Structure comparison: lDDT-Cα, TM-score and Kabsch superposition / RMSD (NumPy, for evaluation and losses).

lDDT (Mariani et al. 2013, *Bioinformatics* 29:2722), Cα-only as AlphaFold computes it (``alphafold/model/lddt.py``)
and as the pLDDT head's target (AlphaFold 2 supplement, Jumper et al. 2021, *Nature* 596:583, section 1.9.6):

- a pair (i, j) is scored when i ≠ j, both residues are in ``mask``, both true Cα are present, and the TRUE
  distance is < ``cutoff`` (15 Å); the predicted distance does not select pairs (so lDDT is not symmetric);
- a scored pair's value is the fraction of the thresholds 0.5, 1, 2, 4 Å that |d_true − d_pred| is strictly
  below (0, 0.25, 0.5, 0.75 or 1); a NaN predicted coordinate scores 0;
- per-residue lDDT = mean over the residue's scored pairs; the global score pools all scored pairs
  (AlphaFold's ``per_residue=False``), i.e. residues with more neighbours weigh more.

Deviation from AlphaFold, on purpose: a residue with no scored pair gets NaN per-residue (AlphaFold's ε-guard
gives 1.0), and the global score is NaN when no pair is scored. Differences from the original lDDT program:
no stereochemistry checks and no per-atom inclusion radius beyond Cα.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

LDDT_THRESHOLDS = (0.5, 1.0, 2.0, 4.0)
"""Distance-difference thresholds (Å)."""


class Lddt(NamedTuple):
    """lDDT-Cα: ``per_residue`` float64 ``[*, L]`` in [0, 1] (NaN: not scored) and ``score`` ``[*]`` (pooled)."""

    per_residue: np.ndarray
    score: np.ndarray | float


def _pairwise_distances(points: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum((points[..., :, None, :] - points[..., None, :, :]) ** 2, axis=-1))


def lddt_ca(pred_ca: np.ndarray, true_ca: np.ndarray, mask: np.ndarray | None = None, cutoff: float = 15.0
            ) -> Lddt:
    """lDDT of predicted Cα ``[*, L, 3]`` against true Cα ``[*, L, 3]`` (convention in the module docstring).

    ``mask`` ``[*, L]`` bool marks residues to evaluate (default: all). Returns :class:`Lddt`; ``score`` is a
    Python float for unbatched input.
    """
    pred = np.asarray(pred_ca, dtype=np.float64)
    true = np.asarray(true_ca, dtype=np.float64)
    if pred.shape != true.shape or pred.ndim < 2 or pred.shape[-1] != 3:
        raise ValueError(f"pred_ca and true_ca must both have shape [*, L, 3], got {pred.shape} and {true.shape}")
    if cutoff <= 0:
        raise ValueError(f"cutoff must be positive, got {cutoff}")
    present = np.isfinite(true).all(axis=-1)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != present.shape:
            raise ValueError(f"mask must have shape {present.shape}, got {mask.shape}")
        present &= mask
    length = true.shape[-2]
    d_true = _pairwise_distances(true)
    d_pred = _pairwise_distances(pred)
    with np.errstate(invalid="ignore"):
        scored = (d_true < cutoff) & present[..., :, None] & present[..., None, :] & ~np.eye(length, dtype=bool)
        error = np.abs(d_true - d_pred)
        value = sum((error < t).astype(np.float64) for t in LDDT_THRESHOLDS) / len(LDDT_THRESHOLDS)
    value = np.where(scored, value, 0.0)
    n_pairs = scored.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_residue = np.where(n_pairs > 0, value.sum(axis=-1) / n_pairs, np.nan)
        total_pairs = n_pairs.sum(axis=-1)
        score = np.where(total_pairs > 0, value.sum(axis=(-1, -2)) / total_pairs, np.nan)
    return Lddt(per_residue=per_residue, score=float(score) if score.ndim == 0 else score)


def kabsch(mobile: np.ndarray, target: np.ndarray, mask: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Rotation ``[3, 3]`` and translation ``[3]`` that best superpose ``mobile`` ``[N, 3]`` onto ``target``.

    Apply as ``mobile @ rotation.T + translation``. Least squares over the points in ``mask`` (default: every
    point with finite coordinates in both); a proper rotation (det = +1), never a reflection.
    """
    mobile = np.asarray(mobile, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    if mobile.shape != target.shape or mobile.ndim != 2 or mobile.shape[1] != 3:
        raise ValueError(f"mobile and target must both have shape [N, 3], got {mobile.shape} and {target.shape}")
    use = np.isfinite(mobile).all(axis=1) & np.isfinite(target).all(axis=1)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != use.shape:
            raise ValueError(f"mask must have shape {use.shape}, got {mask.shape}")
        use &= mask
    if use.sum() < 3:
        raise ValueError(f"superposition needs at least 3 points, got {int(use.sum())}")
    p, q = mobile[use], target[use]
    p_mean, q_mean = p.mean(axis=0), q.mean(axis=0)
    covariance = (p - p_mean).T @ (q - q_mean)
    u, _, vt = np.linalg.svd(covariance)
    sign = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
    rotation = vt.T @ np.diag([1.0, 1.0, sign]) @ u.T
    return rotation, q_mean - p_mean @ rotation.T


def kabsch_rmsd(mobile: np.ndarray, target: np.ndarray, mask: np.ndarray | None = None) -> float:
    """RMSD (Å) over the points used by :func:`kabsch` after optimal superposition of ``mobile`` onto ``target``."""
    mobile = np.asarray(mobile, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    rotation, translation = kabsch(mobile, target, mask)
    use = np.isfinite(mobile).all(axis=1) & np.isfinite(target).all(axis=1)
    if mask is not None:
        use &= np.asarray(mask, dtype=bool)
    moved = mobile[use] @ rotation.T + translation
    return float(np.sqrt(np.mean(np.sum((moved - target[use]) ** 2, axis=1))))


def tm_d0(length: int) -> float:
    """TM-score's distance scale d0 (Å) for a native of ``length`` residues: 1.24 (L − 15)^⅓ − 1.8, at least 0.5."""
    return max(0.5, 1.24 * np.cbrt(length - 15.0) - 1.8) if length > 21 else 0.5


def tm_score(pred_ca: np.ndarray, true_ca: np.ndarray, mask: np.ndarray | None = None, max_iterations: int = 20,
             length: int | None = None) -> float:
    """TM-score of ``pred_ca`` against ``true_ca`` ``[L, 3]`` with residue i matched to residue i (the TM-score
    program's question, not TM-align's: no alignment search), normalised by the native's residues.

    Zhang & Skolnick (2004) *Proteins* 57:702: TM = max over superpositions of Σ 1 / (1 + (d_i / d0)²) / L_N,
    L_N the residues with a true Cα (and in ``mask``), d0 = :func:`tm_d0` (L_N). The maximum is searched as the
    TM-score program does: Kabsch fits seeded on fragments of L, L/2, L/4, ... (at least 4) residues at steps of
    half a fragment, each refined by refitting on the residues closer than d0_search = clip(d0, 4.5, 8) Å
    (widened by 0.5 Å while fewer than 3 are) until the selection stops changing. A residue without a finite
    predicted Cα scores 0. NaN when the native has no residue; 0 when fewer than 3 residues can be superposed.
    ``length`` normalises by (and sets d0 from) that many native residues instead, e.g. the whole native chain
    when only its residues matched to the model are given.
    """
    pred = np.asarray(pred_ca, dtype=np.float64)
    true = np.asarray(true_ca, dtype=np.float64)
    if pred.shape != true.shape or pred.ndim != 2 or pred.shape[1] != 3:
        raise ValueError(f"pred_ca and true_ca must both have shape [L, 3], got {pred.shape} and {true.shape}")
    native = np.isfinite(true).all(axis=1)
    if mask is not None:
        native &= np.asarray(mask, dtype=bool)
    n_native = int(native.sum()) if length is None else int(length)
    if n_native <= 0:
        return float("nan")
    use = native & np.isfinite(pred).all(axis=1)
    p, q = pred[use], true[use]
    n = len(p)
    if n < 3:
        return 0.0
    d0 = tm_d0(n_native)
    d0_search = min(max(d0, 4.5), 8.0)
    best = 0.0
    length = n
    fragment_lengths = []
    while True:
        fragment_lengths.append(max(length, min(4, n)))
        if length <= 4:
            break
        length //= 2
    tried: set[bytes] = set()
    for fragment in dict.fromkeys(fragment_lengths):
        for start in range(0, n - fragment + 1, max(1, fragment // 4)):
            selected = np.zeros(n, dtype=bool)
            selected[start:start + fragment] = True
            for _ in range(max_iterations):
                key = np.packbits(selected).tobytes()
                if key in tried:
                    break
                tried.add(key)
                rotation, translation = kabsch(p, q, selected)
                distance = np.linalg.norm(p @ rotation.T + translation - q, axis=1)
                best = max(best, float((1.0 / (1.0 + (distance / d0) ** 2)).sum()) / n_native)
                cutoff = d0_search
                chosen = distance < cutoff
                while chosen.sum() < 3:
                    cutoff += 0.5
                    chosen = distance < cutoff
                if np.array_equal(chosen, selected):
                    break
                selected = chosen
    return best
