"""Search stage: gapped prefilter, E-value calibration, shard-merge equivalence, iterative MSA rules, CLI."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workflow_lib.aligner import align_targets, profile_from_sequence
from workflow_lib.aligner.profile import profile_from_alignment
from workflow_lib.cli import main
from workflow_lib.db.build import build_database
from workflow_lib.errors import InputError
from workflow_lib.search.engine import (DatabaseTotals, calibrate, calibrate_many, make_query, prefilter_query_shard,
                                        rank_hits, search_database)
from workflow_lib.search.evalue import (CALIBRATION_MAX_LENGTH, DECOY_WINDOW_LENGTH, LAMBDA, Calibration,
                                        calibration_length, fit_gumbel, fit_mu, gumbel_lambda, iid_sequences,
                                        length_slope, random_sequences)
from workflow_lib.db.build import load_kmer_index, load_shard
from workflow_lib.search.gapped import (band_pass, banded_reference, banded_scores, banded_scores_many, gapped_evalues,
                                        gapped_pass, gapped_scores, smith_waterman_reference)
from workflow_lib.search.iterative import filter_alignment, hit_row, iterate, msa_step, output_alignment, stop_reason
from workflow_lib.search.gapless import gapless_prefilter
from workflow_lib.search.seeds import profile_scores_bits
from workflow_lib.search.settings import FAST, SENSITIVE_PREFILTER, MsaSettings, SearchSettings, Settings
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.seqio.msa import Alignment, read_a3m
from workflow_lib.schemas.io import read_frame
from workflow_lib.schemas.search import HITS, MSA_STATE, MSA_STATS, SEARCH_TIMES

N_DB = 250


@pytest.fixture(scope="module")
def db_records(example_dir):
    return read_fasta(example_dir / "db" / "sprot_firmicutes_slice.fasta.gz")[:N_DB]


@pytest.fixture(scope="module")
def db_fasta(tmp_path_factory, db_records):
    folder = tmp_path_factory.mktemp("searchdb")
    path = folder / "db.fasta"
    path.write_text("".join(f">{r.id}\n{r.sequence}\n" for r in db_records))
    return path


@pytest.fixture(scope="module")
def db_one(db_fasta):
    build_database([db_fasta], db_fasta.parent / "one", shards=1)
    return db_fasta.parent / "one"


@pytest.fixture(scope="module")
def db_three(db_fasta):
    build_database([db_fasta], db_fasta.parent / "three", shards=3)
    return db_fasta.parent / "three"


@pytest.fixture(scope="module")
def queries(db_records, example_dir):
    """Two database members (self hits guaranteed) and two proteins of the example proteome."""
    proteome = read_fasta(example_dir / "proteomes" / "anaerococcus_slice.fasta")
    return [db_records[5], db_records[120], proteome[10], proteome[4]]


# ------------------------------------------------------------------------------------------------- gapped SW

def test_gapped_scores_equal_the_loop_reference_on_real_sequences(db_records, cpu_kernels):
    query = db_records[0]
    profile = profile_from_sequence(query.sequence[:60])
    scores = profile_scores_bits(profile.emissions, profile.background)
    targets = [encode(r.sequence[:80]) for r in db_records[1:9]] + [encode("W"), np.zeros(0, np.uint8),
                                                                     encode("X" * 12), encode(query.sequence)]
    got = gapped_scores(scores, targets)
    expected = [smith_waterman_reference(scores, t) for t in targets]
    assert got == pytest.approx(expected, abs=1e-3)
    assert got[-1] == max(got) and got[-1] > 60  # the query's own first 60 residues score highest


def test_gapped_scores_random_cases_and_gap_costs(cpu_kernels):
    rng = np.random.default_rng(3)
    for _ in range(15):
        scores = rng.normal(-0.5, 2.0, (int(rng.integers(1, 25)), 21)).astype(np.float32)
        targets = [rng.integers(0, 21, int(rng.integers(1, 30))).astype(np.uint8) for _ in range(5)]
        for gap_open, gap_extend in ((5.0, 1.0), (2.0, 2.0), (3.0, 0.5)):
            got = gapped_scores(scores, targets, gap_open=gap_open, gap_extend=gap_extend)
            expected = [smith_waterman_reference(scores, t, gap_open=gap_open, gap_extend=gap_extend)
                        for t in targets]
            assert got == pytest.approx(expected, abs=1e-3)
    with pytest.raises(ValueError):
        gapped_scores(scores, targets, gap_open=0.5, gap_extend=1.0)


def test_gapped_scores_full_scan_fallback_and_long_gaps(monkeypatch, cpu_kernels):
    """Gaps longer than the doubling scan covers take the full scan; both give the reference's scores."""
    import workflow_lib.search.gapped as gapped

    rng = np.random.default_rng(8)
    scores = rng.normal(-0.3, 3.0, (30, 21)).astype(np.float32)
    scores[:5, 4] = scores[-5:, 9] = 12.0                     # strong ends, far apart: worth a long gap
    targets = [np.concatenate([np.full(5, 4), rng.integers(0, 21, n), np.full(5, 9)]).astype(np.uint8)
               for n in (0, 7, 40, 90)]
    expected = [smith_waterman_reference(scores, t, gap_open=2.0, gap_extend=0.25) for t in targets]
    assert gapped_scores(scores, targets, gap_open=2.0, gap_extend=0.25) == pytest.approx(expected, abs=1e-3)
    monkeypatch.setattr(gapped, "MAX_SCAN_PAD", 2)
    assert gapped_scores(scores, targets, gap_open=2.0, gap_extend=0.25) == pytest.approx(expected, abs=1e-3)


