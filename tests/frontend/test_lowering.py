"""What the frontend emits: the IR of small kernels, checked op by op.

Every compile goes through the ``compile_ir`` fixture, which verifies the IR before
and after each pass and checks that every stage's text round-trips.
"""
import re

import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.kernels.matmul import matmul_kernel


def P(t):
    return T.PointerType(t)


def base(name: str) -> str:
    """A value's Python variable name: its printed name without the '_N' the printer
    adds to make names unique."""
    return re.sub(r"_\d+$", "", name)


def hints(values) -> list[str]:
    return [base(v.hint) for v in values]


# ------------------------------------------------------------------ loop-carried values
@mutile.jit
def k_carried(X, Y, n):
    acc = ml.zeros([16], ml.float32)
    ptrs = X + ml.arange(0, 16)
    untouched = ml.load(Y)
    for i in range(n):
        local = ml.load(ptrs)        # loop-local: not carried
        scaled = local * untouched   # loop-local, reads a value from outside
        acc += scaled
        ptrs += 16
    ml.store(Y + ml.arange(0, 16), acc)


def test_for_carries_exactly_the_reassigned_names(compile_ir):
    c = compile_ir(k_carried, X=P(T.f32), Y=P(T.f32), n=T.i32)
    loop = c.only("for")
    body = loop.regions[0]
    assert hints(body.args) == ["i", "acc", "ptrs"]
    assert [a.type for a in body.args] == [T.i32, T.TileType((16,), T.f32),
                                           T.TileType((16,), P(T.f32))]
    assert [r.type for r in loop.results] == [a.type for a in body.args[1:]]
    assert hints(loop.results) == ["acc", "ptrs"]
    # the store after the loop reads the loop's result, not the initial zeros
    store = c.ops()[-2]
    assert store.name == "store" and store.operands[1] is loop.results[0]


@mutile.jit
def k_while(X, n):
    i = 0
    total = 0.0
    while i < n:
        total += ml.load(X + i)
        i += 1
    ml.store(X, total)


def test_while_carries_reassigned_names_through_condition(compile_ir):
    c = compile_ir(k_while, X=P(T.f32), n=T.i32)
    loop = c.only("while")
    before, after = loop.regions
    assert hints(before.args) == hints(after.args) == hints(loop.results) == ["i", "total"]
    assert [r.type for r in loop.results] == [T.i32, T.f32]
    cond = before.ops[-1]
    assert cond.name == "condition" and cond.operands[1:] == before.args
    assert [o.name for o in before.ops] == ["cmp", "condition"]


# ------------------------------------------------------------------ if
@mutile.jit
def k_constexpr_if(X, FLAG: ml.constexpr):
    x = ml.load(X)
    if FLAG:
        x = x * 2.0
    else:
        x = x + 1.0
    ml.store(X, x)


@pytest.mark.parametrize("flag,op", [(True, "mul"), (False, "add")])
def test_constexpr_if_is_resolved_at_compile_time(compile_ir, flag, op):
    names = compile_ir(k_constexpr_if, X=P(T.f32), FLAG=flag).names("ir")
    assert "if" not in names
    assert op in names and ({"mul", "add"} - {op}).isdisjoint(names)


@mutile.jit
def k_runtime_if(X, n):
    x = ml.load(X)
    y = n
    if n > 0:
        x = x * 2.0
        tmp = x + 1.0  # branch-local: not a result
        ml.store(X + 1, tmp)
    else:
        y = n + 1
    ml.store(X, x)
    ml.store(X + 2, y.to(ml.float32))


def test_runtime_if_yields_the_reassigned_names(compile_ir):
    c = compile_ir(k_runtime_if, X=P(T.f32), n=T.i32)
    op = c.only("if")
    assert hints(op.results) == ["x", "y"]
    assert [r.type for r in op.results] == [T.f32, T.i32]
    then, orelse = op.regions
    assert then.ops[-1].name == orelse.ops[-1].name == "yield"
    assert len(then.ops[-1].operands) == len(orelse.ops[-1].operands) == 2
    assert "store" in [o.name for o in then.ops]
    assert op.operands[0].type == T.i1


@mutile.jit
def k_early_return(X, n):
    pid = ml.program_id(0)
    if pid >= n:
        return
    x = ml.load(X + pid)
    ml.store(X + pid, x + 1.0)


def test_early_return_makes_the_rest_the_else_branch(compile_ir):
    c = compile_ir(k_early_return, X=P(T.f32), n=T.i32)
    top = [o.name for o in c.stage("ir").entry.body.ops]
    assert top[-2:] == ["if", "return"] and "store" not in top
    op = c.only("if")
    then, orelse = ([o.name for o in r.ops] for r in op.regions)
    assert then == ["yield"]
    assert "load" in orelse and "store" in orelse and orelse[-1] == "yield"
    assert op.results == []


