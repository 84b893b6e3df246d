import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutile.errors import Loc
from mutile.ir import Builder, Func, Module, semantics, types as T, verify
from mutile.ir.ops import CMP_PREDICATES
from mutile.ir.types import tile_or_scalar
from mutile.passes import PASSES

# --------------------------------------------------------------------------- folding


def fold_one(ir, op_text, operands, result_type):
    """Canonicalize ``%r = <op> %c0, %c1.. {attrs} : result_type`` on constant operands,
    given as (value text, type text); return the value of the constant it folds to."""
    consts = "\n".join(f"  %c{i} = constant {{value = {v}}} : {t} loc(2)"
                       for i, (v, t) in enumerate(operands))
    name, _, attrs = op_text.partition(" ")
    args = ", ".join(f"%c{i}" for i in range(len(operands)))
    m = ir.run(f"""
kernel @k() -> ({result_type}) loc(1) {{
{consts}
  %r = {name} {args} {attrs} : {result_type} loc(3)
  return %r loc(4)
}}
""", "canonicalize", "dce")
    const, ret = m.entry.body.ops
    assert (const.name, ret.name) == ("constant", "return"), str(m)
    assert const.loc.line == 3  # the folded constant keeps the op's location
    assert str(const.result.type) == result_type
    return const.attrs["value"]


i32, u8, i16, f32 = np.int32, np.uint8, np.int16, np.float32
F16 = np.float16
BF16 = ml_dtypes.bfloat16

# (op, operands as (value, type), result type, the expected value computed with numpy)
with np.errstate(all="ignore"):  # the expected values wrap around on purpose
    FOLDS = [
        ("add", [("2147483647", "i32"), ("1", "i32")], "i32", int(i32(2**31 - 1) + i32(1))),
        ("add", [("2048.0", "f16"), ("1.0", "f16")], "f16", float(F16(2048) + F16(1))),
        ("add", [("1.0", "bf16"), ("0.001", "bf16")], "bf16", float(BF16(1) + BF16(0.001))),
        ("sub", [("3", "u8"), ("5", "u8")], "u8", int(u8(3) - u8(5))),
        ("sub", [("0.1", "f32"), ("0.3", "f32")], "f32", float(f32(0.1) - f32(0.3))),
        ("mul", [("300", "i16"), ("300", "i16")], "i16", int(i16(300) * i16(300))),
        ("mul", [("1e20", "f32"), ("1e20", "f32")], "f32", math.inf),
        ("div", [("-7", "i32"), ("2", "i32")], "i32", int(np.trunc(-7 / 2))),
        ("div", [("7", "i32"), ("0", "i32")], "i32", -1),
        ("div", [("1.0", "f32"), ("3.0", "f32")], "f32", float(f32(1) / f32(3))),
        ("rem", [("-7", "i32"), ("3", "i32")], "i32", int(np.fmod(i32(-7), i32(3)))),
        ("rem", [("7", "i32"), ("0", "i32")], "i32", 7),
        ("rem", [("5.5", "f32"), ("-2.0", "f32")], "f32", float(np.fmod(f32(5.5), f32(-2)))),
        ("min", [("nan", "f32"), ("2.0", "f32")], "f32", 2.0),
        ("max", [("-3", "i32"), ("2", "i32")], "i32", 2),
        ("and", [("12", "i32"), ("10", "i32")], "i32", 12 & 10),
        ("or", [("12", "i32"), ("10", "i32")], "i32", 12 | 10),
        ("xor", [("12", "i32"), ("10", "i32")], "i32", 12 ^ 10),
        ("shl", [("1", "i32"), ("31", "i32")], "i32", int(np.left_shift(i32(1), i32(31)))),
        ("shl", [("1", "i32"), ("40", "i32")], "i32", 0),
        ("shr", [("-8", "i32"), ("1", "i32")], "i32", int(np.right_shift(i32(-8), i32(1)))),
        ("shr", [("-8", "i32"), ("40", "i32")], "i32", -1),
        ("shr", [("200", "u8"), ("3", "u8")], "u8", int(np.right_shift(u8(200), u8(3)))),
        ("cmp {pred = \"lt\"}", [("-1", "i32"), ("1", "i32")], "i1", True),
        ("cmp {pred = \"lt\"}", [("255", "u8"), ("1", "u8")], "i1", False),
        ("cmp {pred = \"ne\"}", [("nan", "f32"), ("nan", "f32")], "i1", True),
        ("cmp {pred = \"eq\"}", [("nan", "f32"), ("nan", "f32")], "i1", False),
        ("neg", [("-2147483648", "i32")], "i32", int(-i32(-2**31))),
        ("neg", [("0.0", "f32")], "f32", -0.0),
        ("abs", [("-2.5", "f32")], "f32", 2.5),
        ("abs", [("-5", "i32")], "i32", 5),
        ("not", [("5", "i32")], "i32", int(~i32(5))),
        ("not", [("true", "i1")], "i1", False),
        ("sqrt", [("2.0", "f32")], "f32", float(np.sqrt(f32(2)))),
        ("floor", [("-1.5", "f32")], "f32", -2.0),
        ("ceil", [("-1.5", "f32")], "f32", -1.0),
        ("select", [("false", "i1"), ("1.0", "f32"), ("2.0", "f32")], "f32", 2.0),
        ("cast {to = i32}", [("-2.7", "f32")], "i32", -2),
        ("cast {to = i8}", [("300", "i32")], "i8", int(np.array(300).astype(np.int8))),
        ("cast {to = f16}", [("2049", "i32")], "f16", float(F16(2049))),
        ("cast {to = i1}", [("0.5", "f32")], "i1", True),
        ("bitcast {to = i32}", [("1.0", "f32")], "i32", 0x3F800000),
        ("fma", [("0.1", "f32"), ("10.0", "f32"), ("-1.0", "f32")], "f32",
         float(f32(float(f32(0.1)) * 10.0 - 1.0))),
    ]


