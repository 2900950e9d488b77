"""MSA features: schema, round trip, determinism, sampling, weights/profile vs loop references, CLI, bad input.

Fixtures are real MSAs from tests/data/formats/ (T1078 HHblits MSA with ss_pred, 426 rows x 138 columns; the
HH-suite test query, 59 rows x 431 columns); small cases are cut from them (see tests/data/README.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import math

import numpy as np
import pytest
import yaml

from workflow_lib.errors import InputError, SchemaError
from workflow_lib.features import (
    DEFAULT_MAX_SEQS,
    DEFAULT_MAX_STATS_SEQS,
    DEFAULT_MAX_TEMPLATES,
    build_features,
    msa_features,
    read_features,
    sample_rows,
    sequence_weights,
    weighted_profile,
    write_features,
)
from workflow_lib.features.cli import register
from workflow_lib.schemas.features import FEATURES
from workflow_lib.seqio.alphabet import GAP_CODE, X_CODE
from workflow_lib.seqio.msa import Alignment, read_a3m
from workflow_lib.workflow.config import FeatureConfig

T1078 = "formats/t1078_ss2.a3m"
HHSUITE = "formats/hhsuite_query.a3m"


@pytest.fixture(scope="module")
def t1078_path(data_dir):
    return data_dir / T1078


@pytest.fixture(scope="module")
def t1078(t1078_path):
    return read_a3m(t1078_path)


@pytest.fixture(scope="module")
def t1078_features(t1078_path):
    return build_features(t1078_path)


def loop_weights(codes: np.ndarray, identity: float = 0.8) -> np.ndarray:
    """Reference: 1 / #rows with ≥ ⌈identity·L⌉ identical states (gap and X are one state), plain loops."""
    depth, length = codes.shape
    state = [[min(int(c), 20) for c in row] for row in codes]
    needed = math.ceil(identity * length - 1e-9)
    weights = []
    for n in range(depth):
        neighbours = 0
        for m in range(depth):
            same = sum(1 for j in range(length) if state[n][j] == state[m][j])
            neighbours += same >= needed
        weights.append(1.0 / neighbours)
    return np.array(weights)


def test_shapes_and_dtypes_follow_the_schema(t1078_features):
    features = t1078_features
    assert set(features) == set(FEATURES.arrays)
    for key, spec in FEATURES.arrays.items():
        assert features[key].dtype == np.dtype(spec.dtype), key
        assert features[key].ndim == len(spec.dims), key
    sizes = {"N": 426, "L": 138, "T": 0}
    for key, spec in FEATURES.arrays.items():
        expected = tuple(sizes.get(d, d) for d in spec.dims)
        assert features[key].shape == expected, key


