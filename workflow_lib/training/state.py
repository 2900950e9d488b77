"""The resumable training state ``train_state.pt``: model, optimizer, step, RNG states and metrics so far.

A ``torch.save`` file of tensors and plain containers read back with ``weights_only=True``; everything that is
not a tensor is one JSON string. A rerun of :func:`~workflow_lib.training.loop.train` resumes from it exactly
(same parameters as an uninterrupted run). The finished model is a checkpoint of
:mod:`workflow_lib.model.checkpoint`, not this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from workflow_lib.errors import SchemaError
from workflow_lib.model.checkpoint import check_state_dict
from workflow_lib.model.network import ThreeTrackNetwork
from workflow_lib.seqio.atomic import atomic_path
from workflow_lib.training.config import TrainConfig

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


def load_training_state(path: str | Path, model: ThreeTrackNetwork, optimizer: torch.optim.Optimizer,
                        config: TrainConfig) -> dict[str, Any]:
    """Restore ``model`` and ``optimizer`` and the torch RNG; returns the ``info`` dict.

    Refuses (:class:`SchemaError` naming the keys) a state written with another model or training config,
    or whose tensors do not match the model.
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
    diff = _differences(info["train_config"], config.to_dict())
    if diff:
        raise SchemaError(f"{path}: training state has another training config: {'; '.join(diff)}")
    check_state_dict(path, model, payload["state_dict"])
    model.load_state_dict(payload["state_dict"], strict=True)
    optimizer.load_state_dict(payload["optimizer"])
    torch.set_rng_state(payload["torch_rng"])
    return info
