import pytest

from mutile.errors import CompilationError


def test_call_is_replaced_by_callee_body(ir):
    m = ir.run("""
kernel @k(%p: ptr<i32>, %a: i32) -> () loc(1) {
  %r = call %a {callee = "twice"} : i32 loc(2)
  store %p, %r loc(3)
  return loc(4)
}
func @twice(%x: i32) -> (i32) loc(10) {
  %y = add %x, %x : i32 loc(11)
  return %y loc(12)
}
""", "inline")
    ir.check(m, """
kernel @k(%p: ptr<i32>, %a: i32) -> () loc(1) {
  %y = add %a, %a : i32 loc(11)
  store %p, %y loc(3)
  return loc(4)
}
""")
    assert list(m.funcs) == ["k"]


def test_nested_calls_multiple_results_and_regions(ir):
    # @k calls @outer inside a for; @outer calls @inner twice (once inside an if)
    m = ir.run("""
kernel @k(%p: ptr<i32>, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %r = for %c0, %n, %c1, %c0 : i32 loc(3) (%i: i32, %acc: i32) {
    %s, %d = call %acc, %i {callee = "outer"} : i32, i32 loc(4)
    %t = add %s, %d : i32 loc(5)
    yield %t loc(6)
  }
  store %p, %r loc(7)
  return loc(8)
}
func @outer(%x: i32, %y: i32) -> (i32, i32) loc(20) {
  %a = call %x {callee = "inner"} : i32 loc(21)
  %c = cmp %a, %y {pred = "lt"} : i1 loc(22)
  %b = if %c : i32 loc(23) () {
    %q = call %y {callee = "inner"} : i32 loc(24)
    yield %q loc(25)
  } () {
    yield %y loc(26)
  }
  return %a, %b loc(27)
}
func @inner(%z: i32) -> (i32) loc(30) {
  %w = mul %z, %z : i32 loc(31)
  return %w loc(32)
}
""", "inline")
    ir.check(m, """
kernel @k(%p: ptr<i32>, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %r = for %c0, %n, %c1, %c0 : i32 loc(3) (%i: i32, %acc: i32) {
    %a = mul %acc, %acc : i32 loc(31)
    %c = cmp %a, %i {pred = "lt"} : i1 loc(22)
    %b = if %c : i32 loc(23) () {
      %q = mul %i, %i : i32 loc(31)
      yield %q loc(25)
    } () {
      yield %i loc(26)
    }
    %t = add %a, %b : i32 loc(5)
    yield %t loc(6)
  }
  store %p, %r loc(7)
  return loc(8)
}
""")
    assert ir.ops(m).count("call") == 0


def test_each_call_gets_its_own_copy(ir):
    m = ir.run("""
kernel @k(%p: ptr<f32>, %a: f32) -> () loc(1) {
  %r = call %a {callee = "sq"} : f32 loc(2)
  %s = call %r {callee = "sq"} : f32 loc(3)
  %t = call %s {callee = "id"} : f32 loc(4)
  store %p, %t loc(5)
  return loc(6)
}
func @sq(%x: f32) -> (f32) loc(10) {
  %y = mul %x, %x : f32 loc(11)
  return %y loc(12)
}
func @id(%x: f32) -> (f32) loc(20) {
  return %x loc(21)
}
""", "inline")
    ir.check(m, """
kernel @k(%p: ptr<f32>, %a: f32) -> () loc(1) {
  %y1 = mul %a, %a : f32 loc(11)
  %y2 = mul %y1, %y1 : f32 loc(11)
  store %p, %y2 loc(5)
  return loc(6)
}
""")


def test_callee_with_side_effects_and_no_results(ir):
    m = ir.run("""
kernel @k(%p: ptr<i32>, %a: i32) -> () loc(1) {
  call %p, %a {callee = "put"} loc(2)
  call %p, %a {callee = "put"} loc(3)
  return loc(4)
}
func @put(%q: ptr<i32>, %v: i32) -> () loc(10) {
  store %q, %v loc(11)
  return loc(12)
}
""", "inline")
    assert ir.ops(m) == ["store", "store", "return"]


RECURSIVE = """
kernel @k(%a: i32) -> () loc(1) {
  %r = call %a {callee = "f"} : i32 loc(2)
  return loc(3)
}
func @f(%x: i32) -> (i32) loc(10) {
  %y = call %x {callee = "g"} : i32 loc(11)
  return %y loc(12)
}
func @g(%x: i32) -> (i32) loc(20) {
  %c = cmp %x, %x {pred = "eq"} : i1 loc(21)
  %y = if %c : i32 loc(22) () {
    %z = call %x {callee = "f"} : i32 loc(23)
    yield %z loc(24)
  } () {
    yield %x loc(25)
  }
  return %y loc(26)
}
"""


def test_recursion_is_an_error_at_the_recursive_call(ir):
    with pytest.raises(CompilationError) as e:
        ir.run(RECURSIVE, "inline")
    assert e.value.loc.line == 23 and e.value.loc.file == "t.py"
    assert "recursive call to @f" in e.value.msg
    assert "@f -> @g -> @f" in e.value.msg
    assert str(e.value).startswith("t.py:23:1: error:")


def test_self_recursion_of_the_kernel(ir):
    with pytest.raises(CompilationError, match="recursive call to @k") as e:
        ir.run("""
kernel @k(%a: i32) -> () loc(1) {
  call %a {callee = "k"} loc(2)
  return loc(3)
}
""", "inline")
    assert e.value.loc.line == 2


def test_module_without_calls_keeps_only_the_kernel(ir):
    m = ir.run("""
kernel @k(%a: i32) -> () loc(1) {
  return loc(2)
}
func @unused(%x: i32) -> (i32) loc(10) {
  return %x loc(11)
}
""", "inline")
    ir.check(m, """
kernel @k(%a: i32) -> () loc(1) {
  return loc(2)
}
""")
