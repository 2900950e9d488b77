"""Substitution data: the Gonnet matrix, background frequencies f(a) and substitution probabilities g(a, x).

As in HHsearch (Söding 2005, Bioinformatics 21:951), substitution pseudocounts come from the Gonnet matrix
(Gonnet et al. 1992, below). It is published as a lower triangle; symmetrise it, turn each column into
replacement probabilities with a softmax, and use column ``a`` as the emission distribution of a one-sequence
profile whose residue is ``a``.

Sources of the constants
------------------------
``GONNET_LOWER``
    Gonnet G.H., Cohen M.A., Benner S.A. (1992) "Exhaustive matching of the entire protein sequence database",
    Science 256:1443-1445, Figure 2 (the PAM250-scaled matrix that ClustalW ships as ``gonnet_250`` and HH-suite
    uses for its substitution pseudocounts). Units: 10·log10(odds) ("Dayhoff units"). Typed in our residue order
    ACDEFGHIKLMNPQRSTVWY; ``tests/test_aligner_profile.py`` checks every value against Biopython's copy
    (``substitution_matrices.load("GONNET1992")``).
``HHSUITE_NULL_MILLIBITS`` / ``HHSUITE_BACKGROUND``
    The null model of HH-suite 3 (the ``NULL`` line every ``hhmake`` profile carries), i.e. the marginals of HH-suite's Gonnet joint-probability
    matrix, in -1000·log2(p). This is our default f(a): profiles built by ``hhmake`` and scored by ``hhalign``
    use the same null model, so scores are comparable.
``ROBINSON_BACKGROUND``
    Robinson A.B., Robinson L.R. (1991) PNAS 88:8880-8884, the amino-acid composition BLAST uses
    (NCBI ``blast_stat.c``, ``Robinson_prob``), per mille. Offered as an alternative f(a).

Softmax and units
-----------------
A softmax of the raw scores would ignore f(x) and treat Dayhoff units as nats. We use the softmax of the
log-odds model the scores come from: ``g(a, x) = softmax_x(s(a, x)·ln(10)/10 + ln f(x))``, i.e.
``P(x | a) ∝ f(x)·10^(s(a,x)/10)``. Rows of :func:`substitution_probabilities` sum to 1 (row ``a``
holds the replacement probabilities of residue ``a``, the "column ``a``" above).
"""

from __future__ import annotations

import numpy as np

from workflow_lib.seqio.alphabet import AMINO_ACIDS, N_AMINO

GONNET_LOWER: tuple[tuple[float, ...], ...] = (
    (2.4,),  # A
    (0.5, 11.5),  # C
    (-0.3, -3.2, 4.7),  # D
    (0.0, -3.0, 2.7, 3.6),  # E
    (-2.3, -0.8, -4.5, -3.9, 7.0),  # F
    (0.5, -2.0, 0.1, -0.8, -5.2, 6.6),  # G
    (-0.8, -1.3, 0.4, 0.4, -0.1, -1.4, 6.0),  # H
    (-0.8, -1.1, -3.8, -2.7, 1.0, -4.5, -2.2, 4.0),  # I
    (-0.4, -2.8, 0.5, 1.2, -3.3, -1.1, 0.6, -2.1, 3.2),  # K
    (-1.2, -1.5, -4.0, -2.8, 2.0, -4.4, -1.9, 2.8, -2.1, 4.0),  # L
    (-0.7, -0.9, -3.0, -2.0, 1.6, -3.5, -1.3, 2.5, -1.4, 2.8, 4.3),  # M
    (-0.3, -1.8, 2.2, 0.9, -3.1, 0.4, 1.2, -2.8, 0.8, -3.0, -2.2, 3.8),  # N
    (0.3, -3.1, -0.7, -0.5, -3.8, -1.6, -1.1, -2.6, -0.6, -2.3, -2.4, -0.9, 7.6),  # P
    (-0.2, -2.4, 0.9, 1.7, -2.6, -1.0, 1.2, -1.9, 1.5, -1.6, -1.0, 0.7, -0.2, 2.7),  # Q
    (-0.6, -2.2, -0.3, 0.4, -3.2, -1.0, 0.6, -2.4, 2.7, -2.2, -1.7, 0.3, -0.9, 1.5, 4.7),  # R
    (1.1, 0.1, 0.5, 0.2, -2.8, 0.4, -0.2, -1.8, 0.1, -2.1, -1.4, 0.9, 0.4, 0.2, -0.2, 2.2),  # S
    (0.6, -0.5, 0.0, -0.1, -2.2, -1.1, -0.3, -0.6, 0.1, -1.3, -0.6, 0.5, 0.1, 0.0, -0.2, 1.5, 2.5),  # T
    (0.1, 0.0, -2.9, -1.9, 0.1, -3.3, -2.0, 3.1, -1.7, 1.8, 1.6, -2.2, -1.8, -1.5, -2.0, -1.0, 0.0, 3.4),  # V
    (-3.6, -1.0, -5.2, -4.3, 3.6, -4.0, -0.8, -1.8, -3.5, -0.7, -1.0, -3.6, -5.0, -2.7, -1.6, -3.3, -3.5, -2.6,
     14.2),  # W
    (-2.2, -0.5, -2.8, -2.7, 5.1, -4.0, 2.2, -0.7, -2.1, 0.0, -0.2, -1.4, -3.1, -1.7, -1.8, -1.9, -1.9, -1.1,
     4.1, 7.8),  # Y
)
"""Gonnet 1992 lower triangle (row ``a``, columns up to ``a``), Dayhoff units, order ACDEFGHIKLMNPQRSTVWY."""

