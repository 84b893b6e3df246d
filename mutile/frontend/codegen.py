"""Python AST -> tile IR: one ``visit_<Node>`` per accepted construct.

Values in scope are :class:`~mutile.language.core.tensor` objects (runtime values) or
plain Python objects (compile-time values: numbers, strings, dtypes, functions).
Anything else raises :class:`CompilationError` at the construct's location. Control
flow lives in :mod:`.control`; this file holds expressions and simple statements.
"""
from __future__ import annotations

import ast
import builtins
import operator
import types

from ..errors import CompilationError, Loc
from ..ir import types as T
from ..ir.core import Builder, Func, Module
from ..ir.ops import OpRuleError
from ..language import core as lc
from ..language import semantic as S
from ..language.core import constexpr, tensor
from .control import ControlFlowMixin, always_returns, may_return
from .source import FunctionSource

_PY_BUILTINS = {"range", "len", "min", "max", "int", "float", "bool", "isinstance", "tuple",
                "list", "print", "abs", "getattr", "hasattr", "enumerate", "zip", "str", "type",
                "divmod", "pow", "round", "all", "any", "sorted", "reversed", "True", "False",
                "None"}

_BINOPS = {ast.Add: ("add", operator.add), ast.Sub: ("sub", operator.sub),
           ast.Mult: ("mul", operator.mul), ast.Div: ("truediv", operator.truediv),
           ast.FloorDiv: ("floordiv", operator.floordiv), ast.Mod: ("mod", operator.mod),
           ast.BitAnd: ("and", operator.and_), ast.BitOr: ("or", operator.or_),
           ast.BitXor: ("xor", operator.xor), ast.LShift: ("shl", operator.lshift),
           ast.RShift: ("shr", operator.rshift), ast.Pow: ("pow", operator.pow)}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
            ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
            ast.RShift: ">>", ast.Pow: "**"}
# what a Triton kernel may hold as a constexpr (``x.value`` of one is ``x``)
_CONSTEXPR_VALUES = (bool, int, float, str, type(None), tuple, list, T.Type)
_CMPS = {ast.Eq: ("eq", operator.eq), ast.NotEq: ("ne", operator.ne), ast.Lt: ("lt", operator.lt),
         ast.LtE: ("le", operator.le), ast.Gt: ("gt", operator.gt), ast.GtE: ("ge", operator.ge)}


def binary(op: str, x, y, b: Builder):
    """Apply DSL binary operator ``op`` to tensors / Python numbers."""
    if op in ("add", "sub", "mul", "truediv", "floordiv", "mod"):
        return {"add": S.add, "sub": S.sub, "mul": S.mul, "truediv": S.truediv,
                "floordiv": S.floordiv, "mod": S.mod}[op](x, y, b)
    if op in ("and", "or", "xor", "shl", "shr"):
        return S.bitwise(op, x, y, b)
    if op == "pow":
        S.no_pointers("**", x, y)
        x, y = S._prepare(x, y, b)
        if not x.dtype.is_floating():
            S.fail("** on tensors needs floating-point operands")
        return tensor(b("pow", x.handle, y.handle))
    raise AssertionError(op)


def is_jit(fn) -> bool:
    return getattr(fn, "__mutile_jit__", False)


def is_static(v) -> bool:
    """True for a compile-time value (anything that is not a runtime tensor)."""
    v = v.value if isinstance(v, constexpr) else v
    if isinstance(v, (list, tuple)):
        return all(is_static(x) for x in v)
    return not isinstance(v, (tensor, lc.tensor)) and not hasattr(v, "__mutile_desc__")


def unwrap(v):
    return v.value if isinstance(v, constexpr) else v


def _is_handle_object(v) -> bool:
    """A descriptor, shared buffer or barrier: a Python object around one IR value."""
    return hasattr(unwrap(v), "__mutile_desc__")


