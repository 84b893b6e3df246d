"""The verifier: every op obeys its definition, and every value is defined before use.

It checks operand counts, required attributes, inferred result types, each op's own
rule (``OpDef.check``), terminators, SSA dominance in structured regions, and calls
(callee exists, argument and result types match). Errors carry the op's location.
"""
from __future__ import annotations

from ..errors import VerifyError
from .core import Block, Func, Module, Op
from .ops import OpRuleError


def _fail(op: Op, msg: str):
    raise VerifyError(f"'{op.name}': {msg}", op.loc)


def verify_op(op: Op, module: Module | None = None) -> None:
    """Check one op against its definition (not its regions' contents)."""
    d = op.opdef
    lo, hi = d.operand_range()
    n = len(op.operands)
    if n < lo or (hi is not None and n > hi):
        _fail(op, f"takes {lo}{'' if hi == lo else '+' if hi is None else f'..{hi}'} operands, got {n}")
    for a in d.attrs:
        if a not in op.attrs:
            _fail(op, f"missing attribute '{a}'")
    for a in op.attrs:
        if a not in d.attrs and a not in d.optional_attrs:
            _fail(op, f"unknown attribute '{a}'")
    if d.regions >= 0 and len(op.regions) != d.regions:   # -1: any number
        _fail(op, f"needs {d.regions} regions, has {len(op.regions)}")
    try:
        if d.infer is not None:
            want = d.infer([v.type for v in op.operands], op.attrs)
            got = [r.type for r in op.results]
            if got != list(want):
                _fail(op, f"result types ({', '.join(map(str, got))}) should be "
                          f"({', '.join(map(str, want))})")
        if d.check is not None:
            d.check(op)
    except OpRuleError as e:
        _fail(op, str(e))
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
        # an attribute or operand of a kind the op's rule cannot even inspect
        _fail(op, f"malformed op ({type(e).__name__}: {e})")
    if op.name == "call" and module is not None:
        callee = module.funcs.get(op.attrs["callee"])
        if callee is None:
            _fail(op, f"calls undefined function @{op.attrs['callee']}")
        if [v.type for v in op.operands] != [a.type for a in callee.args]:
            _fail(op, f"argument types do not match @{callee.name}")
        if [r.type for r in op.results] != callee.result_types:
            _fail(op, f"result types do not match @{callee.name}")


def _verify_block(b: Block, defined: set, module: Module, fn: Func):
    defined = set(defined) | {id(a) for a in b.args}
    for i, op in enumerate(b.ops):
        for v in op.operands:
            if id(v) not in defined:
                _fail(op, f"uses a value that is not defined before it ({v.type})")
        if op.opdef.terminator and i != len(b.ops) - 1:
            _fail(op, "terminator is not the last op of its block")
        verify_op(op, module)
        if op.name == "return":
            if [v.type for v in op.operands] != fn.result_types:
                _fail(op, f"returns ({', '.join(str(v.type) for v in op.operands)}) but "
                          f"@{fn.name} returns ({', '.join(map(str, fn.result_types))})")
        for r in op.regions:
            _verify_block(r, defined, module, fn)
        defined |= {id(r) for r in op.results}


def verify(module: Module) -> Module:
    """Raise :class:`VerifyError` at the first broken rule; return the module otherwise."""
    for f in module.funcs.values():
        term = f.body.terminator
        if term is None or term.name != "return":
            raise VerifyError(f"function @{f.name} does not end in return", f.loc)
        _verify_block(f.body, set(), module, f)
    return module
