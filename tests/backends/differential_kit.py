"""The cases and the exact references of the differential test (test_differential.py).

* :func:`draw_case` makes one :class:`Case` from its seed alone: the op cycles through
  ``OPS``, its dtype through a fixed shuffle of the dtypes valid for it (so an op's
  cases differ), and the rest is drawn: the tile, ``num_warps``, the programs, the
  second operand's dtype, the variant.
* :func:`computation_type` is Triton's promotion as docs/semantics.md states it.
* The references are independent of mutile: float64 numpy rounded once
  (:func:`round_once`), an exactly rounded ``p + c`` for fma and dot chains
  (:func:`round_sum`, by two-sum and rounding to odd), first-index argmax/argmin with
  NaNs ignored, in-order scans.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np

BOOL, F16, F32, F64 = (np.dtype(d) for d in (np.bool_, np.float16, np.float32, np.float64))
BF16, E4M3, E5M2 = (np.dtype(d) for d in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                           ml_dtypes.float8_e5m2))
I8, I16, I32, I64, U8, U16, U32, U64 = (np.dtype(d) for d in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64))
INTS = [I8, I16, I32, I64, U8, U16, U32, U64]
FLOATS = [F16, BF16, F32, F64]
FP8 = (E4M3, E5M2)
DTYPES = [BOOL] + INTS + FLOATS + list(FP8)         # cast destinations, in kernel order
# cast sources in the order an op's cases take them: every float type early
CAST_SOURCES = [F32, I32, F16, U8, BF16, E5M2, E4M3, I64, F64, U16, I8, U32, BOOL, I16, U64]
DOT_DTYPES = [I8, U8, F16, BF16, F32, E4M3, E5M2]

BINARY = ["add", "sub", "mul", "div", "rem", "minimum", "maximum", "and", "or", "xor", "shl",
          "shr", "cmp"]
UNARY = ["neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "erf",
         "tanh", "floor", "ceil"]
REDUCE = ["sum", "max", "min", "argmax", "argmin", "prod"]
SCAN = ["cumsum", "cumprod"]
OPS = BINARY + UNARY + ["fma", "where", "cast", "bitcast"] + REDUCE + SCAN + ["dot"] \
    + ["cast", "dot", "cast"]                       # the big areas get more cases
BITWISE = {"and", "or", "xor", "shl", "shr"}
FAST = 120                                # cases in the default run; as many again are slow


def is_float(d) -> bool:
    return np.dtype(d) in (F16, BF16, F32, F64, E4M3, E5M2)


def ml_dtypes_rounds_once(src, dst) -> bool:
    """Whether every ml_dtypes version converts float ``src`` to ``dst`` as mutile does
    (rounded once); before 0.7, f64 -> bf16 / fp8 went through f32 and rounded twice."""
    return not (np.dtype(src) == F64 and np.dtype(dst) in (BF16, E4M3, E5M2))


def short(d) -> str:
    """f32, bf16, e4m3, u8, i1 ... for test ids and messages."""
    name = np.dtype(d).name
    fixed = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "bfloat16": "bf16", "bool": "i1"}
    return fixed.get(name, name.replace("float", "f").replace("uint", "u").replace("int", "i"))


# ---------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One drawn case; ``variant`` is the op's option ("/" or "//", "nan_all", the dot's
    precision and accumulator)."""
    seed: int
    op: str
    dtypes: tuple           # operand dtypes (bitcast: source, destination; where: i1, x)
    shape: tuple            # the tile (dot: M, N, K)
    num_warps: int
    programs: int = 1       # elementwise ops: programs, each on its own tile
    axis: int | None = None
    variant: str = ""

    def __str__(self):
        axis = f"ax{self.axis}" if self.op in REDUCE + SCAN else ""
        parts = [f"{self.seed:03d}", self.op, self.variant, "-".join(map(short, self.dtypes)),
                 "x".join(map(str, self.shape)), axis,
                 f"p{self.programs}" if self.programs > 1 else "", f"w{self.num_warps}"]
        return "-".join(p for p in parts if p)


def pick(rng, items):
    return items[int(rng.integers(len(items)))]


def draw_shape(rng) -> tuple:
    """1-3 dimensions, each a power of two <= 128, at most 4096 elements (mostly 8+)."""
    ndim = int(rng.integers(1, 4))
    total = int(rng.integers(3, 13) if rng.random() < 0.85 else rng.integers(0, 3))
    logs = [0] * ndim
    for _ in range(min(total, 7 * ndim)):
        logs[pick(rng, [i for i in range(ndim) if logs[i] < 7])] += 1
    return tuple(2 ** v for v in logs)


