"""MSA-derived per-protein features: capped MSA tokens, deletions, Neff, profile, co-evolution.

The MSA is the N x L matrix, query first; near-identical sequences are down-weighted (weights 1 / the number of
rows within 80% identity, as in Morcos et al. 2011, PNAS 108:E1293); the network reads what RoseTTAFold's MSA
embedding reads (Baek et al. 2021, Science 373:871): the token matrix, the residue index and which row is the
query: always row 0. The key layout is
:data:`workflow_lib.schemas.features.FEATURES`.

Two row sets
    *Statistics rows* feed the weights, Neff, profile, deletion mean and co-evolution: every input row, or the
    query plus a deterministic sample of ``max_stats_seqs - 1`` rows when the alignment is deeper (their cost
    is O(N²·L) and O(N·L²·21²)). *Kept rows* are what the network sees as ``msa``: the query plus a sample of
    ``max_seqs - 1`` rows. Both samples use the same ranking, so kept rows ⊆ statistics rows. The sequence
    weights shape the statistics only: the feature file does not hold them, because no network reads them (a
    network weighting its outer product by them, or by its learned weights with them as a prior, was no better
    than the learned weights alone; docs/model.md).

Deterministic sampling (:func:`sample_rows`)
    Every non-query row gets the key ``BLAKE2b-64(seed, query, row text)``; the rows with the smallest keys
    are kept (ties by file order) and returned in file order. The choice depends on nothing but the file's
    content and ``seed`` -- not on NumPy's RNG streams, the platform or the file path -- and a row's
    inclusion does not depend on the other rows' order.

States
    Statistics use the 21 states of :mod:`workflow_lib.features.states`: 20 amino acids, then gap-or-X.

Sequence weights (:func:`sequence_weights`)
    ``w_n = 1 / |{m : id(n, m) ≥ ⌈0.8·L⌉}|`` where ``id(n, m)`` counts the columns in which the two rows
    have the same state, gap = gap included (the convention of trRosetta's ``reweight``, which differs only
    by a strict ``>`` at the threshold; ``m = n`` counts, so ``w_n ≤ 1``). Neff = Σ w_n, so ``1 ≤ Neff ≤ N``.
    Computed as block one-hot matrix products
    (float32, exact for integer counts), O(N²·L·21) operations, memory bounded by ``block_bytes``.

Profile (:func:`weighted_profile`)
    ``profile[j, s] = (Σ_n w_n [s_nj = s] + λ/21) / (Σ_n w_n + λ)`` with ``λ = profile_pseudocount``
    (default 1: one pseudo-sequence spread evenly over the 21 states), so a single-sequence MSA gives the
    query with probability 22/42 = 0.52 per column instead of a hard 1.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from workflow_lib.features.coevolution import coevolution_features
from workflow_lib.features.compiled import neighbour_counts_compiled, use_compiled
from workflow_lib.features.couplings import coupling_features
from workflow_lib.features.states import DEFAULT_BLOCK_BYTES, one_hot_states, rows_per_block, to_states
from workflow_lib.schemas.features import PROFILE_STATES
from workflow_lib.seqio.msa import Alignment

DEFAULT_MAX_SEQS = 1024
"""MSA rows handed to the network (query included)."""
DEFAULT_MAX_STATS_SEQS = 16384
"""Rows the statistics are computed from (query included); bounds the O(N²·L) weighting cost."""
WEIGHT_IDENTITY = 0.8
"""Two rows are neighbours when at least this fraction of the L columns have the same state."""
PROFILE_PSEUDOCOUNT = 1.0
"""Pseudo-sequences (uniform over the 21 states) added to every profile column."""
DELETION_CLIP = 255
"""``deletion_matrix`` is uint8: longer insertions are clipped (``deletion_mean`` is not)."""


def sample_rows(alignment: Alignment, max_rows: int, *, seed: int = 0) -> np.ndarray:
    """Indices (int64, ascending, 0 first) of the query and the ``max_rows - 1`` lowest-keyed other rows.

    All rows when the alignment has at most ``max_rows``. See the module docstring for the key.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, got {max_rows}")
    depth = alignment.depth
    if depth <= max_rows:
        return np.arange(depth, dtype=np.int64)
    return np.sort(sampling_order(alignment, seed=seed)[:max_rows])


def sampling_order(alignment: Alignment, *, seed: int = 0) -> np.ndarray:
    """All row indices, the query first, then the other rows by ascending BLAKE2b key (ties: file order)."""
    prefix = f"{seed}\x00{alignment.query}\x00".encode()
    keys = np.array([int.from_bytes(hashlib.blake2b(prefix + row.encode(), digest_size=8).digest(), "big")
                     for row in alignment.rows[1:]], dtype=np.uint64)
    order = np.argsort(keys, kind="stable") + 1
    return np.concatenate([[0], order]).astype(np.int64)


def identity_threshold(length: int, identity: float = WEIGHT_IDENTITY) -> int:
    """Identical columns needed to be neighbours: ``⌈identity·L⌉`` (robust to float error)."""
    return max(0, math.ceil(identity * length - 1e-9))


