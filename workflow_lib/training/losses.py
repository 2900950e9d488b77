"""Training losses of the three-track network: 6D distogram cross-entropy, FAPE and pLDDT.

Seeds: 000 ("Representing Protein Structure": the 6D d/ω/θ/φ maps the distogram head predicts, in the bins of
:func:`workflow_lib.structure.geometry.bin_pair_geometry`, no-contact last) and 003 (the structure module and
its frame-aligned point error and pLDDT head; AlphaFold supplement 1.9.2 Algorithm 28 ``computeFAPE`` and
1.9.6 "Model confidence prediction").

All losses reduce to a scalar by a masked mean over the batch, computed in float32 (float64 stays float64),
and never read a NaN: missing atoms are replaced by 0 before any arithmetic and then masked out, so their
gradients are exactly 0.

- :func:`distogram_loss` — per head (``dist``, ``omega``, ``theta``, ``phi``) the cross-entropy of the logits
  against the true class, averaged over the pairs ``(i, j)``, ``i ≠ j``, where both residues have N, CA and C
  (the virtual Cβ the targets use needs all three); the loss is the mean of the four heads.
- :func:`fape_loss` — backbone FAPE: every true frame ``T_i`` (Gram–Schmidt of N, CA, C) and predicted frame
  ``T̂_i`` express every backbone atom ``x_j`` (N, CA, C) locally; the error is
  ``min(clamp, sqrt(|T̂_i⁻¹ x̂_j − T_i⁻¹ x_j|² + ε))``, averaged over valid (frame, atom) pairs and divided by
  ``length_scale`` (AlphaFold: ``d_clamp = 10 Å``, ``Z = 10 Å``, ``ε = 1e-4 Å²``). Deviation from AlphaFold,
  on purpose: the clamp is always on (AlphaFold leaves 10% of its batches unclamped) and only the final
  frames are scored (AlphaFold averages over every structure-module layer), since the network exposes only
  its final frames.
- :func:`plddt_loss` — the per-residue lDDT-Cα of the (detached) predicted CA against the true CA
  (:func:`lddt_ca_torch`, the convention of :func:`workflow_lib.structure.metrics.lddt_ca`) is binned into
  ``plddt_bins`` equal bins over [0, 1] and the pLDDT logits are trained by cross-entropy on residues that
  have at least one scored pair.
- :func:`trajectory_fape` — the same FAPE of the frames after the initial structure and after every
  three-track block (their ideal backbones), averaged: AlphaFold scores every structure-module layer so that
  early layers already place residues; weight ``fape_trajectory`` (0 turns it off).
- unclamped FAPE — the final frames' FAPE without the clamp, weight ``fape_unclamped``: the clamped loss has no
  gradient for points more than ``fape_clamp`` off, so a structure that starts (or falls) collapsed, every
  residue within a few Å of the others, never expands (a run trained with the clamp alone:
  benchmarks/RESULTS.md, "Structure prediction: trained on 4,123 PDB chains, and folding from the distogram");
  AlphaFold trains 10% of its batches unclamped for the same reason.
- :func:`bond_violation_loss` — physical chain geometry between consecutive residues (``bonded``: residue
  numbers differ by one and both have N, CA, C): the peptide bond C(i)–N(i+1) = 1.329 Å and the Cα(i)–Cα(i+1)
  distance = 3.80 Å (trans peptide), each a flat-bottom penalty ``max(0, |d − d0| − tol)`` in Å with
  ``tol`` = 0.05 Å, averaged over bonded pairs (AlphaFold's between-residue bond violations, 1.9.11, with a
  tighter tolerance and Cα–Cα instead of the bond angles); weight ``violation``.
- :func:`total_loss` — the weighted sum with :class:`LossWeights`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from workflow_lib.model.primitives import float32_island
from workflow_lib.model.structure import (BOND_TOLERANCE, CA_CA_TRANS, PEPTIDE_BOND, Frames,  # noqa: F401
                                          backbone_from_frames, bond_violation_loss, frames_from_3_points)

DISTOGRAM_HEADS = ("dist", "omega", "theta", "phi")
"""Target keys of the 6D heads; the network's logits are ``{key}_logits``."""


