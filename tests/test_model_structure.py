"""3D track: rigid-frame algebra, Cβ, InitialStructure, IPA/Str2Str equivariance and Str2MSA invariance.

Invariance checks run in float64: a global rotation + translation G applied to the input frames must leave
every scalar output unchanged and transform frames/coordinates by G (max abs error < 1e-5; measured ~1e-13).
"""

from __future__ import annotations

import math

import pytest
import torch

from workflow_lib.model.structure import (IDEAL_BACKBONE, Frames, GeometricAttention, InitialStructure,
                                          InvariantPointAttention,
                                          Str2MSA, Str2Str, apply_frames, backbone_from_frames, cb_from_backbone,
                                          compose_frames, frames_from_3_points, identity_frames,
                                          invert_apply_frames, invert_frames, quaternion_to_rotation,
                                          random_rotation)
from model_testing import randomize_

torch.set_num_threads(1)

C_M, C_Z, C_S, HEADS = 16, 8, 16, 2
TOL = 1e-5


def _random_frames(*shape, seed=0, spread=8.0) -> Frames:
    gen = torch.Generator().manual_seed(seed)
    rot = random_rotation(*shape, generator=gen, dtype=torch.float64)
    return Frames(rot, spread * torch.randn(*shape, 3, generator=gen, dtype=torch.float64))


def _global_transform(seed=42) -> Frames:
    gen = torch.Generator().manual_seed(seed)
    return Frames(random_rotation(generator=gen, dtype=torch.float64),
                  torch.randn(3, generator=gen, dtype=torch.float64) * 20.0)


def _transform(g: Frames, frames: Frames) -> Frames:
    g = Frames(g.rot.expand(frames.rot.shape), g.trans.expand(frames.trans.shape))
    return compose_frames(g, frames)


def _features(b=2, l=6, n=3, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(b, n, l, C_M, generator=gen, dtype=torch.float64),
            torch.randn(b, l, l, C_Z, generator=gen, dtype=torch.float64),
            torch.randn(b, l, C_S, generator=gen, dtype=torch.float64))


# --- frame algebra ------------------------------------------------------------------------------------------


