"""Invalid IR gets its diagnostic: one test per rule of the verifier and of each op's
``infer``/``check`` in ``mutile/ir/ops.py``, and the parser's errors.

IR is written with short locations: ``loc(7)`` is ``loc(#0:7:0)`` in ``v.py``. The op
at fault is always on a line of its own number, and the error must carry it.
"""
import re

import pytest

from mutile import ir as mir
from mutile.errors import VerifyError

HEAD = '#0 = "v.py"\n'
ARGS = ("%p: ptr<f32>, %q: ptr<i32>, %n: i32, %m: i64, %f: f32, %h: f16, "
        "%t: tile<16xf32>, %ti: tile<16xi32>, %tp: tile<16xptr<f32>>, %mat: tile<16x8xf32>")


def module_text(body: str, funcs: str = "") -> str:
    text = f"kernel @k({ARGS}) -> () loc(1) {{\n{body}\n  return loc(99)\n}}\n{funcs}"
    return HEAD + re.sub(r"loc\((\d+)\)", r"loc(#0:\1:0)", text)


def verify_error(body: str, funcs: str = "") -> VerifyError:
    m = mir.parse(module_text(body, funcs))
    with pytest.raises(VerifyError) as info:
        mir.verify(m)
    return info.value


def check(body: str, msg: str, line: int = 7, funcs: str = ""):
    """``body`` fails verification at source line ``line`` with a message matching
    ``msg``; the error text starts with the location."""
    e = verify_error(body, funcs)
    assert re.search(msg, e.msg), f"{e.msg!r} does not match {msg!r}"
    assert e.loc is not None and (e.loc.file, e.loc.line) == ("v.py", line), str(e)
    assert str(e).startswith(f"v.py:{line}:1: error: ")


def test_valid_module_verifies():
    """The fixture every test below breaks is itself valid."""
    mir.verify(mir.parse(module_text("""
  %a = add %n, %n : i32 loc(2)
  %c = cmp %a, %n {pred = "lt"} : i1 loc(3)
  %x = load %tp : tile<16xf32> loc(4)
  store %tp, %x loc(5)""")))


# ------------------------------------------------------------------ generic rules (verifier.py)
def test_too_few_operands():
    check("  %a = add %n : i32 loc(7)", r"^'add': takes 2 operands, got 1$")


def test_too_many_operands():
    check("  %x = load %tp, %tp, %tp, %tp : tile<16xf32> loc(7)",
          r"^'load': takes 1\.\.3 operands, got 4$")


def test_variadic_op_without_its_required_operand():
    check("  print {prefix = \"\"} loc(6)\n  assert {msg = \"\"} loc(7)",
          r"^'assert': takes 1 operands, got 0$")


def test_missing_attribute():
    check("  %c = cmp %n, %n : i1 loc(7)", r"^'cmp': missing attribute 'pred'$")


def test_unknown_attribute():
    check("  %a = add %n, %n {fast = true} : i32 loc(7)", r"^'add': unknown attribute 'fast'$")


def test_wrong_region_count():
    check("""
  %c0 = constant {value = 0} : i32 loc(2)
  for %c0, %n, %c0 loc(7)""", r"^'for': needs 1 regions, has 0$")


def test_wrong_result_type():
    check("  %a = add %n, %n : i64 loc(7)", r"^'add': result types \(i64\) should be \(i32\)$")


def test_wrong_result_count():
    check("  %a, %b = add %n, %n : i32, i32 loc(7)",
          r"^'add': result types \(i32, i32\) should be \(i32\)$")


def test_terminator_not_last():
    check("""
  %a = add %n, %n : i32 loc(2)
  return loc(7)
  %b = add %a, %n : i32 loc(8)""", r"^'return': terminator is not the last op of its block$")


def test_yield_in_the_middle_of_a_region():
    check("""
  %c0 = constant {value = 0} : i32 loc(2)
  for %c0, %n, %c0 loc(3) (%i: i32) {
    yield loc(7)
    %a = add %i, %i : i32 loc(8)
    yield loc(9)
  }""", r"^'yield': terminator is not the last op", line=7)


