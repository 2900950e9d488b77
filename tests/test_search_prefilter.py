"""k-mer index and the gapless prefilter stage, against plain loops on real sequences."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import example_database
from workflow_lib.aligner.device import compiled_available
from workflow_lib.aligner import profile_from_sequence
from workflow_lib.aligner.context import load_context_model
from workflow_lib.db.build import load_kmer_index, load_shard
from workflow_lib.search.gapped import gapped_scores
from workflow_lib.db.kmer_index import build_kmer_index
from workflow_lib.search.gapless import best_per_target, gapless_prefilter, strongest_seeds
from workflow_lib.search.seeds import kmer_neighbourhood, prefilter_background, profile_scores_bits
from workflow_lib.search.settings import CONTEXT_PREFILTER_COMPOSITION
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.fasta import read_fasta


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    """The first 150 sequences of the example database as a 2-shard database."""
    return example_database(tmp_path_factory.mktemp("db"), 150)[0]


@pytest.fixture(scope="module")
def query_scores(example_dir):
    query = read_fasta(example_dir / "proteomes" / "anaerococcus_slice.fasta")[3]
    profile = profile_from_sequence(query.sequence)
    return profile_scores_bits(profile.emissions, profile.background)


@pytest.mark.parametrize("shape", ["111", "1111", "1010011", "11011"])
def test_index_entries_match_a_loop(small_db, shape):
    """Entries per code, for contiguous and spaced shapes; the database's own index has the default shape."""
    from workflow_lib.db.kmer_index import DEFAULT_SHAPE, index_shape

    shard = load_shard(small_db, 1)
    if shape == DEFAULT_SHAPE:
        index = load_kmer_index(small_db, 1)
    else:
        index = build_kmer_index(shard.residues, shard.offsets, shape=shape)
    assert index_shape(index) == shape
    offsets = [t for t, c in enumerate(shape) if c == "1"]
    k = len(offsets)
    assert int(index["k"]) == k
    expected = {}
    for s in range(len(shard)):
        sequence = shard.sequence(s).astype(int)
        for p in range(sequence.size - len(shape) + 1):
            window = sequence[[p + o for o in offsets]]
            if (window < 20).all():
                expected.setdefault(int(sum(int(r) * 20 ** (k - 1 - t) for t, r in enumerate(window))), []).append((s, p))
    for code in list(expected)[:300]:
        lo, hi = index["offsets"][code], index["offsets"][code + 1]
        got = list(zip(index["sequence"][lo:hi].tolist(), index["position"][lo:hi].tolist()))
        assert got == expected[code]
    assert index["sequence"].size == sum(len(v) for v in expected.values())


def _best_diagonal_loop(scores, target):
    best = 0.0
    for diagonal in range(-scores.shape[0] + 1, target.size):
        running = 0.0
        for i in range(scores.shape[0]):
            j = i + diagonal
            if 0 <= j < target.size:
                running = max(0.0, running + float(scores[i, target[j]]))
                best = max(best, running)
    return best


def test_exhaustive_setting_equals_loop_reference(small_db, query_scores):
    shard = load_shard(small_db, 0)
    index = build_kmer_index(shard.residues, shard.offsets, k=3)  # exhaustive: every window scores every k-mer
    hits = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=-np.inf, diagonals_per_target=None,
                             offset_bits=-1e9)
    assert hits.sequence.size == len(shard)  # threshold off: every target reported
    for s, score in list(zip(hits.sequence, hits.score))[:25]:
        assert score == pytest.approx(_best_diagonal_loop(query_scores, shard.sequence(int(s)).astype(int)),
                                      abs=1e-3)


def test_threshold_is_the_seeds(small_db, query_scores):
    shard = load_shard(small_db, 0)
    index = load_kmer_index(small_db, 0)
    hits = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=3.0)
    lengths = shard.lengths[hits.sequence]
    assert np.all(hits.score > 2.5 + np.log2(query_scores.shape[0] * lengths))
    seeded = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=3.0,
                               offset_bits=-1e9)
    assert hits.sequence.size < seeded.sequence.size <= len(shard)
    assert set(hits.sequence.tolist()) <= set(seeded.sequence.tolist())


