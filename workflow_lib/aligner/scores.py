"""Integer score tables for the Viterbi kernels (milli-bits) and the result types the kernels return.

Why integers: the lane kernels solve the in-row chains (I in sequence–profile, GD/IM in profile–profile) as
prefix max-plus scans, ``X(l) = C(l) + max_{k≤l}(A(k) − C(k))`` with ``C`` a cumulative sum of transition
scores. In float32, ``A − C`` loses the low bits once ``|C|`` reaches thousands of bits, so fast and reference
kernels would disagree; in int32 the scan is exact. One unit is 1/1000 bit (:data:`SCALE`), the resolution
of ``.hhm`` files; rounding each term costs at most 0.0005 bits.

Sentinels (chosen so that no sum in a kernel overflows int32; see the kernel docstrings):

- :data:`MIN_SCORE` (−2^15 ≈ −32.8 bits) floors every log-probability term (zero probabilities included);
- :data:`PAD_SCORE` (−2^26) is the emission/column score of padding positions of shorter targets in a lane;
- :data:`NEG_INF` (−2^29) initialises the boundary cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workflow_lib.aligner.profile import Profile
from workflow_lib.seqio.alphabet import GAP_CODE, N_AMINO, N_CODES, X_CODE

SCALE = 1000
MIN_SCORE = -(2 ** 15)
PAD_SCORE = -(2 ** 26)
NEG_INF = -(2 ** 29)
PAD_CODE = GAP_CODE
"""Residue code used to pad shorter targets in a lane (its emission score is :data:`PAD_SCORE`)."""

HHSUITE_SHIFT = -0.03
"""Per-column score offset (bits) of HH-suite 3's profile–profile Viterbi (``hhalign -shift``, default -0.03)."""

CORRELATION_WEIGHT = 0.1
"""Weight of HHsearch's correlation score (``hhalign -corr``, default 0.1)."""


def quantize(log2_values: np.ndarray) -> np.ndarray:
    """Bits (float, ``-inf`` allowed) → int32 milli-bits, floored at :data:`MIN_SCORE`."""
    values = np.asarray(log2_values, dtype=np.float64) * SCALE
    values = np.where(np.isfinite(values), values, MIN_SCORE)
    return np.maximum(np.rint(values), MIN_SCORE).astype(np.int32)


def log2_safe(probabilities: np.ndarray) -> np.ndarray:
    p = np.asarray(probabilities, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(p > 0, np.log2(np.maximum(p, 1e-300)), -np.inf)


@dataclass(frozen=True)
class SequenceScores:
    """Sequence-vs-profile scores: ``emission`` int32 ``[L, 22]`` (log2(p_i(a)/f(a)) for a < 20; X = 0, i.e. the
    f-weighted mean odds; padding = :data:`PAD_SCORE`) and ``transitions`` int32 ``[L + 1, 7]`` (log2 t)."""

    emission: np.ndarray
    transitions: np.ndarray

    @property
    def length(self) -> int:
        return int(self.emission.shape[0])


def sequence_scores(profile: Profile) -> SequenceScores:
    """Score tables of a profile for aligning sequences to it (log-odds; Söding 2005, Bioinformatics 21:951)."""
    emission = np.zeros((profile.length, N_CODES), dtype=np.int32)
    odds = profile.emissions.astype(np.float64) / profile.background.astype(np.float64)[None, :]
    emission[:, :N_AMINO] = quantize(log2_safe(odds))
    emission[:, X_CODE] = 0
    emission[:, PAD_CODE] = PAD_SCORE
    return SequenceScores(emission, quantize(log2_safe(profile.transitions)))


@dataclass(frozen=True)
class PairScores:
    """Profile-vs-profile inputs for one side: ``scaled`` float64 ``[L, 20]`` emissions divided by sqrt(f) (so
    that ``scaled_q @ scaled_t.T = Σ_a q(a)t(a)/f(a)``) and ``transitions`` int32 ``[L + 1, 7]``."""

    scaled: np.ndarray
    transitions: np.ndarray
    emissions: np.ndarray = field(repr=False)

    @property
    def length(self) -> int:
        return int(self.scaled.shape[0])


def pair_scores(profile: Profile, background: np.ndarray | None = None) -> PairScores:
    """Per-profile tables for the log-sum-of-odds Viterbi (f defaults to the profile's own null model)."""
    f = np.asarray(profile.background if background is None else background, dtype=np.float64)
    emissions = profile.emissions.astype(np.float64)
    return PairScores(emissions / np.sqrt(f)[None, :], quantize(log2_safe(profile.transitions)), emissions)


def column_scores(query: PairScores, template_scaled: np.ndarray, shift: float = HHSUITE_SHIFT) -> np.ndarray:
    """Column scores ``S_aa(q_i, t_j) + shift`` (HHsearch's column score, Söding 2005): int32 milli-bits ``[Lq, ...]``.

    ``template_scaled``: float64 ``[..., 20]`` scaled template emissions (all-zero rows mark padding and get
    :data:`PAD_SCORE`). ``S_aa = log2 Σ_a q_i(a)·t_j(a)/f(a)``.
    """
    flat = template_scaled.reshape(-1, N_AMINO)
    products = query.scaled @ flat.T
    padding = ~np.any(flat != 0, axis=1)
    scores = quantize(log2_safe(products) + shift)
    scores[:, padding] = PAD_SCORE
    return scores.reshape((query.length,) + template_scaled.shape[:-1])


@dataclass(frozen=True)
class Hit:
    """One target's best local alignment.

    ``score`` in bits (profile–profile: Viterbi score plus the correlation score); ``raw_score`` int milli-bits
    of the Viterbi recursion alone. Coordinates are 0-based, ends exclusive (``-1`` without backtrace).
    ``states``: one letter per alignment step — sequence–profile: ``M`` match, ``I`` target residue in an
    insert state, ``D`` query column deleted; profile–profile: ``M`` (MM), ``I`` (MI: query column, template
    insert), ``J`` (IM: query insert, template column), ``D`` (DG: query delete), ``G`` (GD: template delete).
    ``pairs``: int32 ``[K, 2]`` (query column, target position) of the match steps.
    """

    index: int
    score: float
    raw_score: int
    query_start: int = -1
    query_end: int = -1
    target_start: int = -1
    target_end: int = -1
    states: str = ""
    pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int32), repr=False)

    @property
    def aligned_columns(self) -> int:
        return int(self.pairs.shape[0])


def hit_from_path(index: int, raw_score: int, steps: list[tuple[int, int, str]], *, score: float | None = None,
                  match_letter: str = "M") -> Hit:
    """A :class:`Hit` from backtrace steps ``(i, l, letter)`` in forward order, 1-based DP coordinates."""
    if not steps:
        return Hit(index, raw_score / SCALE if score is None else score, int(raw_score))
    letters = "".join(step[2] for step in steps)
    pairs = np.array([(i - 1, l - 1) for i, l, letter in steps if letter == match_letter], dtype=np.int32)
    pairs = pairs.reshape(-1, 2)
    first_i, first_l, _ = steps[0]
    last_i, last_l, _ = steps[-1]
    return Hit(index, raw_score / SCALE if score is None else score, int(raw_score), first_i - 1, last_i,
               first_l - 1, last_l, letters, pairs)
