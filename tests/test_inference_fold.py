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
from workflow_lib.aligner.device import KERNELS_ENV, compiled_available
from workflow_lib.inference.confidence import expected_lddt
from workflow_lib.inference.fold import (BIN_CENTRES, CLASH_DISTANCE, TAIL_SLOPE, FoldOptions, _dihedral,
                                         template_anchors,
                                         _interpolate, _planar, embed_distances, fold_from_distogram, graph_energy, helix_handedness,
                                         orientation_energy, orientation_hand_energy, orientation_potentials,
                                         prefer_mirror, restraint_potential, rotation_to_quaternion)
from workflow_lib.inference.fold_compiled import AnchorEnergy, ChainEnergy, CompiledTerms, pair_tables
from workflow_lib.inference.predict import PredictOptions, predict_features
from workflow_lib.model import ThreeTrackNetwork, preset
from workflow_lib.structure.cbeta import virtual_cb
from workflow_lib.structure.parse import read_structure
from workflow_lib.model.structure import (Frames, backbone_from_frames, bond_violation_loss, cb_from_backbone,
                                          quaternion_to_rotation, random_rotation)
from workflow_lib.structure.geometry import (DIST_BINS, OMEGA_BINS, PHI_BINS, bin_pair_geometry, dihedral,
                                             pair_geometry, planar_angle)
from workflow_lib.structure.metrics import lddt_ca, tm_score
from workflow_lib.workflow.config import PredictConfig

DATA = Path(__file__).parent / "data"


def native_distogram(coords: np.ndarray, sharpness: float = 0.8) -> np.ndarray:
    """Probabilities [L, L, 37] peaked at each pair's true Cβ bin (a perfect network, softened)."""
    bins = bin_pair_geometry(pair_geometry(coords[:, 0], coords[:, 1], coords[:, 2]))["dist"].astype(int)
    centre = np.arange(DIST_BINS)
    logits = -np.abs(centre[None, None, :] - bins[..., None]) / sharpness
    probs = np.exp(logits)
    return probs / probs.sum(-1, keepdims=True)


def native_orientations(coords: np.ndarray, sharpness: float = 0.8) -> dict[str, np.ndarray]:
    """ω / θ / φ probabilities peaked at each pair's true bin (cyclic for the dihedrals), no-contact where the
    pair is beyond 20 Å, as a perfect network's heads would give."""
    bins = bin_pair_geometry(pair_geometry(coords[:, 0], coords[:, 1], coords[:, 2]))
    out = {}
    for key, classes, cyclic in (("omega", OMEGA_BINS, True), ("theta", OMEGA_BINS, True), ("phi", PHI_BINS, False)):
        real = classes - 1
        index = bins[key].astype(int)
        gap = np.abs(np.arange(real)[None, None, :] - np.minimum(index, real - 1)[..., None])
        if cyclic:
            gap = np.minimum(gap, real - gap)
        probs = np.exp(-gap / sharpness)
        probs = np.concatenate([probs, np.zeros(probs.shape[:2] + (1,))], axis=-1)
        probs[index == real] = np.eye(classes)[real]
        out[key] = probs / probs.sum(-1, keepdims=True)
    return out


@pytest.fixture(scope="module")
def myoglobin():
    chain = read_structure(DATA / "structure" / "d1mbaa_.pdb.gz")[0]
    coords = np.asarray(chain.coords[:70, :3], dtype=np.float64)
    return coords


