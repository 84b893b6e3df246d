"""``inline``: replace every ``call`` by a copy of its callee's body, then keep only
the kernel.

The callee's body is cloned with its arguments mapped to the call's operands; the
operands of its final ``return`` replace the call's results. Calls inside the copy
(and inside regions) are inlined in turn. The copied ops keep their own locations
(the callee's source lines). A call that reaches a function already being inlined
is recursion, reported as a :class:`CompilationError` at that call.

Before::

    kernel @k(%a: i32) -> () {
      %r = call %a {callee = "twice"} : i32
      ...
    func @twice(%x: i32) -> (i32) {
      %y = add %x, %x : i32
      return %y

After: ``%r`` is gone, its uses read ``%y = add %a, %a : i32`` in ``@k``, and
``@twice`` is dropped from the module.
"""
from __future__ import annotations

from ..errors import CompilationError
from ..ir.core import Block, Module, Op
from .registry import register
from .rewrite import Substitution, clone_ops, set_ops


class _Inliner:
    def __init__(self, module: Module):
        self.module = module
        self.subst = Substitution()

    def block(self, block: Block, stack: tuple) -> None:
        """Inline the calls in ``block`` (and its regions); ``stack`` names the
        functions whose bodies are being inlined around it, outermost first."""
        out: list[Op] = []
        for op in block.ops:
            self.subst.apply(op)
            for r in op.regions:
                self.block(r, stack)
            if op.name != "call":
                out.append(op)
                continue
            out.extend(self.expand(op, stack))
        set_ops(block, out)

    def expand(self, call: Op, stack: tuple) -> list[Op]:
        """The ops replacing ``call`` (its callee's body, inlined recursively)."""
        name = call.attrs["callee"]
        callee = self.module.funcs.get(name)
        if callee is None:
            raise CompilationError(f"call to undefined function @{name}", call.loc)
        if name in stack:
            cycle = " -> ".join(f"@{n}" for n in stack[stack.index(name):] + (name,))
            raise CompilationError(f"recursive call to @{name} cannot be inlined "
                                   f"({cycle})", call.loc)
        body = Block()
        for op in clone_ops(callee.body, dict(zip(callee.args, call.operands))):
            body.append(op)
        ret = body.ops.pop()
        if ret.name != "return":
            raise CompilationError(f"@{name} does not end in return", callee.loc)
        self.block(body, stack + (name,))
        self.subst.apply(ret)
        self.subst.replace(call.results, ret.operands)
        return body.ops


@register("inline")
def inline(module: Module) -> Module:
    """Inline every call into the kernel and drop every other function."""
    kernel = module.entry
    _Inliner(module).block(kernel.body, (kernel.name,))
    module.funcs = {kernel.name: kernel}
    return module
