"""Every tile-IR op, defined once.

An :class:`OpDef` declares an op's operands (``name``, ``name?`` optional, ``name*``
variadic), its attributes, how many regions it owns, how its result types follow from
its operands (``infer``) and the extra rules it checks (``check``). The builder, the
printer, the parser and the verifier all read this table; nothing else lists ops.

Elementwise ops take operands of one identical type (the frontend broadcasts and
promotes first); their scalar meaning is the row of the same name in
:mod:`mutile.ir.semantics`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import types as T
from .types import DescType, PointerType, ScalarType, TileType, shape_of, tile_or_scalar


class OpRuleError(Exception):
    """Raised by an op's ``check``/``infer``; the verifier adds the location."""


def need(cond: bool, msg: str) -> None:
    if not cond:
        raise OpRuleError(msg)


@dataclass
class OpDef:
    name: str
    operands: tuple = ()
    attrs: tuple = ()              # required attribute names
    optional_attrs: tuple = ()     # attribute names that may be absent
    regions: int = 0
    infer: Callable | None = None  # (operand types, attrs) -> list of result types
    check: Callable | None = None  # (op) -> None, raises OpRuleError
    pure: bool = True
    terminator: bool = False
    doc: str = ""
    category: str = ""

    def operand_range(self) -> tuple[int, int | None]:
        """Minimum and maximum operand counts (None = unbounded)."""
        lo, hi = 0, 0
        for o in self.operands:
            if o.endswith("*"):
                hi = None
            elif o.endswith("?"):
                hi = None if hi is None else hi + 1
            else:
                lo += 1
                hi = None if hi is None else hi + 1
        return lo, hi


OPS: dict[str, OpDef] = {}


def define(name, operands=(), attrs=(), optional_attrs=(), regions=0, infer=None, check=None,
           pure=True, terminator=False, doc="", category=""):
    OPS[name] = OpDef(name, tuple(operands), tuple(attrs), tuple(optional_attrs), regions, infer,
                      check, pure, terminator, doc, category)


# ---------------------------------------------------------------- type helpers
def _same(ts):
    need(all(t == ts[0] for t in ts), "operand types differ: " + ", ".join(map(str, ts)))
    return [ts[0]]


def _numeric(t):
    need(isinstance(t.scalar, ScalarType), f"expected numbers, got {t}")
    return t.scalar


def _float(ts):
    for t in ts:
        need(_numeric(t).is_floating(), f"expected a float operand, got {t}")
    return _same(ts)


def _integer(ts):
    for t in ts:
        need(_numeric(t).is_int(), f"expected an integer operand, got {t}")
    return _same(ts)


def _any_num(ts):
    for t in ts:
        _numeric(t)
    return _same(ts)


def _bool_like(t):
    return tile_or_scalar(shape_of(t), T.i1)


# ---------------------------------------------------------------- elementwise
for _n, _d in [("add", "a + b (integers wrap)"), ("sub", "a - b"), ("mul", "a * b"),
               ("div", "a / b; integers truncate toward zero, x/0 = -1"),
               ("rem", "C remainder (sign of a); floats fmod; x%0 = x"),
               ("min", "smaller of a, b (a NaN loses to a number)"),
               ("max", "larger of a, b (a NaN loses to a number)")]:
    define(_n, ("lhs", "rhs"), infer=lambda ts, a: _any_num(ts), doc=_d, category="elementwise")
for _n, _d in [("and", "a & b"), ("or", "a | b"), ("xor", "a ^ b"),
               ("shl", "a << b (b >= bits gives 0)"),
               ("shr", "a >> b; arithmetic for signed, logical for unsigned")]:
    define(_n, ("lhs", "rhs"), infer=lambda ts, a: _integer(ts), doc=_d, category="elementwise")
define("pow", ("lhs", "rhs"), infer=lambda ts, a: _float(ts), doc="a ** b", category="elementwise")

CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")


def _check_cmp(op):
    need(op.attrs["pred"] in CMP_PREDICATES, f"unknown predicate {op.attrs['pred']!r}")


define("cmp", ("lhs", "rhs"), attrs=("pred",),
       infer=lambda ts, a: [_bool_like(_any_num(ts) and ts[0])], check=_check_cmp,
       doc="a <pred> b as i1; floats compare ordered except ne", category="elementwise")

UNARY_FLOAT = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "erf", "floor",
               "ceil", "tanh")
for _n in UNARY_FLOAT:
    define(_n, ("x",), infer=lambda ts, a: _float(ts), doc=f"{_n}(x)", category="elementwise")
