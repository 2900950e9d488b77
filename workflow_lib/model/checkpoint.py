"""Model weights as one file, ``{"format_version": 1, "config": <ModelConfig JSON>, "state_dict": {...}}``, and
the device the network runs on (:func:`network_device`).

Written with ``torch.save`` (atomically: temp file in the destination directory, then ``os.replace``) and read
with ``torch.load(..., weights_only=True)``, which only rebuilds tensors and plain containers -- a checkpoint can
never execute code. Every way a file can disagree with the model (version, config, missing, unexpected or
mis-shaped tensors) is a :class:`~workflow_lib.errors.SchemaError` that names the offending keys.
"""

from __future__ import annotations

from pickle import UnpicklingError  # only to catch torch.load(weights_only=True) refusing a file
import zipfile
from pathlib import Path
from typing import Any, Sequence

import torch

from workflow_lib.errors import InputError, SchemaError
from workflow_lib.model.config import ModelConfig
from workflow_lib.model.network import ThreeTrackNetwork
from workflow_lib.seqio.atomic import atomic_path

FORMAT_VERSION = 1
_MAX_LISTED = 10


def network_device(name: str, *, command: str) -> torch.device:
    """Where the network runs: ``auto`` -> CUDA when torch sees a GPU, else the CPU; ``cpu``; ``cuda``, an
    :class:`InputError` naming ``command`` when torch sees no GPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise InputError(f"{command}: --device cuda requested but torch sees no CUDA device")
    if name not in ("cpu", "cuda"):
        raise InputError(f"{command}: device must be auto, cpu or cuda, got {name!r}")
    return torch.device(name)


def save_checkpoint(path: str | Path, model: ThreeTrackNetwork, *, extra: dict[str, Any] | None = None) -> Path:
    """Write ``model`` (its config and state dict, tensors moved to CPU) to ``path`` atomically.

    ``extra`` may carry plain metadata (str/int/float/bool/None, lists and dicts of those), e.g. the training
    step; it is stored under ``"extra"``.
    """
    path = Path(path)
    state = {key: value.detach().to("cpu").clone() for key, value in model.state_dict().items()}
    payload = {"format_version": FORMAT_VERSION, "config": model.config.to_json(), "state_dict": state,
               "extra": extra or {}}
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return path


def _read(path: Path, map_location: str | torch.device) -> dict[str, Any]:
    if not path.is_file():
        raise InputError("checkpoint file not found", path=path)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except (UnpicklingError, RuntimeError, zipfile.BadZipFile, EOFError, ValueError) as err:
        raise SchemaError(f"{path}: not a trackfold checkpoint (or it contains non-tensor objects): {err}") from err
    if not isinstance(payload, dict):
        raise SchemaError(f"{path}: checkpoint must hold a dict, found {type(payload).__name__}")
    missing = [key for key in ("format_version", "config", "state_dict") if key not in payload]
    if missing:
        raise SchemaError(f"{path}: checkpoint lacks key(s) {missing}")
    if payload["format_version"] != FORMAT_VERSION:
        raise SchemaError(f"{path}: checkpoint format_version {payload['format_version']!r} is not supported "
                          f"(expected {FORMAT_VERSION})")
    if not isinstance(payload["state_dict"], dict):
        raise SchemaError(f"{path}: state_dict must be a dict")
    return payload


def read_config(path: str | Path) -> ModelConfig:
    """The :class:`ModelConfig` stored in a checkpoint (validated)."""
    path = Path(path)
    payload = _read(path, "cpu")
    return _parse_config(path, payload["config"])


def _parse_config(path: Path, text: Any) -> ModelConfig:
    if not isinstance(text, str):
        raise SchemaError(f"{path}: checkpoint config must be a JSON string")
    try:
        return ModelConfig.from_json(text)
    except InputError as err:
        raise SchemaError(f"{path}: checkpoint config is invalid: {err}") from err


def _listed(keys: list[str]) -> str:
    shown = ", ".join(keys[:_MAX_LISTED])
    return shown + (f" ... ({len(keys)} in all)" if len(keys) > _MAX_LISTED else "")


def check_state_dict(path: Path, model: torch.nn.Module, state: dict[str, Any]) -> None:
    """Raise :class:`SchemaError` naming missing, unexpected and shape-mismatched keys."""
    expected = model.state_dict()
    problems = []
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    mismatched = sorted(
        f"{key} (checkpoint {tuple(state[key].shape)}, model {tuple(expected[key].shape)})"
        for key in set(expected) & set(state)
        if not isinstance(state[key], torch.Tensor) or state[key].shape != expected[key].shape)
    if missing:
        problems.append(f"missing key(s): {_listed(missing)}")
    if unexpected:
        problems.append(f"unexpected key(s): {_listed(unexpected)}")
    if mismatched:
        problems.append(f"shape mismatch: {_listed(mismatched)}")
    if problems:
        raise SchemaError(f"{path}: checkpoint does not match the model; " + "; ".join(problems))


def load_checkpoint(path: str | Path, *, map_location: str | torch.device = "cpu",
                    expected_config: ModelConfig | None = None) -> tuple[ThreeTrackNetwork, dict[str, Any]]:
    """Build the network described by the checkpoint and load its weights; returns ``(model, extra)``.

    With ``expected_config`` the stored config must be equal to it (differences are named). The model is
    returned in eval mode on ``map_location``.
    """
    path = Path(path)
    payload = _read(path, map_location)
    config = _parse_config(path, payload["config"])
    if expected_config is not None and config != expected_config:
        stored, wanted = config.to_dict(), expected_config.to_dict()
        diff = sorted(f"{key}: checkpoint {stored[key]!r} vs expected {wanted[key]!r}"
                      for key in stored if stored[key] != wanted[key])
        raise SchemaError(f"{path}: checkpoint config differs from the expected one: {'; '.join(diff)}")
    model = ThreeTrackNetwork(config)
    load_weights(path, model, payload=payload)
    model.to(map_location)
    model.eval()
    return model, dict(payload.get("extra") or {})


def widen_coevolution(state: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
    """``state`` with its co-evolution input projection widened to ``model``'s channels: the columns of channels
    appended since the checkpoint was trained (:data:`~workflow_lib.schemas.features.COEVOLUTION_CHANNELS`)
    start at zero, so the widened network computes exactly what the checkpoint did until training moves them."""
    expected = model.state_dict()
    widened = dict(state)
    for key, value in state.items():
        if key.endswith("coevolution.weight") and key in expected and isinstance(value, torch.Tensor):
            target = expected[key]
            if value.ndim == 2 and value.shape[0] == target.shape[0] and value.shape[1] < target.shape[1]:
                grown = torch.zeros(target.shape, dtype=value.dtype)
                grown[:, :value.shape[1]] = value
                widened[key] = grown
    return widened


def parse_block_selection(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``"0,2+1"`` -> ``((0, 2), (1,))``: the two-track and the three-track blocks of a checkpoint to keep, in
    order (:func:`select_blocks`); either list may be empty (``"0,1,2,3+"``)."""
    two, sep, three = str(text).partition("+")
    if not sep:
        raise InputError(f"block selection {text!r}: expected TWO_TRACK+THREE_TRACK block indices, e.g. 0,2+1")

    def indices(part: str) -> tuple[int, ...]:
        try:
            values = tuple(int(piece) for piece in part.split(",") if piece.strip())
        except ValueError as err:
            raise InputError(f"block selection {text!r}: {err}") from err
        if any(value < 0 for value in values) or len(set(values)) != len(values):
            raise InputError(f"block selection {text!r}: block indices must be distinct and >= 0")
        return values

    return indices(two), indices(three)


