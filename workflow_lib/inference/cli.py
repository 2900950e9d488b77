"""Sub-command ``trackfold predict``.

``trackfold predict --out-dir DIR [--model CKPT] [--device auto|cpu|cuda] [--window N] [--seed N]
[--max-msa N] [--batch-size N] [--max-tokens N] [--threads N] [--embeddings] [--fold distogram|network]
[--precision float32|bfloat16] [--crop-pairs all|contacts|neighbours] [--template-weight W] [--stats TABLE]
[--no-resume]
FEATURES.npz|A3M...`` writes per protein (the file stem: ``X.npz`` / ``X.a3m`` -> ``X``) the files of
:mod:`workflow_lib.inference.outputs` and, last, with ``--stats``, one
:data:`~workflow_lib.schemas.prediction.PREDICTION_STATS` row per protein (the workflow's per-chunk output). A
rerun resumes from the receipts ``{protein}.predict.done.json``; ``--no-resume`` recomputes everything.

The job body (batching, receipts and resume) is :mod:`workflow_lib.inference.jobs`; this module parses its
arguments. Every option that decides a prediction has the default of the workflow's config section ``predict``
(:class:`~workflow_lib.inference.settings.PredictSettings`), and ``--model`` defaults to the shipped
checkpoint, so a protein predicted by hand gets the structure the workflow gives it.
"""

from __future__ import annotations

import argparse

from workflow_lib.cli_args import add_chunk_options, chunk_inputs, non_negative_int, positive_int, unique_outputs
from workflow_lib.inference import jobs
from workflow_lib.inference.predict import PredictOptions
from workflow_lib.inference.settings import (
    CROP_PAIRS,
    DEFAULT_MAX_MSA,
    DEFAULT_MODEL,
    DEFAULT_WINDOW,
    FOLD_MODES,
    HEADS_6D,
    PRECISIONS,
    PredictSettings,
)
from workflow_lib.inference.stitch import MIN_WINDOW


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
    predict.add_argument("--crop-pairs", choices=CROP_PAIRS, default=DEFAULTS.crop_pairs,
                         help=f"for proteins longer than the window: run every pair of half-window segments (all), "
                              f"the neighbouring segments plus those a template puts in contact (contacts), or the "
                              f"neighbouring segments alone (neighbours) (default {DEFAULTS.crop_pairs})")
    predict.add_argument("--template-weight", type=float, default=DEFAULTS.template_weight,
                         help=f"with --fold distogram: how much of the best template's own distances the fold's "
                              f"distogram takes, scaled by the template's identity over the query's length (none "
                              f"under 20%%, all of it from 60%%); 0: the network's distogram alone "
                              f"(default {DEFAULTS.template_weight})")
    predict.add_argument("--template-anchor", type=float, default=DEFAULTS.template_anchor,
                         help=f"with --fold distogram: weight of the best template's own Ca-Ca distances (pairs "
                              f"within 15 A) in the fold, scaled by its identity as --template-weight is; they hold "
                              f"a close template's geometry finer than the distogram's bins and decide the hand; "
                              f"0: off (default {DEFAULTS.template_anchor})")
    add_chunk_options(predict, "{protein}.npz")
    predict.add_argument("--stats", help="also write this table: one row per protein (length, mean pLDDT, "
                                         "crops, pass, seconds), after every prediction's files")
    predict.add_argument("--no-resume", action="store_true",
                         help="recompute every protein, even those whose receipt ({protein}.predict.done.json) "
                              "shows the same inputs, model and settings")
    predict.set_defaults(handler=run_predict)


def run_predict(args: argparse.Namespace) -> int:
    names = unique_outputs(chunk_inputs(args.inputs, args.chunk_plan, args.chunk, ".npz"), jobs.protein_name, ".pdb")
    options = PredictOptions(window=args.window, max_msa=args.max_msa, seed=args.seed, device=args.device,
                             batch_size=args.batch_size, max_tokens=args.max_tokens, chunk_size=args.chunk_size,
                             embeddings=args.embeddings, pair_heads=args.pair_heads, fold=args.fold,
                             precision=args.precision, crop_pairs=args.crop_pairs,
                             template_weight=args.template_weight, template_anchor=args.template_anchor)
    return jobs.predict_job(names, out_dir=args.out_dir, options=options, model=args.model, threads=args.threads,
                            stats=args.stats, resume=not args.no_resume)
