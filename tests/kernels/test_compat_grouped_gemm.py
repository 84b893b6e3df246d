"""A grouped GEMM written the way Triton's tutorial 08 ("grouped GEMM") writes it, run on
both backends against float64 numpy (issue 10, family 8).

The kernel is persistent: ``NUM_SM`` programs walk the tiles of every group in turn (a
``for`` over groups around a ``while`` over this program's tiles). Each group's matrix
addresses come from int64 arrays and become pointers with
``tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))``; its M, N, K and leading
dimensions come from int32 arrays. fp16 inputs, f32 accumulation, fp16 output. The host
passes the address arrays as :class:`mutile.AddressTable` (Triton's tutorial builds them
from ``t.data_ptr()``), so the accesses are bounds-checked against the member matrices on
both backends. The shapes are multiples of the blocks, as the published kernel (no masks)
requires; a C matrix is a view with a leading dimension wider than N, so ``ldc`` matters.

Tolerance: the products of fp16 values are exact in f32 and the K sums (K <= 48) are
rounded in f32, so the f32 accumulator is within about 48 * 2**-24 (relative to the sum
of |a||b|) of the float64 result; the fp16 output then adds half an fp16 ulp. The check
is ``|c - ref| <= 2**-10 * |ref| + 1e-5 * sum|a||b|`` elementwise.
"""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as tl

from ..conftest import poison


@mutile.jit
def grouped_matmul_kernel(
    # device tensor of matrices pointers
    group_a_ptrs,
    group_b_ptrs,
    group_c_ptrs,
    # device tensor of gemm sizes. its shape is [group_size, 3]
    # dim 0 is group_size, dim 1 is the values of <M, N, K> of each gemm
    group_gemm_sizes,
    # device tensor of leading dimension sizes. its shape is [group_size, 3]
    # dim 0 is group_size, dim 1 is the values of <lda, ldb, ldc> of each gemm
    g_lds,
    # number of gemms
    group_size,
    # number of virtual SM
    NUM_SM: tl.constexpr,
    # tile sizes
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        # get the gemm size of the current problem
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = num_m_tiles * num_n_tiles
        # iterate through the tiles in the current gemm problem
        while (tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles):
            # pick up a tile from the current gemm problem
            k = gk
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float16))
            # figure out tile coordinates
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles

            # do regular gemm here
            offs_am = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):
                # hint to Triton compiler to do proper loop pipelining
                tl.multiple_of(a_ptrs, [16, 16])
                tl.multiple_of(b_ptrs, [16, 16])
                # assume full tile for now
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
                accumulator += tl.dot(a, b)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c = accumulator.to(tl.float16)

            offs_cm = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + ldc * offs_cm[:, None] + offs_cn[None, :]

            # assumes full tile for now
            tl.store(c_ptrs, c)

            # go to the next tile by advancing NUM_SM
            tile_idx += NUM_SM

        # get ready to go to the next gemm problem
        last_problem_end = last_problem_end + num_tiles


BLOCK = 16
NUM_SM = 4
SHAPES = [(32, 16, 48), (16, 48, 32), (48, 32, 16)]      # (M, N, K) per group


def _row_stride(t) -> int:
    """Elements between rows (numpy arrays and torch tensors)."""
    return t.stride(0) if callable(getattr(t, "stride", None)) else t.strides[0] // t.itemsize


def group_gemm(a_list, b_list, c_list, backend, num_sm=NUM_SM):
    """The tutorial's host function, with AddressTables for the pointer arrays."""
    sizes, lds = [], []
    for a, b, c in zip(a_list, b_list, c_list):
        (m, k), (_, n) = a.shape, b.shape
        sizes += [m, n, k]
        lds += [_row_stride(a), _row_stride(b), _row_stride(c)]
    grouped_matmul_kernel[(num_sm,)](
        mutile.AddressTable(a_list), mutile.AddressTable(b_list), mutile.AddressTable(c_list),
        np.array(sizes, np.int32), np.array(lds, np.int32), len(a_list), NUM_SM=num_sm,
        BLOCK_SIZE_M=BLOCK, BLOCK_SIZE_N=BLOCK, BLOCK_SIZE_K=BLOCK, backend=backend)