def stratified(seed: int, pool: list, shuffle=True):
    """The dtype of an op's n-th case (the n-th seed drawing that op): the n-th of
    ``pool``, in a fixed shuffle for that op unless ``shuffle`` is false."""
    op = OPS[seed % len(OPS)]
    n = sum(OPS[s % len(OPS)] == op for s in range(seed))
    order = np.random.default_rng(zlib.crc32(op.encode())).permutation(len(pool)) \
        if shuffle else range(len(pool))
    return pool[order[n % len(pool)]]


def draw_case(seed: int) -> Case:
    rng = np.random.default_rng(seed)
    op = OPS[seed % len(OPS)]
    warps = int(pick(rng, [1, 2, 4, 8]))
    if op == "dot":
        return draw_dot(seed, rng, warps)
    shape = draw_shape(rng)
    if op in REDUCE or op in SCAN:
        axis = int(rng.integers(len(shape)))
        if op in ("sum", "max", "argmin") and rng.random() < 0.25:
            axis = None
        return Case(seed, op, (stratified(seed, INTS + FLOATS),), shape, warps, axis=axis)
    programs = int(rng.integers(1, 4))
    if op == "cast":
        dtypes = (stratified(seed, CAST_SOURCES, shuffle=False),)
    elif op == "bitcast":
        src = stratified(seed, DTYPES[1:])
        dtypes = (src, pick(rng, [d for d in DTYPES[1:] if d.itemsize == src.itemsize
                                  and d != src]))
    elif op == "where":
        dtypes = (BOOL, stratified(seed, DTYPES))
    elif op in UNARY or op == "fma":
        dtypes = (stratified(seed, FLOATS + INTS if op in ("neg", "abs") else FLOATS),)
    else:
        return draw_binary(seed, rng, op, shape, warps, programs)
    return Case(seed, op, dtypes, shape, warps, programs)


def draw_binary(seed, rng, op, shape, warps, programs) -> Case:
    pool = INTS if op in BITWISE else INTS + FLOATS
    x = stratified(seed, pool)
    y = x if rng.random() < 0.6 else pick(rng, pool)
    fl = is_float(x) or is_float(y)
    nan = pick(rng, ["", "nan_all"]) if fl else ""
    variant = {"minimum": nan, "maximum": nan,
               "div": "/" if fl or rng.random() < 0.25 else "//"}.get(op, "")
    return Case(seed, op, (x, y), shape, warps, programs, variant=variant)


def draw_dot(seed, rng, warps) -> Case:
    a = stratified(seed, DOT_DTYPES)
    shape = tuple(int(pick(rng, [16, 32, 64])) for _ in range(3))
    if a == F32:
        prec = pick(rng, ["tf32", "ieee"])
    elif a == F16 and rng.random() < 0.5:
        prec, shape = "f16acc", tuple(min(s, 32) for s in shape)   # an f16 accumulator
    else:
        prec = "ieee"
    return Case(seed, "dot", (a,), shape, warps,
                variant=prec + ("-acc" if rng.random() < 0.5 else ""))


CASES = [draw_case(s) for s in range(2 * FAST)]


# ---------------------------------------------------------------- promotion (the docs' rules)
def computation_type(a, b, op: str, variant: str = ""):
    """The dtype a binary op on dtypes ``a`` and ``b`` computes in: f64, then f32, then
    f16 win (fp8 computes as f16); bf16 stays only with bf16; / and % of halves compute
    in f32; a float beats an integer; integers widen, at equal width unsigned wins;
    int / int is f32."""
    fl = [d for d in (a, b) if is_float(d)]
    if fl:
        if F64 in fl:
            t = F64
        elif F32 in fl:
            t = F32
        elif F16 in fl or E4M3 in fl or E5M2 in fl:
            t = F16
        else:
            t = BF16 if len(fl) == 2 else F32
        return F32 if op in ("div", "rem") and t in (F16, BF16) else t
    if variant == "/":
        return F32
    if a.itemsize != b.itemsize:
        return a if a.itemsize > b.itemsize else b
    return a if a.kind == "u" else b


def sum_dtype(d, op):
    """The result dtype of sum/cumsum (narrow integers widen; sum widens narrow floats)."""
    if d.kind in "iu" and d.itemsize < 4 and op in ("sum", "cumsum"):
        return U32 if d.kind == "u" else I32
    if op == "sum" and d in (F16, BF16):
        return F32
    return d


