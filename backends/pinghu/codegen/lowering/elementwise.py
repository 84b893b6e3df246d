"""Elementwise ops, constants, ids, casts: one ISA instruction per op over the register
run of a tile (a few more for narrow types).

Every operand is in the block layout, so an elementwise op never moves data. When every
operand is uniform the op runs on one register and the result stays uniform. Narrow
floats (f16, bf16, fp8) compute in f32 and round once on the way back (the semantics
table's rule); narrow integers compute in 32 bits and wrap back; ``i1`` computes as a
0/1 u32 and keeps bit 0.
"""
from __future__ import annotations

from mutile.ir import types as T

from ...isa.operands import RZ, FloatImm, IntImm, Reg, SReg
from .. import recipe
from ..context import (Codegen, cvt_name, element, helper, is_narrow_float, isa_int, lowers,
                       width)
from ..recipe import Bits, Const, Node
from ..values import VP, VR, TileVal, Uniform, log2, numel

_FLOAT = {"add": "ALU.FADD", "sub": "ALU.FSUB", "mul": "ALU.FMUL", "div": "ALU.FDIV",
          "rem": "ALU.FREM", "min": "ALU.FMNMX.MIN", "max": "ALU.FMNMX.MAX", "pow": "SFU.POW"}
_INT = {"add": "ALU.IADD", "sub": "ALU.ISUB", "mul": "ALU.IMUL", "div": "ALU.IDIV",
        "rem": "ALU.IREM", "min": "ALU.IMNMX.MIN", "max": "ALU.IMNMX.MAX",
        "and": "ALU.LOP.AND", "or": "ALU.LOP.OR", "xor": "ALU.LOP.XOR", "shl": "ALU.SHL", "shr": "ALU.SHR"}
_SFU = {"exp": "EXP", "exp2": "EX2", "log": "LOG", "log2": "LG2", "sqrt": "SQRT",
        "rsqrt": "RSQ", "sin": "SIN", "cos": "COS", "tanh": "TANH", "erf": "ERF"}
_CMP = {"eq": "EQ", "ne": "NE", "lt": "LT", "le": "LE", "gt": "GT", "ge": "GE"}


def _result(cg: Codegen, op, operands, ty=None):
    """A result tile for ``op``: scalar-sized (and returned as uniform) when every
    operand is uniform."""
    rt = op.results[0].type
    shape = rt.shape if rt.is_tile() else ()
    ty = ty or element(rt)
    uniform = all(isinstance(v, Uniform) for v in operands)
    return cg.new_tile(() if uniform else shape, ty), shape, uniform


def _finish(cg: Codegen, op, tile: TileVal, shape, uniform):
    val = Uniform(tile.run(), shape, tile.ty, tile.pred) if uniform else tile
    cg.bind(op.results[0], val)


def _int_suffix(mn: str, t) -> str:
    it = isa_int(t)
    if mn in ("ALU.LOP.AND", "ALU.LOP.OR", "ALU.LOP.XOR", "ALU.SHL"):
        return "B64" if width(t) == 2 else "B32"
    if mn in ("ALU.IADD", "ALU.ISUB", "ALU.IMUL"):
        return "S64" if width(t) == 2 else "S32"
    return it


def to_f32(cg: Codegen, v, t):
    """A narrow-float value as f32 (immediates become f32 immediates)."""
    if isinstance(v, Uniform) and isinstance(v.src, IntImm):
        import numpy as np
        bits = np.array(v.src.value & 0xFFFF, np.uint16 if t.bits == 16 else np.uint8)
        return Uniform(FloatImm.of(float(bits.view(t.to_numpy()).astype(np.float32))),
                       v.shape, T.f32)
    out = cg.new_tile(() if isinstance(v, Uniform) else v.shape, T.f32)
    cg.emit(f"CVT.F32.{cvt_name(t)}", out.run(), cg.operand(v, False))
    return Uniform(out.run(), v.shape, T.f32) if isinstance(v, Uniform) else out


