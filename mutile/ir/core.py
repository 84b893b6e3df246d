"""The tile IR's data structures: values, ops, blocks, functions and modules.

Control flow is structured: an op owns regions, each region is one :class:`Block`
whose arguments are the region's entry values (loop index, iteration values).
An op's meaning (operands, attributes, result types, verifier, text syntax) lives
in its :class:`~mutile.ir.ops.OpDef`; this file knows nothing of particular ops.
"""
from __future__ import annotations

from typing import Iterator

from ..errors import UNKNOWN, Loc
from .types import Type

#: ``Module.__eq__`` and ``Module.__str__`` call the structural equality and the printer,
#: which import this module; they enter themselves here (``equal``, ``print``) when
#: :mod:`mutile.ir` is imported, so the dependency runs one way.
MODULE_HOOKS: dict = {}


class Value:
    """An SSA value: an op result or a block argument."""
    __slots__ = ("type", "owner", "index", "hint")

    def __init__(self, type: Type, owner, index: int, hint: str = ""):
        self.type, self.owner, self.index, self.hint = type, owner, index, hint

    def __repr__(self) -> str:
        return f"<Value {self.hint or '?'}: {self.type}>"


class Block:
    """A straight-line list of ops with typed arguments; the body of one region."""
    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types=(), hints=()):
        self.args = [Value(t, self, i, h) for i, (t, h) in
                     enumerate(zip(arg_types, list(hints) + [""] * len(arg_types)))]
        self.ops: list[Op] = []
        self.parent: Op | None = None

    def add_arg(self, t: Type, hint: str = "") -> Value:
        v = Value(t, self, len(self.args), hint)
        self.args.append(v)
        return v

    def append(self, op: "Op") -> "Op":
        op.parent = self
        self.ops.append(op)
        return op

    @property
    def terminator(self) -> "Op | None":
        return self.ops[-1] if self.ops else None


class Op:
    """One operation. ``opdef`` carries everything that depends on which op it is."""
    __slots__ = ("opdef", "operands", "results", "attrs", "regions", "loc", "parent")

    def __init__(self, opdef, operands, result_types, attrs=None, regions=(), loc: Loc = UNKNOWN):
        self.opdef = opdef
        self.operands: list[Value] = list(operands)
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: dict = dict(attrs or {})
        self.regions: list[Block] = list(regions)
        for r in self.regions:
            r.parent = self
        self.loc = loc
        self.parent: Block | None = None

    @property
    def name(self) -> str:
        return self.opdef.name

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    def walk(self) -> Iterator["Op"]:
        """This op, then every op nested in its regions, in program order."""
        yield self
        for r in self.regions:
            for op in r.ops:
                yield from op.walk()

    def __repr__(self) -> str:
        return f"<Op {self.name} at {self.loc}>"


class Func:
    """A kernel or a ``@jit`` callee: typed arguments, a body, result types."""

    def __init__(self, name: str, arg_types, result_types=(), arg_names=(), loc: Loc = UNKNOWN,
                 attrs=None):
        self.name = name
        self.body = Block(arg_types, arg_names)
        self.result_types = list(result_types)
        self.loc = loc
        self.attrs = dict(attrs or {})

    @property
    def args(self) -> list[Value]:
        return self.body.args

    def walk(self) -> Iterator[Op]:
        for op in self.body.ops:
            yield from op.walk()


class Module:
    """A set of functions; ``kernel`` names the entry point."""

    def __init__(self, funcs=(), kernel: str = ""):
        self.funcs: dict[str, Func] = {f.name: f for f in funcs}
        self.kernel = kernel or (next(iter(self.funcs)) if self.funcs else "")

    def add(self, f: Func) -> Func:
        self.funcs[f.name] = f
        if not self.kernel:
            self.kernel = f.name
        return f

    @property
    def entry(self) -> Func:
        return self.funcs[self.kernel]

    def walk(self) -> Iterator[Op]:
        for f in self.funcs.values():
            yield from f.walk()

    def __eq__(self, other) -> bool:
        return isinstance(other, Module) and MODULE_HOOKS["equal"](self, other)

    def __str__(self) -> str:
        return MODULE_HOOKS["print"](self)


class Builder:
    """Appends ops at an insertion point; ``loc`` is stamped on every op it makes."""

    def __init__(self, block: Block | None = None, loc: Loc = UNKNOWN):
        self.block = block
        self.loc = loc

    def create(self, name: str, operands=(), result_types=None, attrs=None, regions=(),
               loc: Loc | None = None) -> Op:
        """Make op ``name``; result types are inferred from its definition when omitted."""
        from .ops import OPS
        opdef = OPS[name]
        operands = list(operands)
        attrs = dict(attrs or {})
        if result_types is None:
            if opdef.infer is None:
                raise ValueError(f"op '{name}' needs explicit result types")
            result_types = opdef.infer([v.type for v in operands], attrs)
        op = Op(opdef, operands, result_types, attrs, regions, loc or self.loc)
        self.block.append(op)
        return op

    def __call__(self, name: str, *operands, type=None, **attrs) -> Value:
        """Make a single-result op and return its result (``type``: its result type,
        needed only by ops whose type does not follow from operands and attributes)."""
        return self.create(name, operands, None if type is None else [type], attrs).result
