"""The ALU, SFU and CVT rows, S2R and NOP: float and integer arithmetic, compares into
predicates, selects, moves, packing; f32/f64 transcendentals; every conversion between
register types (scalar rules from :mod:`mutile.ir.semantics`, so the interpreter computes
what the llvm backend computes). Each builder enters :mod:`..rows`' registry."""
from __future__ import annotations

import numpy as np

from mutile.ir import semantics
from mutile.ir import types as T
from mutile.ir.semantics import float_minmax

from ..rows import (DTYPES, SCALAR, VIEW, _view, elements, elementwise, impl, pred_reader, reader,
                    wide, writer)
from .fmath import erf_f64, fma_f32, fma_f64

# ---------------------------------------------------------------- ALU: floats
_FLOAT_BIN = {"ALU.FADD": np.add, "ALU.FSUB": np.subtract, "ALU.FMUL": np.multiply,
              "ALU.FDIV": np.true_divide, "ALU.FREM": np.fmod,
              "ALU.FMNMX.MIN": lambda a, b: float_minmax(a, b, False),
              "ALU.FMNMX.MAX": lambda a, b: float_minmax(a, b, True)}


@impl(*_FLOAT_BIN)
def _float_binary(ins):
    v = _view(ins)
    return elementwise(ins, _FLOAT_BIN[ins.op.family], [v, v], v)


@impl("ALU.FFMA")
def _ffma(ins):
    v = _view(ins)
    if v == "f32":
        return elementwise(ins, fma_f32, [v, v, v], v, into=fma_f32)
    return elementwise(ins, fma_f64, [v, v, v], v)


_ROUND = {"RN": np.rint, "RM": np.floor, "RP": np.ceil, "RZ": np.trunc}


@impl("ALU.FRND")
def _frnd(ins):
    v = _view(ins)
    return elementwise(ins, _ROUND[ins.op.attrs["mode"]], [v], v)


_CMP = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
        "GT": np.greater, "GE": np.greater_equal}


@impl("ALU.FSETP", "ALU.ISETP")
def _setp(ins):
    v = _view(ins)
    return elementwise(ins, _CMP[ins.op.attrs["cmp"]], [v, v], "pred")


# ---------------------------------------------------------------- ALU: integers
def _scalar(view: str):
    return {"i32": T.i32, "u32": T.u32, "i64": T.i64, "u64": T.u64}[view]


_INT_BIN = {"ALU.IADD": np.add, "ALU.ISUB": np.subtract, "ALU.IMUL": np.multiply,
            "ALU.IMNMX.MIN": np.minimum, "ALU.IMNMX.MAX": np.maximum,
            "ALU.LOP.AND": np.bitwise_and, "ALU.LOP.OR": np.bitwise_or,
            "ALU.LOP.XOR": np.bitwise_xor}


@impl(*_INT_BIN)
def _int_binary(ins):
    v = _view(ins)
    return elementwise(ins, _INT_BIN[ins.op.family], [v, v], v)


@impl("ALU.IDIV", "ALU.IREM")
def _idiv(ins):
    v = _view(ins)
    t = _scalar(v)
    f = semantics._div if ins.op.family == "ALU.IDIV" else semantics._rem
    return elementwise(ins, lambda a, b: f(*np.broadcast_arrays(a, b), t), [v, v], v)


@impl("ALU.IMUL.HI")
def _imul_hi(ins):
    v = _view(ins)
    wide = np.int64 if v == "i32" else np.uint64
    return elementwise(ins, lambda a, b: ((a.astype(wide) * b.astype(wide))
                                          >> wide(32)).astype(DTYPES[v]), [v, v], v)


@impl("ALU.IMAD")
def _imad(ins):
    return elementwise(ins, lambda a, b, c: a * b + c, ["i32", "i32", "i32"], "i32",
                       into=lambda a, b, c, out: np.add(a * b, c, out=out))


@impl("ALU.IMAD.WIDE")
def _imad_wide(ins):
    v = _view(ins)
    wide = "i64" if v == "i32" else "u64"
    dt = DTYPES[wide]
    return elementwise(ins, lambda a, b, c: a.astype(dt) * b.astype(dt) + c, [v, v, wide], wide)


@impl("ALU.IABS")
def _iabs(ins):
    v = _view(ins)
    return elementwise(ins, np.abs, [v], v)


@impl("ALU.SHL", "ALU.SHR")
def _shift(ins):
    """numpy's shifts are C's with the counts of :mod:`mutile.ir.semantics`: a count of
    at least the width (any count as unsigned) gives 0, or the sign fill for a signed
    right shift; 32-bit counts are read as the shifted type, 64-bit ones widened."""
    t = ins.op.attrs["type"]
    v = {"B32": "u32", "B64": "u64"}.get(t) or VIEW[t][0]
    f = np.left_shift if ins.op.family == "ALU.SHL" else np.right_shift
    if not wide(v):
        return elementwise(ins, f, [v, v], v)
    dt = DTYPES[v]
    return elementwise(ins, lambda a, b: f(a, b.astype(dt)), [v, "u32"], v)


@impl("ALU.SEL")
def _sel(ins):
    v = _view(ins)
    w = writer(ins.operands[0], v)
    ra, rb = reader(ins.operands[1], v), reader(ins.operands[2], v)
    rp = pred_reader(ins.operands[3])
    return lambda st, sel: w(st, sel, np.where(rp(st, sel.threads), ra(st, sel.threads),
                                               rb(st, sel.threads)))


