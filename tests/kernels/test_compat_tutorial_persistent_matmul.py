"""Triton's tutorial 09 ("persistent matmul"), its ``matmul_kernel_persistent`` as the
tutorial writes it — ``_compute_pid``, ``tl.range(start_pid, num_tiles, NUM_SMS,
flatten=True)``, ``@triton.jit(launch_metadata=...)`` under ``@triton.autotune`` keyed on
M, N, K, the host grid ``min(NUM_SMS, tiles)`` — run through ``mutile.as_triton()`` on both
backends against float64 numpy. The configs are cut to small blocks; ``NUM_SMS`` is 4.

Tolerance: fp16 inputs, f32 accumulation (K = 64), fp16 output:
``|c - ref| <= 2**-10 * |ref| + 1e-5 * sum|a||b|``.
"""
from __future__ import annotations

import numpy as np
import pytest

import mutile
from mutile import compat

from ..conftest import poison

NUM_SMS = 4


@pytest.fixture(scope="module")
def tutorial():
    triton = mutile.as_triton()
    import triton.language as tl

    def _matmul_launch_metadata(grid, kernel, args):
        ret = {}
        M, N, K = args["M"], args["N"], args["K"]
        ret["name"] = f"{kernel.name} [M={M}, N={N}, K={K}]"
        ret["flops16"] = 2. * M * N * K
        return ret

    def matmul_get_configs():
        return [
            triton.Config({'BLOCK_SIZE_M': BM, 'BLOCK_SIZE_N': BN, "BLOCK_SIZE_K": BK,
                           "GROUP_SIZE_M": 8}, num_stages=s, num_warps=w)
            for BM in [16, 32]
            for BN in [32]
            for BK in [32]
            for s in ([3])
            for w in [4]
        ]

    @triton.jit
    def _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        return pid_m, pid_n

    @triton.autotune(
        configs=matmul_get_configs(),
        key=["M", "N", "K"],
    )
    @triton.jit(launch_metadata=_matmul_launch_metadata)
    def matmul_kernel_persistent(a_ptr, b_ptr, c_ptr,  #
                                 M, N, K,  #
                                 stride_am, stride_ak,  #
                                 stride_bk, stride_bn,  #
                                 stride_cm, stride_cn,  #
                                 BLOCK_SIZE_M: tl.constexpr,  #
                                 BLOCK_SIZE_N: tl.constexpr,  #
                                 BLOCK_SIZE_K: tl.constexpr,  #
                                 GROUP_SIZE_M: tl.constexpr,  #
                                 NUM_SMS: tl.constexpr,  #
                                 ):
        start_pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
        num_tiles = num_pid_m * num_pid_n

        # NOTE: There is currently a bug in blackwell pipelining that means it can't handle a value being
        # used in both the prologue and epilogue, so we duplicate the counters as a work-around.
        tile_id_c = start_pid - NUM_SMS

        offs_k_for_mask = tl.arange(0, BLOCK_SIZE_K)
        num_pid_in_group = GROUP_SIZE_M * num_pid_n

        for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
            pid_m, pid_n = _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
            start_m = pid_m * BLOCK_SIZE_M
            start_n = pid_n * BLOCK_SIZE_N
            offs_am = start_m + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = start_n + tl.arange(0, BLOCK_SIZE_N)
            offs_am = tl.where(offs_am < M, offs_am, 0)
            offs_bn = tl.where(offs_bn < N, offs_bn, 0)
            offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_SIZE_M), BLOCK_SIZE_M)
            offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_SIZE_N), BLOCK_SIZE_N)

            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for ki in range(k_tiles):
                offs_k = ki * BLOCK_SIZE_K + tl.arange(0, BLOCK_SIZE_K)
                a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
                b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

                a = tl.load(a_ptrs, mask=offs_k_for_mask[None, :] < K - ki * BLOCK_SIZE_K, other=0.0)
                b = tl.load(b_ptrs, mask=offs_k_for_mask[:, None] < K - ki * BLOCK_SIZE_K, other=0.0)
                accumulator = tl.dot(a, b, accumulator)

            tile_id_c += NUM_SMS
            pid_m, pid_n = _compute_pid(tile_id_c, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
            offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
            c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
            c = accumulator.to(tl.float16)
            tl.store(c_ptrs, c, mask=c_mask)

    def matmul_persistent(a, b, backend):
        # Check constraints.
        assert a.shape[1] == b.shape[0], "Incompatible dimensions"
        assert a.dtype == b.dtype, "Incompatible dtypes"
        M, K = a.shape
        K, N = b.shape
        dtype = a.dtype
        # Allocates output.
        c = poison((M, N), dtype)
        # 1D launch kernel where each block gets its own program.
        grid = lambda META: (min(NUM_SMS, triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"])), )
        sa, sb, sc = (tuple(s // x.itemsize for s in x.strides) for x in (a, b, c))
        matmul_kernel_persistent[grid](
            a, b, c,  #
            M, N, K,  #
            *sa,  #
            *sb,  #
            *sc,  #
            NUM_SMS=NUM_SMS,  #
            backend=backend,
        )
        return c

    yield matmul_persistent, matmul_kernel_persistent
    compat.remove_triton()


def test_tutorial_09_persistent_matmul_autotuned(tutorial, rng, backend):
    matmul_persistent, kernel = tutorial
    # more tiles than programs; M and N multiples of the blocks, as the tutorial's sizes
    # are: its max_contiguous hint on the clamped offsets would not hold on a ragged edge
    M, N, K = 96, 64, 80
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = matmul_persistent(a, b, backend)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    bound = 2.0 ** -10 * np.abs(ref) + 1e-5 * (np.abs(a64) @ np.abs(b64))
    err = np.abs(c.astype(np.float64) - ref)
    assert (err <= bound).all(), f"max excess {(err - bound).max()}"
    d = kernel.tuning_log[-1]
    assert d.key[:3] == (M, N, K) and len(d.timings) == 2 and not d.reasons
