"""The training curve: one row per training step and per validation pass, written as a table and a plot."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workflow_lib.schemas.io import write_table
from workflow_lib.schemas.training import TRAINING_METRICS
from workflow_lib.seqio.atomic import atomic_path, write_text_atomic


def metric_row(step: int, split: str, parts: dict[str, float], lr: float, wall: float, n_chains: int,
                metrics: dict[str, float] | None = None) -> dict[str, Any]:
    nan = float("nan")
    metrics = metrics or {}
    return {"step": step, "split": split, "loss": parts.get("loss", nan), "distogram": parts.get("distogram", nan),
            "fape": parts.get("fape", nan), "plddt": parts.get("plddt", nan),
            "lddt_ca": metrics.get("lddt_ca", nan), "dist_top1": metrics.get("dist_top1", nan),
            "contact_precision_long": metrics.get("contact_precision_long", nan),
            "contact_precision_medlong": metrics.get("contact_precision_medlong", nan),
            "lr": lr, "wall_s": wall, "n_chains": n_chains}


def validation_row(step: int, frame: pd.DataFrame, lr: float, wall: float) -> dict[str, Any]:
    means = {key: float(np.nanmean(frame[key])) if len(frame) and frame[key].notna().any() else float("nan")
             for key in ("lddt_ca", "dist_top1", "contact_precision_long", "contact_precision_medlong", "loss")}
    return metric_row(step, "validation", {"loss": means["loss"]}, lr, wall, len(frame), means)


def write_metrics(out_dir: Path, history: list[dict[str, Any]]) -> None:
    """``metrics.json`` and ``metrics.parquet`` (:data:`TRAINING_METRICS`) and ``learning_curve.png``."""
    frame = pd.DataFrame(history, columns=[f.name for f in TRAINING_METRICS.schema])
    write_table(out_dir / "metrics.parquet", frame, TRAINING_METRICS)
    clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
             for row in history]
    write_text_atomic(out_dir / "metrics.json", json.dumps(clean, indent=1) + "\n")
    plot_learning_curve(frame, out_dir / "learning_curve.png")


def plot_learning_curve(frame: pd.DataFrame, path: Path) -> None:
    """Training loss terms (moving average over 25 steps) and validation metrics against the step."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = frame[frame["split"] == "train"]
    val = frame[frame["split"] == "validation"]
    fig, (ax_loss, ax_val) = plt.subplots(1, 2, figsize=(11, 4))
    for key in ("loss", "distogram", "fape", "plddt"):
        if len(train):
            ax_loss.plot(train["step"], train[key].rolling(25, min_periods=1).mean(), label=key)
    if len(val):
        ax_loss.plot(val["step"], val["loss"], "k--o", ms=3, label="validation loss")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss (train: moving average of 25 steps)")
    ax_loss.legend(fontsize=8)
    for key, label in (("lddt_ca", "lDDT-Cα"), ("dist_top1", "distogram top-1"),
                       ("contact_precision_long", "P@L/5 long"), ("contact_precision_medlong", "P@L/5 sep≥12")):
        if len(val):
            ax_val.plot(val["step"], val[key], "-o", ms=3, label=label)
    ax_val.set_xlabel("step")
    ax_val.set_ylabel("validation (mean over chains)")
    ax_val.set_ylim(0, 1)
    if len(val):
        ax_val.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
