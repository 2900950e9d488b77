"""The files ``trackfold predict`` writes per protein, declared once here, and the writer.

* ``{protein}.pdb`` -- N, CA, C, O, Cβ (no Cβ for glycine), pLDDT (0-100) in the B-factor column, residues
  numbered ``residue_index + 1`` (:func:`~workflow_lib.structure.pdb_writer.write_pdb`).
* ``{protein}.pred.npz`` -- :data:`PREDICTION`: 6D probabilities as float16, pLDDT, backbone.
* ``{protein}.residues.parquet`` -- :data:`PREDICTED_RESIDUES`: one row per residue with pLDDT and the DSSP
  secondary structure of the *predicted* model (mkdssp on the written PDB). Without mkdssp, or when mkdssp
  rejects the model, ``ss8``/``ss3`` are null (a warning is logged); there is no home-made assignment.
* with ``--embeddings``: ``{protein}.embeddings.npz`` -- :data:`EMBEDDINGS` (query-row single and pair
  representations of the last block, for downstream tasks).

Each file is written atomically.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from workflow_lib.errors import ToolError
from workflow_lib.inference.predict import Prediction
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.schemas import ArraySpec, NpzSchema, TableSchema, write_npz, write_table
from workflow_lib.structure.dssp import reduce_to_three, run_dssp
from workflow_lib.structure.pdb_writer import write_pdb

LOG = logging.getLogger(__name__)

PREDICTION = NpzSchema("prediction", 1, {
    "dist": ArraySpec("float16", ("L", "L", "dist_bins"), "P(Cβ distance bin), symmetric; last bin = no contact"),
    "omega": ArraySpec("float16", ("L", "L", "omega_bins"), "P(ω dihedral bin); last bin = no contact"),
    "theta": ArraySpec("float16", ("L", "L", "theta_bins"), "P(θ dihedral bin), row residue i; last = no contact"),
    "phi": ArraySpec("float16", ("L", "L", "phi_bins"), "P(φ planar-angle bin), row residue i; last = no contact"),
    "plddt": ArraySpec("float32", ("L",), "predicted lDDT-Cα, 0-100"),
    "backbone": ArraySpec("float32", ("L", 5, 3), "N, CA, C, O, Cβ in Å (Cβ NaN for glycine)"),
    "aatype": ArraySpec("int8", ("L",), "query residue codes (workflow_lib.seqio.alphabet)"),
    "residue_index": ArraySpec("int32", ("L",), "residue index of the feature file (PDB number - 1)"),
    "n_crops": ArraySpec("int32", (), "network calls stitched (1: the protein fit one window)"),
}, "Per-protein prediction of trackfold predict (workflow_lib.inference.outputs).")

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


def predicted_secondary_structure(pdb_path: Path, residue_numbers: np.ndarray) -> tuple[list, list]:
    """DSSP 8- and 3-state per residue of a written model, or all None without mkdssp / when it fails."""
    length = len(residue_numbers)
    if shutil.which("mkdssp") is None:
        LOG.warning("mkdssp not found: ss8/ss3 of %s left null", pdb_path.name)
        return [None] * length, [None] * length
    try:
        records = run_dssp(pdb_path)
    except ToolError as error:
        LOG.warning("mkdssp failed on the predicted model, ss8/ss3 left null: %s", error)
        return [None] * length, [None] * length
    position = {str(int(number)): i for i, number in enumerate(residue_numbers)}
    states = ["-"] * length
    for record in records:
        i = position.get(record.residue_number)
        if i is not None:
            states[i] = record.state
    return states, list(reduce_to_three("".join(states)))


def write_prediction(out_dir: str | Path, name: str, prediction: Prediction) -> dict[str, Path]:
    """Write the PDB, the ``.pred.npz``, the residue table (and embeddings when present); returns the paths."""
    out_dir = Path(out_dir)
    paths = {"pdb": out_dir / f"{name}.pdb", "npz": out_dir / f"{name}.pred.npz",
             "residues": out_dir / f"{name}.residues.parquet"}
    numbers = prediction.residue_index.astype(np.int64) + 1
    write_pdb(paths["pdb"], prediction.sequence, prediction.backbone, prediction.plddt,
              residue_numbers=[str(n) for n in numbers], title=f"TRACKFOLD {name}")
    arrays = {head: prediction.probs[head].astype(np.float16) for head in ("dist", "omega", "theta", "phi")}
    arrays.update(plddt=prediction.plddt, backbone=prediction.backbone,
                  aatype=encode(prediction.sequence).astype(np.int8),
                  residue_index=prediction.residue_index.astype(np.int32),
                  n_crops=np.array(prediction.n_crops, dtype=np.int32))
    write_npz(paths["npz"], arrays, PREDICTION)
    ss8, ss3 = predicted_secondary_structure(paths["pdb"], numbers)
    table = pd.DataFrame({"protein": name, "residue_index": prediction.residue_index.astype(np.int32),
                          "residue_number": numbers.astype(np.int32), "aa": list(prediction.sequence),
                          "plddt": prediction.plddt.astype(np.float32), "ss8": ss8, "ss3": ss3})
    write_table(paths["residues"], table, PREDICTED_RESIDUES)
    if prediction.single is not None and prediction.pair is not None:
        paths["embeddings"] = out_dir / f"{name}.embeddings.npz"
        write_npz(paths["embeddings"], {"single": prediction.single, "pair": prediction.pair.astype(np.float16),
                                        "residue_index": prediction.residue_index.astype(np.int32)}, EMBEDDINGS)
    return paths
