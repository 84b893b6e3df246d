"""``licm``: hoist loop-invariant pure ops out of ``for`` bodies.

An op directly in a ``for`` body moves to just before the loop when it is pure, has
no regions and reads only values defined outside the loop. Hoisted ops are scanned
in order, so a chain of invariant ops moves together; inner loops are processed
first, so an op invariant in two nested loops leaves both. Ops inside an ``if``
region stay (they may be guarded on purpose). A hoisted op also runs when the loop
runs zero times, which is harmless for pure ops: they cannot fault (in mutile
division by zero has a defined result) and have no effect.

Before::

    %r = for %lb, %ub, %step, %init : f32 (%i: i32, %acc: f32) {
      %two = constant {value = 2.0} : f32
      %s = mul %x, %two : f32
      %t = add %acc, %s : f32
      yield %t

After: ``%two`` and ``%s`` are computed before the ``for``; ``%t`` stays.
"""
from __future__ import annotations

from ..ir.core import Block, Module, Op
from .registry import register
from .rewrite import set_ops


def hoistable(op: Op, inside: set) -> bool:
    """Whether ``op`` may run once before its loop (``inside``: values the loop defines)."""
    d = op.opdef
    if not d.pure or d.terminator or op.regions:
        return False
    return not any(v in inside for v in op.operands)


def hoist_from(loop: Op) -> list[Op]:
    """Remove the invariant ops of ``loop``'s body and return them, in order."""
    body = loop.regions[0]
    inside = set(body.args)
    for op in body.ops:
        inside.update(op.results)
    hoisted, kept = [], []
    for op in body.ops:
        if hoistable(op, inside):
            hoisted.append(op)
            inside.difference_update(op.results)
        else:
            kept.append(op)
    set_ops(body, kept)
    return hoisted


def licm_block(block: Block) -> int:
    """Hoist invariants out of every ``for`` in ``block``; return how many ops moved."""
    out: list[Op] = []
    moved = 0
    for op in block.ops:
        for r in op.regions:
            moved += licm_block(r)
        if op.name == "for":
            hoisted = hoist_from(op)
            moved += len(hoisted)
            out.extend(hoisted)
        out.append(op)
    set_ops(block, out)
    return moved


@register("licm")
def licm(module: Module) -> Module:
    """Hoist loop-invariant pure ops out of the ``for`` loops of every function."""
    for f in list(module.funcs.values()):
        licm_block(f.body)
    return module
