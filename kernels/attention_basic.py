"""FlashAttention forward in Triton's dialect: online softmax in base 2, causal or
not, ragged sequence lengths masked. Copy it to write your own attention variant."""
import math

import numpy as np

import mutile
import mutile.language as ml


@mutile.jit
def attention_fwd_kernel(Q, K, V, Out, seq_q, seq_k, sm_scale,
                         stride_h, stride_m, stride_kh, stride_kn, stride_oh, stride_om,
                         HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                         CAUSAL: ml.constexpr):
    """One program computes BLOCK_M query rows of one head.

    Q, Out: [heads, seq_q, HEAD_DIM]; K, V: [heads, seq_k, HEAD_DIM], row-major with the
    given strides (in elements). Causal masking aligns the last query with the last key.
    """
    start_m = ml.program_id(0)
    head = ml.program_id(1)
    offs_m = start_m * BLOCK_M + ml.arange(0, BLOCK_M)
    offs_n = ml.arange(0, BLOCK_N)
    offs_d = ml.arange(0, HEAD_DIM)
    q = ml.load(Q + head * stride_h + offs_m[:, None] * stride_m + offs_d[None, :],
                mask=offs_m[:, None] < seq_q, other=0.0)
    m_i = ml.full([BLOCK_M], -float("inf"), ml.float32)
    l_i = ml.zeros([BLOCK_M], ml.float32)
    acc = ml.zeros([BLOCK_M, HEAD_DIM], ml.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) = exp2(x * log2(e))
    shift = seq_k - seq_q
    if CAUSAL:
        hi = ml.minimum((start_m + 1) * BLOCK_M + shift, seq_k)
    else:
        hi = seq_k
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = cols[:, None] < seq_k
        k = ml.load(K + head * stride_kh + cols[:, None] * stride_kn + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        qk = ml.dot(q, ml.trans(k), input_precision="ieee") * qk_scale
        valid = cols[None, :] < seq_k
        if CAUSAL:
            valid = valid & (offs_m[:, None] + shift >= cols[None, :])
        qk = ml.where(valid, qk, -float("inf"))
        m_new = ml.maximum(m_i, ml.max(qk, axis=1))
        m_safe = ml.where(m_new == -float("inf"), 0.0, m_new)
        p = ml.exp2(qk - m_safe[:, None])
        alpha = ml.exp2(m_i - m_safe)
        l_i = l_i * alpha + ml.sum(p, axis=1)
        v = ml.load(V + head * stride_kh + cols[:, None] * stride_kn + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None]
        acc = ml.dot(p.to(v.dtype), v, acc, input_precision="ieee")
        m_i = m_new
    out = acc / ml.where(l_i == 0.0, 1.0, l_i)[:, None]
    ml.store(Out + head * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :],
             out.to(Out.dtype.element_ty), mask=offs_m[:, None] < seq_q)


@mutile.jit
def attention_desc_kernel(Q, K, V, Out, heads, seq_q, seq_k, sm_scale, HEAD_DIM: ml.constexpr,
                          BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr):
    """The same forward pass reading Q, K and V through tensor descriptors over the
    [heads * seq, HEAD_DIM] rows (on Pinghu: TME copies, pipelined over the key blocks).

    A key block may run past this head's rows into the next head's: those columns are
    masked out of the softmax (their probability is 0).
    """
    start_m = ml.program_id(0)
    head = ml.program_id(1)
    q_desc = ml.make_tensor_descriptor(Q, shape=[heads * seq_q, HEAD_DIM],
                                       strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM])
    k_desc = ml.make_tensor_descriptor(K, shape=[heads * seq_k, HEAD_DIM],
                                       strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
    v_desc = ml.make_tensor_descriptor(V, shape=[heads * seq_k, HEAD_DIM],
                                       strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
    offs_m = start_m * BLOCK_M + ml.arange(0, BLOCK_M)
    offs_n = ml.arange(0, BLOCK_N)
    offs_d = ml.arange(0, HEAD_DIM)
    q = q_desc.load([head * seq_q + start_m * BLOCK_M, 0])
    m_i = ml.full([BLOCK_M], -float("inf"), ml.float32)
    l_i = ml.zeros([BLOCK_M], ml.float32)
    acc = ml.zeros([BLOCK_M, HEAD_DIM], ml.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, seq_k, BLOCK_N):
        k = k_desc.load([head * seq_k + start_n, 0])
        qk = ml.dot(q, ml.trans(k)) * qk_scale
        qk = ml.where((start_n + offs_n)[None, :] < seq_k, qk, -float("inf"))
        m_new = ml.maximum(m_i, ml.max(qk, axis=1))
        p = ml.exp2(qk - m_new[:, None])
        alpha = ml.exp2(m_i - m_new)
        l_i = l_i * alpha + ml.sum(p, axis=1)
        v = v_desc.load([head * seq_k + start_n, 0])
        acc = ml.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    ml.store(Out + (head * seq_q + offs_m[:, None]) * HEAD_DIM + offs_d[None, :],
             out.to(Out.dtype.element_ty), mask=offs_m[:, None] < seq_q)


def attention_desc(q, k, v, sm_scale=None, block_m=64, block_n=64, **launch):
    """Host wrapper of :func:`attention_desc_kernel` (no causal mask; seq_k >= 1)."""
    H, Sq, D = q.shape
    Sk = k.shape[1]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
    out = np.empty_like(q)
    grid = (mutile.cdiv(Sq, block_m), H)
    attention_desc_kernel[grid](q, k, v, out, H, Sq, Sk, float(sm_scale), HEAD_DIM=D,
                                BLOCK_M=block_m, BLOCK_N=block_n, **launch)
    return out


def attention(q, k, v, causal=False, sm_scale=None, block_m=64, block_n=64, **launch):
    """Host wrapper: softmax(q k^T * sm_scale [+ causal mask]) v for [heads, seq, d] arrays."""
    H, Sq, D = q.shape
    Sk = k.shape[1]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
    out = np.empty_like(q)
    grid = (mutile.cdiv(Sq, block_m), H)
    attention_fwd_kernel[grid](q, k, v, out, Sq, Sk, float(sm_scale),
                               Sq * D, D, Sk * D, D, Sq * D, D, HEAD_DIM=D, BLOCK_M=block_m,
                               BLOCK_N=block_n, CAUSAL=bool(causal), **launch)
    return out


def attention_reference(q, k, v, causal=False, sm_scale=None):
    """The same attention in float64 numpy (the test oracle)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    D = q.shape[-1]
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    s = q @ np.swapaxes(k, -1, -2) * sm_scale
    if causal:
        Sq, Sk = q.shape[1], k.shape[1]
        keep = np.arange(Sq)[:, None] + (Sk - Sq) >= np.arange(Sk)[None, :]
        s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    den = p.sum(-1, keepdims=True)
    return (p @ v) / np.where(den == 0, 1.0, den)
