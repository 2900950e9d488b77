"""Crop-and-stitch: how a protein longer than the network's window is cut into crops and put back together.

The network never sees more than ``window`` residues at once, so the memory of a network call stays bounded
however long the protein; only the stitched pair maps grow with ``L²``.

Crop-and-stitch (:func:`crop_plan`, :func:`stitch_pair`, :func:`stitch_backbone`), for ``L > window``, after
RoseTTAFold's ``predict_e2e.py``, which for L > 300 runs every pair of 150-residue windows (shift 75) and
averages the 6D probabilities by pair counts. trackfold's default window is 128
(:data:`~workflow_lib.inference.predict.DEFAULT_WINDOW`: the checkpoint's training crop; with the fold from the
distogram, better than 300 and than one pass over the whole chain: benchmarks/RESULTS.md, "Structure prediction:
the crop-and-stitch window (validation chains)"). Differences: segments here do not overlap each
other (shift = segment: at window 300, 21 crops at L = 1000 against RoseTTAFold's 78; at 128, 120), and
RoseTTAFold re-runs its structure module on the averaged features of the whole chain, which this network has no
entry point for, so coordinates are stitched instead:

* The chain is cut into segments of ``S = window // 2`` residues starting at 0, S, 2S, ...; the last one is
  moved back to end at residue L (it then overlaps its neighbour).
* Every pair of segments ``i < j`` is one crop of at most ``window`` residues (their union, sorted). Every
  residue pair ``(a, b)`` lies in at least one crop, so the 6D map is covered; a crop's residue numbers are
  shifted to start at 0, as the training crops are, and keep their true differences (the relative-position
  encoding sees the real separation of the two segments). In a crop, MSA rows with half or
  more gaps in the crop's columns are dropped, as RoseTTAFold does, before the ``max_msa`` cap.
* With ``predict.crop_pairs: contacts`` only some of the crops of segments that are not neighbours run: those
  whose two segments a template of the protein puts in contact (:func:`contact_segment_pairs`); with
  ``neighbours``, none. The neighbouring ones always run. The network calls then grow about as L / 64 instead
  of (L / 64)² / 2, and the residue pairs no crop holds are left to the fold's chain and clash terms (no
  distance restraint).
* 6D probabilities (softmax of each crop's logits) are averaged: ``P[a, b] = mean over the crops holding a
  and b`` (:func:`stitch_pair`). The exported pair embedding is averaged the same way.
* Coordinates come from the *contiguous* crops ``(i, i + 1)``, which chain along the sequence and overlap
  their neighbour by one segment: each is superposed (Kabsch on N, CA, C) onto the residues already placed,
  and every residue keeps the N, CA, C of the crop in which it is most central, i.e. farthest from a crop end
  (:func:`stitch_backbone`). Averaging the superposed copies instead was tried and rejected: where windows
  disagree it shrinks bonds (N-CA down to 1.0 Å with an untrained model); choosing one crop per residue keeps
  the network's residue geometry, and seams fall in the middle of the overlaps. pLDDT and the single
  embedding come from the same chosen crop. O and Cβ are derived afterwards from N, CA, C. The relative
  placement of segments that never share a contiguous crop comes only through this chain of superpositions
  (domain packing beyond ``window`` residues is not refined against the stitched distogram).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from workflow_lib.errors import InputError
from workflow_lib.structure.metrics import kabsch

MIN_WINDOW = 16
"""Smallest window (residues per network call) a prediction accepts."""


@dataclass(frozen=True)
class Crop:
    """Residue positions ``[n]`` (sorted, 0-based) of one network call; ``contiguous`` crops give coordinates."""

    indices: np.ndarray
    contiguous: bool


def segment_starts(length: int, window: int) -> list[int]:
    """First residue of each ``window // 2``-residue segment of a protein longer than the window (module
    docstring): 0, S, 2S, ... and the last one moved back to end at residue ``length``."""
    segment = window // 2
    return list(range(0, length - segment, segment)) + [length - segment]


def crop_plan(length: int, window: int, segment_pairs: np.ndarray | None = None) -> list[Crop]:
    """The crops of a protein of ``length`` residues (module docstring); one crop of all when it fits.

    ``segment_pairs`` (bool ``[n, n]`` over the :func:`segment_starts`) limits the crops of segments that are
    not neighbours to the pairs it marks (:func:`contact_segment_pairs`); the contiguous crops always run, so
    the backbone is always chained. None: every pair of segments.
    """
    if length < 1:
        raise InputError("predict: a protein needs at least one residue")
    if window < MIN_WINDOW:
        raise InputError(f"predict: window must be at least {MIN_WINDOW}, got {window}")
    if length <= window:
        return [Crop(np.arange(length), True)]
    segment = window // 2
    starts = segment_starts(length, window)
    if segment_pairs is not None and np.shape(segment_pairs) != (len(starts), len(starts)):
        raise ValueError(f"segment_pairs must be [{len(starts)}, {len(starts)}] for {len(starts)} segments, "
                         f"got {np.shape(segment_pairs)}")
    crops = []
    for i, start_i in enumerate(starts):
        for j in range(i + 1, len(starts)):
            if j > i + 1 and segment_pairs is not None and not (segment_pairs[i, j] or segment_pairs[j, i]):
                continue
            indices = np.union1d(np.arange(start_i, start_i + segment), np.arange(starts[j], starts[j] + segment))
            crops.append(Crop(indices, contiguous=(j == i + 1)))
    return crops


def contact_segment_pairs(length: int, window: int, contacts: np.ndarray, min_contacts: int = 1) -> np.ndarray:
    """Bool ``[n, n]``: the pairs of :func:`segment_starts` segments holding at least ``min_contacts`` residue
    pairs marked in ``contacts`` (bool ``[L, L]``, e.g. Cβ–Cβ under 8 Å in a template): ``crop_plan``'s
    ``segment_pairs`` for ``crop_pairs: contacts``."""
    contacts = np.asarray(contacts, dtype=bool)
    if contacts.shape != (length, length):
        raise ValueError(f"contacts must be [{length}, {length}], got {contacts.shape}")
    segment = window // 2
    starts = segment_starts(length, window)
    member = np.zeros((len(starts), length), dtype=np.float32)
    for k, start in enumerate(starts):
        member[k, start:start + segment] = 1.0
    touching = member @ contacts.astype(np.float32) @ member.T
    return touching >= max(min_contacts, 1)


class PairMean:
    """Running mean of pair arrays over crops: :meth:`add` ``[n, n, C]`` at positions ``[n]``, then :meth:`mean`.

    Sums are float32 (float64 when a float64 array is added first); only the sums and one count matrix are
    kept, so crops can be dropped as soon as they are added.
    """

    def __init__(self, length: int) -> None:
        self.length = length
        self.total: dict[str, np.ndarray] = {}
        self.count = np.zeros((length, length), dtype=np.int32)

    def add(self, indices: np.ndarray, values: Mapping[str, np.ndarray]) -> None:
        grid = np.ix_(indices, indices)
        for key, value in values.items():
            if key not in self.total:
                dtype = np.result_type(np.float32, value.dtype)
                self.total[key] = np.zeros((self.length, self.length, value.shape[-1]), dtype=dtype)
            self.total[key][grid] += value
        self.count[grid] += 1

    def mean(self, *, partial: bool = False) -> dict[str, np.ndarray]:
        """The means (the sums are divided in place); a pair no crop covered is a :class:`ValueError`, or with
        ``partial`` stays zero (:attr:`covered` tells which)."""
        if not partial and (self.count == 0).any():
            raise ValueError("crops do not cover every residue pair")
        for total in self.total.values():
            total /= np.maximum(self.count, 1)[..., None]
        return self.total

    @property
    def covered(self) -> np.ndarray:
        """Bool ``[L, L]``: the pairs at least one crop held."""
        return self.count > 0


def stitch_pair(length: int, crops: Sequence[np.ndarray], values: Sequence[np.ndarray]) -> np.ndarray:
    """Mean over crops of pair arrays: ``values[k] [n_k, n_k, C]`` at positions ``crops[k]`` -> ``[L, L, C]``.

    Every pair must be covered by some crop (else :class:`ValueError`).
    """
    accumulator = PairMean(length)
    for indices, value in zip(crops, values):
        accumulator.add(indices, {"value": value})
    return accumulator.mean()["value"]


def centrality(n: int) -> np.ndarray:
    """Distance of each of ``n`` crop positions to the nearer crop end (0 at both ends)."""
    positions = np.arange(n)
    return np.minimum(positions, n - 1 - positions)


def stitch_backbone(length: int, crops: Sequence[np.ndarray], coords: Sequence[np.ndarray],
                    per_residue: Sequence[Sequence[np.ndarray]] = ()) -> tuple[np.ndarray, list[np.ndarray]]:
    """Chain overlapping crops into one backbone (module docstring).

    ``crops[k]`` positions ``[n_k]``, each overlapping the crops before it by >= 3 residues (except the first);
    ``coords[k] [n_k, 3, 3]`` N, CA, C. Crop k is superposed (Kabsch on N, CA, C) onto the residues already
    placed; a residue takes its coordinates from the crop in which it is most central (:func:`centrality`;
    the earlier crop on ties). Returns float64 ``[L, 3, 3]`` in the first crop's frame and, for each list of
    per-crop arrays in ``per_residue`` (``[n_k, ...]``), the values of the same chosen crops.
    """
    placed = np.full((length, 3, 3), np.nan, dtype=np.float64)
    best = np.full(length, -1, dtype=np.int64)
    source = np.full(length, -1, dtype=np.int64)
    for k, (indices, xyz) in enumerate(zip(crops, coords)):
        xyz = np.asarray(xyz, dtype=np.float64)
        have = best[indices] >= 0
        if k > 0:
            if have.sum() < 3:
                raise ValueError(f"crop {k} overlaps the crops before it by fewer than 3 residues")
            rotation, translation = kabsch(xyz[have].reshape(-1, 3), placed[indices[have]].reshape(-1, 3))
            xyz = xyz @ rotation.T + translation
        score = centrality(len(indices))
        take = score > best[indices]
        placed[indices[take]] = xyz[take]
        best[indices[take]] = score[take]
        source[indices[take]] = k
    if (source < 0).any():
        raise ValueError("crops do not cover every residue")
    chosen = []
    for arrays in per_residue:
        out = np.zeros((length, *np.shape(arrays[0])[1:]), dtype=np.result_type(*[a.dtype for a in arrays]))
        for k, (indices, value) in enumerate(zip(crops, arrays)):
            mine = source[indices] == k
            out[indices[mine]] = value[mine]
        chosen.append(out)
    return placed, chosen
