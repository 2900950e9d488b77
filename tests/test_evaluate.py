"""trackfold evaluate: residue matching, lDDT-Cα, TM-align, pLDDT calibration, contact precision (model and
co-evolution baseline), the outputs and the CLI. Fixtures: tests/data/evaluate (README "evaluate/")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workflow_lib.cli import main
from workflow_lib.errors import InputError
from workflow_lib.evaluate import evaluate_target, evaluate_targets, match_residues, read_targets
from workflow_lib.evaluate.contacts import (
    coevolution_baseline,
    contact_probability,
    long_range_precision,
    native_contacts,
)
from workflow_lib.evaluate.report import calibration_bins
from workflow_lib.evaluate.tmalign import parse_tmalign
from workflow_lib.features.coevolution import coevolution_features
from workflow_lib.features.msa_features import sequence_weights
from workflow_lib.schemas.evaluation import EVALUATION, EVALUATION_RESIDUES
from workflow_lib.schemas.io import read_frame
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.structure import read_structure, write_pdb

DATA = Path(__file__).parent / "data"
EVAL = DATA / "evaluate"
NATIVE_3BP8 = DATA / "structure" / "3BP8_l_u.pdb"
NATIVE_2Q2K = DATA / "structure" / "2q2k.cif.gz"
PRED_3BP8 = EVAL / "3BP8_A.pdb"
NPZ_3BP8 = EVAL / "3BP8_A.pred.npz"
A3M_3BP8 = EVAL / "3BP8_A.a3m"
PRED_2Q2K = EVAL / "2q2k_A.pdb"
A3M_2Q2K = EVAL / "2q2k_A.a3m"
HAS_TMALIGN = shutil.which("TMalign") is not None


def _native_chain():
    return read_structure(NATIVE_3BP8)[0]


def _write_model(path: Path, sequence: str, ca: np.ndarray, plddt=None, numbers=None) -> Path:
    coords = np.full((len(sequence), 3, 3), np.nan)
    coords[:, 1] = ca
    write_pdb(path, sequence, coords, plddt, residue_numbers=numbers)
    return path


def _reference_precision(score, contact, valid, top, min_sep=24):
    """Plain-loop reference: pairs i < j by descending score (ties: row-major order)."""
    pairs = [(score[i, j], i, j) for i in range(len(score)) for j in range(i + 1, len(score))
             if valid[i, j] and j - i >= min_sep]
    pairs.sort(key=lambda p: -p[0])  # stable: equal scores keep row-major order
    chosen = pairs[:top]
    return sum(bool(contact[i, j]) for _, i, j in chosen) / len(chosen)


# ------------------------------------------------------------------------------------------- lDDT by hand
def test_lddt_hand_computed_line_of_four(tmp_path):
    # Native: 4 Cα on a line 3.8 Å apart (every pair within 15 Å). Model: residue 3 pushed 1.5 Å further out,
    # so its three distances are off by 1.5 Å -> passes the 2 and 4 Å thresholds only = 0.5; every other pair
    # is exact = 1. Ordered pairs: 6 at 0.5 and 6 at 1 -> global 9/12 = 0.75; residue 3: 0.5;
    # residues 0..2: (1 + 1 + 0.5) / 3 = 5/6.
    native_ca = np.array([[0.0, 0, 0], [3.8, 0, 0], [7.6, 0, 0], [11.4, 0, 0]])
    model_ca = native_ca.copy()
    model_ca[3, 0] += 1.5
    native = _write_model(tmp_path / "native.pdb", "AGSV", native_ca)
    model = _write_model(tmp_path / "model.pdb", "AGSV", model_ca, plddt=np.array([80.0, 80.0, 80.0, 50.0]))
    row, residues = evaluate_target(model, native, tmalign=False)
    assert row["aligned"] == 4 and row["lddt_ca"] == pytest.approx(0.75)
    assert residues["lddt_ca"].to_numpy() == pytest.approx([5 / 6, 5 / 6, 5 / 6, 0.5], abs=1e-6)
    # pLDDT/100 = (0.8, 0.8, 0.8, 0.5) vs lDDT (5/6, 5/6, 5/6, 0.5): MAE = 3 * (1/30) / 4 = 0.025, r = 1
    assert row["plddt_mae"] == pytest.approx(0.025, abs=1e-6)
    assert row["plddt_lddt_pearson"] == pytest.approx(1.0)
    assert row["mean_plddt"] == pytest.approx(72.5)
    assert row["tmalign_status"] == "disabled" and np.isnan(row["tm_score"])
    assert 0.0 < row["tm_score_fixed"] < 1.0           # trackfold's own TM-score needs no program


def test_lddt_of_a_rigidly_moved_native_is_one(tmp_path):
    chain = _native_chain()
    angle = 0.7
    rotation = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]])
    moved = chain.ca.astype(np.float64) @ rotation.T + np.array([5.0, -3.0, 12.0])
    model = _write_model(tmp_path / "moved.pdb", chain.sequence, moved, plddt=np.full(len(chain), 90.0))
    row, residues = evaluate_target(model, NATIVE_3BP8, tmalign=HAS_TMALIGN)
    assert row["lddt_ca"] == pytest.approx(1.0) and row["rmsd_all"] == pytest.approx(0.0, abs=1e-3)
    assert (residues["lddt_ca"] == 1.0).all()
    assert row["plddt_mae"] == pytest.approx(0.1, abs=1e-6)
    assert row["tm_score_fixed"] == pytest.approx(1.0, abs=1e-6)      # PDB coordinates: 3 decimals
    if HAS_TMALIGN:
        assert row["tm_score"] == pytest.approx(1.0, abs=1e-4)
        assert row["rmsd"] == pytest.approx(0.0, abs=0.01)


# ------------------------------------------------------------------------------------------ residue matching
def test_match_residues_identity_and_internal_deletion():
    sequence = _native_chain().sequence
    same = match_residues(sequence, sequence)
    assert same.aligned == 75 and same.identity == 1.0 and (same.first == same.second).all()
    native = sequence[:40] + sequence[45:]            # a 5-residue loop (KKLGA) not observed; unambiguous gap
    match = match_residues(sequence, native)
    assert match.aligned == 70 and match.identical == 70
    partner = match.mapping(len(sequence))
    assert (partner[:40] == np.arange(40)).all() and (partner[40:45] == -1).all()
    assert (partner[45:] == np.arange(40, 70)).all()


def test_seqres_prediction_matches_observed_residues_of_an_mmcif_chain():
    # 2q2k_A predicted from the full SEQRES (70 aa, His-tag included); chain A of the crystal structure has
    # 45 observed residues, author numbers 4..48 = SEQRES positions 23..67 (0-based 22..66).
    row, residues = evaluate_target(PRED_2Q2K, NATIVE_2Q2K, native_chain="A", a3m=A3M_2Q2K, tmalign=False)
    assert (row["length"], row["native_length"], row["aligned"], row["seq_identity"]) == (70, 45, 45, 1.0)
    matched = residues["native_residue"] != ""
    assert np.flatnonzero(matched).tolist() == list(range(22, 67))
    assert residues["native_residue"][22] == "4" and residues["native_residue"][66] == "48"
    assert residues.loc[~matched, "lddt_ca"].isna().all() and residues.loc[matched, "lddt_ca"].notna().all()
    assert (residues.loc[matched, "aa"] == residues.loc[matched, "native_aa"]).all()
    # a ribbon-helix-helix monomer of 45 residues: no native contact with |i-j| >= 24 -> precisions undefined
    assert row["long_contacts"] == 0 and np.isnan(row["p_l5_long"]) and np.isnan(row["coevo_p_l5_long"])
    assert row["msa_depth"] == 4


def test_native_with_a_missing_loop(tmp_path):
    chain = _native_chain()
    keep = np.r_[0:40, 45:75]
    native = tmp_path / "gapped.pdb"
    write_pdb(native, "".join(chain.sequence[i] for i in keep), chain.coords[keep],
              residue_numbers=[chain.residue_numbers[i] for i in keep])
    row, residues = evaluate_target(PRED_3BP8, native, pred_npz=NPZ_3BP8, tmalign=False)
    assert row["aligned"] == 70 and row["native_length"] == 70
    assert residues["lddt_ca"][40:45].isna().all() and (residues["native_residue"][40:45] == "").all()
    assert residues["native_residue"][45] == chain.residue_numbers[45]


# ---------------------------------------------------------------------------------------- contact precision
def test_native_contacts_constructed():
    cb = np.array([[0.0, 0, 0], [7.9, 0, 0], [16.0, 0, 0], [np.nan, np.nan, np.nan]])
    contact, valid = native_contacts(cb)
    assert contact[0, 1] and contact[1, 0] and not contact[0, 2] and not contact[1, 2]  # 8.1 Å
    assert not valid[3].any() and not valid[:, 3].any() and valid[:3, :3].all()


def test_long_range_precision_constructed_known_answer():
    length = 50                                      # top L/5 = 10, top L = 50
    contact = np.zeros((length, length), dtype=bool)
    truth = [(k, k + 30) for k in range(10)]         # 10 true long-range contacts
    for i, j in truth:
        contact[i, j] = contact[j, i] = True
    valid = np.ones((length, length), dtype=bool)
    valid[45, :] = valid[:, 45] = False              # residue 45 unobserved
    score = np.zeros((length, length))
    for rank, (i, j) in enumerate(truth[:6]):        # 6 true contacts among the 10 best pairs
        score[i, j] = score[j, i] = 10.0 - rank * 0.1
    for rank, (i, j) in enumerate([(0, 40), (1, 41), (2, 42), (3, 43)]):  # 4 false ones
        score[i, j] = score[j, i] = 8.0 - rank * 0.1
    score[5, 28] = score[28, 5] = 100.0              # separation 23: not long range
    score[0, 45] = score[45, 0] = 100.0              # unobserved residue: not scorable
    for rank, (i, j) in enumerate(truth[6:]):        # the other 4 true contacts rank 11..14
        score[i, j] = score[j, i] = 5.0 - rank * 0.1
    p_l5, p_l = long_range_precision(score, contact, valid)
    assert p_l5 == pytest.approx(0.6) and p_l == pytest.approx(10 / 50)
    assert np.isnan(long_range_precision(np.zeros_like(score), contact, valid)).all()  # no ranking at all


def test_contact_probability_sums_the_bins_below_8_angstrom():
    dist = np.zeros((2, 2, 37), dtype=np.float16)
    dist[0, 1, 11] = 1.0                             # 7.5-8 Å: a contact
    dist[1, 0, 12] = 1.0                             # 8-8.5 Å: not
    probability = contact_probability(dist)
    assert probability[0, 1] == 1.0 and probability[1, 0] == 0.0


def test_model_and_coevolution_precision_on_real_prediction_match_a_loop_reference():
    row, _ = evaluate_target(PRED_3BP8, NATIVE_3BP8, pred_npz=NPZ_3BP8, a3m=A3M_3BP8, tmalign=False)
    chain = _native_chain()
    contact, valid = native_contacts(chain.cb_filled())        # identity matching: pred index = native index
    with np.load(NPZ_3BP8) as arrays:
        probability = arrays["dist"].astype(np.float64)[..., :12].sum(-1)
    baseline = coevolution_baseline(A3M_3BP8, chain.sequence)
    assert row["long_contacts"] == int(np.triu(contact, 24).sum()) > 0
    assert row["random_p_long"] == pytest.approx(row["long_contacts"] / (51 * 52 / 2))  # 1326 pairs, |i-j| >= 24
    assert row["p_l5_long"] == pytest.approx(_reference_precision(probability, contact, valid, 15))
    assert row["p_l_long"] == pytest.approx(_reference_precision(probability, contact, valid, 75))
    assert row["coevo_p_l5_long"] == pytest.approx(_reference_precision(baseline.covariance, contact, valid, 15))
    assert row["coevo_mi_p_l_long"] == pytest.approx(
        _reference_precision(baseline.mutual_information, contact, valid, 75))


# ------------------------------------------------------------------------------------- co-evolution baseline
def test_coevolution_baseline_on_real_a3m_and_its_mapping():
    alignment = read_a3m(A3M_3BP8)
    codes = np.asarray(alignment.matches)
    sequence = _native_chain().sequence
    baseline = coevolution_baseline(A3M_3BP8, sequence)
    expected = coevolution_features(codes, sequence_weights(codes))
    assert baseline.depth == 11 == sum(line.startswith(">") for line in A3M_3BP8.read_text().splitlines())
    assert baseline.neff == pytest.approx(sequence_weights(codes).sum())
    np.testing.assert_allclose(baseline.covariance, expected[..., 0], rtol=1e-6)
    np.testing.assert_allclose(baseline.mutual_information, expected[..., 1], rtol=1e-6)
    assert np.abs(baseline.covariance).max() > 0 and baseline.mapped.all()
    shifted = coevolution_baseline(A3M_3BP8, "MGS" + sequence)  # a prediction with 3 extra N-terminal residues
    assert not shifted.mapped[:3].any() and shifted.mapped[3:].all()
    np.testing.assert_allclose(shifted.covariance[3:, 3:], baseline.covariance)
    assert (shifted.covariance[:3] == 0).all()


# --------------------------------------------------------------------------------------------------- TM-align
def test_parse_tmalign_output():
    text = """Aligned length=   48, RMSD=   4.82, Seq_ID=n_identical/n_aligned= 0.021