def sequence_weights(codes: np.ndarray, *, identity: float = WEIGHT_IDENTITY,
                     block_bytes: int = DEFAULT_BLOCK_BYTES) -> np.ndarray:
    """float64 ``[N]``: 1 / number of rows (itself included) sharing ≥ ⌈identity·L⌉ column states.

    ``codes``: residue codes ``[N, L]``. Rows are compared in blocks of one-hot matrices
    (``[B, L·21] @ [L·21, B]``, only the upper block triangle; each block one-hot ≤ ``block_bytes``), or with
    the compiled row-against-row count (:mod:`workflow_lib.features.compiled`; the same integer counts).
    """
    states = to_states(codes)
    depth, length = states.shape
    threshold = identity_threshold(length, identity)
    if use_compiled():
        return 1.0 / neighbour_counts_compiled(states, threshold)
    block = rows_per_block(length * PROFILE_STATES * 4, block_bytes)
    neighbours = np.zeros(depth, dtype=np.int64)
    starts = range(0, depth, block)
    for a0 in starts:
        left = one_hot_states(states[a0:a0 + block]).reshape(-1, length * PROFILE_STATES)
        for b0 in starts:
            if b0 < a0:
                continue
            right = left if b0 == a0 else one_hot_states(states[b0:b0 + block]).reshape(-1, length * PROFILE_STATES)
            close = (left @ right.T) >= threshold - 0.5   # exact integer counts in float32
            neighbours[a0:a0 + block] += close.sum(axis=1)
            if b0 != a0:
                neighbours[b0:b0 + block] += close.sum(axis=0)
    return 1.0 / neighbours


def weighted_counts(codes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """float64 ``[L, 21]``: Σ_n w_n [state_nj = s]."""
    states = to_states(codes)
    weights = np.asarray(weights, dtype=np.float64)
    return np.stack([weights @ (states == s) for s in range(PROFILE_STATES)], axis=1)


def weighted_profile(codes: np.ndarray, weights: np.ndarray, *,
                     pseudocount: float = PROFILE_PSEUDOCOUNT) -> np.ndarray:
    """float64 ``[L, 21]`` weighted state frequencies with ``pseudocount`` uniform pseudo-sequences."""
    if pseudocount < 0:
        raise ValueError(f"pseudocount must be ≥ 0, got {pseudocount}")
    counts = weighted_counts(codes, weights)
    total = float(np.sum(weights)) + pseudocount
    return (counts + pseudocount / PROFILE_STATES) / total


def msa_features(alignment: Alignment, *, max_seqs: int = DEFAULT_MAX_SEQS,
                 max_stats_seqs: int = DEFAULT_MAX_STATS_SEQS, seed: int = 0,
                 identity: float = WEIGHT_IDENTITY, profile_pseudocount: float = PROFILE_PSEUDOCOUNT,
                 pair_pseudocount: float = 0.0, block_bytes: int = DEFAULT_BLOCK_BYTES) -> dict[str, np.ndarray]:
    """Every MSA-derived key of :data:`~workflow_lib.schemas.features.FEATURES` (templates excluded).

    A pure function of the alignment and the options: the same input gives byte-identical arrays.
    """
    if max_seqs < 1 or max_stats_seqs < max_seqs:
        raise ValueError(f"need 1 ≤ max_seqs ≤ max_stats_seqs, got {max_seqs} and {max_stats_seqs}")
    depth, length = alignment.depth, alignment.length
    if depth > max_stats_seqs:
        order = sampling_order(alignment, seed=seed)
        stats_rows = np.sort(order[:max_stats_seqs])
        kept_rows = np.sort(order[:max_seqs])
    else:
        stats_rows = np.arange(depth, dtype=np.int64)
        kept_rows = sample_rows(alignment, max_seqs, seed=seed)
    stats_codes = np.asarray(alignment.matches)[stats_rows]
    weights = sequence_weights(stats_codes, identity=identity, block_bytes=block_bytes)
    deletions = np.asarray(alignment.insertions)[:, :length]
    return {
        "msa": np.asarray(alignment.matches)[kept_rows].astype(np.int8),
        "deletion_matrix": np.minimum(deletions[kept_rows], DELETION_CLIP).astype(np.uint8),
        "deletion_mean": deletions[stats_rows].mean(axis=0, dtype=np.float64).astype(np.float32),
        "neff": np.array(weights.sum(), dtype=np.float32),
        "num_alignments": np.array(depth, dtype=np.int32),
        "profile": weighted_profile(stats_codes, weights, pseudocount=profile_pseudocount).astype(np.float32),
        "residue_index": np.arange(length, dtype=np.int32),
        "coevolution": np.concatenate([coevolution_features(stats_codes, weights, pseudocount=pair_pseudocount,
                                                             block_bytes=block_bytes),
                                        coupling_features(stats_codes, weights, block_bytes=block_bytes)], axis=-1),
    }
