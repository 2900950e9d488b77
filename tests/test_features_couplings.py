"""Direct couplings (workflow_lib.features.couplings): the Woodbury route against the dense inverse, both scoring
routes and the blocks against each other, torch against NumPy, and direct against transitive correlation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workflow_lib.features.coevolution import apc, raw_coevolution
from workflow_lib.features.couplings import (
    Q_STATES,
    coupling_blocks,
    coupling_features,
    coupling_features_torch,
    default_shrinkage,
    gram_route,
    raw_coupling_norms,
    zero_sum_basis,
)
from workflow_lib.features.msa_features import sequence_weights
from workflow_lib.features.states import to_states
from workflow_lib.seqio.msa import read_a3m


@pytest.fixture(scope="module")
def t1078(data_dir):
    """A real HHblits MSA: (codes of the first 300 rows, their 80%-identity weights)."""
    codes = np.asarray(read_a3m(data_dir / "formats" / "t1078_ss2.a3m").matches)[:300]
    return codes, sequence_weights(codes)


def dense_norms(codes: np.ndarray, weights: np.ndarray, shrinkage: float) -> np.ndarray:
    """The definition: Frobenius norms of the zero-sum-gauge blocks of −(C + λI)⁻¹, C the [qL, qL] covariance."""
    states = to_states(codes)
    depth, length = states.shape
    w = weights / weights.sum()
    one_hot = (states[:, :, None] == np.arange(Q_STATES)).astype(np.float64).reshape(depth, -1)
    mean = w @ one_hot
    covariance = (one_hot * w[:, None]).T @ one_hot - np.outer(mean, mean)
    lam = shrinkage * np.trace(covariance) / covariance.shape[0]
    couplings = -np.linalg.inv(covariance + lam * np.eye(covariance.shape[0]))
    blocks = couplings.reshape(length, Q_STATES, length, Q_STATES)
    blocks = (blocks - blocks.mean(axis=1, keepdims=True) - blocks.mean(axis=3, keepdims=True)
              + blocks.mean(axis=(1, 3), keepdims=True))
    norms = np.sqrt(np.einsum("iajb,iajb->ij", blocks, blocks))
    np.fill_diagonal(norms, 0.0)
    return norms


@pytest.mark.parametrize("shrinkage", [0.01, 0.1, 1.0])
def test_the_woodbury_route_equals_the_dense_inverse(t1078, shrinkage):
    codes, weights = t1078[0][:40, :30], t1078[1][:40]
    expected = dense_norms(codes, weights, shrinkage)
    got = raw_coupling_norms(codes, weights, shrinkage=shrinkage)
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9 * expected.max())


def test_the_two_scoring_routes_and_any_blocking_agree(t1078):
    """Rank below 2·19² takes the Gram route, more the direct blocks (800 random rows of 45 columns: rank 799);
    both equal the dense inverse, and memory blocks change nothing."""
    rng = np.random.default_rng(1)
    deep = rng.integers(0, 22, size=(800, 45)), rng.random(800) + 0.5
    shallow = t1078[0][:120, :50], t1078[1][:120]
    assert not gram_route(coupling_blocks(*deep)[0].shape[0])
    assert gram_route(coupling_blocks(*shallow)[0].shape[0])
    for codes, weights in (deep, shallow):
        whole = raw_coupling_norms(codes, weights, shrinkage=0.1)
        expected = dense_norms(codes, weights, 0.1)
        np.testing.assert_allclose(whole, expected, rtol=1e-6, atol=1e-9 * expected.max())
        for block_bytes in (1 << 12, 1 << 16):
            np.testing.assert_allclose(raw_coupling_norms(codes, weights, shrinkage=0.1, block_bytes=block_bytes),
                                       whole, rtol=1e-9)


def test_the_zero_sum_basis_is_orthonormal_and_orthogonal_to_ones():
    basis = zero_sum_basis(Q_STATES)
    assert basis.shape == (Q_STATES, Q_STATES - 1)
    np.testing.assert_allclose(basis.T @ basis, np.eye(Q_STATES - 1), atol=1e-14)
    np.testing.assert_allclose(basis.sum(axis=0), 0.0, atol=1e-14)


def test_deep_alignments_are_capped_at_max_rows(t1078):
    codes, weights = t1078
    capped = raw_coupling_norms(codes, weights, max_rows=100, seed=3)
    v, _ = coupling_blocks(codes, weights, max_rows=100, seed=3)
    assert v.shape[0] <= 100
    assert not np.allclose(capped, raw_coupling_norms(codes, weights))
    np.testing.assert_array_equal(capped, raw_coupling_norms(codes, weights, max_rows=100, seed=3))


def test_torch_equals_numpy(t1078):
    codes, weights = t1078[0][:, :60], t1078[1]
    expected = coupling_features(codes, weights, max_rows=200)
    got = coupling_features_torch(torch.from_numpy(codes.astype(np.int64)), torch.from_numpy(weights),
                                  max_rows=200).numpy()
    assert got.shape == expected.shape == (60, 60, 1)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_features_are_symmetric_scaled_and_finite_for_one_sequence(t1078):
    codes, weights = t1078[0][:, :40], t1078[1]
    features = coupling_features(codes, weights)[..., 0]
    np.testing.assert_array_equal(features, features.T)
    assert np.all(np.diag(features) == 0)
    assert np.std(features[~np.eye(40, dtype=bool)]) == pytest.approx(1.0, abs=1e-5)
    single = coupling_features(codes[:1], np.ones(1))
    assert np.isfinite(single).all() and np.all(single == 0)


def test_bad_inputs_are_rejected(t1078):
    codes, weights = t1078
    with pytest.raises(ValueError, match="shrinkage"):
        coupling_features(codes, weights, shrinkage=0.0)
    with pytest.raises(ValueError, match="weights"):
        coupling_features(codes, -weights)


def test_couplings_separate_direct_from_transitive_correlation():
    """Columns 0→1→2 copy their neighbour with probability 0.8 (a chain of two direct couplings), the rest are
    random: the covariance also links 0 and 2 (through 1), the couplings with a light ridge much less so."""
    rng = np.random.default_rng(0)
    depth, length = 2000, 12
    codes = rng.integers(0, 20, size=(depth, length))
    for j in (1, 2):
        copy = rng.random(depth) < 0.8
        codes[copy, j] = codes[copy, j - 1]
    weights = np.ones(depth)
    covariance, _ = raw_coevolution(codes, weights)
    couplings = raw_coupling_norms(codes, weights, max_rows=depth, shrinkage=0.1)
    background = np.median(couplings[3:, 3:][~np.eye(length - 3, dtype=bool)])
    # transitive over direct: the covariance keeps most of it, the couplings little
    assert covariance[0, 2] / covariance[0, 1] > 0.6
    assert couplings[0, 2] / couplings[0, 1] < 0.35
    assert couplings[0, 1] > 10 * background and couplings[1, 2] > 10 * background
    assert apc(couplings)[0, 1] > apc(couplings)[0, 2]


def test_the_default_shrinkage_follows_the_depth(t1078):
    """Strong for shallow alignments (300: close to the covariance), light for deep ones (10), in between
    10 · (100 / Neff)²; coupling_features without a shrinkage uses it with the kept rows' Neff."""
    assert default_shrinkage(1.0) == default_shrinkage(18.0) == 300.0
    assert default_shrinkage(100.0) == default_shrinkage(5000.0) == 10.0
    assert default_shrinkage(50.0) == pytest.approx(40.0)
    values = [default_shrinkage(n) for n in np.geomspace(1, 1000, 30)]
    assert all(a >= b for a, b in zip(values, values[1:]))
    codes, weights = t1078[0][:, :40], t1078[1]
    np.testing.assert_array_equal(coupling_features(codes, weights),
                                  coupling_features(codes, weights, shrinkage=default_shrinkage(weights.sum())))
    torch_default = coupling_features_torch(torch.from_numpy(codes.astype(np.int64)), torch.from_numpy(weights))
    np.testing.assert_allclose(torch_default.numpy(), coupling_features(codes, weights), atol=1e-5)
