"""Template search: the OpenFold example query against the bundled template set, E-value calibration, hits table.

Fixtures: ``tests/data/templates/openfold_query.a3m.gz`` (the 1024-row query MSA of
``openfold_template_example``) and its HHsearch output ``pdb70_hits.hhr`` (HHsearch 3 vs pdb70, 80,799 HMMs);
the template set is ``example/templates/`` (openfold mmCIFs + Docking Benchmark 5.5 chains), built here without
DSSP (SS is not used by the search).

Measured (52 templates, 200 decoys; E-values from the Viterbi score without the correlation score): the best
hit is 3u8v_A (E = 0.001; HHsearch's rank 4), then 3u8v_B, 1psm_A (E = 0.38, on HHsearch's diagonal); 5 of the 5
and 7 of the 10 best are chains of HHsearch's hit entries (the other three have E > 4).
Held-out decoy P-values below 0.05: 8.5% (openfold query); with the former score (Viterbi + correlation score,
both for the decoys and the hits) 5.8%, and 2.5% (T1078), 2.8%, 4.5%, 4.3% (three example proteins).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from conftest import DATA, ROOT
from workflow_lib.aligner import align_profiles, profile_from_alignment
from workflow_lib.errors import SchemaError
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.schemas.io import read_frame
from workflow_lib.schemas.templates import TEMPLATE_HITS
from workflow_lib.templates import (
    aligned_pairs,
    build_template_db,
    decoy_profiles,
    fit_gumbel,
    fit_null,
    load_template_db,
    search_templates,
    write_hits,
)
from workflow_lib.templates import search as search_module
from workflow_lib.templates.calibration import DEFAULT_DECOYS, decoy_scores

TEMPLATES = ROOT / "example" / "templates"
QUERY = DATA / "templates" / "openfold_query.a3m.gz"
HHR = DATA / "templates" / "pdb70_hits.hhr"


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    out = tmp_path_factory.mktemp("tdb")
    structures = sorted((TEMPLATES / "structures").iterdir())
    build_template_db(structures, out, msa_dir=TEMPLATES / "msas", dssp=False)
    return load_template_db(out)


@pytest.fixture(scope="module")
def query():
    return profile_from_alignment(read_a3m(QUERY), name="openfold_query")


@pytest.fixture(scope="module")
def openfold_hits(query, database):
    return search_templates(query, database, max_hits=10, min_aligned=10)


def hhr_hits() -> dict[str, tuple[int, int, int, int]]:
    """HHsearch hit name (``1psm_A``) -> (qstart, qend, tstart, tend) from the summary table."""
    hits = {}
    for line in HHR.read_text().splitlines():
        match = re.match(r"^\s*\d+ (\w{4})_(\w+) .*?\s(\d+)-(\d+)\s+(\d+)-(\d+)\s*\(\d+\)$", line)
        if match:
            entry, chain, q0, q1, t0, t1 = match.groups()
            hits[f"{entry.lower()}_{chain}"] = (int(q0), int(q1), int(t0), int(t1))
    return hits


def test_hhr_parsing_finds_all_ten_hits():
    hits = hhr_hits()
    assert len(hits) == 10
    assert hits["1psm_A"] == (11, 28, 14, 31)


def test_openfold_query_finds_hhsearch_templates(openfold_hits, database):
    hits, _ = openfold_hits
    expected = set(hhr_hits()) & set(database.ids)
    assert len(expected) == 9  # 1hf9 is not in the OpenFold snapshot
    ranked = list(hits["template"])
    assert ranked[0] in expected
    # pdb70 keeps one chain per cluster (3U8V_A stands for 3u8v_B too): compare entries
    entries = {name.split("_")[0] for name in expected}
    ranked_entries = [name.split("_")[0] for name in ranked]
    assert sum(entry in entries for entry in ranked_entries[:5]) >= 4
    assert sum(entry in entries for entry in ranked_entries) >= 5
    # 1psm_A: the 38-residue NMR chain is its whole SEQRES, so HHsearch's template numbering is ours: our
    # alignment contains HHsearch's aligned pairs (one diagonal, q -> q + 3)
    row = hits.set_index("template").loc["1psm_A"]
    pairs = {tuple(p) for p in aligned_pairs(row["alignment"], row["qstart"] - 1, row["tstart"] - 1).tolist()}
    q0, q1, t0, _ = hhr_hits()["1psm_A"]
    reference = {(q - 1, q - 1 + t0 - q0) for q in range(q0, q1 + 1)}
    assert len(reference & pairs) >= 0.8 * len(reference)


def test_hits_table_columns_and_order(openfold_hits, query):
    hits, null = openfold_hits
    assert len(hits) == 10
    assert list(hits["rank"]) == list(range(1, 11))
    assert np.all(np.diff(hits["evalue"]) >= 0)
    assert (hits["aligned_cols"] >= 10).all()
    assert (hits["qlen"] == query.length).all()
    assert ((hits["identity"] >= 0) & (hits["identity"] <= hits["similarity"]) & (hits["similarity"] <= 1)).all()
    assert np.allclose(hits["significance"], np.exp(-hits["evalue"]), rtol=1e-6)
    assert (hits["null_lambda"] == np.float32(null.lam)).all()
    for _, row in hits.iterrows():
        pairs = aligned_pairs(row["alignment"], row["qstart"] - 1, row["tstart"] - 1)
        assert len(pairs) == row["aligned_cols"]
        assert pairs[0].tolist() == [row["qstart"] - 1, row["tstart"] - 1]
        assert pairs[-1].tolist() == [row["qend"] - 1, row["tend"] - 1]


def test_aligned_pairs_match_the_viterbi_pairs(query, database):
    hits = align_profiles(query, database.profiles[:8])
    for hit in hits:
        assert np.array_equal(aligned_pairs(hit.states, hit.query_start, hit.target_start), hit.pairs)
    with pytest.raises(ValueError, match="unknown alignment state"):
        aligned_pairs("MMXM", 0, 0)


def test_hits_round_trip_and_determinism(openfold_hits, query, database, tmp_path):
    hits, _ = openfold_hits
    write_hits(tmp_path / "q.hits.parquet", hits)
    back = read_frame(tmp_path / "q.hits.parquet", TEMPLATE_HITS)
    pd.testing.assert_frame_equal(back, hits)
    again, _ = search_templates(query, database, max_hits=10, min_aligned=10)
    pd.testing.assert_frame_equal(again, hits)
    with pytest.raises(SchemaError, match="template_hits"):
        read_frame(tmp_path / "q.hits.parquet", TEMPLATE_HITS.__class__("other", 1, TEMPLATE_HITS.schema, ""))


def test_true_homolog_gets_a_small_evalue(database):
    # the 2q2k_A MSA (OpenFold example) as a query: both chains of 2q2k are the same protein
    alignment = read_a3m(TEMPLATES / "msas" / "2q2k_A.a3m")
    hits, _ = search_templates(profile_from_alignment(alignment), database, max_hits=3)
    assert set(hits["template"][:2]) == {"2q2k_A", "2q2k_B"}
    assert (hits["evalue"][:2] < 1e-3).all()
    assert hits["evalue"][2] > 0.1


def test_max_hits_and_min_aligned_filter(query, database):
    hits, _ = search_templates(query, database, max_hits=3, min_aligned=40, n_decoys=40)
    assert len(hits) <= 3 and (hits["aligned_cols"] >= 40).all()
    none, _ = search_templates(query, database, max_hits=3, min_aligned=1000, n_decoys=40)
    assert len(none) == 0 and list(none.columns) == [f.name for f in TEMPLATE_HITS.schema]


def exhaustive_hits(query, database, *, max_hits, min_aligned, n_decoys=DEFAULT_DECOYS, seed=0):
    """The search without its shortcut: every template aligned with traceback, the ``min_aligned`` filter, the
    table's order; ``[(position in E-value order, template, E-value, hit)]``."""
    templates = database.profiles
    null = fit_null(query, templates, n_decoys=n_decoys, seed=seed)
    hits = align_profiles(query, templates, correlation=False)
    ranked = sorted(((len(templates) * float(null.pvalue(hit.score, template.length)), -hit.score, template.name,
                      hit) for template, hit in zip(templates, hits)), key=lambda row: row[:3])
    kept = [(position, name, evalue, hit) for position, (evalue, _, name, hit) in enumerate(ranked)
            if hit.aligned_columns >= min_aligned]
    return kept[:max_hits]


