"""The compiled identity loops (cluster weights, the redundancy filter between iterations), the prefilter's
compiled layouts and the residue check: each equal to its NumPy / plain definition, on real MSAs and on random
ones built to sit on the identity thresholds."""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np
import pytest

from workflow_lib.aligner.profile import cluster_sequences, profile_from_alignment
from workflow_lib.search.gapless import padded_residues
from workflow_lib.search.gapped import band_codes
from workflow_lib.search.iterative import filter_alignment, msa_statistics
from workflow_lib.seqio.alphabet import GAP_CODE, N_AMINO, VALID_LETTERS, first_invalid
from workflow_lib.seqio.msa import Alignment, read_a3m

DATA = Path(__file__).parent / "data"
REAL_MSAS = [DATA / "formats" / "t1078_ss2.a3m", DATA / "aligner" / "hhm" / "fn3.a3m",
             DATA / "aligner" / "hhm" / "rrm1.a3m"]


def near_copies(depth: int = 120, length: int = 60, seed: int = 0) -> Alignment:
    """Rows that are mutated copies of a few ancestors (identities from ~40% to 100%), with gaps and X."""
    rng = np.random.default_rng(seed)
    ancestors = rng.integers(0, 20, size=(4, length))
    rows = ancestors[rng.integers(0, 4, size=depth)].copy()
    mutate = rng.random(rows.shape) < rng.uniform(0.0, 0.6, size=(depth, 1))
    rows[mutate] = rng.integers(0, 20, size=int(mutate.sum()))
    rows[rng.random(rows.shape) < 0.15] = GAP_CODE
    rows[rng.random(rows.shape) < 0.02] = 20   # X
    rows[0] = ancestors[0]
    letters = "ACDEFGHIKLMNPQRSTVWYX-"
    text = ["".join(letters[c] for c in row) for row in rows]
    return Alignment.from_a3m_rows([f"s{k}" for k in range(depth)], [""] * depth, text)


def alignments() -> list[Alignment]:
    return [read_a3m(path) for path in REAL_MSAS] + [near_copies(seed=s) for s in range(3)]


@pytest.mark.parametrize("identity", [0.3, 0.62, 0.9])
def test_compiled_cluster_labels_equal_the_numpy_loop(identity, monkeypatch):
    pytest.importorskip("numba")
    merged = 0
    for alignment in alignments():
        monkeypatch.setenv("TRACKFOLD_KERNELS", "numpy")
        expected = cluster_sequences(alignment.matches, identity)
        monkeypatch.setenv("TRACKFOLD_KERNELS", "compiled")
        got = cluster_sequences(alignment.matches, identity)
        np.testing.assert_array_equal(got, expected)
        merged += int(1 < got.max() + 1 < alignment.depth)
    assert merged >= 2       # clusters that are neither all singletons nor one: the thresholds are exercised


@pytest.mark.parametrize("max_identity,min_coverage,max_sequences",
                         [(0.9, 0.5, None), (0.5, 0.2, 25), (0.3, 0.0, None), (1.0, 0.8, 3)])
def test_compiled_redundancy_filter_equals_the_numpy_filter(max_identity, min_coverage, max_sequences,
                                                            monkeypatch):
    pytest.importorskip("numba")
    for alignment in alignments():
        monkeypatch.setenv("TRACKFOLD_KERNELS", "numpy")
        expected = filter_alignment(alignment, max_identity=max_identity, min_coverage=min_coverage,
                                    max_sequences=max_sequences)
        monkeypatch.setenv("TRACKFOLD_KERNELS", "compiled")
        got = filter_alignment(alignment, max_identity=max_identity, min_coverage=min_coverage,
                               max_sequences=max_sequences)
        assert got.names == expected.names
        assert got.names[0] == alignment.names[0]
    # the filter removes something on a real MSA, so the comparison is not between two unfiltered copies
    real = read_a3m(REAL_MSAS[0])
    assert filter_alignment(real, max_identity=0.5, min_coverage=0.2, max_sequences=None).depth < real.depth


def test_msa_statistics_neff_is_the_profile_neff(monkeypatch):
    for kernels in ("numpy", "compiled"):
        monkeypatch.setenv("TRACKFOLD_KERNELS", kernels)
        for alignment in alignments():
            neff = profile_from_alignment(alignment, pseudocounts=False).neff
            assert msa_statistics(alignment)["neff"] == pytest.approx(neff, abs=1e-12)


def test_compiled_padded_layout_equals_the_numpy_layout(monkeypatch):
    pytest.importorskip("numba")
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 90, size=40)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    residues = rng.integers(0, 21, size=int(offsets[-1])).astype(np.uint8)
    for query_length in (5, 64, 300):
        monkeypatch.setenv("TRACKFOLD_KERNELS", "numpy")
        layout, starts = padded_residues(residues, offsets, query_length)
        monkeypatch.setenv("TRACKFOLD_KERNELS", "compiled")
        got_layout, got_starts = padded_residues(residues, offsets, query_length)
        np.testing.assert_array_equal(got_layout, layout)
        np.testing.assert_array_equal(got_starts, starts)
        assert np.array_equal(layout[starts[3]:starts[3] + lengths[3]], residues[offsets[3]:offsets[4]])


def test_band_codes_compiled_equal_numpy(monkeypatch):
    pytest.importorskip("numba")
    rng = np.random.default_rng(2)
    targets = [rng.integers(0, 25, size=int(n)).astype(np.uint8) for n in rng.integers(1, 50, size=30)]
    first = rng.integers(-60, 60, size=30)
    base = rng.integers(0, 1000, size=30)
    monkeypatch.setenv("TRACKFOLD_KERNELS", "numpy")
    expected = band_codes(targets, first, base, 70)
    monkeypatch.setenv("TRACKFOLD_KERNELS", "compiled")
    got = band_codes(targets, first, base, 70)
    np.testing.assert_array_equal(got, expected)
    lane, row = 4, 10                        # the definition, one cell at a time
    position = first[lane] + row
    code = min(int(targets[lane][position]), N_AMINO) if 0 <= position < targets[lane].size else N_AMINO + 1
    assert got[row, lane] == code + base[lane]
    assert (got - base[None, :] <= N_AMINO + 1).all()


def test_first_invalid_finds_the_first_non_residue_character():
    def by_letter(sequence):
        return next((k for k, c in enumerate(sequence) if c.upper() not in VALID_LETTERS), None)

    rng = np.random.default_rng(3)
    alphabet = list(string.printable)
    for _ in range(2000):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(0, 8))))
        assert first_invalid(text) == by_letter(text), text
    assert first_invalid("MKVLAacdx") is None
    assert first_invalid("MKV-LA") == 3
    assert first_invalid("MKVı") == 3           # non-ASCII letters are not residues (ı upper-cases to I)
