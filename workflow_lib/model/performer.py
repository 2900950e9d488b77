"""FAVOR+ linear attention (Performer) for MSA column attention.

Choromanski et al. 2021, "Rethinking Attention with Performers" (ICLR): positive random features, orthogonal
random features and FAVOR+ attention. The softmax kernel
``exp(q.k / sqrt(d))`` is estimated by ``phi(q).phi(k)`` with the positive random feature map

    phi(x) = exp(W x' - |x'|^2 / 2) / sqrt(r),   x' = x / d^(1/4),   W: r x d,

whose rows are Gaussian vectors orthogonalised in blocks of ``d`` (QR of a Gaussian matrix) and rescaled to
chi-distributed norms, so each row is still marginally N(0, I) but rows in a block are exactly orthogonal.
Attention is then ``D^-1 phi(Q) (phi(K)^T V)`` with ``D = diag(phi(Q) phi(K)^T 1)``: O(N r d) time and
O(r d) extra memory per head instead of O(N^2).

Numerical stabilisers (a per-query maximum and one maximum over all keys of an attention instance) are
subtracted inside the exponentials; both cancel between numerator and denominator.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from workflow_lib.model.config import default_nb_features
from workflow_lib.model.primitives import Linear


def orthogonal_gaussian_matrix(nb_rows: int, nb_columns: int, *, generator: torch.Generator | None = None,
                               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[nb_rows, nb_columns]`` block-orthogonal random projection (Choromanski et al. 2021).

    Blocks of ``nb_columns`` rows are orthonormal (from ``torch.linalg.qr`` of a Gaussian matrix, signs fixed by
    ``diag(R)`` so the block is Haar-distributed); every row is
    then scaled by the norm of an independent Gaussian vector so rows keep the N(0, I) norm distribution.
    Drawn on the CPU in float64 so a given generator seed gives the same matrix on every device.
    """
    blocks = []
    for _ in range(math.ceil(nb_rows / nb_columns)):
        gaussian = torch.randn(nb_columns, nb_columns, generator=generator, dtype=torch.float64)
        q, r = torch.linalg.qr(gaussian)
        # Sign-fix so that Q is Haar-distributed; without it rows are not marginally N(0, I) in direction
        # and the kernel estimate of exp(q.k/sqrt(d)) is biased.
        q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
        blocks.append(q.T)
    matrix = torch.cat(blocks, dim=0)[:nb_rows]
    norms = torch.randn(nb_rows, nb_columns, generator=generator, dtype=torch.float64).norm(dim=1)
    return (norms[:, None] * matrix).to(dtype)


