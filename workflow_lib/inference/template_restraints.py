"""Template restraints for the fold: the top template's Cβ distances mixed into the predicted distogram.

Comparative modelling builds its spatial restraints from the template's own distances, trusted more the closer
the template is to the query (MODELLER: Šali & Blundell 1993, J. Mol. Biol. 234:779; identity-dependent
restraint widths). The network reads the same template, but its distogram stays broad where the template is
close: on validation chains with a template at least 30% identical the folded backbone was below what the template
gives (benchmarks/RESULTS.md, "Structure prediction: template restraints in the fold (validation chains)").

Here the fold's distogram is, for every pair both of whose residues are placed on the feature file's first
template (its best hit), ``(1 − w) P_ij + w T_ij``: ``P`` the network's distribution over the distogram bins,
``T`` the template's Cβ–Cβ distance bin (from the feature file's ``template_atoms``, the bins of the network's
template maps) spread
over its two neighbouring bins (weights 1/4, 1/2, 1/4: about ±0.5 Å), and
``w = weight · clip((identity − lo) / (hi − lo), 0, 1)`` with ``identity`` the template's identical residues over
the query's length and ``(lo, hi)`` = :data:`IDENTITY_RAMP`. A template under 20% identical leaves the
distogram as it is; one over 60% gets the full ``weight``. ``weight`` below 1 keeps some of the network's
distribution on every pair, so that a template's local errors can be outvoted (a weight of 1 folded worse).

**Anchors** (:func:`fold_anchors`). Distogram bins are 0.5 Å wide, so restraints built from them cannot hold a
close template's distances to better than about a quarter of an Ångström, and lDDT-Cα's finest threshold is
0.5 Å. The fold therefore also takes the template's own Cα–Cα distances, for every pair of residues it places
within 15 Å of each other, as a bounded well (:class:`~workflow_lib.inference.fold.CaAnchors`), weighted by
``predict.template_anchor`` scaled by the same identity ramp; the template's coordinates also decide the fold's
hand. This is what comparative modelling does with a close template, copying its geometry (MODELLER's
restraints, ProMod3's copied coordinates), while the network's distogram still decides the pairs the template
does not place and outvotes its local errors.

The pLDDT of the folded backbone stays the network's (its distogram's expected lDDT), the quantity its
calibration was fitted on; the written distogram stays the network's too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from workflow_lib.features.template_maps import template_ca, template_distance_bins
from workflow_lib.inference.fold import CaAnchors, template_anchors
from workflow_lib.schemas.features import TEMPLATE_1D_CHANNELS, TEMPLATE_PAIR_CHANNELS, channel_slices

LOG = logging.getLogger(__name__)

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
    bins, placed = template_distance_bins(features, 0)      # only the placed pairs are copied and mixed
    n_bins = _PAIR["dist"].stop - _PAIR["dist"].start
    if bins.shape + (n_bins,) != dist_probs.shape:
        raise ValueError(f"template distance bins {bins.shape + (n_bins,)} do not match the distogram "
                         f"{dist_probs.shape}")
    chosen = bins[placed].astype(np.intp)
    onehot = np.zeros((chosen.size, n_bins), dtype=dist_probs.dtype)
    onehot[np.arange(chosen.size), chosen] = 1.0
    mixed = dist_probs.copy()
    mixed[placed] = (1.0 - w) * mixed[placed] + w * spread_bins(onehot)
    return mixed


def fold_anchors(features: Mapping[str, np.ndarray], weight: float) -> CaAnchors | None:
    """The first template's Cα anchors for the fold (:func:`~workflow_lib.inference.fold.template_anchors`):
    every pair of residues it places within 15 Å of each other held to its own Cα distance, with weight
    ``weight`` scaled by the template's identity as the restraints are (:func:`restraint_weight`). None without a
    template, at weight 0, or for a layout-5 feature file written before it carried ``template_ca``."""
    w = restraint_weight(template_identity(features), weight)
    coords = template_ca(features)
    if w > 0.0 and coords is None:
        LOG.warning("a feature file without template_ca (written before it existed) folds without template "
                    "anchors: rerun its features stage (snakemake --forcerun features) for them")
    if w <= 0.0 or coords is None or not len(coords):
        return None
    return template_anchors(coords[0], w)
