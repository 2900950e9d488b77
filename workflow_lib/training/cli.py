"""Sub-commands ``trackfold train-data`` (:mod:`workflow_lib.training.data`) and ``trackfold train``
(:mod:`workflow_lib.training.loop`), and the training workflow's glue (rules/train.smk): ``train-batch``,
``train-targets`` and ``train-card`` (:mod:`workflow_lib.training.card`)."""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from workflow_lib.cli_args import positive_int
from workflow_lib.errors import InputError
from workflow_lib.features.templates import DEFAULT_MAX_TEMPLATES
from workflow_lib.model.config import PRESETS
from workflow_lib.schemas.io import read_frame, write_table
from workflow_lib.schemas.search import MSA_STATS
from workflow_lib.schemas.training import TRAINING_CHAINS
from workflow_lib.search.iterative import msa_statistics
from workflow_lib.seqio.atomic import atomic_path, write_text_atomic
from workflow_lib.seqio.fasta import safe_name, write_fasta
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.training.card import shown_path
from workflow_lib.training.config import TrainConfig, training_model_config
from workflow_lib.training.data import prepare_training_data
from workflow_lib.training.examples import load_training_chains
from workflow_lib.training.loop import train, training_device
from workflow_lib.training.losses import LossWeights
from workflow_lib.training.pack import TEMPLATE_MAX_IDENTITY, build_pack, read_pack


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
    data.add_argument("--min-length", type=positive_int, default=40)
    data.add_argument("--max-length", type=positive_int, default=400)
    data.add_argument("--identity", type=float, default=0.3,
                      help="no validation chain is more identical than this to a training chain (default 0.3)")
    data.add_argument("--val-fraction", type=float, default=0.1)
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
    pk.add_argument("--max-rows", type=positive_int, default=1024, help="MSA rows kept per chain (query included)")
    pk.add_argument("--out", required=True, help="the pack (.npz)")
    pk.add_argument("--template-hits", help="folder of {name}.hits.parquet (trackfold templates search of the "
                                            "chains' A3Ms against --templates): pack each chain's templates")
    pk.add_argument("--templates", help="the template database the hits were searched against")
    pk.add_argument("--max-templates", type=int, default=DEFAULT_MAX_TEMPLATES,
                    help=f"usable hits packed per chain (default {DEFAULT_MAX_TEMPLATES})")
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


def read_names(path: str | None) -> set[str] | None:
    """The chain names of a ``--names`` file (one per line, blank lines and ``#`` comments ignored)."""
    if not path:
        return None
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as error:
        raise InputError(f"cannot read the names file: {error.strerror}", path=path) from None
    names = {line.split()[0] for line in lines if line.strip() and not line.lstrip().startswith("#")}
    if not names:
        raise InputError("the names file lists no chain", path=path)
    return names


def run_train_data(args: argparse.Namespace) -> int:
    table = prepare_training_data(args.structures, args.out_dir, min_length=args.min_length,
                                  max_length=args.max_length, identity=args.identity, val_fraction=args.val_fraction,
                                  seed=args.seed, cpus=args.cpus, names=read_names(args.names),
                                  val_chains=args.val_chains, val_names=read_names(args.val_names))
    counts = table["split"].value_counts().to_dict()
    print(f"{args.out_dir}/chains.parquet: {len(table)} chains in {table['cluster'].nunique()} clusters; "
          f"train {counts.get('train', 0)}, validation {counts.get('validation', 0)}")
    return 0


def run_train_pack(args: argparse.Namespace) -> int:
    counts = build_pack(read_frame(args.chains, TRAINING_CHAINS), args.msa_dir, args.out, max_rows=args.max_rows,
                        template_hits=args.template_hits, templates=args.templates,
                        max_templates=args.max_templates, template_max_identity=args.template_max_identity)
    print(f"{args.out}: {counts['chains']} chains, {counts['residues']} residues, {counts['msa_rows']} MSA rows, "
          f"{counts['templates']} templates")
    return 0