@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
def test_a_native_distogram_folds_back_to_the_native(myoglobin, kernels, monkeypatch):
    if kernels == "compiled" and not compiled_available():
        pytest.skip("numba not importable")
    monkeypatch.setenv(KERNELS_ENV, "" if kernels == "compiled" else "numpy")
    torch.set_num_threads(1)
    backbone, energy = fold_from_distogram(native_distogram(myoglobin), FoldOptions(starts=2, iterations=300))
    assert backbone.shape == (70, 3, 3) and np.isfinite(energy)
    assert lddt_ca(backbone[:, 1], myoglobin[:, 1]).score > 0.6
    steps = np.linalg.norm(np.diff(backbone[:, 1], axis=0), axis=1)
    assert abs(steps.mean() - 3.8) < 0.05 and steps.min() > 3.6          # physical chain
    # an uninformative distogram gives nothing like the native: from a random walk (below 0.4), and from its
    # distance geometry, every pair at the bins' mean distance, a compact ball (below 0.5; measured 0.43)
    flat = np.full((70, 70, DIST_BINS), 1.0 / DIST_BINS)
    random_fold, _ = fold_from_distogram(flat, FoldOptions(starts=1, iterations=100, geometry_start=False))
    assert lddt_ca(random_fold[:, 1], myoglobin[:, 1]).score < 0.4
    ball, _ = fold_from_distogram(flat, FoldOptions(starts=1, iterations=100))
    assert lddt_ca(ball[:, 1], myoglobin[:, 1]).score < 0.5