def test_function_must_end_in_return():
    text = HEAD + 'kernel @k(%n: i32) -> () loc(#0:5:0) {\n' \
                  '  %a = add %n, %n : i32 loc(#0:6:0)\n}\n'
    with pytest.raises(VerifyError, match=r"function @k does not end in return") as info:
        mir.verify(mir.parse(text))
    assert info.value.loc.line == 5


def test_use_before_def():
    m = mir.parse(module_text("""
  %a = add %n, %n : i32 loc(2)
  %b = add %a, %n : i32 loc(7)"""))
    ops = m.entry.body.ops
    ops[0], ops[1] = ops[1], ops[0]
    with pytest.raises(VerifyError, match=r"^v.py:7:1: error: 'add': uses a value that is not "
                                          r"defined before it \(i32\)") as info:
        mir.verify(m)
    assert info.value.loc.line == 7


def test_value_used_outside_its_region():
    m = mir.parse(module_text("""
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(3)
  for %c0, %n, %c1 loc(4) (%i: i32) {
    %x = add %i, %n : i32 loc(5)
    yield loc(6)
  }
  %y = add %n, %n : i32 loc(7)"""))
    loop, use = m.entry.body.ops[2], m.entry.body.ops[3]
    use.operands[0] = loop.regions[0].ops[0].result   # %x escapes its loop body
    with pytest.raises(VerifyError, match=r"'add': uses a value that is not defined before it") \
            as info:
        mir.verify(m)
    assert info.value.loc.line == 7


def test_block_argument_used_outside_its_region():
    m = mir.parse(module_text("""
  %c0 = constant {value = 0} : i32 loc(2)
  for %c0, %n, %c0 loc(4) (%i: i32) {
    yield loc(6)
  }
  %y = add %n, %n : i32 loc(7)"""))
    loop, use = m.entry.body.ops[1], m.entry.body.ops[2]
    use.operands[1] = loop.regions[0].args[0]
    with pytest.raises(VerifyError, match=r"not defined before it") as info:
        mir.verify(m)
    assert info.value.loc.line == 7


CALLEE = """func @twice(%x: i32) -> (i32) loc(#0:20:0) {
  %y = add %x, %x : i32 loc(#0:21:0)
  return %y loc(#0:22:0)
}
"""


def test_call_to_undefined_function():
    check('  %r = call %n {callee = "nope"} : i32 loc(7)', r"calls undefined function @nope",
          funcs=CALLEE)


def test_call_with_wrong_argument_types():
    check('  %r = call %m {callee = "twice"} : i32 loc(7)', r"argument types do not match @twice",
          funcs=CALLEE)


def test_call_with_wrong_argument_count():
    check('  %r = call %n, %n {callee = "twice"} : i32 loc(7)',
          r"argument types do not match @twice", funcs=CALLEE)


def test_call_with_wrong_result_types():
    check('  %r = call %n {callee = "twice"} : f32 loc(7)', r"result types do not match @twice",
          funcs=CALLEE)


def test_call_to_a_valid_callee_verifies():
    mir.verify(mir.parse(module_text('  %r = call %n {callee = "twice"} : i32 loc(7)', CALLEE)))


def test_return_type_mismatch():
    funcs = """func @g(%x: f32) -> (i32) loc(#0:20:0) {
  return %x loc(#0:7:0)
}
"""
    check("", r"^'return': returns \(f32\) but @g returns \(i32\)$", funcs=funcs)


def test_kernel_returning_a_value():
    check("  return %n loc(7)\n  return loc(8)", r"terminator is not the last op")
    funcs_text = HEAD + 'kernel @k(%n: i32) -> () loc(#0:1:0) {\n  return %n loc(#0:7:0)\n}\n'
    with pytest.raises(VerifyError, match=r"returns \(i32\) but @k returns \(\)") as info:
        mir.verify(mir.parse(funcs_text))
    assert info.value.loc.line == 7


