"""Vectorized global loads and stores: ``LSU.LD.GLOBAL.B128`` for 4 consecutive 32-bit
elements (2 of 64 bits) when contiguity and alignment allow.

In the block layout a thread's elements are consecutive in the tile's row-major order,
so a pointer tile ``base + off`` whose offsets run on by one across each aligned group of
``G`` elements (``G * size = 16`` bytes), starting at a multiple of ``G``, can be read with
one 128-bit access per group. What the offsets are is known from their recipe
(:mod:`..recipe`): :func:`facts` proves contiguity, group-start divisibility and the
mask's constancy over groups, treating every scalar held in a register (a parameter,
``pid * BLOCK``) as divisible by ``G``. Those assumptions and the base's 16-byte alignment
are then tested at run time, like Triton's specialization on divisibility by 16: a
block-uniform branch takes the vector access or the scalar one.
"""
from __future__ import annotations

from dataclasses import dataclass

from mutile.ir import types as T

from .. import recipe
from .elementwise import emit_recipe
from ..values import VP, VR, PtrTile, TileVal, Uniform, VMem, log2
from ...isa.operands import IntImm

BIG = 1 << 30


@dataclass(frozen=True)
class Facts:
    """Of an integer recipe, for aligned groups of ``G`` consecutive elements: ``contig``:
    values run on by one within each group; ``const``: values are equal within each
    group; ``div``: the value at each group's start is a multiple of ``div``."""
    contig: bool
    const: bool
    div: int


def _lowbit(v: int) -> int:
    return BIG if v == 0 else min(v & -v, BIG)


def facts(r, G: int, leaves: list, assumed=None) -> Facts:
    """The facts of recipe ``r``. Every scalar register it reads goes to ``leaves``; those
    in ``assumed`` (keys: :func:`_key`; all when None) count as multiples of ``G``."""
    if isinstance(r, recipe.Const):
        src = r.value.src
        if isinstance(src, IntImm):
            v = src.value & 0xFFFFFFFF
            return Facts(False, True, _lowbit(v if v < 1 << 31 else (1 << 32) - v))
        if isinstance(src, int):
            return Facts(False, True, _lowbit(abs(src)))
        leaves.append(r.value)
        return Facts(False, True, G if assumed is None or _key(r.value) in assumed else 1)
    if isinstance(r, recipe.Bits):
        if r.shift == 0:
            ok = G <= 1 << r.width
            return Facts(ok, False, G if ok else 1)
        return Facts(False, G <= 1 << r.shift, 1)
    fs = [facts(a, G, leaves, assumed) for a in r.args]
    if r.op == "cast":
        return fs[0]
    a, b = fs[0], fs[-1]
    if r.op == "add":
        return Facts((a.contig and b.const) or (b.contig and a.const), a.const and b.const,
                     min(a.div, b.div))
    if r.op == "sub":
        return Facts(a.contig and b.const, a.const and b.const, min(a.div, b.div))
    if r.op == "mul":
        return Facts(False, a.const and b.const, min(a.div * b.div, BIG))
    if r.op == "shl" and isinstance(r.args[1], recipe.Const) and \
            isinstance(r.args[1].value.src, IntImm):
        return Facts(False, a.const, min(a.div << r.args[1].value.src.value, BIG))
    if r.op == "cmp":
        aligned = a.div >= G and b.div >= G
        return Facts(False, (a.const and b.const) or (aligned and (
            (a.contig and b.const) or (b.contig and a.const))), 1)
    if r.op in ("and", "or", "xor"):
        return Facts(False, a.const and b.const, 1)
    return Facts(False, False, 1)


def plan(cg, p, mask, t, shape):
    """(group size, leaves to check) when the access through ``p`` may be vectorized,
    else None."""
    if not isinstance(p, PtrTile) or not isinstance(p.off, TileVal) or p.off.recipe is None:
        return None
    if t.bits not in (32, 64) or cg.options.get("vectorize", True) is False:
        return None
    G = 16 // (t.bits // 8)
    lay = cg.layout(shape)
    if lay.replicated or lay.E < G:
        return None
    mr = None
    if mask is not None:
        mr = recipe.of(mask)
        if (mr is None or isinstance(mr, recipe.Const)) and not isinstance(mask, Uniform):
            return None
        if isinstance(mr, recipe.Const):
            mr = None

    def holds(assumed) -> bool:
        f = facts(p.off.recipe, G, [], assumed)
        return f.contig and f.div >= G and (mr is None or facts(mr, G, [], assumed).const)

    leaves: list = []
    facts(p.off.recipe, G, leaves)
    if mr is not None:
        facts(mr, G, leaves)
    need = {_key(u): u for u in leaves}
    if not holds(set(need)):
        return None
    for k in list(need):                 # check at run time only what the proof uses
        if holds(set(need) - {k}):
            del need[k]
    return G, list(need.values())


def _key(u: Uniform):
    return (u.src.v.id, u.src.start)


def leader_index(cg, shape, G: int) -> TileVal:
    """i32 run of the flat index of the first element of each of the thread's groups."""
    lay = cg.layout(shape)
    out = TileVal(cg.vreg(lay.E // G), shape, T.i32, lay.E // G, 1)
    first = cg.vreg(1)
    cg.emit("ALU.SHL.B32", VR(first, 0, 1), cg.tid, IntImm(log2(lay.E)))
    cg.emit("ALU.IOTA.S32", out.run(), VR(first, 0, 1), IntImm(G))
    return out


def runtime_check(cg, base: Uniform, leaves: list, G: int) -> VP:
    """Uniform predicate: the base is 16-byte aligned and every assumed register is a
    multiple of ``G``."""
    tmp = cg.vreg(1)
    p = cg.vreg(2, kind="P")
    ok = VP(p, 0, 1)
    lo = VR(base.src.v, base.src.start, 1)
    cg.emit("ALU.LOP.AND.B32", VR(tmp, 0, 1), lo, IntImm(15))
    cg.emit("ALU.ISETP.EQ.U32", ok, VR(tmp, 0, 1), IntImm(0))
    for u in leaves:
        reg = VR(u.src.v, u.src.start, 1)
        cg.emit("ALU.LOP.AND.B32", VR(tmp, 0, 1), reg, IntImm(G - 1))
        cg.emit("ALU.ISETP.EQ.U32", VP(p, 1, 1), VR(tmp, 0, 1), IntImm(0))
        cg.emit("ALU.PLOP.AND", ok, ok, VP(p, 1, 1))
    return ok


def vector_access(cg, p: PtrTile, mask, shape, G: int, t, emit_access) -> None:
    """Addresses and guard of the groups' first elements; ``emit_access(addr, guard)``
    issues the 128-bit instruction."""
    idx = leader_index(cg, shape, G)
    off = emit_recipe(cg, p.off.recipe, shape, T.i32, index=idx)
    addr = TileVal(cg.vreg(2 * idx.E, 2), shape, T.u64, idx.E, 2)
    size = t.bits // 8
    cg.emit("ALU.IMAD.WIDE.S32", addr.run(), cg.operand(off, False), IntImm(size),
            cg.operand(p.base, False))
    guard = None
    if mask is not None and not isinstance(mask, Uniform):
        m = emit_recipe(cg, recipe.of(mask), shape, T.i1, index=idx)
        guard = cg.pred_of(m)
    elif mask is not None:
        guard = cg.pred_of(mask)
    emit_access(VMem(addr.run()), guard)

