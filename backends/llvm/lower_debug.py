"""device_print, device_assert and the block-wide barrier (``ph.sync``, a no-op here).

``print`` calls libc ``printf`` once per element, one line each::

    pid (0, 1, 0) idx (3, 7) prefix: 1.500000

(``idx`` only for tiles; `` (operand k)`` after the prefix when several values are
printed). Integers print in decimal, floats as ``%f`` of their f64 value, pointers and
``hex = true`` values as ``0x`` hex of their bits. The launcher flushes C stdout after
the launch.

``assert`` records a fault of kind 2 (its check-table entry holds the message) at the
first element whose condition is false, and ends the program.
"""
from __future__ import annotations

from llvmlite import ir

from mutile.ir import types as T
from mutile.ir.types import PointerType

from .lower_context import I32, I64, PTR, LowerContext, lowers
from .lower_memory import FAULT_ASSERT


def _format(ctx, x, t, hexa: bool):
    """(printf conversion, i64-or-double argument) for one scalar repr ``x``."""
    b = ctx.b
    if isinstance(t, PointerType):
        return "0x%llx", x
    if hexa:
        bits = x if isinstance(x.type, ir.IntType) else b.bitcast(x, ir.IntType(t.bits))
        return "0x%llx", b.zext(bits, I64) if bits.type.width < 64 else bits
    if t.is_floating():
        return "%f", ctx.fconv(x, t, T.f64)
    if t.bits == 64:
        return ("%lld" if t.is_int_signed() else "%llu"), x
    return ("%lld", b.sext(x, I64)) if t.is_int_signed() else ("%llu", b.zext(x, I64))


@lowers("print")
def lower_print(ctx: LowerContext, op) -> None:
    b = ctx.b
    printf = ctx.declare_c("printf", I32, [PTR], var_arg=True)
    prefix = op.attrs["prefix"].replace("%", "%%")
    hexa = bool(op.attrs.get("hex", False))
    several = len(op.operands) > 1
    head = "pid (%d, %d, %d) "
    for n, v in enumerate(op.operands):
        t = v.type.scalar
        label = prefix + (f" (operand {n})" if several else "")
        val = ctx[v]
        if not v.type.is_tile():
            conv, arg = _format(ctx, val, t, hexa)
            fmt = ctx.cstring(head + label + conv + "\n")
            b.call(printf, [fmt, *ctx.pid, arg])
            continue
        shape = v.type.shape
        with ctx.for_chunks(v.type.numel, 1, "print") as f:
            conv, arg = _format(ctx, val.chunk(ctx, f, 1), t, hexa)
            idx = [b.trunc(i, I32) for i in ctx.unflatten(f, shape)]
            fmt = ctx.cstring(head + "idx (" + ", ".join(["%d"] * len(shape)) + ") " + label
                              + conv + "\n")
            b.call(printf, [fmt, *ctx.pid, *idx, arg])


@lowers("assert")
def lower_assert(ctx: LowerContext, op) -> None:
    b = ctx.b
    check = ctx.add_check(op, f"device assertion failed: {op.attrs['msg']}")
    v = op.operands[0]
    cond = ctx[v]
    if not v.type.is_tile():
        with b.if_then(b.not_(cond), likely=False):
            ctx.fault(FAULT_ASSERT, check, ir.Constant(I64, 0), -1, ir.Constant(I64, 0))
        return
    w = ctx.chunk_width(v.type)
    with ctx.for_chunks(v.type.numel, w, "assert") as f:
        bad = b.not_(cond.chunk(ctx, f, w))
        if w == 1:
            any_bad, lane = bad, ir.Constant(I64, 0)
        else:
            bits = b.bitcast(bad, ir.IntType(w))
            any_bad = b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(w), 0))
        with b.if_then(any_bad, likely=False):
            if w > 1:
                lane = b.zext(ctx.call_overloaded("cttz", [bits, ir.Constant(ir.IntType(1), 0)]),
                              I64)
            ctx.fault(FAULT_ASSERT, check, ir.Constant(I64, 0), -1, b.add(f, lane))


@lowers("ph.sync")
def lower_sync(ctx: LowerContext, op) -> None:
    """Nothing: one CPU thread runs the whole program (the block) in program order, so a
    block-wide barrier (``debug_barrier``, ``ph.sync_warps``) has no one to wait for."""
