"""Shared building blocks of the three-track network: initialised Linear layers, dropout, attention, masks.

Everything here is shape-generic: leading dimensions are written ``*`` and broadcast. Masks are float or bool
tensors with 1 = real, 0 = padding; they become additive biases of ``-MASK_VALUE`` so that a row whose keys are
all masked gives a uniform (finite) softmax instead of NaN.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import torch
from torch import nn

MASK_VALUE = 1e9
"""Magnitude of the additive bias that removes masked keys from a softmax (finite on purpose, see module doc)."""

INITS = ("default", "relu", "glorot", "gating", "zeros", "final")


def _trunc_normal_(weight: torch.Tensor, scale: float) -> None:
    """He/LeCun-style truncated normal (truncated at 2 std, std corrected for the truncation)."""
    fan_in = weight.shape[1]
    std = math.sqrt(scale / max(1, fan_in)) / 0.87962566103423978
    with torch.no_grad():
        nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-2.0 * std, b=2.0 * std)


class Linear(nn.Linear):
    """``nn.Linear`` with the named initialisations of the AlphaFold2 supplement (section 1.11.4).

    ``init`` is one of ``default`` (LeCun truncated normal), ``relu`` (He, before a ReLU), ``glorot``
    (Xavier uniform, e.g. for attention q/k/v), ``gating`` (zero weights, bias 1: a sigmoid gate starts open),
    ``zeros`` and ``final`` (zero weights and bias: a residual branch starts as the identity).
    """

    def __init__(self, in_dim: int, out_dim: int, bias: bool = True, init: str = "default") -> None:
        super().__init__(in_dim, out_dim, bias=bias)
        if init not in INITS:
            raise ValueError(f"unknown Linear init {init!r}; expected one of {INITS}")
        if bias:
            with torch.no_grad():
                self.bias.fill_(1.0 if init == "gating" else 0.0)
        if init == "default":
            _trunc_normal_(self.weight, 1.0)
        elif init == "relu":
            _trunc_normal_(self.weight, 2.0)
        elif init == "glorot":
            nn.init.xavier_uniform_(self.weight, gain=1.0)
        else:  # gating, zeros, final
            with torch.no_grad():
                self.weight.fill_(0.0)


LayerNorm = nn.LayerNorm
"""Plain ``nn.LayerNorm``; under autocast PyTorch already computes it in float32."""


class SharedDropout(nn.Module):
    """Dropout whose mask is shared along one dimension (AF2 ``DropoutRowwise``/``DropoutColumnwise``).

    ``shared_dim`` counts from the end, e.g. ``-3`` for the sequence dimension of ``[*, N_seq, N_res, C]``: the
    same residues/channels are dropped in every MSA row, which keeps row-wise updates consistent.
    """

    def __init__(self, p: float, shared_dim: int) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p
        self.shared_dim = shared_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        shape = list(x.shape)
        shape[self.shared_dim] = 1
        keep = torch.bernoulli(x.new_full(shape, 1.0 - self.p))
        return x * keep / (1.0 - self.p)


class FeedForward(nn.Module):
    """Pre-norm two-layer transition ``Linear(ReLU(Linear(LayerNorm(x))))`` (AF2 Algorithm 9/15).

    Shapes: ``[*, C] -> [*, C]``; the hidden width is ``factor * C``. The output layer is zero-initialised.
    """

    def __init__(self, c: int, factor: int = 4) -> None:
        super().__init__()
        self.norm = LayerNorm(c)
        self.linear_1 = Linear(c, factor * c, init="relu")
        self.linear_2 = Linear(factor * c, c, init="final")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(torch.relu(self.linear_1(self.norm(x))))


def mask_to_bias(mask: torch.Tensor) -> torch.Tensor:
    """``[*, K]`` mask (1 = keep) -> additive bias ``[*, K]`` with 0 or ``-MASK_VALUE``."""
    return (mask.to(torch.float32) - 1.0) * MASK_VALUE


def masked_softmax_logits(logits: torch.Tensor, biases: Sequence[torch.Tensor | None]) -> torch.Tensor:
    """Add every bias (broadcasting) to ``logits`` and take the softmax over the last dimension."""
    for bias in biases:
        if bias is not None:
            logits = logits + bias
    return torch.softmax(logits, dim=-1)


def _slice_dim(x: torch.Tensor, dim: int, start: int, stop: int) -> torch.Tensor:
    """Slice ``x`` along ``dim`` unless that dimension is broadcast (size 1)."""
    if x.shape[dim] == 1:
        return x
    return x.narrow(dim, start, stop - start)


_FUSED_ATTENTION = [True]


@contextlib.contextmanager
def explicit_attention() -> Iterator[None]:
    """Within this block :class:`Attention` computes its logits and softmax explicitly at inference too (the
    reference for :func:`fused_attention`, used by tests and ``benchmarks/predict_speed.py``)."""
    _FUSED_ATTENTION.append(False)
    try:
        yield
    finally:
        _FUSED_ATTENTION.pop()


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    biases: Sequence[torch.Tensor | None] = ()) -> torch.Tensor:
    """``softmax(q k^T + sum(biases)) v`` for already scaled ``q [*, H, Q, c]``, ``k``, ``v [*, H, K, c]`` (same
    leading dimensions) through ``torch.nn.functional.scaled_dot_product_attention``.

    The leading dimensions are flattened to one batch dimension so that PyTorch's fused kernels apply (with more
    than four dimensions it falls back to the unfused computation); the logits are never materialised. A single
    bias is broadcast without a copy where its strides allow; several are summed first. Same result as
    :func:`masked_softmax_logits` followed by the product with ``v``, to float rounding.
    """
    active = [b for b in biases if b is not None]
    mask = None
    if active:
        mask = active[0]
        for bias in active[1:]:
            mask = mask + bias
    lead = q.shape[:-2]
    n_q, n_k = q.shape[-2], k.shape[-2]
    q4, k4, v4 = (x.reshape((-1,) + x.shape[-3:]) for x in (q, k, v))
    if mask is not None:
        mask = mask.to(q.dtype).expand(lead + (n_q, n_k)).reshape((-1,) + q4.shape[1:3] + (n_k,))
    out = torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask, scale=1.0)
    return out.reshape(lead + (n_q, v.shape[-1]))


class Attention(nn.Module):
    """Multi-head scaled dot-product attention with optional biases and gating (AF2 supplement 1.11.8).

    ``q_x [*, Q, C_q]`` attends to ``kv_x [*, K, C_kv]``; every bias must broadcast to ``[*, H, Q, K]``.
    Output ``[*, Q, C_q]``. With ``gating``, ``o = sigmoid(Linear(q_x)) * o`` per head channel (AF2
    Algorithm 7 line 4). ``chunk_size`` bounds memory by processing queries in blocks (logits are
    ``[*, H, chunk, K]`` instead of ``[*, H, Q, K]``); the result is identical. Without autograd (inference)
    the product runs through :func:`fused_attention`, and biases that are all zero (the key mask of an unpadded
    input) are skipped: the same output to float rounding, in less time (benchmarks/RESULTS.md, "Three-track
    inference on real proteins (CPU)").
    """

    def __init__(self, c_q: int, c_kv: int, c_hidden: int, no_heads: int, gating: bool = True,
                 scale: float | None = None) -> None:
        super().__init__()
        self.c_hidden = c_hidden
        self.no_heads = no_heads
        self.scale = scale if scale is not None else 1.0 / math.sqrt(c_hidden)
        self.linear_q = Linear(c_q, c_hidden * no_heads, bias=False, init="glorot")
        self.linear_k = Linear(c_kv, c_hidden * no_heads, bias=False, init="glorot")
        self.linear_v = Linear(c_kv, c_hidden * no_heads, bias=False, init="glorot")
        self.linear_g = Linear(c_q, c_hidden * no_heads, init="gating") if gating else None
        self.linear_o = Linear(c_hidden * no_heads, c_q, init="final")

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[*, S, H*c] -> [*, H, S, c]``."""
        return x.unflatten(-1, (self.no_heads, self.c_hidden)).transpose(-2, -3)

    def forward(self, q_x: torch.Tensor, kv_x: torch.Tensor, biases: Sequence[torch.Tensor | None] = (),
                chunk_size: int | None = None) -> torch.Tensor:
        q = self._heads(self.linear_q(q_x)) * self.scale
        k = self._heads(self.linear_k(kv_x))
        v = self._heads(self.linear_v(kv_x))
        n_q = q.shape[-2]
        step = n_q if not chunk_size else chunk_size
        fused = (_FUSED_ATTENTION[-1] and not torch.is_grad_enabled()
                 and q.shape[:-2] == k.shape[:-2] == v.shape[:-2])
        if fused:  # inference: skip biases that add nothing (the key mask of an unpadded input)
            biases = [b for b in biases if b is not None and bool(b.any())]
        outs = []
        for start in range(0, n_q, step):
            stop = min(n_q, start + step)
            q_c = q[..., start:stop, :]
            chunk_biases = [None if b is None else _slice_dim(b, -2, start, stop) for b in biases]
            if fused:
                outs.append(fused_attention(q_c, k, v, chunk_biases))
                continue
            logits = torch.einsum("...hqc,...hkc->...hqk", q_c, k)
            weights = masked_softmax_logits(logits, chunk_biases)
            outs.append(torch.einsum("...hqk,...hkc->...hqc", weights, v))
        o = torch.cat(outs, dim=-2) if len(outs) > 1 else outs[0]
        o = o.transpose(-2, -3).flatten(-2)  # [*, Q, H*c]
        if self.linear_g is not None:
            o = o * torch.sigmoid(self.linear_g(q_x))
        return self.linear_o(o)


@contextlib.contextmanager
def float32_island(*tensors: torch.Tensor) -> Iterator[list[torch.Tensor]]:
    """Disable autocast and yield the tensors upcast to at least float32 (float64 stays float64).

    Geometry (rotations, distances, Gram-Schmidt) loses too much in bfloat16/float16, so it always runs here.
    """
    device_type = tensors[0].device.type if tensors else "cpu"
    with torch.autocast(device_type=device_type, enabled=False):
        yield [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in tensors]


def permute_final_dims(x: torch.Tensor, order: Sequence[int]) -> torch.Tensor:
    """Permute the last ``len(order)`` dimensions of ``x`` (``order`` indexes those dimensions from 0)."""
    lead = list(range(x.dim() - len(order)))
    return x.permute(lead + [len(lead) + i for i in order])
