"""dot: ``acc + a @ b`` with each product and sum rounded in acc's type, k ascending.

* f32 accumulator, f32/f16/bf16/fp8 operands: the operands are widened to f32
  buffers (exact), rounded to tf32 first when ``input_precision = "tf32"`` and they are
  f32, and :func:`dot.emit_dot_f32` runs ``c = fma(a[i,k], b[k,j], c)`` for k ascending;
* integer accumulator: ``c += a[i,k] * b[k,j]`` in the accumulator's type (wrapping),
  operands sign/zero-extended from their own type;
* any other float accumulator (f64, f16, bf16): ``c = round_acc(fma_f64(a, b, c))``
  per k, the fma computed in f64 from exactly widened operands.

A loaded f32 B whose only use is this dot arrives panel-major (``PackedBuffer``: the
load stores each NR-wide column panel contiguously, see :func:`packs_b`), so the
micro-kernel streams it; the values, hence the bits, are the same.

The result is written into acc's buffer when acc is read only by this dot (the usual
``acc = dot(a, b, acc)`` of a loop), else into a copy.
"""
from __future__ import annotations

from llvmlite import ir

from mutile.ir import types as T

from . import dot as dot_kernel
from .lower_context import CHUNK, I64, LowerContext, lowers
from .lower_tiles import Buffer, PackedBuffer

_F32_EXACT = ("f32", "f16", "bf16", "f8e4m3", "f8e5m2")


def packs_b(ctx, op, v) -> bool:
    """True if ``dot`` ``op`` takes ``v`` (its only use) as an f32 B it can read panel-major."""
    a_v, b_v, acc_v = op.operands
    return (b_v is v and a_v is not v and acc_v is not v and v.type.element == T.f32
            and acc_v.type.element == T.f32 and op.attrs["input_precision"] != "tf32"
            and ctx.analysis.sole_local_use(v, op)
            and dot_kernel.packed_b_width(v.type.shape[1]) > 0)


def _f32_buffer(ctx, v, t, tf32: bool) -> Buffer:
    """``v`` as a contiguous f32 buffer (converted, tf32-rounded if asked)."""
    if t == T.f32 and isinstance(v, Buffer) and not tf32:
        return v
    out = ctx.alloc(T.TileType(v.type.shape, T.f32))
    w = ctx.chunk_width(v.type)
    with ctx.for_chunks(v.type.numel, w, "cvt") as f:
        x = ctx.fconv(v.chunk(ctx, f, w), t, T.f32)
        if tf32:
            x = dot_kernel.emit_round_tf32(ctx.b, x)
        ctx.store_elems(out.ptr, T.f32, f, x)
    return out


def _accumulator(ctx, op) -> Buffer:
    acc_v = op.operands[2]
    C = ctx[acc_v]
    if isinstance(C, Buffer) and C.owned and ctx.analysis.sole_local_use(acc_v, op):
        return C
    out = ctx.alloc(acc_v.type)
    ctx.write(out, C)
    return out


def _i64(v):
    return ir.Constant(I64, v)


def _rows_loop(ctx, M, K, N, body) -> None:
    """for i < M, k < K, j in chunks of w < N: ``body(i, k, j, w)``."""
    w = min(CHUNK, N)
    with ctx.for_chunks(M, 1, "dot.i") as i:
        with ctx.for_chunks(K, 1, "dot.k") as k:
            with ctx.for_chunks(N, w, "dot.j") as j:
                body(i, k, j, w)


def _generic(ctx, A, B, C: Buffer, et, at, M, K, N) -> None:
    """Integer or non-f32 float accumulation (see module docstring)."""
    b = ctx.b
    ct = at if at.is_int() else T.f64
    cty = ctx.repr_type(ct)

    def widen(x, w):
        if at.is_int():
            return ctx.int_cast(x, cty, et.is_int_signed())
        if et.is_int():
            y = b.sitofp(x, ir.VectorType(cty, w) if w > 1 else cty) if et.is_int_signed() \
                else b.uitofp(x, ir.VectorType(cty, w) if w > 1 else cty)
            return y
        return ctx.fconv(x, et, T.f64)

    def body(i, k, j, w):
        a = widen(A.chunk(ctx, b.add(b.mul(i, _i64(K)), k), 1), 1)
        bv = widen(B.chunk(ctx, b.add(b.mul(k, _i64(N)), j), w), w)
        fc = b.add(b.mul(i, _i64(N)), j)
        c = C.chunk(ctx, fc, w)
        if at.is_int():
            c = b.add(c, b.mul(ctx.splat(a, w), bv))
        else:
            c = ctx.fconv(ctx.call_overloaded("fma", [ctx.splat(a, w), bv,
                                                      ctx.fconv(c, at, T.f64)]), T.f64, at)
        ctx.store_elems(C.ptr, at, fc, c)

    _rows_loop(ctx, M, K, N, body)


@lowers("dot")
def lower_dot(ctx: LowerContext, op) -> None:
    a_v, b_v, acc_v = op.operands
    M, K = a_v.type.shape
    N = b_v.type.shape[1]
    et, at = a_v.type.element, acc_v.type.element
    A, B = ctx[a_v], ctx[b_v]
    C = _accumulator(ctx, op)
    if at == T.f32 and et.name in _F32_EXACT:
        tf32 = op.attrs["input_precision"] == "tf32" and et == T.f32
        Af = _f32_buffer(ctx, A, et, tf32)
        Bf = _f32_buffer(ctx, B, et, tf32)
        packed = isinstance(Bf, PackedBuffer)
        dot_kernel.emit_dot_f32(ctx.b, Af.ptr, Bf.ptr, C.ptr, M, N, K, b_packed=packed)
    elif at.is_floating() or et.is_int():
        _generic(ctx, ctx.materialize(A), ctx.materialize(B), C, et, at, M, K, N)
    else:
        ctx.fail(op, f"cannot accumulate {et} products in {at}")
    ctx.bind(op.result, C)