def from_f32(cg: Codegen, src: TileVal, t) -> None:
    """Round an f32 tile back to narrow float ``t`` in place."""
    cg.emit(f"CVT.{cvt_name(t)}.F32", src.run(), src.run())


def wrap_int(cg: Codegen, tile: TileVal, t) -> None:
    """Bring a narrow integer (or i1) computed in 32 bits back to its type, in place."""
    if t.is_bool():
        cg.emit("ALU.LOP.AND.B32", tile.run(), tile.run(), IntImm(1))
    elif t.bits < 32:
        cg.emit(f"CVT.{cvt_name(t)}.{'S32' if t.is_int_signed() else 'U32'}", tile.run(),
                tile.run())


def binary(cg: Codegen, name: str, a, b, t, out: TileVal) -> None:
    """``out = a <name> b`` for element type ``t`` (operands already in the layout)."""
    if t.is_floating():
        if is_narrow_float(t):
            a, b = to_f32(cg, a, t), to_f32(cg, b, t)
            tmp = TileVal(out.vreg, out.shape, T.f32, out.E, 1)
            cg.emit(f"{_FLOAT[name]}.F32", tmp.run(), cg.operand(a, False), cg.operand(b))
            from_f32(cg, out, t)
            return
        suffix = "F64" if t == T.f64 else "F32"
        cg.emit(f"{_FLOAT[name]}.{suffix}", out.run(), cg.operand(a, False), cg.operand(b))
        return
    if name in ("div", "rem") and _pow2_divide(cg, name, a, b, t, out):
        return
    mn = _INT[name]
    bo = cg.operand(b)
    if name in ("shl", "shr") and width(t) == 2:
        bo = _shift_amount64(cg, b)
    if name == "shr":
        mn = f"ALU.SHR.{isa_int(t)}"
    else:
        mn = f"{mn}.{_int_suffix(mn, t)}"
    cg.emit(mn, out.run(), cg.operand(a, False), bo)
    wrap_int(cg, out, t)


def _pow2_divide(cg: Codegen, name: str, a, b, t, out: TileVal) -> bool:
    """``a // 2**k`` or ``a % 2**k`` (32-bit, a constant power of two above 1) by shifts
    and masks instead of a divide (40 cycles): unsigned, a shift or an AND; signed, with
    C's truncation (docs/semantics.md): ``a + (2**k - 1 if a < 0 else 0)``, then an
    arithmetic shift (the quotient) or ``a`` minus its multiple of ``2**k`` (the
    remainder). False when the divisor is anything else."""
    if not (isinstance(b, Uniform) and isinstance(b.src, IntImm)) or t.bits != 32:
        return False
    d = b.src.value & 0xFFFFFFFF
    k = d.bit_length() - 1
    if d < 2 or d & (d - 1) or (t.is_int_signed() and k > 30):
        return False
    src = cg.operand(a, False)
    if not t.is_int_signed():
        if name == "div":
            cg.emit("ALU.SHR.U32", out.run(), src, IntImm(k))
        else:
            cg.emit("ALU.LOP.AND.B32", out.run(), src, IntImm(d - 1))
        return True
    bias = cg.new_tile(out.shape, t)
    cg.emit("ALU.SHR.S32", bias.run(), src, IntImm(31))             # 0 or -1
    cg.emit("ALU.SHR.U32", bias.run(), bias.run(), IntImm(32 - k))  # 0 or 2**k - 1
    cg.emit("ALU.IADD.S32", bias.run(), src, bias.run())
    if name == "div":
        cg.emit("ALU.SHR.S32", out.run(), bias.run(), IntImm(k))
    else:
        cg.emit("ALU.LOP.AND.B32", bias.run(), bias.run(), IntImm((-d) & 0xFFFFFFFF))
        cg.emit("ALU.ISUB.S32", out.run(), src, bias.run())
    return True


