"""Virtual Cβ / ideal O, and PDB writing checked by Biopython, TM-align and mkdssp on real chains."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from workflow_lib.structure import (
    complete_backbone,
    dihedral,
    ideal_oxygen,
    planar_angle,
    read_chain,
    run_dssp,
    virtual_cb,
    write_pdb,
)
from workflow_lib.structure.cbeta import CA_C_O_ANGLE, C_O_BOND
from workflow_lib.structure.pdb_writer import RESIDUE_NAMES

DATA = Path(__file__).parent / "data" / "structure"
REAL_CHAINS = [("3SGQ_r_u.pdb.gz", "E"), ("d1mbaa_.pdb.gz", "A"), ("3RJQ_r_u.pdb.gz", "A"), ("4zey.cif.gz", "A")]


def _backbone(chain):
    return (chain.n.astype(np.float64), chain.ca.astype(np.float64), chain.c.astype(np.float64))


@pytest.mark.parametrize(("name", "chain_id"), REAL_CHAINS)
def test_virtual_cb_is_close_to_the_real_cb(name, chain_id):
    chain = read_chain(DATA / name, chain_id)
    virtual = virtual_cb(*_backbone(chain))
    both = np.isfinite(chain.cb).all(axis=1) & np.isfinite(virtual).all(axis=1)
    deviation = np.linalg.norm(virtual[both] - chain.cb[both], axis=1)
    assert both.sum() > 70
    assert deviation.mean() < 0.2        # measured 0.05–0.15 Å on these four chains
    assert deviation.max() < 0.5
    # the construction scales with the real N-CA-C geometry, so |Cβ−CA| is 1.52 Å only on average
    assert abs(np.linalg.norm(virtual[both] - chain.ca[both], axis=1).mean() - 1.52) < 0.03


def test_ideal_oxygen_geometry_and_agreement_with_real_o():
    chain = read_chain(DATA / "d1mbaa_.pdb.gz", "A")
    n, ca, c = _backbone(chain)
    oxygen = ideal_oxygen(n, ca, c)
    np.testing.assert_allclose(np.linalg.norm(oxygen - c, axis=1), C_O_BOND, atol=1e-9)
    np.testing.assert_allclose(planar_angle(ca, c, oxygen), CA_C_O_ANGLE, atol=1e-9)
    np.testing.assert_allclose(np.abs(dihedral(n[1:], ca[:-1], c[:-1], oxygen[:-1])), np.pi, atol=1e-6)
    deviation = np.linalg.norm(oxygen[:-1] - chain.coords[:-1, 3], axis=1)  # the last O has no next N to use
    assert deviation.mean() < 0.1 and np.median(deviation) < 0.1


def _columns(line: str) -> dict:
    return {"record": line[0:6], "serial": int(line[6:11]), "name": line[12:16], "resname": line[17:20],
            "chain": line[21], "resseq": line[22:26], "icode": line[26], "x": float(line[30:38]),
            "occupancy": float(line[54:60]), "b": float(line[60:66]), "element": line[76:78]}


def test_round_trip_keeps_sequence_coordinates_numbering_and_plddt(tmp_path):
    chain = read_chain(DATA / "3RJQ_r_u.pdb.gz", "A")  # insertion codes 100A..100J
    plddt = np.linspace(0.0, 100.0, len(chain))
    coords = np.concatenate([chain.coords, chain.cb[:, None]], axis=1)
    path = tmp_path / "model.pdb"
    write_pdb(path, chain.sequence, coords, plddt, chain_id="H", residue_numbers=chain.residue_numbers)
    back = read_chain(path, "H")
    assert back.sequence == chain.sequence and back.residue_numbers == chain.residue_numbers
    np.testing.assert_allclose(back.coords, chain.coords, atol=6e-4)
    present = np.isfinite(chain.cb).all(axis=1)
    np.testing.assert_allclose(back.cb[present], chain.cb[present], atol=6e-4)
    np.testing.assert_allclose(back.bfactors, plddt, atol=6e-3)
    lines = path.read_text().splitlines()
    seqres = [line for line in lines if line.startswith("SEQRES")]
    assert lines[0].startswith("HEADER") and lines[1:1 + len(seqres)] == seqres and lines[-1].strip() == "END"
    assert lines[1 + len(seqres)].startswith("CRYST1") and len(seqres) == -(-len(chain) // 13)
    assert all(line[11] == "H" and int(line[13:17]) == len(chain) for line in seqres)
    letter_of = {name: letter for letter, name in RESIDUE_NAMES.items()}
    assert "".join(letter_of[name] for line in seqres for name in line[19:].split()) == chain.sequence
    assert all(len(line) == 80 for line in lines)
    first = _columns(next(line for line in lines if line.startswith("ATOM")))
    assert (first["record"], first["serial"], first["name"], first["resname"], first["chain"]) == \
        ("ATOM  ", 1, " N  ", "ALA", "H")
    assert first["occupancy"] == 1.0 and first["element"] == " N"
    assert [p for p in tmp_path.iterdir()] == [path]  # the atomic writer left no temporary file


def test_backbone_only_input_gets_o_and_cb_but_glycine_no_cb(tmp_path):
    chain = read_chain(DATA / "d1mbaa_.pdb.gz", "A")
    path = tmp_path / "bb.pdb"
    write_pdb(path, chain.sequence, chain.coords[:, :3], None)
    back = read_chain(path, "A")
    assert back.mask.all()
    is_gly = np.array([letter == "G" for letter in chain.sequence])
    assert np.isnan(back.cb[is_gly]).all() and np.isfinite(back.cb[~is_gly]).all()
    np.testing.assert_allclose(back.cb[~is_gly], virtual_cb(*_backbone(chain))[~is_gly], atol=6e-4)
    assert np.all(back.bfactors == 0)
    names = [line[12:16] for line in path.read_text().splitlines() if line.startswith("ATOM")]
    assert names.count(" CB ") == (~is_gly).sum() and names.count(" O  ") == len(chain)


def test_missing_atoms_are_left_out(tmp_path):
    chain = read_chain(DATA / "1ACB_l_u.pdb.gz", "")  # residue 0 has no N
    coords = np.concatenate([chain.coords, chain.cb[:, None]], axis=1)
    coords[5, 1] = np.nan  # and drop one CA: residue 5 keeps N, C and its O
    full = complete_backbone(chain.sequence, coords)
    assert np.isnan(full[0, 0]).all() and np.isfinite(full[0, 1:]).all()
    np.testing.assert_array_equal(full[0, 4], chain.cb[0])  # the file's Cβ; a virtual one would need N
    assert np.isnan(complete_backbone(chain.sequence, coords[:, :4])[0, 4]).all()
    path = tmp_path / "gaps.pdb"
    write_pdb(path, chain.sequence, coords)
    back = read_chain(path, "A")
    assert back.mask[0].tolist() == [False, True, True, True]
    assert back.mask[5].tolist() == [True, False, True, True]  # the file's O (given) is kept


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"coords": np.zeros((3, 2, 3))}, "shape"),
    ({"coords": np.zeros((4, 3, 3))}, "residues"),
    ({"sequence": "AZA"}, "letters"),
    ({"chain_id": "AB"}, "chain_id"),
    ({"bfactors": np.zeros(2)}, "bfactors"),
    ({"bfactors": np.array([0, np.nan, 0])}, "bfactors"),
    ({"coords": np.full((3, 3, 3), 1e5)}, "range"),
    ({"residue_numbers": ["1", "2", "x"]}, "residue number"),
])
def test_write_pdb_rejects_bad_input(tmp_path, kwargs, message):
    arguments = {"sequence": "AGA", "coords": np.random.default_rng(0).normal(size=(3, 3, 3)) * 3,
                 "bfactors": None, "chain_id": "A", "residue_numbers": None}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        write_pdb(tmp_path / "x.pdb", arguments.pop("sequence"), arguments.pop("coords"), **arguments)
    assert not list(tmp_path.iterdir())


@pytest.mark.peer
@pytest.mark.skipif(shutil.which("TMalign") is None, reason="TMalign not installed")
@pytest.mark.parametrize("atoms", [3, 5])
def test_tmalign_reads_our_file_as_the_original(tmp_path, atoms):
    original = tmp_path / "d1mbaa_.pdb"
    original.write_bytes(__import__("gzip").decompress((DATA / "d1mbaa_.pdb.gz").read_bytes()))
    chain = read_chain(original, "A")
    coords = np.concatenate([chain.coords, chain.cb[:, None]], axis=1)[:, :atoms]
    ours = tmp_path / "ours.pdb"
    write_pdb(ours, chain.sequence, coords, np.nan_to_num(chain.bfactors))
    done = subprocess.run(["TMalign", str(ours), str(original)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    scores = [float(x) for x in re.findall(r"TM-score= ([0-9.]+)", done.stdout)]
    lengths = [int(x) for x in re.findall(r"Length of Chain_\d:\s+(\d+)", done.stdout)]
    assert lengths == [146, 146]
    assert len(scores) == 2 and min(scores) > 0.9999  # measured 1.00000 both ways
    assert re.search(r"RMSD=\s+0\.00", done.stdout)


@pytest.mark.peer
@pytest.mark.skipif(shutil.which("mkdssp") is None, reason="mkdssp not installed")
def test_mkdssp_reads_our_file_and_agrees_with_the_original(tmp_path):
    chain = read_chain(DATA / "d1mbaa_.pdb.gz", "A")
    ours = tmp_path / "ours.pdb"
    write_pdb(ours, chain.sequence, np.concatenate([chain.coords, chain.cb[:, None]], axis=1),
              np.nan_to_num(chain.bfactors), residue_numbers=chain.residue_numbers)
    from_ours = run_dssp(ours)
    from_original = run_dssp(DATA / "d1mbaa_.pdb.gz")
    assert len(from_ours) == len(from_original) == len(chain)
    assert [r.state for r in from_ours] == [r.state for r in from_original]
    assert [r.residue_number for r in from_ours] == list(chain.residue_numbers)


@pytest.mark.peer
@pytest.mark.skipif(shutil.which("mkdssp") is None, reason="mkdssp not installed")
def test_mkdssp_sees_mse_in_our_file_but_not_in_the_original(tmp_path):
    # mkdssp 4.2.2 skips HETATM MSE in PDB input; our writer spells it MET in an ATOM record
    chain = read_chain(DATA / "3BP8_l_u.pdb", "A")
    ours = tmp_path / "ours.pdb"
    write_pdb(ours, chain.sequence, chain.coords, residue_numbers=chain.residue_numbers)
    records = run_dssp(ours)
    assert [r.residue_number for r in records] == list(chain.residue_numbers)
    assert records[chain.residue_numbers.index("82")].amino_acid == "M"


def test_mmcif_is_read_back_by_biopython_with_plddt_as_the_quality_metric(tmp_path):
    """The mmCIF beside each PDB: Biopython's parser gives back the same atoms, author numbering and B-factors,
    and the ModelCIF categories hold pLDDT per residue and its mean."""
    from Bio.PDB import MMCIFParser
    from Bio.PDB.MMCIF2Dict import MMCIF2Dict

    from workflow_lib.structure.mmcif_writer import write_mmcif

    chain = read_chain(DATA / "3BP8_l_u.pdb", "A")
    plddt = np.linspace(12.5, 97.25, len(chain))
    coords = np.concatenate([chain.coords, chain.cb[:, None]], axis=1)
    numbers = np.arange(len(chain)) + 5
    write_mmcif(tmp_path / "model.cif", "T1 model", chain.sequence, coords, plddt, residue_numbers=numbers)
    write_pdb(tmp_path / "model.pdb", chain.sequence, coords, plddt, residue_numbers=[str(n) for n in numbers])
    from_cif = MMCIFParser(QUIET=True).get_structure("m", tmp_path / "model.cif")
    from_pdb = read_chain(tmp_path / "model.pdb", "A")
    atoms = list(from_cif.get_atoms())
    assert len(atoms) == sum(1 for line in (tmp_path / "model.pdb").read_text().splitlines() if line[:4] == "ATOM")
    residues = list(from_cif[0]["A"])
    assert [r.id[1] for r in residues] == numbers.tolist()
    ca = np.array([r["CA"].coord for r in residues])
    np.testing.assert_allclose(ca, from_pdb.coords[:, 1], atol=1e-3)
    np.testing.assert_allclose([r["CA"].bfactor for r in residues], plddt, atol=6e-3)
    fields = MMCIF2Dict(str(tmp_path / "model.cif"))
    assert fields["_entity_poly.pdbx_seq_one_letter_code"][0] == chain.sequence
    np.testing.assert_allclose(np.array(fields["_ma_qa_metric_local.metric_value"], float), plddt, atol=6e-3)
    assert float(fields["_ma_qa_metric_global.metric_value"][0]) == pytest.approx(plddt.mean(), abs=6e-3)
    assert fields["_entry.id"][0] == "T1 model" and fields["_atom_site.auth_asym_id"][0] == "A"
    with pytest.raises(ValueError, match="plddt"):
        write_mmcif(tmp_path / "bad.cif", "x", chain.sequence, coords, plddt[:-1])
