"""Template database build: chains, coordinates, DSSP, profiles from A3M or one sequence, manifest, bad input.

Structures are the bundled example template set (``example/templates/``: OpenFold mmCIFs, Docking Benchmark 5.5
chains) and ``tests/data/structure/``; the 2q2k_A A3M is the OpenFold example's per-chain MSA (its query is
the 70-residue SEQRES, the mmCIF resolves 45 residues).
"""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest

from conftest import DATA, ROOT
from workflow_lib.cli import main
from workflow_lib.errors import InputError, SchemaError
from workflow_lib.structure import read_structure, reduce_to_three, run_dssp
from workflow_lib.templates import build_template_db, load_template_db

STRUCTURES = ROOT / "example" / "templates" / "structures"
MSAS = ROOT / "example" / "templates" / "msas"
SMALL = [STRUCTURES / "2q2k.cif.gz", STRUCTURES / "1psm.cif.gz", STRUCTURES / "3BP8_l_u.pdb.gz"]
needs_dssp = pytest.mark.skipif(shutil.which("mkdssp") is None, reason="mkdssp not installed")


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    out = tmp_path_factory.mktemp("tdb")
    manifest, rebuilt = build_template_db(SMALL, out, msa_dir=MSAS)
    return out, manifest, rebuilt


def test_chains_coordinates_and_manifest(small_db):
    out, manifest, rebuilt = small_db
    assert rebuilt
    db = load_template_db(out)
    assert db.ids == ["2q2k_A", "2q2k_B", "1psm_A", "3BP8_l_u_A"]
    assert manifest["templates"] == 4 and manifest["profiles_from_a3m"] == 1
    assert [entry["path"] for entry in manifest["inputs"]] == [str(p) for p in SMALL]
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["files"].keys() == {"chains.parquet", "arrays.npz"}
    for path in SMALL:
        for chain in read_structure(path):
            structure = db.structure(db.index(chain.name))
            np.testing.assert_array_equal(structure.coords[:, :4], chain.coords)
            np.testing.assert_array_equal(structure.coords[:, 4], chain.cb)
            assert structure.atom_mask[:, 1].all()  # every residue kept has a CA here
            assert len(structure.ss3) == len(chain)


def test_profile_from_a3m_maps_seqres_onto_observed_residues(small_db):
    db = load_template_db(small_db[0])
    k = db.index("2q2k_A")
    profile, structure = db.profiles[k], db.structure(k)
    seqres = "MGSSHHHHHHSSGLVPGSHMDKKETKHLLKIKKEDYPQIFDFLENVPRGTKTAHIREALRRYIEEIGENP"
    observed = read_structure(SMALL[0])[0].sequence
    assert profile.query == seqres and profile.length == 70
    assert profile.neff > 1.0  # from the 4-sequence MSA, not the single sequence
    mapped = structure.residue_map >= 0
    assert mapped.sum() == len(observed) == 45
    # every observed residue lands on the same SEQRES letter (KETK... starts at SEQRES position 23, 1-based)
    assert "".join(seqres[p] for p in np.flatnonzero(mapped)) == observed
    assert structure.residue_map[22] == 0 and structure.residue_map[21] == -1
    single = db.structure(db.index("2q2k_B"))
    np.testing.assert_array_equal(single.residue_map, np.arange(44))
    assert db.chains.set_index("template").loc["2q2k_B", "profile_source"] == "single-sequence"


@needs_dssp
def test_dssp_states_recorded(small_db):
    db = load_template_db(small_db[0])
    chains = db.chains.set_index("template")
    # independent: mkdssp on the original file (our build runs it on a rewritten single-chain PDB)
    # (the raw file's HETATM MSE 82 is left out by mkdssp, so compare residue by residue number)
    direct = {r.residue_number: r.state for r in run_dssp(DATA / "structure" / "3BP8_l_u.pdb")}
    ours = chains.loc["3BP8_l_u_A"]
    numbers = ours["residue_numbers"].split()
    shared = [k for k, number in enumerate(numbers) if number in direct]
    assert len(shared) >= len(numbers) - 1
    agree = sum(ours["ss8"][k] == direct[numbers[k]] for k in shared)
    assert agree >= 0.95 * len(shared)
    assert ours["ss3"] == reduce_to_three(ours["ss8"])
    assert set(chains.loc["1psm_A", "ss3"]) == {"H", "C"}
    assert small_db[1]["dssp"].startswith("mkdssp")


