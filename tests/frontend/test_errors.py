"""Compilation errors point at the user's code: ``file:line:col`` of the offending
construct, its source line and a caret, and nothing of the compiler itself.

Each kernel marks the construct at fault with ``# LINE-MARK: <text>``; the error must
point at that line and at the column where ``<text>`` starts.
"""
import re

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

P32 = T.PointerType(T.f32)
COMPILER_FILES = ("mutile/", "codegen.py", "control.py", "compiler.py", "semantic.py",
                  "standard.py", "tiles.py", "ops.py", "site-packages", "Traceback")


def compile_error(kernel, **spec) -> mutile.CompilationError:
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, spec, {}, verify=True)
    return info.value


def check_points_at(e, kernel, mark, msg_pattern, tag="LINE-MARK"):
    """``e`` is at ``kernel``'s marked construct, says ``msg_pattern`` and shows the
    source line with a caret; no compiler file is named."""
    m = mark(kernel, tag)
    text = str(e)
    assert re.search(msg_pattern, e.msg), f"message {e.msg!r} does not match {msg_pattern!r}"
    assert e.loc is not None, text
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), text
    head, src, caret = text.split("\n")
    assert head.startswith(f"{m.file}:{m.line}:{m.col + 1}: error: "), text
    assert src == "    " + m.text, text
    assert caret == "    " + " " * m.col + "^", text
    rest = text.replace(m.file, "<user file>")
    for name in COMPILER_FILES:
        assert name not in rest, f"compiler file {name!r} leaks into:\n{text}"


# ------------------------------------------------------------------ unsupported constructs
@mutile.jit
def k_while_else(X, n):
    i = 0
    while i < n:  # LINE-MARK: while
        i += 1
    else:
        i = 0
    ml.store(X, i)


@mutile.jit
def k_for_else(X, n):
    acc = 0
    for i in range(n):  # LINE-MARK: for
        acc += i
    else:
        acc = 1
    ml.store(X, acc)


@mutile.jit
def k_try(X):
    try:  # LINE-MARK: try
        ml.store(X, 1)
    except Exception:
        pass


@mutile.jit
def k_lambda(X):
    f = lambda v: v + 1  # LINE-MARK: lambda  # noqa: E731
    ml.store(X, f(1))


@mutile.jit
def k_with(X):
    with open("x"):  # LINE-MARK: with
        ml.store(X, 1)


@mutile.jit
def k_nested_def(X):
    def inner(v):  # LINE-MARK: def
        return v
    ml.store(X, inner(1))


@mutile.jit
def k_break(X, n):
    acc = 0
    for i in range(n):
        acc += i
        break  # LINE-MARK: break
    ml.store(X, acc)


@mutile.jit
def k_continue(X, n):
    acc = 0
    for i in range(n):
        continue  # LINE-MARK: continue
    ml.store(X, acc)


@mutile.jit
def k_del(X):
    v = 1
    del v  # LINE-MARK: del
    ml.store(X, 1)


@mutile.jit
def k_global(X):
    global P32  # LINE-MARK: global
    ml.store(X, 1)


@mutile.jit
def k_return_in_loop(X, n):
    for i in range(n):
        ml.store(X + i, 1.0)
        return  # LINE-MARK: return


@mutile.jit
def k_returns_value(X):
    x = ml.load(X)
    return x  # LINE-MARK: return


UNSUPPORTED = [
    (k_while_else, r"while/else is not supported"),
    (k_for_else, r"for/else is not supported"),
    (k_try, r"try/except is not supported"),
    (k_lambda, r"lambda is not supported"),
    (k_with, r"with statements are not supported"),
    (k_nested_def, r"nested function definitions are not supported"),
    (k_break, r"break is not supported"),
    (k_continue, r"continue is not supported"),
    (k_del, r"del is not supported"),
    (k_global, r"global statements are not supported"),
    (k_return_in_loop, r"return inside a loop is not supported"),
    (k_returns_value, r"a kernel cannot return a value"),
]


@pytest.mark.parametrize("kernel,msg", UNSUPPORTED, ids=lambda x: getattr(x, "__name__", ""))
def test_unsupported_construct(kernel, msg, mark):
    spec = {"X": P32}
    if "n" in kernel.params:
        spec["n"] = T.i32
    check_points_at(compile_error(kernel, **spec), kernel, mark, msg)


