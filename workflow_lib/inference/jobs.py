"""The body of ``trackfold predict``: the per-protein files of :mod:`workflow_lib.inference.outputs` and, last,
one :data:`~workflow_lib.schemas.prediction.PREDICTION_STATS` row per protein (the workflow's per-chunk output).

Batching: the inputs' lengths are read first (a feature file's ``residue_index`` only), the forward passes
planned by :func:`~workflow_lib.inference.predict.plan_batches`, and each pass's inputs loaded when it runs, so
memory holds one pass's features at a time.

Receipts and resume: after a protein's files, a receipt ``{protein}.predict.done.json``
(:mod:`workflow_lib.seqio.receipts`) records the fingerprints of its input and of the checkpoint, the settings
(:func:`receipt_settings`) and its stats row; a pass whose proteins all have a matching receipt (and their files)
is not run again, so a chunk job killed after hours keeps what it finished. ``resume=False`` recomputes
everything.

pLDDT (with ``fold: distogram``, the default) goes through the pLDDT calibration the checkpoint carries, when it
carries one (:class:`~workflow_lib.inference.confidence.PlddtCalibration`). A3M inputs are turned into features on
the fly with the feature stage's defaults (:func:`~workflow_lib.features.build.build_features`).
"""

from __future__ import annotations

import dataclasses
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from workflow_lib.errors import SchemaError
from workflow_lib.features.build import build_features, read_features
from workflow_lib.inference.confidence import PlddtCalibration
from workflow_lib.inference.outputs import write_prediction
from workflow_lib.inference.predict import (
    PredictOptions,
    check_feature_widths,
    plan_batches,
    predict_group,
    resolve_device,
)
from workflow_lib.inference.settings import default_model_path
from workflow_lib.model.checkpoint import load_checkpoint
from workflow_lib.model.network import ThreeTrackNetwork
from workflow_lib.schemas.io import write_table
from workflow_lib.schemas.prediction import PREDICTION_STATS
from workflow_lib.search.allocator import NEVER_TRIM, keep_freed_memory
from workflow_lib.seqio.msa import a3m_stem, read_a3m
from workflow_lib.seqio.receipts import drop_receipt, file_fingerprint, read_receipt, work_key, write_receipt

RECEIPT_STAGE = "predict"
"""Receipts ``{protein}.predict.done.json`` (:mod:`workflow_lib.seqio.receipts`): a rerun skips those proteins."""


# --------------------------------------------------------------------------------------------- inputs

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


def input_length(path: str | Path) -> int:
    """Residues of a feature file (its ``residue_index`` alone is read) or of an A3M's query."""
    path = Path(path)
    if not path.name.endswith(".npz"):
        return read_a3m(path).length
    try:
        with np.load(path) as data:
            return int(data["residue_index"].shape[0])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as error:
        raise SchemaError(f"{path}: not a readable feature file: {error}") from None


# --------------------------------------------------------------------------------------------- receipts

def receipt_settings(options: PredictOptions, device: torch.device, length: int) -> dict:
    """What decides the prediction of a ``length``-residue protein: the options but the pass plan and the
    attention chunking (batched = one by one, chunked = unchunked, to float rounding), with the device that ran
    it instead of ``auto``, and the window only where it crops the protein (one that fits the window is
    predicted whole, whatever the window: ``None``)."""
    settings = dataclasses.asdict(options)
    for key in ("batch_size", "max_tokens", "chunk_size", "device"):
        settings.pop(key)
    settings["device"] = device.type
    settings["pair_heads"] = list(settings["pair_heads"])
    settings["window"] = options.window if length > options.window else None
    return settings


def receipt_keys(named: Sequence[tuple[str, str | Path]], lengths: Sequence[int], model_path: str | Path,
                 options: PredictOptions, device: torch.device) -> list[str]:
    """Each protein's receipt key: its input's and the checkpoint's fingerprints and :func:`receipt_settings`."""
    model_print = file_fingerprint(model_path)
    return [work_key(RECEIPT_STAGE, {"inputs": file_fingerprint(path), "model": model_print},
                     receipt_settings(options, device, length))
            for (_, path), length in zip(named, lengths)]


