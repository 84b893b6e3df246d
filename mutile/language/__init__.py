"""``mutile.language`` (``ml``): the tile DSL, with ``triton.language``'s names.

Only usable inside ``@mutile.jit`` functions. Pinghu's asynchronous engines (TME,
AsyncBarriers, SQMMA, warp specialization) are the explicit layer
``mutile.language.pinghu`` (``ph``).
"""
from __future__ import annotations

from .core import (DTYPES, bfloat16, builtin, constexpr, dtype, float8_e4m3fn, float8_e5m2,
                   float8e4b8, float8e4nv, float8e5, float8e5b16, float16, float32, float64,
                   int1, int8, int16, int32, int64, pointer_type, tensor, uint8, uint16, uint32,
                   uint64)
from .standard import (PropagateNan, abs, arange, broadcast, broadcast_to, cast, cdiv, ceil,
                       clamp, cos, div_rn, erf, exp, exp2, expand_dims, fdiv, floor, fma, full,
                       load, log, log2, maximum, minimum, num_programs, permute, program_id,
                       reshape, rsqrt, sigmoid, sin, sqrt, sqrt_rn, store, tanh, trans, umulhi,
                       view, where, zeros, zeros_like)
from .tiles import (argmax, argmin, assume, cumprod, cumsum, device_assert, device_print, dot,
                    make_tensor_descriptor, max, max_constancy, max_contiguous, min, multiple_of,
                    sum, tensor_descriptor, xor_sum)
from . import math  # noqa: E402  (ml.math.exp etc., as in Triton)
from .random import (pair_uniform_to_normal, philox, philox_impl, rand, rand4x, randint,  # noqa: E402
                     randint4x, randn, randn4x, uint_to_uniform_float)
from . import random  # noqa: E402  (ml.random.philox etc., as in Triton)
from . import extra  # noqa: E402  (ml.extra.libdevice, ml.extra.cuda/musa.libdevice)
from .atomic import (atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min,  # noqa: E402
                     atomic_or, atomic_xchg, atomic_xor)
from .combine import associative_scan, map_elementwise, reduce  # noqa: E402
from .mx import dot_scaled  # noqa: E402
from .shapes import (cat, gather, interleave, join, ravel, split, squeeze,  # noqa: E402
                     swizzle2d, unsqueeze)
from .sorting import bitonic_merge, flip, histogram, sort, topk  # noqa: E402
from .tiles import debug_barrier, inline_asm_elementwise, reduce_or, softmax  # noqa: E402
from .compat import (TRITON_MAX_TENSOR_NUMEL, add, advance, async_task, block_type,  # noqa: E402
                     const, constexpr_function, float8e4b15,
                     load_tensor_descriptor, make_block_ptr, pi32_t, slice,
                     store_tensor_descriptor, tuple, void)

bool_ = int1


class range:
    """``for i in ml.range(start, end, step, num_stages=None, loop_unroll_factor=None,
    warp_specialize=False)``: a loop the compiler keeps as a loop (and may pipeline)."""

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 warp_specialize=False, disallow_acc_multi_buffer=False, flatten=False):
        if arg2 is None:
            arg1, arg2 = 0, arg1
        self.start, self.end, self.step = arg1, arg2, 1 if step is None else step
        self.num_stages, self.unroll = num_stages, loop_unroll_factor
        self.warp_specialize = warp_specialize


class static_range:
    """``for i in ml.static_range(start, end, step)``: unrolled at compile time; bounds must
    be constexpr, and ``i`` is a constexpr in the body."""

    def __init__(self, arg1, arg2=None, step=None):
        if arg2 is None:
            arg1, arg2 = 0, arg1
        self.start, self.end, self.step = arg1, arg2, 1 if step is None else step


def static_assert(cond, msg=""):
    """Fail compilation with ``msg`` unless the constexpr ``cond`` holds."""
    raise RuntimeError("static_assert can only be used inside @mutile.jit")


def static_print(*values, sep=" ", end="\n"):
    """Print constexpr values (and tensor types) once, at compile time."""
    raise RuntimeError("static_print can only be used inside @mutile.jit")


# Triton's tensor methods -------------------------------------------------------------
def _method(fn):
    def m(self, *args, _builder=None, **kwargs):
        return fn(self, *args, _builder=_builder, **kwargs)
    m.__name__ = fn.__name__
    m.__doc__ = fn.__doc__
    m.__mutile_calls_jit__ = getattr(fn, "__mutile_calls_jit__", False)
    return builtin(m)


for _f in (cast, reshape, view, permute, trans, broadcast_to, expand_dims, sum, max, min, argmax,
           argmin, cumsum, cumprod, xor_sum, exp, exp2, log, log2, sqrt, sin, cos, abs, sigmoid):
    setattr(tensor, _f.__name__, _method(_f))
tensor.to = _method(cast)
for _f in (atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min, atomic_or, atomic_xchg,
           atomic_xor):
    setattr(tensor, _f.__name__, _method(_f))
for _f in (reduce, associative_scan, histogram, gather, split, flip, ravel, softmax, reduce_or):
    setattr(tensor, _f.__name__, _method(_f))
