"""FlashAttention forward with FlexAttention-style score and mask mods.

``flash_attention(q, k, v, ...)`` computes ``softmax(mods(q k^T * sm_scale)) v`` on arrays
in torch SDPA's layout ``[batch, heads, seq, head_dim]`` with an online softmax in base 2
(one program per ``BLOCK_M`` query rows of one (batch, head)). The order of the score
pipeline, for query position ``i`` and key position ``j`` of one sequence:

1. ``s = q_i . k_j * sm_scale``
2. ``softcap``: ``s = softcap * tanh(s / softcap)`` (Gemma 2 / FlashAttention-2's order)
3. ``alibi_slopes``: ``s = s - slope[h] * |i + Sk - Sq - j|`` (FlashAttention-2's bias)
4. ``score_mod(s, b, h, i, j)`` (a ``@mutile.jit`` function, inlined)
5. masks: ``j < Sk``; ``causal``: ``j <= i + Sk - Sq``; ``window=(left, right)``:
   ``i + Sk - Sq - left <= j <= i + Sk - Sq + right``; ``mask_mod(b, h, i, j)``.

Causal masking is aligned bottom-right as in FlashAttention-2 (>= 2.1): the last query
sees the last key. torch's ``is_causal`` aligns top-left; the two agree when Sq == Sk.
A row with no visible key gives an output of 0 and an lse of -inf (torch gives NaN).
"""
import functools
import math

import numpy as np

import mutile
import mutile.language as ml

from . import attention_pinghu
from .attention_host import AttnArgs, prepare
from .attention_parts import (LOG2E, kv_bounds, no_mask_mod, no_score_mod, raw_scores, seq_info,
                              visible)

@mutile.jit
def sparse_list(Num, Idx, FullNum, FullIdx, row, stride, FULL: ml.constexpr):
    """(count, pointer to the block indices) of one block's list in a block mask: the
    partly masked blocks, or the fully unmasked ones with ``FULL``; ``row`` is the
    block's flat (b, h, block) offset into the count arrays."""
    if FULL:
        return ml.load(FullNum + row), FullIdx + row * stride
    return ml.load(Num + row), Idx + row * stride


