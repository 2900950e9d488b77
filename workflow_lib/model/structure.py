"""3D track: rigid residue frames, the initial structure, Str2Str (IPA or geometric attention) and Str2MSA.

Design choice (DESIGN.md allows ESM3's geometric attention or AlphaFold 2's IPA): Str2Str uses **Invariant
Point Attention** by default (AlphaFold 2 supplement, Jumper et al. 2021, Nature 596:583, Algorithm 22) because
it also reads the pair representation (a per-head pair bias and pair values); the **geometric attention** of
ESM3 (Hayes et al. 2024, bioRxiv preprint, Algorithm 6; published in Science 2025) is the option
``str_attention: geometric`` (:class:`GeometricAttention`, with a pair bias added), not yet trained.
RoseTTAFold's SE(3)-Transformer is replaced by this frame-based update (flagged: DEVIATION-RF-SE3).

A residue frame ``T_i = (R_i, t_i)`` maps local coordinates to global ones, ``x_global = R_i x_local + t_i``;
``t_i`` is the CA position. All frame algebra runs in float32 "islands" (autocast off, half inputs upcast;
float64 stays float64) so mixed precision never touches geometry.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from workflow_lib.model.pair import apply_maps_to_msa
from workflow_lib.model.primitives import (FeedForward, LayerNorm, Linear, SharedDropout, float32_island,
                                           mask_to_bias)

IDEAL_BACKBONE = ((-0.525, 1.363, 0.0), (0.0, 0.0, 0.0), (1.526, 0.0, 0.0))
"""Local N, CA, C coordinates (Å) of an ideal residue in its own frame (AF2 rigid group of alanine): CA at the
origin, C on +x, N in the xy plane; :func:`frames_from_3_points` of these points is the identity."""

CB_A, CB_B, CB_C = -0.58273431, 0.56802827, -0.54067466
"""trRosetta's ideal Cβ: ``CB = a (b x c) + b' b + c' c + CA`` with ``b = CA - N``, ``c = C - CA``."""


class Frames(NamedTuple):
    """Per-residue rigid transforms: ``rot [*, 3, 3]`` (columns are the local axes), ``trans [*, 3]``."""

    rot: torch.Tensor
    trans: torch.Tensor

    def unsqueeze(self, dim: int) -> Frames:
        """Insert a broadcast dimension into the batch dims (``dim`` counts batch dims only, negative)."""
        return Frames(self.rot.unsqueeze(dim - 2), self.trans.unsqueeze(dim - 1))


def identity_frames(shape: tuple[int, ...], *, dtype: torch.dtype = torch.float32,
                    device: torch.device | str | None = None) -> Frames:
    rot = torch.eye(3, dtype=dtype, device=device).expand(*shape, 3, 3).clone()
    return Frames(rot, torch.zeros(*shape, 3, dtype=dtype, device=device))


def apply_frames(frames: Frames, x: torch.Tensor) -> torch.Tensor:
    """Local -> global: ``R x + t`` for points ``[*, 3]`` broadcasting against the frames."""
    with float32_island(frames.rot, frames.trans, x) as (rot, trans, x):
        return torch.einsum("...ij,...j->...i", rot, x) + trans


def invert_apply_frames(frames: Frames, x: torch.Tensor) -> torch.Tensor:
    """Global -> local: ``R^T (x - t)``."""
    with float32_island(frames.rot, frames.trans, x) as (rot, trans, x):
        return torch.einsum("...ji,...j->...i", rot, x - trans)


def invert_frames(frames: Frames) -> Frames:
    with float32_island(frames.rot, frames.trans) as (rot, trans):
        rot_t = rot.transpose(-1, -2)
        return Frames(rot_t, -torch.einsum("...ij,...j->...i", rot_t, trans))


def compose_frames(outer: Frames, inner: Frames) -> Frames:
    """``outer ∘ inner``: apply ``inner`` first, then ``outer``."""
    with float32_island(outer.rot, outer.trans, inner.rot, inner.trans) as (r1, t1, r2, t2):
        return Frames(r1 @ r2, torch.einsum("...ij,...j->...i", r1, t2) + t1)