def run_train(args: argparse.Namespace) -> int:
    torch.set_num_threads(args.threads)
    model = training_model_config(args.preset, **dict(args.overrides))
    config = TrainConfig(model=model.to_dict(), steps=args.steps, crop_size=args.crop_size, batch_size=args.batch_size,
                         max_msa_rows=args.max_msa_rows, max_templates=args.max_templates,
                         template_dropout=args.template_dropout, self_template_rate=args.self_template_rate,
                         neff_sampling=args.neff_sampling, lr=args.lr, warmup_steps=args.warmup_steps,
                         min_lr_fraction=args.min_lr_fraction, weight_decay=args.weight_decay,
                         clip_norm=args.clip_norm, checkpoint_every=args.checkpoint_every, val_every=args.val_every,
                         val_max_chains=args.val_max_chains, val_crop=args.val_crop, redraw_every=args.redraw_every,
                         seed=args.seed, precision=args.precision, init_model=str(args.init_model or ""),
                         loss_weights={**dataclasses.asdict(LossWeights()), **dict(args.loss_weights)})
    if config.init_model and not Path(config.init_model).is_file():
        raise InputError("--init-model: no such checkpoint", path=config.init_model)
    if bool(args.pack) == bool(args.chains or args.features_dir) or (args.chains is None) != (args.features_dir is None):
        raise InputError("trackfold train needs either --pack or both --chains and --features-dir")
    if args.pack:
        table, chains = read_pack(args.pack, device=training_device(args.device))
        by_name = {chain.name: chain for chain in chains}
    else:
        table = read_frame(args.chains, TRAINING_CHAINS)
    train_table = table[table["split"] == "train"]
    if args.max_train_chains:
        train_table = train_table.head(args.max_train_chains)
    val_table = table[table["split"] == "validation"]
    if train_table.empty:
        raise InputError("no training chains in the table", path=args.pack or args.chains)
    if args.pack:
        train_chains = [by_name[name] for name in train_table["name"]]
        val_chains = [by_name[name] for name in val_table["name"]]
    else:
        train_chains = load_training_chains(train_table, args.features_dir)
        val_chains = load_training_chains(val_table, args.features_dir)
    result = train(config, train_chains, train_table["cluster"].tolist(), val_chains, args.out_dir,
                   resume=not args.no_resume, stop_after=args.stop_after,
                   time_limit_s=None if args.time_limit_min is None else 60.0 * args.time_limit_min,
                   export_extra={"preset": args.preset, "chains_table": shown_path(args.pack or args.chains),
                                 "device": str(training_device(args.device))},
                   device=args.device)
    print(f"{args.out_dir}: {result.step} steps, {result.wall_s:.0f} s"
          + (f", model {result.model_path}" if result.model_path else " (stopped, resumable)"))
    if result.validation is not None and len(result.validation):
        v = result.validation
        print(f"validation ({len(v)} chains): lDDT-Cα {v['lddt_ca'].mean():.3f} (folded from the distogram "
              f"{v['fold_lddt_ca'].mean():.3f}, TM-score {v['fold_tm_score'].mean():.3f}), distogram top-1 "
              f"{v['dist_top1'].mean():.3f}, P@L/5 long {v['contact_precision_long'].mean():.3f}")
    return 0


# ------------------------------------------------------------------------------- training workflow glue
# rules/train.smk: the chains are known only after train-data, so the workflow fans out over a fixed number of
# batches (chain i -> batch i mod N) and these commands turn chains.parquet into each job's inputs.

def chain_batches(n_chains: int, batches: int) -> np.ndarray:
    """Batch of each row of chains.parquet: row ``i`` → ``i mod batches`` (balanced, stable for a table)."""
    return np.arange(n_chains) % batches


def batch_dir_name(batch: int) -> str:
    return f"batch_{batch:03d}"


