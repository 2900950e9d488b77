"""E-values for Viterbi scores: an extreme-value (Gumbel) fit per query profile against random sequences.

Local alignment scores of a profile against unrelated sequences follow a Gumbel distribution, ``P(S > x) = 1 -
exp(-exp(-λ (x - μ)))`` (Karlin–Altschul for gapless scores; empirically for gapped and Viterbi scores, as HMMER and
HH-suite use). The HHblits prefilter (Remmert et al. 2012, Nat. Methods 9:173) uses the Karlin–Altschul form
``E = N · Lq · Lt · 2^-S`` for the prefilter; for the final Viterbi scores we calibrate each query profile:

1. score the profile (score-only Viterbi, the same kernel as the search) against ``samples`` random sequences
   drawn i.i.d. from the profile's background ``f(a)``, all of one length ``L0`` (:func:`calibration_length`:
   the database's mean, at most :data:`CALIBRATION_MAX_LENGTH`; equal lengths fill the Viterbi lanes without
   padding);
2. remove the length dependence of a local score with ``x = S - log2(Lt) - c · log2(Lt / L0)``: the maximum
   over ``Lq · Lt`` cells grows as ``log2(Lt)`` bits, plus a finite-size excess ``c`` (:func:`length_slope`)
   that grows with the query's length and Neff;
3. fit μ by maximum likelihood with λ given by :func:`gumbel_lambda` (a per-query λ from a few hundred samples
   is noisy, μ is not; HMMER fixes λ = ln 2 per bit, but for our scores λ is lower for long queries and for
   MSA profiles, so a fixed ln 2 made E-values of iterated profiles optimistic);
4. ``E(S, Lt) = N_db · P(x > ·)``, with ``N_db`` the number of sequences in the *whole* database (from the
   manifest), so every shard and an unsharded search give the same E-value for the same hit.

λ and c come from a regression on single-sequence Pfam-benchmark queries and iterated *E. coli* MSA profiles,
each scored against random sequences of many lengths, and were checked on other profiles against random
sequences of real database lengths (benchmarks/RESULTS.md, "Homology search: E-values").

The random sequences are seeded from the profile's contents only (never the shard or the time), so a search
is deterministic and sharding does not change any number.

``calibration = "reversed"`` (:func:`decoy_windows`) replaces the i.i.d. sequences of step 1 with
(:data:`DECOY_SAMPLES`) windows of reversed real proteins (:data:`DECOY_POOL_PATH`, built by
``benchmarks/calibration_decoys.py``): unrelated sequences that keep the composition and the local structure
(helix and strand periodicity, low-complexity stretches) of real ones. Context-specific pseudocounts reward that
local structure in every protein, related or not, so against i.i.d. sequences their μ came out too low (E-values
of unrelated hits optimistic), where for Gonnet profiles the two differ little. Their score tail is also heavier
against real proteins, so with reversed decoys step 3 takes λ as :func:`gumbel_lambda` ×
:data:`REVERSED_LAMBDA_SCALE` (benchmarks/RESULTS.md, "E-values of context-specific profiles").
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from workflow_lib.errors import InputError

LAMBDA = float(np.log(2.0))
"""λ = ln 2 per bit, the value for log2-odds scores of a probabilistic local model (HMMER's choice); the
default of :func:`fit_mu` and :class:`Calibration`. Searches use :func:`gumbel_lambda` instead."""
LAMBDA_MODEL = (0.848, -0.016, -0.020)
"""``λ = a + b log2(Neff) + d log2(Lq)``, least squares on the fitted λ of single-sequence and MSA profiles, to
within the sampling error of λ (benchmarks/RESULTS.md, "Homology search: E-values"); λ = 0.69 at a 250-column
single sequence, 0.63 at a 550-column MSA."""
LAMBDA_RANGE = (0.55, 0.80)
"""Bounds on the modelled λ (a margin around the λ of the profiles :data:`LAMBDA_MODEL` was fitted on)."""
SLOPE_MODEL = (-0.237, 0.033, 0.038)
"""``slope = a + b log2(Neff) + d log2(Lq)``: the excess growth of μ per doubling of the target length
(fitted with :data:`LAMBDA_MODEL`; 0.05 for a 200-column single sequence, 0.2 for a 550-column MSA)."""
SLOPE_RANGE = (0.0, 0.35)
CALIBRATION_MAX_LENGTH = 100
"""Calibration sequences are at most this long: μ extrapolates to other lengths through :func:`length_slope`.
Fits at 100, 200 and 400 residues predict the same μ at 400 residues within their sampling error
(benchmarks/RESULTS.md, "Homology search: E-values"), and whole searches calibrated at 100 instead of 200 give
the same benchmark hits and false-positive counts for less calibration CPU."""
DECOY_WINDOW_LENGTH = 200
"""Windows of reversed proteins (``calibration = "reversed"``) stay at most 200 residues long: the local structure
context profiles score in real proteins adds more over longer windows, and :data:`REVERSED_LAMBDA_SCALE` was
chosen with windows of this length (benchmarks/RESULTS.md, "E-values of context-specific profiles")."""
REVERSED_LAMBDA_SCALE = 0.9
"""λ of a profile calibrated on reversed proteins (``calibration = "reversed"``, the context-specific profiles'
default) is :func:`gumbel_lambda` times this. Context profiles score real unrelated proteins with a heavier tail
than i.i.d. sequences, so μ fitted on reversed proteins with the i.i.d. λ left E-values optimistic on the whole
Pfam benchmark, while λ fitted on the reversed proteins themselves made them conservative and lost pairs. With
this scale the false pairs stay near their expectation; a smaller one loses pairs (benchmarks/RESULTS.md,
"E-values of context-specific profiles", with CATH as the check)."""
CALIBRATION_SAMPLES = 128
"""Random sequences per calibration. With λ given, the maximum-likelihood μ has a standard error of
``1 / (λ √N)`` ≈ 0.13 bits at N = 128 (E-values within ×1.09 at one standard error; HMMER calibrates with
200); 256 cuts the error to 0.09 bits for twice the calibration's cost, a large share of the search time."""
DECOY_SAMPLES = 64
"""Windows of reversed proteins per calibration (``calibration = "reversed"``). They are twice as long as the
i.i.d. sequences (:data:`DECOY_WINDOW_LENGTH`), so 64 of them hold the residues of 128 i.i.d. ones and cost the
same; μ's standard error is ≈ 0.2 bits (E-values within ×1.13 at one standard error). On the whole Pfam
benchmark 64 instead of 128 cost less CPU for the same ROC AUC and false pairs; fewer windows change the result
no more than another draw of them (benchmarks/RESULTS.md, "Homology search: settings measured and not taken")."""


def calibration_samples(calibration: str, samples: int | None = None) -> int:
    """Sequences per calibration: ``samples`` when given, else :data:`CALIBRATION_SAMPLES` for i.i.d. sequences
    and :data:`DECOY_SAMPLES` for reversed proteins."""
    if samples is not None:
        return int(samples)
    return DECOY_SAMPLES if calibration == "reversed" else CALIBRATION_SAMPLES


def _model(coefficients: tuple[float, float, float], bounds: tuple[float, float], neff: float,
           length: int) -> float:
    a, b, d = coefficients
    value = a + b * np.log2(max(float(neff), 1.0)) + d * np.log2(max(int(length), 1))
    return float(np.clip(value, *bounds))


def gumbel_lambda(neff: float, length: int) -> float:
    """Gumbel λ (per bit) of a query profile with ``neff`` effective sequences and ``length`` columns
    (:data:`LAMBDA_MODEL`, clipped to :data:`LAMBDA_RANGE`)."""
    return _model(LAMBDA_MODEL, LAMBDA_RANGE, neff, length)


def length_slope(neff: float, length: int) -> float:
    """Excess bits of μ per doubling of the target length beyond ``log2(Lt)`` (:data:`SLOPE_MODEL`)."""
    return _model(SLOPE_MODEL, SLOPE_RANGE, neff, length)


@dataclass(frozen=True)
class Calibration:
    """Gumbel parameters of one query profile: ``P(x > t) = 1 - exp(-exp(-lam (t - mu)))`` for the
    length-corrected score ``x = S - log2(Lt) - slope · log2(Lt / reference_length)``."""

    mu: float
    lam: float = LAMBDA
    slope: float = 0.0
    reference_length: float = 1.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.mu) and self.lam > 0 and np.isfinite(self.slope) and self.reference_length > 0):
            raise ValueError(f"invalid Gumbel calibration {self}")

    def corrected(self, bits: np.ndarray, target_lengths: np.ndarray) -> np.ndarray:
        """``S - log2(Lt) - slope · log2(Lt / reference_length)``."""
        log_length = np.log2(np.maximum(np.asarray(target_lengths, np.float64), 1.0))
        return (np.asarray(bits, np.float64) - log_length
                - self.slope * (log_length - np.log2(self.reference_length)))

    def pvalues(self, bits: np.ndarray, target_lengths: np.ndarray) -> np.ndarray:
        return -np.expm1(-np.exp(-self.lam * (self.corrected(bits, target_lengths) - self.mu)))

    def evalues(self, bits: np.ndarray, target_lengths: np.ndarray, db_sequences: int) -> np.ndarray:
        return float(db_sequences) * self.pvalues(bits, target_lengths)

    def min_bits(self, max_evalue: float, target_lengths: np.ndarray, db_sequences: int) -> np.ndarray:
        """The score (bits) at which :meth:`evalues` reaches ``max_evalue`` for each target length: lower scores
        have larger E-values. ``-inf`` where every score does (``max_evalue ≥ db_sequences``)."""
        lengths = np.asarray(target_lengths, np.float64)
        pvalue = float(max_evalue) / max(float(db_sequences), 1.0)
        if pvalue >= 1.0:
            return np.full(lengths.shape, -np.inf)
        if pvalue <= 0.0:
            return np.full(lengths.shape, np.inf)
        # P = 1 − exp(−exp(−λ(x − μ)))  ⇔  x = μ − ln(−ln(1 − P)) / λ;
        # then undo the length correction
        corrected = self.mu - np.log(-np.log1p(-pvalue)) / self.lam
        return corrected - self.corrected(np.zeros_like(lengths), lengths)


