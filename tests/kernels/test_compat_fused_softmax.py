"""Triton's fused-softmax tutorial (02) as it is written today: a persistent kernel over rows
(``tl.range(row_start, n_rows, row_step, num_stages=)``), and host code that sizes the grid
from ``kernel.warmup(...)``'s ``n_regs`` and ``metadata.shared`` and the device's
``max_num_regs`` / ``max_shared_mem`` / ``multiprocessor_count`` / ``warpSize`` (mutile's
names; ``triton.runtime.driver`` under :func:`mutile.as_triton` is the same object). The
host code needs the pinghu backend: the llvm backend has no registers or shared memory to
report (0), and the tutorial divides by both. Against float64 numpy, output poisoned."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as tl
from mutile.compat.driver import driver

from ..conftest import poison


@mutile.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)


def softmax(x, backend):
    """The tutorial's host function (its numbers from the driver and the compiled kernel)."""
    properties = driver.active.utils.get_device_properties(0)
    NUM_SM = properties["multiprocessor_count"]
    NUM_REGS = properties["max_num_regs"]
    SIZE_SMEM = properties["max_shared_mem"]
    WARP_SIZE = properties["warpSize"]
    n_rows, n_cols = x.shape
    BLOCK_SIZE = mutile.next_power_of_2(n_cols)
    num_warps = 8
    num_stages = 4 if SIZE_SMEM > 200000 else 2
    y = poison(x.shape, x.dtype)
    kernel = softmax_kernel.warmup(y, x, x.strides[0] // x.itemsize, y.strides[0] // y.itemsize,
                                   n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_stages=num_stages,
                                   num_warps=num_warps, grid=(1,), backend=backend)
    kernel._init_handles()
    n_regs = kernel.n_regs
    size_smem = kernel.metadata.shared
    occupancy = NUM_REGS // (n_regs * WARP_SIZE * num_warps)
    occupancy = min(occupancy, SIZE_SMEM // size_smem)
    num_programs = min(NUM_SM * occupancy, n_rows)
    kernel[(num_programs, 1, 1)](y, x, x.strides[0] // x.itemsize, y.strides[0] // y.itemsize,
                                 n_rows, n_cols, BLOCK_SIZE, num_stages)
    return y, kernel, num_programs


def test_the_tutorial_host_code_sizes_a_persistent_grid(rng):
    x = rng.standard_normal((37, 81)).astype(np.float32)
    y, kernel, num_programs = softmax(x, "pinghu")
    assert kernel.n_regs > 0 and kernel.metadata.shared > 0 and kernel.n_spills >= 0
    assert 1 <= num_programs <= 37
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    # f32: exp within a few ulp, a sum of 81 terms, one division
    assert np.allclose(y, ref, rtol=1e-5, atol=1e-7)


def test_the_metadata_names_published_host_code_reads(rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    y = poison(x.shape, np.float32)
    for backend in ("llvm", "pinghu"):
        k = softmax_kernel.warmup(y, x, 16, 16, 4, 16, BLOCK_SIZE=16, num_stages=2, num_warps=4,
                                  grid=(1,), backend=backend)
        assert k.metadata.num_warps == 4 and k.metadata["num_warps"] == 4
        assert k.metadata.name == "softmax_kernel"
        with pytest.raises(AttributeError, match="no 'n_sm'"):
            k.metadata.n_sm
        if backend == "llvm":                       # no register file, no shared memory
            assert (k.n_regs, k.n_spills, k.metadata.shared) == (0, 0, 0)
        else:
            assert k.n_regs == k.metadata["registers_per_thread"] > 0
            assert k.metadata.shared == k.metadata["shared_bytes"]
