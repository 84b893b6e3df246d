"""The frontend's entry point: a ``@jit`` function plus a specialization -> tile IR.

It owns what spans several functions: nested ``@jit`` calls (one specialized callee
function each, called with ``call`` and inlined by the ``inline`` pass), the globals a
kernel reads (recorded for the cache key and re-checked at launch) and the variables it
reads from enclosing functions (its closure: compile-time values, part of the kernel's
specialization, see :func:`mutile.runtime.specialize.closure_key`), and the calls that
need the compiler itself (``static_assert``, ``static_print``, ``print``, ``range``).
"""
from __future__ import annotations

import builtins
import inspect
import types as pytypes

import numpy as np

from ..errors import CompilationError, Loc
from ..ir import types as T
from ..ir.core import Block, Builder, Func, Module
from ..ir.ops import OpRuleError
from ..language import core as lc
from ..language.core import constexpr, tensor
from .codegen import CodeGenerator, is_jit, is_static, lc_tiles, unwrap
from .pybuiltins import python_minmax
from .source import closure_cells, function_source

_ALLOWED_GLOBAL_TYPES = (int, float, bool, str, type(None), T.ScalarType, T.PointerType,
                         constexpr, pytypes.ModuleType, pytypes.FunctionType,
                         pytypes.BuiltinFunctionType, type, np.generic)
# values a kernel depends on by value: recorded (as they are) for the cache's re-check
_VALUE_TYPES = (int, float, bool, str, constexpr, T.ScalarType, np.generic)


