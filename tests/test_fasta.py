"""FASTA reading policy on real records, and every bad-input case named in the README."""

from __future__ import annotations

import gzip

import pytest

from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import GAP_CODE, X_CODE, decode, encode
from workflow_lib.seqio.fasta import iter_fasta, looks_nucleotide, read_fasta, safe_name, write_fasta


@pytest.fixture(scope="module")
def ecoli(data_dir):
    return read_fasta(data_dir / "formats" / "ecoli_head.fasta.gz")


def _real_lines(data_dir, n=3):
    """The first n records of the real E. coli fixture as (header, sequence) pairs."""
    records = read_fasta(data_dir / "formats" / "ecoli_head.fasta.gz")[:n]
    return [(f"{r.id} {r.description}", r.sequence) for r in records]


def _write(tmp_path, text, name="in.fasta"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reads_real_gzip_proteome(ecoli):
    assert len(ecoli) == 20
    first = ecoli[0]
    assert first.id == "sp|A0A385XJ53|INSA9_ECOLI"
    assert first.description.startswith("Insertion element IS1 9 protein InsA")
    assert first.sequence.startswith("MASVSISCPSCSATDGVVRNGKSTAGHQRYL")
    assert first.safe_id == "sp_A0A385XJ53_INSA9_ECOLI"


def test_plain_and_gzip_read_the_same(tmp_path, data_dir, ecoli):
    plain = tmp_path / "plain.fa"
    plain.write_text(gzip.decompress((data_dir / "formats" / "ecoli_head.fasta.gz").read_bytes()).decode())
    assert read_fasta(plain) == ecoli


def test_whole_proteome_counts_match_headers(example_dir):
    path = example_dir / "proteomes" / "anaerococcus_slice.fasta"
    headers = sum(line.startswith(">") for line in path.read_text().splitlines())
    assert len(read_fasta(path)) == headers == 35


def test_normalisation_policy(tmp_path, data_dir):
    (header, sequence), = _real_lines(data_dir, 1)
    edited = sequence[:10].lower() + "U" + "O" + "BZJ" + sequence[10:] + "*"
    record, = read_fasta(_write(tmp_path, f">{header}\n{edited}\n"))
    assert record.sequence == sequence[:10] + "CK" + "XXX" + sequence[10:]


@pytest.mark.parametrize("edit, message", [
    (lambda s: s[:5] + "7" + s[5:], "a digit at residue 6"),
    (lambda s: s[:12] + " " + s[12:], "a space at residue 13"),
    (lambda s: s[:20] + "*" + s[20:], "an internal stop '*' at residue 21"),
    (lambda s: s[:3] + "#" + s[3:], "the character '#' at residue 4"),
])
def test_bad_characters_name_file_record_and_position(tmp_path, data_dir, edit, message):
    lines = _real_lines(data_dir, 3)
    header, sequence = lines[1]
    text = f">{lines[0][0]}\n{lines[0][1]}\n>{header}\n{edit(sequence)}\n>{lines[2][0]}\n{lines[2][1]}\n"
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as caught:
        read_fasta(path)
    text = str(caught.value)
    assert str(path) in text
    assert f"record '{header.split()[0]}'" in text
    assert message in text


def test_empty_record(tmp_path, data_dir):
    lines = _real_lines(data_dir, 2)
    path = _write(tmp_path, f">{lines[0][0]}\n>{lines[1][0]}\n{lines[1][1]}\n")
    with pytest.raises(InputError, match=r"record 'sp\|A0A385XJ53\|INSA9_ECOLI': empty sequence"):
        read_fasta(path)


def test_duplicate_ids(tmp_path, data_dir):
    lines = _real_lines(data_dir, 2)
    text = "".join(f">{h}\n{s}\n" for h, s in lines + lines[:1])
    with pytest.raises(InputError, match=r"record 'sp\|A0A385XJ53\|INSA9_ECOLI': duplicate ID \(first seen at "
                                         r"line 1, again at line 5\)"):
        read_fasta(_write(tmp_path, text))


def test_not_fasta(tmp_path, data_dir):
    hhm = (data_dir / "formats" / "globins4.sto")
    with pytest.raises(InputError, match="not a FASTA file"):
        read_fasta(hhm)


def test_empty_file_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="contains no FASTA records"):
        read_fasta(_write(tmp_path, ""))
    with pytest.raises(InputError, match="file does not exist"):
        read_fasta(tmp_path / "nope.fasta")


