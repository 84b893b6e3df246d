"""Atomics: ``atomic_rmw`` / ``atomic_cas`` -> one ``ATOM`` instruction.

Only the owner of each element performs its update (for a scalar: thread 0 of the
block; for a replicated tile: threads ``t < numel``), guarded by the mask. The
destination is cleared first, so masked-off elements read 0. When the tile is
replicated (a scalar included), the owners' old values are broadcast to every thread
through shared memory between two barriers (:meth:`~..context.Codegen.gather`), so
every copy of the result holds the one value memory returned.
"""
from __future__ import annotations

from ..context import Codegen, element, lowers
from ..values import Uniform, VMem
from .control import move
from .memory import _address_tile
from ...isa.operands import IntImm

_OP = {"add": "ADD", "max": "MAX", "min": "MIN", "and": "AND", "or": "OR", "xor": "XOR",
       "xchg": "EXCH"}
_FLOAT = {"f16": "F16", "bf16": "BF16", "f32": "F32", "f64": "F64"}


def _suffix(op: str, t) -> str:
    """The ATOM row's type suffix for IR op kind ``op`` on element type ``t``."""
    bits = "B64" if t.bits == 64 else "B32"
    if op in ("and", "or", "xor", "xchg", "cas"):
        return bits
    if t.is_floating():
        return _FLOAT[t.name]
    if op == "add":
        return "S64" if t.bits == 64 else "S32"
    return ("S" if t.is_int_signed() else "U") + bits[1:]


@lowers("atomic_rmw", "atomic_cas")
def lower_atomic(cg: Codegen, op) -> None:
    p = cg.as_uniform(cg.get(op.operands[0]))
    rt = op.results[0].type
    t = element(rt)
    shape = rt.shape if rt.is_tile() else ()
    kind = "cas" if op.name == "atomic_cas" else op.attrs["op"]
    n_vals = 2 if kind == "cas" else 1
    vals = [cg.operand(cg.as_uniform(cg.get(v)), False) for v in op.operands[1:1 + n_vals]]
    mask = None
    if kind != "cas" and len(op.operands) > 2:
        mask = cg.as_uniform(cg.get(op.operands[2]))
    addr = _address_tile(cg, p, shape)
    out = cg.new_tile(shape, t)
    move(cg, out.run(), Uniform(IntImm(0), (), t) if out.w == 1 else Uniform(0, (), t))
    guard = cg.and_preds(cg.pred_of(mask) if mask is not None else None, cg.owner_pred(shape))
    mn = f"ATOM.{'CAS' if kind == 'cas' else _OP[kind]}.{_suffix(kind, t)}.GLOBAL"
    cg.emit(mn, out.run(), VMem(addr.run()), *vals, guard=guard)
    if cg.layout(shape).replicated:
        out = cg.gather(out, shape, lambda idx: idx)
    cg.bind(op.results[0], out)
