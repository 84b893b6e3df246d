"""CVT rows (every pair of types, register conventions for narrow values) against
``semantics.convert``; SFU rows against Python's math module: f32 rows within 1 ulp of
the f64 value rounded to f32, f64 rows within 2 ulps (numpy's vector functions)."""
import math

import ml_dtypes
import numpy as np
import pytest

from mutile.backends.pinghu.isa import INSTRS
from mutile.ir import semantics
from mutile.ir import types as T

from ....conftest import assert_bits_equal, random_data
from .interp_kit import NT, PROLOGUE, header, poisoned, run, to_image, transfer

K = 8
CVT_ROWS = [r for r in INSTRS if r.unit == "CVT"]
SFU_ROWS = [r for r in INSTRS if r.unit == "SFU"]
COVERS = {r.mnemonic for r in CVT_ROWS + SFU_ROWS}
NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
         "F8E4M3": ml_dtypes.float8_e4m3fn, "F8E5M2": ml_dtypes.float8_e5m2,
         "F8E4B8": ml_dtypes.float8_e4m3fnuz, "F8E5B16": ml_dtypes.float8_e5m2fnuz,
         "S64": np.int64, "U64": np.uint64, "S32": np.int32, "U32": np.uint32,
         "S16": np.int16, "U16": np.uint16, "S8": np.int8, "U8": np.uint8, "TF32": np.float32}
SCALAR = {"F64": T.f64, "F32": T.f32, "F16": T.f16, "BF16": T.bf16, "F8E4M3": T.f8e4m3,
          "F8E5M2": T.f8e5m2, "F8E4B8": T.f8e4b8, "F8E5B16": T.f8e5b16, "S64": T.i64,
          "U64": T.u64, "S32": T.i32, "U32": T.u32,
          "S16": T.i16, "U16": T.u16, "S8": T.i8, "U8": T.u8}


def register_image(x: np.ndarray) -> np.ndarray:
    """Values (K, NT) as registers: 64-bit pairs; narrow floats' bits zero-extended;
    narrow integers sign- or zero-extended."""
    d = x.dtype
    if d.itemsize >= 4:
        return to_image(x)
    if d.kind == "i":
        return x.astype(np.int32).view(np.uint32)
    if d.kind == "u":
        return x.astype(np.uint32)
    return x.view(np.uint8 if d.itemsize == 1 else np.uint16).astype(np.uint32)


def _tf32(x: np.ndarray) -> np.ndarray:
    """f32 rounded to 10 mantissa bits, nearest even, in f64 arithmetic."""
    w = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.abs(w)))
        ulp = np.exp2(np.maximum(e, -126) - 10)
        r = np.rint(w / ulp) * ulp
    out = np.where(np.isfinite(w) & (w != 0), r, w).astype(np.float32)
    return out


@pytest.mark.parametrize("row", CVT_ROWS, ids=lambda r: r.mnemonic)
def test_cvt_row(row, rng):
    s, d = row.attrs["src"], row.attrs["dst"]
    x = random_data(NUMPY[s], (K, NT), rng)
    if np.dtype(NUMPY[s]).kind == "f" and np.dtype(NUMPY[d]).kind in "iu":
        with np.errstate(over="ignore"):        # large values: saturation
            x[4:] = (random_data(np.float64, (4, NT), rng)
                     * 2.0 ** rng.integers(0, 70, (4, NT))).astype(NUMPY[s])
    img = register_image(x)
    out_regs = K * (2 if np.dtype(NUMPY[d]).itemsize == 8 else 1)
    y = poisoned(out_regs)
    text = header([("Y", "ptr"), ("A", "ptr")]) + PROLOGUE + "\n" \
        + transfer("LD", 1, 40, img.shape[0]) + "\n" \
        + f"        {row.mnemonic} R[8:{8 + out_regs}], R[40:{40 + img.shape[0]}]\n" \
        + transfer("ST", 0, 8, out_regs) + "\n"
    run(text, [y, img], (2, 1, 1))
    want = _tf32(x) if d == "TF32" else semantics.convert(x, SCALAR[s], SCALAR[d])
    assert_bits_equal(y, register_image(np.asarray(want, NUMPY[d])), row.mnemonic)


