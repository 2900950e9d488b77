"""MSA track: axial attention over the MSA (MSA2MSA).

Axial attention (Ho et al. 2019, arXiv:1912.12180), tied row attention (MSA Transformer, Rao et al. 2021, ICML),
RoseTTAFold's soft-tied row attention (SequenceWeights) and axial encoder (Baek et al. 2021, Science 373:871) and
Performer column attention (Choromanski et al. 2021, ICLR); the optional pair bias and gating of the row attention
follow Algorithm 7 of the AlphaFold 2 supplement (Jumper et al. 2021, Nature 596:583). Shapes: MSA ``m [*, N_seq, N_res,
C_m]``, pair ``z [*, N_res, N_res, C_z]``, MSA mask ``[*, N_seq, N_res]`` (1 = real residue of a real row).

Row-attention logits per head ``h`` for residue ``i`` attending to ``j``:

* ``plain``:     ``q_ni . k_nj / sqrt(d_h)`` -- one map per row ``n``.
* ``tied``:      ``sum_n q_ni . k_nj / sqrt(N d_h)`` -- one map shared by all rows (MSA Transformer). With all
  ``N`` rows identical this is ``sqrt(N)`` times the plain logits.
* ``soft_tied``: ``sum_n w_nih q_ni . k_nj / sqrt(d_h)`` with ``sum_n w_nih = 1`` from :class:`SequenceWeights`.
  With uniform weights ``w = 1/N`` this is ``1/sqrt(N)`` times the tied logits.

``N`` counts real rows only (rows whose mask is all zero do not contribute).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from workflow_lib.model.performer import PerformerAttention
from workflow_lib.model.primitives import (Attention, FeedForward, LayerNorm, Linear, SharedDropout,
                                           mask_to_bias)


class SequenceWeights(nn.Module):
    """Per-residue, per-head weights of the MSA rows (RoseTTAFold's soft-tied attention, Baek et al. 2021).

    The query row (row 0) asks every row ``n`` at residue ``i``: ``w_nih = softmax_n(q_0ih . k_nih / sqrt(d))``.
    Input ``m [*, N_seq, N_res, C_m]`` (already normalised), ``mask [*, N_seq, N_res]``; output
    ``[*, N_seq, N_res, H]`` summing to 1 over ``N_seq``.
    """

    def __init__(self, c_m: int, no_heads: int, c_hidden: int) -> None:
        super().__init__()
        self.no_heads = no_heads
        self.c_hidden = c_hidden
        self.linear_q = Linear(c_m, no_heads * c_hidden, init="glorot")
        self.linear_k = Linear(c_m, no_heads * c_hidden, init="glorot")

    def forward(self, m: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        q = self.linear_q(m[..., :1, :, :]).unflatten(-1, (self.no_heads, self.c_hidden))   # [*, 1, L, H, c]
        k = self.linear_k(m).unflatten(-1, (self.no_heads, self.c_hidden))                  # [*, N, L, H, c]
        logits = (q * k).sum(dim=-1) / math.sqrt(self.c_hidden)                             # [*, N, L, H]
        if mask is not None:
            logits = logits + mask_to_bias(mask)[..., None]
        return torch.softmax(logits, dim=-3)


class RowAttention(nn.Module):
    """Residue-wise (row) attention over the MSA in ``plain``, ``tied`` or ``soft_tied`` mode (module doc).

    ``forward(m, z, mask)``: ``m [*, N_seq, N_res, C_m]`` -> update ``[*, N_seq, N_res, C_m]``. With
    ``row_pair_bias`` a per-head bias ``LinearNoBias(LayerNorm(z))`` is added to the logits and with
    ``gating`` the output is gated (AF2 Algorithm 7). ``chunk_size`` processes query residues in blocks.
    """

    def __init__(self, c_m: int, c_z: int, no_heads_msa: int, row_attention: str = "soft_tied",
                 row_pair_bias: bool = True, gating: bool = True) -> None:
        super().__init__()
        if row_attention not in ("plain", "tied", "soft_tied"):
            raise ValueError(f"unknown row attention mode {row_attention!r}")
        self.mode = row_attention
        self.no_heads = no_heads_msa
        self.c_hidden = c_m // no_heads_msa
        self.norm_m = LayerNorm(c_m)
        hidden = self.no_heads * self.c_hidden
        self.linear_q = Linear(c_m, hidden, bias=False, init="glorot")
        self.linear_k = Linear(c_m, hidden, bias=False, init="glorot")
        self.linear_v = Linear(c_m, hidden, bias=False, init="glorot")
        self.linear_g = Linear(c_m, hidden, init="gating") if gating else None
        self.linear_o = Linear(hidden, c_m, init="final")
        if row_pair_bias:
            self.norm_z = LayerNorm(c_z)
            self.linear_b = Linear(c_z, no_heads_msa, bias=False, init="default")
        else:
            self.norm_z = self.linear_b = None
        self.seq_weights = (SequenceWeights(c_m, no_heads_msa, self.c_hidden)
                            if row_attention == "soft_tied" else None)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[*, N, L, H*c] -> [*, N, H, L, c]``."""
        return x.unflatten(-1, (self.no_heads, self.c_hidden)).transpose(-2, -3)

    def forward(self, m: torch.Tensor, z: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                chunk_size: int | None = None, return_maps: bool = False
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """The update; with ``return_maps`` (tied and soft-tied modes) also the attention maps ``[*, H, L, L]``
        symmetrised, ``(A + A^T) / 2``, which MSA2Pair can read as pair features (as RoseTTAFold
        passes its symmetrised soft-tied attention maps to the pair track; Baek et al. 2021)."""
        if return_maps and self.mode == "plain":
            raise ValueError("attention maps for the pair track need tied or soft-tied row attention")
        if mask is None:
            mask = m.new_ones(m.shape[:-1])
        mask = mask.to(m.dtype)
        m = self.norm_m(m)
        q = self._heads(self.linear_q(m)) / math.sqrt(self.c_hidden)
        k = self._heads(self.linear_k(m))
        v = self._heads(self.linear_v(m))
        row_mask = mask[..., None, :, None]                                   # [*, N, 1, L, 1]
        if self.mode == "tied":
            n_rows = (mask.amax(dim=-1) > 0).to(m.dtype).sum(dim=-1).clamp_min(1.0)   # [*]
            q = q * row_mask / n_rows.sqrt()[..., None, None, None, None]
            k = k * row_mask
        elif self.mode == "soft_tied":
            weights = self.seq_weights(m, mask)                              # [*, N, L, H]
            q = q * row_mask * weights.transpose(-1, -2)[..., None]          # [*, N, H, L, c]
            k = k * row_mask
        if self.mode == "plain":
            key_bias = mask_to_bias(mask)[..., None, None, :]                 # [*, N, 1, 1, L]
        else:
            key_bias = mask_to_bias(mask.amax(dim=-2))[..., None, None, :]    # [*, 1, 1, L]
        pair_bias = None
        if self.linear_b is not None and z is not None:
            pair_bias = self.linear_b(self.norm_z(z)).movedim(-1, -3)         # [*, H, L, L]
            if self.mode == "plain":
                pair_bias = pair_bias.unsqueeze(-4)

        n_res = q.shape[-2]
        step = chunk_size or n_res
        outs, maps = [], []
        for start in range(0, n_res, step):
            stop = min(n_res, start + step)
            q_c = q[..., start:stop, :]
            if self.mode == "plain":
                logits = torch.einsum("...nhic,...nhjc->...nhij", q_c, k)
            else:
                logits = torch.einsum("...nhic,...nhjc->...hij", q_c, k)
            logits = logits + key_bias
            if pair_bias is not None:
                logits = logits + pair_bias[..., start:stop, :]
            attn = torch.softmax(logits, dim=-1)
            if return_maps:
                maps.append(attn)
            if self.mode == "plain":
                outs.append(torch.einsum("...nhij,...nhjc->...nhic", attn, v))
            else:
                outs.append(torch.einsum("...hij,...nhjc->...nhic", attn, v))
        o = torch.cat(outs, dim=-2) if len(outs) > 1 else outs[0]
        o = o.transpose(-2, -3).flatten(-2)                                  # [*, N, L, H*c]
        if self.linear_g is not None:
            o = o * torch.sigmoid(self.linear_g(m))
        if not return_maps:
            return self.linear_o(o)
        attn = torch.cat(maps, dim=-2) if len(maps) > 1 else maps[0]
        return self.linear_o(o), 0.5 * (attn + attn.transpose(-1, -2))


class ColumnAttention(nn.Module):
    """Sequence-wise (column) attention: each residue column attends over the ``N_seq`` rows.

    ``column_attention='plain'`` is exact softmax attention (AF2 Algorithm 8); ``'performer'`` uses
    FAVOR+ (:mod:`~workflow_lib.model.performer`) with ``performer_features`` random features per head
    (``None``: ``ceil(d_h ln d_h)``), linear in ``N_seq``. Input/output ``[*, N_seq, N_res, C_m]``.
    """

    def __init__(self, c_m: int, no_heads_msa: int, column_attention: str = "performer",
                 performer_features: int | None = None, gating: bool = True) -> None:
        super().__init__()
        if column_attention not in ("plain", "performer"):
            raise ValueError(f"unknown column attention mode {column_attention!r}")
        self.mode = column_attention
        self.norm = LayerNorm(c_m)
        c_hidden = c_m // no_heads_msa
        if column_attention == "plain":
            self.attention = Attention(c_m, c_m, c_hidden, no_heads_msa, gating=gating)
        else:
            self.attention = PerformerAttention(c_m, c_hidden, no_heads_msa, performer_features, gating=gating)

    def forward(self, m: torch.Tensor, mask: torch.Tensor | None = None,
                chunk_size: int | None = None) -> torch.Tensor:
        m_t = self.norm(m).transpose(-2, -3)                                  # [*, L, N, C]
        mask_t = None if mask is None else mask.transpose(-1, -2)             # [*, L, N]
        if self.mode == "plain":
            bias = None if mask_t is None else mask_to_bias(mask_t)[..., None, None, :]
            out = self.attention(m_t, m_t, [bias], chunk_size=chunk_size)
        else:
            out = self.attention(m_t, mask_t)
        return out.transpose(-2, -3)


class MSA2MSA(nn.Module):
    """One axial encoder layer (RoseTTAFold's, Baek et al. 2021): row attention, column attention, feed-forward.

    Pre-norm residual updates ``m += Dropout(RowAttention(m, z))``, ``m += Dropout(ColumnAttention(m))``,
    ``m += FeedForward(m)``; row dropout shares its mask across rows, column dropout across columns.
    ``[*, N_seq, N_res, C_m] -> [*, N_seq, N_res, C_m]``.
    """

    def __init__(self, c_m: int, c_z: int, no_heads_msa: int, row_attention: str = "soft_tied",
                 column_attention: str = "performer", performer_features: int | None = None,
                 row_pair_bias: bool = True, gating: bool = True, transition_factor: int = 2,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.row = RowAttention(c_m, c_z, no_heads_msa, row_attention, row_pair_bias, gating)
        self.column = ColumnAttention(c_m, no_heads_msa, column_attention, performer_features, gating)
        self.transition = FeedForward(c_m, transition_factor)
        self.row_dropout = SharedDropout(dropout, shared_dim=-3)
        self.column_dropout = SharedDropout(dropout, shared_dim=-2)

    def forward(self, m: torch.Tensor, z: torch.Tensor | None, mask: torch.Tensor | None = None,
                chunk_size: int | None = None, return_maps: bool = False
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """The updated MSA; with ``return_maps`` also the row attention's symmetrised maps ``[*, H, L, L]``."""
        maps = None
        if return_maps:
            update, maps = self.row(m, z, mask, chunk_size=chunk_size, return_maps=True)
        else:
            update = self.row(m, z, mask, chunk_size=chunk_size)
        m = m + self.row_dropout(update)
        m = m + self.column_dropout(self.column(m, mask, chunk_size=chunk_size))
        m = m + self.transition(m)
        return (m, maps) if return_maps else m