@pytest.mark.parametrize("per_target", [1, 4, 16])
def test_best_diagonals_equals_a_two_key_sort_with_ties_and_negative_ranks(per_target, cpu_kernels):
    """Every path (segment passes for sorted targets, on the strong diagonals first when targets hold many;
    the integer sort otherwise) against a lexsort."""
    from workflow_lib.search.diagonals import best_diagonals

    rng = np.random.default_rng(3)
    for n in (5000, 5000, 5000, 60000, 60000):
        sequence = np.sort(rng.integers(0, 400, n))
        rank = rng.normal(0.0, 6.0, n).astype(np.float32)
        rank[rng.integers(0, n, 1500)] = 2.5          # many exact ties
        rank[rng.integers(0, n, 50)] = -0.0
        rank[rng.integers(0, n, 20)] = -np.inf
        for seq, rk in ((sequence, rank), _shuffled(rng, sequence, rank)):
            order = np.lexsort((-rk, seq))                # reference: best first within a target, stable ties
            ordered = seq[order]
            starts = np.concatenate([[0], np.nonzero(ordered[1:] != ordered[:-1])[0] + 1])
            sizes = np.diff(np.concatenate([starts, [n]]))
            expected = np.sort(order[np.arange(n) - np.repeat(starts, sizes) < per_target])
            np.testing.assert_array_equal(best_diagonals(seq, rk, per_target), expected)
    np.testing.assert_array_equal(best_diagonals(sequence, rank, None), np.arange(n))


def _shuffled(rng, sequence, rank):
    order = rng.permutation(sequence.size)
    return sequence[order], rank[order]


@pytest.mark.parametrize("shape, threshold", [("111", 3.0), ("111", 1.5), ("111", 0.0), ("1111", 4.0),
                                              ("1111", 2.0), ("1010011", 5.0), ("1101", 2.0)])
@pytest.mark.parametrize("slice_min_entries", [0, 10 ** 9])
def test_seed_counting_paths_equal_a_dictionary_count(small_db, query_scores, shape, threshold, slice_min_entries,
                                                      monkeypatch):
    """Dense count (one weighted pass for positive thresholds, two passes otherwise; bins from per-k-mer slices
    or from one gather) and the sorting path, from the dense k-mer table and from the enumerated neighbourhood,
    against a plain dictionary over the seeds (a seed at query window i and index window p: diagonal p - i)."""
    from workflow_lib.db.kmer_index import index_offsets
    from workflow_lib.search import diagonals
    from workflow_lib.search.diagonals import count_seeds, seed_diagonals
    from workflow_lib.search.seeds import kmer_neighbourhood, kmer_scores

    monkeypatch.setattr(diagonals, "SLICE_MIN_ENTRIES", slice_min_entries)
    shard = load_shard(small_db, 0)
    index = build_kmer_index(shard.residues, shard.offsets, shape=shape)
    k, offsets_of_shape = int(index["k"]), index_offsets(index)
    windows = kmer_scores(query_scores, k, offsets_of_shape)
    assert windows.shape[0] == query_scores.shape[0] - len(shape) + 1
    reference: dict[tuple[int, int], list] = {}
    for i, code in zip(*np.nonzero(windows >= threshold)):
        for e in range(index["offsets"][code], index["offsets"][code + 1]):
            key = (int(index["sequence"][e]), int(index["position"][e]) - int(i))
            entry = reference.setdefault(key, [0, 0.0])
            entry[0] += 1
            entry[1] += float(windows[i, code])
    neighbourhood = kmer_neighbourhood(query_scores, k, threshold, offsets_of_shape)
    for min_hits in (1, 2):
        expected = sorted((k, v) for k, v in reference.items() if v[0] >= min_hits)
        for offsets in (shard.offsets, None):
            sequence, diagonal, hits, bits = seed_diagonals(windows, index, threshold, min_hits, offsets)
            assert list(zip(sequence.tolist(), diagonal.tolist())) == [k for k, _ in expected]
            np.testing.assert_array_equal(hits, [v[0] for _, v in expected])
            np.testing.assert_allclose(bits, [v[1] for _, v in expected], rtol=1e-6)
            from_neighbourhood = count_seeds(*neighbourhood, windows.shape[0], index, threshold, min_hits, offsets)
            for a, b in zip(from_neighbourhood, (sequence, diagonal, hits, bits)):
                np.testing.assert_array_equal(a, b)
        dense = seed_diagonals(windows, index, threshold, min_hits, shard.offsets)
        sorting = seed_diagonals(windows, index, threshold, min_hits, None)
        for a, b in zip(dense, sorting):
            np.testing.assert_array_equal(a, b)   # bit-identical, the weighted single pass included


