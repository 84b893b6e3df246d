"""``.to(dtype)`` between every pair of dtypes and bitcasts, bit for bit.

The oracle is the one table of conversion semantics, ``mutile.ir.semantics.convert``;
float -> float is also checked against ml_dtypes' own ``astype`` (NaN, infinity,
overflow to fp8 and rounding ties included; not f64 -> bf16 / fp8, which ml_dtypes
before 0.7 rounds twice, through f32; test_ops_convert_exact.py checks every pair
against an exact oracle), float -> int against an independent
reference (truncate toward zero, saturate, NaN -> 0), int -> int against numpy's
wrap-around, and anything -> bool against ``x != 0``. One kernel per source dtype
converts to all seventeen destinations (the fp8 formats: e4m3fn, e5m2 and the fnuz
e4m3 / e5m2, Triton's float8e4b8 / float8e5b16).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import semantics
from mutile.ir import types as T

from ..conftest import assert_bits_equal, poison, random_data

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
          ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fnuz,
          ml_dtypes.float8_e5m2fnuz]
NARROW_FLOATS = [np.dtype(d) for d in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                       ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fnuz,
                                       ml_dtypes.float8_e5m2fnuz)]
N, TILE = 256, 64
GRID = (N // TILE,)

# rounding ties, fp8/f16 overflow, saturation and truncation edges
EDGES = [1.5, 2.5, -2.5, -0.5, 0.9999, 255.9, 256.0, -129.5, 127.5, 448.0, 464.0, 465.0, 480.0,
         1000.0, 57344.0, 61439.0, 61440.0, 65504.0, 65520.0, 1e5, -1e10, 2.0 ** 31, -2.0 ** 31,
         2.0 ** 32, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 3e38, -3e38, 1e300, 1 + 2.0 ** -8,
         1 + 3 * 2.0 ** -8, 1 + 2.0 ** -11, 1 + 2.0 ** -24, 2.0 ** -15, 2.0 ** -20, -0.0]


def name(d):
    return np.dtype(d).name


def ir_type(d):
    return T.scalar_from_numpy(np.dtype(d))


@mutile.jit
def put(base, v, BLOCK: ml.constexpr):
    ml.static_assert(v.dtype == base.dtype.element_ty, "result dtype differs from the output's")
    ml.store(base + ml.program_id(0) * BLOCK + ml.arange(0, BLOCK), v)


@mutile.jit
def convert_all(X, O0, O1, O2, O3, O4, O5, O6, O7, O8, O9, O10, O11, O12, O13, O14, O15, O16,
                BLOCK: ml.constexpr):
    x = ml.load(X + ml.program_id(0) * BLOCK + ml.arange(0, BLOCK))
    outs = (O0, O1, O2, O3, O4, O5, O6, O7, O8, O9, O10, O11, O12, O13, O14, O15, O16)
    for i in ml.static_range(17):
        put(outs[i], x.to(outs[i].dtype.element_ty), BLOCK)


def source_values(src, rng):
    x = random_data(src, N, rng)
    d = np.dtype(src)
    if is_float(d):
        with np.errstate(over="ignore"):
            e = np.array(EDGES + [-v for v in EDGES[:20]]).astype(d)
        x[8:8 + len(e)] = e
        # a wide spread of magnitudes, for saturation and overflow everywhere
        big = (rng.standard_normal(60) * np.exp2(rng.integers(-30, 70, 60)))
        with np.errstate(over="ignore"):
            x[100:160] = big.astype(d)
    return x


def float_to_int(x, dst):
    info = np.iinfo(dst)
    out = []
    for v in x.astype(np.float64).tolist():
        if math.isnan(v):
            out.append(0)
        elif math.isinf(v):
            out.append(info.max if v > 0 else info.min)
        else:
            out.append(min(max(math.trunc(v), int(info.min)), int(info.max)))
    return np.array(out, dtype=object).astype(dst)


def is_float(d):
    return np.dtype(d).kind == "f" or np.dtype(d) in NARROW_FLOATS


@pytest.mark.parametrize("src", [pytest.param(d, marks=pytest.mark.slow) if name(d).startswith(
    "float8") else d for d in DTYPES], ids=name)
def test_convert(src, rng, backend):
    x = source_values(src, rng)
    outs = [poison(N, d) for d in DTYPES]
    if np.dtype(src) == np.bool_:
        x = rng.integers(0, 2, N).astype(bool)
    convert_all[GRID](x, *outs, BLOCK=TILE, backend=backend)
    for dst, got in zip(DTYPES, outs):
        what = f"{name(src)} -> {name(dst)}"
        with np.errstate(all="ignore"):
            spec = semantics.convert(x, ir_type(src), ir_type(dst))
        assert_bits_equal(got, np.asarray(spec).astype(dst), what + " (semantics.convert)")
        if np.dtype(dst) == np.bool_:
            with np.errstate(invalid="ignore"):
                assert_bits_equal(got, x.astype(np.float64) != 0 if is_float(src) else x != 0, what)
        elif is_float(src) and is_float(dst):
            if np.dtype(src) == np.float64 and np.dtype(dst).itemsize == 1 or \
                    np.dtype(src) == np.float64 and np.dtype(dst) == ml_dtypes.bfloat16:
                continue                  # ml_dtypes < 0.7 rounds these twice
            with np.errstate(all="ignore"):
                assert_bits_equal(got, x.astype(dst), what + " (ml_dtypes)")
        elif is_float(src):
            assert_bits_equal(got, float_to_int(x, dst), what)
        elif not is_float(dst):
            assert_bits_equal(got, x.astype(dst), what + " (wrap)")


def test_fp8_overflow(backend):
    """Out of range: e4m3fn and the fnuz formats (no infinity) give NaN, e5m2 gives
    +-inf; in range rounds to nearest even (464 -> 448 in e4m3, a tie to the even 448)."""
    x = np.zeros(N, np.float32)
    x[:6] = [1000.0, -1e6, 464.0, 448.0, 61440.0, 57344.0]
    outs = [poison(N, d) for d in DTYPES]
    convert_all[GRID](x, *outs, BLOCK=TILE, backend=backend)
    e4 = outs[DTYPES.index(ml_dtypes.float8_e4m3fn)][:6].astype(np.float32)
    e5 = outs[DTYPES.index(ml_dtypes.float8_e5m2)][:6].astype(np.float32)
    assert np.isnan(e4[:2]).all() and e4[2] == 448 and e4[3] == 448
    assert e5[1] == -np.inf and e5[4] == np.inf and e5[5] == 57344
    e4b8 = outs[DTYPES.index(ml_dtypes.float8_e4m3fnuz)][:6]
    e5b16 = outs[DTYPES.index(ml_dtypes.float8_e5m2fnuz)][:6]
    assert (e4b8.view(np.uint8) == [0x80, 0x80, 0x80, 0x80, 0x80, 0x80]).all()   # > 240
    assert (e5b16.view(np.uint8) == [0x68, 0x80, 0x63, 0x63, 0x80, 0x7F]).all()  # 1024, 448


@mutile.jit
def bitcasts(F32, F16, F64, U8, O32, OU32, O16, OB16, O64, OU64, O8A, O8B, OI8,
             BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    f32 = ml.load(F32 + offs)
    f16 = ml.load(F16 + offs)
    f64 = ml.load(F64 + offs)
    u8 = ml.load(U8 + offs)
    ml.store(O32 + offs, f32.to(ml.int32, bitcast=True))
    ml.store(OU32 + offs, ml.cast(f32, ml.uint32, bitcast=True))
    ml.store(O16 + offs, f16.to(ml.int16, bitcast=True))
    ml.store(OB16 + offs, f16.to(ml.bfloat16, bitcast=True))
    ml.store(O64 + offs, f64.to(ml.int64, bitcast=True))
    ml.store(OU64 + offs, f64.to(ml.uint64, bitcast=True).to(ml.float64, bitcast=True)
             .to(ml.uint64, bitcast=True))
    ml.static_assert(ml.float8_e4m3fn == ml.float8e4nv and ml.float8_e5m2 == ml.float8e5)
    ml.store(O8A + offs, u8.to(ml.float8_e4m3fn, bitcast=True))
    ml.store(O8B + offs, u8.to(ml.float8e5, bitcast=True))
    ml.store(OI8 + offs, u8.to(ml.float8e5, bitcast=True).to(ml.int8, bitcast=True))


def test_bitcast(rng, backend):
    """Reinterpreting bits between same-width types (NaN payloads and all) is numpy's
    ``view``; a round trip restores the bits."""
    n = 128
    f32 = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f16 = rng.integers(0, 2 ** 16, n).astype(np.uint16).view(np.float16)
    f64 = rng.integers(0, 2 ** 63, n, dtype=np.int64).view(np.float64)
    u8 = rng.integers(0, 256, n).astype(np.uint8)
    outs = [poison(n, d) for d in (np.int32, np.uint32, np.int16, ml_dtypes.bfloat16, np.int64,
                                   np.uint64, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                   np.int8)]
    bitcasts[(1,)](f32, f16, f64, u8, *outs, BLOCK=n, backend=backend)
    wants = [f32.view(np.int32), f32.view(np.uint32), f16.view(np.int16),
             f16.view(ml_dtypes.bfloat16), f64.view(np.int64), f64.view(np.uint64),
             u8.view(ml_dtypes.float8_e4m3fn), u8.view(ml_dtypes.float8_e5m2), u8.view(np.int8)]
    for k, (got, want) in enumerate(zip(outs, wants)):
        assert (got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")).all(), f"#{k}"


@mutile.jit
def downcast_rtz(X, O, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    ml.store(O + offs, ml.load(X + offs).to(ml.float16, fp_downcast_rounding="rtz"))


def test_downcast_round_toward_zero_is_rejected(rng, backend):
    """Only round-to-nearest-even conversions exist: asking for 'rtz' is a compile error
    naming the line, never a silently different rounding."""
    x = random_data(np.float32, 64, rng, specials=False)
    o = poison(64, np.float16)
    with pytest.raises(mutile.CompilationError, match="fp_downcast_rounding='rtz'") as e:
        downcast_rtz[(1,)](x, o, BLOCK=64, backend=backend)
    assert e.value.loc.line > 0 and "^" in str(e.value)
    assert np.isnan(o.astype(np.float32)).all()
