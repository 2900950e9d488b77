"""A model card generated from the outputs of one training-workflow run (rules/train.smk).

:func:`model_card` reads only files of the run: ``chains.parquet`` / ``split.json`` (``trackfold train-data``),
the batches' ``msa_stats.parquet`` (``trackfold msa`` or precomputed A3Ms), the run directory of
``trackfold train`` (``model.pt``, ``train_config.json``, ``metrics.parquet``, ``validation.parquet``), the
output of ``trackfold evaluate`` on the held-out chains, the Snakemake benchmark files and the workflow
settings (a dict the rule passes as JSON; for a run made by hand its ``commands`` replace the Snakemake line
under "Reproduce"). Every number in the card comes from those files; statements about
limits are made only when the numbers support them. The hand-written ``models/MODEL_CARD.md`` is the model.
Each section of the card is one function (``_data_section``, ``_training_section``, ...); :func:`model_card`
reads the files once (:func:`_read_run`) and puts the sections together in order.

The card names files without machine paths (:func:`shown_path`): relative paths as given (relative to the
workflow's working directory, where the rules run), absolute ones relative to that directory when inside it,
else by their file name alone.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workflow_lib.errors import InputError
from workflow_lib.schemas.io import read_frame
from workflow_lib.schemas.search import MSA_STATS
from workflow_lib.seqio.atomic import write_text_atomic

EVALUATION_METRICS = (
    # (column of workflow_lib.evaluate's table, label, co-evolution baseline column, random-ranking column)
    ("lddt_ca", "lDDT-Cα", None, None),
    ("tm_score_fixed", "TM-score (residue i to residue i, normalised by the native)", None, None),
    ("tm_score", "TM-score (TMalign, normalised by the native)", None, None),
    ("rmsd", "RMSD (TMalign, Å)", None, None),
    ("mean_plddt", "mean pLDDT", None, None),
    ("plddt_lddt_pearson", "Pearson r (pLDDT, per-residue lDDT-Cα)", None, None),
    ("plddt_mae", "MAE (pLDDT/100 vs lDDT-Cα)", None, None),
    ("p_l5_long", "long-range contact precision, top L/5", "coevo_p_l5_long", "random_p_long"),
    ("p_l_long", "long-range contact precision, top L", "coevo_p_l_long", "random_p_long"),
)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    return f"{float(value):.{digits}f}"


def _mean(series: pd.Series) -> float:
    values = pd.to_numeric(series, errors="coerce").dropna()
    return float(values.mean()) if len(values) else float("nan")


def _spread(series: pd.Series, digits: int = 3) -> str:
    """``mean (median m, range a–b, ± standard error)`` of the finite values."""
    values = pd.to_numeric(series, errors="coerce").dropna()
    if values.empty:
        return "–"
    text = f"**{_fmt(values.mean(), digits)}** (median {_fmt(values.median(), digits)}"
    if len(values) > 1:
        text += (f", range {_fmt(values.min(), digits)}–{_fmt(values.max(), digits)}, "
                 f"± {_fmt(values.std(ddof=1) / math.sqrt(len(values)), digits)} s.e.")
    return text + ")"


def shown_path(path: str | Path) -> str:
    """``path`` as the card writes it (module docstring): never an absolute path."""
    if not Path(path).is_absolute():
        return str(path)
    for base in (Path.cwd(), Path.cwd().resolve()):
        try:
            return str(Path(path).relative_to(base))
        except ValueError:
            continue
    return Path(path).name


def _without_machine_paths(value: Any) -> Any:
    """A JSON-like ``value`` with every absolute path string replaced by :func:`shown_path`."""
    if isinstance(value, dict):
        return {key: _without_machine_paths(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_machine_paths(item) for item in value]
    if isinstance(value, str) and Path(value).is_absolute():
        return shown_path(value)
    return value


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError("file missing", path=path)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON: {err}", path=path) from None


def _chain_filters() -> dict[str, Any]:
    from workflow_lib.training.data import chain_ok

    params = inspect.signature(chain_ok).parameters
    return {"max_unknown": params["max_unknown"].default, "min_backbone": params["min_backbone"].default}


def _benchmarks(root: str | None, run: str) -> pd.DataFrame:
    """Snakemake benchmark files of this run (``{root}/train_*/{run}/...``): jobs, wall and CPU seconds per rule."""
    rows = []
    if root:
        for path in sorted(Path(root).glob(f"train_*/{run}/**/*.tsv")) + sorted(Path(root).glob(f"train_*/{run}.tsv")):
            rule = path.relative_to(root).parts[0]
            try:
                frame = pd.read_csv(path, sep="\t")
            except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
                continue
            if "s" in frame:
                rows.append({"rule": rule, "s": float(frame["s"].iloc[-1]),
                             "cpu_time": float(frame["cpu_time"].iloc[-1]) if "cpu_time" in frame else math.nan})
    frame = pd.DataFrame(rows, columns=["rule", "s", "cpu_time"])
    return frame.groupby("rule", sort=True).agg(jobs=("s", "size"), s=("s", "sum"), cpu_time=("cpu_time", "sum"))


def _msa_section(stats: pd.DataFrame, chains: pd.DataFrame, settings: dict[str, Any]) -> tuple[list[str], dict]:
    lines = ["## MSAs", ""]
    sources = [shown_path(s) for s in settings.get("msa_dir") or []]
    if sources:
        lines.append(f"- **Source.** Precomputed A3Ms (`{{name}}.a3m`) from {', '.join(f'`{s}`' for s in sources)}; "
                     "each query row was checked against the chain's sequence.")
    else:
        database = settings.get("database", "?")
        files = [shown_path(f) for f in settings.get("database_fasta") or []]
        size = None
        manifest = settings.get("database_manifest")
        if manifest and Path(manifest).is_file():
            size = _read_json(Path(manifest)).get("total_sequences")
        search = _without_machine_paths(settings.get("search") or {})
        lines.append(f"- **Source.** `trackfold msa` (trackfold's own HHblits-style iterative search) against the "
                     f"database `{database}`" + (f" ({_fmt(size)} sequences)" if size else "")
                     + (": " + ", ".join(f"`{f}`" for f in files) if files else "") + ".")
        if search:
            lines.append("- **Search settings.** " + ", ".join(f"{k} {v}" for k, v in sorted(search.items())
                                                                if k not in ("database", "precomputed_msas")) + ".")
    merged = chains.merge(stats, left_on="name", right_on="safe_id", how="left", suffixes=("", "_msa"))
    missing = int(merged["depth"].isna().sum())
    if missing:
        lines.append(f"- **{missing} chain(s) have no MSA statistics.**")
    rows, summary = [], {}
    for split in ("train", "validation"):
        part = merged[merged["split"] == split]
        depth, neff = part["depth"].dropna(), part["neff"].dropna()
        if depth.empty:
            continue
        summary[split] = {"median_depth": float(depth.median()), "single": float((depth <= 1).mean())}
        rows.append([split, _fmt(len(part)), _fmt(float(depth.median()), 0), _fmt(float(depth.mean()), 1),
                     _fmt(int(depth.max())), f"{100 * (depth <= 1).mean():.0f}%", _fmt(float(neff.median()), 2),
                     _fmt(float(neff.mean()), 2)])
    lines += [""] + _table(["split", "chains", "median depth", "mean depth", "max depth", "depth 1 (query only)",
                            "median Neff", "mean Neff"], rows)
    seconds = pd.to_numeric(stats.get("seconds", pd.Series(dtype=float)), errors="coerce").sum()
    if seconds > 0:
        lines += ["", f"Search time summed over chains (`msa_stats.parquet`): {_fmt(float(seconds), 0)} s."]
    lines.append("")
    return lines, summary


_INPUT_NAMES = (("msa", "the MSA tokens"), ("coevolution", "the co-evolution maps"),
                ("deletion_matrix", "the deletions"), ("profile", "the profile"),
                ("deletion_mean", "the mean deletions"))


def inputs_read(config: Any, max_templates: int) -> str:
    """What of the feature file the trained network reads, from its config: the card states exactly that.

    The keys come from :func:`workflow_lib.schemas.features.feature_keys_read`, the function inference reads
    the feature file with, so the card and the network cannot disagree.
    """
    from workflow_lib.schemas.features import feature_keys_read

    keys = feature_keys_read(config)
    read = [name for key, name in _INPUT_NAMES if key in keys]
    unread = [name.removeprefix("the ") for key, name in _INPUT_NAMES if key not in keys]
    text = "The network reads " + (", ".join(read[:-1]) + " and " + read[-1] if len(read) > 1 else read[0])
    if "template_mask" not in keys:
        text += "; it has no template inputs."
    elif max_templates:
        text += f"; templates: up to {max_templates} per crop from the training pack's hits."
    else:
        text += "; templates are not used in training (T = 0), so the template inputs have no effect."
    if unread:
        text += " It does not read the " + ", the ".join(unread[:-1]) + (" or the " if len(unread) > 1 else "") \
            + unread[-1] + "."
    return text


def _split_method(split: dict[str, Any]) -> str:
    """How ``trackfold train-data`` split the chains (``split.json``): single-linkage clusters, or validation
    chains with the chains close to them left out of training and no clustering."""
    threshold = f"{100 * split.get('identity_threshold', float('nan')):.0f}%"
    if split.get("split_method") == "against validation":
        return (f"Against validation chains (`--val-chains` drawn at random with seed {split.get('seed')}, or "
                f"`--val-names`), none more than {threshold} identical to another "
                f"({split.get('validation_candidates_dropped', 0)} candidates dropped); the "
                f"{split.get('excluded_near_validation', 0)} chains more than {threshold} identical to a validation "
                f"chain left out of training; training chains not clustered (each its own cluster): "
                f"**{split.get('train_chains')} training and {split.get('validation_chains')} validation chains**.")
    return (f"Single-linkage clusters at {threshold} identity ({split.get('clusters')} clusters); whole clusters "
            f"to validation (seed {split.get('seed')}): **{split.get('train_chains')} training and "
            f"{split.get('validation_chains')} validation chains** ({split.get('validation_clusters')} clusters).")


def _pack_section(pack: str | Path, max_templates: int) -> list[str]:
    """The training pack's chains and, when the run read templates, how many chains had one and how close."""
    from workflow_lib.training.pack import best_template_identity, read_pack

    table, chains = read_pack(pack)
    split = table["split"].to_numpy()
    lines = ["## Training pack", "",
             f"`{shown_path(pack)}` (`trackfold train-pack`): {int((split == 'train').sum()):,} training and "
             f"{int((split == 'validation').sum()):,} validation chains, each with its MSA rows, insertion counts, "
             "sequence weights and backbone."]
    if not max_templates:
        return lines + [""]
    identity = np.array([best_template_identity(c) for c in chains])
    rows = []
    for part in ("train", "validation"):
        ident = identity[split == part]
        if not len(ident):
            continue
        has = np.isfinite(ident)
        rows.append([part, f"{len(ident):,}", f"{100 * has.mean():.0f}%",
                     f"{100 * ((ident >= 0.3) & (ident <= 0.9)).mean():.0f}%",
                     _fmt(float(np.median(ident[has])), 2) if has.any() else "–",
                     _fmt(float(ident[has].max()), 2) if has.any() else "–"])
    lines += ["", "Template hits from the template database's HMM–HMM search, never the chain itself, a chain of its "
                  "own identity cluster or (for a training chain) a validation chain, nor a hit more identical "
                  "than the pack's cap, so the network learns to use templates rather than copy them. Identity of "
                  "the best packed hit over its aligned columns:", ""]
    lines += _table(["split", "chains", "with a template", "best 30–90% identical", "median best identity",
                     "highest identity"], rows)
    return lines + [""]