LDDT_THRESHOLDS = (0.5, 1.0, 2.0, 4.0)
"""lDDT distance-difference thresholds (Å), as :mod:`workflow_lib.structure.metrics`."""


@dataclass(frozen=True)
class LossWeights:
    """Weights of the terms in :func:`total_loss` and the FAPE constants (0 turns a term off)."""

    distogram: float = 1.0
    fape: float = 1.0
    plddt: float = 0.05
    fape_clamp: float = 10.0
    fape_length_scale: float = 10.0
    fape_eps: float = 1e-4
    fape_trajectory: float = 0.5
    fape_unclamped: float = 0.5
    violation: float = 0.3


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``Σ mask·values / Σ mask`` (0 when the mask is empty, with a zero gradient)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp_min(1.0)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked mean of ``-log softmax(logits)[target]``; ``logits [*, K]``, ``target [*]`` int, ``mask [*]``."""
    with float32_island(logits) as (logits,):
        log_probs = F.log_softmax(logits, dim=-1)
        nll = -torch.gather(log_probs, -1, target.long().clamp(0, logits.shape[-1] - 1).unsqueeze(-1)).squeeze(-1)
        return masked_mean(nll, mask)


def distogram_loss(outputs: dict[str, torch.Tensor], targets: dict[str, torch.Tensor], pair_mask: torch.Tensor
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Mean of the four 6D cross-entropies (module docstring) and the per-head values.

    ``outputs[f"{key}_logits"]`` are ``[B, L, L, K]``; ``targets[key]`` int ``[B, L, L]``; ``pair_mask``
    ``[B, L, L]`` (1 = scored pair; the caller excludes ``i = j`` and residues lacking N, CA or C).
    """
    per_head = {key: cross_entropy(outputs[f"{key}_logits"], targets[key], pair_mask) for key in DISTOGRAM_HEADS}
    return torch.stack(list(per_head.values())).mean(), per_head


