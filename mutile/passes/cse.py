"""``cse``: merge identical pure ops (common subexpression elimination).

Two ops are identical when they have the same name, the same operands (the very
same values), equal attributes and the same result types. The later one is erased
and its results are replaced by the earlier one's. An op in a block is available to
the rest of that block and to every region nested in it (it dominates them), never
to an enclosing or sibling block. Ops with regions and impure ops (``load``,
``store``, ``call`` ...) are never merged.

Attributes compare by type and bits, so ``0.0`` and ``-0.0`` (or ``1`` and
``true``) stay distinct.

Before::

    %a = mul %x, %y : i32
    %r = for ... (%i: i32, %acc: i32) {
      %b = mul %x, %y : i32
      %s = add %acc, %b : i32

After: ``%b`` is gone and ``%s = add %acc, %a``.
"""
from __future__ import annotations

import struct
from collections import ChainMap

from ..ir.core import Block, Module, Op
from ..ir.types import Type
from .registry import register
from .rewrite import Substitution, set_ops


def attr_key(v):
    """A hashable key for attribute value ``v`` that is equal only for identical values."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    if isinstance(v, (list, tuple)):
        return ("list",) + tuple(attr_key(x) for x in v)
    if isinstance(v, (str, Type)):
        return (type(v).__name__, v)
    raise TypeError(f"cse: attribute value {v!r} has no key")


def op_key(op: Op):
    """What makes ``op`` identical to another op, or None if it must not be merged."""
    d = op.opdef
    if not d.pure or d.terminator or op.regions or not op.results:
        return None
    attrs = tuple(sorted((k, attr_key(v)) for k, v in op.attrs.items()))
    return (op.name, tuple(op.operands), attrs, tuple(r.type for r in op.results))


class _CSE:
    def __init__(self):
        self.subst = Substitution()
        self.merged = 0

    def block(self, block: Block, available: ChainMap) -> None:
        out: list[Op] = []
        for op in block.ops:
            self.subst.apply(op)
            key = op_key(op)
            if key is not None and key in available:
                self.subst.replace(op.results, available[key].results)
                self.merged += 1
                continue
            if key is not None:
                available[key] = op
            for r in op.regions:
                self.block(r, available.new_child())
            out.append(op)
        set_ops(block, out)


@register("cse")
def cse(module: Module) -> Module:
    """Merge identical pure ops in every function."""
    for f in list(module.funcs.values()):
        _CSE().block(f.body, ChainMap())
    return module
