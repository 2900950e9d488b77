"""Input embeddings of the MSA and pair tracks.

RoseTTAFold's MSA embedding (Baek et al. 2021, Science 373:871): token embedding + sinusoidal 1D positional
encoding (Vaswani et al. 2017, NeurIPS) + query encoding. The pair
track starts from an outer sum of query-sequence embeddings, a clipped relative-position embedding and, when
given, template and co-evolution features (DESIGN.md, "Features and the model").
"""

from __future__ import annotations

import math

import torch
from torch import nn

from workflow_lib.model.config import N_TOKENS
from workflow_lib.model.primitives import Attention, LayerNorm, Linear, mask_to_bias
from workflow_lib.schemas.features import PROFILE_STATES


def sinusoidal_encoding(residue_index: torch.Tensor, dim: int) -> torch.Tensor:
    """1D positional encoding ``[*, L] -> [*, L, dim]`` (Vaswani et al. 2017, section 3.5).

    ``p[i, 2k] = sin(i w_k)``, ``p[i, 2k+1] = cos(i w_k)`` with ``w_k = exp(-2k ln(10000) / dim)``. Computed
    from the residue index (not the array position) so gaps in numbering and crops keep true distances.
    """
    if dim % 2:
        raise ValueError(f"positional encoding needs an even dimension, got {dim}")
    k2 = torch.arange(0, dim, 2, device=residue_index.device, dtype=torch.float32)
    omega = torch.exp(-k2 * (math.log(10000.0) / dim))                      # [dim/2]
    angles = residue_index.to(torch.float32)[..., None] * omega             # [*, L, dim/2]
    return torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1).flatten(-2)


def deletion_features(deletions: torch.Tensor) -> torch.Tensor:
    """Insertion counts ``[*]`` -> ``[*, 2]``: whether there is a deletion, and ``2/π arctan(d / 3)`` (AF2
    supplement 1.2.9, ``has_deletion`` and ``deletion_value``)."""
    d = deletions.to(torch.float32)
    return torch.stack(((d > 0).to(torch.float32), (2.0 / math.pi) * torch.atan(d / 3.0)), dim=-1)


class MSAEmbedding(nn.Module):
    """MSA tokens ``[*, N_seq, N_res]`` (int, codes 0..21) -> ``[*, N_seq, N_res, C_m]`` (Baek et al. 2021).

    ``embed(token) + positional(residue_index) + query_encoding(row == 0)``. The query encoding is a learned
    embedding of "is this the query row", so every other row receives the second vector.

    With ``msa_statistics`` the MSA statistics the feature file holds are inputs too, as AlphaFold2's
    ``msa_feat`` has them: ``Linear(deletion_features(deletion_matrix))`` per cell, and per residue (added to
    every row) ``Linear([profile, deletion_features(deletion_mean)])`` (21 profile states).
    """

    def __init__(self, c_m: int, n_tokens: int = N_TOKENS, msa_statistics: bool = False) -> None:
        super().__init__()
        self.c_m = c_m
        self.n_tokens = n_tokens
        self.token = nn.Embedding(n_tokens, c_m)
        self.query = nn.Embedding(2, c_m)
        self.linear_deletion = Linear(2, c_m) if msa_statistics else None
        self.linear_profile = Linear(PROFILE_STATES + 2, c_m) if msa_statistics else None

    def forward(self, msa: torch.Tensor, residue_index: torch.Tensor, deletion_matrix: torch.Tensor | None = None,
                profile: torch.Tensor | None = None, deletion_mean: torch.Tensor | None = None) -> torch.Tensor:
        n_seq = msa.shape[-2]
        is_query = torch.zeros(n_seq, dtype=torch.long, device=msa.device)
        is_query[0] = 1
        m = self.token(msa) + self.query(is_query)[:, None, :]
        m = m + sinusoidal_encoding(residue_index, self.c_m).unsqueeze(-3).to(m.dtype)
        if self.linear_deletion is not None:
            if deletion_matrix is None or profile is None or deletion_mean is None:
                raise ValueError("MSAEmbedding with msa_statistics needs deletion_matrix, profile and deletion_mean")
            per_residue = torch.cat((profile.to(torch.float32), deletion_features(deletion_mean)), dim=-1)
            m = m + self.linear_deletion(deletion_features(deletion_matrix).to(m.dtype))
            m = m + self.linear_profile(per_residue.to(m.dtype)).unsqueeze(-3)
        return m


def relative_position_one_hot(residue_index: torch.Tensor, relpos_max: int) -> torch.Tensor:
    """``[*, L] -> [*, L, L, 2 * relpos_max + 1]`` one-hot of ``clip(r_j - r_i, -max, max)`` (AF2 Alg. 4)."""
    offset = residue_index[..., None, :] - residue_index[..., :, None]
    bins = offset.clamp(-relpos_max, relpos_max) + relpos_max
    return nn.functional.one_hot(bins.long(), 2 * relpos_max + 1)


