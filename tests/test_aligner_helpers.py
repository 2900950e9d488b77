"""Shared helpers of the aligner tests: random profiles and slices of real ones."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from workflow_lib.aligner.profile import Profile

ALIGNER_DATA = Path(__file__).parent / "data" / "aligner"
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"   # ../shared/data beside the repo


def random_profile(rng: np.random.Generator, length: int, *, name: str = "random", sharpness: float = 0.3) -> Profile:
    """A profile with Dirichlet emissions and random (normalised) transitions, pseudocounts flagged as added."""
    emissions = rng.dirichlet(np.full(20, sharpness), size=length).astype(np.float32)
    emissions = np.maximum(emissions, 1e-6)
    emissions /= emissions.sum(axis=1, keepdims=True)
    transitions = np.empty((length + 1, 7), dtype=np.float32)
    transitions[:, 0:3] = rng.dirichlet([20, 1, 1], size=length + 1)
    transitions[:, 3:5] = rng.dirichlet([2, 2], size=length + 1)
    transitions[:, 5:7] = rng.dirichlet([2, 2], size=length + 1)
    return Profile(name, rng.integers(0, 20, length).astype(np.uint8), emissions.astype(np.float32), transitions,
                   np.ones((length + 1, 3), dtype=np.float32), 1.0,
                   np.full(20, 0.05, dtype=np.float32), True)


def cut_profile(profile: Profile, start: int, end: int) -> Profile:
    """Columns ``start:end`` of a profile (transitions ``start:end + 1``)."""
    return dataclasses.replace(profile, sequence=profile.sequence[start:end].copy(),
                               emissions=profile.emissions[start:end].copy(),
                               transitions=profile.transitions[start:end + 1].copy(),
                               column_neff=profile.column_neff[start:end + 1].copy())