def build_forward(score_mod, mask_mod):
    """The forward kernel with ``score_mod`` and ``mask_mod`` inlined (closure values are
    part of mutile's specialization key, so each pair compiles once)."""
    smod = no_score_mod if score_mod is None else score_mod
    mmod = no_mask_mod if mask_mod is None else mask_mod

    @mutile.jit
    def flash_fwd_kernel(Q, K, V, Out, Lse, CuQ, CuK, Slopes, KvNum, KvIdx, FullNum, FullIdx,
                         seq_q_all, seq_k_all, heads, group, sm_scale, softcap, left, right,
                         s_qb, s_qh, s_qm, s_kb, s_kh, s_kn, s_ob, s_oh, s_om,
                         s_lb, s_lh, s_ab, s_mb, s_mh, s_mq,
                         HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                         CAUSAL: ml.constexpr, WINDOW: ml.constexpr, SOFTCAP: ml.constexpr,
                         ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr,
                         SPARSE: ml.constexpr, VARLEN: ml.constexpr, STORE_LSE: ml.constexpr,
                         FP32: ml.constexpr):
        """One program: BLOCK_M query rows of one (batch, head). See the module doc."""
        start_m = ml.program_id(0)
        bh = ml.program_id(1)
        b = bh // heads
        h = bh % heads
        hk = h // group
        q0, seq_q, k0, seq_k, bq = seq_info(CuQ, CuK, b, seq_q_all, seq_k_all, VARLEN)
        if start_m * BLOCK_M < seq_q:
            shift = seq_k - seq_q
            rows = start_m * BLOCK_M + ml.arange(0, BLOCK_M)
            offs_n = ml.arange(0, BLOCK_N)
            offs_d = ml.arange(0, HEAD_DIM)
            q_ptr = Q + bq * s_qb + h * s_qh + q0 * s_qm
            k_ptr = K + bq * s_kb + hk * s_kh + k0 * s_kn
            v_ptr = V + bq * s_kb + hk * s_kh + k0 * s_kn
            row_ok = rows[:, None] < seq_q
            q = ml.load(q_ptr + rows[:, None] * s_qm + offs_d[None, :], mask=row_ok, other=0.0)
            slope = 0.0
            if ALIBI:
                slope = ml.load(Slopes + b * s_ab + h)
            m_i = ml.full([BLOCK_M], -float("inf"), ml.float32)
            l_i = ml.zeros([BLOCK_M], ml.float32)
            acc = ml.zeros([BLOCK_M, HEAD_DIM], ml.float32)
            if SPARSE:
                row = b * s_mb + h * s_mh + start_m
                for part in ml.static_range(2):
                    n_blk, idx_ptr = sparse_list(KvNum, KvIdx, FullNum, FullIdx, row, s_mq,
                                                 part == 1)
                    for i in range(0, n_blk):
                        acc, l_i, m_i = attend(q, k_ptr, v_ptr, acc, l_i, m_i,
                                               ml.load(idx_ptr + i) * BLOCK_N, offs_n, offs_d,
                                               s_kn, sm_scale, softcap, slope, b, h, rows,
                                               seq_k, shift, left, right, CAUSAL, WINDOW,
                                               SOFTCAP, ALIBI, SCORE_MOD,
                                               MASK_MOD and part == 0, FP32, smod, mmod)
            else:
                lo, hi = kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N,
                                   CAUSAL, WINDOW)
                for start_n in range(lo, hi, BLOCK_N):
                    acc, l_i, m_i = attend(q, k_ptr, v_ptr, acc, l_i, m_i, start_n,
                                           offs_n, offs_d, s_kn, sm_scale, softcap, slope,
                                           b, h, rows, seq_k, shift, left, right,
                                           CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                                           MASK_MOD, FP32, smod, mmod)
            out = acc / ml.where(l_i == 0.0, 1.0, l_i)[:, None]
            o_ptr = Out + bq * s_ob + h * s_oh + q0 * s_om
            ml.store(o_ptr + rows[:, None] * s_om + offs_d[None, :],
                     out.to(Out.dtype.element_ty), mask=row_ok)
            if STORE_LSE:
                lse = ml.where(l_i == 0.0, -float("inf"), (m_i + ml.log2(l_i)) / LOG2E)
                ml.store(Lse + bq * s_lb + h * s_lh + q0 + rows, lse, mask=rows < seq_q)

    return flash_fwd_kernel


@mutile.jit
def attend(q, k_ptr, v_ptr, acc, l_i, m_i, start_n, offs_n, offs_d, s_kn, sm_scale, softcap,
           slope, b, h, rows, seq_k, shift, left, right, CAUSAL: ml.constexpr,
           WINDOW: ml.constexpr, SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
           SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr, FP32: ml.constexpr,
           score_mod, mask_mod):
    """One key block of the online softmax: returns the updated (acc, l_i, m_i)."""
    cols = start_n + offs_n
    kv_ok = cols[:, None] < seq_k
    k = ml.load(k_ptr + cols[:, None] * s_kn + offs_d[None, :], mask=kv_ok, other=0.0)
    s, _ = raw_scores(q, k, sm_scale, softcap, slope, rows, cols, shift, SOFTCAP, ALIBI, FP32)
    if SCORE_MOD:
        s = score_mod(s, b, h, rows[:, None], cols[None, :])
    keep = visible(b, h, rows[:, None], cols[None, :], seq_k, shift, left, right, CAUSAL,
                   WINDOW, MASK_MOD, mask_mod)
    s = ml.where(keep, s * LOG2E, -float("inf"))
    m_new = ml.maximum(m_i, ml.max(s, axis=1))
    m_safe = ml.where(m_new == -float("inf"), 0.0, m_new)
    p = ml.exp2(s - m_safe[:, None])
    alpha = ml.exp2(m_i - m_safe)
    l_i = l_i * alpha + ml.sum(p, axis=1)
    v = ml.load(v_ptr + cols[:, None] * s_kn + offs_d[None, :], mask=kv_ok, other=0.0)
    acc = acc * alpha[:, None]
    if FP32:
        acc = ml.dot(p, v, acc, input_precision="ieee")
    else:
        acc = ml.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_new