def profile_seed(sequence: np.ndarray, emissions: np.ndarray) -> int:
    """A seed that depends only on the profile's contents."""
    return zlib.crc32(np.ascontiguousarray(sequence).tobytes() + np.ascontiguousarray(emissions).tobytes())


def calibration_length(mean_length: float, maximum: int = CALIBRATION_MAX_LENGTH) -> int:
    """Length of the calibration sequences: the database's mean length, within [20, ``maximum``] residues
    (:data:`CALIBRATION_MAX_LENGTH`; :data:`DECOY_WINDOW_LENGTH` for reversed proteins)."""
    return int(np.clip(np.rint(mean_length), 20, maximum))


def random_sequences(background: np.ndarray, mean_length: float, count: int, seed: int) -> list[np.ndarray]:
    """``count`` i.i.d. sequences from ``background``, each :func:`calibration_length` (``mean_length``) long.

    Scores at other lengths are brought to this one by :meth:`Calibration.corrected`; a log-normal spread of
    lengths gave the same μ for more cells (the lanes' padding)."""
    return iid_sequences(background, calibration_length(mean_length), count, seed)


def iid_sequences(background: np.ndarray, length: int, count: int, seed: int) -> list[np.ndarray]:
    """``count`` uint8 sequences of exactly ``length`` residues drawn i.i.d. from ``background``."""
    rng = np.random.default_rng(seed)
    probabilities = np.asarray(background, np.float64)
    probabilities = probabilities / probabilities.sum()
    cumulative = np.cumsum(probabilities)
    draws = np.searchsorted(cumulative, rng.random((count, int(length))))
    return list(np.minimum(draws, probabilities.size - 1).astype(np.uint8))


