"""Metric functions of the homology-search benchmark (benchmarks/search_bench).

Hand-made cases with answers worked out by hand, plus a brute-force cross-check of ROC AUC with ties.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_bench import datasets, metrics, tools  # noqa: E402

INF = np.inf


def test_roc_auc_hand_made():
    assert metrics.roc_auc([1e-10, 1e-5], [1.0, INF]) == 1.0
    assert metrics.roc_auc([1.0], [1.0]) == 0.5
    # pos 0.1 beats neg inf (1), loses to neg 0.01 (0); pos inf ties neg inf (½), loses to 0.01 -> 1.5 / 4
    assert metrics.roc_auc([INF, 0.1], [0.01, INF]) == pytest.approx(0.375)
    assert metrics.roc_auc([5.0], [1e-3, 1e-2]) == 0.0


def test_roc_auc_matches_brute_force_with_ties():
    rng = np.random.default_rng(7)
    pos = rng.choice([1e-9, 1e-4, 0.01, 1.0, INF], size=40)
    neg = rng.choice([1e-4, 0.01, 1.0, 10.0, INF], size=55)
    brute = np.mean([[1.0 if p < n else 0.5 if p == n else 0.0 for n in neg] for p in pos])
    assert metrics.roc_auc(pos, neg) == pytest.approx(brute)


def test_sensitivity_at_fpr():
    pos = [1e-5, 1e-3, 1.0, INF]
    neg = [0.5] + [INF] * 99
    # threshold 1.0 calls 3 positives and 1 of 100 negatives: FPR 1% allowed
    assert metrics.sensitivity_at_fpr(pos, neg, 0.01) == 0.75
    # no false positive allowed: stop below 0.5
    assert metrics.sensitivity_at_fpr(pos, neg, 0.0) == 0.5
    # a positive tied with the first negative is called only together with it
    assert metrics.sensitivity_at_fpr([0.1], [0.1] + [INF] * 99, 0.0) == 0.0
    assert metrics.sensitivity_at_fpr([0.1], [0.1] + [INF] * 99, 0.01) == 1.0
    # nothing reported at all
    assert metrics.sensitivity_at_fpr([INF], [INF], 0.01) == 0.0
    with pytest.raises(ValueError):
        metrics.sensitivity_at_fpr([1.0], [1.0], 1.5)


def test_roc1():
    assert metrics.roc1([1e-5, 1e-3, 1.0], [1e-2, 5.0]) == pytest.approx(2 / 3)
    assert metrics.roc1([0.01], [0.01]) == 0.5
    assert metrics.roc1([1.0, INF], []) == 0.5           # unreported true target never counts
    assert metrics.roc1([1.0, INF], [INF, INF]) == 0.5
    assert metrics.roc1([2.0], [1e-3]) == 0.0
    with pytest.raises(ValueError):
        metrics.roc1([], [1.0])
    with pytest.raises(ValueError):
        metrics.roc1([float("nan")], [1.0])


def test_poisson_tail():
    assert metrics.poisson_tail(0, 2.0) == 1.0
    assert metrics.poisson_tail(1, 2.0) == pytest.approx(1 - np.exp(-2.0))
    assert metrics.poisson_tail(3, 0.711) == pytest.approx(1 - np.exp(-0.711) * (1 + 0.711 + 0.711 ** 2 / 2))
    assert metrics.poisson_tail(282, 250.0) == pytest.approx(0.0249, abs=0.003)  # large counts: no overflow
    assert metrics.poisson_tail(2, 0.0) == 0.0


def test_calibration_counts():
    counts = metrics.calibration_counts([0.0005, 0.005, 0.5, 5.0, 50.0, INF])
    assert counts.tolist() == [1, 2, 2, 3, 4]
    assert metrics.calibration_counts([0.01]).tolist() == [0, 1, 1, 1, 1]   # E ≤ x includes x
    assert metrics.calibration_counts([]).tolist() == [0, 0, 0, 0, 0]


def test_pfam_pair_scores_and_calibration():
    pairs = pd.DataFrame([("a", "b", "hom-pfam"), ("a", "c", "nonhom"), ("b", "c", "nonhom")],
                         columns=["a", "b", "label"])
    database = [("a", "MK"), ("b", "MK"), ("c", "MK")]
    dataset = datasets.Dataset("pfam", [("a", "MK"), ("b", "MK")], database, pairs=pairs)
    hits = pd.DataFrame([("b", "a", 1e-8), ("a", "b", 1e-2), ("a", "c", 5.0), ("a", "c", 7.0)],
                        columns=["query", "target", "evalue"])
    scores = datasets.pfam_pair_scores(dataset, hits).set_index(["a", "b"])
    assert scores.loc[("a", "b"), "evalue"] == 1e-8 and scores.loc[("a", "b"), "directions"] == 2
    assert scores.loc[("a", "c"), "evalue"] == 5.0 and scores.loc[("a", "c"), "directions"] == 1
    assert scores.loc[("b", "c"), "evalue"] == INF
    result = datasets.pfam_metrics(dataset, hits)
    assert result["roc_auc"] == 1.0
    # directed non-homologous pairs searched: a->c (5.0), b->c (none) -> 1 of 2 at E <= 10, × 3 / 2
    assert result["calibration_per_query"] == pytest.approx([0, 0, 0, 0, 1.5])


def test_cath_roc1_levels_and_calibration():
    labels = {"a": "1.10.8.10", "b": "1.10.8.20", "c": "2.40.50.140"}
    database = [(k, "MK") for k in labels]
    dataset = datasets.Dataset("cath", database, database, labels=labels)
    hits = pd.DataFrame([("a", "b", 1e-3), ("a", "c", 1e-5), ("b", "a", 1e-4), ("a", "a", 1e-50)],
                        columns=["query", "target", "evalue"])
    result = datasets.cath_metrics(dataset, hits, level="topology")
    # a: true b (1e-3) after false c (1e-5) -> 0; b: true a, no false hit -> 1; c: no same-topology partner
    assert result["queries_with_true_targets"] == 2
    assert result["mean_roc1"] == pytest.approx(0.5)
    assert result["queries_with_superfamily_partner"] == 0
    # other-superfamily hits (self hit ignored): a->b, a->c, b->a, all ≤ 1e-3; 3 queries
    assert result["calibration_per_query"] == pytest.approx([1.0, 1.0, 1.0, 1.0, 1.0])
    assert datasets.cath_metrics(dataset, hits, level="superfamily")["queries_with_true_targets"] == 0


def test_stable_subsample_is_nested_and_deterministic():
    ids = [f"p{i}" for i in range(50)]
    small = datasets.stable_subsample(ids, 5, salt="x")
    large = datasets.stable_subsample(ids, 20, salt="x")
    assert small == datasets.stable_subsample(ids, 5, salt="x")
    assert set(small) <= set(large) and len(large) == 20
    assert small == [i for i in ids if i in set(small)]      # input order kept


def test_readers(tmp_path):
    m8 = tmp_path / "hits.m8"
    m8.write_text("q1\tt1\t35.0\t100\t60\t2\t1\t100\t5\t104\t2.5e-07\t55.1\n")
    frame = tools.read_m8(m8)
    assert frame.to_dict("records") == [{"query": "q1", "target": "t1", "evalue": 2.5e-07}]
    tbl = tmp_path / "hits.tbl"
    tbl.write_text("# comment\nt1 - q1 - 3.1e-20 70.2 0.1 4e-20 69.9 0.1 1.0 1 0 0 1 1 1 1 desc words\n")
    assert tools.read_hmmer_tblout(tbl).to_dict("records") == [{"query": "q1", "target": "t1", "evalue": 3.1e-20}]


def test_replace_section_keeps_other_sections():
    from search_bench.report import replace_section

    text = "# Benchmarks\n\n## A\n\none\n\n## Mine\n\nold\n\n## B\n\ntwo\n"
    out = replace_section(text, "## Mine", "new")
    assert out == "# Benchmarks\n\n## A\n\none\n\n## Mine\n\nnew\n\n## B\n\ntwo\n"
    assert replace_section("# Benchmarks\n", "## Mine", "x") == "# Benchmarks\n\n## Mine\n\nx\n"


def test_prefilter_benchmark_summary_hand_made():
    """benchmarks/prefilter.py: reduction and lost fractions pooled over queries (worked out by hand)."""
    import prefilter as prefilter_benchmark

    def setting(gapped, lost, lost_included, passed):
        return {"seeded": 100, "gapless": gapped, "gapped": gapped, "seconds": 0.1, "lost_gapless": lost,
                "lost_gapped": lost, "lost_included_gapped": lost_included, "homologs_gapped": passed}

    default = prefilter_benchmark.setting_name(*prefilter_benchmark.GRID[0])
    result = {"set": "pfam", "n_db": 1000, "residues": 300000, "queries": [
        {"query": "a", "length": 100, "homologs": 10, "detectable": 8, "includable": 4,
         "settings": {default: setting(10, 1, 0, 9)}},
        {"query": "b", "length": 200, "homologs": 6, "detectable": 2, "includable": 1,
         "settings": {default: setting(30, 1, 1, 4)}},
    ]}
    (row,) = prefilter_benchmark.summarise(result)
    assert row["gapped"] == 20.0 and row["reduction"] == 50.0          # 1000 / mean(10, 30)
    assert row["lost_gapped"] == pytest.approx(2 / 10)                  # (1 + 1) / (8 + 2) detectable
    assert row["lost_included"] == pytest.approx(1 / 5)
    assert row["homologs_passed"] == pytest.approx(13 / 16)
    assert default == "1010011 / 5.0 / 4"                               # the default grid row, in bold
    assert f"| pfam (2, 1,000) | **{default}** |" in prefilter_benchmark.markdown([result])