def precomputed_dirs(sources: list[str]) -> list[Path]:
    """The directories of ``sources`` in order; a source with ``*?[`` is a glob of directories (sorted)."""
    dirs: list[Path] = []
    for source in sources:
        if any(ch in source for ch in "*?["):
            matched = sorted(Path(p) for p in glob.glob(source) if Path(p).is_dir())
            if not matched:
                raise InputError(f"precomputed MSA pattern {source!r} matches no directory")
            dirs += matched
        elif Path(source).is_dir():
            dirs.append(Path(source))
        else:
            raise InputError("precomputed MSA directory does not exist", path=source)
    return dirs


def copy_precomputed(name: str, sequence: str, dirs: list[Path], out_dir: Path) -> dict[str, Any] | None:
    """Copy the first ``{dir}/{name}.a3m`` into ``out_dir`` after checking its query row is ``sequence`` (as
    the main workflow's ``search.precomputed_msas``); its MSA statistics row, or None when there is none."""
    for directory in dirs:
        path = directory / f"{name}.a3m"
        if not path.is_file():
            continue
        alignment = read_a3m(path)
        if alignment.query != sequence.upper():
            raise InputError(f"the first row is not the sequence of chain {name} ({len(alignment.query)} vs "
                             f"{len(sequence)} residues)", path=path, record=alignment.names[0])
        with atomic_path(out_dir / f"{name}.a3m") as tmp:
            shutil.copyfile(path, tmp)
        return {"protein": name, "safe_id": name, "length": len(sequence), **msa_statistics(alignment),
                "iterations": 0, "reason": "precomputed", "seconds": 0.0, "source": "precomputed"}
    return None


def run_train_batch(args: argparse.Namespace) -> int:
    table = read_frame(args.chains, TRAINING_CHAINS)
    if not 0 <= args.batch < args.batches:
        raise InputError(f"--batch must be in [0, {args.batches}), got {args.batch}")
    rows = table[chain_batches(len(table), args.batches) == args.batch]
    unsafe = [n for n in rows["name"] if safe_name(n) != n]
    if unsafe:
        raise InputError(f"chain names are not usable as file names: {unsafe[:5]}", path=args.chains)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = set(rows["name"])
    for stale in out_dir.glob("*.a3m"):          # from an earlier chains.parquet: would become features
        if stale.stem not in names:
            stale.unlink()
    if not args.precomputed:
        write_fasta(args.fasta, zip(rows["name"], rows["sequence"]))
        if rows.empty:
            write_table(out_dir / "msa_stats.parquet", pd.DataFrame(columns=MSA_STATS.schema.names), MSA_STATS)
        print(f"batch {args.batch}: {len(rows)} chains to search -> {args.fasta}")
        return 0
    dirs = precomputed_dirs(args.precomputed)
    stats, missing = [], []
    for name, sequence in zip(rows["name"], rows["sequence"]):
        row = copy_precomputed(name, sequence, dirs, out_dir)
        if row is None:
            missing.append(name)
        else:
            stats.append(row)
    if missing:
        raise InputError(f"{len(missing)} chain(s) of batch {args.batch} have no precomputed {{name}}.a3m in "
                         f"{[str(d) for d in dirs]}: {missing[:8]}")
    write_fasta(args.fasta, [])
    write_table(out_dir / "msa_stats.parquet", pd.DataFrame(stats, columns=MSA_STATS.schema.names), MSA_STATS)
    print(f"batch {args.batch}: {len(stats)} precomputed MSAs -> {out_dir}")
    return 0


def run_train_select(args: argparse.Namespace) -> int:
    table = read_frame(args.chains, TRAINING_CHAINS)
    if args.split != "all":
        table = table[table["split"] == args.split]
    folder = Path(args.msa_dir)
    paths = [folder / f"{name}.a3m" for name in table["name"]]
    found = [str(path) for path in paths if path.is_file()]
    write_text_atomic(args.out, "".join(f"{path}\n" for path in found))
    print(f"{args.out}: {len(found)} A3Ms of the {args.split} chains in {folder}")
    return 0


