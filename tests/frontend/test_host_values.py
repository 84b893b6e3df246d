"""Values that come into a kernel from the host's Python: numpy scalars (globals,
closure variables, results of compile-time calls), constexpr arguments, and the
variables of the function a kernel is defined in (its closure), which are compile-time
values and part of the kernel's specialization.

Typing rule (one for every way a number arrives): a numpy scalar is the Python number
it holds. ``np.float32(1.5)``, ``np.float64``, ``np.float16`` and ml_dtypes' bfloat16 and
fp8 scalars act as a Python ``float`` literal, ``np.int32``/``np.int64``/``np.uint8``...
as an ``int`` literal, and ``np.bool_`` as ``True``/``False``: weakly typed, so
``x_f16 * np.float32(1.5)`` stays float16 and ``n_i8 + np.int32(3)`` stays int8, exactly
as ``x_f16 * 1.5`` and ``n_i8 + 3`` do in Triton. (Triton itself accepts only Python numbers there, and
``np.float64`` because it subclasses ``float``; numpy scalars passed as *runtime*
arguments are numbers in both. Treating every numpy scalar like ``np.float64`` is the
rule that makes numpy-typed constants in real code work without surprises.) A
constexpr ``BLOCK=np.int64(16)`` specializes as ``BLOCK=16``: the same build.
"""
import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
import mutile.runtime.compile as mcompile

from ..conftest import assert_bits_equal, poison, put, random_data