def _copy_into(a, out):
    out[...] = a


@impl("ALU.MOV")
def _mov(ins):
    v = _view(ins)
    return elementwise(ins, lambda a: a, [v], v, into=_copy_into)


@impl("ALU.MOV.IMM")
def _mov_imm(ins):
    return elementwise(ins, lambda a: a, ["u32"], "u32", into=_copy_into)


@impl("ALU.IOTA")
def _iota(ins):
    """d[i] = a + i * step, wrapping in 32 bits (the steps are wrapped once)."""
    n = elements(ins)
    step = (np.arange(n, dtype=np.int64) * ins.operands[2].value)[:, None]
    step = step.astype(np.uint32).view(np.int32)
    return elementwise(ins, lambda a: a + step, ["i32"], "i32",
                       into=lambda a, out: np.add(a, step, out=out))


@impl("ALU.PACK")
def _pack(ins):
    return elementwise(ins, lambda a, b: (a & np.uint32(0xFFFF)) | (b << np.uint32(16)),
                       ["u32", "u32"], "u32")


@impl("ALU.P2R")
def _p2r(ins):
    w = writer(ins.operands[0], "u32")
    rp = pred_reader(ins.operands[1])
    return lambda st, sel: w(st, sel, rp(st, sel.threads).astype(np.uint32))


_PLOP = {"AND": np.logical_and, "OR": np.logical_or, "XOR": np.logical_xor}


@impl("ALU.PLOP")
def _plop(ins):
    return elementwise(ins, _PLOP[ins.op.attrs["op"]], ["pred", "pred"], "pred")


# ---------------------------------------------------------------- SFU
def _rsqrt(x):
    return 1.0 / np.sqrt(x)


_SFU = {"SFU.EX2": np.exp2, "SFU.LG2": np.log2, "SFU.EXP": np.exp, "SFU.LOG": np.log,
        "SFU.RSQ": _rsqrt, "SFU.RCP": lambda x: 1.0 / x, "SFU.SQRT": np.sqrt,
        "SFU.SIN": np.sin, "SFU.COS": np.cos, "SFU.TANH": np.tanh, "SFU.ERF": erf_f64,
        "SFU.POW": np.power}
# f32 functions that are correctly rounded when computed in f32 directly
_F32_EXACT = {"SFU.RCP": lambda x: np.float32(1.0) / x, "SFU.SQRT": np.sqrt}


@impl(*_SFU)
def _sfu(ins):
    fam, v = ins.op.family, _view(ins)
    f = _SFU[fam]
    if v == "f32":
        f = _F32_EXACT.get(fam) or (lambda *a, g=f: g(*(x.astype(np.float64) for x in a))
                                    .astype(np.float32))
    return elementwise(ins, f, [v] * (len(ins.operands) - 1), v)


# ---------------------------------------------------------------- CVT
_NARROW_FLOAT = {"F16": np.float16, "BF16": T.bf16.to_numpy(),
                 "F8E4M3": T.f8e4m3.to_numpy(), "F8E5M2": T.f8e5m2.to_numpy(),
                 "F8E4B8": T.f8e4b8.to_numpy(), "F8E5B16": T.f8e5b16.to_numpy()}
_NARROW_INT = {"S16": np.int16, "U16": np.uint16, "S8": np.int8, "U8": np.uint8}


def _cvt_in(t: str):
    """(register view, function: register values -> values of type t)."""
    if t in VIEW:
        return VIEW[t][0], lambda x: x
    dt = _NARROW_FLOAT.get(t) or _NARROW_INT[t]
    bits = np.dtype(dt).itemsize * 8
    ut = np.uint16 if bits == 16 else np.uint8
    return "u32", lambda x: x.astype(ut).view(dt)


def _cvt_out(t: str):
    """(register view, function: values of type t -> register values)."""
    if t in VIEW:
        return VIEW[t][0], lambda y: y
    if t in _NARROW_FLOAT:
        ut = np.uint16 if np.dtype(_NARROW_FLOAT[t]).itemsize == 2 else np.uint8
        return "u32", lambda y: y.view(ut).astype(np.uint32)
    return ("i32" if t[0] == "S" else "u32"), lambda y: y.astype(np.int64).astype(
        np.int32 if t[0] == "S" else np.uint32)


def _tf32(x):
    bits = x.view(np.uint32)
    up = (bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))) \
        & np.uint32(0xFFFFE000)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    keep = np.where((bits & np.uint32(0x7FFFFF)) != 0, bits | np.uint32(0x400000), bits) \
        & np.uint32(0xFFFFE000)
    return np.where(special, keep, up).view(np.float32)


@impl("CVT")
def _cvt(ins):
    s, d = ins.op.attrs["src"], ins.op.attrs["dst"]
    if d == "TF32":
        return elementwise(ins, _tf32, ["f32"], "f32")
    vin, fin = _cvt_in(s)
    vout, fout = _cvt_out(d)
    src_t, dst_t = SCALAR[s], SCALAR[d]
    return elementwise(ins, lambda x: fout(semantics.convert(fin(x), src_t, dst_t)),
                       [vin], vout)


# ---------------------------------------------------------------- S2R, NOP
@impl("S2R")
def _s2r(ins):
    w = writer(ins.operands[0], "u32")
    name = ins.operands[1].name
    return lambda st, sel: w(st, sel, st.sr[name][:, sel.threads])


@impl("NOP")
def _nop(ins):
    return lambda st, sel: None