# ---------------------------------------------------------------- SFU
MATH = {"EX2": lambda v: 2.0 ** v, "LG2": math.log2, "EXP": math.exp, "LOG": math.log,
        "RSQ": lambda v: 1 / math.sqrt(v), "RCP": lambda v: 1 / v, "SQRT": math.sqrt,
        "SIN": math.sin, "COS": math.cos, "TANH": math.tanh, "ERF": math.erf,
        "POW": math.pow}
DOMAIN = {"LG2": (1e-3, 1e3), "LOG": (1e-3, 1e3), "RSQ": (1e-3, 1e3), "SQRT": (0, 1e3),
          "EX2": (-60, 60), "EXP": (-40, 40), "POW": (0.1, 10)}


NUMPY_F64 = {"EX2": np.exp2, "LG2": np.log2, "EXP": np.exp, "LOG": np.log,
             "RSQ": lambda v: 1 / np.sqrt(v), "RCP": lambda v: 1 / v, "SQRT": np.sqrt,
             "SIN": np.sin, "COS": np.cos, "TANH": np.tanh, "ERF": math.erf, "POW": np.power}


def _ref(name, *args):
    """math's value; IEEE/C special cases (log 0, 1/0, pow(0, -1) ...) from numpy f64."""
    try:
        return MATH[name](*args)
    except (ValueError, ZeroDivisionError, OverflowError):
        with np.errstate(all="ignore"):
            return float(NUMPY_F64[name](*(np.float64(a) for a in args)))


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in ulps of got from want (0 where both are NaN or both the same inf)."""
    i = np.dtype(f"i{got.dtype.itemsize}")
    g, w = got.view(i).astype(object), want.view(i).astype(object)
    flip = lambda v: v if v >= 0 else -(1 << (8 * got.dtype.itemsize - 1)) - v  # noqa: E731
    d = np.abs(np.vectorize(flip, otypes=[object])(g) - np.vectorize(flip, otypes=[object])(w))
    both_nan = np.isnan(got) & np.isnan(want)
    return np.where(both_nan, 0, d).astype(np.float64)


@pytest.mark.parametrize("row", SFU_ROWS, ids=lambda r: r.mnemonic)
def test_sfu_row(row, rng):
    name, t = row.family.split(".")[1], row.attrs["type"]
    dt = np.float32 if t == "F32" else np.float64
    w = 2 if t == "F64" else 1
    lo, hi = DOMAIN.get(name, (-8, 8))
    x = rng.uniform(lo, hi, (K, NT)).astype(dt)
    x[0, :8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5]
    b = rng.uniform(-3, 3, (K, NT)).astype(dt)
    srcs = [x, b] if name == "POW" else [x]
    body = [transfer("LD", 1 + i, 40 + 32 * i, K * w) for i in range(len(srcs))]
    ops = ", ".join(f"R[{40 + 32 * i}:{40 + 32 * i + K * w}]" for i in range(len(srcs)))
    body += [f"        {row.mnemonic} R[8:{8 + K * w}], {ops}", transfer("ST", 0, 8, K * w)]
    y = poisoned(K * w)
    args = [y] + [to_image(s) for s in srcs] + [np.zeros((1, NT), np.uint32)] * (2 - len(srcs))
    run(header([("Y", "ptr"), ("A", "ptr"), ("B", "ptr")]) + PROLOGUE + "\n" + "\n".join(body)
        + "\n", args, (2, 1, 1))
    got = y.view(np.float32) if w == 1 else \
        np.ascontiguousarray(y.reshape(K, 2, NT).transpose(0, 2, 1)).view(np.float64)[..., 0]
    with np.errstate(all="ignore"):
        want = np.vectorize(lambda *a: _ref(name, *a), otypes=[np.float64])(
            *(s.astype(np.float64) for s in srcs)).astype(dt)
    ulps = _ulps(np.ascontiguousarray(got), want)
    tol = 1 if t == "F32" else 2          # f64: numpy's vector functions vs libm
    assert ulps.max() <= tol, f"{row.mnemonic}: {ulps.max()} ulps at " \
        f"{np.argwhere(ulps == ulps.max())[0]}"


def test_erf_f64_matches_libm_closely(rng):
    """The vectorized fdlibm erf is within 1 ulp of math.erf everywhere sampled."""
    from mutile.backends.pinghu.machine.units.fmath import erf_f64
    x = rng.standard_normal(20000) * np.exp2(rng.integers(-40, 4, 20000))
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, 5.99, 6.0, 0.84375, 1.25, 1e-310]])
    want = np.array([math.erf(v) for v in x])
    assert _ulps(erf_f64(x), want).max() <= 1