@pytest.mark.parametrize("max_hits, min_aligned, margin", [(10, 10, None), (6, 30, 0), (6, 45, 0)])
def test_search_equals_an_exhaustive_traceback(query, database, monkeypatch, max_hits, min_aligned, margin):
    """Score-only ranking + traceback of the best only = traceback of every template, hit for hit. ``margin``
    0: batches of ``max_hits``, 2·``max_hits``, … (the later batches are needed: see the positions below)."""
    if margin is not None:
        monkeypatch.setattr(search_module, "TRACE_MARGIN", margin)
    traced = []

    def counting(query, templates, **options):
        traced.append(len(templates))
        return align_profiles(query, templates, **options)

    monkeypatch.setattr(search_module, "align_profiles", counting)
    hits, _ = search_templates(query, database, max_hits=max_hits, min_aligned=min_aligned)
    reference = exhaustive_hits(query, database, max_hits=max_hits, min_aligned=min_aligned)
    assert list(hits["template"]) == [name for _, name, _, _ in reference]
    np.testing.assert_allclose(hits["evalue"], [evalue for _, _, evalue, _ in reference], rtol=1e-12)
    np.testing.assert_array_equal(hits["bitscore"], np.float32([hit.score for *_, hit in reference]))
    assert list(hits["alignment"]) == [hit.states for *_, hit in reference]
    assert list(hits["qstart"]) == [hit.query_start + 1 for *_, hit in reference]
    assert list(hits["tstart"]) == [hit.target_start + 1 for *_, hit in reference]
    positions = [position for position, *_ in reference]
    if margin is None:             # the default: one batch, fewer templates traced than there are
        assert traced == [max_hits + search_module.TRACE_MARGIN] and sum(traced) < len(database)
    elif len(reference) == max_hits:
        assert positions[-1] >= max_hits and len(traced) >= 2     # some better E-values lacked columns
    else:                          # fewer pass than asked for: every template was traced
        assert sum(traced) == len(database)


