"""The IR's text form is exact: ``parse(print(m)) == m`` and ``print(parse(t)) == t``.

Checked on the IR of every stage of real kernels (the templates and kernels below
that use every construct the frontend lowers), on the live module after each pass,
and on hand-written texts that use every attribute kind.
"""
import math

import pytest

import mutile
import mutile.language as ml
from mutile import ir as mir
from mutile.frontend import RuntimeArg, compile_kernel
from mutile.ir import types as T
from mutile.kernels.attention_basic import attention_fwd_kernel
from mutile.kernels.matmul import matmul_descriptor_kernel, matmul_kernel
from mutile.passes import PASSES, PIPELINE


def P(t):
    return T.PointerType(t)


# ------------------------------------------------------------------ kernels
@mutile.jit
def scale(x, s):
    return x * s


@mutile.jit
def softmax_row(x, SCALE: ml.constexpr):
    x = scale(x, SCALE)
    m = ml.max(x, axis=0)
    e = ml.exp(x - m)
    return e / ml.sum(e, axis=0)


@mutile.jit
def k_control(X, Y, n, BLOCK: ml.constexpr):
    pid = ml.program_id(0)
    offs = pid * BLOCK + ml.arange(0, BLOCK)
    acc = ml.zeros([BLOCK], ml.float32)
    for i in ml.range(0, n, 2, num_stages=2):
        acc += ml.load(X + offs + i, mask=offs + i < n, other=0.0)
    j = 0
    total = 0.0
    while j < n:
        total += ml.load(Y + j)
        j += 3
    if total > 0:
        best = ml.max(acc, axis=0)
        idx = ml.argmax(acc, axis=0)
    else:
        best = ml.min(acc, axis=0)
        idx = ml.argmin(acc, axis=0)
    for k in ml.static_range(2):
        acc = acc * (k + 1.5)
    sel = best if n > 4 else total
    ml.store(Y + offs, softmax_row(acc, 0.5) + sel + idx, mask=offs < n)


@mutile.jit
def k_tiles(A, B, C, I, U, M, N, K: ml.constexpr):
    offs_m = ml.arange(0, 16)
    offs_k = ml.arange(0, K)
    a = ml.load(A + offs_m[:, None] * K + offs_k[None, :])
    b = ml.load(B + offs_k[:, None] * 16 + offs_m[None, :])
    c = ml.dot(a, b, input_precision="tf32")
    c = ml.dot(a.to(ml.float16), b.to(ml.float16), c)
    ints = ml.load(I + offs_m)
    bits = c.to(ml.int32, bitcast=True) ^ ml.xor_sum(ints, axis=0)
    back = (bits >> 1).to(ml.float32, bitcast=True)
    csum = ml.cumsum(ml.reshape(back, [256]), axis=0)
    cprod = ml.cumprod(ml.trans(ml.reshape(csum, [16, 16])), axis=1)
    u = ml.load(U + offs_m).to(ml.uint8)
    mixed = ml.where(u > 3, ml.abs(-ml.sqrt(cprod)), ml.fma(cprod, 2.0, 1.0))
    p3 = ml.permute(ml.expand_dims(mixed, 0), (2, 0, 1))
    total = ml.sum(ml.sum(p3, axis=2), axis=1) + ml.cdiv(M, 16) // 3 % 5
    x = ml.maximum(ml.minimum(total, 1e30), -1e-30)
    x = ml.clamp(x, float("-inf"), float("inf")) + (-0.0) + u.to(ml.float32)
    ml.device_print("x = \t\"quoted\" \\ ", x, u, hex=False)
    ml.device_assert(x == x, "no NaN 'here'\\")
    ml.assume(M > 0)
    ml.store(C + offs_m, x, mask=offs_m < ml.multiple_of(M, 16))
    ml.store(I + ml.max_contiguous(offs_m, 16), ml.umulhi(ints, N) << 2 | (ints & 7))


