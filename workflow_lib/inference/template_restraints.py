"""Template restraints for the fold: the top template's Cβ distances mixed into the predicted distogram.

Comparative modelling builds its spatial restraints from the template's own distances, trusted more the closer
the template is to the query (MODELLER: Šali & Blundell 1993, J. Mol. Biol. 234:779; identity-dependent
restraint widths). The network reads the same template, but its distogram stays broad where the template is
close: on validation chains with a template at least 30% identical the folded backbone was below what the template
gives (benchmarks/RESULTS.md, "Structure prediction: template restraints in the fold (validation chains)").

Here the fold's distogram is, for every pair both of whose residues are placed on the feature file's first
template (its best hit), ``(1 − w) P_ij + w T_ij``: ``P`` the network's distribution over the distogram bins,
``T`` the template's Cβ–Cβ distance bin (the feature file's ``template_pair`` one-hot, the same bins) spread
over its two neighbouring bins (weights 1/4, 1/2, 1/4: about ±0.5 Å), and
``w = weight · clip((identity − lo) / (hi − lo), 0, 1)`` with ``identity`` the template's identical residues over
the query's length and ``(lo, hi)`` = :data:`IDENTITY_RAMP`. A template under 20% identical leaves the
distogram as it is; one over 60% gets the full ``weight``. ``weight`` below 1 keeps some of the network's
distribution on every pair, so that a template's local errors can be outvoted (a weight of 1 folded worse).

Pairs the network did not predict (no crop held both residues: ``crop_pairs: neighbours``, or ``contacts`` where
the template keeps two segments apart) are left out of the fold. Where the template places such a pair it is
restrained too (:func:`template_restraints`), with ``(1 − w) R + w T``: ``R`` the mean predicted distribution of
the predicted pairs of the same sequence separation (the fold's reference state, so the ``1 − w`` part adds no
force of its own). So a chain of neighbouring crops keeps the template's long-range distances without a network
pass for every pair of segments the template puts in contact.

The pLDDT of the folded backbone stays the network's (its distogram's expected lDDT), the quantity its
calibration was fitted on; the written distogram stays the network's too.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from workflow_lib.schemas.features import TEMPLATE_1D_CHANNELS, TEMPLATE_PAIR_CHANNELS, channel_slices

IDENTITY_RAMP = (0.2, 0.6)
"""Template identity over the query's length at which the restraint weight starts to rise, and where it is full."""

SPREAD = (0.25, 0.5, 0.25)
"""The template's distance bin and its two neighbours (0.5 Å bins)."""

_PAIR = channel_slices(TEMPLATE_PAIR_CHANNELS)
_ONE_D = channel_slices(TEMPLATE_1D_CHANNELS)


def template_identity(features: Mapping[str, np.ndarray], template: int = 0) -> float:
    """Identical residues of template ``template`` over the query's length (0 without that template)."""
    mask = features.get("template_mask")
    if mask is None or template >= len(mask) or not bool(mask[template]):
        return 0.0
    one_d = features["template_1d"][template]
    return float(one_d[:, _ONE_D["identity"].start].sum()) / max(one_d.shape[0], 1)


def restraint_weight(identity: float, weight: float) -> float:
    """``weight`` scaled by where ``identity`` lies on :data:`IDENTITY_RAMP` (0 below it, all of it above)."""
    lo, hi = IDENTITY_RAMP
    return float(weight) * float(np.clip((identity - lo) / (hi - lo), 0.0, 1.0))


def spread_bins(onehot: np.ndarray) -> np.ndarray:
    """The one-hot over the last axis spread over the neighbouring bins by :data:`SPREAD` (edges keep their
    share: the result still sums to 1)."""
    left, centre, right = SPREAD
    out = onehot * centre
    out[..., 1:] += left * onehot[..., :-1]
    out[..., :-1] += right * onehot[..., 1:]
    out[..., 0] += left * onehot[..., 0]
    out[..., -1] += right * onehot[..., -1]
    return out


def restrained_distogram(dist_probs: np.ndarray, features: Mapping[str, np.ndarray], weight: float
                         ) -> np.ndarray:
    """The distogram the fold restrains to: ``dist_probs`` ``[L, L, bins]`` with the first template's distances
    mixed in on the pairs it places (module docstring); ``dist_probs`` itself when the weight comes out 0."""
    w = restraint_weight(template_identity(features), weight)
    if w <= 0.0:
        return dist_probs
    pair = features["template_pair"][0]
    bins = pair[..., _PAIR["dist"]]
    if bins.shape != dist_probs.shape:
        raise ValueError(f"template distance bins {bins.shape} do not match the distogram {dist_probs.shape}")
    placed = pair[..., _PAIR["pair_mask"].start] > 0            # only these pairs are copied and mixed
    mixed = dist_probs.copy()
    mixed[placed] = (1.0 - w) * mixed[placed] + w * spread_bins(bins[placed].astype(dist_probs.dtype))
    return mixed


SEPARATION_BANDS = ((3, 12), (12, 24), (24, None))
"""Sequence separations whose predicted pairs give the reference distribution of an unpredicted pair (the fold's
bands, :func:`workflow_lib.inference.fold.restraint_potential`)."""


def template_restraints(dist_probs: np.ndarray, features: Mapping[str, np.ndarray], weight: float,
                        covered: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """``(distogram, covered)`` for the fold: :func:`restrained_distogram` on the predicted pairs and, where
    ``covered`` (bool ``[L, L]``: the pairs the network predicted; None: all) leaves pairs out that the first
    template places, those pairs restrained to ``(1 − w) R + w T`` (module docstring) and added to ``covered``.
    Unchanged when the weight comes out 0 or every pair was predicted."""
    mixed = restrained_distogram(dist_probs, features, weight)
    w = restraint_weight(template_identity(features), weight)
    if w <= 0.0 or covered is None or covered.all():
        return mixed, covered
    pair = features["template_pair"][0]
    fill = (pair[..., _PAIR["pair_mask"].start] > 0) & ~covered
    length = dist_probs.shape[0]
    separation = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
    if mixed is dist_probs:
        mixed = dist_probs.copy()
    template = spread_bins(pair[..., _PAIR["dist"]][fill].astype(dist_probs.dtype))
    band_of = np.full(separation[fill].shape, -1)
    for band, (low, high) in enumerate(SEPARATION_BANDS):
        band_of[(separation[fill] >= low) & ((separation[fill] < high) if high else True)] = band
    filled = np.zeros_like(template)
    for band, (low, high) in enumerate(SEPARATION_BANDS):
        rows = band_of == band
        if not rows.any():
            continue
        known = covered & (separation >= low) & ((separation < high) if high else True)
        if not known.any():
            known = covered & (separation >= SEPARATION_BANDS[0][0])
        if not known.any():
            continue
        reference = (np.tensordot(known.astype(dist_probs.dtype), dist_probs, axes=([0, 1], [0, 1]))
                     / known.sum())          # the band's mean distribution, without an [n, bins] copy
        filled[rows] = (1.0 - w) * reference + w * template[rows]
    keep = filled.sum(axis=-1) > 0               # pairs closer than the fold restrains, or with no reference, stay out
    indices = np.argwhere(fill)[keep]
    mixed[indices[:, 0], indices[:, 1]] = filled[keep]
    grown = covered.copy()
    grown[indices[:, 0], indices[:, 1]] = True
    return mixed, grown
