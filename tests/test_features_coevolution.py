"""Co-evolution features: the blocked einsum kernel vs a plain-loop reference, APC, and a real-data proxy.

The proxy: on T1078's real HHblits MSA the top-L/5 APC-MI pairs with |i − j| ≥ 6 should be enriched in Cβ
contacts (< 8 Å). T1078's experimental structure is not in the shared data, so the contacts come from
RoseTTAFold's own prediction of it (tests/data/features/t1078_rosettafold_e2e.pdb): a sanity proxy, not truth.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from workflow_lib.features import apc, coevolution_features, raw_coevolution, sequence_weights
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.structure.parse import read_structure


@pytest.fixture(scope="module")
def t1078(data_dir):
    return read_a3m(data_dir / "formats" / "t1078_ss2.a3m")


def loop_frequencies(codes, weights, pseudocount):
    depth, length = codes.shape
    total = sum(weights)
    single = [[0.0] * 21 for _ in range(length)]
    pair = {}
    for n in range(depth):
        for i in range(length):
            single[i][min(int(codes[n, i]), 20)] += weights[n] / total
    for i in range(length):
        for j in range(length):
            table = [[0.0] * 21 for _ in range(21)]
            for n in range(depth):
                table[min(int(codes[n, i]), 20)][min(int(codes[n, j]), 20)] += weights[n] / total
            pair[i, j] = [[(1 - pseudocount) * v + pseudocount / 441 for v in row] for row in table]
    single = [[(1 - pseudocount) * v + pseudocount / 21 for v in row] for row in single]
    return single, pair


def loop_coevolution(codes, weights, pseudocount=0.0):
    """Reference: covariance Frobenius norm over 20 aa and MI over 21 states, one pair and one cell at a time."""
    length = codes.shape[1]
    single, pair = loop_frequencies(codes, weights, pseudocount)
    cov = np.zeros((length, length))
    mi = np.zeros((length, length))
    for i in range(length):
        for j in range(length):
            if i == j:
                continue
            squares, information = 0.0, 0.0
            for a in range(21):
                for b in range(21):
                    f = pair[i, j][a][b]
                    if a < 20 and b < 20:
                        squares += (f - single[i][a] * single[j][b]) ** 2
                    if f > 0:
                        information += f * math.log(f / (single[i][a] * single[j][b]))
            cov[i, j] = math.sqrt(squares)
            mi[i, j] = information
    return cov, mi


def loop_apc(raw):
    length = len(raw)
    off = [[raw[i][j] if i != j else 0.0 for j in range(length)] for i in range(length)]
    row_mean = [sum(off[i]) / (length - 1) for i in range(length)]
    total_mean = sum(map(sum, off)) / (length * (length - 1))
    return np.array([[0.0 if i == j else off[i][j] - row_mean[i] * row_mean[j] / total_mean
                      for j in range(length)] for i in range(length)])


@pytest.mark.parametrize("pseudocount", [0.0, 0.1])
def test_kernel_matches_the_loop_reference(t1078, pseudocount):
    codes = t1078.matches[:40, 40:58]  # a real 40 x 18 cut, with gaps and varied columns
    weights = sequence_weights(codes)
    cov_ref, mi_ref = loop_coevolution(codes, weights, pseudocount)
    cov, mi = raw_coevolution(codes, weights, pseudocount=pseudocount)
    np.testing.assert_allclose(cov, cov_ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(mi, mi_ref, rtol=1e-10, atol=1e-13)
    assert mi_ref.max() > 0.1 and cov_ref.max() > 0.05  # not a trivial cut
    features = coevolution_features(codes, weights, pseudocount=pseudocount)
    np.testing.assert_allclose(features[..., 0], loop_apc(cov_ref), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(features[..., 1], loop_apc(mi_ref), rtol=1e-5, atol=1e-6)


def test_blocking_does_not_change_the_result(t1078):
    codes = t1078.matches[:, :60]
    weights = sequence_weights(codes)
    whole = raw_coevolution(codes, weights)
    # about 3 columns per pair block and 14 sequences per one-hot block
    blocked = raw_coevolution(codes, weights, block_bytes=60 * 441 * 8 * 3)
    for a, b in zip(whole, blocked):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_symmetric_with_zero_diagonal(t1078):
    features = coevolution_features(t1078.matches[:100, :50], sequence_weights(t1078.matches[:100, :50]))
    assert features.shape == (50, 50, 2) and features.dtype == np.float32
    np.testing.assert_array_equal(features, features.transpose(1, 0, 2))
    assert not np.diagonal(features, axis1=0, axis2=1).any()


def test_apc_edge_cases():
    np.testing.assert_array_equal(apc(np.zeros((4, 4))), np.zeros((4, 4)))
    np.testing.assert_array_equal(apc(np.ones((1, 1))), np.zeros((1, 1)))
    rng = np.random.default_rng(7)
    raw = rng.random((6, 6))
    raw = raw + raw.T
    np.testing.assert_allclose(apc(raw), loop_apc(raw.tolist()), rtol=1e-12)


def test_bad_weights_are_rejected(t1078):
    codes = t1078.matches[:5, :10]
    with pytest.raises(ValueError, match="shape"):
        raw_coevolution(codes, np.ones(4))
    with pytest.raises(ValueError, match="positive sum"):
        raw_coevolution(codes, np.zeros(5))


def test_top_mi_pairs_are_enriched_in_predicted_contacts(t1078, data_dir):
    features = coevolution_features(t1078.matches, sequence_weights(t1078.matches))
    chain = read_structure(data_dir / "features" / "t1078_rosettafold_e2e.pdb")[0]
    assert chain.sequence == t1078.query
    cb = chain.cb_filled().astype(np.float64)
    distance = np.linalg.norm(cb[:, None] - cb[None], axis=-1)
    length = len(chain)
    i, j = np.triu_indices(length, 6)
    contact = distance[i, j] < 8.0
    base_rate = contact.mean()
    top = np.argsort(-features[..., 1][i, j], kind="stable")[: length // 5]
    precision = contact[top].mean()
    # measured: 0.52 (14 of 27) against a base rate of 0.037
    assert precision >= 0.3 and precision >= 5 * base_rate
