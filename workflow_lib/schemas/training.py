"""The training workflow's tables: ``data/chains.parquet`` (:data:`TRAINING_CHAINS`),
``run/metrics.parquet`` (:data:`TRAINING_METRICS`), ``run/validation.parquet`` (:data:`VALIDATION_CHAINS`)."""

from __future__ import annotations

import pyarrow as pa

from workflow_lib.schemas.io import TableSchema

TRAINING_CHAINS = TableSchema("training_chains", 1, pa.schema([
    ("name", pa.string()),           # {entry}_{chain}; the A3M / feature stem
    ("structure", pa.string()),      # structure file (PDB or mmCIF)
    ("chain", pa.string()),          # author chain id
    ("sequence", pa.string()),       # one-letter residues of the observed chain
    ("length", pa.int32()),
    ("cluster", pa.int32()),         # single-linkage identity cluster
    ("split", pa.string()),          # "train" or "validation"
]), "Chains for training: structure, chain, identity cluster and split (workflow_lib.training.data).")


TRAINING_METRICS = TableSchema("training_metrics", 1, pa.schema([
    ("step", pa.int32()),            # optimizer steps done
    ("split", pa.string()),          # "train" (one crop) or "validation" (mean over chains)
    ("loss", pa.float64()),
    ("distogram", pa.float64()),
    ("fape", pa.float64()),
    ("plddt", pa.float64()),
    ("lddt_ca", pa.float64()),       # validation only (NaN for train rows)
    ("dist_top1", pa.float64()),
    ("contact_precision_long", pa.float64()),
    ("contact_precision_medlong", pa.float64()),
    ("lr", pa.float64()),
    ("wall_s", pa.float64()),        # training wall time so far
    ("n_chains", pa.int32()),
]), "Training curve: one row per training step and per validation pass.")


VALIDATION_CHAINS = TableSchema("validation_chains", 1, pa.schema([
    ("name", pa.string()),
    ("length", pa.int32()),          # residues evaluated (after the central crop)
    ("lddt_ca", pa.float64()),
    ("dist_top1", pa.float64()),
    ("contact_precision_long", pa.float64()),
    ("contact_precision_medlong", pa.float64()),
    ("loss", pa.float64()),
]), "Per-chain validation metrics of a trained model.")