define("neg", ("x",), infer=lambda ts, a: _any_num(ts), doc="-x", category="elementwise")
define("abs", ("x",), infer=lambda ts, a: _any_num(ts), doc="|x|", category="elementwise")
define("not", ("x",), infer=lambda ts, a: _integer(ts), doc="~x (logical not on i1)",
       category="elementwise")
define("fma", ("a", "b", "c"), infer=lambda ts, a: _float(ts), doc="a * b + c, rounded once",
       category="elementwise")


def _infer_select(ts, a):
    need(_numeric(ts[0]) == T.i1, f"select condition must be i1, got {ts[0]}")
    need(ts[1] == ts[2], f"select arms differ: {ts[1]} vs {ts[2]}")
    need(shape_of(ts[0]) == shape_of(ts[1]), f"select condition shape {shape_of(ts[0])} "
         f"differs from {shape_of(ts[1])}")
    return [ts[1]]


define("select", ("cond", "a", "b"), infer=_infer_select, doc="cond ? a : b",
       category="elementwise")


def _infer_cast(ts, a):
    to = a["to"]
    need(isinstance(to, ScalarType), f"cast target must be a scalar type, got {to}")
    _numeric(ts[0])
    return [tile_or_scalar(shape_of(ts[0]), to)]


def _infer_bitcast(ts, a):
    to = a["to"]
    src = ts[0].scalar
    need(isinstance(to, (ScalarType, PointerType)), f"bitcast target must be scalar, got {to}")
    need(to.bits == src.bits, f"bitcast {src} -> {to} changes the width")
    if isinstance(to, PointerType) != isinstance(src, PointerType):   # int <-> pointer
        i = src if isinstance(to, PointerType) else to
        need(isinstance(i, ScalarType) and i.is_int() and i.bits == 64,
             f"bitcast {src} -> {to}: a pointer converts only to or from a 64-bit integer")
    return [tile_or_scalar(shape_of(ts[0]), to)]


define("cast", ("x",), attrs=("to",), infer=_infer_cast,
       doc="numeric conversion (floats round to nearest even; float->int truncates)",
       category="elementwise")
define("bitcast", ("x",), attrs=("to",), infer=_infer_bitcast, doc="reinterpret the bits",
       category="elementwise")


# ---------------------------------------------------------------- constants and indices
def _check_constant(op):
    need(len(op.results) == 1, "constant has one result")
    t = op.results[0].type
    need(isinstance(t.scalar, ScalarType), f"constant must be numeric, got {t}")
    v = op.attrs["value"]
    need(isinstance(v, (int, float)) and (isinstance(v, float) == t.scalar.is_floating()
                                          or isinstance(v, bool)),
         f"constant value {v!r} does not suit {t}")


define("constant", (), attrs=("value",), check=_check_constant,
       doc="a scalar, or a tile with every element equal to value")
define("program_id", (), attrs=("axis",), infer=lambda ts, a: [T.i32],
       check=lambda op: need(op.attrs["axis"] in (0, 1, 2), "axis must be 0, 1 or 2"),
       doc="this program's index along axis of the grid")
define("num_programs", (), attrs=("axis",), infer=lambda ts, a: [T.i32],
       check=lambda op: need(op.attrs["axis"] in (0, 1, 2), "axis must be 0, 1 or 2"),
       doc="the grid's size along axis")


def _pow2(n):
    return n > 0 and n & (n - 1) == 0


def _infer_arange(ts, a):
    n = a["end"] - a["start"]
    need(_pow2(n), f"arange length {n} must be a power of two")
    return [TileType((n,), T.i32)]


define("arange", (), attrs=("start", "end"), infer=_infer_arange, doc="[start, start+1, ..., end-1]")


# ---------------------------------------------------------------- shapes
def _result(op):
    need(len(op.results) == 1, f"{op.name} has one result")
    return op.results[0].type


def _check_splat(op):
    t, src = _result(op), op.operands[0].type
    need(isinstance(t, TileType) and t.element == src, f"cannot splat {src} to {t}")


def _check_broadcast(op):
    t, src = _result(op), op.operands[0].type
    need(isinstance(t, TileType) and isinstance(src, TileType) and t.element == src.element
         and len(t.shape) == len(src.shape), f"cannot broadcast {src} to {t}")
    for s, d in zip(src.shape, t.shape):
        need(s == d or s == 1, f"cannot broadcast {src} to {t}")


def _infer_expand_dims(ts, a):
    src, ax = ts[0], a["axis"]
    shape = list(shape_of(src))
    need(0 <= ax <= len(shape), f"expand_dims axis {ax} out of range for {src}")
    shape.insert(ax, 1)
    return [TileType(tuple(shape), src.scalar)]


