"""FlashAttention backward with the forward's options (Triton's fused-attention tutorial's
structure): a Delta pre-pass (``delta_i = sum_d o_i do_i``), a dK/dV pass with one key
block's K and V resident while it sweeps the query blocks (every query head of a GQA
group, so no atomics), and a dQ pass sweeping the key blocks. The probabilities are
recomputed from the forward's lse.

Differentiable mods: ``softcap`` and ``alibi_slopes`` always; a ``score_mod`` when its
derivative with respect to the score is known: the standard ones of
:mod:`mutile.kernels.block_mask` (alibi, softcap, relative-position bias) register it, a
user's score_mod needs :func:`register_score_mod_grad` or ``score_mod_grad=``. Otherwise
the backward raises ValueError. Mask mods need no derivative.

On pinghu, the pre-pass and both passes are the explicit TME/SQMMA kernels of
:mod:`.attention_bwd_pinghu` when they take the arguments (its ``supports``).
"""
import numpy as np

import mutile
import mutile.language as ml

from . import attention_bwd_pinghu
from .attention import pick_blocks, sparse_list
from .attention_host import bm_strides, prepare
from .attention_parts import (kv_bounds, lse_base2, no_mask_mod, no_score_mod, q_bounds,
                              raw_scores, score_grads, seq_info)
from .block_mask import score_mod_grad as registered_grad


@mutile.jit
def _delta_kernel(O, dO, Delta, rows_total, HEAD_DIM: ml.constexpr, BLOCK: ml.constexpr):
    """Delta[r] = sum_d O[r, d] * dO[r, d] over the flattened [rows_total, HEAD_DIM]."""
    rows = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    offs_d = ml.arange(0, HEAD_DIM)
    ok = rows[:, None] < rows_total
    o = ml.load(O + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=ok, other=0.0)
    do = ml.load(dO + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=ok, other=0.0)
    ml.store(Delta + rows, ml.sum(o.to(ml.float32) * do.to(ml.float32), axis=1),
             mask=rows < rows_total)


@mutile.jit
def tile_grads(q, k, v, do, lse, delta, sm_scale, softcap, slope, b, h, rows, cols, seq_q,
               seq_k, shift, left, right, CAUSAL: ml.constexpr, WINDOW: ml.constexpr,
               SOFTCAP: ml.constexpr, ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr,
               MASK_MOD: ml.constexpr, FP32: ml.constexpr, score_mod, score_grad, mask_mod):
    """(p, ds) of one [BLOCK_M, BLOCK_N] tile: the recomputed probabilities and the
    gradient with respect to ``q.k * sm_scale`` (chain factors of the mods included)."""
    s, g = raw_scores(q, k, sm_scale, softcap, slope, rows, cols, shift, SOFTCAP, ALIBI, FP32)
    if FP32:
        dp = ml.dot(do, ml.trans(v), input_precision="ieee")
    else:
        dp = ml.dot(do, ml.trans(v))
    return score_grads(s, g, dp, lse_base2(lse)[:, None], delta[:, None], b, h, rows[:, None],
                       cols[None, :], seq_q, seq_k, shift, left, right, CAUSAL, WINDOW,
                       SCORE_MOD, MASK_MOD, score_mod, score_grad, mask_mod)


