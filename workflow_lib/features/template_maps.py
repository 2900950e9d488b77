"""The template keys of a feature file, read in either layout: the network's pair maps, the fold's distances and Cα.

A feature file (layout 6, :data:`~workflow_lib.schemas.features.FEATURES`) keeps each template's aligned atoms,
``template_atoms`` ``[T, L, 4, 3]``: N, CA, C and Cβ of the template residue placed on each query column (the
file's Cβ, NaN where it has none), NaN rows where none is placed (:mod:`workflow_lib.features.templates`). The
6D maps of trRosetta (Yang et al. 2020, PNAS 117:1496) that the network reads are made from them for the columns
one network call reads: :func:`workflow_lib.structure.pair_geometry` (the virtual Cβ where the file has none) and
:func:`~workflow_lib.structure.bin_pair_geometry` on the placed residues give every placed pair (i, j) (i = j
included, which is "no contact" by definition) one-hots of its d/ω/θ/φ bins and ``pair_mask`` 1; every other
pair is all zeros. Every value is a function of the pair alone, so the maps of a crop are the crop of the whole
query's maps: they are never made for the whole query, whose maps took 3.6 GB for a 2,626-residue protein with
two templates.

Feature dicts that hold the maps themselves (training crops, files of layout 5,
:data:`~workflow_lib.schemas.features.FEATURES_V5`, maps given by hand) are read as they are. This module imports
no template search, so inference reads the templates without loading it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from workflow_lib.schemas.features import C_TEMPLATE_PAIR, TEMPLATE_PAIR_CHANNELS, channel_slices
from workflow_lib.structure.geometry import bin_pair_geometry, cb_distance_bins, pair_geometry

PAIR = channel_slices(TEMPLATE_PAIR_CHANNELS)





def pair_maps(atoms: np.ndarray, dtype: np.dtype | type = np.float16) -> np.ndarray:
    """``dtype`` (float16: the layout's; float32: what the network takes, 0 and 1 either way) ``[T, n, n, 131]``
    template pair maps (:data:`TEMPLATE_PAIR_CHANNELS`) from ``template_atoms``
    ``[T, n, 4, 3]`` (the module docstring): a residue is placed where its CA is present; every pair
    of placed residues gets its d/ω/θ/φ one-hots and ``pair_mask`` 1, every other pair zeros. The maps of a crop
    are the crop of the whole query's maps, so they are made only for the columns a network call reads.

    Each template's maps are written in place into the one ``[T, n, n, C]`` array (``T·n²·C`` float16: 128 MB at
    n = 495, T = 2), never built apart and stacked."""
    atoms = np.asarray(atoms)
    count, length = atoms.shape[:2]
    maps = np.zeros((count, length, length, C_TEMPLATE_PAIR), dtype=dtype)
    for t in range(count):
        local = np.flatnonzero(np.isfinite(atoms[t, :, 1, 0]))
        if not local.size:
            continue
        xyz = atoms[t, local].astype(np.float64)
        bins = bin_pair_geometry(pair_geometry(xyz[:, 0], xyz[:, 1], xyz[:, 2], xyz[:, 3]))
        cells = maps[t].reshape(length * length, C_TEMPLATE_PAIR)
        placed_pairs = (local[:, None] * length + local[None, :]).ravel()
        for key in ("dist", "omega", "theta", "phi"):
            cells[placed_pairs, PAIR[key].start + bins[key].astype(np.intp).ravel()] = 1.0
        cells[placed_pairs, PAIR["pair_mask"].start] = 1.0
    return maps



def template_pair(features: Mapping[str, np.ndarray], columns: np.ndarray | None = None, *,
                  dtype: np.dtype | type = np.float16) -> np.ndarray:
    """``[T, n, n, 131]`` (``dtype``): the template pair maps of the query ``columns`` (all: None): cut from
    ``template_pair`` where the features hold the maps themselves (training crops, feature files of layout 5,
    maps given by hand), else made from ``template_atoms`` (:func:`pair_maps`)."""
    if "template_pair" in features:
        maps = features["template_pair"]
        if columns is not None:
            index = np.asarray(columns, dtype=np.intp)
            maps = maps[:, index][:, :, index]
        return maps.astype(dtype, copy=False)
    atoms = features["template_atoms"]
    return pair_maps(atoms if columns is None else atoms[:, np.asarray(columns, dtype=np.intp)], dtype)


def template_distance_bins(features: Mapping[str, np.ndarray], t: int) -> tuple[np.ndarray, np.ndarray]:
    """Template ``t``'s Cβ–Cβ distance classes (uint8 ``[L, L]``, the ``dist`` one-hot's index; meaningful
    where placed) and its placed pairs (bool ``[L, L]``: a distance class set), from the maps where the features hold
    them (as :func:`template_pair`), else from ``template_atoms`` without making the angles' maps."""
    if "template_pair" in features:
        dist = features["template_pair"][t][..., PAIR["dist"]]
        if dist.dtype == np.float16:        # 0/1 one-hots: the bits of non-negative halves order as their values
            dist = dist.view(np.uint16)
        bins = np.argmax(dist, axis=-1)
        placed = np.take_along_axis(dist, bins[..., None], axis=-1)[..., 0] > 0
        return bins.astype(np.uint8), placed
    atoms = features["template_atoms"][t]
    placed = np.isfinite(atoms[:, 1, 0])
    local = np.flatnonzero(placed)
    bins = np.zeros((placed.size, placed.size), dtype=np.uint8)
    if local.size:
        xyz = atoms[local].astype(np.float64)
        bins[np.ix_(local, local)] = cb_distance_bins(xyz[:, 0], xyz[:, 1], xyz[:, 2], xyz[:, 3])
    return bins, placed[:, None] & placed[None, :]


def template_ca(features: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """float32 ``[T, L, 3]``: the Cα of the template residue placed on each column, NaN where none (the fold's
    template anchors): ``template_ca`` where the features hold it (layout 5), else ``template_atoms``' CA; None
    for a feature file of layout 5 written before it carried them."""
    if "template_ca" in features:
        return features["template_ca"]
    if "template_atoms" in features and "template_pair" not in features:
        return features["template_atoms"][:, :, 1]
    return None
