"""Substitution data, profile construction, pseudocounts and .hhm I/O."""

from __future__ import annotations

import numpy as np
import pytest

from test_aligner_helpers import ALIGNER_DATA, SHARED_DATA
from workflow_lib.aligner import Profile, add_pseudocounts, profile_from_alignment, profile_from_sequence, read_hhm
from workflow_lib.aligner.hhm import format_hhm, write_hhm
from workflow_lib.aligner.profile import ADMIX_A, cluster_sequences, observed_frequencies, transition_counts
from workflow_lib.aligner.transitions import MM
from workflow_lib.aligner.substitution import (HHSUITE_BACKGROUND, ROBINSON_BACKGROUND, gonnet_matrix,
                                               substitution_probabilities)
from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import AMINO_ACIDS, encode
from workflow_lib.seqio.msa import Alignment, read_a3m


def test_gonnet_matches_biopython_copy():
    substitution_matrices = pytest.importorskip("Bio.Align.substitution_matrices")
    published = substitution_matrices.load("GONNET1992")
    ours = gonnet_matrix()
    for a, first in enumerate(AMINO_ACIDS):
        for b, second in enumerate(AMINO_ACIDS):
            assert ours[a, b] == pytest.approx(published[first][second], abs=1e-9)
    assert ours[1, 1] == 11.5  # Gonnet et al. 1992: cysteine's self-replacement score


def test_backgrounds_and_substitution_probabilities():
    for background in (HHSUITE_BACKGROUND, ROBINSON_BACKGROUND):
        assert background.shape == (20,) and abs(float(background.sum()) - 1) < 1e-6
    g = substitution_probabilities()
    assert np.allclose(g.sum(axis=1), 1.0)
    assert np.all(np.diag(g) > HHSUITE_BACKGROUND)  # staying is always more likely than chance
    # P(x|a) f(a) is symmetric: the joint distribution of the log-odds model
    joint = g * HHSUITE_BACKGROUND.astype(np.float64)[:, None]
    assert np.allclose(joint / joint.sum(), (joint / joint.sum()).T, atol=2e-3)
    with pytest.raises(ValueError):
        substitution_probabilities(np.zeros(20))


def test_profile_from_sequence_uses_substitution_rows():
    # tau = ADMIX_A = 0.9 for one sequence: 90% its residue's substitution row, 10% the residue itself
    profile = profile_from_sequence("ACXW", name="q")
    g = substitution_probabilities()
    assert np.allclose(profile.emissions[0], 0.9 * g[0] + 0.1 * np.eye(20)[0], atol=1e-6)
    assert np.allclose(profile.emissions[3], 0.9 * g[18] + 0.1 * np.eye(20)[18], atol=1e-6)
    f = HHSUITE_BACKGROUND.astype(np.float64)
    assert np.allclose(profile.emissions[2], 0.9 * (f @ g) + 0.1 * f, atol=1e-6)
    assert profile.has_pseudocounts and profile.length == 4
    pure = profile_from_alignment(_alignment(["ACW"]), admix=1.0)  # admix 1: the pure substitution row
    assert np.allclose(pure.emissions[0], g[0], atol=1e-6) and np.allclose(pure.emissions[2], g[18], atol=1e-6)
    with pytest.raises(ValueError):
        profile_from_sequence("AC-D")
    with pytest.raises(ValueError):
        add_pseudocounts(profile)


def _alignment(rows: list[str]) -> Alignment:
    names = [f"s{k}" for k in range(len(rows))]
    return Alignment.from_a3m_rows(names, [""] * len(rows), rows)


def test_one_row_alignment_equals_sequence_profile():
    from_alignment = profile_from_alignment(_alignment(["MKVLA"]))
    from_sequence = profile_from_sequence("MKVLA")
    assert np.allclose(from_alignment.emissions, from_sequence.emissions, atol=1e-6)
    assert np.allclose(from_alignment.transitions[1:-1], from_sequence.transitions[1:-1], atol=1e-6)


def test_cluster_weights_follow_the_seed_formula():
    # rows 0-2 are identical (one cluster), row 3 differs everywhere: two clusters per column
    alignment = _alignment(["AAAA", "AAAA", "AAAA", "CCCC"])
    labels = cluster_sequences(alignment.matches, 0.8)
    assert labels.tolist() == [0, 0, 0, 1]
    q_obs, clusters = observed_frequencies(alignment.matches, labels, HHSUITE_BACKGROUND)
    assert clusters.tolist() == [2, 2, 2, 2]
    assert np.allclose(q_obs[:, 0], 0.5) and np.allclose(q_obs[:, 1], 0.5)  # 3 x 1/3 vs 1 x 1/1, over 2 clusters
    # single linkage: C joins the cluster through its nearest member even if far from the first one
    chain = _alignment(["AAAAAAAAAA", "AAAAAAAAAC", "AAAAAAAACC", "CCCCCCCCCC"])
    assert cluster_sequences(chain.matches, 0.85).tolist() == [0, 0, 0, 1]


