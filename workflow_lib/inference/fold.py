"""Folding from the predicted distogram: backbone frames minimised against distance restraints in torch.

The trRosetta / RoseTTAFold route (Yang et al. 2020, PNAS 117:1496; Baek et al. 2021, Science 373:871: the 6D
maps are what the network predicts best): the predicted Cβ–Cβ distance distribution ``P_ij`` over the distogram bins
(:data:`~workflow_lib.structure.geometry.DIST_EDGES`, 0.5 Å bins from 2 to 20 Å, the last bin "≥ 20 Å") becomes a
statistical potential ``V_ij(d) = −log(P_ij(bin(d)) + ε) + log(P_ref(bin(d)))`` with the reference ``P_ref`` the
bins' mean over all pairs of the protein at that sequence separation class (a "background" in the spirit of
trRosetta's reference state), linearly interpolated between bin centres and constant beyond 20 Å. Only pairs
with ``|i − j| ≥ 3`` whose predicted contact probability ``P(d < 20 Å)`` exceeds ``min_prob`` are restrained,
weighted by it.

The structure is a chain of rigid residue frames with ideal backbone geometry
(:func:`~workflow_lib.model.structure.backbone_from_frames`; virtual Cβ as the distogram's targets); the
energy adds the peptide-bond and Cα–Cα terms of :func:`~workflow_lib.model.structure.bond_violation_loss`
(weight ``bond_weight``, annealed from 1/100 of it to all of it over the iterations, so that the restraints
shape the fold first and the chain is made physical last, then ``polish`` more steps at the full weight and a
fifth of the step size) and a Cα clash term ``max(0, 3.8 − d)²`` for ``|i − j| ≥ 2``. Adam minimises it from
``starts`` random-walk chains (seeded), run as one batch; the lowest-energy result wins. Cost: O(L²) per
iteration; where numba is available the whole energy and its gradient (frames, atoms, Cβ, restraints, clash
and chain terms) are one compiled call per step (:mod:`workflow_lib.inference.fold_compiled`; with orientation
restraints the restraint and clash terms are compiled and the rest is a torch graph), torch tensor expressions
otherwise.

**The first start** is not a random walk but the distogram's own distance geometry (:func:`embed_distances`: the
expected distances of the confident pairs, shortest paths through them for the rest, classical MDS to three
dimensions), the metric-matrix embedding that distance-geometry structure determination starts from (Havel 1991;
as CNS's distance geometry does for DMPfold, Greener et al. 2019). Where a template's restraints fix most
distances it starts the minimisation near the answer: with it two starts fold as well as four random ones did
(benchmarks/RESULTS.md, "Structure prediction: the fold's distance-geometry start").

**Template anchors** (``anchors``, :class:`CaAnchors`): where a close template exists, its own Cα–Cα distances
for the pairs it places within 15 Å are held by a bounded well, finer than the distogram's bins (MODELLER's
template-derived restraints, Šali & Blundell 1993; weights from
:func:`workflow_lib.inference.template_restraints.fold_anchors`), and its coordinates choose the hand
(:meth:`CaAnchors.prefers_mirror`).

**Orientation restraints** (trRosetta's other five maps of its 6D representation, Yang et al. 2020), with
``orientation_weight > 0`` and the ω / θ / φ distributions given: for pairs predicted within 20 Å with
probability above ``orientation_min_prob``, ``V(x) = −log(P(bin(x)) + ε)`` over the real (contact) bins
renormalised, interpolated linearly between bin centres (cyclically for the dihedrals ω and θ, clamped for the
planar angle φ), on ω_ij, θ_ij, θ_ji, φ_ij and φ_ji of the current frames (virtual Cβ), weighted by the contact
probability. They run as torch expressions over those pairs.

**The hand** (``choose_hand``, on by default): distances are the same for a fold and its mirror image, and the
minimisation lands on either, from a native distogram too (the virtual Cβ is too weak a signal; how often the
mirror image wins and what choosing the hand gains: benchmarks/RESULTS.md, "Structure prediction: the default
checkpoint (trackfold_small_v4) on 40 validation chains", its paragraph "The hand of the fold"). The
lowest-energy result is therefore compared with its mirror image (:func:`prefer_mirror`): by the right-handed
α-helix rule (Cα virtual dihedrals near +50°, not −50°) where the fold has helices, else by the ω / θ / φ
restraint energy when those distributions are given (ω and θ are dihedrals and change sign in a mirror). A
mirror image that wins is rebuilt from L residues (each residue's N, CA, C triangle is the same; its Cβ moves)
and polished ``polish`` steps against the same energy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from workflow_lib.model.structure import (Frames, backbone_from_frames, bond_violation_loss, cb_from_backbone,
                                          frames_from_3_points, quaternion_to_rotation)
from workflow_lib.structure.geometry import DIST_EDGES, DIST_MAX, OMEGA_BINS, PHI_BINS
from workflow_lib.structure.metrics import kabsch_rmsd

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

    starts: int = 2
    iterations: int = 200
    """Minimisation steps per start (400 before the geometry start and the template anchors: with them, 200 lose
    0.002 lDDT-Cα on validation chains for a third less fold CPU; benchmarks/RESULTS.md, "the 2-block default and
    half the fold's steps")."""
    polish: int = 50
    lr: float = 0.5
    min_prob: float = 0.05
    min_separation: int = 3
    bond_weight: float = 100.0
    clash_weight: float = 1.0
    seed: int = 0
    orientation_weight: float = 0.0
    """Weight of the ω / θ / φ restraints (0: distances only; module docstring)."""
    orientation_min_prob: float = 0.5
    """Pairs whose predicted P(d < 20 Å) is at least this get orientation restraints."""
    choose_hand: bool = True
    """Compare the folded backbone with its mirror image and keep the better hand (module docstring)."""
    geometry_start: bool = True
    """Start the first of the ``starts`` from the distogram's own distance geometry (:func:`embed_distances`)
    instead of a random walk (benchmarks/RESULTS.md, "Structure prediction: the fold's distance-geometry start")."""


def embed_distances(dist_probs: np.ndarray, covered: np.ndarray | None = None, contact: float = 0.5,
                    ca_ca: float = 3.8) -> np.ndarray:
    """``[L, 3]`` coordinates whose distances follow the distogram: the expected distance of every pair predicted
    within 20 Å with probability at least ``contact``, consecutive residues ``ca_ca`` apart, every other distance
    the shortest path through those (the triangle inequality's bound, as in metric-matrix distance geometry:
    Crippen & Havel 1988; Havel 1991), then classical multidimensional scaling (Torgerson 1952) to three
    dimensions. A starting point for the minimisation, not a structure: either hand, distances from a 0.5 Å
    distogram."""
    probs = np.asarray(dist_probs)                       # no float64 copy of the [L, L, bins] array
    length = probs.shape[0]
    near = 1.0 - probs[..., -1].astype(np.float64)
    expected = (probs[..., :-1] @ BIN_CENTRES[:-1].astype(probs.dtype)).astype(np.float64) / np.maximum(near, 1e-9)
    known = near >= contact
    if covered is not None:
        known &= np.asarray(covered, dtype=bool)
    distance = np.where(known, expected, np.inf)
    index = np.arange(length - 1)
    distance[index, index + 1] = distance[index + 1, index] = ca_ca
    np.fill_diagonal(distance, 0.0)
    distance = np.minimum(distance, distance.T)
    for k in range(length):                         # Floyd–Warshall, a row and a column at a time
        np.minimum(distance, distance[:, k, None] + distance[None, k, :], out=distance)
    distance[~np.isfinite(distance)] = ca_ca * length
    squared = distance ** 2
    centred = squared - squared.mean(axis=0, keepdims=True) - squared.mean(axis=1, keepdims=True) + squared.mean()
    values, vectors = np.linalg.eigh(-0.5 * centred)
    top = np.argsort(values)[::-1][:3]
    return vectors[:, top] * np.sqrt(np.maximum(values[top], 0.0))


def restraint_potential(dist_probs: np.ndarray, min_separation: int = 3, eps: float = 1e-4,
                        covered: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(V [L, L, bins], weight [L, L])``: the potential per bin (module docstring) and the restraint weights
    (contact probability, 0 for unrestrained pairs). ``covered`` (bool ``[L, L]``; None: all): the pairs the
    network predicted; the others are unrestrained and stay out of the reference distributions."""
    probs = np.asarray(dist_probs, dtype=np.float64)
    length = probs.shape[0]
    sep = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
    known = np.ones((length, length), dtype=bool) if covered is None else np.asarray(covered, dtype=bool)
    potential = np.zeros_like(probs)
    for low, high in ((min_separation, 12), (12, 24), (24, length + 1)):
        mask = (sep >= low) & (sep < high) & known
        if not mask.any():
            continue
        reference = probs[mask].mean(axis=0) + eps
        potential[mask] = -np.log(probs[mask] + eps) + np.log(reference)
    weight = np.where((sep >= min_separation) & known, 1.0 - probs[..., -1], 0.0)
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


def orientation_potentials(probs: dict[str, np.ndarray], pairs: np.ndarray, eps: float = 1e-4
                            ) -> dict[str, torch.Tensor]:
    """``-log(P + ε)`` of the real bins of ω ``[L, L, 37]``, θ ``[L, L, 37]`` and φ ``[L, L, 19]`` renormalised over
    them, for ``pairs [P, 2]`` (i, j): keys ``omega [P, 36]``, ``theta_ij``, ``theta_ji [P, 36]``, ``phi_ij``,
    ``phi_ji [P, 18]`` (float32 tensors)."""
    def real(values: np.ndarray) -> torch.Tensor:
        values = np.asarray(values, dtype=np.float64)[..., :-1]
        values = values / np.maximum(values.sum(axis=-1, keepdims=True), 1e-12)
        return torch.as_tensor(-np.log(values + eps), dtype=torch.float32)

    i, j = pairs[:, 0], pairs[:, 1]
    omega = 0.5 * (np.asarray(probs["omega"])[i, j] + np.asarray(probs["omega"])[j, i])   # ω is symmetric
    return {"omega": real(omega), "theta_ij": real(probs["theta"][i, j]), "theta_ji": real(probs["theta"][j, i]),
            "phi_ij": real(probs["phi"][i, j]), "phi_ji": real(probs["phi"][j, i])}


def _dihedral(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Signed dihedral A-B-C-D in (−π, π] of ``[*, 3]`` points (atan2 form: smooth gradients)."""
    b0, b1, b2 = a - b, c - b, d - c
    b1n = b1 / b1.norm(dim=-1, keepdim=True).clamp_min(1e-8)
    v = b0 - (b0 * b1n).sum(-1, keepdim=True) * b1n
    w = b2 - (b2 * b1n).sum(-1, keepdim=True) * b1n
    x = (v * w).sum(-1)
    y = (torch.cross(b1n, v, dim=-1) * w).sum(-1)
    return torch.atan2(y, x)


def _planar(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Angle A-B-C at B in [0, π] of ``[*, 3]`` points."""
    u, v = a - b, c - b
    cosine = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(1e-8)
    return torch.acos(cosine.clamp(-1.0 + 1e-6, 1.0 - 1e-6))


def _interpolate_angle(potential: torch.Tensor, angle: torch.Tensor, cyclic: bool) -> torch.Tensor:
    """Piecewise-linear ``V(x)`` between the bin centres of ``potential [P, B]`` (B bins over 2π from −π, cyclic;
    or over π from 0, clamped), for angles ``[*, P]``."""
    bins = potential.shape[1]
    if cyclic:
        x = (angle + np.pi) / (2.0 * np.pi / bins) - 0.5
        base = torch.floor(x.detach())
        frac = x - base
        lower = torch.remainder(base, bins).long()
        upper = torch.remainder(lower + 1, bins)
    else:
        x = (angle / (np.pi / bins) - 0.5).clamp(0.0, bins - 1.0)
        lower = torch.floor(x.detach()).long().clamp(0, bins - 2)
        upper = lower + 1
        frac = x - lower
    rows = torch.arange(potential.shape[0], device=angle.device) * bins
    flat = potential.reshape(-1)
    v0, v1 = flat.take(rows + lower), flat.take(rows + upper)
    return v0 + frac * (v1 - v0)


def orientation_energy(backbone: torch.Tensor, cb: torch.Tensor, pairs: torch.Tensor,
                       potentials: dict[str, torch.Tensor], weight: torch.Tensor) -> torch.Tensor:
    """Σ over ``pairs [P, 2]`` of ``weight [P]`` × (V_ω(ω_ij) + V_θ(θ_ij) + V_θ(θ_ji) + V_φ(φ_ij)
    + V_φ(φ_ji)) for ``backbone [S, L, 3, 3]`` (N, CA, C) and its Cβ ``[S, L, 3]``; summed over the starts
    ``S``."""
    i, j = pairs[:, 0], pairs[:, 1]
    n, ca = backbone[..., 0, :], backbone[..., 1, :]
    n_i, n_j, ca_i, ca_j, cb_i, cb_j = n[:, i], n[:, j], ca[:, i], ca[:, j], cb[:, i], cb[:, j]
    total = _interpolate_angle(potentials["omega"], _dihedral(ca_i, cb_i, cb_j, ca_j), cyclic=True)
    total = total + _interpolate_angle(potentials["theta_ij"], _dihedral(n_i, ca_i, cb_i, cb_j), cyclic=True)
    total = total + _interpolate_angle(potentials["theta_ji"], _dihedral(n_j, ca_j, cb_j, cb_i), cyclic=True)
    total = total + _interpolate_angle(potentials["phi_ij"], _planar(ca_i, cb_i, cb_j), cyclic=False)
    total = total + _interpolate_angle(potentials["phi_ji"], _planar(ca_j, cb_j, cb_i), cyclic=False)
    return (weight * total).sum()


_CHAIN_KERNEL = [True]


@contextlib.contextmanager
def graph_energy() -> Iterator[None]:
    """Within this block the fold's frames, atoms, Cβ and chain terms run as a torch autograd graph around the
    compiled restraint and clash terms, as they do with orientation restraints, instead of the one compiled
    call of :class:`~workflow_lib.inference.fold_compiled.ChainEnergy` (the reference for tests and
    ``benchmarks/fold_speed.py``)."""
    _CHAIN_KERNEL.append(False)
    try:
        yield
    finally:
        _CHAIN_KERNEL.pop()


@dataclass(frozen=True)
class CaAnchors:
    """Cα–Cα distance restraints from a template's own coordinates (:func:`template_anchors`): pairs ``i``, ``j``
    (int64 ``[P]``), their template distances ``distance`` (Å) and weights ``weight`` ``[P]``; ``reference``
    (``[L, 3]``, NaN where the template places no residue) decides the hand of the fold. Each pair pays
    ``weight · log(1 + ((d − distance) / scale)²)`` per residue of the chain: a well whose pull fades as the error
    grows, so that a pair the template gets wrong costs a bounded amount and the network's distogram decides it,
    while the pairs it gets right are held to a fraction of an Ångström, finer than 0.5 Å distogram bins can."""

    i: np.ndarray
    j: np.ndarray
    distance: np.ndarray
    weight: np.ndarray
    reference: np.ndarray
    scale: float = 1.0

    def energy(self, trans: torch.Tensor, length: int) -> torch.Tensor:
        """Summed anchor energy of the frames' translations ``trans [S, L, 3]`` (each residue's frame has its Cα
        at the origin) per residue of the chain."""
        from workflow_lib.aligner.device import compiled_available

        if compiled_available():
            from workflow_lib.inference.fold_compiled import AnchorEnergy

            return AnchorEnergy.apply(trans, self.i, self.j, self.distance, self.weight, self.scale).sum() / length
        i, j = torch.as_tensor(self.i), torch.as_tensor(self.j)
        d = (trans[:, i] - trans[:, j]).norm(dim=-1)
        target = torch.as_tensor(self.distance, dtype=trans.dtype)
        w = torch.as_tensor(self.weight, dtype=trans.dtype)
        return (w * torch.log1p(((d - target) / self.scale) ** 2)).sum() / length

    def prefers_mirror(self, backbone: np.ndarray) -> bool | None:
        """Whether the mirror image of ``backbone [L, 3, 3]`` superposes better on the template's Cα (None with
        fewer than 4 placed residues): distances cannot tell the hands apart, the template's coordinates can."""
        placed = np.isfinite(self.reference).all(axis=1)
        if placed.sum() < 4:
            return None
        ca = backbone[:, 1].astype(np.float64)
        kept = kabsch_rmsd(ca, self.reference, placed)
        flipped = kabsch_rmsd(ca * np.array([-1.0, 1.0, 1.0]), self.reference, placed)
        return flipped < kept


def template_anchors(reference: np.ndarray, weight: float, cutoff: float = 15.0, scale: float = 1.0
                     ) -> CaAnchors | None:
    """:class:`CaAnchors` of every pair of residues placed on a template (Cα ``reference [L, 3]``, NaN where
    none) whose template distance is under ``cutoff`` Å (lDDT's inclusion radius), each of weight ``weight``;
    None when ``weight`` is 0 or fewer than two residues are placed."""
    reference = np.asarray(reference, dtype=np.float64)
    placed = np.flatnonzero(np.isfinite(reference).all(axis=1))
    if weight <= 0.0 or placed.size < 2:
        return None
    first, second = np.triu_indices(placed.size, k=1)
    first, second = placed[first], placed[second]
    distance = np.linalg.norm(reference[first] - reference[second], axis=1)
    keep = distance < cutoff
    return CaAnchors(np.ascontiguousarray(first[keep], dtype=np.int64),
                     np.ascontiguousarray(second[keep], dtype=np.int64), distance[keep],
                     np.full(int(keep.sum()), float(weight)), reference, float(scale))


@torch.enable_grad()   # the minimisation needs autograd, also when called under torch.no_grad()
def fold_from_distogram(dist_probs: np.ndarray, options: FoldOptions = FoldOptions(),
                        orientations: dict[str, np.ndarray] | None = None,
                        covered: np.ndarray | None = None,
                        anchors: CaAnchors | None = None) -> tuple[np.ndarray, float]:
    """Backbone ``[L, 3, 3]`` (N, CA, C; Å) minimising the restraint energy, and that energy per residue.

    ``orientations``: the predicted ω ``[L, L, 37]``, θ ``[L, L, 37]`` and φ ``[L, L, 19]`` distributions, used
    when ``options.orientation_weight > 0`` (a ValueError without them). ``covered``: the pairs the distogram
    holds a prediction for (:func:`restraint_potential`; None: all).

    The ``starts`` independent minimisations run as one batch (start ``s`` is row ``s`` of every tensor): the
    summed energy's gradient for one start's frames is that start's own gradient and Adam acts element by element,
    so each start follows its own trajectory, as if run alone, at a fraction of the per-step overhead.
    """
    from workflow_lib.aligner.device import compiled_available as available

    length = dist_probs.shape[0]
    compiled = available()
    starts = options.starts
    potential, weight = restraint_potential(dist_probs, options.min_separation, covered=covered)
    pairs = np.argwhere(np.triu(weight > options.min_prob, k=1))
    pair_potential, pair_weight = potential[pairs[:, 0], pairs[:, 1]], weight[pairs[:, 0], pairs[:, 1]]
    oriented = None
    if options.orientation_weight > 0.0:
        if orientations is None or not {"omega", "theta", "phi"} <= set(orientations):
            raise ValueError("orientation restraints need the predicted omega, theta and phi distributions")
        if orientations["omega"].shape[-1] != OMEGA_BINS or orientations["phi"].shape[-1] != PHI_BINS:
            raise ValueError("omega/theta need 37 bins and phi 19 (the no-contact class last)")
        keep = np.triu(weight >= options.orientation_min_prob, k=1)
        o_pairs = np.argwhere(keep)
        if len(o_pairs):
            oriented = (torch.as_tensor(o_pairs), orientation_potentials(orientations, o_pairs),
                        options.orientation_weight * torch.as_tensor(weight[keep], dtype=torch.float32))
    chain_kernel = compiled and oriented is None and _CHAIN_KERNEL[-1]
    if compiled:
        from workflow_lib.inference.fold_compiled import ChainEnergy, CompiledTerms, pair_tables

        tables = pair_tables(pairs, pair_potential, pair_weight, BIN_CENTRES, TAIL_SLOPE)
    else:
        pot = torch.as_tensor(pair_potential, dtype=torch.float32)
        w = torch.as_tensor(pair_weight, dtype=torch.float32)
        i_idx, j_idx = torch.as_tensor(pairs[:, 0]), torch.as_tensor(pairs[:, 1])
        far = torch.triu(torch.ones(length, length), diagonal=2)  # Cα pairs |i - j| >= 2, each once
    generator = torch.Generator().manual_seed(options.seed)
    initial_trans, initial_quat = [], []
    for start in range(starts):
        # a random-walk chain of 3.8 Å steps: about the size of a folded protein of that length
        steps = torch.randn(length, 3, generator=generator)
        steps = 3.8 * steps / steps.norm(dim=-1, keepdim=True)
        initial_trans.append(torch.cumsum(steps, dim=0))
        initial_quat.append(torch.randn(length, 4, generator=generator))
        if start == 0 and options.geometry_start and length >= 4:
            initial_trans[0] = torch.as_tensor(embed_distances(dist_probs, covered), dtype=torch.float32)
    trans = torch.stack(initial_trans).requires_grad_(True)      # [S, L, 3]
    quat = torch.stack(initial_quat).requires_grad_(True)        # [S, L, 4]
    optimizer = torch.optim.Adam([trans, quat], lr=options.lr)

    def energy(trans: torch.Tensor, quat: torch.Tensor, bond_weight: float) -> torch.Tensor:
        """The summed energy of the starts in ``trans [S', L, 3]``, ``quat [S', L, 4]``."""
        if chain_kernel:   # the whole energy and its gradient in one compiled call
            return ChainEnergy.apply(trans, quat, tables, CLASH_DISTANCE, bond_weight, options.clash_weight).sum()
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
        if oriented is not None:
            value = value + orientation_energy(backbone, cb_from_backbone(backbone), *oriented) / length
        return value + bond_weight * n * bonds + options.clash_weight * clash

    if anchors is not None and len(anchors.i):
        chain_energy = energy

        def energy(trans: torch.Tensor, quat: torch.Tensor, bond_weight: float) -> torch.Tensor:
            return chain_energy(trans, quat, bond_weight) + anchors.energy(trans, length)

    for step in range(options.iterations):
        optimizer.zero_grad()
        # annealed chain geometry: 1/100 of the bond weight at first (the restraints shape the fold), the full
        # weight at the end (the chain is made physical)
        value = energy(trans, quat,
                       options.bond_weight * 10.0 ** (-2.0 * (1.0 - step / max(1, options.iterations - 1))))
        value.backward()
        optimizer.step()
    def polish(trans: torch.Tensor, quat: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """``options.polish`` steps at the full bond weight and a fifth of the step size."""
        for group in optimizer.param_groups:
            group["lr"] = options.lr * 0.2
        for _ in range(options.polish):
            optimizer.zero_grad()
            value = energy(trans, quat, options.bond_weight)
            value.backward()
            optimizer.step()

    polish(trans, quat, optimizer)
    with torch.no_grad():
        finals = [float(energy(trans[s:s + 1], quat[s:s + 1], options.bond_weight)) for s in range(starts)]
        best = int(np.argmin(finals))
        backbone = backbone_from_frames(Frames(quaternion_to_rotation(quat[best]), trans[best])).numpy()
    final = finals[best]
    if options.choose_hand and length >= 4:
        mirror = backbone * np.array([-1.0, 1.0, 1.0])
        by_template = anchors.prefers_mirror(backbone) if anchors is not None else None
        if by_template if by_template is not None else prefer_mirror(backbone, orientations, weight, options):
            # the mirror image is the better hand: its residues are rebuilt as L residues (the N, CA, C triangle is
            # the same; the virtual Cβ moves), so it is polished against the same energy
            frames = frames_from_3_points(*(torch.as_tensor(mirror[:, k], dtype=torch.float32) for k in range(3)))
            trans = frames.trans[None].clone().requires_grad_(True)
            quat = rotation_to_quaternion(frames.rot)[None].clone().requires_grad_(True)
            polish(trans, quat, torch.optim.Adam([trans, quat], lr=options.lr))
            with torch.no_grad():
                final = float(energy(trans, quat, options.bond_weight))
                backbone = backbone_from_frames(Frames(quaternion_to_rotation(quat[0]), trans[0])).numpy()
    return backbone.astype(np.float64), final


HELIX_DIHEDRAL = (np.radians(30.0), np.radians(80.0))
"""Cα virtual dihedrals (i, i+1, i+2, i+3) of a right-handed α-helix lie in this range (about +50°); a left-handed
one (the mirror image) at minus these."""
HELIX_MARGIN = 3
"""The helix rule decides the hand when right- and left-handed helical dihedrals differ by at least this many."""


def helix_handedness(backbone: np.ndarray) -> int:
    """Cα virtual dihedrals of ``backbone [L, 3, 3]`` in the right-handed α-helix range minus those in the
    left-handed one (negative for a mirror image of a protein with helices)."""
    ca = torch.as_tensor(backbone[:, 1], dtype=torch.float64)
    if len(ca) < 4:
        return 0
    dihedral = _dihedral(ca[:-3], ca[1:-2], ca[2:-1], ca[3:]).numpy()
    low, high = HELIX_DIHEDRAL
    return int(((dihedral > low) & (dihedral < high)).sum()) - int(((dihedral < -low) & (dihedral > -high)).sum())


def orientation_hand_energy(backbone: np.ndarray, orientations: dict[str, np.ndarray], weight: np.ndarray,
                            options: FoldOptions) -> float | None:
    """The ω / θ / φ restraint energy (:func:`orientation_energy`) of ``backbone [L, 3, 3]`` over the pairs with
    P(d < 20 Å) ≥ ``orientation_min_prob``; None when there is no such pair."""
    keep = np.triu(weight >= options.orientation_min_prob, k=1)
    pairs = np.argwhere(keep)
    if not len(pairs):
        return None
    bb = torch.as_tensor(backbone, dtype=torch.float32)
    with torch.no_grad():
        return float(orientation_energy(bb[None], cb_from_backbone(bb)[None], torch.as_tensor(pairs),
                                        orientation_potentials(orientations, pairs),
                                        torch.as_tensor(weight[keep], dtype=torch.float32)))


def prefer_mirror(backbone: np.ndarray, orientations: dict[str, np.ndarray] | None, weight: np.ndarray,
                  options: FoldOptions) -> bool:
    """Whether the mirror image of ``backbone [L, 3, 3]`` is the more likely hand: by the right-handed α-helix
    rule when it is decisive (:data:`HELIX_MARGIN`), else by the ω / θ / φ energy when those distributions are
    given (ω and θ are dihedrals and change sign in a mirror image), else no. On 40 PDB validation chains the
    helix rule was right wherever the two disagreed; the orientation maps decide folds without helices."""
    handedness = helix_handedness(backbone)
    if abs(handedness) >= HELIX_MARGIN:
        return handedness < 0
    if orientations is None or not {"omega", "theta", "phi"} <= set(orientations):
        return False
    mirror = backbone * np.array([-1.0, 1.0, 1.0])
    kept, flipped = (orientation_hand_energy(x, orientations, weight, options) for x in (backbone, mirror))
    return kept is not None and flipped is not None and flipped < kept


def rotation_to_quaternion(rot: torch.Tensor) -> torch.Tensor:
    """Rotations ``[*, 3, 3]`` -> unit quaternions ``[*, 4]`` (w, x, y, z), the inverse of
    :func:`~workflow_lib.model.structure.quaternion_to_rotation` (Shepperd's method: the largest of the four
    diagonal combinations is divided by, so it is stable for every rotation)."""
    r = rot.to(torch.float64)
    m00, m11, m22 = r[..., 0, 0], r[..., 1, 1], r[..., 2, 2]
    candidates = torch.stack((1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22,
                              1 - m00 - m11 + m22), dim=-1)
    pick = candidates.argmax(dim=-1)
    root = torch.sqrt(candidates.gather(-1, pick[..., None]).squeeze(-1).clamp_min(1e-12)) * 2.0   # 4 |q_k|
    w_ = torch.stack((root / 4, (r[..., 2, 1] - r[..., 1, 2]) / root, (r[..., 0, 2] - r[..., 2, 0]) / root,
                      (r[..., 1, 0] - r[..., 0, 1]) / root), dim=-1)
    x_ = torch.stack(((r[..., 2, 1] - r[..., 1, 2]) / root, root / 4, (r[..., 0, 1] + r[..., 1, 0]) / root,
                      (r[..., 0, 2] + r[..., 2, 0]) / root), dim=-1)
    y_ = torch.stack(((r[..., 0, 2] - r[..., 2, 0]) / root, (r[..., 0, 1] + r[..., 1, 0]) / root, root / 4,
                      (r[..., 1, 2] + r[..., 2, 1]) / root), dim=-1)
    z_ = torch.stack(((r[..., 1, 0] - r[..., 0, 1]) / root, (r[..., 0, 2] + r[..., 2, 0]) / root,
                      (r[..., 1, 2] + r[..., 2, 1]) / root, root / 4), dim=-1)
    options = torch.stack((w_, x_, y_, z_), dim=-2)                                      # [*, 4 picks, 4]
    quat = options.gather(-2, pick[..., None, None].expand(*pick.shape, 1, 4)).squeeze(-2)
    return (quat / quat.norm(dim=-1, keepdim=True)).to(rot.dtype)
