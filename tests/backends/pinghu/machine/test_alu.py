"""Every ALU row on the interpreter, against numpy (float64 where it matters) and Python-int
references: run operands (8 elements), a plain register broadcast over the run, an
immediate and a ``c[...]`` parameter, on random data with specials (NaN, inf, -0,
subnormals, INT_MIN, 0 divisors), across 2 blocks of 64 threads; outputs are poisoned.
"""
from fractions import Fraction

import numpy as np
import pytest

from mutile.backends.pinghu.isa import INSTRS
from mutile.backends.pinghu.isa.operands import CBank, FloatImm, IntImm, format_float
from mutile.ir import semantics
from mutile.ir import types as T

from ....conftest import assert_bits_equal, random_data
from .interp_kit import NT, PROLOGUE, from_image, header, poisoned, run, to_image, transfer

K = 8                                        # run elements
NP = {"F32": np.float32, "F64": np.float64, "S32": np.int32, "U32": np.uint32,
      "S64": np.int64, "U64": np.uint64, "B32": np.uint32, "B64": np.uint64}
SRC_BASE, BCAST, DST = (40, 72, 104), (136, 138, 140), 8
ROWS = [r for r in INSTRS if r.unit == "ALU"]
COVERS = {r.mnemonic for r in ROWS}


# ---------------------------------------------------------------- references
def _py(a):
    return np.vectorize(int, otypes=[object])(a)


def _wrap(v, dt):
    dt = np.dtype(dt)
    bits = 8 * dt.itemsize
    u = np.vectorize(lambda x: int(x) % (1 << bits), otypes=[object])(v)
    return u.astype(np.uint64).astype(f"u{dt.itemsize}").view(dt)


def _round_f32(q: Fraction, approx: float) -> np.float32:
    """The f32 nearest to the exact rational q (via round-to-odd in f64)."""
    d = float(q)
    if Fraction(d) != q and not int(np.float64(d).view(np.uint64)) & 1:
        d = float(np.nextafter(d, np.inf if q > d else -np.inf))
    return np.float32(d)


def _fma_ref(a, b, c, dt):
    a, b, c = np.broadcast_arrays(a, b, c)
    out = np.empty(a.shape, dt)
    for i, (x, y, z) in enumerate(zip(a.ravel().tolist(), b.ravel().tolist(),
                                      c.ravel().tolist())):
        if not all(np.isfinite([x, y, z])):
            out.flat[i] = dt(np.float64(x) * y + z) if dt is np.float32 else x * y + z
            continue
        q = Fraction(x) * Fraction(y) + Fraction(z)
        if q == 0:
            out.flat[i] = dt(x * y + z) if x * y == 0 and z == 0 else dt(0.0)
        elif dt is np.float32:
            out.flat[i] = _round_f32(q, 0.0)
        else:
            try:
                out.flat[i] = float(q)
            except OverflowError:
                out.flat[i] = np.inf if q > 0 else -np.inf
    return out


def _scalar_t(t):
    return {"S32": T.i32, "U32": T.u32, "S64": T.i64, "U64": T.u64, "B32": T.u32,
            "B64": T.u64}[t]


def _f64(op):
    return lambda r, a, b: op(a.astype(np.float64), b.astype(np.float64)).astype(NP[_t(r)])


def _t(row):
    return row.attrs.get("type", "B32")


CMP = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
       "GT": np.greater, "GE": np.greater_equal}
PLOP = {"AND": np.logical_and, "OR": np.logical_or, "XOR": np.logical_xor}