def test_rebuild_is_a_no_op_and_settings_trigger_a_rebuild(small_db, tmp_path):
    out, _, _ = small_db
    before = (out / "manifest.json").stat().st_mtime_ns
    _, rebuilt = build_template_db(SMALL, out, msa_dir=MSAS)
    assert not rebuilt and (out / "manifest.json").stat().st_mtime_ns == before
    copy = tmp_path / "db"
    shutil.copytree(out, copy)
    _, rebuilt = build_template_db(SMALL, copy, msa_dir=MSAS, min_length=40)
    assert rebuilt
    assert load_template_db(copy).ids == ["2q2k_A", "2q2k_B", "3BP8_l_u_A"]  # 1psm_A has 38 residues
    skipped = json.loads((copy / "manifest.json").read_text())["chains"][1]["skipped"]
    assert skipped == [{"chain": "1psm_A", "reason": "38 residues < min_length 40"}]
    (copy / "arrays.npz").write_bytes(b"truncated")
    with pytest.raises(SchemaError, match="arrays.npz"):
        load_template_db(copy)


def test_bad_structure_input_names_the_file(tmp_path):
    not_structure = tmp_path / "notes.pdb"
    not_structure.write_text("this is not a structure\n")
    with pytest.raises(InputError, match="notes.pdb"):
        build_template_db([not_structure], tmp_path / "db", dssp=False)
    truncated = tmp_path / "cut.cif.gz"
    truncated.write_bytes(gzip.compress((STRUCTURES / "3zee.cif.gz").read_bytes())[:500])
    with pytest.raises(InputError, match="cut.cif.gz"):
        build_template_db([truncated], tmp_path / "db", dssp=False)
    with pytest.raises(InputError, match="missing.pdb"):
        build_template_db([tmp_path / "missing.pdb"], tmp_path / "db", dssp=False)
    assert not (tmp_path / "db" / "manifest.json").exists()


def test_duplicate_template_ids_and_foreign_a3m(tmp_path):
    twin = tmp_path / "other" / "3BP8_l_u.pdb"
    twin.parent.mkdir()
    twin.write_text((DATA / "structure" / "3BP8_l_u.pdb").read_text())
    with pytest.raises(InputError, match="3BP8_l_u_A also comes from"):
        build_template_db([SMALL[2], twin], tmp_path / "db", dssp=False)
    msas = tmp_path / "msas"
    msas.mkdir()
    (msas / "1psm_A.a3m").write_text((MSAS / "2q2k_A.a3m").read_text())  # the MSA of another protein
    with pytest.raises(InputError, match="1psm_A.a3m.*does not match"):
        build_template_db([SMALL[1]], tmp_path / "db2", msa_dir=msas, dssp=False)


def test_cli_build_and_sequences(tmp_path, capsys):
    assert main(["templates", "build", "--out", str(tmp_path / "db"), "--no-dssp", str(SMALL[1])]) == 0
    assert "built: 1 templates, 38 residues" in capsys.readouterr().out
    assert main(["templates", "sequences", "--out", str(tmp_path / "chains.fasta"), *map(str, SMALL)]) == 0
    text = (tmp_path / "chains.fasta").read_text()
    assert text.count(">") == 4 and ">2q2k_A\nKETKHLLK" in text
    assert main(["templates", "build", "--out", str(tmp_path / "db"), str(tmp_path / "nothing.pdb")]) == 2
    assert "nothing.pdb" in capsys.readouterr().err