@pytest.mark.parametrize("op, operands, result, want", FOLDS,
                         ids=[f"{f[0].split()[0]}-{f[2]}-{i}" for i, f in enumerate(FOLDS)])
def test_fold_exact_op(ir, op, operands, result, want):
    got = fold_one(ir, op, operands, result)
    assert type(got) is type(want)
    assert got == want or (math.isnan(got) and math.isnan(want))
    if isinstance(want, float):
        assert math.copysign(1, got) == math.copysign(1, want)


def test_fold_every_exact_op_is_covered():
    covered = {f[0].split()[0] for f in FOLDS}
    assert covered == set(semantics.EXACT)


def test_fold_tile_constants(ir):
    # a tile constant means every element equals the value
    got = fold_one(ir, "add", [("5", "tile<4xi32>"), ("-7", "tile<4xi32>")], "tile<4xi32>")
    assert got == -2


@pytest.mark.parametrize("op", ["exp", "log", "sin", "tanh", "erf"])
def test_inexact_ops_are_not_folded(ir, op):
    m = ir.run(f"""
kernel @k(%p: ptr<f32>) -> () loc(1) {{
  %c = constant {{value = 0.5}} : f32 loc(2)
  %r = {op} %c : f32 loc(3)
  store %p, %r loc(4)
  return loc(5)
}}
""", "canonicalize")
    assert op in ir.ops(m)


def test_pow_is_not_folded_and_load_is_kept(ir):
    m = ir.run("""
kernel @k(%p: ptr<f32>) -> () loc(1) {
  %c = constant {value = 2.0} : f32 loc(2)
  %r = pow %c, %c : f32 loc(3)
  %l = load %p : f32 loc(4)
  store %p, %r loc(5)
  return loc(6)
}
""", "canonicalize", "dce")
    assert ir.ops(m) == ["constant", "pow", "load", "store", "return"]


# --------------------------------------------------------------------------- identities

def identity_case(ir, body, t="i32"):
    return ir.run(f"""
kernel @k(%p: ptr<{t}>, %x: {t}) -> () loc(1) {{
  %z = constant {{value = {'0.0' if t.startswith('f') else '0'}}} : {t} loc(2)
  %one = constant {{value = {'1.0' if t.startswith('f') else '1'}}} : {t} loc(2)
  %r = {body} : {t} loc(3)
  store %p, %r loc(4)
  return loc(5)
}}
""", "canonicalize", "dce")


@pytest.mark.parametrize("body", ["add %x, %z", "add %z, %x", "sub %x, %z", "mul %x, %one",
                                  "mul %one, %x"])
def test_integer_identities(ir, body):
    m = identity_case(ir, body)
    ir.check(m, """
kernel @k(%p: ptr<i32>, %x: i32) -> () loc(1) {
  store %p, %x loc(4)
  return loc(5)
}
""")


