"""Pair track and its exchanges with the MSA track: MSA2Pair, Pair2Pair, Pair2MSA.

* MSA2Pair: outer product mean of the MSA (AlphaFold 2 supplement, Jumper et al. 2021, Nature 596:583,
  Algorithm 10), weighted by a
  learned :class:`~workflow_lib.model.msa.SequenceWeights` or by given/uniform row weights.
* Pair2Pair: axial attention on pair rows and columns (RoseTTAFold's axial encoder, Baek et al. 2021, Science
  373:871, applied to the pair), with optional triangle multiplicative updates first (AF2 Algorithms 11-12).
* Pair2MSA: direct attention -- attention maps computed from the pair only and applied to MSA values (as in
  RoseTTAFold, Baek et al. 2021).

Shapes: ``m [*, N_seq, N_res, C_m]``, ``z [*, N_res, N_res, C_z]``, MSA mask ``[*, N_seq, N_res]``, pair mask
``[*, N_res, N_res]``.
"""

from __future__ import annotations

import torch
from torch import nn

from workflow_lib.model.msa import SequenceWeights
from workflow_lib.model.primitives import (Attention, FeedForward, LayerNorm, Linear, SharedDropout,
                                           mask_to_bias)


class OuterProductMean(nn.Module):
    """``o_ij = Linear(sum_n w_ni a_ni (x) b_nj / sum_n w_ni mask_ni mask_nj)`` -> ``[*, N_res, N_res, C_z]``.

    ``weights [*, N_seq, N_res]`` (or ``None`` for 1) weight the rows; with weights 1 this is AF2's outer
    product mean. ``chunk_size`` processes residues ``i`` in blocks (memory ``[*, chunk, L, c, c]``).
    """

    def __init__(self, c_m: int, c_z: int, c_hidden_opm: int) -> None:
        super().__init__()
        self.norm = LayerNorm(c_m)
        self.linear_a = Linear(c_m, c_hidden_opm)
        self.linear_b = Linear(c_m, c_hidden_opm)
        self.linear_out = Linear(c_hidden_opm * c_hidden_opm, c_z, init="final")

    def forward(self, m: torch.Tensor, mask: torch.Tensor | None = None, weights: torch.Tensor | None = None,
                chunk_size: int | None = None) -> torch.Tensor:
        if mask is None:
            mask = m.new_ones(m.shape[:-1])
        mask = mask.to(m.dtype)
        if weights is None:
            weights = torch.ones_like(mask)
        weights = weights.to(m.dtype) * mask
        m = self.norm(m)
        a = self.linear_a(m) * weights[..., None]                         # [*, N, L, c]
        b = self.linear_b(m) * mask[..., None]
        n_res = a.shape[-2]
        step = chunk_size or n_res
        outs = []
        for start in range(0, n_res, step):
            stop = min(n_res, start + step)
            outer = torch.einsum("...nic,...njd->...ijcd", a[..., start:stop, :], b).flatten(-2)
            norm = torch.einsum("...ni,...nj->...ij", weights[..., start:stop], mask)[..., None]
            # Linear(outer / norm) = (outer W^T) / norm + bias: divide the C_z outputs, not the c*c products
            projected = torch.nn.functional.linear(outer, self.linear_out.weight)
            outs.append(projected / (norm + 1e-3) + self.linear_out.bias)
        return torch.cat(outs, dim=-3) if len(outs) > 1 else outs[0]


