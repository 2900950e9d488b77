"""Folding from the predicted distogram (workflow_lib.inference.fold) and ``trackfold predict --fold distogram``.

Real data: the myoglobin chain of tests/data/structure (its own Cβ distogram, sharpened into probabilities, must
fold back to it) and the prediction test's A3M with a tiny random network.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from workflow_lib.errors import InputError
from workflow_lib.features import build_features
from workflow_lib.inference.fold import FoldOptions, fold_from_distogram, restraint_potential
from workflow_lib.inference.predict import PredictOptions, predict_features
from workflow_lib.model import ThreeTrackNetwork, preset
from workflow_lib.structure.parse import read_structure
from workflow_lib.structure.geometry import DIST_BINS, bin_pair_geometry, pair_geometry
from workflow_lib.structure.metrics import lddt_ca
from workflow_lib.workflow.config import PredictConfig

DATA = Path(__file__).parent / "data"


def native_distogram(coords: np.ndarray, sharpness: float = 0.8) -> np.ndarray:
    """Probabilities [L, L, 37] peaked at each pair's true Cβ bin (a perfect network, softened)."""
    bins = bin_pair_geometry(pair_geometry(coords[:, 0], coords[:, 1], coords[:, 2]))["dist"].astype(int)
    centre = np.arange(DIST_BINS)
    logits = -np.abs(centre[None, None, :] - bins[..., None]) / sharpness
    probs = np.exp(logits)
    return probs / probs.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def myoglobin():
    chain = read_structure(DATA / "structure" / "d1mbaa_.pdb.gz")[0]
    coords = np.asarray(chain.coords[:70, :3], dtype=np.float64)
    return coords


def test_a_native_distogram_folds_back_to_the_native(myoglobin):
    torch.set_num_threads(1)
    backbone, energy = fold_from_distogram(native_distogram(myoglobin), FoldOptions(starts=2, iterations=300))
    assert backbone.shape == (70, 3, 3) and np.isfinite(energy)
    assert lddt_ca(backbone[:, 1], myoglobin[:, 1]).score > 0.6
    steps = np.linalg.norm(np.diff(backbone[:, 1], axis=0), axis=1)
    assert abs(steps.mean() - 3.8) < 0.05 and steps.min() > 3.6          # physical chain
    # an uninformative distogram gives nothing like the native
    flat = np.full((70, 70, DIST_BINS), 1.0 / DIST_BINS)
    random_fold, _ = fold_from_distogram(flat, FoldOptions(starts=1, iterations=100))
    assert lddt_ca(random_fold[:, 1], myoglobin[:, 1]).score < 0.4


def test_restraints_skip_close_and_unlikely_pairs(myoglobin):
    probs = native_distogram(myoglobin)
    potential, weight = restraint_potential(probs, min_separation=3)
    sep = np.abs(np.arange(70)[:, None] - np.arange(70)[None, :])
    assert np.all(weight[sep < 3] == 0)
    assert np.isfinite(potential).all()
    far = (probs.argmax(-1) == DIST_BINS - 1) & (sep >= 3)
    near = (probs.argmax(-1) < 12) & (sep >= 3)
    assert far.any() and near.any() and weight[far].max() < weight[near].min()


def test_predict_fold_distogram_replaces_the_backbone():
    torch.manual_seed(0)
    model = ThreeTrackNetwork(preset("tiny", c_coevolution=2)).eval()
    features = build_features(DATA / "predict" / "t1078_head64.a3m")
    network = predict_features(model, features, PredictOptions(pair_heads=("omega",)))
    folded = predict_features(model, features, PredictOptions(pair_heads=("omega",), fold="distogram"))
    assert set(folded.probs) == {"omega"}                                  # dist used, not kept
    np.testing.assert_array_equal(folded.plddt, network.plddt)
    assert not np.allclose(folded.backbone[:, 1], network.backbone[:, 1], atol=1.0)
    steps = np.linalg.norm(np.diff(folded.backbone[:, 1], axis=0), axis=1)
    assert abs(steps.mean() - 3.8) < 0.1
    with pytest.raises(InputError, match="fold"):
        PredictOptions(fold="rosetta")
    with pytest.raises(InputError, match="predict.fold"):
        PredictConfig(fold="rosetta")
    assert PredictConfig(fold="distogram").runtime_min([400]) > PredictConfig(fold="network").runtime_min([400])