def test_numpy_and_compiled_kernels_give_the_same_hits(openfold_hits, query, database, cpu_kernels):
    hits, null = search_templates(query, database, max_hits=10, min_aligned=10)
    pd.testing.assert_frame_equal(hits, openfold_hits[0])
    assert (null.lam, null.mu) == (openfold_hits[1].lam, openfold_hits[1].mu)


def test_null_model_is_calibrated_on_held_out_decoys(query, database):
    null = fit_null(query, database.profiles, n_decoys=200, seed=0)
    held_out = decoy_profiles(database.profiles, 200, seed=99)
    p = null.pvalue(decoy_scores(query, held_out), [d.length for d in held_out])
    # measured: 0.085 below 0.05, 0.415 below 0.5; binomial sd at n = 200 is 0.015 (p = 0.05) and 0.035 (0.5)
    assert 0.01 <= np.mean(p < 0.05) <= 0.10
    assert 0.40 <= np.mean(p < 0.5) <= 0.60


def test_fit_gumbel_recovers_known_parameters():
    rng = np.random.default_rng(0)
    lam, mu = 0.9, 1.5
    lengths = rng.integers(40, 400, 4000).astype(float)
    # S = mu + (ln n + G) / lam with G standard Gumbel: P(S >= s) = 1 - exp(-n exp(-lam (s - mu)))
    scores = mu + (np.log(lengths) + rng.gumbel(size=lengths.size)) / lam
    fitted = fit_gumbel(scores, lengths)
    assert fitted.lam == pytest.approx(lam, rel=0.05)
    # μ and λ are strongly correlated (μ carries ln n / λ): compare the P-values they give
    truth = type(fitted)(lam, mu, 0)
    grid_scores, grid_lengths = np.meshgrid(np.linspace(4, 14, 21), [50.0, 150.0, 400.0])
    assert np.abs(fitted.pvalue(grid_scores, grid_lengths) - truth.pvalue(grid_scores, grid_lengths)).max() < 0.02
    with pytest.raises(ValueError, match="at least"):
        fit_gumbel(scores[:5], lengths[:5])


