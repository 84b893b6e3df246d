"""Control flow: ``if``/``else``, ``for`` over ``range``/``ml.range``/``ml.static_range``,
``while``, and conditional expressions.

Loop-carried variables are found by a dry run: the body is emitted once into a
throw-away block, and the names it rebinds (that existed before the loop) become the
loop's iteration values. A compile-time condition picks one branch at compile time.
"""
from __future__ import annotations

import ast

from ..errors import CompilationError
from ..ir import types as T
from ..ir.core import Block
from ..language import semantic as S
from ..language.core import constexpr, tensor

# The most loop bodies one nest of unrolled loops (``static_range``, loops over
# compile-time tuples) may emit: each copy is compiled, so 200000 would take minutes.
MAX_UNROLLED = 4096


def _unwrap(v):
    return v.value if isinstance(v, constexpr) else v


def _static(v) -> bool:
    v = _unwrap(v)
    if isinstance(v, (list, tuple)):
        return all(_static(x) for x in v)
    return not isinstance(v, tensor) and not hasattr(v, "__mutile_desc__")


def always_returns(stmts) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and always_returns(last.body) and always_returns(last.orelse)


def may_return(stmts) -> bool:
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Return):
                return True
    return False


class ControlFlowMixin:
    """Methods of :class:`~mutile.frontend.codegen.CodeGenerator` for control flow."""

    # ------------------------------------------------------------ helpers
    def value_type(self, v, name, node):
        v = _unwrap(v)
        if isinstance(v, tensor):
            return v.type
        if isinstance(v, (bool, int, float)):
            return S.python_scalar_type(v)
        self.fail(node, f"'{name}' holds the compile-time value {v!r}, which cannot change in "
                        "a runtime loop or branch")

    def coerce(self, v, t, name, node, where):
        """``v`` as a tensor of type ``t`` (compile-time numbers become constants)."""
        v = _unwrap(v)
        if not isinstance(v, tensor):
            return S.constant(self.builder, v, t)
        if v.type != t:
            self.fail(node, f"'{name}' is {v.type} {where} but {t} elsewhere; make both the same "
                            "type (e.g. with .to())")
        return v

    def in_block(self, block, fn):
        """Run ``fn`` with the builder appending to ``block``."""
        saved = self.builder.block
        self.builder.block = block
        try:
            return fn()
        finally:
            self.builder.block = saved

    # ------------------------------------------------------------ if
    def visit_If(self, node):
        cond = self.visit(node.test)
        if _static(cond):
            self.visit_stmts(node.body if _unwrap(cond) else node.orelse)
            return
        cond = self.scalar_condition(cond, node.test)
        before = dict(self.scope)
        branches = []
        for stmts in (node.body, node.orelse):
            self.scope, self.returned = dict(before), None
            block = Block()
            self.in_block(block, lambda s=stmts: self.visit_stmts(s))
            branches.append((block, self.scope, self.returned))
        self.scope = before
        if branches[0][2] is not None or branches[1][2] is not None:
            self.merge_returns(node, cond, branches)
            return
        names = [n for n in branches[0][1] if n in branches[1][1] and
                 (branches[0][1][n] is not before.get(n) or branches[1][1][n] is not before.get(n))]
        names = [n for n in names if not (_static(branches[0][1][n]) and _static(branches[1][1][n])
                                          and _unwrap(branches[0][1][n]) == _unwrap(branches[1][1][n])
                                          and type(_unwrap(branches[0][1][n])) is
                                          type(_unwrap(branches[1][1][n])))]
        types = []
        for n in names:
            a, b = branches[0][1][n], branches[1][1][n]
            t = self.value_type(b, n, node) if not isinstance(_unwrap(a), tensor) and \
                isinstance(_unwrap(b), tensor) else self.value_type(a, n, node)
            types.append(t)
        for block, scope, _ in branches:
            vals = self.in_block(block, lambda sc=scope: [
                self.coerce(sc[n], t, n, node, "after one branch").handle for n, t in zip(names, types)])
            self.in_block(block, lambda v=vals: self.builder.create("yield", v))
        op = self.builder.create("if", [cond.handle], types, regions=[branches[0][0], branches[1][0]])
        for n, r in zip(names, op.results):
            r.hint = n
            self.scope[n] = tensor(r)
        for n in list(self.scope):
            if n not in before and n not in names:
                del self.scope[n]

    def merge_returns(self, node, cond, branches):
        vals = [r.values if r is not None else None for _, _, r in branches]
        if any(v is None for v in vals):
            if any(v for v in vals if v is not None):
                self.fail(node, "some paths through this if return a value and others do not")
            vals = [[], []]
        if len(vals[0]) != len(vals[1]):
            self.fail(node, "the branches of this if return different numbers of values")
        types = [self.value_type(a if isinstance(_unwrap(a), tensor) else b, "return value", node)
                 for a, b in zip(*vals)]
        for (block, _, _), vs in zip(branches, vals):
            hs = self.in_block(block, lambda vs=vs: [
                self.coerce(v, t, "the return value", node, "in one branch").handle
                for v, t in zip(vs, types)])
            self.in_block(block, lambda h=hs: self.builder.create("yield", h))
        op = self.builder.create("if", [cond.handle], types, regions=[branches[0][0], branches[1][0]])
        first = branches[0][2] or branches[1][2]
        self.returned = type(first)([tensor(r) for r in op.results], first.node)

    def scalar_condition(self, cond, node):
        cond = _unwrap(cond)
        if cond.shape:
            self.fail(node, f"a condition must be a scalar, got a tile of shape {cond.shape}; "
                            "use ml.where for elementwise choice")
        return S.as_bool(cond, self.builder)

    def if_expression(self, node, cond):
        cond = self.scalar_condition(cond, node.test)
        blocks, vals = [], []
        for e in (node.body, node.orelse):
            block = Block()
            vals.append(self.in_block(block, lambda e=e: self.visit(e)))
            blocks.append(block)
        t = self.value_type(vals[0] if isinstance(_unwrap(vals[0]), tensor) else vals[1], "value", node)
        for block, v in zip(blocks, vals):
            h = self.in_block(block, lambda v=v: self.coerce(v, t, "the value", node, "in one arm"))
            self.in_block(block, lambda h=h: self.builder.create("yield", [h.handle]))
        return tensor(self.builder.create("if", [cond.handle], [t], regions=blocks).result)

    # ------------------------------------------------------------ loops
    def find_carried(self, node, run_body, extra_bound=()):
        """Dry-run ``run_body`` until the set and types of loop-carried names settle."""
        before = dict(self.scope)
        carried: dict = {}
        for _ in range(4):
            self.scope = dict(before)
            placeholders = {}
            block = Block()
            for n, t in carried.items():
                placeholders[n] = tensor(block.add_arg(t, n))
                self.scope[n] = placeholders[n]
            self.dry_run += 1
            try:
                self.in_block(block, lambda: run_body(block))
            finally:
                self.dry_run -= 1
            after = self.scope
            new = {}
            for n, v in after.items():
                if n not in before or n in extra_bound:
                    continue
                old = placeholders.get(n, before[n])
                if v is old:
                    continue
                if (_static(v) and _static(old) and type(_unwrap(v)) is type(_unwrap(old))
                        and _unwrap(v) == _unwrap(old)):
                    continue
                new[n] = self.value_type(v, n, node)
            for n, t in carried.items():
                new.setdefault(n, t)
            self.scope = before
            if new == carried:
                return carried
            carried = new
        self.fail(node, "the types of the loop's variables do not settle; give them fixed "
                        "types before the loop")

    def visit_For(self, node):
        if node.orelse:
            self.fail(node, "for/else is not supported in a kernel")
        it = _unwrap(self.visit(node.iter))
        from .. import language as ml
        if isinstance(it, ml.static_range) or (isinstance(it, (list, tuple)) and _static(it)):
            self.unrolled_for(node, it)
            return
        if not isinstance(it, ml.range):
            self.fail(node.iter, "a kernel loop must iterate over range(), ml.range() or "
                                 "ml.static_range()")
        if not isinstance(node.target, ast.Name):
            self.fail(node.target, "the loop variable must be a single name")
        b = self.builder
        bounds = [S.to_tensor(_unwrap(x), b) for x in (it.start, it.end, it.step)]
        for x in bounds:
            if x.shape or not x.dtype.is_int():
                self.fail(node.iter, f"loop bounds must be integer scalars, got {x.type}")
        iv_t = S.integer_promote(S.integer_promote(bounds[0].dtype, bounds[1].dtype),
                                 bounds[2].dtype)
        if iv_t.bits < 32:
            iv_t = T.u32 if iv_t.kind == "uint" else T.i32
        lb, ub, step = (S.cast(x, iv_t, b) for x in bounds)
        if _static(it.step) and _unwrap(it.step) == 0:
            self.fail(node.iter, "range() step must not be zero")
        target = node.target.id

        def body(block, iv=None):
            self.scope[target] = tensor(iv if iv is not None else block.add_arg(iv_t, target))
            self.loop_depth += 1
            try:
                self.visit_stmts(node.body)
            finally:
                self.loop_depth -= 1

        carried = self.find_carried(node, body, extra_bound=(target,))
        names, types = list(carried), list(carried.values())
        inits = [self.coerce(self.scope[n], t, n, node, "before the loop").handle
                 for n, t in zip(names, types)]
        attrs = {}
        if it.num_stages is not None:
            attrs["num_stages"] = int(_unwrap(it.num_stages))
        if it.unroll is not None:
            attrs["unroll"] = int(_unwrap(it.unroll))
        if _unwrap(it.warp_specialize):
            attrs["warp_specialize"] = True
        region = Block([iv_t] + types, [target] + names)
        before = dict(self.scope)
        for n, a in zip(names, region.args[1:]):
            self.scope[n] = tensor(a)
        self.in_block(region, lambda: body(region, region.args[0]))
        outs = self.in_block(region, lambda: [
            self.coerce(self.scope[n], t, n, node, "at the end of the loop body").handle
            for n, t in zip(names, types)])
        self.in_block(region, lambda: self.builder.create("yield", outs))
        self.scope = before
        op = b.create("for", [lb.handle, ub.handle, step.handle] + inits, types, attrs, [region])
        for n, r in zip(names, op.results):
            r.hint = n
            self.scope[n] = tensor(r)

    def unrolled_for(self, node, it):
        from .. import language as ml
        if isinstance(it, ml.static_range):
            vals = [_unwrap(x) for x in (it.start, it.end, it.step)]
            if not all(isinstance(v, int) for v in vals):
                self.fail(node.iter, "static_range bounds must be compile-time integers")
            if vals[2] == 0:
                self.fail(node.iter, "static_range() step must not be zero")
            seq = range(*vals)
        else:
            seq = it
        outer = self.compiler.unrolled
        total = outer * len(seq)
        if total > MAX_UNROLLED:
            what = (f"this static_range unrolls {len(seq)} iterations"
                    if isinstance(it, ml.static_range) else
                    f"this loop over a {len(seq)}-element sequence unrolls {len(seq)} times")
            inside = (f" inside unrolled loops that repeat it {outer} times ({total} bodies in "
                      "all)") if outer > 1 else ""
            self.fail(node.iter, f"{what}{inside}: more than the {MAX_UNROLLED} a nest of "
                                 "unrolled loops may emit; use ml.range (a loop that stays a "
                                 "loop) instead")
        self.loop_depth += 1
        self.compiler.unrolled = total
        try:
            for v in seq:
                self.assign(node.target, v)
                self.visit_stmts(node.body)
        finally:
            self.loop_depth -= 1
            self.compiler.unrolled = outer

    def visit_While(self, node):
        if node.orelse:
            self.fail(node, "while/else is not supported in a kernel")
        cond0 = self.in_block(Block(), lambda: self.visit(node.test))
        if _static(cond0):
            if not _unwrap(cond0):
                return
            self.fail(node.test, "this while loop's condition is always true")

        def body(block):
            self.loop_depth += 1
            try:
                self.visit_stmts(node.body)
            finally:
                self.loop_depth -= 1

        carried = self.find_carried(node, body)
        names, types = list(carried), list(carried.values())
        inits = [self.coerce(self.scope[n], t, n, node, "before the loop").handle
                 for n, t in zip(names, types)]
        before_scope = dict(self.scope)
        head, tail = Block(types, names), Block(types, names)
        for n, a in zip(names, head.args):
            self.scope[n] = tensor(a)
        c = self.in_block(head, lambda: self.scalar_condition(self.visit(node.test), node.test))
        if _static(c):
            self.fail(node.test, "a while condition must depend on values the loop changes")
        self.in_block(head, lambda: self.builder.create("condition", [c.handle] + list(head.args)))
        for n, a in zip(names, tail.args):
            self.scope[n] = tensor(a)
        self.in_block(tail, lambda: body(tail))
        outs = self.in_block(tail, lambda: [
            self.coerce(self.scope[n], t, n, node, "at the end of the loop body").handle
            for n, t in zip(names, types)])
        self.in_block(tail, lambda: self.builder.create("yield", outs))
        self.scope = before_scope
        op = self.builder.create("while", inits, types, regions=[head, tail])
        for n, r in zip(names, op.results):
            r.hint = n
            self.scope[n] = tensor(r)


__all__ = ["ControlFlowMixin", "always_returns", "may_return", "CompilationError"]
