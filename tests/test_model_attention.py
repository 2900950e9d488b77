"""MSA-track attention: generic attention, tied / soft-tied row attention, Performer (FAVOR+), MSA2MSA.

Tiny sizes, CPU, one thread. The scale relations checked here are the ones documented in
``workflow_lib/model/msa.py``: with N identical rows tied logits are sqrt(N) x plain logits, and soft-tied
logits with uniform sequence weights are 1/sqrt(N) x tied logits.
"""

from __future__ import annotations

import math

import pytest
import torch

from workflow_lib.model.msa import MSA2MSA, ColumnAttention, RowAttention, SequenceWeights
from workflow_lib.model.performer import (FastAttention, PerformerAttention, linear_attention,
                                          orthogonal_gaussian_matrix, positive_random_features,
                                          softmax_attention_reference)
from workflow_lib.model.primitives import Attention, SharedDropout, mask_to_bias
from model_testing import randomize_

torch.set_num_threads(1)

C_M, C_Z, HEADS = 16, 8, 2


def _inputs(n=3, l=5, b=2, seed=1, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    m = torch.randn(b, n, l, C_M, generator=gen, dtype=dtype)
    z = torch.randn(b, l, l, C_Z, generator=gen, dtype=dtype)
    return m, z


# --- generic attention --------------------------------------------------------------------------------------


def test_attention_chunked_equals_unchunked_and_masks_keys():
    torch.manual_seed(0)
    att = randomize_(Attention(C_M, C_M, 4, HEADS, gating=True)).double()
    x, _ = _inputs()
    mask = torch.ones(x.shape[:-1], dtype=torch.float64)
    mask[..., -2:] = 0
    bias = mask_to_bias(mask)[..., None, None, :]
    full = att(x, x, [bias])
    assert full.shape == x.shape
    assert torch.allclose(att(x, x, [bias], chunk_size=2), full, atol=1e-12)
    # changing masked keys does not change anything
    x2 = x.clone()
    x2[..., -2:, :] = 100.0
    out2 = att(x2, x2, [bias])
    assert torch.allclose(out2[..., :-2, :], full[..., :-2, :], atol=1e-10)


def test_shared_dropout_shares_mask_along_dim():
    drop = SharedDropout(0.5, shared_dim=-3).train()
    torch.manual_seed(0)
    out = drop(torch.ones(2, 4, 6, 8))
    assert torch.equal(out[:, 0], out[:, 3])
    assert set(out.unique().tolist()) <= {0.0, 2.0}
    assert torch.equal(drop.eval()(torch.ones(3)), torch.ones(3))


# --- row attention modes --------------------------------------------------------------------------------------


def _row(mode: str, pair_bias: bool = True) -> RowAttention:
    torch.manual_seed(0)
    return randomize_(RowAttention(C_M, C_Z, HEADS, mode, row_pair_bias=pair_bias)).double().eval()


@pytest.mark.parametrize("mode", ["plain", "tied", "soft_tied"])
def test_row_attention_shapes_and_chunking(mode):
    row = _row(mode)
    m, z = _inputs()
    out = row(m, z)
    assert out.shape == m.shape and torch.isfinite(out).all()
    assert torch.allclose(row(m, z, chunk_size=2), out, atol=1e-12)


def test_tied_equals_plain_with_identical_rows_up_to_sqrt_n():
    n = 4
    m, z = _inputs(n=1)
    m = m.expand(-1, n, -1, -1).contiguous()
    tied = _row("tied")
    plain = _row("plain")
    plain.load_state_dict(tied.state_dict())
    with torch.no_grad():  # documented scale: tied logits = sqrt(N) x plain logits
        plain.linear_q.weight.mul_(math.sqrt(n))
    assert torch.allclose(tied(m, z), plain(m, z), atol=1e-10)
    # and with a single row the two modes coincide without any rescaling
    plain.load_state_dict(tied.state_dict())
    assert torch.allclose(tied(m[:, :1], z), plain(m[:, :1], z), atol=1e-10)


def test_soft_tied_with_uniform_weights_equals_tied_up_to_sqrt_n():
    n = 3
    m, z = _inputs(n=n)
    soft = _row("soft_tied")
    with torch.no_grad():  # zero SequenceWeights projections -> uniform weights 1/N
        for p in soft.seq_weights.parameters():
            p.zero_()
    weights = soft.seq_weights(soft.norm_m(m))
    assert torch.allclose(weights, torch.full_like(weights, 1.0 / n))
    tied = _row("tied")
    state = {k: v for k, v in soft.state_dict().items() if not k.startswith("seq_weights.")}
    tied.load_state_dict(state)
    with torch.no_grad():  # documented scale: soft-tied(uniform) logits = tied logits / sqrt(N)
        soft.linear_q.weight.mul_(math.sqrt(n))
    assert torch.allclose(soft(m, z), tied(m, z), atol=1e-10)


@pytest.mark.parametrize("mode", ["plain", "tied", "soft_tied"])
def test_row_attention_ignores_padding_rows_and_residues(mode):
    row = _row(mode)
    m, z = _inputs(n=3, l=5)
    mask = torch.ones(m.shape[:-1], dtype=torch.float64)
    ref = row(m, z, mask)
    # append one padding row and one padding residue filled with garbage
    m_pad = torch.cat((m, 50.0 * torch.randn_like(m[:, :1])), dim=1)
    m_pad = torch.cat((m_pad, -30.0 * torch.randn_like(m_pad[:, :, :1])), dim=2)
    z_pad = torch.nn.functional.pad(z, (0, 0, 0, 1, 0, 1), value=7.0)
    mask_pad = torch.nn.functional.pad(mask, (0, 1, 0, 1))
    out = row(m_pad, z_pad, mask_pad)
    assert torch.allclose(out[:, :3, :5], ref, atol=1e-9)


def test_sequence_weights_sum_to_one_and_skip_masked_rows():
    torch.manual_seed(0)
    sw = randomize_(SequenceWeights(C_M, HEADS, 4)).double()
    m, _ = _inputs(n=4)
    mask = torch.ones(m.shape[:-1], dtype=torch.float64)
    mask[:, -1] = 0
    w = sw(m, mask)
    assert w.shape == (*m.shape[:-1], HEADS)
    assert torch.allclose(w.sum(dim=1), torch.ones_like(w[:, 0]))
    assert float(w[:, -1].detach().abs().max()) < 1e-12


# --- Performer ----------------------------------------------------------------------------------------------


def test_orthogonal_features_are_block_orthogonal_and_redrawable():
    gen = torch.Generator().manual_seed(0)
    w = orthogonal_gaussian_matrix(40, 16, generator=gen, dtype=torch.float64)
    assert w.shape == (40, 16)
    gram = w[:16] @ w[:16].T
    assert torch.allclose(gram - torch.diag(torch.diagonal(gram)), torch.zeros(16, 16, dtype=torch.float64),
                          atol=1e-10)
    kernel = FastAttention(16)
    assert kernel.nb_features == math.ceil(16 * math.log(16))
    before = kernel.projection.clone()
    kernel.redraw_features(torch.Generator().manual_seed(5))
    assert kernel.projection.shape == before.shape and not torch.equal(kernel.projection, before)


def _performer_error(r: int, q, k, v, ref, draws: int = 8) -> float:
    errs = []
    for seed in range(draws):
        proj = orthogonal_gaussian_matrix(r, q.shape[-1], generator=torch.Generator().manual_seed(100 + seed),
                                          dtype=torch.float64)
        out = linear_attention(positive_random_features(q, proj, is_query=True),
                               positive_random_features(k, proj, is_query=False), v)
        errs.append(float((out - ref).abs().mean()))
    return sum(errs) / len(errs)


def test_performer_approximates_softmax_attention_and_improves_with_r():
    d, n = 16, 64
    gen = torch.Generator().manual_seed(0)
    q = 0.3 * torch.randn(8, n, d, generator=gen, dtype=torch.float64)
    k = 0.3 * torch.randn(8, n, d, generator=gen, dtype=torch.float64)
    v = torch.randn(8, n, d, generator=gen, dtype=torch.float64)
    ref = softmax_attention_reference(q, k, v)
    r_default = math.ceil(d * math.log(d))  # 45
    errors = {r: _performer_error(r, q, k, v, ref) for r in (16, r_default, 4 * r_default, 16 * r_default)}
    # measured (mean |error|, outputs have mean |value| 0.108): 0.0168, 0.0106, 0.0052, 0.0026
    assert errors[16] > errors[r_default] > errors[4 * r_default] > errors[16 * r_default]
    assert errors[r_default] < 0.015
    assert errors[16 * r_default] < 0.004


def test_positive_features_estimate_softmax_kernel_without_bias():
    d = 16
    gen = torch.Generator().manual_seed(0)
    q = 0.5 * torch.randn(1, d, generator=gen, dtype=torch.float64)
    k = 0.5 * torch.randn(1, d, generator=gen, dtype=torch.float64)
    true = math.exp(float(q @ k.T) / math.sqrt(d))
    estimates = []
    for seed in range(400):
        proj = orthogonal_gaussian_matrix(64, d, generator=torch.Generator().manual_seed(seed),
                                          dtype=torch.float64)
        x, y = q * d ** -0.25, k * d ** -0.25
        fq = torch.exp(x @ proj.T - 0.5 * (x * x).sum()) / 8.0
        fk = torch.exp(y @ proj.T - 0.5 * (y * y).sum()) / 8.0
        estimates.append(float(fq @ fk.T))
    mean = sum(estimates) / len(estimates)
    std = (sum((e - mean) ** 2 for e in estimates) / len(estimates)) ** 0.5
    assert abs(mean - true) < 4 * std / math.sqrt(len(estimates))


def test_performer_masks_keys():
    torch.manual_seed(0)
    att = randomize_(PerformerAttention(C_M, 8, HEADS)).double()
    x, _ = _inputs(n=6)
    mask = torch.ones(x.shape[:-1], dtype=torch.float64)
    mask[..., -2:] = 0
    ref = att(x, mask)
    x2 = x.clone()
    x2[..., -2:, :] = 3.0
    assert torch.allclose(att(x2, mask)[..., :-2, :], ref[..., :-2, :], atol=1e-10)


def test_performer_fully_masked_column_is_finite():
    kernel = FastAttention(8)
    q, k, v = (torch.randn(2, 2, 5, 8) for _ in range(3))
    mask = torch.zeros(2, 1, 5)
    mask[0] = 1.0
    out = kernel(q, k, v, mask)
    assert torch.isfinite(out).all()
    assert torch.equal(out[1], torch.zeros_like(out[1]))


# --- column attention and the full MSA2MSA layer -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["plain", "performer"])
def test_column_attention_shapes_and_padding(mode):
    torch.manual_seed(0)
    col = randomize_(ColumnAttention(C_M, HEADS, mode)).double()
    m, _ = _inputs(n=4)
    mask = torch.ones(m.shape[:-1], dtype=torch.float64)
    ref = col(m, mask)
    assert ref.shape == m.shape
    m_pad = torch.cat((m, 9.0 * torch.randn_like(m[:, :2])), dim=1)
    mask_pad = torch.nn.functional.pad(mask, (0, 0, 0, 2))
    assert torch.allclose(col(m_pad, mask_pad)[:, :4], ref, atol=1e-9)


@pytest.mark.parametrize("row_mode,col_mode", [("plain", "plain"), ("tied", "performer"),
                                               ("soft_tied", "performer")])
def test_msa2msa_layer(row_mode, col_mode):
    torch.manual_seed(0)
    layer = MSA2MSA(C_M, C_Z, HEADS, row_mode, col_mode, dropout=0.1).eval()
    m, z = (t.float() for t in _inputs())
    out = layer(m, z)
    assert out.shape == m.shape and torch.isfinite(out).all()
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters() if p.grad is not None)
