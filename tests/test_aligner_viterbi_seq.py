"""Sequence–profile lane kernel vs the plain-loop reference (scores exact, identical alignments)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from test_aligner_helpers import SHARED_DATA, random_profile
from workflow_lib.aligner import align_queries, align_targets, profile_from_alignment, profile_from_sequence, viterbi_seq_profile
from workflow_lib.aligner import viterbi_seq as viterbi_seq_module
from workflow_lib.aligner.reference import viterbi_sequence_reference
from workflow_lib.aligner.render import aligned_strings
from workflow_lib.aligner.scores import sequence_scores
from workflow_lib.aligner.lanes import length_buckets, min_cost_buckets
from workflow_lib.aligner.viterbi_seq import lane_max
from workflow_lib.seqio.alphabet import decode, encode
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.seqio.msa import read_a3m


@pytest.fixture(autouse=True)
def both_kernels(cpu_kernels):
    """Every test here runs against both CPU kernels (conftest.py): the NumPy lanes and the compiled one."""
    return cpu_kernels


def assert_matches_reference(profile, targets, hits):
    scores = sequence_scores(profile)
    for target, hit in zip(targets, hits):
        raw, steps = viterbi_sequence_reference(scores, target)
        assert hit.raw_score == raw
        assert hit.states == "".join(step[2] for step in steps)
        assert (hit.query_start, hit.target_start) == (steps[0][0] - 1, steps[0][1] - 1)
        assert (hit.query_end, hit.target_end) == (steps[-1][0], steps[-1][1])


@pytest.mark.parametrize("full_ramp_width", [0, 1000])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_profiles_and_targets(monkeypatch, seed, full_ramp_width):
    # in-row ramps as broadcast columns (FULL_RAMP_WIDTH 0) and as full rows (every bucket narrower than 1000)
    monkeypatch.setattr(viterbi_seq_module, "FULL_RAMP_WIDTH", full_ramp_width)
    rng = np.random.default_rng(seed)
    profile = random_profile(rng, int(rng.integers(1, 40)))
    targets = [rng.integers(0, 21, int(rng.integers(1, 70))).astype(np.uint8) for _ in range(12)]
    targets.append(np.array([3], dtype=np.uint8))                       # length 1
    targets.append(np.full(9, 20, dtype=np.uint8))                      # all X
    targets.append(profile.sequence.copy())                             # the profile's own sequence
    hits = align_targets(profile, targets, backtrace=True)
    assert [h.index for h in hits] == list(range(len(targets)))
    assert_matches_reference(profile, targets, hits)
    no_bt = align_targets(profile, targets, backtrace=False)
    assert [h.raw_score for h in no_bt] == [h.raw_score for h in hits]


def test_real_profile_and_sequences():
    alignment = read_a3m(SHARED_DATA / "hhsuite_examples" / "query.a3m")
    profile = profile_from_alignment(alignment.subset(range(20)))
    region = slice(260, 300)
    from test_aligner_helpers import cut_profile
    profile = cut_profile(profile, region.start, region.stop)
    records = read_fasta(SHARED_DATA / "hmmer_examples" / "tutorial" / "globins45.fa")[:5]
    targets = [encode(r.sequence) for r in records]
    homologs = [encode(row.replace("-", "").upper()[200:330]) for row in alignment.rows[1:5]]
    targets += homologs + [encode(alignment.query[265:268]), encode(alignment.query[200:400])]
    hits = align_targets(profile, targets, backtrace=True, lane_cells=512)  # small lanes: several buckets
    assert_matches_reference(profile, targets, hits)


def test_ties_resolve_like_the_reference():
    # a repeat profile against a repeat target: many optimal alignments, one chosen the same way by both
    profile = profile_from_sequence("AAAAAAAA")
    targets = [encode("AAAAAAAAAAAA"), encode("AAAA"), encode("CCCC"), encode("WAAW")]
    hits = align_targets(profile, targets, backtrace=True)
    assert_matches_reference(profile, targets, hits)


def test_int64_path_for_long_targets(monkeypatch):
    monkeypatch.setattr(viterbi_seq_module, "INT32_MAX_TARGET", 10)
    rng = np.random.default_rng(5)
    profile = random_profile(rng, 15)
    targets = [rng.integers(0, 20, n).astype(np.uint8) for n in (5, 30, 41)]
    assert_matches_reference(profile, targets, align_targets(profile, targets, backtrace=True))


def test_processes_keep_input_order():
    rng = np.random.default_rng(7)
    profile = random_profile(rng, 30)
    targets = [rng.integers(0, 20, int(n)).astype(np.uint8) for n in rng.integers(1, 200, 60)]
    single = align_targets(profile, targets, backtrace=True, cpus=1)
    multi = align_targets(profile, targets, backtrace=True, cpus=2, lane_cells=2048)
    assert [h.index for h in multi] == list(range(60))
    assert [h.raw_score for h in multi] == [h.raw_score for h in single]
    assert [h.states for h in multi] == [h.states for h in single]
    queries = [profile, random_profile(rng, 12)]
    per_query = align_queries(queries, targets[:10], cpus=2)
    assert [h.raw_score for h in per_query[0]] == [h.raw_score for h in single[:10]]
    assert [h.index for h in per_query[1]] == list(range(10))


@pytest.mark.parametrize("n, width", [(1104, 8), (304, 160), (8, 5), (16, 1), (13, 7), (3, 2)])
def test_lane_max_equals_max_over_positions(n, width):
    """The folded reduction equals ``max(axis=0)``: folded shapes, shapes it leaves to NumPy, views, ``out=``."""
    rng = np.random.default_rng(n * 1000 + width)
    values = rng.integers(-2 ** 31, 2 ** 31 - 1, (n + 1, width)).astype(np.int32)
    for view in (values[1:], values[:-1], values[1:, ::-1]):
        np.testing.assert_array_equal(lane_max(view), view.max(axis=0))
        out = np.empty(width, np.int32)
        assert lane_max(view, out=out) is out
        np.testing.assert_array_equal(out, view.max(axis=0))


def test_single_pair_api_and_rendering():
    profile = profile_from_sequence("MKTAYIAKQRQISFVKSHFSRQ")
    hit = viterbi_seq_profile(profile, "GGGMKTAYIAKQISFVKSHFSRQ")
    query_row, target_row = aligned_strings(hit, profile.query, "GGGMKTAYIAKQISFVKSHFSRQ")
    assert query_row.replace("-", "") == profile.query[hit.query_start:hit.query_end]
    assert target_row.replace("-", "").upper() == "GGGMKTAYIAKQISFVKSHFSRQ"[hit.target_start:hit.target_end]
    assert "D" in hit.states and hit.score > 10
    with pytest.raises(ValueError):
        align_targets(profile, [np.array([], dtype=np.uint8)])
    with pytest.raises(ValueError):
        align_targets(profile, [encode("AC-D")])
    assert decode(profile.sequence) == profile.query


@pytest.mark.parametrize("pad_rows", [1, 3, 8, 128])
def test_long_insert_chains_beyond_the_scan_padding(monkeypatch, pad_rows):
    # long insert chains (I->I close to 1): rows need many doubling steps, and shifts longer than the NEG_INF
    # padding take the two-call branch; every padding must equal the reference
    monkeypatch.setattr(viterbi_seq_module, "SCAN_PAD_ROWS", pad_rows)
    rng = np.random.default_rng(11)
    profile = random_profile(rng, 40, sharpness=0.1)
    transitions = profile.transitions.copy()
    transitions[:, 3], transitions[:, 4] = 0.03, 0.97   # I->M, I->I
    profile = dataclasses.replace(profile, transitions=transitions)
    own = profile.emissions.argmax(axis=1).astype(np.uint8)     # the profile's consensus
    targets = [np.concatenate([own[:20], rng.integers(0, 20, 12).astype(np.uint8), own[20:]]),
               rng.integers(0, 20, 90).astype(np.uint8), own.copy(), np.array([5], dtype=np.uint8)]
    hits = align_targets(profile, targets, backtrace=True)
    assert_matches_reference(profile, targets, hits)
    assert "I" * 12 in hits[0].states
    assert [h.raw_score for h in align_targets(profile, targets)] == [h.raw_score for h in hits]


def test_chain_steps_bound():
    from workflow_lib.aligner.viterbi_seq import chain_steps
    assert chain_steps(0, -5, 100) == 0 and chain_steps(-3, -5, 100) == 0
    assert chain_steps(10, 0, 100) == 7          # step >= 0: every chain, the full scan of 100 positions
    assert chain_steps(10 ** 9, -1, 1000) == 10   # capped by the row: chains of at most 999
    for excess, step in ((10, -3), (9, -3), (1, -1), (1000, -7), (5, -100)):
        longest = (excess - 1) // -step        # longest chain d with excess + d·step > 0
        assert excess + longest * step > 0 >= excess + (longest + 1) * step
        assert chain_steps(excess, step, 10 ** 6) == longest.bit_length()
    assert chain_steps(10 ** 6, -1, 9) == 4    # capped by the row length: chains of at most 8


def _bucket_cost(lengths, buckets, row_cost):
    return sum(row_cost + len(bucket) * max(lengths[k] for k in bucket) for bucket in buckets)


def _brute_force_cost(lengths, widths, row_cost):
    """Cheapest cut of the sorted order into consecutive buckets, by enumerating every cut set."""
    order = sorted(range(len(lengths)), key=lambda k: lengths[k])
    best = None
    for mask in range(1 << (len(order) - 1)):
        cuts = [0] + [k + 1 for k in range(len(order) - 1) if mask >> k & 1] + [len(order)]
        buckets = [order[a:b] for a, b in zip(cuts, cuts[1:])]
        if any(len(b) > widths[b[-1]] for b in buckets):
            continue
        cost = _bucket_cost(lengths, buckets, row_cost)
        best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_min_cost_buckets_is_optimal(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 10))
    lengths = rng.integers(10, 400, n).tolist()
    widths = rng.integers(1, 6, n).tolist()
    row_cost = float(rng.choice([0.0, 50.0, 500.0]))
    buckets = min_cost_buckets(lengths, widths, row_cost)
    assert sorted(k for b in buckets for k in b) == list(range(n))
    assert all(len(b) <= widths[max(b, key=lambda k: (lengths[k], b.index(k)))] for b in buckets)
    assert _bucket_cost(lengths, buckets, row_cost) == _brute_force_cost(lengths, widths, row_cost)


def test_length_buckets_trade_padding_against_rows():
    lengths = [100] * 20 + [1000] * 20
    # a row cost below the padding a joint bucket would add: two buckets, none padded
    assert [len(b) for b in length_buckets(lengths, 50, backtrace=False, row_cost_cells=4096)] == [20, 20]
    # a row cost above it: one bucket (20 · 900 padded cells < 20,000)
    assert [len(b) for b in length_buckets(lengths, 50, backtrace=False, row_cost_cells=20000)] == [40]
    # equal lengths beyond one lane block (163 lanes of 304 cells): the fewest buckets the width limit allows
    assert sorted(len(b) for b in length_buckets([300] * 400, 50, backtrace=False)) == [74, 163, 163]


def test_lane_hits_equal_the_step_by_step_collection():
    """The array-wise decoding of a lane batch's paths gives the hits of the plain per-step collection."""
    from workflow_lib.aligner import backtrace
    from workflow_lib.aligner.scores import hit_from_path
    rng = np.random.default_rng(7)
    own = rng.integers(0, 20, 40).astype(np.uint8)
    profile = profile_from_sequence(own)
    targets = [rng.integers(0, 21, int(rng.integers(1, 60))).astype(np.uint8) for _ in range(9)]
    gapped = np.concatenate([own[:15], own[3:9], own[15:25], own[31:]])  # an insertion and a deletion
    targets += [own.copy(), gapped, np.full(5, 20, dtype=np.uint8)]
    scores = sequence_scores(profile)
    indices = list(range(len(targets)))
    packed = viterbi_seq_module.pack_targets(targets, indices)
    best, best_i, best_l, bt = viterbi_seq_module.viterbi_seq_lanes(scores, packed, backtrace=True)
    records = backtrace._paths(bt, best_i, best_l, backtrace._seq_step, len(backtrace.SEQ_STATES))
    expected = [hit_from_path(k, int(best[k]), backtrace._collect(*records, backtrace.SEQ_STATES, k)) for k in indices]
    hits = backtrace.sequence_hits(bt, best, best_i, best_l, indices)
    assert any("I" in h.states or "D" in h.states for h in expected)
    for hit, want in zip(hits, expected):
        assert dataclasses.astuple(hit)[:-1] == dataclasses.astuple(want)[:-1]
        assert hit.pairs.dtype == want.pairs.dtype and np.array_equal(hit.pairs, want.pairs)