@pytest.mark.parametrize("shape, threshold", [("111", 3.0), ("111", 0.0), ("111", -2.0), ("1010011", 5.0),
                                              ("1111", 4.0)])
@pytest.mark.parametrize("block_bins", [64, 1 << 10, 1 << 15])
def test_blocked_seed_count_equals_counting_then_choosing(small_db, query_scores, shape, threshold, block_bins):
    """The compiled blocked count (:func:`seed_best_diagonals_compiled`) returns what :func:`count_seeds`
    followed by :func:`best_diagonals` keeps, bit for bit: blocks of one sequence (64 bins: every sequence is
    wider than a block), of a few, of the whole shard; seeds in window order and (positive thresholds, where
    the sums are exact) in k-mer code order; ties among the ranks included (integer-valued seed scores)."""
    pytest.importorskip("numba")
    from workflow_lib.db.kmer_index import index_offsets
    from workflow_lib.search.diagonals import best_diagonals, count_seeds
    from workflow_lib.search.seeds import kmer_neighbourhood
    from workflow_lib.search.prefilter_compiled import seed_best_diagonals_compiled, seed_blocks

    shard = load_shard(small_db, 0)
    index = build_kmer_index(shard.residues, shard.offsets, shape=shape)
    k, offsets_of_shape = int(index["k"]), index_offsets(index)
    windows = query_scores.shape[0] - len(shape) + 1
    pad = 1 << windows.bit_length()
    blocks = seed_blocks(shard.offsets, pad, block_bins)
    block, first = blocks[0], blocks[3]
    assert first[0] == 0 and first[-1] == len(shard) and np.all(np.diff(block) >= 0)
    if block_bins == 64:
        assert first.size - 1 == len(shard)                          # one sequence per block
    rounded = np.round(query_scores)                                 # integer scores: many tied diagonals
    for scores in (query_scores, rounded):
        window, code, bits = kmer_neighbourhood(scores, k, threshold, offsets_of_shape)
        orders = [np.arange(code.size)] + ([np.argsort(code, kind="stable")] if threshold > 0 else [])
        for min_hits in (1, 2):
            sequence, diagonal, hits, seed_bits = count_seeds(window, code, bits, windows, index, threshold,
                                                              min_hits, shard.offsets)
            seeded = int(np.unique(sequence).size)
            for per_target in (1, 3, 8):
                chosen = best_diagonals(sequence, seed_bits, per_target)
                for order in orders:
                    got = seed_best_diagonals_compiled(window[order], code[order], bits[order], index, blocks,
                                                       pad, min_hits, per_target)
                    for a, b in zip(got[:4], (sequence[chosen], diagonal[chosen], hits[chosen],
                                              seed_bits[chosen])):
                        np.testing.assert_array_equal(a, b)
                    assert got[4] == seeded


