"""The bodies of ``trackfold train-data``, ``train`` and ``train-pack``, and of the training workflow's glue.

User commands:

- :func:`train_data_job`: usable chains of structure files, the split and query-only A3Ms
  (:func:`~workflow_lib.training.data.prepare_training_data`).
- :func:`train_job`: training, resumed from ``OUT_DIR/train_state.pt`` (:func:`~workflow_lib.training.loop.train`),
  from feature files or a training pack.
- :func:`train_pack_job`: a training pack (:func:`~workflow_lib.training.pack.build_pack`).

Workflow jobs (rules/train.smk): the chains are known only after ``train-data``, so the workflow fans out over a
fixed number of batches (chain ``i`` -> batch ``i mod N``, :func:`chain_batches`) and these jobs turn
``chains.parquet`` into each job's inputs: :func:`train_batch_job` (one MSA batch: its query FASTA, or its
checked precomputed A3Ms), :func:`train_select_job` (the A3Ms of one split found in a folder),
:func:`train_hits_job` (the template hits a chain may use), :func:`train_targets_job` (the evaluation targets and
prediction inputs of a split) and :func:`train_card_job` (the model card, :mod:`workflow_lib.training.card`).
"""

from __future__ import annotations

import glob
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from workflow_lib.errors import InputError
from workflow_lib.model.checkpoint import parse_block_selection
from workflow_lib.schemas.io import read_frame, write_table
from workflow_lib.schemas.search import MSA_STATS
from workflow_lib.schemas.training import TRAINING_CHAINS
from workflow_lib.search.iterative import msa_statistics
from workflow_lib.seqio.atomic import atomic_path, write_text_atomic
from workflow_lib.seqio.fasta import safe_name, write_fasta
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.training.card import shown_path
from workflow_lib.training.config import TrainConfig
from workflow_lib.training.data import prepare_training_data
from workflow_lib.training.examples import load_training_chains
from workflow_lib.training.loop import train, training_device
from workflow_lib.training.pack import build_pack, read_pack


# --------------------------------------------------------------------------------------------- user commands

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


def train_data_job(structures: Sequence[str | Path], out_dir: str | Path, *, min_length: int, max_length: int,
                   identity: float, val_fraction: float, seed: int, cpus: int, names: str | None = None,
                   val_chains: int | None = None, val_names: str | None = None) -> int:
    """``trackfold train-data``: ``out_dir/chains.parquet``, ``split.json`` and ``a3m/{name}.a3m``; ``names`` and
    ``val_names`` are names files (:func:`read_names`)."""
    table = prepare_training_data(structures, out_dir, min_length=min_length, max_length=max_length,
                                  identity=identity, val_fraction=val_fraction, seed=seed, cpus=cpus,
                                  names=read_names(names), val_chains=val_chains, val_names=read_names(val_names))
    counts = table["split"].value_counts().to_dict()
    print(f"{out_dir}/chains.parquet: {len(table)} chains in {table['cluster'].nunique()} clusters; "
          f"train {counts.get('train', 0)}, validation {counts.get('validation', 0)}")
    return 0


def train_pack_job(chains: str | Path, msa_dirs: Sequence[str | Path], out: str | Path, *, max_rows: int,
                   template_hits: str | None = None, templates: str | None = None, max_templates: int,
                   template_max_identity: float) -> int:
    """``trackfold train-pack``: the chains of ``chains`` with their MSAs (first of ``msa_dirs`` that has one),
    backbones and, with ``template_hits``, their usable templates, in one file."""
    counts = build_pack(read_frame(chains, TRAINING_CHAINS), msa_dirs, out, max_rows=max_rows,
                        template_hits=template_hits, templates=templates, max_templates=max_templates,
                        template_max_identity=template_max_identity)
    print(f"{out}: {counts['chains']} chains, {counts['residues']} residues, {counts['msa_rows']} MSA rows, "
          f"{counts['templates']} templates")
    return 0


