"""Template features: each hit's 6D maps and 1D scores placed on the query's residue grid through its alignment.

The 6D maps of trRosetta (Yang et al. 2020, PNAS 117:1496), templates found as HHsearch finds them (Söding
2005, Bioinformatics 21:951);
channel layouts in :mod:`workflow_lib.schemas.features` (:data:`TEMPLATE_PAIR_CHANNELS`,
:data:`TEMPLATE_1D_CHANNELS`).

For hit t (rows of a :data:`~workflow_lib.schemas.templates.TEMPLATE_HITS` table in rank order, at most
``max_templates``):

1. the alignment's match steps give pairs (query column i, template profile position p)
   (:func:`workflow_lib.templates.search.aligned_pairs`);
2. the template's ``residue_map`` takes p to an observed residue r (or none: an unresolved SEQRES position);
3. a query column is *placed* when r exists and the residue has N, CA and C, or CA and CB (so that its Cβ, the
   file's or the virtual one of :func:`workflow_lib.structure.fill_cb`, exists);
4. the feature file keeps the placed residues' N, CA, C and Cβ (``template_atoms``, NaN rows elsewhere); for the
   columns a network call reads, :func:`workflow_lib.structure.pair_geometry` (file Cβ, virtual where missing)
   and :func:`~workflow_lib.structure.bin_pair_geometry` on the placed residues give, for every placed pair
   (i, j) (i = j included, which is "no contact" by definition), one-hots of the d/ω/θ/φ bins and ``pair_mask``
   1; every other pair is all zeros (mask 0) (:mod:`workflow_lib.features.template_maps`). The maps of a crop are
   the crop of the whole query's maps, so they are never made for the whole query;
5. 1D, per query column: ``aligned`` (matched to a template position, with or without coordinates),
   ``identity`` and ``similarity`` (BLAST positive) of the residue pair, ``confidence`` = the hit's
   ``significance`` exp(−E) on aligned columns, the one-hot of the template residue (gap where unaligned),
   and the template's DSSP state H/E/C where the column is placed and DSSP assigned it (zeros otherwise).

Empty slots are never padded in: T is the number of templates actually used (0 allowed), ``template_mask``
all True. Deterministic: a pure function of the hits table, the database and the query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.errors import InputError
from workflow_lib.schemas.features import (
    C_TEMPLATE_1D,
    SS_STATES,
    TEMPLATE_1D_CHANNELS,
    channel_slices,
)
from workflow_lib.schemas.io import read_frame
from workflow_lib.schemas.templates import TEMPLATE_HITS
from workflow_lib.seqio.alphabet import GAP_CODE, encode
from workflow_lib.features.template_maps import pair_maps
from workflow_lib.templates.database import TemplateDatabase, TemplateStructure
from workflow_lib.templates.search import aligned_pairs, pair_scores

DEFAULT_MAX_TEMPLATES = 2
"""Best template hits turned into template features: the shipped checkpoints were trained with up to 2 per crop
(``features.max_templates`` in the config schema, ``trackfold features --max-templates``)."""
ONE_D = channel_slices(TEMPLATE_1D_CHANNELS)
_N, _CA, _C, _O, _CB = range(5)
TEMPLATE_ATOMS = (_N, _CA, _C, _CB)
"""The atoms of ``template_atoms``, in order (N, CA, C, CB): what the 6D maps are computed from."""


def placeable(structure: TemplateStructure) -> np.ndarray:
    """bool ``[R]``: the residue has a Cβ (CA and CB in the file, or N, CA, C for the virtual one)."""
    mask = structure.atom_mask
    return (mask[:, _CA] & mask[:, _CB]) | (mask[:, _N] & mask[:, _CA] & mask[:, _C])


def _check_hit(row: pd.Series, structure: TemplateStructure, length: int, where: str | Path) -> np.ndarray:
    if int(row["qlen"]) != length:
        raise InputError(f"hit on {row['template']} is for a query of {int(row['qlen'])} columns, the A3M has "
                         f"{length}", path=where, record=str(row["template"]))
    if int(row["tlen"]) != len(structure.sequence):
        raise InputError(f"hit on {row['template']} has template length {int(row['tlen'])}, the template "
                         f"database has {len(structure.sequence)} (another database?)", path=where,
                         record=str(row["template"]))
    try:
        pairs = aligned_pairs(str(row["alignment"]), int(row["qstart"]) - 1, int(row["tstart"]) - 1)
    except ValueError as error:
        raise InputError(str(error), path=where, record=str(row["template"])) from None
    if pairs.size and (pairs[:, 0].max() >= length or pairs[:, 1].max() >= len(structure.sequence)
                       or pairs.min() < 0):
        raise InputError("alignment runs outside the query or the template", path=where,
                         record=str(row["template"]))
    return pairs


@dataclass(frozen=True)
class TemplateColumns:
    """One template hit laid on the query's ``L`` columns: everything its features need, for any crop.

    ``coords [L, 5, 3]`` float32 N, CA, C, O, CB of the template residue placed on each column (NaN where none;
    CB virtual where the file had none), ``placed [L]`` (steps 2–3), ``aligned [L]``, ``identical [L]`` and
    ``positive [L]`` (step 5), ``codes [L]`` int8 template residue codes (gap where unaligned), ``ss [L]`` int8
    index into :data:`~workflow_lib.schemas.features.SS_STATES` where placed and assigned (−1 elsewhere),
    ``confidence`` the hit's significance and ``template`` its ID.
    """

    template: str
    coords: np.ndarray
    placed: np.ndarray
    aligned: np.ndarray
    identical: np.ndarray
    positive: np.ndarray
    codes: np.ndarray
    ss: np.ndarray
    confidence: float


def hit_columns(row: pd.Series, database: TemplateDatabase, query_codes: np.ndarray, *,
                where: str | Path = "") -> TemplateColumns:
    """:class:`TemplateColumns` of one hits-table row (steps 1–3 and the per-column parts of step 5)."""
    query_codes = np.asarray(query_codes)
    length = query_codes.shape[0]
    structure = database.structure(database.index(str(row["template"]), where=where))
    pairs = _check_hit(row, structure, length, where)
    residues = structure.residue_map[pairs[:, 1]].astype(np.intp) if pairs.size else np.zeros(0, np.intp)
    can_place = placeable(structure)
    placed_pairs = (residues >= 0) & can_place[np.maximum(residues, 0)]
    columns = pairs[:, 0].astype(np.intp)
    template_codes = encode(structure.sequence)
    identical_pairs, positive_pairs = pair_scores(query_codes, template_codes, pairs)
    coords = np.full((length, 5, 3), np.nan, dtype=np.float32)
    coords[columns[placed_pairs]] = structure.coords[residues[placed_pairs]]
    placed = np.zeros(length, dtype=bool)
    placed[columns[placed_pairs]] = True
    aligned = np.zeros(length, dtype=bool)
    aligned[columns] = True
    identical = np.zeros(length, dtype=bool)
    identical[columns] = identical_pairs
    positive = np.zeros(length, dtype=bool)
    positive[columns] = positive_pairs
    codes = np.full(length, GAP_CODE, dtype=np.int8)
    codes[columns] = template_codes[pairs[:, 1]]
    ss = np.full(length, -1, dtype=np.int8)
    ss_letters = np.array(list(structure.ss3), dtype="<U1") if structure.ss3 else np.zeros(0, dtype="<U1")
    for k, state in enumerate(SS_STATES):
        hit = placed_pairs.copy()
        hit[hit] = ss_letters[residues[hit]] == state
        ss[columns[hit]] = k
    return TemplateColumns(str(row["template"]), coords, placed, aligned, identical, positive, codes, ss,
                           float(row["significance"]))


def columns_atoms(hits: Sequence[TemplateColumns], index: np.ndarray) -> np.ndarray:
    """float32 ``[T, n, 4, 3]``: N, CA, C, CB of the template residue placed on each query column of ``index``
    (the file's atoms: a missing Cβ stays NaN and the maps use the virtual one), NaN rows where none is placed."""
    out = np.full((len(hits), len(index), len(TEMPLATE_ATOMS), 3), np.nan, dtype=np.float32)
    for t, hit in enumerate(hits):
        placed = hit.placed[index]
        out[t, placed] = hit.coords[index[placed]][:, TEMPLATE_ATOMS]
    return out


def columns_one_d(hits: Sequence[TemplateColumns], index: np.ndarray) -> np.ndarray:
    """float32 ``[T, n, 29]``: the 1D template features (step 5 of the module docstring) on ``index``."""
    length = len(index)
    one_d = np.zeros((len(hits), length, C_TEMPLATE_1D), dtype=np.float32)
    for t, hit in enumerate(hits):
        out = one_d[t]
        aligned = hit.aligned[index]
        out[:, ONE_D["aligned"].start] = aligned
        out[:, ONE_D["identity"].start] = hit.identical[index]
        out[:, ONE_D["similarity"].start] = hit.positive[index]
        out[aligned, ONE_D["confidence"].start] = hit.confidence
        out[np.arange(length), ONE_D["sequence"].start + hit.codes[index].astype(np.intp)] = 1.0
        ss = hit.ss[index]
        known = ss >= 0
        out[np.flatnonzero(known), ONE_D["secondary_structure"].start + ss[known].astype(np.intp)] = 1.0
    return one_d


def columns_features(hits: Sequence[TemplateColumns], positions: np.ndarray | None = None, *,
                     atoms: bool = False) -> dict[str, np.ndarray]:
    """``template_pair`` / ``template_1d`` / ``template_mask`` of ``hits`` on the query ``positions`` (all
    columns: None), e.g. a training crop: the features of a crop are the crop of the whole query's features.
    With ``atoms``, ``template_atoms`` (:func:`columns_atoms`) instead of the maps: the feature file's form."""
    count = len(hits)
    if positions is not None:
        index = np.asarray(positions, dtype=np.intp)
    else:
        index = np.arange(hits[0].placed.shape[0] if count else 0)
    coords = columns_atoms(hits, index)
    out = {"template_atoms": coords} if atoms else {"template_pair": pair_maps(coords)}
    out.update(template_1d=columns_one_d(hits, index), template_mask=np.ones(count, dtype=bool))
    return out


def template_features(hits: pd.DataFrame, database: TemplateDatabase, query_codes: np.ndarray, *,
                      max_templates: int = DEFAULT_MAX_TEMPLATES, where: str | Path = "") -> dict[str, np.ndarray]:
    """The feature file's template keys of the best ``max_templates`` hits: ``template_atoms`` (the placed
    residues' N, CA, C, CB, from which :func:`~workflow_lib.features.template_maps.template_pair` makes the 6D maps of the columns a network call
    reads), ``template_1d`` and ``template_mask``."""
    if max_templates < 0:
        raise ValueError(f"max_templates must be ≥ 0, got {max_templates}")
    query_codes = np.asarray(query_codes)
    ordered = hits.sort_values("rank", kind="stable").head(max_templates)
    columns = [hit_columns(row, database, query_codes, where=where) for _, row in ordered.iterrows()]
    return columns_features(columns, np.arange(query_codes.shape[0]), atoms=True)


def read_hits(path: str | Path) -> pd.DataFrame:
    """A template-hits table (:data:`~workflow_lib.schemas.templates.TEMPLATE_HITS`), validated."""
    return read_frame(path, TEMPLATE_HITS)
