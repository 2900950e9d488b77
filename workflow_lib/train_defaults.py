"""Default training settings (torch-free, package top level), shared by :class:`workflow_lib.model.training.TrainConfig` (``trackfold train``)
and :class:`workflow_lib.workflow.config.TrainWorkflowConfig` (config section ``train``).

A torch-free module, so the workflow's config (read by every ``snakemake`` invocation, ``-n`` included) does
not import torch; ``tests/test_train_workflow.py`` also checks these against ``config/schema.yaml``.
"""

from __future__ import annotations

TRAIN_DEFAULTS: dict[str, int | float | str] = {
    "steps": 1000,
    "crop_size": 96,
    "max_msa_rows": 64,
    "lr": 1e-3,
    "warmup_steps": 50,
    "min_lr_fraction": 0.1,
    "weight_decay": 0.01,
    "clip_norm": 1.0,
    "checkpoint_every": 50,
    "val_every": 200,
    "val_max_chains": 24,
    "val_crop": 192,
    "redraw_every": 100,
    "seed": 0,
    "init_model": "",
}