@dataclass
class _Run:
    """The files of one training run, read once, and the few numbers several sections of the card share."""

    settings: dict[str, Any]
    run_dir: Path
    chains: pd.DataFrame
    split: dict[str, Any]
    model: Any
    extra: dict[str, Any]
    train_config: dict[str, Any]
    metrics: pd.DataFrame
    validation: pd.DataFrame | None
    stats: pd.DataFrame
    evaluation: pd.DataFrame | None
    evaluation_dir: str | Path | None
    name: str = ""
    steps_done: int = 0
    steps_planned: int = 0
    n_val: int = 0
    warm_start: str = ""
    max_templates: int = 0

    @property
    def validated(self) -> bool:
        """Whether the run wrote a non-empty validation table."""
        return self.validation is not None and bool(len(self.validation))

    @property
    def folded(self) -> bool:
        """Whether its validation table holds any lDDT-Cα of the fold from the distogram."""
        return self.validated and bool(self.validation["fold_lddt_ca"].notna().any())


def _read_run(data_dir: Path, run_dir: Path, msa_stats: Sequence[str | Path], evaluation_dir: str | Path | None,
              settings: dict[str, Any]) -> _Run:
    """Every file the card reads (module docstring), in one :class:`_Run`."""
    from workflow_lib.model.checkpoint import load_checkpoint
    from workflow_lib.schemas.training import TRAINING_CHAINS, TRAINING_METRICS, VALIDATION_CHAINS

    chains = read_frame(data_dir / "chains.parquet", TRAINING_CHAINS)
    split = _read_json(data_dir / "split.json")
    model, extra = load_checkpoint(run_dir / "model.pt")
    train_config = _read_json(run_dir / "train_config.json")
    metrics = read_frame(run_dir / "metrics.parquet", TRAINING_METRICS)
    validation = (read_frame(run_dir / "validation.parquet", VALIDATION_CHAINS)
                  if (run_dir / "validation.parquet").is_file() else None)
    stats_frames = [read_frame(p, MSA_STATS) for p in msa_stats]
    stats = (pd.concat(stats_frames, ignore_index=True) if stats_frames
             else pd.DataFrame(columns=MSA_STATS.schema.names))
    evaluation = None
    if evaluation_dir is not None and (Path(evaluation_dir) / "evaluation.parquet").is_file():
        from workflow_lib.schemas.evaluation import EVALUATION

        evaluation = read_frame(Path(evaluation_dir) / "evaluation.parquet", EVALUATION)
    run = _Run(settings=settings, run_dir=run_dir, chains=chains, split=split, model=model, extra=extra,
               train_config=train_config, metrics=metrics, validation=validation, stats=stats,
               evaluation=evaluation, evaluation_dir=evaluation_dir)
    run.name = settings.get("name") or run_dir.parent.name
    run.steps_done, run.steps_planned = int(extra.get("steps", 0)), int(train_config.get("steps", 0))
    run.n_val = int((chains["split"] == "validation").sum())
    if run.validated:
        run.n_val = len(validation)      # the chains the run validated on (a pack may hold a subset of the split)
    run.warm_start = Path(str(train_config.get("init_model") or "")).name
    run.max_templates = int(train_config.get("max_templates", 0) or 0)
    return run