# ------------------------------------------------------------------ elementwise ops
ELEMENTWISE = [
    ("%a = add %n, %f : i32", r"'add': operand types differ: i32, f32"),
    ("%a = mul %t, %f : tile<16xf32>", r"operand types differ: tile<16xf32>, f32"),
    ("%a = add %p, %p : ptr<f32>", r"expected numbers, got ptr<f32>"),
    ("%a = and %f, %f : f32", r"'and': expected an integer operand, got f32"),
    ("%a = shl %t, %t : tile<16xf32>", r"expected an integer operand, got tile<16xf32>"),
    ("%a = exp %n : i32", r"'exp': expected a float operand, got i32"),
    ("%a = pow %n, %n : i32", r"'pow': expected a float operand, got i32"),
    ("%a = fma %f, %f, %h : f32", r"'fma': operand types differ: f32, f32, f16"),
    ("%a = not %f : f32", r"'not': expected an integer operand, got f32"),
    ("%a = neg %p : ptr<f32>", r"'neg': expected numbers, got ptr<f32>"),
    ('%cc = cmp %n, %f {pred = "lt"} : i1', r"'cmp': operand types differ"),
    ('%cc = cmp %n, %n {pred = "lte"} : i1', r"^'cmp': unknown predicate 'lte'$"),
    ('%cc = cmp %t, %t {pred = "eq"} : i1', r"result types \(i1\) should be \(tile<16xi1>\)"),
    ("%s = select %n, %f, %f : f32", r"'select': select condition must be i1, got i32"),
    ("%s = select %c, %f, %h : f32", r"select arms differ: f32 vs f16"),
    ("%s = select %c, %t, %t : tile<16xf32>", r"select condition shape \(\) differs from "
                                              r"\(16,\)"),
    ("%x = cast %f {to = ptr<f32>} : ptr<f32>", r"cast target must be a scalar type, got ptr<f32>"),
    ("%x = cast %p {to = i64} : i64", r"'cast': expected numbers, got ptr<f32>"),
    ("%x = cast %t {to = f16} : f16", r"result types \(f16\) should be \(tile<16xf16>\)"),
    ("%x = bitcast %f {to = f16} : f16", r"^'bitcast': bitcast f32 -> f16 changes the width$"),
    ("%x = bitcast %f {to = tile<16xf32>} : f32", r"bitcast target must be scalar"),
    ("%x = addptr %n, %n : i32", r"'addptr': addptr needs a pointer, got i32"),
    ("%x = addptr %p, %f : ptr<f32>", r"pointer offset must be an integer, got f32"),
    ("%x = addptr %tp, %n : tile<16xptr<f32>>", r"pointer tile<16xptr<f32>> and offset i32 "
                                                r"differ in shape"),
]


@pytest.mark.parametrize("line,msg", ELEMENTWISE, ids=[m.split()[2] + str(i) for i, (m, _) in
                                                        enumerate(ELEMENTWISE)])
def test_elementwise_rule(line, msg):
    check(f'  %c = cmp %n, %n {{pred = "lt"}} : i1 loc(2)\n  {line} loc(7)', msg)


