"""Reading chains from real PDB and mmCIF files (fixtures: tests/data/README.md, section "structure")."""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from workflow_lib.errors import InputError
from workflow_lib.structure import Chain, read_chain, read_structure
from workflow_lib.structure.parse import entry_name, residue_letter

DATA = Path(__file__).parent / "data" / "structure"


def _pdb_atoms(path: Path) -> list[dict]:
    """ATOM/HETATM records by fixed PDB columns (an independent reader for cross-checks)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return [{"name": line[12:16].strip(), "resname": line[17:20], "chain": line[21], "resseq": line[22:27].strip(),
                 "xyz": [float(line[30:38]), float(line[38:46]), float(line[46:54])], "b": float(line[60:66])}
                for line in handle if line.startswith(("ATOM  ", "HETATM"))]


def _read_gz(path: Path) -> str:
    with gzip.open(path, "rt") as handle:
        return handle.read()


def _cif_atom_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The _atom_site loop of a simple mmCIF text: column names and whitespace-split rows."""
    lines = text.splitlines()
    names = [line.split(".", 1)[1].strip() for line in lines if line.startswith("_atom_site.")]
    rows = [line.split() for line in lines if line.startswith(("ATOM ", "HETATM "))]
    return names, rows


def test_pdb_chain_matches_an_independent_column_reader_and_keeps_hetatm_mse():
    chain = read_chain(DATA / "3BP8_l_u.pdb", "A")
    atoms = _pdb_atoms(DATA / "3BP8_l_u.pdb")
    ca = [a for a in atoms if a["name"] == "CA"]
    assert len(chain) == len(ca) == 75
    np.testing.assert_allclose(chain.ca, [a["xyz"] for a in ca], atol=1e-3)
    np.testing.assert_allclose(chain.bfactors, [a["b"] for a in ca], atol=1e-3)
    assert chain.residue_numbers == tuple(a["resseq"] for a in ca)
    # HETATM MSE 82 is kept and read as M
    index = chain.residue_numbers.index("82")
    assert [a["resname"] for a in ca][index] == "MSE" and chain.sequence[index] == "M"
    assert chain.name == "3BP8_l_u_A" and chain.chain_id == "A" and chain.source.endswith("3BP8_l_u.pdb")
    assert chain.coords.dtype == np.float32 and chain.coords.shape == (75, 4, 3) and chain.mask.all()
    # glycines have no Cβ in the file; every other residue here does
    assert np.isnan(chain.cb).any(axis=1).tolist() == [letter == "G" for letter in chain.sequence]


def test_mmcif_mse_waters_ligands_and_author_numbering():
    chain, = read_structure(DATA / "4zey.cif.gz")  # chain A + 102 HOH + SO4 in the file
    names, rows = _cif_atom_rows(_read_gz(DATA / "4zey.cif.gz"))
    col = {name: k for k, name in enumerate(names)}
    polymer_ca = [r for r in rows if r[col["label_atom_id"]] == "CA" and r[col["label_comp_id"]] not in ("HOH", "SO4")
                  and r[col["label_alt_id"]] in (".", "A")]
    assert len(chain) == len(polymer_ca) == 84
    assert chain.residue_numbers[:3] == ("0", "4", "5")  # author numbering skips 1-3 ...
    assert chain.chain_breaks.size == 0                     # ... but the chain is contiguous (CA–CA 3.8 Å)
    mse = [k for k, r in enumerate(polymer_ca) if r[col["label_comp_id"]] == "MSE"]
    assert len(mse) == 3 and all(chain.sequence[k] == "M" for k in mse)
    assert "X" not in chain.sequence


def _rewrite_occupancy(text: str, resseq: str, occupancy: dict[str, str]) -> str:
    names, _ = _cif_atom_rows(text)
    col = {name: k for k, name in enumerate(names)}
    out = []
    for line in text.splitlines():
        fields = line.split()
        if line.startswith("ATOM ") and fields[col["auth_seq_id"]] == resseq \
                and fields[col["label_alt_id"]] in occupancy:
            fields[col["occupancy"]] = occupancy[fields[col["label_alt_id"]]]
            line = " ".join(fields)
        out.append(line)
    return "\n".join(out) + "\n"


