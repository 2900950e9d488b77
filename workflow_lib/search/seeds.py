"""Prefilter seeding: the profile's scores against the prefilter's null model and the k-mers they seed.

The prefilter of HHblits (Remmert et al. 2012, Nat. Methods 9:173) scores the query profile against every target; here
only the diagonals that hold a k-mer seed are scored (:mod:`workflow_lib.search.gapless`). A seed is a query window
whose profile score for a database k-mer (read through the index's seed shape, :mod:`workflow_lib.db.kmer_index`) is at
least the seed threshold (:func:`~workflow_lib.search.settings.default_kmer_threshold`), as BLAST and MMseqs2 seed. This
module turns a profile into position-specific scores (:func:`profile_scores_bits`, against :func:`prefilter_background`)
and enumerates the seeding (window, k-mer) pairs (:func:`kmer_neighbourhood`, or the dense table :func:`kmer_scores`).
Kernels are pure: arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np

from workflow_lib.seqio.alphabet import N_AMINO

X_SCORE_BITS = -1.0
"""Score of an unknown residue (X) in any column: a small penalty, so runs of X never seed or extend."""


def prefilter_background(emissions: np.ndarray, background: np.ndarray, weight: float) -> np.ndarray:
    """The null model the prefilter scores a profile against: float64 ``[20]``, ``f(a)^(1 − w) · c(a)^w``
    normalised, where ``c`` is the profile's mean emission distribution over its columns and ``w = weight``.

    The Viterbi hits pay HMMER's null2 composition correction (:mod:`workflow_lib.search.bias`), whose
    alternative null model is that mean emission distribution over the aligned columns; the prefilter scored
    with ``f`` alone and passed targets whose score came from composition, which the correction then removed.
    HMMER's MSV filter is followed by a bias filter for the same reason (Eddy 2011, *PLoS Comput Biol*
    7:e1002195, "bias filter"). Context-specific profiles need it most: their mean emissions stray further from
    ``f`` than those of Gonnet profiles, and without it most of their prefilter survivors were never reported.
    ``weight = 0`` gives ``f`` back (the weight searches use:
    :data:`~workflow_lib.search.settings.CONTEXT_PREFILTER_COMPOSITION`)."""
    background = np.asarray(background, dtype=np.float64)
    if weight == 0.0:
        return background
    mean = np.asarray(emissions, dtype=np.float64).mean(axis=0)
    mean = np.maximum(mean / mean.sum(), 1e-30)
    mixed = np.exp((1.0 - weight) * np.log(background) + weight * np.log(mean))
    return mixed / mixed.sum()


def profile_scores_bits(emissions: np.ndarray, background: np.ndarray) -> np.ndarray:
    """Position-specific scores ``log2(q_i(a) / f(a))`` as float32 ``[L, 21]`` (column 20 = X)."""
    emissions = np.asarray(emissions, dtype=np.float64)
    scores = np.log2(np.maximum(emissions, 1e-30) / np.asarray(background, dtype=np.float64)[None, :])
    return np.concatenate([scores, np.full((scores.shape[0], 1), X_SCORE_BITS)], axis=1).astype(np.float32)


def seed_offsets(k: int, shape: np.ndarray | None) -> np.ndarray:
    """The window offsets of a seed of weight ``k`` read through ``shape`` (``None``: contiguous), checked."""
    offsets = np.arange(k, dtype=np.int64) if shape is None else np.asarray(shape, dtype=np.int64)
    if offsets.size != k:
        raise ValueError(f"a seed shape of weight {k} needs {k} offsets, got {offsets.size}")
    return offsets


def kmer_scores(scores: np.ndarray, k: int, shape: np.ndarray | None = None) -> np.ndarray:
    """Score of every k-mer code at every query window: float32 ``[L - span + 1, 20**k]``, the k-mer read
    through the window offsets ``shape`` (``None``: contiguous, ``span = k``)."""
    offsets = seed_offsets(k, shape)
    n = scores.shape[0] - int(offsets[-1])
    if n <= 0:
        return np.zeros((0, N_AMINO ** k), dtype=np.float32)
    total = scores[offsets[0]:offsets[0] + n, :N_AMINO]
    for o in offsets[1:].tolist():
        total = (total[:, :, None] + scores[o:o + n, None, :N_AMINO]).reshape(n, -1)
    return np.ascontiguousarray(total, dtype=np.float32)


def kmer_neighbourhood(scores: np.ndarray, k: int, threshold: float, shape: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (query window, k-mer code) whose profile score is at least ``threshold``, without the dense table.

    Branch and bound (as BLAST/MMseqs2 enumerate a similar-k-mer list): a prefix of ``t`` residues at window
    ``i`` is extended only while its score plus the best possible score of the remaining ``k - t`` columns can
    still reach the threshold. The k-mer's columns are ``i + shape[t]`` (``None``: contiguous). Returns
    ``(window int64, code int64, score float32)`` sorted by window; the same triples as
    ``np.nonzero(kmer_scores(scores, k, shape) >= threshold)`` with the scores summed in the same order.
    """
    offsets = seed_offsets(k, shape)
    standard = np.ascontiguousarray(scores[:, :N_AMINO], dtype=np.float32)
    n = standard.shape[0] - int(offsets[-1])
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    best = standard.max(axis=1).astype(np.float64)
    # remaining[t][i]: the most columns t+1 .. k-1 of window i can add (float64, a slack keeps rounding safe)
    remaining = [sum((best[o:o + n] for o in offsets[t + 1:].tolist()), np.zeros(n)) for t in range(k)]
    window = np.arange(n, dtype=np.int64)
    code = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.float32)
    for t in range(k):
        extended = total[:, None] + standard[window + int(offsets[t])]        # [m, 20]
        if t < k - 1:
            keep = (remaining[t][window][:, None] + extended) >= threshold - 1e-4
        else:
            keep = extended >= threshold
        # flat indices in row-major order, split by division: 4-5x faster than a 2-D np.nonzero
        flat = np.flatnonzero(keep)
        row = flat // N_AMINO
        residue = flat - row * N_AMINO
        window, total = window[row], extended.reshape(-1)[flat]
        code = code[row] * N_AMINO + residue
    return window, code, total