def build_backward(score_mod, score_grad, mask_mod):
    """The dK/dV and dQ kernels with the mods inlined."""
    smod = no_score_mod if score_mod is None else score_mod
    sgrad = no_score_mod if score_grad is None else score_grad
    mmod = no_mask_mod if mask_mod is None else mask_mod

    @mutile.jit
    def dkdv_kernel(Q, K, V, dO, Lse, Delta, dK, dV, CuQ, CuK, Slopes, QNum, QIdx, FullNum,
                    FullIdx, seq_q_all, seq_k_all, heads, kv_heads, group, sm_scale, softcap,
                    left, right, s_qb, s_qh, s_kb, s_kh, s_lb, s_lh, s_ab, s_mb, s_mh, s_mq,
                    HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                    CAUSAL: ml.constexpr, WINDOW: ml.constexpr, SOFTCAP: ml.constexpr,
                    ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr,
                    SPARSE: ml.constexpr, VARLEN: ml.constexpr, FP32: ml.constexpr):
        """One program: BLOCK_N keys of one (batch, kv head); K, V stay resident."""
        start_n = ml.program_id(0)
        bh = ml.program_id(1)
        b = bh // kv_heads
        hk = bh % kv_heads
        q0, seq_q, k0, seq_k, bq = seq_info(CuQ, CuK, b, seq_q_all, seq_k_all, VARLEN)
        if start_n * BLOCK_N < seq_k:
            shift = seq_k - seq_q
            cols = start_n * BLOCK_N + ml.arange(0, BLOCK_N)
            offs_m = ml.arange(0, BLOCK_M)
            offs_d = ml.arange(0, HEAD_DIM)
            kv_ok = cols[:, None] < seq_k
            kv_off = bq * s_kb + hk * s_kh + (k0 + cols[:, None]) * HEAD_DIM + offs_d[None, :]
            k = ml.load(K + kv_off, mask=kv_ok, other=0.0)
            v = ml.load(V + kv_off, mask=kv_ok, other=0.0)
            dk = ml.zeros([BLOCK_N, HEAD_DIM], ml.float32)
            dv = ml.zeros([BLOCK_N, HEAD_DIM], ml.float32)
            lo, hi = q_bounds(start_n, seq_q, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL,
                              WINDOW)
            for g in range(0, group):
                h = hk * group + g
                slope = 0.0
                if ALIBI:
                    slope = ml.load(Slopes + b * s_ab + h)
                q_ptr = Q + bq * s_qb + h * s_qh + q0 * HEAD_DIM
                do_ptr = dO + bq * s_qb + h * s_qh + q0 * HEAD_DIM
                l_ptr = Lse + bq * s_lb + h * s_lh + q0
                d_ptr = Delta + bq * s_lb + h * s_lh + q0
                if SPARSE:
                    row = b * s_mb + h * s_mh + start_n
                    for part in ml.static_range(2):
                        n_blk, idx_ptr = sparse_list(QNum, QIdx, FullNum, FullIdx, row, s_mq,
                                                     part == 1)
                        for i in range(0, n_blk):
                            rows = ml.load(idx_ptr + i) * BLOCK_M + offs_m
                            dk, dv = dkdv_step(q_ptr, do_ptr, l_ptr, d_ptr, k, v, dk, dv, rows,
                                               cols, offs_d, sm_scale, softcap, slope, b, h,
                                               seq_q, seq_k, shift, left, right, CAUSAL,
                                               WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                                               MASK_MOD and part == 0, FP32, HEAD_DIM,
                                               smod, sgrad, mmod)
                else:
                    for start_m in range(lo, hi, BLOCK_M):
                        rows = start_m + offs_m
                        dk, dv = dkdv_step(q_ptr, do_ptr, l_ptr, d_ptr, k, v, dk, dv, rows,
                                           cols, offs_d, sm_scale, softcap, slope, b, h,
                                           seq_q, seq_k, shift, left, right, CAUSAL, WINDOW,
                                           SOFTCAP, ALIBI, SCORE_MOD, MASK_MOD, FP32,
                                           HEAD_DIM, smod, sgrad, mmod)
            ml.store(dK + kv_off, (dk * sm_scale).to(dK.dtype.element_ty), mask=kv_ok)
            ml.store(dV + kv_off, dv.to(dV.dtype.element_ty), mask=kv_ok)

    @mutile.jit
    def dq_kernel(Q, K, V, dO, Lse, Delta, dQ, CuQ, CuK, Slopes, KvNum, KvIdx, FullNum,
                  FullIdx, seq_q_all, seq_k_all, heads, group, sm_scale, softcap, left, right,
                  s_qb, s_qh, s_kb, s_kh, s_lb, s_lh, s_ab, s_mb, s_mh, s_mq,
                  HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                  CAUSAL: ml.constexpr, WINDOW: ml.constexpr, SOFTCAP: ml.constexpr,
                  ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr,
                  SPARSE: ml.constexpr, VARLEN: ml.constexpr, FP32: ml.constexpr):
        """One program: BLOCK_M query rows of one (batch, head); sweeps the key blocks."""
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
            row_ok = rows[:, None] < seq_q
            q_off = bq * s_qb + h * s_qh + (q0 + rows[:, None]) * HEAD_DIM + offs_d[None, :]
            q = ml.load(Q + q_off, mask=row_ok, other=0.0)
            do = ml.load(dO + q_off, mask=row_ok, other=0.0)
            lrow = bq * s_lb + h * s_lh + q0 + rows
            lse = ml.load(Lse + lrow, mask=rows < seq_q, other=0.0)
            delta = ml.load(Delta + lrow, mask=rows < seq_q, other=0.0)
            slope = 0.0
            if ALIBI:
                slope = ml.load(Slopes + b * s_ab + h)
            k_ptr = K + bq * s_kb + hk * s_kh + k0 * HEAD_DIM
            v_ptr = V + bq * s_kb + hk * s_kh + k0 * HEAD_DIM
            dq = ml.zeros([BLOCK_M, HEAD_DIM], ml.float32)
            if SPARSE:
                row = b * s_mb + h * s_mh + start_m
                for part in ml.static_range(2):
                    n_blk, idx_ptr = sparse_list(KvNum, KvIdx, FullNum, FullIdx, row, s_mq,
                                                 part == 1)
                    for i in range(0, n_blk):
                        dq = dq_step(q, do, lse, delta, k_ptr, v_ptr, dq, rows,
                                     ml.load(idx_ptr + i) * BLOCK_N + offs_n, offs_d, sm_scale,
                                     softcap, slope, b, h, seq_q, seq_k, shift, left, right,
                                     CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                                     MASK_MOD and part == 0, FP32, HEAD_DIM, smod, sgrad, mmod)
            else:
                lo, hi = kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N,
                                   CAUSAL, WINDOW)
                for start_n in range(lo, hi, BLOCK_N):
                    dq = dq_step(q, do, lse, delta, k_ptr, v_ptr, dq, rows, start_n + offs_n,
                                 offs_d, sm_scale, softcap, slope, b, h, seq_q, seq_k, shift,
                                 left, right, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                                 MASK_MOD, FP32, HEAD_DIM, smod, sgrad, mmod)
            ml.store(dQ + q_off, (dq * sm_scale).to(dQ.dtype.element_ty), mask=row_ok)

    return dkdv_kernel, dq_kernel


