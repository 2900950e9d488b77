"""Inference (workflow_lib.inference): inputs, crop-and-stitch, outputs, determinism, errors.

Real data: ``tests/data/predict/t1078_head64.a3m`` (a cut of the CASP14 T1078 HHblits MSA, see
tests/data/README.md) and the SCOPe globin domain ``tests/data/structure/d1mbaa_.pdb.gz``. The model is a
randomly initialised ``tiny`` network saved to ``tmp_path`` (the shipped checkpoint is not used here).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from Bio.PDB import MMCIFParser, PDBParser
from model_testing import randomize_

from workflow_lib.cli import main
from workflow_lib.errors import InputError
from workflow_lib.features import build_features, write_features
from workflow_lib.model import ThreeTrackNetwork, preset
from workflow_lib.inference.confidence import CALIBRATION_KEY, PlddtCalibration, expected_lddt
from workflow_lib.model.checkpoint import save_checkpoint
from workflow_lib.schemas.features import (
    C_TEMPLATE_1D,
    C_TEMPLATE_PAIR,
    FEATURES,
    NETWORK_READERS,
    RECORD_KEYS,
    feature_keys_read,
)
from workflow_lib.schemas.prediction import PREDICTED_RESIDUES, PREDICTION, PREDICTION_STATS
from workflow_lib.inference.predict import (
    SEGMENT_CONTACTS,
    PredictOptions,
    collate,
    crop_passes,
    model_inputs,
    plan_batches,
    plan_crops,
    predict_features,
    predict_many,
    run_network,
    select_rows,
    template_contacts,
)
from workflow_lib.inference.stitch import (
    PairMean,
    contact_segment_pairs,
    crop_plan,
    segment_starts,
    stitch_backbone,
    stitch_pair,
)
from workflow_lib.model.structure import IDEAL_BACKBONE
from workflow_lib.workflow.config import PredictConfig
from workflow_lib.model.primitives import explicit_attention, fused_attention, mask_to_bias, masked_softmax_logits
from workflow_lib.report.compare import compare_results
from workflow_lib.schemas.io import read_frame, read_npz
from workflow_lib.structure import read_chain
from workflow_lib.structure.cbeta import virtual_cb
from workflow_lib.structure.metrics import lddt_ca

DATA = Path(__file__).parent / "data"
A3M = DATA / "predict" / "t1078_head64.a3m"
GLOBIN = DATA / "structure" / "d1mbaa_.pdb.gz"


def tiny_model(seed: int = 0, **overrides) -> ThreeTrackNetwork:
    torch.manual_seed(seed)
    model = ThreeTrackNetwork(preset("tiny", c_coevolution=2, **overrides))
    return randomize_(model, seed=seed).eval()


def sliced(features: dict[str, np.ndarray], stop: int) -> dict[str, np.ndarray]:
    """The first ``stop`` residues of a feature dict (every L axis cut)."""
    out = dict(features)
    for key in ("msa", "deletion_matrix"):
        out[key] = features[key][:, :stop]
    for key in ("deletion_mean", "profile", "residue_index"):
        out[key] = features[key][:stop]
    out["coevolution"] = features["coevolution"][:stop, :stop]
    if "template_pair" in features:
        out["template_pair"] = features["template_pair"][:, :stop, :stop]
    for key in ("template_atoms", "template_1d", "template_ca"):
        if key in features:
            out[key] = features[key][:, :stop]
    return out


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_torch_thread):
    """Every test of this module on one torch thread (conftest)."""


@pytest.fixture(scope="module")
def features() -> dict[str, np.ndarray]:
    return build_features(A3M)


@pytest.fixture(scope="module")
def model() -> ThreeTrackNetwork:
    return tiny_model()


@pytest.fixture()
def checkpoint(tmp_path: Path, model: ThreeTrackNetwork) -> Path:
    return save_checkpoint(tmp_path / "tiny.pt", model)


# --- inputs ---------------------------------------------------------------------------------------------------
def test_select_rows_keeps_query_caps_and_is_seeded(features):
    msa = features["msa"]
    rows = select_rows(msa, 10, seed=3, drop_gappy=False)
    assert rows[0] == 0 and len(rows) == 10 and np.all(np.diff(rows) > 0)
    assert np.array_equal(rows, select_rows(msa, 10, seed=3, drop_gappy=False))
    assert not np.array_equal(rows, select_rows(msa, 10, seed=4, drop_gappy=False))
    assert np.array_equal(select_rows(msa, 1000, seed=0, drop_gappy=False), np.arange(msa.shape[0]))
    # gappy rows are dropped in crops: columns 0..9 of T1078's MSA are mostly gaps outside the query
    crop = msa[:, :10]
    kept = select_rows(crop, 1000, seed=0, drop_gappy=True)
    gap_fraction = (crop[kept[1:]] == 21).mean(axis=1)
    assert kept[0] == 0 and len(kept) < msa.shape[0] and (gap_fraction < 0.5).all()


def test_model_inputs_crop_every_residue_axis(features):
    config = preset("tiny", c_coevolution=2, c_template_pair=131, c_template_1d=26, outer_product_weighting="mean")
    length = features["msa"].shape[1]
    rng = np.random.default_rng(0)
    with_templates = dict(features, template_pair=rng.random((2, length, length, 131)).astype(np.float16),
                          template_1d=rng.random((2, length, 26)).astype(np.float32),
                          template_mask=np.array([True, False]))
    columns = np.array([3, 4, 5, 40, 41])
    x = model_inputs(with_templates, config, columns=columns, max_msa=8)
    assert x["msa"].shape[1] == 5 and 1 < x["msa"].shape[0] <= 8
    assert np.array_equal(x["residue_index"], columns - 3)  # shifted to start at 0, differences kept
    # a model of two co-evolution channels reads the first two of the file's three
    assert np.array_equal(x["coevolution"], features["coevolution"][np.ix_(columns, columns)][..., :2])
    assert features["coevolution"].shape[-1] == 3
    every = model_inputs(with_templates, dataclasses.replace(config, c_coevolution=3), columns=columns, max_msa=8)
    assert np.array_equal(every["coevolution"], features["coevolution"][np.ix_(columns, columns)])
    assert np.array_equal(x["templates_pair"][1, 2, 3], with_templates["template_pair"][1, 5, 40].astype(np.float32))
    assert np.array_equal(x["templates_1d"][0, 4], with_templates["template_1d"][0, 41])
    assert np.array_equal(x["template_mask"], [1.0, 0.0])
    # T = 0 (no template stage yet): nothing is passed; a model without co-evolution gets none
    assert "templates_pair" not in model_inputs(features, config)
    assert "coevolution" not in model_inputs(features, preset("tiny"))
    # no row weights for any weighting: the feature file has none (the 'mean' outer product is uniform)
    rows = select_rows(features["msa"][:, columns], 8, 0, drop_gappy=True)
    np.testing.assert_array_equal(x["msa"], features["msa"][rows][:, columns])
    assert "msa_weights" not in x and "seq_weights" not in features


# --- crops and stitching --------------------------------------------------------------------------------------
@pytest.mark.parametrize("length,window", [(40, 40), (41, 40), (100, 32), (301, 64), (1000, 300)])
def test_crop_plan_bounds_size_covers_pairs_and_chains(length, window):
    crops = crop_plan(length, window)
    covered = np.zeros((length, length), dtype=bool)
    for crop in crops:
        assert len(crop.indices) <= window and np.all(np.diff(crop.indices) > 0)
        covered[np.ix_(crop.indices, crop.indices)] = True
    assert covered.all()
    chain = [crop.indices for crop in crops if crop.contiguous]
    assert np.array_equal(np.unique(np.concatenate(chain)), np.arange(length))
    for before, after in zip(chain, chain[1:]):
        assert np.all(np.diff(after) == 1) and len(np.intersect1d(before, after)) >= 3
    if length <= window:
        assert len(crops) == 1 and np.array_equal(crops[0].indices, np.arange(length))


def test_segment_pairs_limit_the_distant_crops_and_keep_the_chain():
    length, window = 150, 32                       # 10 segments of 16: 45 crops, 9 of them contiguous
    starts = segment_starts(length, window)
    assert len(starts) == 10 and starts[-1] == length - 16
    keep = np.zeros((10, 10), dtype=bool)
    keep[7, 2] = True                              # one distant pair, marked in either triangle
    crops = crop_plan(length, window, keep)
    assert len(crop_plan(length, window)) == 45 and len(crops) == 9 + 1
    assert sum(crop.contiguous for crop in crops) == 9
    distant = [crop.indices for crop in crops if not crop.contiguous]
    np.testing.assert_array_equal(distant[0], np.r_[starts[2]:starts[2] + 16, starts[7]:starts[7] + 16])
    covered = np.zeros((length, length), dtype=bool)
    for crop in crops:
        covered[np.ix_(crop.indices, crop.indices)] = True
    assert covered[starts[2], starts[7]] and not covered[starts[2], starts[6]] and not covered[0, length - 1]
    assert len(crop_plan(length, window, np.zeros((10, 10), dtype=bool))) == 9
    with pytest.raises(ValueError, match="segment_pairs"):
        crop_plan(length, window, np.zeros((9, 9), dtype=bool))


def test_contact_segment_pairs_mark_the_segments_holding_a_contact():
    length, window = 100, 32                       # segments start at 0, 16, ..., 80 and the last at 84
    contacts = np.zeros((length, length), dtype=bool)
    contacts[5, 90] = True                         # segment 0 with the last two (80-95 and 84-99)
    pairs = contact_segment_pairs(length, window, contacts)
    assert pairs.shape == (7, 7)
    assert {tuple(ij) for ij in np.argwhere(pairs)} == {(0, 5), (0, 6)}
    with pytest.raises(ValueError, match="contacts"):
        contact_segment_pairs(length, window, contacts[:-1])


def test_crop_pairs_contacts_runs_the_chain_and_the_template_contacts_only(model, features):
    length = features["msa"].shape[1]
    window = 32
    starts = segment_starts(length, window)
    alone = dict(features)
    options = PredictOptions(fold="network", window=window, max_msa=16, crop_pairs="contacts")
    assert len(plan_crops(alone, options)) == len(starts) - 1 < len(crop_plan(length, window))
    # one template that puts residues 3-10 (first segment) within 4.5 A of the last eight: their crop runs too
    with_template = dict(features, template_mask=np.ones(1, dtype=bool),
                         template_pair=np.zeros((1, length, length, C_TEMPLATE_PAIR), dtype=np.float16),
                         template_1d=np.zeros((1, length, C_TEMPLATE_1D), dtype=np.float32))
    with_template["template_pair"][0, np.arange(3, 11), np.arange(length - 8, length), 5] = 1.0  # 4.5-5.0 A
    with_template["template_pair"][0, 10, 40, 30] = 1.0                # 17-17.5 A: no contact
    contacts = template_contacts(with_template)
    assert contacts.sum() == SEGMENT_CONTACTS == 8 and contacts[3, length - 8]
    crops = plan_crops(with_template, options)
    assert len(crops) == len(starts) and sum(not crop.contiguous for crop in crops) == 1
    assert len(plan_crops(with_template, options, min_contacts=9)) == len(starts) - 1       # too few contacts
    assert len(plan_crops(with_template, dataclasses.replace(options, crop_pairs="neighbours"))) == len(starts) - 1
    got = predict_features(model, with_template, options)
    assert got.n_crops == len(starts)
    assert got.covered[3, length - 8] and got.covered[0, 20] and not got.covered[0, 40]
    for head in ("dist", "omega", "theta", "phi"):                      # the pairs no crop held: no contact
        np.testing.assert_array_equal(got.probs[head][~got.covered].argmax(-1), got.probs[head].shape[-1] - 1)
        np.testing.assert_allclose(got.probs[head].sum(-1), 1.0, atol=1e-5)
    folded = predict_features(model, with_template, dataclasses.replace(options, fold="distogram"))
    assert np.isfinite(folded.backbone[:, :4]).all() and folded.n_crops == len(starts)
    everything = predict_features(model, alone, dataclasses.replace(options, crop_pairs="all"))
    assert everything.covered is None and everything.n_crops == len(crop_plan(length, window))
    np.testing.assert_array_equal(everything.backbone, predict_features(model, alone, options).backbone)


def test_pair_mean_is_exact_on_a_constructed_case():
    length = 7
    crops = [np.array([0, 1, 2, 3]), np.array([2, 3, 4, 5, 6]), np.array([0, 1, 5, 6]), np.array([0, 1, 4])]
    rng = np.random.default_rng(1)
    values = [rng.random((len(c), len(c), 3)) for c in crops]
    expected = np.zeros((length, length, 3))
    for a in range(length):
        for b in range(length):
            hits = [v[list(c).index(a), list(c).index(b)] for c, v in zip(crops, values) if a in c and b in c]
            expected[a, b] = np.mean(hits, axis=0)
    got = stitch_pair(length, crops, values)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)
    # pair (0, 3) is in crop 0 only; (2, 3) in crops 0 and 1; (0, 1) in crops 0, 2 and 3
    assert np.array_equal(got[0, 3], values[0][0, 3])
    assert np.array_equal(got[2, 3], (values[0][2, 3] + values[1][0, 1]) / 2)
    np.testing.assert_allclose(got[0, 1], (values[0][0, 1] + values[2][0, 1] + values[3][0, 1]) / 3, atol=1e-15)
    with pytest.raises(ValueError, match="cover"):
        stitch_pair(length, crops[:3], values[:3])
    mean = PairMean(3)
    mean.add(np.array([0, 1, 2]), {"x": np.ones((3, 3, 1), dtype=np.float16)})
    assert mean.mean()["x"].dtype == np.float32


def test_stitch_backbone_recovers_rigidly_moved_windows():
    chain = read_chain(GLOBIN, "A")
    backbone = chain.coords[:, :3].astype(np.float64)
    length = len(chain)
    contiguous = [c.indices for c in crop_plan(length, 48) if c.contiguous]
    assert len(contiguous) > 3
    rng = np.random.default_rng(7)
    moved = []
    for k, indices in enumerate(contiguous):
        rotation = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        rotation *= np.sign(np.linalg.det(rotation))
        shift = rng.normal(scale=30.0, size=3)
        xyz = backbone[indices]
        moved.append(xyz if k == 0 else xyz @ rotation.T + shift)
    plddt = [np.full(len(idx), float(k)) for k, idx in enumerate(contiguous)]
    stitched, (chosen_plddt,) = stitch_backbone(length, contiguous, moved, [plddt])
    np.testing.assert_allclose(stitched, backbone, atol=1e-9)
    # each residue's values come from the crop where it is farthest from an end (the first such crop on ties)
    expected = np.zeros(length)
    for residue in range(length):
        scores = [min(list(idx).index(residue), len(idx) - 1 - list(idx).index(residue)) if residue in idx else -1
                  for idx in contiguous]
        expected[residue] = int(np.argmax(scores))
    np.testing.assert_array_equal(chosen_plddt, expected)
    assert len(np.unique(chosen_plddt)) == len(contiguous)


# --- prediction -----------------------------------------------------------------------------------------------
def test_single_window_equals_the_full_forward_pass(model, features):
    length = features["msa"].shape[1]
    direct = run_network(model, [model_inputs(features, model.config, max_msa=16)], torch.device("cpu"))[0]
    for window in (length, 4 * length):
        got = predict_features(model, features, PredictOptions(fold="network", window=window, max_msa=16))
        assert got.n_crops == 1
        for head in ("dist", "omega", "theta", "phi"):
            assert np.array_equal(got.probs[head], direct[head])
        np.testing.assert_array_equal(got.backbone[:, :3], direct["coords"])
        np.testing.assert_allclose(got.plddt, 100 * direct["plddt"], rtol=1e-6)


def test_cropped_prediction_stays_within_the_window(model, features):
    seen: list[int] = []
    handle = model.register_forward_pre_hook(lambda module, args: seen.append(args[0]["msa"].shape[-1]))
    try:
        got = predict_features(model, features, PredictOptions(fold="network", window=32, max_msa=16, embeddings=True,
                                                               crop_pairs="all"))
    finally:
        handle.remove()
    length = features["msa"].shape[1]
    assert got.n_crops == len(crop_plan(length, 32)) == len(seen) > 1 and max(seen) <= 32
    for head, bins in (("dist", 37), ("omega", 37), ("theta", 37), ("phi", 19)):
        assert got.probs[head].shape == (length, length, bins)
        np.testing.assert_allclose(got.probs[head].sum(-1), 1.0, atol=1e-5)
    assert np.isfinite(got.backbone[:, :4]).all() and got.backbone.shape == (length, 5, 3)
    ca = got.backbone[:, 1]
    # every residue keeps the network's ideal geometry (N-CA, CA-C bonds) even where untrained windows disagree
    ideal = np.array(IDEAL_BACKBONE)
    np.testing.assert_allclose(np.linalg.norm(got.backbone[:, 0] - ca, axis=1), np.linalg.norm(ideal[0]), atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(got.backbone[:, 2] - ca, axis=1), np.linalg.norm(ideal[2]), atol=1e-4)
    assert got.single.shape == (length, 16) and got.pair.shape == (length, length, 16)
    assert ((got.plddt >= 0) & (got.plddt <= 100)).all()


def test_cropped_prediction_without_pair_outputs_runs_only_the_contiguous_crops(model, features):
    full = predict_features(model, features, PredictOptions(fold="network", window=32, max_msa=16, crop_pairs="all"))
    seen: list[int] = []
    handle = model.register_forward_pre_hook(lambda module, args: seen.append(args[0]["msa"].shape[-1]))
    try:
        lean = predict_features(model, features, PredictOptions(fold="network", window=32, max_msa=16, pair_heads=(),
                                                                crop_pairs="all"))
    finally:
        handle.remove()
    plan = crop_plan(features["msa"].shape[1], 32)
    contiguous = sum(crop.contiguous for crop in plan)
    assert lean.n_crops == len(seen) == contiguous < len(plan) == full.n_crops
    assert lean.probs == {} and set(full.probs) == {"dist", "omega", "theta", "phi"}
    np.testing.assert_array_equal(lean.backbone, full.backbone)
    np.testing.assert_array_equal(lean.plddt, full.plddt)


def test_a_model_reading_msa_statistics_gets_them_from_the_feature_file(features):
    model = tiny_model(msa_statistics=True)
    length = features["msa"].shape[1]
    columns = np.r_[0:16, length - 16:length]
    inputs = model_inputs(features, model.config, columns=columns, max_msa=16)
    rows = select_rows(features["msa"][:, columns], 16, 0, drop_gappy=True)
    np.testing.assert_array_equal(inputs["deletion_matrix"], features["deletion_matrix"][rows][:, columns])
    np.testing.assert_array_equal(inputs["profile"], features["profile"][columns])
    assert inputs["deletion_matrix"].max() > 0
    got = predict_features(model, features, PredictOptions(fold="network", window=32, max_msa=16))
    flat = dict(features, deletion_matrix=np.zeros_like(features["deletion_matrix"]))
    other = predict_features(model, flat, PredictOptions(fold="network", window=32, max_msa=16))
    assert np.abs(got.probs["dist"] - other.probs["dist"]).max() > 1e-4      # the deletions reach the output
    assert "deletion_matrix" not in model_inputs(features, tiny_model().config)


class _Recording(dict):
    """A feature dict that records which keys are read."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


