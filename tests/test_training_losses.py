"""Losses of the three-track network (workflow_lib.training.losses) on a real chain and hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from workflow_lib.model.structure import Frames, frames_from_3_points, random_rotation
from workflow_lib.structure import read_structure
from workflow_lib.structure.metrics import lddt_ca
from workflow_lib.training.losses import (backbone_fape, cross_entropy, distogram_loss, fape_loss, lddt_ca_torch,
                                          plddt_loss, total_loss)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def backbone(data_dir) -> tuple[torch.Tensor, torch.Tensor]:
    """N, CA, C of 3BP8 chain l (float64 [L, 3, 3]) and the atom mask [L, 3]."""
    chain = read_structure(data_dir / "structure" / "3BP8_l_u.pdb")[0]
    coords = torch.from_numpy(np.array(chain.coords[:, :3], dtype=np.float64))
    return coords, torch.from_numpy(np.array(chain.mask[:, :3]))


def _fape(pred: torch.Tensor, true: torch.Tensor, mask: torch.Tensor, **kw) -> torch.Tensor:
    """Backbone FAPE with frames built from both structures' own N, CA, C."""
    safe_pred = torch.nan_to_num(pred)
    pred_frames = frames_from_3_points(safe_pred[:, 0], safe_pred[:, 1], safe_pred[:, 2])
    outputs = {"frames_rot": pred_frames.rot[None], "frames_trans": pred_frames.trans[None],
               "coords": safe_pred[None]}
    return backbone_fape(outputs, true[None], mask[None], **kw)