def test_query_row_tokens_index_and_deletions(t1078, t1078_features):
    features = t1078_features
    np.testing.assert_array_equal(features["msa"], t1078.matches.astype(np.int8))
    np.testing.assert_array_equal(features["deletion_matrix"], np.minimum(t1078.insertions[:, :138], 255))
    np.testing.assert_allclose(features["deletion_mean"], t1078.insertions[:, :138].mean(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(features["residue_index"], np.arange(138))
    assert int(features["num_alignments"]) == 426
    assert features["msa"].min() >= 0 and features["msa"].max() <= GAP_CODE


def test_round_trip_and_truncated_file(tmp_path, t1078_features):
    path = tmp_path / "t1078.npz"
    write_features(path, t1078_features)
    back = read_features(path)
    assert set(back) == set(t1078_features)
    for key, value in t1078_features.items():
        assert back[key].dtype == value.dtype and back[key].tobytes() == value.tobytes(), key
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(SchemaError, match="t1078.npz"):
        read_features(path)


def test_write_rejects_a_wrong_dtype(tmp_path, t1078_features):
    bad = dict(t1078_features, msa=t1078_features["msa"].astype(np.int32))
    with pytest.raises(SchemaError, match="msa"):
        write_features(tmp_path / "bad.npz", bad)
    assert not list(tmp_path.iterdir())


def test_two_builds_are_byte_identical(t1078_path, t1078_features):
    again = build_features(t1078_path)
    for key, value in t1078_features.items():
        assert again[key].tobytes() == value.tobytes(), key


def test_sequence_weights_match_the_loop_reference(t1078):
    codes = t1078.matches[:40, 30:90]
    reference = loop_weights(codes)
    np.testing.assert_array_equal(sequence_weights(codes), reference)
    # many tiny blocks (one row each) give the same integer neighbour counts
    np.testing.assert_array_equal(sequence_weights(codes, block_bytes=1), reference)
    assert reference.min() < 1.0  # the cut has near-identical rows, so the test is not vacuous


def test_x_counts_as_gap_in_the_weights(t1078):
    codes = np.array(t1078.matches[:12, :20])
    codes[3, codes[3] == GAP_CODE] = X_CODE
    np.testing.assert_array_equal(sequence_weights(codes), loop_weights(codes))
    np.testing.assert_array_equal(sequence_weights(codes), sequence_weights(t1078.matches[:12, :20]))


def test_neff_is_sane(t1078_features, data_dir):
    neff = float(t1078_features["neff"])
    assert 1.0 <= neff <= 426
    np.testing.assert_allclose(sequence_weights(read_a3m(data_dir / T1078).matches).sum(dtype=np.float64), neff,
                               rtol=1e-5)
    hhsuite = build_features(data_dir / HHSUITE)
    assert 1.0 <= float(hhsuite["neff"]) <= 59


def test_single_sequence_msa(t1078):
    single = t1078.subset([0])
    features = msa_features(single)
    assert features["msa"].shape == (1, 138)
    assert float(features["neff"]) == 1.0
    assert not features["coevolution"].any()
    # one pseudo-sequence spread over 21 states: the query residue gets (1 + 1/21) / 2
    top = features["profile"].max(axis=1)
    np.testing.assert_allclose(top, (1 + 1 / 21) / 2, rtol=1e-6)


def test_profile_matches_the_loop_reference(t1078):
    codes = t1078.matches[:30, :25]
    weights = sequence_weights(codes)
    pseudocount = 1.0
    reference = np.zeros((25, 21))
    for n in range(30):
        for j in range(25):
            reference[j, min(int(codes[n, j]), 20)] += weights[n]
    reference = (reference + pseudocount / 21) / (weights.sum() + pseudocount)
    np.testing.assert_allclose(weighted_profile(codes, weights, pseudocount=pseudocount), reference, rtol=1e-12)


def test_profile_rows_sum_to_one(t1078_features):
    np.testing.assert_allclose(t1078_features["profile"].sum(axis=1), 1.0, rtol=1e-5)


def test_sampling_keeps_the_query_first_and_is_deterministic(t1078, t1078_path):
    first = msa_features(t1078, max_seqs=50)
    second = build_features(t1078_path, max_seqs=50)
    assert first["msa"].shape == (50, 138) and "seq_weights" not in first
    assert int(first["num_alignments"]) == 426
    for key in first:
        assert first[key].tobytes() == second[key].tobytes(), key
    rows = sample_rows(t1078, 50)
    assert rows[0] == 0 and np.all(np.diff(rows) > 0) and rows.size == 50
    np.testing.assert_array_equal(first["msa"], t1078.matches[rows].astype(np.int8))
    np.testing.assert_array_equal(first["deletion_matrix"], t1078.insertions[rows, :138])
    # statistics still come from all 426 rows
    full = sequence_weights(t1078.matches)
    np.testing.assert_allclose(float(first["neff"]), full.sum(), rtol=1e-6)
    other_seed = sample_rows(t1078, 50, seed=1)
    assert other_seed[0] == 0 and not np.array_equal(other_seed, rows)


def test_sampling_ignores_row_order(t1078):
    rows = sample_rows(t1078, 20)
    shuffled = t1078.subset([0] + list(range(425, 0, -1)))
    back = sample_rows(shuffled, 20)
    assert sorted(t1078.rows[i] for i in rows) == sorted(shuffled.rows[i] for i in back)


def test_statistics_cap_uses_the_same_ranking(t1078):
    features = msa_features(t1078, max_seqs=30, max_stats_seqs=100)
    stats = sample_rows(t1078, 100)
    kept = sample_rows(t1078, 30)
    assert set(kept) <= set(stats)
    weights = sequence_weights(t1078.matches[stats])
    np.testing.assert_allclose(float(features["neff"]), weights.sum(), rtol=1e-6)
    with pytest.raises(ValueError, match="max_seqs"):
        msa_features(t1078, max_seqs=100, max_stats_seqs=30)


def test_deletions_are_clipped_but_the_mean_is_not(t1078):
    # one stated edit of a real record: 300 inserted residues before match column 5 of row 1
    row = t1078.rows[1]
    match_positions = [k for k, c in enumerate(row) if c.isupper() or c == "-"]
    cut = match_positions[5]
    edited = row[:cut] + "a" * 300 + row[cut:]
    rows = (t1078.rows[0], edited, *t1078.rows[2:10])
    alignment = Alignment.from_a3m_rows(t1078.names[:10], t1078.descriptions[:10], rows)
    features = msa_features(alignment)
    assert features["deletion_matrix"][1, 5] == 255
    assert alignment.insertions[1, 5] == 300 + t1078.insertions[1, 5]
    assert features["deletion_mean"][5] == pytest.approx(alignment.insertions[:, 5].mean())
    assert features["deletion_mean"][5] > 30


def test_annotation_rows_stay_out_and_an_old_layout_is_refused(tmp_path, t1078, t1078_features):
    # the A3M's ss_pred / ss_conf rows are annotations, not MSA rows, and no key carries them
    assert t1078.annotation("ss_pred") is not None
    assert set(t1078_features) == set(FEATURES.arrays)
    assert not any(key.startswith("ss_") or key == "is_query" for key in t1078_features)
    # a feature file of the previous layout (with the sequence weights) is refused, naming the file
    assert "seq_weights" not in t1078_features
    old = tmp_path / "old.npz"
    extra = dict(t1078_features, seq_weights=np.ones(len(t1078_features["msa"]), np.float32))
    np.savez(old, __schema__=np.array("features/3"), **extra)
    with pytest.raises(SchemaError, match=r"old\.npz: expected arrays 'features/6', found 'features/3'"):
        read_features(old)


def test_mismatched_columns_are_an_input_error(tmp_path, t1078_path):
    lines = t1078_path.read_text().splitlines()
    record = lines[8][1:].split()[0]  # the third sequence (after ss_pred, ss_conf, the query)
    lines[9] = lines[9][:-1]           # one match column fewer
    bad = tmp_path / "bad.a3m"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as error:
        build_features(bad)
    assert "bad.a3m" in str(error.value) and record in str(error.value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trackfold")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli_writes_one_file_per_a3m(tmp_path, data_dir, capsys):
    out = tmp_path / "features"
    args = _parser().parse_args(["features", "--out-dir", str(out), "--max-seqs", "40",
                                 str(data_dir / T1078), str(data_dir / HHSUITE)])
    assert args.handler(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert "t1078_ss2.npz: N=40 (of 426) L=138 Neff=" in lines[0]
    assert "hhsuite_query.npz: N=40 (of 59) L=431 Neff=" in lines[1]
    features = read_features(out / "t1078_ss2.npz")
    assert features["msa"].shape == (40, 138)


def test_cli_rejects_bad_input_naming_the_file(tmp_path, data_dir):
    missing = tmp_path / "missing.a3m"
    args = _parser().parse_args(["features", "--out-dir", str(tmp_path), str(missing)])
    with pytest.raises(InputError, match="missing.a3m"):
        args.handler(args)
    args = _parser().parse_args(["features", "--out-dir", str(tmp_path), str(data_dir / T1078),
                                 str(tmp_path / "t1078_ss2.a3m.gz")])
    with pytest.raises(InputError, match="same t1078_ss2.npz"):
        args.handler(args)


def test_the_library_the_schema_and_the_cli_share_the_feature_defaults(root):
    """``trackfold features`` by hand builds what the workflow's features rule builds: same rows, same number of
    templates (the shipped checkpoints were trained with up to 2 per crop)."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    cli = vars(parser.parse_args(["features", "x.a3m", "--out-dir", "out"]))
    schema = yaml.safe_load((root / "config" / "schema.yaml").read_text())["properties"]["features"]["properties"]
    library = {"max_seqs": DEFAULT_MAX_SEQS, "max_stats_seqs": DEFAULT_MAX_STATS_SEQS,
               "max_templates": DEFAULT_MAX_TEMPLATES}
    assert set(schema) == set(library) == set(dataclasses.asdict(FeatureConfig()))
    for name, default in library.items():
        assert schema[name]["default"] == default, name
        assert cli[name] == default, name
        assert getattr(FeatureConfig(), name) == default, name
    assert DEFAULT_MAX_TEMPLATES == 2