# ------------------------------------------------------------------ shapes and types
@mutile.jit
def k_shape_mismatch(X):
    a = ml.arange(0, 16)
    b = ml.arange(0, 32)
    c = a + b  # LINE-MARK: a + b
    ml.store(X + c, 1.0)


@mutile.jit
def k_arange_not_pow2(X):
    offs = ml.arange(0, 100)  # LINE-MARK: ml.arange
    ml.store(X + offs, 1.0)


@mutile.jit
def k_floordiv_float(X):
    x = ml.load(X)
    y = x // 2.0  # LINE-MARK: x // 2.0
    ml.store(X, y)


@mutile.jit
def k_load_non_pointer(X, n):
    x = ml.load(n)  # LINE-MARK: ml.load
    ml.store(X, x)


@mutile.jit
def k_dot_dims(X):
    offs = ml.arange(0, 16)
    a = ml.load(X + offs[:, None] * 16 + offs[None, :])
    b = ml.load(X + offs[:, None] * 32 + ml.arange(0, 32)[None, :])
    bt = ml.trans(b)
    c = ml.dot(a, bt)  # LINE-MARK: ml.dot
    ml.store(X + offs[:, None] * 16 + offs[None, :], c)


@mutile.jit
def k_exp_int(X, n):
    y = ml.exp(n)  # LINE-MARK: ml.exp
    ml.store(X, y)


@mutile.jit
def k_invert_float(X):
    x = ml.load(X)
    ml.store(X, ~x)  # LINE-MARK: ~x


@mutile.jit
def k_arange_runtime(X, n):
    offs = ml.arange(0, n)  # LINE-MARK: ml.arange
    ml.store(X + offs, 1.0)


@mutile.jit
def k_zeros_runtime(X, n):
    z = ml.zeros([n], ml.float32)  # LINE-MARK: ml.zeros
    ml.store(X, z)


@mutile.jit
def k_undefined_name(X):
    ml.store(X, undefined_thing)  # LINE-MARK: undefined_thing  # noqa: F821


TYPE_ERRORS = [
    (k_shape_mismatch, {}, r"shapes \[16\] and \[32\] cannot be broadcast"),
    (k_arange_not_pow2, {}, r"power of two.*100"),
    (k_floordiv_float, {}, r"// is defined for integers only"),
    (k_load_non_pointer, {"n": T.i32}, r"load\(\) needs a pointer.*int32"),
    (k_dot_dims, {}, r"dot: inner dims differ, \[16, 16\] @ \[32, 16\]"),
    (k_exp_int, {"n": T.i32}, r"exp needs a floating-point operand, got ml.int32"),
    (k_invert_float, {}, r"~ needs an integer, got ml.float32"),
    (k_arange_runtime, {"n": T.i32}, r"arange end must be a compile-time integer"),
    (k_zeros_runtime, {"n": T.i32}, r"shape entries must be a compile-time integer"),
    (k_undefined_name, {}, r"name 'undefined_thing' is not defined"),
]


@pytest.mark.parametrize("kernel,extra,msg", TYPE_ERRORS,
                         ids=lambda x: getattr(x, "__name__", ""))
def test_type_and_shape_error(kernel, extra, msg, mark):
    check_points_at(compile_error(kernel, X=P32, **extra), kernel, mark, msg)


# ------------------------------------------------------------------ calls and globals
def test_builtin_called_outside_jit_names_it():
    with pytest.raises(Exception) as info:
        ml.program_id(0)
    assert "program_id" in str(info.value)
    assert "@mutile.jit" in str(info.value)


def test_jit_function_called_directly():
    with pytest.raises(mutile.CompilationError, match=r"k_exp_int cannot be called directly"):
        k_exp_int(np.zeros(1, np.float32), 3)


def py_helper(v):
    return v * 2


@mutile.jit
def k_python_helper(X):
    x = ml.load(X)
    ml.store(X, py_helper(x))  # LINE-MARK: py_helper


TABLE = np.arange(4, dtype=np.float32)


@mutile.jit
def k_numpy_global(X):
    ml.store(X, TABLE[0])  # LINE-MARK: TABLE


