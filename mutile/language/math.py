"""``ml.math``: the elementwise math builtins under Triton's ``tl.math`` names.

Triton 3's ``tl.math`` functions are mutile's own builtins. Before Triton 3.0, ``tl.math``
*was* libdevice, and published kernels still call ``tl.math.fast_dividef``,
``tl.math.fast_expf``, ``tl.math.pow``, ``tl.math.isnan``...: every libdevice name that is
not one of the above is here too, as :mod:`mutile.language.extra.libdevice` defines it.
"""
from .extra import libdevice as _libdevice
from .standard import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2, rsqrt,
                       sin, sqrt, sqrt_rn, tanh, umulhi)

_OWN = ["abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log",
        "log2", "rsqrt", "sin", "sqrt", "sqrt_rn", "tanh", "umulhi"]
_FROM_LIBDEVICE = [n for n in _libdevice.__all__ if n not in _OWN]
globals().update({n: getattr(_libdevice, n) for n in _FROM_LIBDEVICE})

__all__ = _OWN + _FROM_LIBDEVICE