def gaussian_matrix(nb_rows: int, nb_columns: int, *, generator: torch.Generator | None = None,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[nb_rows, nb_columns]`` i.i.d. N(0, 1) projection (the non-orthogonal baseline)."""
    return torch.randn(nb_rows, nb_columns, generator=generator, dtype=torch.float64).to(dtype)


def positive_random_features(x: torch.Tensor, projection: torch.Tensor, *, is_query: bool,
                             mask: torch.Tensor | None = None) -> torch.Tensor:
    """FAVOR+ feature map ``[*, N, d] -> [*, N, r]`` for the kernel ``exp(q.k / sqrt(d))``.

    ``projection`` is ``[r, d]``. ``mask`` ``[*, N]`` (keys only) zeroes padded keys and keeps them out of the
    stabiliser. Queries use a per-row stabiliser, keys one stabiliser over all ``N`` keys and ``r`` features.
    """
    d = x.shape[-1]
    r = projection.shape[0]
    x = x * d ** -0.25
    wx = torch.einsum("...nd,rd->...nr", x, projection.to(x.dtype))
    half_sq_norm = 0.5 * (x * x).sum(dim=-1, keepdim=True)
    if is_query:
        stab = wx.amax(dim=-1, keepdim=True)
    else:
        masked = wx if mask is None else wx.masked_fill(~mask.bool()[..., None], float("-inf"))
        stab = masked.amax(dim=(-1, -2), keepdim=True)
        stab = torch.where(torch.isfinite(stab), stab, torch.zeros_like(stab))  # all keys masked
    # No additive epsilon: with r ~ 2000 features it biased the estimate measurably; the normaliser is clamped
    # in linear_attention instead.
    features = torch.exp(wx - half_sq_norm - stab.detach()) / math.sqrt(r)
    if mask is not None and not is_query:
        features = features * mask[..., None].to(features.dtype)
    return features


def linear_attention(q_features: torch.Tensor, k_features: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``D^-1 phi(Q) (phi(K)^T V)``: ``[*, N, r], [*, M, r], [*, M, d] -> [*, N, d]`` (FAVOR+)."""
    k_sum = k_features.sum(dim=-2)                                          # [*, r]
    normaliser = torch.einsum("...nr,...r->...n", q_features, k_sum)         # [*, N]
    context = torch.einsum("...mr,...md->...rd", k_features, v)              # [*, r, d]
    out = torch.einsum("...nr,...rd->...nd", q_features, context)
    return out / normaliser[..., None].clamp_min(torch.finfo(out.dtype).tiny)


def softmax_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                mask: torch.Tensor | None = None) -> torch.Tensor:
    """Exact ``softmax(q k^T / sqrt(d)) v`` -- the quantity FAVOR+ estimates (used in tests)."""
    logits = torch.einsum("...nd,...md->...nm", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        logits = logits.masked_fill(~mask.bool()[..., None, :], float("-inf"))
    return torch.einsum("...nm,...md->...nd", torch.softmax(logits, dim=-1), v)


class FastAttention(nn.Module):
    """FAVOR+ attention kernel on already projected heads (Choromanski et al. 2021).

    ``forward(q, k, v, mask)`` with ``q, k, v [*, H, N, d]`` and key ``mask [*, H or 1, N]`` returns
    ``[*, H, N, d]``. The projection ``[r, d]`` is a persistent buffer (saved with the weights, so a reloaded
    model reproduces its outputs); :meth:`redraw_features` re-samples it, e.g. every few hundred training
    steps as the Performer paper recommends.
    """

    def __init__(self, dim_head: int, nb_features: int | None = None, orthogonal: bool = True) -> None:
        super().__init__()
        self.dim_head = dim_head
        self.nb_features = nb_features if nb_features is not None else default_nb_features(dim_head)
        self.orthogonal = orthogonal
        self.register_buffer("projection", self._draw(None), persistent=True)

    def _draw(self, generator: torch.Generator | None) -> torch.Tensor:
        draw = orthogonal_gaussian_matrix if self.orthogonal else gaussian_matrix
        return draw(self.nb_features, self.dim_head, generator=generator)

    @torch.no_grad()
    def redraw_features(self, generator: torch.Generator | None = None) -> None:
        """Re-sample the random projection in place (same device and dtype)."""
        self.projection.copy_(self._draw(generator).to(self.projection))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        q_features = positive_random_features(q, self.projection, is_query=True)
        k_features = positive_random_features(k, self.projection, is_query=False, mask=mask)
        return linear_attention(q_features, k_features, v)


class PerformerAttention(nn.Module):
    """Multi-head self-attention with the FAVOR+ kernel: ``[*, N, C] -> [*, N, C]``.

    Projections as in :class:`~workflow_lib.model.primitives.Attention` (q/k/v without bias, optional sigmoid
    gating, zero-initialised output); ``mask [*, N]`` marks real tokens.
    """

    def __init__(self, c_in: int, c_hidden: int, no_heads: int, nb_features: int | None = None,
                 gating: bool = True) -> None:
        super().__init__()
        self.no_heads = no_heads
        self.c_hidden = c_hidden
        self.linear_q = Linear(c_in, c_hidden * no_heads, bias=False, init="glorot")
        self.linear_k = Linear(c_in, c_hidden * no_heads, bias=False, init="glorot")
        self.linear_v = Linear(c_in, c_hidden * no_heads, bias=False, init="glorot")
        self.linear_g = Linear(c_in, c_hidden * no_heads, init="gating") if gating else None
        self.linear_o = Linear(c_hidden * no_heads, c_in, init="final")
        self.kernel = FastAttention(c_hidden, nb_features)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (self.no_heads, self.c_hidden)).transpose(-2, -3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = (self._heads(lin(x)) for lin in (self.linear_q, self.linear_k, self.linear_v))
        head_mask = None if mask is None else mask.unsqueeze(-2)  # [*, 1, N]
        o = self.kernel(q, k, v, head_mask).transpose(-2, -3).flatten(-2)
        if self.linear_g is not None:
            o = o * torch.sigmoid(self.linear_g(x))
        return self.linear_o(o)
