"""Sub-commands ``trackfold train-data`` and ``trackfold train`` (see :mod:`workflow_lib.model.training`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from workflow_lib.cli_args import positive_int
from workflow_lib.errors import InputError
from workflow_lib.model.config import PRESETS
from workflow_lib.model.training import (TRAINING_CHAINS, TrainConfig, load_training_chains, prepare_training_data,
                                         train, training_model_config)
from workflow_lib.seqio.schemas import read_frame



def _override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("train-data", help="structure files -> training chains, identity split, A3Ms")
    data.add_argument("structures", nargs="+", help="PDB/mmCIF files (plain or .gz)")
    data.add_argument("--out-dir", required=True, help="writes chains.parquet, split.json, a3m/{name}.a3m")
    data.add_argument("--min-length", type=positive_int, default=40)
    data.add_argument("--max-length", type=positive_int, default=400)
    data.add_argument("--identity", type=float, default=0.3,
                      help="no validation chain is more identical than this to a training chain (default 0.3)")
    data.add_argument("--val-fraction", type=float, default=0.1)
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--cpus", type=positive_int, default=1)
    data.set_defaults(handler=run_train_data)

    tr = subparsers.add_parser("train", help="train the three-track network (resumes from OUT_DIR/train_state.pt)")
    tr.add_argument("--chains", required=True, help="chains.parquet from train-data")
    tr.add_argument("--features-dir", required=True, help="directory of {name}.npz feature files")
    tr.add_argument("--out-dir", required=True, help="train_state.pt, metrics.*, learning_curve.png, model.pt")
    tr.add_argument("--preset", default="small", choices=sorted(PRESETS))
    tr.add_argument("--set", dest="overrides", action="append", type=_override, default=[], metavar="KEY=VALUE",
                    help="model config override (repeatable), e.g. --set dropout=0.0")
    defaults = TrainConfig(model=training_model_config("tiny").to_dict())
    for name in ("steps", "crop_size", "max_msa_rows", "checkpoint_every", "val_every", "val_max_chains",
                 "val_crop", "redraw_every", "warmup_steps", "seed"):
        tr.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    for name in ("lr", "weight_decay", "clip_norm", "min_lr_fraction"):
        tr.add_argument(f"--{name.replace('_', '-')}", type=float, default=getattr(defaults, name))
    tr.add_argument("--threads", type=positive_int, default=1, help="torch intra-op threads (default 1)")
    tr.add_argument("--time-limit-min", type=float, default=None,
                    help="stop at the first step past this many minutes (then validate and export)")
    tr.add_argument("--stop-after", type=positive_int, default=None, help="stop after this step (resumable)")
    tr.add_argument("--max-train-chains", type=positive_int, default=None, help="use only the first N train chains")
    tr.add_argument("--no-resume", action="store_true", help="start over even if a training state exists")
    tr.set_defaults(handler=run_train)


def run_train_data(args: argparse.Namespace) -> int:
    table = prepare_training_data(args.structures, args.out_dir, min_length=args.min_length,
                                  max_length=args.max_length, identity=args.identity, val_fraction=args.val_fraction,
                                  seed=args.seed, cpus=args.cpus)
    counts = table["split"].value_counts().to_dict()
    print(f"{args.out_dir}/chains.parquet: {len(table)} chains in {table['cluster'].nunique()} clusters; "
          f"train {counts.get('train', 0)}, validation {counts.get('validation', 0)}")
    return 0


def run_train(args: argparse.Namespace) -> int:
    torch.set_num_threads(args.threads)
    model = training_model_config(args.preset, **dict(args.overrides))
    config = TrainConfig(model=model.to_dict(), steps=args.steps, crop_size=args.crop_size,
                         max_msa_rows=args.max_msa_rows, lr=args.lr, warmup_steps=args.warmup_steps,
                         min_lr_fraction=args.min_lr_fraction, weight_decay=args.weight_decay,
                         clip_norm=args.clip_norm, checkpoint_every=args.checkpoint_every, val_every=args.val_every,
                         val_max_chains=args.val_max_chains, val_crop=args.val_crop, redraw_every=args.redraw_every,
                         seed=args.seed)
    table = read_frame(args.chains, TRAINING_CHAINS)
    train_table = table[table["split"] == "train"]
    if args.max_train_chains:
        train_table = train_table.head(args.max_train_chains)
    val_table = table[table["split"] == "validation"]
    if train_table.empty:
        raise InputError("no training chains in the table", path=args.chains)
    train_chains = load_training_chains(train_table, args.features_dir)
    val_chains = load_training_chains(val_table, args.features_dir)
    result = train(config, train_chains, train_table["cluster"].tolist(), val_chains, args.out_dir,
                   resume=not args.no_resume, stop_after=args.stop_after,
                   time_limit_s=None if args.time_limit_min is None else 60.0 * args.time_limit_min,
                   export_extra={"preset": args.preset, "chains_table": str(Path(args.chains))})
    print(f"{args.out_dir}: {result.step} steps, {result.wall_s:.0f} s"
          + (f", model {result.model_path}" if result.model_path else " (stopped, resumable)"))
    if result.validation is not None and len(result.validation):
        v = result.validation
        print(f"validation ({len(v)} chains): lDDT-Cα {v['lddt_ca'].mean():.3f}, distogram top-1 "
              f"{v['dist_top1'].mean():.3f}, P@L/5 long {v['contact_precision_long'].mean():.3f}")
    return 0
