"""Embeddings and pair-track modules: positional encodings, PairEmbedding (templates, co-evolution),
outer product mean, triangle updates, Pair2Pair and Pair2MSA. Tiny sizes, CPU, one thread."""

from __future__ import annotations

import math

import pytest
import torch

from workflow_lib.model.embeddings import (MSAEmbedding, PairEmbedding, relative_position_one_hot,
                                           sinusoidal_encoding)
from workflow_lib.model.pair import (MSA2Pair, OuterProductMean, Pair2MSA, Pair2Pair, TriangleMultiplication,
                                     pair_mask_from)
from model_testing import randomize_

torch.set_num_threads(1)

C_M, C_Z, HEADS = 16, 8, 2


def _msa(b=2, n=3, l=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 22, (b, n, l), generator=gen)


# --- embeddings ---------------------------------------------------------------------------------------------


def test_sinusoidal_encoding_matches_formula():
    idx = torch.tensor([[0, 1, 5, 200]])
    pe = sinusoidal_encoding(idx, 8)
    assert pe.shape == (1, 4, 8)
    for pos_i, pos in enumerate(idx[0].tolist()):
        for k in range(4):
            omega = math.exp(-2 * k * math.log(10000.0) / 8)
            assert pe[0, pos_i, 2 * k].item() == pytest.approx(math.sin(pos * omega), abs=1e-5)
            assert pe[0, pos_i, 2 * k + 1].item() == pytest.approx(math.cos(pos * omega), abs=1e-5)
    with pytest.raises(ValueError):
        sinusoidal_encoding(idx, 7)


def test_msa_embedding_query_row_and_position():
    torch.manual_seed(0)
    emb = MSAEmbedding(C_M)
    msa = torch.full((1, 3, 4), 5)
    idx = torch.arange(4)[None]
    m = emb(msa, idx)
    assert m.shape == (1, 3, 4, C_M)
    assert torch.allclose(m[0, 1], m[0, 2])          # non-query rows with equal tokens are equal
    assert not torch.allclose(m[0, 0], m[0, 1])      # the query row is marked
    shifted = emb(msa, idx + 10)
    assert not torch.allclose(shifted, m)            # the encoding follows the residue index


def test_relative_position_is_clipped_one_hot():
    idx = torch.tensor([[0, 1, 2, 50]])
    rel = relative_position_one_hot(idx, 3)
    assert rel.shape == (1, 4, 4, 7)
    assert torch.equal(rel.sum(-1), torch.ones(1, 4, 4, dtype=rel.dtype))
    assert rel[0, 0, 1].argmax() == 4 and rel[0, 1, 0].argmax() == 2  # +1 and -1
    assert rel[0, 0, 3].argmax() == 6 and rel[0, 3, 0].argmax() == 0  # clipped


@pytest.mark.parametrize("mode", ["attention", "mean"])
def test_pair_embedding_with_templates_and_coevolution(mode):
    torch.manual_seed(0)
    emb = randomize_(PairEmbedding(C_Z, 4, c_template_pair=5, c_template_1d=3, template_mode=mode,
                                   c_coevolution=2, no_heads_pair=HEADS))
    b, t, l = 2, 3, 6
    seq = _msa(b, 1, l)[:, 0]
    idx = torch.arange(l).expand(b, l)
    tp, t1 = torch.randn(b, t, l, l, 5), torch.randn(b, t, l, 3)
    coev = torch.randn(b, l, l, 2)
    base = emb(seq, idx)
    assert base.shape == (b, l, l, C_Z)
    tmask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    full = emb(seq, idx, templates_pair=tp, templates_1d=t1, template_mask=tmask, coevolution=coev)
    assert full.shape == base.shape and torch.isfinite(full).all()
    # a masked template does not matter; a protein without any valid template gets no template update
    tp2 = tp.clone()
    tp2[:, 2] = 100.0
    again = emb(seq, idx, templates_pair=tp2, templates_1d=t1, template_mask=tmask, coevolution=coev)
    assert torch.allclose(again, full, atol=1e-5)
    no_coev = emb(seq, idx, templates_pair=tp, templates_1d=t1, template_mask=tmask)
    if mode == "attention":
        assert torch.allclose(no_coev[1], base[1], atol=1e-6)
    assert not torch.allclose(no_coev[0], base[0])


# --- MSA2Pair -----------------------------------------------------------------------------------------------


