"""Pass ``sqmma``: ``dot`` -> WarpSquad MMA on shared-memory operands.

A ``dot`` whose types SQMMA has, whose block has a multiple of 4 warps and whose squads'
part of the accumulator is one instruction's M x N (the machine file's set; codegen would
split other tiles, through shared memory) becomes, at its place::

    ph.sync                          // earlier SQMMA readers of the buffers are done
    ph.shared_store %a_s, %a         // operands staged through shared memory
    ph.shared_store %b_s, %b
    ph.fence_shared
    ph.sync
    %r = ph.sqmma %a_s, %b_s, %acc   // accumulate unless acc is a zero constant
    %r2 = ph.sqmma_wait %r

An operand that is ``trans(x)`` stores ``x`` and sets ``trans_a``/``trans_b`` (SQMMA reads
either major). An operand defined outside the loop around the dot is staged once, before
that loop. An operand already in shared memory (a TME ring stage, from the ``pipeline``
pass) is used as it is. Buffers are allocated at the kernel's entry.
"""
from __future__ import annotations

from mutile.ir import types as T
from mutile.ir.core import Block, Builder, Op
from mutile.ir.ops_pinghu import (SHARED_BYTES, sqmma_acc_type, sqmma_instr_shapes,
                                  sqmma_k_choices, sqmma_operand_ok)
from mutile.ir.types import TileType
from mutile.passes.rewrite import Substitution, set_ops

SWIZZLE = 64


