"""Helpers shared by the model tests (imported by name: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import torch


def randomize_(module: torch.nn.Module, seed: int = 0, scale: float = 0.2) -> torch.nn.Module:
    """Perturb every parameter so zero-initialised output layers do not make a test trivial."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module