def _safe(points: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Points with masked-out (possibly NaN) entries replaced by 0, so no NaN ever enters the graph."""
    return torch.where(mask.unsqueeze(-1), torch.nan_to_num(points), torch.zeros_like(points))


def fape_loss(pred_frames: Frames, pred_points: torch.Tensor, true_frames: Frames, true_points: torch.Tensor,
              frame_mask: torch.Tensor, point_mask: torch.Tensor, *, clamp: float | None = 10.0,
              length_scale: float = 10.0, eps: float = 1e-4) -> torch.Tensor:
    """Frame-aligned point error (AlphaFold Algorithm 28; module docstring).

    ``pred_frames``/``true_frames``: rotations ``[B, F, 3, 3]`` and translations ``[B, F, 3]``;
    ``pred_points``/``true_points`` ``[B, P, 3]``; ``frame_mask [B, F]``, ``point_mask [B, P]`` (bool).
    ``clamp=None`` gives the unclamped loss. Invariant to a rigid motion applied to the whole prediction (and,
    separately, to the whole truth).
    """
    frame_mask = frame_mask.bool()
    point_mask = point_mask.bool()
    with float32_island(pred_frames.rot, pred_frames.trans, pred_points, true_frames.rot, true_frames.trans,
                        true_points) as (p_rot, p_trans, p_x, t_rot, t_trans, t_x):
        eye = torch.eye(3, dtype=t_rot.dtype, device=t_rot.device)
        t_rot = torch.where(frame_mask[..., None, None], torch.nan_to_num(t_rot), eye)
        t_trans = _safe(t_trans, frame_mask)
        t_x = _safe(t_x, point_mask)
        p_x = _safe(p_x, point_mask)
        # local coordinates R_iᵀ (x_j − t_i): [B, F, P, 3]
        p_local = torch.einsum("bfji,bfpj->bfpi", p_rot, p_x[:, None, :, :] - p_trans[:, :, None, :])
        t_local = torch.einsum("bfji,bfpj->bfpi", t_rot, t_x[:, None, :, :] - t_trans[:, :, None, :])
        error = torch.sqrt(((p_local - t_local) ** 2).sum(dim=-1) + eps)
        if clamp is not None:
            error = error.clamp(max=clamp)
        pair_mask = frame_mask[:, :, None] & point_mask[:, None, :]
        return masked_mean(error, pair_mask) / length_scale


def backbone_fape(outputs: dict[str, torch.Tensor], true_coords: torch.Tensor, atom_mask: torch.Tensor, *,
                  clamp: float | None = 10.0, length_scale: float = 10.0, eps: float = 1e-4) -> torch.Tensor:
    """FAPE of the network's final frames and backbone (N, CA, C) against the true backbone.

    ``true_coords [B, L, 3, 3]`` (N, CA, C; NaN allowed where ``atom_mask [B, L, 3]`` is False). A true frame
    exists where all three atoms do.
    """
    atom_mask = atom_mask.bool()
    safe_true = _safe(true_coords, atom_mask)
    true_frames = frames_from_3_points(safe_true[..., 0, :], safe_true[..., 1, :], safe_true[..., 2, :])
    frame_mask = atom_mask.all(dim=-1)
    batch, length = atom_mask.shape[:2]
    pred_frames = Frames(outputs["frames_rot"], outputs["frames_trans"])
    return fape_loss(pred_frames, outputs["coords"].reshape(batch, length * 3, 3), true_frames,
                     safe_true.reshape(batch, length * 3, 3), frame_mask, atom_mask.reshape(batch, length * 3),
                     clamp=clamp, length_scale=length_scale, eps=eps)


def trajectory_fape(outputs: dict[str, torch.Tensor], true_coords: torch.Tensor, atom_mask: torch.Tensor, *,
                    clamp: float | None = 10.0, length_scale: float = 10.0, eps: float = 1e-4) -> torch.Tensor:
    """Mean :func:`backbone_fape` over the network's frame trajectory (``trajectory_rot``/``trajectory_trans``,
    ``[K, B, L, ...]``), each layer's backbone rebuilt from its frames with ideal geometry."""
    losses = []
    for rot, trans in zip(outputs["trajectory_rot"].unbind(0), outputs["trajectory_trans"].unbind(0)):
        frames = Frames(rot, trans)
        layer = {"frames_rot": rot, "frames_trans": trans, "coords": backbone_from_frames(frames)}
        losses.append(backbone_fape(layer, true_coords, atom_mask, clamp=clamp, length_scale=length_scale,
                                    eps=eps))
    return torch.stack(losses).mean()


def bonded_pairs(atom_mask: torch.Tensor, residue_index: torch.Tensor) -> torch.Tensor:
    """bool ``[B, L − 1]``: residue i+1 follows residue i (numbers differ by 1) and both have N, CA and C."""
    backbone = atom_mask.bool().all(dim=-1)
    return (residue_index[:, 1:] - residue_index[:, :-1] == 1) & backbone[:, 1:] & backbone[:, :-1]


