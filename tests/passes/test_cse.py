import pytest

from mutile.passes.cse import attr_key


def test_identical_pure_ops_merge_in_a_block(ir):
    m = ir.run("""
kernel @k(%p: ptr<i32>, %x: i32, %y: i32) -> () loc(1) {
  %a = mul %x, %y : i32 loc(2)
  %b = mul %x, %y : i32 loc(3)
  %c = add %a, %x : i32 loc(4)
  %d = add %b, %x : i32 loc(5)
  %e = sub %c, %d : i32 loc(6)
  store %p, %e loc(7)
  return loc(8)
}
""", "cse")
    # %b merges into %a, which makes %d identical to %c
    ir.check(m, """
kernel @k(%p: ptr<i32>, %x: i32, %y: i32) -> () loc(1) {
  %a = mul %x, %y : i32 loc(2)
  %c = add %a, %x : i32 loc(4)
  %e = sub %c, %c : i32 loc(6)
  store %p, %e loc(7)
  return loc(8)
}
""")


@pytest.mark.parametrize("first, second", [
    ('cmp %x, %y {pred = "lt"} : i1', 'cmp %x, %y {pred = "gt"} : i1'),   # attrs differ
    ("sub %x, %y : i32", "sub %y, %x : i32"),                            # operands differ
    ("constant {value = 1} : i32", "constant {value = 1} : tile<4xi32>"),   # types differ
    ("constant {value = 0.0} : f32", "constant {value = -0.0} : f32"),      # -0.0 != 0.0
    ("constant {value = 1} : i1", "constant {value = true} : i1"),          # int vs bool
    ("load %p : i32", "load %p : i32"),                                    # impure
])
def test_different_or_impure_ops_are_not_merged(ir, first, second):
    m = ir.run(f"""
kernel @k(%p: ptr<i32>, %x: i32, %y: i32) -> () loc(1) {{
  %a = {first} loc(2)
  %b = {second} loc(3)
  return loc(4)
}}
""", "cse")
    assert len(m.entry.body.ops) == 3


def test_outer_ops_are_reused_in_nested_regions(ir):
    m = ir.run("""
kernel @k(%p: ptr<f32>, %x: f32, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %a = mul %x, %x : f32 loc(3)
  %r = for %c0, %n, %c1, %a : f32 loc(4) (%i: i32, %acc: f32) {
    %one = constant {value = 1} : i32 loc(5)
    %b = mul %x, %x : f32 loc(6)
    %c = cmp %i, %one {pred = "lt"} : i1 loc(7)
    %s = if %c : f32 loc(8) () {
      %d = mul %x, %x : f32 loc(9)
      %e = add %acc, %d : f32 loc(10)
      yield %e loc(11)
    } () {
      %f = add %acc, %b : f32 loc(12)
      yield %f loc(13)
    }
    yield %s loc(14)
  }
  store %p, %r loc(15)
  return loc(16)
}
""", "cse")
    ir.check(m, """
kernel @k(%p: ptr<f32>, %x: f32, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %a = mul %x, %x : f32 loc(3)
  %r = for %c0, %n, %c1, %a : f32 loc(4) (%i: i32, %acc: f32) {
    %c = cmp %i, %c1 {pred = "lt"} : i1 loc(7)
    %s = if %c : f32 loc(8) () {
      %e = add %acc, %a : f32 loc(10)
      yield %e loc(11)
    } () {
      %f = add %acc, %a : f32 loc(12)
      yield %f loc(13)
    }
    yield %s loc(14)
  }
  store %p, %r loc(15)
  return loc(16)
}
""")


def test_sibling_and_enclosed_regions_do_not_leak(ir):
    # %t (then) and %u (else) do not dominate each other; %w after the if is not
    # dominated by %t inside it. Identical ifs (ops with regions) are not merged either.
    src = """
kernel @k(%p: ptr<i32>, %x: i32, %c: i1) -> () loc(1) {
  %r = if %c : i32 loc(2) () {
    %t = add %x, %x : i32 loc(3)
    yield %t loc(4)
  } () {
    %u = add %x, %x : i32 loc(5)
    yield %u loc(6)
  }
  %s = if %c : i32 loc(2) () {
    %t2 = add %x, %x : i32 loc(3)
    yield %t2 loc(4)
  } () {
    %u2 = add %x, %x : i32 loc(5)
    yield %u2 loc(6)
  }
  %w = add %x, %x : i32 loc(7)
  %v = add %r, %s : i32 loc(8)
  %z = add %v, %w : i32 loc(9)
  store %p, %z loc(10)
  return loc(11)
}
"""
    m = ir.run(src, "cse")
    ir.check(m, src)


def test_attr_key_distinguishes_bits_and_types():
    assert attr_key(0.0) != attr_key(-0.0)
    assert attr_key(1) != attr_key(True) and attr_key(1) != attr_key(1.0)
    assert attr_key(float("nan")) == attr_key(float("nan"))
    assert attr_key([1, 0]) == attr_key((1, 0)) != attr_key([0, 1])
