"""A chunked linear-attention forward, written the way flash-linear-attention writes its
``chunk`` kernels (one program per (value block, batch*head), a state ``h`` of K x V carried
across chunks of ``BT`` positions, the intra-chunk part with a causal mask, ``scale`` on
``q``), with pointer tiles where FLA uses block pointers (which current Triton retires).

o_t = scale * sum_{s <= t} (q_t . k_s) v_s, against float64 numpy on both backends, output
poisoned; T is not a multiple of the chunk, so the masked tail is exercised."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as tl

from ..conftest import poison


@mutile.jit
def chunk_linear_attn_fwd(q, k, v, o, scale, T, K: tl.constexpr, V: tl.constexpr,
                          BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    for i_t in range(0, tl.cdiv(T, BT)):
        o_t = i_t * BT + tl.arange(0, BT)
        m_t = o_t < T
        p_q = q + i_bh * T * K + o_t[:, None] * K + o_k[None, :]
        p_k = k + i_bh * T * K + o_t[:, None] * K + o_k[None, :]
        p_v = v + i_bh * T * V + o_t[:, None] * V + o_v[None, :]
        b_q = (tl.load(p_q, mask=m_t[:, None], other=0.0) * scale).to(k.dtype.element_ty)
        b_k = tl.load(p_k, mask=m_t[:, None], other=0.0)
        b_v = tl.load(p_v, mask=m_t[:, None], other=0.0)
        # inter-chunk: what the state carries from earlier chunks
        b_o = tl.dot(b_q, b_h.to(b_q.dtype))
        # intra-chunk: causal scores within the chunk
        b_s = tl.dot(b_q, tl.trans(b_k))
        b_s = tl.where(o_t[:, None] >= o_t[None, :], b_s, 0.0)
        b_o += tl.dot(b_s.to(b_q.dtype), b_v)
        b_h += tl.dot(tl.trans(b_k), b_v)
        p_o = o + i_bh * T * V + o_t[:, None] * V + o_v[None, :]
        tl.store(p_o, b_o.to(o.dtype.element_ty), mask=m_t[:, None])


def reference(q, k, v, scale):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = np.einsum("btk,bsk->bts", q * scale, k)
    s = np.tril(s)
    return np.einsum("bts,bsv->btv", s, v)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_chunked_linear_attention(dtype, rng, backend):
    BH, T, K, V = 3, 45, 16, 32
    BT, BV = 16, 16
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in ((BH, T, K), (BH, T, K), (BH, T, V)))
    o = poison((BH, T, V), dtype)
    scale = K ** -0.5
    chunk_linear_attn_fwd[(V // BV, BH)](q, k, v, o, scale, T, K=K, V=V, BT=BT, BK=K, BV=BV,
                                         backend=backend)
    ref = reference(q, k, v, scale)
    # each output sums T products of (q.k) v; inputs are standard normal. tl.dot on f32
    # operands is tf32 by default (as in Triton): operands keep 10 mantissa bits, ~2^-11
    # relative per product; f16: the operands are rounded to f16 before each dot (q *
    # scale, the f32 state, the scores), also ~2^-11 per term, over chained dots.
    tol = 5e-3 if dtype == np.float32 else 3e-2
    mag = np.abs(ref).max()
    assert not np.isnan(o).any()
    assert np.abs(o.astype(np.float64) - ref).max() <= tol * mag