def _title(run: _Run) -> list[str]:
    return [f"# {run.name}", "",
            "Generated by `trackfold train-card` from the files of one training run (`trackfold train-data`, MSAs, "
            "`trackfold train`: the steps of the training workflow, `rules/train.smk`); the numbers below are "
            "read from those files, nothing is typed in by hand.", ""]


def _summary(run: _Run) -> str:
    """The card's opening sentence: the network, its training, and its accuracy on the held-out chains."""
    from workflow_lib.model.network import count_parameters

    extra, split, validation, evaluation = run.extra, run.split, run.validation, run.evaluation
    val_lddt = _mean(validation["lddt_ca"]) if run.validated else float("nan")
    trained = f"fine-tuned from `{run.warm_start}`" if run.warm_start else "trained"
    summary = (f"A `{extra.get('preset', run.settings.get('preset', '?'))}` three-track network "
               f"({count_parameters(run.model):,} parameters) {trained} for {run.steps_done:,} of "
               f"{run.steps_planned:,} planned steps ({_fmt(extra.get('train_wall_s'), 0)} s of training wall time "
               f"on `{extra.get('device', 'cpu')}`) on {int(extra.get('train_chains', 0)):,} chains. On the "
               f"{run.n_val} held-out chains (at most "
               f"{_fmt(100 * split.get('max_cross_identity', float('nan')), 1)}% identical to a training chain) "
               f"the validation lDDT-Cα is {_fmt(val_lddt)} from the structure module")
    if run.folded:
        summary += (f" and {_fmt(_mean(validation['fold_lddt_ca']))} (TM-score "
                    f"{_fmt(_mean(validation['fold_tm_score']))}) folded from the distogram, as `trackfold predict` "
                    "does by default")
    if evaluation is not None and "lddt_ca" in evaluation:
        summary += (f"; whole-chain predictions (`trackfold predict` + `trackfold evaluate`) reach lDDT-Cα "
                    f"{_fmt(_mean(evaluation['lddt_ca']))}")
        if "p_l5_long" in evaluation and "coevo_p_l5_long" in evaluation:
            coevo = _mean(evaluation["coevo_p_l5_long"])
            summary += (f" and long-range top-L/5 contact precision {_fmt(_mean(evaluation['p_l5_long']))} "
                        + (f"(co-evolution baseline on the same MSAs: {_fmt(coevo)})" if math.isfinite(coevo) else
                           "(no co-evolution baseline: the validation MSAs are too shallow to score one)"))
    return summary + "."