def test_striped_smith_waterman_equals_the_lane_block_to_the_bit(db_records):
    """The compiled stage 2 (Farrar's striped layout with the lazy-F loop) gives the lane block's float32 scores
    exactly: real sequences, queries shorter than the lanes and of every remainder, gaps long enough to cross
    lanes and wrap, empty and one-residue targets."""
    pytest.importorskip("numba")
    from workflow_lib.search.gapped_compiled import STRIPE_LANES, sw_block_compiled, sw_striped_compiled
    from workflow_lib.search.gapped import _PAD

    def lane_block(scores, targets, gap_open, gap_extend):
        table = np.full((scores.shape[0], 22), _PAD, np.float32)
        table[:, :21] = scores[:, :21]
        width = max(max(t.size for t in targets), 1)
        packed = np.full((width, len(targets)), 21, np.intp)
        for lane, t in enumerate(targets):
            packed[:t.size, lane] = t
        return table, sw_block_compiled(table, packed, gap_open, gap_extend)

    rng = np.random.default_rng(11)
    cases = []
    for record in db_records[:6]:
        profile = profile_from_sequence(record.sequence)
        cases.append((profile_scores_bits(profile.emissions, profile.background),
                      [encode(r.sequence) for r in db_records[6:30]] + [encode(record.sequence)]))
    for length in (1, 5, STRIPE_LANES - 1, STRIPE_LANES, STRIPE_LANES + 1, 3 * STRIPE_LANES + 7, 200):
        scores = rng.normal(-0.8, 2.5, (length, 21)).astype(np.float32)
        scores[: max(length // 6, 1), 3] = scores[-max(length // 6, 1):, 7] = 9.0   # strong ends: long gaps pay
        targets = [rng.integers(0, 21, int(rng.integers(1, 90))).astype(np.uint8) for _ in range(12)]
        targets += [np.concatenate([np.full(8, 3), np.full(8, 7)]).astype(np.uint8), np.zeros(1, np.uint8)]
        cases.append((scores, targets))
    for scores, targets in cases:
        for gap_open, gap_extend in ((5.0, 1.0), (2.0, 0.25), (3.0, 3.0)):
            table, expected = lane_block(scores, targets, gap_open, gap_extend)
            got = sw_striped_compiled(table, targets, gap_open, gap_extend)
            np.testing.assert_array_equal(got, expected)
            assert np.array_equal(gapped_scores(scores, targets, gap_open=gap_open, gap_extend=gap_extend,
                                                striped=False), expected)
    assert sw_striped_compiled(table, [np.zeros(0, np.uint8)], 5.0, 1.0).tolist() == [0.0]


def test_gapped_pass_skips_only_sure_targets_and_keeps_the_same_set(db_one, queries):
    """Skipping SW for targets whose gapless score clears the stage-2 threshold changes nothing: the gapless
    score is a lower bound of the SW score, and the passed set equals SW on every survivor."""
    shard, index = load_shard(db_one, 0), load_kmer_index(db_one, 0)
    checked = 0
    for record in queries:
        profile = profile_from_sequence(record.sequence)
        scores = profile_scores_bits(profile.emissions, profile.background)
        # a low gapless pass, so that survivors reach down to and below the stage-2 threshold
        gapless = gapless_prefilter(scores, index, shard.residues, shard.offsets, offset_bits=-6.0)
        targets = [shard.sequence(int(s)) for s in gapless.sequence]
        sw = gapped_scores(scores, targets)
        assert np.all(gapless.score <= sw + 1e-3)
        lengths = np.array([t.size for t in targets])
        for db_sequences, max_evalue in ((250, 1000.0), (20_000, 1000.0), (10**7, 1000.0), (20_000, 10.0)):
            passed, runs = gapped_pass(scores, targets, gapless.score, db_sequences, max_evalue=max_evalue)
            expected = np.flatnonzero(gapped_evalues(sw, profile.length, lengths, db_sequences) < max_evalue)
            np.testing.assert_array_equal(passed, expected)
            assert runs <= len(targets)
            checked += len(targets)
        # a small database: the self hit and other strong targets pass without SW, the weak ones need it
        _, runs = gapped_pass(scores, targets, gapless.score, 250)
        assert 0 < runs < len(targets)
    assert checked > 100


def test_banded_scores_equal_the_banded_loop_reference(db_records, cpu_kernels):
    """Real sequences and random cases, bands cut off by either end of the target, several gap costs."""
    query = db_records[3]
    profile = profile_from_sequence(query.sequence[:70])
    scores = profile_scores_bits(profile.emissions, profile.background)
    targets = [encode(r.sequence[:90]) for r in db_records[10:16]] + [encode(query.sequence[5:80]), encode("W")]
    centers = np.array([0, 3, -20, 40, -85, 95, -5, 0])
    for band in (8, 16, 32):
        got = banded_scores(scores, targets, centers, band=band)
        expected = [banded_reference(scores, t, int(c), band=band) for t, c in zip(targets, centers)]
        assert got == pytest.approx(expected, abs=1e-3)
    assert got[6] > 100  # the query's own residues 6-75, on diagonal -5
    rng = np.random.default_rng(11)
    for _ in range(12):
        scores = rng.normal(-0.3, 2.5, (int(rng.integers(1, 30)), 21)).astype(np.float32)
        targets = [rng.integers(0, 21, int(rng.integers(1, 40))).astype(np.uint8) for _ in range(6)]
        centers = rng.integers(-35, 40, 6)
        for gap_open, gap_extend in ((5.0, 1.0), (2.0, 0.5)):
            got = banded_scores(scores, targets, centers, band=16, gap_open=gap_open, gap_extend=gap_extend,
                                lane_cells=16 * 4)  # blocks of 4 lanes: a partial last block
            expected = [banded_reference(scores, t, int(c), band=16, gap_open=gap_open, gap_extend=gap_extend)
                        for t, c in zip(targets, centers)]
            assert got == pytest.approx(expected, abs=1e-3)
    assert banded_scores(scores, targets, centers, band=13) == pytest.approx(
        [banded_reference(scores, t, int(c), band=13) for t, c in zip(targets, centers)], abs=1e-3)
    with pytest.raises(ValueError, match="at least 1 diagonal"):
        banded_scores(scores, targets, centers, band=0)
    with pytest.raises(ValueError, match="one value per target"):
        banded_scores(scores, targets, centers[:2])


def test_banded_scores_of_many_queries_equal_one_query_at_a_time(cpu_kernels):
    """Lanes of queries of different lengths share blocks (shorter queries padded): the same scores."""
    rng = np.random.default_rng(5)
    tables = [rng.normal(-0.5, 2.5, (n, 21)).astype(np.float32) for n in (1, 7, 33, 50, 12)]
    targets = [rng.integers(0, 21, int(rng.integers(1, 70))).astype(np.uint8) for _ in range(40)]
    query_of, centers = rng.integers(0, 5, 40), rng.integers(-50, 50, 40)
    many = banded_scores_many(tables, query_of, targets, centers, band=16, lane_cells=16 * 7)
    alone = [banded_scores(tables[q], [t], [c], band=16)[0] for q, t, c in zip(query_of, targets, centers)]
    assert many == pytest.approx(alone, abs=1e-4)
    assert many == pytest.approx([banded_reference(tables[q], t, int(c), band=16)
                                  for q, t, c in zip(query_of, targets, centers)], abs=1e-3)


def test_banded_scores_lie_between_the_gapless_and_the_full_score(db_one, queries, cpu_kernels):
    """On a real shard: a band around the best gapless diagonal scores at least that diagonal and at most the
    full Smith-Waterman; a band as wide as both sequences is the full Smith-Waterman."""
    shard, index = load_shard(db_one, 0), load_kmer_index(db_one, 0)
    for record in queries:
        profile = profile_from_sequence(record.sequence)
        scores = profile_scores_bits(profile.emissions, profile.background)
        gapless = gapless_prefilter(scores, index, shard.residues, shard.offsets, offset_bits=-3.0)
        targets = [shard.sequence(int(s)) for s in gapless.sequence]
        banded = banded_scores(scores, targets, gapless.diagonal)
        full = gapped_scores(scores, targets)
        assert np.all(gapless.score <= banded + 1e-3) and np.all(banded <= full + 1e-3)
        assert np.any(banded > gapless.score + 1.0) and np.any(banded < full - 1.0)
        wide = 8 * (-(-2 * (profile.length + max(t.size for t in targets)) // 8))
        assert banded_scores(scores, targets[:20], np.zeros(20, np.int64), band=wide) == \
            pytest.approx(full[:20], abs=1e-3)


def test_band_pass_scores_only_the_gate_window(db_one, queries):
    """Targets above the direct pass keep their gapless score and pass; the others pass on their banded score."""
    shard, index = load_shard(db_one, 0), load_kmer_index(db_one, 0)
    record = queries[2]
    profile = profile_from_sequence(record.sequence)
    scores = profile_scores_bits(profile.emissions, profile.background)
    gapless = gapless_prefilter(scores, index, shard.residues, shard.offsets, offset_bits=-1.0)
    targets = [shard.sequence(int(s)) for s in gapless.sequence]
    space = np.log2(profile.length * np.array([t.size for t in targets], dtype=np.float64))
    kept, bits = band_pass(scores, targets, gapless.diagonal, gapless.score, gapless_offset=4.5, band_offset=6.0)
    sure = gapless.score > 4.5 + space
    banded = banded_scores(scores, targets, gapless.diagonal)
    expected = np.flatnonzero(sure | (banded > 6.0 + space))
    np.testing.assert_array_equal(kept, expected)
    np.testing.assert_allclose(bits[sure], gapless.score[sure])
    np.testing.assert_allclose(bits[~sure], np.maximum(gapless.score, banded)[~sure], atol=1e-4)
    assert 0 < np.count_nonzero(~sure & (banded > 6.0 + space)) and np.count_nonzero(~sure) > len(kept) - sure.sum()


def test_search_with_the_band_stage_off_is_the_single_gapless_pass(db_one, queries):
    """A band gate at the direct pass turns stage 1b off: the search is HHblits' gapless pass at that offset;
    the default (band on, direct pass at 4.5) keeps every target that direct pass keeps."""
    totals = DatabaseTotals.from_manifest(db_one)
    shard, index = load_shard(db_one, 0), load_kmer_index(db_one, 0)
    for record in queries:
        query = make_query(record.id, profile_from_sequence(record.sequence), totals, FAST.search)
        single_pass = dataclasses.replace(FAST.search, gapless_offset=2.5, band_gate=2.5)
        off = prefilter_query_shard(query, shard, index, totals, single_pass)
        scores = profile_scores_bits(query.profile.emissions, query.profile.background)
        seed = gapless_prefilter(scores, index, shard.residues, shard.offsets, offset_bits=2.5)
        np.testing.assert_array_equal(off.gapless.sequence, seed.sequence)
        on = prefilter_query_shard(query, shard, index, totals, FAST.search)
        direct = gapless_prefilter(scores, index, shard.residues, shard.offsets, offset_bits=4.5)
        assert set(direct.sequence) <= set(on.gapless.sequence)


def test_gapped_evalue_is_the_seed_formula():
    assert gapped_evalues(np.array([10.0]), 100, np.array([200]), 1000)[0] == pytest.approx(1000 * 100 * 200 / 1024)


# ------------------------------------------------------------------------------------------------- E-values

def test_gumbel_fits_recover_known_parameters():
    rng = np.random.default_rng(0)
    mu, lam = 3.0, np.log(2.0)
    x = mu - np.log(-np.log(rng.random(20000))) / lam
    assert fit_mu(x, lam) == pytest.approx(mu, abs=0.05)
    fitted_mu, fitted_lam = fit_gumbel(x)
    assert fitted_lam == pytest.approx(lam, rel=0.03)
    assert fitted_mu == pytest.approx(mu, abs=0.06)
    calibration = Calibration(mu)
    # P(S > mu + log2(Lt)) = 1 - exp(-1)
    assert calibration.pvalues(np.array([mu + 8.0]), np.array([256]))[0] == pytest.approx(1 - np.exp(-1))


def test_length_corrected_score_and_its_validation():
    calibration = Calibration(2.0, 0.65, 0.2, 200.0)
    # at the reference length the slope term vanishes; each doubling beyond it costs 1 + slope bits
    assert calibration.corrected(np.array([10.0]), np.array([200]))[0] == pytest.approx(10.0 - np.log2(200))
    assert calibration.corrected(np.array([10.0]), np.array([800]))[0] == pytest.approx(10.0 - np.log2(800) - 0.4)
    assert calibration.pvalues(np.array([2.0 + np.log2(200)]), np.array([200]))[0] == pytest.approx(1 - np.exp(-1))
    for bad in ((np.nan, LAMBDA), (1.0, 0.0), (1.0, -0.5)):
        with pytest.raises(ValueError, match="invalid Gumbel calibration"):
            Calibration(*bad)
    with pytest.raises(ValueError):
        Calibration(1.0, LAMBDA, 0.1, 0.0)


def test_lambda_and_slope_models_follow_the_measured_trends():
    """λ falls and the length slope rises with the query's length and Neff (benchmarks/RESULTS.md); both stay
    in their bounds for any input."""
    assert gumbel_lambda(1.0, 250) == pytest.approx(0.689, abs=0.002)
    assert gumbel_lambda(6.0, 550) == pytest.approx(0.625, abs=0.002)
    assert gumbel_lambda(1.0, 100) > gumbel_lambda(1.0, 800) > gumbel_lambda(8.0, 800)
    assert length_slope(1.0, 100) < length_slope(1.0, 800) < length_slope(8.0, 800)
    for neff, length in ((0.0, 1), (1.0, 10), (1e6, 100_000)):
        assert 0.55 <= gumbel_lambda(neff, length) <= 0.80 and 0.0 <= length_slope(neff, length) <= 0.35


def test_evalues_hold_for_targets_far_longer_than_the_calibration():
    """An MSA profile (Pfam Pkinase seed, 259 columns, Neff 6.8) against random targets of 1,200 residues (12×
    the calibration length): the fraction with P <= 0.05 stays near 0.05. The old model (λ = ln 2, ``log2(Lt)``
    only, fitted at the database mean length) puts 7% there, and 1.6% at P <= 0.01."""
    profile = profile_from_alignment(read_a3m(Path(__file__).parent / "data" / "aligner" / "hhm" / "pkinase.a3m"))
    calibration = calibrate(profile, DatabaseTotals("x", 1000, 1000 * 374), 128)
    assert calibration.reference_length == CALIBRATION_MAX_LENGTH and calibration.lam < 0.66 and calibration.slope > 0.1
    targets = iid_sequences(profile.background, 1200, 1000, 99)
    scores = np.array([hit.score for hit in align_targets(profile, targets, cpus=1)])
    lengths = np.full(scores.size, 1200)
    fraction = float(np.mean(calibration.pvalues(scores, lengths) <= 0.05))
    assert 0.035 <= fraction <= 0.065, fraction
    at_mean_length = iid_sequences(profile.background, 374, 128, 5)
    at_mean = np.array([hit.score for hit in align_targets(profile, at_mean_length, cpus=1)])
    old_model = Calibration(fit_mu(at_mean - np.log2(374)))
    assert float(np.mean(old_model.pvalues(scores, lengths) <= 0.05)) >= fraction + 0.01


def test_min_bits_is_the_score_where_the_evalue_reaches_the_limit():
    calibration = Calibration(12.0, 0.68, 0.2, 100.0)
    lengths = np.array([30, 100, 450, 2000])
    for limit in (1e-3, 1.0, 10.0):
        bits = calibration.min_bits(limit, lengths, 5000)
        assert calibration.evalues(bits, lengths, 5000) == pytest.approx(np.full(4, limit), rel=1e-9)
        assert np.all(calibration.evalues(bits - 0.01, lengths, 5000) > limit)
    assert np.all(calibration.min_bits(10.0, lengths, 10) == -np.inf)  # every score is reported


def test_search_traces_only_targets_that_can_be_reported(db_records, queries):
    """``trace_from``: targets below their score come back score-only; the others get the same alignment."""
    profile = profile_from_sequence(queries[0].sequence)
    targets = [encode(record.sequence) for record in db_records[:40]]
    full = align_targets(profile, targets, backtrace=True, cpus=1)
    scores = np.array([hit.score for hit in full])
    cut = np.full(len(targets), float(np.median(scores)))
    traced = align_targets(profile, targets, backtrace=True, cpus=1, trace_from=cut)
    assert [hit.raw_score for hit in traced] == [hit.raw_score for hit in full]
    for hit, reference in zip(traced, full):
        if reference.score >= cut[0]:
            assert (hit.query_start, hit.query_end, hit.target_start, hit.target_end, hit.states) == \
                (reference.query_start, reference.query_end, reference.target_start, reference.target_end,
                 reference.states)
            assert np.array_equal(hit.pairs, reference.pairs)
        else:
            assert hit.aligned_columns == 0 and hit.query_start == -1
    assert 0 < sum(hit.aligned_columns > 0 for hit in traced) < len(targets)
    with pytest.raises(ValueError, match="trace_from"):
        align_targets(profile, targets, backtrace=True, cpus=1, trace_from=cut[:3])


def test_calibration_is_deterministic_and_depends_on_database_totals_only(queries):
    profile = profile_from_sequence(queries[2].sequence)
    a = calibrate(profile, DatabaseTotals("x", 1000, 300_000), 64)
    b = calibrate(profile, DatabaseTotals("y", 1000, 300_000), 64)
    assert a == b
    assert calibrate(profile, DatabaseTotals("x", 1000, 900_000), 64) == a  # both calibrate at 100 residues
    shorter = calibrate(profile, DatabaseTotals("x", 1000, 60_000), 64)
    assert shorter.reference_length == 60 and a.reference_length == 100
    assert abs(shorter.mu - a.mu) < 0.5  # the length correction keeps mu nearly length-free


def test_calibrations_are_the_same_in_one_process_and_in_two(queries):
    """``cpus`` only spreads whole profiles over processes: every μ, λ and slope is the same."""
    profiles = [profile_from_sequence(record.sequence) for record in queries[:3]]
    totals = DatabaseTotals("x", 1000, 300_000)
    one = calibrate_many(profiles, totals, 32, cpus=1)
    assert calibrate_many(profiles, totals, 32, cpus=2) == one
    assert one == [calibrate(profile, totals, 32) for profile in profiles]


def test_false_hits_per_query_stay_near_the_evalue(tmp_path, db_records, queries):
    """Against residue-shuffled database sequences (no homologs), hits with E <= 1 average about 1 per query."""
    rng = np.random.default_rng(7)
    shuffled = ["".join(rng.permutation(list(r.sequence))) for r in db_records[:200]]
    (tmp_path / "shuffled.fasta").write_text("".join(f">s{k}\n{s}\n" for k, s in enumerate(shuffled)))
    build_database([tmp_path / "shuffled.fasta"], tmp_path / "db", shards=1)
    totals = DatabaseTotals.from_manifest(tmp_path / "db")
    settings = dataclasses.replace(FAST.search, gapless_offset=-100.0, gapped_max_evalue=np.inf, max_evalue=10.0)
    found = []
    for record in queries[1:]:
        query = make_query(record.id, profile_from_sequence(record.sequence), totals, settings)
        hits, _ = search_database([query], tmp_path / "db", settings)
        found.append(hits["evalue"].to_numpy())
    per_query_at_1 = np.mean([(e <= 1.0).sum() for e in found])
    per_query_at_10 = np.mean([(e <= 10.0).sum() for e in found])
    assert per_query_at_1 <= 4.0
    assert 1.0 <= per_query_at_10 <= 40.0


# --------------------------------------------------------------------------------------- search and shards

def test_sharded_ranking_equals_unsharded(db_one, db_three, queries):
    totals = DatabaseTotals.from_manifest(db_one)
    assert totals.sequences == DatabaseTotals.from_manifest(db_three).sequences
    prepared = [make_query(r.id, profile_from_sequence(r.sequence), totals, FAST.search) for r in queries]
    one, _ = search_database(prepared, db_one, FAST.search)
    three, _ = search_database(prepared, db_three, FAST.search)
    columns = ["query", "target", "evalue", "bitscore", "qstart", "qend", "tstart", "tend", "alignment"]
    pd.testing.assert_frame_equal(one[columns], three[columns])
    # the database members find themselves first, with a tiny E-value
    for record in queries[:2]:
        own = one[one["query"] == record.id]
        assert own.iloc[0]["target"] == record.id
        assert own.iloc[0]["evalue"] < 1e-20
        assert own.iloc[0]["identity"] == pytest.approx(1.0)
    # shards searched one by one and merged give the same ranking
    parts = [search_database(prepared, db_three, FAST.search, shards=[s])[0] for s in range(3)]
    merged = rank_hits(pd.concat(parts, ignore_index=True), [q.name for q in prepared])
    pd.testing.assert_frame_equal(merged[columns], three[columns])


def test_search_hits_do_not_depend_on_processes_or_query_batches(db_one, queries, monkeypatch):
    """Queries are prefiltered in batches (their banded stage shares one kernel call) spread over processes:
    neither the batch size nor the process count changes a hit."""
    import workflow_lib.search.engine as engine

    totals = DatabaseTotals.from_manifest(db_one)
    prepared = [make_query(r.id, profile_from_sequence(r.sequence), totals, FAST.search) for r in queries]
    assert engine._batches(5, 1) == [range(0, 5)]
    assert engine._batches(40, 2) == [range(0, 10), range(10, 20), range(20, 30), range(30, 40)]
    one, _ = search_database(prepared, db_one, FAST.search, cpus=1)
    two, _ = search_database(prepared, db_one, FAST.search, cpus=2)
    monkeypatch.setattr(engine, "QUERY_BATCH", 1)
    single, _ = search_database(prepared, db_one, FAST.search, cpus=1)
    columns = ["query", "target", "evalue", "bitscore", "qstart", "qend", "tstart", "tend", "alignment"]
    pd.testing.assert_frame_equal(one[columns], two[columns])
    pd.testing.assert_frame_equal(one[columns], single[columns])


def test_search_shard_searches_shortest_first_and_returns_the_given_order(db_one, queries, monkeypatch):
    """The queries reach the prefilter shortest first (one padded layout per length class), and the results
    come back in the caller's order, each the same as the query searched alone."""
    import workflow_lib.search.engine as engine
    from workflow_lib.db.build import load_kmer_index, load_shard

    totals = DatabaseTotals.from_manifest(db_one)
    prepared = [make_query(r.id, profile_from_sequence(r.sequence), totals, FAST.search) for r in queries]
    lengths = [q.profile.length for q in prepared]
    assert lengths != sorted(lengths)                       # the fixture's order is not already by length
    shard, index = load_shard(db_one, 0), load_kmer_index(db_one, 0)
    seen: list[int] = []
    original = engine.prefilter_queries_shard

    def recording(batch, *args, **kwargs):
        seen.extend(q.profile.length for q in batch)
        return original(batch, *args, **kwargs)

    monkeypatch.setattr(engine, "prefilter_queries_shard", recording)
    together = engine.search_shard(prepared, shard, index, totals, FAST.search)
    assert seen == sorted(lengths)
    assert sum(len(result.hits) for result in together) > len(prepared)
    assert engine.by_length(prepared) == sorted(range(len(prepared)), key=lambda k: lengths[k])
    columns = ["query", "target", "evalue", "bitscore", "qstart", "qend", "tstart", "tend", "alignment"]
    for query, result in zip(prepared, together):
        alone = engine.search_shard([query], shard, index, totals, FAST.search)[0]
        assert set(result.hits["query"]) <= {query.name}
        pd.testing.assert_frame_equal(result.hits[columns].reset_index(drop=True),
                                      alone.hits[columns].reset_index(drop=True))


def test_prefilter_thresholds_cut_the_candidates(db_one, queries):
    totals = DatabaseTotals.from_manifest(db_one)
    query = make_query(queries[0].id, profile_from_sequence(queries[0].sequence), totals, FAST.search)
    loose, _ = search_database([query], db_one, dataclasses.replace(FAST.search, max_evalue=1e6))
    strict, _ = search_database([query], db_one,
                                dataclasses.replace(FAST.search, max_evalue=1e6, gapped_max_evalue=1e-8))
    assert len(strict) < len(loose)
    assert set(strict["target"]) <= set(loose["target"])
    assert queries[0].id in set(strict["target"])


# ------------------------------------------------------------------------------------ MSA rules and filters

def _alignment(rows):
    return Alignment.from_a3m_rows([f"s{k}" for k in range(len(rows))], [""] * len(rows), rows)


def test_hit_row_places_matches_insertions_and_deletions():
    # query length 8; hit covers query columns 2..7 with one deletion and two inserted target residues
    row = hit_row("MMIIMDMM", 2, 7, "ACDEFGH", 8)
    assert row == "-ACdeF-GH-"
    assert _alignment(["ABCDEFGH".replace("B", "A"), row]).length == 8


def test_filters_drop_redundant_and_low_coverage_rows():
    rows = ["ACDEFGHIKL",
            "ACDEFGHIKL",      # identical to the query: redundant
            "ACDEFGHIKV",      # 90% identical: kept at max_identity 0.9 (must exceed 90% to drop)
            "WWWWWGHIKL",      # 50% identical
            "-----WHIKL",      # 50% coverage, 80% identical over the overlap
            "--------KL"]      # 20% coverage
    filtered = filter_alignment(_alignment(rows), max_identity=0.9, min_coverage=0.5)
    assert filtered.names == ("s0", "s2", "s3", "s4")
    stricter = filter_alignment(_alignment(rows), max_identity=0.85, min_coverage=0.6)
    assert stricter.names == ("s0", "s3")


def test_stop_rules_and_convergence():
    rows = ["ACDEFGHIKL", "ACDEWGHIKV", "MCDEFGHWKL", "-----GHIKL"]
    assert stop_reason(_alignment(rows), ((2, 0.75),)) == "2 sequences with coverage >= 75%"
    assert stop_reason(_alignment(rows), ((3, 0.75),)) == ""
    assert stop_reason(_alignment(rows), ((3, 0.5),)) != ""
    empty = pd.DataFrame(columns=list(HITS.schema.names))
    settings = MsaSettings(iterations=3)
    alignment, included, new, converged, reason = msa_step("q", "", "ACDEFGHIKL", empty, None, 1, settings)
    assert (alignment.depth, included, new, converged, reason) == (1, 0, 0, True, "no new sequences")
    # after a deferred (cheaper) prefilter "no new sequences" does not stop the query; the depth rules still do
    assert msa_step("q", "", "ACDEFGHIKL", empty, None, 1, settings, deferred=True)[3:] == (False, "")
    assert msa_step("q", "", "ACDEFGHIKL", empty, None, 1, MsaSettings(stop_rules=((0, 0.5),)),
                    deferred=True)[3:] == (True, "0 sequences with coverage >= 50%")


def _hit(target, evalue, qstart, qend, states, tseq, qlen=10):
    return {"query": "q", "target": target, "evalue": evalue, "bitscore": 30.0, "qstart": qstart, "qend": qend,
            "tstart": 1, "tend": len(tseq), "qlen": qlen, "tlen": len(tseq), "identity": 0.5,
            "aligned_cols": states.count("M"), "alignment": states, "iteration": 1, "database": "db", "tseq": tseq}


def test_partial_hits_feed_the_next_profile_but_not_the_output_msa():
    """A homolog covering 30% of the query joins the search MSA (HHblits' -cov 0) but not the output A3M
    (-cov 50); a coverage filter on the search MSA drops it there too."""
    query = "ACDEFGHIKL"
    hits = pd.DataFrame([_hit("full", 1e-20, 1, 10, "M" * 10, "ACDEWGHIKV"),
                         _hit("part", 1e-5, 4, 6, "MMM", "KWN"),
                         _hit("weak", 1.0, 1, 10, "M" * 10, "MCDEFGHWKL")])   # above the inclusion E-value
    search, included, new, converged, reason = msa_step("q", "", query, hits, None, 1, MsaSettings())
    assert search.names == ("q", "full", "part") and (included, new, converged) == (2, 2, False)
    assert output_alignment(search, MsaSettings()).names == ("q", "full")
    assert output_alignment(search, MsaSettings(min_coverage=0.3)).names == ("q", "full", "part")
    strict = MsaSettings(profile_min_coverage=0.5)
    assert msa_step("q", "", query, hits, None, 1, strict)[0].names == ("q", "full")
    # the next iteration keeps the partial row although it was not found again
    again, _, new, _, _ = msa_step("q", "", query, hits.iloc[:1], search, 2, MsaSettings())
    assert again.names == ("q", "full", "part") and new == 0
    with pytest.raises(ValueError, match="profile_min_coverage"):
        MsaSettings(min_coverage=0.5, profile_min_coverage=0.6)


def test_hits_the_redundancy_filter_drops_are_not_new():
    """The query's own database entry and a near-identical ortholog are found in every iteration; they never
    reach the filtered MSA, so they must not keep the protein iterating."""
    query = "ACDEFGHIKLMNPQRSTVWY"
    hits = pd.DataFrame([_hit("self", 1e-30, 1, 20, "M" * 20, query, qlen=20),
                         _hit("ortholog", 1e-25, 1, 20, "M" * 20, "ACDEFGHIKLMNPQRSTVWF", qlen=20)])
    alignment, included, new, converged, reason = msa_step("q", "", query, hits, None, 1, MsaSettings())
    assert alignment.names == ("q",) and (included, new, converged, reason) == (2, 0, True, "no new sequences")
    distant = pd.concat([hits, pd.DataFrame([_hit("distant", 1e-8, 1, 20, "M" * 20, "ACDEFGHIKLWWWWWWWWWW",
                                                  qlen=20)])], ignore_index=True)
    first = msa_step("q", "", query, distant, None, 1, MsaSettings())
    assert first[0].names == ("q", "distant") and first[2:4] == (1, False)
    second = msa_step("q", "", query, distant, first[0], 2, MsaSettings())
    assert second[2:5] == (0, True, "no new sequences")


def test_the_iteration_loop_searches_the_active_queries_and_advances_each(monkeypatch):
    """:func:`iterations`, the one loop (``build_msas``, ``iterate``; the workflow's jobs take its step,
    :func:`advance`): each iteration searches only the queries not yet converged, with the profile of the last
    search MSA; a deferred iteration does not stop a query for "no new sequences"; times add up per query."""
    from workflow_lib.search.iterative import QueryState, advance, iterations
    query = "ACDEFGHIKL"
    rows = {"a": [_hit("t1", 1e-20, 1, 10, "M" * 10, "ACDEWGHIKV")],        # new in iteration 1, then nothing new
            "b": []}                                                           # no homologs
    searched = []

    def search(names, profiles, iteration):
        searched.append((iteration, list(names), [p.length for p in profiles]))
        frame = pd.DataFrame([{**hit, "query": name, "iteration": iteration} for name in names for hit in rows[name]],
                             columns=list(HITS.schema.names))
        return frame, {name: 1.0 for name in names}

    settings = FAST.replace(iterations=3).msa
    states = [QueryState("a", "", query), QueryState("b", "", query)]
    steps = list(iterations(states, search, settings))
    assert [iteration for iteration, _ in steps] == [1, 2]
    assert searched[0][1] == ["a", "b"] and searched[1][1] == ["a"]       # b converged in iteration 1
    first = dict(steps[0][1])
    assert (first[0].included, first[0].new, first[0].converged) == (1, 1, False)
    assert (first[1].new, first[1].converged, first[1].reason) == (0, True, "no new sequences")
    assert steps[1][1][0][1].reason == "no new sequences" and states[0].alignment.names == ("a", "t1")
    assert states[0].iteration == 2 and states[0].seconds == sum(r.seconds for _, it in steps for k, r in it if k == 0)
    # deferred: iteration 1 does not stop b, which is searched again
    states = [QueryState("a", "", query), QueryState("b", "", query)]
    searched.clear()
    list(iterations(states, search, settings, defers=lambda iteration: iteration == 1))
    assert searched[1][1] == ["a", "b"] and states[1].iteration == 2
    # the workflow's merge job takes the same step
    state = QueryState("a", "", query)
    result = advance(state, pd.DataFrame(rows["a"]), 1, settings, seconds=0.5)
    assert (result.included, state.converged, state.seconds, state.alignment.names) == (1, False, 0.5, ("a", "t1"))


def test_profile_coverage_settings_are_checked(tmp_path, capsys):
    from workflow_lib.workflow.config import SearchConfig
    fasta = tmp_path / "q.fasta"
    fasta.write_text(">q\nACDEFGHIKL\n")
    assert main(["search", str(fasta), "--db", str(tmp_path), "--out", str(tmp_path / "h.parquet"),
                 "--profile-min-coverage", "0.7"]) != 0
    assert "--profile-min-coverage must be in [0, --min-coverage = 0.5], got 0.7" in capsys.readouterr().err
    with pytest.raises(InputError, match="search.profile_min_coverage"):
        SearchConfig(profile_min_coverage=0.6)
    assert "--profile-min-coverage 0.0" in SearchConfig().cli_options()


def test_sensitive_prefilter_settings(tmp_path, capsys):
    import argparse

    from workflow_lib.search.settings import (FAST_SEED_BUDGET, FIRST_ITERATION_PREFILTER, SEED_BUDGET,
                                              add_settings_arguments, settings_from_args)
    from workflow_lib.workflow.config import SearchConfig
    fast = FAST.search
    assert (fast.kmer_slack, fast.diagonals_per_target, fast.gapless_offset) == (0.0, 4, 4.5)
    assert (fast.calibration, fast.prefilter_composition, fast.first_iteration_prefilter) == ("random", 0.0, ())
    sensitive = FAST.replace(sensitive=True).search
    assert (sensitive.kmer_threshold, sensitive.diagonals_per_target, sensitive.gapless_offset) == (None, 8, 0.0)
    # the sensitive prefilter from iteration 2 on and in a one-iteration search; iteration 1 of several: the fast
    # one at the first iteration's seed budget
    for iteration, iterations in ((2, 3), (3, 3), (1, 1)):
        assert sensitive.for_iteration(iteration, iterations) is sensitive
        assert not sensitive.defers(iteration, iterations)
    assert sensitive.defers(1, 3) and sensitive.for_iteration(1, 3) == dataclasses.replace(fast, seed_budget=SEED_BUDGET)
    assert dataclasses.replace(sensitive, first_iteration_prefilter=()) == \
        dataclasses.replace(fast, **SENSITIVE_PREFILTER)
    assert not fast.defers(1, 3) and fast.for_iteration(1, 3) == fast
    # the library's default is the product's: context pseudocounts and the sensitive prefilter
    assert SearchSettings() == Settings().search and MsaSettings() == Settings().msa
    assert SearchSettings().first_iteration_prefilter == tuple(FIRST_ITERATION_PREFILTER.items())
    assert Settings().search == dataclasses.replace(sensitive, calibration="reversed", prefilter_composition=0.5)
    # a value given explicitly holds in every iteration
    offset = FAST.replace(sensitive=True, gapless_offset=1.0).search.for_iteration(1, 3)
    assert (offset.gapless_offset, offset.diagonals_per_target, offset.seed_threshold(4)) == (1.0, 4, 4.5)
    # the seed threshold follows the index's k: 1.5 (k - 1) bits, 0.5 lower when sensitive, unless one is given
    assert [fast.seed_threshold(k) for k in (3, 4)] == [3.0, 4.5]
    assert [sensitive.seed_threshold(k) for k in (3, 4)] == [2.5, 4.0]
    mixed = Settings(kmer_threshold=3.0, max_evalue=1.0).search
    assert (mixed.kmer_threshold, mixed.diagonals_per_target, mixed.max_evalue) == (3.0, 8, 1.0)
    assert mixed.seed_threshold(4) == 3.0
    with pytest.raises(ValueError, match="diagonals_per_target must be at least 1"):
        Settings(diagonals_per_target=0)
    with pytest.raises(ValueError, match="kmer_threshold must be a finite"):
        Settings(kmer_threshold=float("-inf"))

    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    search = settings_from_args(parser.parse_args(["--sensitive", "--gapless-offset", "1.0"])).search
    assert (search.seed_threshold(3), search.diagonals_per_target, search.gapless_offset) == (2.5, 8, 1.0)
    # the command line's default is the library's (the sensitive prefilter, context pseudocounts); --no-sensitive
    # with substitution pseudocounts gives the fast preset
    assert settings_from_args(parser.parse_args([])) == Settings()
    substitution = ["--pseudocounts", "substitution"]
    assert settings_from_args(parser.parse_args(substitution)).search == FAST.replace(sensitive=True).search
    assert settings_from_args(parser.parse_args([*substitution, "--no-sensitive"])) == FAST

    fasta = tmp_path / "q.fasta"
    fasta.write_text(">q\nACDEFGHIKL\n")
    assert main(["search", str(fasta), "--db", str(tmp_path), "--out", str(tmp_path / "h.parquet"),
                 "--diagonals-per-target", "0"]) != 0
    assert "--diagonals-per-target must be at least 1, got 0" in capsys.readouterr().err
    for option in ("--band-gate", "--band-offset"):
        assert main(["search", str(fasta), "--db", str(tmp_path), "--out", str(tmp_path / "h.parquet"),
                     option, "nan"]) != 0
        assert f"{option} must be a finite number of bits" in capsys.readouterr().err
    band = settings_from_args(parser.parse_args(["--band-gate", "-3", "--band-offset", "7", "--no-sensitive"])).search
    assert (band.band_gate, band.band_offset, band.gapless_offset) == (-3.0, 7.0, fast.gapless_offset)
    with pytest.raises(InputError, match="search.band_gate must be a finite"):
        SearchConfig(band_gate=float("inf"))
    assert "--band-gate -3.0 --band-offset 7.0" in SearchConfig(band_gate=-3.0, band_offset=7.0).cli_options()

    assert " --no-sensitive" in SearchConfig(sensitive=False).cli_options()
    assert "--kmer-threshold" not in SearchConfig().cli_options()
    options = SearchConfig(kmer_threshold=3.0).cli_options()
    assert options.endswith(" --sensitive --pseudocounts context --kmer-threshold 3.0")
    assert settings_from_args(parser.parse_args(options.split())).search.diagonals_per_target == 8
    config_fast = settings_from_args(parser.parse_args(SearchConfig(sensitive=False).cli_options().split()))
    assert config_fast.search.diagonals_per_target == fast.diagonals_per_target
    with pytest.raises(InputError, match="search.diagonals_per_target must be at least 1"):
        SearchConfig(diagonals_per_target=0)
    with pytest.raises(InputError, match="search.gapless_offset must be a finite"):
        SearchConfig(gapless_offset=float("nan"))
    # the seed budget follows the prefilter (the fast setting's in every iteration; the sensitive one twice the
    # first iteration's, which is twice the fast setting's), a value given holds in every iteration, 0 is no
    # budget, and the workflow passes it on
    assert (fast.seed_budget, sensitive.seed_budget, sensitive.for_iteration(1, 3).seed_budget) == \
        (FAST_SEED_BUDGET, 2 * SEED_BUDGET, SEED_BUDGET) and FAST_SEED_BUDGET == SEED_BUDGET / 2
    assert fast.for_iteration(1, 3).seed_budget == FAST_SEED_BUDGET
    assert FAST.replace(sensitive=True, seed_budget=0.0).search.for_iteration(1, 3).seed_budget == 0.0
    assert settings_from_args(parser.parse_args(["--seed-budget", "1000"])).search.seed_budget == 1000.0
    with pytest.raises(ValueError, match="seed_budget must be a number of seeds >= 0"):
        Settings(seed_budget=-1.0)
    with pytest.raises(InputError, match="search.seed_budget must be"):
        SearchConfig(seed_budget=float("inf"))
    budget = SearchConfig(seed_budget=5000.0).cli_options()
    assert "--seed-budget 5000.0" in budget and \
        settings_from_args(parser.parse_args(budget.split())) == Settings(seed_budget=5000.0, max_evalue=1.0)
    # the two-hit rule: automatic (over the budget) by default, in every iteration and either prefilter; the
    # other rules given by name reach the search passes and the workflow's jobs
    assert {fast.two_hit, sensitive.two_hit, sensitive.for_iteration(1, 3).two_hit} == {"auto"}
    assert "--two-hit" not in SearchConfig().cli_options()
    never = SearchConfig(two_hit="never").cli_options()
    assert "--two-hit never" in never and \
        settings_from_args(parser.parse_args(never.split())) == Settings(two_hit="never", max_evalue=1.0)
    assert settings_from_args(parser.parse_args(["--two-hit", "always"])).search.two_hit == "always"
    with pytest.raises(ValueError, match="two_hit must be one of auto, always, never"):
        Settings(two_hit="yes")
    with pytest.raises(InputError, match="search.two_hit must be one of"):
        SearchConfig(two_hit="on")


def test_config_options_round_trip_and_keep_their_text():
    """The workflow's options (what the rules pass, unchanged so that no job reruns) read back to the config's
    settings."""
    import argparse

    from workflow_lib.search.settings import add_settings_arguments, settings_from_args
    from workflow_lib.workflow.config import SearchConfig
    assert SearchConfig().cli_options() == (
        "--iterations 3 --inclusion-evalue 0.001 --max-evalue 1.0 --max-identity 0.9 --min-coverage 0.5 "
        "--profile-min-coverage 0.0 --max-sequences 10000 --sensitive --pseudocounts context")
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    for config in (SearchConfig(), SearchConfig(sensitive=False, pseudocounts="substitution"),
                   SearchConfig(calibration="random", prefilter_composition=0.25, band_gate=-1.0, kmer_threshold=4.0,
                                diagonals_per_target=6, gapless_offset=1.0, band_offset=5.0, iterations=2)):
        assert settings_from_args(parser.parse_args(config.cli_options().split())) == config.settings()


def test_library_schema_and_cli_defaults_agree(root):
    """One default per setting: the library's (:class:`Settings`), the workflow config's (schema and dataclass)
    and the command line's; the workflow's max_evalue is its own (WORKFLOW_MAX_EVALUE)."""
    import argparse

    import yaml

    from workflow_lib.search.settings import SETTING_NAMES, WORKFLOW_MAX_EVALUE, add_settings_arguments
    from workflow_lib.workflow.config import SearchConfig
    library = dataclasses.asdict(Settings())
    schema = yaml.safe_load((root / "config" / "schema.yaml").read_text())
    properties = schema["properties"]["search"]["properties"]
    config = SearchConfig()
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    cli = vars(parser.parse_args([]))
    cli["prefilter_composition"] = None if cli["prefilter_composition"] == "auto" else cli["prefilter_composition"]
    for name in SETTING_NAMES:
        expected = WORKFLOW_MAX_EVALUE if name == "max_evalue" else library[name]
        assert cli[name] == library[name], name
        if hasattr(config, name):
            assert getattr(config, name) == expected, name
            if "default" in properties.get(name, {}):
                assert properties[name]["default"] == expected, name
    assert {"iterations", "sensitive", "pseudocounts", "calibration"} <= {
        name for name in SETTING_NAMES if "default" in properties.get(name, {})}



@pytest.mark.parametrize("config", [{}, {"sensitive": False, "pseudocounts": "substitution", "calibration": "random",
                                         "max_evalue": 10.0, "iterations": 2}])
def test_every_search_command_reads_the_workflows_options_back_to_its_settings(config):
    """The options rules/search.smk and rules/templates.smk pass (``SearchConfig.cli_options``) mean the same
    settings to each command that receives them, and the workflow's max_evalue is the only default they set
    apart from the command line's."""
    import shlex

    from workflow_lib.cli import build_parser
    from workflow_lib.search.settings import WORKFLOW_MAX_EVALUE, settings_from_args
    from workflow_lib.workflow.config import SearchConfig

    parser = build_parser(["workflow_lib.search.cli"])
    commands = ["search q.fa --db db --out hits.parquet", "msa q.fa --db db --out-dir out",
                "search-profiles q.fa --db db --iteration 1 --out q.npz",
                "search-shard q.fa --db db --iteration 1 --shard 0 --out h.parquet --times t.parquet",
                "msa-merge q.fa --iteration 1 --hits h.parquet --times t.parquet --a3m-dir a --out-state s.parquet",
                "msa-final q.fa --state s.parquet --out-dir out --stats stats.parquet"]
    settings = SearchConfig(**config)
    for command in commands:
        given = settings_from_args(parser.parse_args(shlex.split(f"{command} {settings.cli_options()}")))
        assert given == settings.settings(), command
        by_hand = settings_from_args(parser.parse_args(shlex.split(command)))
        assert by_hand.replace(max_evalue=WORKFLOW_MAX_EVALUE) == SearchConfig().settings(), command


def test_iterate_grows_the_msa_and_stops(db_one, queries):
    totals = DatabaseTotals.from_manifest(db_one)
    record = queries[0]

    def search(profile, iteration):
        return search_database([make_query(record.id, profile, totals, FAST.search)], db_one, FAST.search,
                               iteration=iteration)[0]

    results = list(iterate(record.id, record.description, record.sequence, search, FAST.replace(iterations=3).msa))
    assert 1 <= len(results) <= 3
    assert results[-1].converged and all(not r.converged for r in results[:-1])
    depths = [r.search_alignment.depth for r in results]
    assert depths == sorted(depths)            # the search MSA only grows
    for result in results:                     # the output MSA is its coverage-filtered subset
        assert result.alignment.names == output_alignment(result.search_alignment, FAST.msa).names
    assert results[-1].alignment.query == record.sequence
    assert results[0].profile.neff == pytest.approx(1.0, abs=0.2)


def test_sensitive_search_defers_to_iteration_2_and_ends_every_query_on_it(db_one, queries):
    """``--sensitive`` over 3 iterations: iteration 1 searches with the default prefilter, later ones with the
    sensitive one; a query that converges in iteration 1 (a reversed protein: no homologs) is searched again with
    the same profile and the sensitive prefilter, which finds the weak hits the default prefilter drops."""
    from workflow_lib.search.iterative import build_msas
    from workflow_lib.seqio.fasta import Record
    orphan = queries[0].sequence[::-1]
    records = [*queries[:2], Record("reversed", "", orphan, "reversed")]
    sensitive = FAST.replace(sensitive=True).search
    deferred = build_msas(records, db_one, sensitive, FAST.replace(iterations=3).msa)
    default = build_msas(records, db_one, FAST.search, FAST.replace(iterations=3).msa)
    one_pass = build_msas(records, db_one, sensitive, FAST.replace(iterations=1).msa)
    columns = ["target", "evalue", "bitscore", "alignment"]
    for mine, plain, once in zip(deferred, default, one_pass):
        first = mine.iterations[0].hits
        pd.testing.assert_frame_equal(first[columns], plain.iterations[0].hits[columns])
        assert len(mine.iterations) >= 2 and mine.iterations[-1].converged
    lonely = deferred[2]
    assert [it.new for it in lonely.iterations] == [0, 0] and lonely.iterations[0].reason == ""
    assert lonely.reason == "no new sequences"
    # its last search is the one-iteration sensitive search of the same profile, with more hits than the default
    last = lonely.iterations[-1].hits
    pd.testing.assert_frame_equal(last[columns], one_pass[2].iterations[0].hits[columns])
    assert len(last) > len(lonely.iterations[0].hits)


def test_default_seed_budget_leaves_a_small_database_every_seed(db_one, queries):
    """The default budgets (fast and sensitive) never bind on a database of this size: the search finds exactly
    the hits of a search without a budget, and a tiny budget finds fewer."""
    from workflow_lib.search.iterative import build_msas
    columns = ["query", "target", "evalue", "bitscore", "alignment"]
    for preset in (FAST, FAST.replace(sensitive=True)):
        budgeted = build_msas(queries[:3], db_one, preset.search, preset.replace(iterations=2).msa)
        unlimited = build_msas(queries[:3], db_one, preset.replace(seed_budget=0.0).search,
                               preset.replace(iterations=2).msa)
        for mine, plain in zip(budgeted, unlimited):
            for a, b in zip(mine.iterations, plain.iterations):
                pd.testing.assert_frame_equal(a.hits[columns], b.hits[columns])
    tiny = build_msas(queries[:3], db_one, FAST.replace(seed_budget=2.0).search, FAST.replace(iterations=1).msa)
    plain = build_msas(queries[:3], db_one, FAST.search, FAST.replace(iterations=1).msa)
    assert sum(len(r.iterations[0].hits) for r in tiny) < sum(len(r.iterations[0].hits) for r in plain)


# ---------------------------------------------------------------------------------------------------- CLI

def test_search_and_msa_commands(tmp_path, db_three, queries, capsys):
    fasta = tmp_path / "q.fasta"
    fasta.write_text("".join(f">{r.id} {r.description}\n{r.sequence}\n" for r in queries[1:3]))
    assert main(["search", str(fasta), "--db", str(db_three), "--out", str(tmp_path / "hits.parquet"),
                 "--iterations", "2", "--m8", str(tmp_path / "hits.m8")]) == 0
    hits = read_frame(tmp_path / "hits.parquet", HITS)
    assert set(hits["iteration"]) <= {1, 2} and 1 in set(hits["iteration"])
    assert set(hits["query"]) <= {r.id for r in queries[1:3]}
    m8 = (tmp_path / "hits.m8").read_text().splitlines()
    assert len(m8) == len(hits) and len(m8[0].split("\t")) == 12
    assert main(["msa", str(fasta), "--db", str(db_three), "--out-dir", str(tmp_path / "msa"),
                 "--iterations", "2"]) == 0
    stats = read_frame(tmp_path / "msa" / "msa_stats.parquet", MSA_STATS)
    assert list(stats["protein"]) == [r.id for r in queries[1:3]]
    for record, depth in zip(queries[1:3], stats["depth"]):
        alignment = read_a3m(tmp_path / "msa" / f"{record.safe_id}.a3m")
        assert alignment.query == record.sequence and alignment.depth == depth
    assert stats["depth"].max() > 1


def test_search_with_context_pseudocounts(tmp_path, db_three, queries, capsys):
    """``--pseudocounts context``: a real search on the example database (self hits first, the same columns);
    a bad model file or a model without the option fails before searching, naming the problem."""
    fasta = tmp_path / "q.fasta"
    fasta.write_text("".join(f">{r.id}\n{r.sequence}\n" for r in queries[:2]))
    assert main(["search", str(fasta), "--db", str(db_three), "--out", str(tmp_path / "ctx.parquet"),
                 "--iterations", "2", "--pseudocounts", "context"]) == 0
    assert main(["search", str(fasta), "--db", str(db_three), "--out", str(tmp_path / "plain.parquet"),
                 "--iterations", "2", "--pseudocounts", "substitution"]) == 0
    context, plain = read_frame(tmp_path / "ctx.parquet", HITS), read_frame(tmp_path / "plain.parquet", HITS)
    for record in queries[:2]:
        own = context[(context["query"] == record.id) & (context["iteration"] == 1)]
        assert own.iloc[0]["target"] == record.id and own.iloc[0]["evalue"] < 1e-20
    # different pseudocounts, different scores
    first = context[context["iteration"] == 1].set_index(["query", "target"])["bitscore"]
    other = plain[plain["iteration"] == 1].set_index(["query", "target"])["bitscore"]
    common = first.index.intersection(other.index)
    assert len(common) >= 2 and not np.allclose(first[common], other[common])
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"no")
    assert main(["search", str(fasta), "--db", str(db_three), "--out", str(tmp_path / "x.parquet"),
                 "--pseudocounts", "context", "--context-model", str(broken)]) != 0
    assert "broken.npz: cannot read a context model" in capsys.readouterr().err
    assert main(["search", str(fasta), "--db", str(db_three), "--out", str(tmp_path / "x.parquet"),
                 "--pseudocounts", "substitution", "--context-model", str(broken)]) != 0
    assert "--context-model needs --pseudocounts context" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()


def test_precomputed_msa_must_match_the_protein(tmp_path, queries):
    from workflow_lib.search.jobs import load_precomputed
    record = queries[2]
    good = tmp_path / "good.a3m"
    good.write_text(f">{record.id}\n{record.sequence}\n>other\n{record.sequence[:-1]}-\n")
    assert load_precomputed(good, record).depth == 2
    bad = tmp_path / "bad.a3m"
    bad.write_text(f">{record.id}\n{record.sequence[1:]}\n")
    with pytest.raises(InputError, match="bad.a3m"):
        load_precomputed(bad, record)


def test_composition_bias_correction_removes_a_biased_false_hit(data_dir):
    """HMMER-style null2 on real Pfam pairs: the Ala/Lys/Pro-rich non-homologous pair loses most of its score."""
    from workflow_lib.aligner import align_targets
    from workflow_lib.search.bias import composition_bias_bits

    records = read_fasta(data_dir / "search" / "pfam_bias_pairs.fasta")
    results = {}
    for query, target in zip(records[::2], records[1::2]):
        profile = profile_from_sequence(query.sequence)
        codes = encode(target.sequence)
        hit = align_targets(profile, [codes], backtrace=True, cpus=1)[0]
        results[query.id] = (hit.score, composition_bias_bits(profile.emissions, profile.background, codes,
                                                              hit.pairs))
    score, bias = results["P49006"]
    assert bias > 0.8 * score and score - bias < 10.0
    for homolog in ("Q6DCL6", "Q90923"):
        score, bias = results[homolog]
        assert score > 400 and 0.0 <= bias < 0.05 * score
    # no aligned pairs: nothing to correct; an unbiased random target: (almost) no correction
    profile = profile_from_sequence(records[2].sequence)
    assert composition_bias_bits(profile.emissions, profile.background, encode("ACD"), np.zeros((0, 2), int)) == 0.0
    rng = np.random.default_rng(0)
    background = profile.background / profile.background.sum()
    random_target = rng.choice(20, size=300, p=background).astype(np.uint8)
    hit = align_targets(profile, [random_target], backtrace=True, cpus=1)[0]
    assert composition_bias_bits(profile.emissions, profile.background, random_target, hit.pairs) < 0.5


def test_search_shard_with_stored_profiles_equals_building_them_in_the_job(tmp_path, db_three, queries):
    """The workflow's search-profiles → search-shard --profiles gives the hits of a job that builds and
    calibrates its own queries; a profiles file of another FASTA is refused with the file and record named."""
    from workflow_lib.search.query_store import read_search_queries

    fasta = tmp_path / "chunk.fasta"
    fasta.write_text("".join(f">{r.id} {r.description}\n{r.sequence}\n" for r in queries))
    stored = tmp_path / "queries.npz"
    common = ["--db", str(db_three), "--iteration", "1", "--pseudocounts", "substitution"]
    assert main(["search-profiles", str(fasta), *common, "--out", str(stored)]) == 0
    for variant, extra in (("built", []), ("stored", ["--profiles", str(stored)])):
        assert main(["search-shard", str(fasta), *common, "--shard", "1", *extra,
                     "--out", str(tmp_path / f"{variant}.parquet"), "--times", str(tmp_path / f"{variant}.t")]) == 0
    built, from_file = (read_frame(tmp_path / f"{v}.parquet", HITS) for v in ("built", "stored"))
    assert len(built) > 0
    pd.testing.assert_frame_equal(built, from_file)
    records = read_fasta(fasta)
    loaded = read_search_queries(stored, records)
    totals = DatabaseTotals.from_manifest(db_three)
    for query, record in zip(loaded, records):
        fresh = make_query(record.id, profile_from_sequence(record.sequence), totals, FAST.search)
        assert query.calibration == fresh.calibration
        np.testing.assert_array_equal(query.profile.transitions, fresh.profile.transitions)
    swapped = [records[1], records[0], *records[2:]]
    with pytest.raises(InputError, match=f"queries.npz.*{records[1].id}|{records[1].id}.*queries.npz"):
        read_search_queries(stored, swapped)
    from workflow_lib.schemas.search import SEARCH_QUERIES
    from workflow_lib.schemas.io import read_npz, write_npz
    arrays = dict(read_npz(stored, SEARCH_QUERIES))
    arrays["lam"] = arrays["lam"].copy()
    arrays["lam"][1] = 0.0
    broken = tmp_path / "broken.npz"
    write_npz(broken, arrays, SEARCH_QUERIES)
    with pytest.raises(InputError, match=f"broken.npz.*{records[1].id}.*invalid Gumbel calibration"):
        read_search_queries(broken, records)


@pytest.mark.parametrize("sensitive", [False, True], ids=["fast", "sensitive"])
def test_workflow_jobs_give_the_msas_of_the_msa_command(tmp_path, db_three, queries, sensitive):
    """search-profiles → search-shard (3 shards) → msa-merge per iteration → msa-final, as the rules chain them,
    writes the same A3Ms as `trackfold msa`. Both take the same step (:func:`advance`, tested alone above); this
    checks the jobs' plumbing: the search MSA travels in the state, the output filter comes last.
    With ``--sensitive`` the jobs defer the sensitive prefilter to iteration 2 as the command does (a reversed
    protein, which converges in iteration 1, is searched again)."""
    from workflow_lib.seqio.fasta import Record
    queries = [*queries, Record("reversed", "", queries[0].sequence[::-1], "reversed")] if sensitive else queries
    fasta = tmp_path / "chunk.fasta"
    fasta.write_text("".join(f">{r.id} {r.description}\n{r.sequence}\n" for r in queries))
    settings = ["--iterations", "2", "--min-coverage", "0.8"] + (["--sensitive"] if sensitive else ["--no-sensitive"])
    assert main(["msa", str(fasta), "--db", str(db_three), "--out-dir", str(tmp_path / "direct"), *settings]) == 0
    state = None
    for iteration in (1, 2):
        step = tmp_path / f"iter_{iteration}"
        common = [str(fasta), "--db", str(db_three), "--iteration", str(iteration), *settings] + \
            (["--state", str(state)] if state else [])
        assert main(["search-profiles", *common, "--out", str(step / "queries.npz")]) == 0
        for shard in range(3):
            assert main(["search-shard", *common, "--shard", str(shard), "--profiles", str(step / "queries.npz"),
                         "--out", str(step / f"hits_{shard}.parquet"),
                         "--times", str(step / f"times_{shard}.parquet")]) == 0
        assert main(["msa-merge", str(fasta), "--iteration", str(iteration), *settings,
                     "--hits", *[str(step / f"hits_{k}.parquet") for k in range(3)],
                     "--times", *[str(step / f"times_{k}.parquet") for k in range(3)],
                     *(["--state", str(state)] if state else []),
                     "--a3m-dir", str(step / "a3m"), "--out-state", str(step / "state.parquet")]) == 0
        state = step / "state.parquet"
    assert main(["msa-final", str(fasta), "--state", str(state), "--out-dir", str(tmp_path / "final"),
                 "--stats", str(tmp_path / "final" / "stats.parquet"), *settings]) == 0
    dropped = 0
    for record in queries:
        direct = read_a3m(tmp_path / "direct" / f"{record.safe_id}.a3m")
        final = read_a3m(tmp_path / "final" / f"{record.safe_id}.a3m")
        searched = read_a3m(tmp_path / "iter_2" / "a3m" / f"{record.safe_id}.a3m") \
            if (tmp_path / "iter_2" / "a3m" / f"{record.safe_id}.a3m").exists() \
            else read_a3m(tmp_path / "iter_1" / "a3m" / f"{record.safe_id}.a3m")
        assert final.rows == direct.rows and final.names == direct.names
        assert set(final.names) <= set(searched.names)
        dropped += searched.depth - final.depth
    assert dropped > 0          # at -cov 80 some included rows are partial: the output filter did something
    if sensitive:
        # iteration 1's shard jobs searched with the default prefilter, iteration 2's with the sensitive one
        for iteration, same in ((1, True), (2, False)):
            step = tmp_path / f"iter_{iteration}"
            assert main(["search-shard", str(fasta), "--db", str(db_three), "--iteration", str(iteration),
                         *settings[:-1], "--no-sensitive", "--shard", "0", "--profiles", str(step / "queries.npz"),
                         "--out", str(step / "plain.parquet"), "--times", str(step / "plain_times.parquet")]) == 0
            plain = read_frame(step / "plain_times.parquet", SEARCH_TIMES)
            mine = read_frame(step / "times_0.parquet", SEARCH_TIMES)
            assert plain["gapless"].equals(mine["gapless"]) == same
        state = read_frame(tmp_path / "iter_1" / "state.parquet", MSA_STATE).set_index("protein")
        assert not state.loc["reversed", "converged"] and state.loc["reversed", "depth"] == 1
        direct = read_frame(tmp_path / "direct" / "msa_stats.parquet", MSA_STATS).set_index("protein")
        assert direct.loc["reversed", "iterations"] == 2


def test_calibration_sequences_have_the_database_mean_length_up_to_100():
    """Equal lengths fill the Viterbi lanes without padding; the mean length is clipped to [20, 100]."""
    background = np.full(20, 0.05)
    sequences = random_sequences(background, 74.4, 128, 11)
    assert len(sequences) == 128 and {s.size for s in sequences} == {74}
    assert all(s.dtype == np.uint8 and int(s.max()) < 20 for s in sequences)
    assert all(np.array_equal(a, b) for a, b in zip(sequences, random_sequences(background, 74.4, 128, 11)))
    assert calibration_length(5.0) == 20 and calibration_length(374.0) == CALIBRATION_MAX_LENGTH == 100
    assert calibration_length(374.0, DECOY_WINDOW_LENGTH) == 200
    skewed = np.zeros(20)
    skewed[[0, 7]] = [0.75, 0.25]  # draws follow the background
    counts = np.bincount(np.concatenate(random_sequences(skewed, 400, 50, 3)), minlength=20)
    assert set(np.flatnonzero(counts)) == {0, 7} and 0.72 < counts[0] / counts.sum() < 0.78