@mutile.jit
def dkdv_step(q_ptr, do_ptr, l_ptr, d_ptr, k, v, dk, dv, rows, cols, offs_d, sm_scale, softcap,
              slope, b, h, seq_q, seq_k, shift, left, right, CAUSAL: ml.constexpr,
              WINDOW: ml.constexpr, SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
              SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr, FP32: ml.constexpr,
              HEAD_DIM: ml.constexpr, score_mod, score_grad, mask_mod):
    """Accumulate one query block's contribution to the resident block's dK, dV."""
    row_ok = rows[:, None] < seq_q
    off = rows[:, None] * HEAD_DIM + offs_d[None, :]
    q = ml.load(q_ptr + off, mask=row_ok, other=0.0)
    do = ml.load(do_ptr + off, mask=row_ok, other=0.0)
    lse = ml.load(l_ptr + rows, mask=rows < seq_q, other=0.0)
    delta = ml.load(d_ptr + rows, mask=rows < seq_q, other=0.0)
    p, ds = tile_grads(q, k, v, do, lse, delta, sm_scale, softcap, slope, b, h, rows, cols,
                       seq_q, seq_k, shift, left, right, CAUSAL, WINDOW, SOFTCAP, ALIBI,
                       SCORE_MOD, MASK_MOD, FP32, score_mod, score_grad, mask_mod)
    if FP32:
        dv = ml.dot(ml.trans(p), do, dv, input_precision="ieee")
        dk = ml.dot(ml.trans(ds), q, dk, input_precision="ieee")
    else:
        dv = ml.dot(ml.trans(p.to(do.dtype)), do, dv)
        dk = ml.dot(ml.trans(ds.to(q.dtype)), q, dk)
    return dk, dv


@mutile.jit
def dq_step(q, do, lse, delta, k_ptr, v_ptr, dq, rows, cols, offs_d, sm_scale, softcap, slope,
            b, h, seq_q, seq_k, shift, left, right, CAUSAL: ml.constexpr,
            WINDOW: ml.constexpr, SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
            SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr, FP32: ml.constexpr,
            HEAD_DIM: ml.constexpr, score_mod, score_grad, mask_mod):
    """Accumulate one key block's contribution to the query block's dQ."""
    kv_ok = cols[:, None] < seq_k
    off = cols[:, None] * HEAD_DIM + offs_d[None, :]
    k = ml.load(k_ptr + off, mask=kv_ok, other=0.0)
    v = ml.load(v_ptr + off, mask=kv_ok, other=0.0)
    _, ds = tile_grads(q, k, v, do, lse, delta, sm_scale, softcap, slope, b, h, rows, cols,
                       seq_q, seq_k, shift, left, right, CAUSAL, WINDOW, SOFTCAP, ALIBI,
                       SCORE_MOD, MASK_MOD, FP32, score_mod, score_grad, mask_mod)
    if FP32:
        return ml.dot(ds, k, dq, input_precision="ieee")
    return ml.dot(ds.to(k.dtype), k, dq)


_BACKWARDS = {}


