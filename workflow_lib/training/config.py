"""Settings of a training run: :class:`TrainConfig` (training settings plus the model's config and loss weights)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from workflow_lib.errors import InputError
from workflow_lib.model.config import ModelConfig, preset
from workflow_lib.training.settings import TrainSettings
from workflow_lib.training.losses import LossWeights

TRAIN_PRECISIONS = ("float32", "bfloat16")


@dataclass(frozen=True, kw_only=True)
class TrainConfig(TrainSettings):
    """Settings of :func:`~workflow_lib.training.loop.train` (the model's own are in ``model``, a
    :class:`ModelConfig` dict)."""

    model: dict[str, Any]
    loss_weights: dict[str, float] = dataclasses.field(default_factory=lambda: dataclasses.asdict(LossWeights()))

    def __post_init__(self) -> None:
        ModelConfig.from_dict(self.model)
        for name in ("steps", "crop_size", "batch_size", "max_msa_rows", "checkpoint_every", "val_every",
                     "val_max_chains", "val_crop", "redraw_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"training config: {name} must be a positive integer, got {value!r}")
        if not isinstance(self.max_templates, int) or self.max_templates < 0 or not 0.0 <= self.template_dropout < 1.0:
            raise InputError("training config: need max_templates >= 0 and 0 <= template_dropout < 1")
        if not 0.0 <= self.self_template_rate <= 1.0 or (self.self_template_rate > 0 and self.max_templates < 1):
            raise InputError("training config: need 0 <= self_template_rate <= 1, and max_templates >= 1 "
                             f"when it is above 0 (got {self.self_template_rate!r} with max_templates "
                             f"{self.max_templates!r})")
        if not isinstance(self.neff_sampling, (int, float)) or not 0.0 <= self.neff_sampling <= 2.0:
            raise InputError(f"training config: neff_sampling must be between 0 and 2, got {self.neff_sampling!r}")
        if self.precision not in TRAIN_PRECISIONS:
            raise InputError(f"training config: precision must be one of {', '.join(TRAIN_PRECISIONS)}, "
                             f"got {self.precision!r}")
        if self.warmup_steps < 0 or not self.lr > 0 or self.clip_norm <= 0 or not 0 <= self.min_lr_fraction <= 1:
            raise InputError("training config: need warmup_steps ≥ 0, lr > 0, clip_norm > 0, "
                             "0 ≤ min_lr_fraction ≤ 1")
        unknown = sorted(set(self.loss_weights) - {f.name for f in dataclasses.fields(LossWeights)})
        if unknown:
            raise InputError(f"training config: unknown loss weight(s) {unknown}")
        LossWeights(**self.loss_weights)

    @property
    def model_config(self) -> ModelConfig:
        return ModelConfig.from_dict(self.model)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"training config: unknown key(s) {unknown}")
        return cls(**data)


def training_model_config(preset_name: str = "small", **overrides: Any) -> ModelConfig:
    """A preset with the feature file's co-evolution (2) and template (131 / 26) channel widths."""
    from workflow_lib.schemas.features import C_COEVOLUTION, C_TEMPLATE_1D, C_TEMPLATE_PAIR

    return preset(preset_name, **{"c_coevolution": C_COEVOLUTION, "c_template_pair": C_TEMPLATE_PAIR,
                                  "c_template_1d": C_TEMPLATE_1D, **overrides})