@pytest.mark.parametrize("body", ["mul %x, %one", "mul %one, %x"])
def test_float_multiply_by_one(ir, body):
    assert ir.ops(identity_case(ir, body, "f32")) == ["store", "return"]


@pytest.mark.parametrize("body", ["add %x, %z", "add %z, %x", "sub %x, %z", "sub %z, %x",
                                  "mul %x, %z"])
def test_inexact_float_identities_are_kept(ir, body):
    # -0.0 + 0.0 == +0.0, so x + 0.0 is not x; x * 0 is not 0 for nan/inf/-x
    assert body.split()[0] in ir.ops(identity_case(ir, body, "f32"))


def test_integer_identity_on_tiles(ir):
    m = ir.run("""
kernel @k(%p: ptr<i32>) -> () loc(1) {
  %x = arange {end = 4, start = 0} : tile<4xi32> loc(2)
  %z = constant {value = 0} : tile<4xi32> loc(2)
  %r = add %x, %z : tile<4xi32> loc(3)
  %q = splat %p : tile<4xptr<i32>> loc(4)
  %a = addptr %q, %r : tile<4xptr<i32>> loc(4)
  store %a, %r loc(5)
  return loc(6)
}
""", "canonicalize", "dce")
    assert ir.ops(m) == ["arange", "splat", "addptr", "store", "return"]


@pytest.mark.parametrize("cond, picked", [("true", "%a"), ("false", "%b")])
def test_select_with_constant_condition(ir, cond, picked):
    m = ir.run(f"""
kernel @k(%p: ptr<f32>, %a: tile<4xf32>, %b: tile<4xf32>) -> () loc(1) {{
  %c = constant {{value = {cond}}} : tile<4xi1> loc(2)
  %r = select %c, %a, %b : tile<4xf32> loc(3)
  %x = reduce %r {{axis = 0, kind = "sum"}} : f32 loc(4)
  store %p, %x loc(5)
  return loc(6)
}}
""", "canonicalize", "dce")
    ir.check(m, f"""
kernel @k(%p: ptr<f32>, %a: tile<4xf32>, %b: tile<4xf32>) -> () loc(1) {{
  %x = reduce {picked} {{axis = 0, kind = "sum"}} : f32 loc(4)
  store %p, %x loc(5)
  return loc(6)
}}
""")


def test_noop_conversions(ir):
    m = ir.run("""
kernel @k(%p: ptr<f32>, %x: tile<2x4xf32>) -> () loc(1) {
  %a = cast %x {to = f32} : tile<2x4xf32> loc(2)
  %b = bitcast %a {to = f32} : tile<2x4xf32> loc(3)
  %c = broadcast %b : tile<2x4xf32> loc(4)
  %s = reduce %c {axis = 0, kind = "sum"} : tile<4xf32> loc(5)
  %t = reduce %s {axis = 0, kind = "sum"} : f32 loc(5)
  store %p, %t loc(6)
  return loc(7)
}
""", "canonicalize", "dce")
    ir.check(m, """
kernel @k(%p: ptr<f32>, %x: tile<2x4xf32>) -> () loc(1) {
  %s = reduce %x {axis = 0, kind = "sum"} : tile<4xf32> loc(5)
  %t = reduce %s {axis = 0, kind = "sum"} : f32 loc(5)
  store %p, %t loc(6)
  return loc(7)
}
""")


def test_shape_ops_of_constants_become_constants(ir):
    m = ir.run("""
kernel @k(%p: ptr<f16>) -> () loc(1) {
  %c = constant {value = 1.5} : f16 loc(2)
  %s = splat %c : tile<4xf16> loc(3)
  %e = expand_dims %s {axis = 0} : tile<1x4xf16> loc(4)
  %b = broadcast %e : tile<2x4xf16> loc(5)
  %t = permute %b {order = [1, 0]} : tile<4x2xf16> loc(6)
  %r = reshape %t : tile<8xf16> loc(7)
  %q = splat %p : tile<8xptr<f16>> loc(8)
  store %q, %r loc(9)
  return loc(10)
}
""", "canonicalize", "dce")
    ir.check(m, """
kernel @k(%p: ptr<f16>) -> () loc(1) {
  %r = constant {value = 1.5} : tile<8xf16> loc(7)
  %q = splat %p : tile<8xptr<f16>> loc(8)
  store %q, %r loc(9)
  return loc(10)
}
""")


