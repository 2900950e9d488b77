"""``trackfold align``: the sub-command module on its own parser (workflow_lib.cli lists it in COMMAND_MODULES)."""

from __future__ import annotations

import argparse

import pytest

from test_aligner_helpers import ALIGNER_DATA, SHARED_DATA
from workflow_lib.aligner import cli
from workflow_lib.errors import InputError


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="trackfold")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_sequence_mode_from_hhm_query(tmp_path, capsys):
    out = tmp_path / "hits.tsv"
    assert run(["align", str(ALIGNER_DATA / "hhm" / "globins4.hhm"),
                str(SHARED_DATA / "hmmer_examples" / "tutorial" / "globins45.fa"), "--top", "5", "--out",
                str(out), "--cpus", "2"]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].split("\t") == list(cli.COLUMNS)
    assert len(lines) == 6
    first = lines[1].split("\t")
    assert float(first[1]) > 100 and int(first[6]) > 100
    assert len(first[7]) == len(first[8])
    scores = [float(line.split("\t")[1]) for line in lines[1:]]
    assert scores == sorted(scores, reverse=True)


def test_fasta_query_and_profile_mode(tmp_path, capsys):
    query = tmp_path / "q.fasta"
    query.write_text(">HBB\nVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKK\n")
    assert run(["align", str(query), str(SHARED_DATA / "hmmer_examples" / "tutorial" / "globins45.fa"),
                "--top", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("HBB_")
    assert run(["align", str(ALIGNER_DATA / "hhm" / "pkinase.hhm"), str(ALIGNER_DATA / "hhm"), "--mode", "profile",
                "--top", "2"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].startswith("pkinase\t") and rows[2].startswith("fam69b\t")


def test_bad_arguments():
    with pytest.raises(InputError):
        run(["align", str(ALIGNER_DATA / "hhm" / "fn3.hhm"), str(ALIGNER_DATA / "missing"), "--mode", "profile"])
    with pytest.raises(InputError):
        run(["align", str(ALIGNER_DATA / "hhm" / "fn3.hhm"), str(ALIGNER_DATA / "hhm" / "fn3.hhm"), "--top", "-1"])