def test_gapless_prefilter_is_the_same_with_either_kernel_family(small_db, query_scores, monkeypatch):
    """Survivors, scores, diagonals and seed counts of the whole gapless stage, default and sensitive settings,
    NumPy against compiled kernels (the blocked seed count, its layout cache per query-length class)."""
    pytest.importorskip("numba")
    from workflow_lib.search.settings import SENSITIVE_PREFILTER

    from workflow_lib.search.shard_cache import ShardCache

    shard = load_shard(small_db, 0)
    index = load_kmer_index(small_db, 0)
    keys = set(index)
    results, caches = {}, {}
    for kernels in ("numpy", "compiled", "one layout"):
        monkeypatch.setenv("TRACKFOLD_KERNELS", "numpy" if kernels == "numpy" else "compiled")
        # "one layout": the residues padded once for a longer query than any here, as a batch search does
        cache = caches[kernels] = ShardCache(layout_pad=2048 if kernels == "one layout" else 0)
        results[kernels] = [gapless_prefilter(scores, index, shard.residues, shard.offsets, kmer_threshold=threshold,
                                              diagonals_per_target=diagonals, offset_bits=offset, cache=cache)
                            for scores in (query_scores, query_scores[:40], query_scores[:200])
                            for threshold, diagonals, offset in ((None, 4, 2.5),
                                                                 (4.5, SENSITIVE_PREFILTER["diagonals_per_target"],
                                                                  SENSITIVE_PREFILTER["gapless_offset"]),
                                                                 (2.0, 2, -1e9))]
    for a, b, c in zip(results["numpy"], results["compiled"], results["one layout"]):
        for field in ("sequence", "score", "diagonal", "seeds", "seeded_targets"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
            np.testing.assert_array_equal(getattr(a, field), getattr(c, field))
    assert list(caches["one layout"]._entries["padded"]) == [2048]
    assert any(r.sequence.size > 20 for r in results["compiled"])
    # the layouts live in the shard's cache, one per query-length class, never in the caller's index
    assert set(index) == keys
    assert len(caches["numpy"]) >= 2 and len(caches["compiled"]) >= 2
    cache = ShardCache()
    built = [cache.get("padded", pad, lambda pad=pad: pad) for pad in (64, 128, 256, 64)]
    assert built == [64, 128, 256, 64] and len(cache) == ShardCache.LIMITS["padded"]


def test_seed_budget_keeps_the_strongest_seeds_as_a_higher_threshold_would(small_db, query_scores):
    """Within a budget the seeds are those of the threshold just above the cut: the (window, k-mer) pairs kept are
    the neighbourhood at that threshold, their entries fit the budget, one more bit-level would not, and the
    prefilter's result equals the one with that threshold; a budget the seeds fit changes nothing."""
    from workflow_lib.db.kmer_index import index_offsets
    index = load_kmer_index(small_db, 0)
    shard = load_shard(small_db, 0)
    shape = index_offsets(index)
    window, code, bits = kmer_neighbourhood(query_scores, 4, 4.0, shape)
    entries = index["offsets"][code + 1] - index["offsets"][code]
    total = int(entries.sum())
    assert strongest_seeds(window, code, bits, index["offsets"], None)[0] is window
    assert strongest_seeds(window, code, bits, index["offsets"], total)[0] is window
    for share in (0.5, 0.2, 0.05):
        budget = share * total
        kept_window, kept_code, kept_bits = strongest_seeds(window, code, bits, index["offsets"], budget)
        kept_entries = int((index["offsets"][kept_code + 1] - index["offsets"][kept_code]).sum())
        assert 0 < kept_entries <= budget
        cut = float(np.max(bits[bits < kept_bits.min()]))           # the strongest level left out
        assert kept_entries + int(entries[bits == cut].sum()) > budget
        above = np.nextafter(np.float32(cut), np.float32(np.inf))
        w2, c2, b2 = kmer_neighbourhood(query_scores, 4, float(above), shape)
        assert np.array_equal(kept_window, w2) and np.array_equal(kept_code, c2)
        capped = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=4.0,
                                   max_seeds=budget)
        raised = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=float(above))
        assert np.array_equal(capped.sequence, raised.sequence) and np.array_equal(capped.score, raised.score)
    full = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=4.0)
    fits = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=4.0,
                             max_seeds=total)
    assert np.array_equal(full.sequence, fits.sequence) and np.array_equal(full.score, fits.score)


def test_two_hit_rule_holds_only_when_the_seeds_exceed_the_budget(small_db, query_scores):
    """``two_hit_over_budget``: within the budget the prefilter is the one-seed prefilter, over it the two-seed
    one under the same budget; every diagonal it scores holds at least two seeds, and its survivors are a subset
    of the one-seed survivors."""
    from workflow_lib.db.kmer_index import index_offsets
    index = load_kmer_index(small_db, 0)
    shard = load_shard(small_db, 0)
    _, code, _ = kmer_neighbourhood(query_scores, 4, 4.0, index_offsets(index))
    entries = int((index["offsets"][code + 1] - index["offsets"][code]).sum())

    def run(budget, **kwargs):
        return gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=4.0,
                                 max_seeds=budget, offset_bits=-30.0, **kwargs)

    for budget in (None, float(entries)):
        auto, one = run(budget, two_hit_over_budget=True), run(budget)
        assert np.array_equal(auto.sequence, one.sequence) and np.array_equal(auto.score, one.score)
    for share in (0.5, 0.02):
        budget = share * entries
        auto, one, two = run(budget, two_hit_over_budget=True), run(budget), run(budget, min_hits=2)
        assert np.array_equal(auto.sequence, two.sequence) and np.array_equal(auto.score, two.score)
        assert auto.seeds.size and auto.seeds.min() >= 2
        assert set(auto.sequence.tolist()) <= set(one.sequence.tolist())
    assert one.seeds.min() == 1 and auto.sequence.size < one.sequence.size   # 2% of the seeds: some diagonals of one


