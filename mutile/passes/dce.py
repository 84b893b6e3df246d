"""``dce``: remove computations whose results are never needed.

A mark-and-sweep over each function. The roots are the ops with side effects (every
impure op — ``store``, ``load``, ``call``, ``print``, ``while`` ... — and ``return``);
a live op makes its operands live and the ops enclosing it live. ``for`` and ``if``
are containers, not roots: they stay when a result is needed or a live op is inside.

* A ``for`` iteration value is kept only if its result or its body argument is live;
  otherwise its init, result, body argument and yielded value are dropped (so
  ``acc = acc + 1`` disappears when nothing reads ``acc``).
* An ``if`` keeps only the results that are live (and the matching yields).
* ``while`` is kept whole whenever it is there (its loop may never end).

Unused pure ops, and ``for``/``if`` ops with nothing live inside or out, are erased.
"""
from __future__ import annotations

from ..ir.core import Block, Module, Op, Value
from .registry import register
from .rewrite import drop_args, drop_results, set_ops

CONTAINERS = ("for", "if")


def _is_root(op: Op) -> bool:
    if op.opdef.pure or op.name in CONTAINERS:
        return False
    if op.name == "yield":  # a for/if yield is live through its results
        return op.parent.parent is None or op.parent.parent.name not in CONTAINERS
    return True


def _yields(op: Op) -> list[Op]:
    return [r.terminator for r in op.regions]


class _Liveness:
    def __init__(self):
        self.ops: set[Op] = set()
        self.values: set[Value] = set()
        self.work: list[Value] = []

    def mark_op(self, op: Op) -> None:
        while op is not None and op not in self.ops:
            self.ops.add(op)
            needed = {"for": op.operands[:3], "if": op.operands[:1]}.get(op.name, op.operands)
            for v in needed:
                self.mark_value(v)
            if op.name == "while":  # everything inside runs for its loop
                for inner in op.walk():
                    self.ops.add(inner)
                    for v in inner.operands:
                        self.mark_value(v)
            op = op.parent.parent if op.parent is not None else None

    def mark_value(self, v: Value) -> None:
        if v not in self.values:
            self.values.add(v)
            self.work.append(v)

    def carried(self, v: Value) -> None:
        """``v`` is a for/if result or a for body argument: mark what feeds it."""
        if isinstance(v.owner, Op) and v.owner.name in CONTAINERS:
            op, k = v.owner, v.index
        elif isinstance(v.owner, Block) and v.owner.parent is not None \
                and v.owner.parent.name == "for" and v.index > 0:
            op, k = v.owner.parent, v.index - 1
        else:
            return
        for y in _yields(op):
            self.mark_value(y.operands[k])
        if op.name == "for":
            self.mark_value(op.operands[3 + k])
            self.mark_value(op.results[k])
            self.mark_value(op.regions[0].args[k + 1])

    def run(self, body: Block) -> None:
        for op in [o for top in body.ops for o in top.walk()]:
            if _is_root(op):
                self.mark_op(op)
        while self.work:
            v = self.work.pop()
            if isinstance(v.owner, Op):
                self.mark_op(v.owner)
            self.carried(v)


class _Sweeper:
    def __init__(self, live: _Liveness):
        self.live = live
        self.removed = 0

    def block(self, block: Block) -> None:
        kept = []
        for op in block.ops:
            if op not in self.live.ops and not op.opdef.terminator:
                self.removed += 1
                continue
            if op.name in CONTAINERS:
                self.shrink(op)
            for r in op.regions:
                self.block(r)
            kept.append(op)
        set_ops(block, kept)

    def shrink(self, op: Op) -> None:
        """Drop the dead carried values of a live for/if."""
        keep = [r in self.live.values for r in op.results]
        if all(keep):
            return
        for y in _yields(op):
            y.operands = [v for v, k in zip(y.operands, keep) if k]
        if op.name == "for":
            op.operands = op.operands[:3] + [v for v, k in zip(op.operands[3:], keep) if k]
            drop_args(op.regions[0], [True] + keep)
        drop_results(op, keep)
        self.removed += keep.count(False)


def dce_block(body: Block) -> int:
    """Remove the dead code in a function body; return how many ops/values went."""
    live = _Liveness()
    live.run(body)
    sweeper = _Sweeper(live)
    sweeper.block(body)
    return sweeper.removed


@register("dce")
def dce(module: Module) -> Module:
    """Remove unused pure ops, dead loop-carried values and dead if results."""
    for f in list(module.funcs.values()):
        dce_block(f.body)
    return module
