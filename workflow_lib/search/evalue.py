"""E-values for Viterbi scores: an extreme-value (Gumbel) fit per query profile against random sequences.

Local alignment scores of a profile against unrelated sequences follow a Gumbel distribution,
``P(S > x) = 1 - exp(-exp(-λ (x - μ)))`` (Karlin–Altschul for gapless scores; empirically for gapped and
Viterbi scores, as HMMER and HH-suite use). The seed ("Iterative MSA Alignment") uses the Karlin–Altschul form
``E = N · Lq · Lt · 2^-S`` for the prefilter; for the final Viterbi scores we calibrate each query profile:

1. score the profile (score-only Viterbi, the same kernel as the search) against ``samples`` random sequences
   drawn i.i.d. from the profile's background ``f(a)``, all as long as the database's mean sequence (equal
   lengths fill the Viterbi lanes without padding: 46% fewer cells than the log-normal spread of lengths used
   before, for the same μ within 0.01 bits on average, see benchmarks/RESULTS.md);
2. remove the length dependence of a local score with ``x = S - log2(Lt)`` (the maximum over ``Lq · Lt``
   cells grows as ``log2(Lt)`` bits);
3. fit μ by maximum likelihood with λ fixed (HMMER's approach: a per-query λ from a few hundred samples is
   noisy, μ is not); λ is :data:`LAMBDA` (measured on real profiles, see benchmarks/RESULTS.md);
4. ``E(S, Lt) = N_db · P(S - log2(Lt) > x)``, with ``N_db`` the number of sequences in the *whole* database
   (from the manifest), so every shard and an unsharded search give the same E-value for the same hit.

The random sequences are seeded from the profile's contents only (never the shard or the time), so a search
is deterministic and sharding does not change any number.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

LAMBDA = float(np.log(2.0))
"""Gumbel λ for bit scores (scores are log2-odds, so λ = ln 2 in nats per bit), see :func:`fit_gumbel`."""
CALIBRATION_SAMPLES = 128
"""Random sequences per calibration. With λ fixed the maximum-likelihood μ has a standard error of
``1 / (λ √N)`` = 0.13 bits at N = 128 (E-values within ×1.09 at one standard error; HMMER calibrates with
200); 256 halved the error to 0.09 bits for twice the cost, which was a third of the search time."""


@dataclass(frozen=True)
class Calibration:
    """Gumbel parameters of one query profile: ``P(S - log2(Lt) > x) = 1 - exp(-exp(-lam (x - mu)))``."""

    mu: float
    lam: float = LAMBDA

    def pvalues(self, bits: np.ndarray, target_lengths: np.ndarray) -> np.ndarray:
        x = np.asarray(bits, np.float64) - np.log2(np.maximum(np.asarray(target_lengths, np.float64), 1.0))
        return -np.expm1(-np.exp(-self.lam * (x - self.mu)))

    def evalues(self, bits: np.ndarray, target_lengths: np.ndarray, db_sequences: int) -> np.ndarray:
        return float(db_sequences) * self.pvalues(bits, target_lengths)


def profile_seed(sequence: np.ndarray, emissions: np.ndarray) -> int:
    """A seed that depends only on the profile's contents."""
    return zlib.crc32(np.ascontiguousarray(sequence).tobytes() + np.ascontiguousarray(emissions).tobytes())


def calibration_length(mean_length: float) -> int:
    """Length of the calibration sequences: the database's mean length, within [20, 4000] residues."""
    return int(np.clip(np.rint(mean_length), 20, 4000))


def random_sequences(background: np.ndarray, mean_length: float, count: int, seed: int) -> list[np.ndarray]:
    """``count`` i.i.d. sequences from ``background``, each :func:`calibration_length` (``mean_length``) long.

    A local score's length dependence is removed by ``S - log2(Lt)`` up to an edge effect (μ fitted at 1,000
    residues is ~0.1 bits above μ at 374, see benchmarks/RESULTS.md), so μ is fitted at the length most targets
    have; a log-normal spread of lengths around the mean gave the same μ at 1.8× the cells (lane padding)."""
    rng = np.random.default_rng(seed)
    probabilities = np.asarray(background, np.float64)
    probabilities = probabilities / probabilities.sum()
    cumulative = np.cumsum(probabilities)
    draws = np.searchsorted(cumulative, rng.random((count, calibration_length(mean_length))))
    return list(np.minimum(draws, probabilities.size - 1).astype(np.uint8))


def fit_mu(x: np.ndarray, lam: float = LAMBDA) -> float:
    """Maximum-likelihood μ of a Gumbel with known λ: ``μ = -(1/λ) log(mean(exp(-λ x)))``."""
    x = np.asarray(x, np.float64)
    if x.size == 0:
        raise ValueError("cannot fit a Gumbel distribution to no scores")
    shift = x.min()
    return float(shift - np.log(np.mean(np.exp(-lam * (x - shift)))) / lam)


def fit_gumbel(x: np.ndarray, *, iterations: int = 100) -> tuple[float, float]:
    """Maximum-likelihood (μ, λ) of a Gumbel (Newton on λ, as in Eddy's esl_gumbel), for measuring λ."""
    x = np.asarray(x, np.float64)
    lam = np.pi / np.sqrt(6.0 * max(x.var(), 1e-12))
    for _ in range(iterations):
        w = np.exp(-lam * (x - x.mean()))
        s0, s1, s2 = w.sum(), (x * w).sum(), (x * x * w).sum()
        f = 1.0 / lam - x.mean() + s1 / s0
        df = -1.0 / lam ** 2 - (s2 / s0 - (s1 / s0) ** 2)
        step = f / df
        lam = max(lam - step, 1e-6)
        if abs(step) < 1e-10:
            break
    return fit_mu(x, lam), float(lam)
