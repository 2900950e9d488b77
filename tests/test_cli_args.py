"""Shared CLI argument helpers: positive integers and one output file per input."""

from __future__ import annotations

import argparse
import shutil

import pytest

from workflow_lib.cli import main
from workflow_lib.cli_args import positive_int, unique_outputs
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
