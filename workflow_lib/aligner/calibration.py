"""E-values for profile–profile hits (templates, profile databases): an extreme-value null model fitted per query
on shuffled profiles of the searched database.

HHsearch turns a Viterbi score into an E-value with an extreme-value (Gumbel) distribution whose parameters
come from the scores of the query against unrelated database HMMs. A small template database has too few
unrelated members for that fit, so the null sample here is made on purpose:

- **Decoys.** ``n_decoys`` column-shuffled copies of the database's template profiles (template ``d mod N``,
  permutation number ``d``; emission rows and the transition/Neff rows that leave each column are permuted
  together, the begin row is kept). Shuffling keeps each template's amino-acid composition, length and gap
  statistics and destroys the order that a true relationship would share with the query, so a decoy is an
  unrelated template with the composition of real ones. Deterministic (``seed``); the decoys are scored with
  exactly the score the searches turn into E-values: the best local profile–profile Viterbi score in bits
  (HHsearch, Söding 2005, Bioinformatics 21:951), computed without traceback by
  :func:`~workflow_lib.aligner.hmm_compiled.hmm_scores` (HH-suite3 likewise scores many profiles before it
  traces the few it reports, Steinegger et al. 2019, BMC Bioinformatics 20:473). HHsearch's correlation score
  is not part of that score: it needs the traceback, and a null fitted on one score and applied to another
  would not be calibrated.
- **Model.** Karlin–Altschul form of a local alignment maximum over a target of length ``n``:
  ``P(S ≥ s) = 1 − exp(−n·exp(−λ(s − μ)))`` (the query's own length and composition are folded into μ, as the
  fit is per query). ``λ`` and ``μ`` are maximum-likelihood estimates from the decoy scores: for fixed λ the
  optimum is ``μ = (ln K − ln Σ_k n_k e^{−λ s_k}) / λ`` in closed form (K decoys); λ maximises the profile likelihood
  (bounded golden-section search on ``[0.02, 5]`` per bit).
- **E-value** of a hit: ``E = N · P(S ≥ s)`` with ``N`` the number of templates searched (HHsearch uses the
  database size the same way); ``significance = exp(−E)`` is the probability that no unrelated template of the
  database scores that high (Poisson), used as the 1D "confidence" feature.

Checked in ``tests/test_templates_search.py``: on held-out decoys (another seed) the P-values are close to
uniform (the fraction below 0.05 / 0.01 is measured and bounded there), and true homologs get small E-values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from workflow_lib.aligner.hmm_compiled import hmm_scores
from workflow_lib.aligner.profile import Profile
from workflow_lib.aligner.scores import SCALE

DEFAULT_DECOYS = 200
MIN_DECOYS = 20
LAMBDA_RANGE = (0.02, 5.0)


def shuffled_profile(profile: Profile, rng: np.random.Generator, name: str) -> Profile:
    """A copy of ``profile`` with its columns in a random order (begin transition row kept)."""
    order = rng.permutation(profile.length)
    rows = np.concatenate([[0], order + 1])
    return replace(profile, name=name, sequence=profile.sequence[order].copy(),
                   emissions=profile.emissions[order].copy(), transitions=profile.transitions[rows].copy(),
                   column_neff=profile.column_neff[rows].copy(), ss_pred=None, ss_conf=None, consensus=None)


def decoy_profiles(templates: list[Profile], n_decoys: int = DEFAULT_DECOYS, *, seed: int = 0) -> list[Profile]:
    """``n_decoys`` shuffled copies of ``templates`` (template ``d mod N`` with permutation ``d``)."""
    if not templates:
        raise ValueError("no template profiles to make decoys from")
    decoys = []
    for d in range(n_decoys):
        rng = np.random.default_rng([seed, d])
        source = templates[d % len(templates)]
        decoys.append(shuffled_profile(source, rng, f"decoy{d}:{source.name}"))
    return decoys


@dataclass(frozen=True)
class NullModel:
    """Fitted Gumbel null of one query: ``P(S ≥ s | n) = 1 − exp(−n·exp(−λ(s − μ)))`` (s in bits)."""

    lam: float
    mu: float
    n_decoys: int

    def pvalue(self, score: np.ndarray | float, length: np.ndarray | float) -> np.ndarray:
        z = self.lam * (np.asarray(score, dtype=np.float64) - self.mu)
        expected = np.asarray(length, dtype=np.float64) * np.exp(-z)
        return -np.expm1(-expected)

    def evalue(self, score: np.ndarray | float, length: np.ndarray | float, db_size: int) -> np.ndarray:
        return db_size * self.pvalue(score, length)


def _mu_for(lam: float, scores: np.ndarray, lengths: np.ndarray) -> float:
    # ∂logL/∂μ = 0  ⇔  Σ n_k e^{−λ(s_k − μ)} = K
    shifted = -lam * scores + np.log(lengths)
    top = shifted.max()
    log_sum = top + math.log(np.exp(shifted - top).sum())
    return (math.log(scores.size) - log_sum) / lam


def _log_likelihood(lam: float, scores: np.ndarray, lengths: np.ndarray) -> float:
    mu = _mu_for(lam, scores, lengths)
    z = lam * (scores - mu) - np.log(lengths)
    return float(np.sum(math.log(lam) - z - np.exp(-z)))


def fit_gumbel(scores: np.ndarray, lengths: np.ndarray) -> NullModel:
    """Maximum-likelihood λ, μ of the module's model from decoy ``scores`` (bits) and target ``lengths``."""
    scores = np.asarray(scores, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.float64)
    if scores.size < MIN_DECOYS:
        raise ValueError(f"need at least {MIN_DECOYS} decoy scores, got {scores.size}")
    if np.ptp(scores) <= 0:
        raise ValueError("decoy scores are all equal; cannot fit a null distribution")
    low, high = LAMBDA_RANGE
    golden = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = math.log(low), math.log(high)  # search log λ
    c, d = b - golden * (b - a), a + golden * (b - a)
    fc, fd = _log_likelihood(math.exp(c), scores, lengths), _log_likelihood(math.exp(d), scores, lengths)
    for _ in range(80):
        if fc > fd:
            b, d, fd = d, c, fc
            c = b - golden * (b - a)
            fc = _log_likelihood(math.exp(c), scores, lengths)
        else:
            a, c, fc = c, d, fd
            d = a + golden * (b - a)
            fd = _log_likelihood(math.exp(d), scores, lengths)
    lam = math.exp(0.5 * (a + b))
    return NullModel(lam, _mu_for(lam, scores, lengths), int(scores.size))


def decoy_scores(query: Profile, decoys: list[Profile]) -> np.ndarray:
    """float64 ``[len(decoys)]``: the Viterbi scores (bits, no correlation score) the null is fitted to."""
    return hmm_scores(query, decoys) / SCALE


def fit_decoys(query: Profile, decoys: list[Profile]) -> NullModel:
    """:func:`fit_gumbel` of the :func:`decoy_scores` of ``query`` against ``decoys`` (from :func:`decoy_profiles`:
    a search that keeps its decoys across queries passes them here)."""
    return fit_gumbel(decoy_scores(query, decoys), np.array([d.length for d in decoys]))


def fit_null(query: Profile, templates: list[Profile], *, n_decoys: int = DEFAULT_DECOYS,
             seed: int = 0) -> NullModel:
    """:func:`fit_decoys` on ``n_decoys`` :func:`decoy_profiles` of ``templates``."""
    return fit_decoys(query, decoy_profiles(templates, n_decoys, seed=seed))
