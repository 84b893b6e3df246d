"""``canonicalize``: fold constants and apply exact identities, to a fixed point.

* An elementwise op in :data:`semantics.EXACT` whose operands are all ``constant``
  ops becomes a ``constant``, computed by :func:`semantics.evaluate` only (a tile
  constant stands for a tile whose every element is its value).
* Exact identities: integer ``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``;
  float ``x * 1``, ``1 * x`` (not ``x + 0.0``: ``-0.0 + 0.0`` is ``+0.0``);
  ``select`` with a constant condition; ``cast``/``bitcast`` to the operand's type;
  ``broadcast`` to the operand's shape; ``addptr p, 0``.
* A shape op (``splat``, ``broadcast``, ``expand_dims``, ``reshape``, ``permute``) of
  a constant is a constant of the new type.
* ``if`` with a constant condition is replaced by the taken region's ops; ``for``
  with constant bounds that run zero times is replaced by its initial values.

Replaced ops are erased; operands they leave unused are left to ``dce``.
"""
from __future__ import annotations

import numpy as np

from ..ir import semantics
from ..ir.core import Block, Func, Module, Op, Value
from ..ir.ops import OPS
from ..ir.types import ScalarType
from .registry import register
from .rewrite import Substitution, set_ops

MAX_ROUNDS = 100

# A rewrite: ops to put where the op was (they are canonicalized in turn) and the
# values replacing its results.
Rewrite = tuple[list[Op], list[Value]]


def const_value(v: Value):
    """The element value of ``v`` as a numpy scalar of its type, if ``v`` is a constant."""
    op = v.owner
    if not isinstance(op, Op) or op.name != "constant":
        return None
    with np.errstate(all="ignore"):
        return np.array(op.attrs["value"]).astype(v.type.scalar.to_numpy())


def _attr_value(x, t: ScalarType):
    """The ``constant`` attribute holding numpy scalar ``x`` of type ``t``."""
    if t.is_floating():
        return float(x)
    return bool(x) if t.is_bool() else int(x)


def _constant(x, t, like: Op) -> Rewrite:
    """Replace ``like`` by a ``constant`` of type ``t`` whose elements are ``x``."""
    op = Op(OPS["constant"], [], [t], {"value": _attr_value(x, t.scalar)}, loc=like.loc)
    op.result.hint = like.result.hint
    return [op], [op.result]


def _is(v: Value, number) -> bool:
    c = const_value(v)
    return c is not None and c == number


def fold(op: Op) -> Rewrite | None:
    """An exact elementwise op on constants -> the constant it computes."""
    if op.name not in semantics.EXACT or len(op.results) != 1:
        return None
    consts = [const_value(v) for v in op.operands]
    res = op.result.type
    if any(c is None for c in consts) or not isinstance(res.scalar, ScalarType):
        return None
    src = op.operands[1 if op.name == "select" else 0].type.scalar
    return _constant(semantics.evaluate(op.name, op.attrs, consts, res.scalar, src), res, op)


def _same(v: Value) -> Rewrite:
    return [], [v]


def _add(op: Op) -> Rewrite | None:
    a, b = op.operands
    if not op.result.type.scalar.is_int():
        return None
    if _is(b, 0):
        return _same(a)
    return _same(b) if _is(a, 0) else None


def _sub(op: Op) -> Rewrite | None:
    a, b = op.operands
    return _same(a) if op.result.type.scalar.is_int() and _is(b, 0) else None


def _mul(op: Op) -> Rewrite | None:
    a, b = op.operands
    if _is(b, 1):
        return _same(a)
    return _same(b) if _is(a, 1) else None


def _select(op: Op) -> Rewrite | None:
    c = const_value(op.operands[0])
    return None if c is None else _same(op.operands[1] if c else op.operands[2])


def _noop_conversion(op: Op) -> Rewrite | None:
    x = op.operands[0]
    return _same(x) if x.type == op.result.type else None


def _addptr(op: Op) -> Rewrite | None:
    return _same(op.operands[0]) if _is(op.operands[1], 0) else None


def _reshape_constant(op: Op) -> Rewrite | None:
    c = const_value(op.operands[0])
    return None if c is None else _constant(c, op.result.type, op)


def _broadcast(op: Op) -> Rewrite | None:
    return _noop_conversion(op) or _reshape_constant(op)


def _if(op: Op) -> Rewrite | None:
    c = const_value(op.operands[0])
    if c is None:
        return None
    taken = op.regions[0 if c else 1]
    *body, term = taken.ops
    return body, list(term.operands)


def _for(op: Op) -> Rewrite | None:
    bounds = [const_value(v) for v in op.operands[:3]]
    if any(b is None for b in bounds):
        return None
    lb, ub, step = (int(b) for b in bounds)
    if (step > 0 and lb < ub) or (step < 0 and lb > ub) or step == 0:
        return None
    return [], list(op.operands[3:])


PATTERNS = {
    "add": _add, "sub": _sub, "mul": _mul, "select": _select,
    "cast": _noop_conversion, "bitcast": _noop_conversion, "addptr": _addptr,
    "splat": _reshape_constant, "broadcast": _broadcast, "expand_dims": _reshape_constant,
    "reshape": _reshape_constant, "permute": _reshape_constant,
    "if": _if, "for": _for,
}


class _Canonicalizer:
    def __init__(self):
        self.subst = Substitution()
        self.changed = False

    def block(self, block: Block) -> None:
        pending = list(reversed(block.ops))
        out: list[Op] = []
        while pending:
            op = self.subst.apply(pending.pop())
            rewrite = fold(op)
            if rewrite is None and op.name in PATTERNS:
                rewrite = PATTERNS[op.name](op)
            if rewrite is None:
                for r in op.regions:
                    self.block(r)
                out.append(op)
                continue
            new_ops, values = rewrite
            pending.extend(reversed(new_ops))
            self.subst.replace(op.results, values)
            self.changed = True
        set_ops(block, out)


def canonicalize_func(f: Func) -> bool:
    """Canonicalize ``f`` to a fixed point; return whether anything changed."""
    changed = False
    for _ in range(MAX_ROUNDS):
        c = _Canonicalizer()
        c.block(f.body)
        if not c.changed:
            return changed
        changed = True
    raise RuntimeError(f"canonicalize did not reach a fixed point on @{f.name}")


@register("canonicalize")
def canonicalize(module: Module) -> Module:
    """Fold constants and simplify exact identities in every function."""
    for f in list(module.funcs.values()):
        canonicalize_func(f)
    return module