def test_direct_pass_follows_the_gapped_bar_only_in_large_databases():
    """The direct pass is the setting's offset up to 16,000 sequences (sensitive) or 362,000 (fast), then 4 bits
    below stage 2's bar log2(N / 1000)."""
    from workflow_lib.search.gapped import DIRECT_PASS_MARGIN_BITS, direct_pass_offset
    assert direct_pass_offset(0.0, 1_867) == 0.0 and direct_pass_offset(0.0, 15_351) == 0.0
    assert direct_pass_offset(4.5, 300_000) == 4.5
    uniprot = np.log2(447_873 / 1000.0) - DIRECT_PASS_MARGIN_BITS
    assert direct_pass_offset(0.0, 447_873) == pytest.approx(uniprot) and 4.8 < uniprot < 4.85
    assert direct_pass_offset(4.5, 447_873) == pytest.approx(uniprot)
    assert direct_pass_offset(0.0, 447_873, margin=float("inf")) == 0.0


def test_best_per_target_equals_a_three_key_sort():
    """Each target's best diagonal (score, then seeds, then the first) is what a lexsort keeps, ties included,
    sorted or not."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 200))
        sequence = rng.integers(0, 15, n)
        score = rng.integers(-2, 3, n).astype(np.float32)     # few values: many ties
        hits = rng.integers(1, 3, n).astype(np.int32)
        for seq in (np.sort(sequence), sequence):
            order = np.lexsort((-hits, -score, seq))
            first = np.concatenate([[True], seq[order][1:] != seq[order][:-1]])
            assert np.array_equal(best_per_target(seq, score, hits), np.sort(order[first]))


@pytest.mark.parametrize("shape, threshold", [("1", 1.0), ("11", 1.5), ("111", 3.0), ("111", -30.0),
                                              ("1111", 4.0), ("11111", 6.0), ("1010011", 5.5), ("1001", 1.0)])
def test_neighbourhood_is_the_dense_table_above_the_threshold(query_scores, shape, threshold):
    """Branch and bound gives every (window, code) the dense table has at or above the threshold, the same
    scores and order, for contiguous and spaced shapes; also for a random profile with large positive and
    negative scores. The table's entries are checked against sums of the shape's columns."""
    from workflow_lib.db.kmer_index import shape_offsets
    from workflow_lib.search.seeds import kmer_neighbourhood, kmer_scores

    offsets = shape_offsets(shape)
    k = offsets.size
    rng = np.random.default_rng(k)
    for scores in (query_scores[:120], rng.normal(-1.0, 2.5, (40, 21)).astype(np.float32)):
        table = kmer_scores(scores, k, offsets)
        assert table.shape[0] == scores.shape[0] - len(shape) + 1
        i, code = 7, int(rng.integers(20 ** k))
        residues = [(code // 20 ** (k - 1 - t)) % 20 for t in range(k)]
        assert table[i, code] == pytest.approx(sum(float(scores[i + o, r]) for o, r in zip(offsets, residues)),
                                               abs=1e-4)
        window, code = np.nonzero(table >= threshold)
        got = kmer_neighbourhood(scores, k, threshold, offsets)
        np.testing.assert_array_equal(got[0], window)
        np.testing.assert_array_equal(got[1], code)
        np.testing.assert_array_equal(got[2], table[window, code])
    assert all(a.size == 0 for a in kmer_neighbourhood(query_scores[:len(shape) - 1], k, threshold, offsets))


def test_bad_seed_shapes_are_refused(small_db):
    from workflow_lib.errors import InputError
    from workflow_lib.db.kmer_index import shape_offsets

    shard = load_shard(small_db, 0)
    for shape in ("", "0111", "1110", "11a1", "1111111", "1" + "0" * 15 + "1"):
        with pytest.raises(InputError, match="seed shape"):
            shape_offsets(shape)
    with pytest.raises(InputError, match="not both"):
        build_kmer_index(shard.residues, shard.offsets, k=4, shape="1111")


def test_default_seed_threshold_follows_the_index_shape(small_db, query_scores, tmp_path):
    """1.5 (k - 1) bits for contiguous k-mers, half a bit more for a spaced shape; an index written before shapes
    existed (no ``shape`` array) is read as contiguous."""
    from workflow_lib.db.kmer_index import index_is_spaced, index_shape
    from workflow_lib.schemas.db import KMER_INDEX
    from workflow_lib.search.settings import default_kmer_threshold
    from workflow_lib.schemas.io import read_npz, write_npz

    assert [default_kmer_threshold(4), default_kmer_threshold(4, spaced=True),
            default_kmer_threshold(4, 0.5, spaced=True)] == [4.5, 5.0, 4.5]
    shard = load_shard(small_db, 0)
    old = build_kmer_index(shard.residues, shard.offsets, k=4)
    del old["shape"]
    write_npz(tmp_path / "old.kmer.npz", old, KMER_INDEX)
    old = read_npz(tmp_path / "old.kmer.npz", KMER_INDEX)
    assert "shape" not in old and index_shape(old) == "1111" and not index_is_spaced(old)
    assert index_is_spaced(load_kmer_index(small_db, 0))
    for index, bits in ((build_kmer_index(shard.residues, shard.offsets, k=3), 3.0),
                        (build_kmer_index(shard.residues, shard.offsets, k=4), 4.5), (old, 4.5),
                        (load_kmer_index(small_db, 0), 5.0)):
        default = gapless_prefilter(query_scores, index, shard.residues, shard.offsets)
        explicit = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=bits)
        for a, b in zip((default.sequence, default.score, default.diagonal), (explicit.sequence, explicit.score,
                                                                              explicit.diagonal)):
            np.testing.assert_array_equal(a, b)


def test_sensitive_settings_pass_a_superset(small_db, query_scores):
    """More diagonals per target and a lower gapless pass keep every target the default keeps, and more."""
    from workflow_lib.search.settings import SENSITIVE_PREFILTER
    shard = load_shard(small_db, 0)
    index = load_kmer_index(small_db, 0)
    default = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=3.0)
    wider = gapless_prefilter(query_scores, index, shard.residues, shard.offsets, kmer_threshold=3.0,
                              diagonals_per_target=SENSITIVE_PREFILTER["diagonals_per_target"],
                              offset_bits=SENSITIVE_PREFILTER["gapless_offset"])
    assert set(default.sequence.tolist()) < set(wider.sequence.tolist())
    kept = dict(zip(wider.sequence.tolist(), wider.score.tolist()))
    for s, score in zip(default.sequence.tolist(), default.score.tolist()):
        assert kept[s] >= score - 1e-4  # the best of 8 diagonals is at least the best of 4


@pytest.mark.parametrize("block, span, chunk", [(3, 512, 16), (8192, 512, 16), (5, 7, 3), (8192, 40, 40)])
def test_diagonal_scores_are_the_best_segment_of_each_diagonal(small_db, query_scores, block, span, chunk,
                                                                monkeypatch):
    """Any diagonal, including ones that start or end in the padding, in blocks smaller than the batch, with
    the query's columns gathered in spans and chunks that do not divide its length (NumPy kernel; the compiled
    one advances its own lanes of diagonals)."""
    from workflow_lib.search import gapless
    from workflow_lib.search.gapless import diagonal_scores, padded_residues

    monkeypatch.setattr(gapless, "COLUMN_SPAN", span)
    monkeypatch.setattr(gapless, "COLUMN_CHUNK", chunk)

    shard = load_shard(small_db, 0)
    rng = np.random.default_rng(5)
    sequence = rng.integers(0, len(shard), 40)
    lengths = shard.lengths[sequence]
    diagonal = np.array([rng.integers(-query_scores.shape[0] + 1, n) for n in lengths])
    got = diagonal_scores(query_scores, *padded_residues(shard.residues, shard.offsets, query_scores.shape[0]),
                          sequence, diagonal, block=block)
    for s, d, score in zip(sequence, diagonal, got):
        target = shard.sequence(int(s)).astype(int)
        running = best = 0.0
        for i in range(query_scores.shape[0]):
            if 0 <= i + d < target.size:
                running = max(0.0, running + float(query_scores[i, target[i + d]]))
                best = max(best, running)
        assert score == pytest.approx(best, abs=1e-3)


@pytest.mark.skipif(not compiled_available(), reason="numba not importable")
@pytest.mark.parametrize("classes", [4, 16])
def test_compiled_diagonal_scores_over_each_overlap_equal_those_over_every_column(small_db, query_scores, classes,
                                                                                  monkeypatch):
    """Scoring each diagonal over its overlap with its target only (the diagonals grouped by that span) gives
    the scores of every column, to the bit: outside the overlap a lane reads padding, which scores 0."""
    from workflow_lib.search import prefilter_compiled
    from workflow_lib.search.gapless import diagonal_scores, padded_residues

    monkeypatch.setattr(prefilter_compiled, "MIN_SPAN_QUERY", 0)
    monkeypatch.setattr(prefilter_compiled, "SPAN_CLASSES", classes)
    shard = load_shard(small_db, 0)
    rng = np.random.default_rng(11)
    sequence = rng.integers(0, len(shard), 300)
    lengths = shard.lengths[sequence]
    diagonal = np.array([rng.integers(-query_scores.shape[0] - 5, n + 5) for n in lengths])   # some miss it
    layout = padded_residues(shard.residues, shard.offsets, query_scores.shape[0])
    every_column = diagonal_scores(query_scores, *layout, sequence, diagonal)
    overlap = diagonal_scores(query_scores, *layout, sequence, diagonal, lengths=np.diff(shard.offsets))
    np.testing.assert_array_equal(overlap, every_column)
    assert (every_column > 0).sum() > 250


def test_prefilter_background_mixes_in_the_profiles_own_composition(example_dir):
    """``f^(1 − w) · c^w`` normalised, ``c`` the mean emissions: ``f`` at w = 0, ``c`` at w = 1."""
    record = read_fasta(example_dir / "proteomes" / "anaerococcus_slice.fasta")[3]
    profile = profile_from_sequence(record.sequence, context=load_context_model())
    f = profile.background.astype(np.float64)
    mean = profile.emissions.astype(np.float64).mean(axis=0)
    mean /= mean.sum()
    assert np.array_equal(prefilter_background(profile.emissions, f, 0.0), f)
    assert prefilter_background(profile.emissions, f, 1.0) == pytest.approx(mean)
    half = prefilter_background(profile.emissions, f, 0.5)
    assert half.sum() == pytest.approx(1.0)
    assert half == pytest.approx(np.sqrt(f * mean) / np.sqrt(f * mean).sum())


def test_prefilter_composition_cuts_a_biased_false_pair_not_homologs(data_dir):
    """Real Pfam pairs (the bias test's): with half the profile's composition in the null model, the
    Ala/Lys/Pro-rich non-homologous pair loses a third or more of its Smith–Waterman score, the two homologous
    pairs less than 3%, for Gonnet and context-specific profiles alike."""
    records = read_fasta(data_dir / "search" / "pfam_bias_pairs.fasta")
    for context in (None, load_context_model()):
        for query, target in zip(records[::2], records[1::2]):
            profile = profile_from_sequence(query.sequence, context=context)
            plain, mixed = (gapped_scores(profile_scores_bits(profile.emissions, prefilter_background(
                profile.emissions, profile.background, weight)), [encode(target.sequence)])[0] for weight in (0.0, 0.5))
            if query.id == "P49006":
                assert mixed < 0.7 * plain
            else:
                assert plain > 600 and plain * 0.97 < mixed < plain


def test_prefilter_composition_settings(tmp_path, capsys):
    """``auto`` is CONTEXT_PREFILTER_COMPOSITION with context pseudocounts, else 0; a weight outside [0, 1] is
    refused by the settings, the CLI and the workflow config, naming the setting."""
    from workflow_lib.cli import main
    from workflow_lib.errors import InputError
    from workflow_lib.search.settings import SearchSettings, Settings
    from workflow_lib.workflow.config import SearchConfig
    assert Settings().search.prefilter_composition == CONTEXT_PREFILTER_COMPOSITION == 0.5
    assert Settings(pseudocounts="substitution").search.prefilter_composition == 0.0
    assert Settings(pseudocounts="substitution", prefilter_composition=0.25).search.prefilter_composition == 0.25
    with pytest.raises(ValueError, match="prefilter_composition must be a weight in"):
        SearchSettings(prefilter_composition=1.5)
    assert "--prefilter-composition" not in SearchConfig().cli_options()
    assert "--prefilter-composition 0.3" in SearchConfig(prefilter_composition=0.3).cli_options()
    with pytest.raises(InputError, match="search.prefilter_composition"):
        SearchConfig(prefilter_composition=-0.1)
    fasta = tmp_path / "q.fasta"
    fasta.write_text(">q\nMKTAYIAKQR\n")
    assert main(["search", str(fasta), "--db", str(tmp_path), "--out", str(tmp_path / "x.parquet"),
                 "--prefilter-composition", "2"]) != 0
    assert "--prefilter-composition must be a weight in [0, 1], got 2.0" in capsys.readouterr().err
