"""The passes' shared rewriting utilities: value substitution, cloning, shrinking.

The IR keeps no use lists, so passes replace values by *substitution*: a pass walks
a function forward (program order, regions included), resolves every op's operands
through a :class:`Substitution` before looking at the op, and records replacements
as it goes. SSA dominance guarantees every use is visited after its definition, so
one walk rewrites all uses.
"""
from __future__ import annotations

from ..ir.core import Block, Op, Value


class Substitution:
    """Replacements ``old value -> new value``, resolved through chains."""

    def __init__(self):
        self.map: dict[Value, Value] = {}

    def replace(self, olds, news) -> None:
        """Make every later use of ``olds[i]`` a use of ``news[i]``."""
        olds, news = list(olds), list(news)
        assert len(olds) == len(news), f"replacing {len(olds)} values with {len(news)}"
        for old, new in zip(olds, news):
            assert old.type == new.type, f"replacing a {old.type} with a {new.type}"
            if old is not new:
                self.map[old] = new

    def resolve(self, v: Value) -> Value:
        while v in self.map:
            v = self.map[v]
        return v

    def apply(self, op: Op) -> Op:
        """Rewrite ``op``'s operands to their replacements; return ``op``."""
        op.operands = [self.resolve(v) for v in op.operands]
        return op


def set_ops(block: Block, ops) -> None:
    """Make ``ops`` the contents of ``block`` (re-parenting them)."""
    block.ops = list(ops)
    for op in block.ops:
        op.parent = block


def clone_op(op: Op, vmap: dict) -> Op:
    """A copy of ``op`` (regions included) whose operands are mapped through ``vmap``
    (values not in it are kept); the copy's results are added to ``vmap``."""
    regions = [clone_block(r, vmap) for r in op.regions]
    new = Op(op.opdef, [vmap.get(v, v) for v in op.operands], [r.type for r in op.results],
             dict(op.attrs), regions, op.loc)
    for old, res in zip(op.results, new.results):
        res.hint = old.hint
        vmap[old] = res
    return new


def clone_block(block: Block, vmap: dict) -> Block:
    """A copy of ``block`` with fresh arguments (added to ``vmap``) and cloned ops."""
    new = Block([a.type for a in block.args], [a.hint for a in block.args])
    vmap.update(zip(block.args, new.args))
    for op in clone_ops(block, vmap):
        new.append(op)
    return new


def clone_ops(block: Block, vmap: dict) -> list[Op]:
    """Copies of ``block``'s ops, reading ``block``'s arguments through ``vmap``."""
    return [clone_op(op, vmap) for op in block.ops]


def drop_results(op: Op, keep: list[bool]) -> None:
    """Remove the results of ``op`` where ``keep`` is false (callers drop their uses)."""
    op.results = [r for r, k in zip(op.results, keep) if k]
    for i, r in enumerate(op.results):
        r.index = i


def drop_args(block: Block, keep: list[bool]) -> None:
    """Remove the arguments of ``block`` where ``keep`` is false (which must be unused)."""
    block.args = [a for a, k in zip(block.args, keep) if k]
    for i, a in enumerate(block.args):
        a.index = i
