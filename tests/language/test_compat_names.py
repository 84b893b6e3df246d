"""The small names of ``triton.language`` that ``mutile/language/compat.py`` adds:
``TRITON_MAX_TENSOR_NUMEL``, ``add``, ``load_tensor_descriptor``/``store_tensor_descriptor``,
``tensor_descriptor``, ``tensor``, ``block_type``, ``pi32_t``, ``constexpr_function``,
``tuple`` and ``void``, on both backends against numpy, outputs poisoned."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import poison


@ml.constexpr_function
def _half(n):
    return n // 2


@mutile.jit
def add_kernel(X, Y, Z, N, BLOCK: ml.constexpr):
    ml.static_assert(BLOCK <= ml.TRITON_MAX_TENSOR_NUMEL)
    offs = ml.arange(0, BLOCK)
    m = offs < N
    x = ml.load(X + offs, mask=m)
    ml.static_assert(isinstance(x, ml.tensor))
    ml.static_assert(isinstance(x.type, ml.block_type))
    ml.static_assert(x.type == ml.block_type(X.dtype.element_ty, [BLOCK]))
    z = ml.add(x, ml.load(ml.add(Y, offs), mask=m), sanitize_overflow=False)
    ml.store(Z + offs, z, mask=m)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_add_and_type_names(dtype, rng, backend):
    n = 13
    x = (rng.standard_normal(n) * 50).astype(dtype)
    y = (rng.standard_normal(n) * 50).astype(dtype)
    z = poison(n, dtype)
    add_kernel[(1,)](x, y, z, n, BLOCK=16, backend=backend)
    ref = x.astype(np.float64) + y.astype(np.float64)
    if dtype == np.int32:
        assert (z == (x + y)).all()         # int32 addition, exact (no wrap at this size)
    else:                                   # one rounding of the exact sum to dtype
        assert np.array_equal(z, ref.astype(dtype))


@mutile.jit
def desc_copy(X, Y, R, C, BR: ml.constexpr, BC: ml.constexpr):
    dx = ml.make_tensor_descriptor(X, [R, C], [C, 1], [BR, BC])
    dy = ml.make_tensor_descriptor(Y, [R, C], [C, 1], [BR, BC])
    ml.static_assert(isinstance(dx, ml.tensor_descriptor))
    i = ml.program_id(0)
    j = ml.program_id(1)
    blk = ml.load_tensor_descriptor(dx, [i * BR, j * BC])
    ml.store_tensor_descriptor(dy, [i * BR, j * BC], blk * 2.0)


def test_descriptor_functions(rng, backend):
    r, c = 16, 24
    x = rng.standard_normal((r, c)).astype(np.float32)
    y = poison((r, c), np.float32)
    desc_copy[(2, 3)](x, y, r, c, BR=8, BC=8, backend=backend)
    assert np.array_equal(y, x * 2.0)


@mutile.jit
def count_kernel(P, OUT, N, BLOCK: ml.constexpr):
    ml.static_assert(P.dtype == ml.pi32_t)
    HALF: ml.constexpr = _half(BLOCK)
    offs = ml.arange(0, HALF)
    pair = ml.tuple((HALF, BLOCK))
    v = ml.load(P + offs, mask=offs < N)
    ml.store(OUT + offs, v * pair[1] + pair[0], mask=offs < N)


def test_pointer_type_constexpr_function_and_tuple(rng, backend):
    p = rng.integers(-100, 100, 8).astype(np.int32)
    out = poison(8, np.int32)
    count_kernel[(1,)](p, out, 8, BLOCK=16, backend=backend)
    assert (out == p * 16 + 8).all()


def test_void_and_the_type_objects():
    assert ml.void.is_void() and repr(ml.void) == "ml.void"
    assert ml.pi32_t == ml.pointer_type(ml.int32)
    t = ml.block_type(ml.float16, [4, 8])
    assert isinstance(t, ml.block_type) and not isinstance(ml.float16, ml.block_type)
    assert t.element_ty == ml.float16 and t.get_block_shapes() == (4, 8)
    assert ml.constexpr_function(_plain) is _plain


@mutile.jit
def uses_tuple_on_tensors(X):
    x = ml.load(X)
    ml.tuple((x, x))  # TUPLE


def test_tuple_of_tensors_is_refused_at_the_line(backend):
    with pytest.raises(mutile.CompilationError) as e:
        uses_tuple_on_tensors.warmup(np.zeros(1, np.float32), grid=(1,), backend=backend)
    assert "ml.tuple((x, x))  # TUPLE" in str(e.value) and "tuple" in str(e.value)


def _plain(n):
    return n


@mutile.jit
def casts_to(X, Y, DT: ml.constexpr):
    ml.store(Y, ml.load(X).to(DT))  # CAST


@pytest.mark.parametrize("name", ["float8e4b15", "float8e4b8", "float8e5b16"])
def test_refused_fp8_dtypes_fail_at_the_call(name, backend):
    dt = getattr(ml, name)
    assert dt != ml.float8e4nv and repr(dt) == f"ml.{name}"
    with pytest.raises(mutile.CompilationError) as e:
        casts_to.warmup(np.zeros(1, np.float32), np.zeros(1, np.float32), DT=dt, grid=(1,),
                        backend=backend)
    text = str(e.value)
    assert f"mutile does not support tl.{name}" in text and "# CAST" in text, text


@mutile.jit
def casts_to_e4b8(X, Y):
    ml.store(Y, ml.load(X).to(ml.float8e4b8))  # DIRECT


def test_a_refused_dtype_named_in_the_kernel_fails_at_the_call(backend):
    with pytest.raises(mutile.CompilationError) as e:
        casts_to_e4b8.warmup(np.zeros(1, np.float32), np.zeros(1, np.float32), grid=(1,),
                             backend=backend)
    assert "mutile does not support tl.float8e4b8" in str(e.value) and "# DIRECT" in str(e.value)


@mutile.jit
def or_rows(X, Y, BR: ml.constexpr, BC: ml.constexpr):
    offs = ml.arange(0, BR)[:, None] * BC + ml.arange(0, BC)[None, :]
    ml.store(Y + ml.arange(0, BR), ml.reduce_or(ml.load(X + offs), 1))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64])
def test_reduce_or(dtype, rng, backend):
    x = rng.integers(0, 1 << 7, (4, 8)).astype(dtype) << rng.integers(0, 3, (4, 8)).astype(dtype)
    y = poison(4, dtype)
    or_rows[(1,)](x, y, BR=4, BC=8, backend=backend)
    assert (y == np.bitwise_or.reduce(x, axis=1)).all()


@mutile.jit
def box_muller(U1, U2, N1, N2, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    n1, n2 = ml.pair_uniform_to_normal(ml.load(U1 + offs), ml.load(U2 + offs))
    ml.store(N1 + offs, n1)
    ml.store(N2 + offs, n2)


def test_pair_uniform_to_normal(rng, backend):
    u1 = rng.random(64).astype(np.float32)
    u2 = rng.random(64).astype(np.float32)
    n1, n2 = poison(64, np.float32), poison(64, np.float32)
    box_muller[(1,)](u1, u2, n1, n2, BLOCK=64, backend=backend)
    r = np.sqrt(-2.0 * np.log(np.maximum(u1.astype(np.float64), 1e-7)))
    t = 2.0 * np.pi * u2.astype(np.float64)
    # f32 log, sqrt, sin/cos: a few ulp of r (r < 6), stated generously
    assert np.allclose(n1, r * np.cos(t), rtol=0, atol=1e-5 * (r + 1))
    assert np.allclose(n2, r * np.sin(t), rtol=0, atol=1e-5 * (r + 1))