forward_kernel = functools.cache(build_forward)   # compiled once per pair of mods


def pick_blocks(a: AttnArgs):
    """(BLOCK_M, BLOCK_N): the block mask's, else 64 x 64 (32 x 32 for short sequences)."""
    if a.block_mask is not None:
        return a.block_mask.block_size
    small = max(a.seq_q, a.seq_k) <= 32
    return (32, 32) if small else (64, 64)


def flash_attention(q, k, v, *, causal=False, sm_scale=None, score_mod=None, mask_mod=None,
                    block_mask=None, window=None, alibi_slopes=None, softcap=None,
                    enable_gqa=False, cu_seqlens_q=None, cu_seqlens_k=None, return_lse=False,
                    out=None, backend=None):
    """Attention on ``[batch, heads, seq, head_dim]`` arrays (fp16, bf16, fp32); see the
    module docstring for the order of the mods and the causal alignment.

    ``score_mod``/``mask_mod``: ``@mutile.jit`` functions (FlexAttention's signatures),
    inlined. ``block_mask``: from :func:`create_block_mask`, its fully masked blocks are
    skipped (its mask_mod is applied). ``window``: int or (left, right) as in
    FlashAttention-2. ``alibi_slopes``: [heads] or [batch, heads]. ``enable_gqa``: k, v
    may have fewer heads (a divisor of q's). ``cu_seqlens_q/k``: varlen batches packed as
    ``[1, heads, total, head_dim]``. Returns ``o`` (q's dtype), or ``(o, lse)`` with the
    natural-log lse [batch, heads, seq] in f32 when ``return_lse``."""
    a = prepare(q, k, v, causal=causal, sm_scale=sm_scale, score_mod=score_mod,
                mask_mod=mask_mod, block_mask=block_mask, window=window,
                alibi_slopes=alibi_slopes, softcap=softcap, enable_gqa=enable_gqa,
                cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, backend=backend)
    if out is None:
        out = np.empty_like(a.q)
    elif not isinstance(out, np.ndarray) or out.shape != a.q.shape or out.dtype != a.q.dtype \
            or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {a.q.dtype} array of shape {a.q.shape}")
    lse = np.empty(a.q.shape[:3], np.float32)
    run_forward(a, out, lse)
    return (out, lse) if return_lse else out


