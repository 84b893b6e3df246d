"""dtype objects as Triton has them, and ``constexpr`` everywhere Triton accepts it
(issue 10, family 3).

Every predicate and property of Triton's ``dtype`` (``is_fp16()``, ``is_int_signed()``,
``primitive_bitwidth``, ``fp_mantissa_width``, ``get_int_max_value()``, ``is_block()``,
``element_ty``...) answers on every mutile dtype, pointer and tile type as numpy /
ml_dtypes say it must; inside kernels the answers are compile-time values usable in
``if`` and ``static_assert``; dtypes arrive as constexpr arguments from the host and
through nested ``@jit`` calls, where ``DTYPE.value`` is the dtype; ``ml.constexpr``
works as an annotation, as a call in a kernel, on globals and in arithmetic.
This file's annotations are strings (``from __future__ import annotations``).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import marked, poison, random_data

DTYPES = [ml.int1, ml.int8, ml.int16, ml.int32, ml.int64, ml.uint8, ml.uint16, ml.uint32,
          ml.uint64, ml.float8e4nv, ml.float8e5, ml.float8e4b8, ml.float8e5b16, ml.float16,
          ml.bfloat16, ml.float32, ml.float64]
# Triton's name of each dtype (what its is_<name>() tests and its mangling spell)
TRITON = {ml.int1: "int1", ml.int8: "int8", ml.int16: "int16", ml.int32: "int32",
          ml.int64: "int64", ml.uint8: "uint8", ml.uint16: "uint16", ml.uint32: "uint32",
          ml.uint64: "uint64", ml.float8e4nv: "fp8e4nv", ml.float8e5: "fp8e5",
          ml.float8e4b8: "fp8e4b8", ml.float8e5b16: "fp8e5b16", ml.float16: "fp16",
          ml.bfloat16: "bf16", ml.float32: "fp32", ml.float64: "fp64"}
NAMES = list(TRITON.values()) + ["fp8e4b15"]


def expected(d) -> dict:
    """What Triton's dtype says about ``d``, from numpy / ml_dtypes' own description."""
    npd = np.dtype(d.to_numpy())
    is_bool = npd == np.bool_
    is_float = not is_bool and npd.kind not in "iu"
    signed = npd.kind == "i"
    bits = 1 if is_bool else npd.itemsize * 8
    out = {"is_floating": is_float, "is_int": not is_float, "is_bool": bool(is_bool),
           "is_int_signed": signed, "is_int_unsigned": not is_float and not signed,
           "is_fp8": is_float and bits == 8, "primitive_bitwidth": bits,
           "is_standard_floating": is_float and bits >= 16, "is_ptr": False,
           "is_block": False, "is_const": False}
    for name in NAMES:
        out[f"is_{name}"] = name == TRITON[d]
    if is_float:
        fi = ml_dtypes.finfo(npd)
        out["fp_mantissa_width"] = fi.nmant
        out["exponent_bias"] = 1 - fi.minexp      # the fnuz formats: 8 and 16
    else:
        lo, hi = (0, 1) if is_bool else (np.iinfo(npd).min, np.iinfo(npd).max)
        out.update(int_bitwidth=bits, get_int_min_value=int(lo), get_int_max_value=int(hi))
    return out


def ask(t, name):
    v = getattr(t, name)
    return v() if callable(v) else v


@pytest.mark.parametrize("d", DTYPES, ids=str)
def test_scalar_dtype_queries(d):
    for name, want in expected(d).items():
        assert ask(d, name) == want, f"{d!r}.{name}"
    assert d.scalar is d and d.with_element_ty(ml.float32) is ml.float32
    assert ml.dtype.is_dtype(TRITON[d]) and d.cache_key_part == TRITON[d]
    want_sign = None if d.is_floating() else (
        ml.dtype.SIGNEDNESS.SIGNED if expected(d)["is_int_signed"] else
        ml.dtype.SIGNEDNESS.UNSIGNED)
    assert getattr(d, "int_signedness", None) == want_sign
    if d.is_floating():                    # Triton's dtype has no int_* on floats
        assert not hasattr(d, "int_bitwidth")
    else:
        assert not hasattr(d, "fp_mantissa_width")
    assert d.mangle() == (TRITON[d] if d.is_floating() else
                          ("i" if d.is_int_signed() else "u") + str(d.primitive_bitwidth))


def test_pointer_and_tile_types():
    p = ml.pointer_type(ml.float16)
    assert p.is_ptr() and not p.is_block() and not p.is_floating() and not p.is_fp16()
    assert p.element_ty.is_fp16() and p.scalar is p and p.address_space == 1
    assert not p.is_const() and p.mangle() == "Pfp16" and p.primitive_bitwidth == 64
    t = T.TileType((16, 32), ml.bfloat16)
    assert t.is_block() and not t.is_floating() and not t.is_ptr() and not t.is_bf16()
    assert t.element_ty is ml.bfloat16 and t.scalar is ml.bfloat16
    assert t.get_block_shapes() == (16, 32) and t.numel == 512
    assert t.with_element_ty(ml.float32) == T.TileType((16, 32), ml.float32)
    pt = T.TileType((8,), p)
    assert pt.is_block() and pt.is_ptr() and pt.element_ty.element_ty is ml.float16
    assert not ml.dtype.is_dtype("f16") and ml.dtype.is_dtype("fp8e4b15")


# ---------------------------------------------------------------- in kernels
@mutile.jit
def dtype_facts(X, O):
    """O[i] = the i-th fact about X's element type, each decided at compile time."""
    x = ml.load(X)
    d = x.dtype
    ml.static_assert(X.dtype.is_ptr() and X.dtype.element_ty == d and not X.type.is_block())
    ml.static_assert(not x.type.is_block() and x.type == d and d.scalar == d)
    ml.store(O + 0, d.is_floating())
    ml.store(O + 1, d.is_int_signed())
    ml.store(O + 2, d.is_int_unsigned())
    ml.store(O + 3, d.primitive_bitwidth)
    ml.store(O + 4, d.is_fp16() or d.is_bf16())
    ml.store(O + 5, d.is_int64() or d.is_uint64())
    ml.store(O + 6, d.is_fp8())
    ml.store(O + 7, d.is_bool())
    ml.store(O + 8, d.is_fp32() or d.is_fp64())
    if d.is_floating():
        ml.store(O + 9, d.fp_mantissa_width)
        ml.store(O + 10, d.exponent_bias)
    else:
        ml.store(O + 9, d.get_int_max_value() % 1000)
        ml.store(O + 10, d.int_bitwidth)
    tile = ml.broadcast_to(x, [4, 8])
    ml.static_assert(tile.type.is_block() and tile.type.element_ty == d)
    ml.static_assert(tile.type.get_block_shapes() == (4, 8))
    ml.store(O + 11, (X + ml.arange(0, 4)).type.is_block() and
             (X + ml.arange(0, 4)).type.element_ty.is_ptr())


