"""Tensor descriptors made in the kernel: make_desc, desc_load, desc_store.

A descriptor is a row-major global tensor (base address, dims and strides in elements,
held as uniform scalars). A block access at ``offsets`` reads or writes coordinates
``offsets + i``; an element outside ``[0, dim)`` along any axis reads 0 and is not stored.
Here an access is an ordinary masked ``LSU`` access over the block's address run (the
asynchronous TME copy is a later stage of this backend).
"""
from __future__ import annotations

from mutile.ir import types as T

from ..context import Codegen, element, lowers, width
from .memory import STORE_TYPE, _load_suffix
from ..values import VP, VR, DescVal, TileVal, Uniform, VMem
from ...isa.operands import IntImm


@lowers("make_desc")
def lower_make_desc(cg: Codegen, op) -> None:
    base, *sizes = (cg.as_uniform(cg.get(v)) for v in op.operands)
    r = len(op.attrs["block"])
    vals = []
    for u, v in zip(sizes, op.operands[1:]):
        t = v.type
        vals.append(Uniform(u.src, (), t) if isinstance(u, Uniform) else u)
    ty = op.results[0].type
    d = DescVal(base, vals[:r], vals[r:], tuple(op.attrs["block"]), ty.element)
    cg.bind(op.results[0], d)
    from .asynchronous import prepare_desc
    prepare_desc(cg, op, d)


def _block_addresses(cg: Codegen, d: DescVal, offsets: list) -> tuple[TileVal, VP]:
    """The block's 64-bit addresses and the in-bounds predicate run."""
    block = d.block
    idx = cg.index_run(block)
    esize = d.ty.itemsize
    addr = cg.new_tile(block, T.u64)
    pred = cg.vreg(idx.E, kind="P")
    ok = VP(pred, 0, idx.E)
    first = True
    for k, (off, dim, stride) in enumerate(zip(offsets, d.dims, d.strides)):
        c = cg.coord(idx, block, k)
        cg.emit("ALU.IADD.S32", c.run(), c.run(), cg.operand(off))
        inb = VP(cg.vreg(idx.E, kind="P"), 0, idx.E)
        dim_t = dim.ty if isinstance(dim, Uniform) else T.i32
        if width(dim_t) == 2:
            wide = cg.new_tile(block, T.i64)
            cg.emit("CVT.S64.S32", wide.run(), c.run())
            cg.emit("ALU.ISETP.LT.U64", inb, wide.run(), cg.operand(dim))
        else:
            cg.emit("ALU.ISETP.LT.U32", inb, c.run(), cg.operand(dim))
        if first:
            cg.emit("ALU.PLOP.AND", ok, inb, inb)
        else:
            cg.emit("ALU.PLOP.AND", ok, ok, inb)
        st = stride.ty if isinstance(stride, Uniform) else T.i32
        acc = cg.operand(d.base, False) if first else addr.run()
        if width(st) == 2:
            wide = cg.new_tile(block, T.i64)
            cg.emit("CVT.S64.S32", wide.run(), c.run())
            cg.emit("ALU.IMUL.S64", wide.run(), wide.run(), cg.operand(stride, False))
            cg.emit("ALU.IMUL.S64", wide.run(), wide.run(), IntImm(esize))
            cg.emit("ALU.IADD.S64", addr.run(), wide.run(), acc)
        else:
            sv = stride.src if isinstance(stride, Uniform) and hasattr(stride.src, "v") \
                else cg.materialize_scalar(stride)
            _mul_add64(cg, addr, c, sv, esize, acc)
        first = False
    return addr, ok


def _zero64(cg: Codegen) -> VR:
    v = cg.vreg(2, 2)
    cg.emit("ALU.MOV.IMM", VR(v, 0, 1), IntImm(0))
    cg.emit("ALU.MOV.IMM", VR(v, 1, 1), IntImm(0))
    return VR(v, 0, 2)


def _mul_add64(cg: Codegen, addr: TileVal, c: TileVal, stride, esize: int, acc) -> None:
    """addr = acc + (c * stride) * esize in 64-bit arithmetic (no 32-bit overflow)."""
    prod = cg.new_tile(c.shape, T.i64)
    cg.emit("ALU.IMAD.WIDE.S32", prod.run(), c.run(), stride, _zero64(cg))
    cg.emit("ALU.IMUL.S64", prod.run(), prod.run(), IntImm(esize))
    cg.emit("ALU.IADD.S64", addr.run(), prod.run(), acc)


@lowers("desc_load")
def lower_desc_load(cg: Codegen, op) -> None:
    d: DescVal = cg.get(op.operands[0])
    offsets = [cg.as_uniform(cg.get(v)) for v in op.operands[1:]]
    addr, ok = _block_addresses(cg, d, offsets)
    t = d.ty
    out = cg.new_tile(d.block, t)
    from .control import move
    move(cg, out.run(), Uniform(IntImm(0), (), t) if width(t) == 1 else Uniform(0, (), t))
    cg.emit(f"LSU.LD.GLOBAL.{_load_suffix(t)}", out.run(), VMem(addr.run()), guard=ok)
    cg.bind(op.results[0], out)


@lowers("desc_store")
def lower_desc_store(cg: Codegen, op) -> None:
    d: DescVal = cg.get(op.operands[0])
    offsets = [cg.as_uniform(cg.get(v)) for v in op.operands[1:-1]]
    val = cg.get(op.operands[-1])
    addr, ok = _block_addresses(cg, d, offsets)
    v = cg.materialize(Uniform(val.src, d.block, val.ty) if isinstance(val, Uniform) else val)
    guard = cg.and_preds(ok, cg.owner_pred(d.block))
    t = element(op.operands[-1].type)
    cg.emit(f"LSU.ST.GLOBAL.{STORE_TYPE[t.bits]}", VMem(addr.run()), v.run(), guard=guard)
