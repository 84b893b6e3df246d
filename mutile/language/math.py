"""``ml.math``: the elementwise math builtins under Triton's ``tl.math`` names."""
from .standard import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2, rsqrt,
                       sin, sqrt, sqrt_rn, tanh, umulhi)

__all__ = ["abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log",
           "log2", "rsqrt", "sin", "sqrt", "sqrt_rn", "tanh", "umulhi"]
