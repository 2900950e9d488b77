"""Inference outputs: ``{protein}.pred.npz`` (:data:`PREDICTION`), ``{protein}.residues.parquet``
(:data:`PREDICTED_RESIDUES`) and the optional ``{protein}.embeddings.npz`` (:data:`EMBEDDINGS`)."""

from __future__ import annotations

import pyarrow as pa

from workflow_lib.schemas.io import ArraySpec, NpzSchema, TableSchema

PREDICTION = NpzSchema("prediction", 1, {
    "dist": ArraySpec("float16", ("L", "L", "dist_bins"), "P(Cβ distance bin), symmetric; last bin = no contact",
                    optional=True),
    "omega": ArraySpec("float16", ("L", "L", "omega_bins"), "P(ω dihedral bin); last bin = no contact",
                    optional=True),
    "theta": ArraySpec("float16", ("L", "L", "theta_bins"), "P(θ dihedral bin), row residue i; last = no contact",
                    optional=True),
    "phi": ArraySpec("float16", ("L", "L", "phi_bins"), "P(φ planar-angle bin), row residue i; last = no contact",
                    optional=True),
    "plddt": ArraySpec("float32", ("L",), "predicted lDDT-Cα, 0-100"),
    "backbone": ArraySpec("float32", ("L", 5, 3), "N, CA, C, O, Cβ in Å (Cβ NaN for glycine)"),
    "aatype": ArraySpec("int8", ("L",), "query residue codes (workflow_lib.seqio.alphabet)"),
    "residue_index": ArraySpec("int32", ("L",), "residue index of the feature file (PDB number - 1)"),
    "n_crops": ArraySpec("int32", (), "network calls stitched (1: the protein fit one window)"),
}, "Per-protein prediction of trackfold predict (workflow_lib.inference.outputs); the 6D heads are those asked "
   "for (--pair-heads, all four by default).")


EMBEDDINGS = NpzSchema("embeddings", 1, {
    "single": ArraySpec("float32", ("L", "C_m"), "query-row MSA representation after the last block"),
    "pair": ArraySpec("float16", ("L", "L", "C_z"), "pair representation after the last block"),
    "residue_index": ArraySpec("int32", ("L",), "residue index of the feature file"),
}, "Optional embeddings of trackfold predict --embeddings (workflow_lib.inference.outputs).")


PREDICTED_RESIDUES = TableSchema("predicted_residues", 1, pa.schema([
    ("protein", pa.string()),
    ("residue_index", pa.int32()),   # as in the feature file (0-based)
    ("residue_number", pa.int32()),  # PDB residue number = residue_index + 1
    ("aa", pa.string()),             # one letter (X for unknown)
    ("plddt", pa.float32()),         # 0-100
    ("ss8", pa.string()),            # DSSP 8-state of the predicted model (H G I E B T S P C, '-' unassigned); null
    ("ss3", pa.string()),            # H / E / C reduction; null without mkdssp
]), "Per-residue confidence and secondary structure of a predicted model.")


PREDICTION_STATS = TableSchema("prediction_stats", 1, pa.schema([
    ("protein", pa.string()),        # file stem of the prediction (the protein's safe ID in the workflow)
    ("length", pa.int32()),
    ("mean_plddt", pa.float32()),    # 0-100
    ("n_crops", pa.int32()),         # network calls stitched (1: one window)
    ("batch", pa.int32()),           # forward pass it shared with the other proteins of the same number
    ("batch_size", pa.int32()),      # proteins in that pass
    ("seconds", pa.float64()),       # the pass's wall time shared by residues (crops: the protein's own time)
    ("device", pa.string()),         # cpu, cuda, ...
]), "Per protein of one trackfold predict run (a chunk in the workflow); written after every prediction file.")
