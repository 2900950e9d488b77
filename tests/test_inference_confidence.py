"""The distogram's expected lDDT (workflow_lib.inference.confidence) and the pLDDT of folded predictions.

Real data: the myoglobin chain of tests/data/structure (its own Cβ distogram as a one-hot or softened
prediction, its own and a distorted backbone as the model).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workflow_lib.errors import SchemaError
from workflow_lib.inference.confidence import CALIBRATION_KEY, PlddtCalibration, expected_lddt, fit_calibration
from workflow_lib.structure.cbeta import virtual_cb
from workflow_lib.structure.geometry import DIST_BINS, DIST_EDGES, bin_pair_geometry, pair_geometry
from workflow_lib.structure.metrics import lddt_ca
from workflow_lib.structure.parse import read_structure

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def myoglobin() -> np.ndarray:
    chain = read_structure(DATA / "structure" / "d1mbaa_.pdb.gz")[0]
    return np.asarray(chain.coords[:90, :3], dtype=np.float64)


def one_hot(coords: np.ndarray) -> np.ndarray:
    bins = bin_pair_geometry(pair_geometry(coords[:, 0], coords[:, 1], coords[:, 2]))["dist"].astype(int)
    return np.eye(DIST_BINS)[bins]


def softened(probs: np.ndarray, scale: float) -> np.ndarray:
    """The one-hot distogram spread over neighbouring bins (weights exp(-|bin distance| / scale))."""
    centre = np.arange(DIST_BINS)
    soft = np.exp(-np.abs(centre[None, None, :] - probs.argmax(-1)[..., None]) / scale)
    return soft / soft.sum(-1, keepdims=True)


def cb_of(coords: np.ndarray) -> np.ndarray:
    return virtual_cb(coords[:, 0], coords[:, 1], coords[:, 2])


def test_the_native_under_its_own_one_hot_distogram_scores_one(myoglobin):
    score = expected_lddt(one_hot(myoglobin), cb_of(myoglobin))
    assert score.shape == (90,) and score.dtype == np.float32
    np.testing.assert_allclose(score, 1.0, atol=1e-6)


def test_a_distance_off_by_three_bins_is_kept_only_by_the_4_angstrom_threshold():
    # two residues: the distogram puts all mass in [8.0, 8.5) Å, the model has them 11.2 Å apart: within 4 Å of
    # all of the bin (3.2 Å at most), beyond 2 Å of all of it: 1 of 4 thresholds
    cb = np.array([[0.0, 0.0, 0.0], [11.2, 0.0, 0.0]])
    probs = np.zeros((2, 2, DIST_BINS))
    k = int(np.searchsorted(DIST_EDGES, 8.0, side="right") - 1)
    probs[0, 1, k] = probs[1, 0, k] = 1.0
    probs[0, 0, -1] = probs[1, 1, -1] = 1.0
    np.testing.assert_allclose(expected_lddt(probs, cb), 0.25, atol=1e-6)
    # half the bin within 0.5 Å (model at 8.0 Å: [8.0, 8.5) lies within 0.5 Å), all within 1, 2 and 4 Å
    cb[1, 0] = 8.0
    np.testing.assert_allclose(expected_lddt(probs, cb), 1.0, atol=1e-6)
    cb[1, 0] = 7.75                                   # [7.25, 8.25] covers half the bin
    np.testing.assert_allclose(expected_lddt(probs, cb), (0.5 + 1 + 1 + 1) / 4, atol=1e-6)


def test_no_neighbour_within_the_radius_gives_zero_and_missing_cb_is_nobodys_neighbour(myoglobin):
    probs = np.zeros((3, 3, DIST_BINS))
    probs[..., -1] = 1.0                              # every pair predicted beyond 20 Å
    assert np.all(expected_lddt(probs, np.zeros((3, 3))) == 0.0)
    cb = cb_of(myoglobin)
    cb[5] = np.nan
    score = expected_lddt(one_hot(myoglobin), cb)
    assert score[5] == 0.0 and np.allclose(np.delete(score, 5), 1.0, atol=1e-6)


def test_it_follows_the_true_lddt_of_worse_models(myoglobin):
    """Against the native's distogram, a model's expected lDDT falls with its real lDDT (Cβ versus Cα)."""
    rng = np.random.default_rng(0)
    probs = one_hot(myoglobin)
    native_cb = cb_of(myoglobin)
    expected, real = [], []
    for noise in (0.0, 0.5, 1.0, 2.0, 4.0):
        model = myoglobin + rng.normal(0.0, noise, size=(90, 1, 3))   # each residue moved as a rigid unit
        expected.append(float(expected_lddt(probs, cb_of(model)).mean()))
        real.append(lddt_ca(model[:, 1], myoglobin[:, 1]).score)
    assert all(a > b for a, b in zip(expected, expected[1:]))
    assert np.corrcoef(expected, real)[0, 1] > 0.95
    # a softened (less certain) distogram lowers the native's own expected lDDT
    soft = softened(probs, 1.5)
    assert 0.3 < expected_lddt(soft, native_cb).mean() < expected_lddt(probs, native_cb).mean()


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="dist_probs"):
        expected_lddt(np.zeros((3, 3, 10)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="cb"):
        expected_lddt(np.zeros((3, 3, DIST_BINS)), np.zeros((3, 2)))


# --- the calibration stored with a checkpoint ----------------------------------------------------------------
def _distorted_pairs(myoglobin: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per residue, (expected lDDT under the native's softened distogram, real lDDT-Cα) of myoglobin models
    distorted ever more (each residue moved as a rigid unit)."""
    rng = np.random.default_rng(seed)
    distogram = softened(one_hot(myoglobin), 1.0)
    expected, real = [], []
    for noise in (0.3, 0.6, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0):
        model = myoglobin + rng.normal(0.0, noise, size=(90, 1, 3))
        expected.append(expected_lddt(distogram, cb_of(model)))
        real.append(lddt_ca(model[:, 1], myoglobin[:, 1]).per_residue)
    return np.concatenate(expected), np.concatenate(real)


