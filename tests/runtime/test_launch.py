"""Launching: ``kernel[grid](...)`` argument and grid checks (each a ``LaunchError``
naming what is wrong), ``warmup`` and ``CompiledKernel``, the host helpers (``cdiv``,
``next_power_of_2``, ``Config``, ``testing.time_calls``), backend selection and array-like
arguments."""
from __future__ import annotations

import platform
import re
import time

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.testing import time_calls

from ..conftest import ArrayInterfaceOnly, DLPackOnly, poison


@mutile.jit
def add_kernel(X, Y, Z, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    x = ml.load(X + offs, mask=mask)
    y = ml.load(Y + offs, mask=mask)
    ml.store(Z + offs, x + y, mask=mask)


@mutile.jit
def grid_ids(Out):
    """Out[linear program id] = pid0 + 100 * pid1 + 10000 * pid2."""
    p0, p1, p2 = ml.program_id(0), ml.program_id(1), ml.program_id(2)
    n0, n1 = ml.num_programs(0), ml.num_programs(1)
    ml.store(Out + p0 + n0 * (p1 + n1 * p2), p0 + 100 * p1 + 10000 * p2)


def inputs(rng, n=1000, dtype=np.float32):
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    return x, y, poison(n, dtype)


def grid_of(n, block=128):
    return (mutile.cdiv(n, block),)


def check_add(z, x, y):
    assert not np.isnan(z).any(), "elements left unwritten"
    np.testing.assert_array_equal(z, x + y)


def raises_launch_error(*fragments):
    """Checks the LaunchError's message holds every fragment."""
    class Ctx:
        def __enter__(self):
            self.cm = pytest.raises(mutile.LaunchError)
            self.info = self.cm.__enter__()
            return self.info

        def __exit__(self, *exc):
            r = self.cm.__exit__(*exc)
            msg = str(self.info.value)
            for f in fragments:
                assert f in msg, f"{f!r} is not in the message: {msg}"
            return r
    return Ctx()


# ---------------------------------------------------------------- arguments
def test_a_correct_launch(backend, rng):
    x, y, z = inputs(rng)
    k = add_kernel[grid_of(x.size)](x, y, z, x.size, BLOCK=128, backend=backend)
    check_add(z, x, y)
    assert isinstance(k, mutile.CompiledKernel)


@pytest.mark.parametrize("call, fragments", [
    (lambda x, y, z, n, b: add_kernel[(8,)](x, y, z, BLOCK=128, backend=b), ["'n'"]),
    (lambda x, y, z, n, b: add_kernel[(8,)](x, y, z, n, backend=b), ["'BLOCK'"]),
    (lambda x, y, z, n, b: add_kernel[(8,)](x, y, BLOCK=128, backend=b), ["'Z'"]),
    (lambda x, y, z, n, b: add_kernel[(8,)](x, y, z, n, 7, BLOCK=128, backend=b),
     ["add_kernel", "'BLOCK'"]),
    (lambda x, y, z, n, b: add_kernel[(8,)](x, y, z, n, 128, 99, backend=b),
     ["add_kernel", "too many"]),
    (lambda x, y, z, n, b: add_kernel[(8,)](x, y, z, n, BLOCK=128, BLOK=64, backend=b),
     ["'BLOK'"]),
    (lambda x, y, z, n, b: add_kernel[(8,)](x, y, z, n, BLOCK=128, num_warp=4, backend=b),
     ["'num_warp'"]),
], ids=["too-few", "missing-constexpr", "two-missing", "constexpr-twice", "too-many",
        "unknown-keyword", "misspelt-option"])
def test_wrong_arguments(call, fragments, backend, rng):
    x, y, z = inputs(rng)
    with raises_launch_error(*fragments):
        call(x, y, z, x.size, backend)
    assert np.isnan(z).all(), "the kernel ran"


@pytest.mark.parametrize("bad, fragments", [
    (lambda x, y, z: (x.astype(np.float64), y, z, x.size), ["'X'", "f64"]),
    (lambda x, y, z: (x, y, z.astype(np.float16), x.size), ["'Z'", "f16"]),
    (lambda x, y, z: (x, y.astype(np.int32), z, x.size), ["'Y'"]),
    (lambda x, y, z: (x, y, z, float(x.size)), ["'n'"]),
    (lambda x, y, z: (x, y, z, 2 ** 40), ["'n'"]),
], ids=["X-float64", "Z-float16", "Y-int32", "n-float", "n-int64"])
def test_a_warmed_up_kernel_rejects_another_specialization(bad, fragments, backend, rng):
    x, y, z = inputs(rng)
    k = add_kernel.warmup(x, y, z, x.size, BLOCK=128, backend=backend, grid=grid_of(x.size))
    args = bad(x, y, z)
    with raises_launch_error(*fragments):
        k[grid_of(x.size)](*args, BLOCK=128, backend=backend)
    assert np.isnan(args[2]).all(), "the kernel ran"
    k[grid_of(x.size)](x, y, z, x.size, BLOCK=128, backend=backend)      # still usable
    check_add(z, x, y)


def test_a_warmed_up_kernel_rejects_another_constexpr_value(backend, rng):
    x, y, z = inputs(rng)
    k = add_kernel.warmup(x, y, z, x.size, BLOCK=128, backend=backend)
    with raises_launch_error("'BLOCK'"):
        k[grid_of(x.size, 32)](x, y, z, x.size, BLOCK=32, backend=backend)


def test_read_only_arrays(backend, rng):
    x, y, z = inputs(rng)
    for a in (x, y):
        a.setflags(write=False)
    add_kernel[grid_of(x.size)](x, y, z, x.size, BLOCK=128, backend=backend)   # only read: fine
    check_add(z, x, y)
    z2 = poison(x.size, np.float32)
    z2.setflags(write=False)
    with raises_launch_error("'Z'", "read-only"):
        add_kernel[grid_of(x.size)](x, y, z2, x.size, BLOCK=128, backend=backend)
    assert np.isnan(z2).all(), "the kernel wrote into a read-only array"
    # the same through a warmed-up kernel
    k = add_kernel.warmup(x, y, z, x.size, BLOCK=128, backend=backend)
    with raises_launch_error("'Z'"):
        k[grid_of(x.size)](x, y, z2, x.size, BLOCK=128, backend=backend)
    assert np.isnan(z2).all()


# (None is a compile-time None, as in Triton: tests/language/test_compat_none.py)
@pytest.mark.parametrize("make, fragments", [
    (lambda x: list(x), ["'X'", "list"]),
    (lambda x: x.astype(object), ["'X'", "object"]),
    (lambda x: "an array", ["'X'", "str"]),
    (lambda x: {"data": x}, ["'X'", "dict"]),
    (lambda x: 1 + 2j, ["'X'", "complex"]),
], ids=["list", "object-array", "str", "dict", "complex"])
def test_unsupported_argument_types(make, fragments, backend, rng):
    x, y, z = inputs(rng, 64)
    with raises_launch_error(*fragments):
        add_kernel[(1,)](make(x), y, z, x.size, BLOCK=128, backend=backend)
    assert np.isnan(z).all()


# ---------------------------------------------------------------- grids
@pytest.mark.parametrize("grid, fragments", [
    ((0,), ["0"]), ((-1,), ["-1"]), ((4, 0), ["0"]), ((2, 2, -3), ["-3"]),
    ((1, 1, 1, 1), ["grid"]), ((), ["grid"]),
    ((None,), ["grid"]), ("abc", ["grid"]), ((1, [2]), ["grid"]),
    pytest.param((2.5,), ["grid"]),
    pytest.param(("3",), ["grid"]),
], ids=["zero", "negative", "zero-y", "negative-z", "four-dims", "empty", "None", "str",
        "list-size", "float", "str-size"])
def test_bad_grids(grid, fragments, backend, rng):
    x, y, z = inputs(rng)
    with raises_launch_error(*fragments):
        add_kernel[grid](x, y, z, x.size, BLOCK=128, backend=backend)
    assert np.isnan(z).all(), "the kernel ran"


@pytest.mark.parametrize("grid", [(3,), (3, 4), (2, 3, 4), [2, 3, 4],
                                  (np.int64(2), np.int32(3), 1)],
                         ids=["1d", "2d", "3d", "list", "numpy-ints"])
def test_grids_of_one_to_three_dims(grid, backend):
    g = [int(v) for v in grid] + [1] * (3 - len(grid))
    out = poison(g[0] * g[1] * g[2], np.int32)
    grid_ids[grid](out, backend=backend)
    p0, p1, p2 = np.meshgrid(np.arange(g[0]), np.arange(g[1]), np.arange(g[2]), indexing="ij")
    want = (p0 + 100 * p1 + 10000 * p2).transpose(2, 1, 0).ravel()
    np.testing.assert_array_equal(out, want)


def test_grid_as_a_callable_of_the_meta_parameters(backend, rng):
    x, y, z = inputs(rng, 1000)
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (mutile.cdiv(meta["n"], meta["BLOCK"]),)

    add_kernel[grid](x, y, z, x.size, BLOCK=64, backend=backend)
    check_add(z, x, y)
    [meta] = seen
    assert meta["BLOCK"] == 64 and meta["n"] == 1000
    assert meta["X"] is x and meta["Z"] is z
    # a grid callable that gets it wrong is caught like a literal grid
    with raises_launch_error("grid"):
        add_kernel[lambda meta: (0,)](x, y, z, x.size, BLOCK=64, backend=backend)


# ---------------------------------------------------------------- warmup
def test_warmup_returns_a_compiled_kernel(backend, rng):
    x, y, z = inputs(rng, 500)
    k = add_kernel.warmup(x, y, z, x.size, BLOCK=128, backend=backend, grid=grid_of(500))
    assert isinstance(k, mutile.CompiledKernel)
    assert np.isnan(z).all(), "warmup launched the kernel"
    stages = ["ir", "inline", "canonicalize", "cse", "licm", "dce"]
    texts = {"llvm": ["llir", "asm"], "pinghu": ["musa"]}[backend]
    assert set(k.asm) >= set(stages) | set(texts)
    for s in stages + texts:
        assert isinstance(k.asm[s], str) and k.asm[s].strip(), s
    for s in stages:
        assert "add_kernel" in k.asm[s] and "load" in k.asm[s], s
    if backend == "pinghu":
        assert k.asm["musa"].startswith(".kernel add_kernel")
        assert "LSU.LD.GLOBAL" in k.asm["musa"] and isinstance(k.asm["musa_bin"], bytes)
    else:
        assert "define" in k.asm["llir"] and "add_kernel" in k.asm["llir"]
    if backend == "llvm" and platform.machine().lower() in ("x86_64", "amd64"):
        asm = k.asm["asm"]
        assert re.search(r"^\s+(v?mov\w*|lea\w?|push\w?)\s", asm, re.M), "no x86 instructions"
        assert re.search(r"^\s+ret\w?\b", asm, re.M)
        assert re.search(r"^add_kernel\w*:", asm, re.M), "no function label"
    md = k.metadata
    assert md["name"] == "add_kernel" and md["backend"] == backend
    assert list(md["signature"]) == ["X", "Y", "Z", "n"]
    assert "f32" in md["signature"]["X"] and "i32" in md["signature"]["n"]
    assert md["constants"] == {"BLOCK": 128}
    k[grid_of(500)](x, y, z, x.size, BLOCK=128, backend=backend)
    check_add(z, x, y)
    # warmup twice is the same kernel, and the launch uses it
    assert add_kernel.warmup(x, y, z, x.size, BLOCK=128, backend=backend) is k
    assert add_kernel[grid_of(500)](x, y, z, x.size, BLOCK=128, backend=backend) is k


def test_warmup_with_ir_types(backend, rng):
    f32p = T.PointerType(T.f32)
    k = add_kernel.warmup(f32p, f32p, f32p, T.i32, BLOCK=128, backend=backend)
    x, y, z = inputs(rng, 300)
    k[grid_of(300)](x, y, z, 300, BLOCK=128, backend=backend)
    check_add(z, x, y)


# ---------------------------------------------------------------- host helpers
@pytest.mark.parametrize("a, b", [(10, 3), (9, 3), (0, 5), (1, 1024), (1024, 1024),
                                  (2 ** 40 + 1, 2 ** 20), (7, 1)])
def test_cdiv(a, b):
    assert mutile.cdiv(a, b) == (a + b - 1) // b
    assert isinstance(mutile.cdiv(a, b), int)


@pytest.mark.parametrize("n, want", [(0, 1), (1, 1), (2, 2), (3, 4), (5, 8), (1000, 1024),
                                     (1024, 1024), (2 ** 20, 2 ** 20), (2 ** 20 + 1, 2 ** 21)])
def test_next_power_of_2(n, want):
    assert mutile.next_power_of_2(n) == want


def test_config(backend, rng):
    cfg = mutile.Config({"BLOCK": 64}, num_warps=8)
    assert cfg.kwargs == {"BLOCK": 64}
    assert cfg.num_warps == 8 and cfg.num_stages == 3
    kw = cfg.all_kwargs()
    assert kw["BLOCK"] == 64 and kw["num_warps"] == 8 and kw["num_stages"] == 3
    cfg2 = mutile.Config({"BLOCK": 256}, num_warps=2, num_stages=1)
    assert cfg2.all_kwargs()["num_stages"] == 1 and cfg2.kwargs == {"BLOCK": 256}
    assert "BLOCK" in repr(cfg)
    x, y, z = inputs(rng, 700)
    k = add_kernel[grid_of(700, 64)](x, y, z, x.size, backend=backend, **kw)
    check_add(z, x, y)
    assert k.metadata["num_warps"] == 8 and k.metadata["constants"] == {"BLOCK": 64}


def test_time_calls_times_in_milliseconds():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.002)

    ms = time_calls(fn, warmup=2, rep=5, min_seconds=0)
    assert 2.0 <= ms < 500, ms
    assert len(calls) == 2 + 5
    times = time_calls(fn, warmup=0, rep=4, min_seconds=0, return_mode="all")
    assert len(times) == 4 and all(2.0 <= t < 500 for t in times)
    modes = {m: time_calls(fn, warmup=0, rep=5, min_seconds=0, return_mode=m)
             for m in ("min", "max", "mean", "median")}
    # each mode comes from its own run, so only their ranges can be compared
    assert all(2.0 <= v < 500 for v in modes.values()), modes
    # min_seconds keeps timing past rep
    calls.clear()
    time_calls(fn, warmup=0, rep=1, min_seconds=0.05)
    assert len(calls) > 5


