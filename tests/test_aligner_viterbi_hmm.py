"""Profile–profile lane kernel vs the plain-loop reference, and the correlation score."""

from __future__ import annotations

import numpy as np
import pytest

from test_aligner_helpers import ALIGNER_DATA, cut_profile, random_profile
from workflow_lib.aligner import add_pseudocounts, align_profiles, read_hhm, viterbi_profile_profile
from workflow_lib.aligner.lanes import pair_scores_for
from workflow_lib.aligner.reference import viterbi_profile_reference
from workflow_lib.aligner.scores import HHSUITE_SHIFT
from workflow_lib.aligner.viterbi_hmm import correlation_score, viterbi_profile_lanes


def assert_matches_reference(query, templates, hits):
    for template, hit in zip(templates, hits):
        q, t = pair_scores_for(query, template)
        raw, steps = viterbi_profile_reference(q, t, shift=HHSUITE_SHIFT)
        assert hit.raw_score == raw
        assert hit.states == "".join(step[2] for step in steps)
        assert hit.score == pytest.approx(raw / 1000 + correlation_score(q, t, steps), abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_profiles(seed, cpu_kernels):
    rng = np.random.default_rng(seed)
    query = random_profile(rng, int(rng.integers(1, 25)))
    templates = [random_profile(rng, int(n)) for n in rng.integers(1, 30, 6)]
    templates.append(query)
    hits = align_profiles(query, templates)
    assert [h.index for h in hits] == list(range(len(templates)))
    assert_matches_reference(query, templates, hits)


def test_real_profile_slices(cpu_kernels):
    pkinase = add_pseudocounts(read_hhm(ALIGNER_DATA / "hhm" / "pkinase.hhm"))
    fam69b = add_pseudocounts(read_hhm(ALIGNER_DATA / "hhm" / "fam69b.hhm"))
    globin = add_pseudocounts(read_hhm(ALIGNER_DATA / "hhm" / "globins4.hhm"))
    query = cut_profile(pkinase, 100, 130)
    templates = [cut_profile(fam69b, 270, 310), cut_profile(pkinase, 95, 140), cut_profile(globin, 0, 12),
                 cut_profile(fam69b, 0, 1)]
    assert_matches_reference(query, templates, align_profiles(query, templates, lane_cells=64))


def test_compiled_traceback_equals_the_lane_kernel_byte_for_byte():
    """The compiled traced kernel (what align_profiles runs with numba) gives the NumPy lane kernel's scores,
    best cells and backtrace bytes on every real cell: real profiles of different lengths in one call, the
    query against itself, and a one-column template."""
    pytest.importorskip("numba")
    from workflow_lib.aligner.hmm_kernels import hmm_traced
    pkinase = add_pseudocounts(read_hhm(ALIGNER_DATA / "hhm" / "pkinase.hhm"))
    fam69b = add_pseudocounts(read_hhm(ALIGNER_DATA / "hhm" / "fam69b.hhm"))
    globin = add_pseudocounts(read_hhm(ALIGNER_DATA / "hhm" / "globins4.hhm"))
    query = cut_profile(pkinase, 40, 160)
    pairs = [pair_scores_for(query, t) for t in (fam69b, cut_profile(pkinase, 30, 200), globin, query,
                                                  cut_profile(fam69b, 5, 6))]
    q, templates = pairs[0][0], [t for _, t in pairs]
    best, best_i, best_j, bt = viterbi_profile_lanes(q, templates)
    c_best, c_i, c_j, c_bt = hmm_traced(q, templates)
    assert c_best.tolist() == best.tolist() and c_i.tolist() == best_i.tolist() and c_j.tolist() == best_j.tolist()
    for lane, template in enumerate(templates):
        assert np.array_equal(c_bt[:, :template.length, lane], bt[:, :template.length, lane]), lane


def test_correlation_score_by_hand():
    query = random_profile(np.random.default_rng(9), 6)
    q, t = pair_scores_for(query, query)
    steps = [(1, 1, "M"), (2, 2, "M"), (3, 2, "I"), (4, 3, "M")]
    s = [np.log2(q.scaled[i] @ t.scaled[j]) for i, j in ((0, 0), (1, 1))] + [0.0,
                                                                               np.log2(q.scaled[3] @ t.scaled[2])]
    want = 0.1 * (s[0] * s[1] + s[1] * s[2] + s[2] * s[3] + s[0] * s[2] + s[1] * s[3] + s[0] * s[3])
    assert correlation_score(q, t, steps) == pytest.approx(want)


def test_self_alignment_is_the_diagonal():
    profile = add_pseudocounts(read_hhm(ALIGNER_DATA / "hhm" / "globins4.hhm"))
    hit = viterbi_profile_profile(profile, profile)
    assert hit.states == "M" * profile.length
    assert np.array_equal(hit.pairs[:, 0], hit.pairs[:, 1])