class KernelCompiler:
    """Compiles one kernel specialization; collects callees and globals it read."""

    def __init__(self):
        self.module = Module()
        self.globals_read: dict = {}   # (file, name) -> value it had
        self.callees: dict = {}        # specialization key -> Func
        self.result_wrappers: dict = {}  # callee name -> per result, the descriptor it returns
        self.jit_functions: list = []  # every @jit function reached (for cache keys)...
        self.in_closure_key: set = set()  # ...but those the specialization's closure key holds
        self.active: list = []
        self.unrolled = 1              # loop bodies the enclosing unrolled loops emit

    # ------------------------------------------------------------ kernels
    def compile_kernel(self, jitfn, bindings: dict) -> Module:
        """``bindings``: parameter name -> :class:`RuntimeArg` or a compile-time value."""
        src = function_source(jitfn.fn)
        self.jit_functions.append(jitfn)
        self.in_closure_key.add(jitfn)
        params = list(inspect.signature(jitfn.fn).parameters)
        runtime = [p for p in params if _is_runtime(bindings[p])]
        types, names = [], []
        for p in runtime:                   # a descriptor arrives as base, dims, strides
            t = bindings[p].type
            ts = T.desc_arg_types(t) if isinstance(t, T.DescType) else [t]
            types += ts
            names += [p] if len(ts) == 1 else [f"{p}.base"] + \
                [f"{p}.{w}{i}" for w in ("shape", "stride") for i in range(len(t.block))]
        func = Func(src.name, types, [], names, src.loc(src.tree))
        self.module.add(func)
        self.module.kernel = func.name
        scope, args = {}, iter(func.args)
        for p in params:
            v = bindings[p]
            if not _is_runtime(v):
                scope[p] = v.type if isinstance(v, RuntimeArg) else unwrap(v)
            elif isinstance(v.type, T.DescType):
                parts = [next(args) for _ in T.desc_arg_types(v.type)]
                h = Builder(func.body, func.loc)("make_desc", *parts, block=list(v.type.block))
                scope[p] = lc_tiles().tensor_descriptor(h, list(v.type.block), v.type.element)
            else:
                scope[p] = tensor(next(args))
        self.active.append(jitfn)
        CodeGenerator(src, self.module, func, scope, self, True,
                      closure_cells(jitfn.fn)).emit_function()
        self.active.pop()
        return self.module

    # ------------------------------------------------------------ nested @jit calls
    def call_jit(self, gen: CodeGenerator, jitfn, args, kwargs, node):
        if jitfn in self.active:
            gen.fail(node, f"recursive call of @jit function {jitfn.fn.__name__} is not supported")
        sig = inspect.signature(jitfn.fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            gen.fail(node, f"{jitfn.fn.__name__}(): {e}")
        bound.apply_defaults()
        specs, runtime_vals = [], []
        for name, v in bound.arguments.items():
            v = unwrap(v)
            if isinstance(v, tensor):
                specs.append((name, v.type))
                runtime_vals.append(v)
            elif hasattr(v, "__mutile_desc__"):         # descriptors, shared buffers, barriers
                specs.append((name, v.handle.type))
                runtime_vals.append(v)
            else:
                specs.append((name, ("const", _freeze(v))))
        key = (id(jitfn), tuple(specs))
        func = self.callees.get(key)
        if func is None:
            func = self._make_callee(jitfn, bound, specs, runtime_vals, gen, node)
            self.callees[key] = func
        op = gen.builder.create("call", [v.handle for v in runtime_vals], func.result_types,
                                {"callee": func.name})
        wrappers = self.result_wrappers.get(func.name) or [None] * len(op.results)
        results = [w._with_handle(r) if w is not None else tensor(r)
                   for w, r in zip(wrappers, op.results)]
        if not results:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def _make_callee(self, jitfn, bound, specs, runtime_vals, gen, node):
        src = function_source(jitfn.fn)
        if jitfn not in self.jit_functions and jitfn not in self.in_closure_key:
            self.jit_functions.append(jitfn)
        base = src.name
        name, n = base, 1
        while name in self.module.funcs:
            n += 1
            name = f"{base}_{n}"
        runtime = [s[0] for s in specs if isinstance(s[1], T.Type)]
        func = Func(name, [v.handle.type for v in runtime_vals], [], runtime, src.loc(src.tree))
        self.module.add(func)
        scope = {}
        for (pname, spec) in specs:
            if isinstance(spec, T.Type):
                arg = func.args[runtime.index(pname)]
                orig = unwrap(bound.arguments[pname])
                scope[pname] = orig._with_handle(arg) if hasattr(orig, "_with_handle") \
                    else tensor(arg)
            else:
                scope[pname] = unwrap(bound.arguments[pname])
        self.active.append(jitfn)
        try:
            callee = CodeGenerator(src, self.module, func, scope, self, False,
                                   closure_cells(jitfn.fn))
            callee.emit_function()
        finally:
            self.active.pop()
        self.result_wrappers[func.name] = callee.result_wrappers
        return func

    # ------------------------------------------------------------ globals
    def read_global(self, src, name, value, loc: Loc):
        value = self._admit(f"global '{name}'", value, loc)
        if isinstance(value, _VALUE_TYPES + (tuple,)) and not isinstance(value, type):
            self.globals_read[(src.file, src.globals.get("__name__", ""), name)] = \
                _freeze(unwrap(value))
        return lc.python_value(unwrap(value))

    def read_closure(self, name, cell, loc: Loc):
        """``name`` read from an enclosing function: a compile-time value, as a global.
        The specialization holds the closure's values (and the source and closure of its
        ``@jit`` functions, transitively), so they need no dependency record."""
        try:
            value = cell.cell_contents
        except ValueError:
            raise CompilationError(f"'{name}' is not defined yet: the enclosing function "
                                   "assigns it after the kernel is compiled", loc) from None
        if is_jit(value) and self.active and self.active[-1] in self.in_closure_key:
            self.in_closure_key.add(value)
        return lc.python_value(unwrap(self._admit(f"closure variable '{name}'", value, loc)))

    def _admit(self, what, value, loc: Loc):
        """``value`` if a kernel may read it from outside (``what``: where it lives)."""
        if is_jit(value) or lc.is_builtin(value) or isinstance(value, _ALLOWED_GLOBAL_TYPES):
            return value
        if isinstance(value, tuple) and is_static(value):
            return value
        raise CompilationError(
            f"{what} ({type(value).__name__}) cannot be used in a kernel: kernels read only "
            "constexpr / number / string / dtype values, modules and @jit functions from "
            "outside", loc)

    def read_module_attr(self, module, name, value, loc: Loc):
        """``module.name`` read in a kernel: numbers, strings, constexprs and dtypes of
        user modules are recorded as dependencies, like globals."""
        if module.__name__.split(".")[0] == "mutile":
            return value
        if isinstance(value, _VALUE_TYPES) and not isinstance(value, type):
            self.globals_read[("", module.__name__, name)] = _freeze(unwrap(value))
        return lc.python_value(unwrap(value))

    # ------------------------------------------------------------ special calls
    def special_call(self, gen, fn, args, kwargs, node):
        from .. import language as ml
        from ..language import pinghu as ph
        if fn is ph.warp_specialize:
            return self.warp_specialize(gen, args, kwargs, node)
        if fn is ml.static_assert:
            cond = args[0] if args else kwargs.get("cond")
            msg = args[1] if len(args) > 1 else kwargs.get("msg", "")
            if not is_static(cond):
                gen.fail(node, "static_assert needs a compile-time condition")
            if not unwrap(cond):
                gen.fail(node, f"static_assert failed: {unwrap(msg)}")
            return None
        if fn is ml.static_print:
            if not gen.dry_run:
                print(*[a.type if isinstance(a, tensor) else unwrap(a) for a in args])
            return None
        if fn is builtins.print:
            prefix = unwrap(args[0]) if args and isinstance(unwrap(args[0]), str) else ""
            rest = args[1:] if prefix or (args and isinstance(unwrap(args[0]), str)) else args
            return gen.call_builtin(ml.device_print, [prefix] + list(rest), {}, node)
        if fn is builtins.range:       # a kernel's range() is ml.range (keywords included)
            try:
                return ml.range(*[unwrap(a) for a in args],
                                **{k: unwrap(v) for k, v in kwargs.items()})
            except TypeError as e:
                gen.fail(node, f"range(): {e}")
        if fn in (builtins.min, builtins.max):
            return python_minmax(gen, fn, args, kwargs, node)
        if fn is builtins.len and args and isinstance(unwrap(args[0]), tensor):
            return unwrap(args[0]).shape[0]
        if fn is builtins.isinstance:
            return isinstance(unwrap(args[0]), unwrap(args[1]))
        return NotImplemented


    def warp_specialize(self, gen, args, kwargs, node):
        """``ph.warp_specialize([(fn, args, warps), ...])``: one region per partition,
        each a call of its ``@jit`` function (inlined later)."""
        parts = unwrap(args[0]) if args else unwrap(kwargs.get("partitions"))
        if len(args) + len(kwargs) != 1 or not isinstance(parts, (list, tuple)) or len(parts) < 2:
            gen.fail(node, "ph.warp_specialize takes one list of two or more partitions "
                           "(function, arguments, warps)")
        regions, warps = [], []
        for i, part in enumerate(parts):
            part = unwrap(part)
            if not (isinstance(part, (list, tuple)) and len(part) == 3 and is_jit(unwrap(part[0]))
                    and isinstance(unwrap(part[1]), (list, tuple))
                    and isinstance(unwrap(part[2]), int)):
                gen.fail(node, f"partition {i} of ph.warp_specialize must be (a @jit function, "
                               f"a tuple of arguments, a warp count)")
            fn, fargs, w = (unwrap(x) for x in part)
            block = Block()

            def body(fn=fn, fargs=fargs):
                res = self.call_jit(gen, fn, list(fargs), {}, node)
                if res is not None:
                    gen.fail(node, f"partition {fn.fn.__name__} must not return a value")
                gen.builder.create("yield", [])
            gen.in_block(block, body)
            regions.append(block)
            warps.append(w)
        op = gen.builder.create("ph.warp_specialize", [], [], {"warps": warps}, regions)
        try:
            op.opdef.check(op)
        except OpRuleError as e:
            gen.fail(node, f"warp_specialize: {e}")
        return None


class RuntimeArg:
    """A kernel parameter passed at launch, of IR type ``type``; or, when ``type`` is not
    an IR type, the compile-time value the argument specializes as (None: the argument
    was None, which the kernel sees as the value None, as in Triton)."""

    def __init__(self, type: T.Type):
        self.type = type

    def __repr__(self):
        return f"RuntimeArg({self.type})"


def _is_runtime(v) -> bool:
    return isinstance(v, RuntimeArg) and isinstance(v.type, T.Type)


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if is_jit(v):
        return ("jit", v.fn.__module__, v.fn.__qualname__)
    return v


def compile_kernel(jitfn, bindings: dict):
    """Compile ``jitfn`` specialized by ``bindings``; returns (module, compiler)."""
    c = KernelCompiler()
    c.compile_kernel(jitfn, bindings)
    return c.module, c


__all__ = ["compile_kernel", "KernelCompiler", "RuntimeArg"]
