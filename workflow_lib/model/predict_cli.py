"""Sub-command ``trackfold predict`` and the inference outputs, declared once here.

``trackfold predict --model CKPT --out-dir DIR [--device auto|cpu|cuda] [--window N] [--seed N]
[--max-msa N] [--batch-size N] [--threads N] [--embeddings] FEATURES.npz|A3M...`` writes per protein (the
file stem: ``X.npz`` / ``X.a3m`` -> ``X``), each atomically:

* ``{protein}.pdb`` -- N, CA, C, O, Cβ (no Cβ for glycine), pLDDT (0-100) in the B-factor column, residues
  numbered ``residue_index + 1`` (:func:`~workflow_lib.structure.pdb_writer.write_pdb`).
* ``{protein}.pred.npz`` -- :data:`PREDICTION`: 6D probabilities as float16, pLDDT, backbone.
* ``{protein}.residues.parquet`` -- :data:`PREDICTED_RESIDUES`: one row per residue with pLDDT and the DSSP
  secondary structure of the *predicted* model (mkdssp on the written PDB). Without mkdssp, or when mkdssp
  rejects the model, ``ss8``/``ss3`` are null (a warning is logged); there is no home-made assignment.
* with ``--embeddings``: ``{protein}.embeddings.npz`` -- :data:`EMBEDDINGS` (query-row single and pair
  representations of the last block, for downstream tasks).

A3M inputs are turned into features on the fly with the feature stage's defaults
(:func:`~workflow_lib.features.build.build_features`).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from workflow_lib.cli_args import positive_int, unique_outputs
from workflow_lib.errors import ToolError
from workflow_lib.features.build import build_features, read_features
from workflow_lib.model.checkpoint import load_checkpoint
from workflow_lib.model.predict import (
    DEFAULT_MAX_MSA,
    DEFAULT_WINDOW,
    MIN_WINDOW,
    Prediction,
    PredictOptions,
    check_feature_widths,
    predict_many,
    resolve_device,
)
from workflow_lib.search.allocator import NEVER_TRIM, keep_freed_memory
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.msa import a3m_stem
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
}, "Per-protein prediction of trackfold predict (workflow_lib.model.predict_cli).")

EMBEDDINGS = NpzSchema("embeddings", 1, {
    "single": ArraySpec("float32", ("L", "C_m"), "query-row MSA representation after the last block"),
    "pair": ArraySpec("float16", ("L", "L", "C_z"), "pair representation after the last block"),
    "residue_index": ArraySpec("int32", ("L",), "residue index of the feature file"),
}, "Optional embeddings of trackfold predict --embeddings (workflow_lib.model.predict_cli).")

PREDICTED_RESIDUES = TableSchema("predicted_residues", 1, pa.schema([
    ("protein", pa.string()),
    ("residue_index", pa.int32()),   # as in the feature file (0-based)
    ("residue_number", pa.int32()),  # PDB residue number = residue_index + 1
    ("aa", pa.string()),             # one letter (X for unknown)
    ("plddt", pa.float32()),         # 0-100
    ("ss8", pa.string()),            # DSSP 8-state of the predicted model (H G I E B T S P C, '-' unassigned); null
    ("ss3", pa.string()),            # H / E / C reduction; null without mkdssp
]), "Per-residue confidence and secondary structure of a predicted model.")


def protein_name(path: str | Path) -> str:
    """Output stem: ``X.npz`` -> ``X``; A3M names as the feature stage (``X.a3m[.gz]`` -> ``X``)."""
    name = Path(path).name
    if name.endswith(".npz") and len(name) > 4:
        return name[:-4]
    return a3m_stem(path)


def load_inputs(path: str | Path) -> dict[str, np.ndarray]:
    """Feature file (``.npz``, validated) or A3M (features built now with the default options)."""
    path = Path(path)
    if path.name.endswith(".npz"):
        return read_features(path)
    return build_features(path)


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


def _window(text: str) -> int:
    value = int(text)
    if value < MIN_WINDOW:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_WINDOW}, got {value}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    predict = subparsers.add_parser("predict", help="feature files or A3Ms -> predicted structures (PDB, 6D, pLDDT)")
    predict.add_argument("inputs", nargs="+", help="feature files ({protein}.npz) or A3M alignments")
    predict.add_argument("--model", required=True, help="checkpoint (.pt) written by trackfold train")
    predict.add_argument("--out-dir", required=True, help="directory for {protein}.pdb, .pred.npz, .residues.parquet")
    predict.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                         help="auto: CUDA when present, else CPU (default auto)")
    predict.add_argument("--window", type=_window, default=DEFAULT_WINDOW,
                         help=f"residues per network call; longer proteins are cropped and stitched "
                              f"(default {DEFAULT_WINDOW})")
    predict.add_argument("--max-msa", type=positive_int, default=DEFAULT_MAX_MSA,
                         help=f"MSA rows per network call, query included (default {DEFAULT_MAX_MSA})")
    predict.add_argument("--seed", type=int, default=0, help="seed of the MSA row sample and of torch")
    predict.add_argument("--batch-size", type=positive_int, default=1,
                         help="proteins of similar length per forward pass (default 1)")
    predict.add_argument("--chunk-size", type=positive_int, default=None,
                         help="attention chunk size (less memory, same result); default: the checkpoint's")
    predict.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's)")
    predict.add_argument("--embeddings", action="store_true",
                         help="also write {protein}.embeddings.npz (single and pair representations)")
    predict.set_defaults(handler=run_predict)


def run_predict(args: argparse.Namespace) -> int:
    names = unique_outputs(args.inputs, protein_name, ".pdb")
    keep_freed_memory(trim_threshold=NEVER_TRIM)  # each crop reuses the last one's freed activations
    if args.threads:
        torch.set_num_threads(args.threads)
    options = PredictOptions(window=args.window, max_msa=args.max_msa, seed=args.seed, device=args.device,
                             batch_size=args.batch_size, chunk_size=args.chunk_size, embeddings=args.embeddings)
    device = resolve_device(options.device)
    model, _ = load_checkpoint(args.model, map_location=device)
    check_feature_widths(model.config, where=str(args.model))
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Without batching, one feature file is held in memory at a time.
    groups = ([list(names.items())] if options.batch_size > 1 else [[item] for item in names.items()])
    start = time.perf_counter()
    for group in groups:
        items = [(name, load_inputs(path)) for name, path in group]
        for name, prediction in predict_many(model, items, options):
            paths = write_prediction(out_dir, name, prediction)
            print(f"{paths['pdb']}: L={len(prediction.sequence)} crops={prediction.n_crops} "
                  f"mean pLDDT={float(prediction.plddt.mean()):.1f} ({time.perf_counter() - start:.1f} s, {device})")
    return 0
