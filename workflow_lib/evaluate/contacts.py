"""Long-range contact precision of the predicted distogram and of the co-evolution baseline.

Co-evolution of two residues often implies that they are in contact (Morcos et al. 2011, PNAS 108:E1293; Jones
et al. 2012, Bioinformatics 28:184), and RoseTTAFold's soft-tied attention maps resemble the true contact map
(Baek et al. 2021, Science 373:871): a contact map is the first thing a structure predictor has to get right,
and the classic way to read it off an MSA alone -- APC-corrected co-evolution (Dunn et al. 2008, Bioinformatics
24:333) -- is the baseline the network must beat.

Definitions (shared with the validation of :mod:`workflow_lib.training`, which uses :func:`contact_precision`):

- **true contact**: native Cβ–Cβ distance < 8 Å (virtual Cβ from N, CA, C where the file has none, glycine
  included: :meth:`~workflow_lib.structure.parse.Chain.cb_filled`);
- **model contact probability**: ``P(d_Cβ < 8 Å)`` = the sum of the first :data:`CONTACT_BINS` (12) distance
  bins of the predicted distogram (bins of 0.5 Å from 2 Å, :data:`workflow_lib.structure.geometry.DIST_EDGES`);
- **co-evolution score**: channel 0 (APC-corrected covariance norm) of
  :func:`workflow_lib.features.coevolution.coevolution_features`, from the same statistics rows and sequence
  weights as the feature stage (:func:`workflow_lib.features.msa_features.msa_features`); channel 1 (APC MI)
  is reported too;
- **precision**: the fraction of true contacts among the ``top`` highest-scoring pairs ``i < j`` with
  sequence separation ``|i − j| ≥ 24`` (prediction indices) whose residues both match an observed native
  residue with a Cβ (and, for co-evolution, an A3M match column); ``top`` = L/5 and L with L the prediction's
  length. NaN when no pair qualifies or all candidate pairs score the same (a single-sequence MSA).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workflow_lib.errors import InputError
from workflow_lib.evaluate.align import match_residues
from workflow_lib.features.msa_features import msa_features
from workflow_lib.seqio.alphabet import decode
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.structure.geometry import DIST_EDGES

CONTACT_CUTOFF = 8.0
"""Cβ–Cβ distance (Å) below which a native pair is a contact."""
LONG_RANGE = 24
"""Minimum sequence separation of a long-range pair."""
MIN_QUERY_IDENTITY = 0.5
"""An A3M whose query is less identical than this to the prediction (over aligned pairs) is another protein's."""
CONTACT_BINS = int(np.searchsorted(DIST_EDGES, 8.0))
"""Distance bins 0..11 cover d < 8 Å (edges 2.0, 2.5, ..., 8.0): the contact probability sums them."""


def native_contacts(cb: np.ndarray, cutoff: float = CONTACT_CUTOFF) -> tuple[np.ndarray, np.ndarray]:
    """True contacts and the pairs that can be scored, bool ``[L, L]`` each, from Cβ ``[L, 3]`` (NaN: none)."""
    cb = np.asarray(cb, dtype=np.float64)
    present = np.isfinite(cb).all(axis=-1)
    with np.errstate(invalid="ignore"):
        distance = np.sqrt(np.sum((cb[:, None, :] - cb[None, :, :]) ** 2, axis=-1))
        contact = distance < cutoff
    valid = present[:, None] & present[None, :]
    return contact & valid, valid


def contact_probability(dist: np.ndarray) -> np.ndarray:
    """float64 ``[L, L]``: ``P(d_Cβ < 8 Å)`` from distance-bin probabilities ``[L, L, 37]``."""
    return np.asarray(dist, dtype=np.float64)[..., :CONTACT_BINS].sum(axis=-1)


def contact_precision(contact_prob: np.ndarray, true_contact: np.ndarray, valid: np.ndarray,
                      residue_index: np.ndarray, min_separation: int, top: int) -> float:
    """Fraction of true contacts among the ``top`` most probable pairs ``i < j`` with separation ≥
    ``min_separation`` and ``valid``; NaN when there is no such pair."""
    sep = np.abs(residue_index[None, :] - residue_index[:, None])
    candidates = np.triu(valid & (sep >= min_separation), k=1)
    ii, jj = np.nonzero(candidates)
    if ii.size == 0:
        return float("nan")
    order = np.argsort(-contact_prob[ii, jj], kind="stable")[:max(1, top)]
    return float(true_contact[ii[order], jj[order]].mean())


def long_range_precision(score: np.ndarray, contact: np.ndarray, valid: np.ndarray) -> tuple[float, float]:
    """Precision of the top L/5 and top L long-range pairs by ``score`` (module docstring); L = ``len(score)``.

    NaN when every candidate pair has the same score (e.g. the co-evolution of a single-sequence MSA, all 0):
    such a "ranking" is the pair order, not a prediction.
    """
    length = score.shape[0]
    index = np.arange(length)
    candidates = np.triu(valid & (np.abs(index[:, None] - index[None, :]) >= LONG_RANGE), 1)
    values = score[candidates]
    if values.size == 0 or np.all(values == values[0]):
        return float("nan"), float("nan")
    return (contact_precision(score, contact, valid, index, LONG_RANGE, max(1, length // 5)),
            contact_precision(score, contact, valid, index, LONG_RANGE, length))


@dataclass(frozen=True)
class CoevolutionBaseline:
    """Co-evolution scores of an A3M placed on the prediction's residues.

    Attributes:
        depth: sequences in the A3M (query included).
        neff: Σ of the feature stage's sequence weights (80% identity clusters).
        covariance: float64 ``[L, L]`` APC covariance norm on prediction indices (0 where unmapped).
        mutual_information: float64 ``[L, L]`` APC mutual information, likewise.
        mapped: bool ``[L]``: the prediction residue faces an A3M match column.
    """

    depth: int
    neff: float
    covariance: np.ndarray
    mutual_information: np.ndarray
    mapped: np.ndarray


def coevolution_baseline(a3m: str | Path, sequence: str) -> CoevolutionBaseline:
    """APC co-evolution of ``a3m`` (query first) mapped onto the residues of ``sequence`` (the prediction).

    The A3M query's match columns are matched to ``sequence`` by :func:`~workflow_lib.evaluate.align.match_residues`
    (the identity when they are equal). Bad files, and an A3M of another protein (query identity < 50%), raise
    :class:`~workflow_lib.errors.InputError`.
    """
    alignment = read_a3m(a3m)
    features = msa_features(alignment, max_seqs=1)
    query = decode(np.asarray(alignment.matches)[0])
    residue_columns = np.array([k for k, letter in enumerate(query) if letter != "-"], dtype=np.int64)
    match = match_residues(sequence, query.replace("-", ""))
    if match.aligned == 0 or match.identity < MIN_QUERY_IDENTITY:
        raise InputError(f"the A3M query matches the prediction in {match.identical} of {len(sequence)} residues: "
                         f"not the predicted protein's MSA", path=a3m, record=alignment.names[0])
    length = len(sequence)
    covariance = np.zeros((length, length))
    mutual_information = np.zeros((length, length))
    pairs = np.ix_(match.first, match.first)
    columns = np.ix_(residue_columns[match.second], residue_columns[match.second])
    coevolution = features["coevolution"].astype(np.float64)
    covariance[pairs] = coevolution[..., 0][columns]
    mutual_information[pairs] = coevolution[..., 1][columns]
    mapped = np.zeros(length, dtype=bool)
    mapped[match.first] = True
    return CoevolutionBaseline(int(alignment.depth), float(features["neff"]), covariance, mutual_information,
                               mapped)