# ------------------------------------------------------------------ static_range
@mutile.jit
def k_static_range(X, N: ml.constexpr):
    acc = 0.0
    for i in ml.static_range(N):
        acc += ml.load(X + i) * i
    ml.store(X, acc)


@pytest.mark.parametrize("n", [1, 3])
def test_static_range_is_unrolled(compile_ir, n):
    c = compile_ir(k_static_range, X=P(T.f32), N=n)
    names = c.names("ir")
    assert "for" not in names and "while" not in names
    assert names.count("load") == n
    # i is a compile-time value: the offsets are constants 0 .. n-1
    consts = [o.attrs["value"] for o in c.ops("ir") if o.name == "constant" and
              o.results[0].type == T.i32]
    assert sorted(set(range(n)) & set(consts)) == list(range(n))


# ------------------------------------------------------------------ nested @jit
@mutile.jit
def k_calls_later(X):
    x = ml.load(X)
    y = defined_later(x, 3.0)
    ml.store(X, y)


@mutile.jit
def defined_later(v, s):
    return helper_square(v) * s


@mutile.jit
def helper_square(v):
    return v * v


def test_nested_jit_calls_are_inlined(compile_ir):
    c = compile_ir(k_calls_later, X=P(T.f32))
    ir = c.stage("ir")
    assert set(ir.funcs) == {"k_calls_later", "defined_later", "helper_square"}
    assert [o.attrs["callee"] for o in c.ops("ir") if o.name == "call"] == ["defined_later"]
    assert [o.attrs["callee"] for o in c.ops("ir", "defined_later") if o.name == "call"] == \
        ["helper_square"]
    inlined = c.stage("inline")
    assert list(inlined.funcs) == ["k_calls_later"]
    names = c.names("inline")
    assert "call" not in names
    assert names.count("mul") == 2
    # the inlined ops keep the callee's source line
    sq = next(o for o in c.ops("inline") if o.name == "mul")
    assert sq.loc.line == helper_square.fn.__code__.co_firstlineno + 2


@pytest.mark.parametrize("activation,extra", [("leaky_relu", "select"), ("relu", "max"),
                                              ("", None)])
def test_epilogue_chosen_by_string_constexpr(compile_ir, activation, extra):
    c = compile_ir(matmul_kernel, a_ptr=P(T.f16), b_ptr=P(T.f16), c_ptr=P(T.f16),
                   **{p: T.i32 for p in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                                         "stride_bn", "stride_cm", "stride_cn")},
                   BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=4, ACTIVATION=activation)
    funcs = set(c.stage("ir").funcs)
    assert ("leaky_relu" in funcs) == (activation == "leaky_relu")
    top = [o.name for o in c.stage("inline").entry.body.ops]
    # after the dot loop: the epilogue, the cast to f16 and the store
    tail = top[top.index("for") + 1:]
    assert ("select" in tail) == (extra == "select")
    assert ("max" in tail) == (extra == "max")
    assert "cast" in tail


# ------------------------------------------------------------------ locations
@mutile.jit
def k_locations(A, B, C):
    offs = ml.arange(0, 16)
    a = ml.load(A + offs[:, None] * 16 + offs[None, :])
    b = ml.load(B + offs[:, None] * 16 + offs[None, :])
    c = ml.dot(a, b)  # DOT: ml.dot
    s = ml.sum(c, axis=1)  # SUM: ml.sum
    ml.store(C + offs, s)  # STORE: ml.store


def test_every_op_carries_its_source_line(compile_ir, mark):
    c = compile_ir(k_locations, A=P(T.f32), B=P(T.f32), C=P(T.f32))
    for tag, name in [("DOT", "dot"), ("SUM", "reduce"), ("STORE", "store")]:
        m = mark(k_locations, tag)
        for stage in c.stages:
            op = c.only(name, stage)
            assert (op.loc.file, op.loc.line, op.loc.col) == (m.file, m.line, m.col), stage
    first = k_locations.fn.__code__.co_firstlineno
    for op in c.ops("ir"):
        assert op.loc.file == __file__
        assert first < op.loc.line <= first + 7, op


# ------------------------------------------------------------------ type promotion
@mutile.jit
def k_i32_plus_f16(X, n):
    x = ml.load(X + ml.arange(0, 16))
    ml.store(X + ml.arange(0, 16), n + x)


@mutile.jit
def k_f16_times_float(X):
    x = ml.load(X + ml.arange(0, 16))
    ml.store(X + ml.arange(0, 16), x * 2.0)


@mutile.jit
def k_int_div(X, a, b):
    ml.store(X, a / b)


@mutile.jit
def k_u32_plus_i32(X, a, b):
    ml.store(X, a + b)


@mutile.jit
def k_f16_plus_bf16(X, Y):
    ml.store(X, ml.load(X) + ml.load(Y))


