"""Atomic read-modify-write builtins, with Triton's names, arguments and dtype rules.

``ml.atomic_add(ptr, val, mask=None, sem=None, scope=None)`` (and ``_max``, ``_min``,
``_and``, ``_or``, ``_xor``, ``_xchg``) and ``ml.atomic_cas(ptr, cmp, val, sem=None,
scope=None)`` act on a scalar pointer or on every element of a tile of pointers and
return the values memory held just before each element's own update. ``val`` (and
``mask``) broadcast to the pointer's shape and ``val`` converts to the pointed-to type.
Masked-off elements touch no memory and return 0 (Triton leaves them undefined).
``sem`` is ``"acq_rel"`` (default), ``"acquire"``, ``"release"`` or ``"relaxed"``;
``scope`` is ``"gpu"`` (default), ``"cta"`` or ``"sys"``.

Dtypes (Triton's): add takes f16, bf16, f32, f64 and 32/64-bit integers; max, min and
xchg take 32/64-bit integers and floats (f16/bf16 only add); and/or/xor take 32/64-bit
integers; cas takes 32/64-bit elements (mutile does not support 16-bit atomic_cas).
Float max/min compare as ``ml.maximum``/``ml.minimum`` (a NaN loses to a number).
"""
from __future__ import annotations

from ..ir.ops import ATOMIC_SCOPES, ATOMIC_SEMS
from . import semantic as S
from .core import _unwrap, builtin, tensor
from .semantic import fail


def _sem_scope(name: str, sem, scope):
    sem, scope = _unwrap(sem), _unwrap(scope)
    sem = "acq_rel" if sem is None else sem
    scope = "gpu" if scope is None else scope
    if sem not in ATOMIC_SEMS:
        fail(f"{name}(): sem must be one of {', '.join(map(repr, ATOMIC_SEMS))}, got {sem!r}")
    if scope not in ATOMIC_SCOPES:
        fail(f"{name}(): scope must be one of {', '.join(map(repr, ATOMIC_SCOPES))}, "
             f"got {scope!r}")
    return sem, scope


def _pointer(name: str, ptr, b) -> tensor:
    p = S.to_tensor(ptr, b)
    if not p.dtype.is_ptr():
        fail(f"{name}() needs a pointer or a tile of pointers, got {S.describe(p)}")
    return p


def _check_dtype(name: str, op: str, e) -> None:
    if e.is_bool() or e.bits < 16 or e.is_fp8():
        fail(f"{name}() does not support {e!r} elements (16-bit floats, 32- and 64-bit "
             "numbers only)")
    if e.bits == 16 and not (op == "add" and e.is_floating()):
        fail(f"{name}() does not support {e!r}: 16-bit elements only with atomic_add of "
             "float16/bfloat16")
    if op in ("and", "or", "xor") and not e.is_int():
        fail(f"{name}() needs integer elements, got {e!r}")


def rmw(op: str, ptr, val, mask, sem, scope, b) -> tensor:
    """The IR of ``atomic_<op>(ptr, val, mask)``: old values of ``ptr``'s shape."""
    name = f"atomic_{op}"
    p = _pointer(name, ptr, b)
    e = p.dtype.element_ty
    _check_dtype(name, op, e)
    sem, scope = _sem_scope(name, sem, scope)
    v = S.to_tensor_typed(val, e, b)
    if v.dtype.is_ptr():
        fail(f"{name}() value must be a number, got {S.describe(v)}")
    shape = S.broadcast_shapes(p.shape, v.shape)
    m = None
    if _unwrap(mask) is not None:
        m = S.as_bool(mask, b)
        shape = S.broadcast_shapes(shape, m.shape)
    if shape != p.shape:
        fail(f"{name}(): value/mask of shape {shape} do not fit the pointer's shape {p.shape}")
    v = S.broadcast_to(S.cast(v, e, b), shape, b)
    ops = [p.handle, v.handle]
    if m is not None:
        ops.append(S.broadcast_to(m, shape, b).handle)
    return tensor(b.create("atomic_rmw", ops, None, {"op": op, "sem": sem,
                                                     "scope": scope}).result)


def _rmw_builtin(op: str, doc: str):
    def fn(pointer, val, mask=None, sem=None, scope=None, _builder=None) -> tensor:
        return rmw(op, pointer, val, mask, sem, scope, _builder)
    fn.__name__ = f"atomic_{op}"
    fn.__doc__ = (f"Atomically {doc} at each pointer where ``mask`` holds; returns the old "
                  "values (0 where masked off). ``sem``/``scope`` as in Triton.")
    return builtin(fn)


atomic_add = _rmw_builtin("add", "add ``val``")
atomic_max = _rmw_builtin("max", "keep the larger of memory and ``val``")
atomic_min = _rmw_builtin("min", "keep the smaller of memory and ``val``")
atomic_and = _rmw_builtin("and", "AND ``val`` in")
atomic_or = _rmw_builtin("or", "OR ``val`` in")
atomic_xor = _rmw_builtin("xor", "XOR ``val`` in")
atomic_xchg = _rmw_builtin("xchg", "write ``val``")


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None, _builder=None) -> tensor:
    """Atomically, per element: ``old = *pointer; if old == cmp: *pointer = val``; returns
    ``old``. ``cmp`` and ``val`` broadcast to the pointer's shape (32/64-bit elements;
    floats compare bitwise)."""
    b = _builder
    p = _pointer("atomic_cas", pointer, b)
    e = p.dtype.element_ty
    if e.is_bool() or e.bits not in (32, 64) or e.is_fp8():
        fail(f"atomic_cas() needs 32- or 64-bit elements, got {e!r} (mutile does not "
             "support 16-bit atomic_cas)")
    sem, scope = _sem_scope("atomic_cas", sem, scope)
    c, v = S.to_tensor_typed(cmp, e, b), S.to_tensor_typed(val, e, b)
    for x in (c, v):
        if x.dtype.is_ptr():
            fail(f"atomic_cas() compare and value must be numbers, got {S.describe(x)}")
    shape = S.broadcast_shapes(S.broadcast_shapes(p.shape, c.shape), v.shape)
    if shape != p.shape:
        fail(f"atomic_cas(): cmp/val of shape {shape} do not fit the pointer's shape {p.shape}")
    c = S.broadcast_to(S.cast(c, e, b), shape, b)
    v = S.broadcast_to(S.cast(v, e, b), shape, b)
    return tensor(b.create("atomic_cas", [p.handle, c.handle, v.handle], None,
                           {"sem": sem, "scope": scope}).result)