# ------------------------------------------------------------------ constants, indices, shapes
SHAPES = [
    ("%x = constant {value = 1.5} : i32", r"constant value 1\.5 does not suit i32"),
    ("%x = constant {value = 1} : f32", r"constant value 1 does not suit f32"),
    ('%x = constant {value = "1"} : i32', r"constant value '1' does not suit i32"),
    ("%x = constant {value = 0} : ptr<f32>", r"constant must be numeric, got ptr<f32>"),
    ("%x, %y = constant {value = 0} : i32, i32", r"^'constant': constant has one result$"),
    ("%x = program_id {axis = 3} : i32", r"^'program_id': axis must be 0, 1 or 2$"),
    ("%x = num_programs {axis = -1} : i32", r"^'num_programs': axis must be 0, 1 or 2$"),
    ("%x = arange {end = 100, start = 0} : tile<100xi32>",
     r"^'arange': arange length 100 must be a power of two$"),
    ("%x = arange {end = 0, start = 0} : tile<1xi32>", r"arange length 0 must be a power of two"),
    ("%x = arange {end = 8, start = 0} : tile<16xi32>", r"should be \(tile<8xi32>\)"),
    ("%x = splat %f : tile<16xf16>", r"^'splat': cannot splat f32 to tile<16xf16>$"),
    ("%x = splat %f : f32", r"cannot splat f32 to f32"),
    ("%x = broadcast %mat : tile<16x8xi32>", r"cannot broadcast tile<16x8xf32> to tile<16x8xi32>"),
    ("%x = broadcast %t : tile<4x16xf32>", r"cannot broadcast tile<16xf32> to tile<4x16xf32>"),
    ("%x = broadcast %mat : tile<16x16xf32>",
     r"^'broadcast': cannot broadcast tile<16x8xf32> to tile<16x16xf32>$"),
    ("%x = broadcast %f : tile<4xf32>", r"cannot broadcast f32 to tile<4xf32>"),
    ("%x = expand_dims %t {axis = 2} : tile<16x1xf32>",
     r"expand_dims axis 2 out of range for tile<16xf32>"),
    ("%x = expand_dims %t {axis = 0} : tile<16x1xf32>", r"should be \(tile<1x16xf32>\)"),
    ("%x = reshape %mat : tile<8x8xf32>",
     r"^'reshape': reshape tile<16x8xf32> -> tile<8x8xf32> changes the element count$"),
    ("%x = reshape %mat : tile<8x16xi32>", r"cannot reshape tile<16x8xf32> to tile<8x16xi32>"),
    ("%x = reshape %mat : f32", r"cannot reshape tile<16x8xf32> to f32"),
    ("%x = permute %mat {order = [0, 0]} : tile<16x16xf32>",
     r"^'permute': bad permutation \(0, 0\) for tile<16x8xf32>$"),
    ("%x = permute %mat {order = [1, 0, 2]} : tile<8x16xf32>", r"bad permutation \(1, 0, 2\)"),
    ("%x = permute %f {order = []} : f32", r"bad permutation \(\) for f32"),
    ("%x = permute %mat {order = [0, 1]} : tile<8x16xf32>", r"should be \(tile<16x8xf32>\)"),
    ("%x = hint %n {multiple_of = [16]} : f32", r"^'hint': result types \(f32\) should be \(i32\)$"),
    ('%x = print %n {prefix = ""} : i32', r"^'print': result types \(i32\) should be \(\)$"),
    ("%x = program_id {axis = 0} : i64", r"should be \(i32\)"),
]


@pytest.mark.parametrize("line,msg", SHAPES, ids=[m.split(" = ")[1].split()[0] + str(i)
                                                  for i, (m, _) in enumerate(SHAPES)])
def test_shape_rule(line, msg):
    check(f"  {line} loc(7)", msg)


# ------------------------------------------------------------------ memory and descriptors
MEMORY = [
    ("%x = load %t : f32", r"^'load': load needs pointers, got tile<16xf32>$"),
    ("%x = load %tp, %ti : tile<16xf32>", r"load mask must be tile<16xi1>, got tile<16xi32>"),
    ("%x = load %p, %mask : f32", r"load mask must be i1, got tile<16xi1>"),
    ("%x = load %tp, %mask, %ti : tile<16xf32>", r"load other must be tile<16xf32>, got "
                                                 r"tile<16xi32>"),
    ("%x = load %tp, %mask : f32", r"should be \(tile<16xf32>\)"),
    ("store %t, %t", r"^'store': store needs pointers, got tile<16xf32>$"),
    ("store %tp, %ti", r"^'store': stored value must be tile<16xf32>, got tile<16xi32>$"),
    ("store %tp, %f", r"stored value must be tile<16xf32>, got f32"),
    ("store %tp, %t, %ti", r"store mask must be tile<16xi1>, got tile<16xi32>"),
    ("%d = make_desc %tp, %m, %m {block = [16]} : desc<f32, 16>",
     r"descriptor base must be a pointer, got tile<16xptr<f32>>"),
    ("%d = make_desc %p, %m {block = [16]} : desc<f32, 16>",
     r"descriptor of rank 1 needs 1 dims and 1 strides"),
    ("%d = make_desc %p, %f, %f {block = [16]} : desc<f32, 16>",
     r"descriptor sizes must be integers, got f32"),
    ("%d = make_desc %p, %m, %m {block = [12]} : desc<f32, 12>",
     r"descriptor block dims must be powers of two, got \(12,\)"),
    ("%d = make_desc %p, %m, %m {block = [16]} : desc<f16, 16>",
     r"should be \(desc<f32, 16>\)"),
    ("%x = desc_load %p, %n : tile<16xf32>", r"desc_load needs a descriptor, got ptr<f32>"),
    ("%x = desc_load %d1, %n, %n : tile<16xf32>", r"descriptor of rank 1 needs that many offsets"),
    ("%x = desc_load %d1, %n : tile<16xf16>", r"should be \(tile<16xf32>\)"),
    ("desc_store %p, %n, %t", r"desc_store needs a descriptor, got ptr<f32>"),
    ("desc_store %d1, %t", r"desc_store needs one offset per dim and a value"),
    ("desc_store %d1, %n, %ti", r"stored tile must be tile<16xf32>, got tile<16xi32>"),
]


