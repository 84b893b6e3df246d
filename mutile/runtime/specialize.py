"""From launch arguments to a specialization: IR types of runtime arguments, constexpr
values, the compile-time values a kernel reads from enclosing functions, the host arrays
behind pointers, and Triton-style signature strings (``"*fp16,i32"``)."""
from __future__ import annotations

import numpy as np

from ..errors import LaunchError
from ..frontend.source import closure_cells
from ..ir import types as T
from ..language.core import constexpr, python_value
from ..language.semantic import SemanticError, python_scalar_type
from .cache import source_hash
from .torch_arrays import is_torch_tensor, torch_view

_SIG_NAMES = {"fp8e4nv": T.f8e4m3, "fp8e4": T.f8e4m3, "fp8e5": T.f8e5m2, "fp8e4b8": T.f8e4b8,
              "fp8e5b16": T.f8e5b16, "fp16": T.f16,
              "bf16": T.bf16, "fp32": T.f32, "fp64": T.f64, "i1": T.i1, "i8": T.i8,
              "i16": T.i16, "i32": T.i32, "i64": T.i64, "u8": T.u8, "u16": T.u16, "u32": T.u32,
              "u64": T.u64, "f16": T.f16, "f32": T.f32, "f64": T.f64}


def parse_signature_type(s: str) -> T.Type:
    """``"*fp16"`` -> ptr<f16>, ``"i32"`` -> i32 (Triton's signature spelling)."""
    s = s.strip()
    if s.startswith("*"):
        return T.PointerType(parse_signature_type(s[1:]))
    if s in _SIG_NAMES:
        return _SIG_NAMES[s]
    if s in T.SCALARS:
        return T.SCALARS[s]
    raise LaunchError(f"unknown type '{s}' in signature (use e.g. *fp16, *fp32, i32, i64, fp32)")


def as_array(value):
    """The numpy view of an array-like argument, or None if it is not array-like."""
    if isinstance(value, np.ndarray):
        return value
    if is_torch_tensor(value):      # its data pointer, as in Triton (any dtype, grad or not)
        return torch_view(value)
    if hasattr(value, "__array_interface__"):
        return np.asarray(value)
    if hasattr(value, "__dlpack__"):
        return np.from_dlpack(value)
    return None


def runtime_type(name: str, value) -> T.Type | None:
    """The IR type a runtime argument is specialized as; None for None (the kernel sees
    the compile-time value None, as ``if ptr is None:`` in Triton's kernels expects)."""
    if isinstance(value, T.Type):           # warmup with a type instead of a value
        return value
    if hasattr(value, "launch_args") and isinstance(getattr(value, "type", None), T.DescType):
        return value.type                   # a mutile.TensorDescriptor
    if isinstance(value, np.generic):       # numpy scalars are numbers, as in Triton
        value = value.item()
    arr = as_array(value)
    if arr is not None:
        st = T.scalar_from_numpy(arr.dtype)
        if st is None:
            raise LaunchError(f"argument '{name}': arrays of dtype {arr.dtype} are not supported")
        return T.PointerType(st)
    if isinstance(value, (bool, np.bool_)):
        return T.i1
    if isinstance(value, (int, np.integer)):
        try:
            return python_scalar_type(int(value))   # the same widths as kernel literals
        except SemanticError as e:
            raise LaunchError(f"argument '{name}': {e}") from None
    if isinstance(value, (float, np.floating)):
        return T.f32
    if value is None:       # Triton specializes on None: a compile-time None, no argument
        return None
    raise LaunchError(f"argument '{name}': cannot pass a {type(value).__name__} to a kernel "
                      "(pass numpy arrays, numbers, or mark the parameter ml.constexpr)")