def test_psiblast_mixing_rule():
    alignment = _alignment(["ACDEFGHIKL", "ACDEFGHIKL", "CDEFGHIKLM", "DEFGHIKLMN", "EFGHIKLMNP", "FGHIKLMNPQ"])
    raw = profile_from_alignment(alignment, pseudocounts=False)
    neff = raw.column_neff[1:, 0].astype(np.float64)
    alpha = (neff - 1)[:, None]
    expected = raw.emissions.astype(np.float64) @ substitution_probabilities(raw.background)
    # admix 1: the PSI-BLAST rule itself
    mixed = add_pseudocounts(raw, beta=10.0, admix=1.0)
    want = (alpha * raw.emissions + 10.0 * expected) / (alpha + 10.0)
    assert np.allclose(mixed.emissions, want / want.sum(axis=1, keepdims=True), atol=1e-5)
    assert np.all(neff > 1.0) and raw.neff == pytest.approx(neff.mean(), rel=1e-5)
    # the default: HH-suite's diversity-dependent admixture tau = a / (1 + (Neff - 1) / b), a = 0.9, b = 10
    tau = (0.9 / (1.0 + alpha / 10.0))
    want = (1.0 - tau) * raw.emissions + tau * expected
    assert ADMIX_A == 0.9
    assert np.allclose(add_pseudocounts(raw).emissions, want / want.sum(axis=1, keepdims=True), atol=1e-5)
    with pytest.raises(ValueError, match="admix"):
        add_pseudocounts(raw, admix=0.0)


def test_transition_counts_span_and_inserts():
    # row 1: deletion at column 2 (inside its span), row 2: two inserted residues after column 1, row 3: end gaps
    alignment = _alignment(["ACDE", "A-DE", "AcaCDE", "-CD-"])
    probabilities, states = transition_counts(alignment.matches, alignment.insertions, np.ones(4))
    assert probabilities[1].tolist()[:3] == pytest.approx([1 / 3, 1 / 3, 1 / 3])  # col 1: MM (row 0), MD, MI
    assert probabilities[1, 4] == pytest.approx(0.5)  # I->I: 1 extension of 2 insert steps (1 II, 1 IM)
    assert probabilities[2, 5] == pytest.approx(1.0)  # D->M after the deletion
    assert states[1].tolist() == [3.0, 1.0, 0.0]  # row 3 starts at column 2: not counted at column 1
    assert probabilities[-1, MM] == 1.0


def test_hhm_roundtrip(tmp_path):
    profile = profile_from_alignment(read_a3m(SHARED_DATA / "hhsuite_examples" / "query.a3m"))
    write_hhm(tmp_path / "q.hhm", profile)
    back = read_hhm(tmp_path / "q.hhm")
    assert back.length == profile.length and back.query == profile.query
    # 1/1000-bit resolution: relative error of p is at most 2^0.0005 - 1
    assert np.allclose(back.emissions, profile.emissions, rtol=2e-3, atol=1e-7)
    assert np.allclose(back.transitions[1:], profile.transitions[1:], rtol=2e-3, atol=1e-7)
    assert np.allclose(back.column_neff[1:], profile.column_neff[1:], atol=1e-3)
    assert format_hhm(back).count("\n//") == 1


def test_read_hhsuite_profile():
    profile = read_hhm(SHARED_DATA / "hhsuite_examples" / "query.hhm")
    assert profile.length == 431 and profile.name == "sp|Q5VUD6|FA69B_HUMAN"
    assert profile.neff == pytest.approx(5.2)
    assert not profile.has_pseudocounts
    assert np.allclose(profile.emissions.sum(axis=1), 1.0, atol=1e-5)
    assert profile.emissions[0, AMINO_ACIDS.index("M")] == pytest.approx(2 ** (-1.095) / 1.0, rel=0.05)
    assert profile.column_neff[1, 0] == pytest.approx(1.695)
    assert np.allclose(profile.background, HHSUITE_BACKGROUND, atol=1e-4)
    assert profile.query.startswith("MRRLRRLAHL")
    assert profile.consensus is not None and len(profile.consensus) == 431
    with_pc = add_pseudocounts(profile)
    assert with_pc.emissions.min() > 0 and with_pc.transitions[1:-1].min() > 0


def test_malformed_hhm_is_an_input_error(tmp_path):
    bad = tmp_path / "bad.hhm"
    bad.write_text("HHsearch 1.5\nNAME x\n")
    with pytest.raises(InputError, match="NULL"):
        read_hhm(bad)
    text = (ALIGNER_DATA / "hhm" / "globins4.hhm").read_text().replace("\n", "\nGARBAGE LINE\n", 30)
    bad.write_text(text)
    with pytest.raises(InputError):
        read_hhm(bad)


def test_profile_validation():
    with pytest.raises(ValueError, match="emissions"):
        Profile("x", encode("AC"), np.zeros((3, 20), np.float32), np.zeros((3, 7), np.float32),
                np.zeros((3, 3), np.float32), 1.0, HHSUITE_BACKGROUND, False)


def test_read_hmmer3_profile():
    from workflow_lib.aligner.hmmer3 import read_hmmer3
    profile = read_hmmer3(SHARED_DATA / "hmmer_examples" / "tutorial" / "Pkinase.hmm")
    assert profile.length == 260 and profile.name == "Pkinase" and profile.has_pseudocounts
    assert np.allclose(profile.emissions.sum(axis=1), 1.0, atol=1e-5)
    assert profile.transitions[1, MM] == pytest.approx(np.exp(-0.00990), rel=1e-5)
    assert profile.neff == pytest.approx(3.358521)
    with pytest.raises(InputError):
        read_hmmer3(ALIGNER_DATA / "hhm" / "fn3.hhm")
