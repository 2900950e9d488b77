"""Database build on real Swiss-Prot FASTA: shard counts and manifest totals equal a direct count."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from workflow_lib.cli import main
from workflow_lib.db.build import build_database, load_shard, read_manifest
from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import decode
from workflow_lib.seqio.fasta import read_fasta


@pytest.fixture(scope="module")
def example_db(example_dir):
    return example_dir / "db" / "sprot_firmicutes_slice.fasta.gz"


def _direct_counts(path):
    sequences = residues = 0
    with gzip.open(path, "rt") as handle:
        for line in handle:
            if line.startswith(">"):
                sequences += 1
            else:
                residues += len(line.strip())
    return sequences, residues


@pytest.mark.parametrize("shards", [1, 3, 7])
def test_manifest_totals_equal_direct_count(tmp_path, example_db, shards):
    manifest, rebuilt = build_database([example_db], tmp_path / "db", shards=shards)
    assert rebuilt
    assert (manifest.total_sequences, manifest.total_residues) == _direct_counts(example_db) == (3000, 1041970)
    assert manifest.n_shards == shards
    loaded = [load_shard(tmp_path / "db", i) for i in range(shards)]
    assert sum(len(s) for s in loaded) == manifest.total_sequences
    assert sum(int(s.lengths.sum()) for s in loaded) == manifest.total_residues
    residues = [s["residues"] for s in manifest.shards]
    assert max(residues) - min(residues) <= 2 * 2000  # balanced to about one long sequence
    records = read_fasta(example_db)
    order = [i for s in loaded for i in s.ids]
    assert order == [r.id for r in records]
    assert decode(loaded[-1].sequence(len(loaded[-1]) - 1)) == records[-1].sequence


def test_rebuild_is_noop_and_detects_changes(tmp_path, example_db):
    build_database([example_db], tmp_path / "db", shards=2)
    stamp = (tmp_path / "db" / "shard_000.parquet").stat().st_mtime_ns
    _, rebuilt = build_database([example_db], tmp_path / "db", shards=2)
    assert not rebuilt
    assert (tmp_path / "db" / "shard_000.parquet").stat().st_mtime_ns == stamp
    _, rebuilt = build_database([example_db], tmp_path / "db", shards=3)
    assert rebuilt and read_manifest(tmp_path / "db").n_shards == 3
    (tmp_path / "db" / "shard_001.parquet").write_bytes(b"corrupted")
    _, rebuilt = build_database([example_db], tmp_path / "db", shards=3)
    assert rebuilt


def test_duplicate_ids_in_a_database(tmp_path, data_dir):
    """Real databases repeat IDs (Prokka's genus_Escherichia has G7769-MONOMER nine times): exact copies are
    dropped, a reused ID with another sequence is renamed or refused."""
    records = read_fasta(data_dir / "formats" / "ecoli_head.fasta.gz")
    text = "".join(f">{r.id} {r.description}\n{r.sequence}\n" for r in records[:3])
    same = f">{records[0].id} again\n{records[0].sequence}\n"
    other = f">{records[0].id} other\n{records[1].sequence}\n"
    (tmp_path / "in.fasta").write_text(text + same + other)
    manifest, _ = build_database([tmp_path / "in.fasta"], tmp_path / "db")
    assert manifest.total_sequences == 4
    assert manifest.inputs[0]["duplicates_dropped"] == 1 and manifest.inputs[0]["duplicates_renamed"] == 1
    assert load_shard(tmp_path / "db", 0).ids[-1] == f"{records[0].id}__2"
    with pytest.raises(InputError, match=r"in.fasta: record 'sp\|A0A385XJ53\|INSA9_ECOLI': duplicate ID with a "
                                         "different sequence"):
        build_database([tmp_path / "in.fasta"], tmp_path / "db2", duplicate_ids="error")


def test_empty_database_and_missing_file(tmp_path):
    (tmp_path / "empty.fasta").write_text("")
    with pytest.raises(InputError, match="empty.fasta: contains no FASTA records"):
        build_database([tmp_path / "empty.fasta"], tmp_path / "db")
    with pytest.raises(InputError, match="database FASTA does not exist"):
        build_database([tmp_path / "missing.fasta"], tmp_path / "db")
    assert not (tmp_path / "db" / "manifest.json").exists()


def test_bad_kmer_length_stops_before_writing(tmp_path, capsys):
    from workflow_lib.cli import main

    (tmp_path / "in.fasta").write_text(">a\nMKVLAAGIVGLLLA\n")
    assert main(["db", "build", str(tmp_path / "in.fasta"), "--out", str(tmp_path / "db"), "--kmer-length", "9"]) != 0
    assert "k-mer length must be between 1 and 6, got 9" in capsys.readouterr().err
    assert not (tmp_path / "db").exists()
    assert main(["db", "build", str(tmp_path / "in.fasta"), "--out", str(tmp_path / "db"), "--seed-shape", "0110"]) != 0
    assert "seed shape must be a string of 0 and 1 that starts and ends with 1, got '0110'" in capsys.readouterr().err
    assert not (tmp_path / "db").exists()


def test_seed_shape_is_stored_and_a_changed_shape_rebuilds(tmp_path):
    """The default index is spaced (shape 1010011); --kmer-length 4 gives contiguous 4-mers; the shape is a
    build setting, so asking for another one rebuilds instead of reporting the database up to date."""
    from workflow_lib.cli import main
    from workflow_lib.db.build import load_kmer_index
    from workflow_lib.db.kmer_index import DEFAULT_SHAPE, index_shape

    (tmp_path / "in.fasta").write_text(">a\nMKVLAAGIVGLLLAWQERTY\n>b\nMKVLSAGIVGLLLAWQDRTY\n")
    out = str(tmp_path / "db")
    assert main(["db", "build", str(tmp_path / "in.fasta"), "--out", out]) == 0
    assert index_shape(load_kmer_index(out, 0)) == DEFAULT_SHAPE == "1010011"
    assert read_manifest(out).settings["seed_shape"] == DEFAULT_SHAPE
    assert main(["db", "build", str(tmp_path / "in.fasta"), "--out", out, "--kmer-length", "4"]) == 0
    index = load_kmer_index(out, 0)
    assert index_shape(index) == "1111" and int(index["k"]) == 4
    assert index["sequence"].size == 2 * (20 - 4 + 1)


def test_cli_build_and_info(tmp_path, example_db, capsys):
    assert main(["db", "build", "--out", str(tmp_path / "db"), "--shards", "2", str(example_db)]) == 0
    assert "3000 sequences, 1041970 residues, 2 shards" in capsys.readouterr().out
    assert main(["db", "info", "--json", str(tmp_path / "db")]) == 0
    assert json.loads(capsys.readouterr().out)["total_sequences"] == 3000
    assert main(["db", "info", str(tmp_path / "nothing")]) == 2
    assert "no database manifest here" in capsys.readouterr().err


def test_shard_arrays_are_flat(tmp_path, example_db):
    build_database([example_db], tmp_path / "db", shards=2)
    shard = load_shard(tmp_path / "db", 1)
    assert shard.residues.dtype == np.uint8 and shard.offsets[0] == 0
    assert shard.offsets[-1] == shard.residues.size


def test_bad_records_are_counted_in_the_manifest_or_stop_the_build(tmp_path, example_db, data_dir, capsys):
    """A database build skips and lists a record that breaks the FASTA policy (default) or stops on it; the
    A/T-only protein P02732, which an older check took for DNA, is a protein."""
    records = read_fasta(example_db)[:5]
    bad_file = tmp_path / "mixed.fasta"
    bad_file.write_text("".join(f">{r.id}\n{r.sequence}\n" for r in records[:3])
                        + ">cds_thrL\nATGAAACGCATTAGCACCACCATTACCACCACCATCACCATTACCACAGGTAACGGTGCG\n"
                        + f">{records[3].id}\n{records[3].sequence[:20]}7{records[3].sequence[20:]}\n"
                        + (data_dir / "formats" / "uniprot2014_p02732.fasta").read_text())
    manifest, _ = build_database([bad_file], tmp_path / "db", shards=2)
    entry = manifest.inputs[0]
    assert manifest.total_sequences == entry["sequences"] == 4          # 3 good records and P02732
    assert load_shard(tmp_path / "db", 1).ids[-1] == "P02732"
    assert entry["bad_records"] == 2
    assert [(e["record"], e["line"]) for e in entry["bad_record_examples"]] == [("cds_thrL", 7), (records[3].id, 9)]
    assert "nucleotide" in entry["bad_record_examples"][0]["reason"]
    assert "a digit at residue 21" in entry["bad_record_examples"][1]["reason"]
    assert main(["db", "info", str(tmp_path / "db")]) == 0
    assert "2 bad records skipped" in capsys.readouterr().out
    with pytest.raises(InputError, match=r"mixed.fasta: record 'cds_thrL': looks like a nucleotide sequence"):
        build_database([bad_file], tmp_path / "strict", on_bad_record="error")
    assert not (tmp_path / "strict" / "manifest.json").exists()
    assert main(["db", "build", "--out", str(tmp_path / "cli"), "--on-bad-record", "error", str(bad_file)]) == 2
    assert "cds_thrL" in capsys.readouterr().err


def test_build_memory_is_bounded_by_the_shard_not_the_database(tmp_path, example_db):
    """The same residues per shard, a database four times larger (shuffled copies of the real records, so
    nothing is a duplicate): the build's peak of traced allocations stays the same. A build that held the whole
    database (as one did before streaming) peaked 1.46x higher here."""
    import tracemalloc

    records = read_fasta(example_db)
    rng = np.random.default_rng(0)
    peaks = {}
    for copies, shards in ((1, 4), (4, 16)):
        fasta = tmp_path / f"x{copies}.fasta"
        with open(fasta, "w") as handle:
            for copy in range(copies):
                for r in records:
                    sequence = r.sequence if copy == 0 else "".join(rng.permutation(list(r.sequence)))
                    handle.write(f">{r.id}{f'_copy{copy}' if copy else ''} {r.description}\n{sequence}\n")
        tracemalloc.start()
        try:
            manifest, _ = build_database([fasta], tmp_path / f"db{copies}", shards=shards)
            peaks[copies] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert manifest.total_sequences == copies * len(records) and manifest.n_shards == shards
    assert peaks[4] <= 1.15 * peaks[1], peaks
    assert not list(tmp_path.glob("db4/.build-*"))       # the first pass's bucket files are gone


def test_renamed_copies_never_reuse_an_id_of_the_database(tmp_path, example_db):
    """Many reused IDs (concatenated genome annotations restart PROKKA_00001 ... in every file): every copy with
    another sequence gets a fresh name, also when the database lists that name later, and a killed build's
    work folder is cleared."""
    records = read_fasta(example_db)[:60]
    first = "".join(f">PROKKA_{i:05d}\n{r.sequence}\n" for i, r in enumerate(records[:30]))
    second = "".join(f">PROKKA_{i:05d}\n{r.sequence}\n" for i, r in enumerate(records[30:]))
    clash = f">PROKKA_00000__2\n{records[0].sequence[::-1]}\n"
    (tmp_path / "a.fasta").write_text(first)
    (tmp_path / "b.fasta").write_text(second + clash)
    (tmp_path / "db" / ".build-killed").mkdir(parents=True)
    manifest, _ = build_database([tmp_path / "a.fasta", tmp_path / "b.fasta"], tmp_path / "db", shards=3)
    ids = [i for s in range(manifest.n_shards) for i in load_shard(tmp_path / "db", s).ids]
    assert len(ids) == len(set(ids)) == 61
    assert ids[30] == "PROKKA_00000__3" and ids[31] == "PROKKA_00001__2" and ids[-1] == "PROKKA_00000__2"
    assert manifest.inputs[1]["duplicates_renamed"] == 30
    assert not list((tmp_path / "db").glob(".build-*"))


def test_database_defaults_are_shared_by_the_library_the_schema_and_trackfold_db(root):
    """``trackfold db build`` and ``db cluster`` by hand build the database the workflow's db rules build."""
    import argparse
    import dataclasses
    import inspect

    import yaml

    from workflow_lib.db import cli as db_cli
    from workflow_lib.db.profiles import build_profile_db
    from workflow_lib.workflow.config import DatabaseConfig

    parser = argparse.ArgumentParser()
    db_cli.register(parser.add_subparsers())
    build = vars(parser.parse_args(["db", "build", "--out", "db", "x.fasta"]))
    cluster = vars(parser.parse_args(["db", "cluster", "--db", "db", "--out", "profiles"]))
    schema = yaml.safe_load((root / "config" / "schema.yaml").read_text())
    schema = schema["properties"]["databases"]["additionalProperties"]["properties"]
    config = DatabaseConfig(fasta=("x.fasta",))
    build_function = inspect.signature(build_database).parameters
    cluster_function = inspect.signature(build_profile_db).parameters
    assert set(schema) == {field.name for field in dataclasses.fields(DatabaseConfig)}
    for key, option in (("shards", "shards"), ("duplicate_ids", "duplicate_ids"),
                        ("on_bad_record", "on_bad_record")):
        assert schema[key]["default"] == getattr(config, key) == build[option] == build_function[option].default, key
    for key, option in (("profile_identity", "identity"), ("profile_coverage", "coverage")):
        assert schema[key]["default"] == getattr(config, key) == cluster[option], key
        assert cluster_function[option].default == cluster[option], key
    assert schema["profiles"]["default"] is config.profiles is False