def _check_reshape(op):
    t, src = _result(op), op.operands[0].type
    need(isinstance(t, TileType) and t.element == src.scalar, f"cannot reshape {src} to {t}")
    n = src.numel if isinstance(src, TileType) else 1
    need(n == t.numel, f"reshape {src} -> {t} changes the element count")


def _infer_permute(ts, a):
    src, order = ts[0], tuple(a["order"])
    need(isinstance(src, TileType) and sorted(order) == list(range(len(src.shape))),
         f"bad permutation {order} for {src}")
    return [TileType(tuple(src.shape[i] for i in order), src.element)]


define("splat", ("x",), check=_check_splat, doc="a tile filled with x")
define("broadcast", ("x",), check=_check_broadcast,
       doc="repeat size-1 dims up to type's shape")
define("expand_dims", ("x",), attrs=("axis",), infer=_infer_expand_dims,
       doc="insert a size-1 dim at axis")
define("reshape", ("x",), check=_check_reshape,
       doc="same elements in row-major order, new shape")
define("permute", ("x",), attrs=("order",), infer=_infer_permute,
       doc="result dim i is source dim order[i]")


# ---------------------------------------------------------------- memory
def _infer_addptr(ts, a):
    p, off = ts
    need(p.scalar.is_ptr(), f"addptr needs a pointer, got {p}")
    need(isinstance(off.scalar, ScalarType) and off.scalar.is_int(),
         f"pointer offset must be an integer, got {off}")
    need(shape_of(p) == shape_of(off), f"pointer {p} and offset {off} differ in shape")
    return [p]


define("addptr", ("ptr", "offset"), infer=_infer_addptr, doc="ptr + offset elements",
       category="elementwise")


def _infer_load(ts, a):
    p = ts[0]
    need(p.scalar.is_ptr(), f"load needs pointers, got {p}")
    res = tile_or_scalar(shape_of(p), p.scalar.element_ty)
    if len(ts) > 1:
        need(ts[1] == _bool_like(p), f"load mask must be {_bool_like(p)}, got {ts[1]}")
    if len(ts) > 2:
        need(ts[2] == res, f"load other must be {res}, got {ts[2]}")
    return [res]


def _check_store(op):
    ts = [v.type for v in op.operands]
    p = ts[0]
    need(p.scalar.is_ptr(), f"store needs pointers, got {p}")
    want = tile_or_scalar(shape_of(p), p.scalar.element_ty)
    need(ts[1] == want, f"stored value must be {want}, got {ts[1]}")
    if len(ts) > 2:
        need(ts[2] == _bool_like(p), f"store mask must be {_bool_like(p)}, got {ts[2]}")


define("load", ("ptr", "mask?", "other?"), optional_attrs=("cache", "volatile"), infer=_infer_load,
       pure=False, doc="read each pointer where mask holds, else other (else zero)")
define("store", ("ptr", "value", "mask?"), infer=lambda ts, a: [], check=_check_store, pure=False,
       doc="write value to each pointer where mask holds")


# ---------------------------------------------------------------- atomics
ATOMIC_OPS = ("add", "max", "min", "and", "or", "xor", "xchg")
ATOMIC_SEMS = ("relaxed", "acquire", "release", "acq_rel")
ATOMIC_SCOPES = ("gpu", "cta", "sys")


def _check_atomic_attrs(op, kinds=True):
    a = op.attrs
    need(not kinds or a["op"] in ATOMIC_OPS, f"unknown atomic op {a.get('op')!r}")
    need(a["sem"] in ATOMIC_SEMS, f"unknown memory semantics {a['sem']!r}")
    need(a["scope"] in ATOMIC_SCOPES, f"unknown scope {a['scope']!r}")


def _atomic_result(p):
    need(p.scalar.is_ptr(), f"atomics need pointers, got {p}")
    e = p.scalar.element_ty
    need(isinstance(e, ScalarType) and e.bits in (16, 32, 64) and not e.is_bool(),
         f"atomics need 16-, 32- or 64-bit elements, got {e}")
    return tile_or_scalar(shape_of(p), e)


def _infer_atomic_rmw(ts, a):
    res = _atomic_result(ts[0])
    need(ts[1] == res, f"atomic value must be {res}, got {ts[1]}")
    if len(ts) > 2:
        need(ts[2] == _bool_like(ts[0]), f"atomic mask must be {_bool_like(ts[0])}, got {ts[2]}")
    e = res.scalar
    kind = a.get("op")
    need(kind not in ("and", "or", "xor") or e.is_int(), f"atomic {kind} needs integers, got {e}")
    need(e.bits > 16 or kind == "add", f"atomic {kind} of 16-bit {e} is not defined (add only)")
    return [res]


