"""Folding from the predicted distogram: backbone frames minimised against distance restraints in torch.

The trRosetta / RoseTTAFold route (seed 000, "Representing Protein Structure": the 6D maps are what the network
predicts best): the predicted Cβ–Cβ distance distribution ``P_ij`` over the distogram bins
(:data:`~workflow_lib.structure.geometry.DIST_EDGES`, 0.5 Å bins from 2 to 20 Å, the last bin "≥ 20 Å") becomes a
statistical potential ``V_ij(d) = −log(P_ij(bin(d)) + ε) + log(P_ref(bin(d)))`` with the reference ``P_ref`` the
bins' mean over all pairs of the protein at that sequence separation class (a "background" in the spirit of
trRosetta's reference state), linearly interpolated between bin centres and constant beyond 20 Å. Only pairs
with ``|i − j| ≥ 3`` whose predicted contact probability ``P(d < 20 Å)`` exceeds ``min_prob`` are restrained,
weighted by it.

The structure is a chain of rigid residue frames with ideal backbone geometry
(:func:`~workflow_lib.model.structure.backbone_from_frames`; virtual Cβ as the distogram's targets); the
energy adds the peptide-bond and Cα–Cα terms of :func:`~workflow_lib.training.losses.bond_violation_loss`
(weight ``bond_weight``, annealed from 1/100 of it to all of it over the iterations, so that the restraints
shape the fold first and the chain is made physical last, then ``polish`` more steps at the full weight and a
fifth of the step size) and a Cα clash term ``max(0, 3.8 − d)²`` for ``|i − j| ≥ 2``. Adam minimises it from
``starts`` random-walk chains (seeded); the lowest-energy result wins. Cost: O(L²) per iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from workflow_lib.model.structure import (Frames, backbone_from_frames, cb_from_backbone,
                                          quaternion_to_rotation)
from workflow_lib.structure.geometry import DIST_EDGES, DIST_MAX

BIN_CENTRES = np.concatenate([(DIST_EDGES[:-1] + DIST_EDGES[1:]) / 2.0, [DIST_MAX + 1.0]])
"""Centre of each distogram bin (Å); the last (≥ 20 Å) is placed at 21 Å."""
TAIL_SLOPE = 0.1
"""Beyond the last centre a restrained pair's potential rises linearly (per Å), so that pairs predicted in
contact but started far apart are pulled in (the bins alone are flat there)."""


@dataclass(frozen=True)
class FoldOptions:
    """Settings of :func:`fold_from_distogram`."""

    starts: int = 4
    iterations: int = 400
    polish: int = 100
    lr: float = 0.5
    min_prob: float = 0.05
    min_separation: int = 3
    bond_weight: float = 100.0
    clash_weight: float = 1.0
    seed: int = 0


def restraint_potential(dist_probs: np.ndarray, min_separation: int = 3, eps: float = 1e-4
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``(V [L, L, bins], weight [L, L])``: the potential per bin (module docstring) and the restraint weights
    (contact probability, 0 for unrestrained pairs)."""
    probs = np.asarray(dist_probs, dtype=np.float64)
    length = probs.shape[0]
    sep = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
    potential = np.zeros_like(probs)
    for low, high in ((min_separation, 12), (12, 24), (24, length + 1)):
        mask = (sep >= low) & (sep < high)
        if not mask.any():
            continue
        reference = probs[mask].mean(axis=0) + eps
        potential[mask] = -np.log(probs[mask] + eps) + np.log(reference)
    weight = np.where(sep >= min_separation, 1.0 - probs[..., -1], 0.0)
    return potential, weight


def _interpolate(potential: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
    """Piecewise-linear ``V(d)`` between bin centres (constant outside), for ``potential [P, bins]``, ``dist [P]``."""
    centres = torch.as_tensor(BIN_CENTRES, dtype=dist.dtype, device=dist.device)
    tail = (dist - float(centres[-1])).clamp_min(0.0) * TAIL_SLOPE
    d = dist.clamp(float(centres[0]), float(centres[-1]))
    upper = torch.searchsorted(centres, d.detach()).clamp(1, len(centres) - 1)
    lower = upper - 1
    c0, c1 = centres[lower], centres[upper]
    frac = (d - c0) / (c1 - c0)
    v0 = potential.gather(-1, lower[:, None]).squeeze(-1)
    v1 = potential.gather(-1, upper[:, None]).squeeze(-1)
    return v0 + frac * (v1 - v0) + tail


def fold_from_distogram(dist_probs: np.ndarray, options: FoldOptions = FoldOptions()
                        ) -> tuple[np.ndarray, float]:
    """Backbone ``[L, 3, 3]`` (N, CA, C; Å) minimising the restraint energy, and that energy per residue."""
    from workflow_lib.training.losses import bond_violation_loss

    length = dist_probs.shape[0]
    potential, weight = restraint_potential(dist_probs, options.min_separation)
    pairs = np.argwhere(np.triu(weight > options.min_prob, k=1))
    pot = torch.as_tensor(potential[pairs[:, 0], pairs[:, 1]], dtype=torch.float32)
    w = torch.as_tensor(weight[pairs[:, 0], pairs[:, 1]], dtype=torch.float32)
    i_idx, j_idx = torch.as_tensor(pairs[:, 0]), torch.as_tensor(pairs[:, 1])
    bonded = torch.ones(1, max(0, length - 1), dtype=torch.bool)
    far = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=2)
    generator = torch.Generator().manual_seed(options.seed)
    best, best_energy = None, float("inf")
    for _ in range(options.starts):
        # a random-walk chain of 3.8 Å steps: about the size of a folded protein of that length
        steps = torch.randn(length, 3, generator=generator)
        steps = 3.8 * steps / steps.norm(dim=-1, keepdim=True)
        trans = torch.cumsum(steps, dim=0).requires_grad_(True)
        quat = torch.randn(length, 4, generator=generator).requires_grad_(True)
        optimizer = torch.optim.Adam([trans, quat], lr=options.lr)

        def energy(bond_weight: float = options.bond_weight) -> torch.Tensor:
            backbone = backbone_from_frames(Frames(quaternion_to_rotation(quat), trans))
            cb = cb_from_backbone(backbone)
            value = torch.zeros(())
            if len(pairs):
                d = (cb[i_idx] - cb[j_idx]).norm(dim=-1)
                value = value + (w * _interpolate(pot, d)).sum() / length
            bonds, _ = bond_violation_loss(backbone[None], bonded, tolerance=0.0)
            ca = backbone[:, 1]
            ca_dist = torch.cdist(ca, ca)
            clash = (torch.relu(3.8 - ca_dist) ** 2)[far].sum() / length
            return value + bond_weight * bonds + options.clash_weight * clash

        for step in range(options.iterations):
            optimizer.zero_grad()
            # annealed chain geometry: 1/100 of the bond weight at first (the restraints shape the fold), the full
            # weight at the end (the chain is made physical)
            value = energy(options.bond_weight * 10.0 ** (-2.0 * (1.0 - step / max(1, options.iterations - 1))))
            value.backward()
            optimizer.step()
        for group in optimizer.param_groups:
            group["lr"] = options.lr * 0.2
        for _ in range(options.polish):
            optimizer.zero_grad()
            value = energy()
            value.backward()
            optimizer.step()
        with torch.no_grad():
            final = float(energy())
            if final < best_energy:
                best_energy = final
                best = backbone_from_frames(Frames(quaternion_to_rotation(quat), trans)).numpy()
    return best.astype(np.float64), best_energy
