"""``where``, ``minimum``, ``maximum`` and ``clamp`` (with and without
``propagate_nan=ml.PropagateNan.ALL``) on integer and float tiles, NaN included,
against numpy. One kernel per dtype computes all of them."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import assert_bits_equal, poison, put, random_data

N = 256           # elements per test array
TILE = 64         # elements per program (compile time grows with the tile)
GRID = (N // TILE,)
DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.uint32, np.int64]


@mutile.jit
def select_ops(X, Y, LO, HI, C, O, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    y = ml.load(Y + offs)
    lo = ml.load(LO + offs)
    hi = ml.load(HI + offs)
    c = ml.load(C + offs)               # int8: where() takes "!= 0" of a non-bool condition
    put(O, 0, ml.minimum(x, y), BLOCK)
    put(O, 1, ml.maximum(x, y), BLOCK)
    put(O, 2, ml.minimum(x, y, propagate_nan=ml.PropagateNan.ALL), BLOCK)
    put(O, 3, ml.maximum(x, y, propagate_nan=ml.PropagateNan.ALL), BLOCK)
    put(O, 4, ml.clamp(x, lo, hi), BLOCK)
    put(O, 5, ml.clamp(x, lo, hi, propagate_nan=ml.PropagateNan.ALL), BLOCK)
    put(O, 6, ml.where(c, x, y), BLOCK)
    put(O, 7, ml.where(x > y, x, 0), BLOCK)                 # a weak scalar arm
    put(O, 8, ml.where(ml.load(C), x, y), BLOCK)            # a scalar condition, broadcast
    put(O, 9, ml.clamp(x, -3, 5), BLOCK)                   # scalar bounds (weak)
    put(O, 10, ml.minimum(x, 1), BLOCK)


def name(d):
    return np.dtype(d).name


@pytest.mark.parametrize("dtype", DTYPES, ids=name)
def test_where_minimum_maximum_clamp(dtype, rng, backend):
    """Without propagate_nan a NaN operand loses (the number is returned); with
    PropagateNan.ALL a NaN wins. clamp(x, lo, hi) = min(max(x, lo), hi) for lo <= hi.
    Signed zeros may come out either way from min/max, so floats compare after + 0."""
    is_float = np.dtype(dtype).kind not in "iu"
    x = random_data(dtype, N, rng)
    y = random_data(dtype, N, rng)
    if is_float:   # x[:8] is 0, -0, inf, -inf, NaN, tiny, -1, 1: NaN on one side, on both
        y[:8] = np.array([np.nan, 2.0, np.nan, np.inf, np.nan, np.nan, -1.0, 3.0]).astype(dtype)
    a = random_data(dtype, N, rng, specials=False)
    b = random_data(dtype, N, rng, specials=False)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    c = rng.integers(-2, 3, N).astype(np.int8)
    c[0] = 1
    o = poison((11, N), dtype)
    select_ops[GRID](x, y, lo, hi, c, o, BLOCK=TILE, backend=backend)

    def same(got, want, what):
        want = np.asarray(want).astype(dtype)
        if is_float:
            got, want = got + dtype(0), want + dtype(0)
        assert_bits_equal(got, want, f"{name(dtype)} {what}")

    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
    if is_float:
        same(o[0], np.fmin(x64, y64), "minimum")
        same(o[1], np.fmax(x64, y64), "maximum")
        same(o[2], np.minimum(x64, y64), "minimum(ALL)")
        same(o[3], np.maximum(x64, y64), "maximum(ALL)")
        same(o[4], np.fmin(np.fmax(x64, lo64), hi64), "clamp")
        same(o[5], np.minimum(np.maximum(x64, lo64), hi64), "clamp(ALL)")
        same(o[9], np.fmin(np.fmax(x64, -3), 5), "clamp(scalars)")
        same(o[10], np.fmin(x64, 1), "minimum(x, 1)")
    else:
        for slot in (0, 2):
            same(o[slot], np.minimum(x, y), "minimum")
        for slot in (1, 3):
            same(o[slot], np.maximum(x, y), "maximum")
        for slot in (4, 5):
            same(o[slot], np.minimum(np.maximum(x, lo), hi), "clamp")
        signed = np.dtype(dtype).kind == "i"
        lo_s = dtype(-3) if signed else np.array(-3).astype(dtype)   # -3 wraps for unsigned
        same(o[9], np.minimum(np.maximum(x, lo_s), dtype(5)), "clamp(scalars)")
        same(o[10], np.minimum(x, dtype(1)), "minimum(x, 1)")
    same(o[6], np.where(c != 0, x, y), "where")
    same(o[7], np.where(x64 > y64, x, np.array(0).astype(dtype)), "where(.., 0)")
    same(o[8], np.where(c[0] != 0, x, y), "where(scalar cond)")


@mutile.jit
def where_number_arms(X, O, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    w = ml.where(x > 0, 0, -1.0e6)             # an int and a float arm
    put(O, 0, w, BLOCK)                        # put() checks the dtype: float32
    s = ml.load(X + ml.program_id(0))
    put(O, 1, ml.where(s > 0, 1, 0.5) + x * 0, BLOCK)   # a scalar condition, number arms
    put(O, 2, ml.where(x > 0, 3, True).to(ml.float32), BLOCK)   # int and bool: int32


def test_where_with_two_number_arms(rng, backend):
    """As in Triton, two Python-number arms meet at their literals' promoted type:
    ``where(m, 0, -1.0e6)`` is float32 (0 converted), ``where(m, 3, True)`` int32."""
    x = random_data(np.float32, N, rng, specials=False)
    x[0], x[1] = 1.0, -2.0            # program 0's scalar is positive, program 1's not
    o = poison((3, N), np.float32)
    where_number_arms[GRID](x, o, BLOCK=TILE, backend=backend)
    x64 = x.astype(np.float64)
    assert_bits_equal(o[0], np.where(x64 > 0, 0.0, -1.0e6).astype(np.float32), "where(m, 0, -1e6)")
    pick = np.repeat(np.where(x64[:GRID[0]] > 0, 1.0, 0.5), TILE)
    assert_bits_equal(o[1], (pick + x64 * 0).astype(np.float32), "where(s, 1, 0.5)")
    assert_bits_equal(o[2], np.where(x64 > 0, 3.0, 1.0).astype(np.float32), "where(m, 3, True)")