def test_time_calls_on_a_kernel(backend, rng):
    x, y, z = inputs(rng, 4096)
    ms = time_calls(lambda: add_kernel[grid_of(4096)](x, y, z, x.size, BLOCK=128,
                                                      backend=backend), rep=3, min_seconds=0)
    assert 0 < ms < 1000
    check_add(z, x, y)


# ---------------------------------------------------------------- backends
def test_explicit_and_unknown_backends(rng):
    x, y, z = inputs(rng)
    k = add_kernel[grid_of(x.size)](x, y, z, x.size, BLOCK=128, backend="llvm")
    check_add(z, x, y)
    assert k.metadata["backend"] == "llvm"
    z2 = poison(x.size, np.float32)
    with raises_launch_error("no-such-backend"):
        add_kernel[grid_of(x.size)](x, y, z2, x.size, BLOCK=128, backend="no-such-backend")
    with raises_launch_error("no-such-backend"):
        add_kernel.warmup(x, y, z2, x.size, BLOCK=128, backend="no-such-backend")
    assert np.isnan(z2).all()


def test_mutile_backend_env_selects_the_default(monkeypatch, rng):
    x, y, z = inputs(rng)
    monkeypatch.setenv("MUTILE_BACKEND", "llvm")
    k = add_kernel[grid_of(x.size)](x, y, z, x.size, BLOCK=128)
    check_add(z, x, y)
    assert k.metadata["backend"] == "llvm"
    monkeypatch.setenv("MUTILE_BACKEND", "env-backend-x")
    z2 = poison(x.size, np.float32)
    with raises_launch_error("env-backend-x"):
        add_kernel[grid_of(x.size)](x, y, z2, x.size, BLOCK=128)
    assert np.isnan(z2).all()
    # an explicit backend= wins over the environment
    add_kernel[grid_of(x.size)](x, y, z2, x.size, BLOCK=128, backend="llvm")
    check_add(z2, x, y)