def test_addptr_zero(ir):
    m = ir.run("""
kernel @k(%p: ptr<f32>, %v: tile<4xf32>) -> () loc(1) {
  %z = constant {value = 0} : i64 loc(2)
  %a = addptr %p, %z : ptr<f32> loc(3)
  %q = splat %a : tile<4xptr<f32>> loc(4)
  %zt = constant {value = 0} : tile<4xi32> loc(5)
  %b = addptr %q, %zt : tile<4xptr<f32>> loc(6)
  store %b, %v loc(7)
  return loc(8)
}
""", "canonicalize", "dce")
    ir.check(m, """
kernel @k(%p: ptr<f32>, %v: tile<4xf32>) -> () loc(1) {
  %q = splat %p : tile<4xptr<f32>> loc(4)
  store %q, %v loc(7)
  return loc(8)
}
""")


# --------------------------------------------------------------------------- control flow

IF_SRC = """
kernel @k(%p: ptr<i32>, %x: i32) -> () loc(1) {{
  %a = constant {{value = 3}} : i32 loc(2)
  %b = constant {{value = 4}} : i32 loc(2)
  %c = cmp %a, %b {{pred = "{pred}"}} : i1 loc(3)
  %r = if %c : i32 loc(4) () {{
    %t = mul %x, %x : i32 loc(5)
    store %p, %t loc(6)
    yield %t loc(7)
  }} () {{
    %e = sub %x, %a : i32 loc(8)
    yield %e loc(9)
  }}
  store %p, %r loc(10)
  return loc(11)
}}
"""


def test_if_with_constant_condition_inlines_then(ir):
    m = ir.run(IF_SRC.format(pred="lt"), "canonicalize", "dce")
    ir.check(m, """
kernel @k(%p: ptr<i32>, %x: i32) -> () loc(1) {
  %t = mul %x, %x : i32 loc(5)
  store %p, %t loc(6)
  store %p, %t loc(10)
  return loc(11)
}
""")


def test_if_with_constant_condition_inlines_else(ir):
    m = ir.run(IF_SRC.format(pred="gt"), "canonicalize", "dce")
    ir.check(m, """
kernel @k(%p: ptr<i32>, %x: i32) -> () loc(1) {
  %a = constant {value = 3} : i32 loc(2)
  %e = sub %x, %a : i32 loc(8)
  store %p, %e loc(10)
  return loc(11)
}
""")


def test_if_with_unknown_condition_is_kept_and_its_regions_canonicalized(ir):
    m = ir.run("""
kernel @k(%p: ptr<i32>, %c: i1) -> () loc(1) {
  %a = constant {value = 3} : i32 loc(2)
  %r = if %c : i32 loc(4) () {
    %t = add %a, %a : i32 loc(5)
    yield %t loc(7)
  } () {
    yield %a loc(9)
  }
  store %p, %r loc(10)
  return loc(11)
}
""", "canonicalize", "dce")
    ir.check(m, """
kernel @k(%p: ptr<i32>, %c: i1) -> () loc(1) {
  %a = constant {value = 3} : i32 loc(2)
  %r = if %c : i32 loc(4) () {
    %t = constant {value = 6} : i32 loc(5)
    yield %t loc(7)
  } () {
    yield %a loc(9)
  }
  store %p, %r loc(10)
  return loc(11)
}
""")


FOR_SRC = """
kernel @k(%p: ptr<f32>, %n: i32) -> () loc(1) {{
  %lb = constant {{value = {lb}}} : i32 loc(2)
  %ub = {ub} loc(2)
  %st = constant {{value = {step}}} : i32 loc(2)
  %init = constant {{value = 1.5}} : f32 loc(2)
  %r = for %lb, %ub, %st, %init : f32 loc(3) (%i: i32, %acc: f32) {{
    %t = add %acc, %acc : f32 loc(4)
    store %p, %t loc(5)
    yield %t loc(6)
  }}
  store %p, %r loc(7)
  return loc(8)
}}
"""