@pytest.mark.parametrize("line,msg", MEMORY, ids=[m.replace("%", "").split(" = ")[-1].split()[0]
                                                  + str(i) for i, (m, _) in enumerate(MEMORY)])
def test_memory_rule(line, msg):
    check(f"""
  %c = cmp %ti, %ti {{pred = "eq"}} : tile<16xi1> loc(2)
  %mask = cmp %ti, %ti {{pred = "ne"}} : tile<16xi1> loc(3)
  %d1 = make_desc %p, %m, %m {{block = [16]}} : desc<f32, 16> loc(4)
  {line} loc(7)""", msg)


# ------------------------------------------------------------------ dot, reduce, scan
TILE_OPS = [
    ('%x = dot %t, %t, %t {input_precision = "ieee"} : tile<16xf32>', r"dot needs 2-D tiles"),
    ('%x = dot %mat, %mat, %acc {input_precision = "ieee"} : tile<16x16xf32>',
     r"dot inner dims differ: tile<16x8xf32> @ tile<16x8xf32>"),
    ('%x = dot %mat, %matT, %mat {input_precision = "ieee"} : tile<16x8xf32>',
     r"dot accumulator tile<16x8xf32> does not fit tile<16x8xf32> @ tile<8x16xf32>"),
    ('%x = dot %mat, %matTh, %acc {input_precision = "ieee"} : tile<16x16xf32>',
     r"dot operands differ in type: f32 vs f16"),
    ('%x = dot %mat, %matT, %acc {input_precision = "tf64"} : tile<16x16xf32>',
     r"^'dot': unknown input_precision 'tf64'$"),
    ('%x = dot %mat, %matT, %acc : tile<16x16xf32>', r"missing attribute 'input_precision'"),
    ('%x = dot %mat, %matT, %acc {input_precision = "ieee"} : tile<16x16xf16>',
     r"should be \(tile<16x16xf32>\)"),
    ('%x = reduce %mat {axis = 2, kind = "sum"} : f32',
     r"^'reduce': reduce axis 2 out of range for tile<16x8xf32>$"),
    ('%x = reduce %mat {axis = -1, kind = "sum"} : f32', r"reduce axis -1 out of range"),
    ('%x = reduce %mat {axis = 0, kind = "mean"} : tile<8xf32>', r"unknown reduction 'mean'"),
    ('%x = reduce %f {axis = 0, kind = "sum"} : f32', r"reduce needs a tile, got f32"),
    ('%x = reduce %mat {axis = 1, kind = "sum"} : tile<8xf32>', r"should be \(tile<16xf32>\)"),
    ('%x = reduce %t {axis = 0, kind = "argmax"} : f32', r"should be \(i32\)"),
    ('%x = scan %mat {axis = 2, kind = "sum"} : tile<16x8xf32>',
     r"^'scan': bad scan axis for tile<16x8xf32>$"),
    ('%x = scan %mat {axis = 0, kind = "argmax"} : tile<16x8xf32>', r"unknown scan 'argmax'"),
]


@pytest.mark.parametrize("line,msg", TILE_OPS, ids=[m.split(" = ")[1].split()[0] + str(i)
                                                    for i, (m, _) in enumerate(TILE_OPS)])
def test_tile_op_rule(line, msg):
    check(f"""
  %matT = permute %mat {{order = [1, 0]}} : tile<8x16xf32> loc(2)
  %matTh = cast %matT {{to = f16}} : tile<8x16xf16> loc(3)
  %acc = constant {{value = 0.0}} : tile<16x16xf32> loc(4)
  {line} loc(7)""", msg)


# ------------------------------------------------------------------ control flow
C = """  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(3)
  %b = cmp %n, %c0 {pred = "gt"} : i1 loc(4)
"""

