def test_unused_pure_chains_go_memory_ops_stay(ir):
    m = ir.run("""
kernel @k(%p: ptr<f32>, %x: f32) -> () loc(1) {
  %a = mul %x, %x : f32 loc(2)
  %b = add %a, %x : f32 loc(3)
  %c = exp %b : f32 loc(4)
  %l = load %p : f32 loc(5)
  %u = load %p : f32 loc(6)
  %s = add %l, %x : f32 loc(7)
  store %p, %s loc(8)
  print %x {prefix = "x"} loc(9)
  return loc(10)
}
""", "dce")
    # the unused load %u stays: loads are impure (they may fault)
    ir.check(m, """
kernel @k(%p: ptr<f32>, %x: f32) -> () loc(1) {
  %l = load %p : f32 loc(5)
  %u = load %p : f32 loc(6)
  %s = add %l, %x : f32 loc(7)
  store %p, %s loc(8)
  print %x {prefix = "x"} loc(9)
  return loc(10)
}
""")


def test_returned_values_and_arguments_stay(ir):
    src = """
kernel @k(%x: i32, %unused: f32) -> (i32) loc(1) {
  %a = add %x, %x : i32 loc(2)
  return %a loc(3)
}
"""
    ir.check(ir.run(src, "dce"), src)


LOOP = """
kernel @k(%p: ptr<f32>, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %f = constant {value = 1.0} : f32 loc(2)
  %g = constant {value = 2.0} : f32 loc(2)
  %r, %dead = for %c0, %n, %c1, %f, %g : f32, f32 loc(3) (%i: i32, %acc: f32, %d: f32) {
    %a = add %acc, %f : f32 loc(4)
    %b = mul %d, %d : f32 loc(5)
    %e = add %b, %a : f32 loc(6)
    yield %a, %e loc(7)
  }
  store %p, %r loc(8)
  return loc(9)
}
"""


def test_dead_loop_carried_value_is_removed(ir):
    # %d feeds only itself (through %b, %e) and %dead is unused
    ir.check(ir.run(LOOP, "dce"), """
kernel @k(%p: ptr<f32>, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %f = constant {value = 1.0} : f32 loc(2)
  %r = for %c0, %n, %c1, %f : f32 loc(3) (%i: i32, %acc: f32) {
    %a = add %acc, %f : f32 loc(4)
    yield %a loc(7)
  }
  store %p, %r loc(8)
  return loc(9)
}
""")


def test_loop_carried_value_read_by_a_live_one_stays(ir):
    src = LOOP.replace("yield %a, %e", "%h = add %a, %d : f32 loc(6)\n    yield %h, %e")
    m = ir.run(src, "dce")
    assert [len(op.results) for op in m.entry.body.ops if op.name == "for"] == [2]


def test_loop_without_effects_or_used_results_is_removed(ir):
    m = ir.run(LOOP.replace("store %p, %r loc(8)", ""), "dce")
    assert ir.ops(m) == ["return"]


def test_loop_with_a_store_stays_without_its_dead_values(ir):
    m = ir.run("""
kernel @k(%p: ptr<f32>, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %f = constant {value = 1.0} : f32 loc(2)
  %r = for %c0, %n, %c1, %f : f32 loc(3) (%i: i32, %acc: f32) {
    %a = add %acc, %f : f32 loc(4)
    %unused = mul %a, %a : f32 loc(5)
    store %p, %f loc(6)
    yield %a loc(7)
  }
  return loc(9)
}
""", "dce")
    ir.check(m, """
kernel @k(%p: ptr<f32>, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %f = constant {value = 1.0} : f32 loc(2)
  for %c0, %n, %c1 loc(3) (%i: i32) {
    store %p, %f loc(6)
    yield loc(7)
  }
  return loc(9)
}
""")


def test_if_keeps_only_used_results(ir):
    m = ir.run("""
kernel @k(%p: ptr<i32>, %c: i1, %x: i32) -> () loc(1) {
  %r, %s = if %c : i32, i32 loc(2) () {
    %a = add %x, %x : i32 loc(3)
    %b = mul %x, %x : i32 loc(4)
    yield %a, %b loc(5)
  } () {
    %d = sub %x, %x : i32 loc(6)
    yield %x, %d loc(7)
  }
  %t, %u = if %c : i32, i32 loc(8) () {
    yield %x, %x loc(9)
  } () {
    yield %x, %x loc(10)
  }
  store %p, %s loc(11)
  return loc(12)
}
""", "dce")
    ir.check(m, """
kernel @k(%p: ptr<i32>, %c: i1, %x: i32) -> () loc(1) {
  %s = if %c : i32 loc(2) () {
    %b = mul %x, %x : i32 loc(4)
    yield %b loc(5)
  } () {
    %d = sub %x, %x : i32 loc(6)
    yield %d loc(7)
  }
  store %p, %s loc(11)
  return loc(12)
}
""")


def test_while_and_assert_stay(ir):
    src = """
kernel @k(%x: i32) -> () loc(1) {
  %r = while %x : i32 loc(2) (%a: i32) {
    %c = cmp %a, %x {pred = "lt"} : i1 loc(3)
    %unused = add %a, %a : i32 loc(4)
    condition %c, %a loc(5)
  } (%b: i32) {
    %n = add %b, %b : i32 loc(6)
    yield %n loc(7)
  }
  %t = cmp %x, %x {pred = "eq"} : i1 loc(8)
  assert %t {msg = "x == x"} loc(9)
  return loc(10)
}
"""
    ir.check(ir.run(src, "dce"), src)