def _model_table(run: _Run) -> list[str]:
    """The checkpoint file, its architecture, config overrides and learning curve."""
    from workflow_lib.model.network import count_parameters

    size = (run.run_dir / "model.pt").stat().st_size / 1e6
    overrides = run.settings.get("overrides") or {}
    model_cfg = run.model.config.to_dict()
    return _table(["", ""], [
        ["file", f"`{shown_path(run.run_dir / 'model.pt')}`, {size:.1f} MB; `torch.save` of the state dict and "
                 "config, read with `weights_only=True` (`workflow_lib.model.checkpoint.load_checkpoint`)"],
        ["architecture", f"`ThreeTrackNetwork`, preset `{run.extra.get('preset', '?')}`, "
                         f"{count_parameters(run.model):,} parameters; "
                         + ", ".join(f"{k} = {model_cfg[k]}" for k in ("c_m", "c_z", "c_s") if k in model_cfg)],
        ["config overrides", ", ".join(f"`{k}={v}`" for k, v in sorted(overrides.items())) or "none"],
        ["learning curve", f"`{shown_path(run.run_dir / 'learning_curve.png')}`"],
    ]) + [""]


def _data_section(run: _Run) -> list[str]:
    """Where the chains came from, the chain filters and the split."""
    settings, split = run.settings, run.split
    filters = _chain_filters()
    skipped = split.get("skipped") or {}
    structures = [shown_path(s) for s in settings.get("structures") or []]
    archive = shown_path(settings["structures_archive"]) if settings.get("structures_archive") else None
    source = ", ".join(f"`{s}`" for s in structures) + (f"; archive `{archive}`" if archive else "")
    return ["## Data", "",
            f"- **Source.** {split.get('structures', '?')} structure files ({source}); chains and split by "
            "`trackfold train-data`.",
            f"- **Chain filters.** Protein chains of the first model with {split.get('min_length')}–"
            f"{split.get('max_length')} residues, at most {100 * filters['max_unknown']:.0f}% X, N, CA and C on "
            f"at least {100 * filters['min_backbone']:.0f}% of residues; identical sequences once. Kept "
            f"**{split.get('chains', len(run.chains))} chains**"
            + (" (dropped: " + ", ".join(f"{v} {k}" for k, v in sorted(skipped.items())) + ")" if skipped else "")
            + ".",
            f"- **Split.** {_split_method(split)} Highest measured identity between a validation and a training "
            f"chain: **{_fmt(100 * split.get('max_cross_identity', float('nan')), 1)}%**.", ""]