def restrained_pairs(coords: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(pairs [P, 2], potential rows [P, bins], weights [P])`` of the chain's native distogram, as the fold
    restrains them (contact probability above 0.05)."""
    potential, weight = restraint_potential(native_distogram(coords))
    pairs = np.argwhere(np.triu(weight > 0.05, k=1))
    return pairs, potential[pairs[:, 0], pairs[:, 1]], weight[pairs[:, 0], pairs[:, 1]]


@pytest.mark.skipif(not compiled_available(), reason="numba not importable")
def test_compiled_terms_match_the_torch_terms(myoglobin):
    """Energies and gradients of the compiled restraint and clash pass against the torch expressions, on chains
    with clashes, pairs beyond the last bin centre and pairs below the first."""
    pairs, pot, w = restrained_pairs(myoglobin)
    generator = torch.Generator().manual_seed(1)
    native = torch.as_tensor(myoglobin[:, 1], dtype=torch.float32)
    cb = torch.stack([native + 1.5 * torch.randn(70, 3, generator=generator),
                      0.3 * native, 2.5 * native]).requires_grad_(True)          # [3, 70, 3]: near, squeezed, far
    ca = (cb.detach() * 0.9).requires_grad_(True)
    pot_t, w_t = torch.as_tensor(pot, dtype=torch.float32), torch.as_tensor(w, dtype=torch.float32)
    i_idx, j_idx = torch.as_tensor(pairs[:, 0]), torch.as_tensor(pairs[:, 1])
    d = (cb[:, i_idx] - cb[:, j_idx]).norm(dim=-1)
    expected = (w_t * _interpolate(pot_t, d)).sum(-1)
    far = torch.triu(torch.ones(70, 70), diagonal=2)
    expected_clash = ((torch.relu(CLASH_DISTANCE - torch.cdist(ca, ca)) ** 2) * far).sum((-1, -2))
    assert (d > BIN_CENTRES[-1]).any() and (d < BIN_CENTRES[0]).any()
    assert expected_clash[1] > 0 and expected_clash[2] == 0
    grad_cb, grad_ca = torch.autograd.grad((expected.sum(), expected_clash.sum()), (cb, ca))
    tables = pair_tables(pairs, pot, w, BIN_CENTRES, TAIL_SLOPE)
    got, got_clash = CompiledTerms.apply(cb, ca, tables, CLASH_DISTANCE)
    torch.testing.assert_close(got, expected.detach(), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(got_clash, expected_clash.detach(), rtol=1e-4, atol=1e-3)
    got_cb, got_ca = torch.autograd.grad((got.sum(), got_clash.sum()), (cb, ca))
    torch.testing.assert_close(got_cb, grad_cb, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(got_ca, grad_ca, rtol=1e-3, atol=1e-3)
    # without the even spacing (step 0) the kernel bisects the centres instead of dividing: same result
    assert tables[5] == 0.5
    bisected, _ = CompiledTerms.apply(cb, ca, tables[:5] + (0.0,) + tables[6:], CLASH_DISTANCE)
    torch.testing.assert_close(bisected, got, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(not compiled_available(), reason="numba not importable")
def test_compiled_chain_energy_matches_the_torch_graph(myoglobin):
    """The one-call energy (frames -> atoms -> Cβ -> restraints, clash and chain terms) and its gradients on the
    frames against autograd through the torch expressions, in float64, on starts near, squeezed and unnormalised."""
    length = 70
    pairs, pot, w = restrained_pairs(myoglobin)
    generator = torch.Generator().manual_seed(2)
    native = torch.as_tensor(myoglobin[:, 1], dtype=torch.float64)
    trans = torch.stack([native + torch.randn(length, 3, generator=generator, dtype=torch.float64),
                         0.3 * native, 2.0 * native]).requires_grad_(True)                  # [3, 70, 3]
    quat = (3.0 * torch.randn(3, length, 4, generator=generator, dtype=torch.float64)).requires_grad_(True)
    bond_weight, clash_weight = 7.0, 1.5

    backbone = backbone_from_frames(Frames(quaternion_to_rotation(quat), trans))
    bonds, _ = bond_violation_loss(backbone, torch.ones(3, length - 1, dtype=torch.bool), tolerance=0.0)
    cb, ca = cb_from_backbone(backbone), backbone[:, :, 1]
    d = (cb[:, pairs[:, 0]] - cb[:, pairs[:, 1]]).norm(dim=-1)
    restraint = (torch.as_tensor(w) * _interpolate(torch.as_tensor(pot), d)).sum() / length
    far = torch.triu(torch.ones(length, length, dtype=torch.float64), diagonal=2)
    clash = ((torch.relu(CLASH_DISTANCE - torch.cdist(ca, ca)) ** 2) * far).sum() / length
    expected = restraint + bond_weight * 3 * bonds + clash_weight * clash
    assert clash > 0 and bonds > 0
    grad_trans, grad_quat = torch.autograd.grad(expected, (trans, quat))

    tables = pair_tables(pairs, pot, w, BIN_CENTRES, TAIL_SLOPE)
    got = ChainEnergy.apply(trans, quat, tables, CLASH_DISTANCE, bond_weight, clash_weight)
    assert got.shape == (3,)
    torch.testing.assert_close(got.sum(), expected.detach(), rtol=1e-9, atol=1e-9)
    got_trans, got_quat = torch.autograd.grad(got.sum(), (trans, quat))
    torch.testing.assert_close(got_trans, grad_trans, rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(got_quat, grad_quat, rtol=1e-8, atol=1e-9)
    # each start's energy is its own: the second start alone gives the second entry
    alone = ChainEnergy.apply(trans[1:2], quat[1:2], tables, CLASH_DISTANCE, bond_weight, clash_weight)
    torch.testing.assert_close(alone[0], got[1])


def test_graph_energy_folds_as_well(myoglobin):
    """The fold with the torch graph (graph_energy) and with the compiled energy reach the native alike."""
    probs = native_distogram(myoglobin)
    options = FoldOptions(starts=2, iterations=300)
    compiled, _ = fold_from_distogram(probs, options)
    with graph_energy():
        graph, _ = fold_from_distogram(probs, options)
    for backbone in (compiled, graph):
        assert lddt_ca(backbone[:, 1], myoglobin[:, 1]).score > 0.6


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
    network = predict_features(model, features, PredictOptions(pair_heads=("omega",), fold="network"))
    folded = predict_features(model, features, PredictOptions(pair_heads=("omega",), fold="distogram"))
    assert set(folded.probs) == {"omega"}                                  # dist used, not kept
    # pLDDT: the folded backbone's expected lDDT under the distogram, not the network head's
    kept = predict_features(model, features, PredictOptions(pair_heads=("dist",), fold="distogram"))
    bb = kept.backbone.astype(np.float64)
    np.testing.assert_allclose(kept.plddt, 100.0 * expected_lddt(kept.probs["dist"], virtual_cb(bb[:, 0], bb[:, 1],
                                                                                               bb[:, 2])), atol=1e-3)
    np.testing.assert_array_equal(kept.plddt, folded.plddt)
    assert not np.allclose(folded.plddt, network.plddt)
    assert not np.allclose(folded.backbone[:, 1], network.backbone[:, 1], atol=1.0)
    steps = np.linalg.norm(np.diff(folded.backbone[:, 1], axis=0), axis=1)
    assert abs(steps.mean() - 3.8) < 0.1
    with pytest.raises(InputError, match="fold"):
        PredictOptions(fold="rosetta")
    with pytest.raises(InputError, match="predict.fold"):
        PredictConfig(fold="rosetta")
    assert PredictConfig(fold="distogram").runtime_min([1000]) > PredictConfig(fold="network").runtime_min([1000])


def test_torch_angles_match_the_geometry_module():
    rng = np.random.default_rng(0)
    a, b, c, d = (rng.normal(size=(50, 3)) for _ in range(4))
    torch_points = [torch.as_tensor(x) for x in (a, b, c, d)]
    np.testing.assert_allclose(_dihedral(*torch_points).numpy(), dihedral(a, b, c, d), atol=1e-12)
    np.testing.assert_allclose(_planar(*torch_points[:3]).numpy(), planar_angle(a, b, c), atol=1e-6)


def test_orientation_restraints_tell_the_native_from_its_mirror_image(myoglobin):
    """Distances cannot tell a fold from its mirror image; the ω/θ dihedrals can: under the native's own
    orientation maps the native scores far lower than its mirror image."""
    probs = native_orientations(myoglobin)
    weight = 1.0 - native_distogram(myoglobin)[..., -1]
    pairs = np.argwhere(np.triu(weight >= 0.5, k=1))
    potentials = orientation_potentials(probs, pairs)
    w = torch.as_tensor(weight[pairs[:, 0], pairs[:, 1]], dtype=torch.float32)
    energies = {}
    for name, coords in (("native", myoglobin), ("mirror", myoglobin * np.array([-1.0, 1.0, 1.0]))):
        backbone = torch.as_tensor(coords, dtype=torch.float32)[None]
        energies[name] = float(orientation_energy(backbone, cb_from_backbone(backbone), torch.as_tensor(pairs),
                                                  potentials, w)) / len(pairs)
    assert energies["native"] < 0.6 * energies["mirror"], energies


def test_orientation_restraints_fold_the_native_with_the_right_hand(myoglobin):
    torch.set_num_threads(1)
    options = FoldOptions(starts=2, iterations=300, orientation_weight=1.0)
    backbone, energy = fold_from_distogram(native_distogram(myoglobin), options,
                                           orientations=native_orientations(myoglobin))
    assert np.isfinite(energy) and lddt_ca(backbone[:, 1], myoglobin[:, 1]).score > 0.6
    mirror = myoglobin[:, 1] * np.array([-1.0, 1.0, 1.0])
    assert tm_score(backbone[:, 1], myoglobin[:, 1]) > tm_score(backbone[:, 1], mirror) + 0.1
    steps = np.linalg.norm(np.diff(backbone[:, 1], axis=0), axis=1)
    assert abs(steps.mean() - 3.8) < 0.05
    with pytest.raises(ValueError, match="omega, theta and phi"):
        fold_from_distogram(native_distogram(myoglobin), options)


def test_distances_alone_fold_either_hand_and_the_hand_choice_keeps_the_native_one(myoglobin):
    """A distogram is the same for a fold and its mirror image: from the native's own distogram, plain
    minimisation lands on the mirror image for some seeds (measured: 4 of 6). With ``choose_hand`` the fold is
    compared with its mirror image (here by the right-handed helix rule: no orientation maps given) and every
    seed ends with the native's hand."""
    torch.set_num_threads(1)
    mirror = myoglobin[:, 1] * np.array([-1.0, 1.0, 1.0])
    hands = {}
    for choose in (False, True):
        for seed in range(4):
            backbone, _ = fold_from_distogram(native_distogram(myoglobin),     # random-walk starts
                                              FoldOptions(starts=1, iterations=300, seed=seed, choose_hand=choose,
                                                          geometry_start=False))
            hands[choose, seed] = tm_score(backbone[:, 1], myoglobin[:, 1]) - tm_score(backbone[:, 1], mirror)
            steps = np.linalg.norm(np.diff(backbone[:, 1], axis=0), axis=1)
            assert abs(steps.mean() - 3.8) < 0.05                       # the polished mirror is physical too
    assert any(hands[False, seed] < -0.2 for seed in range(4)), hands
    assert all(hands[True, seed] > 0.2 for seed in range(4)), hands


def test_the_hand_rules_prefer_the_native_over_its_mirror_image(myoglobin, monkeypatch):
    import workflow_lib.inference.fold as fold_module

    mirror = myoglobin * np.array([-1.0, 1.0, 1.0])
    weight = 1.0 - native_distogram(myoglobin)[..., -1]
    orientations = native_orientations(myoglobin)
    assert helix_handedness(myoglobin) > 20 and helix_handedness(mirror) < -20     # myoglobin is all helix
    assert orientation_hand_energy(myoglobin, orientations, weight, FoldOptions()) < \
        orientation_hand_energy(mirror, orientations, weight, FoldOptions())
    assert prefer_mirror(mirror, orientations, weight, FoldOptions())
    assert not prefer_mirror(myoglobin, orientations, weight, FoldOptions())
    # as for a fold without helices (the helix rule never decisive): the orientation maps decide, and without
    # them the fold is kept as it is
    monkeypatch.setattr(fold_module, "HELIX_MARGIN", 10**6)
    assert prefer_mirror(mirror, orientations, weight, FoldOptions())
    assert not prefer_mirror(myoglobin, orientations, weight, FoldOptions())
    assert not prefer_mirror(mirror, None, weight, FoldOptions())


def test_rotation_to_quaternion_inverts_quaternion_to_rotation():
    rot = random_rotation(500, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    half_turns = torch.diag_embed(torch.tensor([[1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]],
                                               dtype=torch.float64))   # 180° turns: the w = 0 corner
    rot = torch.cat((rot, half_turns, torch.eye(3, dtype=torch.float64)[None]))
    np.testing.assert_allclose(quaternion_to_rotation(rotation_to_quaternion(rot)).numpy(), rot.numpy(), atol=1e-9)


def test_pairs_outside_the_covered_mask_are_unrestrained_and_leave_the_reference_alone():
    rng = np.random.default_rng(4)
    length = 40
    probs = rng.random((length, length, DIST_BINS)) + 0.05
    probs /= probs.sum(-1, keepdims=True)
    probs = (probs + probs.transpose(1, 0, 2)) / 2
    covered = np.ones((length, length), dtype=bool)
    covered[:10, 30:] = covered[30:, :10] = False
    potential, weight = restraint_potential(probs, covered=covered)
    assert (weight[~covered] == 0).all() and (weight[covered & (weight > 0)] > 0).all()
    other = probs.copy()
    other[~covered] = np.eye(DIST_BINS)[-1]                      # whatever the uncovered pairs hold
    potential_other, weight_other = restraint_potential(other, covered=covered)
    np.testing.assert_allclose(potential_other[covered], potential[covered], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(weight_other, weight)
    full, _ = restraint_potential(probs)                         # without the mask those pairs shape the reference
    assert not np.allclose(full[covered], potential[covered])


def test_the_distance_geometry_of_a_native_distogram_is_close_to_the_native():
    """Expected distances of the confident pairs, shortest paths for the rest, classical MDS: whole myoglobin
    (153 residues) from its own softened distogram lands near its native Cα trace (lDDT-Cα, which does not see the
    hand: margin above 0.6, measured 0.73), and a fold started from it reaches the native (above 0.8, measured
    0.96)."""
    chain = read_structure(DATA / "structure" / "d1mbaa_.pdb.gz")[0]
    coords = np.asarray(chain.coords[:, :3], dtype=np.float64)
    coords = coords[np.isfinite(coords).all(axis=(1, 2))]
    probs = native_distogram(coords)
    start = embed_distances(probs)
    assert start.shape == (len(coords), 3) and np.isfinite(start).all()
    assert lddt_ca(start, coords[:, 1]).score > 0.6
    torch.set_num_threads(1)
    backbone, _ = fold_from_distogram(probs, FoldOptions(starts=1, geometry_start=True))
    assert lddt_ca(backbone[:, 1], coords[:, 1]).score > 0.8


def test_template_anchors_hold_a_templates_geometry_finer_than_the_distogram(myoglobin):
    """A broad distogram (sharpness 3 bins) folds myoglobin only roughly; the same fold anchored to a "template"
    (the native's Cα with 0.3 Å noise, its last 10 residues unplaced) reaches nearly the template's own accuracy
    where it places residues, takes its hand, and stays a physical chain."""
    torch.set_num_threads(1)
    broad = native_distogram(myoglobin, sharpness=3.0)
    options = FoldOptions(starts=1, iterations=300)
    plain, _ = fold_from_distogram(broad, options)
    reference = myoglobin[:, 1] + 0.3 * np.random.default_rng(0).standard_normal((70, 3))
    reference[60:] = np.nan
    anchors = template_anchors(reference, 3.0)
    assert anchors.distance.max() < 15.0 and np.all(anchors.j > anchors.i) and np.all(anchors.j < 60)
    anchored, _ = fold_from_distogram(broad, options, anchors=anchors)
    plain_score = lddt_ca(plain[:, 1], myoglobin[:, 1]).score
    anchored_score = lddt_ca(anchored[:, 1], myoglobin[:, 1]).score
    placed_score = lddt_ca(anchored[:60, 1], myoglobin[:60, 1]).score
    # measured: 0.83 without anchors, 0.94 with them (0.96 over the 60 placed residues); margins 0.05 and more
    assert anchored_score > plain_score + 0.05 and placed_score > 0.92, (plain_score, anchored_score, placed_score)
    mirror = myoglobin * np.array([-1.0, 1.0, 1.0])
    # the template's hand: TM-score 0.82 against the native, 0.30 against its mirror image
    assert tm_score(anchored[:, 1], myoglobin[:, 1]) > tm_score(anchored[:, 1], mirror[:, 1]) + 0.3
    steps = np.linalg.norm(np.diff(anchored[:, 1], axis=0), axis=1)
    assert abs(steps.mean() - 3.8) < 0.05
    # the template's hand is chosen even where the helix rule would keep the mirror image
    assert anchors.prefers_mirror(mirror)
    assert not anchors.prefers_mirror(myoglobin)
    assert template_anchors(reference, 0.0) is None
    assert template_anchors(np.full((70, 3), np.nan), 3.0) is None


@pytest.mark.skipif(not compiled_available(), reason="numba not importable")
def test_compiled_anchor_energy_matches_the_torch_expression(myoglobin):
    reference = myoglobin[:, 1].copy()
    anchors = template_anchors(reference, 2.0, scale=1.5)
    generator = torch.Generator().manual_seed(3)
    ca = torch.as_tensor(np.stack([reference, 1.1 * reference]), dtype=torch.float64)
    ca = (ca + torch.randn(ca.shape, generator=generator, dtype=torch.float64)).requires_grad_(True)
    compiled = AnchorEnergy.apply(ca, anchors.i, anchors.j, anchors.distance, anchors.weight, anchors.scale)
    (grad_compiled,) = torch.autograd.grad(compiled.sum(), ca)
    i, j = torch.as_tensor(anchors.i), torch.as_tensor(anchors.j)
    d = (ca[:, i] - ca[:, j]).norm(dim=-1)
    expected = (2.0 * torch.log1p(((d - torch.as_tensor(anchors.distance)) / 1.5) ** 2)).sum(dim=-1)
    (grad_expected,) = torch.autograd.grad(expected.sum(), ca)
    torch.testing.assert_close(compiled, expected, rtol=1e-10, atol=1e-8)
    torch.testing.assert_close(grad_compiled, grad_expected, rtol=1e-8, atol=1e-8)
