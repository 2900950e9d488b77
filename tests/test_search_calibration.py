"""E-value calibration against reversed real proteins (``search.calibration: reversed``): the shipped decoy
pool, the windows drawn from it, the settings that choose it, and what it changes on real profiles."""

from __future__ import annotations

import numpy as np
import pytest

from workflow_lib.aligner import profile_from_sequence
from workflow_lib.aligner.context import load_context_model
from workflow_lib.errors import InputError
from workflow_lib.search.engine import DatabaseTotals, calibrate, calibration_targets
from workflow_lib.search.evalue import (DECOY_WINDOW_LENGTH, DECOY_POOL_PATH, REVERSED_LAMBDA_SCALE, decoy_windows,
                                        gumbel_lambda, load_decoy_pool, write_decoy_pool)
from workflow_lib.search.settings import SearchSettings, Settings
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.workflow.config import SearchConfig

TOTALS = DatabaseTotals("db", 10_000, 10_000 * 350)


def test_shipped_pool_is_reversed_real_proteins():
    pool = load_decoy_pool()
    assert len(pool) == 1000
    assert min(s.size for s in pool) >= DECOY_WINDOW_LENGTH
    assert all(int(s.max()) < 20 for s in pool)
    # the provenance file names the sources; the first decoy is a reversed Swiss-Prot archaeal protein
    assert "sprot_Archaea" in DECOY_POOL_PATH.with_suffix(".json").read_text()


def test_windows_are_deterministic_substrings_of_the_pool():
    pool = load_decoy_pool()
    windows = decoy_windows(pool, 350.0, 64, seed=11)
    assert all(np.array_equal(a, b) for a, b in zip(windows, decoy_windows(pool, 350.0, 64, seed=11)))
    assert {w.size for w in windows} == {DECOY_WINDOW_LENGTH}
    texts = [s.tobytes() for s in pool]
    assert all(any(w.tobytes() in text for text in texts) for w in windows[:8])
    assert not all(np.array_equal(a, b) for a, b in zip(windows, decoy_windows(pool, 350.0, 64, seed=12)))
    short = decoy_windows(pool, 60.0, 5, seed=1)
    assert {w.size for w in short} == {60}


def test_bad_pool_files_name_the_file(tmp_path):
    write_decoy_pool(tmp_path / "short.npz", [np.zeros(50, np.uint8)])
    with pytest.raises(InputError, match="short.npz"):
        load_decoy_pool(str(tmp_path / "short.npz"))
    (tmp_path / "junk.npz").write_bytes(b"not an npz")
    with pytest.raises(InputError, match="junk.npz"):
        load_decoy_pool(str(tmp_path / "junk.npz"))
    write_decoy_pool(tmp_path / "good.npz", [np.arange(250, dtype=np.uint8) % 20])
    assert len(load_decoy_pool(str(tmp_path / "good.npz"))) == 1


def test_settings_choose_the_calibration():
    with pytest.raises(ValueError, match="calibration"):
        SearchSettings(calibration="shuffled")
    assert Settings(calibration="auto", pseudocounts="context").search.calibration == "reversed"
    assert Settings(calibration="auto", pseudocounts="substitution").search.calibration == "random"
    assert Settings(calibration="random", pseudocounts="context").search.calibration == "random"
    assert "--calibration" not in SearchConfig().cli_options()
    assert "--calibration reversed" in SearchConfig(calibration="reversed").cli_options()
    with pytest.raises(InputError, match="search.calibration"):
        SearchConfig(calibration="decoys")


def test_reversed_proteins_raise_the_bar_for_context_profiles(example_dir):
    """Real example proteins: calibrated on reversed proteins, the score a context-specific profile needs for
    E = 1 rises by 2–3 bits (its pseudocounts reward local structure that i.i.d. sequences lack; about 1.5 bits
    come from the lower λ), a Gonnet profile's by less (1.6–2.2 bits, nearly all of it λ). λ is the i.i.d.
    model's, times REVERSED_LAMBDA_SCALE for reversed proteins; the length slope is the same."""
    records = read_fasta(example_dir / "proteomes" / "anaerococcus_slice.fasta")[:6]
    context = load_context_model()
    shifts = {"gonnet": [], "context": []}
    for record in records:
        for name, profile in (("gonnet", profile_from_sequence(record.sequence)),
                              ("context", profile_from_sequence(record.sequence, context=context))):
            random = calibrate(profile, TOTALS, 128, calibration="random")
            reversed_ = calibrate(profile, TOTALS, 128, calibration="reversed")
            assert random.lam == gumbel_lambda(profile.neff, profile.length)
            assert reversed_.lam == pytest.approx(random.lam * REVERSED_LAMBDA_SCALE)
            assert reversed_.slope == random.slope
            bar = [c.min_bits(1.0, np.array([300]), TOTALS.sequences)[0] for c in (random, reversed_)]
            shifts[name].append(bar[1] - bar[0])
        targets = calibration_targets(profile, TOTALS, 8, "reversed")
        assert [t.size for t in targets] == [DECOY_WINDOW_LENGTH] * 8
    assert np.mean(shifts["context"]) > 0.6
    assert np.mean(shifts["context"]) > np.mean(shifts["gonnet"]) + 0.4


def test_reversed_calibrations_draw_half_as_many_windows_of_twice_the_length(example_dir):
    """64 reversed windows of 200 residues hold the residues of 128 i.i.d. sequences of 100; a given count wins."""
    from workflow_lib.search.evalue import CALIBRATION_SAMPLES, DECOY_SAMPLES, calibration_samples
    assert (calibration_samples("random"), calibration_samples("reversed")) == (CALIBRATION_SAMPLES, DECOY_SAMPLES)
    assert calibration_samples("reversed", 32) == 32
    profile = profile_from_sequence(read_fasta(example_dir / "proteomes" / "anaerococcus_slice.fasta")[0].sequence)
    reversed_ = calibration_targets(profile, TOTALS, calibration="reversed")
    random = calibration_targets(profile, TOTALS, calibration="random")
    assert (len(reversed_), len(random)) == (64, 128)
    assert sum(t.size for t in reversed_) == sum(t.size for t in random) == 12_800
    assert len(calibration_targets(profile, TOTALS, 32, calibration="reversed")) == 32