def test_plain_python_function_on_tensors(mark):
    e = compile_error(k_python_helper, X=P32)
    check_points_at(e, k_python_helper, mark, r"cannot call py_helper\(\) on tensors")


def test_global_numpy_array(mark):
    e = compile_error(k_numpy_global, X=P32)
    check_points_at(e, k_numpy_global, mark, r"global 'TABLE' \(ndarray\) cannot be used")


@mutile.jit
def rec_a(x):
    return rec_b(x)


@mutile.jit
def rec_b(x):
    return rec_a(x + 1)  # LINE-MARK: rec_a


@mutile.jit
def k_recursion(X):
    ml.store(X, rec_a(ml.load(X)))


def test_recursion_between_jit_functions(mark):
    e = compile_error(k_recursion, X=P32)
    check_points_at(e, rec_b, mark, r"recursive call of @jit function rec_a")


# ------------------------------------------------------------------ control flow
@mutile.jit
def k_loop_type_change(X, n):
    x = ml.program_id(0)
    for i in range(n):  # LINE-MARK: for
        x = x * 1.5
    ml.store(X, x)


@mutile.jit
def k_if_branch_types(X, n):
    if n > 0:  # LINE-MARK: if
        v = n.to(ml.float32)
    else:
        v = n
    ml.store(X, v)


@mutile.jit
def k_static_assert(X, BLOCK: ml.constexpr):
    ml.static_assert(BLOCK == 32, "BLOCK must be 32")  # LINE-MARK: ml.static_assert
    ml.store(X, 1.0)


@mutile.jit
def k_tile_condition(X):
    x = ml.load(X + ml.arange(0, 16))
    if x > 0:  # LINE-MARK: x > 0
        ml.store(X, 1.0)


def test_loop_carried_variable_changes_type(mark):
    e = compile_error(k_loop_type_change, X=P32, n=T.i32)
    check_points_at(e, k_loop_type_change, mark, r"'x' is i32 before the loop but f32")


def test_if_branches_give_different_types(mark):
    e = compile_error(k_if_branch_types, X=P32, n=T.i32)
    check_points_at(e, k_if_branch_types, mark, r"'v' is i32 after one branch but f32")


def test_static_assert_fails(mark):
    e = compile_error(k_static_assert, X=P32, BLOCK=16)
    check_points_at(e, k_static_assert, mark, r"static_assert failed: BLOCK must be 32")


def test_static_assert_holds(compile_ir):
    assert "store" in compile_ir(k_static_assert, X=P32, BLOCK=32).names()


def test_tile_as_if_condition(mark):
    e = compile_error(k_tile_condition, X=P32)
    check_points_at(e, k_tile_condition, mark, r"condition must be a scalar.*\[16\]")


# ------------------------------------------------------------------ descriptors
@mutile.jit
def k_desc_offsets(X, M, N):
    d = ml.make_tensor_descriptor(X, shape=[M, N], strides=[N, 1], block_shape=[16, 16])
    t = d.load([0])  # LINE-MARK: d.load
    d.store([0, 0], t)


def test_descriptor_wrong_number_of_offsets(mark):
    e = compile_error(k_desc_offsets, X=P32, M=T.i32, N=T.i32)
    check_points_at(e, k_desc_offsets, mark, r"rank-2 descriptor needs 2 offsets")


# ------------------------------------------------------------------ errors inside callees
@mutile.jit
def bad_callee(x):
    y = ml.arange(0, 8)
    return x + y  # LINE-MARK: x + y


@mutile.jit
def k_calls_bad_callee(X):
    x = ml.load(X + ml.arange(0, 16))
    ml.store(X + ml.arange(0, 16), bad_callee(x))


def test_error_inside_a_callee_points_into_the_callee(mark):
    e = compile_error(k_calls_bad_callee, X=P32)
    check_points_at(e, bad_callee, mark, r"shapes \[16\] and \[8\] cannot be broadcast")


@mutile.jit
def k_while_type_change(X, n):
    v = ml.program_id(0)
    while v < n:  # LINE-MARK: while
        v = v.to(ml.float16) + 1
    ml.store(X, v)


def test_while_carried_variable_changes_type(mark):
    e = compile_error(k_while_type_change, X=P32, n=T.i32)
    check_points_at(e, k_while_type_change, mark, r"'v' is i32 before the loop but f16")