def _features_section(run: _Run) -> list[str]:
    features = run.settings.get("features") or {}
    return ["## Features", "",
            "`trackfold features` from each chain's A3M: MSA tokens, deletions, profile and APC co-evolution "
            "(the statistics weighted by sequence weights)"
            + (f"; at most {features['max_seqs']} rows kept" if "max_seqs" in features else "")
            + ". " + inputs_read(run.model.config, run.max_templates), ""]


_TRAINING_KEYS = ("steps", "crop_size", "max_msa_rows", "max_templates", "template_dropout", "self_template_rate",
                  "neff_sampling", "lr", "warmup_steps", "min_lr_fraction", "weight_decay", "clip_norm", "precision",
                  "checkpoint_every", "val_every", "val_max_chains", "val_crop", "redraw_every", "seed")
"""The ``train_config.json`` settings the card's training table shows, in this order."""


def _training_section(run: _Run) -> list[str]:
    """The optimiser settings, the schedule as run, wall time and the training loss at the start and the end."""
    train_config, extra, settings = run.train_config, run.extra, run.settings
    lines = ["## Training", "",
             "`trackfold train` (AdamW, linear warm-up then cosine decay, gradient clipping, one random crop per "
             "step from a uniformly drawn cluster; losses of `workflow_lib/training/losses.py`).", ""]
    lines += _table(["setting", "value"], [[k, train_config.get(k, "–")] for k in _TRAINING_KEYS]
                    + [["loss weights", ", ".join(f"{k} {v}" for k, v in sorted(
                        (train_config.get("loss_weights") or {}).items()))],
                       ["warm start (`init_model`)", f"`{run.warm_start}`" if run.warm_start else "none"],
                       ["device", f"`{extra.get('device', 'cpu')}`"],
                       ["torch threads", settings.get("threads", "–")],
                       ["time limit (min)", settings.get("time_limit_min") or "none"]])
    lines.append("")
    if run.steps_done < run.steps_planned:
        lines.append(f"- **Stopped early** at step {run.steps_done:,} of {run.steps_planned:,} (time limit); the "
                     "learning rate schedule was not finished. Rerunning the rule (`--forcerun train_model`) "
                     "resumes from `train_state.pt`.")
    lines.append(f"- **Wall time.** {_fmt(extra.get('train_wall_s'), 0)} s of training "
                 f"({_fmt(extra.get('train_wall_s', 0) / max(run.steps_done, 1), 2)} s per step including "
                 "validation passes).")
    lines += _training_loss(run.metrics[run.metrics["split"] == "train"])
    lines.append("")
    return lines


