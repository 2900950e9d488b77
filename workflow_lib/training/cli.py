"""Sub-commands ``trackfold train-data`` (:mod:`workflow_lib.training.data`), ``trackfold train``
(:mod:`workflow_lib.training.loop`) and ``trackfold train-pack`` (:mod:`workflow_lib.training.pack`), and the
training workflow's glue (rules/train.smk): ``train-batch``, ``train-select``, ``train-hits``, ``train-targets``
and ``train-card`` (:mod:`workflow_lib.training.card`).

The job bodies are :mod:`workflow_lib.training.jobs`; this module parses their arguments."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from workflow_lib.cli_args import positive_int
from workflow_lib.errors import InputError
from workflow_lib.model.config import PRESETS
from workflow_lib.training import jobs
from workflow_lib.training.config import TrainConfig, training_model_config
from workflow_lib.training.losses import LossWeights
from workflow_lib.training.pack import PACK_MAX_TEMPLATES, TEMPLATE_MAX_IDENTITY
from workflow_lib.training.settings import (CHAIN_MAX_LENGTH, CHAIN_MIN_LENGTH, PACK_MAX_ROWS, SPLIT_IDENTITY,
                                            VAL_FRACTION)


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
    data.add_argument("structures", nargs="+",
                      help="PDB/mmCIF files (plain or .gz) or backbone archives (backbone.npz with its FASTA files)")
    data.add_argument("--out-dir", required=True, help="writes chains.parquet, split.json, a3m/{name}.a3m")
    data.add_argument("--min-length", type=positive_int, default=CHAIN_MIN_LENGTH,
                      help="shortest chain kept, in residues (default %(default)s)")
    data.add_argument("--max-length", type=positive_int, default=CHAIN_MAX_LENGTH,
                      help="longest chain kept, in residues (default %(default)s)")
    data.add_argument("--identity", type=float, default=SPLIT_IDENTITY,
                      help="no validation chain is more identical than this to a training chain "
                           "(default %(default)s)")
    data.add_argument("--val-fraction", type=float, default=VAL_FRACTION,
                      help="fraction of the chains (whole clusters) held out for validation (default %(default)s)")
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--cpus", type=positive_int, default=1)
    data.add_argument("--names", help="a file of chain names (XXXX_C), one per line: use only these chains")
    data.add_argument("--val-chains", type=positive_int, default=None,
                      help="draw this many validation chains and leave out every chain close to one, instead of "
                           "clustering all against all (for thousands of chains)")
    data.add_argument("--val-names", help="a file of chain names: these are the validation chains (as "
                                          "--val-chains, with a fixed validation set)")
    data.set_defaults(handler=run_train_data)

    tr = subparsers.add_parser("train", help="train the three-track network (resumes from OUT_DIR/train_state.pt)")
    tr.add_argument("--chains", help="chains.parquet from train-data (with --features-dir)")
    tr.add_argument("--features-dir", help="directory of {name}.npz feature files")
    tr.add_argument("--pack", help="a training pack (trackfold train-pack) instead of --chains/--features-dir")
    tr.add_argument("--out-dir", required=True, help="train_state.pt, metrics.*, learning_curve.png, model.pt")
    tr.add_argument("--preset", default="small", choices=sorted(PRESETS))
    tr.add_argument("--set", dest="overrides", action="append", type=_override, default=[], metavar="KEY=VALUE",
                    help="model config override (repeatable), e.g. --set dropout=0.0")
    defaults = TrainConfig(model=training_model_config("tiny").to_dict())
    for name in ("steps", "crop_size", "batch_size", "max_msa_rows", "checkpoint_every", "val_every", "val_max_chains",
                 "val_crop", "redraw_every", "warmup_steps", "seed"):
        tr.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    for name in ("lr", "weight_decay", "clip_norm", "min_lr_fraction"):
        tr.add_argument(f"--{name.replace('_', '-')}", type=float, default=getattr(defaults, name))
    tr.add_argument("--max-templates", type=int, default=defaults.max_templates,
                    help="templates per crop from the pack's template hits (default 0: none)")
    tr.add_argument("--template-dropout", type=float, default=defaults.template_dropout,
                    help=f"probability of leaving out each template of a training crop "
                         f"(default {defaults.template_dropout})")
    tr.add_argument("--self-template-rate", type=float, default=defaults.self_template_rate,
                    help="probability that a training crop gets its own structure (perturbed) as its first "
                         f"template (default {defaults.self_template_rate})")
    tr.add_argument("--neff-sampling", type=float, default=defaults.neff_sampling,
                    help="draw a training chain with probability ∝ Neff^VALUE / cluster size (default "
                         f"{defaults.neff_sampling}: a cluster, then a member, uniformly)")
    tr.add_argument("--precision", choices=("float32", "bfloat16"), default=defaults.precision,
                    help="bfloat16: the forward pass under autocast, losses and weights in float32 (default float32)")
    tr.add_argument("--loss", dest="loss_weights", action="append", type=_override, default=[],
                    metavar="KEY=VALUE", help="loss weight override (repeatable), e.g. --loss violation=0")
    tr.add_argument("--init-model", default="",
                    help="warm start from this checkpoint's weights (same architecture); ignored when resuming")
    tr.add_argument("--init-blocks", default=defaults.init_blocks, metavar="TWO_TRACK+THREE_TRACK",
                    help="with --init-model: start a shallower network from these of its blocks, e.g. 0,2+1 "
                         "(two-track blocks 0 and 2, three-track block 1; set n_blocks_2track/n_blocks_3track "
                         "to match)")
    tr.add_argument("--threads", type=positive_int, default=1, help="torch intra-op threads (default 1)")
    tr.add_argument("--time-limit-min", type=float, default=None,
                    help="stop at the first step past this many minutes (then validate and export)")
    tr.add_argument("--stop-after", type=positive_int, default=None, help="stop after this step (resumable)")
    tr.add_argument("--max-train-chains", type=positive_int, default=None, help="use only the first N train chains")
    tr.add_argument("--no-resume", action="store_true", help="start over even if a training state exists")
    tr.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu",
                    help="cpu (default), cuda, or auto: CUDA when torch sees a GPU")
    tr.set_defaults(handler=run_train)

    pk = subparsers.add_parser("train-pack", help="the chains, MSAs and backbones of a training table in one file",
                               description="A compact file for training on another machine (a GPU node): MSA "
                                           "rows, weights and backbones; trackfold train --pack computes the "
                                           "co-evolution features there.")
    pk.add_argument("--chains", required=True, help="chains.parquet from train-data")
    pk.add_argument("--msa-dir", nargs="+", required=True, help="directories holding {name}.a3m (first wins)")
    pk.add_argument("--max-rows", type=positive_int, default=PACK_MAX_ROWS,
                    help="MSA rows kept per chain, query included (default %(default)s, as train.pack_max_rows)")
    pk.add_argument("--out", required=True, help="the pack (.npz)")
    pk.add_argument("--template-hits", help="folder of {name}.hits.parquet (trackfold templates search of the "
                                            "chains' A3Ms against --templates): pack each chain's templates")
    pk.add_argument("--templates", help="the template database the hits were searched against")
    pk.add_argument("--max-templates", type=int, default=PACK_MAX_TEMPLATES,
                    help=f"usable hits packed per chain, of which a crop draws train --max-templates "
                         f"(default {PACK_MAX_TEMPLATES})")
    pk.add_argument("--template-max-identity", type=float, default=TEMPLATE_MAX_IDENTITY,
                    help="leave out hits more identical than this over their aligned columns (default "
                         f"{TEMPLATE_MAX_IDENTITY}); a chain's own identity cluster and, for training chains, "
                         "validation chains are always left out")
    pk.set_defaults(handler=run_train_pack)

    batch = subparsers.add_parser(
        "train-batch", help="one MSA batch of the training chains: query FASTA, or checked precomputed A3Ms",
        description="Chain i of chains.parquet belongs to batch i mod BATCHES (rules/train.smk). Writes the "
                    "batch's chains to --fasta for `trackfold msa`; with --precomputed, copies each chain's "
                    "{name}.a3m (query row checked against the chain) into --out-dir and writes "
                    "OUT_DIR/msa_stats.parquet instead (also for an empty batch), leaving --fasta empty.")
    batch.add_argument("--chains", required=True, help="chains.parquet from train-data")
    batch.add_argument("--batch", type=int, required=True)
    batch.add_argument("--batches", type=positive_int, required=True)
    batch.add_argument("--fasta", required=True, help="query FASTA to write (empty when nothing to search)")
    batch.add_argument("--out-dir", required=True, help="the batch's A3M directory")
    batch.add_argument("--precomputed", nargs="+", default=[], metavar="DIR",
                       help="directories (or glob patterns of directories) of {name}.a3m, searched in order")
    batch.set_defaults(handler=run_train_batch)

    select = subparsers.add_parser(
        "train-select", help="the A3Ms of one split of a training table found in a folder, one path per line",
        description="Lists DIR/{name}.a3m for every chain of chains.parquet in --split that has one there (the "
                    "training workflow's feature jobs: with a pack, only the validation chains need feature "
                    "files). Writes --out atomically, empty when no chain matches.")
    select.add_argument("--chains", required=True, help="chains.parquet from train-data")
    select.add_argument("--msa-dir", required=True, help="folder of {name}.a3m (one MSA batch)")
    select.add_argument("--split", default="all", choices=("all", "train", "validation"))
    select.add_argument("--out", required=True, help="the list to write")
    select.set_defaults(handler=run_train_select)

    usable = subparsers.add_parser(
        "train-hits", help="the template hits a training table's chains may use, as hits tables",
        description="For each chain of --a3m-list (a train-select list: the chain is the file's stem), writes "
                    "OUT_DIR/{name}.hits.parquet with the hits of HITS/{name}.hits.parquet that a training pack "
                    "would keep: never the chain itself or its identity cluster, none above --max-identity, no "
                    "validation chain for a training chain. trackfold features reads them (--template-hits), so "
                    "held-out chains are predicted with the templates the network was allowed to learn from.")
    usable.add_argument("--chains", required=True, help="chains.parquet from train-data")
    usable.add_argument("--hits", required=True, help="folder of {name}.hits.parquet (trackfold templates search)")
    usable.add_argument("--a3m-list", required=True, help="the chains' A3M paths, one per line (train-select)")
    usable.add_argument("--out-dir", required=True, help="folder for the usable hits")
    usable.add_argument("--max-identity", type=float, default=TEMPLATE_MAX_IDENTITY,
                        help=f"leave out hits more identical than this (default {TEMPLATE_MAX_IDENTITY})")
    usable.set_defaults(handler=run_train_hits)

    targets = subparsers.add_parser(
        "train-targets", help="targets TSV (trackfold evaluate --targets) and predict inputs of a split")
    targets.add_argument("--chains", required=True, help="chains.parquet from train-data")
    targets.add_argument("--batches", type=positive_int, required=True, help="MSA batches (train-batch)")
    targets.add_argument("--msa-dir", required=True, help="directory holding batch_NNN/{name}.a3m")
    targets.add_argument("--features-dir", required=True, help="directory of {name}.npz")
    targets.add_argument("--pred-dir", required=True, help="where trackfold predict writes {name}.pdb")
    targets.add_argument("--split", default="validation", choices=("validation", "train"))
    targets.add_argument("--out", required=True, help="targets TSV")
    targets.add_argument("--inputs-list", required=True, help="feature files to predict, one per line")
    targets.set_defaults(handler=run_train_targets)

    card = subparsers.add_parser("train-card", help="Markdown model card of a training workflow run")
    card.add_argument("--data-dir", required=True, help="chains.parquet and split.json")
    card.add_argument("--run-dir", required=True, help="trackfold train output (model.pt, metrics.json, ...)")
    card.add_argument("--msa-stats", nargs="*", default=[], help="msa_stats.parquet of every batch")
    card.add_argument("--evaluation-dir", help="trackfold evaluate output (evaluation.parquet)")
    card.add_argument("--settings", default="{}", help="workflow settings as JSON (shown in the card)")
    card.add_argument("--benchmarks", help="Snakemake benchmark folder of the run (wall time per stage)")
    card.add_argument("--pack", help="the run's training pack (trackfold train --pack): its chains and templates")
    card.add_argument("--out", required=True, help="MODEL_CARD.md")
    card.set_defaults(handler=run_train_card)


def run_train_data(args: argparse.Namespace) -> int:
    return jobs.train_data_job(args.structures, args.out_dir, min_length=args.min_length, max_length=args.max_length,
                               identity=args.identity, val_fraction=args.val_fraction, seed=args.seed,
                               cpus=args.cpus, names=args.names, val_chains=args.val_chains,
                               val_names=args.val_names)


def run_train_pack(args: argparse.Namespace) -> int:
    return jobs.train_pack_job(args.chains, args.msa_dir, args.out, max_rows=args.max_rows,
                               template_hits=args.template_hits, templates=args.templates,
                               max_templates=args.max_templates, template_max_identity=args.template_max_identity)


def _train_config(args: argparse.Namespace) -> TrainConfig:
    """The options' training settings, with the preset's model config and its ``--set`` overrides."""
    model = training_model_config(args.preset, **dict(args.overrides))
    return TrainConfig(model=model.to_dict(), steps=args.steps, crop_size=args.crop_size, batch_size=args.batch_size,
                       max_msa_rows=args.max_msa_rows, max_templates=args.max_templates,
                       template_dropout=args.template_dropout, self_template_rate=args.self_template_rate,
                       neff_sampling=args.neff_sampling, lr=args.lr, warmup_steps=args.warmup_steps,
                       min_lr_fraction=args.min_lr_fraction, weight_decay=args.weight_decay,
                       clip_norm=args.clip_norm, checkpoint_every=args.checkpoint_every, val_every=args.val_every,
                       val_max_chains=args.val_max_chains, val_crop=args.val_crop, redraw_every=args.redraw_every,
                       seed=args.seed, precision=args.precision, init_model=str(args.init_model or ""),
                       init_blocks=args.init_blocks,
                       loss_weights={**dataclasses.asdict(LossWeights()), **dict(args.loss_weights)})


def run_train(args: argparse.Namespace) -> int:
    return jobs.train_job(_train_config(args), args.out_dir, preset=args.preset, chains=args.chains,
                          features_dir=args.features_dir, pack=args.pack, threads=args.threads,
                          resume=not args.no_resume, stop_after=args.stop_after, time_limit_min=args.time_limit_min,
                          max_train_chains=args.max_train_chains, device=args.device)


def run_train_batch(args: argparse.Namespace) -> int:
    return jobs.train_batch_job(args.chains, batch=args.batch, batches=args.batches, fasta=args.fasta,
                                out_dir=args.out_dir, precomputed=args.precomputed)


def run_train_select(args: argparse.Namespace) -> int:
    return jobs.train_select_job(args.chains, msa_dir=args.msa_dir, split=args.split, out=args.out)


def run_train_hits(args: argparse.Namespace) -> int:
    return jobs.train_hits_job(args.chains, hits=args.hits, a3m_list=args.a3m_list, out_dir=args.out_dir,
                               max_identity=args.max_identity)


def run_train_targets(args: argparse.Namespace) -> int:
    return jobs.train_targets_job(args.chains, batches=args.batches, msa_dir=args.msa_dir,
                                  features_dir=args.features_dir, pred_dir=args.pred_dir, split=args.split,
                                  out=args.out, inputs_list=args.inputs_list)


def run_train_card(args: argparse.Namespace) -> int:
    try:
        settings = json.loads(args.settings)
    except json.JSONDecodeError as err:
        raise InputError(f"--settings is not JSON: {err}") from None
    return jobs.train_card_job(args.out, data_dir=args.data_dir, run_dir=args.run_dir, msa_stats=args.msa_stats,
                               evaluation_dir=args.evaluation_dir, settings=settings, benchmarks=args.benchmarks,
                               pack=args.pack)
