"""Sub-command ``trackfold predict``.

``trackfold predict --out-dir DIR [--model CKPT] [--device auto|cpu|cuda] [--window N] [--seed N]
[--max-msa N] [--batch-size N] [--max-tokens N] [--threads N] [--embeddings] [--fold distogram|network]
[--precision float32|bfloat16] [--stats TABLE]
FEATURES.npz|A3M...`` writes per protein (the file stem: ``X.npz`` / ``X.a3m`` -> ``X``) the files of
:mod:`workflow_lib.inference.outputs` and, last, with ``--stats``, one
:data:`~workflow_lib.schemas.prediction.PREDICTION_STATS` row per protein (the workflow's per-chunk output).

The inputs' lengths are read first (a feature file's ``residue_index`` only), the forward passes planned by
:func:`~workflow_lib.inference.predict.plan_batches`, and each pass's inputs loaded when it runs, so memory
holds one pass's features at a time.

A rerun resumes: after a protein's files, a receipt ``{protein}.predict.done.json``
(:mod:`workflow_lib.seqio.receipts`) records the fingerprints of its input and of the checkpoint, the settings
and its stats row; a pass whose proteins all have a matching receipt (and their files) is not run again, so a
chunk job killed after hours keeps what it finished. ``--no-resume`` recomputes everything.

Every option that decides a prediction has the default of the workflow's config section ``predict``
(:class:`~workflow_lib.inference.settings.PredictSettings`), and ``--model`` defaults to the shipped
checkpoint, so a protein predicted by hand gets the structure the workflow gives it.

pLDDT (with ``--fold distogram``, the default) goes through the pLDDT calibration the checkpoint carries, when it carries
one (:class:`~workflow_lib.inference.confidence.PlddtCalibration`).

A3M inputs are turned into features on the fly with the feature stage's defaults
(:func:`~workflow_lib.features.build.build_features`).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from workflow_lib.cli_args import add_chunk_options, chunk_inputs, non_negative_int, positive_int, unique_outputs
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
from workflow_lib.inference.settings import (
    DEFAULT_MAX_MSA,
    DEFAULT_MODEL,
    DEFAULT_WINDOW,
    FOLD_MODES,
    HEADS_6D,
    PRECISIONS,
    PredictSettings,
    default_model_path,
)
from workflow_lib.inference.stitch import MIN_WINDOW
from workflow_lib.model.checkpoint import load_checkpoint
from workflow_lib.schemas.io import write_table
from workflow_lib.schemas.prediction import PREDICTION_STATS
from workflow_lib.seqio.receipts import drop_receipt, file_fingerprint, read_receipt, work_key, write_receipt
from workflow_lib.search.allocator import NEVER_TRIM, keep_freed_memory
from workflow_lib.seqio.msa import a3m_stem, read_a3m


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


def _pair_heads(text: str) -> tuple[str, ...]:
    if text.strip() == "none":
        return ()
    heads = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(set(heads) - set(HEADS_6D))
    if unknown or not heads:
        raise argparse.ArgumentTypeError(f"expected 'none' or names among {', '.join(HEADS_6D)}, got {text!r}")
    return heads


def _window(text: str) -> int:
    value = int(text)
    if value < MIN_WINDOW:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_WINDOW}, got {value}")
    return value


DEFAULTS = PredictSettings()
"""The defaults of every option that decides a prediction: those of the workflow's config section ``predict``."""

RECEIPT_STAGE = "predict"
"""Receipts ``{protein}.predict.done.json`` (:mod:`workflow_lib.seqio.receipts`): a rerun skips those proteins."""


def _receipt_settings(options: PredictOptions, device: torch.device, length: int) -> dict:
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