def test_a_fitted_calibration_predicts_the_real_lddt_of_other_models(myoglobin):
    """Real per-residue pairs: fitted on one set of distorted myoglobin models, the calibration brings the pLDDT
    of another set (other distortions) close to its real lDDT-Cα, in every range of expected lDDT and much
    closer than the expected lDDT itself; the ends are anchored at (0, 0) and (1, 1)."""
    calibration = fit_calibration(*_distorted_pairs(myoglobin, 0), bins=12)
    expected, real = _distorted_pairs(myoglobin, 1)
    checked = 0
    for low, high in ((0.2, 0.4), (0.4, 0.6), (0.6, 0.9)):
        inside = (expected >= low) & (expected < high)
        if inside.sum() > 20:
            assert abs(float(calibration(expected[inside]).mean()) - float(real[inside].mean())) < 0.05
            checked += 1
    assert checked >= 2
    assert np.abs(calibration(expected) - real).mean() < 0.6 * np.abs(expected - real).mean()
    np.testing.assert_allclose(calibration(np.array([0.0, 1.0])), [0.0, 1.0])
    assert calibration.expected[0] == 0.0 and calibration.expected[-1] == 1.0


def test_fit_calibration_pools_violators_weighs_ties_and_needs_enough_residues():
    expected = np.repeat(np.linspace(0.1, 0.9, 4), 10)
    real = np.repeat([0.3, 0.5, 0.4, 0.8], 10)            # the third group breaks the order: pooled with the second
    calibration = fit_calibration(expected, real, bins=4)
    np.testing.assert_allclose(calibration.lddt, [0.0, 0.3, 0.45, 0.45, 0.8, 1.0])
    np.testing.assert_allclose(calibration.expected, [0.0, 0.1, 0.1 + 0.8 / 3, 0.1 + 1.6 / 3, 0.9, 1.0], atol=1e-6)
    cascade = fit_calibration(expected, np.repeat([0.5, 0.4, 0.3, 0.9], 10), bins=4)   # three groups pooled
    np.testing.assert_allclose(cascade.lddt[1:-1], [0.4, 0.4, 0.4, 0.9])
    # groups with the same expected lDDT are one knot at their size-weighted value; no anchor at 0 then
    ties = fit_calibration(np.repeat([0.0, 0.5], 20), np.repeat([0.1, 0.5, 0.7, 0.7], 10), bins=4)
    np.testing.assert_allclose(ties.expected, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(ties.lddt, [0.3, 0.7, 1.0])
    with pytest.raises(ValueError, match="at least 8 residues"):
        fit_calibration(expected[:5], real[:5], bins=4)
    with pytest.raises(ValueError, match="all alike"):
        fit_calibration(np.full(40, 0.5), real, bins=4)
    with pytest.raises(ValueError, match="at least 2 groups"):
        fit_calibration(expected, real, bins=1)


def test_calibration_round_trips_through_checkpoint_metadata_and_rejects_bad_knots():
    calibration = PlddtCalibration((0.0, 0.5, 1.0), (0.1, 0.7, 0.95))
    assert PlddtCalibration.from_extra({CALIBRATION_KEY: calibration.to_extra()}) == calibration
    assert PlddtCalibration.from_extra({"steps": "1000"}) is None
    np.testing.assert_allclose(calibration(np.array([0.25, 0.5, 0.75])), [0.4, 0.7, 0.825], rtol=1e-6)
    with pytest.raises(SchemaError, match=CALIBRATION_KEY):
        PlddtCalibration.from_extra({CALIBRATION_KEY: {"expected": [0.0, 0.5], "lddt": [0.9, 0.1]}})
    with pytest.raises(SchemaError, match=CALIBRATION_KEY):
        PlddtCalibration.from_extra({CALIBRATION_KEY: {"expected": [0.0]}})
    for knots in (((0.5, 0.5), (0.1, 0.2)), ((0.0, 1.5), (0.1, 0.2)), ((0.0,), (0.1,))):
        with pytest.raises(ValueError):
            PlddtCalibration(*knots)
