"""Shared CLI argument helpers: positive integers, one output file per input, a chunk's inputs from its table."""

from __future__ import annotations

import argparse
import shutil

import pytest

from workflow_lib.cli import main
from workflow_lib.cli_args import chunk_inputs, positive_int, unique_outputs
from workflow_lib.db.chunks import chunk_table
from workflow_lib.schemas.db import CHUNKS
from workflow_lib.schemas.io import write_table
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.errors import InputError


def test_positive_int():
    assert positive_int("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
        positive_int("0")


def test_two_inputs_writing_the_same_output_are_refused(tmp_path, data_dir, capsys):
    source = data_dir / "formats" / "hhsuite_query.a3m"
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(source, tmp_path / folder / source.name)
    first, second = str(tmp_path / "a" / source.name), str(tmp_path / "b" / source.name)
    with pytest.raises(InputError, match="writes the same"):
        unique_outputs([first, second], lambda p: p.rsplit("/", 1)[1], ".npz")
    assert main(["features", "--out-dir", str(tmp_path / "out"), first, second]) == 2
    assert "writes the same" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_chunk_inputs_come_from_the_chunk_table(tmp_path, root):
    """--chunk-plan PLAN --chunk N DIR: the chunk's proteins, by safe ID, in DIR (the per-chunk rules' inputs)."""
    records = read_fasta(root / "example" / "proteomes" / "ecoli_slice.fasta")
    plan = chunk_table("eco", records, 4)
    write_table(tmp_path / "chunks.parquet", plan, CHUNKS)
    (tmp_path / "msa").mkdir()
    got = chunk_inputs([str(tmp_path / "msa")], str(tmp_path / "chunks.parquet"), 1, ".a3m")
    expected = sorted(plan.loc[plan["chunk"] == 1, "safe_id"])
    assert got == [str(tmp_path / "msa" / f"{s}.a3m") for s in expected] and expected
    assert chunk_inputs(["a.a3m", "b.a3m"], None, None, ".a3m") == ["a.a3m", "b.a3m"]
    with pytest.raises(InputError, match="go together"):
        chunk_inputs([str(tmp_path / "msa")], str(tmp_path / "chunks.parquet"), None, ".a3m")
    with pytest.raises(InputError, match="chunk 99 holds no protein"):
        chunk_inputs([str(tmp_path / "msa")], str(tmp_path / "chunks.parquet"), 99, ".a3m")
    with pytest.raises(InputError, match="give one folder"):
        chunk_inputs(["x.a3m"], str(tmp_path / "chunks.parquet"), 1, ".a3m")


def test_command_table_matches_what_the_modules_register():
    import importlib

    from workflow_lib.cli import COMMAND_MODULES
    for name, commands in COMMAND_MODULES.items():
        parser = argparse.ArgumentParser()
        subparsers = parser.add_subparsers()
        importlib.import_module(name).register(subparsers)
        assert tuple(subparsers.choices) == commands, name


def test_a_command_imports_only_its_own_module():
    from workflow_lib.cli import COMMAND_MODULES, command_modules
    assert command_modules(["-v", "search-shard", "q.fasta"]) == ["workflow_lib.search.cli"]
    assert command_modules(["predict", "--help"]) == ["workflow_lib.inference.cli"]
    assert command_modules(["--help"]) == list(COMMAND_MODULES)
    assert command_modules(["serach"]) == list(COMMAND_MODULES)   # a typo gets argparse's full message


def test_search_commands_run_without_importing_torch(data_dir):
    import subprocess
    import sys
    fasta = data_dir / "formats" / "ecoli_head.fasta.gz"
    code = ("import sys; from workflow_lib.cli import main; rc = main(['validate', sys.argv[1]]); "
            "print(rc, 'torch' in sys.modules, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(fasta)], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-3:] == ["0", "False", "False"]
