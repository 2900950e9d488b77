"""Metrics of the homology-search benchmark (side by side with the peers).

Pure functions on arrays: no I/O. Every pair or target is scored by an E-value; *smaller is better*, and a
pair that a tool did not report gets ``+inf`` (worse than every reported hit; all missing pairs tie).

- :func:`roc_auc` — area under the ROC curve of positives vs negatives, ties counted half (Mann–Whitney U).
- :func:`sensitivity_at_fpr` — the largest fraction of positives found at an E-value threshold whose false
  positive rate is at most ``fpr`` (ties at the threshold are taken or left together, never split).
- :func:`roc1` — for one query: the fraction of its true targets ranked before the first false target
  (Gribskov's ROC1 as used by the MMseqs2/Foldseek benchmarks: sensitivity up to the first false positive);
  a true target tying the best false target counts half; unreported true targets never count.
- :func:`calibration_counts` — how many hits have E ≤ x for each threshold x.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CALIBRATION_THRESHOLDS = (0.001, 0.01, 0.1, 1.0, 10.0)


def _as_evalues(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).ravel()
    if np.isnan(array).any():
        raise ValueError(f"{name}: E-values must not be NaN (use +inf for 'no hit')")
    if (array < 0).any():
        raise ValueError(f"{name}: E-values must be ≥ 0")
    return array


def roc_auc(positive_evalues: Sequence[float] | np.ndarray, negative_evalues: Sequence[float] | np.ndarray) -> float:
    """Probability that a random positive pair has a smaller E-value than a random negative pair (ties: ½).

    Equal to the area under the ROC curve traced by lowering the E-value threshold. Needs at least one
    positive and one negative.
    """
    pos = _as_evalues(positive_evalues, "positives")
    neg = _as_evalues(negative_evalues, "negatives")
    if pos.size == 0 or neg.size == 0:
        raise ValueError("ROC AUC needs at least one positive and one negative")
    neg_sorted = np.sort(neg)
    # for each positive: negatives strictly worse (larger E) + ½ × negatives tied
    below = np.searchsorted(neg_sorted, pos, side="left")      # negatives with E < pos
    not_above = np.searchsorted(neg_sorted, pos, side="right")  # negatives with E ≤ pos
    worse = neg.size - not_above
    ties = not_above - below
    return float((worse.sum() + 0.5 * ties.sum()) / (pos.size * neg.size))


def sensitivity_at_fpr(positive_evalues: Sequence[float] | np.ndarray,
                       negative_evalues: Sequence[float] | np.ndarray, fpr: float = 0.01) -> float:
    """Largest true positive rate over thresholds t with (negatives with E ≤ t) / n_negatives ≤ ``fpr``.

    Thresholds run over the distinct finite E-values (and 'nothing called' = 0); unreported pairs (+inf) are
    never called. Pairs tied at a threshold are called together.
    """
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must be in [0, 1], got {fpr}")
    pos = _as_evalues(positive_evalues, "positives")
    neg = _as_evalues(negative_evalues, "negatives")
    if pos.size == 0 or neg.size == 0:
        raise ValueError("sensitivity at FPR needs at least one positive and one negative")
    thresholds = np.unique(np.concatenate([pos[np.isfinite(pos)], neg[np.isfinite(neg)]]))
    if thresholds.size == 0:
        return 0.0
    neg_sorted = np.sort(neg)
    pos_sorted = np.sort(pos)
    false_rate = np.searchsorted(neg_sorted, thresholds, side="right") / neg.size
    true_rate = np.searchsorted(pos_sorted, thresholds, side="right") / pos.size
    allowed = false_rate <= fpr + 1e-12
    return float(true_rate[allowed].max()) if allowed.any() else 0.0


def roc1(true_evalues: Sequence[float] | np.ndarray, false_evalues: Sequence[float] | np.ndarray) -> float:
    """ROC1 of one query: fraction of its true targets with an E-value better than its best false target.

    ``true_evalues`` has one entry per true target in the database (+inf when unreported), so the
    denominator is the number of true targets, reported or not. A true target tied with the best false
    target counts ½. With no false target reported at all, every reported true target counts.
    """
    true = _as_evalues(true_evalues, "true targets")
    false = _as_evalues(false_evalues, "false targets")
    if true.size == 0:
        raise ValueError("ROC1 is undefined for a query without true targets")
    first_false = false.min() if false.size else np.inf
    reported = np.isfinite(true)
    better = (true < first_false) & reported
    tied = (true == first_false) & reported
    return float((better.sum() + 0.5 * tied.sum()) / true.size)


def calibration_counts(evalues: Sequence[float] | np.ndarray,
                       thresholds: Sequence[float] = CALIBRATION_THRESHOLDS) -> np.ndarray:
    """Number of E-values ≤ x for each threshold x (int64, same order as ``thresholds``)."""
    values = np.sort(_as_evalues(evalues, "hits"))
    return np.searchsorted(values, np.asarray(thresholds, dtype=np.float64), side="right").astype(np.int64)


def poisson_tail(count: int, mean: float) -> float:
    """``P(X ≥ count)`` for ``X ~ Poisson(mean)``: how surprising ``count`` false hits are when a calibrated
    tool expects ``mean`` (terms summed in log space, so large counts do not overflow)."""
    if count <= 0:
        return 1.0
    if mean <= 0:
        return 0.0
    k = np.arange(count)
    log_terms = -mean + k * np.log(mean) - np.cumsum(np.log(np.maximum(k, 1)))
    return float(max(0.0, -np.expm1(np.logaddexp.reduce(log_terms))))
