"""Structural equality of modules: same functions, ops, attributes, types, locations
and the same use of values (names are not compared). Float attributes compare as
values that print differently: ``-0.0`` differs from ``0.0``, every NaN equals NaN."""
from __future__ import annotations

import math

from .core import MODULE_HOOKS, Block, Module, Op


def _blocks_equal(a: Block, b: Block, vmap: dict) -> bool:
    if [x.type for x in a.args] != [y.type for y in b.args] or len(a.ops) != len(b.ops):
        return False
    for x, y in zip(a.args, b.args):
        vmap[id(x)] = y
    return all(_ops_equal(x, y, vmap) for x, y in zip(a.ops, b.ops))


def _attr_eq(x, y) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        if x != x or y != y:
            return x != x and y != y
        return x == y and math.copysign(1.0, x) == math.copysign(1.0, y)  # -0.0 != 0.0
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_attr_eq(p, q) for p, q in zip(x, y))
    return type(x) is type(y) and x == y


def _ops_equal(a: Op, b: Op, vmap: dict) -> bool:
    if (a.name != b.name or a.loc != b.loc or len(a.operands) != len(b.operands)
            or [r.type for r in a.results] != [r.type for r in b.results]
            or a.attrs.keys() != b.attrs.keys() or len(a.regions) != len(b.regions)):
        return False
    if any(not _attr_eq(a.attrs[k], b.attrs[k]) for k in a.attrs):
        return False
    if any(vmap.get(id(x)) is not y for x, y in zip(a.operands, b.operands)):
        return False
    for x, y in zip(a.results, b.results):
        vmap[id(x)] = y
    return all(_blocks_equal(x, y, vmap) for x, y in zip(a.regions, b.regions))


def modules_equal(a: Module, b: Module) -> bool:
    if a.kernel != b.kernel or a.funcs.keys() != b.funcs.keys():
        return False
    for name, fa in a.funcs.items():
        fb = b.funcs[name]
        if fa.result_types != fb.result_types or fa.loc != fb.loc or fa.attrs != fb.attrs:
            return False
        if not _blocks_equal(fa.body, fb.body, {}):
            return False
    return True


MODULE_HOOKS["equal"] = modules_equal