def _shift_amount64(cg: Codegen, b):
    """A 64-bit shift amount as the u32 the shift takes (clamped to 64 first)."""
    if isinstance(b, Uniform) and isinstance(b.src, (int, IntImm)):
        v = b.src if isinstance(b.src, int) else b.src.value
        return IntImm(min(v & (2**64 - 1), 64))
    shape = () if isinstance(b, Uniform) else b.shape
    clamp = cg.new_tile(shape, T.u64)
    cg.emit("ALU.IMNMX.MIN.U64", clamp.run(), cg.operand(b, False), IntImm(64))
    low = cg.new_tile(shape, T.u32)
    cg.emit("CVT.U32.U64", low.run(), clamp.run())
    return low.run()


@lowers("add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr",
        "pow")
def lower_binary(cg: Codegen, op) -> None:
    a, b = (cg.as_uniform(cg.get(v)) for v in op.operands)
    out, shape, uni = _result(cg, op, [a, b])
    t = element(op.operands[0].type)
    if t.is_bool() and op.name in ("and", "or", "xor") and _has_pred(a) and _has_pred(b) \
            and cg.options.get("_cache_preds", True):
        r = None if uni else recipe.combine(op.name, [a, b], t)
        if r is not None and out.E > CMP_CHUNK:      # (the operands' predicates go unread)
            by_chunks(cg, r, shape, out)
        else:
            logic_i1(cg, op.name, a, b, out)
        out.recipe = r
        _finish(cg, op, out, shape, uni)
        return
    binary(cg, op.name, a, b, t, out)
    if not uni and t.is_int():
        out.recipe = recipe.combine(op.name, [a, b], t)
    _finish(cg, op, out, shape, uni)


def compare(cg: Codegen, pred_name: str, a, b, t, out: TileVal) -> None:
    """``out`` (i1 as 0/1) = ``a <pred> b`` for operand element type ``t``."""
    p = cg.vreg(out.E, kind="P")
    pred = _CMP[pred_name]
    if t.is_floating():
        if is_narrow_float(t):
            a, b = to_f32(cg, a, t), to_f32(cg, b, t)
        suffix = "F64" if t == T.f64 else "F32"
        cg.emit(f"ALU.FSETP.{pred}.{suffix}", VP(p, 0, out.E), cg.operand(a, False),
                cg.operand(b))
    else:
        it = "U64" if t.is_ptr() else isa_int(t)
        cg.emit(f"ALU.ISETP.{pred}.{it}", VP(p, 0, out.E), cg.operand(a, False), cg.operand(b))
    cg.emit("ALU.P2R.B32", out.run(), VP(p, 0, out.E))
    out.pred = VP(p, 0, out.E)


def _has_pred(v) -> bool:
    return getattr(v, "pred", None) is not None or (
        isinstance(v, Uniform) and isinstance(v.src, IntImm))


def logic_i1(cg: Codegen, name: str, a, b, out: TileVal) -> None:
    """``out`` = ``a and/or/xor b`` on i1 values, computed on their predicates (the 0/1
    register form follows from them, and is dropped when nothing reads it)."""
    p = cg.vreg(out.E, kind="P")
    cg.emit(f"ALU.PLOP.{name.upper()}", VP(p, 0, out.E), cg.pred_of(a), cg.pred_of(b))
    cg.emit("ALU.P2R.B32", out.run(), VP(p, 0, out.E))
    out.pred = VP(p, 0, out.E)


@lowers("cmp")
def lower_cmp(cg: Codegen, op) -> None:
    a, b = (cg.as_uniform(cg.get(v)) for v in op.operands)
    t = element(op.operands[0].type)
    out, shape, uni = _result(cg, op, [a, b])
    r = None if uni or t.is_floating() else \
        recipe.combine("cmp", [a, b], t, {"pred": op.attrs["pred"]})
    if r is not None and out.E > CMP_CHUNK:
        by_chunks(cg, r, shape, out)
    else:
        compare(cg, op.attrs["pred"], a, b, t, out)
    out.recipe = r
    _finish(cg, op, out, shape, uni)


CMP_CHUNK = 16      # elements of index arithmetic a chunked comparison holds at once