def _rigid(x: torch.Tensor, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    rot = random_rotation(generator=gen, dtype=torch.float64)
    return x @ rot.T + 30.0 * torch.randn(3, generator=gen, dtype=torch.float64)


def test_fape_zero_for_identical_structures(backbone):
    coords, mask = backbone
    assert float(_fape(coords, coords, mask, eps=0.0)) < 1e-9
    # with the default ε the floor is sqrt(ε) / length_scale
    assert float(_fape(coords, coords, mask)) == pytest.approx(math.sqrt(1e-4) / 10.0, rel=1e-6)


def test_fape_invariant_to_global_rigid_motion(backbone):
    coords, mask = backbone
    gen = torch.Generator().manual_seed(1)
    noisy = coords + 1.5 * torch.randn(coords.shape, generator=gen, dtype=torch.float64)
    base = float(_fape(noisy, coords, mask))
    assert base > 0.05  # 1.5 Å noise per coordinate is far from zero error
    for seed in (2, 3):
        assert float(_fape(_rigid(noisy, seed), coords, mask)) == pytest.approx(base, abs=1e-9)
        # a rigid motion of the truth changes nothing either
        assert float(_fape(noisy, _rigid(coords, seed + 10), mask)) == pytest.approx(base, abs=1e-9)


def test_fape_clamp_and_mask():
    # one frame at the origin (identity) and one point: predicted 30 Å off, true at 1 Å
    eye = torch.eye(3, dtype=torch.float64)[None, None]
    zero = torch.zeros(1, 1, 3, dtype=torch.float64)
    frames = Frames(eye, zero)
    pred = torch.tensor([[[31.0, 0.0, 0.0], [5.0, 0.0, 0.0]]], dtype=torch.float64)
    true = torch.tensor([[[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]], dtype=torch.float64)
    frame_mask = torch.ones(1, 1, dtype=torch.bool)
    both = torch.ones(1, 2, dtype=torch.bool)
    first = torch.tensor([[True, False]])
    # errors 30 (clamped to 10) and 3 -> mean 6.5 / 10
    assert float(fape_loss(frames, pred, frames, true, frame_mask, both, eps=0.0)) == pytest.approx(0.65)
    assert float(fape_loss(frames, pred, frames, true, frame_mask, both, clamp=None, eps=0.0)) \
        == pytest.approx(1.65)
    assert float(fape_loss(frames, pred, frames, true, frame_mask, first, eps=0.0)) == pytest.approx(1.0)


def test_fape_missing_atoms_give_finite_loss_and_gradients(backbone):
    coords, mask = backbone
    coords, mask = coords.clone(), mask.clone()
    coords[3, 1] = float("nan")
    mask[3, 1] = False
    pred = (coords.nan_to_num() + 0.5).requires_grad_(True)
    loss = _fape(pred, coords, mask)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(pred.grad).all()


def test_cross_entropy_matches_manual_computation():
    logits = torch.tensor([[[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]], [[-1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]])
    target = torch.tensor([[1, 0], [2, 1]])
    mask = torch.tensor([[1.0, 1.0], [0.0, 1.0]])

    def nll(row, k):
        return -(row[k] - math.log(sum(math.exp(v) for v in row)))

    manual = (nll([1.0, 2.0, 0.5], 1) + nll([0.0, 0.0, 3.0], 0) + nll([2.0, 2.0, 2.0], 1)) / 3
    assert float(cross_entropy(logits, target, mask)) == pytest.approx(manual, rel=1e-6)
    assert float(cross_entropy(logits, target, torch.zeros_like(mask))) == 0.0


def test_distogram_loss_is_mean_of_four_heads():
    gen = torch.Generator().manual_seed(0)
    outputs = {f"{k}_logits": torch.randn(1, 5, 5, n, generator=gen) for k, n in
               (("dist", 37), ("omega", 37), ("theta", 37), ("phi", 19))}
    targets = {k: torch.randint(0, n, (1, 5, 5), generator=gen) for k, n in
               (("dist", 37), ("omega", 37), ("theta", 37), ("phi", 19))}
    mask = ~torch.eye(5, dtype=torch.bool)[None]
    loss, per_head = distogram_loss(outputs, targets, mask)
    manual = {}
    for key in ("dist", "omega", "theta", "phi"):
        logp = torch.log_softmax(outputs[f"{key}_logits"], -1)
        manual[key] = -logp.gather(-1, targets[key][..., None])[..., 0][mask].mean()
        assert float(per_head[key]) == pytest.approx(float(manual[key]), rel=1e-6)
    assert float(loss) == pytest.approx(float(sum(manual.values()) / 4), rel=1e-6)


def test_lddt_torch_matches_numpy_reference(backbone):
    coords, mask = backbone
    ca = coords[:, 1]
    gen = torch.Generator().manual_seed(5)
    pred = ca + 1.2 * torch.randn(ca.shape, generator=gen, dtype=torch.float64)
    per_residue, defined = lddt_ca_torch(pred[None], ca[None], mask[None, :, 1])
    reference = lddt_ca(pred.numpy(), np.where(mask[:, 1:2].numpy(), ca.numpy(), np.nan))
    ref = reference.per_residue
    assert np.array_equal(defined[0].numpy(), np.isfinite(ref))
    assert np.allclose(per_residue[0].numpy()[np.isfinite(ref)], ref[np.isfinite(ref)], atol=1e-12)


def test_plddt_loss_targets_binned_lddt(backbone):
    coords, mask = backbone
    ca = coords[:, 1].float()
    ca_mask = mask[:, 1]
    logits = torch.zeros(1, ca.shape[0], 50, requires_grad=True)
    loss, lddt = plddt_loss(logits, ca[None], ca[None], ca_mask[None])
    # a perfect prediction has lDDT 1 -> the last bin; uniform logits give log(50)
    assert torch.allclose(lddt[0][ca_mask], torch.ones(int(ca_mask.sum())))
    assert float(loss.detach()) == pytest.approx(math.log(50), rel=1e-6)
    peaked = torch.full((1, ca.shape[0], 50), -20.0)
    peaked[..., 49] = 20.0
    good, _ = plddt_loss(peaked, ca[None], ca[None], ca_mask[None])
    assert float(good) < 1e-6


def test_total_loss_on_network_outputs_backpropagates():
    from workflow_lib.model import ThreeTrackNetwork, preset
    from workflow_lib.training.examples import make_targets

    torch.manual_seed(0)
    model = ThreeTrackNetwork(preset("tiny"))
    length = 12
    gen = torch.Generator().manual_seed(0)
    coords = torch.cumsum(torch.randn(length * 3, 3, generator=gen) * 1.5, 0).reshape(length, 3, 3).numpy()
    atom_mask = np.ones((length, 3), dtype=bool)
    atom_mask[4, 0] = False
    coords[4, 0] = np.nan
    targets = {k: torch.from_numpy(np.ascontiguousarray(v))[None] for k, v in make_targets(coords, atom_mask).items()}
    for key in ("dist", "omega", "theta", "phi"):
        targets[key] = targets[key].long()
    outputs = model({"msa": torch.randint(0, 20, (1, 3, length), generator=gen),
                     "residue_index": torch.arange(length)[None]})
    loss, parts = total_loss(outputs, targets)
    loss.backward()
    assert torch.isfinite(loss)
    assert set(parts) >= {"loss", "distogram", "fape", "plddt", "ce_dist"}
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
