"""The compiled (numba) sequence–profile kernel against the NumPy lane kernel and the plain-loop reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workflow_lib.aligner import align_targets, profile_from_sequence
from workflow_lib.aligner import compiled, device
from workflow_lib.aligner.backtrace import SEQ_D_BIT, SEQ_M_POINTER_MASK, sequence_hits
from workflow_lib.aligner.reference import viterbi_sequence_reference
from workflow_lib.aligner.scores import sequence_scores
from workflow_lib.aligner.viterbi_seq import pack_targets, viterbi_seq_lanes
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.fasta import read_fasta
from test_aligner_helpers import random_profile

DATA = Path(__file__).parent / "data" / "search"

numba = pytest.importorskip("numba")


def real_pairs():
    """Six Pfam sequences (tests/data/README.md): each one's profile against all six, lengths 100–900."""
    records = read_fasta(DATA / "pfam_bias_pairs.fasta")
    return [r.sequence for r in records]


@pytest.mark.parametrize("backtrace", [False, True])
def test_compiled_equals_numpy_kernel_on_real_sequences(backtrace):
    sequences = real_pairs()
    targets = [encode(s) for s in sequences]
    indices = list(range(len(targets)))
    packed = pack_targets(targets, indices)
    for query in sequences[:3]:
        scores = sequence_scores(profile_from_sequence(query))
        expected = viterbi_seq_lanes(scores, packed, backtrace=backtrace)
        got = compiled.viterbi_seq_lanes_compiled(scores, packed, backtrace=backtrace)
        for want, have in zip(expected[:3], got[:3]):
            np.testing.assert_array_equal(have, want)
        if backtrace:
            # the M pointers and D bits are the same everywhere; I bits may differ only in cells that no optimal
            # path reads (the NumPy kernel resolves only the insert chains that can matter)
            np.testing.assert_array_equal(got[3] & SEQ_M_POINTER_MASK, expected[3] & SEQ_M_POINTER_MASK)
            np.testing.assert_array_equal(got[3] & (1 << SEQ_D_BIT), expected[3] & (1 << SEQ_D_BIT))
            want_hits = sequence_hits(expected[3], *expected[:3], indices)
            have_hits = sequence_hits(got[3], *got[:3], indices)
            assert [(h.raw_score, h.states, h.query_start, h.target_start) for h in have_hits] == \
                   [(h.raw_score, h.states, h.query_start, h.target_start) for h in want_hits]
        else:
            assert got[3] is None
            assert not got[1].any() and not got[2].any()


@pytest.mark.parametrize("profile_kind", ["sequence", "position-specific"])
def test_compiled_matches_the_reference(monkeypatch, profile_kind):
    monkeypatch.delenv(device.KERNELS_ENV, raising=False)
    sequences = real_pairs()
    if profile_kind == "sequence":
        profile = profile_from_sequence(sequences[2][:120])
    else:   # transitions that differ per column, long insert chains
        profile = random_profile(np.random.default_rng(3), 60, sharpness=0.1)
    scores = sequence_scores(profile)
    targets = [encode(s[:160]) for s in sequences] + [encode("W"), encode(sequences[2][40:70])]
    hits = align_targets(profile, targets, backtrace=True, lane_cells=256)   # several narrow buckets
    assert [h.raw_score for h in align_targets(profile, targets)] == [h.raw_score for h in hits]
    for target, hit in zip(targets, hits):
        raw, steps = viterbi_sequence_reference(scores, target)
        assert hit.raw_score == raw
        assert hit.states == "".join(step[2] for step in steps)
        assert (hit.query_start, hit.target_start) == (steps[0][0] - 1, steps[0][1] - 1)


def test_compiled_tracer_follows_the_same_paths():
    """The compiled path tracer against the NumPy one on the same backtrace bytes, lanes without a path
    (best_i = 0, as a search leaves unreportable targets) included."""
    from workflow_lib.aligner.backtrace import SEQ_STATES, _lane_hits, _paths, _seq_step
    sequences = real_pairs()
    targets = [encode(s) for s in sequences]
    indices = list(range(len(targets)))
    packed = pack_targets(targets, indices)
    for query in sequences:
        best, best_i, best_l, bt = viterbi_seq_lanes(sequence_scores(profile_from_sequence(query[:200])), packed,
                                                     backtrace=True)
        best_i = np.where(np.arange(best_i.size) % 3 == 2, 0, best_i)
        for view in (bt, bt[:, :, :4]):   # a lane-sliced view, as the compiled kernel's padded lanes give
            width = view.shape[2]
            want = _lane_hits(_paths(view, best_i[:width], best_l[:width], _seq_step, 3), best[:width],
                              indices[:width], SEQ_STATES)
            have = _lane_hits(compiled.sequence_paths_compiled(view, best_i[:width], best_l[:width]),
                              best[:width], indices[:width], SEQ_STATES)
            assert [(h.states, h.query_start, h.query_end, h.target_start, h.target_end) for h in have] == \
                   [(h.states, h.query_start, h.query_end, h.target_start, h.target_end) for h in want]
            for a, b in zip(have, want):
                np.testing.assert_array_equal(a.pairs, b.pairs)
            assert any(h.states for h in have) and any(not h.states for h in have)


def test_switch_and_fallback(monkeypatch):
    monkeypatch.setenv(device.KERNELS_ENV, "numpy")
    assert not device.compiled_available()
    monkeypatch.setenv(device.KERNELS_ENV, "")
    assert device.compiled_available()
    for module in (device, compiled):   # numba not installed: the NumPy kernel runs
        monkeypatch.setattr(module, "numba_module", lambda: None)
    assert not device.compiled_available()
    profile = profile_from_sequence("MKVLAAGIVGLLLA")
    hits = align_targets(profile, [encode("MKVLAAGIVG"), encode("PPPP")], backtrace=True)
    assert hits[0].states.startswith("M")
    with pytest.raises(RuntimeError, match="numba"):
        compiled.viterbi_seq_lanes_compiled(sequence_scores(profile), pack_targets([encode("MKV")], [0]),
                                            backtrace=False)