def test_ideal_backbone_gives_identity_frame_and_round_trips():
    ideal = torch.tensor(IDEAL_BACKBONE, dtype=torch.float64)
    f = frames_from_3_points(*ideal.unbind(0))
    assert torch.allclose(f.rot, torch.eye(3, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(f.trans, torch.zeros(3, dtype=torch.float64))
    frames = _random_frames(2, 5)
    recovered = frames_from_3_points(*backbone_from_frames(frames).unbind(-2))
    assert torch.allclose(recovered.rot, frames.rot, atol=1e-12)
    assert torch.allclose(recovered.trans, frames.trans, atol=1e-12)


def test_compose_invert_apply():
    f, g = _random_frames(4, seed=1), _random_frames(4, seed=2)
    x = torch.randn(4, 3, dtype=torch.float64)
    ident = compose_frames(f, invert_frames(f))
    assert torch.allclose(ident.rot, identity_frames((4,), dtype=torch.float64).rot, atol=1e-12)
    assert torch.allclose(ident.trans, torch.zeros(4, 3, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(invert_apply_frames(f, apply_frames(f, x)), x, atol=1e-12)
    assert torch.allclose(apply_frames(compose_frames(f, g), x), apply_frames(f, apply_frames(g, x)), atol=1e-12)


def test_rotations_are_proper():
    rot = quaternion_to_rotation(torch.randn(10, 4, dtype=torch.float64))
    eye = torch.eye(3, dtype=torch.float64).expand(10, 3, 3)
    assert torch.allclose(rot @ rot.transpose(-1, -2), eye, atol=1e-12)
    assert torch.allclose(torch.linalg.det(rot), torch.ones(10, dtype=torch.float64), atol=1e-12)


def test_cb_geometry_is_ideal():
    backbone = backbone_from_frames(_random_frames(3))
    cb = cb_from_backbone(backbone)
    n, ca, c = backbone.unbind(-2)
    bond = (cb - ca).norm(dim=-1)
    assert torch.allclose(bond, torch.full_like(bond, bond[0].item()), atol=1e-10)
    assert 1.50 < bond[0].item() < 1.56
    cos = ((n - ca) * (cb - ca)).sum(-1) / ((n - ca).norm(dim=-1) * bond)
    angle = math.degrees(math.acos(cos[0].item()))
    assert 105.0 < angle < 115.0


def test_float32_islands_under_autocast():
    pts = [torch.randn(4, 3).to(torch.bfloat16) for _ in range(3)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        f = frames_from_3_points(*pts)
        assert f.rot.dtype == torch.float32
        torch.manual_seed(0)
        s2s = Str2Str(C_M, C_Z, C_S, HEADS, 2, 2)
        m, z, s = (t.float() for t in _features())
        frames = Frames(*(t.float() for t in _random_frames(2, 6)))
        _, out_frames = s2s(m[:, 0], z, s, frames)
        assert out_frames.rot.dtype == torch.float32 and out_frames.trans.dtype == torch.float32


# --- modules ------------------------------------------------------------------------------------------------


def test_initial_structure_gives_valid_frames():
    torch.manual_seed(0)
    init = randomize_(InitialStructure(C_M, C_Z, C_S, HEADS, n_graph_layers=2)).double()
    m, z, _ = _features()
    seq_mask = torch.ones(2, 6, dtype=torch.float64)
    s, frames = init(m[:, 0], z, seq_mask)
    assert s.shape == (2, 6, C_S) and frames.rot.shape == (2, 6, 3, 3) and frames.trans.shape == (2, 6, 3)
    eye = torch.eye(3, dtype=torch.float64)
    assert torch.allclose(frames.rot @ frames.rot.transpose(-1, -2), eye.expand_as(frames.rot), atol=1e-10)
    # padded residues do not influence real ones
    s2, f2 = init(torch.nn.functional.pad(m[:, 0], (0, 0, 0, 1), value=3.0),
                  torch.nn.functional.pad(z, (0, 0, 0, 1, 0, 1), value=3.0),
                  torch.nn.functional.pad(seq_mask, (0, 1)))
    assert torch.allclose(s2[:, :6], s, atol=1e-9) and torch.allclose(f2.trans[:, :6], frames.trans, atol=1e-9)


def test_ipa_is_invariant():
    torch.manual_seed(0)
    ipa = randomize_(InvariantPointAttention(C_S, C_Z, HEADS, 3, 2)).double()
    _, z, s = _features()
    frames = _random_frames(2, 6)
    g = _global_transform()
    out = ipa(s, z, frames)
    out_g = ipa(s, z, _transform(g, frames))
    assert out.abs().max() > 1e-3  # non-trivial
    assert (out - out_g).abs().max().item() < TOL


def test_geometric_attention_is_invariant_and_follows_the_seed():
    torch.manual_seed(0)
    layer = randomize_(GeometricAttention(C_S, C_Z, 3)).double()
    _, z, s = _features()
    frames = _random_frames(2, 6)
    out = layer(s, z, frames)
    assert out.abs().max() > 1e-3
    assert (out - layer(s, z, _transform(_global_transform(), frames))).abs().max().item() < TOL
    # ESM3 (Hayes et al. 2024) Algorithm 6, written out residue by residue (plus the pair bias)
    soft = torch.nn.functional.softplus
    vec = layer.linear_in(s).unflatten(-1, (5, 3, 3))                      # [B, L, 5, H, 3]
    bias = layer.linear_b(z)                                                # [B, L, L, H]
    expected = torch.zeros(2, 6, 3, 3, dtype=torch.float64)
    for b in range(2):
        rot, trans = frames.rot[b], frames.trans[b]
        for h in range(3):
            q_r = torch.stack([rot[i] @ vec[b, i, 0, h] for i in range(6)])
            k_r = torch.stack([rot[j] @ vec[b, j, 1, h] for j in range(6)])
            q_d = torch.stack([rot[i] @ vec[b, i, 2, h] + trans[i] for i in range(6)])
            k_d = torch.stack([rot[j] @ vec[b, j, 3, h] + trans[j] for j in range(6)])
            v = torch.stack([rot[j] @ vec[b, j, 4, h] for j in range(6)])
            for i in range(6):
                logits = torch.stack([soft(layer.direction_weights[h]) * (q_r[i] @ k_r[j]) / math.sqrt(3)
                                      - soft(layer.distance_weights[h]) * (q_d[i] - k_d[j]).norm() / math.sqrt(3)
                                      + bias[b, i, j, h] for j in range(6)])
                expected[b, i, h] = rot[i].T @ (torch.softmax(logits, 0) @ v)
    torch.testing.assert_close(out, layer.linear_out(expected.flatten(-2)), atol=1e-10, rtol=1e-10)
    # a padded residue is not attended to
    seq_mask = torch.ones(2, 6, dtype=torch.float64)
    seq_mask[:, -1] = 0.0
    moved = Frames(frames.rot, frames.trans.clone())
    moved.trans[:, -1] += 50.0
    masked = layer(s, z, frames, seq_mask)
    assert (masked[:, :-1] - layer(s, z, moved, seq_mask)[:, :-1]).abs().max().item() < TOL


@pytest.mark.parametrize("str_attention", ["ipa", "geometric"])
def test_str2str_is_equivariant(str_attention):
    torch.manual_seed(0)
    s2s = randomize_(Str2Str(C_M, C_Z, C_S, HEADS, 3, 2, str_attention=str_attention,
                             no_heads_geometric=4)).double()
    m, z, s = _features()
    frames = _random_frames(2, 6)
    g = _global_transform()
    s_out, f_out = s2s(m[:, 0], z, s, frames)
    s_out_g, f_out_g = s2s(m[:, 0], z, s, _transform(g, frames))
    expected = _transform(g, f_out)
    assert (s_out - s_out_g).abs().max().item() < TOL
    assert (f_out_g.rot - expected.rot).abs().max().item() < TOL
    assert (f_out_g.trans - expected.trans).abs().max().item() < TOL
    coords, coords_g = backbone_from_frames(f_out), backbone_from_frames(f_out_g)
    moved = torch.einsum("ij,...j->...i", g.rot, coords) + g.trans
    assert (coords_g - moved).abs().max().item() < TOL
    assert (f_out.trans - frames.trans).abs().max() > 1e-3  # the update actually moved the frames


def test_str2msa_is_invariant_and_distance_masked():
    torch.manual_seed(0)
    block = randomize_(Str2MSA(C_M, C_S, HEADS, 8.0, 12.0)).double()
    m, _, s = _features()
    frames = _random_frames(2, 6)
    out = block(m, s, frames)
    out_g = block(m, s, _transform(_global_transform(), frames))
    assert out.shape == m.shape
    assert (out - out_g).abs().max().item() < TOL
    # residues farther than every cutoff are invisible: spread the protein out and residues see only themselves
    far = Frames(frames.rot, frames.trans * 1000.0)
    out_far = block(m, s, far)
    m2 = m.clone()
    m2[:, :, 1:] += torch.randn_like(m2[:, :, 1:])  # residue 0 cannot see residues 1.. at all
    assert torch.allclose(block(m2, s, far)[:, :, 0], out_far[:, :, 0], atol=1e-10)
    near = Frames(frames.rot, frames.trans * 0.01)
    assert not torch.allclose(block(m2, s, near)[:, :, 0], block(m, s, near)[:, :, 0])


def test_cb_agrees_with_the_feature_pipeline():
    """The model's Cβ must be the one the 6D training labels are computed from (workflow_lib.structure)."""
    cbeta = pytest.importorskip("workflow_lib.structure.cbeta")
    backbone = backbone_from_frames(_random_frames(2, 4))
    n, ca, c = (x.numpy() for x in backbone.unbind(-2))
    assert torch.allclose(cb_from_backbone(backbone), torch.from_numpy(cbeta.virtual_cb(n, ca, c)), atol=1e-12)
