def test_invariant_chain_is_hoisted(ir):
    m = ir.run("""
kernel @k(%p: ptr<f32>, %x: f32, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %r = for %c0, %n, %c1, %x : f32 loc(3) (%i: i32, %acc: f32) {
    %two = constant {value = 2.0} : f32 loc(4)
    %s = mul %x, %two : f32 loc(5)
    %e = exp %s : f32 loc(6)
    %fi = cast %i {to = f32} : f32 loc(7)
    %t = add %acc, %e : f32 loc(8)
    %u = add %t, %fi : f32 loc(9)
    %l = load %p : f32 loc(10)
    %v = add %u, %l : f32 loc(11)
    yield %v loc(12)
  }
  store %p, %r loc(13)
  return loc(14)
}
""", "licm")
    # the load reads only %p but is impure: it stays
    ir.check(m, """
kernel @k(%p: ptr<f32>, %x: f32, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %two = constant {value = 2.0} : f32 loc(4)
  %s = mul %x, %two : f32 loc(5)
  %e = exp %s : f32 loc(6)
  %r = for %c0, %n, %c1, %x : f32 loc(3) (%i: i32, %acc: f32) {
    %fi = cast %i {to = f32} : f32 loc(7)
    %t = add %acc, %e : f32 loc(8)
    %u = add %t, %fi : f32 loc(9)
    %l = load %p : f32 loc(10)
    %v = add %u, %l : f32 loc(11)
    yield %v loc(12)
  }
  store %p, %r loc(13)
  return loc(14)
}
""")


def test_nested_loops_hoist_through_both_levels(ir):
    m = ir.run("""
kernel @k(%p: ptr<i32>, %x: i32, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %r = for %c0, %n, %c1, %c0 : i32 loc(3) (%i: i32, %a: i32) {
    %s = for %c0, %n, %c1, %a : i32 loc(4) (%j: i32, %b: i32) {
      %xx = mul %x, %x : i32 loc(5)
      %xi = mul %x, %i : i32 loc(6)
      %t = add %b, %xx : i32 loc(7)
      %u = add %t, %xi : i32 loc(8)
      %v = add %u, %j : i32 loc(9)
      yield %v loc(10)
    }
    yield %s loc(11)
  }
  store %p, %r loc(12)
  return loc(13)
}
""", "licm")
    ir.check(m, """
kernel @k(%p: ptr<i32>, %x: i32, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %xx = mul %x, %x : i32 loc(5)
  %r = for %c0, %n, %c1, %c0 : i32 loc(3) (%i: i32, %a: i32) {
    %xi = mul %x, %i : i32 loc(6)
    %s = for %c0, %n, %c1, %a : i32 loc(4) (%j: i32, %b: i32) {
      %t = add %b, %xx : i32 loc(7)
      %u = add %t, %xi : i32 loc(8)
      %v = add %u, %j : i32 loc(9)
      yield %v loc(10)
    }
    yield %s loc(11)
  }
  store %p, %r loc(12)
  return loc(13)
}
""")


def test_ops_in_if_regions_are_not_hoisted(ir):
    src = """
kernel @k(%p: ptr<i32>, %x: i32, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %r = for %c0, %n, %c1, %c0 : i32 loc(3) (%i: i32, %a: i32) {
    %c = cmp %i, %x {pred = "lt"} : i1 loc(4)
    %s = if %c : i32 loc(5) () {
      %d = div %x, %n : i32 loc(6)
      yield %d loc(7)
    } () {
      yield %a loc(8)
    }
    yield %s loc(9)
  }
  store %p, %r loc(10)
  return loc(11)
}
"""
    ir.check(ir.run(src, "licm"), src)


def test_loop_inside_if_hoists_into_the_if_region(ir):
    m = ir.run("""
kernel @k(%p: ptr<i32>, %x: i32, %n: i32, %c: i1) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %r = if %c : i32 loc(3) () {
    %s = for %c0, %n, %c1, %c0 : i32 loc(4) (%i: i32, %a: i32) {
      %xx = mul %x, %x : i32 loc(5)
      %t = add %a, %xx : i32 loc(6)
      yield %t loc(7)
    }
    yield %s loc(8)
  } () {
    yield %x loc(9)
  }
  store %p, %r loc(10)
  return loc(11)
}
""", "licm")
    ir.check(m, """
kernel @k(%p: ptr<i32>, %x: i32, %n: i32, %c: i1) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %r = if %c : i32 loc(3) () {
    %xx = mul %x, %x : i32 loc(5)
    %s = for %c0, %n, %c1, %c0 : i32 loc(4) (%i: i32, %a: i32) {
      %t = add %a, %xx : i32 loc(6)
      yield %t loc(7)
    }
    yield %s loc(8)
  } () {
    yield %x loc(9)
  }
  store %p, %r loc(10)
  return loc(11)
}
""")
