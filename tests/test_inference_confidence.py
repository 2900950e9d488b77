"""The distogram's expected lDDT (workflow_lib.inference.confidence) and the pLDDT of folded predictions.

Real data: the myoglobin chain of tests/data/structure (its own Cβ distogram as a one-hot or softened
prediction, its own and a distorted backbone as the model).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workflow_lib.inference.confidence import expected_lddt
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
    centre = np.arange(DIST_BINS)
    soft = np.exp(-np.abs(centre[None, None, :] - probs.argmax(-1)[..., None]) / 1.5)
    soft /= soft.sum(-1, keepdims=True)
    assert 0.3 < expected_lddt(soft, native_cb).mean() < expected_lddt(probs, native_cb).mean()


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="dist_probs"):
        expected_lddt(np.zeros((3, 3, 10)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="cb"):
        expected_lddt(np.zeros((3, 3, DIST_BINS)), np.zeros((3, 2)))