CALIBRATIONS = ("random", "reversed")
"""Calibration sequences: i.i.d. from the background, or windows of reversed real proteins."""
DECOY_POOL_PATH = Path(__file__).resolve().parents[1] / "data" / "calibration_decoys.npz"
"""The shipped pool of reversed real proteins (provenance in the JSON file next to it)."""


def write_decoy_pool(path: str | Path, sequences: list[np.ndarray]) -> None:
    """Write uint8 code arrays as an npz (``codes`` concatenated, ``offsets`` ``[n + 1]``), atomically."""
    from workflow_lib.seqio.atomic import atomic_path
    codes = np.concatenate([np.asarray(s, np.uint8) for s in sequences])
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sequences])]).astype(np.int64)
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, codes=codes, offsets=offsets)


@lru_cache(maxsize=4)
def load_decoy_pool(path: str | None = None) -> tuple[np.ndarray, ...]:
    """The decoy sequences of ``path`` (default :data:`DECOY_POOL_PATH`); ``InputError`` naming the file if it
    is unreadable, holds codes outside the 20 amino acids, or a sequence shorter than
    :data:`DECOY_WINDOW_LENGTH`."""
    path = str(path or DECOY_POOL_PATH)
    try:
        with np.load(path, allow_pickle=False) as data:
            codes, offsets = data["codes"], data["offsets"]
    except (OSError, KeyError, ValueError) as error:
        raise InputError(f"cannot read a calibration decoy pool (npz with 'codes' and 'offsets'): {error}",
                         path=path) from None
    lengths = np.diff(offsets)
    if (codes.dtype != np.uint8 or offsets.ndim != 1 or offsets.size < 2 or offsets[0] != 0
            or offsets[-1] != codes.size or (lengths < DECOY_WINDOW_LENGTH).any() or int(codes.max()) > 19):
        raise InputError(f"not a calibration decoy pool: uint8 amino-acid codes, each sequence at least "
                         f"{DECOY_WINDOW_LENGTH} residues", path=path)
    return tuple(codes[offsets[k]:offsets[k + 1]] for k in range(lengths.size))


def decoy_windows(pool: tuple[np.ndarray, ...], mean_length: float, count: int, seed: int) -> list[np.ndarray]:
    """``count`` windows of :func:`calibration_length` (``mean_length``, at most :data:`DECOY_WINDOW_LENGTH`)
    residues at random positions of random pool sequences (every pool sequence is at least that long), drawn
    with ``seed``."""
    length = calibration_length(mean_length, DECOY_WINDOW_LENGTH)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(pool), count)
    sizes = np.array([pool[k].size for k in picks], dtype=np.int64)
    starts = np.floor(rng.random(count) * (sizes - length + 1)).astype(np.int64)
    return [pool[k][start:start + length].copy() for k, start in zip(picks, starts)]


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
