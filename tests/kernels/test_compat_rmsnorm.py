"""An RMSNorm forward written the way Liger-Kernel and unsloth write theirs, run
unchanged on both backends against float64 numpy (issue 10: families 1, 2, 3, 11).

One program normalizes a few rows (``row_end = min(...)``, as Liger's backward
splits rows); ``BLOCK_SIZE`` is the next power of two of the row length, so the tail
lanes are masked off and loaded *without* ``other`` (they must read zero: the row sums
run over the whole tile); the weight pointer is required, the bias pointer is optional
(``None`` at launch, tested with ``is None`` / ``is not None``); the compute dtype is
chosen from the input's dtype object (``X.dtype.element_ty.is_fp64()``), as published
kernels do. Every row of the input holds NaN past its end, so a lane read out of bounds
shows up, and every output is poisoned before the launch.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as tl

from ..conftest import poison


@mutile.jit
def _rms_norm_fwd(Y, Y_row_stride, X, X_row_stride, W, B, RSTD, n_rows, n_cols, eps,
                  offset: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr,
                  BLOCK_SIZE: tl.constexpr):
    row_start = tl.program_id(0) * ROWS_PER_PROGRAM
    row_end = min(row_start + ROWS_PER_PROGRAM, n_rows)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    if X.dtype.element_ty.is_fp64():
        compute_dtype: tl.constexpr = tl.float64
    else:
        compute_dtype: tl.constexpr = tl.float32
    W_row = tl.load(W + col_offsets, mask=mask).to(compute_dtype)
    if B is None:
        b_row = 0.0
    else:
        b_row = tl.load(B + col_offsets, mask=mask).to(compute_dtype)
    for row in range(row_start, row_end):
        X_row = tl.load(X + row * X_row_stride + col_offsets, mask=mask)   # no `other`
        x = X_row.to(compute_dtype)
        mean_square = tl.sum(x * x, axis=0) / max(n_cols, 1)
        rstd = tl.rsqrt(mean_square + eps)
        tl.store(RSTD + row, rstd.to(tl.float32))
        y = x * rstd * (offset + W_row)
        if B is not None:
            y = y + b_row
        tl.store(Y + row * Y_row_stride + col_offsets, y.to(X_row.dtype), mask=mask)


def next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def rms_norm(x, w, b=None, eps=1e-6, offset=0.0, rows_per_program=2, backend=None):
    """Host wrapper, as the libraries write theirs: strides in elements, one launch."""
    n_rows, n_cols = x.shape
    y = poison(x.shape, x.dtype)
    rstd = poison(n_rows, np.float32)
    grid = (-(-n_rows // rows_per_program),)
    _rms_norm_fwd[grid](y, y.strides[0] // y.itemsize, x, x.strides[0] // x.itemsize, w, b,
                        rstd, n_rows, n_cols, eps, offset=offset,
                        ROWS_PER_PROGRAM=rows_per_program,
                        BLOCK_SIZE=next_power_of_2(n_cols), backend=backend)
    return y, rstd


def reference(x, w, b, eps, offset):
    x64 = x.astype(np.float64)
    rstd = 1.0 / np.sqrt((x64 * x64).mean(axis=1) + eps)
    y = x64 * rstd[:, None] * (offset + w.astype(np.float64))
    return (y if b is None else y + b.astype(np.float64)), rstd


# the rounding of one result: the output dtype's (f32 results also carry the f32
# computation's error: a 96-term sum, an rsqrt and two products)
TOL = {np.float32: 2.0 ** -24 * 160, np.float16: 2.0 ** -11 * 1.25,
       ml_dtypes.bfloat16: 2.0 ** -8 * 1.25, np.float64: 2.0 ** -53 * 200}


@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_rms_norm_forward(dtype, with_bias, rng, backend):
    n_rows, n_cols, padded = 7, 96, 128            # 96 of 128 lanes; rows padded with NaN
    buf = np.full((n_rows, padded), np.nan, dtype)
    buf[:, :n_cols] = (rng.standard_normal((n_rows, n_cols)) * 2).astype(dtype)
    x = buf[:, :n_cols]                            # a strided view: row stride 128
    w = (1 + 0.1 * rng.standard_normal(n_cols)).astype(dtype)
    b = (0.5 * rng.standard_normal(n_cols)).astype(dtype) if with_bias else None
    eps, offset = 1e-6, (1.0 if dtype is np.float16 else 0.0)   # Gemma's "1 + w" form too
    y, rstd = rms_norm(x, w, b, eps, offset, backend=backend)
    want_y, want_rstd = reference(x, w, b, eps, offset)
    assert np.isfinite(y.astype(np.float64)).all() and np.isfinite(rstd).all()
    tol = TOL[dtype]
    err = np.abs(y.astype(np.float64) - want_y)
    bound = tol * (np.abs(want_y) + (np.abs(b.astype(np.float64)) if with_bias else 0)) + tol
    assert (err <= bound).all(), f"max error {err.max()} (bound {bound.max()})"
    rstd_bound = 2.0 ** -24 * 160 * want_rstd
    assert (np.abs(rstd - want_rstd) <= rstd_bound).all()


def test_none_bias_and_an_array_bias_are_two_kernels(rng, backend):
    """The same launch with and without the bias: two specializations, both right."""
    x = rng.standard_normal((3, 40)).astype(np.float32)
    w = np.ones(40, np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    y0, _ = rms_norm(x, w, None, backend=backend)
    y1, _ = rms_norm(x, w, b, backend=backend)
    want0, _ = reference(x, w, None, 1e-6, 0.0)
    np.testing.assert_allclose(y0, want0, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(y1 - y0, np.broadcast_to(b, x.shape), rtol=1e-5, atol=1e-5)