# ------------------------------------------------------------------ values from the host
@mutile.jit
def k_str_block(X, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)  # LINE-MARK: ml.arange
    ml.store(X + offs, 1.0)


@mutile.jit
def k_str_arith(X, BLOCK: ml.constexpr):
    n = BLOCK + 1  # LINE-MARK: BLOCK + 1
    ml.store(X, n)


def test_str_constexpr_used_as_a_number_names_the_parameter(mark):
    """A string constexpr is accepted at launch (strings pick code paths) and fails
    where the kernel uses it as a number, saying which parameter holds what."""
    e = compile_error(k_str_block, X=P32, BLOCK="16")
    check_points_at(e, k_str_block, mark, r"arange end must be a compile-time integer.*'16'.*"
                                          r"'BLOCK' is the compile-time parameter BLOCK='16' "
                                          r"\(a str, not a number\)")
    e = compile_error(k_str_arith, X=P32, BLOCK="16")
    check_points_at(e, k_str_arith, mark, r"operator \+ cannot combine the compile-time "
                                          r"values '16' \(str\) and 1 \(int\).*'BLOCK' is")


@mutile.jit
def k_scalar_param(X, Y, n):
    x = ml.load(X)
    ml.store(Y, x * n)  # LINE-MARK: x * n


@mutile.jit
def k_scalar_bound(X, n):
    offs = ml.arange(0, 16)
    ml.store(X + offs, 1.0, mask=offs < n)  # LINE-MARK: offs < n


def test_array_passed_for_a_scalar_names_the_parameter(mark):
    """An array where the kernel wants a number makes the parameter a pointer; the
    first use as a number is an error naming it (not the IR's 'expected numbers')."""
    e = compile_error(k_scalar_param, X=P32, Y=P32, n=P32)
    check_points_at(e, k_scalar_param, mark, r"operator mul is not defined on pointers, got "
                                             r"f32 'x' and ptr<f32> 'n'; 'n' is a pointer "
                                             r"\(ptr<f32>\): an array was passed for it")
    e = compile_error(k_scalar_bound, X=P32, n=P32)
    check_points_at(e, k_scalar_bound, mark, r"comparison lt is not defined on pointers.*"
                                             r"'n' is a pointer")
    x = np.ones(4, np.float32)
    with pytest.raises(mutile.CompilationError, match=r"'n' is a pointer") as info:
        k_scalar_param[(1,)](x, x.copy(), x)
    assert info.value.loc.line == mark(k_scalar_param).line


def make_array_closure():
    table = np.arange(4, dtype=np.float32)

    @mutile.jit
    def k_array_closure(X):
        ml.store(X, table[0])  # LINE-MARK: table
    return k_array_closure


def test_closure_array_cannot_be_used(mark):
    kernel = make_array_closure()
    e = compile_error(kernel, X=P32)
    check_points_at(e, kernel, mark, r"closure variable 'table' \(ndarray\) cannot be used")


@mutile.jit
def k_huge_static_range(X, N: ml.constexpr):
    acc = 0.0
    for i in ml.static_range(N):  # LINE-MARK: ml.static_range
        acc += i
    ml.store(X, acc)


@mutile.jit
def k_static_range_nest(X, N: ml.constexpr, M: ml.constexpr):
    acc = 0.0
    for i in ml.static_range(N):
        for j in ml.static_range(M):  # LINE-MARK: ml.static_range
            acc += i * j
    ml.store(X, acc)


def test_static_range_unrolling_has_a_limit(mark):
    """static_range(200000) used to compile for minutes; a nest of unrolled loops may
    emit MAX_UNROLLED bodies, and the loop that goes over says so at once."""
    import time

    from mutile.frontend.control import MAX_UNROLLED
    t0 = time.perf_counter()
    e = compile_error(k_huge_static_range, X=P32, N=200000)
    assert time.perf_counter() - t0 < 5
    check_points_at(e, k_huge_static_range, mark,
                    rf"this static_range unrolls 200000 iterations: more than the "
                    rf"{MAX_UNROLLED} .* use ml.range")
    e = compile_error(k_static_range_nest, X=P32, N=64, M=128)
    check_points_at(e, k_static_range_nest, mark,
                    r"unrolls 128 iterations inside unrolled loops that repeat it 64 times "
                    r"\(8192 bodies in all\)")