def flash_attention_backward(do, q, k, v, o, lse, *, causal=False, sm_scale=None,
                             score_mod=None, score_mod_grad=None, mask_mod=None, block_mask=None,
                             window=None, alibi_slopes=None, softcap=None, enable_gqa=False,
                             cu_seqlens_q=None, cu_seqlens_k=None, out=None, backend=None):
    """Gradients ``(dq, dk, dv)`` of :func:`flash_attention` (same options) given the
    output gradient ``do``, the forward's ``o`` and its ``lse`` (``return_lse=True``).

    ``score_mod_grad(score, b, h, q_idx, kv_idx)``: d score_mod / d score, needed unless
    the score_mod registered one. ``out``: optional preallocated ``(dq, dk, dv)``."""
    a = prepare(q, k, v, causal=causal, sm_scale=sm_scale, score_mod=score_mod,
                mask_mod=mask_mod, block_mask=block_mask, window=window,
                alibi_slopes=alibi_slopes, softcap=softcap, enable_gqa=enable_gqa,
                cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, backend=backend)
    for x, name in ((do, "do"), (o, "o")):
        if not isinstance(x, np.ndarray) or x.shape != a.q.shape or x.dtype != a.q.dtype:
            raise ValueError(f"{name} must be a {a.q.dtype} array of q's shape {a.q.shape}")
    if not isinstance(lse, np.ndarray) or lse.shape != a.q.shape[:3]:
        raise ValueError(f"lse must be the forward's [batch, heads, seq] array, got "
                         f"{getattr(lse, 'shape', type(lse).__name__)}")
    if score_mod is not None and score_mod_grad is None:
        score_mod_grad = registered_grad(score_mod)
        if score_mod_grad is None:
            raise ValueError("score_mod has no known derivative: pass score_mod_grad= or "
                             "register it with block_mask.register_score_mod_grad")
    if score_mod_grad is not None and not isinstance(score_mod_grad, mutile.JITFunction):
        raise TypeError("score_mod_grad must be a @mutile.jit function")
    do, o = np.ascontiguousarray(do), np.ascontiguousarray(o)
    lse = np.ascontiguousarray(lse, np.float32)
    if out is None:
        out = (np.empty_like(a.q), np.empty_like(a.k), np.empty_like(a.v))
    dq, dk, dv = out
    for x, ref, name in ((dq, a.q, "dq"), (dk, a.k, "dk"), (dv, a.v, "dv")):
        if x.shape != ref.shape or x.dtype != ref.dtype or not x.flags.c_contiguous:
            raise ValueError(f"out's {name} must be a C-contiguous {ref.dtype} {ref.shape}")
    if attention_bwd_pinghu.supports(a, do):
        attention_bwd_pinghu.run(a, do, o, lse, out, score_grad=score_mod_grad)
        return dq, dk, dv
    D = a.head_dim
    delta = np.empty(a.q.shape[:3], np.float32)
    rows_total = delta.size
    _delta_kernel[(mutile.cdiv(rows_total, 64),)](o, do, delta, rows_total, HEAD_DIM=D,
                                                  BLOCK=64, **a.launch())
    key = (score_mod, score_mod_grad, a.mask_mod)
    if key not in _BACKWARDS:
        _BACKWARDS[key] = build_backward(*key)
    dkdv_kernel, dq_kernel = _BACKWARDS[key]
    bm, bn = pick_blocks(a)
    Sq_all, Sk_all = a.q.shape[2], a.k.shape[2]
    qs = (a.heads * Sq_all * D, Sq_all * D)
    ks = (a.kv_heads * Sk_all * D, Sk_all * D)
    ls = (a.heads * Sq_all, Sq_all)
    common = dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, **a.flags(), **a.launch())
    bmask = a.block_mask
    if bmask is None:
        qarrs, karrs, mstr_q, mstr_k = (a.cu_q,) * 4, (a.cu_q,) * 4, (0, 0, 0), (0, 0, 0)
    else:
        qarrs = (bmask.q_num_blocks, bmask.q_indices, bmask.full_q_num_blocks,
                 bmask.full_q_indices)
        karrs = (bmask.kv_num_blocks, bmask.kv_indices, bmask.full_kv_num_blocks,
                 bmask.full_kv_indices)
        mstr_q = bm_strides(bmask.q_num_blocks, bmask.q_indices)
        mstr_k = bm_strides(bmask.kv_num_blocks, bmask.kv_indices)
    group = a.heads // a.kv_heads
    dkdv_kernel[(mutile.cdiv(a.seq_k, bn), a.batch * a.kv_heads)](
        a.q, a.k, a.v, do, lse, delta, dk, dv, a.cu_q, a.cu_k, a.slopes, *qarrs, Sq_all,
        Sk_all, a.heads, a.kv_heads, group, a.sm_scale, a.softcap, a.window[0], a.window[1],
        *qs, *ks, *ls, a.slopes_batch_stride, *mstr_q, **common)
    dq_kernel[(mutile.cdiv(a.seq_q, bm), a.batch * a.heads)](
        a.q, a.k, a.v, do, lse, delta, dq, a.cu_q, a.cu_k, a.slopes, *karrs, Sq_all, Sk_all,
        a.heads, group, a.sm_scale, a.softcap, a.window[0], a.window[1], *qs, *ks, *ls,
        a.slopes_batch_stride, *mstr_k, **common)
    return dq, dk, dv
