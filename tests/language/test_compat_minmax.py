"""Python's ``min``/``max`` in kernels, as Triton has them (issue 10, family 1).

On compile-time values they fold at compile time (an ``int`` and a ``float`` meet as a
``float``; NaN loses to a number); once a tensor takes part they are
``ml.minimum``/``ml.maximum`` (scalars and tiles, weak Python numbers, broadcasting).
Checked against numpy on both backends: the grouped program ordering of Triton's
matmul tutorial (``group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)``), tiles
of every kind of dtype, three and more arguments, and the calls Triton rejects.
"""
from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import assert_bits_equal, marked, poison, random_data


# ---------------------------------------------------------------- scalars: the matmul swizzle
@mutile.jit
def grouped_order(PM, PN, M, N, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                  GROUP_SIZE_M: ml.constexpr):
    """Where each program of Triton's grouped matmul lands (tutorial 03, verbatim)."""
    pid = ml.program_id(axis=0)
    num_pid_m = ml.cdiv(M, BLOCK_M)
    num_pid_n = ml.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    ml.store(PM + pid, pid_m)
    ml.store(PN + pid, pid_n)


def grouped_reference(M, N, bm, bn, g):
    npm, npn = -(-M // bm), -(-N // bn)
    pm, pn = [], []
    for pid in range(npm * npn):
        first = pid // (g * npn) * g
        size = min(npm - first, g)
        pm.append(first + (pid % (g * npn)) % size)
        pn.append((pid % (g * npn)) // size)
    return np.array(pm, np.int32), np.array(pn, np.int32)


@pytest.mark.parametrize("M,N,group", [(200, 70, 3), (64, 300, 8)])
def test_grouped_program_order(M, N, group, backend):
    bm, bn = 32, 16
    want_m, want_n = grouped_reference(M, N, bm, bn, group)
    pm, pn = poison(want_m.size, np.int32), poison(want_n.size, np.int32)
    grouped_order[(want_m.size,)](pm, pn, M, N, BLOCK_M=bm, BLOCK_N=bn, GROUP_SIZE_M=group,
                                  backend=backend)
    assert_bits_equal(pm, want_m, "pid_m")
    assert_bits_equal(pn, want_n, "pid_n")
    # every output tile is visited once
    assert len(set(zip(pm.tolist(), pn.tolist()))) == want_m.size


# ---------------------------------------------------------------- tiles
@mutile.jit
def tile_minmax(X, Y, Z, O, s, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    y = ml.load(Y + offs)
    z = ml.load(Z + offs)
    n = BLOCK * ml.num_programs(0)
    r0 = min(x, y)
    r1 = max(x, y)
    r2 = min(x, y, z)                # folds left: minimum(minimum(x, y), z)
    r3 = max(z, 1, x)                # a weak Python number in the middle
    r4 = max(min(x, s), y)           # a runtime scalar broadcast over the tile
    ml.static_assert(r0.dtype == x.dtype, "min keeps the operands' dtype")
    ml.store(O + offs, r0)
    ml.store(O + n + offs, r1)
    ml.store(O + 2 * n + offs, r2)
    ml.store(O + 3 * n + offs, r3)
    ml.store(O + 4 * n + offs, r4)


DTYPES = [np.float32, np.float16, np.float64, np.int8, np.int32, np.uint16, np.int64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_tiles(dtype, rng, backend):
    """Elementwise on tiles like ``ml.minimum``: NaN loses to a number (fmin/fmax)."""
    n, block = 128, 32
    x, y, z = (random_data(dtype, n, rng) for _ in range(3))
    s = 3 if np.dtype(dtype).kind in "iu" else 0.25
    o = poison((5, n), dtype)
    tile_minmax[(n // block,)](x, y, z, o, s, BLOCK=block, backend=backend)
    is_float = np.dtype(dtype).kind == "f"
    # the reference: float64 for floats, exact integers (object arrays) for integers
    x64, y64, z64 = (a.astype(np.float64 if is_float else object) for a in (x, y, z))
    lo, hi = (np.fmin, np.fmax) if is_float else (np.minimum, np.maximum)
    want = [lo(x64, y64), hi(x64, y64), lo(lo(x64, y64), z64), hi(hi(z64, 1), x64),
            hi(lo(x64, s), y64)]
    for i, w in enumerate(want):
        got = o[i] + dtype(0) if is_float else o[i]       # -0 and +0 may come out either way
        assert_bits_equal(got, w.astype(dtype) + (dtype(0) if is_float else 0),
                          f"{np.dtype(dtype).name} result {i}")


@mutile.jit
def mixed_scalars(X, O, a, b):
    x = ml.load(X)                  # f16 scalar
    ml.store(O + 0, min(a, b))      # i32 runtime scalars
    ml.store(O + 1, max(a, 2.5))    # i32 with a float: f32
    ml.store(O + 2, min(x, b))      # f16 with i32: f16 (Triton's promotion)
    ml.store(O + 3, max(a, b, 0, -7))
    ml.static_assert(max(a, 2.5).dtype == ml.float32)
    ml.static_assert(min(x, b).dtype == ml.float16)


def test_mixed_runtime_scalars(backend):
    x = np.array([1.5], np.float16)
    o = poison(4, np.float32)
    mixed_scalars[(1,)](x, o, -4, 3, backend=backend)
    np.testing.assert_array_equal(o, [-4.0, 2.5, 1.5, 3.0])


# ---------------------------------------------------------------- compile time
@mutile.jit
def static_minmax(O, A: ml.constexpr, B: ml.constexpr, C: ml.constexpr):
    lo = min(A, B)
    hi = max(A, B, C)
    pair = min((A, C))                  # a compile-time tuple
    ml.static_assert(isinstance(min(1, 2), int) and isinstance(min(1, 2.0), float))
    ml.static_assert(isinstance(max(True, False), bool))
    ml.static_assert(min(float("nan"), 1.0) == 1.0 and max(1.0, float("nan")) == 1.0)
    ml.static_assert(math.copysign(1.0, min(0.0, -0.0)) == -1.0)
    ml.static_assert(math.copysign(1.0, max(-0.0, 0.0)) == 1.0)
    block: ml.constexpr = max(A, 16)    # usable where a constexpr is required
    offs = ml.arange(0, block)
    ml.store(O + offs, ml.full([block], lo, ml.float32))
    ml.store(O + block + 0, hi)
    ml.store(O + block + 1, pair)


@pytest.mark.parametrize("a,b,c", [(3, 20, 7), (32, 5, 2.5)])
def test_compile_time_values(a, b, c, backend):
    block = max(a, 16)
    o = poison(block + 2, np.float32)
    static_minmax[(1,)](o, a, b, c, backend=backend)
    np.testing.assert_array_equal(o[:block], np.full(block, min(a, b), np.float32))
    assert o[block] == max(a, b, c) and o[block + 1] == min(a, c)


def test_compile_time_result_is_not_a_tensor(compile_ir):
    """Two constexprs fold: no min/max op is emitted."""
    c = compile_ir(static_minmax, O=T.PointerType(T.f32), A=3, B=20, C=7)
    assert "min" not in c.names() and "max" not in c.names()


# ---------------------------------------------------------------- what Triton rejects
@mutile.jit
def k_one_tile(X):
    x = ml.load(X + ml.arange(0, 16))
    ml.store(X, min(x))  # LINE-MARK: min(x)


@mutile.jit
def k_keyword(X):
    x = ml.load(X)
    ml.store(X, max(x, 1.0, key=None))  # LINE-MARK: max(


@mutile.jit
def k_pointer(X):
    ml.store(X, min(X, X + 1))  # LINE-MARK: min(


@mutile.jit
def k_string(X):
    x = ml.load(X)
    ml.store(X, min(x, "a"))  # LINE-MARK: min(


@mutile.jit
def k_none(X, B):
    x = ml.load(X)
    ml.store(X, max(x, B))  # LINE-MARK: max(


@mutile.jit
def k_no_args(X):
    ml.store(X, min())  # LINE-MARK: min(


@pytest.mark.parametrize("kernel,pattern", [
    (k_one_tile, r"min\(\) of one tile: use ml.min\(x, axis\)"),
    (k_keyword, r"max\(\) in a kernel takes no keyword arguments \(got key\)"),
    (k_pointer, r"not defined on pointers"),
    (k_string, r"cannot combine a tensor with the compile-time value 'a'"),
    (k_none, r"cannot combine a tensor with the compile-time value None"),
    (k_no_args, r"min\(\) needs at least one value"),
], ids=["one-tile", "keyword", "pointer", "string", "None", "no-args"])
def test_rejected_calls_point_at_the_line(kernel, pattern):
    spec = {"X": T.PointerType(T.f32)}
    if "B" in kernel.params:
        spec["B"] = None
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, spec, {}, verify=True)
    e, m = info.value, marked(kernel)
    assert re.search(pattern, e.msg), e.msg
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert "pybuiltins.py" not in str(e) and "semantic.py" not in str(e)


def test_bfloat16_tiles(rng, backend):
    """min of two bf16 tiles (exact in bf16). Triton's minimum returns float32 for bf16
    operands; mutile's ``ml.minimum``, and so ``min``, keeps bfloat16 (same values)."""
    n = 64
    x = random_data(ml_dtypes.bfloat16, n, rng, specials=False)
    y = random_data(ml_dtypes.bfloat16, n, rng, specials=False)
    o = poison((5, n), ml_dtypes.bfloat16)
    z = random_data(ml_dtypes.bfloat16, n, rng, specials=False)
    tile_minmax[(2,)](x, y, z, o, 0.25, BLOCK=32, backend=backend)
    want = np.minimum(x.astype(np.float64), y.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert_bits_equal(o[0], want, "bf16 min")
