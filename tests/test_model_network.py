"""The whole three-track network at the ``tiny`` preset, its config and its checkpoint files.

CPU, one thread, float32 unless a test says otherwise; nothing is trained.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from workflow_lib.errors import InputError, SchemaError
from workflow_lib.model.checkpoint import load_checkpoint, load_weights, read_config, save_checkpoint
from workflow_lib.model.config import PRESETS, ModelConfig, preset
from workflow_lib.model.network import ThreeTrackNetwork, count_parameters
from workflow_lib.model.primitives import explicit_attention
from workflow_lib.model.structure import Frames, compose_frames, random_rotation
from model_testing import randomize_ as _randomize


def randomize_(module: torch.nn.Module, seed: int = 0, scale: float = 0.1) -> torch.nn.Module:
    """The shared helper with this file's smaller default perturbation."""
    return _randomize(module, seed, scale)


torch.set_num_threads(1)

B, N, L, T = 2, 4, 7, 2
FEATURES = dict(c_template_pair=5, c_template_1d=3, c_coevolution=4)


def make_batch(seed: int = 0, dtype=torch.float32, with_features: bool = True, l: int = L,
               variant: str = "default"):
    """Inputs of the tiny network; with the ``msa_statistics`` variant also the MSA statistics."""
    if VARIANTS[variant].get("msa_statistics"):
        return {**make_batch(seed, dtype, with_features, l), **statistics_inputs(seed, dtype, l)}
    gen = torch.Generator().manual_seed(seed)
    batch = {"msa": torch.randint(0, 22, (B, N, l), generator=gen),
             "residue_index": torch.arange(l).expand(B, l).clone(),
             "seq_mask": torch.ones(B, l, dtype=dtype)}
    if with_features:
        batch.update(templates_pair=torch.randn(B, T, l, l, 5, generator=gen, dtype=dtype),
                     templates_1d=torch.randn(B, T, l, 3, generator=gen, dtype=dtype),
                     template_mask=torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=dtype),
                     coevolution=torch.randn(B, l, l, 4, generator=gen, dtype=dtype))
    return batch


def statistics_inputs(seed: int = 0, dtype=torch.float32, l: int = L) -> dict[str, torch.Tensor]:
    """Deletion counts, a profile and deletion means of the shapes the feature file gives."""
    gen = torch.Generator().manual_seed(seed + 100)
    profile = torch.rand(B, l, 21, generator=gen, dtype=dtype)
    return {"deletion_matrix": torch.randint(0, 4, (B, N, l), generator=gen).to(dtype),
            "profile": profile / profile.sum(-1, keepdim=True),
            "deletion_mean": torch.rand(B, l, generator=gen, dtype=dtype)}


def make_net(seed: int = 0, **overrides) -> ThreeTrackNetwork:
    torch.manual_seed(seed)
    return randomize_(ThreeTrackNetwork(preset("tiny", **{**FEATURES, **overrides})), seed).eval()


EXPECTED_SHAPES = {
    "dist_logits": (B, L, L, 37), "omega_logits": (B, L, L, 37), "theta_logits": (B, L, L, 37),
    "phi_logits": (B, L, L, 19), "coords": (B, L, 3, 3), "cb": (B, L, 3), "plddt": (B, L),
    "plddt_logits": (B, L, 50), "single": (B, L, 16), "pair": (B, L, L, 16), "state": (B, L, 16),
    "frames_rot": (B, L, 3, 3), "frames_trans": (B, L, 3),
}


# --- config -------------------------------------------------------------------------------------------------


def test_presets_and_strict_parsing():
    for name in PRESETS:
        cfg = preset(name)
        assert ModelConfig.from_json(cfg.to_json()) == cfg
    with pytest.raises(InputError, match="unknown key"):
        ModelConfig.from_dict({"c_m": 32, "c_mm": 3})
    with pytest.raises(InputError, match="divisible"):
        preset("tiny", no_heads_msa=3)
    with pytest.raises(InputError, match="row_attention"):
        preset("tiny", row_attention="banded")
    with pytest.raises(InputError, match="even"):
        preset("tiny", c_m=15, no_heads_msa=3)
    with pytest.raises(InputError, match="unknown model preset"):
        preset("huge")
    assert preset("tiny").n_performer_features == 17  # ceil(8 ln 8)


