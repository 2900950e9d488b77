"""Build, write and read the per-protein feature file (:data:`~workflow_lib.features.schema.FEATURES`).

``build_features(a3m)`` = :func:`~workflow_lib.seqio.msa.read_a3m` (bad input is an
:class:`~workflow_lib.errors.InputError` naming the file and record) → :func:`msa_features` → empty template
slots (T = 0, filled by the template stage later) → validation against the schema. Deterministic: the same
A3M and options give byte-identical arrays (the npz container itself carries zip timestamps).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workflow_lib.features.msa_features import (
    DEFAULT_MAX_SEQS,
    DEFAULT_MAX_STATS_SEQS,
    PROFILE_PSEUDOCOUNT,
    WEIGHT_IDENTITY,
    msa_features,
)
from workflow_lib.features.schema import FEATURES, empty_templates
from workflow_lib.features.states import DEFAULT_BLOCK_BYTES
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.seqio.schemas import read_npz, write_npz


def build_features(a3m_path: str | Path, *, max_seqs: int = DEFAULT_MAX_SEQS,
                   max_stats_seqs: int = DEFAULT_MAX_STATS_SEQS, seed: int = 0,
                   identity: float = WEIGHT_IDENTITY, profile_pseudocount: float = PROFILE_PSEUDOCOUNT,
                   pair_pseudocount: float = 0.0, block_bytes: int = DEFAULT_BLOCK_BYTES) -> dict[str, np.ndarray]:
    """Features of one A3M (query first), validated against :data:`FEATURES`; options as :func:`msa_features`."""
    alignment = read_a3m(a3m_path)
    features = msa_features(alignment, max_seqs=max_seqs, max_stats_seqs=max_stats_seqs, seed=seed,
                            identity=identity, profile_pseudocount=profile_pseudocount,
                            pair_pseudocount=pair_pseudocount, block_bytes=block_bytes)
    features.update(empty_templates(alignment.length))
    return FEATURES.validate(features, str(a3m_path))


def write_features(path: str | Path, features: dict[str, np.ndarray]) -> None:
    """Validate ``features`` against :data:`FEATURES` and write them as compressed npz, atomically."""
    write_npz(path, features, FEATURES)


def read_features(path: str | Path) -> dict[str, np.ndarray]:
    """Load a feature file and validate it (:class:`~workflow_lib.errors.SchemaError` naming the file)."""
    return read_npz(path, FEATURES)
