"""Instruction semantics of the interpreter: one builder per instruction *family*.

A builder takes one :class:`~.program.Instruction` and returns a closure
``run(st, sel)`` that executes it for every selected thread at once: ``sel.rows`` is a
slice (the common case: a view, no copies) or an index array of rows of the register
file, ``sel.mask`` is None (every element writes) or a boolean array (n, 1) / (n, count)
from the active lanes and the guard. Operands are resolved when the program is decoded:
a register or run becomes a column range of a typed view of the register file
(``st.reg["f32"]`` ...; 64-bit types view pairs), an immediate a (1, 1) numpy constant, a
``c[...]`` a (1, 1) view of the launch's constant bank. Results are computed from whole
arrays before anything is written, so runs read all elements before writing any.

Scalar rules come from :mod:`mutile.ir.semantics` (division, remainder, shifts, float ->
int conversion), so the interpreter computes what the llvm backend computes.
:data:`IMPLS` maps every family of the table to its builder (a test checks every row).
"""
from __future__ import annotations

import numpy as np

from mutile.ir import semantics
from mutile.ir import types as T

from .interp_math import erf_f64, fma_f32, fma_f64
from .operands import PT, RZ, CBank, FloatImm, IntImm, Pred, PredRun, Reg, Run

# register type suffix -> (typed view of the register file, registers per value)
VIEW = {"F32": ("f32", 1), "F64": ("f64", 2), "S32": ("i32", 1), "U32": ("u32", 1),
        "B32": ("u32", 1), "S64": ("i64", 2), "U64": ("u64", 2), "B64": ("u64", 2)}
DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32,
          "i64": np.int64, "u64": np.uint64}
SCALAR = {"F64": T.f64, "F32": T.f32, "F16": T.f16, "BF16": T.bf16, "F8E4M3": T.f8e4m3,
          "F8E5M2": T.f8e5m2, "S64": T.i64, "U64": T.u64, "S32": T.i32, "U32": T.u32,
          "S16": T.i16, "U16": T.u16, "S8": T.i8, "U8": T.u8}

IMPLS: dict = {}


def impl(*families):
    """Register a builder for the named families."""
    def deco(fn):
        for f in families:
            assert f not in IMPLS, f
            IMPLS[f] = fn
        return fn
    return deco


def build(ins):
    """The closure (or control descriptor) executing ``ins``; KeyError if the family has
    no builder."""
    return IMPLS[ins.op.family](ins)


# ---------------------------------------------------------------- operand access
def const(value: int, view: str) -> np.ndarray:
    """A (1, 1) array holding integer ``value`` (signed or unsigned) as type ``view``."""
    dt = np.dtype(DTYPES[view])
    bits = dt.itemsize * 8
    u = np.array([[value % (1 << bits)]], f"u{dt.itemsize}")
    return u.view(dt)


def columns(v, width: int, view_width: int) -> tuple[int, int]:
    """Columns [c0, c1) of a view with ``view_width`` registers per column that register
    ``v`` (a Reg of a ``width``-register slot, or a Run) covers."""
    r0, r1 = (v.n, v.n + width) if isinstance(v, Reg) else (v.start, v.end)
    return r0 // view_width, r1 // view_width


def reader(v, view: str, width: int = 0):
    """A function ``(st, rows) -> array`` (2-D, broadcastable to (n, count)) reading
    source value ``v`` as type ``view``; ``width``: registers of the slot (default: the
    view's)."""
    vw = 2 if view in ("f64", "i64", "u64") else 1
    width = width or vw
    if isinstance(v, Reg) and v.n == RZ:
        z = const(0, view)
        return lambda st, rows: z
    if isinstance(v, (Reg, Run)):
        c0, c1 = columns(v, width, vw)
        return lambda st, rows: st.reg[view][rows, c0:c1]
    if isinstance(v, IntImm):
        k = const(v.value, view)
        return lambda st, rows: k
    if isinstance(v, FloatImm):
        k = np.array([[v.bits]], np.uint32).view(np.float32)
        k = k if view == "f32" else k.view(np.uint32) if view == "u32" else k.astype(DTYPES[view])
        return lambda st, rows: k
    if isinstance(v, CBank):
        i = v.offset // np.dtype(DTYPES[view]).itemsize
        return lambda st, rows: st.cb[view][i]
    if isinstance(v, (Pred, PredRun)):
        return pred_reader(v)
    raise TypeError(f"no reader for {v!r}")


def pred_reader(p):
    """``(st, rows) -> bool array`` of a source predicate, ``!P``, ``PT`` or a run."""
    if isinstance(p, Pred):
        if p.n == PT:
            k = np.array([[not p.neg]])
            return lambda st, rows: k
        n = p.n
        if p.neg:
            return lambda st, rows: ~st.P[rows, n:n + 1]
        return lambda st, rows: st.P[rows, n:n + 1]
    s, e = p.start, p.end
    if p.neg:
        return lambda st, rows: ~st.P[rows, s:e]
    return lambda st, rows: st.P[rows, s:e]