def sqmma_fits(dot: Op, warps: int) -> bool:
    """Whether ``dot`` maps onto SQMMA in a block (or partition) of ``warps`` warps."""
    a, b, acc = (v.type for v in dot.operands)
    if warps % 4 or not all(isinstance(t, TileType) for t in (a, b, acc)):
        return False
    el = a.element
    if el == T.f32 and dot.attrs.get("input_precision") != "tf32":
        return False                      # ieee f32 stays exact (FFMA)
    if not isinstance(el, T.ScalarType) or not sqmma_operand_ok(el, b.element):
        return False
    if acc.element != sqmma_acc_type(el):
        return False
    (M, K), N = a.shape, b.shape[1]
    squads = warps // 4
    shapes = sqmma_instr_shapes(el, transposed_source(dot.operands[0])[1],
                                transposed_source(dot.operands[1])[1])
    return (M % squads == 0 and (M // squads, N) in shapes
            and K % sqmma_k_choices(el)[0] == 0)


def transposed_source(v):
    """(x, True) when ``v`` is ``permute(x, [1, 0])``, else (v, False)."""
    op = v.owner
    if isinstance(op, Op) and op.name == "permute" and list(op.attrs["order"]) == [1, 0]:
        return op.operands[0], True
    return v, False


def _zero_constant(v) -> bool:
    op = v.owner
    return isinstance(op, Op) and op.name == "constant" and op.attrs["value"] == 0


def _defining_block(v):
    return v.owner.parent if isinstance(v.owner, Op) else v.owner


class SqmmaRewriter:
    """Rewrites the dots of ``func``; ``provided`` maps operand values that already sit
    in shared memory (TME ring stages) to their buffer values."""

    def __init__(self, func, warps: int, provided: dict | None = None,
                 partition_warps: dict | None = None):
        self.func, self.warps = func, warps
        self.provided = provided or {}
        self.partition_warps = partition_warps or {}
        self.subst = Substitution()
        self.allocs: list[Op] = []
        self.before: dict = {}            # id(op) -> ops to insert before it
        self.hoisted: dict = {}           # (value, id(holder)) -> buffer staged before it
        self.shared = sum(op.results[0].type.nbytes for op in func.walk()
                          if op.name == "ph.alloc_shared")

    def run(self) -> None:
        self.block(self.func.body, self.warps)
        set_ops(self.func.body, self.allocs + self.func.body.ops)

    def block(self, block: Block, warps: int) -> None:
        out = []
        for op in block.ops:
            self.subst.apply(op)
            inner = warps
            for i, r in enumerate(op.regions):
                if op.name == "ph.warp_specialize":
                    inner = op.attrs["warps"][i]
                self.block(r, inner)
            out.extend(self.before.pop(id(op), []))
            if op.name == "dot" and sqmma_fits(op, warps) and self._room(op):
                out.extend(self.rewrite(op, block))
            else:
                out.append(op)
        set_ops(block, out)

    def _room(self, dot: Op) -> bool:
        need = 0
        for v in dot.operands[:2]:
            if transposed_source(v)[0] not in self.provided and v not in self.provided:
                need += v.type.numel * v.type.element.itemsize + 256
        if self.shared + need > SHARED_BYTES - 48 * 1024:     # leave room for scratch
            return False
        self.shared += need
        return True

    def _alloc(self, t: TileType, loc) -> object:
        op = Builder(Block(), loc).create("ph.alloc_shared", [], None, {
            "shape": list(t.shape), "dtype": t.element, "swizzle": SWIZZLE})
        self.allocs.append(op)
        return op.results[0]

    def _staged(self, v, dot: Op, block: Block):
        """(buffer, transposed, ops storing it here) for dot operand ``v``."""
        if v in self.provided:
            return self.provided[v], False, []
        x, trans = transposed_source(v)
        if x in self.provided:
            return self.provided[x], trans, []
        buf = self._alloc(x.type, dot.loc)
        ops = _stage(buf, x, dot.loc)
        home = _defining_block(x)
        if home is not block:                 # loop-invariant: store once, before the loop
            holder = _holder(dot, home)
            if holder is not None and (x, id(holder)) in self.hoisted:
                return self.hoisted[(x, id(holder))], trans, []
            if holder is not None:
                self.hoisted[(x, id(holder))] = buf
                tmp = Block()
                bld = Builder(tmp, dot.loc)
                bld.create("ph.sync", [])
                tmp.ops.extend(ops)
                bld.create("ph.fence_shared", [])
                bld.create("ph.sync", [])
                self.before.setdefault(id(holder), []).extend(tmp.ops)
                return buf, trans, []
        return buf, trans, ops

    def rewrite(self, dot: Op, block: Block) -> list[Op]:
        a, b, acc = dot.operands
        sa, ta, pre_a = self._staged(a, dot, block)
        sb, tb, pre_b = self._staged(b, dot, block)
        tmp = Block()
        bld = Builder(tmp, dot.loc)
        if pre_a or pre_b:
            bld.create("ph.sync", [])
            tmp.ops.extend(pre_a + pre_b)
            bld.create("ph.fence_shared", [])
            bld.create("ph.sync", [])
        attrs = {"accumulate": not _zero_constant(acc)}
        if ta:
            attrs["trans_a"] = True
        if tb:
            attrs["trans_b"] = True
        r = bld.create("ph.sqmma", [sa, sb, acc], None, attrs).result
        w = bld.create("ph.sqmma_wait", [r]).result
        w.hint = dot.results[0].hint
        self.subst.replace([dot.results[0]], [w])
        return tmp.ops


def _stage(buf, x, loc) -> list[Op]:
    tmp = Block()
    Builder(tmp, loc).create("ph.shared_store", [buf, x])
    return tmp.ops


def _holder(op: Op, home: Block):
    """The op of block ``home`` that contains ``op`` (None if ``home`` is not around it
    or no loop lies between them)."""
    blk, holder, looped = op.parent, None, False
    while blk is not None and blk is not home:
        holder = blk.parent
        if holder is None or not isinstance(holder, Op):
            return None
        looped |= holder.name in ("for", "while")
        blk = holder.parent
    if blk is None or holder is None or not looped or holder.name == "ph.warp_specialize":
        return None
    if any(x.name == "ph.warp_specialize" for x in _chain(op, home)):
        return None
    return holder


def _chain(op: Op, home: Block):
    blk = op.parent
    while blk is not None and blk is not home:
        h = blk.parent
        if not isinstance(h, Op):
            return
        yield h
        blk = h.parent


def run(module, warps: int, provided: dict | None = None) -> None:
    """Rewrite the kernel's eligible dots (in place)."""
    SqmmaRewriter(module.entry, warps, provided).run()


__all__ = ["run", "sqmma_fits", "transposed_source", "SqmmaRewriter"]