def _training_loss(train_rows: pd.DataFrame) -> list[str]:
    """Mean loss over the first and the last steps (none for fewer than four steps)."""
    if len(train_rows) < 4:
        return []
    k = max(1, min(50, len(train_rows) // 4))
    first, last = train_rows.head(k), train_rows.tail(k)
    return [f"- **Training loss.** Mean over the first {k} steps {_fmt(first['loss'].mean())} "
            f"(distogram {_fmt(first['distogram'].mean())}, FAPE {_fmt(first['fape'].mean())}); over the "
            f"last {k} steps {_fmt(last['loss'].mean())} (distogram {_fmt(last['distogram'].mean())}, "
            f"FAPE {_fmt(last['fape'].mean())})."]


def _validation_section(run: _Run) -> list[str]:
    """``trackfold train``'s own final validation pass, and the validation curve during training."""
    train_config, validation = run.train_config, run.validation
    lines = ["## Validation", "",
             f"`trackfold train`'s final pass over all {run.n_val} validation chains: each chain whole when it has "
             f"at most {train_config.get('val_crop')} residues, else its central {train_config.get('val_crop')}; "
             f"eval mode, the first {train_config.get('max_msa_rows')} MSA rows; mean over chains.", ""]
    if run.validated:
        lines += _table(["metric", "value"], [
            ["lDDT-Cα, structure module", _spread(validation["lddt_ca"])],
            ["lDDT-Cα, folded from the distogram", _spread(validation["fold_lddt_ca"])],
            ["TM-score, folded from the distogram", _spread(validation["fold_tm_score"])],
            ["distogram top-1 accuracy", _spread(validation["dist_top1"])],
            ["contact precision P@L/5, separation ≥ 24", _spread(validation["contact_precision_long"])],
            ["contact precision P@L/5, separation ≥ 12", _spread(validation["contact_precision_medlong"])]])
    else:
        lines.append("No validation table was written.")
    curve = run.metrics[run.metrics["split"] == "validation"]
    if len(curve):
        lines += ["", f"During training (first {train_config.get('val_max_chains')} validation chains):", ""]
        lines += _table(["step", "lDDT-Cα", "top-1", "P@L/5 long", "P@L/5 sep ≥ 12"],
                        [[int(r.step), _fmt(r.lddt_ca), _fmt(r.dist_top1), _fmt(r.contact_precision_long),
                          _fmt(r.contact_precision_medlong)] for r in curve.itertuples()])
    lines.append("")
    return lines


def _calibration_section(run: _Run) -> list[str]:
    """The checkpoint's pLDDT calibration knots, when it stores one."""
    from workflow_lib.inference.confidence import PlddtCalibration

    calibration = PlddtCalibration.from_extra(run.extra)
    if calibration is None:
        return []
    lines = ["## pLDDT calibration", "",
             "`trackfold predict` (`fold: distogram`) writes as pLDDT the expected lDDT of the folded backbone "
             "under the distogram mapped through this monotone calibration, fitted on held-out chains of known "
             "structure (`benchmarks/plddt_calibration.py`; `workflow_lib.inference.confidence."
             "PlddtCalibration`). Knots, expected lDDT → lDDT-Cα:", ""]
    lines += _table(["expected lDDT", "lDDT-Cα"],
                    [[_fmt(x), _fmt(y)] for x, y in zip(calibration.expected, calibration.lddt)])
    lines.append("")
    return lines


def _evaluation_section(run: _Run) -> list[str]:
    """``trackfold evaluate`` of the whole-chain predictions: the metrics against the baselines, per chain."""
    evaluation = run.evaluation
    lines = ["## Evaluation of whole-chain predictions", ""]
    if evaluation is None or evaluation.empty:
        return lines + ["No evaluation table (`evaluation.parquet`) was found.", ""]
    lines += [f"`trackfold predict` (crop-and-stitch, the same features) on the {len(evaluation)} validation "
              "chains, scored by `trackfold evaluate` against the experimental chains (residues matched by "
              "sequence alignment). The co-evolution baseline ranks contacts by the APC-corrected co-evolution "
              "of the same A3M; a random ranking's expected precision is the fraction of true long-range "
              "contacts among the scorable pairs. Mean over chains (median, range, standard error).", ""]
    rows = []
    for column, label, baseline, random in EVALUATION_METRICS:
        if column not in evaluation:
            continue
        rows.append([label, _spread(evaluation[column]),
                     _spread(evaluation[baseline]) if baseline and baseline in evaluation else "",
                     _spread(evaluation[random]) if random and random in evaluation else ""])
    lines += _table(["metric", "model", "co-evolution baseline", "random ranking"], rows)
    if "tmalign_status" in evaluation:
        bad = evaluation["tmalign_status"].astype(str)
        bad = bad[~bad.isin(["ok", "", "None", "nan"])]
        if len(bad):
            lines += ["", f"TMalign did not score {len(bad)} chain(s) ({', '.join(sorted(set(bad)))})."]
    lines += _per_chain_table(evaluation)
    evaluation_dir = Path(run.evaluation_dir)
    return lines + ["", f"Full tables and figures: `{shown_path(evaluation_dir / 'evaluation.parquet')}`, "
                        f"`{shown_path(evaluation_dir / 'evaluation.html')}`.", ""]


def _per_chain_table(evaluation: pd.DataFrame) -> list[str]:
    """One row per evaluated chain, for at most 40 chains."""
    if len(evaluation) > 40 or "name" not in evaluation:
        return []
    shown = [c for c in ("length", "lddt_ca", "tm_score", "mean_plddt", "p_l5_long", "coevo_p_l5_long",
                         "msa_depth", "msa_neff") if c in evaluation]
    return ["", "Per chain:", ""] + _table(
        ["chain"] + shown, [[row["name"]] + [_fmt(row[c], 0 if c in ("length", "msa_depth") else 3) for c in shown]
                            for row in evaluation.to_dict("records")])


def _coevolution_beats_model(evaluation: pd.DataFrame | None) -> bool:
    """Whether the co-evolution baseline's mean long-range top-L/5 precision exceeds the model's."""
    if evaluation is None or evaluation.empty or "p_l5_long" not in evaluation \
            or "coevo_p_l5_long" not in evaluation:
        return False
    model_p, coevo_p = _mean(evaluation["p_l5_long"]), _mean(evaluation["coevo_p_l5_long"])
    return math.isfinite(model_p) and math.isfinite(coevo_p) and coevo_p > model_p


def _wall_time_section(benchmarks: str | None, name: str) -> list[str]:
    """Snakemake's benchmark files of the run, summed per rule (nothing without any)."""
    bench = _benchmarks(benchmarks, name)
    if not len(bench):
        return []
    lines = ["## Wall time per stage", "", "Snakemake `benchmark:` files of this run (summed over jobs).", ""]
    lines += _table(["rule", "jobs", "wall s", "CPU s"],
                    [[rule, int(r.jobs), _fmt(r.s, 0), _fmt(r.cpu_time, 0)] for rule, r in bench.iterrows()])
    lines.append("")
    return lines


def _limits_section(run: _Run, msa_summary: dict) -> list[str]:
    """The limits the run's own numbers show (each stated only when they support it)."""
    train_config, validation = run.train_config, run.validation
    limits = []
    train_msa = msa_summary.get("train")
    if train_msa is not None and train_msa["median_depth"] <= 1:
        limits.append(f"**Mostly single sequences.** {100 * train_msa['single']:.0f}% of the training chains' MSAs "
                      "hold only the query (median depth 1): the network learned little or nothing from "
                      "co-evolution, and deep MSAs at inference are out of its training distribution.")
    elif train_msa is not None:
        limits.append(f"**MSA depth.** {100 * train_msa['single']:.0f}% of the training chains' MSAs hold only the "
                      f"query (median depth {train_msa['median_depth']:.0f}).")
    if run.steps_done < run.steps_planned:
        limits.append(f"**Short schedule.** Training stopped at step {run.steps_done:,} of {run.steps_planned:,}.")
    if run.n_val < 30:
        limits.append(f"**Few validation chains.** {run.n_val} chains: the means above carry the standard errors "
                      "shown, and differences smaller than that are not evidence.")
    if _coevolution_beats_model(run.evaluation):
        limits.append("**Contacts.** The co-evolution baseline computed from the same MSAs ranks long-range "
                      "contacts better than the model does.")
    if int(train_config.get("crop_size", 0)) < int(train_config.get("val_crop", 0)):
        limits.append(f"**Crop mismatch.** Training crops were {train_config.get('crop_size')} residues; validation "
                      f"and inference see up to {train_config.get('val_crop')} (or crop-and-stitch windows).")
    if run.folded:
        network, folded = _mean(validation["lddt_ca"]), _mean(validation["fold_lddt_ca"])
        if folded > network + 0.1:
            limits.append(f"**Structure module.** Its own backbone reaches lDDT-Cα {_fmt(network)} on validation, "
                          f"the fold from the distogram {_fmt(folded)}: with this checkpoint `predict.fold: "
                          "network` is not worth using.")
    if not run.max_templates:
        limits.append("**Templates.** Not used in training: the template embedding received no gradient, so "
                      "templates given to this checkpoint at inference change nothing.")
    return ["## Known limits", ""] + [f"- {item}" for item in limits] + [""]


def _reproduce_section(settings: dict[str, Any]) -> list[str]:
    """The command that reruns the workflow (or the run's own commands) and its ``train:`` settings."""
    configfiles = [shown_path(c) for c in settings.get("configfiles") or []]
    commands = settings.get("commands") or \
        ["snakemake --cores N" + "".join(f" --configfile {c}" for c in configfiles)]
    lines = ["## Reproduce", "", "```bash", *commands, "```", ""]
    if settings.get("train") or not settings.get("commands"):
        lines += ["Workflow settings (`train:` section, after defaults): "
                  f"`{json.dumps(_without_machine_paths(settings.get('train', {})), sort_keys=True)}`", ""]
    return lines


def model_card(*, data_dir: str | Path, run_dir: str | Path, msa_stats: Sequence[str | Path] = (),
               evaluation_dir: str | Path | None = None, settings: dict[str, Any] | None = None,
               benchmarks: str | None = None, pack: str | Path | None = None) -> str:
    """The Markdown card of a training run (module docstring), one section after the other; ``pack``: the run's
    training pack, if it used one (``trackfold train --pack``)."""
    run = _read_run(Path(data_dir), Path(run_dir), msa_stats, evaluation_dir, dict(settings or {}))
    msa_lines, msa_summary = _msa_section(run.stats, run.chains, run.settings)
    lines = _title(run) + [_summary(run), ""] + _model_table(run) + _data_section(run) + msa_lines
    if pack is not None:
        lines += _pack_section(pack, run.max_templates)
    lines += _features_section(run) + _training_section(run) + _validation_section(run)
    lines += _calibration_section(run) + _evaluation_section(run)
    lines += _wall_time_section(benchmarks, run.name) + _limits_section(run, msa_summary)
    lines += _reproduce_section(run.settings)
    return "\n".join(lines)


def write_model_card(path: str | Path, **kwargs: Any) -> None:
    """:func:`model_card` written atomically to ``path``."""
    write_text_atomic(path, model_card(**kwargs))