@pytest.mark.parametrize("d", DTYPES, ids=str)
def test_queries_in_kernels(d, backend):
    x = np.zeros(1, d.to_numpy())
    o = poison(12, np.int64)
    dtype_facts[(1,)](x, o, backend=backend)
    e = expected(d)
    want = [e["is_floating"], e["is_int_signed"], e["is_int_unsigned"], e["primitive_bitwidth"],
            e["is_fp16"] or e["is_bf16"], e["is_int64"] or e["is_uint64"], e["is_fp8"],
            e["is_bool"], e["is_fp32"] or e["is_fp64"]]
    want += ([e["fp_mantissa_width"], e["exponent_bias"]] if e["is_floating"]
             else [e["get_int_max_value"] % 1000, e["int_bitwidth"]])
    want.append(True)
    np.testing.assert_array_equal(o, np.array(want, np.int64), err_msg=str(d))


# ---------------------------------------------------------------- dtypes from the host
@mutile.jit
def convert(x, DT: ml.constexpr):
    """Nested: the dtype arrives as a constexpr; .value gives it back."""
    ml.static_assert(DT.value == DT)
    if DT.value.is_int():
        return (x * 8).to(DT.value)
    return x.to(DT)


@mutile.jit
def scale_to(X, Y, n, OUT: ml.constexpr, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    x = ml.load(X + offs, mask=mask)
    ml.static_assert(Y.dtype.element_ty == OUT.value, "Y's dtype is OUT")
    ml.store(Y + offs, convert(x, OUT), mask=mask)


@pytest.mark.parametrize("out", [ml.float16, ml.bfloat16, ml.float64, ml.int32, ml.uint8],
                         ids=str)
def test_dtype_constexpr_from_the_host(out, rng, backend):
    n = 80
    x = random_data(np.float32, n, rng, specials=False, scale=0.05)
    if out.is_int_unsigned():
        x = np.abs(x)
    y = poison(n, out.to_numpy())
    scale_to[(3,)](x, y, n, out, BLOCK=32, backend=backend)
    x64 = x.astype(np.float64)
    want = np.trunc(x64 * 8) if out.is_int() else x64       # float -> int truncates
    np.testing.assert_array_equal(y, want.astype(out.to_numpy()), err_msg=str(out))


# ---------------------------------------------------------------- constexpr everywhere
SCALE = ml.constexpr(3)
HALF_BLOCK = ml.constexpr(16) // 2          # arithmetic on constexprs on the host


@mutile.jit
def constexpr_uses(Y, BLOCK: ml.constexpr, K: ml.constexpr = ml.constexpr(5)):
    two = ml.constexpr(2)                    # a call in the kernel
    n: ml.constexpr = BLOCK.value // two     # an annotated local, .value of a parameter
    ml.static_assert(n * two == BLOCK and HALF_BLOCK == 8 and SCALE.value == 3)
    offs = ml.arange(0, n)
    ml.store(Y + offs, (offs * SCALE + K * two + ml.constexpr(1)).to(ml.float32))


def test_constexpr_everywhere(backend):
    c = ml.constexpr(4)
    assert isinstance(c + 1, ml.constexpr) and (c + 1).value == 5 and (2 * c).value == 8
    assert (c // 3).value == 1 and (-c).value == -4 and (1 << c).value == 16 and c > 3
    assert c == 4 and c != 5 and hash(c) == hash(4)
    y = poison(8, np.float32)
    constexpr_uses[(1,)](y, ml.constexpr(16), backend=backend)
    np.testing.assert_array_equal(y, np.arange(8) * 3 + 11.0)
    y = poison(4, np.float32)
    constexpr_uses[(1,)](y, 8, K=1, backend=backend)
    np.testing.assert_array_equal(y, np.arange(4) * 3 + 3.0)


@mutile.jit
def k_value_of_tensor(X):
    x = ml.load(X)
    ml.store(X, x.value)  # LINE-MARK: x.value


def test_value_of_a_tensor_is_an_error():
    p32 = T.PointerType(T.f32)
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(k_value_of_tensor, {"X": p32}, {})
    m = marked(k_value_of_tensor)
    assert "has no attribute 'value'" in info.value.msg
    assert (info.value.loc.line, info.value.loc.col) == (m.line, m.col)
