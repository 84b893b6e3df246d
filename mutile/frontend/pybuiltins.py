"""Python's ``min`` and ``max`` inside a kernel, as Triton has them.

``min(a, b, ...)`` folds left to right: two compile-time numbers give a compile-time
number (of the type Triton's promotion gives: an ``int`` and a ``float`` meet as a
``float``; a NaN loses to a number and ``-0.0 < +0.0``, as ``ml.minimum`` computes), and
as soon as a tensor takes part the step is ``ml.minimum`` / ``ml.maximum`` (scalars and
tiles, with their broadcasting and promotion). ``min(seq)`` of a compile-time tuple
folds its elements. A single tile, keywords (``key=``, ``default=``), pointers and
non-numbers next to tensors are errors at the call.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..ir.semantics import float_minmax
from ..language import semantic as S
from ..language.core import constexpr, tensor


def _unwrap(v):
    return v.value if isinstance(v, constexpr) else v


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float))


def _static_pair(is_max: bool, a, b):
    """``min``/``max`` of two compile-time values."""
    if not (_is_number(a) and _is_number(b)):
        return (builtins.max if is_max else builtins.min)(a, b)   # strings, tuples: Python's
    if isinstance(a, float) or isinstance(b, float):
        return float(float_minmax(np.float64(a), np.float64(b), is_max))
    r = builtins.max(a, b) if is_max else builtins.min(a, b)
    both_bool = isinstance(a, bool) and isinstance(b, bool)
    return bool(r) if both_bool else int(r)


def python_minmax(gen, fn, args, kwargs, node):
    """``min(...)`` / ``max(...)`` called in a kernel (``fn`` is the Python builtin)."""
    is_max = fn is builtins.max
    name = fn.__name__
    if kwargs:
        gen.fail(node, f"{name}() in a kernel takes no keyword arguments "
                       f"(got {', '.join(sorted(kwargs))})")
    values = [_unwrap(a) for a in args]
    if len(values) == 1:
        only = values[0]
        if isinstance(only, tensor) or hasattr(only, "__mutile_desc__"):
            gen.fail(node, f"{name}() of one tile: use ml.{name}(x, axis) to reduce a tile, "
                           f"or ml.{name}imum(x, y) for two")
        if not isinstance(only, (tuple, list)):
            gen.fail(node, f"{name}() of one {type(only).__name__} value: pass two or more "
                           "values, or a tuple of them")
        values = [_unwrap(v) for v in only]
    if not values:
        gen.fail(node, f"{name}() needs at least one value")
    acc = values[0]
    for v in values[1:]:
        if isinstance(acc, tensor) or isinstance(v, tensor):
            for x in (acc, v):
                if not isinstance(x, tensor) and not _is_number(x):
                    gen.fail(node, f"{name}() cannot combine a tensor with the compile-time "
                                   f"value {x!r} ({type(x).__name__})")
            acc = S.minmax("max" if is_max else "min", acc, v, gen.builder)
        else:
            try:
                acc = _static_pair(is_max, acc, v)
            except TypeError as e:
                gen.fail(node, f"{name}() of compile-time values: {e}")
    return acc