# family -> reference(row, *source values) -> result
REF = {
    "ALU.FADD": _f64(np.add), "ALU.FSUB": _f64(np.subtract), "ALU.FMUL": _f64(np.multiply),
    "ALU.FDIV": _f64(np.true_divide), "ALU.FREM": _f64(np.fmod),
    "ALU.FMNMX.MIN": _f64(lambda a, b: semantics.float_minmax(a, b, False)),
    "ALU.FMNMX.MAX": _f64(lambda a, b: semantics.float_minmax(a, b, True)),
    "ALU.FFMA": lambda r, a, b, c: _fma_ref(a, b, c, NP[_t(r)]),
    "ALU.FRND": lambda r, a: {"RN": np.rint, "RM": np.floor, "RP": np.ceil,
                              "RZ": np.trunc}[r.attrs["mode"]](a),
    "ALU.FSETP": lambda r, a, b: CMP[r.attrs["cmp"]](a.astype(np.float64), b),
    "ALU.ISETP": lambda r, a, b: CMP[r.attrs["cmp"]](_py(a), _py(b)).astype(bool),
    "ALU.IADD": lambda r, a, b: _wrap(_py(a) + _py(b), NP[_t(r)]),
    "ALU.ISUB": lambda r, a, b: _wrap(_py(a) - _py(b), NP[_t(r)]),
    "ALU.IMUL": lambda r, a, b: _wrap(_py(a) * _py(b), NP[_t(r)]),
    "ALU.IMUL.HI": lambda r, a, b: _wrap((_py(a) * _py(b)) >> 32, NP[_t(r)]),
    "ALU.IMAD": lambda r, a, b, c: _wrap(_py(a) * _py(b) + _py(c), np.int32),
    "ALU.IMAD.WIDE": lambda r, a, b, c: _wrap(_py(a) * _py(b) + _py(c),
                                              np.int64 if _t(r) == "S32" else np.uint64),
    "ALU.IDIV": lambda r, a, b: semantics.evaluate("div", {}, [a, b], _scalar_t(_t(r)),
                                                   _scalar_t(_t(r))),
    "ALU.IREM": lambda r, a, b: semantics.evaluate("rem", {}, [a, b], _scalar_t(_t(r)),
                                                   _scalar_t(_t(r))),
    "ALU.IMNMX.MIN": lambda r, a, b: np.minimum(a, b),
    "ALU.IMNMX.MAX": lambda r, a, b: np.maximum(a, b),
    "ALU.IABS": lambda r, a: _wrap(np.abs(_py(a)), NP[_t(r)]),
    "ALU.LOP.AND": lambda r, a, b: a & b, "ALU.LOP.OR": lambda r, a, b: a | b,
    "ALU.LOP.XOR": lambda r, a, b: a ^ b,
    "ALU.SHL": lambda r, a, b: semantics.evaluate("shl", {}, [a, b], _scalar_t(_t(r)),
                                                  _scalar_t(_t(r))),
    "ALU.SHR": lambda r, a, b: semantics.evaluate("shr", {}, [a, b], _scalar_t(_t(r)),
                                                  _scalar_t(_t(r))),
    "ALU.SEL": lambda r, a, b, p: np.where(p, a, b),
    "ALU.MOV": lambda r, a: a,
    "ALU.MOV.IMM": lambda r, v: v,
    "ALU.IOTA": lambda r, a, s: _wrap(_py(a) + np.arange(K)[:, None] * int(s), np.int32),
    "ALU.PACK": lambda r, a, b: (a & 0xFFFF) | ((b & 0xFFFF) << 16),
    "ALU.P2R": lambda r, p: p.astype(np.uint32),
    "ALU.PLOP": lambda r, a, b: PLOP[r.attrs["op"]](a, b),
}


def _source_types(row) -> list:
    """The value type of each source slot (``bool`` for predicates)."""
    t, fam = _t(row), row.family
    n = len(row.operands) - 1
    special = {"ALU.SHL": [NP[t], np.uint32], "ALU.SHR": [NP[t], np.uint32],
               "ALU.SEL": [NP[t], NP[t], bool], "ALU.IMAD.WIDE": [NP[t], NP[t],
               np.int64 if t == "S32" else np.uint64], "ALU.MOV.IMM": [np.uint32],
               "ALU.IOTA": [np.int32, np.int32], "ALU.PACK": [np.uint32, np.uint32],
               "ALU.P2R": [bool], "ALU.PLOP": [bool, bool], "ALU.IMAD": [np.int32] * 3}
    return special.get(fam, [NP[t]] * n)


def _result_type(row):
    if row.operands[0].dst and row.operands[0].accepts[0].__name__ == "Pred":
        return bool
    return _source_types(row)[-1] if row.family in ("ALU.IMAD.WIDE",) else \
        {"ALU.P2R": np.uint32, "ALU.IOTA": np.int32}.get(row.family, _source_types(row)[0])