@pytest.fixture(scope="module")
def sequence_database(tmp_path_factory):
    """The template set without template MSAs (as the workflow builds the PDB template database): every
    template profile comes from its one sequence."""
    out = tmp_path_factory.mktemp("tdb_sequences")
    build_template_db(sorted((TEMPLATES / "structures").iterdir()), out, dssp=False)
    return load_template_db(out)


def test_one_sequence_templates_are_scored_by_lookup_with_the_same_hits(query, sequence_database, monkeypatch):
    """Columns of one-sequence template profiles are a handful of distinct rows, so the compiled kernels look
    their scores up; the scores, hits and null model are those of a score per cell (lookup off) and of the NumPy
    lane kernels. A profile from a deep MSA keeps a score per column."""
    pytest.importorskip("numba")
    from workflow_lib.aligner import hmm_kernels
    from workflow_lib.aligner.hmm_compiled import hmm_scores
    from workflow_lib.aligner.scores import pair_scores

    def stacked(db):
        return np.concatenate([pair_scores(t, query.background).scaled for t in db.profiles])

    columns = stacked(sequence_database)
    rows, codes = hmm_kernels.distinct_columns(columns)
    assert rows.shape[0] <= 21 and np.array_equal(rows[codes], columns)
    assert hmm_kernels.distinct_columns(pair_scores(query).scaled) is None      # a 1,024-row MSA's profile

    monkeypatch.setenv("TRACKFOLD_KERNELS", "compiled")
    scores = {"lookup": hmm_scores(query, sequence_database.profiles)}
    lookup, lookup_null = search_templates(query, sequence_database, max_hits=10, min_aligned=10)
    assert len(lookup) == 10
    monkeypatch.setattr(hmm_kernels, "distinct_columns", lambda stacked: None)
    scores["per cell"] = hmm_scores(query, sequence_database.profiles)
    per_cell = search_templates(query, sequence_database, max_hits=10, min_aligned=10)
    monkeypatch.setenv("TRACKFOLD_KERNELS", "numpy")
    scores["lanes"] = hmm_scores(query, sequence_database.profiles)
    lanes = search_templates(query, sequence_database, max_hits=10, min_aligned=10)
    # Margin: a float64 product may differ in its last bit between matrix shapes (the lookup's product has a
    # column per distinct row), which moves a quantized score by 1 milli-bit at a rounding tie; on this machine
    # they are equal.
    for way in ("per cell", "lanes"):
        assert np.abs(scores[way] - scores["lookup"]).max() <= 1, way
    for hits, null in (per_cell, lanes):
        assert hits["template"].tolist() == lookup["template"].tolist()
        assert hits["alignment"].tolist() == lookup["alignment"].tolist()
        np.testing.assert_allclose(hits[["evalue", "bitscore"]], lookup[["evalue", "bitscore"]], rtol=1e-3)
        assert (null.lam, null.mu) == pytest.approx((lookup_null.lam, lookup_null.mu), rel=1e-3)


def test_distinct_columns_never_merges_unequal_rows(monkeypatch):
    """The row hash only proposes groups: with every key equal, the check refuses the grouping."""
    from workflow_lib.aligner import hmm_kernels
    columns = np.repeat(np.eye(20)[:2], 10, axis=0)
    rows, codes = hmm_kernels.distinct_columns(columns)
    assert rows.shape[0] == 2 and np.array_equal(rows[codes], columns)
    monkeypatch.setattr(hmm_kernels, "_ROW_HASH", np.zeros(64, np.uint64))
    assert hmm_kernels.distinct_columns(columns) is None