@pytest.mark.parametrize("lb, ub, step", [(0, 0, 1), (5, 2, 1), (2, 5, -1), (3, 3, -2)])
def test_for_with_zero_trips_becomes_its_inits(ir, lb, ub, step):
    ub = f"constant {{value = {ub}}} : i32"
    m = ir.run(FOR_SRC.format(lb=lb, ub=ub, step=step), "canonicalize", "dce")
    ir.check(m, """
kernel @k(%p: ptr<f32>, %n: i32) -> () loc(1) {
  %init = constant {value = 1.5} : f32 loc(2)
  store %p, %init loc(7)
  return loc(8)
}
""")


@pytest.mark.parametrize("lb, ub, step", [(0, "constant {value = 1} : i32", 1),
                                          (5, "constant {value = 2} : i32", -1),
                                          (0, "constant {value = 0} : i32", 0),
                                          (0, "add %n, %n : i32", 1)])
def test_for_that_may_run_is_kept(ir, lb, ub, step):
    m = ir.run(FOR_SRC.format(lb=lb, ub=ub, step=step), "canonicalize", "dce")
    assert "for" in ir.ops(m)


def test_folds_chain_to_a_fixed_point(ir):
    # splat -> add -> cmp -> select -> cast -> if: everything resolves in one run
    m = ir.run("""
kernel @k(%p: ptr<i32>, %x: i32) -> () loc(1) {
  %a = constant {value = 3} : i32 loc(2)
  %s = splat %a : tile<4xi32> loc(3)
  %t = add %s, %s : tile<4xi32> loc(4)
  %seven = constant {value = 7} : tile<4xi32> loc(5)
  %c = cmp %t, %seven {pred = "lt"} : tile<4xi1> loc(6)
  %v = select %c, %t, %seven : tile<4xi32> loc(7)
  %f = cast %v {to = f32} : tile<4xf32> loc(8)
  %g = cast %f {to = i1} : tile<4xi1> loc(9)
  %h = reduce %g {axis = 0, kind = "and"} : i1 loc(10)
  %one = constant {value = true} : i1 loc(11)
  %k2 = and %one, %one : i1 loc(12)
  %r = if %k2 : i32 loc(13) () {
    %m = mul %x, %a : i32 loc(14)
    yield %m loc(15)
  } () {
    yield %x loc(16)
  }
  store %p, %r loc(17)
  %q = splat %p : tile<4xptr<i32>> loc(18)
  store %q, %v loc(19)
  return loc(20)
}
""", "canonicalize", "dce")
    ir.check(m, """
kernel @k(%p: ptr<i32>, %x: i32) -> () loc(1) {
  %a = constant {value = 3} : i32 loc(2)
  %v = constant {value = 6} : tile<4xi32> loc(7)
  %m = mul %x, %a : i32 loc(14)
  store %p, %m loc(17)
  %q = splat %p : tile<4xptr<i32>> loc(18)
  store %q, %v loc(19)
  return loc(20)
}
""")


def test_canonicalize_is_idempotent(ir):
    m = ir.run(IF_SRC.format(pred="lt"), "canonicalize")
    once = str(m)
    assert str(PASSES["canonicalize"](m)) == once


# --------------------------------------------------------------------------- property

SCALARS = [T.i1, T.i8, T.i32, T.i64, T.u8, T.u32, T.f16, T.bf16, T.f32, T.f64]
INT_OPS = ["add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr"]
FLOAT_OPS = ["add", "sub", "mul", "div", "rem", "min", "max"]
INT_UNARY, FLOAT_UNARY = ["neg", "abs", "not"], ["neg", "abs", "sqrt", "floor", "ceil"]
LOC = Loc("t.py", 1, 0)


def _values(t):
    if t.is_bool():
        return st.booleans()
    if t.is_int():
        info = np.iinfo(t.to_numpy())
        return st.integers(int(info.min), int(info.max))
    width = {"f16": 16, "f32": 32, "bf16": 32}.get(t.name, 64)
    special = st.sampled_from([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan])
    return st.one_of(special, st.floats(width=width)).map(lambda x: _round(x, t))


def _round(x, t):
    """``x`` as a constant attribute of type ``t``."""
    with np.errstate(all="ignore"):  # bf16 rounds its largest f32 values up to inf
        y = np.array(x).astype(t.to_numpy())
    return float(y) if t.is_floating() else bool(y) if t.is_bool() else int(y)