def finished_rows(out_dir: Path, names: Sequence[str], keys: Sequence[str], resume: bool) -> list[dict | None]:
    """The stats row of each protein whose receipt matches its key (and whose files are there), else None; all
    None without ``resume``."""
    return [None if not resume else read_receipt(out_dir, name, key) for name, key in zip(names, keys)]


def pending_batches(groups: Sequence[Sequence[int]], done: Sequence[dict | None]) -> set[int]:
    """The passes of ``groups`` that hold a protein without a finished prediction."""
    return {batch for batch, group in enumerate(groups) if any(done[i] is None for i in group)}


# --------------------------------------------------------------------------------------------- the job

def predict_job(names: Mapping[str, str | Path], *, out_dir: str | Path, options: PredictOptions,
                model: str | Path | None = None, threads: int | None = None, stats: str | Path | None = None,
                resume: bool = True) -> int:
    """``trackfold predict``: every protein of ``names`` (``{output name: feature file or A3M}``) with the
    checkpoint ``model`` (default: the shipped one) into ``out_dir``, pass by pass, skipping the passes whose
    proteins are finished (module docstring); then, with ``stats``, the stats table."""
    keep_freed_memory(trim_threshold=NEVER_TRIM)  # each crop reuses the last one's freed activations
    if threads:
        torch.set_num_threads(threads)
    device = resolve_device(options.device)
    model_path = model or default_model_path()
    network, extra = load_checkpoint(model_path, map_location=device)
    calibration = PlddtCalibration.from_extra(extra)
    check_feature_widths(network.config, where=str(model_path))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    named = list(names.items())
    lengths = [input_length(path) for _, path in named]
    groups = plan_batches(lengths, options)
    keys = receipt_keys(named, lengths, model_path, options, device)
    done = finished_rows(out_dir, [name for name, _ in named], keys, resume)
    pending = pending_batches(groups, done)
    reused = len(named) - sum(len(groups[batch]) for batch in pending)
    if reused:
        print(f"resuming: {reused} of {len(named)} proteins have finished predictions with the same inputs, model "
              f"and settings (receipts {{protein}}.{RECEIPT_STAGE}.done.json); {len(named) - reused} to predict")
    rows = []
    start = time.perf_counter()
    for batch, group in enumerate(groups):
        if batch not in pending:
            rows.extend(done[i] for i in group)
            continue
        rows += _predict_batch(network, [named[i] for i in group], [keys[i] for i in group], options,
                               calibration, out_dir, batch=batch, batches=len(groups), device=device, start=start)
    if stats:
        write_table(stats, pd.DataFrame(rows, columns=PREDICTION_STATS.schema.names), PREDICTION_STATS)
    return 0


def _predict_batch(network: ThreeTrackNetwork, named: Sequence[tuple[str, str | Path]], keys: Sequence[str],
                   options: PredictOptions, calibration: PlddtCalibration | None, out_dir: Path, *, batch: int,
                   batches: int, device: torch.device, start: float) -> list[dict]:
    """One pass of the plan: its old receipts dropped, its inputs loaded, the proteins predicted, their files and
    receipts written; their stats rows."""
    for name, _ in named:
        drop_receipt(out_dir, name, RECEIPT_STAGE)
    items = [(name, load_inputs(path)) for name, path in named]
    began = time.perf_counter()
    predictions = predict_group(network, items, options, calibration=calibration)
    seconds = time.perf_counter() - began
    residues = sum(len(prediction.sequence) for _, prediction in predictions)
    rows = []
    for (name, prediction), key in zip(predictions, keys):
        paths = write_prediction(out_dir, name, prediction)
        length = len(prediction.sequence)
        row = {"protein": name, "length": length, "mean_plddt": float(prediction.plddt.mean()),
               "n_crops": prediction.n_crops, "batch": batch, "batch_size": len(named),
               "seconds": seconds * length / residues, "device": device.type}
        write_receipt(out_dir, name, key, list(paths.values()), row)
        rows.append(row)
        print(f"{paths['pdb']}: L={length} crops={prediction.n_crops} batch {batch + 1}/{batches} "
              f"({len(named)} proteins) mean pLDDT={float(prediction.plddt.mean()):.1f} "
              f"({seconds:.1f} s this batch, {time.perf_counter() - start:.0f} s since the start, {device})")
    return rows