def test_nucleotide_input_is_rejected(tmp_path):
    # The first 60 nt of E. coli thrL (b0001), a real coding sequence.
    dna = "ATGAAACGCATTAGCACCACCATTACCACCACCATCACCATTACCACAGGTAACGGTGCG"
    with pytest.raises(InputError, match="looks like a nucleotide sequence"):
        read_fasta(_write(tmp_path, f">thrL_cds\n{dna}\n"))


def test_safe_names_are_unique_and_kept(tmp_path, data_dir):
    (header, sequence), = _real_lines(data_dir, 1)
    text = f">a|b {header}\n{sequence}\n>a_b copy\n{sequence}\n>{'Q' * 120}\n{sequence}\n"
    records = read_fasta(_write(tmp_path, text))
    assert [r.id for r in records][:2] == ["a|b", "a_b"]
    assert records[0].safe_id == "a_b"
    assert records[1].safe_id.startswith("a_b_") and len(records[1].safe_id) == 12
    assert len(records[2].safe_id) == 80 + 9
    assert len({r.safe_id for r in records}) == 3
    assert safe_name("../etc/passwd").startswith("_.._etc_passwd") or "/" not in safe_name("../etc/passwd")
    assert "/" not in safe_name("../etc/passwd")


def test_write_then_read_round_trip(tmp_path, ecoli):
    out = tmp_path / "out.fasta"
    write_fasta(out, [(f"{r.id} {r.description}", r.sequence) for r in ecoli])
    assert read_fasta(out) == ecoli
    assert not list(tmp_path.glob(".*tmp"))


def test_alphabet_round_trip(ecoli):
    for record in ecoli:
        codes = encode(record.sequence)
        assert codes.dtype.name == "uint8"
        assert decode(codes) == record.sequence
    assert list(encode("AX-.y")) == [0, X_CODE, GAP_CODE, GAP_CODE, 19]
    with pytest.raises(ValueError, match="'1' at position 2"):
        encode("A1")


def test_nucleotide_check_judges_length_and_composition(tmp_path, data_dir):
    """A real protein of only A and T (the antifreeze glycoprotein P02732 of UniProt-2014) is a protein; a
    real coding sequence is not; short or low-complexity protein records never look like DNA."""
    (p02732,) = read_fasta(data_dir / "formats" / "uniprot2014_p02732.fasta")
    assert p02732.id == "P02732" and set(p02732.sequence) == {"A", "T"} and len(p02732.sequence) == 31
    assert not looks_nucleotide(p02732.sequence)
    assert looks_nucleotide("ATGAAACGCATTAGCACCACCATTACCACCACCATCACC")           # thrL's start
    assert looks_nucleotide("AUGAAACGCAUUAGCACCACCAUUACCACCACC")                 # RNA: U counts as T
    assert not looks_nucleotide("ACGTACGTACGT")                                  # too short to judge
    assert not looks_nucleotide("GGGGAGGGGAGGGGAGGGGAGGGGA")                     # glycine-rich, two bases
    assert not looks_nucleotide("ATGAAACGCATTAGCACCACCATTACCACCACCATCACCK")      # a K: protein


def test_bad_records_are_reported_and_skipped_when_asked(tmp_path, data_dir):
    (header, sequence), = _real_lines(data_dir, 1)
    dna = "ATGAAACGCATTAGCACCACCATTACCACCACCATCACCATTACCACAGGTAACGGTGCG"
    text = (f">good {header}\n{sequence}\n>digits\nMKV1L\n>dna\n{dna}\n>empty\n>\nMKV\n"
            f">P02732\nAATAATAATAATAATAATAATAATAATAATA\n")
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match="record 'digits': a digit at residue 4"):
        read_fasta(path)
    bad = []
    kept = list(iter_fasta(path, on_bad_record=bad.append))
    assert [r.id for r in kept] == ["good", "P02732"]
    assert [(b.record, b.line) for b in bad] == [("digits", 3), ("dna", 5), ("empty", 7), ("", 8)]
    assert "nucleotide" in bad[1].reason and "empty sequence" in bad[2].reason and "no ID" in bad[3].reason
    assert all(b.path == str(path) for b in bad)
    only_bad = _write(tmp_path, ">x\nMK1\n")
    with pytest.raises(InputError, match=r"no usable FASTA records \(1 bad records skipped\)"):
        list(iter_fasta(only_bad, on_bad_record=bad.append))


def test_a_skipped_record_does_not_claim_its_id(tmp_path):
    path = _write(tmp_path, ">p1\nMKV1L\n>p1\nMKVLA\n")
    bad = []
    assert [r.sequence for r in iter_fasta(path, on_bad_record=bad.append)] == ["MKVLA"]
    assert [b.record for b in bad] == ["p1"]