CONTROL = [
    # for
    ("""%r = for %c0, %n, %c1, %f : f32 loc(7) (%i: i32, %a: f32) {
    yield %n loc(8)
  }""", r"^'for': for yields \(i32\) but must yield \(f32\)$"),
    ("""%r = for %c0, %n, %c1, %f : f32 loc(7) (%i: i32, %a: f32) {
    yield loc(8)
  }""", r"for yields \(\) but must yield \(f32\)"),
    ("""for %c0, %n, %c1 loc(7) (%i: i32) {
    %x = add %i, %i : i32 loc(8)
  }""", r"^'for': for region must end in yield$"),
    ("""%r = for %c0, %n, %c1, %f : f32 loc(7) (%i: i32) {
    yield %f loc(8)
  }""", r"loop body arguments must be the index and the iteration values"),
    ("""for %c0, %m, %c1 loc(7) (%i: i32) {
    yield loc(8)
  }""", r"loop bounds must share one type"),
    ("""for %f, %f, %f loc(7) (%i: f32) {
    yield loc(8)
  }""", r"loop bounds must be integers, got f32"),
    ("""%r = for %c0, %n, %c1, %f : i32 loc(7) (%i: i32, %a: f32) {
    yield %a loc(8)
  }""", r"'for': result types \(i32\) should be \(f32\)"),
    ("""for %c0, %n, %c1 {bogus = 1} loc(7) (%i: i32) {
    yield loc(8)
  }""", r"unknown attribute 'bogus'"),
    # if
    ("""%r = if %n : f32 loc(7) () {
    yield %f loc(8)
  } () {
    yield %f loc(9)
  }""", r"^'if': if condition must be i1, got i32$"),
    ("""%r = if %b : f32 loc(7) () {
    yield %f loc(8)
  } () {
    yield %n loc(9)
  }""", r"^'if': if yields \(i32\) but must yield \(f32\)$"),
    ("""%r = if %b : f32 loc(7) () {
    yield %f loc(8)
  } () {
    yield %f, %f loc(9)
  }""", r"if yields \(f32, f32\) but must yield \(f32\)"),
    ("""if %b loc(7) () {
    yield loc(8)
  } () {
    %x = add %n, %n : i32 loc(9)
  }""", r"if region must end in yield"),
    ("""if %b loc(7) (%x: i32) {
    yield loc(8)
  } () {
    yield loc(9)
  }""", r"if regions take no arguments"),
    ("""if %b loc(7) () {
    yield loc(8)
  }""", r"'if': needs 2 regions, has 1"),
    # while
    ("""%r = while %c0 : i32 loc(7) (%x: f32) {
    condition %b, %x loc(8)
  } (%y: i32) {
    yield %y loc(9)
  }""", r"^'while': while 'before' args must match the inits$"),
    ("""%r = while %c0 : i32 loc(7) (%x: i32) {
    yield %x loc(8)
  } (%y: i32) {
    yield %y loc(9)
  }""", r"while 'before' must end in condition"),
    ("""%r = while %c0 : i32 loc(7) (%x: i32) {
    condition %x, %x loc(8)
  } (%y: i32) {
    yield %y loc(9)
  }""", r"while condition must be i1"),
    ("""%r = while %c0 : i32 loc(7) (%x: i32) {
    condition %b, %f loc(8)
  } (%y: f32) {
    yield %c0 loc(9)
  }""", r"condition must forward the results' types"),
    ("""%r = while %c0 : i32 loc(7) (%x: i32) {
    condition %b, %x loc(8)
  } (%y: f32) {
    yield %c0 loc(9)
  }""", r"while 'after' args must match the condition"),
    ("""%r = while %c0 : i32 loc(7) (%x: i32) {
    condition %b, %x loc(8)
  } (%y: i32) {
    yield %f loc(9)
  }""", r"^'while': while yields \(f32\) but must yield \(i32\)$"),
    ("""%r = while %c0 : i32 loc(7) (%x: i32) {
    condition %b, %x loc(8)
  } (%y: i32) {
    %z = add %y, %y : i32 loc(9)
  }""", r"while region must end in yield"),
]


@pytest.mark.parametrize("line,msg", CONTROL, ids=[f"{m.split(' loc')[0].split()[-1]}{i}"
                                                   for i, (m, _) in enumerate(CONTROL)])