def constexpr_value(name: str, value):
    """The value a constexpr parameter is specialized on: numpy scalars as the Python
    numbers they hold (``np.int64(16)`` specializes as ``16``); arrays and unhashable
    values are a :class:`LaunchError` naming the parameter."""
    value = python_value(value.value if isinstance(value, constexpr) else value)
    if as_array(value) is not None:
        raise LaunchError(f"argument '{name}' is a constexpr parameter but got an array "
                          f"({type(value).__name__}); pass a number, a string or a dtype, or "
                          "drop the ml.constexpr annotation to pass the array at run time")
    try:
        hash(_frozen(value))
    except TypeError:
        raise LaunchError(f"argument '{name}' is a constexpr parameter but got a "
                          f"{type(value).__name__}, which cannot be a compile-time value "
                          "(pass a number, a string, a dtype or a tuple of them)") from None
    return value


def _frozen(v):
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v


def closure_key(fn, _seen=None) -> tuple:
    """What a kernel may read from the functions enclosing it (Python's closure cells),
    by value: each number, string, dtype or constexpr as (name, type, repr); each
    ``@jit`` function as its name, source hash and own closure key. It is part of the
    specialization, so a kernel made again with another value (a kernel factory, a test
    function's constant) never reuses the other's build. Empty for module-level kernels."""
    seen = _seen if _seen is not None else {id(fn)}
    out = []
    for name, cell in closure_cells(fn).items():
        try:
            v = cell.cell_contents
        except ValueError:          # not assigned yet: the kernel cannot read it either
            continue
        if getattr(v, "__mutile_jit__", False):
            if id(v.fn) in seen:
                continue
            seen.add(id(v.fn))
            out.append((name, "jit", v.fn.__qualname__, source_hash(v.fn),
                        closure_key(v.fn, seen)))
            continue
        v = python_value(v.value if isinstance(v, constexpr) else v)
        if isinstance(v, (bool, int, float, str, type(None), T.ScalarType, T.PointerType,
                          tuple)):
            out.append((name, type(v).__name__, repr(v)))
    return tuple(out)


def stored_params(module) -> set:
    """Indices of the kernel's pointer arguments that some ``store`` may write through.

    Pointers are traced back through addptr/splat/broadcast/reshape/select/hint and
    loop or branch results; a store whose pointer cannot be traced marks every pointer
    argument (nothing read-only may then be passed).
    """
    f = module.entry
    arg_index = {id(a): i for i, a in enumerate(f.args)}
    out: set = set()

    def sources(v, seen):
        if id(v) in seen:
            return set()
        seen.add(id(v))
        if id(v) in arg_index:
            return {arg_index[id(v)]}
        owner = v.owner
        if hasattr(owner, "opdef"):
            name = owner.name
            if name == "bitcast" and not owner.operands[0].type.scalar.is_ptr() and not (
                    hasattr(owner.operands[0].owner, "opdef")
                    and owner.operands[0].owner.name == "bitcast"):
                return set()    # made from an integer: an AddressTable member, no argument
            if name in ("addptr", "splat", "broadcast", "reshape", "expand_dims", "permute", "hint",
                        "bitcast"):
                return sources(owner.operands[0], seen)
            if name == "select":
                return sources(owner.operands[1], seen) | sources(owner.operands[2], seen)
            if name == "make_desc":
                return sources(owner.operands[0], seen)
            if name in ("for", "while", "if"):
                res = set()
                first = 3 if name == "for" else 0
                if name != "if":
                    res |= sources(owner.operands[first + v.index], seen)
                for r in owner.regions:
                    if r.ops and r.ops[-1].name == "yield" and len(r.ops[-1].operands) > v.index:
                        res |= sources(r.ops[-1].operands[v.index], seen)
                return res
            return None_all
        block = owner
        op = block.parent
        if op is not None and op.name == "for" and v.index > 0:
            res = sources(op.operands[3 + v.index - 1], seen)
            y = block.ops[-1] if block.ops else None
            if y is not None and y.name == "yield":
                res |= sources(y.operands[v.index - 1], seen)
            return res
        if op is not None and op.name == "while":
            return sources(op.operands[v.index], seen)
        return None_all

    None_all = set(range(len(f.args)))
    for op in f.walk():
        if op.name == "store":
            out |= sources(op.operands[0], set())
        elif op.name == "desc_store":
            out |= sources(op.operands[0], set())
    return {i for i in out if f.args[i].type.is_ptr()}
