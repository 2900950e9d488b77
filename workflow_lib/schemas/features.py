"""The per-protein feature file (``{protein}.npz``): every key, dtype and named dimension, declared once.

Named dimensions: ``N`` MSA rows kept for the network (query first), ``L`` match columns (the query length),
``T`` templates used (0 when there are no template hits or no template database; never padded).

======================  ========  ===============  ==========================================================
key                     dtype     dims             meaning
======================  ========  ===============  ==========================================================
``msa``                 int8      [N, L]           residue codes 0..21 (``workflow_lib.seqio.alphabet``: 20 aa,
                                                   20 = X, 21 = gap); row 0 is the query
``deletion_matrix``     uint8     [N, L]           residues inserted immediately before column j (AlphaFold
                                                   convention, ``Alignment.insertions[:, :L]``), clipped at 255
``deletion_mean``       float32   [L]              mean of the unclipped deletion counts over the statistics rows
``is_query``            bool      [N]              True for row 0 only (the query is always row 0)
``seq_weights``         float32   [N]              1 / number of statistics rows within 80% identity
``neff``                float32   []               Σ of the weights over the statistics rows
``num_alignments``      int32     []               rows in the input A3M (before any capping)
``profile``             float32   [L, 21]          weighted frequencies of the 20 aa + gap (X counted as gap),
                                                   with a pseudocount; every row sums to 1
``residue_index``       int32     [L]              0..L-1
``coevolution``         float32   [L, L, 2]        channel 0: APC-corrected covariance Frobenius norm (20 aa);
                                                   channel 1: APC-corrected mutual information (21 states, nats);
                                                   symmetric, zero diagonal
``ss_pred``             float32   [L, 3]           one-hot H, E, C of the A3M's ``ss_pred`` row (PSIPRED)
``ss_pred_mask``        bool      [L]              the column has a prediction (all False without ``ss_pred``)
``template_pair``       float16   [T, L, L, 131]   :data:`TEMPLATE_PAIR_CHANNELS`: 6D one-hots + pair mask
``template_1d``         float32   [T, L, 29]       :data:`TEMPLATE_1D_CHANNELS`: scores, sequence, DSSP one-hots
``template_mask``       bool      [T]              the template slot holds a template
======================  ========  ===============  ==========================================================

"Statistics rows" are the input rows the statistics (weights, Neff, profile, deletion mean, co-evolution)
are computed from: all of them, or a deterministic sample of ``max_stats_seqs`` when deeper (see
:mod:`workflow_lib.features.msa_features`). The ``N`` rows of ``msa`` are always a subset of them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from workflow_lib.schemas.io import ArraySpec, NpzSchema, TableSchema
from workflow_lib.seqio.alphabet import N_CODES
from workflow_lib.structure.geometry import DIST_BINS, OMEGA_BINS, PHI_BINS, THETA_BINS

PROFILE_STATES = 21
"""Profile and co-evolution states: the 20 amino acids (codes 0..19), then one state for gap and X."""

SS_STATES = "HEC"
"""Secondary-structure classes of ``ss_pred`` in channel order."""

COEVOLUTION_CHANNELS = ("apc_covariance_norm", "apc_mutual_information")
"""Channel names of ``coevolution`` in order."""

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


FEATURES = NpzSchema("features", 2, {  # 2: template_1d has 29 channels (DSSP one-hot added)
    "msa": ArraySpec("int8", ("N", "L"), "residue codes 0..21, row 0 = query"),
    "deletion_matrix": ArraySpec("uint8", ("N", "L"), "insertions before column j, clipped at 255"),
    "deletion_mean": ArraySpec("float32", ("L",), "mean deletion count over the statistics rows"),
    "is_query": ArraySpec("bool", ("N",), "row is the query (row 0 only)"),
    "seq_weights": ArraySpec("float32", ("N",), "1 / rows within 80% identity (among the statistics rows)"),
    "neff": ArraySpec("float32", (), "number of effective sequences: sum of the statistics rows' weights"),
    "num_alignments": ArraySpec("int32", (), "rows in the input alignment before capping"),
    "profile": ArraySpec("float32", ("L", PROFILE_STATES), "weighted 20 aa + gap frequencies, pseudocount"),
    "residue_index": ArraySpec("int32", ("L",), "0..L-1"),
    "coevolution": ArraySpec("float32", ("L", "L", C_COEVOLUTION), "APC covariance norm, APC MI"),
    "ss_pred": ArraySpec("float32", ("L", len(SS_STATES)), "one-hot H/E/C from the A3M ss_pred row"),
    "ss_pred_mask": ArraySpec("bool", ("L",), "column has an ss_pred prediction"),
    "template_pair": ArraySpec("float16", ("T", "L", "L", C_TEMPLATE_PAIR), "6D one-hots + pair mask"),
    "template_1d": ArraySpec("float32", ("T", "L", C_TEMPLATE_1D), "template 1D scores, sequence and SS one-hots"),
    "template_mask": ArraySpec("bool", ("T",), "slot holds a template"),
}, "Per-protein network input features (workflow_lib.schemas.features).")


def empty_templates(length: int) -> dict[str, np.ndarray]:
    """The three template keys with T = 0 for a protein of ``length`` residues (no templates yet)."""
    return {
        "template_pair": np.zeros((0, length, length, C_TEMPLATE_PAIR), dtype=np.float16),
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