class MSA2Pair(nn.Module):
    """Pair update from the MSA: ``z += Dropout(OuterProductMean(m))`` (AF2 Algorithm 10), and with
    ``row_attention_to_pair`` ``z += Dropout(Linear(maps))`` of MSA2MSA's tied/soft-tied row-attention maps
    (RoseTTAFold's MSA2Pair reads the symmetrised soft-tied attention maps; Baek et al. 2021).

    ``outer_product_weighting='learned'`` weights rows by a one-head :class:`SequenceWeights` (query row
    attends to every row at every residue); ``'mean'`` uses the ``msa_weights [*, N_seq]`` given to
    :meth:`forward` or uniform weights (the workflow's feature files carry no row weights: inference and
    training give none).
    """

    def __init__(self, c_m: int, c_z: int, c_hidden_opm: int, outer_product_weighting: str = "learned",
                 dropout: float = 0.0, row_attention_to_pair: bool = False, no_heads_msa: int = 4) -> None:
        super().__init__()
        if outer_product_weighting not in ("mean", "learned"):
            raise ValueError(f"unknown outer product weighting {outer_product_weighting!r}")
        self.opm = OuterProductMean(c_m, c_z, c_hidden_opm)
        # the row attention's maps beside the outer product (zero-initialised: the update starts without them)
        self.linear_maps = Linear(no_heads_msa, c_z, init="final") if row_attention_to_pair else None
        self.seq_weights = (SequenceWeights(c_m, 1, c_hidden_opm) if outer_product_weighting == "learned"
                            else None)
        self.norm_w = LayerNorm(c_m) if self.seq_weights is not None else None
        self.dropout = SharedDropout(dropout, shared_dim=-3)

    def forward(self, m: torch.Tensor, z: torch.Tensor, mask: torch.Tensor | None = None,
                msa_weights: torch.Tensor | None = None, chunk_size: int | None = None,
                maps: torch.Tensor | None = None) -> torch.Tensor:
        """``z`` updated by the outer product and, when built with ``row_attention_to_pair``, by a Linear map of
        the row attention's symmetrised maps ``maps [*, H, L, L]`` (MSA2MSA with ``return_maps``)."""
        if self.linear_maps is not None:
            if maps is None:
                raise ValueError("MSA2Pair was built to read the row attention maps; none were given")
            z = z + self.dropout(self.linear_maps(maps.movedim(-3, -1).to(z.dtype)))
        if self.seq_weights is not None:
            weights = self.seq_weights(self.norm_w(m), mask).squeeze(-1)  # [*, N, L], sums to 1 over N
            n_real = weights.shape[-2] if mask is None else mask.to(m.dtype).sum(dim=-2, keepdim=True)
            weights = weights * n_real                                    # rescale: uniform weights -> 1
        elif msa_weights is not None:
            weights = msa_weights.to(m.dtype)[..., None].expand(m.shape[:-1])
        else:
            weights = None
        return z + self.dropout(self.opm(m, mask, weights, chunk_size=chunk_size))


class TriangleMultiplication(nn.Module):
    """Triangle multiplicative update, outgoing or incoming edges (AF2 Algorithms 11 and 12).

    ``z [*, L, L, C_z] -> update [*, L, L, C_z]``; outgoing: ``x_ij = sum_k a_ik b_jk``, incoming:
    ``x_ij = sum_k a_ki b_kj``, gated projections, output ``g_ij * Linear(LayerNorm(x_ij))``.
    """

    def __init__(self, c_z: int, c_hidden_tri_mul: int, outgoing: bool = True) -> None:
        super().__init__()
        self.outgoing = outgoing
        self.norm_in = LayerNorm(c_z)
        self.linear_a_p = Linear(c_z, c_hidden_tri_mul)
        self.linear_a_g = Linear(c_z, c_hidden_tri_mul, init="gating")
        self.linear_b_p = Linear(c_z, c_hidden_tri_mul)
        self.linear_b_g = Linear(c_z, c_hidden_tri_mul, init="gating")
        self.linear_g = Linear(c_z, c_z, init="gating")
        self.norm_out = LayerNorm(c_hidden_tri_mul)
        self.linear_z = Linear(c_hidden_tri_mul, c_z, init="final")

    def forward(self, z: torch.Tensor, pair_mask: torch.Tensor | None = None) -> torch.Tensor:
        z = self.norm_in(z)
        mask = 1.0 if pair_mask is None else pair_mask.to(z.dtype)[..., None]
        a = mask * torch.sigmoid(self.linear_a_g(z)) * self.linear_a_p(z)
        b = mask * torch.sigmoid(self.linear_b_g(z)) * self.linear_b_p(z)
        if self.outgoing:
            x = torch.einsum("...ikc,...jkc->...ijc", a, b)
        else:
            x = torch.einsum("...kic,...kjc->...ijc", a, b)
        return torch.sigmoid(self.linear_g(z)) * self.linear_z(self.norm_out(x))