N = 128
BLOCK = 64
GRID = (N // BLOCK,)

F32 = np.float32(1.5)
F64 = np.float64(0.25)
I32 = np.int32(3)
I64 = np.int64(-2)
TRUE = np.bool_(True)
BF16 = ml_dtypes.bfloat16(0.75)
PAIR = (np.float32(0.5), np.int64(2))


@mutile.jit
def k_numpy_globals(X, Nums, Y, Z, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)                      # float16
    n = ml.load(Nums + offs)                   # int8
    put(Y, 0, x * F32, BLOCK)                  # put() checks the dtype: still float16
    put(Y, 1, x + I32, BLOCK)
    put(Y, 2, x - F64, BLOCK)
    put(Y, 3, x * PAIR[0] + PAIR[1], BLOCK)
    put(Y, 4, x * np.float32(2.0), BLOCK)      # a numpy call at compile time
    put(Y, 5, x + BF16, BLOCK)                 # an ml_dtypes scalar is a float too
    put(Z, 0, n + I32, BLOCK)                  # still int8 (wraps)
    put(Z, 1, n * I64, BLOCK)
    put(Z, 2, ml.where(TRUE, n, 0), BLOCK)


def _f16(v64):
    return np.asarray(v64).astype(np.float16)


def _i8(v64):
    return np.asarray(v64).astype(np.int64).astype(np.int8)


def test_numpy_scalar_globals_are_weak_numbers(backend, rng):
    """Each numpy scalar global acts as the Python literal of its kind (see the module
    docstring): the results keep the tiles' float16 / int8 types, values exact."""
    x = random_data(np.float16, N, rng)
    n = random_data(np.int8, N, rng)
    y, z = poison((6, N), np.float16), poison((3, N), np.int8)
    k_numpy_globals[GRID](x, n, y, z, BLOCK=BLOCK, backend=backend)
    x64, n64 = x.astype(np.float64), n.astype(np.int64)
    assert_bits_equal(y[0], _f16(x64 * 1.5), "x * np.float32(1.5)")
    assert_bits_equal(y[1], _f16(x64 + 3), "x + np.int32(3)")
    assert_bits_equal(y[2], _f16(x64 - 0.25), "x - np.float64(0.25)")
    assert_bits_equal(y[3], _f16(_f16(x64 * 0.5).astype(np.float64) + 2), "x * 0.5 + 2")
    assert_bits_equal(y[4], _f16(x64 * 2.0), "x * np.float32(2.0)")
    assert_bits_equal(y[5], _f16(x64 + 0.75), "x + bfloat16(0.75)")
    assert_bits_equal(z[0], _i8(n64 + 3), "n + np.int32(3)")
    assert_bits_equal(z[1], _i8(n64 * -2), "n * np.int64(-2)")
    assert_bits_equal(z[2], n, "where(np.bool_(True), n, 0)")


# ------------------------------------------------------------------ constexpr arguments
@mutile.jit
def k_block_copy(X, Y, SCALE: ml.constexpr, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    ml.store(Y + offs, ml.load(X + offs) * SCALE)


def test_numpy_integer_constexpr_specializes_as_the_int(backend, rng):
    """``BLOCK=np.int64(16)`` (as real code computes block sizes) compiles and is the
    same specialization, the same build, as ``BLOCK=16``; ``np.float32(0.5)`` is 0.5."""
    x = random_data(np.float32, N, rng)
    y = poison(N, np.float32)
    k = k_block_copy[(N // 16,)](x, y, np.float32(0.5), np.int64(16), backend=backend)
    assert_bits_equal(y, (x.astype(np.float64) * 0.5).astype(np.float32), "x * 0.5")
    assert type(k.spec["BLOCK"]) is int and k.spec["BLOCK"] == 16
    assert type(k.spec["SCALE"]) is float
    again = k_block_copy.warmup(x, y, 0.5, 16, grid=(N // 16,), backend=backend)
    assert again is k


@pytest.mark.parametrize("value,what", [
    (np.arange(4), r"argument 'BLOCK' is a constexpr parameter but got an array"),
    ({"a": 1}, r"argument 'BLOCK' is a constexpr parameter but got a dict"),
])
def test_constexpr_that_cannot_be_a_compile_time_value(value, what):
    x = np.ones(N, np.float32)
    with pytest.raises(mutile.LaunchError, match=what):
        k_block_copy[GRID](x, x.copy(), 1.0, value)


# ------------------------------------------------------------------ closures
def test_closure_values_are_compile_time_values(backend, rng):
    """A kernel defined inside a function reads that function's variables as Triton
    does: numbers, numpy scalars, bools, constexprs, dtypes and @jit functions."""
    scale = 0.5
    shift = np.int32(3)
    use_shift = True
    out_dtype = ml.float16
    TILE = ml.constexpr(BLOCK)

    @mutile.jit
    def double(v):
        return v * 2

    @mutile.jit
    def kern(X, Y):
        offs = ml.program_id(0) * TILE + ml.arange(0, TILE)
        v = double(ml.load(X + offs) * scale)
        if use_shift:
            v = v + shift
        ml.store(Y + offs, v.to(out_dtype))

    x = random_data(np.float32, N, rng)
    y = poison(N, np.float16)
    kern[GRID](x, y, backend=backend)
    want = (x.astype(np.float64) * 0.5 * 2 + 3).astype(np.float32).astype(np.float16)
    assert_bits_equal(y, want, "double(x * scale) + shift")


def make_scaler(scale):
    @mutile.jit
    def scaler(X, Y, BLOCK: ml.constexpr):
        offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
        ml.store(Y + offs, ml.load(X + offs) * scale)
    return scaler


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty disk cache, and the list of kernels the frontend compiles."""
    monkeypatch.setenv("MUTILE_CACHE_DIR", str(tmp_path / "cache"))
    seen = []
    real = mcompile.frontend_and_passes

    def counting(jitfn, *args, **kwargs):
        seen.append(jitfn.fn.__qualname__)
        return real(jitfn, *args, **kwargs)

    monkeypatch.setattr(mcompile, "frontend_and_passes", counting)
    return seen


def test_each_closure_value_gets_its_own_build(backend, rng, fresh_cache):
    """Two kernels from one factory share their source, name and arguments but not
    their closure's ``scale``: the second must compile again (its value is part of the
    specialization), not take the first's build from the disk cache. Launching either
    again compiles nothing."""
    x = random_data(np.float32, N, rng)
    half, twice = make_scaler(0.5), make_scaler(2.0)
    for kern, scale in ((half, 0.5), (twice, 2.0), (half, 0.5), (twice, 2.0)):
        y = poison(N, np.float32)
        kern[GRID](x, y, BLOCK=BLOCK, backend=backend)
        assert_bits_equal(y, (x.astype(np.float64) * scale).astype(np.float32),
                          f"x * {scale}")
    assert len(fresh_cache) == 2, fresh_cache
    again = make_scaler(2.0)                   # a third kernel, same value: a disk hit
    y = poison(N, np.float32)
    k = again[GRID](x, y, BLOCK=BLOCK, backend=backend)
    assert k.metadata["cache_hit"] and len(fresh_cache) == 2, fresh_cache


def test_closure_jit_callee_does_not_recompile_each_launch(fresh_cache, rng):
    """A @jit helper defined next to the kernel (in the same function) is part of the
    closure key, so relaunching the kernel is an in-memory hit."""
    @mutile.jit
    def plus_one(v):
        return v + 1.0

    @mutile.jit
    def kern(X, Y, BLOCK: ml.constexpr):
        offs = ml.arange(0, BLOCK)
        ml.store(Y + offs, plus_one(ml.load(X + offs)))

    x = random_data(np.float32, 16, rng)
    ks = []
    for _ in range(3):
        y = poison(16, np.float32)
        ks.append(kern[(1,)](x, y, BLOCK=16))
        assert_bits_equal(y, (x.astype(np.float64) + 1).astype(np.float32), "x + 1")
    assert ks[0] is ks[1] is ks[2] and len(fresh_cache) == 1, fresh_cache


def test_a_closure_variable_assigned_again_recompiles(rng):
    """Python reads a closure cell when the code runs: after ``scale = 2.0`` the same
    kernel object must compute with 2.0 (the next launch compiles again)."""
    scale = 0.5

    @mutile.jit
    def kern(X, Y, BLOCK: ml.constexpr):
        offs = ml.arange(0, BLOCK)
        ml.store(Y + offs, ml.load(X + offs) * scale)

    x = random_data(np.float32, 16, rng)
    for scale in (0.5, 2.0):    # noqa: B007 - rebinds the kernel's closure cell
        y = poison(16, np.float32)
        kern[(1,)](x, y, BLOCK=16)
        assert_bits_equal(y, (x.astype(np.float64) * scale).astype(np.float32), f"* {scale}")
