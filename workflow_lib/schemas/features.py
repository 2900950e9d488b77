"""The per-protein feature file (``{protein}.npz``): every key, dtype and named dimension, declared once.

Named dimensions: ``N`` MSA rows kept for the network (query first), ``L`` match columns (the query length),
``T`` templates used (0 when there are no template hits or no template database; never padded).

==================  =======  ==============  ============================================  =====================
key                 dtype    dims            meaning                                       the network reads it
==================  =======  ==============  ============================================  =====================
``msa``             int8     [N, L]          residue codes 0..21 (``seqio.alphabet``: 20   always
                                             aa, 20 = X, 21 = gap); row 0 is the query
``residue_index``   int32    [L]             0..L-1                                        always
``coevolution``     float32  [L, L, 3]       channel 0: APC-corrected covariance           ``c_coevolution``
                                             Frobenius norm (20 aa); channel 1:            (the first
                                             APC-corrected mutual information (21          ``c_coevolution``
                                             states, nats); channel 2: APC-corrected       channels)
                                             direct couplings (``features.couplings``,
                                             unit standard deviation); symmetric, zero
                                             diagonal
``deletion_matrix`` uint8    [N, L]          residues inserted immediately before column   ``msa_statistics``
                                             j (AlphaFold convention), clipped at 255
``deletion_mean``   float32  [L]             mean of the unclipped deletion counts over    ``msa_statistics``
                                             the statistics rows
``profile``         float32  [L, 21]         weighted frequencies of the 20 aa + gap (X    ``msa_statistics``
                                             as gap), with a pseudocount; rows sum to 1
``template_atoms``  float32  [T, L, 4, 3]    N, CA, C, CB (Å) of the template residue      ``c_template_pair``
                                             placed on each column (CB NaN where the       (as 6D one-hots, made
                                             file has none), NaN rows where none is        per network call);
                                             placed                                        the fold reads it too
``template_1d``     float32  [T, L, 29]      :data:`TEMPLATE_1D_CHANNELS`: scores,         ``c_template_1d``
                                             sequence, DSSP one-hots
``template_mask``   bool     [T]             the template slot holds a template            with the templates
``neff``            float32  []              Σ of the weights over the statistics rows     no: a record
``num_alignments``  int32    []              rows in the input A3M (before any capping)    no: a record
==================  =======  ==============  ============================================  =====================

The last column is :data:`NETWORK_READERS`, the model option under which the network reads the key
(:func:`feature_keys_read` gives the keys of one model config, and
:func:`~workflow_lib.inference.predict.model_inputs` reads exactly those). ``neff`` and ``num_alignments``
(:data:`RECORD_KEYS`) are records for the report and ``feature_stats``; ``template_atoms`` (:data:`FOLD_KEYS`) is also
read by the fold from the distogram (the template's distances and Cα anchors), whether or not the network reads it.
The file holds nothing else: an A3M's ``ss_pred`` row and the query flag of earlier layouts are no longer written,
because no network read them.

The template pair maps are not stored: ``template_pair`` ``[T, L, L, 131]`` float16 took 3.6 GB in memory for a
2,626-residue protein with two templates (and most of the stage's writing and the predict job's reading), while
the maps of the columns one network call reads are made from ``template_atoms`` in a few milliseconds
(:func:`workflow_lib.features.templates.template_pair`). Files of layout 5 (:data:`FEATURES_V5`: the maps and an
optional ``template_ca`` instead of ``template_atoms``) are still read, to the same predictions.

"Statistics rows" are the input rows the statistics (weights, Neff, profile, deletion mean, co-evolution)
are computed from: all of them, or a deterministic sample of ``max_stats_seqs`` when deeper (see
:mod:`workflow_lib.features.msa_features`). The ``N`` rows of ``msa`` are always a subset of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from workflow_lib.schemas.io import ArraySpec, NpzSchema, TableSchema
from workflow_lib.seqio.alphabet import N_CODES
from workflow_lib.structure.geometry import DIST_BINS, OMEGA_BINS, PHI_BINS, THETA_BINS

PROFILE_STATES = 21
"""Profile and co-evolution states: the 20 amino acids (codes 0..19), then one state for gap and X."""

SS_STATES = "HEC"
"""Secondary-structure classes (DSSP reduced to helix, strand, coil) in channel order: the template DSSP one-hot."""

COEVOLUTION_CHANNELS = ("apc_covariance_norm", "apc_mutual_information", "apc_direct_couplings")
"""Channel names of ``coevolution`` in order. A network reads the first ``c_coevolution`` of them, so a model
trained before a channel was appended (``c_coevolution: 2``) reads the files written since."""

TEMPLATE_PAIR_CHANNELS = (("dist", DIST_BINS), ("omega", OMEGA_BINS), ("theta", THETA_BINS), ("phi", PHI_BINS),
                          ("pair_mask", 1))
"""Layout of ``template_pair``'s last axis: the binned 6D geometry of
:func:`workflow_lib.structure.geometry.bin_pair_geometry` as one-hots (37 + 37 + 37 + 19 = 130, the
no-contact class last in each), then 1 channel that is 1 where both residues are aligned to the template
and have coordinates (a Cβ, the file's or the virtual one). Pairs not both placed on the template are all
zeros (:mod:`workflow_lib.features.templates`). Total 131."""

TEMPLATE_1D_CHANNELS = (("aligned", 1), ("identity", 1), ("similarity", 1), ("confidence", 1),
                        ("sequence", N_CODES), ("secondary_structure", len(SS_STATES)))
"""Layout of ``template_1d``'s last axis (:mod:`workflow_lib.features.templates`): query residue aligned to a
template position (0/1, with or without coordinates), identical residue (0/1), similar residue (0/1: positive
substitution log-odds, BLAST's "positives"), the hit's confidence ``significance = exp(−E)`` (the probability
that no unrelated template of the database scores that high; :mod:`workflow_lib.templates.calibration`) on
aligned columns, the one-hot of the aligned template residue over the 22 codes (gap where unaligned), and the
template residue's DSSP state as one-hot H, E, C (zeros without coordinates or DSSP). Total 29."""

TEMPLATE_ATOM_NAMES = ("N", "CA", "C", "CB")
"""The atoms of ``template_atoms``' third axis, in order."""

C_TEMPLATE_PAIR = sum(size for _, size in TEMPLATE_PAIR_CHANNELS)
C_TEMPLATE_1D = sum(size for _, size in TEMPLATE_1D_CHANNELS)
C_COEVOLUTION = len(COEVOLUTION_CHANNELS)


def channel_slices(layout: tuple[tuple[str, int], ...]) -> dict[str, slice]:
    """Name -> slice of the channel axis, for a layout such as :data:`TEMPLATE_PAIR_CHANNELS`."""
    out, start = {}, 0
    for name, size in layout:
        out[name] = slice(start, start + size)
        start += size
    return out


_FEATURE_ARRAYS = {
    "msa": ArraySpec("int8", ("N", "L"), "residue codes 0..21, row 0 = query"),
    "deletion_matrix": ArraySpec("uint8", ("N", "L"), "insertions before column j, clipped at 255"),
    "deletion_mean": ArraySpec("float32", ("L",), "mean deletion count over the statistics rows"),
    "neff": ArraySpec("float32", (), "number of effective sequences: sum of the statistics rows' weights"),
    "num_alignments": ArraySpec("int32", (), "rows in the input alignment before capping"),
    "profile": ArraySpec("float32", ("L", PROFILE_STATES), "weighted 20 aa + gap frequencies, pseudocount"),
    "residue_index": ArraySpec("int32", ("L",), "0..L-1"),
    "coevolution": ArraySpec("float32", ("L", "L", C_COEVOLUTION), "APC covariance norm, APC MI, APC couplings"),
    "template_atoms": ArraySpec("float32", ("T", "L", len(TEMPLATE_ATOM_NAMES), 3),
                                "template N, CA, C, CB on each column, NaN rows where none"),
    "template_1d": ArraySpec("float32", ("T", "L", C_TEMPLATE_1D), "template 1D scores, sequence and SS one-hots"),
    "template_mask": ArraySpec("bool", ("T",), "slot holds a template"),
}
FEATURES = NpzSchema("features", 6, _FEATURE_ARRAYS,  # 6: template atoms instead of the pair maps
                     "Per-protein network input features (workflow_lib.schemas.features).")
FEATURES_V5 = NpzSchema("features", 5, {
    **{key: spec for key, spec in _FEATURE_ARRAYS.items() if key != "template_atoms"},
    "template_pair": ArraySpec("float16", ("T", "L", "L", C_TEMPLATE_PAIR), "6D one-hots + pair mask"),
    "template_ca": ArraySpec("float32", ("T", "L", 3), "template Ca on each column, NaN where none", optional=True),
}, "Feature files of layout 5, still read: the template pair maps stored whole.")


NETWORK_READERS: dict[str, str] = {
    "msa": "always",
    "residue_index": "always",
    "coevolution": "c_coevolution",
    "deletion_matrix": "msa_statistics",
    "deletion_mean": "msa_statistics",
    "profile": "msa_statistics",
    "template_atoms": "c_template_pair",
    "template_1d": "c_template_1d",
    "template_mask": "templates",
}
"""Feature key -> the model option under which the network reads it (the schema table's last column)."""

RECORD_KEYS = ("neff", "num_alignments")
"""Feature keys no network reads: per-protein records for the report and ``feature_stats``."""

FOLD_KEYS = ("template_atoms",)
"""Feature keys the fold from the distogram reads whether or not the network does: the templates' own atoms, whose
Cβ distances restrain it and whose Cα anchor it where a template is close
(:mod:`workflow_lib.inference.template_restraints`)."""


def _reads(reader: str, config: Any) -> bool:
    """Whether a network with ``config`` reads a key whose :data:`NETWORK_READERS` entry is ``reader``."""
    if reader == "always":
        return True
    if reader == "templates":
        return bool(config.c_template_pair or config.c_template_1d)
    name, _, value = reader.partition(": ")
    return str(getattr(config, name)) == value if value else bool(getattr(config, name))


def feature_keys_read(config: Any) -> frozenset[str]:
    """The feature-file keys a network with ``config`` (a :class:`workflow_lib.model.config.ModelConfig`) reads:
    those of :data:`NETWORK_READERS` whose option the config sets.

    :func:`workflow_lib.inference.predict.model_inputs` reads exactly these keys of a feature file (of a layout-5
    file, ``template_pair`` in place of ``template_atoms``); the rest of the file are records.
    """
    return frozenset(key for key, reader in NETWORK_READERS.items() if _reads(reader, config))


def empty_templates(length: int) -> dict[str, np.ndarray]:
    """The three template keys with T = 0 for a protein of ``length`` residues (no templates yet)."""
    return {
        "template_atoms": np.zeros((0, length, len(TEMPLATE_ATOM_NAMES), 3), dtype=np.float32),
        "template_1d": np.zeros((0, length, C_TEMPLATE_1D), dtype=np.float32),
        "template_mask": np.zeros((0,), dtype=bool),
    }


FEATURE_STATS = TableSchema("feature_stats", 1, pa.schema([
    ("protein", pa.string()),        # the feature file's stem (the protein's safe ID in the workflow)
    ("length", pa.int32()),          # L
    ("rows", pa.int32()),            # N: MSA rows kept for the network
    ("alignments", pa.int32()),      # rows of the input A3M
    ("neff", pa.float32()),
    ("templates", pa.int32()),       # T
    ("seconds", pa.float64()),
]), "Per protein of one trackfold features run (a chunk in the workflow); written after every feature file.")