# ---------------------------------------------------------------- exact references
def round_once(v64, dtype):
    """A float64 result rounded to ``dtype``; for one + - * / sqrt of ``dtype`` operands
    that is the correctly rounded result (f64 holds 2p+2 bits of the narrower types)."""
    v64 = np.asarray(v64, np.float64)
    return v64.astype(np.float32).astype(dtype) if np.dtype(dtype).itemsize < 4 \
        else v64.astype(dtype)


def ulp(r64, dtype):
    """The spacing of ``dtype`` at each |r| (the smallest subnormal near zero)."""
    fi = ml_dtypes.finfo(dtype)
    a = np.abs(r64)
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), float(fi.minexp))
    return np.exp2(e - fi.nmant)


def _odd(v, larger):
    """Round to odd: where ``v`` (rounded to nearest) is inexact (``larger`` = +1 if the
    exact value's magnitude is above |v|, -1 if below) and even, step one ulp toward
    the exact value."""
    bits = v.view(f"u{v.itemsize}")
    fix = (larger != 0) & ((bits & 1) == 0) & np.isfinite(v) & (v != 0)
    return np.where(fix, bits + np.where(larger > 0, 1, -1).astype(bits.dtype), bits) \
        .view(v.dtype)


def round_sum(p, c, dtype):
    """p + c (float64 arrays) rounded once to ``dtype`` (f32, f16 or bf16): the exact
    sum is s + err (two-sum), rounded to odd in f64 (and again in f32 for bf16, so
    the last step is f32 -> bf16, which every ml_dtypes version rounds once), then to
    nearest even: exact, as >= p + 2 bits remain."""
    with np.errstate(all="ignore"):
        s = p + c
        bb = s - p
        err = np.where(np.isfinite(s), (p - (s - bb)) + (c - bb), 0.0)
        o = _odd(s, np.sign(err) * np.sign(s))
        if np.dtype(dtype) == BF16:
            f = o.astype(np.float32)
            f = _odd(f, np.sign(o - f.astype(np.float64)) * np.sign(f))
            return f.astype(BF16)
        return o.astype(dtype)


def fma_ref(x, y, z, dtype):
    """x * y + z rounded once to ``dtype`` (the product is exact in f64 except for f64
    operands, which go through Fractions)."""
    dtype = np.dtype(dtype)
    if dtype != F64:
        return round_sum(x.astype(np.float64) * y.astype(np.float64), z.astype(np.float64),
                         dtype)
    out = []
    for a, b, c in zip(x.ravel().tolist(), y.ravel().tolist(), z.ravel().tolist()):
        if all(math.isfinite(v) for v in (a, b, c)) and math.isfinite(a * b + c):
            exact = Fraction(a) * Fraction(b) + Fraction(c)
            out.append(float(exact) if exact != 0 else a * b + c)  # float(): nearest even
        else:
            out.append(a * b + c)
    return np.array(out, F64).reshape(x.shape)


def dot_ref(a, b, acc, od, tf32: bool):
    """The documented dot: operands to f32 exactly (tf32: rounded to 10 mantissa bits),
    then c = fma(a[i, k], b[k, j], c) for k in order, each rounded once to ``od``."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    if tf32:
        a32, b32 = to_tf32(a32), to_tf32(b32)
    c = acc.astype(od)
    for k in range(a.shape[1]):
        p = a32[:, k, None].astype(np.float64) * b32[None, k, :].astype(np.float64)
        c = round_sum(p, c.astype(np.float64), od)
    return c


def to_tf32(x):
    """f32 rounded to nearest even to 10 mantissa bits."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 13) & 1
    return ((bits + 0xFFF + lsb) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)


def arg_ref(x, axis, op):
    """First index of the extreme along ``axis``; NaNs ignored unless all are NaN."""
    a = np.moveaxis(x, axis, -1)
    if not is_float(a.dtype):
        return (a.argmax(-1) if op == "argmax" else a.argmin(-1)).astype(np.int32)
    w = a.astype(np.float64)
    nan = np.isnan(w)
    w = np.where(nan, -np.inf if op == "argmax" else np.inf, w)
    best = w.max(-1, keepdims=True) if op == "argmax" else w.min(-1, keepdims=True)
    hit = (w == best) & ~nan
    return np.where(hit.any(-1), hit.argmax(-1), 0).astype(np.int32)


def scan_ref(x, axis, op, od):
    """In-order inclusive scan in the compute type (f32 for narrow floats), rounded once
    per element; integers wrap in the result type."""
    ufunc = np.add if op == "cumsum" else np.multiply
    with np.errstate(all="ignore"):
        if not is_float(x.dtype):
            return ufunc.accumulate(x.astype(od), axis=axis, dtype=od)
        ct = F64 if x.dtype == F64 else F32
        return ufunc.accumulate(x.astype(ct), axis=axis).astype(od)