def _inputs(rng):
    a_list = [rng.standard_normal((m, k)).astype(np.float16) for m, _, k in SHAPES]
    b_list = [rng.standard_normal((k, n)).astype(np.float16) for _, n, k in SHAPES]
    return a_list, b_list


def _check(c, a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    scale = np.abs(a64) @ np.abs(b64)
    err = np.abs(c.astype(np.float64) - ref)
    bound = 2.0 ** -10 * np.abs(ref) + 1e-5 * scale
    assert (err <= bound).all(), f"max excess {(err - bound).max()}"


def test_grouped_gemm(rng, backend):
    a_list, b_list = _inputs(rng)
    # C of group 1 lives in a wider buffer: ldc = N + 16, the padding stays poisoned
    wide = poison((SHAPES[1][0], SHAPES[1][1] + 16), np.float16)
    c_list = [poison((SHAPES[0][0], SHAPES[0][1]), np.float16), wide[:, :SHAPES[1][1]],
              poison((SHAPES[2][0], SHAPES[2][1]), np.float16)]
    group_gemm(a_list, b_list, c_list, backend)
    for c, a, b in zip(c_list, a_list, b_list):
        _check(c, a, b)
    assert np.isnan(wide[:, SHAPES[1][1]:]).all()


def test_grouped_gemm_checks_each_member(rng, backend):
    """A C matrix smaller than its group's M x N: the store past its end faults on both
    backends, naming the AddressTable member, before any element lands outside it."""
    a_list, b_list = _inputs(rng)
    short = poison((SHAPES[2][0] - BLOCK, SHAPES[2][1]), np.float16)     # 32 of 48 rows
    c_list = [poison((m, n), np.float16) for m, n, _ in SHAPES[:2]] + [short]
    sizes = np.array([v for m, n, k in SHAPES for v in (m, n, k)], np.int32)
    lds = np.array([v for m, n, k in SHAPES for v in (k, n, n)], np.int32)
    with pytest.raises(mutile.DeviceFault) as info:
        grouped_matmul_kernel[(1,)](
            mutile.AddressTable(a_list), mutile.AddressTable(b_list),
            mutile.AddressTable(c_list), sizes, lds, 3, NUM_SM=1, BLOCK_SIZE_M=BLOCK,
            BLOCK_SIZE_N=BLOCK, BLOCK_SIZE_K=BLOCK, backend=backend)
    msg = str(info.value)
    assert "array 2 of AddressTable 'group_c_ptrs'" in msg, msg
    assert "tl.store(c_ptrs, c)" in msg, msg


def test_grouped_gemm_torch_tensors(rng, backend):
    """torch CPU tensors in the tables, as the tutorial's host code holds them; on llvm
    with the checks off, also the tutorial's own int64 tensor of ``t.data_ptr()``."""
    torch = pytest.importorskip("torch")
    a_np, b_np = _inputs(rng)
    a_list = [torch.from_numpy(a) for a in a_np]
    b_list = [torch.from_numpy(b) for b in b_np]
    c_list = [torch.full((m, n), float("nan"), dtype=torch.float16) for m, n, _ in SHAPES]
    group_gemm(a_list, b_list, c_list, backend)
    for c, a, b in zip(c_list, a_np, b_np):
        _check(c.numpy(), a, b)
    if backend != "llvm":
        return
    for c in c_list:
        c.fill_(float("nan"))
    addrs = [torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)
             for ts in (a_list, b_list, c_list)]
    sizes = torch.tensor([v for m, n, k in SHAPES for v in (m, n, k)], dtype=torch.int32)
    lds = torch.tensor([v for m, n, k in SHAPES for v in (k, n, n)], dtype=torch.int32)
    grouped_matmul_kernel[(NUM_SM,)](*addrs, sizes, lds, 3, NUM_SM=NUM_SM, BLOCK_SIZE_M=BLOCK,
                                     BLOCK_SIZE_N=BLOCK, BLOCK_SIZE_K=BLOCK, backend=backend,
                                     check_bounds=False)
    for c, a, b in zip(c_list, a_np, b_np):
        _check(c.numpy(), a, b)