def test_altlocs_resolve_to_highest_occupancy(tmp_path):
    # 4zey LYS 66: CA..NZ in altlocs A and B, occupancy 0.5 each (a tie: the first label, A, wins)
    text = _read_gz(DATA / "4zey.cif.gz")
    names, rows = _cif_atom_rows(text)
    col = {name: k for k, name in enumerate(names)}
    alt_ca = {r[col["label_alt_id"]]: [float(r[col[f"Cartn_{a}"]]) for a in "xyz"] for r in rows
              if r[col["auth_seq_id"]] == "66" and r[col["label_atom_id"]] == "CA"}
    assert set(alt_ca) == {"A", "B"} and alt_ca["A"] != alt_ca["B"]
    chain = read_chain(DATA / "4zey.cif.gz", "A")
    index = chain.residue_numbers.index("66")
    np.testing.assert_allclose(chain.ca[index], alt_ca["A"], atol=1e-3)
    # derived file: the same entry with B made the majority conformer (0.3 / 0.7)
    swapped = tmp_path / "4zey_altB.cif"
    swapped.write_text(_rewrite_occupancy(text, "66", {"A": "0.30", "B": "0.70"}))
    chain_b = read_chain(swapped, "A")
    np.testing.assert_allclose(chain_b.ca[index], alt_ca["B"], atol=1e-3)
    assert chain_b.sequence == chain.sequence


def test_first_model_only(tmp_path):
    # NMR entry 1psm reduced to its models 1 and 2 (derivation in tests/data/README.md)
    text = _read_gz(DATA / "1psm_models1-2.cif.gz")
    names, rows = _cif_atom_rows(text)
    col = {name: k for k, name in enumerate(names)}
    ca = {m: np.array([[float(r[col[f"Cartn_{a}"]]) for a in "xyz"] for r in rows
                       if r[col["label_atom_id"]] == "CA" and r[col["pdbx_PDB_model_num"]] == m]) for m in "12"}
    chain, = read_structure(DATA / "1psm_models1-2.cif.gz")
    assert len(chain) == 38
    np.testing.assert_allclose(chain.ca, ca["1"], atol=1e-3)
    assert np.abs(ca["1"] - ca["2"]).max() > 0.5


def test_insertion_codes_are_kept_in_order():
    chain = read_chain(DATA / "3RJQ_r_u.pdb.gz", "A")  # a VHH with CDR-H3 insertions 100A..100J
    numbers = chain.residue_numbers
    k = numbers.index("100")
    assert numbers[k:k + 12] == ("100", "100A", "100B", "100C", "100D", "100E", "100F", "100G", "100H", "100I",
                                 "100J", "101")
    assert "52A" in numbers and len(chain) == 127 and chain.chain_breaks.size == 0


def test_numbering_jumps_are_not_breaks_but_long_ca_gaps_are():
    protease = read_chain(DATA / "3SGQ_r_u.pdb.gz", "E")  # chymotrypsin numbering: 19 → 29 etc.
    assert "48A" in protease.residue_numbers and protease.chain_breaks.size == 0
    k = protease.residue_numbers.index("19")
    assert protease.residue_numbers[k + 1] == "29"
    broken = read_chain(DATA / "2OOB_r_u.pdb", "A")  # 939 → 941 with CA–CA 5.3 Å
    assert broken.chain_breaks.tolist() == [8]
    assert broken.residue_numbers[7:9] == ("939", "941")
    assert np.linalg.norm(broken.ca[8] - broken.ca[7]) > 4.2


def test_missing_backbone_atom_and_blank_chain_id():
    chain = read_chain(DATA / "1ACB_l_u.pdb.gz", " ")  # THR 1 has no N; the chain id is blank
    assert read_chain(DATA / "1ACB_l_u.pdb.gz", "").sequence == chain.sequence
    assert chain.chain_id == "" and chain.name == "1ACB_l_u_"
    assert chain.mask[0].tolist() == [False, True, True, True]
    assert np.isnan(chain.coords[0, 0]).all() and np.isfinite(chain.coords[0, 1:]).all()
    assert chain.mask[1:].all()


def test_nucleic_acid_chain_and_ligands_are_dropped():
    chains = read_structure(DATA / "2q2k.cif.gz")  # DNA chain F with 5-iodouracil, ligands 5IU/EPE
    assert [c.chain_id for c in chains] == ["A", "B"]
    assert all(set(c.sequence) <= set("ACDEFGHIKLMNPQRSTVWY") for c in chains)


def test_gzip_is_detected_by_content_and_matches_plain(tmp_path):
    plain = read_chain(DATA / "2OOB_r_u.pdb", "A")
    packed = tmp_path / "2OOB_r_u.pdb.gz"
    packed.write_bytes(gzip.compress((DATA / "2OOB_r_u.pdb").read_bytes()))
    hidden = tmp_path / "2OOB_r_u.ent"  # gzip bytes without the .gz suffix
    shutil.copy(packed, hidden)
    for path in (packed, hidden):
        other = read_chain(path, "A")
        assert other.sequence == plain.sequence and other.name == "2OOB_r_u_A"
        np.testing.assert_array_equal(other.coords, plain.coords)