def run_forward(a: AttnArgs, out, lse):
    """Launch the forward kernel on checked arguments, writing ``out`` and ``lse``: on
    pinghu the explicit TME/SQMMA kernel (``attention_pinghu``) when it takes them."""
    if attention_pinghu.supports(a, out):
        attention_pinghu.run(a, out, lse)
        return
    bm, bn = pick_blocks(a)
    (num, idx, fnum, fidx), mstr = a.mask_arrays()
    qb, qh, qm, _ = (s // a.q.itemsize for s in a.q.strides)
    kb, kh, kn, _ = (s // a.k.itemsize for s in a.k.strides)
    lb, lh, _ = (s // 4 for s in lse.strides)
    grid = (mutile.cdiv(a.seq_q, bm), a.batch * a.heads)
    kern = forward_kernel(a.score_mod, a.mask_mod)
    kern[grid](a.q, a.k, a.v, out, lse, a.cu_q, a.cu_k, a.slopes, num, idx, fnum, fidx,
               a.q.shape[2], a.k.shape[2], a.heads, a.heads // a.kv_heads, a.sm_scale,
               a.softcap, a.window[0], a.window[1], qb, qh, qm, kb, kh, kn, qb, qh, qm,
               lb, lh, a.slopes_batch_stride, *mstr, HEAD_DIM=a.head_dim, BLOCK_M=bm,
               BLOCK_N=bn, STORE_LSE=True, **a.flags(), **a.launch())


def attention_reference(q, k, v, *, causal=False, sm_scale=None, score_fn=None, mask_fn=None,
                        window=None, alibi_slopes=None, softcap=None, cu_seqlens_q=None,
                        cu_seqlens_k=None):
    """The same attention in float64 numpy (the test oracle); returns (o, lse).

    ``score_fn(s, b, h, i, j)`` / ``mask_fn(b, h, i, j)`` are numpy versions of the mods
    (``i`` [Sq, 1], ``j`` [1, Sk] int arrays)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    if cu_seqlens_q is not None:
        o, lse = np.zeros_like(q), np.full(q.shape[:3], -np.inf)
        for b in range(len(cu_seqlens_q) - 1):
            qs = slice(cu_seqlens_q[b], cu_seqlens_q[b + 1])
            ks = slice(cu_seqlens_k[b], cu_seqlens_k[b + 1])
            slopes = None if alibi_slopes is None else np.broadcast_to(
                np.asarray(alibi_slopes), (len(cu_seqlens_q) - 1, q.shape[1]))[b]
            ob, lb = _reference_dense(q[:, :, qs], k[:, :, ks], v[:, :, ks], causal, sm_scale,
                                      score_fn, mask_fn, window, slopes, softcap, b0=b)
            o[:, :, qs], lse[:, :, qs] = ob, lb
        return o, lse
    return _reference_dense(q, k, v, causal, sm_scale, score_fn, mask_fn, window, alibi_slopes,
                            softcap)


def reference_scores(q, k, causal, sm_scale, score_fn, mask_fn, window, alibi_slopes, softcap,
                     b0=0):
    """float64 scores after every mod and mask (-inf where masked): [B, H, Sq, Sk]."""
    B, Hq, Sq, D = q.shape
    Hk = k.shape[1]
    k = np.repeat(k, Hq // Hk, axis=1)
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    s = q @ np.swapaxes(k, -1, -2) * sm_scale
    Sk = k.shape[2]
    i = np.arange(Sq)[:, None]
    j = np.arange(Sk)[None, :]
    diag = i + Sk - Sq
    if softcap:
        s = softcap * np.tanh(s / softcap)
    if alibi_slopes is not None:
        sl = np.asarray(alibi_slopes, np.float64)
        sl = np.broadcast_to(sl.reshape(-1, Hq) if sl.ndim == 2 else sl[None], (B, Hq))
        s = s - sl[:, :, None, None] * np.abs(diag - j)
    keep = np.ones((B, Hq, Sq, Sk), bool)
    for b in range(B):
        for h in range(Hq):
            if score_fn is not None:
                s[b, h] = score_fn(s[b, h], b + b0, h, i, j)
            if mask_fn is not None:
                keep[b, h] &= np.broadcast_to(mask_fn(b + b0, h, i, j), (Sq, Sk))
    if causal:
        keep &= j <= diag
    if window is not None:
        left, right = (window, window) if np.isscalar(window) else window
        right = 0 if causal else right
        keep &= (j >= diag - left) & (j <= diag + right)
    return np.where(keep, s, -np.inf)


def _reference_dense(q, k, v, causal, sm_scale, score_fn, mask_fn, window, alibi_slopes,
                     softcap, b0=0):
    s = reference_scores(q, k, causal, sm_scale, score_fn, mask_fn, window, alibi_slopes,
                         softcap, b0)
    v = np.repeat(v, q.shape[1] // v.shape[1], axis=1)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    den = p.sum(-1, keepdims=True)
    o = (p @ v) / np.where(den == 0, 1.0, den)
    lse = np.where(den[..., 0] == 0, -np.inf, np.log(np.where(den[..., 0] == 0, 1, den[..., 0]))
                   + m[..., 0])
    return o, lse