def _store(arr, sel, c0, c1, val, rep=1):
    mask = sel.mask
    if mask is None:
        arr[sel.rows, c0:c1] = val
        return
    if rep > 1 and mask.shape[1] > 1:
        mask = np.repeat(mask, rep, axis=1)
    if sel.is_slice:
        np.copyto(arr[sel.rows, c0:c1], val, casting="unsafe", where=mask)
    else:
        arr[sel.rows, c0:c1] = np.where(mask, val, arr[sel.rows, c0:c1])


def writer(v, view: str, width: int = 0):
    """A function ``(st, sel, value)`` writing destination ``v`` (register/run as type
    ``view``, or a predicate/predicate run when ``view`` is "pred") under ``sel.mask``.
    Writes to RZ and PT are dropped."""
    if view == "pred":
        if isinstance(v, Pred) and v.n == PT:
            return lambda st, sel, val: None
        c0, c1 = (v.n, v.n + 1) if isinstance(v, Pred) else (v.start, v.end)
        return lambda st, sel, val: _store(st.P, sel, c0, c1, val)
    if isinstance(v, Reg) and v.n == RZ:
        return lambda st, sel, val: None
    vw = 2 if view in ("f64", "i64", "u64") else 1
    width = width or vw
    c0, c1 = columns(v, width, vw)
    rep = width // vw
    return lambda st, sel, val: _store(st.reg[view], sel, c0, c1, val, rep)


def elements(ins) -> int:
    """Elements of ``ins``'s runs, 1 when it has none."""
    return ins.count or 1


def elementwise(ins, fn, srcs: list, dst: str):
    """``d = fn(*sources)``: operand 0 is the destination (type ``dst``), operands 1..
    the sources with the given view types."""
    w = writer(ins.operands[0], dst)
    rs = [reader(v, t) for v, t in zip(ins.operands[1:], srcs)]
    if len(rs) == 1:
        r0, = rs
        return lambda st, sel: w(st, sel, fn(r0(st, sel.rows)))
    if len(rs) == 2:
        r0, r1 = rs
        return lambda st, sel: w(st, sel, fn(r0(st, sel.rows), r1(st, sel.rows)))
    r0, r1, r2 = rs
    return lambda st, sel: w(st, sel, fn(r0(st, sel.rows), r1(st, sel.rows),
                                         r2(st, sel.rows)))


def _view(ins, key: str = "type") -> str:
    return VIEW[ins.op.attrs[key]][0]


# ---------------------------------------------------------------- ALU: floats
_FLOAT_BIN = {"ALU.FADD": np.add, "ALU.FSUB": np.subtract, "ALU.FMUL": np.multiply,
              "ALU.FDIV": np.true_divide, "ALU.FMNMX.MIN": np.fmin, "ALU.FMNMX.MAX": np.fmax}


@impl(*_FLOAT_BIN)
def _float_binary(ins):
    v = _view(ins)
    return elementwise(ins, _FLOAT_BIN[ins.op.family], [v, v], v)


@impl("ALU.FFMA")
def _ffma(ins):
    v = _view(ins)
    return elementwise(ins, fma_f32 if v == "f32" else fma_f64, [v, v, v], v)


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
    return elementwise(ins, lambda a, b, c: a * b + c, ["i32", "i32", "i32"], "i32")


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
    t = ins.op.attrs["type"]
    v = {"B32": "u32", "B64": "u64"}.get(t) or VIEW[t][0]
    left = ins.op.family == "ALU.SHL"
    st = _scalar(v)
    return elementwise(ins, lambda a, b: semantics._shift(
        *np.broadcast_arrays(a, b), st, left), [v, "u32"], v)


@impl("ALU.SEL")
def _sel(ins):
    v = _view(ins)
    w = writer(ins.operands[0], v)
    ra, rb = reader(ins.operands[1], v), reader(ins.operands[2], v)
    rp = pred_reader(ins.operands[3])
    return lambda st, sel: w(st, sel, np.where(rp(st, sel.rows), ra(st, sel.rows),
                                               rb(st, sel.rows)))


@impl("ALU.MOV")
def _mov(ins):
    v = _view(ins)
    return elementwise(ins, lambda a: a, [v], v)


@impl("ALU.MOV.IMM")
def _mov_imm(ins):
    return elementwise(ins, lambda a: a, ["u32"], "u32")


@impl("ALU.IOTA")
def _iota(ins):
    n = elements(ins)
    step = np.arange(n, dtype=np.int64) * ins.operands[2].value
    return elementwise(ins, lambda a: (a.astype(np.int64) + step).astype(np.int32),
                       ["i32"], "i32")


@impl("ALU.PACK")
def _pack(ins):
    return elementwise(ins, lambda a, b: (a & np.uint32(0xFFFF)) | (b << np.uint32(16)),
                       ["u32", "u32"], "u32")


@impl("ALU.P2R")
def _p2r(ins):
    w = writer(ins.operands[0], "u32")
    rp = pred_reader(ins.operands[1])
    return lambda st, sel: w(st, sel, rp(st, sel.rows).astype(np.uint32))


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
                 "F8E4M3": T.f8e4m3.to_numpy(), "F8E5M2": T.f8e5m2.to_numpy()}
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
    return lambda st, sel: w(st, sel, st.sr[name][sel.rows])


@impl("NOP")
def _nop(ins):
    return lambda st, sel: None


from . import interp_mem, interp_warp  # noqa: E402,F401  (register LSU, SHFL, WMMA, control)
