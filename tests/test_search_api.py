"""The search API (:class:`Searcher`, :class:`Hits`, :class:`Settings` presets) on the bundled example database:
the hits of two shards merged are the hits of the whole database, the outputs are the CLI's."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from conftest import example_database

from workflow_lib.cli import main
from workflow_lib.db.build import build_database
from workflow_lib.schemas.io import read_frame
from workflow_lib.schemas.search import HITS
from workflow_lib.search import DEFAULT, FAST, PRESETS, Hits, Searcher, Settings
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.seqio.msa import read_a3m


@pytest.fixture(scope="module")
def databases(tmp_path_factory):
    """The first 250 example sequences as one shard and as two."""
    folder = tmp_path_factory.mktemp("api")
    two, records = example_database(folder, 250, shards=2)
    build_database([folder / "in.fasta"], folder / "one", shards=1)
    return folder / "one", two, records


@pytest.fixture(scope="module")
def queries(databases, example_dir):
    _, _, records = databases
    proteome = read_fasta(example_dir / "proteomes" / "anaerococcus_slice.fasta")
    return [records[5], proteome[10], proteome[4]]


def test_presets_are_the_product_default_the_fast_setting_and_the_benchmark_variants(root):
    assert PRESETS["default"] == DEFAULT == Settings()
    assert (DEFAULT.sensitive, DEFAULT.pseudocounts) == (True, "context")
    assert (FAST.sensitive, FAST.pseudocounts) == (False, "substitution")
    assert FAST.search.first_iteration_prefilter == () and DEFAULT.search.first_iteration_prefilter
    with pytest.raises(ValueError, match="profile_min_coverage"):
        Settings(profile_min_coverage=0.9)
    # the search benchmark's trackfold variants are the presets, their options read back to them
    import argparse
    import sys

    sys.path.insert(0, str(root / "benchmarks"))
    from search_bench.tools import Trackfold, TrackfoldContext, TrackfoldFast, TrackfoldSensitive

    from workflow_lib.search.settings import add_settings_arguments, settings_from_args
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    for tool, name in ((Trackfold, "default"), (TrackfoldFast, "fast"), (TrackfoldSensitive, "sensitive"),
                       (TrackfoldContext, "context")):
        assert settings_from_args(parser.parse_args(list(tool.extra_arguments))) == PRESETS[name], name
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.iterations = 2  # type: ignore[misc]


@pytest.mark.parametrize("settings", [FAST, DEFAULT], ids=["fast", "default"])
def test_two_shards_merged_are_the_whole_database(databases, queries, settings):
    one, two, _ = databases
    whole = Searcher(one, settings=settings).search(queries)
    sharded = Searcher(two, settings=settings)
    assert sharded.shards == 2
    prepared = sharded.queries(queries)
    parts = [sharded.search_shard(prepared, shard)[0] for shard in range(2)]
    assert all(len(part) for part in parts)
    merged = Hits.merge(parts, query_order=[q.id for q in queries])
    assert len(merged) == len(whole) > 0
    pd.testing.assert_frame_equal(merged.to_frame().drop(columns="database"),
                                  whole.to_frame().drop(columns="database"))
    pd.testing.assert_frame_equal(sharded.search(queries).to_frame(), merged.to_frame())
    # the E-values are the whole database's: a part's hits keep theirs in the merge
    part = parts[0].to_frame().set_index(["query", "target"])["evalue"]
    assert merged.to_frame().set_index(["query", "target"])["evalue"].loc[part.index].equals(part)
    assert merged.totals == sharded.totals


def test_hits_included_and_outputs(tmp_path, databases, queries):
    one, _, _ = databases
    hits = Searcher(one, settings=FAST).search(queries)
    included = hits.included
    assert 0 < len(included) < len(hits)
    assert (included.to_frame()["evalue"] <= FAST.inclusion_evalue).all()
    assert hits.queries[0] == queries[0].id and len(hits.query(queries[0].id)) > 0
    hits.write_parquet(tmp_path / "hits.parquet")
    stored = Hits.read_parquet(tmp_path / "hits.parquet").to_frame()     # the schema's types (bit scores float32)
    pd.testing.assert_frame_equal(stored, hits.to_frame(), check_dtype=False, atol=1e-4)
    hits.write_m8(tmp_path / "hits.m8")
    lines = (tmp_path / "hits.m8").read_text().splitlines()
    assert len(lines) == len(hits) and lines[0].split("\t")[:2] == [queries[0].id, queries[0].id]
    with pytest.raises(ValueError, match="different databases"):
        Hits.merge([hits, Searcher(databases[1], settings=FAST).search(queries[:1])])


def test_iterate_gives_the_msa_and_search_commands_outputs(tmp_path, databases, queries):
    one, _, _ = databases
    fasta = tmp_path / "q.fasta"
    fasta.write_text("".join(f">{r.id} {r.description}\n{r.sequence}\n" for r in queries))
    records = read_fasta(fasta)
    settings = FAST.replace(iterations=2)
    results = Searcher(one, settings=settings).iterate(records)
    options = ["--iterations", "2", "--no-sensitive", "--pseudocounts", "substitution"]
    assert main(["msa", str(fasta), "--db", str(one), "--out-dir", str(tmp_path / "msa"), *options]) == 0
    assert main(["search", str(fasta), "--db", str(one), "--out", str(tmp_path / "hits.parquet"), *options]) == 0
    for record, result in zip(records, results):
        assert read_a3m(tmp_path / "msa" / f"{record.safe_id}.a3m").rows == result.alignment.rows
    table = read_frame(tmp_path / "hits.parquet", HITS)
    pd.testing.assert_frame_equal(table, Hits.from_iterations(results, query_order=[r.id for r in records]).to_frame(),
                                  check_dtype=False)
