"""Confidence of a structure folded from a predicted distogram: the lDDT the structure expects under it.

When the backbone is folded from the distogram (:mod:`workflow_lib.inference.fold`), the network's pLDDT head
scored a different structure (its own structure module's). The distogram itself says how sure the network is
of each distance, and how well the folded model satisfies it: per residue ``i``, the expected lDDT of the
model against a structure drawn from the predicted distance distributions (the 6D inter-residue geometry of
trRosetta, Yang et al. 2020, PNAS 117:1496: the 6D maps are what the network predicts best; the lDDT convention is
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

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from workflow_lib.errors import SchemaError
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


@dataclass(frozen=True)
class PlddtCalibration:
    """A monotone map from the expected lDDT (:func:`expected_lddt`) to the lDDT-Cα it goes with, fitted on held-out
    chains of known structure (:func:`fit_calibration`) and stored in the checkpoint (``extra`` key
    :data:`CALIBRATION_KEY`).

    The expected lDDT ranks residues and chains by accuracy but reads low: the predicted distance distributions
    are wider than the folded model's real errors, so a residue's real lDDT-Cα is above its expected lDDT (by how
    much on the default checkpoint's validation chains: benchmarks/RESULTS.md, "pLDDT calibration:
    trackfold_small_v4.pt on validation chains"). Calibrated, pLDDT reads on the lDDT-Cα scale that AlphaFold's
    pLDDT predicts and AlphaFold DB's bands assume (Jumper et al. 2021, *Nature* 596:583: below 50 very low,
    50–70 low, 70–90 confident, above 90 very high). ``expected`` and ``lddt`` are the knots (both in [0, 1],
    ``expected`` strictly increasing, ``lddt`` non-decreasing); values between knots are interpolated linearly,
    beyond them held (a fitted calibration's knots run from 0 to 1).
    """

    expected: tuple[float, ...]
    lddt: tuple[float, ...]

    def __post_init__(self) -> None:
        x, y = np.asarray(self.expected, dtype=np.float64), np.asarray(self.lddt, dtype=np.float64)
        if x.ndim != 1 or x.shape != y.shape or x.size < 2:
            raise ValueError("a pLDDT calibration needs at least two knots, as many expected values as lDDT values")
        if not (np.isfinite(x).all() and np.isfinite(y).all()) or x.min() < 0 or x.max() > 1 or y.min() < 0 \
                or y.max() > 1:
            raise ValueError("pLDDT calibration knots must be finite and in [0, 1]")
        if (np.diff(x) <= 0).any() or (np.diff(y) < 0).any():
            raise ValueError("pLDDT calibration knots must be increasing (expected) and non-decreasing (lDDT)")

    def __call__(self, expected: np.ndarray) -> np.ndarray:
        """The calibrated lDDT (float32, same shape) of expected-lDDT values in [0, 1]."""
        return np.interp(np.asarray(expected, dtype=np.float64), self.expected, self.lddt).astype(np.float32)

    def to_extra(self) -> dict:
        """The plain dict stored under :data:`CALIBRATION_KEY` in a checkpoint's ``extra``."""
        return {"expected": [round(float(v), 6) for v in self.expected],
                "lddt": [round(float(v), 6) for v in self.lddt]}

    @classmethod
    def from_extra(cls, extra: Mapping) -> PlddtCalibration | None:
        """The calibration a checkpoint's ``extra`` carries, or None (pLDDT is then the expected lDDT itself)."""
        value = extra.get(CALIBRATION_KEY)
        if value is None:
            return None
        try:
            return cls(tuple(float(v) for v in value["expected"]), tuple(float(v) for v in value["lddt"]))
        except (KeyError, TypeError, ValueError) as error:
            raise SchemaError(f"checkpoint {CALIBRATION_KEY!r}: {error}") from None


CALIBRATION_KEY = "plddt_calibration"
"""Key of the pLDDT calibration in a checkpoint's ``extra`` metadata."""


def fit_calibration(expected: np.ndarray, lddt: np.ndarray, *, bins: int = 40) -> PlddtCalibration:
    """Isotonic fit of the real lDDT on the expected lDDT, per residue, reduced to at most ``bins`` knots plus the
    two end anchors.

    Residues are sorted by expected lDDT and cut into ``bins`` groups of equal size; the groups' mean real lDDT is
    made non-decreasing by pool-adjacent-violators (Ayer et al. 1955, *Ann. Math. Stat.* 26:641; weighted by group
    size), the isotonic calibration of Zadrozny & Elkan (2002, *KDD*), and each group gives one knot at its mean
    expected lDDT (groups with the same mean: one knot, their size-weighted value). Beyond the groups the map runs
    linearly to the anchors (0, 0) and (1, 1): a residue the distogram places near nothing is not confident, and a
    backbone that satisfies a one-hot distogram exactly is exact if the distogram is. Knots are rounded to 6
    decimals, as stored. Non-finite pairs are ignored.
    """
    if bins < 2:
        raise ValueError(f"a pLDDT calibration needs at least 2 groups of residues, got bins={bins}")
    x = np.asarray(expected, dtype=np.float64).ravel()
    y = np.asarray(lddt, dtype=np.float64).ravel()
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = np.clip(x[keep], 0.0, 1.0), np.clip(y[keep], 0.0, 1.0)
    if x.size < 2 * bins:
        raise ValueError(f"a pLDDT calibration with {bins} knots needs at least {2 * bins} residues, got {x.size}")
    order = np.argsort(x, kind="stable")
    groups = np.array_split(order, bins)
    # groups with the same mean expected lDDT (rounded as stored) are one group
    merged_groups: list[tuple[float, float, float]] = []       # (mean expected, mean real, size)
    for group in groups:
        mx, my, size = round(float(x[group].mean()), 6), float(y[group].mean()), float(len(group))
        if merged_groups and mx <= merged_groups[-1][0]:
            px, py, psize = merged_groups.pop()
            mx, my, size = px, (py * psize + my * size) / (psize + size), psize + size
        merged_groups.append((mx, my, size))
    if len(merged_groups) < 2:
        raise ValueError("the expected lDDT values are all alike: nothing to calibrate")
    blocks: list[list] = []                                     # [value, weight, first group, last group]
    for k, (_, value, size) in enumerate(merged_groups):
        blocks.append([value, size, k, k])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            value2, weight2, _, last = blocks.pop()
            value1, weight1, first, _ = blocks.pop()
            blocks.append([(value1 * weight1 + value2 * weight2) / (weight1 + weight2), weight1 + weight2,
                           first, last])
    fitted = np.empty(len(merged_groups))
    for value, _, first, last in blocks:
        fitted[first:last + 1] = value
    knots_x = [group[0] for group in merged_groups]
    knots_y = [round(float(v), 6) for v in fitted]
    if knots_x[0] > 0.0:
        knots_x.insert(0, 0.0)
        knots_y.insert(0, 0.0)
    if knots_x[-1] < 1.0:
        knots_x.append(1.0)
        knots_y.append(1.0)
    return PlddtCalibration(tuple(knots_x), tuple(knots_y))