def _infer_atomic_cas(ts, a):
    res = _atomic_result(ts[0])
    need(res.scalar.bits in (32, 64), f"atomic_cas needs 32- or 64-bit elements, got {res}")
    need(ts[1] == res and ts[2] == res, f"atomic_cas compare and value must be {res}, got "
         f"{ts[1]}, {ts[2]}")
    return [res]


define("atomic_rmw", ("ptr", "value", "mask?"), attrs=("op", "sem", "scope"),
       infer=_infer_atomic_rmw, check=_check_atomic_attrs, pure=False,
       doc="atomically *ptr = op(*ptr, value) where mask holds; result: the old values "
           "(0 where masked off)")
define("atomic_cas", ("ptr", "cmp", "value"), attrs=("sem", "scope"), infer=_infer_atomic_cas,
       check=lambda op: _check_atomic_attrs(op, kinds=False), pure=False,
       doc="atomically: old = *ptr; if old == cmp (bitwise): *ptr = value; result: old")


# ---------------------------------------------------------------- tensor descriptors
def _infer_make_desc(ts, a):
    block = tuple(a["block"])
    need(ts[0].is_ptr() and not ts[0].is_tile(), f"descriptor base must be a pointer, got {ts[0]}")
    need(len(ts) == 1 + 2 * len(block), f"descriptor of rank {len(block)} needs "
         f"{len(block)} dims and {len(block)} strides")
    for t in ts[1:]:
        need(isinstance(t, ScalarType) and t.is_int(), f"descriptor sizes must be integers, got {t}")
    for d in block:
        need(_pow2(d), f"descriptor block dims must be powers of two, got {block}")
    return [DescType(ts[0].element_ty, block)]


def _infer_desc_load(ts, a):
    d = ts[0]
    need(isinstance(d, DescType), f"desc_load needs a descriptor, got {d}")
    need(len(ts) == 1 + len(d.block), f"descriptor of rank {len(d.block)} needs that many offsets")
    return [TileType(d.block, d.element)]


def _check_desc_store(op):
    d = op.operands[0].type
    need(isinstance(d, DescType), f"desc_store needs a descriptor, got {d}")
    need(len(op.operands) == 2 + len(d.block), "desc_store needs one offset per dim and a value")
    need(op.operands[-1].type == TileType(d.block, d.element),
         f"stored tile must be {TileType(d.block, d.element)}, got {op.operands[-1].type}")


define("make_desc", ("base", "sizes*"), attrs=("block",), infer=_infer_make_desc,
       doc="describe a row-major global tensor (dims, then strides in elements)")
define("desc_load", ("desc", "offsets*"), infer=_infer_desc_load, pure=False,
       doc="load the block at offsets; out-of-bounds elements read 0")
define("desc_store", ("desc", "args*"), infer=lambda ts, a: [], check=_check_desc_store,
       pure=False, doc="store a block at offsets; out-of-bounds elements are dropped")


# ---------------------------------------------------------------- dot, reductions, scans
DOT_PRECISIONS = ("ieee", "tf32")


def _infer_dot(ts, a):
    x, y, acc = ts
    need(all(isinstance(t, TileType) and len(t.shape) == 2 for t in ts), "dot needs 2-D tiles")
    need(x.shape[1] == y.shape[0], f"dot inner dims differ: {x} @ {y}")
    need(acc.shape == (x.shape[0], y.shape[1]), f"dot accumulator {acc} does not fit {x} @ {y}")
    need(x.element == y.element, f"dot operands differ in type: {x.element} vs {y.element}")
    need(a["input_precision"] in DOT_PRECISIONS, f"unknown input_precision {a['input_precision']!r}")
    need(min(x.shape + y.shape) >= 1, "dot dims must be positive")
    return [acc]


define("dot", ("a", "b", "acc"), attrs=("input_precision",), infer=_infer_dot,
       doc="acc + a @ b, each product and sum rounded in acc's type, k ascending")

REDUCE_KINDS = ("sum", "max", "min", "argmax", "argmin", "prod", "xor", "or", "and")


