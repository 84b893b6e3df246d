"""Facts about the kernel's IR that the lowering reads (pure Python, no LLVM).

* uses: which ops read each value, and in which block each value is defined, so a
  value read once in its own block may stay lazy (fused into its reader) or be updated
  in place by that reader;
* origins: which pointer parameter each pointer value is derived from (through
  addptr, splat, shape ops and loop-carried values), for bounds checks and fault
  messages; None when it cannot be told statically;
* carried increments: a loop-carried pointer tile whose next value is itself plus
  uniform offsets (``a_ptrs += BK``) keeps its address structure across iterations.
"""
from __future__ import annotations

from mutile.ir.core import Block, Func, Op, Value

_SHAPE_OPS = ("splat", "broadcast", "expand_dims", "reshape", "permute", "hint")


class Analysis:
    def __init__(self, func: Func):
        self.func = func
        self.uses: dict[int, list[Op]] = {}
        self.defblock: dict[int, Block] = {}
        self._index(func.body)
        self.origins = _origins(func)

    def _index(self, block: Block) -> None:
        for a in block.args:
            self.defblock[id(a)] = block
        for op in block.ops:
            for v in op.operands:
                self.uses.setdefault(id(v), []).append(op)
            for r in op.results:
                self.defblock[id(r)] = block
            for reg in op.regions:
                self._index(reg)

    def num_uses(self, v: Value) -> int:
        return len(self.uses.get(id(v), ()))

    def sole_local_use(self, v: Value, op: Op | None = None) -> bool:
        """True if ``v`` is read exactly once, by an op of the block defining it (``op``)."""
        users = self.uses.get(id(v), ())
        if len(users) != 1 or users[0].parent is not self.defblock.get(id(v)):
            return False
        return op is None or users[0] is op

    def origin(self, v: Value):
        return self.origins.get(id(v))


def is_uniform(v: Value) -> bool:
    """True if every element of ``v`` is provably equal (splat/constant and ops of them)."""
    op = v.owner if isinstance(v.owner, Op) else None
    if op is None:
        return not v.type.is_tile()
    if op.name in ("splat", "constant", "program_id", "num_programs"):
        return True
    if op.name in ("broadcast", "expand_dims", "reshape", "hint"):
        return is_uniform(op.operands[0])
    if op.opdef.category == "elementwise" and op.operands:
        return all(is_uniform(o) for o in op.operands)
    return False


def carried_increment(y: Value, arg: Value) -> bool:
    """True if ``y`` is ``arg`` advanced by uniform offsets (addptr chains)."""
    while y is not arg:
        op = y.owner if isinstance(y.owner, Op) else None
        if op is None:
            return False
        if op.name == "addptr" and is_uniform(op.operands[1]):
            y = op.operands[0]
        elif op.name == "hint":
            y = op.operands[0]
        else:
            return False
    return True


def _origins(func: Func) -> dict:
    """Pointer parameter index per pointer/descriptor value id (see module doc)."""
    bad: set[int] = set()
    while True:
        org = {id(a): i for i, a in enumerate(func.args) if a.type.scalar.is_ptr()}
        newly_bad = _walk_origins(func.body, org, bad)
        if not newly_bad:
            return org
        bad |= newly_bad


def _walk_origins(block: Block, org: dict, bad: set) -> set:
    newly_bad = set()

    def get(v):
        return org.get(id(v))

    for op in block.ops:
        name = op.name
        if name in _SHAPE_OPS or name in ("addptr", "make_desc", "bitcast"):
            o = get(op.operands[0])
            if o is not None and op.results:
                org[id(op.result)] = o
        elif name == "select":
            a, c = get(op.operands[1]), get(op.operands[2])
            if a is not None and a == c:
                org[id(op.result)] = a
        elif name in ("for", "while"):
            inits = op.operands[3:] if name == "for" else op.operands
            body = op.regions[0]
            args = body.args[1:] if name == "for" else body.args
            for a, i in zip(args, inits):
                if id(a) not in bad and get(i) is not None:
                    org[id(a)] = get(i)
            newly_bad |= _walk_origins(body, org, bad)
            if name == "while":
                after = op.regions[1]
                cond = body.terminator.operands[1:]
                for a, c in zip(after.args, cond):
                    if get(c) is not None:
                        org[id(a)] = get(c)
                newly_bad |= _walk_origins(after, org, bad)
                yields = after.terminator.operands
                outs = cond
            else:
                yields = body.terminator.operands
                outs = yields
            for a, y in zip(args, yields):
                if id(a) in org and get(y) != org[id(a)]:
                    newly_bad.add(id(a))
            for r, o in zip(op.results, outs):
                if get(o) is not None:
                    org[id(r)] = get(o)
            continue
        elif name == "if":
            for reg in op.regions:
                newly_bad |= _walk_origins(reg, org, bad)
            t, e = (r.terminator.operands for r in op.regions)
            for r, a, c in zip(op.results, t, e):
                if get(a) is not None and get(a) == get(c):
                    org[id(r)] = get(a)
            continue
        for reg in op.regions:
            newly_bad |= _walk_origins(reg, org, bad)
    return newly_bad - bad
