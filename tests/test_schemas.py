"""Declared tables and arrays: validation on write, detection of truncated or foreign files on read."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workflow_lib.errors import SchemaError
from workflow_lib.seqio.atomic import atomic_path
from workflow_lib.schemas.db import CHUNKS
from workflow_lib.schemas.io import ArraySpec, NpzSchema, read_frame, read_npz, write_npz, write_table
from workflow_lib.schemas.search import HITS

DEMO = NpzSchema("demo", 1, {
    "msa": ArraySpec("int8", ("N", "L")),
    "profile": ArraySpec("float32", ("L", 21)),
    "weights": ArraySpec("float32", ("N",), optional=True),
})


def _chunks():
    return pd.DataFrame({"proteome": "p", "chunk": [0, 1], "protein": ["a|b", "c"], "safe_id": ["a_b", "c"],
                         "length": [10, 20], "index": [0, 1], "note": ["", ""]})


def test_table_round_trip(tmp_path):
    write_table(tmp_path / "c.parquet", _chunks(), CHUNKS)
    frame = read_frame(tmp_path / "c.parquet", CHUNKS)
    assert frame["protein"].tolist() == ["a|b", "c"]
    assert str(frame["chunk"].dtype) == "int32"


def test_table_rejects_missing_and_wrong_columns(tmp_path):
    with pytest.raises(SchemaError, match=r"missing \['note'\]"):
        write_table(tmp_path / "c.parquet", _chunks().drop(columns="note"), CHUNKS)
    bad = _chunks().assign(chunk=["zero", "one"])
    with pytest.raises(SchemaError, match="wrong type"):
        write_table(tmp_path / "c.parquet", bad, CHUNKS)
    assert not (tmp_path / "c.parquet").exists()


def test_reader_detects_truncation_and_foreign_tables(tmp_path):
    path = tmp_path / "c.parquet"
    write_table(path, _chunks(), CHUNKS)
    with pytest.raises(SchemaError, match="expected table 'hits/2', found 'chunks/1'"):
        read_frame(path, HITS)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SchemaError, match=r"c.parquet: not a readable Parquet file"):
        read_frame(path, CHUNKS)
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "foreign.parquet")
    with pytest.raises(SchemaError, match="no trackfold schema tag"):
        read_frame(tmp_path / "foreign.parquet", CHUNKS)


def test_npz_round_trip_and_checks(tmp_path):
    arrays = {"msa": np.zeros((3, 5), np.int8), "profile": np.ones((5, 21), np.float32)}
    write_npz(tmp_path / "f.npz", arrays, DEMO)
    loaded = read_npz(tmp_path / "f.npz", DEMO)
    assert set(loaded) == {"msa", "profile"} and loaded["profile"].shape == (5, 21)
    with pytest.raises(SchemaError, match="has L=4, other keys L=5"):
        write_npz(tmp_path / "g.npz", {**arrays, "profile": np.ones((4, 21), np.float32)}, DEMO)
    with pytest.raises(SchemaError, match="dtype float64, declared float32"):
        write_npz(tmp_path / "g.npz", {**arrays, "profile": np.ones((5, 21))}, DEMO)
    with pytest.raises(SchemaError, match="object array"):
        write_npz(tmp_path / "g.npz", {**arrays, "msa": np.array([[None]] * 3, dtype=object)}, DEMO)
    with pytest.raises(SchemaError, match=r"unexpected keys \['extra'\]"):
        write_npz(tmp_path / "g.npz", {**arrays, "extra": np.zeros(1)}, DEMO)
    assert not (tmp_path / "g.npz").exists()


def test_npz_truncated(tmp_path):
    path = tmp_path / "f.npz"
    write_npz(path, {"msa": np.zeros((3, 5), np.int8), "profile": np.ones((5, 21), np.float32)}, DEMO)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(SchemaError, match="f.npz: not a readable npz file"):
        read_npz(path, DEMO)


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_written_files_get_the_permissions_of_a_new_file(tmp_path):
    """Not the 0600 of a temporary file: a database on a shared file system must be readable by the group."""
    import os
    import stat

    write_table(tmp_path / "c.parquet", _chunks(), CHUNKS)
    (tmp_path / "plain.txt").write_text("x")
    expected = stat.S_IMODE(os.stat(tmp_path / "plain.txt").st_mode)
    assert stat.S_IMODE(os.stat(tmp_path / "c.parquet").st_mode) == expected


# ------------------------------------------------------------------------------------------ one home
def _declarations_outside_schemas(root):
    """(file, name) of every module-level TableSchema(...) / NpzSchema(...) call outside workflow_lib/schemas."""
    import ast

    found = []
    for path in sorted((root / "workflow_lib").rglob("*.py")):
        if "schemas" in path.relative_to(root / "workflow_lib").parts[:1]:
            continue
        for node in ast.parse(path.read_text()).body:
            value = getattr(node, "value", None)
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Call) \
                    and getattr(value.func, "id", None) in ("TableSchema", "NpzSchema"):
                found.append((str(path.relative_to(root)), ast.unparse(node).split("=")[0].strip()))
    return found


def test_every_layout_is_declared_in_the_schemas_package(root):
    assert _declarations_outside_schemas(root) == []


def test_catalog_lists_every_declared_layout_once():
    import importlib
    import pkgutil

    import workflow_lib.schemas as package
    from workflow_lib.schemas.catalog import ARRAYS, TABLES
    from workflow_lib.schemas.io import TableSchema

    declared = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"workflow_lib.schemas.{info.name}")
        for value in vars(module).values():
            if isinstance(value, (TableSchema, NpzSchema)):
                newest = declared.get(value.name)
                if newest is None or value.version > newest.version:      # earlier layouts still read
                    declared[value.name] = value
    assert declared == {**TABLES, **ARRAYS}
    assert ARRAYS["features"].version == 6
    assert set(TABLES).isdisjoint(ARRAYS)
    assert {"hits", "msa_stats", "features", "prediction", "summary", "training_chains", "evaluation"} <= set(declared)
    # the package index (its docstring) names every layout
    for name in declared:
        assert f"``{name}``" in package.__doc__, name


def test_schemas_import_no_stage_package():
    """The contracts sit below every stage: importing all of them loads no search, model or workflow code."""
    import subprocess
    import sys

    code = ("import sys, workflow_lib.schemas.catalog; "
            "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('workflow_lib.')}))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(loaded) == ["errors", "schemas", "seqio", "structure"], loaded  # noqa: S307 (our own output)