# ---------------------------------------------------------------- one case
def _data(dt, shape, rng):
    if dt is bool:
        return rng.integers(0, 2, shape).astype(bool)
    return random_data(dt, shape, rng).reshape(shape)


def _imm(spec, dt, rng):
    """(operand text, typed value) of a random immediate for slot ``spec``."""
    if FloatImm in spec.accepts and np.dtype(dt).kind == "f":
        bits = int(random_data(np.float32, (4,), rng)[rng.integers(0, 4)].view(np.uint32))
        return format_float(bits), np.uint32(bits).view(np.float32)
    kind = spec.int_kind
    v = int(rng.choice([kind.lo, kind.hi, 0, 1, -1 if kind.lo < 0 else 3,
                        int(rng.integers(kind.lo, kind.hi + 1))]))
    value = np.array(v if kind.signed or v >= 0 else v % 2**32, np.int64)
    return str(v), value.astype(dt) if np.dtype(dt).kind != "f" else value.astype(np.uint32)


def case(row, forms, rng, k=K):
    """Run ``row`` with source forms (``run``/``reg``/``imm``/``c`` per source) and check
    its result against the reference."""
    types, rt = _source_types(row), _result_type(row)
    params = [("Y", "ptr"), ("A", "ptr"), ("B", "ptr"), ("C", "ptr"), ("K", "u64")]
    args, body, vals, ops = [None, None, None, None, 0], [], [], []
    for i, (spec, form, dt) in enumerate(zip(row.operands[1:], forms, types)):
        w = spec.width if dt is not bool else 1
        if form == "imm":
            text, v = _imm(spec, dt, rng)
            ops.append(text)
            vals.append(v)
            continue
        if form == "c":
            v = _data(dt, (1,), rng)
            raw = int(v.view(np.uint64 if w == 2 else np.uint32)[0])
            args[4] = raw | (int(rng.integers(0, 2**32)) << 32 if w == 1 else 0)
            ops.append("c[0x20]")
            vals.append(v[0])
            continue
        shape = (k if form in ("run", "!run") else 1, NT)
        v = _data(dt, shape, rng)
        img = to_image(v.astype(np.uint32) if dt is bool else v)
        args[1 + i] = img
        base = SRC_BASE[i] if form in ("run", "!run") else BCAST[i]
        body.append(transfer("LD", 1 + i, base, img.shape[0]))
        if dt is bool:
            p = 8 + 8 * i
            n = shape[0]
            src = _regs(base, n) if form != "reg" else f"R{base}"
            body.append(f"        ALU.ISETP.NE.U32 {_preds(p, n, form)}, {src}, 0")
            ops.append(("!" if form == "!run" else "") + _preds(p, n, form))
            v = ~v if form == "!run" else v
        else:
            ops.append(_regs(base, img.shape[0]) if form == "run" else f"R{base}")
        vals.append(v)
    if row.family == "ALU.IOTA":
        ops.append("3")
        vals.append(np.int32(3))
    wd = row.operands[0].width
    if rt is bool:
        dst, store = _preds(0, k, "run"), f"        ALU.P2R.B32 R[{DST}:{DST + k}], P[0:{k}]"
        nout = k
    else:
        nout = k * wd
        dst, store = _regs(DST, nout), ""
    body.append(f"        ALU.MOV.IMM {_regs(DST, nout)}, 0xdeadbeef")
    body.append(f"        {row.mnemonic} {dst}, {', '.join(ops)}")
    if store:
        body.append(store)
    body.append(transfer("ST", 0, DST, nout))
    args[0] = poisoned(nout)
    args[1:4] = [a if a is not None else np.zeros((1, NT), np.uint32) for a in args[1:4]]
    text = header(params) + PROLOGUE + "\n" + "\n".join(body) + "\n        EXIT\n"
    run(text, args, (2, 1, 1))
    with np.errstate(all="ignore"):
        want = np.broadcast_to(REF[row.family](row, *vals), (k, NT))
    if rt is bool:
        want = want.astype(np.uint32)
        got = args[0]
    else:
        got = from_image(args[0], np.dtype(rt))
        want = want.astype(rt)
    assert_bits_equal(got, want, f"{row.mnemonic} {forms}")


def _regs(base, n):
    return f"R[{base}:{base + n}]"


def _preds(p, n, form):
    return f"P[{p}:{p + n}]" if form in ("run", "!run") else f"P{p}"


