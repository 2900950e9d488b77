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
``starts`` random-walk chains (seeded), run as one batch; the lowest-energy result wins. Cost: O(L²) per
iteration; the restraint and clash terms run as one compiled pass over the pairs where numba is available
(:mod:`workflow_lib.inference.fold_compiled`), as torch tensor expressions otherwise.
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
CLASH_DISTANCE = 3.8
"""Cα pairs at least two apart in sequence closer than this (Å) pay ``(CLASH_DISTANCE − d)²``."""


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
    """Piecewise-linear ``V(d)`` between bin centres (constant outside, rising by ``TAIL_SLOPE`` beyond the last),
    for ``potential [P, bins]`` and distances ``dist [*, P]`` of the same ``P`` pairs (any leading dimensions)."""
    centres = torch.as_tensor(BIN_CENTRES, dtype=dist.dtype, device=dist.device)
    tail = (dist - float(centres[-1])).clamp_min(0.0) * TAIL_SLOPE
    d = dist.clamp(float(centres[0]), float(centres[-1]))
    upper = torch.searchsorted(centres, d.detach()).clamp(1, len(centres) - 1)
    lower = upper - 1
    c0, c1 = centres[lower], centres[upper]
    frac = (d - c0) / (c1 - c0)
    rows = torch.arange(potential.shape[0], device=dist.device) * potential.shape[1]
    flat = potential.reshape(-1)
    v0, v1 = flat.take(rows + lower), flat.take(rows + upper)
    return v0 + frac * (v1 - v0) + tail


def fold_from_distogram(dist_probs: np.ndarray, options: FoldOptions = FoldOptions()
                        ) -> tuple[np.ndarray, float]:
    """Backbone ``[L, 3, 3]`` (N, CA, C; Å) minimising the restraint energy, and that energy per residue.

    The ``starts`` independent minimisations run as one batch (start ``s`` is row ``s`` of every tensor): the
    summed energy's gradient for one start's frames is that start's own gradient and Adam acts element by element,
    so each start follows its own trajectory, as if run alone, at a fraction of the per-step overhead.
    """
    from workflow_lib.aligner.compiled import available
    from workflow_lib.training.losses import bond_violation_loss

    length = dist_probs.shape[0]
    compiled = available()
    starts = options.starts
    potential, weight = restraint_potential(dist_probs, options.min_separation)
    pairs = np.argwhere(np.triu(weight > options.min_prob, k=1))
    pair_potential, pair_weight = potential[pairs[:, 0], pairs[:, 1]], weight[pairs[:, 0], pairs[:, 1]]
    if compiled:
        from workflow_lib.inference.fold_compiled import CompiledTerms, pair_tables

        tables = pair_tables(pairs, pair_potential, pair_weight, BIN_CENTRES, TAIL_SLOPE)
    else:
        pot = torch.as_tensor(pair_potential, dtype=torch.float32)
        w = torch.as_tensor(pair_weight, dtype=torch.float32)
        i_idx, j_idx = torch.as_tensor(pairs[:, 0]), torch.as_tensor(pairs[:, 1])
        far = torch.triu(torch.ones(length, length), diagonal=2)  # Cα pairs |i - j| >= 2, each once
    generator = torch.Generator().manual_seed(options.seed)
    initial_trans, initial_quat = [], []
    for _ in range(starts):
        # a random-walk chain of 3.8 Å steps: about the size of a folded protein of that length
        steps = torch.randn(length, 3, generator=generator)
        steps = 3.8 * steps / steps.norm(dim=-1, keepdim=True)
        initial_trans.append(torch.cumsum(steps, dim=0))
        initial_quat.append(torch.randn(length, 4, generator=generator))
    trans = torch.stack(initial_trans).requires_grad_(True)      # [S, L, 3]
    quat = torch.stack(initial_quat).requires_grad_(True)        # [S, L, 4]
    optimizer = torch.optim.Adam([trans, quat], lr=options.lr)

    def energy(trans: torch.Tensor, quat: torch.Tensor, bond_weight: float) -> torch.Tensor:
        """The summed energy of the starts in ``trans [S', L, 3]``, ``quat [S', L, 4]``."""
        backbone = backbone_from_frames(Frames(quaternion_to_rotation(quat), trans))     # [S', L, 3, 3]
        n = backbone.shape[0]
        bonded = torch.ones(n, max(0, length - 1), dtype=torch.bool)
        bonds, _ = bond_violation_loss(backbone, bonded, tolerance=0.0)   # mean over the starts
        ca = backbone[:, :, 1]
        if compiled:
            restraint, clash = CompiledTerms.apply(cb_from_backbone(backbone), ca, tables, CLASH_DISTANCE)
            value, clash = restraint.sum() / length, clash.sum() / length
        else:
            value = torch.zeros(())
            if len(pairs):
                cb = cb_from_backbone(backbone)
                d = (cb[:, i_idx] - cb[:, j_idx]).norm(dim=-1)
                value = value + (w * _interpolate(pot, d)).sum() / length
            clash = ((torch.relu(CLASH_DISTANCE - torch.cdist(ca, ca)) ** 2) * far).sum() / length
        return value + bond_weight * n * bonds + options.clash_weight * clash

    for step in range(options.iterations):
        optimizer.zero_grad()
        # annealed chain geometry: 1/100 of the bond weight at first (the restraints shape the fold), the full
        # weight at the end (the chain is made physical)
        value = energy(trans, quat,
                       options.bond_weight * 10.0 ** (-2.0 * (1.0 - step / max(1, options.iterations - 1))))
        value.backward()
        optimizer.step()
    for group in optimizer.param_groups:
        group["lr"] = options.lr * 0.2
    for _ in range(options.polish):
        optimizer.zero_grad()
        value = energy(trans, quat, options.bond_weight)
        value.backward()
        optimizer.step()
    with torch.no_grad():
        finals = [float(energy(trans[s:s + 1], quat[s:s + 1], options.bond_weight)) for s in range(starts)]
        best = int(np.argmin(finals))
        backbone = backbone_from_frames(Frames(quaternion_to_rotation(quat[best]), trans[best])).numpy()
    return backbone.astype(np.float64), finals[best]
