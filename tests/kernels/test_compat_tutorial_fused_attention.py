"""Triton's tutorial 06 ("fused attention"), its forward kernel as the tutorial writes it:
``_attn_fwd`` under ``@triton.autotune`` (configs with the host-descriptor ``pre_hook``,
``keep``, ``early_config_prune=prune_invalid_configs``, key on N_CTX, HEAD_DIM,
FP8_OUTPUT, warp_specialize), ``_attn_fwd_inner`` with its causal stages and
``tl.range(..., warp_specialize=...)``, ``_maybe_make_tensor_desc``, host
``TensorDescriptor``s with a dummy block the pre-hook replaces — run through
``mutile.as_triton()`` on both backends, causal and not, against float64 numpy. The config
list is cut to small blocks; the kernel is unchanged.

Tolerance: fp16 q, k, v; f32 scores and softmax; P is rounded to fp16 before P @ V
(2**-11 relative, so at most 2**-11 * max|v| on an output), the output to fp16 (2**-11
relative): ``|o - ref| <= 2**-9 * max|v| + 2**-10 * |ref|``. M (the row's log2-sum-exp2)
is f32: ``|M - ref| <= 1e-4 * (1 + |ref|)``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import mutile
from mutile import compat

from ..conftest import poison


@pytest.fixture(scope="module")
def tutorial():
    triton = mutile.as_triton()
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    def is_hopper():
        return False

    def supports_host_descriptor():
        return True

    NUM_STAGES_OPTIONS = [2]

    @triton.jit
    def _attn_fwd_inner(acc, l_i, m_i, q,  #
                        desc_k, desc_v,  #
                        offset_y, dtype: tl.constexpr, start_m, qk_scale,  #
                        BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,  #
                        STAGE: tl.constexpr, offs_m: tl.constexpr, offs_n: tl.constexpr,  #
                        N_CTX: tl.constexpr, warp_specialize: tl.constexpr, IS_HOPPER: tl.constexpr):
        # range of values handled by this stage
        if STAGE == 1:
            lo, hi = 0, start_m * BLOCK_M
        elif STAGE == 2:
            lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
            lo = tl.multiple_of(lo, BLOCK_M)
        # causal = False
        else:
            lo, hi = 0, N_CTX
        offsetk_y = offset_y + lo
        if dtype == tl.float8e5:
            offsetv_y = offset_y * HEAD_DIM + lo
        else:
            offsetv_y = offset_y + lo
        # loop over k, v and update accumulator
        for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=warp_specialize):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            # -- compute qk ----
            k = desc_k.load([offsetk_y, 0]).T
            qk = tl.dot(q, k)
            if STAGE == 2:
                mask = offs_m[:, None] >= (start_n + offs_n[None, :])
                qk = qk * qk_scale + tl.where(mask, 0, -1.0e6)
                m_ij = tl.maximum(m_i, tl.max(qk, 1))
                qk -= m_ij[:, None]
            else:
                m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                qk = qk * qk_scale - m_ij[:, None]
            p = tl.math.exp2(qk)
            # -- compute correction factor
            alpha = tl.math.exp2(m_i - m_ij)
            l_ij = tl.sum(p, 1)
            # -- update output accumulator --
            acc = acc * alpha[:, None]
            # prepare p and v for the dot
            if dtype == tl.float8e5:
                v = desc_v.load([0, offsetv_y]).T
            else:
                v = desc_v.load([offsetv_y, 0])
            p = p.to(dtype)
            acc = tl.dot(p, v, acc)
            # update m_i and l_i
            # place this at the end of the loop to reduce register pressure
            l_i = l_i * alpha + l_ij
            m_i = m_ij
            offsetk_y += BLOCK_N
            offsetv_y += BLOCK_N
        return acc, l_i, m_i

    def _host_descriptor_pre_hook(nargs):
        BLOCK_M = nargs["BLOCK_M"]
        BLOCK_N = nargs["BLOCK_N"]
        HEAD_DIM = nargs["HEAD_DIM"]
        if not isinstance(nargs["desc_q"], TensorDescriptor):
            return
        nargs["desc_q"].block_shape = [BLOCK_M, HEAD_DIM]
        if nargs["FP8_OUTPUT"]:
            nargs["desc_v"].block_shape = [HEAD_DIM, BLOCK_N]
        else:
            nargs["desc_v"].block_shape = [BLOCK_N, HEAD_DIM]
        nargs["desc_k"].block_shape = [BLOCK_N, HEAD_DIM]
        nargs["desc_o"].block_shape = [BLOCK_M, HEAD_DIM]

    configs = [
        triton.Config({'BLOCK_M': BM, 'BLOCK_N': BN}, num_stages=s, num_warps=w, pre_hook=_host_descriptor_pre_hook) \
        for BM in [16, 32]\
        for BN in [16, 32]\
        for s in NUM_STAGES_OPTIONS \
        for w in [4]\
    ]

    def keep(conf):
        BLOCK_M = conf.kwargs["BLOCK_M"]
        BLOCK_N = conf.kwargs["BLOCK_N"]
        return not (is_hopper() and BLOCK_M * BLOCK_N < 128 * 128 and conf.num_warps == 8)

    def prune_invalid_configs(configs, named_args, **kwargs):
        N_CTX = kwargs["N_CTX"]
        STAGE = kwargs["STAGE"]

        # Filter out configs where BLOCK_M > N_CTX
        # Filter out configs where BLOCK_M < BLOCK_N when causal is True
        return [
            conf for conf in configs if conf.kwargs.get("BLOCK_M", 0) <= N_CTX and (
                conf.kwargs.get("BLOCK_M", 0) >= conf.kwargs.get("BLOCK_N", 0) or STAGE == 1)
        ]

    @triton.jit
    def _maybe_make_tensor_desc(desc_or_ptr, shape, strides, block_shape):
        if isinstance(desc_or_ptr, tl.tensor_descriptor):
            return desc_or_ptr
        else:
            return tl.make_tensor_descriptor(desc_or_ptr, shape, strides, block_shape)

    @triton.autotune(configs=list(filter(keep, configs)), key=["N_CTX", "HEAD_DIM", "FP8_OUTPUT", "warp_specialize"],
                     prune_configs_by={'early_config_prune': prune_invalid_configs})
    @triton.jit
    def _attn_fwd(sm_scale, M,  #
                  Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX,  #
                  HEAD_DIM: tl.constexpr,  #
                  BLOCK_M: tl.constexpr,  #
                  BLOCK_N: tl.constexpr,  #
                  FP8_OUTPUT: tl.constexpr,  #
                  STAGE: tl.constexpr,  #
                  warp_specialize: tl.constexpr,  #
                  IS_HOPPER: tl.constexpr,  #
                  ):
        dtype = tl.float8e5 if FP8_OUTPUT else tl.float16
        tl.static_assert(BLOCK_N <= HEAD_DIM)
        start_m = tl.program_id(0)
        off_hz = tl.program_id(1)
        off_z = off_hz // H
        off_h = off_hz % H

        y_dim = Z * H * N_CTX
        desc_q = _maybe_make_tensor_desc(desc_q, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1],
                                         block_shape=[BLOCK_M, HEAD_DIM])
        if FP8_OUTPUT:
            desc_v = _maybe_make_tensor_desc(desc_v, shape=[HEAD_DIM, y_dim], strides=[N_CTX, 1],
                                             block_shape=[HEAD_DIM, BLOCK_N])
        else:
            desc_v = _maybe_make_tensor_desc(desc_v, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1],
                                             block_shape=[BLOCK_N, HEAD_DIM])
        desc_k = _maybe_make_tensor_desc(desc_k, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1],
                                         block_shape=[BLOCK_N, HEAD_DIM])
        desc_o = _maybe_make_tensor_desc(desc_o, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1],
                                         block_shape=[BLOCK_M, HEAD_DIM])

        offset_y = off_z * (N_CTX * H) + off_h * N_CTX
        qo_offset_y = offset_y + start_m * BLOCK_M
        # initialize offsets
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        # initialize pointer to m and l
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        # load scales
        qk_scale = sm_scale
        qk_scale *= 1.44269504  # 1/log(2)
        # load q: it will stay in SRAM throughout
        q = desc_q.load([qo_offset_y, 0])
        # stage 1: off-band
        # For causal = True, STAGE = 3 and _attn_fwd_inner gets 1 as its STAGE
        # For causal = False, STAGE = 1, and _attn_fwd_inner gets 3 as its STAGE
        if STAGE & 1:
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q,  #
                                            desc_k, desc_v,  #
                                            offset_y, dtype, start_m, qk_scale,  #
                                            BLOCK_M, HEAD_DIM, BLOCK_N,  #
                                            4 - STAGE, offs_m, offs_n, N_CTX,  #
                                            warp_specialize, IS_HOPPER)
        # stage 2: on-band
        if STAGE & 2:
            # barrier makes it easier for compielr to schedule the
            # two loops independently
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q,  #
                                            desc_k, desc_v,  #
                                            offset_y, dtype, start_m, qk_scale,  #
                                            BLOCK_M, HEAD_DIM, BLOCK_N,  #
                                            2, offs_m, offs_n, N_CTX,  #
                                            warp_specialize, IS_HOPPER)
        # epilogue
        m_i += tl.math.log2(l_i)
        acc = acc / l_i[:, None]
        m_ptrs = M + off_hz * N_CTX + offs_m
        tl.store(m_ptrs, m_i)
        desc_o.store([qo_offset_y, 0], acc.to(dtype))

    def forward(q, k, v, causal, sm_scale, warp_specialize=False, backend="llvm"):
        # shape constraints
        HEAD_DIM_Q, HEAD_DIM_K = q.shape[-1], k.shape[-1]
        HEAD_DIM_V = v.shape[-1]
        assert HEAD_DIM_Q == HEAD_DIM_K and HEAD_DIM_K == HEAD_DIM_V
        o = poison(q.shape, q.dtype)
        stage = 3 if causal else 1
        extra_kern_args = {}
        M = poison((q.shape[0], q.shape[1], q.shape[2]), np.float32)
        if supports_host_descriptor() and not (is_hopper() and warp_specialize):
            # Note that on Hopper we cannot perform a FP8 dot with a non-transposed second tensor
            y_dim = q.shape[0] * q.shape[1] * q.shape[2]

            dummy_block = [1, 1]
            desc_q = TensorDescriptor(q, shape=[y_dim, HEAD_DIM_K], strides=[HEAD_DIM_K, 1], block_shape=dummy_block)
            desc_v = TensorDescriptor(v, shape=[y_dim, HEAD_DIM_K], strides=[HEAD_DIM_K, 1], block_shape=dummy_block)
            desc_k = TensorDescriptor(k, shape=[y_dim, HEAD_DIM_K], strides=[HEAD_DIM_K, 1], block_shape=dummy_block)
            desc_o = TensorDescriptor(o, shape=[y_dim, HEAD_DIM_K], strides=[HEAD_DIM_K, 1], block_shape=dummy_block)
        else:
            desc_q, desc_v, desc_k, desc_o = q, v, k, o

        def grid(META):
            return (triton.cdiv(q.shape[2], META["BLOCK_M"]), q.shape[0] * q.shape[1], 1)

        _attn_fwd[grid](
            sm_scale, M,  #
            q.shape[0], q.shape[1],  #
            desc_q, desc_k, desc_v, desc_o,  #
            N_CTX=q.shape[2],  #
            HEAD_DIM=HEAD_DIM_K,  #
            FP8_OUTPUT=False,  #
            STAGE=stage,  #
            warp_specialize=warp_specialize,  #
            IS_HOPPER=is_hopper(),  #
            backend=backend, **extra_kern_args)
        return o, M

    yield forward, _attn_fwd
    compat.remove_triton()


def _reference(q, k, v, causal, sm_scale):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("zhmd,zhnd->zhmn", q, k) * sm_scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    p = np.exp(s - mx)
    lse2 = (np.log(p.sum(-1)) + mx[..., 0]) / math.log(2)
    return np.einsum("zhmn,zhnd->zhmd", p / p.sum(-1, keepdims=True), v), lse2


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tutorial_06_fused_attention_autotuned(tutorial, causal, rng, backend):
    forward, kernel = tutorial
    # STAGE is no part of the tutorial's key: another N_CTX makes the causal run tune anew
    Z, H, N_CTX, HEAD_DIM = 1, 2, (32 if causal else 64), 32
    q, k, v = (rng.standard_normal((Z, H, N_CTX, HEAD_DIM)).astype(np.float16)
               for _ in range(3))
    sm_scale = 0.5
    o, M = forward(q, k, v, causal, sm_scale, backend=backend)
    ref, lse2 = _reference(q, k, v, causal, sm_scale)
    bound = 2.0 ** -9 * np.abs(v.astype(np.float64)).max() + 2.0 ** -10 * np.abs(ref)
    err = np.abs(o.astype(np.float64) - ref)
    assert (err <= bound).all(), f"max excess {(err - bound).max()}"
    np.testing.assert_allclose(M, lse2, rtol=1e-4, atol=1e-4)
    d = kernel.tuning_log[-1]
    assert d.key[:4] == (N_CTX, HEAD_DIM, False, False) and not d.reasons
    # prune_invalid_configs: causal (STAGE 3) drops BLOCK_M < BLOCK_N
    assert len(d.timings) == (3 if causal else 4)
