"""device_print and device_assert.

Like a GPU's printf FIFO: ``DBG.PRINT`` records (format id, block, element index, value)
and the host formats the records after the launch, one line per element, exactly as the
llvm backend prints them::

    pid (0, 1, 0) idx (3, 7) prefix: 1.500000

The format table (prefix, tile shape, hex) lives in the kernel, not in the ISA; the
listing names formats by id. Only the threads that own an element print it.
``DBG.ASSERT`` faults with the assertion's message where the condition is false.
"""
from __future__ import annotations

from mutile.ir import types as T
from mutile.ir.types import PointerType

from ..context import Codegen, cvt_name, element, is_narrow_float, lowers, width
from ..values import VR, TileVal, Uniform
from ...isa.operands import IntImm


def _print_type(t, hexa: bool) -> str:
    if isinstance(t, PointerType) or hexa:
        return "B64" if width(t) == 2 else "B32"
    if t.is_floating():
        return "F64" if t == T.f64 else "F32"
    if t.is_bool():
        return "U32"
    s = "S" if t.is_int_signed() else "U"
    return f"{s}64" if width(t) == 2 else f"{s}32"


@lowers("print")
def lower_print(cg: Codegen, op) -> None:
    hexa = bool(op.attrs.get("hex", False))
    several = len(op.operands) > 1
    for n, v in enumerate(op.operands):
        t = element(v.type)
        shape = v.type.shape if v.type.is_tile() else ()
        label = op.attrs["prefix"] + (f" (operand {n})" if several else "")
        fmt = len(cg.prints)
        hex_bits = t.bits if hexa and not isinstance(t, PointerType) else 0
        cg.prints.append({"label": label, "shape": list(shape), "hex": hexa,
                          "bits": hex_bits})
        val = cg.get(v)
        if isinstance(val, Uniform) and shape:
            val = cg.materialize(val)
        elif not isinstance(val, (TileVal, Uniform)):
            val = cg.materialize(val)
        src = cg.operand(val, False)
        if is_narrow_float(t) and not hexa:
            wide = cg.new_tile(() if isinstance(val, Uniform) else shape, T.f32)
            cg.emit(f"CVT.F32.{cvt_name(t)}", wide.run(), src)
            src = wide.run()
        idx = cg.index_run(shape).run() if shape else _zero(cg)
        cg.emit(f"DBG.PRINT.{_print_type(t, hexa)}", IntImm(fmt), src, idx,
                guard=cg.owner_pred(shape))


def _zero(cg: Codegen) -> VR:
    v = cg.vreg(1)
    cg.emit("ALU.MOV.IMM", VR(v, 0, 1), IntImm(0))
    return VR(v, 0, 1)


@lowers("assert")
def lower_assert(cg: Codegen, op) -> None:
    fmt = len(cg.asserts)
    cg.asserts.append(f"device assertion failed: {op.attrs['msg']}")
    cond = cg.as_uniform(cg.get(op.operands[0]))
    cg.emit("DBG.ASSERT", IntImm(fmt), cg.pred_of(cond))
