from pathlib import Path

import pytest

import mutile.passes as passes
from mutile.errors import VerifyError
from mutile.ir import parse
from mutile.passes import PASSES, PIPELINE, run_pipeline

SRC = """
kernel @k(%p: ptr<f32>, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %x = load %p : f32 loc(3)
  %r = for %c0, %n, %c1, %x : f32 loc(4) (%i: i32, %acc: f32) {
    %y = call %x {callee = "scale"} : f32 loc(5)
    %z = call %x {callee = "scale"} : f32 loc(6)
    %s = add %y, %z : f32 loc(7)
    %t = add %acc, %s : f32 loc(8)
    yield %t loc(9)
  }
  store %p, %r loc(10)
  return loc(11)
}
func @scale(%v: f32) -> (f32) loc(20) {
  %one = constant {value = 1.0} : f32 loc(21)
  %two = constant {value = 2.0} : f32 loc(22)
  %k = mul %one, %two : f32 loc(23)
  %w = mul %v, %k : f32 loc(24)
  return %w loc(25)
}
"""


def test_every_pass_file_registers_its_own_name():
    files = {p.stem for p in Path(passes.__file__).parent.glob("*.py")}
    assert set(PASSES) == {f.replace("_", "-") for f in files - {"__init__", "registry", "rewrite"}}
    assert PIPELINE == ["inline", "canonicalize", "cse", "licm", "dce"]


def test_pipeline_result_and_stage_dumps(ir):
    seen = []
    m, stages = run_pipeline(ir.parse(SRC), verify=True, dump=lambda n, t: seen.append(n))
    ir.check(m, """
kernel @k(%p: ptr<f32>, %n: i32) -> () loc(1) {
  %c0 = constant {value = 0} : i32 loc(2)
  %c1 = constant {value = 1} : i32 loc(2)
  %x = load %p : f32 loc(3)
  %two = constant {value = 2.0} : f32 loc(22)
  %w = mul %x, %two : f32 loc(24)
  %s = add %w, %w : f32 loc(7)
  %r = for %c0, %n, %c1, %x : f32 loc(4) (%i: i32, %acc: f32) {
    %t = add %acc, %s : f32 loc(8)
    yield %t loc(9)
  }
  store %p, %r loc(10)
  return loc(11)
}
""")
    assert list(stages) == PIPELINE == seen
    assert stages["dce"] == str(m)
    assert "call" in SRC and "call" not in stages["inline"] and "@scale" not in stages["inline"]
    assert "constant {value = 2.0}" in stages["canonicalize"]
    assert stages["cse"].count("mul %x") == 1 < stages["canonicalize"].count("mul %x")
    assert stages["licm"].index("%s = add") < stages["licm"].index("for")
    assert "constant {value = 1.0}" in stages["licm"] and "1.0" not in stages["dce"]
    for name, text in stages.items():  # each stage's text reads back
        assert str(parse(text)) == text, name


def test_selected_stages_only(ir):
    m, stages = run_pipeline(ir.parse(SRC), ["inline", "dce"], verify=True)
    assert list(stages) == ["inline", "dce"]
    assert stages["dce"].count("mul") == 2 * stages["dce"].count("mul %one") == 4


def test_unknown_pass_is_named(ir):
    with pytest.raises(ValueError, match="unknown pass 'gvn'"):
        run_pipeline(ir.parse(SRC), ["inline", "gvn"])


@pytest.fixture
def broken_pass(monkeypatch):
    """A registered pass that leaves a use of an erased value behind."""
    def drop_load(module):
        body = module.entry.body
        body.ops = [op for op in body.ops if op.name != "load"]
        return module
    monkeypatch.setitem(PASSES, "drop-load", drop_load)
    return "drop-load"


def test_verify_blames_the_pass(ir, broken_pass):
    with pytest.raises(VerifyError, match="after pass 'drop-load': 'for': uses a value") as e:
        run_pipeline(ir.parse(SRC), ["inline", broken_pass], verify=True)
    assert e.value.loc.line == 4


def test_verify_by_environment(ir, broken_pass, monkeypatch):
    run_pipeline(ir.parse(SRC), [broken_pass])  # not verified: no error
    monkeypatch.setenv("MUTILE_VERIFY", "1")
    with pytest.raises(VerifyError, match="after pass 'drop-load'"):
        run_pipeline(ir.parse(SRC), [broken_pass])


def test_invalid_input_is_reported_before_the_passes(ir):
    m = ir.parse(SRC)
    m.entry.body.ops.pop(0)
    with pytest.raises(VerifyError, match="before the passes"):
        run_pipeline(m, verify=True)
