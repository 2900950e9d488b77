"""Sub-command ``trackfold predict``.

``trackfold predict --model CKPT --out-dir DIR [--device auto|cpu|cuda] [--window N] [--seed N]
[--max-msa N] [--batch-size N] [--threads N] [--embeddings] FEATURES.npz|A3M...`` writes per protein (the
file stem: ``X.npz`` / ``X.a3m`` -> ``X``) the files of :mod:`workflow_lib.inference.outputs`: ``{protein}.pdb``,
``{protein}.pred.npz``, ``{protein}.residues.parquet`` and, with ``--embeddings``, ``{protein}.embeddings.npz``.

A3M inputs are turned into features on the fly with the feature stage's defaults
(:func:`~workflow_lib.features.build.build_features`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from workflow_lib.cli_args import positive_int, unique_outputs
from workflow_lib.features.build import build_features, read_features
from workflow_lib.inference.outputs import write_prediction
from workflow_lib.inference.predict import (
    DEFAULT_MAX_MSA,
    DEFAULT_WINDOW,
    PredictOptions,
    check_feature_widths,
    predict_many,
    resolve_device,
)
from workflow_lib.inference.stitch import MIN_WINDOW
from workflow_lib.model.checkpoint import load_checkpoint
from workflow_lib.search.allocator import NEVER_TRIM, keep_freed_memory
from workflow_lib.seqio.msa import a3m_stem


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