def test_outer_product_mean_matches_loop_reference():
    torch.manual_seed(0)
    opm = randomize_(OuterProductMean(C_M, C_Z, 3)).double()
    m = torch.randn(1, 4, 3, C_M, dtype=torch.float64)
    w = torch.tensor([[[1.0], [2.0], [0.5], [0.0]]], dtype=torch.float64).expand(1, 4, 3)
    out = opm(m, None, w)
    a = opm.linear_a(opm.norm(m))
    b = opm.linear_b(opm.norm(m))
    for i in range(3):
        for j in range(3):
            acc = sum(w[0, n, i] * torch.outer(a[0, n, i], b[0, n, j]) for n in range(4))
            ref = opm.linear_out((acc / (w[0, :, i].sum() + 1e-3)).flatten())
            assert torch.allclose(out[0, i, j], ref, atol=1e-10)
    assert torch.allclose(opm(m, None, w, chunk_size=2), out, atol=1e-12)


@pytest.mark.parametrize("weighting", ["mean", "learned"])
def test_msa2pair_shapes_and_row_padding(weighting):
    torch.manual_seed(0)
    block = randomize_(MSA2Pair(C_M, C_Z, 4, weighting)).double()
    m = torch.randn(2, 3, 5, C_M, dtype=torch.float64)
    z = torch.randn(2, 5, 5, C_Z, dtype=torch.float64)
    mask = torch.ones(2, 3, 5, dtype=torch.float64)
    ref = block(m, z, mask)
    assert ref.shape == z.shape
    m_pad = torch.cat((m, 5.0 * torch.randn_like(m[:, :2])), dim=1)
    mask_pad = torch.nn.functional.pad(mask, (0, 0, 0, 2))
    assert torch.allclose(block(m_pad, z, mask_pad), ref, atol=1e-9)


# --- Pair2Pair ----------------------------------------------------------------------------------------------


def test_triangle_multiplication_matches_einsum_reference():
    torch.manual_seed(0)
    z = torch.randn(1, 4, 4, C_Z, dtype=torch.float64)
    for outgoing in (True, False):
        tri = randomize_(TriangleMultiplication(C_Z, 6, outgoing)).double()
        zn = tri.norm_in(z)
        a = torch.sigmoid(tri.linear_a_g(zn)) * tri.linear_a_p(zn)
        b = torch.sigmoid(tri.linear_b_g(zn)) * tri.linear_b_p(zn)
        x = torch.zeros(1, 4, 4, 6, dtype=torch.float64)
        for i in range(4):
            for j in range(4):
                for k in range(4):
                    x[0, i, j] += a[0, i, k] * b[0, j, k] if outgoing else a[0, k, i] * b[0, k, j]
        ref = torch.sigmoid(tri.linear_g(zn)) * tri.linear_z(tri.norm_out(x))
        assert torch.allclose(tri(z), ref, atol=1e-10)


@pytest.mark.parametrize("triangle", [True, False])
def test_pair2pair_padding_and_chunking(triangle):
    torch.manual_seed(0)
    block = randomize_(Pair2Pair(C_Z, HEADS, triangle, 6)).double()
    z = torch.randn(2, 5, 5, C_Z, dtype=torch.float64)
    seq_mask = torch.ones(2, 5, dtype=torch.float64)
    ref = block(z, pair_mask_from(seq_mask))
    assert ref.shape == z.shape
    assert torch.allclose(block(z, pair_mask_from(seq_mask), chunk_size=2), ref, atol=1e-10)
    z_pad = torch.nn.functional.pad(z, (0, 0, 0, 2, 0, 2), value=3.0)
    mask_pad = torch.nn.functional.pad(seq_mask, (0, 2))
    assert torch.allclose(block(z_pad, pair_mask_from(mask_pad))[:, :5, :5], ref, atol=1e-9)


# --- Pair2MSA -----------------------------------------------------------------------------------------------


def test_pair2msa_is_direct_attention_from_the_pair():
    torch.manual_seed(0)
    block = randomize_(Pair2MSA(C_M, C_Z, HEADS)).double()
    m = torch.randn(2, 3, 5, C_M, dtype=torch.float64)
    z = torch.randn(2, 5, 5, C_Z, dtype=torch.float64)
    mask = torch.ones(2, 3, 5, dtype=torch.float64)
    out = block(z, m, mask)
    assert out.shape == m.shape and torch.isfinite(out).all()
    # the attention map comes from the pair only: permuting the MSA rows permutes the output rows
    perm = torch.tensor([2, 0, 1])
    assert torch.allclose(block(z, m[:, perm], mask), out[:, perm], atol=1e-10)
    z2 = z + torch.randn_like(z)
    assert not torch.allclose(block(z2, m, mask), out)
    m_pad = torch.nn.functional.pad(m, (0, 0, 0, 1), value=4.0)
    mask_pad = torch.nn.functional.pad(mask, (0, 1))
    z_pad = torch.nn.functional.pad(z, (0, 0, 0, 1, 0, 1), value=-2.0)
    assert torch.allclose(block(z_pad, m_pad, mask_pad)[:, :, :5], out, atol=1e-9)