def _with_two_templates(features: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    length = features["msa"].shape[1]
    atoms = np.cumsum(rng.normal(0.0, 2.2, (2, length * 4, 3)), axis=1).reshape(2, length, 4, 3)  # a random walk
    atoms[:, rng.random(length) < 0.2] = np.nan                                           # unplaced columns
    return dict(features, template_atoms=atoms.astype(np.float32),
                template_1d=rng.random((2, length, C_TEMPLATE_1D)).astype(np.float32),
                template_mask=np.array([True, True]))


def _perturbed(features: dict[str, np.ndarray], key: str) -> dict[str, np.ndarray]:
    """``features`` with ``key`` changed as a real input could change (same dtype and shape)."""
    value = features[key]
    if key == "coevolution":
        return dict(features, coevolution=np.ascontiguousarray(value[::-1, ::-1]))
    if key == "template_mask":
        return dict(features, template_mask=np.array([True, False]))
    if key == "template_atoms":     # not the template order: the template stack is order-invariant
        return dict(features, template_atoms=np.ascontiguousarray(value[:, ::-1]))
    if key == "template_1d":
        return dict(features, template_1d=np.ascontiguousarray(value[:, ::-1]))
    if key == "deletion_matrix":
        return dict(features, deletion_matrix=np.zeros_like(value))
    if key == "profile":
        return dict(features, profile=np.ascontiguousarray(value[:, ::-1]))
    return dict(features, **{key: np.ascontiguousarray(value[::-1]) if value.ndim else value + 1})


@pytest.mark.parametrize("options", [
    {},
    {"msa_statistics": True, "outer_product_weighting": "mean", "c_template_pair": C_TEMPLATE_PAIR,
     "c_template_1d": C_TEMPLATE_1D},
    {"c_template_pair": C_TEMPLATE_PAIR, "c_template_1d": 0},
    {"c_template_pair": 0, "c_template_1d": C_TEMPLATE_1D},
])
def test_inference_reads_exactly_the_keys_the_network_reads_and_each_changes_the_prediction(features, options):
    model = tiny_model(**options)
    keys = feature_keys_read(model.config)
    assert keys <= set(FEATURES.arrays) and not keys & set(RECORD_KEYS)
    assert {key for key, reader in NETWORK_READERS.items() if reader == "always"} <= keys
    full = _with_two_templates(features) if "template_mask" in keys else features
    recording = _Recording(full)
    opts = PredictOptions(fold="network", window=32, max_msa=16, crop_pairs="all")
    reference = predict_features(model, recording, opts)
    assert recording.read == keys
    planned = _Recording(full)                   # crop_pairs: contacts also reads the templates to plan crops
    predict_features(model, planned, dataclasses.replace(opts, crop_pairs="contacts"))
    assert planned.read == keys | {"template_mask"} | ({"template_atoms"} if "template_mask" in keys else set())
    for key in sorted(keys - {"msa", "residue_index"}):
        other = predict_features(model, _perturbed(full, key), opts)
        change = np.abs(other.probs["dist"] - reference.probs["dist"]).max()
        assert change > 1e-4, f"{key} does not reach the prediction (max change {change:.2e})"
    for key in RECORD_KEYS:
        same = predict_features(model, _perturbed(full, key), opts)
        np.testing.assert_array_equal(same.probs["dist"], reference.probs["dist"])


def test_bfloat16_inference_stays_close_to_float32(model, features):
    options = PredictOptions(fold="network", window=32, max_msa=16)
    reference = predict_features(model, features, options)
    half = predict_features(model, features,
                            PredictOptions(fold="network", window=32, max_msa=16, precision="bfloat16"))
    assert half.n_crops == reference.n_crops > 1
    again = predict_features(model, features,
                             PredictOptions(fold="network", window=32, max_msa=16, precision="bfloat16"))
    np.testing.assert_array_equal(again.probs["dist"], half.probs["dist"])                 # deterministic too
    for head in ("dist", "omega", "theta", "phi"):
        assert half.probs[head].dtype == np.float32
        np.testing.assert_allclose(half.probs[head].sum(-1), 1.0, atol=1e-5)
        difference = np.abs(half.probs[head] - reference.probs[head])
        assert 0 < difference.max() < 0.05 and difference.mean() < 2e-3, head   # autocast ran, and stayed close
    assert np.isfinite(half.backbone[:, :4]).all() and np.abs(half.plddt - reference.plddt).max() < 2.0
    # frame geometry stays float32: the ideal bond lengths hold exactly as in float32
    ideal = np.linalg.norm(np.array(IDEAL_BACKBONE)[0])
    np.testing.assert_allclose(np.linalg.norm(half.backbone[:, 0] - half.backbone[:, 1], axis=1), ideal, atol=1e-4)
    with pytest.raises(InputError, match="precision must be one of float32, bfloat16"):
        PredictOptions(precision="float16")
    with pytest.raises(InputError, match="predict.precision"):
        PredictConfig(precision="fp8")


def test_fused_attention_matches_the_explicit_softmax():
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 5, 4, 7, 8, generator=generator) for _ in range(3))
    pair_bias = torch.randn(2, 1, 4, 7, 7, generator=generator)
    mask = torch.ones(2, 5, 7)
    mask[1, :, 5:] = 0.0
    key_bias = mask_to_bias(mask)[..., None, None, :]
    expected = torch.einsum("...hqk,...hkc->...hqc", masked_softmax_logits(q @ k.transpose(-1, -2),
                                                                          [pair_bias, key_bias]), v)
    torch.testing.assert_close(fused_attention(q, k, v, [pair_bias, key_bias]), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fused_attention(q, k, v, [None, pair_bias]),
                               torch.softmax(q @ k.transpose(-1, -2) + pair_bias, -1) @ v, atol=1e-5, rtol=1e-5)