def _identity(v):
    """What ``is`` compares: a tensor's SSA value (``x is None`` is False for a tensor,
    ``x is x`` True), any other value itself."""
    v = unwrap(v)
    return v.handle if isinstance(v, tensor) or _is_handle_object(v) else v


class ReturnSignal:
    """Marks that the statements of a block ended in ``return`` (``node``: that
    ``return`` statement, where errors about the returned values point)."""

    def __init__(self, values, node=None):
        self.values, self.node = values, node


class CodeGenerator(ControlFlowMixin, ast.NodeVisitor):
    """Emits the body of one function (kernel or callee) into ``func``."""

    def __init__(self, src: FunctionSource, module: Module, func: Func, scope: dict,
                 compiler, is_kernel: bool, closure: dict | None = None):
        self.src, self.module, self.func, self.compiler = src, module, func, compiler
        self.scope = dict(scope)
        self.params = dict(scope)           # the parameters' values, for error notes
        self.closure = closure or {}        # enclosing functions' variables: name -> cell
        self.builder = Builder(func.body, src.loc(src.tree))
        self.is_kernel = is_kernel
        self.returned: ReturnSignal | None = None
        self.loop_depth = 0
        self.dry_run = 0
        self.result_wrappers: list = []     # see emit_function

    # ------------------------------------------------------------ driver
    def visit(self, node):
        prev = self.builder.loc
        if hasattr(node, "lineno"):
            self.builder.loc = self.src.loc(node)
        try:
            return super().visit(node)
        except CompilationError as e:
            if e.loc is None:
                raise CompilationError(e.msg, self.builder.loc) from None
            raise
        except (S.SemanticError, lc.CalledOutsideJit, TypeError, ValueError, IndexError,
                KeyError, ZeroDivisionError, AttributeError, OverflowError, AssertionError,
                OpRuleError) as e:
            msg = str(e) or type(e).__name__
            raise CompilationError(msg + self.parameter_notes(node, msg), self.builder.loc) \
                from None
        finally:
            self.builder.loc = prev

    def parameter_notes(self, node, msg: str) -> str:
        """What the parameters named in the failing construct ``node`` hold, where that
        explains the error: a constexpr parameter holding a string or None (``BLOCK="16"``),
        a pointer parameter that an error about pointers names (an array was passed where
        the kernel wants a scalar)."""
        notes = []
        for name in dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name)):
            if name not in self.params or self.scope.get(name) is not self.params[name]:
                continue
            v = self.params[name]
            if isinstance(v, tensor):
                if v.dtype.is_ptr() and f"'{name}'" in msg and "pointer" in msg:
                    notes.append(f"'{name}' is a pointer ({v.type}): an array was passed for "
                                 "it; pass a number where the kernel uses a scalar")
            elif v is None:
                notes.append(f"'{name}' is None (None was passed for it, and the kernel is "
                             f"compiled for that): guard its uses with `if {name} is not "
                             "None:`")
            elif isinstance(v, str):
                notes.append(f"'{name}' is the compile-time parameter {name}={v!r} (a "
                             f"{type(v).__name__}, not a number)")
        return "".join(f"; {n}" for n in notes)

    def generic_visit(self, node):
        what = type(node).__name__
        raise CompilationError(f"unsupported Python construct in a kernel: {what}",
                               self.src.loc(node))

    def fail(self, node, msg):
        raise CompilationError(msg, self.src.loc(node))

    def emit_function(self):
        self.visit_stmts(self.src.tree.body)
        rets = self.returned.values if self.returned else []
        if self.is_kernel and rets:
            self.fail(self.returned.node or self.src.tree, "a kernel cannot return a value")
        # a descriptor (or shared buffer, barrier) is returned as its handle; the caller
        # wraps the call's result like the returned object (``result_wrappers``)
        self.result_wrappers = [unwrap(v) if _is_handle_object(v) else None for v in rets]
        handles = [unwrap(v).handle if _is_handle_object(v) else
                   S.to_tensor(v, self.builder).handle for v in rets]
        self.func.result_types = [h.type for h in handles]
        self.builder.create("return", handles, loc=self.src.loc(self.src.tree))

    # ------------------------------------------------------------ statements
    def visit_stmts(self, stmts):
        """Visit a statement list; an ``if`` whose body returns takes the rest as else."""
        for i, st in enumerate(stmts):
            if self.returned is not None:
                self.fail(st, "unreachable code after return")
            rest = stmts[i + 1:]
            if isinstance(st, ast.If) and rest and (may_return(st.body) or may_return(st.orelse)):
                body = st.body if always_returns(st.body) else st.body + rest
                orelse = st.orelse if always_returns(st.orelse) else st.orelse + rest
                rewritten = ast.copy_location(ast.If(test=st.test, body=body, orelse=orelse), st)
                self.visit(rewritten)
                return
            self.visit(st)

    def visit_Expr(self, node):
        self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node):
        if node.value is None:
            self.fail(node, "a declaration without a value is not supported")
        value = self.visit(node.value)
        ann = node.annotation
        is_constexpr = (isinstance(ann, ast.Attribute) and ann.attr == "constexpr") or \
            (isinstance(ann, ast.Name) and ann.id == "constexpr")
        if is_constexpr and not is_static(value):
            self.fail(node, "a constexpr variable needs a compile-time value")
        self.assign(node.target, value)

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            self.fail(node, "augmented assignment needs a plain variable name")
        cur = self.lookup(node.target.id, node.target)
        value = self.apply_binop(node.op, cur, self.visit(node.value), node)
        self.assign(node.target, value)

    def assign(self, target, value):
        if isinstance(target, ast.Name):
            if isinstance(value, constexpr):
                value = value.value
            if isinstance(value, tensor) and not value.handle.hint:
                value.handle.hint = target.id
            self.scope[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            value = unwrap(value)
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                self.fail(target, f"cannot unpack {value!r} into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v)
            return
        self.fail(target, "only names and tuples of names can be assigned in a kernel "
                          "(store to memory with ml.store)")

    def visit_Return(self, node):
        if self.loop_depth:
            self.fail(node, "return inside a loop is not supported")
        if node.value is None:
            values = []
        else:
            v = self.visit(node.value)
            values = list(unwrap(v)) if isinstance(unwrap(v), tuple) else [v]
        self.returned = ReturnSignal(values, node)

    def visit_Assert(self, node):
        cond = self.visit(node.test)
        msg = unwrap(self.visit(node.msg)) if node.msg is not None else ""
        if is_static(cond):
            if not unwrap(cond):
                self.fail(node, f"static assertion failed: {msg}")
            return
        self.call_builtin(lc_tiles().device_assert, [cond], {"msg": str(msg)}, node)

    def visit_Global(self, node):
        self.fail(node, "global statements are not supported in a kernel")

    visit_Nonlocal = visit_Global

    def visit_Break(self, node):
        self.fail(node, "break is not supported in a kernel loop")

    def visit_Continue(self, node):
        self.fail(node, "continue is not supported in a kernel loop")

    def visit_Try(self, node):
        self.fail(node, "try/except is not supported in a kernel")

    visit_TryStar = visit_Try

    def visit_With(self, node):
        self.fail(node, "with statements are not supported in a kernel")

    def visit_Lambda(self, node):
        self.fail(node, "lambda is not supported in a kernel; define a @mutile.jit function")

    def visit_FunctionDef(self, node):
        self.fail(node, "nested function definitions are not supported; define a "
                        "@mutile.jit function at module level")

    def visit_Delete(self, node):
        self.fail(node, "del is not supported in a kernel")

    # ------------------------------------------------------------ expressions
    def visit_Constant(self, node):
        return node.value

    def visit_Name(self, node):
        return self.lookup(node.id, node)

    def lookup(self, name, node):
        if name in self.scope:
            return self.scope[name]
        if name in self.closure:
            return self.compiler.read_closure(name, self.closure[name], self.src.loc(node))
        g = self.src.globals
        if name in g:
            return self.compiler.read_global(self.src, name, g[name], self.src.loc(node))
        if name in _PY_BUILTINS and hasattr(builtins, name):
            return getattr(builtins, name)
        self.fail(node, f"name '{name}' is not defined")

    def visit_Tuple(self, node):
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node):
        return [self.visit(e) for e in node.elts]

    def visit_JoinedStr(self, node):
        parts = []
        for v in node.values:
            x = self.visit(v.value) if isinstance(v, ast.FormattedValue) else v.value
            if not is_static(x):
                self.fail(node, "f-strings can only format compile-time values")
            parts.append(str(unwrap(x)))
        return "".join(parts)

    def visit_BinOp(self, node):
        return self.apply_binop(node.op, self.visit(node.left), self.visit(node.right), node)

    def apply_binop(self, op, x, y, node):
        if type(op) not in _BINOPS:
            self.fail(node, f"operator {type(op).__name__} is not supported")
        name, pyop = _BINOPS[type(op)]
        if is_static(x) and is_static(y):
            try:
                return pyop(unwrap(x), unwrap(y))
            except TypeError:
                a, c = unwrap(x), unwrap(y)
                S.fail(f"operator {_SYMBOLS[type(op)]} cannot combine the compile-time values "
                       f"{a!r} ({type(a).__name__}) and {c!r} ({type(c).__name__})")
        return binary(name, unwrap(x), unwrap(y), self.builder)

    def visit_UnaryOp(self, node):
        x = self.visit(node.operand)
        if is_static(x):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                    ast.Invert: operator.invert}[type(node.op)](unwrap(x))
        b = self.builder
        if isinstance(node.op, ast.USub):
            return S.neg(x, b)
        if isinstance(node.op, ast.UAdd):
            return x
        if isinstance(node.op, ast.Not):
            return S.logical_not(x, b)
        return S.invert(x, b)

    def visit_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for v in node.values[1:]:
            if is_static(result):
                if bool(unwrap(result)) != is_and:
                    return result
                result = self.visit(v)
                continue
            rhs = self.visit(v)
            b = self.builder
            result = S.bitwise("and" if is_and else "or", S.as_bool(result, b),
                               S.as_bool(rhs if not is_static(rhs) else bool(unwrap(rhs)), b), b)
        return result

    def visit_Compare(self, node):
        left = self.visit(node.left)
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.visit(comp)
            if type(op) in (ast.Is, ast.IsNot):     # compile-time, tensors included
                r = (_identity(left) is _identity(right)) == isinstance(op, ast.Is)
            elif type(op) in (ast.In, ast.NotIn):
                if not (is_static(left) and is_static(right)):
                    self.fail(node, "'in' compares compile-time values only")
                r = (unwrap(left) in unwrap(right)) == isinstance(op, ast.In)
            else:
                pred, pyop = _CMPS[type(op)]
                if is_static(left) and is_static(right):
                    r = pyop(unwrap(left), unwrap(right))
                else:
                    r = S.compare(pred, unwrap(left), unwrap(right), self.builder)
            if result is None:
                result = r
            elif is_static(result) and is_static(r):
                result = result and r
            else:
                result = S.bitwise("and", S.as_bool(result, self.builder),
                                   S.as_bool(r, self.builder), self.builder)
            left = right
        return result

    def visit_Attribute(self, node):
        base = self.visit(node.value)
        if isinstance(base, tensor) and node.attr == "T":
            return self.call_builtin(lc_std().trans, [base], {}, node)
        obj = unwrap(base)
        if node.attr == "value" and isinstance(obj, _CONSTEXPR_VALUES) and \
                not hasattr(obj, "value"):
            return obj          # a compile-time value is its own constexpr: BLOCK.value
        if not hasattr(obj, node.attr):
            what = f"{obj.type}" if isinstance(obj, tensor) else type(obj).__name__
            self.fail(node, f"'{what}' has no attribute '{node.attr}'")
        value = getattr(obj, node.attr)
        if isinstance(obj, types.ModuleType):
            return self.compiler.read_module_attr(obj, node.attr, value, self.src.loc(node))
        return value

    def visit_Subscript(self, node):
        base = self.visit(node.value)
        idx = self.visit(node.slice)
        if hasattr(unwrap(base), "__mutile_getitem__"):     # shared buffers, barriers
            return unwrap(base).__mutile_getitem__(unwrap(idx), self.builder)
        if not isinstance(unwrap(base), tensor):
            if not is_static(idx):
                self.fail(node, "a compile-time sequence needs a compile-time index")
            return unwrap(base)[unwrap(idx)]
        return self.index_tensor(unwrap(base), idx, node)

    def visit_Slice(self, node):
        parts = [None if p is None else self.visit(p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def index_tensor(self, x: tensor, idx, node):
        idx = idx if isinstance(idx, tuple) else (idx,)
        axis, expand = 0, []
        for i in idx:
            if i is None:
                expand.append(axis)
                axis += 1
            elif isinstance(i, slice) and i == slice(None, None, None):
                axis += 1
            else:
                self.fail(node, "tiles can only be indexed with ':' and None (x[:, None])")
        if axis - len(expand) != len(x.shape):
            self.fail(node, f"index has {axis - len(expand)} ':' entries but the tile has "
                            f"{len(x.shape)} dims")
        for ax in expand:
            x = tensor(self.builder("expand_dims", x.handle, axis=ax))
        return x

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if is_static(cond):
            return self.visit(node.body if unwrap(cond) else node.orelse)
        return self.if_expression(node, cond)

    def visit_keyword(self, node):
        return node.arg, self.visit(node.value)

    def visit_Starred(self, node):
        self.fail(node, "*args is not supported in a kernel call")

    def visit_Call(self, node):
        fn = unwrap(self.visit(node.func))
        args = [self.visit(a) for a in node.args]
        kwargs = dict(self.visit(k) for k in node.keywords)
        if is_jit(fn):
            return self.compiler.call_jit(self, fn, args, kwargs, node)
        special = self.compiler.special_call(self, fn, args, kwargs, node)
        if special is not NotImplemented:
            return special
        if lc.is_builtin(fn) or lc.is_builtin(getattr(fn, "__func__", None)):
            return self.call_builtin(fn, args, kwargs, node)
        if isinstance(fn, type) and issubclass(fn, (lc_ml().range, lc_ml().static_range)):
            return fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})
        if all(is_static(a) for a in args) and all(is_static(v) for v in kwargs.values()):
            # compile-time Python (np.float32(2), math.sqrt(2)): numpy scalars become numbers
            return lc.python_value(fn(*[unwrap(a) for a in args],
                                      **{k: unwrap(v) for k, v in kwargs.items()}))
        name = getattr(fn, "__name__", repr(fn))
        self.fail(node, f"cannot call {name}() on tensors: only mutile.language builtins and "
                        "@mutile.jit functions take tensors")

    def call_builtin(self, fn, args, kwargs, node):
        for a in [*args, *kwargs.values()]:
            if hasattr(unwrap(a), "refusal"):           # a dtype mutile refuses (compat.py)
                self.fail(node, unwrap(a).refusal())
        if getattr(fn, "__mutile_calls_jit__", False):   # reduce/scan/map_elementwise's fn
            kwargs = dict(kwargs, _call_jit=lambda f, *a: self.compiler.call_jit(
                self, f, list(a), {}, node))
        return fn(*args, _builder=self.builder, **kwargs)


def lc_ml():
    from .. import language
    return language


def lc_std():
    from ..language import standard
    return standard


def lc_tiles():
    from ..language import tiles
    return tiles


__all__ = ["CodeGenerator", "binary", "is_jit", "is_static", "unwrap", "Loc", "T"]
