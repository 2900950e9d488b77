"""The resumable training state ``train_state.pt``: model, optimizer, step, RNG states and metrics so far.

A ``torch.save`` file of tensors and plain containers read back with ``weights_only=True``; everything that is
not a tensor is one JSON string. A rerun of :func:`~workflow_lib.training.loop.train` resumes from it exactly
(same parameters as an uninterrupted run). The finished model is a checkpoint of
:mod:`workflow_lib.model.checkpoint`, not this file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from workflow_lib.errors import SchemaError
from workflow_lib.model.checkpoint import check_state_dict
from workflow_lib.model.network import ThreeTrackNetwork
from workflow_lib.seqio.atomic import atomic_path
from workflow_lib.training.config import TrainConfig
from workflow_lib.training.settings import TrainSettings

STATE_FORMAT_VERSION = 1


def _differences(stored: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    keys = sorted(set(stored) | set(wanted))
    return [f"{key}: state {stored.get(key)!r} vs requested {wanted.get(key)!r}" for key in keys
            if stored.get(key) != wanted.get(key)]


def save_training_state(path: str | Path, model: ThreeTrackNetwork, optimizer: torch.optim.Optimizer,
                        info: dict[str, Any]) -> None:
    """Atomically write the resumable state: tensors + the JSON string ``info`` (step, RNG, config, metrics)."""
    payload = {
        "format_version": STATE_FORMAT_VERSION,
        "config": model.config.to_json(),
        "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "info": json.dumps(info, sort_keys=True),
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


RESUME_MAY_CHANGE = ("precision",)
"""Training settings a resumed run may change: how the arithmetic runs, not what is trained (a run moved from a
CPU to a GPU, say)."""


def load_training_state(path: str | Path, model: ThreeTrackNetwork, optimizer: torch.optim.Optimizer,
                        config: TrainConfig) -> dict[str, Any]:
    """Restore ``model`` and ``optimizer`` and the torch RNG; returns the ``info`` dict.

    Refuses (:class:`SchemaError` naming the keys) a state written with another model or training config,
    or whose tensors do not match the model. A training setting missing from the stored config (a state
    written before the setting existed) counts as its default; :data:`RESUME_MAY_CHANGE` may differ.
    """
    path = Path(path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is reported the same way
        raise SchemaError(f"{path}: not a trackfold training state: {err}") from err
    if not isinstance(payload, dict) or payload.get("format_version") != STATE_FORMAT_VERSION:
        raise SchemaError(f"{path}: not a trackfold training state (format_version "
                          f"{payload.get('format_version') if isinstance(payload, dict) else None!r})")
    stored_model = json.loads(payload["config"])
    diff = _differences(stored_model, model.config.to_dict())
    if diff:
        raise SchemaError(f"{path}: training state has another model config: {'; '.join(diff)}")
    info = json.loads(payload["info"])
    defaults = {field.name: field.default for field in dataclasses.fields(TrainSettings)}
    stored_train = {**{k: v for k, v in defaults.items() if k in config.to_dict()}, **info["train_config"]}
    wanted = config.to_dict()
    for key in RESUME_MAY_CHANGE:
        stored_train.pop(key, None)
        wanted.pop(key, None)
    diff = _differences(stored_train, wanted)
    if diff:
        raise SchemaError(f"{path}: training state has another training config: {'; '.join(diff)}")
    check_state_dict(path, model, payload["state_dict"])
    model.load_state_dict(payload["state_dict"], strict=True)
    optimizer.load_state_dict(payload["optimizer"])
    torch.set_rng_state(payload["torch_rng"])
    return info