def test_inference_attention_matches_the_training_path(model, features):
    batch = collate([model_inputs(sliced(features, 40), model.config, max_msa=16),
                     model_inputs(sliced(features, 33), model.config, max_msa=16)], torch.device("cpu"))
    model.eval()
    with torch.no_grad():
        fused = model(batch)   # fused attention, zero biases skipped
        with explicit_attention():
            explicit = model(batch)
    with torch.enable_grad():
        training = model(batch)
    for key in ("coords", "plddt", "dist_logits", "omega_logits"):
        torch.testing.assert_close(fused[key], explicit[key], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(explicit[key], training[key].detach(), atol=0, rtol=0)


def test_batched_proteins_match_single_runs(model, features):
    items = [("a", sliced(features, 40)), ("b", sliced(features, 38))]
    single = dict(predict_many(model, items, PredictOptions(fold="network", max_msa=16)))
    batched = dict(predict_many(model, items, PredictOptions(fold="network", max_msa=16, batch_size=2)))
    for name in ("a", "b"):
        np.testing.assert_allclose(batched[name].probs["dist"], single[name].probs["dist"], atol=1e-5)
        np.testing.assert_allclose(batched[name].backbone, single[name].backbone, atol=1e-3)
        np.testing.assert_allclose(batched[name].plddt, single[name].plddt, atol=1e-3)


def test_batched_crops_match_one_by_one(model, features):
    """A protein longer than the window: its crops share passes within batch_size / max_tokens, and the stitched
    outputs equal one crop per pass to float rounding."""
    item = [("long", sliced(features, 64))]
    options = PredictOptions(fold="network", max_msa=16, window=24, crop_pairs="all")
    one = dict(predict_many(model, item, options))["long"]
    assert one.n_crops == len(crop_plan(64, 24)) > 8
    for batch_size, max_tokens in ((4, 0), (64, 60)):
        options = PredictOptions(fold="network", max_msa=16, window=24, batch_size=batch_size, max_tokens=max_tokens,
                                 crop_pairs="all")
        many = dict(predict_many(model, item, options))["long"]
        assert many.n_crops == one.n_crops
        for head in ("dist", "omega", "theta", "phi"):
            np.testing.assert_allclose(many.probs[head], one.probs[head], atol=1e-5)
        np.testing.assert_allclose(many.backbone, one.backbone, atol=1e-3)
        np.testing.assert_allclose(many.plddt, one.plddt, atol=1e-3)


def test_crop_passes_keep_order_and_budgets():
    sizes = [24, 24, 24, 24, 20, 24, 24]
    assert crop_passes(sizes, PredictOptions(fold="network")) == [[i] for i in range(7)]
    assert crop_passes(sizes, PredictOptions(fold="network", batch_size=3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert crop_passes(sizes, PredictOptions(fold="network", batch_size=8, max_tokens=50)) == [
        [0, 1], [2, 3], [4, 5], [6]]
    assert crop_passes(sizes, PredictOptions(fold="network", batch_size=8, max_tokens=10)) == [[i] for i in range(7)]


def test_plan_batches_sorts_by_length_and_keeps_token_and_size_budgets():
    lengths = [50, 300, 48, 400, 52, 100, 49, 51, 700]
    # window 300: 400 and 700 run alone after the batches, in input order
    plan = plan_batches(lengths, PredictOptions(fold="network", batch_size=4))
    assert plan == [[2, 6, 0, 7], [4], [5], [1], [3], [8]]
    plan = plan_batches(lengths, PredictOptions(fold="network", batch_size=10, max_tokens=160))
    assert plan == [[2, 6, 0], [7, 4], [5], [1], [3], [8]]
    for batch_size, max_tokens in ((1, 0), (3, 0), (8, 200), (64, 1000)):
        plan = plan_batches(lengths, PredictOptions(fold="network", batch_size=batch_size, max_tokens=max_tokens))
        assert sorted(i for group in plan for i in group) == list(range(len(lengths)))
        for group in plan:
            longest = max(lengths[i] for i in group)
            assert len(group) <= batch_size
            assert len(group) == 1 or (not max_tokens or len(group) * longest <= max_tokens)
            assert longest <= max(1.1 * min(lengths[i] for i in group), min(lengths[i] for i in group) + 8)


def test_token_batched_cli_equals_one_by_one(tmp_path, checkpoint, features):
    """Proteins sharing forward passes (token budget) give the one-by-one predictions within float rounding;
    the stats table records every protein's pass; a protein longer than the window still runs alone."""
    inputs = []
    for name, stop in (("p40", 40), ("p38", 38), ("p41", 41), ("p64", 64)):
        npz = tmp_path / "in" / f"{name}.npz"
        write_features(npz, sliced(features, stop))
        inputs.append(str(npz))
    runs = {}
    for run, extra in (("single", []), ("batched", ["--batch-size", "8", "--max-tokens", "130"])):
        out = tmp_path / run
        assert main(["predict", "--model", str(checkpoint), "--out-dir", str(out), "--device", "cpu",
                     "--window", "48", "--max-msa", "16", "--fold", "network", "--stats", str(out / "stats.parquet"),
                     *extra, *inputs]) == 0
        runs[run] = read_frame(out / "stats.parquet", PREDICTION_STATS).set_index("protein")
    assert runs["single"]["batch_size"].tolist() == [1, 1, 1, 1]
    batched = runs["batched"]
    # 38, 40, 41 fit 130 tokens as 38+40 (2 x 40 = 80), then 41 (3 x 41 = 123 <= 130): one pass of three
    assert batched.loc[["p38", "p40", "p41"], "batch_size"].tolist() == [3, 3, 3]
    assert batched.loc["p64", "batch_size"] == 1 and batched.loc["p64", "n_crops"] > 1
    assert len(set(batched.loc[["p38", "p40", "p41"], "batch"])) == 1
    for name in ("p40", "p38", "p41", "p64"):
        one, many = (read_npz(tmp_path / run / f"{name}.pred.npz", PREDICTION) for run in ("single", "batched"))
        np.testing.assert_allclose(many["dist"].astype(np.float32), one["dist"].astype(np.float32), atol=2e-3)
        np.testing.assert_allclose(many["backbone"], one["backbone"], atol=1e-3)
        np.testing.assert_allclose(many["plddt"], one["plddt"], atol=1e-3)
        assert abs(runs["single"].loc[name, "mean_plddt"] - float(one["plddt"].mean())) < 1e-4


def test_pair_heads_choose_the_6d_maps_written(tmp_path, checkpoint, features):
    """--pair-heads keeps only the chosen 6D maps (none: pLDDT and backbone only, for proteome-scale runs); the
    structure does not change, cropped or not, except that kept ω / θ / φ maps may choose its other hand."""
    npz = tmp_path / "in" / "p64.npz"
    write_features(npz, sliced(features, 64))
    sizes = {}
    for run, heads in (("all", "dist,omega,theta,phi"), ("dist", "dist"), ("none", "none")):
        assert main(["predict", "--model", str(checkpoint), "--out-dir", str(tmp_path / run), "--device", "cpu",
                     "--window", "48", "--max-msa", "16", "--pair-heads", heads, str(npz)]) == 0
        sizes[run] = (tmp_path / run / "p64.pred.npz").stat().st_size
    arrays = {run: read_npz(tmp_path / run / "p64.pred.npz", PREDICTION) for run in sizes}
    assert {"dist", "omega", "theta", "phi"} <= set(arrays["all"])
    assert "dist" in arrays["dist"] and not {"omega", "theta", "phi"} & set(arrays["dist"])
    assert not {"dist", "omega", "theta", "phi"} & set(arrays["none"])
    assert sizes["none"] < sizes["dist"] < sizes["all"]
    assert arrays["none"]["backbone"].tobytes() == arrays["dist"]["backbone"].tobytes()
    for run in ("dist", "none"):
        # kept ω / θ / φ maps may choose the other hand of the same fold (module fold, "The hand"): the same
        # distances, so the same lDDT-Cα against each other up to the mirror's polish (margin 0.9), same pLDDT
        assert lddt_ca(arrays[run]["backbone"][:, 1].astype(np.float64),
                       arrays["all"]["backbone"][:, 1].astype(np.float64)).score > 0.9
        assert np.abs(arrays[run]["plddt"] - arrays["all"]["plddt"]).max() < 5.0
    assert arrays["dist"]["dist"].tobytes() == arrays["all"]["dist"].tobytes()
    # --precision bfloat16 reaches the network: other bytes, same layout
    assert main(["predict", "--model", str(checkpoint), "--out-dir", str(tmp_path / "bf16"), "--device", "cpu",
                 "--window", "48", "--max-msa", "16", "--pair-heads", "dist", "--precision", "bfloat16", str(npz)]) == 0
    half = read_npz(tmp_path / "bf16" / "p64.pred.npz", PREDICTION)
    assert half["dist"].shape == arrays["dist"]["dist"].shape
    assert half["dist"].tobytes() != arrays["dist"]["dist"].tobytes()
    with pytest.raises(SystemExit) as stopped:
        main(["predict", "--model", str(checkpoint), "--out-dir", str(tmp_path / "bad"), "--pair-heads", "psi",
              str(npz)])
    assert stopped.value.code == 2


def test_the_checkpoint_calibration_maps_the_folded_plddt(tmp_path, model, features):
    """With ``--fold distogram`` the pLDDT written is the checkpoint's calibration of the expected lDDT (the same
    backbone); the confidence JSON and the stats follow it; without a calibration it is the expected lDDT."""
    npz = tmp_path / "in" / "p40.npz"
    write_features(npz, sliced(features, 40))
    calibration = PlddtCalibration((0.0, 0.2, 0.4, 1.0), (0.05, 0.5, 0.8, 0.98))
    plain = save_checkpoint(tmp_path / "plain.pt", model)
    calibrated = save_checkpoint(tmp_path / "calibrated.pt", model,
                                 extra={CALIBRATION_KEY: calibration.to_extra()})
    runs = {}
    for run, path, heads in (("plain", plain, "dist"), ("calibrated", calibrated, "none")):
        out = tmp_path / run
        assert main(["predict", "--model", str(path), "--out-dir", str(out), "--device", "cpu", "--window", "48",
                     "--max-msa", "16", "--fold", "distogram", "--pair-heads", heads, "--stats",
                     str(out / "stats.parquet"), str(npz)]) == 0
        runs[run] = read_npz(out / "p40.pred.npz", PREDICTION)
    assert runs["plain"]["backbone"].tobytes() == runs["calibrated"]["backbone"].tobytes()
    expected = runs["plain"]["plddt"] / 100.0
    backbone = runs["plain"]["backbone"].astype(np.float64)
    np.testing.assert_allclose(expected, expected_lddt(runs["plain"]["dist"],
                                                       virtual_cb(backbone[:, 0], backbone[:, 1], backbone[:, 2])),
                               atol=2e-3)
    np.testing.assert_allclose(runs["calibrated"]["plddt"], 100.0 * calibration(expected), atol=1e-3)
    assert not np.allclose(runs["calibrated"]["plddt"], runs["plain"]["plddt"], atol=1.0)
    confidence = json.loads((tmp_path / "calibrated" / "p40.confidence.json").read_text())
    np.testing.assert_allclose(confidence["confidenceScore"], runs["calibrated"]["plddt"], atol=0.01)
    stats = read_frame(tmp_path / "calibrated" / "stats.parquet", PREDICTION_STATS)
    assert abs(float(stats["mean_plddt"].iloc[0]) - float(runs["calibrated"]["plddt"].mean())) < 1e-3


def test_killed_predict_resumes_from_receipts(tmp_path, checkpoint, features, monkeypatch, capsys):
    """A run that dies after two of four passes keeps those proteins: the rerun predicts only the other two and
    ends with the files and stats of an uninterrupted run. A changed input, a missing output file, other
    settings or --no-resume recompute; an unreadable receipt is ignored."""
    import workflow_lib.inference.jobs as predict_jobs

    inputs = []
    for name, stop in (("p40", 40), ("p38", 38), ("p44", 44), ("p64", 64)):
        npz = tmp_path / "in" / f"{name}.npz"
        write_features(npz, sliced(features, stop))
        inputs.append(str(npz))
    real = predict_jobs.predict_group
    ran: list[str] = []

    def counting(model, items, options, **keywords):
        if len(ran) >= budget[0]:
            raise KeyboardInterrupt("killed")
        ran.extend(name for name, _ in items)
        return real(model, items, options, **keywords)

    monkeypatch.setattr(predict_jobs, "predict_group", counting)

    def predict(out, *extra):
        return main(["predict", "--model", str(checkpoint), "--out-dir", str(out), "--device", "cpu",
                     "--window", "48", "--max-msa", "16", "--fold", "network", "--stats", str(out / "stats.parquet"),
                     *extra, *inputs])

    budget = [99]
    assert predict(tmp_path / "whole") == 0
    assert sorted(ran) == ["p38", "p40", "p44", "p64"]
    ran.clear()
    budget[0] = 2
    with pytest.raises(KeyboardInterrupt):
        predict(tmp_path / "killed")
    assert ran == ["p38", "p40"] and not (tmp_path / "killed" / "stats.parquet").exists()
    assert sorted(p.name for p in (tmp_path / "killed").glob("*.done.json")) == [
        "p38.predict.done.json", "p40.predict.done.json"]
    ran.clear()
    budget[0] = 99
    capsys.readouterr()
    assert predict(tmp_path / "killed") == 0
    assert ran == ["p44", "p64"]
    assert "resuming: 2 of 4 proteins" in capsys.readouterr().out
    whole, resumed = (read_frame(tmp_path / run / "stats.parquet", PREDICTION_STATS) for run in ("whole", "killed"))
    columns = [c for c in whole.columns if c != "seconds"]
    assert whole[columns].equals(resumed[columns])
    assert compare_results(tmp_path / "whole", tmp_path / "killed") == []

    def rerun(*extra):
        ran.clear()
        assert predict(tmp_path / "killed", *extra) == 0
        return sorted(ran)

    assert rerun() == []
    (tmp_path / "killed" / "p38.cif").unlink()
    write_features(tmp_path / "in" / "p40.npz", sliced(features, 39))
    (tmp_path / "killed" / "p64.predict.done.json").write_text("{not json")
    assert rerun() == ["p38", "p40", "p64"]
    assert (tmp_path / "killed" / "p38.cif").is_file()
    assert read_npz(tmp_path / "killed" / "p40.pred.npz", PREDICTION)["plddt"].shape == (39,)
    assert rerun("--seed", "3") == ["p38", "p40", "p44", "p64"]
    assert rerun("--seed", "3", "--batch-size", "4") == []   # the pass plan does not change a prediction
    assert rerun("--seed", "3", "--no-resume") == ["p38", "p40", "p44", "p64"]
    # another window recomputes only the proteins it crops, or that the old one cropped
    assert rerun("--seed", "3", "--window", "40") == ["p44", "p64"]
    assert rerun("--seed", "3", "--window", "44") == ["p44", "p64"]
    assert rerun("--seed", "3", "--window", "64") == ["p64"]


# --- command line ---------------------------------------------------------------------------------------------
def test_predict_cli_outputs_parse_and_are_deterministic(tmp_path, checkpoint, features):
    npz = tmp_path / "in" / "t1078_cut.npz"
    write_features(npz, sliced(features, 48))
    runs = []
    for run in ("one", "two"):
        out = tmp_path / run
        assert main(["predict", "--model", str(checkpoint), "--out-dir", str(out), "--device", "cpu",
                     "--window", "32", "--max-msa", "16", "--seed", "5", str(npz), str(A3M)]) == 0
        runs.append(out)
    for name, length in (("t1078_cut", 48), ("t1078_head64", 64)):
        pdb = runs[0] / f"{name}.pdb"
        assert pdb.read_text() == (runs[1] / f"{name}.pdb").read_text()
        first, second = (read_npz(run / f"{name}.pred.npz", PREDICTION) for run in runs)
        for key in first:
            assert first[key].tobytes() == second[key].tobytes(), key
        assert first["dist"].dtype == np.float16 and first["dist"].shape == (length, length, 37)
        assert int(first["n_crops"]) > 1
        structure = PDBParser(QUIET=True).get_structure(name, str(pdb))
        residues = list(structure[0]["A"])
        assert len(residues) == length
        bfactors = np.array([residue["CA"].get_bfactor() for residue in residues])
        np.testing.assert_allclose(bfactors, first["plddt"], atol=0.006)
        assert all({"N", "CA", "C", "O"} <= {atom.get_id() for atom in residue} for residue in residues)
        assert all(("CB" in residue) == (residue.get_resname() != "GLY") for residue in residues)
        table = read_frame(runs[0] / f"{name}.residues.parquet", PREDICTED_RESIDUES)
        assert list(table["residue_number"]) == list(range(1, length + 1))
        assert "".join(table["aa"]) == "MAAPTPADKSMMAAVPEWTITNLKRVCNAGNTSCTWTFGVDTHLATATSCTYVVKANANASQAS"[:length]
        np.testing.assert_allclose(table["plddt"], first["plddt"])
        if shutil.which("mkdssp"):
            assert table["ss8"].notna().all() and set("".join(table["ss3"])) <= set("HEC-")
        else:
            assert table["ss8"].isna().all()
        # the mmCIF and the confidence JSON beside the PDB carry the same model and pLDDT
        assert (runs[0] / f"{name}.cif").read_text() == (runs[1] / f"{name}.cif").read_text()
        cif = MMCIFParser(QUIET=True).get_structure(name, str(runs[0] / f"{name}.cif"))
        np.testing.assert_allclose([r["CA"].get_bfactor() for r in cif[0]["A"]], first["plddt"], atol=0.006)
        np.testing.assert_allclose([r["CA"].coord for r in cif[0]["A"]], [r["CA"].coord for r in residues], atol=1e-3)
        confidence = json.loads((runs[0] / f"{name}.confidence.json").read_text())
        assert confidence["protein"] == name and confidence["residueNumber"] == list(range(1, length + 1))
        np.testing.assert_allclose(confidence["confidenceScore"], first["plddt"], atol=0.006)
        assert confidence["confidenceCategory"] == [
            "H" if s > 90 else "M" if s > 70 else "L" if s > 50 else "D" for s in confidence["confidenceScore"]]


@pytest.mark.skipif(shutil.which("TMalign") is None, reason="TMalign not installed")
def test_predicted_pdb_is_read_by_tmalign(tmp_path, checkpoint):
    assert main(["predict", "--model", str(checkpoint), "--out-dir", str(tmp_path), "--device", "cpu",
                 "--max-msa", "8", str(A3M)]) == 0
    pdb = tmp_path / "t1078_head64.pdb"
    done = subprocess.run(["TMalign", str(pdb), str(pdb)], capture_output=True, text=True, check=True)
    assert re.search(r"Length of Chain_1:\s+64 residues", done.stdout)
    assert "TM-score= 1.00000" in done.stdout


def test_mismatched_checkpoint_fails_naming_the_key(tmp_path, checkpoint, capsys):
    payload = torch.load(checkpoint, weights_only=True)
    removed = "plddt_head.linear_2.weight"
    del payload["state_dict"][removed]
    broken = tmp_path / "broken.pt"
    torch.save(payload, broken)
    args = ["predict", "--model", str(broken), "--out-dir", str(tmp_path / "out"), "--device", "cpu", str(A3M)]
    assert main(args) == 2
    assert removed in capsys.readouterr().err
    assert not (tmp_path / "out" / "t1078_head64.pdb").exists()
    wrong_width = save_checkpoint(tmp_path / "coev4.pt", ThreeTrackNetwork(preset("tiny", c_coevolution=4)))
    assert main(["predict", "--model", str(wrong_width), "--out-dir", str(tmp_path / "out"), str(A3M)]) == 2
    assert "c_coevolution" in capsys.readouterr().err