class TemplatePointwiseAttention(nn.Module):
    """Each pair ``z_ij`` attends over the ``T`` template embeddings at ``ij`` (AF2 Algorithm 17).

    ``z [*, L, L, C_z]``, ``t [*, T, L, L, C_z]``, ``template_mask [*, T]`` -> update ``[*, L, L, C_z]``.
    A protein with no valid template gets a zero update (the output is multiplied by "any template").
    """

    def __init__(self, c_z: int, no_heads: int) -> None:
        super().__init__()
        self.norm_z = LayerNorm(c_z)
        self.norm_t = LayerNorm(c_z)
        self.attention = Attention(c_z, c_z, c_z // no_heads, no_heads, gating=False)

    def forward(self, z: torch.Tensor, t: torch.Tensor, template_mask: torch.Tensor,
                chunk_size: int | None = None) -> torch.Tensor:
        t = self.norm_t(t).movedim(-4, -2).contiguous()         # [*, L, L, T, C_z]; contiguous, or a bfloat16
        # projection of the moved view copies its weight once per residue pair (slower than float32)
        q = self.norm_z(z).unsqueeze(-2)                        # [*, L, L, 1, C_z]
        bias = mask_to_bias(template_mask)[..., None, None, None, None, :]  # [*, 1, 1, 1, 1, T]
        out = self.attention(q, t, [bias]).squeeze(-2)
        any_template = (template_mask.sum(dim=-1) > 0).to(out.dtype)[..., None, None, None]
        return out * any_template


class PairEmbedding(nn.Module):
    """Initial pair representation ``[*, N_res, N_res, C_z]``.

    ``z_ij = a(s_i) + b(s_j) + relpos(r_j - r_i)`` from the query sequence ``s`` and residue index ``r``, plus
    optional template features (``c_template_pair`` per pair, ``c_template_1d`` per residue; either
    point-wise attention over templates or a masked mean, ``template_mode``) and an optional co-evolution
    pair feature (``c_coevolution`` channels). A width of 0 means the feature is not accepted.
    """

    def __init__(self, c_z: int, relpos_max: int, c_template_pair: int = 0, c_template_1d: int = 0,
                 template_mode: str = "attention", c_coevolution: int = 0, no_heads_pair: int = 4,
                 n_tokens: int = N_TOKENS) -> None:
        super().__init__()
        self.relpos_max = relpos_max
        self.c_template_pair = c_template_pair
        self.c_template_1d = c_template_1d
        self.c_coevolution = c_coevolution
        self.template_mode = template_mode
        self.left = nn.Embedding(n_tokens, c_z)
        self.right = nn.Embedding(n_tokens, c_z)
        self.relpos = Linear(2 * relpos_max + 1, c_z)
        c_template_in = c_template_pair + 2 * c_template_1d
        if c_template_in:
            self.template_in = Linear(c_template_in, c_z, init="relu")
            if template_mode == "attention":
                self.template_update = TemplatePointwiseAttention(c_z, no_heads_pair)
            else:
                self.template_out = Linear(c_z, c_z, init="final")
        if c_coevolution:
            self.coevolution = Linear(c_coevolution, c_z)

    def _template_features(self, templates_pair: torch.Tensor | None, templates_1d: torch.Tensor | None,
                           n_res: int) -> torch.Tensor:
        """Concatenate pair features with the 1D features of both residues: ``[*, T, L, L, C_in]``."""
        parts = []
        if self.c_template_pair:
            parts.append(templates_pair)
        if self.c_template_1d:
            left = templates_1d.unsqueeze(-2).expand(*templates_1d.shape[:-1], n_res, self.c_template_1d)
            right = templates_1d.unsqueeze(-3).expand(*templates_1d.shape[:-2], n_res, n_res, self.c_template_1d)
            parts.extend((left, right))
        return torch.cat(parts, dim=-1)

    def forward(self, query_seq: torch.Tensor, residue_index: torch.Tensor, *,
                templates_pair: torch.Tensor | None = None, templates_1d: torch.Tensor | None = None,
                template_mask: torch.Tensor | None = None, coevolution: torch.Tensor | None = None,
                chunk_size: int | None = None) -> torch.Tensor:
        """``query_seq [*, L]`` (int) and ``residue_index [*, L]`` -> ``z [*, L, L, C_z]``."""
        n_res = query_seq.shape[-1]
        z = self.left(query_seq)[..., :, None, :] + self.right(query_seq)[..., None, :, :]
        relpos = relative_position_one_hot(residue_index, self.relpos_max).to(z.dtype)
        z = z + self.relpos(relpos)
        has_templates = templates_pair is not None or templates_1d is not None
        if has_templates and (self.c_template_pair or self.c_template_1d):
            if (self.c_template_pair and templates_pair is None) or (self.c_template_1d and templates_1d is None):
                raise ValueError("both templates_pair and templates_1d are required by this model configuration")
            t = self.template_in(self._template_features(templates_pair, templates_1d, n_res).to(z.dtype))
            if template_mask is None:
                template_mask = t.new_ones(t.shape[:-3])
            template_mask = template_mask.to(z.dtype)
            if self.template_mode == "attention":
                z = z + self.template_update(z, t, template_mask, chunk_size=chunk_size)
            else:
                weights = template_mask[..., None, None, None]
                mean = (t * weights).sum(dim=-4) / weights.sum(dim=-4).clamp_min(1.0)
                z = z + self.template_out(mean)
        if coevolution is not None and self.c_coevolution:
            z = z + self.coevolution(coevolution.to(z.dtype))
        return z
