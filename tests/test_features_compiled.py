"""The compiled (numba) feature kernels against the NumPy path, on a real MSA (tests/data/formats/t1078_ss2.a3m,
HHblits, 426 rows x 138 columns; see tests/data/README.md).

Integer counts (the sequence weights) must be identical; the pair statistics and couplings are the same sums in
another order, so they agree to float64 rounding: ``rtol 1e-10`` on the raw scores (of their largest value),
``atol 1e-6`` on the float32 features (whose values are of order 0.01 to 10).
"""

from __future__ import annotations

import numpy as np
import pytest

from workflow_lib.features import build_features, coevolution_features, raw_coevolution, sequence_weights
from workflow_lib.features.compiled import (
    neighbour_counts_compiled,
    row_sums_by_state_compiled,
    shared_residues_compiled,
)
from workflow_lib.features.couplings import (
    Q_STATES,
    _centred_one_hot,
    _covariance_gram_compiled,
    coupling_blocks,
    coupling_features,
    raw_coupling_norms,
)
from workflow_lib.features.states import GAP_STATE, to_states
from workflow_lib.seqio.msa import read_a3m

numba = pytest.importorskip("numba")


@pytest.fixture(scope="module")
def t1078_path(data_dir):
    return data_dir / "formats" / "t1078_ss2.a3m"


@pytest.fixture(scope="module")
def t1078(t1078_path):
    codes = np.asarray(read_a3m(t1078_path).matches)
    return codes, sequence_weights(codes)


def both(monkeypatch, function, *args, **kwargs):
    """``function(*args, **kwargs)`` with the NumPy kernels, then with the compiled ones."""
    monkeypatch.setenv("TRACKFOLD_KERNELS", "numpy")
    reference = function(*args, **kwargs)
    monkeypatch.setenv("TRACKFOLD_KERNELS", "compiled")
    return reference, function(*args, **kwargs)


def assert_close_to_max(got, expected, rtol=1e-10):
    scale = max(float(np.abs(expected).max()), 1e-300)
    np.testing.assert_allclose(got, expected, rtol=0, atol=rtol * scale)


@pytest.mark.parametrize("identity", [0.8, 0.5, 0.0, 1.0])
def test_sequence_weights_are_identical(monkeypatch, t1078, identity):
    codes = t1078[0]
    reference, compiled = both(monkeypatch, sequence_weights, codes, identity=identity)
    np.testing.assert_array_equal(compiled, reference)


def test_neighbour_counts_match_a_plain_loop(t1078):
    states = to_states(t1078[0][:40, :60])
    expected = [sum(int(np.sum(a == b) >= 48) for b in states) for a in states]
    np.testing.assert_array_equal(neighbour_counts_compiled(states, 48), expected)


@pytest.mark.parametrize("pseudocount", [0.0, 0.2])
def test_pair_statistics_agree(monkeypatch, t1078, pseudocount):
    codes, weights = t1078
    (cov_ref, mi_ref), (cov, mi) = both(monkeypatch, raw_coevolution, codes, weights, pseudocount=pseudocount)
    assert_close_to_max(cov, cov_ref)
    assert_close_to_max(mi, mi_ref)
    np.testing.assert_array_equal(np.diag(cov), 0.0)
    np.testing.assert_array_equal(mi, mi.T)


def test_coevolution_features_agree_including_one_row(monkeypatch, t1078):
    codes, weights = t1078
    reference, compiled = both(monkeypatch, coevolution_features, codes, weights)
    np.testing.assert_allclose(compiled, reference, rtol=0, atol=1e-6)
    reference, compiled = both(monkeypatch, coevolution_features, codes[:1], weights[:1])
    np.testing.assert_array_equal(compiled, reference)


def test_gram_without_the_one_hot_equals_the_product(t1078):
    codes, weights = t1078
    states, w = to_states(codes[:200]), weights[:200] / weights[:200].sum()
    flat = _centred_one_hot(states, w).reshape(len(states), -1)
    frequencies, gram = _covariance_gram_compiled(states, w)
    assert_close_to_max(gram, flat @ flat.T, rtol=1e-12)
    np.testing.assert_allclose(frequencies, np.einsum("n,nla->la", w, states[:, :, None] == np.arange(Q_STATES)),
                               rtol=1e-12)
    np.testing.assert_array_equal(shared_residues_compiled(states[:5]),
                                  [[np.sum((a == b) & (a < GAP_STATE)) for b in states[:5]] for a in states[:5]])


def test_row_sums_by_state_match_the_one_hot_product(t1078):
    states = to_states(t1078[0][:150])
    coefficients = np.random.default_rng(0).standard_normal((150, 70))
    one_hot = (states[:, :, None] == np.arange(Q_STATES)).astype(np.float64)       # [N, L, q]
    expected = np.einsum("nla,nr->lar", one_hot, coefficients)
    for chunk in (1, 16, 64):
        assert_close_to_max(row_sums_by_state_compiled(states, coefficients, chunk=chunk), expected, rtol=1e-12)


def test_coupling_blocks_give_the_same_couplings(monkeypatch, t1078):
    """V itself is defined up to a rotation of its rows (the eigenvectors of a repeated eigenvalue), the coupling
    blocks V_iᵀ V_j are not."""
    codes, weights = t1078
    (v_ref, lam_ref), (v, lam) = both(monkeypatch, coupling_blocks, codes[:120, :40], weights[:120])
    assert lam == pytest.approx(lam_ref, rel=1e-12)
    blocks_ref = np.einsum("ria,rjb->ijab", v_ref, v_ref)
    assert_close_to_max(np.einsum("ria,rjb->ijab", v, v), blocks_ref, rtol=1e-10)
    np.testing.assert_allclose(v.sum(axis=2), 0.0, atol=1e-12 * np.abs(v).max())


def test_coupling_norms_and_features_agree(monkeypatch, t1078):
    codes, weights = t1078
    reference, compiled = both(monkeypatch, raw_coupling_norms, codes, weights)
    assert_close_to_max(compiled, reference)
    reference, compiled = both(monkeypatch, coupling_features, codes, weights)
    np.testing.assert_allclose(compiled, reference, rtol=0, atol=1e-6)


def test_built_features_agree(monkeypatch, t1078_path):
    reference, compiled = both(monkeypatch, build_features, t1078_path)
    assert reference.keys() == compiled.keys()
    for key in reference:
        if key == "coevolution":
            np.testing.assert_allclose(compiled[key], reference[key], rtol=0, atol=1e-6)
        else:
            assert compiled[key].dtype == reference[key].dtype
            np.testing.assert_array_equal(compiled[key], reference[key], err_msg=key)