def by_chunks(cg: Codegen, r, shape: tuple, out: TileVal) -> None:
    """``out`` = the i1 recipe ``r`` (a comparison, or a logic op over them), evaluated
    ``CMP_CHUNK`` elements at a time into one predicate run: its index arithmetic then
    needs ``CMP_CHUNK`` registers instead of a whole tile's (the operand tiles, left
    unread, are dropped), which matters where a mask is built beside large live tiles
    (attention's scores and accumulator)."""
    p = cg.vreg(out.E, kind="P")
    for c in range(0, out.E, CMP_CHUNK):
        m = emit_recipe(cg, r, shape, T.i1, index=cg.index_run(shape, c, CMP_CHUNK))
        part = cg.pred_of(m)
        cg.emit("ALU.PLOP.AND", VP(p, c, CMP_CHUNK), part, part)
    cg.emit("ALU.P2R.B32", out.run(), VP(p, 0, out.E))
    out.pred = VP(p, 0, out.E)


@lowers(*_SFU, "floor", "ceil")
def lower_math(cg: Codegen, op) -> None:
    x = cg.as_uniform(cg.get(op.operands[0]))
    t = element(op.operands[0].type)
    out, shape, uni = _result(cg, op, [x])
    src, dst, suffix = x, out, "F64" if t == T.f64 else "F32"
    if is_narrow_float(t):
        src = to_f32(cg, x, t)
        dst = TileVal(out.vreg, out.shape, T.f32, out.E, 1)
    if op.name in ("floor", "ceil"):
        mode = "RM" if op.name == "floor" else "RP"
        cg.emit(f"ALU.FRND.{mode}.{suffix}", dst.run(), cg.operand(src, False))
    else:
        cg.emit(f"SFU.{_SFU[op.name]}.{suffix}", dst.run(), cg.operand(src, False))
    if is_narrow_float(t):
        from_f32(cg, out, t)
    _finish(cg, op, out, shape, uni)


def _sign_mask(cg: Codegen, t, keep: bool):
    """The sign bit (or everything but it) of float type ``t`` as an operand."""
    bits = t.bits
    sign = 1 << (bits - 1)
    mask = (2**bits - 1) ^ sign if keep else sign
    if bits == 64:
        return cg.materialize_scalar(Uniform(mask, (), T.u64))
    return IntImm(mask)


@lowers("neg", "abs", "not")
def lower_unary(cg: Codegen, op) -> None:
    x = cg.as_uniform(cg.get(op.operands[0]))
    t = element(op.operands[0].type)
    out, shape, uni = _result(cg, op, [x])
    xo = cg.operand(x, False)
    b64 = "B64" if width(t) == 2 else "B32"
    if t.is_floating():
        if op.name == "neg":
            cg.emit(f"ALU.LOP.XOR.{b64}", out.run(), xo, _sign_mask(cg, t, False))
        else:
            cg.emit(f"ALU.LOP.AND.{b64}", out.run(), xo, _sign_mask(cg, t, True))
    elif op.name == "not":
        cg.emit(f"ALU.LOP.XOR.{b64}", out.run(), xo, IntImm(1 if t.is_bool() else 0xFFFFFFFF))
        if not t.is_bool():
            wrap_int(cg, out, t)
        elif getattr(x, "pred", None) is not None:
            out.pred = x.pred.negated()
    elif op.name == "neg":
        cg.emit(f"ALU.ISUB.{'S64' if width(t) == 2 else 'S32'}", out.run(), Reg(RZ), xo)
        wrap_int(cg, out, t)
    elif t.is_int_signed():
        cg.emit(f"ALU.IABS.{isa_int(t)}", out.run(), xo)
        wrap_int(cg, out, t)
    else:
        cg.emit(f"ALU.MOV.{b64}", out.run(), xo)
    _finish(cg, op, out, shape, uni)