@torch.no_grad()
def lddt_ca_torch(pred_ca: torch.Tensor, true_ca: torch.Tensor, mask: torch.Tensor, cutoff: float = 15.0
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-residue lDDT-Cα ``[B, L]`` and whether it is defined (the residue has a scored pair).

    Same convention as :func:`workflow_lib.structure.metrics.lddt_ca`: pairs ``i ≠ j`` with both residues in
    ``mask`` and TRUE distance < ``cutoff``; per pair the fraction of thresholds 0.5/1/2/4 Å that
    ``|d_true − d_pred|`` is below. No gradient (a target, not a loss).
    """
    mask = mask.bool()
    pred = _safe(pred_ca.float() if pred_ca.dtype != torch.float64 else pred_ca, mask)
    true = _safe(true_ca.to(pred.dtype), mask)
    d_pred = torch.cdist(pred, pred)
    d_true = torch.cdist(true, true)
    eye = torch.eye(mask.shape[-1], dtype=torch.bool, device=mask.device)
    scored = (d_true < cutoff) & mask[..., :, None] & mask[..., None, :] & ~eye
    error = (d_true - d_pred).abs()
    value = sum((error < t).to(pred.dtype) for t in LDDT_THRESHOLDS) / len(LDDT_THRESHOLDS)
    n_pairs = scored.sum(dim=-1)
    per_residue = (value * scored).sum(dim=-1) / n_pairs.clamp_min(1)
    return per_residue, n_pairs > 0


def plddt_loss(plddt_logits: torch.Tensor, pred_ca: torch.Tensor, true_ca: torch.Tensor, ca_mask: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of ``plddt_logits [B, L, K]`` against the binned true lDDT-Cα of ``pred_ca`` (detached).

    Returns ``(loss, lddt_per_residue [B, L])``; bin ``k`` covers ``[k/K, (k+1)/K)``, lDDT = 1 goes to ``K−1``.
    """
    lddt, defined = lddt_ca_torch(pred_ca.detach(), true_ca, ca_mask)
    bins = plddt_logits.shape[-1]
    target = torch.clamp((lddt * bins).floor().long(), 0, bins - 1)
    return cross_entropy(plddt_logits, target, defined & ca_mask.bool()), lddt


def total_loss(outputs: dict[str, torch.Tensor], targets: dict[str, torch.Tensor],
               weights: LossWeights = LossWeights()) -> tuple[torch.Tensor, dict[str, float]]:
    """Weighted sum of the three losses; ``targets`` as built by :func:`workflow_lib.training.examples.make_targets`.

    ``targets``: ``dist``/``omega``/``theta``/``phi`` int ``[B, L, L]``, ``pair_mask [B, L, L]``, ``coords``
    ``[B, L, 3, 3]`` (N, CA, C) and ``atom_mask [B, L, 3]``; ``bonded [B, L − 1]`` (:func:`bonded_pairs`) for
    the violation term. Returns the loss and its parts as floats.
    """
    dist, per_head = distogram_loss(outputs, targets, targets["pair_mask"])
    fape_options = dict(clamp=weights.fape_clamp, length_scale=weights.fape_length_scale, eps=weights.fape_eps)
    fape = backbone_fape(outputs, targets["coords"], targets["atom_mask"], **fape_options)
    ca_mask = targets["atom_mask"][..., 1]
    plddt, _ = plddt_loss(outputs["plddt_logits"], outputs["coords"][..., 1, :], targets["coords"][..., 1, :],
                          ca_mask)
    loss = weights.distogram * dist + weights.fape * fape + weights.plddt * plddt
    parts = {"distogram": float(dist.detach()), "fape": float(fape.detach()), "plddt": float(plddt.detach())}
    if weights.fape_unclamped:
        unclamped = backbone_fape(outputs, targets["coords"], targets["atom_mask"], clamp=None,
                                  length_scale=weights.fape_length_scale, eps=weights.fape_eps)
        loss = loss + weights.fape_unclamped * unclamped
        parts["fape_unclamped"] = float(unclamped.detach())
    if weights.fape_trajectory and "trajectory_rot" in outputs:
        trajectory = trajectory_fape(outputs, targets["coords"], targets["atom_mask"], **fape_options)
        loss = loss + weights.fape_trajectory * trajectory
        parts["fape_trajectory"] = float(trajectory.detach())
    if "bonded" in targets:
        violation, errors = bond_violation_loss(outputs["coords"], targets["bonded"])
        if weights.violation:
            loss = loss + weights.violation * violation
        parts["violation"] = float(violation.detach())
        parts.update({key: float(value.detach()) for key, value in errors.items()})
    parts["loss"] = float(loss.detach())
    parts.update({f"ce_{key}": float(value.detach()) for key, value in per_head.items()})
    return loss, parts