class PairAxialAttention(nn.Module):
    """Gated self-attention along pair rows (``z_i.`` attends over ``j``) or, transposed, along columns.

    ``[*, L, L, C_z] -> update [*, L, L, C_z]``; ``chunk_size`` processes queries in blocks.
    """

    def __init__(self, c_z: int, no_heads_pair: int, along_rows: bool = True, gating: bool = True) -> None:
        super().__init__()
        self.along_rows = along_rows
        self.norm = LayerNorm(c_z)
        self.attention = Attention(c_z, c_z, c_z // no_heads_pair, no_heads_pair, gating=gating)

    def forward(self, z: torch.Tensor, pair_mask: torch.Tensor | None = None,
                chunk_size: int | None = None) -> torch.Tensor:
        if not self.along_rows:
            z = z.transpose(-2, -3)
            pair_mask = None if pair_mask is None else pair_mask.transpose(-1, -2)
        z = self.norm(z)
        bias = None if pair_mask is None else mask_to_bias(pair_mask)[..., :, None, None, :]  # [*, L, 1, 1, L]
        out = self.attention(z, z, [bias], chunk_size=chunk_size)
        return out if self.along_rows else out.transpose(-2, -3)


class Pair2Pair(nn.Module):
    """Pair-track block: [triangle updates out/in,] axial row and column attention, feed-forward.

    ``[*, L, L, C_z] -> [*, L, L, C_z]`` with pre-norm residual updates and shared dropout.
    """

    def __init__(self, c_z: int, no_heads_pair: int, triangle_updates: bool = True, c_hidden_tri_mul: int = 32,
                 gating: bool = True, transition_factor: int = 2, dropout: float = 0.0) -> None:
        super().__init__()
        if triangle_updates:
            self.tri_out = TriangleMultiplication(c_z, c_hidden_tri_mul, outgoing=True)
            self.tri_in = TriangleMultiplication(c_z, c_hidden_tri_mul, outgoing=False)
        else:
            self.tri_out = self.tri_in = None
        self.row = PairAxialAttention(c_z, no_heads_pair, along_rows=True, gating=gating)
        self.column = PairAxialAttention(c_z, no_heads_pair, along_rows=False, gating=gating)
        self.transition = FeedForward(c_z, transition_factor)
        self.row_dropout = SharedDropout(dropout, shared_dim=-3)
        self.column_dropout = SharedDropout(dropout, shared_dim=-2)

    def forward(self, z: torch.Tensor, pair_mask: torch.Tensor | None = None,
                chunk_size: int | None = None) -> torch.Tensor:
        if self.tri_out is not None:
            z = z + self.row_dropout(self.tri_out(z, pair_mask))
            z = z + self.row_dropout(self.tri_in(z, pair_mask))
        z = z + self.row_dropout(self.row(z, pair_mask, chunk_size=chunk_size))
        z = z + self.column_dropout(self.column(z, pair_mask, chunk_size=chunk_size))
        return z + self.transition(z)


class Pair2MSA(nn.Module):
    """Direct attention: the pair decides where each residue looks, the MSA supplies what it sees.

    ``a_hij = softmax_j(Linear(LayerNorm(z_ij))_h)`` is shared by all rows; ``o_nih = sum_j a_hij v_njh`` with
    ``v = Linear(LayerNorm(m))``, then gating, output projection and a feed-forward:
    ``m [*, N_seq, N_res, C_m], z [*, L, L, C_z] -> m [*, N_seq, N_res, C_m]``.
    """

    def __init__(self, c_m: int, c_z: int, no_heads_msa: int, gating: bool = True, transition_factor: int = 2,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.no_heads = no_heads_msa
        self.c_hidden = c_m // no_heads_msa
        self.norm_z = LayerNorm(c_z)
        self.norm_m = LayerNorm(c_m)
        self.linear_logits = Linear(c_z, no_heads_msa, bias=False)
        self.linear_v = Linear(c_m, c_m, bias=False, init="glorot")
        self.linear_g = Linear(c_m, c_m, init="gating") if gating else None
        self.linear_o = Linear(c_m, c_m, init="final")
        self.transition = FeedForward(c_m, transition_factor)
        self.dropout = SharedDropout(dropout, shared_dim=-3)

    def forward(self, z: torch.Tensor, m: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        logits = self.linear_logits(self.norm_z(z)).movedim(-1, -3)          # [*, H, L, L]
        if mask is not None:
            logits = logits + mask_to_bias(mask.amax(dim=-2))[..., None, None, :]
        return apply_maps_to_msa(self, torch.softmax(logits, dim=-1), m, self.no_heads, self.c_hidden)


def apply_maps_to_msa(module: nn.Module, attn: torch.Tensor, m: torch.Tensor, heads: int,
                      c_hidden: int) -> torch.Tensor:
    """Direct attention shared by Pair2MSA and Str2MSA: per-head maps ``attn [*, H, L, L]`` (derived from the
    pair or from distances, not from the MSA) mix the MSA values, then gate, residual and transition.

    ``module`` provides ``norm_m``, ``linear_v``, ``linear_g`` (or None), ``linear_o``, ``dropout`` and
    ``transition``; ``m`` is ``[*, N, L, C_m]``.
    """
    m_n = module.norm_m(m)
    v = module.linear_v(m_n).unflatten(-1, (heads, c_hidden)).transpose(-2, -3)     # [*, N, H, L, c]
    o = torch.einsum("...hij,...nhjc->...nhic", attn, v).transpose(-2, -3).flatten(-2)
    if module.linear_g is not None:
        o = o * torch.sigmoid(module.linear_g(m_n))
    m = m + module.dropout(module.linear_o(o))
    return m + module.transition(m)


def pair_mask_from(seq_mask: torch.Tensor) -> torch.Tensor:
    """``[*, L] -> [*, L, L]`` outer product of the residue mask."""
    return seq_mask[..., :, None] * seq_mask[..., None, :]