@st.composite
def programs(draw, inputs=False):
    """A kernel returning every value of a random straight-line program of elementwise
    ops on constants (and, with ``inputs``, on arguments); and the arguments' values.
    Small constants (0, 1) are drawn often, so identities get exercised too."""
    shape = draw(st.sampled_from([(), (4,), (2, 2)]))
    types = draw(st.lists(st.sampled_from(SCALARS), min_size=1, max_size=3, unique=True))
    arg_types = draw(st.lists(st.sampled_from(types), max_size=3)) if inputs else []
    f = Func("k", [tile_or_scalar(shape, t) for t in arg_types], loc=LOC)
    b = Builder(f.body, LOC)
    pool: dict = {}  # scalar type -> values of that type
    for a in f.args:
        pool.setdefault(a.type.scalar, []).append(a)

    def pick(allowed):
        """A value of one of the ``allowed`` types (preferring the program's types)."""
        t = draw(st.sampled_from([t for t in types if t in allowed] or allowed))
        if not pool.get(t) or draw(st.integers(0, 2)) == 0:
            value = draw(st.one_of(st.sampled_from([0, 1]).map(lambda x: _round(x, t)),
                                   _values(t)))
            pool.setdefault(t, []).append(b("constant", type=tile_or_scalar(shape, t),
                                            value=value))
        return draw(st.sampled_from(pool[t]))

    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["binary", "unary", "cmp", "select", "cast", "fma"]))
        if kind in ("binary", "unary"):
            x = pick(SCALARS)
            fl = x.type.scalar.is_floating()
            if kind == "binary":
                name = draw(st.sampled_from(FLOAT_OPS if fl else INT_OPS))
                y = pick([x.type.scalar])
                v = b(name, *draw(st.permutations([x, y])))
            else:
                v = b(draw(st.sampled_from(FLOAT_UNARY if fl else INT_UNARY)), x)
        elif kind == "cmp":
            x = pick(SCALARS)
            v = b("cmp", x, pick([x.type.scalar]), pred=draw(st.sampled_from(CMP_PREDICATES)))
        elif kind == "select":
            c = pick([T.i1])
            x = pick(SCALARS)
            v = b("select", c, x, pick([x.type.scalar]))
        elif kind == "cast":
            v = b("cast", pick(SCALARS), to=draw(st.sampled_from(SCALARS)))
        else:
            x = pick([t for t in SCALARS if t.is_floating()])
            v = b("fma", x, pick([x.type.scalar]), pick([x.type.scalar]))
        pool.setdefault(v.type.scalar, []).append(v)
    results = [v for vs in pool.values() for v in vs]
    f.result_types = [v.type for v in results]
    b.create("return", results)
    args = [np.array(draw(_values(t))).astype(t.to_numpy()) for t in arg_types]
    return Module([f]), args


def _run(m, args=()):
    """The kernel's returned values, computed op by op with semantics.evaluate."""
    env = dict(zip(m.entry.args, args))
    for op in m.entry.body.ops[:-1]:
        t = op.result.type.scalar
        if op.name == "constant":
            env[op.result] = np.array(op.attrs["value"]).astype(t.to_numpy())
            continue
        src = op.operands[1 if op.name == "select" else 0].type.scalar
        env[op.result] = semantics.evaluate(op.name, op.attrs, [env[v] for v in op.operands],
                                            t, src)
    return [env[v] for v in m.entry.body.terminator.operands]


def _same_bits(a, b):
    if a.dtype.kind in "biu":
        return a == b
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    return (np.isnan(fa) and np.isnan(fb)) or (fa == fb and np.signbit(fa) == np.signbit(fb))


@settings(max_examples=200, deadline=None)
@given(programs())
def test_canonicalize_folds_straight_line_programs_exactly(program):
    m, _ = program
    want = _run(verify(m))
    verify(PASSES["canonicalize"](m))
    assert all(op.name == "constant" for op in m.entry.body.ops[:-1]), str(m)
    for got, w, v in zip(_run(m), want, m.entry.body.terminator.operands):
        assert _same_bits(got, w), f"{v.owner} is {got!r}, expected {w!r}\n{m}"


@settings(max_examples=200, deadline=None)
@given(programs(inputs=True))
def test_canonicalize_preserves_values_of_programs_with_inputs(program):
    m, args = program
    want = _run(verify(m), args)
    verify(PASSES["canonicalize"](m))
    for got, w, v in zip(_run(m, args), want, m.entry.body.terminator.operands):
        assert _same_bits(got, w), f"{v} is {got!r}, expected {w!r}, args {args}\n{m}"