@mutile.jit
def k_descriptors(X, Y, M, N):
    d = ml.make_tensor_descriptor(X, shape=[M, N], strides=[N, 1], block_shape=[8, 16])
    e = ml.make_tensor_descriptor(Y, shape=[M, N], strides=[N, 1], block_shape=[8, 16])
    t = d.load([ml.program_id(0) * 8, 0])
    e.store([ml.program_id(0) * 8, 0], ml.log2(ml.exp2(t)) * 2)


@mutile.jit
def k_ñame(X):
    αβ = ml.load(X)  # Python names need not be ASCII
    ml.store(X, αβ + 1.0)


MATMUL_RUNTIME = {p: T.i32 for p in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                                     "stride_bn", "stride_cm", "stride_cn")}
ATTN_RUNTIME = {p: T.i32 for p in ("seq_q", "seq_k", "stride_h", "stride_m", "stride_kh",
                                   "stride_kn", "stride_oh", "stride_om")}

CASES = {
    "matmul-leaky_relu-f16": (matmul_kernel, dict(
        a_ptr=P(T.f16), b_ptr=P(T.f16), c_ptr=P(T.f16), **MATMUL_RUNTIME, BLOCK_M=32,
        BLOCK_N=32, BLOCK_K=16, GROUP_M=8, ACTIVATION="leaky_relu", INPUT_PRECISION="ieee")),
    "matmul-relu-f32-tf32": (matmul_kernel, dict(
        a_ptr=P(T.f32), b_ptr=P(T.f32), c_ptr=P(T.f32), **MATMUL_RUNTIME, BLOCK_M=16,
        BLOCK_N=64, BLOCK_K=32, GROUP_M=1, ACTIVATION="relu", INPUT_PRECISION="tf32")),
    "matmul-none-bf16": (matmul_kernel, dict(
        a_ptr=P(T.bf16), b_ptr=P(T.bf16), c_ptr=P(T.f32), **MATMUL_RUNTIME, BLOCK_M=64,
        BLOCK_N=16, BLOCK_K=64, GROUP_M=4, ACTIVATION="", INPUT_PRECISION="ieee")),
    "matmul-descriptor": (matmul_descriptor_kernel, dict(
        a_ptr=P(T.f16), b_ptr=P(T.f16), c_ptr=P(T.f32), M=T.i32, N=T.i32, K=T.i32,
        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)),
    "attention-causal": (attention_fwd_kernel, dict(
        Q=P(T.f16), K=P(T.f16), V=P(T.f16), Out=P(T.f16), sm_scale=T.f32, **ATTN_RUNTIME,
        HEAD_DIM=64, BLOCK_M=32, BLOCK_N=32, CAUSAL=True)),
    "attention": (attention_fwd_kernel, dict(
        Q=P(T.f32), K=P(T.f32), V=P(T.f32), Out=P(T.f32), sm_scale=T.f32, **ATTN_RUNTIME,
        HEAD_DIM=16, BLOCK_M=16, BLOCK_N=64, CAUSAL=False)),
    "control": (k_control, dict(X=P(T.f32), Y=P(T.f32), n=T.i32, BLOCK=64)),
    "tiles": (k_tiles, dict(A=P(T.f32), B=P(T.f32), C=P(T.f32), I=P(T.i32), U=P(T.u16),
                            M=T.i32, N=T.i32, K=16)),
    "descriptors": (k_descriptors, dict(X=P(T.bf16), Y=P(T.f32), M=T.i64, N=T.i32)),
    "unicode-names": (k_ñame, dict(X=P(T.f32))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_stage_round_trips(compile_ir, case):
    kernel, spec = CASES[case]
    # compile_ir verifies every stage's text, checks print(parse(text)) == text and
    # that the last stage parses back equal to the module the passes produced
    c = compile_ir(kernel, **spec)
    assert list(c.stages) == ["ir"] + PIPELINE
    assert c.stage("inline").funcs.keys() == {c.module.kernel}


@pytest.mark.parametrize("case", list(CASES))
def test_live_module_round_trips_after_each_pass(case):
    """Against the module objects the compiler built, not only against a re-parse."""
    kernel, spec = CASES[case]
    bindings = {p: v if p in kernel.constexpr_names else RuntimeArg(v) for p, v in spec.items()}
    m, _ = compile_kernel(kernel, bindings)
    for name in ["frontend"] + PIPELINE:
        if name != "frontend":
            m = PASSES[name](m)
        mir.verify(m)
        text = str(m)
        assert mir.parse(text) == m, name
        assert str(mir.parse(text)) == text, name


def test_kernels_use_what_they_claim(compile_ir):
    """The kernels above really contain the constructs this file means to cover."""
    ops = set()
    for case in ("control", "tiles", "descriptors"):
        kernel, spec = CASES[case]
        c = compile_ir(kernel, **spec)
        ops |= {op.name for st in ("ir", "dce") for op in c.stage(st).walk()}
    want = {"for", "while", "if", "yield", "condition", "call", "reduce", "scan", "dot", "cast",
            "bitcast", "make_desc", "desc_load", "desc_store", "print", "assert", "assume",
            "hint", "permute", "reshape", "expand_dims", "broadcast", "splat", "select", "fma"}
    assert want <= ops, want - ops


# ------------------------------------------------------------------ hand-written texts
WHILE_TEXT = '''\
#0 = "k.py"
#1 = "helpers/other file.py"
kernel @k(%p: ptr<f32>, %n: i32) -> () loc(#0:1:0) {
  %zero = constant {value = 0} : i32 loc(#0:2:4)
  %one = constant {value = 1} : i32 loc(#0:3:4)
  %i, %acc = while %zero, %zero : i32, i32 loc(#0:4:4) (%i_1: i32, %acc_1: i32) {
    %c = cmp %i_1, %n {pred = "lt"} : i1 loc(#0:4:10)
    condition %c, %i_1, %acc_1 loc(#0:4:4)
  } (%i_2: i32, %acc_2: i32) {
    %i_3 = add %i_2, %one : i32 loc(#0:5:8)
    %odd = and %i_2, %one : i32 loc(#0:6:8)
    %b = cmp %odd, %zero {pred = "ne"} : i1 loc(#0:6:8)
    %acc_3 = if %b : i32 loc(#1:7:8) () {
      %r = for %zero, %i_2, %one, %acc_2 : i32 loc(#1:8:12) (%j: i32, %a: i32) {
        %a_1 = add %a, %j : i32 loc(#1:9:16)
        yield %a_1 loc(#1:8:12)
      }
      yield %r loc(#1:7:8)
    } () {
      yield %acc_2 loc(#1:7:8)
    }
    yield %i_3, %acc_3 loc(#0:4:4)
  }
  %f = cast %acc {to = f32} : f32 loc(#0:10:4)
  store %p, %f loc(#0:10:4)
  return loc(#0:1:0)
}
'''


def test_hand_written_while_with_nested_regions():
    m = mir.verify(mir.parse(WHILE_TEXT))
    assert str(m) == WHILE_TEXT
    assert mir.parse(str(m)) == m
    loop = m.entry.body.ops[2]
    assert loop.name == "while" and [len(r.ops) for r in loop.regions] == [2, 5]
    inner_if = loop.regions[1].ops[3]
    assert inner_if.loc.file == "helpers/other file.py"
    assert inner_if.regions[0].ops[0].name == "for"


ATTRS_TEXT = '''\
#0 = "dir\\\\with \\"quotes\\".py"
kernel @attrs(%p: ptr<f32>, %x: tile<4x8xf32>) -> () loc(#0:1:0) {
  %r = arange {end = 4, start = -4} : tile<8xi32> loc(#0:2:0)
  %big = constant {value = -9223372036854775808} : i64 loc(#0:3:0)
  %u = constant {value = 18446744073709551615} : u64 loc(#0:3:1)
  %t = constant {value = true} : i1 loc(#0:3:2)
  %nz = constant {value = -0.0} : f32 loc(#0:4:0)
  %pz = constant {value = 0.0} : f32 loc(#0:4:1)
  %pinf = constant {value = inf} : f32 loc(#0:5:0)
  %ninf = constant {value = -inf} : f64 loc(#0:5:1)
  %nan = constant {value = nan} : f16 loc(#0:6:0)
  %tiny = constant {value = 5e-324} : f64 loc(#0:6:1)
  %e = constant {value = 1.5e+300} : f64 loc(#0:6:2)
  %h = cast %nan {to = bf16} : bf16 loc(#0:7:0)
  %q = bitcast %p {to = ptr<i32>} : ptr<i32> loc(#0:7:1)
  %y = permute %x {order = [1, 0]} : tile<8x4xf32> loc(#0:8:0)
  %z = hint %r {max_contiguous = [8], multiple_of = [4]} : tile<8xi32> loc(#0:8:1)
  print %nz, %pinf {hex = false, prefix = "a \\"q\\" \\\\ b\\nc\\t\u00e9"} loc(#0:9:0)
  assert %t {msg = ""} loc(#0:9:1)
  return loc(#0:1:0)
}
'''


def test_hand_written_attributes_of_every_kind():
    m = mir.verify(mir.parse(ATTRS_TEXT))
    assert str(m) == ATTRS_TEXT
    assert mir.parse(str(m)) == m
    a = {op.results[0].hint if op.results else op.name: op.attrs for op in m.entry.body.ops}
    assert a["r"] == {"start": -4, "end": 4}
    assert a["big"]["value"] == -2 ** 63 and a["u"]["value"] == 2 ** 64 - 1
    assert a["t"]["value"] is True
    assert math.copysign(1.0, a["nz"]["value"]) == -1.0
    assert math.copysign(1.0, a["pz"]["value"]) == 1.0
    assert a["pinf"]["value"] == math.inf and a["ninf"]["value"] == -math.inf
    assert math.isnan(a["nan"]["value"])
    assert a["tiny"]["value"] == 5e-324 and a["e"]["value"] == 1.5e300
    assert a["h"]["to"] == T.bf16
    assert a["q"]["to"] == T.PointerType(T.i32)
    assert a["y"]["order"] == [1, 0]
    assert a["z"] == {"max_contiguous": [8], "multiple_of": [4]}
    assert a["print"] == {"hex": False, "prefix": 'a "q" \\ b\nc\t\u00e9'}
    assert m.entry.loc.file == 'dir\\with "quotes".py'


def test_strings_with_any_character_round_trip():
    """A string attribute prints so that it parses back to itself, whatever it holds."""
    b = mir.Builder()
    f = mir.Func("k", [], [], loc=mir.core.Loc("odd\nfile\x00.py", 1, 0))
    b.block = f.body
    s = 'tab\t nl\n cr\r nul\x00 bell\x07 quote" backslash\\ é ∑ \U0001F600'
    b.create("print", [], None, {"prefix": s})
    b.create("return", [])
    m = mir.Module([f])
    text = str(m)
    again = mir.parse(text)
    assert again == m
    assert list(again.entry.body.ops)[0].attrs["prefix"] == s
    assert again.entry.loc.file == "odd\nfile\x00.py"
    assert str(again) == text


# ------------------------------------------------------------------ equality is not vacuous
@pytest.mark.parametrize("old,new", [
    ("start = -4", "start = -3"),                              # int attribute
    ("value = -0.0", "value = 0.0"),                           # sign of zero
    ("value = inf} : f32", "value = -inf} : f32"),             # infinity's sign
    ("value = nan", "value = 1.0"),                            # nan vs number
    ("order = [1, 0]", "order = [0, 1]"),                      # list element
    ("to = bf16", "to = f16"),                                 # type attribute
    ("prefix = \"a", "prefix = \"A"),                          # string attribute
    ("loc(#0:8:1)", "loc(#0:8:2)"),                            # location column
    ("print %nz, %pinf", "print %pinf, %nz"),                  # operand order
    ("value = true", "value = 1"),                             # bool vs int
])
def test_equality_sees_every_difference(old, new):
    assert ATTRS_TEXT.count(old) == 1
    changed = ATTRS_TEXT.replace(old, new)
    assert mir.parse(changed) != mir.parse(ATTRS_TEXT)
    assert mir.parse(changed) == mir.parse(changed)
