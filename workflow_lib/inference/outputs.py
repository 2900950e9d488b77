"""The files ``trackfold predict`` writes per protein, declared once here, and the writer.

* ``{protein}.pdb`` -- N, CA, C, O, Cβ (no Cβ for glycine), pLDDT (0-100) in the B-factor column, residues
  numbered ``residue_index + 1`` (:func:`~workflow_lib.structure.pdb_writer.write_pdb`).
* ``{protein}.cif`` -- the same model as mmCIF, pLDDT as the ModelCIF per-residue quality metric and in
  ``B_iso_or_equiv`` (:func:`~workflow_lib.structure.mmcif_writer.write_mmcif`), as AlphaFold DB and ColabFold
  write it;
* ``{protein}.confidence.json`` -- per-residue pLDDT in AlphaFold DB's layout (``residueNumber``,
  ``confidenceScore``, ``confidenceCategory``: H > 90 ≥ M > 70 ≥ L > 50 ≥ D), with the protein and its mean;
* ``{protein}.pred.npz`` -- :data:`PREDICTION`: pLDDT, backbone and the 6D probabilities as float16 (the heads
  of ``--pair-heads``: all four by default; about 260 bytes per residue pair, so 23 MB at 300 residues).
* ``{protein}.residues.parquet`` -- :data:`PREDICTED_RESIDUES`: one row per residue with pLDDT and the DSSP
  secondary structure of the *predicted* model (mkdssp on the written PDB). Without mkdssp, or when mkdssp
  rejects the model, ``ss8``/``ss3`` are null (a warning is logged); there is no home-made assignment.
* with ``--embeddings``: ``{protein}.embeddings.npz`` -- :data:`EMBEDDINGS` (query-row single and pair
  representations of the last block, for downstream tasks).

Each file is written atomically.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.errors import ToolError
from workflow_lib.inference.predict import Prediction
from workflow_lib.schemas.io import write_npz, write_table
from workflow_lib.schemas.prediction import EMBEDDINGS, PREDICTED_RESIDUES, PREDICTION
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.structure.dssp import reduce_to_three, run_dssp
from workflow_lib.structure.mmcif_writer import write_mmcif
from workflow_lib.structure.pdb_writer import write_pdb

LOG = logging.getLogger(__name__)


_WARNED: set[str] = set()


def _warn_once(message: str, *args: object) -> None:
    """Log ``message`` once per process (a chunk job writes hundreds of models)."""
    if message not in _WARNED:
        _WARNED.add(message)
        LOG.warning(message, *args)


def predicted_secondary_structure(pdb_path: Path, residue_numbers: np.ndarray) -> tuple[list, list]:
    """DSSP 8- and 3-state per residue of a written model, or all None without mkdssp / when it fails."""
    length = len(residue_numbers)
    if shutil.which("mkdssp") is None:
        _warn_once("mkdssp not found: ss8/ss3 of the predicted models left null (first: %s)", pdb_path.name)
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


PLDDT_CATEGORIES = ((90.0, "H"), (70.0, "M"), (50.0, "L"), (-np.inf, "D"))
"""AlphaFold DB's confidence bands: very high (> 90), confident, low, very low (≤ 50)."""


def confidence_json(name: str, numbers: np.ndarray, plddt: np.ndarray) -> str:
    """The ``{protein}.confidence.json`` text (AlphaFold DB's per-residue confidence layout)."""
    scores = [round(float(value), 2) for value in plddt]
    categories = [next(label for bound, label in PLDDT_CATEGORIES if value > bound) for value in scores]
    return json.dumps({"protein": name, "meanPlddt": round(float(np.mean(plddt)), 2),
                       "residueNumber": [int(n) for n in numbers], "confidenceScore": scores,
                       "confidenceCategory": categories}) + "\n"


def write_prediction(out_dir: str | Path, name: str, prediction: Prediction) -> dict[str, Path]:
    """Write the PDB, the mmCIF, the confidence JSON, the ``.pred.npz``, the residue table (and embeddings
    when present); returns the paths."""
    out_dir = Path(out_dir)
    paths = {"pdb": out_dir / f"{name}.pdb", "cif": out_dir / f"{name}.cif",
             "confidence": out_dir / f"{name}.confidence.json", "npz": out_dir / f"{name}.pred.npz",
             "residues": out_dir / f"{name}.residues.parquet"}
    numbers = prediction.residue_index.astype(np.int64) + 1
    write_pdb(paths["pdb"], prediction.sequence, prediction.backbone, prediction.plddt,
              residue_numbers=[str(n) for n in numbers], title=f"TRACKFOLD {name}")
    write_mmcif(paths["cif"], name, prediction.sequence, prediction.backbone, prediction.plddt,
                residue_numbers=numbers)
    write_text_atomic(paths["confidence"], confidence_json(name, numbers, prediction.plddt))
    arrays = {head: probs.astype(np.float16) for head, probs in prediction.probs.items()}
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
