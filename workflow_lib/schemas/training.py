"""The training workflow's tables: ``data/chains.parquet`` (:data:`TRAINING_CHAINS`),
``run/metrics.parquet`` (:data:`TRAINING_METRICS`), ``run/validation.parquet`` (:data:`VALIDATION_CHAINS`); and
the training pack's arrays (:data:`TRAINING_PACK`)."""

from __future__ import annotations

import pyarrow as pa

from workflow_lib.schemas.io import ArraySpec, NpzSchema, TableSchema

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


VALIDATION_CHAINS = TableSchema("validation_chains", 2, pa.schema([
    ("name", pa.string()),
    ("length", pa.int32()),          # residues evaluated (after the central crop)
    ("lddt_ca", pa.float64()),       # the structure module's backbone
    ("fold_lddt_ca", pa.float64()),  # the backbone folded from the distogram (final validation; NaN during training)
    ("fold_tm_score", pa.float64()),
    ("dist_top1", pa.float64()),
    ("contact_precision_long", pa.float64()),
    ("contact_precision_medlong", pa.float64()),
    ("loss", pa.float64()),
]), "Per-chain validation metrics of a trained model.")


TRAINING_PACK = NpzSchema("training_pack", 1, {
    "names": ArraySpec("S64", ("C",), "chain names (ASCII), the training table's order"),
    "is_validation": ArraySpec("bool", ("C",), "chain is in the validation split"),
    "cluster": ArraySpec("int32", ("C",), "identity cluster (training chains are drawn by cluster)"),
    "lengths": ArraySpec("int32", ("C",), "residues of each chain"),
    "depths": ArraySpec("int32", ("C",), "MSA rows kept for each chain (query included)"),
    "residue_index": ArraySpec("int32", ("R",), "structure residue index of every residue, chains concatenated"),
    "coords": ArraySpec("int16", ("R", 3, 3), "N, CA, C in 0.01 Å, each chain centred on its mean CA"),
    "atom_mask": ArraySpec("bool", ("R", 3), "atom present"),
    "msa": ArraySpec("int8", ("M",), "each chain's MSA rows [depth, length] flattened, chains concatenated"),
    "seq_weights": ArraySpec("float32", ("D",), "each chain's row weights, chains concatenated"),
    "deletions": ArraySpec("uint8", ("M",), "insertions before each MSA cell (clipped at 255), laid out as msa",
                           optional=True),
    # templates (packs built with template hits): per chain a count, per hit (H) a name and confidence, per hit
    # column (Q = sum over chains of hits x length) the TemplateColumns arrays
    "template_counts": ArraySpec("int32", ("C",), "templates kept for each chain", optional=True),
    "template_names": ArraySpec("S64", ("H",), "template IDs, chains' hits concatenated in rank order",
                                optional=True),
    "template_confidence": ArraySpec("float32", ("H",), "each hit's significance exp(-E)", optional=True),
    "template_coords": ArraySpec("int16", ("Q", 5, 3), "N, CA, C, O, CB in 0.01 Å about the hit's mean placed CA; "
                                 "-32768 where absent", optional=True),
    "template_placed": ArraySpec("bool", ("Q",), "a template residue with a Cβ lies on the column", optional=True),
    "template_aligned": ArraySpec("bool", ("Q",), "column aligned to a template position", optional=True),
    "template_identical": ArraySpec("bool", ("Q",), "identical residue pair", optional=True),
    "template_positive": ArraySpec("bool", ("Q",), "positive substitution score", optional=True),
    "template_codes": ArraySpec("int8", ("Q",), "template residue code (gap where unaligned)", optional=True),
    "template_ss": ArraySpec("int8", ("Q",), "index of the template's DSSP H/E/C state, -1 where none",
                             optional=True),
}, "Everything trackfold train needs of many chains in one file (workflow_lib.training.pack).")