def train_job(config: TrainConfig, out_dir: str | Path, *, preset: str, chains: str | None = None,
              features_dir: str | None = None, pack: str | None = None, threads: int = 1, resume: bool = True,
              stop_after: int | None = None, time_limit_min: float | None = None,
              max_train_chains: int | None = None, device: str = "cpu") -> int:
    """``trackfold train``: train on the chains of a pack, or of ``chains`` with their ``features_dir`` files;
    prints the run's summary and its final validation."""
    torch.set_num_threads(threads)
    if config.init_model and not Path(config.init_model).is_file():
        raise InputError("--init-model: no such checkpoint", path=config.init_model)
    if config.init_blocks:
        if not config.init_model:
            raise InputError("--init-blocks needs --init-model (the checkpoint whose blocks start the network)")
        two, three = parse_block_selection(config.init_blocks)
        model = config.model_config
        if (len(two), len(three)) != (model.n_blocks_2track, model.n_blocks_3track):
            raise InputError(f"--init-blocks {config.init_blocks} selects {len(two)} two-track and {len(three)} "
                             f"three-track blocks, but the model has {model.n_blocks_2track} and "
                             f"{model.n_blocks_3track} (--set n_blocks_2track=... --set n_blocks_3track=...)")
    if bool(pack) == bool(chains or features_dir) or (chains is None) != (features_dir is None):
        raise InputError("trackfold train needs either --pack or both --chains and --features-dir")
    if pack:
        table, packed = read_pack(pack, device=training_device(device))
        by_name = {chain.name: chain for chain in packed}
    else:
        table = read_frame(chains, TRAINING_CHAINS)
    train_table = table[table["split"] == "train"]
    if max_train_chains:
        train_table = train_table.head(max_train_chains)
    val_table = table[table["split"] == "validation"]
    if train_table.empty:
        raise InputError("no training chains in the table", path=pack or chains)
    if pack:
        train_chains = [by_name[name] for name in train_table["name"]]
        val_chains = [by_name[name] for name in val_table["name"]]
    else:
        train_chains = load_training_chains(train_table, features_dir)
        val_chains = load_training_chains(val_table, features_dir)
    result = train(config, train_chains, train_table["cluster"].tolist(), val_chains, out_dir,
                   resume=resume, stop_after=stop_after,
                   time_limit_s=None if time_limit_min is None else 60.0 * time_limit_min,
                   export_extra={"preset": preset, "chains_table": shown_path(pack or chains),
                                 "device": str(training_device(device))},
                   device=device)
    print(f"{out_dir}: {result.step} steps, {result.wall_s:.0f} s"
          + (f", model {result.model_path}" if result.model_path else " (stopped, resumable)"))
    if result.validation is not None and len(result.validation):
        v = result.validation
        print(f"validation ({len(v)} chains): lDDT-Cα {v['lddt_ca'].mean():.3f} (folded from the distogram "
              f"{v['fold_lddt_ca'].mean():.3f}, TM-score {v['fold_tm_score'].mean():.3f}), distogram top-1 "
              f"{v['dist_top1'].mean():.3f}, P@L/5 long {v['contact_precision_long'].mean():.3f}")
    return 0


# --------------------------------------------------------------------------------------------- workflow jobs

def chain_batches(n_chains: int, batches: int) -> np.ndarray:
    """Batch of each row of chains.parquet: row ``i`` → ``i mod batches`` (balanced, stable for a table)."""
    return np.arange(n_chains) % batches


def batch_dir_name(batch: int) -> str:
    return f"batch_{batch:03d}"


def precomputed_dirs(sources: Sequence[str]) -> list[Path]:
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


def train_batch_job(chains: str | Path, *, batch: int, batches: int, fasta: str | Path, out_dir: str | Path,
                    precomputed: Sequence[str] = ()) -> int:
    """``train-batch``: batch ``batch`` of ``batches``: its chains to ``fasta`` for ``trackfold msa``, or with
    ``precomputed`` their checked A3Ms copied into ``out_dir`` with ``OUT_DIR/msa_stats.parquet`` (``fasta``
    then empty). A3Ms in ``out_dir`` of chains no longer in the batch are removed."""
    table = read_frame(chains, TRAINING_CHAINS)
    if not 0 <= batch < batches:
        raise InputError(f"--batch must be in [0, {batches}), got {batch}")
    rows = table[chain_batches(len(table), batches) == batch]
    unsafe = [n for n in rows["name"] if safe_name(n) != n]
    if unsafe:
        raise InputError(f"chain names are not usable as file names: {unsafe[:5]}", path=chains)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = set(rows["name"])
    for stale in out_dir.glob("*.a3m"):          # from an earlier chains.parquet: would become features
        if stale.stem not in names:
            stale.unlink()
    if not precomputed:
        write_fasta(fasta, zip(rows["name"], rows["sequence"]))
        if rows.empty:
            write_table(out_dir / "msa_stats.parquet", pd.DataFrame(columns=MSA_STATS.schema.names), MSA_STATS)
        print(f"batch {batch}: {len(rows)} chains to search -> {fasta}")
        return 0
    dirs = precomputed_dirs(precomputed)
    stats, missing = [], []
    for name, sequence in zip(rows["name"], rows["sequence"]):
        row = copy_precomputed(name, sequence, dirs, out_dir)
        if row is None:
            missing.append(name)
        else:
            stats.append(row)
    if missing:
        raise InputError(f"{len(missing)} chain(s) of batch {batch} have no precomputed {{name}}.a3m in "
                         f"{[str(d) for d in dirs]}: {missing[:8]}")
    write_fasta(fasta, [])
    write_table(out_dir / "msa_stats.parquet", pd.DataFrame(stats, columns=MSA_STATS.schema.names), MSA_STATS)
    print(f"batch {batch}: {len(stats)} precomputed MSAs -> {out_dir}")
    return 0