@lowers("fma")
def lower_fma(cg: Codegen, op) -> None:
    a, b, c = (cg.as_uniform(cg.get(v)) for v in op.operands)
    t = element(op.operands[0].type)
    out, shape, uni = _result(cg, op, [a, b, c])
    if is_narrow_float(t):
        a, b, c = (to_f32(cg, v, t) for v in (a, b, c))
        tmp = TileVal(out.vreg, out.shape, T.f32, out.E, 1)
        cg.emit("ALU.FFMA.F32", tmp.run(), cg.operand(a, False), cg.operand(b),
                cg.operand(c, False))
        from_f32(cg, out, t)
    else:
        suffix = "F64" if t == T.f64 else "F32"
        cg.emit(f"ALU.FFMA.{suffix}", out.run(), cg.operand(a, False), cg.operand(b),
                cg.operand(c, False))
    _finish(cg, op, out, shape, uni)


@lowers("select")
def lower_select(cg: Codegen, op) -> None:
    c, a, b = (cg.as_uniform(cg.get(v)) for v in op.operands)
    rt = element(op.results[0].type)
    if rt.is_ptr():
        a, b = (cg.materialize(v) if not isinstance(v, (TileVal, Uniform)) else v
                for v in (a, b))
    out, shape, uni = _result(cg, op, [c, a, b], rt)
    p = cg.pred_of(c)
    cg.emit(f"ALU.SEL.{'B64' if width(rt) == 2 else 'B32'}", out.run(), cg.operand(a, False),
            cg.operand(b), p)
    _finish(cg, op, out, shape, uni)


def cast_into(cg: Codegen, x, src, dst, out: TileVal) -> None:
    """``out`` = ``x`` (element type ``src``) converted to ``dst``."""
    xo = cg.operand(x, False)
    if dst.is_bool():
        p = cg.vreg(out.E, kind="P")
        if src.is_floating():
            if is_narrow_float(src):
                x = to_f32(cg, x, src)
                xo = cg.operand(x, False)
            sfx = "F64" if src == T.f64 else "F32"
            cg.emit(f"ALU.FSETP.NE.{sfx}", VP(p, 0, out.E), xo, FloatImm.of(0.0) if sfx ==
                    "F32" else cg.materialize_scalar(Uniform(0.0, (), T.f64)))
        else:
            cg.emit(f"ALU.ISETP.NE.{isa_int(src)}", VP(p, 0, out.E), xo, IntImm(0))
        cg.emit("ALU.P2R.B32", out.run(), VP(p, 0, out.E))
    elif cvt_name(src) == cvt_name(dst) or (not src.is_floating() and not dst.is_floating()
                                            and width(src) == width(dst) == 1
                                            and dst.bits == 32):
        cg.emit(f"ALU.MOV.{'B64' if width(dst) == 2 else 'B32'}", out.run(), xo)
    elif not src.is_floating() and not dst.is_floating() and width(src) == width(dst) == 2:
        cg.emit("ALU.MOV.B64", out.run(), xo)
    else:
        cg.emit(f"CVT.{cvt_name(dst)}.{cvt_name(src)}", out.run(), xo)


@lowers("cast")
def lower_cast(cg: Codegen, op) -> None:
    x = cg.as_uniform(cg.get(op.operands[0]))
    src = element(op.operands[0].type)
    dst = element(op.results[0].type)
    if src == dst:
        cg.bind(op.results[0], x)
        return
    out, shape, uni = _result(cg, op, [x])
    cast_into(cg, x, src, dst, out)
    if not uni and src.is_int() and dst.is_int():
        out.recipe = recipe.combine("cast", [x], src, {"to": dst})
    _finish(cg, op, out, shape, uni)


@lowers("bitcast")
def lower_bitcast(cg: Codegen, op) -> None:
    x = cg.as_uniform(cg.get(op.operands[0]))
    dst = element(op.results[0].type)
    out, shape, uni = _result(cg, op, [x], dst)
    xo = cg.operand(x, False)
    if width(dst) == 2:
        cg.emit("ALU.MOV.B64", out.run(), xo)
    elif dst.bits < 32 and not dst.is_floating() and dst.is_int_signed():
        cg.emit(f"CVT.{cvt_name(dst)}.U32", out.run(), xo)
    elif dst.bits < 32:
        cg.emit("ALU.LOP.AND.B32", out.run(), xo, IntImm((1 << dst.bits) - 1))
    else:
        cg.emit("ALU.MOV.B32", out.run(), xo)
    _finish(cg, op, out, shape, uni)