# ---------------------------------------------------------------- array-likes
@pytest.mark.parametrize("wrap", [ArrayInterfaceOnly, DLPackOnly], ids=lambda w: w.__name__)
def test_array_likes(wrap, backend, rng):
    x, y, z = inputs(rng, 777)
    assert not hasattr(wrap(x), "__array__") and not isinstance(wrap(x), np.ndarray)
    add_kernel[grid_of(777)](wrap(x), wrap(y), wrap(z), 777, BLOCK=128, backend=backend)
    check_add(z, x, y)          # written in place, through the wrapper
    # the dtype is read through the protocol too
    k = add_kernel.warmup(x, y, z, 777, BLOCK=128, backend=backend)
    with raises_launch_error("'X'", "f64"):
        k[grid_of(777)](wrap(x.astype(np.float64)), wrap(y), wrap(z), 777, BLOCK=128,
                        backend=backend)


# ---------------------------------------------------------------- tracebacks
@mutile.jit
def _uses_undefined(X):
    ml.store(X, not_defined_anywhere)  # noqa: F821


@mutile.jit
def _reads_past_the_end(X, n):
    ml.store(X + n, 1.0)


def _mutile_frames(tb) -> list:
    import os
    import traceback
    roots = [os.path.dirname(mutile.__file__)]
    return [f for f in traceback.extract_tb(tb) if any(f.filename.startswith(r) for r in roots)]


@pytest.mark.parametrize("how", ["launch", "warmup", "compiled", "fault"])
def test_errors_raised_at_launch_hide_the_compiler_frames(how, backend):
    """A CompilationError / LaunchError / DeviceFault raised by a launch carries at most
    the one frame of the entry point the user called, not the compiler's."""
    x = poison(4, np.float32)
    with pytest.raises(mutile.MutileError) as ei:
        if how == "launch":
            _uses_undefined[(1,)](x, backend=backend)
        elif how == "warmup":
            _uses_undefined.warmup(x, backend=backend, grid=(1,))
        elif how == "compiled":
            k = add_kernel.warmup(x, x, x, 4, BLOCK=4, backend=backend, grid=(1,))
            k[(1,)](x, x, x, 4, BLOCK=8)
        else:
            _reads_past_the_end[(1,)](x, 4, backend=backend)
    frames = _mutile_frames(ei.value.__traceback__)
    assert len(frames) <= 1, "compiler frames in the traceback:\n" + "\n".join(
        f"{f.filename}:{f.lineno} {f.name}" for f in frames)
    assert ei.value.__cause__ is None and ei.value.__context__ is None
