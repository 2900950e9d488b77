"""A3M, aligned FASTA and Stockholm parsing on real alignments."""

from __future__ import annotations

import numpy as np
import pytest

from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import GAP_CODE, encode
from workflow_lib.seqio.msa import (a3m_stem, read_a3m, read_aligned_fasta, read_alignment, read_stockholm,
                                    write_a3m, write_aligned_fasta)


@pytest.fixture(scope="module")
def hhsuite(data_dir):
    return read_a3m(data_dir / "formats" / "hhsuite_query.a3m")


def test_a3m_dimensions_and_query(hhsuite, data_dir):
    assert hhsuite.depth == 59
    assert hhsuite.length == 431  # as HH-suite's query.hhm says: "LENG 431 match states"
    assert hhsuite.names[0] == "sp|Q5VUD6|FA69B_HUMAN"
    assert hhsuite.query.startswith("MRRLRRLAHLVLFCPFSKRLQGRLPGLRVRCIFLAWLGVFAGSWLVY")
    assert hhsuite.matches.shape == (59, 431) and hhsuite.matches.dtype == np.uint8
    assert np.array_equal(hhsuite.matches[0], encode(hhsuite.query))


def test_a3m_insertions_count_lower_case(hhsuite):
    for row, inserted in zip(hhsuite.rows, hhsuite.insertions):
        assert inserted.sum() == sum(c.islower() for c in row)
    # Row 1 reads '------------------YvqrkesgiegplgsratdgraggLDARF...': 23 residues inserted after match column 19.
    row = hhsuite.rows[1]
    assert row.startswith("-" * 18 + "Yvqrkesgiegplgsratdgragg" + "LDARF")
    assert hhsuite.insertions[1, 19] == 23 and hhsuite.insertions[1, :19].sum() == 0


def test_annotations_are_not_sequences(data_dir):
    alignment = read_a3m(data_dir / "formats" / "t1078_ss2.a3m")
    assert alignment.depth == 426 and alignment.length == 138
    assert alignment.annotation("ss_pred").startswith("CCCCCCCCCCCCCCCCCEEEE")
    assert "ss_pred" not in alignment.names


def test_a3m_round_trip(tmp_path, data_dir):
    alignment = read_a3m(data_dir / "formats" / "t1078_ss2.a3m")
    write_a3m(tmp_path / "x.a3m", alignment)
    again = read_a3m(tmp_path / "x.a3m")
    assert again.rows == alignment.rows and again.annotations == alignment.annotations
    assert np.array_equal(again.insertions, alignment.insertions)


def test_aligned_fasta_round_trip(tmp_path, hhsuite):
    write_aligned_fasta(tmp_path / "x.afa", hhsuite)
    widths = {len(line) for line in (tmp_path / "x.afa").read_text().splitlines() if not line.startswith(">")}
    assert len(widths) == 1
    again = read_aligned_fasta(tmp_path / "x.afa")
    assert np.array_equal(again.matches, hhsuite.matches)
    assert np.array_equal(again.insertions, hhsuite.insertions)


def test_stockholm_without_rf_uses_gap_fraction(data_dir):
    alignment = read_stockholm(data_dir / "formats" / "globins4.sto")
    assert alignment.names == ("HBB_HUMAN", "HBA_HUMAN", "MYG_PHYCA", "GLB5_PETMA")
    # hmmbuild on this file reports 149 match columns with its own weighting; the plain < 50% gap rule
    # (no sequence weights) gives 147 here.
    assert alignment.length == 147
    for row, original in zip(alignment.rows, ["VHLTPEEKSAVTALWGKV", "VLSPADKTNVKAAWGKVGA"]):
        assert row.replace("-", "").upper().startswith(original)


def test_stockholm_with_rf(data_dir):
    """``#=GC RF`` marks the match columns: each row's residues in the RF columns are its matches, those in the
    other columns (lower case, or after '.' in the RF line) its insertions, counted before the next match."""
    text = (data_dir / "formats" / "3box.sto").read_text()
    rf = "".join(line.split()[-1] for line in text.splitlines() if line.startswith("#=GC RF"))
    rows = dict(line.split() for line in text.splitlines() if line.strip() and not line.startswith(("#", "//")))
    alignment = read_stockholm(data_dir / "formats" / "3box.sto")
    assert alignment.length == sum(c not in ".-" for c in rf) == 19
    match = [k for k, c in enumerate(rf) if c not in ".-"]
    for index, name in enumerate(alignment.names):
        row = rows[name]
        assert np.array_equal(alignment.matches[index], encode("".join(row[k] for k in match).upper())), name
        assert alignment.insertions[index].sum() == sum(row[k] not in ".-" for k in range(len(rf)) if k not in match)
    # every row of this file fills every RF column; 19 residues in all sit in its 3 insert columns
    assert not (alignment.matches == GAP_CODE).any() and alignment.insertions.sum() == 19
    # Onc151/U4atac reads 'AAATGAAAAtGTTTGTttTTAT': one residue inserted after match column 9, two after 15
    onc151 = alignment.names.index("Onc151/U4atac")
    assert alignment.insertions[onc151, 9] == 1 and alignment.insertions[onc151, 15] == 2
    assert alignment.insertions[onc151].sum() == 3


def test_format_detection(data_dir):
    assert read_alignment(data_dir / "formats" / "3box.sto").depth == 22
    assert read_alignment(data_dir / "formats" / "hhsuite_query.a3m").depth == 59


def test_bad_a3m_names_record(tmp_path, hhsuite):
    rows = list(hhsuite.rows)
    rows[2] = rows[2][:-1]  # one match column short
    text = "".join(f">{n}\n{r}\n" for n, r in zip(hhsuite.names, rows))
    (tmp_path / "bad.a3m").write_text(text)
    with pytest.raises(InputError, match=rf"bad.a3m: record '{hhsuite.names[2]}': has 430 match columns but the "
                                         r"query has 431"):
        read_a3m(tmp_path / "bad.a3m")


def test_bad_stockholm(tmp_path, data_dir):
    text = (data_dir / "formats" / "globins4.sto").read_text().replace("HBA_HUMAN   .........VLSPADK",
                                                                       "HBA_HUMAN   ........VLSPADK")
    (tmp_path / "bad.sto").write_text(text)
    with pytest.raises(InputError, match="record 'HBA_HUMAN': has 170 columns but .HBB_HUMAN. has 171"):
        read_stockholm(tmp_path / "bad.sto")
    (tmp_path / "notsto.sto").write_text(">x\nACD\n")
    with pytest.raises(InputError, match="not a Stockholm file"):
        read_stockholm(tmp_path / "notsto.sto")


def test_a3m_stem():
    assert a3m_stem("/x/P12345.a3m") == "P12345"
    assert a3m_stem("P12345.a3m.gz") == "P12345"
    assert a3m_stem("dir/msa.txt") == "msa"
