"""Profile databases: clustering, cluster A3Ms, profile–profile scores, the profile-database search and its CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from workflow_lib.aligner import align_profiles, profile_from_sequence
from workflow_lib.aligner.hmm_compiled import hmm_scores
from workflow_lib.cli import main
from workflow_lib.db.build import build_database
from workflow_lib.db.cluster import cluster_sequences, minimizers
from workflow_lib.db.profiles import (PROFILE_CACHE_BYTES, ByteBoundedCache, array_bytes, build_profile_db,
                                      database_kind, load_profile_shard, read_profile_manifest)
from workflow_lib.errors import InputError, SchemaError
from workflow_lib.search.iterative import hit_row
from workflow_lib.search.profile_search import (ProfileDatabase, ProfileSearchSettings, build_profile_msas,
                                                compose_member, search_profile_query)
from workflow_lib.search.settings import MsaSettings
from workflow_lib.seqio.alphabet import decode, encode
from workflow_lib.seqio.fasta import Record, read_fasta
from workflow_lib.seqio.msa import Alignment

N_DB = 200
MUTATED = (3, 40, 77, 150)


def mutate(sequence: str, fraction: float, seed: int) -> str:
    """``sequence`` with ``fraction`` of its residues replaced at random (deterministic)."""
    rng = np.random.default_rng(seed)
    codes = encode(sequence).copy()
    where = rng.choice(codes.size, size=int(round(fraction * codes.size)), replace=False)
    codes[where] = (codes[where] + rng.integers(1, 20, size=where.size)) % 20
    return decode(codes)


@pytest.fixture(scope="module")
def records(example_dir):
    """200 real Swiss-Prot sequences, 15%-mutated copies of four of them, and a 40% fragment of one."""
    real = read_fasta(example_dir / "db" / "sprot_firmicutes_slice.fasta.gz")[:N_DB]
    extra = [(f"{real[k].id}_mut", mutate(real[k].sequence, 0.15, k)) for k in MUTATED]
    fragment = real[MUTATED[0]].sequence
    extra.append((f"{real[MUTATED[0]].id}_frag", fragment[: int(0.4 * len(fragment))]))
    return [(r.id, r.sequence) for r in real] + extra


@pytest.fixture(scope="module")
def dbs(tmp_path_factory, records):
    folder = tmp_path_factory.mktemp("profiledb")
    fasta = folder / "db.fasta"
    fasta.write_text("".join(f">{name}\n{seq}\n" for name, seq in records))
    build_database([fasta], folder / "seq", shards=2)
    manifest, rebuilt = build_profile_db(folder / "seq", folder / "profiles", shards=2)
    return folder / "seq", folder / "profiles", manifest, rebuilt


def test_minimizers_keep_at_most_m_distinct_hashes_per_sequence_and_skip_x():
    sequences = [encode("MKVLAAGIVGLLLAAGCSSKEEAPKTETPAETQQ"), encode("XXXXXXXXXXXXXXXXXXXX"), encode("MKV")]
    residues = np.concatenate(sequences)
    offsets = np.array([0, 34, 54, 57])
    owner, hashes = minimizers(residues, offsets, k=7, per_sequence=5)
    assert set(owner.tolist()) == {0}            # X-only and too-short sequences give no k-mer
    assert (owner == 0).sum() == 5 and np.unique(hashes).size == 5
    again = minimizers(residues, offsets, k=7, per_sequence=5)
    assert np.array_equal(again[1], hashes)
    # a block boundary does not matter: the first sequence alone gives the same k-mers
    alone = minimizers(sequences[0], np.array([0, 34]), k=7, per_sequence=5)
    assert np.array_equal(alone[1], hashes)


def test_clusters_join_close_copies_and_never_unrelated_or_fragments(records):
    codes = [encode(seq) for _, seq in records]
    result = cluster_sequences(codes)
    names = [name for name, _ in records]
    index = {name: k for k, name in enumerate(names)}
    for k in MUTATED:
        original, copy = names[k], f"{names[k]}_mut"
        assert result.representative[index[copy]] == result.representative[index[original]], original
    fragment = index[f"{names[MUTATED[0]]}_frag"]
    assert result.representative[fragment] == fragment      # 40% of the sequence: fails the 80% coverage
    # every member's row holds >= 30% identity to its representative over >= 80% of both
    for k, rep in enumerate(result.representative):
        if rep == k:
            assert result.rows[k] == records[k][1]
            continue
        alignment = Alignment.from_a3m_rows([names[rep], names[k]], ["", ""], [records[rep][1], result.rows[k]])
        both = alignment.matches[1] < 20
        same = (alignment.matches[0] == alignment.matches[1]) & both
        assert same.sum() >= 0.3 * both.sum()
        assert both.sum() >= 0.8 * len(records[rep][1]) * 0.9   # aligned columns cover the representative
        member = records[k][1]
        segment = result.rows[k].replace("-", "").upper()
        assert member[result.starts[k]:result.starts[k] + len(segment)] == segment
    assert result.n_clusters <= len(records) - len(MUTATED)      # real close homologs of the slice join too


def test_clustering_is_the_same_with_two_processes(records):
    codes = [encode(seq) for _, seq in records]
    one, two = cluster_sequences(codes), cluster_sequences(codes, cpus=2)
    assert np.array_equal(one.representative, two.representative) and one.rows == two.rows


def test_cluster_settings_are_checked():
    with pytest.raises(InputError, match="identity and coverage"):
        cluster_sequences([encode("MKV")], identity=0.0)


def test_byte_bounded_cache_keeps_the_recent_values_within_its_bound():
    calls = []

    def compute(key):
        calls.append(key)
        return np.zeros(key, dtype=np.uint8), np.zeros(1, dtype=np.float64)   # key + 8 bytes

    cache = ByteBoundedCache(compute, max_bytes=100)
    for key in (10, 20, 30, 10):              # 18 + 28 + 38 bytes: all kept, 10 a hit
        assert array_bytes(cache(key)) == key + 8
    assert calls == [10, 20, 30] and cache.nbytes == 84 and (cache.hits, cache.misses) == (1, 3)
    cache(40)                                 # 48 more: the least recently used (20, then 30) go
    assert cache.nbytes == 18 + 48 and len(cache) == 2
    cache(10)
    cache(20)                                 # evicted: computed again
    assert calls == [10, 20, 30, 40, 20] and cache.nbytes <= 100
    cache(500)                                # larger than the bound: returned, not kept, nothing evicted
    assert len(cache) == 3 and cache.nbytes <= 100
    with pytest.raises(ValueError, match="non-negative"):
        ByteBoundedCache(compute, -1)


def test_profile_database_layout_manifest_and_noop_rebuild(dbs, records):
    seq, profiles, manifest, rebuilt = dbs
    assert rebuilt and database_kind(profiles) == "profile_database" and database_kind(seq) == "sequence_database"
    assert manifest["sequences"] == len(records)
    assert manifest["clusters"] == cluster_sequences([encode(seq) for _, seq in records]).n_clusters
    assert read_profile_manifest(profiles) == json.loads((profiles / "manifest.json").read_text())
    again, rebuilt_again = build_profile_db(seq, profiles, shards=2)
    assert not rebuilt_again and again["files"] == manifest["files"]
    members = pd.concat([load_profile_shard(profiles, k).members for k in range(len(manifest["shards"]))])
    assert sorted(members["id"]) == sorted(name for name, _ in records)     # nothing lost
    shard = load_profile_shard(profiles, 0)
    for k in range(len(shard)):
        start, stop = shard.member_span(k)
        rep = shard.members.iloc[start]
        codes = shard.arrays["residues"][shard.arrays["offsets"][k]:shard.arrays["offsets"][k + 1]]
        assert rep["row"] == decode(codes) and rep["start"] == 0    # representative first, its own sequence
        profile = shard.profile(k)
        assert profile.length == codes.size and np.array_equal(profile.sequence, codes)
        assert shard.scores(k).length == codes.size and shard.profile(k) is profile      # cached
    assert 0 < shard.cache.nbytes <= shard.cache.max_bytes and len(shard.cache) == len(shard)
    assert shard.cache.max_bytes == PROFILE_CACHE_BYTES // len(manifest["shards"])     # the database's budget, split
    with pytest.raises(InputError, match="not a profile database"):
        read_profile_manifest(seq)


def test_changed_files_make_the_database_rebuild(tmp_path, dbs):
    seq, profiles, manifest, _ = dbs
    copy = tmp_path / "profiles"
    build_profile_db(seq, copy, shards=2)
    member_file = copy / manifest["shards"][0]["members"]
    member_file.write_bytes(member_file.read_bytes()[:-10])
    _, rebuilt = build_profile_db(seq, copy, shards=2)
    assert rebuilt


def test_a_manifest_that_disagrees_with_its_shards_is_refused(tmp_path, dbs):
    seq, _, _, _ = dbs
    copy = tmp_path / "profiles"
    build_profile_db(seq, copy, shards=2)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["shards"][0]["sequences"] += 1
    manifest["sequences"] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SchemaError, match="shard 0 does not hold"):
        load_profile_shard(copy, 0)
    manifest["sequences"] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SchemaError, match="do not add up"):
        read_profile_manifest(copy)
    (copy / "manifest.json").write_text("{truncated")
    with pytest.raises(SchemaError, match="not valid JSON"):
        read_profile_manifest(copy)


def test_compiled_hmm_scores_equal_the_numpy_viterbi(records, cpu_kernels):
    query = profile_from_sequence(records[5][1])
    targets = [profile_from_sequence(seq, name=name) for name, seq in records[:12]]
    reference = [hit.raw_score for hit in align_profiles(query, targets, correlation=False)]
    assert hmm_scores(query, targets).tolist() == reference


def test_compose_member_places_residues_on_query_columns():
    query = encode("QWERTYKLMN")
    pairs = np.array([[1, 0], [2, 1], [5, 2], [6, 4]])
    states, qstart, qend, tstart, tend, tseq, identity, aligned = compose_member(pairs, "WxE-RtyY-K", query)
    assert (states, qstart, qend, tstart, tend, tseq) == ("MIMDDDIIIM", 2, 7, 1, 7, "WXERTYY")
    assert aligned == 3 and identity == pytest.approx(2 / 3)
    assert hit_row(states, qstart, qend, tseq, 10) == "-WxE---rtyY---"
    # the representative's own row: one match step per aligned pair, deletions for query-only columns
    states, *_ = compose_member(pairs, "ABCDEFGH", query)
    assert states == "MMDDMIM"
    assert compose_member(np.array([[0, 2]]), "AB-D", query) is None


def test_search_finds_the_query_its_cluster_and_agrees_with_the_sequence_search(dbs, records, example_dir):
    seq, profiles, _, _ = dbs
    names = [name for name, _ in records]
    database = ProfileDatabase(profiles)
    query_name, query_seq = records[MUTATED[1]]
    hits = search_profile_query(query_name, profile_from_sequence(query_seq), database)
    top = hits[hits["evalue"] <= 1e-10]
    assert {query_name, f"{query_name}_mut"} <= set(top["target"])       # the cluster expanded
    self_row = hits[hits["target"] == query_name].iloc[0]
    assert self_row["identity"] == 1.0 and self_row["tstart"] == 1 and self_row["tend"] == len(query_seq)
    # the sequence search of the same database finds the same confident hits (profile–profile scores of a
    # single-sequence query are lower: E 6.6e-12 there is 2.7e-3 here for the weakest of them)
    from workflow_lib.search.searcher import Searcher
    seq_hits = Searcher(seq).search([(query_name, query_seq)]).to_frame()
    confident = set(seq_hits.loc[seq_hits["evalue"] <= 1e-5, "target"])
    assert len(confident) >= 4 and confident <= set(hits.loc[hits["evalue"] <= 0.01, "target"])
    assert set(hits["target"]) <= set(names)


def test_evalues_of_shuffled_queries_stay_calibrated(dbs, records):
    _, profiles, _, _ = dbs
    database = ProfileDatabase(profiles)
    rng = np.random.default_rng(7)
    false = 0
    queries = 12
    for k in range(queries):
        codes = encode(records[10 * k][1]).copy()
        rng.shuffle(codes)
        hits = search_profile_query(f"shuffled{k}", profile_from_sequence(codes), database,
                                    ProfileSearchSettings(max_evalue=1.0))
        false += hits.drop_duplicates("target")["evalue"].le(1.0).sum()
    assert false / queries <= 3.0        # E <= 1 means about one unrelated hit per query (Poisson noise allowed)


def test_iterated_msas_and_the_cli_on_a_profile_database(tmp_path, dbs, records, capsys):
    seq, profiles, _, _ = dbs
    query = records[MUTATED[2]]
    results = build_profile_msas([Record(query[0], "", query[1], query[0])], profiles, MsaSettings(iterations=2))
    alignment = results[0].alignment
    assert alignment.names[0] == query[0] and f"{query[0]}_mut" in alignment.names
    fasta = tmp_path / "q.fasta"
    fasta.write_text(f">{query[0]}\n{query[1]}\n")
    assert main(["search", "--db", str(profiles), "--out", str(tmp_path / "hits.parquet"), "--iterations", "2",
                 str(fasta)]) == 0
    hits = pd.read_parquet(tmp_path / "hits.parquet")
    assert f"{query[0]}_mut" in set(hits["target"])
    assert main(["msa", "--db", str(profiles), "--out-dir", str(tmp_path / "msa"), "--iterations", "1",
                 str(fasta)]) == 0
    assert (tmp_path / "msa" / f"{query[0]}.a3m").is_file()
    assert main(["db", "info", str(profiles)]) == 0
    assert "clusters" in capsys.readouterr().out
    assert main(["db", "cluster", "--db", str(seq), "--out", str(profiles), "--shards", "2"]) == 0
    assert "up to date" in capsys.readouterr().out