def test_preset_parameter_counts():
    counts = {name: count_parameters(ThreeTrackNetwork(preset(name))) for name in ("tiny", "small")}
    assert counts["tiny"] < 100_000
    assert 1_000_000 <= counts["small"] <= 5_000_000


# --- forward / backward -------------------------------------------------------------------------------------


def test_forward_shapes_finite_and_deterministic():
    net = make_net()
    batch = make_batch()
    with torch.no_grad():
        out = net(batch)
        again = net(batch)
    assert set(EXPECTED_SHAPES) <= set(out)
    for key, shape in EXPECTED_SHAPES.items():
        assert tuple(out[key].shape) == shape, key
        assert torch.isfinite(out[key]).all(), key
        assert torch.equal(out[key], again[key]), key
    assert ((out["plddt"] >= 0) & (out["plddt"] <= 1)).all()
    assert torch.allclose(out["dist_logits"], out["dist_logits"].transpose(1, 2))
    with torch.no_grad():  # same seed, fresh model: identical outputs
        fresh = make_net()(batch)
    assert torch.equal(fresh["coords"], out["coords"])


VARIANTS = {"default": {}, "geometric": dict(str_attention="geometric", no_heads_geometric=4),
            "maps_to_pair": dict(row_attention_to_pair=True), "msa_statistics": dict(msa_statistics=True)}
