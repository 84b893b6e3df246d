"""The tile IR: types, ops (one table), builder, printer, parser, verifier."""
from . import types
from .core import Block, Builder, Func, Module, Op, Value
from .ops import OPS, OpDef
from . import ops_pinghu  # noqa: F401  (the Pinghu stage ops enter OPS after the core ops)
from . import equality  # noqa: F401  (enters MODULE_HOOKS)
from .parser import parse
from .printer import print_module
from .verifier import verify

__all__ = ["types", "Block", "Builder", "Func", "Module", "Op", "Value", "OPS", "OpDef",
           "parse", "print_module", "verify"]