def run_train_hits(args: argparse.Namespace) -> int:
    from workflow_lib.features.templates import read_hits
    from workflow_lib.schemas.templates import TEMPLATE_HITS
    from workflow_lib.training.pack import usable_templates

    if not 0.0 < args.max_identity <= 1.0:
        raise InputError(f"--max-identity must be in (0, 1], got {args.max_identity}")
    table = read_frame(args.chains, TRAINING_CHAINS)
    clusters = dict(zip(table["name"], table["cluster"].astype(int)))
    validation = set(table.loc[table["split"] == "validation", "name"])
    try:
        names = [Path(line.strip()).name.removesuffix(".gz").removesuffix(".a3m")
                 for line in Path(args.a3m_list).read_text().splitlines() if line.strip()]
    except OSError as error:
        raise InputError(f"cannot read the A3M list: {error.strerror}", path=args.a3m_list) from None
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = 0
    for name in names:
        if name not in clusters:
            raise InputError("not a chain of the training table", path=args.a3m_list, record=name)
        hits_path = Path(args.hits) / f"{name}.hits.parquet"
        if not hits_path.is_file():
            raise InputError("no template hits for this chain", path=hits_path, record=name)
        usable = usable_templates(read_hits(hits_path), name, clusters[name], name in validation, clusters,
                                  validation, max_identity=args.max_identity)
        write_table(out_dir / f"{name}.hits.parquet", usable.reset_index(drop=True), TEMPLATE_HITS)
        kept += len(usable)
    print(f"{out_dir}: usable template hits of {len(names)} chains ({kept} hits)")
    return 0


def run_train_targets(args: argparse.Namespace) -> int:
    from workflow_lib.evaluate.core import TARGET_COLUMNS

    table = read_frame(args.chains, TRAINING_CHAINS)
    batches = chain_batches(len(table), args.batches)
    chosen = table["split"] == args.split
    if not chosen.any():
        raise InputError(f"no {args.split} chains in the table", path=args.chains)
    features_dir, pred_dir, msa_dir = Path(args.features_dir), Path(args.pred_dir), Path(args.msa_dir)
    rows, inputs = [], []
    for row, batch in zip(table[chosen].itertuples(index=False), batches[chosen.to_numpy()]):
        npz = features_dir / f"{row.name}.npz"
        if not npz.is_file():
            raise InputError("feature file missing", path=npz, record=row.name)
        inputs.append(str(npz))
        rows.append({"name": row.name, "pred": str(pred_dir / f"{row.name}.pdb"), "native": row.structure,
                     "native_chain": row.chain, "pred_npz": str(pred_dir / f"{row.name}.pred.npz"),
                     "a3m": str(msa_dir / batch_dir_name(int(batch)) / f"{row.name}.a3m")})
    write_text_atomic(args.inputs_list, "".join(f"{path}\n" for path in inputs))
    frame = pd.DataFrame(rows, columns=list(TARGET_COLUMNS))
    with atomic_path(args.out) as tmp:
        frame.to_csv(tmp, sep="\t", index=False)
    print(f"{len(rows)} {args.split} chains -> {args.out}")
    return 0


def run_train_card(args: argparse.Namespace) -> int:
    from workflow_lib.training.card import write_model_card

    try:
        settings = json.loads(args.settings)
    except json.JSONDecodeError as err:
        raise InputError(f"--settings is not JSON: {err}") from None
    write_model_card(args.out, data_dir=args.data_dir, run_dir=args.run_dir, msa_stats=args.msa_stats,
                     evaluation_dir=args.evaluation_dir, settings=settings, benchmarks=args.benchmarks,
                     pack=args.pack)
    print(f"model card -> {args.out}")
    return 0
