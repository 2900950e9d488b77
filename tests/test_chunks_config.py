"""Chunking (deterministic, balanced, complete) and typed stage configuration."""

from __future__ import annotations

import numpy as np
import pytest

from workflow_lib.cli import main
from workflow_lib.db.chunks import assign_chunks, chunk_table
from workflow_lib.errors import InputError
from workflow_lib.schemas.db import CHUNKS
from workflow_lib.schemas.io import read_frame
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.workflow.config import ChunkConfig, DatabaseConfig


@pytest.fixture(scope="module")
def proteome(example_dir):
    return read_fasta(example_dir / "proteomes" / "anaerococcus_slice.fasta")


@pytest.mark.parametrize("per_chunk", [1, 4, 7, 10, 30, 100])
def test_every_protein_exactly_once_and_balanced(proteome, per_chunk):
    lengths = np.array([len(r) for r in proteome])
    chunks = assign_chunks(lengths, per_chunk)
    n_chunks = -(-len(lengths) // per_chunk)
    assert chunks.shape == lengths.shape and set(chunks.tolist()) == set(range(n_chunks))
    counts = np.bincount(chunks)
    assert counts.max() - counts.min() <= 1
    residues = np.bincount(chunks, weights=lengths)
    assert residues.max() - residues.min() <= lengths.max()  # LPT bound: within one protein


def test_deterministic_and_order_only(proteome):
    lengths = [len(r) for r in proteome]
    assert np.array_equal(assign_chunks(lengths, 7), assign_chunks(list(lengths), 7))
    table = chunk_table("p", proteome, 7)
    assert table["protein"].tolist() == [r.id for r in proteome]


def test_too_long_proteins_are_skipped_or_refused(proteome):
    table = chunk_table("p", proteome, 10, max_length=300)
    skipped = table[table["chunk"] == -1]
    assert len(skipped) == sum(len(r) > 300 for r in proteome) > 0
    assert skipped["note"].str.startswith("skipped: ").all()
    with pytest.raises(InputError, match=r"prot.fasta: record '.*': protein of \d+ residues exceeds "
                                         r"chunks.max_length=300"):
        chunk_table("p", proteome, 10, max_length=300, too_long="error", source="prot.fasta")


def test_cli_chunk_writes_table_and_fastas(tmp_path, example_dir, proteome):
    fasta = example_dir / "proteomes" / "anaerococcus_slice.fasta"
    assert main(["chunk", str(fasta), "--proteome", "ana", "--out", str(tmp_path / "chunks.parquet"),
                 "--fasta-dir", str(tmp_path), "--proteins-per-chunk", "8"]) == 0
    table = read_frame(tmp_path / "chunks.parquet", CHUNKS)
    assert len(table) == 35 and table["chunk"].max() == 4
    ids = [r.id for f in sorted(tmp_path.glob("chunk_*.fasta")) for r in read_fasta(f)]
    assert sorted(ids) == sorted(r.id for r in proteome)


def test_config_dataclasses_reject_unknown_keys_and_types():
    assert ChunkConfig.from_dict({"proteins_per_chunk": 5}).proteins_per_chunk == 5
    with pytest.raises(InputError, match=r"unknown key\(s\) \['protein_per_chunk'\] in chunks"):
        ChunkConfig.from_dict({"protein_per_chunk": 5}, where="chunks")
    with pytest.raises(InputError, match="chunks.proteins_per_chunk: expected int, got str"):
        ChunkConfig.from_dict({"proteins_per_chunk": "5"}, where="chunks")
    db = DatabaseConfig.from_dict({"fasta": ["a.fa", "b.fa"], "shards": 2})
    assert db.fasta == ("a.fa", "b.fa") and db.duplicate_ids == "rename"
    with pytest.raises(InputError, match="shards' must be at least 1"):
        DatabaseConfig.from_dict({"fasta": ["a.fa"], "shards": 0})


def test_chunk_defaults_are_shared_by_the_library_the_schema_and_trackfold_chunk(root):
    """``trackfold chunk`` by hand and :func:`chunk_table` cut a proteome as the workflow's chunk rule does."""
    import argparse
    import dataclasses
    import inspect

    import yaml

    from workflow_lib.db import cli as db_cli
    from workflow_lib.db.chunks import ChunkSettings

    parser = argparse.ArgumentParser()
    db_cli.register(parser.add_subparsers())
    cli = vars(parser.parse_args(["chunk", "p.fasta", "--proteome", "p", "--out", "chunks.parquet"]))
    schema = yaml.safe_load((root / "config" / "schema.yaml").read_text())["properties"]["chunks"]["properties"]
    library = dataclasses.asdict(ChunkSettings())
    function = {name: p.default for name, p in inspect.signature(chunk_table).parameters.items()}
    assert set(schema) == set(library) == set(dataclasses.asdict(ChunkConfig()))
    for name, default in library.items():
        assert schema[name]["default"] == default, name
        assert getattr(ChunkConfig(), name) == default, name
        assert cli[name] == default, name
        assert function[name] == default, name
