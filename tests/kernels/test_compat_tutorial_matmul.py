"""Triton's tutorial 03 ("matrix multiplication") as the tutorial writes it — the kernel
under ``@triton.autotune(configs=get_autotune_config(), key=["M", "N", "K"])``, the
leaky-ReLU epilogue, the host function with a ``META`` grid — run through
``mutile.as_triton()`` on both backends against float64 numpy. The config list is cut to
small blocks (the test's problem is small); the kernel and host code are unchanged.

Tolerance: fp16 inputs, f32 accumulation over K <= 96 (within about K * 2**-24 of the
exact sum relative to sum |a||b|), then an fp16 output (half an ulp, 2**-11 relative):
``|c - ref| <= 2**-10 * |ref| + 1e-5 * sum|a||b|``.
"""
from __future__ import annotations

import numpy as np
import pytest

import mutile
from mutile import compat

from ..conftest import poison


@pytest.fixture(scope="module")
def tutorial():
    triton = mutile.as_triton()
    import triton.language as tl

    def get_autotune_config():
        return [
            triton.Config({'BLOCK_SIZE_M': 32, 'BLOCK_SIZE_N': 32, 'BLOCK_SIZE_K': 32,
                           'GROUP_SIZE_M': 8}, num_stages=3, num_warps=4),
            triton.Config({'BLOCK_SIZE_M': 16, 'BLOCK_SIZE_N': 32, 'BLOCK_SIZE_K': 16,
                           'GROUP_SIZE_M': 4}, num_stages=4, num_warps=4),
            triton.Config({'BLOCK_SIZE_M': 32, 'BLOCK_SIZE_N': 16, 'BLOCK_SIZE_K': 32,
                           'GROUP_SIZE_M': 8}, num_stages=5, num_warps=2),
        ]

    @triton.autotune(
        configs=get_autotune_config(),
        key=['M', 'N', 'K'],
    )
    @triton.jit
    def matmul_kernel(
            # Pointers to matrices
            a_ptr, b_ptr, c_ptr,
            # Matrix dimensions
            M, N, K,
            # The stride variables represent how much to increase the ptr by when moving by 1
            # element in a particular dimension.
            stride_am, stride_ak,  #
            stride_bk, stride_bn,  #
            stride_cm, stride_cn,
            # Meta-parameters
            BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,  #
            GROUP_SIZE_M: tl.constexpr,  #
            ACTIVATION: tl.constexpr  #
    ):
        """Kernel for computing the matmul C = A x B."""
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m

        offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
        offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
            accumulator = tl.dot(a, b, accumulator)
            a_ptrs += BLOCK_SIZE_K * stride_ak
            b_ptrs += BLOCK_SIZE_K * stride_bk
        if ACTIVATION == "leaky_relu":
            accumulator = leaky_relu(accumulator)
        c = accumulator.to(tl.float16)

        offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        tl.store(c_ptrs, c, mask=c_mask)

    @triton.jit
    def leaky_relu(x):
        return tl.where(x >= 0, x, 0.01 * x)

    def matmul(a, b, activation="", backend="llvm"):
        assert a.shape[1] == b.shape[0], "Incompatible dimensions"
        M, K = a.shape
        K, N = b.shape
        c = poison((M, N), np.float16)
        grid = lambda META: (triton.cdiv(M, META['BLOCK_SIZE_M']) * triton.cdiv(N, META['BLOCK_SIZE_N']), )
        sa, sb, sc = (tuple(s // x.itemsize for s in x.strides) for x in (a, b, c))
        matmul_kernel[grid](
            a, b, c,  #
            M, N, K,  #
            *sa, *sb, *sc,  #
            ACTIVATION=activation, backend=backend  #
        )
        return c

    yield matmul, matmul_kernel
    compat.remove_triton()


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_tutorial_03_matmul_autotuned(tutorial, activation, rng, backend):
    matmul, kernel = tutorial
    M, N, K = 48, 40, 96                          # not multiples of the blocks
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = matmul(a, b, activation, backend)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    if activation:
        ref = np.where(ref >= 0, ref, 0.01 * ref)
    bound = 2.0 ** -10 * np.abs(ref) + 1e-5 * (np.abs(a64) @ np.abs(b64))
    err = np.abs(c.astype(np.float64) - ref)
    assert (err <= bound).all(), f"max excess {(err - bound).max()}"
    d = kernel.tuning_log[-1]
    assert d.key[:3] == (M, N, K) and d.backend == backend
    assert kernel.best_config is d.winner and len(d.timings) == 3
    assert d.timings[min(d.timings, key=d.timings.get)] == min(d.timings.values())