def select_blocks(state: dict[str, Any], two_track: Sequence[int], three_track: Sequence[int], *,
                  path: str | Path = "checkpoint") -> dict[str, Any]:
    """``state`` keeping only the listed two- and three-track blocks, renumbered in the order given; every other
    weight (embeddings, initial structure, heads) is kept as it is.

    A shallower network started from a deeper one's blocks (layer dropping, as in the DistilBERT and
    "Reducing Transformer Depth on Demand" students, Sanh et al. 2019, Fan et al. 2020) keeps most of what the
    deeper one computes and trains back to it in far fewer steps than from random weights."""
    chosen = {"two_track_blocks": list(two_track), "three_track_blocks": list(three_track)}
    present = {name: sorted({int(key.split(".")[1]) for key in state if key.startswith(name + ".")})
               for name in chosen}
    selected: dict[str, Any] = {}
    for name, keep in chosen.items():
        absent = [index for index in keep if index not in present[name]]
        if absent:
            raise InputError(f"{path}: the checkpoint has no {name.replace('_', ' ')} {absent} "
                             f"(it has {present[name]})")
    for key, value in state.items():
        name, _, rest = key.partition(".")
        if name in chosen:
            index, _, tail = rest.partition(".")
            if int(index) in chosen[name]:
                selected[f"{name}.{chosen[name].index(int(index))}.{tail}"] = value
        else:
            selected[key] = value
    return selected


def load_weights(path: str | Path, model: torch.nn.Module, *, payload: dict[str, Any] | None = None,
                 map_location: str | torch.device = "cpu", widen: bool = False, blocks: str = "") -> None:
    """Load a checkpoint's weights into an existing ``model`` after checking keys and shapes; with ``widen``, a
    checkpoint trained on fewer co-evolution channels is widened first (:func:`widen_coevolution`); ``blocks``
    (``"0,2+1"``, :func:`parse_block_selection`) keeps only those blocks of the checkpoint
    (:func:`select_blocks`), for a shallower model."""
    path = Path(path)
    if payload is None:
        payload = _read(path, map_location)
    state = payload["state_dict"]
    if blocks:
        state = select_blocks(state, *parse_block_selection(blocks), path=path)
    state = widen_coevolution(state, model) if widen else state
    check_state_dict(path, model, state)
    model.load_state_dict(state, strict=True)