def train_select_job(chains: str | Path, *, msa_dir: str | Path, split: str, out: str | Path) -> int:
    """``train-select``: ``msa_dir/{name}.a3m`` of every chain of ``split`` (or ``all``) that has one, one path
    per line, to ``out``."""
    table = read_frame(chains, TRAINING_CHAINS)
    if split != "all":
        table = table[table["split"] == split]
    folder = Path(msa_dir)
    paths = [folder / f"{name}.a3m" for name in table["name"]]
    found = [str(path) for path in paths if path.is_file()]
    write_text_atomic(out, "".join(f"{path}\n" for path in found))
    print(f"{out}: {len(found)} A3Ms of the {split} chains in {folder}")
    return 0


def train_hits_job(chains: str | Path, *, hits: str | Path, a3m_list: str | Path, out_dir: str | Path,
                   max_identity: float) -> int:
    """``train-hits``: for each chain of ``a3m_list``, the hits of ``hits/{name}.hits.parquet`` a training pack
    would keep (:func:`~workflow_lib.training.pack.usable_templates`) to ``out_dir/{name}.hits.parquet``."""
    from workflow_lib.features.templates import read_hits
    from workflow_lib.schemas.templates import TEMPLATE_HITS
    from workflow_lib.training.pack import usable_templates

    if not 0.0 < max_identity <= 1.0:
        raise InputError(f"--max-identity must be in (0, 1], got {max_identity}")
    table = read_frame(chains, TRAINING_CHAINS)
    clusters = dict(zip(table["name"], table["cluster"].astype(int)))
    validation = set(table.loc[table["split"] == "validation", "name"])
    try:
        names = [Path(line.strip()).name.removesuffix(".gz").removesuffix(".a3m")
                 for line in Path(a3m_list).read_text().splitlines() if line.strip()]
    except OSError as error:
        raise InputError(f"cannot read the A3M list: {error.strerror}", path=a3m_list) from None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = 0
    for name in names:
        if name not in clusters:
            raise InputError("not a chain of the training table", path=a3m_list, record=name)
        hits_path = Path(hits) / f"{name}.hits.parquet"
        if not hits_path.is_file():
            raise InputError("no template hits for this chain", path=hits_path, record=name)
        usable = usable_templates(read_hits(hits_path), name, clusters[name], name in validation, clusters,
                                  validation, max_identity=max_identity)
        write_table(out_dir / f"{name}.hits.parquet", usable.reset_index(drop=True), TEMPLATE_HITS)
        kept += len(usable)
    print(f"{out_dir}: usable template hits of {len(names)} chains ({kept} hits)")
    return 0


def train_targets_job(chains: str | Path, *, batches: int, msa_dir: str | Path, features_dir: str | Path,
                      pred_dir: str | Path, split: str, out: str | Path, inputs_list: str | Path) -> int:
    """``train-targets``: the targets TSV of ``split`` for ``trackfold evaluate --targets`` and the list of its
    feature files for ``trackfold predict``."""
    from workflow_lib.evaluate.core import TARGET_COLUMNS

    table = read_frame(chains, TRAINING_CHAINS)
    batch_of = chain_batches(len(table), batches)
    chosen = table["split"] == split
    if not chosen.any():
        raise InputError(f"no {split} chains in the table", path=chains)
    features_dir, pred_dir, msa_dir = Path(features_dir), Path(pred_dir), Path(msa_dir)
    rows, inputs = [], []
    for row, batch in zip(table[chosen].itertuples(index=False), batch_of[chosen.to_numpy()]):
        npz = features_dir / f"{row.name}.npz"
        if not npz.is_file():
            raise InputError("feature file missing", path=npz, record=row.name)
        inputs.append(str(npz))
        rows.append({"name": row.name, "pred": str(pred_dir / f"{row.name}.pdb"), "native": row.structure,
                     "native_chain": row.chain, "pred_npz": str(pred_dir / f"{row.name}.pred.npz"),
                     "a3m": str(msa_dir / batch_dir_name(int(batch)) / f"{row.name}.a3m")})
    write_text_atomic(inputs_list, "".join(f"{path}\n" for path in inputs))
    frame = pd.DataFrame(rows, columns=list(TARGET_COLUMNS))
    with atomic_path(out) as tmp:
        frame.to_csv(tmp, sep="\t", index=False)
    print(f"{len(rows)} {split} chains -> {out}")
    return 0


def train_card_job(out: str | Path, *, data_dir: str | Path, run_dir: str | Path,
                   msa_stats: Sequence[str | Path] = (), evaluation_dir: str | None = None,
                   settings: dict[str, Any] | None = None, benchmarks: str | None = None,
                   pack: str | None = None) -> int:
    """``train-card``: the run's model card (:func:`~workflow_lib.training.card.write_model_card`) to ``out``."""
    from workflow_lib.training.card import write_model_card

    write_model_card(out, data_dir=data_dir, run_dir=run_dir, msa_stats=msa_stats, evaluation_dir=evaluation_dir,
                     settings=settings, benchmarks=benchmarks, pack=pack)
    print(f"model card -> {out}")
    return 0
