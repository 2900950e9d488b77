"""lDDT-Cα and Kabsch RMSD: hand cases, a plain-loop reference and real chains."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workflow_lib.structure import kabsch, kabsch_rmsd, lddt_ca, read_chain

DATA = Path(__file__).parent / "data" / "structure"


def _random_rotation(seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def _lddt_loop(pred, true, cutoff=15.0):
    """Plain-loop lDDT-Cα (AlphaFold's pair selection), per residue and pooled."""
    length = len(true)
    per_residue, total, count = [], 0.0, 0
    for i in range(length):
        scores = []
        for j in range(length):
            if i == j:
                continue
            d_true = np.linalg.norm(true[i] - true[j])
            if d_true >= cutoff:
                continue
            error = abs(d_true - np.linalg.norm(pred[i] - pred[j]))
            scores.append(sum(error < t for t in (0.5, 1.0, 2.0, 4.0)) / 4)
        per_residue.append(np.mean(scores) if scores else np.nan)
        total += sum(scores)
        count += len(scores)
    return np.array(per_residue), total / count


def test_lddt_hand_computed_case():
    true = np.array([[0.0, 0, 0], [3.0, 0, 0], [6.0, 0, 0], [40.0, 0, 0]])
    pred = np.array([[0.0, 0, 0], [3.0, 0, 0], [7.5, 0, 0], [90.0, 0, 0]])
    # pairs (true distance < 15): AB err 0 → 1; AC err 1.5 → 0.5; BC err 1.5 → 0.5; D has no neighbour
    result = lddt_ca(pred, true)
    np.testing.assert_allclose(result.per_residue[:3], [0.75, 0.75, 0.5])
    assert np.isnan(result.per_residue[3])
    assert result.score == pytest.approx(4.0 / 6.0)  # pooled over the 6 ordered pairs


def test_lddt_thresholds_are_strict():
    true = np.array([[0.0, 0, 0], [5.0, 0, 0]])
    for error, expected in ((0.5, 0.75), (0.49, 1.0), (4.0, 0.0), (3.99, 0.25)):
        pred = np.array([[0.0, 0, 0], [5.0 + error, 0, 0]])
        assert lddt_ca(pred, true).score == pytest.approx(expected)


def test_lddt_identical_and_rigidly_moved_structures_score_one():
    ca = read_chain(DATA / "d1mbaa_.pdb.gz", "A").ca.astype(np.float64)
    assert lddt_ca(ca, ca).score == 1.0
    moved = ca @ _random_rotation(3).T + np.array([5.0, -20.0, 1.0])
    result = lddt_ca(moved, ca)
    assert result.score == pytest.approx(1.0) and np.allclose(result.per_residue, 1.0)


def test_lddt_matches_loop_and_drops_with_noise():
    ca = read_chain(DATA / "3BP8_l_u.pdb", "A").ca.astype(np.float64)
    rng = np.random.default_rng(4)
    previous = 1.0
    for sigma in (0.3, 1.0, 3.0):
        noisy = ca + rng.normal(scale=sigma, size=ca.shape)
        result = lddt_ca(noisy, ca)
        per_residue, pooled = _lddt_loop(noisy, ca)
        np.testing.assert_allclose(result.per_residue, per_residue, atol=1e-12)
        assert result.score == pytest.approx(pooled, abs=1e-12)
        assert result.score < previous
        previous = result.score
    assert previous < 0.6


def test_lddt_mask_missing_coordinates_and_batches():
    ca = read_chain(DATA / "2OOB_r_u.pdb", "A").ca.astype(np.float64)
    noisy = ca + np.random.default_rng(5).normal(scale=1.0, size=ca.shape)
    mask = np.ones(len(ca), dtype=bool)
    mask[:5] = False
    masked = lddt_ca(noisy, ca, mask=mask)
    assert np.isnan(masked.per_residue[:5]).all()
    np.testing.assert_allclose(masked.per_residue[5:], _lddt_loop(noisy[5:], ca[5:])[0])
    true_missing = ca.copy()
    true_missing[:5] = np.nan  # missing true atoms behave like a mask
    np.testing.assert_allclose(lddt_ca(noisy, true_missing).per_residue, masked.per_residue, equal_nan=True)
    batch = lddt_ca(np.stack([noisy, ca]), np.stack([ca, ca]))
    assert batch.per_residue.shape == (2, len(ca)) and batch.score.shape == (2,)
    assert batch.score[1] == 1.0 and batch.score[0] == pytest.approx(lddt_ca(noisy, ca).score)
    pred_missing = noisy.copy()
    pred_missing[0] = np.nan  # a missing prediction scores zero on its pairs
    assert lddt_ca(pred_missing, ca).per_residue[0] == 0.0
    with pytest.raises(ValueError, match="shape"):
        lddt_ca(ca[:-1], ca)
    with pytest.raises(ValueError, match="mask"):
        lddt_ca(ca, ca, mask=mask[:-1])


def test_kabsch_recovers_a_rigid_motion():
    ca = read_chain(DATA / "d1mbaa_.pdb.gz", "A").ca.astype(np.float64)
    rotation = _random_rotation(6)
    target = ca @ rotation.T + np.array([1.0, 2.0, 3.0])
    found, translation = kabsch(ca, target)
    np.testing.assert_allclose(found, rotation, atol=1e-9)
    np.testing.assert_allclose(ca @ found.T + translation, target, atol=1e-9)
    assert kabsch_rmsd(ca, target) < 1e-9


def test_kabsch_rmsd_hand_case_and_no_reflection():
    square = np.array([[1.0, 1, 0], [-1, 1, 0], [-1, -1, 0], [1, -1, 0]])
    lifted = square + np.array([[0, 0, 1.0], [0, 0, -1.0], [0, 0, 1.0], [0, 0, -1.0]])
    # best superposition keeps the planes parallel: every point is off by exactly 1 Å
    assert kabsch_rmsd(square, lifted) == pytest.approx(1.0)
    ca = read_chain(DATA / "3BP8_l_u.pdb", "A").ca.astype(np.float64)
    mirror = ca * np.array([1.0, 1.0, -1.0])
    rotation, _ = kabsch(ca, mirror)
    assert np.linalg.det(rotation) == pytest.approx(1.0)
    assert kabsch_rmsd(ca, mirror) > 1.0  # a chiral chain cannot be rotated onto its mirror image
    noisy = ca + np.random.default_rng(7).normal(scale=0.5, size=ca.shape)
    raw = np.sqrt(np.mean(np.sum((noisy - ca) ** 2, axis=1)))
    assert kabsch_rmsd(noisy, ca) <= raw
    with pytest.raises(ValueError, match="3 points"):
        kabsch(ca[:2], ca[:2])
