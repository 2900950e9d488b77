"""Template features: 6D maps and 1D scores placed on the query grid through an alignment.

Hand cases use real chains of the bundled template set (``example/templates/``): 3BP8_l_u_A (Docking Benchmark
5.5, 75 residues) and 2q2k_A (OpenFold mmCIF, profile over the 70-residue SEQRES of which 45 residues are
resolved). The queries are stretches of those chains' own sequences, written as one-row A3Ms, and the hits are
written by hand, so the expected placement is known exactly; the expected 6D bins are computed independently
from the parsed structure file.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from conftest import DATA, ROOT
from workflow_lib.cli import main
from workflow_lib.errors import InputError
from workflow_lib.features import build_features, read_features, write_features
from workflow_lib.features.template_maps import template_ca as template_ca_of
from workflow_lib.features.template_maps import template_distance_bins, template_pair
from workflow_lib.schemas.features import (
    C_TEMPLATE_1D,
    C_TEMPLATE_PAIR,
    channel_slices,
    TEMPLATE_1D_CHANNELS,
    TEMPLATE_PAIR_CHANNELS,
)
from workflow_lib.seqio.alphabet import GAP_CODE, encode
from workflow_lib.structure import bin_pair_geometry, pair_geometry, read_structure
from workflow_lib.schemas.templates import TEMPLATE_HITS
from workflow_lib.templates import build_template_db, write_hits

STRUCTURES = ROOT / "example" / "templates" / "structures"
PAIR = channel_slices(TEMPLATE_PAIR_CHANNELS)
ONE_D = channel_slices(TEMPLATE_1D_CHANNELS)
needs_dssp = pytest.mark.skipif(shutil.which("mkdssp") is None, reason="mkdssp not installed")


@pytest.fixture(scope="module")
def db_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tdb")
    build_template_db([STRUCTURES / "3BP8_l_u.pdb.gz", STRUCTURES / "2q2k.cif.gz"], out,
                      msa_dir=ROOT / "example" / "templates" / "msas")
    return out


def write_query(path, sequence):
    path.write_text(f">query\n{sequence}\n")
    return path


def hit_row(template, states, qstart, tstart, qlen, tlen, **extra):
    n_query = sum(letter in "MID" for letter in states)
    n_template = sum(letter in "MJG" for letter in states)
    row = {"query": "query", "template": template, "rank": 1, "evalue": 0.5, "pvalue": 0.01,
           "significance": float(np.exp(-0.5)), "bitscore": 20.0, "identity": 1.0, "similarity": 1.0,
           "aligned_cols": states.count("M"), "qstart": qstart, "qend": qstart + n_query - 1, "tstart": tstart,
           "tend": tstart + n_template - 1, "qlen": qlen, "tlen": tlen, "alignment": states,
           "template_db": "hand", "db_size": 4, "null_lambda": 1.0, "null_mu": 0.0}
    row.update(extra)
    return row


def write_rows(path, rows):
    write_hits(path, pd.DataFrame(rows, columns=TEMPLATE_HITS.schema.names))
    return path


def test_hand_alignment_places_the_template_maps(db_dir, tmp_path):
    chain = read_structure(STRUCTURES / "3BP8_l_u.pdb.gz")[0]
    query_sequence = chain.sequence[10:30]  # 20 residues
    # query columns 0-4 <-> template 10-14, 5-6 query only, 7-9 <-> 15-17, template 18-19 skipped,
    # 10-17 <-> 20-27, query columns 18-19 unaligned
    states = "MMMMM" + "II" + "MMM" + "GG" + "MMMMMMMM"
    pairs = [(q, 10 + q) for q in range(5)] + [(q, 8 + q) for q in range(7, 10)] + \
            [(q, 10 + q) for q in range(10, 18)]
    a3m = write_query(tmp_path / "query.a3m", query_sequence)
    hits = write_rows(tmp_path / "query.hits.parquet", [hit_row("3BP8_l_u_A", states, 1, 11, 20, 75)])
    features = build_features(a3m, templates=db_dir, template_hits=hits)
    assert features["template_atoms"].shape == (1, 20, 4, 3)
    pair, one_d = template_pair(features), features["template_1d"]
    assert pair.shape == (1, 20, 20, C_TEMPLATE_PAIR) and one_d.shape == (1, 20, C_TEMPLATE_1D)
    assert features["template_mask"].tolist() == [True]

    bins = bin_pair_geometry(pair_geometry(chain.n, chain.ca, chain.c, chain.cb))
    q = np.array([p[0] for p in pairs])
    t = np.array([p[1] for p in pairs])
    expected = np.zeros((20, 20, C_TEMPLATE_PAIR), dtype=np.float16)
    for a, ta in zip(q, t):
        for b, tb in zip(q, t):
            for key in ("dist", "omega", "theta", "phi"):
                expected[a, b, PAIR[key].start + bins[key][ta, tb]] = 1
            expected[a, b, PAIR["pair_mask"]] = 1
    np.testing.assert_array_equal(pair[0], expected)
    unaligned = [5, 6, 18, 19]
    assert not pair[0, unaligned].any() and not pair[0, :, unaligned].any()

    aligned = one_d[0, :, ONE_D["aligned"].start]
    assert aligned.tolist() == [0.0 if k in unaligned else 1.0 for k in range(20)]
    # identity: the query is the template's own sequence, except where the alignment shifts by 2
    template_codes = encode(chain.sequence)
    query_codes = encode(query_sequence)
    np.testing.assert_array_equal(one_d[0, q, ONE_D["identity"].start], query_codes[q] == template_codes[t])
    assert one_d[0, q, ONE_D["confidence"].start] == pytest.approx(np.exp(-0.5))
    assert not one_d[0, unaligned, ONE_D["confidence"].start].any()
    sequence = one_d[0, :, ONE_D["sequence"]]
    np.testing.assert_array_equal(sequence.argmax(axis=1)[q], template_codes[t])
    assert (sequence.argmax(axis=1)[unaligned] == GAP_CODE).all() and (sequence.sum(axis=1) == 1).all()


@needs_dssp
def test_secondary_structure_channel_follows_dssp(db_dir, tmp_path):
    from workflow_lib.templates import load_template_db

    ss3 = load_template_db(db_dir).chains.set_index("template").loc["3BP8_l_u_A", "ss3"]
    chain_sequence = read_structure(STRUCTURES / "3BP8_l_u.pdb.gz")[0].sequence
    a3m = write_query(tmp_path / "q.a3m", chain_sequence[:40])
    hits = write_rows(tmp_path / "q.hits.parquet", [hit_row("3BP8_l_u_A", "M" * 40, 1, 1, 40, 75)])
    one_d = build_features(a3m, templates=db_dir, template_hits=hits)["template_1d"][0]
    states = one_d[:, ONE_D["secondary_structure"]]
    assert "".join("HEC"[k] for k in states.argmax(axis=1)) == ss3[:40]


def test_unresolved_seqres_positions_are_aligned_but_unplaced(db_dir, tmp_path):
    seqres = "MGSSHHHHHHSSGLVPGSHMDKKETKHLLKIKKEDYPQIFDFLENVPRGTKTAHIREALRRYIEEIGENP"
    a3m = write_query(tmp_path / "q.a3m", seqres[10:40])
    hits = write_rows(tmp_path / "q.hits.parquet", [hit_row("2q2k_A", "M" * 30, 1, 11, 30, 70)])
    features = build_features(a3m, templates=db_dir, template_hits=hits)
    aligned = features["template_1d"][0, :, ONE_D["aligned"].start]
    placed = template_pair(features)[0, :, :, PAIR["pair_mask"].start].astype(bool).any(axis=1)
    assert aligned.all()
    # SEQRES positions 10-21 (0-based) are not in the mmCIF; 22-39 are (KETK... starts at 22)
    assert placed.tolist() == [False] * 12 + [True] * 18
    assert features["template_1d"][0, :12, ONE_D["secondary_structure"]].sum() == 0
    # the fold's template Cα: the placed residues' own coordinates, NaN on the unplaced ones
    template_ca = template_ca_of(features)[0]
    assert np.isfinite(template_ca).all(axis=1).tolist() == placed.tolist()
    steps = np.linalg.norm(np.diff(template_ca[12:], axis=0), axis=1)
    assert np.all(np.abs(steps - 3.8) < 0.2)                 # consecutive residues of one chain


def test_features_round_trip_and_determinism(db_dir, tmp_path):
    a3m = write_query(tmp_path / "query.a3m", read_structure(STRUCTURES / "3BP8_l_u.pdb.gz")[0].sequence[:50])
    rows = [hit_row("3BP8_l_u_A", "M" * 30, 5, 5, 50, 75, rank=2),
            hit_row("2q2k_B", "MMMMMMMMMMIIMMMMMMMMMGGGMMMMMMMM", 3, 2, 50, 44, rank=1, significance=0.25)]
    hits = write_rows(tmp_path / "query.hits.parquet", rows)
    first = build_features(a3m, templates=db_dir, template_hits=hits, max_templates=4)
    second = build_features(a3m, templates=db_dir, template_hits=hits, max_templates=4)
    assert first.keys() == second.keys()
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])
    # rank order, not file order
    assert first["template_1d"][0, 5, ONE_D["confidence"].start] == pytest.approx(0.25)
    write_features(tmp_path / "f.npz", first)
    back = read_features(tmp_path / "f.npz")
    for key in first:
        assert back[key].dtype == first[key].dtype
        np.testing.assert_array_equal(back[key], first[key])
    only_best = build_features(a3m, templates=db_dir, template_hits=hits, max_templates=1)
    np.testing.assert_array_equal(only_best["template_atoms"][0], first["template_atoms"][0])
    np.testing.assert_array_equal(template_pair(only_best)[0], template_pair(first)[0])
    assert only_best["template_mask"].shape == (1,)
    none = build_features(a3m, templates=db_dir, template_hits=hits, max_templates=0)
    assert none["template_atoms"].shape == (0, 50, 4, 3)
    assert template_pair(none).shape == (0, 50, 50, C_TEMPLATE_PAIR)


def test_bad_hits_are_input_errors_naming_the_table(db_dir, tmp_path):
    a3m = write_query(tmp_path / "q.a3m", "KETKHLLKIKKEDYPQIFDF")
    wrong_length = write_rows(tmp_path / "wrong.hits.parquet", [hit_row("2q2k_B", "M" * 10, 1, 1, 99, 44)])
    with pytest.raises(InputError, match="wrong.hits.parquet.*99 columns"):
        build_features(a3m, templates=db_dir, template_hits=wrong_length)
    unknown = write_rows(tmp_path / "unknown.hits.parquet", [hit_row("9xyz_A", "M" * 10, 1, 1, 20, 44)])
    with pytest.raises(InputError, match="unknown.hits.parquet.*9xyz_A"):
        build_features(a3m, templates=db_dir, template_hits=unknown)
    outside = write_rows(tmp_path / "outside.hits.parquet", [hit_row("2q2k_B", "M" * 15, 10, 1, 20, 44)])
    with pytest.raises(InputError, match="outside"):
        build_features(a3m, templates=db_dir, template_hits=outside)
    with pytest.raises(InputError, match="both"):
        build_features(a3m, templates=db_dir)


def test_cli_features_with_template_hits_directory(db_dir, tmp_path, capsys):
    a3m = write_query(tmp_path / "prot1.a3m", "KETKHLLKIKKEDYPQIFDF")
    hits_dir = tmp_path / "hits"
    hits_dir.mkdir()
    write_rows(hits_dir / "prot1.hits.parquet", [hit_row("2q2k_B", "M" * 20, 1, 1, 20, 44)])
    out = tmp_path / "features"
    assert main(["features", "--out-dir", str(out), "--templates", str(db_dir), "--template-hits",
                 str(hits_dir), str(a3m)]) == 0
    assert "prot1.npz: N=1 (of 1) L=20" in capsys.readouterr().out
    features = read_features(out / "prot1.npz")
    assert template_pair(features).shape == (1, 20, 20, C_TEMPLATE_PAIR)
    assert features["template_1d"][0, :, ONE_D["identity"].start].all()
    # a rerun with the same A3M, hits, database and settings keeps the file (receipt); new hits rebuild it
    run = ["features", "--out-dir", str(out), "--templates", str(db_dir), "--template-hits", str(hits_dir), str(a3m)]
    assert main(run) == 0
    assert "resumed: 1 of 1" in capsys.readouterr().out
    write_rows(hits_dir / "prot1.hits.parquet", [hit_row("2q2k_B", "M" * 10, 1, 1, 20, 44)])
    assert main(run) == 0
    assert "prot1.npz: N=1 (of 1) L=20" in capsys.readouterr().out
    assert read_features(out / "prot1.npz")["template_1d"][0, :, ONE_D["identity"].start].sum() == 10
    assert main(run + ["--no-resume"]) == 0
    assert "resumed" not in capsys.readouterr().out
    assert main(["features", "--out-dir", str(out), "--templates", str(db_dir), str(a3m)]) == 2
    assert "go together" in capsys.readouterr().err


def test_maps_made_from_the_atoms_equal_the_maps_a_layout_5_file_stored(db_dir, tmp_path):
    """``features/layout5_3bp8_two_templates.npz`` was written by the code that stored the template maps (layout 5)
    from these inputs. Built now (layout 6: the atoms), the same query gives the same arrays, and the maps, distance
    classes and Cα made from the atoms equal the stored ones, on every column and on a crop; the old file is still
    read."""
    a3m = write_query(tmp_path / "query.a3m", read_structure(STRUCTURES / "3BP8_l_u.pdb.gz")[0].sequence[:50])
    rows = [hit_row("3BP8_l_u_A", "M" * 30, 5, 5, 50, 75, rank=1),
            hit_row("2q2k_B", "MMMMMMMMMMIIMMMMMMMMMGGGMMMMMMMM", 3, 2, 50, 44, rank=2, significance=0.25)]
    features = build_features(a3m, templates=db_dir, template_hits=write_rows(tmp_path / "q.hits.parquet", rows))
    old = read_features(DATA / "features" / "layout5_3bp8_two_templates.npz")
    assert set(old) - set(features) == {"template_pair", "template_ca"} and set(features) - set(old) == {
        "template_atoms"}
    for key in set(old) & set(features):
        np.testing.assert_array_equal(features[key], old[key], err_msg=key)
    maps = template_pair(features)
    assert maps.shape == (2, 50, 50, C_TEMPLATE_PAIR) and maps[..., PAIR["pair_mask"]].sum() > 500
    np.testing.assert_array_equal(maps, old["template_pair"])
    crop = np.r_[3:20, 31:45]
    np.testing.assert_array_equal(template_pair(features, crop), old["template_pair"][:, crop][:, :, crop])
    np.testing.assert_array_equal(template_pair(old, crop, dtype=np.float32), template_pair(features, crop,
                                                                                            dtype=np.float32))
    np.testing.assert_array_equal(template_ca_of(features), old["template_ca"])
    for t in range(2):
        bins, placed = template_distance_bins(features, t)
        old_bins, old_placed = template_distance_bins(old, t)
        assert placed.any() and np.array_equal(placed, old_placed)
        np.testing.assert_array_equal(bins[placed], old_bins[placed])