def variants(row) -> list[tuple]:
    """Source forms to test: all runs, then each source as a broadcast register, and the
    last source as an immediate and as a parameter where the slot takes them."""
    srcs = row.operands[1:]
    if row.family == "ALU.MOV.IMM":
        return [("imm",)]
    if row.family == "ALU.IOTA":
        return [("reg",), ("imm",), ("c",)]
    base = ["run" for _ in srcs]
    out = [tuple(base)]
    for i, s in enumerate(srcs):
        if s.accepts[0].__name__ in ("Pred",):
            out.append(tuple(base[:i] + ["!run"] + base[i + 1:]))
        out.append(tuple(base[:i] + ["reg"] + base[i + 1:]))
    last = srcs[-1]
    if IntImm in last.accepts or FloatImm in last.accepts:
        out.append(tuple(base[:-1] + ["imm"]))
    if CBank in last.accepts:
        out.append(tuple(base[:-1] + ["c"]))
    return out


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.mnemonic)
def test_alu_row(row, rng):
    for forms in variants(row):
        case(row, forms, rng)


def test_ffma_is_rounded_once(rng):
    """Products that nearly cancel c, and results in the f32 subnormal range (where
    rounding the f64 sum of the exact product and c to f32 can round twice)."""
    n = 4 * NT
    a = random_data(np.float32, (n,), rng, specials=False)
    b = random_data(np.float32, (n,), rng, specials=False) * np.float32(2.0 ** -60)
    c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(n) * 2.0 ** -20)) \
        .astype(np.float32)
    # the f64 sum lands exactly on an f32-subnormal midpoint, the exact value is below it
    a[0], b[0], c[0] = 2.0 ** -75 * (1 + 2.0 ** -23), 2.0 ** -75 * (1 - 2.0 ** -23), \
        (2 ** 22 + 1) * 2.0 ** -149
    # the f64 sum lands on the midpoint between the largest subnormal and 2**-126, the
    # exact value just below it: the answer is the subnormal, not 2**-126
    a[1], b[1], c[1] = 8392705 * 2.0 ** -98, -16769026 * 2.0 ** -99, 2.0 ** -126
    a, b, c = (x.reshape(4, NT) for x in (a, b, c))
    body = [transfer("LD", 1, 40, 4), transfer("LD", 2, 72, 4), transfer("LD", 3, 104, 4),
            "        ALU.FFMA.F32 R[8:12], R[40:44], R[72:76], R[104:108]",
            transfer("ST", 0, 8, 4)]
    y = poisoned(4)
    run(header([("Y", "ptr"), ("A", "ptr"), ("B", "ptr"), ("C", "ptr")]) + PROLOGUE + "\n"
        + "\n".join(body) + "\n", [y, a.view(np.uint32), b.view(np.uint32),
                                    c.view(np.uint32)], (2, 1, 1))
    with np.errstate(all="ignore"):
        want = _fma_ref(a, b, c, np.float32)
    assert_bits_equal(from_image(y, np.float32), want, "ffma")


@pytest.mark.parametrize("which", ["MIN", "MAX"])
def test_fmnmx_orders_signed_zeros(which):
    """+0 and -0 compare equal, but FMNMX orders them (-0 < +0, IEEE 754-2019
    minimumNumber/maximumNumber) whichever operand holds which, as the llvm backend does."""
    zero, nzero = np.float32(0.0), np.float32(-0.0)
    a = np.where(np.arange(NT) % 2 == 0, zero, nzero).astype(np.float32).reshape(1, NT)
    b = (-a).reshape(1, NT)
    body = [transfer("LD", 1, 40, 1), transfer("LD", 2, 72, 1),
            f"        ALU.FMNMX.{which}.F32 R8, R40, R72", transfer("ST", 0, 8, 1)]
    y = poisoned(1)
    run(header([("Y", "ptr"), ("A", "ptr"), ("B", "ptr")]) + PROLOGUE + "\n"
        + "\n".join(body) + "\n", [y, a.view(np.uint32), b.view(np.uint32)], (2, 1, 1))
    want = np.full_like(a, 0.0 if which == "MAX" else -0.0)
    assert_bits_equal(from_image(y, np.float32), want, f"FMNMX.{which}")