@lowers("constant")
def lower_constant(cg: Codegen, op) -> None:
    rt = op.results[0].type
    t = element(rt)
    shape = rt.shape if rt.is_tile() else ()
    v = op.attrs["value"]
    if width(t) == 2:
        src = float(v) if t.is_floating() else int(v)
    else:
        src = cg.imm32(t, v)
    cg.bind(op.results[0], Uniform(src, shape, t))


@lowers("program_id", "num_programs")
def lower_ids(cg: Codegen, op) -> None:
    axis = "XYZ"[op.attrs["axis"]]
    v = cg.vreg(1)
    name = "SR_CTAID" if op.name == "program_id" else "SR_NCTAID"
    cg.emit("S2R", VR(v, 0, 1), SReg(f"{name}.{axis}"))
    cg.bind(op.results[0], Uniform(VR(v, 0, 1), (), T.i32))


@lowers("arange")
def lower_arange(cg: Codegen, op) -> None:
    shape = op.results[0].type.shape
    idx = cg.index_run(shape)
    start = op.attrs["start"]
    if start:
        cg.emit("ALU.IADD.S32", idx.run(), idx.run(), IntImm(start))
    idx.recipe = recipe.arange(shape[0], start)
    cg.bind(op.results[0], idx)


@lowers("hint")
def lower_hint(cg: Codegen, op) -> None:
    cg.bind(op.results[0], cg.get(op.operands[0]))


@lowers("assume")
def lower_assume(cg: Codegen, op) -> None:
    """``assume`` only informs the optimizer; nothing to run."""


@helper("recipe")
def emit_recipe(cg, r, shape: tuple, ty, index: TileVal | None = None):
    """Evaluate recipe ``r`` in the block layout of ``shape``: a TileVal of type ``ty``
    (carrying the recipe again, so it can move on). With ``index`` (an i32 run of flat
    indices, e.g. every 4th element's), evaluate it at those indices instead."""
    if index is None and ty == T.i1 and isinstance(r, Node) and \
            cg.layout(shape).E > CMP_CHUNK and not cg.layout(shape).replicated:
        out = cg.new_tile(shape, T.i1)
        by_chunks(cg, r, shape, out)
        out.recipe = r
        return out
    cache: dict = {}
    if index is not None:
        cache["idx"] = index

    def new(t):
        if index is None:
            return cg.new_tile(shape, t)
        w = width(t)
        return TileVal(cg.vreg(index.E * w, w), shape, t, index.E, w)

    def ev(node, t):
        if isinstance(node, Const):
            return node.value
        if id(node) in cache:
            return cache[id(node)]
        if isinstance(node, Bits):
            if "idx" not in cache:
                cache["idx"] = cg.index_run(shape)
            idx, nb = cache["idx"], log2(max(numel(shape), 1))
            if node.shift == 0 and node.width >= nb:
                return TileVal(idx.vreg, idx.shape, idx.ty, idx.E, idx.w, node)
            out = new(T.i32)
            src = idx.run()
            if node.shift:
                cg.emit("ALU.SHR.U32", out.run(), src, IntImm(node.shift))
                src = out.run()
            if node.shift + node.width < nb:
                cg.emit("ALU.LOP.AND.B32", out.run(), src, IntImm((1 << node.width) - 1))
            out.recipe = node
            cache[id(node)] = out
            return out
        attrs = dict(node.attrs)
        if node.op == "cast":
            a = ev(node.args[0], None)
            out = new(attrs["to"])
            cast_into(cg, a, node.ty, attrs["to"], out)
        elif node.op == "cmp":
            a, b = (ev(x, node.ty) for x in node.args)
            out = new(T.i1)
            compare(cg, attrs["pred"], a, b, node.ty, out)
        else:
            a, b = (ev(x, node.ty) for x in node.args)
            out = new(node.ty)
            binary(cg, node.op, a, b, node.ty, out)
        out.recipe = node
        cache[id(node)] = out
        return out

    return ev(r, ty)