TM-score= 0.25482 (if normalized by length of Chain_1)
TM-score= 0.25482 (if normalized by length of Chain_2)
TM-score= 0.23877 (if scaled by user-specified L=  80)
"""
    assert parse_tmalign(text) == (0.23877, 4.82, 48)
    assert parse_tmalign(text.replace("TM-score= 0.23877 (if scaled by user-specified L=  80)\n", ""))[0] == 0.25482
    with pytest.raises(ValueError):
        parse_tmalign("no scores here")


@pytest.mark.skipif(not HAS_TMALIGN, reason="TMalign not on PATH")
def test_tm_score_agrees_with_tmalign_on_the_original_files(tmp_path):
    # Reference: TMalign run directly on the predicted model and on a full-backbone copy of the native chain
    # (author numbering; MSE written as MET, which TM-align would skip as HETATM in the original file).
    import subprocess

    chain = _native_chain()
    reference_native = tmp_path / "native_full.pdb"
    write_pdb(reference_native, chain.sequence, chain.coords, residue_numbers=list(chain.residue_numbers))
    output = subprocess.run(["TMalign", str(PRED_3BP8), str(reference_native)], capture_output=True, text=True,
                            check=True).stdout
    tm_reference, rmsd_reference, aligned_reference = parse_tmalign(output)
    row, _ = evaluate_target(PRED_3BP8, NATIVE_3BP8)
    assert row["tmalign_status"] == "ok"
    assert row["tm_score"] == pytest.approx(tm_reference, abs=2e-5)
    assert row["rmsd"] == pytest.approx(rmsd_reference, abs=0.005)
    assert row["tm_aligned"] == aligned_reference
    assert 0.0 < row["tm_score_fixed"] <= 1.0


def test_tmalign_missing_gives_nan_and_status(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    row, _ = evaluate_target(PRED_3BP8, NATIVE_3BP8)
    assert np.isnan(row["tm_score"]) and np.isnan(row["rmsd"]) and "not found" in row["tmalign_status"]
    assert row["lddt_ca"] > 0 and 0.0 < row["tm_score_fixed"] <= 1.0


# ------------------------------------------------------------------------------------------ outputs and CLI
def _targets_tsv(tmp_path: Path) -> Path:
    path = tmp_path / "targets.tsv"
    pd.DataFrame([
        {"name": "3BP8_A", "pred": PRED_3BP8, "native": NATIVE_3BP8, "native_chain": "", "pred_npz": NPZ_3BP8,
         "a3m": A3M_3BP8},
        {"name": "2q2k_A", "pred": PRED_2Q2K, "native": NATIVE_2Q2K, "native_chain": "A", "pred_npz": "",
         "a3m": ""},
    ]).to_csv(path, sep="\t", index=False)
    return path


def _check_outputs(out: Path, names: list[str]) -> pd.DataFrame:
    table = read_frame(out / "evaluation.parquet", EVALUATION)
    residues = read_frame(out / "evaluation_residues.parquet", EVALUATION_RESIDUES)
    assert table["name"].tolist() == names
    assert sorted(residues["name"].unique()) == sorted(names)
    summary = json.loads((out / "evaluation.json").read_text())
    assert summary["count"] == len(names)
    assert summary["lddt_ca"] == pytest.approx(table["lddt_ca"].mean())
    assert summary["aligned"] == pytest.approx(table["aligned"].mean())
    page = (out / "evaluation.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and all(name in page for name in names)
    for figure in ("evaluation_lddt.png", "evaluation_calibration.png", "evaluation_contacts.png"):
        assert (out / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return table


def test_cli_single_pair(tmp_path, capsys):
    out = tmp_path / "single"
    assert main(["evaluate", str(PRED_3BP8), str(NATIVE_3BP8), "--pred-npz", str(NPZ_3BP8), "--a3m",
                 str(A3M_3BP8), "--out-dir", str(out)]) == 0
    table = _check_outputs(out, ["3BP8_A"])
    row = table.iloc[0]
    assert row["aligned"] == 75 and row["msa_depth"] == 11 and 0.0 < row["lddt_ca"] < 1.0
    assert np.isfinite([row["p_l5_long"], row["coevo_p_l5_long"], row["plddt_mae"]]).all()
    assert "evaluation.parquet" in capsys.readouterr().out


def test_cli_targets_tsv(tmp_path):
    out = tmp_path / "many"
    assert main(["evaluate", "--targets", str(_targets_tsv(tmp_path)), "--out-dir", str(out)]) == 0
    table = _check_outputs(out, ["3BP8_A", "2q2k_A"])
    second = table.iloc[1]
    assert second["aligned"] == 45 and np.isnan(second["p_l5_long"]) and pd.isna(second["msa_depth"])
    summary = json.loads((out / "evaluation.json").read_text())
    assert summary["msa_depth"] == 11.0           # the mean skips the target without an A3M


def test_evaluate_targets_api_matches_single_target(tmp_path):
    table = evaluate_targets(read_targets(_targets_tsv(tmp_path)), tmp_path / "api", tmalign=False)
    row, _ = evaluate_target(PRED_3BP8, NATIVE_3BP8, pred_npz=NPZ_3BP8, a3m=A3M_3BP8, tmalign=False)
    assert table.iloc[0]["lddt_ca"] == pytest.approx(row["lddt_ca"])
    assert table.iloc[0]["coevo_p_l_long"] == pytest.approx(row["coevo_p_l_long"])


def test_calibration_bins():
    bins = calibration_bins(np.array([5.0, 15.0, 12.0, np.nan, 95.0, 100.0]),
                            np.array([0.1, 0.2, 0.4, 0.5, 0.9, np.nan]))
    assert bins["count"].tolist() == [1, 2, 1]
    assert bins["mean_lddt"].tolist() == pytest.approx([10.0, 30.0, 90.0])


# -------------------------------------------------------------------------------------------------- errors
def test_missing_native_chain_is_an_input_error():
    with pytest.raises(InputError, match="no protein chain 'Z'") as error:
        evaluate_target(PRED_3BP8, NATIVE_3BP8, native_chain="Z", tmalign=False)
    assert error.value.path == str(NATIVE_3BP8)


def test_wrong_protein_is_an_input_error():
    with pytest.raises(InputError, match="not the same protein"):
        evaluate_target(PRED_2Q2K, NATIVE_3BP8, tmalign=False)


def test_unreadable_files_and_foreign_npz(tmp_path):
    broken = tmp_path / "broken.pdb"
    broken.write_text("this is not a structure\n")
    with pytest.raises(InputError, match="broken.pdb"):
        evaluate_target(PRED_3BP8, broken, tmalign=False)
    with pytest.raises(InputError, match="aatype"):
        evaluate_target(PRED_2Q2K, NATIVE_2Q2K, pred_npz=NPZ_3BP8, tmalign=False)
    with pytest.raises(InputError, match="unreadable prediction arrays"):
        evaluate_target(PRED_3BP8, NATIVE_3BP8, pred_npz=broken, tmalign=False)
    with pytest.raises(InputError, match="not the predicted protein's MSA"):
        evaluate_target(PRED_3BP8, NATIVE_3BP8, a3m=A3M_2Q2K, tmalign=False)


def test_bad_targets_table_and_cli_exit_status(tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("name\tpred\n3BP8_A\tx.pdb\n")
    with pytest.raises(InputError, match="lacks column"):
        read_targets(bad)
    assert main(["evaluate", "--targets", str(bad), "--out-dir", str(tmp_path / "o")]) == 2
    assert "lacks column" in capsys.readouterr().err
    table = pd.DataFrame([{"name": "t", "pred": str(PRED_3BP8), "native": str(tmp_path / "missing.pdb")}])
    with pytest.raises(InputError, match="record 't'"):
        evaluate_targets(table, tmp_path / "o2")