HHSUITE_NULL_MILLIBITS = (3706, 5728, 4211, 4064, 4839, 3729, 4763, 4308, 4069, 3323,
                          5509, 4640, 4464, 4937, 4285, 4423, 3815, 3783, 6325, 4665)
"""HH-suite 3's null model as written on the ``NULL`` line of ``.hhm`` files (-1000·log2 p), order A..Y."""

ROBINSON_PER_MILLE = (78.05, 19.25, 53.64, 62.95, 38.56, 73.77, 21.99, 51.42, 57.44, 90.19,
                      22.43, 44.87, 52.03, 42.64, 51.29, 71.20, 58.41, 64.41, 13.30, 32.16)
"""Robinson & Robinson (1991) composition, per mille, order A..Y."""


def _normalised(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return (values / values.sum()).astype(np.float32)


HHSUITE_BACKGROUND = _normalised(np.exp2(-np.asarray(HHSUITE_NULL_MILLIBITS, dtype=np.float64) / 1000.0))
"""float32 [20], sums to 1: the default f(a)."""

ROBINSON_BACKGROUND = _normalised(np.asarray(ROBINSON_PER_MILLE))
"""float32 [20], sums to 1."""

DEFAULT_BACKGROUND = HHSUITE_BACKGROUND


def gonnet_matrix() -> np.ndarray:
    """The symmetric Gonnet matrix, float64 ``[20, 20]`` in Dayhoff units (lower triangle + its transpose)."""
    lower = np.zeros((N_AMINO, N_AMINO), dtype=np.float64)
    for row, values in enumerate(GONNET_LOWER):
        if len(values) != row + 1:
            raise ValueError(f"Gonnet row {AMINO_ACIDS[row]} has {len(values)} values, expected {row + 1}")
        lower[row, :row + 1] = values
    return lower + lower.T - np.diag(np.diag(lower))


def substitution_probabilities(background: np.ndarray | None = None) -> np.ndarray:
    """g(a, x) = P(x | a) from the Gonnet matrix: float64 ``[20, 20]``, each row sums to 1.

    ``g[a, x] = softmax_x(s(a, x)·ln(10)/10 + ln f(x))`` (see the module docstring); ``background`` is f,
    float ``[20]`` (default :data:`DEFAULT_BACKGROUND`).
    """
    f = check_background(background)
    logits = gonnet_matrix() * (np.log(10.0) / 10.0) + np.log(f)[None, :]
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    return weights / weights.sum(axis=1, keepdims=True)


def check_background(background: np.ndarray | None) -> np.ndarray:
    """Validate a background distribution (float ``[20]``, positive); return it as float64 summing to 1."""
    if background is None:
        return DEFAULT_BACKGROUND.astype(np.float64)
    f = np.asarray(background, dtype=np.float64)
    if f.shape != (N_AMINO,):
        raise ValueError(f"background must have shape (20,), got {f.shape}")
    if not np.all(np.isfinite(f)) or np.any(f <= 0):
        raise ValueError("background frequencies must be finite and positive")
    return f / f.sum()
