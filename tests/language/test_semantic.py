"""The DSL's rules without compiling a kernel: Triton's type promotion, broadcasting,
Python-number typing, and builtins refusing to run outside ``@mutile.jit``."""
import pytest

import mutile.language as ml
from mutile.ir import types as T
from mutile.ir.core import Value
from mutile.language import semantic as S
from mutile.language.core import CalledOutsideJit, is_builtin, tensor


def tile(dtype, shape=(16,)):
    return tensor(Value(T.tile_or_scalar(shape, dtype), None, 0))


@pytest.mark.parametrize("a,b,want", [
    (T.i32, T.f16, T.f16), (T.f16, T.f16, T.f16), (T.f16, T.f32, T.f32),
    (T.f16, T.bf16, T.f16), (T.bf16, T.bf16, T.bf16), (T.f64, T.f16, T.f64),
    (T.bf16, T.f32, T.f32), (T.i64, T.bf16, T.f32), (T.i8, T.i32, T.i32),
    (T.u32, T.i32, T.u32), (T.i32, T.u32, T.u32), (T.u8, T.i32, T.i32),
    (T.i1, T.i8, T.i8), (T.i64, T.u32, T.i64), (T.u64, T.i8, T.u64), (T.u16, T.u16, T.u16),
])
def test_computation_type(a, b, want):
    assert S.computation_type(a, b) == want
    assert S.computation_type(b, a) == want


@pytest.mark.parametrize("a,b,want", [
    (T.f16, T.f16, T.f32), (T.bf16, T.bf16, T.f32), (T.f16, T.f32, T.f32),
    (T.i32, T.i32, T.i32), (T.f64, T.f64, T.f64),
])
def test_computation_type_for_division(a, b, want):
    assert S.computation_type(a, b, div_or_mod=True) == want


def test_pointer_arithmetic_has_no_computation_type():
    with pytest.raises(S.SemanticError, match="arithmetic on pointers"):
        S.computation_type(T.PointerType(T.f32), T.i32)


@pytest.mark.parametrize("dtype,number,want", [
    (T.f16, 2.0, T.f16), (T.f16, 3, T.f16), (T.bf16, 0.5, T.bf16), (T.i8, 3, T.i8),
    (T.u8, 255, T.u8), (T.i8, 1000, T.i32), (T.i32, 2.5, T.f32), (T.u32, 7, T.u32),
    (T.i16, True, T.i16),
])
def test_python_numbers_adopt_the_tensor_type(dtype, number, want):
    assert S.operand_types(tile(dtype), number) == (want, want)
    assert S.operand_types(number, tile(dtype)) == (want, want)


def test_python_float_divides_a_half_tensor_in_f32():
    assert S.operand_types(tile(T.f16), 2.0, div_or_mod=True) == (T.f32, T.f32)


@pytest.mark.parametrize("value,want", [
    (True, T.i1), (0, T.i32), (-2 ** 31, T.i32), (2 ** 31 - 1, T.i32), (2 ** 31, T.i64),
    (-2 ** 63, T.i64), (2 ** 63, T.u64), (2 ** 64 - 1, T.u64), (1.0, T.f32),
])
def test_python_scalar_type(value, want):
    assert S.python_scalar_type(value) == want


@pytest.mark.parametrize("value", [2 ** 64, -2 ** 63 - 1, "text", None])
def test_python_value_that_is_not_a_kernel_number(value):
    with pytest.raises(S.SemanticError):
        S.python_scalar_type(value)


@pytest.mark.parametrize("a,b,want", [
    ([4, 1], [1, 8], [4, 8]), ([16], [16], [16]), ([2, 1, 4], [3, 1], [2, 3, 4]),
    ([], [8], [8]), ([1], [4, 4], [4, 4]),
])
def test_broadcast_shapes(a, b, want):
    assert S.broadcast_shapes(a, b) == want
    assert S.broadcast_shapes(b, a) == want


@pytest.mark.parametrize("a,b", [([16], [32]), ([4, 2], [4, 8]), ([3, 1], [2, 1, 4, 5])])
def test_shapes_that_do_not_broadcast(a, b):
    with pytest.raises(S.SemanticError, match=r"cannot be broadcast together"):
        S.broadcast_shapes(a, b)


BUILTINS = sorted(n for n in dir(ml) if not n.startswith("_") and is_builtin(getattr(ml, n)))


def test_the_dsl_has_its_builtins():
    assert {"program_id", "arange", "load", "store", "dot", "sum", "where", "exp",
            "make_tensor_descriptor", "device_print", "multiple_of"} <= set(BUILTINS)


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_outside_jit_raises_naming_itself(name):
    fn = getattr(ml, name)
    own = fn.__name__           # aliases (view, sqrt_rn) name the builtin they are
    assert own == name or getattr(ml, own) is fn
    with pytest.raises(CalledOutsideJit, match=rf"mutile\.language\.{own}\(\) can only be "
                                               r"called inside a @mutile\.jit function"):
        fn(0)


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_has_a_docstring(name):
    assert len((getattr(ml, name).__doc__ or "").strip()) > 10


@pytest.mark.parametrize("fn", [ml.static_assert, ml.static_print])
def test_compile_time_helpers_outside_jit(fn):
    with pytest.raises(RuntimeError, match=rf"{fn.__name__} can only be used inside "
                                           r"@mutile\.jit"):
        fn(True)