def frames_from_3_points(n: torch.Tensor, ca: torch.Tensor, c: torch.Tensor, eps: float = 1e-12) -> Frames:
    """Gram-Schmidt frame from backbone atoms ``[*, 3]`` (AF2 Algorithm 21): origin CA, x along CA->C, N in xy.

    ``eps`` only guards degenerate (coincident/collinear) atoms; it does not bias normal inputs.
    """
    with float32_island(n, ca, c) as (n, ca, c):
        v1 = c - ca
        v2 = n - ca
        e1 = v1 / torch.sqrt((v1 * v1).sum(-1, keepdim=True).clamp_min(eps))
        u2 = v2 - (e1 * v2).sum(-1, keepdim=True) * e1
        e2 = u2 / torch.sqrt((u2 * u2).sum(-1, keepdim=True).clamp_min(eps))
        e3 = torch.cross(e1, e2, dim=-1)
        return Frames(torch.stack((e1, e2, e3), dim=-1), ca)


def quaternion_to_rotation(quat: torch.Tensor) -> torch.Tensor:
    """Unit quaternion ``[*, 4]`` (w, x, y, z; normalised here) -> rotation ``[*, 3, 3]``."""
    with float32_island(quat) as (quat,):
        w, x, y, z = (quat / quat.norm(dim=-1, keepdim=True)).unbind(-1)
        rows = (
            (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
            (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
            (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
        )
        return torch.stack([torch.stack(row, dim=-1) for row in rows], dim=-2)


def random_rotation(*shape: int, generator: torch.Generator | None = None,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Uniformly distributed rotations ``[*shape, 3, 3]`` (normalised Gaussian quaternions), e.g. for augmentation."""
    quat = torch.randn(*shape, 4, generator=generator, dtype=torch.float64)
    return quaternion_to_rotation(quat).to(dtype)


def frames_from_update(update: torch.Tensor, position_scale: float) -> Frames:
    """``[*, 6]`` -> frames: quaternion ``(1, b, c, d)`` and translation ``position_scale * (x, y, z)`` (AF2 Alg. 23)."""
    with float32_island(update) as (update,):
        quat = torch.cat((torch.ones_like(update[..., :1]), update[..., :3]), dim=-1)
        return Frames(quaternion_to_rotation(quat), update[..., 3:] * position_scale)


def backbone_from_frames(frames: Frames) -> torch.Tensor:
    """Frames ``[*, L]`` -> ideal backbone ``[*, L, 3, 3]`` (atoms N, CA, C; xyz in Å)."""
    ideal = torch.tensor(IDEAL_BACKBONE, dtype=frames.trans.dtype, device=frames.trans.device)
    return apply_frames(frames.unsqueeze(-1), ideal)


def cb_from_backbone(backbone: torch.Tensor) -> torch.Tensor:
    """``[*, 3 (N, CA, C), 3] -> [*, 3]`` virtual Cβ with trRosetta's ideal geometry."""
    with float32_island(backbone) as (backbone,):
        n, ca, c = backbone.unbind(-2)
        b = ca - n
        c_vec = c - ca
        a = torch.cross(b, c_vec, dim=-1)
        return CB_A * a + CB_B * b + CB_C * c_vec + ca


PEPTIDE_BOND = 1.329
"""C(i)–N(i+1) bond length (Å; Engh & Huber)."""
CA_CA_TRANS = 3.80
"""Cα(i)–Cα(i+1) distance of a trans peptide (Å)."""
BOND_TOLERANCE = 0.05
"""Flat bottom of :func:`bond_violation_loss` (Å)."""


def bond_violation_loss(coords: torch.Tensor, bonded: torch.Tensor, tolerance: float = BOND_TOLERANCE
                        ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Flat-bottom C(i)–N(i+1) and Cα(i)–Cα(i+1) penalties ``max(0, |d − d0| − tolerance)`` (Å) of
    ``coords [B, L, 3 (N, CA, C), 3]``, averaged over ``bonded [B, L − 1]`` (the training loss of
    :mod:`workflow_lib.training.losses` and the chain term of the distogram fold, :mod:`workflow_lib.inference.fold`).

    Returns the loss and the mean absolute deviations of both distances over the bonded pairs."""
    with float32_island(coords) as (coords,):
        peptide = torch.sqrt(((coords[:, 1:, 0] - coords[:, :-1, 2]) ** 2).sum(-1) + 1e-8)
        ca_ca = torch.sqrt(((coords[:, 1:, 1] - coords[:, :-1, 1]) ** 2).sum(-1) + 1e-8)
        dev_c_n = (peptide - PEPTIDE_BOND).abs()
        dev_ca = (ca_ca - CA_CA_TRANS).abs()
        weight = bonded.to(dev_c_n.dtype)
        count = weight.sum().clamp_min(1.0)
        loss = ((torch.relu(dev_c_n - tolerance) + torch.relu(dev_ca - tolerance)) * weight).sum() / count
        return loss, {"c_n_error": (dev_c_n * weight).sum() / count, "ca_ca_error": (dev_ca * weight).sum() / count}


class GraphTransformerLayer(nn.Module):
    """Graph transformer over the complete residue graph (RoseTTAFold, Baek et al. 2021; Shi et al. UniMP).

    Node ``s [*, L, C_s]`` attends to neighbours with edge features ``e_ij`` from the pair:
    ``a_ij = softmax_j(q_i . (k_j + e_ij) / sqrt(c))``, ``o_i = sum_j a_ij (v_j + e_ij)``; gated, residual,
    then a feed-forward. Edge tensor memory is ``[*, L, L, H, c]``.
    """

    def __init__(self, c_s: int, c_z: int, no_heads_str: int, transition_factor: int = 2) -> None:
        super().__init__()
        self.no_heads = no_heads_str
        self.c_hidden = c_s // no_heads_str
        self.norm_s = LayerNorm(c_s)
        self.norm_z = LayerNorm(c_z)
        self.linear_qkv = Linear(c_s, 3 * c_s, bias=False, init="glorot")
        self.linear_e = Linear(c_z, c_s, bias=False)
        self.linear_g = Linear(c_s, c_s, init="gating")
        self.linear_o = Linear(c_s, c_s, init="final")
        self.transition = FeedForward(c_s, transition_factor)

    def forward(self, s: torch.Tensor, z: torch.Tensor, seq_mask: torch.Tensor | None = None) -> torch.Tensor:
        s_n = self.norm_s(s)
        q, k, v = (x.unflatten(-1, (self.no_heads, self.c_hidden)) for x in self.linear_qkv(s_n).chunk(3, -1))
        e = self.linear_e(self.norm_z(z)).unflatten(-1, (self.no_heads, self.c_hidden))   # [*, L, L, H, c]
        logits = torch.einsum("...ihc,...ijhc->...hij", q, k.unsqueeze(-4) + e) / math.sqrt(self.c_hidden)
        if seq_mask is not None:
            logits = logits + mask_to_bias(seq_mask)[..., None, None, :]
        attn = torch.softmax(logits, dim=-1)
        o = torch.einsum("...hij,...ijhc->...ihc", attn, v.unsqueeze(-4) + e).flatten(-2)
        s = s + self.linear_o(torch.sigmoid(self.linear_g(s_n)) * o)
        return s + self.transition(s)


class InitialStructure(nn.Module):
    """Initial 3D track from the two-track output (RoseTTAFold, Baek et al. 2021, Science 373:871).

    Node features from the query-row MSA embedding ``m0 [*, L, C_m]``, edge features from ``z [*, L, L, C_z]``;
    ``n_graph_layers`` graph-transformer layers, then per residue a quaternion ``(1, b, c, d)`` and a
    translation (times ``position_scale`` Å) give the frames. Returns ``(s [*, L, C_s], Frames [*, L])``.
    DEVIATION-RF-INIT: RoseTTAFold regresses N/CA/C coordinates directly; frames guarantee a valid backbone.
    """

    def __init__(self, c_m: int, c_z: int, c_s: int, no_heads_str: int, n_graph_layers: int,
                 transition_factor: int = 2, position_scale: float = 10.0) -> None:
        super().__init__()
        self.position_scale = position_scale
        self.norm_m = LayerNorm(c_m)
        self.linear_in = Linear(c_m, c_s)
        self.layers = nn.ModuleList(GraphTransformerLayer(c_s, c_z, no_heads_str, transition_factor)
                                    for _ in range(n_graph_layers))
        self.norm_out = LayerNorm(c_s)
        self.linear_frames = Linear(c_s, 6, init="default")

    def forward(self, m0: torch.Tensor, z: torch.Tensor,
                seq_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, Frames]:
        s = self.linear_in(self.norm_m(m0))
        for layer in self.layers:
            s = layer(s, z, seq_mask)
        s = self.norm_out(s)
        return s, frames_from_update(self.linear_frames(s), self.position_scale)


class InvariantPointAttention(nn.Module):
    """Invariant Point Attention (AF2 Algorithm 22): ``s [*, L, C_s]``, ``z [*, L, L, C_z]``,
    frames ``[*, L]`` -> update ``[*, L, C_s]``, invariant to any global rotation/translation of the frames.

    Logits ``w_L (q_i.k_j / sqrt(c) + b_ij - gamma_h w_C / 2 sum_p |T_i q_ip - T_j k_jp|^2)``; outputs are the
    scalar values, the value points brought back into the local frame of ``i`` (and their norms), and the
    attention-weighted pair features.
    """

    def __init__(self, c_s: int, c_z: int, no_heads_str: int, no_qk_points: int, no_v_points: int) -> None:
        super().__init__()
        self.h = no_heads_str
        self.c = c_s // no_heads_str
        self.p_qk = no_qk_points
        self.p_v = no_v_points
        self.linear_q = Linear(c_s, self.h * self.c, bias=False, init="glorot")
        self.linear_kv = Linear(c_s, 2 * self.h * self.c, bias=False, init="glorot")
        self.linear_q_points = Linear(c_s, self.h * self.p_qk * 3)
        self.linear_kv_points = Linear(c_s, self.h * (self.p_qk + self.p_v) * 3)
        self.linear_b = Linear(c_z, self.h, bias=False)
        self.head_weights = nn.Parameter(torch.full((self.h,), math.log(math.e - 1.0)))  # softplus -> 1
        self.linear_out = Linear(self.h * (self.c + c_z + self.p_v * 4), c_s, init="final")

    def forward(self, s: torch.Tensor, z: torch.Tensor, frames: Frames,
                seq_mask: torch.Tensor | None = None) -> torch.Tensor:
        q = self.linear_q(s).unflatten(-1, (self.h, self.c))
        k, v = self.linear_kv(s).unflatten(-1, (self.h, 2 * self.c)).split(self.c, dim=-1)
        q_pts = self.linear_q_points(s).unflatten(-1, (self.h, self.p_qk, 3))
        kv_pts = self.linear_kv_points(s).unflatten(-1, (self.h, self.p_qk + self.p_v, 3))
        point_frames = frames.unsqueeze(-1).unsqueeze(-1)                   # [*, L, 1, 1]
        q_pts = apply_frames(point_frames, q_pts)                           # [*, L, H, P, 3] global
        kv_pts = apply_frames(point_frames, kv_pts)
        k_pts, v_pts = kv_pts.split((self.p_qk, self.p_v), dim=-2)

        w_l = math.sqrt(1.0 / 3.0)
        w_c = math.sqrt(2.0 / (9.0 * self.p_qk))
        gamma = nn.functional.softplus(self.head_weights)
        scalar = torch.einsum("...ihc,...jhc->...hij", q, k) / math.sqrt(self.c)
        pair_bias = self.linear_b(z).movedim(-1, -3)                        # [*, H, L, L]
        with float32_island(q_pts, k_pts) as (q32, k32):
            diff = q32.unsqueeze(-4) - k32.unsqueeze(-5)                    # [*, L, L, H, P, 3]
            sq_dist = (diff * diff).sum(dim=(-1, -2)).movedim(-1, -3)       # [*, H, L, L]
        point_term = gamma[:, None, None] * (w_c / 2.0) * sq_dist
        logits = w_l * (scalar + pair_bias - point_term.to(scalar.dtype))
        if seq_mask is not None:
            logits = logits + mask_to_bias(seq_mask)[..., None, None, :]
        attn = torch.softmax(logits, dim=-1)

        o = torch.einsum("...hij,...jhc->...ihc", attn, v)
        with float32_island(attn, v_pts) as (attn32, v32):
            o_pts = torch.einsum("...hij,...jhpx->...ihpx", attn32, v32)    # global
            o_pts = invert_apply_frames(point_frames, o_pts)               # local to i
            o_pts_norm = torch.sqrt((o_pts * o_pts).sum(-1) + 1e-8)
        o_pair = torch.einsum("...hij,...ijc->...ihc", attn, z)
        feats = torch.cat((o.flatten(-2), o_pts.flatten(-3).to(o.dtype), o_pts_norm.flatten(-2).to(o.dtype),
                           o_pair.flatten(-2)), dim=-1)
        return self.linear_out(feats)


class GeometricAttention(nn.Module):
    """Geometric self-attention over residue frames (ESM3, Hayes et al. 2024, Algorithm 6), with a pair bias:
    ``s [*, L, C_s]``, ``z [*, L, L, C_z]``, frames ``[*, L]`` -> update ``[*, L, C_s]``, invariant to any global
    rotation/translation of the frames.

    Per head ``h`` five 3-vectors per residue come from ``s``: direction query/key ``q_r, k_r``, distance
    query/key ``q_d, k_d`` and value ``v``. Directions and values are rotated into the global frame
    (``R_i x``), distance points are placed in it (``T_i x = R_i x + t_i``), and

        A_hij = softplus(w_r,h) (q_r,i . k_r,j) / sqrt(3) - softplus(w_d,h) |q_d,i - k_d,j| / sqrt(3) + b_hij

    is soft-maxed over ``j``; the output ``O_i = R_i^-1 sum_j A_ij v_j`` (back in residue ``i``'s own frame) goes
    through one Linear layer. Algorithm 6's line 8 writes the distance term with ``q_r, k_r``; its text and line 5-6
    (``Q_d, K_d`` placed by ``T_i``) say the distance points, which is what is used here. ``b_hij`` (a per-head
    Linear of the pair representation, as IPA's) is this network's addition: in a three-track network the pair
    track is what the 3D track should read, and Algorithm 6 has no other input for it. Weights start at
    ``softplus = 1``; the output layer is zero-initialised (the update starts as the identity).
    """

    def __init__(self, c_s: int, c_z: int, no_heads_geometric: int) -> None:
        super().__init__()
        self.h = no_heads_geometric
        self.linear_in = Linear(c_s, 5 * self.h * 3, bias=False, init="glorot")
        self.linear_b = Linear(c_z, self.h, bias=False)
        self.direction_weights = nn.Parameter(torch.full((self.h,), math.log(math.e - 1.0)))
        self.distance_weights = nn.Parameter(torch.full((self.h,), math.log(math.e - 1.0)))
        self.linear_out = Linear(self.h * 3, c_s, init="final")

    def forward(self, s: torch.Tensor, z: torch.Tensor, frames: Frames,
                seq_mask: torch.Tensor | None = None) -> torch.Tensor:
        vectors = self.linear_in(s).unflatten(-1, (5, self.h, 3))            # [*, L, 5, H, 3]
        pair_bias = self.linear_b(z).movedim(-1, -3)                        # [*, H, L, L]
        with float32_island(vectors, frames.rot, frames.trans) as (vectors, rot, trans):
            rotated = (rot[..., None, None, :, :] @ vectors.unsqueeze(-1)).squeeze(-1)   # R_i x, [*, L, 5, H, 3]
            q_r, k_r, q_d, k_d, v = rotated.unbind(-3)                      # [*, L, H, 3] global directions
            q_d, k_d = q_d + trans[..., None, :], k_d + trans[..., None, :]  # T_i x: global points
            direction = torch.einsum("...ihx,...jhx->...hij", q_r, k_r) / math.sqrt(3.0)
            distance = torch.cdist(q_d.movedim(-2, -3).contiguous(), k_d.movedim(-2, -3).contiguous())
            w_r = nn.functional.softplus(self.direction_weights)[:, None, None]
            w_d = nn.functional.softplus(self.distance_weights)[:, None, None]
            logits = w_r * direction - w_d * distance / math.sqrt(3.0) + pair_bias.to(direction.dtype)
            if seq_mask is not None:
                logits = logits + mask_to_bias(seq_mask)[..., None, None, :]
            attn = torch.softmax(logits, dim=-1)
            o = torch.einsum("...hij,...jhx->...ihx", attn, v)             # global directions
            o = (rot.transpose(-1, -2)[..., None, :, :] @ o.unsqueeze(-1)).squeeze(-1)  # R_i^-1: i's own frame
        return self.linear_out(o.flatten(-2).to(s.dtype))


class Str2Str(nn.Module):
    """3D-track update: the query MSA row feeds the node state, IPA + transition update it, and a
    backbone update composes a local rigid correction onto each frame (AF2 Algorithm 20 lines 5-10, one step).

    ``m0 [*, L, C_m]``, ``z [*, L, L, C_z]``, ``s [*, L, C_s]``, frames ``[*, L]`` -> ``(s, frames)``. Because the
    correction is composed on the right (in the local frame), a global transform of the input frames carries
    through to the output frames unchanged, and ``s`` is invariant.
    """

    def __init__(self, c_m: int, c_z: int, c_s: int, no_heads_str: int, no_qk_points: int, no_v_points: int,
                 transition_factor: int = 2, position_scale: float = 10.0, dropout: float = 0.0,
                 str_attention: str = "ipa", no_heads_geometric: int = 16) -> None:
        super().__init__()
        if str_attention not in ("ipa", "geometric"):
            raise ValueError(f"unknown 3D-track attention {str_attention!r}")
        self.position_scale = position_scale
        self.norm_m = LayerNorm(c_m)
        self.linear_m = Linear(c_m, c_s)
        self.norm_z = LayerNorm(c_z)
        self.norm_s = LayerNorm(c_s)
        # the attribute names are the checkpoints' state-dict keys: ``ipa`` for IPA, ``geometric`` for ESM3's
        if str_attention == "ipa":
            self.ipa = InvariantPointAttention(c_s, c_z, no_heads_str, no_qk_points, no_v_points)
        else:
            self.geometric = GeometricAttention(c_s, c_z, no_heads_geometric)
        self.str_attention = str_attention
        self.dropout = nn.Dropout(dropout)
        self.norm_ipa = LayerNorm(c_s)
        self.transition = FeedForward(c_s, transition_factor)
        self.linear_update = Linear(c_s, 6, init="final")

    def forward(self, m0: torch.Tensor, z: torch.Tensor, s: torch.Tensor, frames: Frames,
                seq_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, Frames]:
        s = s + self.linear_m(self.norm_m(m0))
        attention = self.ipa if self.str_attention == "ipa" else self.geometric
        s = self.norm_ipa(s + self.dropout(attention(self.norm_s(s), self.norm_z(z), frames, seq_mask)))
        s = s + self.transition(s)
        frames = compose_frames(frames, frames_from_update(self.linear_update(s), self.position_scale))
        return s, frames


class Str2MSA(nn.Module):
    """Distance-masked direct attention from the 3D track into the MSA (RoseTTAFold, Baek et al. 2021).

    Head ``h`` lets residue ``i`` attend only to residues whose predicted CA lies within ``cutoff_h`` Å (cutoffs
    spaced linearly from ``str2msa_min_cutoff`` to ``str2msa_max_cutoff``; ``i`` always sees itself). Logits
    come from the node state ``s``, values from the MSA, so ``m [*, N_seq, L, C_m]`` is updated with the
    same attention map in every row. Depends on frames only through distances: invariant.
    """

    def __init__(self, c_m: int, c_s: int, no_heads_msa: int, str2msa_min_cutoff: float = 8.0,
                 str2msa_max_cutoff: float = 20.0, gating: bool = True, transition_factor: int = 2,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.h = no_heads_msa
        self.c = c_m // no_heads_msa
        self.register_buffer("cutoffs", torch.linspace(str2msa_min_cutoff, str2msa_max_cutoff, no_heads_msa),
                             persistent=False)
        self.norm_s = LayerNorm(c_s)
        self.norm_m = LayerNorm(c_m)
        self.linear_qk = Linear(c_s, 2 * c_m, bias=False, init="glorot")
        self.linear_v = Linear(c_m, c_m, bias=False, init="glorot")
        self.linear_g = Linear(c_m, c_m, init="gating") if gating else None
        self.linear_o = Linear(c_m, c_m, init="final")
        self.transition = FeedForward(c_m, transition_factor)
        self.dropout = SharedDropout(dropout, shared_dim=-3)

    def forward(self, m: torch.Tensor, s: torch.Tensor, frames: Frames,
                seq_mask: torch.Tensor | None = None) -> torch.Tensor:
        q, k = (x.unflatten(-1, (self.h, self.c)) for x in self.linear_qk(self.norm_s(s)).chunk(2, dim=-1))
        logits = torch.einsum("...ihc,...jhc->...hij", q, k) / math.sqrt(self.c)
        with float32_island(frames.trans) as (ca,):
            diff = ca.unsqueeze(-2) - ca.unsqueeze(-3)
            dist = torch.sqrt((diff * diff).sum(-1))                                          # [*, L, L]
            near = dist.unsqueeze(-3) <= self.cutoffs.to(dist.dtype)[:, None, None]       # [*, H, L, L]
            near = near | torch.eye(dist.shape[-1], dtype=torch.bool, device=dist.device)
        logits = logits + mask_to_bias(near).to(logits.dtype)
        if seq_mask is not None:
            logits = logits + mask_to_bias(seq_mask)[..., None, None, :]
        return apply_maps_to_msa(self, torch.softmax(logits, dim=-1), m, self.h, self.c)
