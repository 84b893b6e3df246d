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
from ..ir import exact_fp as X


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


@pytest.mark.parametrize("name", ["float8e4b15"])
def test_refused_fp8_dtypes_fail_at_the_call(name, backend):
    dt = getattr(ml, name)
    assert dt != ml.float8e4nv and repr(dt) == f"ml.{name}"
    with pytest.raises(mutile.CompilationError) as e:
        casts_to.warmup(np.zeros(1, np.float32), np.zeros(1, np.float32), DT=dt, grid=(1,),
                        backend=backend)
    text = str(e.value)
    assert f"mutile does not support tl.{name}" in text and "# CAST" in text, text


@mutile.jit
def casts_to_e4b15(X, Y):
    ml.store(Y, ml.load(X).to(ml.float8e4b15))  # DIRECT


def test_a_refused_dtype_named_in_the_kernel_fails_at_the_call(backend):
    with pytest.raises(mutile.CompilationError) as e:
        casts_to_e4b15.warmup(np.zeros(1, np.float32), np.zeros(1, np.float32), grid=(1,),
                              backend=backend)
    assert "mutile does not support tl.float8e4b15" in str(e.value) and "# DIRECT" in str(e.value)


@mutile.jit
def to_fnuz(X, Y4, Y5, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    ml.static_assert(ml.float8e4b8.is_fp8e4b8() and ml.float8e5b16.is_fp8e5b16())
    ml.store(Y4 + offs, x.to(ml.float8e4b8))
    ml.store(Y5 + offs, x.to(ml.float8e5b16))


def test_fnuz_fp8_conversions(rng, backend):
    """float32 -> float8e4b8 / float8e5b16 (ml_dtypes' e4m3fnuz / e5m2fnuz), bit for bit
    against the exact oracle: ties, overflow to the one NaN (0x80), no -0."""
    n = 256
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 18, n))).astype(np.float32)
    x[:10] = [248.0, 247.0, -1e6, 61440.0, 57344.0, -2.0 ** -12, -0.0, np.nan, np.inf, 1.0625]
    y4, y5 = poison(n, ml.float8e4b8), poison(n, ml.float8e5b16)
    to_fnuz[(1,)](x, y4, y5, BLOCK=n, backend=backend)
    for got, name in ((y4, "f8e4b8"), (y5, "f8e5b16")):
        want = X.convert(x, "f32", name)
        assert got.dtype == want.dtype
        assert (got.view(np.uint8) == want.view(np.uint8)).all(), name
        assert (got.view(np.uint8) != 0x80).sum() > n // 2, name     # mostly numbers


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


@mutile.jit
def dot_fnuz(X, Y, DT: ml.constexpr):
    offs = ml.arange(0, 16)[:, None] * 16 + ml.arange(0, 16)[None, :]
    a = ml.load(X + offs).to(DT)
    ml.store(Y + offs, ml.dot(a, a))  # FNUZ DOT


@pytest.mark.parametrize("name", ["float8e4b8", "float8e5b16"])
def test_dot_on_fnuz_fp8_is_refused(name, backend):
    x = np.zeros(256, np.float32)
    with pytest.raises(mutile.CompilationError) as e:
        dot_fnuz.warmup(x, x, DT=getattr(ml, name), grid=(1,), backend=backend)
    text = str(e.value)
    assert "# FNUZ DOT" in text and f"ml.{name}" in text and "float16" in text, text


def test_fnuz_types_round_trip_in_ir_text(compile_ir):
    """Every stage's text (``ptr<f8e4b8>``, ``cast {to = f8e5b16}``) parses back equal."""
    c = compile_ir(to_fnuz, X=ml.pointer_type(ml.float32), Y4=ml.pointer_type(ml.float8e4b8),
                   Y5=ml.pointer_type(ml.float8e5b16), BLOCK=64)
    text = c.stages[list(c.stages)[0]]
    assert "ptr<f8e4b8>" in text and "to = f8e5b16" in text, text