def register(subparsers: argparse._SubParsersAction) -> None:
    predict = subparsers.add_parser("predict", help="feature files or A3Ms -> predicted structures (PDB, 6D, pLDDT)")
    predict.add_argument("inputs", nargs="+", help="feature files ({protein}.npz) or A3M alignments, or with "
                                                   "--chunk-plan the folder of feature files")
    predict.add_argument("--model", default=None,
                         help=f"checkpoint (.pt) written by trackfold train (default: the shipped {DEFAULT_MODEL})")
    predict.add_argument("--out-dir", required=True, help="directory for {protein}.pdb, .pred.npz, .residues.parquet")
    predict.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                         help="auto: CUDA when present, else CPU (default auto)")
    predict.add_argument("--window", type=_window, default=DEFAULT_WINDOW,
                         help=f"residues per network call; longer proteins are cropped and stitched "
                              f"(default {DEFAULT_WINDOW})")
    predict.add_argument("--max-msa", type=positive_int, default=DEFAULT_MAX_MSA,
                         help=f"MSA rows per network call, query included (default {DEFAULT_MAX_MSA})")
    predict.add_argument("--seed", type=int, default=DEFAULTS.seed,
                         help=f"seed of the MSA row sample and of torch (default {DEFAULTS.seed})")
    predict.add_argument("--batch-size", type=positive_int, default=DEFAULTS.batch_size,
                         help=f"at most this many proteins of similar length per forward pass "
                              f"(default {DEFAULTS.batch_size})")
    predict.add_argument("--max-tokens", type=non_negative_int, default=DEFAULTS.max_tokens,
                         help=f"at most this many padded residues (proteins x longest length) per forward pass; "
                              f"0: no limit (default {DEFAULTS.max_tokens})")
    predict.add_argument("--chunk-size", type=positive_int, default=None,
                         help="attention chunk size (less memory, same result); default: the checkpoint's")
    predict.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's)")
    predict.add_argument("--embeddings", action="store_true",
                         help="also write {protein}.embeddings.npz (single and pair representations)")
    predict.add_argument("--pair-heads", type=_pair_heads, default=DEFAULTS.pair_heads,
                         help="6D probabilities written to .pred.npz: comma-separated among dist, omega, theta, "
                              "phi, or 'none' (about 260 bytes per residue pair for all four; default all)")
    predict.add_argument("--fold", choices=FOLD_MODES, default=DEFAULTS.fold,
                         help=f"backbone folded from the predicted distogram by restraint minimisation (distogram: "
                              f"O(L^2), calibrated pLDDT) or the network's structure module (network) "
                              f"(default {DEFAULTS.fold})")
    predict.add_argument("--precision", choices=PRECISIONS, default=DEFAULTS.precision,
                         help=f"network precision: bfloat16 runs it under autocast (faster on CPUs with "
                              f"AVX512-BF16 and on GPUs; frame geometry stays float32) (default {DEFAULTS.precision})")
    add_chunk_options(predict, "{protein}.npz")
    predict.add_argument("--stats", help="also write this table: one row per protein (length, mean pLDDT, "
                                         "crops, pass, seconds), after every prediction's files")
    predict.add_argument("--no-resume", action="store_true",
                         help="recompute every protein, even those whose receipt ({protein}.predict.done.json) "
                              "shows the same inputs, model and settings")
    predict.set_defaults(handler=run_predict)


def run_predict(args: argparse.Namespace) -> int:
    names = unique_outputs(chunk_inputs(args.inputs, args.chunk_plan, args.chunk, ".npz"), protein_name, ".pdb")
    keep_freed_memory(trim_threshold=NEVER_TRIM)  # each crop reuses the last one's freed activations
    if args.threads:
        torch.set_num_threads(args.threads)
    options = PredictOptions(window=args.window, max_msa=args.max_msa, seed=args.seed, device=args.device,
                             batch_size=args.batch_size, max_tokens=args.max_tokens, chunk_size=args.chunk_size,
                             embeddings=args.embeddings, pair_heads=args.pair_heads, fold=args.fold,
                             precision=args.precision)
    device = resolve_device(options.device)
    model_path = args.model or default_model_path()
    model, extra = load_checkpoint(model_path, map_location=device)
    calibration = PlddtCalibration.from_extra(extra)
    check_feature_widths(model.config, where=str(model_path))
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    named = list(names.items())
    lengths = [input_length(path) for _, path in named]
    groups = plan_batches(lengths, options)
    model_print = file_fingerprint(model_path)
    keys = [work_key(RECEIPT_STAGE, {"inputs": file_fingerprint(path), "model": model_print},
                     _receipt_settings(options, device, length))
            for (_, path), length in zip(named, lengths)]
    done = [None if args.no_resume else read_receipt(out_dir, name, key) for (name, _), key in zip(named, keys)]
    pending = {batch for batch, group in enumerate(groups) if any(done[i] is None for i in group)}
    reused = len(named) - sum(len(groups[batch]) for batch in pending)
    if reused:
        print(f"resuming: {reused} of {len(named)} proteins have finished predictions with the same inputs, model "
              f"and settings (receipts {{protein}}.{RECEIPT_STAGE}.done.json); {len(named) - reused} to predict")
    stats = []
    start = time.perf_counter()
    for batch, group in enumerate(groups):
        if batch not in pending:
            stats.extend(done[i] for i in group)
            continue
        for i in group:
            drop_receipt(out_dir, named[i][0], RECEIPT_STAGE)
        items = [(named[i][0], load_inputs(named[i][1])) for i in group]
        began = time.perf_counter()
        predictions = predict_group(model, items, options, calibration=calibration)
        seconds = time.perf_counter() - began
        residues = sum(len(prediction.sequence) for _, prediction in predictions)
        for (name, prediction), key in zip(predictions, (keys[i] for i in group)):
            paths = write_prediction(out_dir, name, prediction)
            length = len(prediction.sequence)
            row = {"protein": name, "length": length, "mean_plddt": float(prediction.plddt.mean()),
                   "n_crops": prediction.n_crops, "batch": batch, "batch_size": len(group),
                   "seconds": seconds * length / residues, "device": device.type}
            write_receipt(out_dir, name, key, list(paths.values()), row)
            stats.append(row)
            print(f"{paths['pdb']}: L={length} crops={prediction.n_crops} batch {batch + 1}/{len(groups)} "
                  f"({len(group)} proteins) mean pLDDT={float(prediction.plddt.mean()):.1f} "
                  f"({seconds:.1f} s this batch, {time.perf_counter() - start:.0f} s since the start, {device})")
    if args.stats:
        write_table(args.stats, pd.DataFrame(stats, columns=PREDICTION_STATS.schema.names), PREDICTION_STATS)
    return 0