def test_control_flow_rule(line, msg):
    check(C + "  " + line, msg)


def test_ops_inside_regions_are_verified():
    check(C + """  for %c0, %n, %c1 loc(5) (%i: i32) {
    %r = if %b : i32 loc(6) () {
      %x = add %i, %f : i32 loc(7)
      yield %x loc(8)
    } () {
      yield %i loc(9)
    }
    yield loc(10)
  }""", r"'add': operand types differ: i32, f32")


# ------------------------------------------------------------------ malformed attributes
@pytest.mark.parametrize("line,msg", [
    ('%x = arange {end = "8", start = 0} : tile<8xi32>', r"^'arange': malformed op \(TypeError"),
    ('%x = expand_dims %t {axis = "0"} : tile<1x16xf32>', r"^'expand_dims': malformed op"),
    ("%x = permute %mat {order = 1} : tile<8x16xf32>", r"^'permute': malformed op"),
    ("%x = bitcast %d1 {to = i32} : i32", r"^'bitcast': malformed op \(AttributeError"),
    ('%x = reduce %t {axis = 0.5, kind = "sum"} : f32', r"^'reduce': malformed op"),
    ("%x = program_id {axis = [0]} : i32", r"^'program_id': axis must be 0, 1 or 2$"),
])
def test_malformed_attribute_is_a_diagnostic(line, msg):
    """An attribute of the wrong kind is reported at the op, not a Python crash."""
    check(f"  %d1 = make_desc %p, %m, %m {{block = [16]}} : desc<f32, 16> loc(2)\n"
          f"  {line} loc(7)", msg)


# ------------------------------------------------------------------ parser errors
def parse_error(text: str) -> VerifyError:
    with pytest.raises(VerifyError) as info:
        mir.parse(text)
    return info.value


def check_parse_error(text: str, msg: str, line: int, col: int):
    """The error names ``<ir>:line:col``, shows that line of the text and a caret."""
    e = parse_error(text)
    head, src, caret = str(e).split("\n")
    assert head == f"<ir>:{line}:{col}: {msg}", str(e)
    assert src == "    " + text.splitlines()[line - 1]
    assert caret == "    " + " " * (col - 1) + "^"


def test_parser_syntax_error():
    text = module_text("  %a = add %n, %n : i32 loc(2)\n  %b = add %a %n : i32 loc(3)")
    check_parse_error(text, "syntax error", 4, 15)


def test_parser_syntax_error_in_a_type():
    text = module_text("  %a = add %n, %n : tile<16xq32> loc(2)")
    check_parse_error(text, "syntax error", 3, text.splitlines()[2].index("q32") + 1)


def test_parser_undefined_value():
    text = module_text("  %a = add %n, %nope : i32 loc(2)")
    check_parse_error(text, "use of undefined value %nope", 3, 3)


def test_parser_value_from_another_region_is_undefined():
    text = module_text(C + """  for %c0, %n, %c1 loc(5) (%i: i32) {
    yield loc(6)
  }
  %x = add %i, %i : i32 loc(7)""")
    line = text.splitlines().index("  %x = add %i, %i : i32 loc(#0:7:0)") + 1
    check_parse_error(text, "use of undefined value %i", line, 3)


def test_parser_unknown_op():
    text = module_text("  %a = frobnicate %n : i32 loc(2)")
    check_parse_error(text, "unknown op 'frobnicate'", 3, 3)


def test_parser_result_count_mismatch():
    text = module_text("  %a, %b = add %n, %n : i32 loc(2)")
    check_parse_error(text, "2 results but 1 result types", 3, 3)


def test_parser_value_defined_twice():
    text = module_text("  %a = add %n, %n : i32 loc(2)\n  %a = add %n, %n : i32 loc(3)")
    check_parse_error(text, "value %a defined twice", 4, 3)


def test_parser_undeclared_source_file():
    text = module_text("  %a = add %n, %n : i32 loc(#3:2:0)")
    e = parse_error(text)
    assert str(e).startswith("<ir>:3:") and "undeclared source file #3" in str(e)


def test_parser_function_defined_twice():
    text = module_text("", "func @k(%x: i32) -> () loc(#0:9:0) {\n  return loc(#0:9:0)\n}\n")
    e = parse_error(text)
    assert "function @k defined twice" in str(e)
