"""Training the three-track network on experimental chains: the optimisation loop, its schedule and resume.

:func:`train`: per step one chain (a cluster drawn uniformly, then a member uniformly; or, with ``neff_sampling``
α > 0, a chain with probability ∝ Neff^α / cluster size, :func:`sampling_weights`), a random contiguous
crop of ``crop_size`` residues, the query plus a random subset of at most ``max_msa_rows − 1`` other MSA rows
(:func:`~workflow_lib.training.examples.make_example`); losses of :mod:`workflow_lib.training.losses`; AdamW
with linear warm-up and cosine decay to 10% (:func:`learning_rate`), global gradient-norm clipping; FAVOR+
features redrawn every ``redraw_every`` steps from a generator seeded by the step. A training state (model,
optimizer, step, torch and NumPy RNG states, metrics so far; :mod:`workflow_lib.training.state`) is written
every ``checkpoint_every`` steps and a rerun resumes from it exactly: same parameters as an uninterrupted run.
Validation passes: :mod:`workflow_lib.training.validation`; the training curve:
:mod:`workflow_lib.training.metrics`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from workflow_lib.errors import InputError
from workflow_lib.model.checkpoint import load_weights, network_device, save_checkpoint
from workflow_lib.model.network import ThreeTrackNetwork, count_parameters
from workflow_lib.schemas.io import write_table
from workflow_lib.schemas.training import VALIDATION_CHAINS
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.training.config import TrainConfig
from workflow_lib.training.examples import TrainingChain, collate, make_example, to_device
from workflow_lib.training.losses import LossWeights, total_loss
from workflow_lib.training.metrics import metric_row, validation_row, write_metrics
from workflow_lib.training.state import load_training_state, save_training_state
from workflow_lib.training.validation import evaluate

log = logging.getLogger(__name__)


def training_device(name: str | torch.device) -> torch.device:
    """``trackfold train --device``: :func:`~workflow_lib.model.checkpoint.network_device` (a torch device as it is)."""
    return name if isinstance(name, torch.device) else network_device(name, command="train")


def learning_rate(config: TrainConfig, step: int) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine decay to ``min_lr_fraction · lr`` at ``steps``."""
    if config.warmup_steps and step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    span = max(1, config.steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    floor = config.min_lr_fraction
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass
class TrainResult:
    step: int
    history: list[dict[str, Any]]
    validation: pd.DataFrame | None
    model_path: Path | None
    wall_s: float


def sampling_weights(chains: Sequence[TrainingChain], clusters: Sequence[int], exponent: float) -> np.ndarray:
    """Probabilities of drawing each training chain: ``Neff^exponent / (its cluster's size)``, normalised
    (:attr:`~workflow_lib.training.settings.TrainSettings.neff_sampling`)."""
    sizes: dict[int, int] = {}
    for cluster in clusters:
        sizes[int(cluster)] = sizes.get(int(cluster), 0) + 1
    neff = np.array([max(chain.neff(), 1.0) for chain in chains], dtype=np.float64)
    weights = neff ** exponent / np.array([sizes[int(c)] for c in clusters], dtype=np.float64)
    return weights / weights.sum()


def _sample(chains: Sequence[TrainingChain], clusters: Sequence[int], rng: np.random.Generator,
            crop_size: int, weights: np.ndarray | None = None) -> tuple[TrainingChain, int, int]:
    if weights is not None:
        chain = chains[int(rng.choice(len(chains), p=weights))]
    else:
        members: dict[int, list[int]] = {}
        for k, cluster in enumerate(clusters):
            members.setdefault(int(cluster), []).append(k)
        keys = sorted(members)
        cluster = keys[int(rng.integers(len(keys)))]
        chain = chains[members[cluster][int(rng.integers(len(members[cluster])))]]
    length = min(len(chain), crop_size)
    start = int(rng.integers(len(chain) - length + 1))
    return chain, start, length


def train(config: TrainConfig, train_chains: Sequence[TrainingChain], train_clusters: Sequence[int],
          val_chains: Sequence[TrainingChain], out_dir: str | Path, *, resume: bool = True,
          stop_after: int | None = None, time_limit_s: float | None = None,
          final_validation: bool = True, export_extra: dict[str, Any] | None = None,
          device: str | torch.device = "cpu") -> TrainResult:
    """Run (or resume) training; writes ``out_dir/train_state.pt``, ``metrics.*``, ``learning_curve.png``,
    and at the end ``model.pt`` (:func:`~workflow_lib.model.checkpoint.save_checkpoint`) and
    ``validation.parquet`` (:data:`VALIDATION_CHAINS`, all validation chains).

    ``stop_after`` stops after that many steps in total (as if interrupted, no final export) and
    ``time_limit_s`` stops at the first step boundary past that much wall time of this call (then exports).
    ``device`` (:func:`training_device`: ``cpu``, ``cuda`` or ``auto``) is where the model trains; the state and
    checkpoint hold CPU tensors either way. Resume is bitwise exact on the CPU; on CUDA the kernels and the CUDA
    RNG (not stored) make a resumed run close to, not identical with, an uninterrupted one.
    """
    if not train_chains:
        raise InputError("no training chains")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state_path = out_dir / "train_state.pt"
    torch.manual_seed(config.seed)
    device = training_device(device)
    model = ThreeTrackNetwork(config.model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    rng = np.random.default_rng(config.seed)
    weights = LossWeights(**config.loss_weights)
    step, history, wall_before = 0, [], 0.0
    if resume and state_path.exists():
        info = load_training_state(state_path, model, optimizer, config)
        step, history, wall_before = int(info["step"]), info["history"], float(info["wall_s"])
        rng.bit_generator.state = info["numpy_rng"]
        log.info("resumed from %s at step %d", state_path, step)
    elif config.init_model:
        load_weights(config.init_model, model, widen=True, blocks=config.init_blocks)
        log.info("initialised from %s%s", config.init_model,
                 f" (blocks {config.init_blocks})" if config.init_blocks else "")
    write_text_atomic(out_dir / "train_config.json", json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    log.info("model: %d parameters; %d training chains, %d validation chains", count_parameters(model),
             len(train_chains), len(val_chains))
    started = time.monotonic()
    val_subset = list(val_chains)[:config.val_max_chains]
    draw = sampling_weights(train_chains, train_clusters, config.neff_sampling) if config.neff_sampling else None

    def wall() -> float:
        return wall_before + time.monotonic() - started

    def checkpoint() -> None:
        save_training_state(state_path, model, optimizer, {
            "step": step, "history": history, "wall_s": wall(), "numpy_rng": rng.bit_generator.state,
            "train_config": config.to_dict()})
        write_metrics(out_dir, history)

    last = config.steps if stop_after is None else min(config.steps, stop_after)
    model.train()
    while step < last:
        if time_limit_s is not None and time.monotonic() - started > time_limit_s:
            log.info("time limit reached at step %d", step)
            break
        if step % config.redraw_every == 0:
            model.redraw_performer_features(torch.Generator().manual_seed(config.seed * 1_000_003 + step))
        examples = []
        for _ in range(config.batch_size):
            chain, start, length = _sample(train_chains, train_clusters, rng, config.crop_size, draw)
            examples.append(make_example(chain, start, length, rng, config.max_msa_rows,
                                         model.config.msa_statistics, config.max_templates,
                                         config.template_dropout, config.self_template_rate))
        inputs, targets = to_device(collate(examples), device)
        lr = learning_rate(config, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.precision == "bfloat16"):
            outputs = model(inputs)
        if config.precision != "float32":   # the losses in float32, whatever the forward pass ran in
            outputs = {key: value.float() if torch.is_tensor(value) and value.is_floating_point() else value
                       for key, value in outputs.items()}
        loss, parts = total_loss(outputs, targets, weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        optimizer.step()
        step += 1
        history.append(metric_row(step, "train", parts, lr, wall(), config.batch_size))
        if step % 10 == 0:
            log.info("step %d loss %.3f (dist %.3f fape %.3f plddt %.3f) %.1fs", step, parts["loss"],
                     parts["distogram"], parts["fape"], parts["plddt"], wall())
        if val_subset and step % config.val_every == 0:
            frame = evaluate(model, val_subset, config)
            history.append(validation_row(step, frame, lr, wall()))
            log.info("step %d validation lDDT-Cα %.3f top-1 %.3f", step, history[-1]["lddt_ca"],
                     history[-1]["dist_top1"])
        if step % config.checkpoint_every == 0 or step == last:
            checkpoint()
    checkpoint()
    if stop_after is not None and step >= stop_after and step < config.steps:
        return TrainResult(step, history, None, None, wall())
    validation = None
    if final_validation and val_chains:
        validation = evaluate(model, val_chains, config, fold=True)
        write_table(out_dir / "validation.parquet", validation, VALIDATION_CHAINS)
    summary = validation_row(step, validation, float("nan"), wall()) if validation is not None else {}
    extra = {"steps": step, "train_wall_s": round(wall(), 1), "train_chains": len(train_chains),
             "validation_chains": len(val_chains), "train_config": json.dumps(config.to_dict(), sort_keys=True),
             **{f"validation_{k}": summary[k] for k in ("lddt_ca", "dist_top1", "contact_precision_long",
                                                         "contact_precision_medlong") if summary},
             **{f"validation_{k}": float(validation[k].mean()) for k in ("fold_lddt_ca", "fold_tm_score")
                if validation is not None and validation[k].notna().any()},
             **(export_extra or {})}
    model_path = save_checkpoint(out_dir / "model.pt", model, extra=extra)
    return TrainResult(step, history, validation, model_path, wall())