"""Options of the architecture that every structural test runs with (besides the default)."""


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_backward_gives_finite_gradients(variant):
    net = make_net(**VARIANTS[variant]).train()
    out = net(make_batch(variant=variant))
    loss = sum(out[key].float().square().mean() for key in EXPECTED_SHAPES)
    loss.backward()
    grads = [p.grad for p in net.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert sum(float(g.abs().sum()) > 0 for g in grads) > 0.9 * len(grads)


def test_row_attention_maps_reach_the_pair_track():
    net = make_net(row_attention_to_pair=True)
    block = net.two_track_blocks[0]
    batch = make_batch()
    captured = []
    handle = block.msa2pair.register_forward_hook(lambda module, args, kwargs, out: captured.append(kwargs["maps"]),
                                                  with_kwargs=True)
    try:
        with torch.no_grad():
            ref = net(batch)
            chunked = net(batch, chunk_size=3)
    finally:
        handle.remove()
    maps = captured[0]
    assert maps.shape == (B, 2, L, L) and torch.allclose(maps, maps.transpose(-1, -2))
    assert torch.allclose(maps.sum(dim=(-1, -2)), torch.full((B, 2), float(L)), atol=1e-4)  # rows of A sum to 1
    assert len(captured) == 2 and torch.allclose(captured[1], maps, atol=1e-6)  # chunked: same maps
    assert torch.allclose(chunked["dist_logits"], ref["dist_logits"], atol=1e-5)
    # the maps change the prediction: scaled maps, other pair logits
    handle = block.msa2pair.register_forward_pre_hook(
        lambda module, args, kwargs: (args, {**kwargs, "maps": 3.0 * kwargs["maps"]}), with_kwargs=True)
    try:
        with torch.no_grad():
            scaled = net(batch)
    finally:
        handle.remove()
    assert (scaled["dist_logits"] - ref["dist_logits"]).abs().max() > 1e-4
    with pytest.raises(InputError, match="row_attention_to_pair"):
        preset("tiny", row_attention="plain", row_attention_to_pair=True)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fused_inference_attention_equals_the_explicit_one(variant):
    """Every attention of the network (MSA, pair, templates, 3D track) at inference: fused = explicit."""
    net = make_net(seed=2, **VARIANTS[variant])
    batch = make_batch(variant=variant)
    batch["seq_mask"] = batch["seq_mask"].clone()
    batch["seq_mask"][1, -2:] = 0.0                       # a padded protein: key masks that are not all zero
    with torch.no_grad():
        fused = net(batch)
        with explicit_attention():
            explicit = net(batch)
    for key in EXPECTED_SHAPES:
        torch.testing.assert_close(fused[key], explicit[key], atol=1e-5, rtol=1e-5, msg=key)


def test_msa_statistics_change_the_prediction():
    net = make_net(msa_statistics=True)
    batch = make_batch(variant="msa_statistics")
    with torch.no_grad():
        ref = net(batch)
        for key, changed in (("deletion_matrix", batch["deletion_matrix"] + 3.0),
                             ("profile", batch["profile"].flip(-1)), ("deletion_mean", batch["deletion_mean"] + 1.0)):
            out = net({**batch, key: changed})
            assert (out["dist_logits"] - ref["dist_logits"]).abs().max() > 1e-4, key
            assert (out["coords"] - ref["coords"]).abs().max() > 1e-4, key


def test_chunking_and_activation_checkpointing_do_not_change_results():
    net = make_net()
    batch = make_batch()
    with torch.no_grad():
        ref = net(batch)
        chunked = net(batch, chunk_size=2)
    for key in EXPECTED_SHAPES:
        assert torch.allclose(chunked[key], ref[key], atol=1e-5), key
    ckpt_net = make_net(activation_checkpointing=True).train()
    plain_net = make_net().train()
    out_a, out_b = ckpt_net(batch), plain_net(batch)
    (out_a["coords"].sum() + out_a["dist_logits"].sum()).backward()
    (out_b["coords"].sum() + out_b["dist_logits"].sum()).backward()
    assert torch.allclose(out_a["coords"], out_b["coords"], atol=1e-5)
    for (name, pa), (_, pb) in zip(ckpt_net.named_parameters(), plain_net.named_parameters()):
        assert (pa.grad is None) == (pb.grad is None), name
        if pa.grad is not None:
            assert torch.allclose(pa.grad, pb.grad, atol=1e-4), name


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_padding_does_not_change_real_residues_or_rows(variant):
    net = make_net(seed=3, **VARIANTS[variant]).double()
    batch = make_batch(dtype=torch.float64, variant=variant)
    with torch.no_grad():
        ref = net(batch)
    pad_l, pad_n = 2, 1
    gen = torch.Generator().manual_seed(9)
    padded = {
        "msa": torch.nn.functional.pad(batch["msa"], (0, pad_l, 0, pad_n), value=3),
        "residue_index": torch.cat((batch["residue_index"], torch.arange(L, L + pad_l).expand(B, pad_l)), 1),
        "seq_mask": torch.nn.functional.pad(batch["seq_mask"], (0, pad_l)),
        "msa_mask": torch.nn.functional.pad(torch.ones(B, N, L, dtype=torch.float64), (0, pad_l, 0, pad_n)),
        "templates_pair": torch.nn.functional.pad(batch["templates_pair"], (0, 0, 0, pad_l, 0, pad_l)),
        "templates_1d": torch.nn.functional.pad(batch["templates_1d"], (0, 0, 0, pad_l)),
        "template_mask": batch["template_mask"],
        "coevolution": torch.randn(B, L + pad_l, L + pad_l, 4, generator=gen, dtype=torch.float64),
    }
    padded["coevolution"][:, :L, :L] = batch["coevolution"]
    if "profile" in batch:
        padded["deletion_matrix"] = torch.nn.functional.pad(batch["deletion_matrix"], (0, pad_l, 0, pad_n), value=5)
        padded["profile"] = torch.nn.functional.pad(batch["profile"], (0, 0, 0, pad_l), value=0.3)
        padded["deletion_mean"] = torch.nn.functional.pad(batch["deletion_mean"], (0, pad_l), value=2.0)
    with torch.no_grad():
        out = net(padded)
    for key in ("dist_logits", "theta_logits", "pair"):
        assert (out[key][:, :L, :L] - ref[key]).abs().max() < 1e-8, key
    for key in ("coords", "cb", "plddt", "single", "state"):
        assert (out[key][:, :L] - ref[key]).abs().max() < 1e-8, key


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_three_track_is_rotation_translation_equivariant(variant):
    """Transform the frames leaving InitialStructure by a global G: scalars unchanged, coordinates moved.

    Two three-track blocks, so the pair and 6D logits also depend on the 3D track (through Str2MSA -> MSA2Pair).
    Measured (float64): scalars <= 4e-15, coordinates <= 2e-14.
    """
    net = make_net(seed=1, n_blocks_3track=2, **VARIANTS[variant]).double()
    batch = make_batch(dtype=torch.float64, variant=variant)
    gen = torch.Generator().manual_seed(7)
    g_rot = random_rotation(generator=gen, dtype=torch.float64)
    g_trans = 15.0 * torch.randn(3, generator=gen, dtype=torch.float64)

    def move(_module, _inputs, output):
        s, frames = output
        g = Frames(g_rot.expand(frames.rot.shape), g_trans.expand(frames.trans.shape))
        return s, compose_frames(g, frames)

    with torch.no_grad():
        ref = net(batch)
        handle = net.initial_structure.register_forward_hook(move)
        try:
            moved = net(batch)
        finally:
            handle.remove()
    for key in ("dist_logits", "omega_logits", "theta_logits", "phi_logits", "plddt", "single", "pair", "state"):
        assert (moved[key] - ref[key]).abs().max().item() < 1e-5, key
    for key, atoms in (("coords", ref["coords"]), ("cb", ref["cb"])):
        expected = torch.einsum("ij,...j->...i", g_rot, atoms) + g_trans
        assert (moved[key] - expected).abs().max().item() < 1e-5, key
    assert (ref["coords"] - moved["coords"]).abs().max() > 1.0  # the transform was not a no-op
    with torch.no_grad():  # and the pair really depends on the 3D track: other frames, other pair
        handle = net.initial_structure.register_forward_hook(
            lambda _m, _i, out: (out[0], Frames(out[1].rot, 3.0 * out[1].trans)))
        try:
            stretched = net(batch)
        finally:
            handle.remove()
    assert (stretched["pair"] - ref["pair"]).abs().max() > 1e-6


def test_mixed_precision_keeps_geometry_in_float32():
    net = make_net()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = net(make_batch())
    assert out["coords"].dtype == torch.float32 and out["frames_rot"].dtype == torch.float32
    assert all(torch.isfinite(out[key].float()).all() for key in EXPECTED_SHAPES)


def test_input_errors_are_clear():
    net = make_net()
    batch = make_batch()
    with pytest.raises(InputError, match="msa codes"):
        net({**batch, "msa": batch["msa"] + 30})
    with pytest.raises(InputError, match="missing required key 'residue_index'"):
        net({"msa": batch["msa"]})
    with pytest.raises(InputError, match="coevolution has 2 channels"):
        net({**batch, "coevolution": batch["coevolution"][..., :2]})
    plain = ThreeTrackNetwork(preset("tiny"))
    with pytest.raises(InputError, match="c_coevolution=0"):
        plain({**make_batch(with_features=False), "coevolution": batch["coevolution"]})
    with pytest.raises(InputError, match="unknown key"):
        plain({**make_batch(with_features=False), "pssm": torch.zeros(1)})
    with pytest.raises(InputError, match="msa_statistics=false"):
        plain({**make_batch(with_features=False), "profile": torch.zeros(B, L, 21)})
    reading = ThreeTrackNetwork(preset("tiny", msa_statistics=True))
    with pytest.raises(InputError, match="deletion_matrix missing"):
        reading(make_batch(with_features=False))
    with pytest.raises(InputError, match="profile must have shape"):
        reading({**make_batch(with_features=False), **statistics_inputs(), "profile": torch.zeros(B, L, 20)})
    out = plain(make_batch(with_features=False))  # every optional feature may be absent
    assert torch.isfinite(out["coords"]).all()


def test_redraw_performer_features_changes_buffers():
    net = make_net()
    before = {k: v.clone() for k, v in net.state_dict().items() if k.endswith("kernel.projection")}
    assert before and net.redraw_performer_features(torch.Generator().manual_seed(1)) == len(before)
    after = net.state_dict()
    assert all(not torch.equal(after[k], v) for k, v in before.items())


# --- checkpoints --------------------------------------------------------------------------------------------


def test_checkpoint_round_trip(tmp_path):
    net = make_net()
    path = save_checkpoint(tmp_path / "w.pt", net, extra={"step": 12})
    assert not [p for p in tmp_path.iterdir() if p.name != "w.pt"]  # no temp file left behind
    loaded, extra = load_checkpoint(path, expected_config=net.config)
    assert extra == {"step": 12}
    assert read_config(path) == net.config
    batch = make_batch()
    with torch.no_grad():
        assert torch.equal(loaded(batch)["coords"], net(batch)["coords"])


def test_mismatched_checkpoint_names_the_keys(tmp_path):
    path = save_checkpoint(tmp_path / "w.pt", make_net(c_coevolution=0))
    with pytest.raises(SchemaError, match=r"missing key\(s\): pair_embedding\.coevolution\.bias"):
        load_weights(path, make_net())
    with pytest.raises(SchemaError, match=r"msa2pair\.opm\.linear_a\.weight \(checkpoint \(4, 16\), model \(8, 16\)\)"):
        load_weights(path, make_net(c_coevolution=0, c_hidden_opm=8))
    with pytest.raises(SchemaError, match="c_coevolution: checkpoint 0 vs expected 4"):
        load_checkpoint(path, expected_config=make_net().config)


def test_bad_checkpoint_files_are_schema_errors(tmp_path):
    net = make_net()
    bad_version = tmp_path / "v2.pt"
    torch.save({"format_version": 2, "config": net.config.to_json(), "state_dict": {}}, bad_version)
    with pytest.raises(SchemaError, match="format_version 2"):
        load_checkpoint(bad_version)
    bad_config = tmp_path / "cfg.pt"
    cfg = json.loads(net.config.to_json())
    cfg["bogus"] = 1
    torch.save({"format_version": 1, "config": json.dumps(cfg), "state_dict": {}}, bad_config)
    with pytest.raises(SchemaError, match="bogus"):
        load_checkpoint(bad_config)
    arbitrary = tmp_path / "obj.pt"
    torch.save({"format_version": 1, "config": net.config.to_json(), "state_dict": {},
                "extra": ModelConfig()}, arbitrary)  # an arbitrary Python object: refused, never unpickled
    with pytest.raises(SchemaError, match="non-tensor"):
        load_checkpoint(arbitrary)
    with pytest.raises(InputError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")


def test_a_checkpoint_of_fewer_coevolution_channels_is_widened_to_the_same_network(tmp_path):
    """Warm start across an appended co-evolution channel: the widened network predicts exactly what the
    checkpoint does (the new channel's weights start at zero), whatever the new channel holds."""
    torch.manual_seed(0)
    narrow = ThreeTrackNetwork(preset("tiny", c_coevolution=2)).eval()
    with torch.no_grad():          # a trained-looking projection, not the zero initialisation
        for name, parameter in narrow.named_parameters():
            if "coevolution" in name:
                parameter.normal_()
    path = save_checkpoint(tmp_path / "narrow.pt", narrow)
    wide = ThreeTrackNetwork(preset("tiny", c_coevolution=3)).eval()
    with pytest.raises(SchemaError, match="coevolution"):
        load_weights(path, wide)
    load_weights(path, wide, widen=True)
    rng = np.random.default_rng(0)
    batch = {"msa": torch.from_numpy(rng.integers(0, 21, (1, 4, 12))),
             "residue_index": torch.arange(12)[None],
             "coevolution": torch.from_numpy(rng.normal(size=(1, 12, 12, 3)).astype(np.float32))}
    with torch.no_grad():
        expected = narrow(dict(batch, coevolution=batch["coevolution"][..., :2]))["dist_logits"]
        got = wide(batch)["dist_logits"]
    torch.testing.assert_close(got, expected)
    assert torch.count_nonzero(wide.state_dict()[next(k for k in wide.state_dict()
                                                      if k.endswith("coevolution.weight"))][:, 2]) == 0