def test_chain_is_frozen_and_read_only():
    chain = read_chain(DATA / "2OOB_r_u.pdb", "A")
    with pytest.raises(dataclasses.FrozenInstanceError):
        chain.sequence = "A"
    with pytest.raises(ValueError):
        chain.coords[0, 0, 0] = 1.0
    filled = chain.cb_filled()
    assert np.isfinite(filled).all() and filled.dtype == np.float32
    present = np.isfinite(chain.cb).all(axis=1)
    np.testing.assert_array_equal(filled[present], chain.cb[present])
    with pytest.raises(ValueError, match="shape"):
        Chain(name="x", chain_id="A", sequence="AA", coords=np.zeros((3, 4, 3)), mask=np.ones((2, 4), bool),
              cb=np.zeros((2, 3)), residue_numbers=("1", "2"), chain_breaks=np.zeros(0, int), bfactors=np.zeros(2))


def test_residue_letters():
    assert residue_letter("MSE") == "M" and residue_letter("SEC") == "C" and residue_letter("PYL") == "K"
    assert residue_letter("UNK") == "X" and residue_letter("SEP") == "S" and residue_letter("ALA") == "A"
    for not_protein in ("HOH", "CA", "SO4", "DA", "ACE", "NH2", "5IU"):
        assert residue_letter(not_protein) is None
    assert entry_name("/x/1abc.cif.gz") == "1abc" and entry_name("d1mbaa_.pdb.gz") == "d1mbaa_"


@pytest.mark.parametrize(("content", "name", "message"), [
    (b"hello\nnot a structure\n", "bad.pdb", "no atoms"),
    (b"", "empty.pdb", "Empty file"),
    (b"data_x\nloop_\n_atom_site.id\n1\n", "bad.cif", "not a readable mmCIF"),
    (gzip.compress(b"ATOM  ")[:10], "trunc.pdb.gz", "gzip"),
    (b"HETATM    1  O   HOH A   1       0.000   0.000   0.000  1.00  0.00           O\n", "water.pdb",
     "no protein chain"),
])
def test_bad_files_raise_input_error_naming_the_file(tmp_path, content, name, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError, match=message) as caught:
        read_structure(path)
    assert str(path) in str(caught.value)


def test_missing_file_and_missing_chain():
    with pytest.raises(InputError, match="cannot read"):
        read_structure(DATA / "does_not_exist.pdb")
    with pytest.raises(InputError, match="no protein chain 'Z'.*'A'") as caught:
        read_chain(DATA / "2OOB_r_u.pdb", "Z")
    assert "2OOB_r_u.pdb" in str(caught.value)


def test_point_mutation_keeps_the_residue_with_higher_occupancy(tmp_path):
    # derived from 2OOB_r_u.pdb: residue 933 is given a second, alternative residue (ALA, altloc B) built from
    # its own backbone atoms; the conformer with the higher occupancy must win
    lines = (DATA / "2OOB_r_u.pdb").read_text().splitlines()
    target = [line for line in lines if line.startswith("ATOM") and line[22:26] == " 933"]
    backbone = [line for line in target if line[12:16] in (" N  ", " CA ", " C  ", " O  ", " CB ")]
    original_name = target[0][17:20]

    def variant(records, altloc, resname, occupancy, shift):
        out = []
        for line in records:
            x = float(line[30:38]) + shift
            out.append(f"{line[:16]}{altloc}{resname}{line[20:30]}{x:8.3f}{line[38:54]}{occupancy:6.2f}{line[60:]}")
        return out

    for occupancy_a, expected in ((0.6, original_name), (0.4, "ALA")):
        edited = []
        for line in lines:
            if line in target:
                if line is target[0]:
                    edited += variant(target, "A", original_name, occupancy_a, 0.0)
                    edited += variant(backbone, "B", "ALA", 1.0 - occupancy_a, 0.5)
                continue
            edited.append(line)
        path = tmp_path / f"mutant_{occupancy_a}.pdb"
        path.write_text("\n".join(edited) + "\n")
        chain = read_chain(path, "A")
        index = chain.residue_numbers.index("933")
        original = read_chain(DATA / "2OOB_r_u.pdb", "A")
        letter = {"ALA": "A"}.get(expected, original.sequence[index])
        assert chain.sequence[index] == letter and len(chain) == len(original)
        shift = 0.0 if expected == original_name else 0.5
        assert chain.ca[index, 0] == pytest.approx(original.ca[index, 0] + shift, abs=1e-3)