def _infer_reduce(ts, a):
    t, ax, kind = ts[0], a["axis"], a["kind"]
    need(isinstance(t, TileType), f"reduce needs a tile, got {t}")
    need(0 <= ax < len(t.shape), f"reduce axis {ax} out of range for {t}")
    need(kind in REDUCE_KINDS, f"unknown reduction {kind!r}")
    need(kind not in ("xor", "or", "and") or (isinstance(t.element, ScalarType)
                                              and t.element.is_int()),
         f"{kind} reduction needs integers, got {t}")
    shape = t.shape[:ax] + t.shape[ax + 1:]
    elem = T.i32 if kind in ("argmax", "argmin") else t.element
    return [tile_or_scalar(shape, elem)]


def _infer_scan(ts, a):
    t = ts[0]
    need(isinstance(t, TileType) and 0 <= a["axis"] < len(t.shape), f"bad scan axis for {t}")
    need(a["kind"] in ("sum", "prod", "max", "min"), f"unknown scan {a['kind']!r}")
    return [t]


define("reduce", ("x",), attrs=("axis", "kind"), infer=_infer_reduce,
       doc="combine along axis (argmax/argmin: first index of the extreme)")
define("scan", ("x",), attrs=("axis", "kind"), infer=_infer_scan,
       doc="inclusive prefix combine along axis")


# ---------------------------------------------------------------- control flow
def _check_for(op):
    lb, ub, step, *inits = op.operands
    for v in (lb, ub, step):
        need(isinstance(v.type, ScalarType) and v.type.is_int(), f"loop bounds must be integers, "
             f"got {v.type}")
    need(lb.type == ub.type == step.type, "loop bounds must share one type")
    body = op.regions[0]
    need([a.type for a in body.args] == [lb.type] + [v.type for v in inits],
         "loop body arguments must be the index and the iteration values")
    _check_yield(body, [r.type for r in op.results], "for")


def _check_yield(block, want, owner):
    term = block.terminator
    need(term is not None and term.name == "yield", f"{owner} region must end in yield")
    got = [v.type for v in term.operands]
    need(got == list(want), f"{owner} yields ({', '.join(map(str, got))}) "
         f"but must yield ({', '.join(map(str, want))})")


def _check_if(op):
    need(op.operands[0].type == T.i1, f"if condition must be i1, got {op.operands[0].type}")
    for r in op.regions:
        need(not r.args, "if regions take no arguments")
        _check_yield(r, [v.type for v in op.results], "if")


def _check_while(op):
    before, after = op.regions
    inits = [v.type for v in op.operands]
    need([a.type for a in before.args] == inits, "while 'before' args must match the inits")
    term = before.terminator
    need(term is not None and term.name == "condition", "while 'before' must end in condition")
    need(term.operands[0].type == T.i1, "while condition must be i1")
    carried = [v.type for v in term.operands[1:]]
    need(carried == [r.type for r in op.results], "condition must forward the results' types")
    need([a.type for a in after.args] == carried, "while 'after' args must match the condition")
    _check_yield(after, inits, "while")


define("for", ("lb", "ub", "step", "inits*"), optional_attrs=("num_stages", "unroll",
                                                            "warp_specialize"), regions=1,
       infer=lambda ts, a: list(ts[3:]), check=_check_for, pure=False,
       doc="for i in range(lb, ub, step), carrying values; results are the last yields")
define("if", ("cond",), regions=2, check=_check_if, pure=False,
       doc="run the then or else region; results are its yields")
define("while", ("inits*",), regions=2, infer=None, check=_check_while, pure=False,
       doc="before computes a condition and carried values; after runs while it holds")
define("yield", ("values*",), infer=lambda ts, a: [], terminator=True, pure=False,
       doc="end a region, passing values out")
define("condition", ("cond", "values*"), infer=lambda ts, a: [], terminator=True, pure=False,
       doc="end a while's before region")
define("call", ("args*",), attrs=("callee",), pure=False, doc="call another function of the module")
define("return", ("values*",), infer=lambda ts, a: [], terminator=True, pure=False,
       doc="leave the function")

# ---------------------------------------------------------------- debugging and hints
define("print", ("values*",), attrs=("prefix",), optional_attrs=("hex",), infer=lambda ts, a: [],
       pure=False, doc="device_print: each program prints prefix and the values")
define("assert", ("cond",), attrs=("msg",), infer=lambda ts, a: [], pure=False,
       doc="device_assert: fault where cond is false")
define("hint", ("x",), optional_attrs=("multiple_of", "max_contiguous"),
       infer=lambda ts, a: [ts[0]], doc="x, with divisibility/contiguity facts")
define("assume", ("cond",), infer=lambda ts, a: [], pure=False, doc="the compiler may take cond as true")