PROMOTIONS = [
    (k_i32_plus_f16, dict(X=P(T.f16), n=T.i32), "add", T.TileType((16,), T.f16)),
    (k_f16_times_float, dict(X=P(T.f16)), "mul", T.TileType((16,), T.f16)),
    (k_int_div, dict(X=P(T.f32), a=T.i32, b=T.i32), "div", T.f32),
    (k_u32_plus_i32, dict(X=P(T.u32), a=T.u32, b=T.i32), "add", T.u32),
    (k_u32_plus_i32, dict(X=P(T.i32), a=T.i8, b=T.i32), "add", T.i32),
    (k_f16_plus_bf16, dict(X=P(T.f16), Y=P(T.bf16)), "add", T.f16),
]


@pytest.mark.parametrize("kernel,spec,op,want", PROMOTIONS,
                         ids=["i32+f16", "f16*2.0", "i32/i32", "u32+i32", "i8+i32", "f16+bf16"])
def test_type_promotion(compile_ir, kernel, spec, op, want):
    c = compile_ir(kernel, **spec)
    found = c.only(op)
    assert found.results[0].type == want
    assert all(v.type == want for v in found.operands)


def test_f16_times_python_float_makes_an_f16_constant(compile_ir):
    c = compile_ir(k_f16_times_float, X=P(T.f16))
    assert "cast" not in c.names()
    consts = [o for o in c.ops() if o.name == "constant"]
    assert [o.results[0].type for o in consts] == [T.f16]


# ------------------------------------------------------------------ broadcasting and dtypes
@mutile.jit
def k_outer(X, Y, Z):
    x = ml.load(X + ml.arange(0, 8))
    y = ml.load(Y + ml.arange(0, 4))
    z = x[:, None] + y[None, :]
    ml.store(Z + ml.arange(0, 8)[:, None] * 4 + ml.arange(0, 4)[None, :], z)


def test_outer_sum_broadcasts(compile_ir):
    c = compile_ir(k_outer, X=P(T.f32), Y=P(T.f32), Z=P(T.f32))
    add = next(o for o in c.ops() if o.name == "add")
    assert add.results[0].type == T.TileType((8, 4), T.f32)
    lhs, rhs = (v.owner for v in add.operands)
    assert lhs.name == rhs.name == "broadcast"
    ex_l, ex_r = (v.operands[0].owner for v in (lhs, rhs))
    assert (ex_l.name, ex_l.attrs["axis"], ex_l.results[0].type) == \
        ("expand_dims", 1, T.TileType((8, 1), T.f32))
    assert (ex_r.name, ex_r.attrs["axis"], ex_r.results[0].type) == \
        ("expand_dims", 0, T.TileType((1, 4), T.f32))


@mutile.jit
def k_element_ty(X, Y):
    x = ml.load(X + ml.arange(0, 16))
    ml.store(Y + ml.arange(0, 16), x.to(Y.dtype.element_ty))


@pytest.mark.parametrize("dt", [T.f16, T.i8, T.bf16])
def test_pointer_element_type(compile_ir, dt):
    c = compile_ir(k_element_ty, X=P(T.f32), Y=P(dt))
    cast = c.only("cast")
    assert cast.attrs["to"] == dt and cast.results[0].type == T.TileType((16,), dt)


# ------------------------------------------------------------------ hints and loop options
@mutile.jit
def k_hints(X, n):
    offs = ml.max_contiguous(ml.multiple_of(ml.arange(0, 64), 16), 64)
    m = ml.multiple_of(n, 8)
    for i in ml.range(0, m, 64, num_stages=3):
        ml.store(X + i + offs, 1.0)


def test_hints_and_num_stages_are_recorded(compile_ir):
    c = compile_ir(k_hints, X=P(T.f32), n=T.i32)
    for stage in c.stages:
        hint_attrs = [o.attrs for o in c.ops(stage) if o.name == "hint"]
        assert hint_attrs == [{"multiple_of": [16]}, {"max_contiguous": [64]},
                              {"multiple_of": [8]}], stage
        assert c.only("for", stage).attrs == {"num_stages": 3}, stage


@mutile.jit
def k_plain_range(X, n):
    for i in range(n):
        ml.store(X + i, 1.0)


def test_plain_range_has_no_loop_attributes(compile_ir):
    assert compile_ir(k_plain_range, X=P(T.f32), n=T.i32).only("for").attrs == {}


@mutile.jit
def k_range_constexpr(X, N: ml.constexpr):
    acc = 0.0
    for i in range(N):
        acc += ml.load(X + i)
    ml.store(X, acc)


def test_range_of_a_constexpr_stays_a_loop(compile_ir):
    """``range(N)`` with a constexpr ``N`` is a loop (as in Triton), never unrolled by
    the frontend, so a large N compiles as fast as a small one."""
    c = compile_ir(k_range_constexpr, X=P(T.f32), N=200000)
    assert c.names("ir").count("for") == 1 and c.names("ir").count("load") == 1
