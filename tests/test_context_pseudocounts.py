"""Context-specific pseudocounts: the model, its training, profiles and the search option."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workflow_lib.aligner.context import (DEFAULT_CONTEXT_MODEL, N_INPUTS, ContextModel, load_context_model, log_softmax,
                                          one_hot_columns, save_context_model)
from workflow_lib.aligner.context_train import (WINDOW_OUTSIDE, column_counts, context_log_loss, fit_context_model,
                                                gonnet_log_loss, read_alignments, training_columns)
from workflow_lib.aligner.profile import ADMIX_A, profile_from_alignment, profile_from_sequence
from workflow_lib.aligner.substitution import DEFAULT_BACKGROUND
from workflow_lib.errors import InputError
from workflow_lib.search.settings import MsaSettings
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.msa import Alignment, read_a3m
from workflow_lib.workflow.config import SearchConfig

DATA = Path(__file__).parent / "data" / "search" / "context"
HELD_OUT = sorted(DATA.glob("*.a3m"))
HELD_OUT_PDB = sorted((DATA.parent / "context_pdb").glob("*.a3m"))
F = DEFAULT_BACKGROUND.astype(np.float64) / DEFAULT_BACKGROUND.sum()


def test_shipped_model_beats_gonnet_on_held_out_msas():
    """PDB-chain MSAs of the fifth the shipped weights were not fitted on: the remote rows' residues are predicted
    better than by the Gonnet pseudocounts the model replaces; proteome MSAs of another origin (E. coli against
    the Swiss-Prot subsets), which it never saw, no worse."""
    assert len(HELD_OUT) == 12 and len(HELD_OUT_PDB) == 12
    model = load_context_model()
    assert model.half_width == 6
    columns = training_columns(read_alignments(HELD_OUT_PDB))
    ours, gonnet = context_log_loss(model, columns), gonnet_log_loss(columns)
    assert ours < gonnet - 0.015, (ours, gonnet)
    columns = training_columns(read_alignments(HELD_OUT))
    ours, gonnet = context_log_loss(model, columns), gonnet_log_loss(columns)
    assert ours < gonnet, (ours, gonnet)


def test_predict_matches_training_features_and_sums_to_one():
    model = load_context_model()
    alignment = read_a3m(HELD_OUT[0])
    query = np.asarray(alignment.matches[0])
    predicted = model.predict(one_hot_columns(query, F))
    assert predicted.shape == (query.size, 20)
    np.testing.assert_allclose(predicted.sum(axis=1), 1.0, atol=1e-12)
    columns = training_columns([alignment])
    # the training windows of the filled columns give the same probabilities (NumPy loss path vs predict)
    from workflow_lib.aligner.context_train import window_distributions
    p = np.exp(log_softmax(model.window_logits(window_distributions(columns.windows, F),
                                               columns.windows == WINDOW_OUTSIDE)))
    filled = np.flatnonzero(column_counts(alignment, max_identity=0.5, min_residues=30).sum(axis=1) > 0)
    np.testing.assert_allclose(p, predicted[filled], atol=1e-10)


def test_context_changes_the_prediction_for_the_same_residue():
    """The same residue gets different pseudocounts in a helix-like and a loop-like window."""
    model = load_context_model()
    helix = model.predict(one_hot_columns(encode("EELLKKLLEELLKKL"), F))[7]
    loop = model.predict(one_hot_columns(encode("GPNGSGDLGSPNGDG"), F))[7]
    assert np.abs(helix - loop).sum() > 0.1
    # L stays the most likely residue in both, but a leucine in an amphipathic helix is conserved more often
    # than one among glycines and prolines
    leucine = "ACDEFGHIKLMNPQRSTVWY".index("L")
    assert helix.argmax() == loop.argmax() == leucine
    assert helix[leucine] > 1.3 * loop[leucine] > 2.5 * F[leucine]


def test_zero_model_predicts_its_bias_and_profiles_use_the_admixture():
    model = ContextModel(np.zeros((3, N_INPUTS, 20)), np.log(F))
    np.testing.assert_allclose(model.predict(one_hot_columns(encode("MKV"), F)), np.tile(F, (3, 1)), atol=1e-12)
    profile = profile_from_sequence("MKVLA", context=model)
    expected = (1 - ADMIX_A) * np.eye(20)[encode("MKVLA")] + ADMIX_A * F[None, :]
    np.testing.assert_allclose(profile.emissions, expected, atol=1e-6)
    # the default is unchanged: Gonnet pseudocounts
    assert not np.allclose(profile_from_sequence("MKVLA").emissions, profile.emissions, atol=1e-3)


def test_msa_profiles_take_context_from_observed_columns():
    alignment = read_a3m(HELD_OUT[1])
    plain = profile_from_alignment(alignment)
    context = profile_from_alignment(alignment, context=load_context_model())
    assert plain.emissions.shape == context.emissions.shape
    np.testing.assert_allclose(context.emissions.sum(axis=1), 1.0, atol=1e-5)
    assert np.abs(plain.emissions - context.emissions).max() > 0.01
    np.testing.assert_array_equal(plain.transitions, context.transitions)


def test_fit_recovers_a_context_rule():
    """Synthetic columns whose substitutions depend on the right neighbour (a rule a log-linear model can
    express): the fitted model learns it (log-loss well below Gonnet's and below a centre-only model)."""
    rng = np.random.default_rng(0)
    n = 4000
    windows = rng.choice(20, size=(n, 3), p=F).astype(np.uint8)
    windows[: n // 10, 0] = WINDOW_OUTSIDE
    counts = np.zeros((n, 20), np.float32)
    rule = np.where(windows[:, 2] < 10, windows[:, 1], 5)  # G after a "large" right neighbour, else conserved
    counts[np.arange(n), rule] = 3.0
    from workflow_lib.aligner.context_train import TrainingColumns
    columns = TrainingColumns(windows, counts, np.arange(n, dtype=np.int32) // 40)
    model, report = fit_context_model(columns, F, l2=1e-5, max_iter=300)
    centre_only, centre_report = fit_context_model(
        TrainingColumns(windows[:, 1:2], counts, columns.msa), F, l2=1e-5, max_iter=300)
    assert report["validation_nats"] < centre_report["validation_nats"] - 0.2
    assert report["validation_nats"] < report["validation_gonnet_nats"] - 1.0
    assert abs(context_log_loss(model, TrainingColumns(windows, counts, columns.msa)) - report["train_nats"]) < 0.1
    assert centre_only.half_width == 0
    with pytest.raises(ValueError, match="for a model of 1 columns"):
        context_log_loss(centre_only, columns)


def test_training_columns_keep_only_remote_rows():
    rows = ["MKVLAAGIVGLLLAAQPAMAEKEVSFKDGWKLPSIGE",   # query
            "MKVLAAGIVGLLLAAQPAMAEKEVSFKDGWKLPSIGE",   # identical: not remote
            "LRIVSAGLLGMMVSSHPALSDRQISWRDGFRVPALGD"]   # remote
    alignment = Alignment.from_a3m_rows(["q", "same", "far"], ["", "", ""], rows)
    counts = column_counts(alignment, max_identity=0.5, min_residues=30)
    far = encode(rows[2])
    np.testing.assert_allclose(counts.sum(axis=1), 1.0)
    np.testing.assert_array_equal(counts.argmax(axis=1), far)
    assert column_counts(alignment, max_identity=0.5, min_residues=40) is None
    columns = training_columns([alignment], half_width=2)
    assert columns.windows.shape == (len(rows[0]), 5)
    assert columns.windows[0, 0] == WINDOW_OUTSIDE and columns.windows[0, 2] == encode(rows[0])[0]


def test_bad_model_files_name_the_file(tmp_path):
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not an npz")
    with pytest.raises(InputError, match="broken.npz"):
        load_context_model(broken)
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, weights=np.zeros((2, N_INPUTS, 20)), bias=np.zeros(20))
    with pytest.raises(InputError, match="2h \\+ 1"):
        load_context_model(wrong)
    good = tmp_path / "good.npz"
    save_context_model(good, ContextModel(np.zeros((1, N_INPUTS, 20)), np.log(F)))
    assert load_context_model(good).half_width == 0
    assert DEFAULT_CONTEXT_MODEL.is_file()


def test_settings_and_config_validate_the_choice():
    with pytest.raises(ValueError, match="pseudocounts"):
        MsaSettings(pseudocounts="blosum")
    assert MsaSettings(pseudocounts="substitution").context() is None
    assert MsaSettings(pseudocounts="context").context() is load_context_model()
    with pytest.raises(InputError, match="search.pseudocounts"):
        SearchConfig(pseudocounts="blosum")
    assert "--pseudocounts context" in SearchConfig(pseudocounts="context").cli_options()
    # the workflow's default is the command line's: context pseudocounts and the sensitive prefilter, passed on
    # explicitly either way
    assert SearchConfig().cli_options().endswith("--sensitive --pseudocounts context")
    fast = SearchConfig(pseudocounts="substitution", sensitive=False).cli_options()
    assert fast.endswith("--no-sensitive --pseudocounts substitution")
