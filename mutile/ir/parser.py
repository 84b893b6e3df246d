"""Parse the tile IR's text form (``grammar/tile_ir.lark``) back into a module.

``parse(print_module(m)) == m`` for every module; a malformed text raises
:class:`~mutile.errors.VerifyError` naming the line and column of the text.
"""
from __future__ import annotations

import ast
import functools
from importlib import resources

import lark

from ..errors import Loc, VerifyError
from . import types as T
from .core import Block, Func, Module, Op
from .ops import OPS


@functools.lru_cache(maxsize=None)
def _parser() -> lark.Lark:
    text = resources.files("mutile.grammar").joinpath("tile_ir.lark").read_text()
    return lark.Lark(text, parser="lalr", propagate_positions=True)


class _Types(lark.Transformer):
    def scalar_type(self, c):
        return T.SCALARS[str(c[0])]

    def ptr_type(self, c):
        return T.PointerType(T.SCALARS[str(c[0])])

    def tile_type(self, c):
        return T.TileType(tuple(int(x) for x in str(c[0]).split("x")), c[1])

    def desc_type(self, c):
        return T.DescType(T.SCALARS[str(c[0])], tuple(int(x) for x in str(c[1]).split("x")))

    def smem_type(self, c):
        return T.SharedType(tuple(int(x) for x in str(c[0]).split("x")), T.SCALARS[str(c[1])],
                            int(c[2]))

    def barrier_type(self, c):
        return T.BarrierType(int(c[0]))

    def int_attr(self, c):
        return int(c[0])

    def float_attr(self, c):
        return float(c[0])

    def special_float(self, c):
        return float(str(c[0]))

    def true(self, c):
        return True

    def false(self, c):
        return False

    def str_attr(self, c):
        return ast.literal_eval(str(c[0]))

    def type_attr(self, c):
        return c[0]

    def list_attr(self, c):
        return [x for x in c if x is not None]

    def attr(self, c):
        return (str(c[0]), c[1])

    def attr_dict(self, c):
        return dict(x for x in c if x is not None)


class _Builder:
    """Walks the parse tree, resolving value names to SSA values in scope."""

    def __init__(self, text: str):
        self.text = text
        self.files: dict[int, str] = {}

    def fail(self, msg, meta):
        line = getattr(meta, "line", 0)
        col = getattr(meta, "column", 1)
        src = self.text.splitlines()[line - 1] if 0 < line <= len(self.text.splitlines()) else ""
        raise VerifyError(f"<ir>:{line}:{col}: {msg}\n    {src}\n    {' ' * (col - 1)}^")

    def loc(self, tree) -> Loc:
        f, line, col = (int(x) for x in tree.children)
        if f not in self.files:
            self.fail(f"undeclared source file #{f}", tree.meta)
        return Loc(self.files[f], line, col)

    def module(self, tree) -> Module:
        m = Module()
        for ch in tree.children:
            if ch.data == "file_decl":
                self.files[int(ch.children[0])] = ast.literal_eval(str(ch.children[1]))
        for ch in tree.children:
            if ch.data == "func":
                f, is_kernel = self.func(ch)
                if f.name in m.funcs:
                    self.fail(f"function @{f.name} defined twice", ch.meta)
                m.add(f)
                if is_kernel:
                    m.kernel = f.name
        return m

    def func(self, tree):
        kw, name, *rest = tree.children
        args = [c for c in rest if isinstance(c, lark.Tree) and c.data == "arg"]
        loc_tree = next(c for c in rest if isinstance(c, lark.Tree) and c.data == "loc")
        attrs = next((c for c in rest if isinstance(c, dict)), {})
        i_loc = rest.index(loc_tree)
        res_types = [c for c in rest[:i_loc] if isinstance(c, T.Type)]
        ops = rest[i_loc + 1:]
        f = Func(str(name), [a.children[1] for a in args], res_types,
                 [str(a.children[0])[1:] for a in args], self.loc(loc_tree), attrs)
        scope = {str(a.children[0]): v for a, v in zip(args, f.args)}
        self.fill(f.body, ops, scope)
        return f, str(kw) == "kernel"

    def fill(self, block: Block, ops, scope: dict):
        for t in ops:
            block.append(self.op(t, scope))

    def op(self, tree, scope: dict) -> Op:
        results, operands, attrs, types, loc, regions = [], [], {}, [], None, []
        name = None
        for c in tree.children:
            if c is None:
                continue
            if isinstance(c, lark.Token) and c.type == "NAME":
                name = str(c)
            elif isinstance(c, dict):
                attrs = c
            elif isinstance(c, T.Type):
                types.append(c)
            elif c.data == "results":
                results = [str(x) for x in c.children]
            elif c.data == "operands":
                operands = [str(x) for x in c.children]
            elif c.data == "loc":
                loc = self.loc(c)
            elif c.data == "region":
                regions.append(c)
        if name not in OPS:
            self.fail(f"unknown op '{name}'", tree.meta)
        if len(results) != len(types):
            self.fail(f"{len(results)} results but {len(types)} result types", tree.meta)
        vals = []
        for o in operands:
            if o not in scope:
                self.fail(f"use of undefined value {o}", tree.meta)
            vals.append(scope[o])
        inner = dict(scope)
        blocks = []
        for r in regions:
            args = [c for c in r.children if isinstance(c, lark.Tree) and c.data == "arg"]
            b = Block([a.children[1] for a in args], [str(a.children[0])[1:] for a in args])
            rscope = dict(inner)
            rscope.update({str(a.children[0]): v for a, v in zip(args, b.args)})
            self.fill(b, [c for c in r.children if isinstance(c, lark.Tree) and c.data == "op"],
                      rscope)
            blocks.append(b)
        op = Op(OPS[name], vals, types, attrs, blocks, loc)
        for n, v in zip(results, op.results):
            if n in scope:
                self.fail(f"value {n} defined twice", tree.meta)
            v.hint = n[1:]
            scope[n] = v
        return op


def parse(text: str) -> Module:
    """Parse IR text into a :class:`Module` (call the verifier to check its rules)."""
    try:
        tree = _parser().parse(text)
    except lark.exceptions.UnexpectedInput as e:
        lines = text.splitlines()
        src = lines[e.line - 1] if 0 < e.line <= len(lines) else ""
        raise VerifyError(f"<ir>:{e.line}:{e.column}: syntax error\n    {src}\n"
                          f"    {' ' * (e.column - 1)}^") from None
    tree = _Types().transform(tree)
    return _Builder(text).module(tree)
