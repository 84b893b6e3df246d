"""Launch: multi-program grids over threads, bounds-check faults with source locations,
device_assert, device_print, serialization."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from mutile.backends import llvm as L
from mutile.errors import DeviceFault, Loc
from mutile.ir import types as T

from .conftest import KB, poisoned, ptr, tile


def test_grid_every_program_runs():
    kb = KB("grid", [("o", ptr(T.i32)), ("nx", ptr(T.i32))])
    x, y, z = (kb("program_id", axis=a) for a in range(3))
    gx, gy = kb("num_programs", axis=0), kb("num_programs", axis=1)
    lin = kb("add", x, kb("mul", gx, kb("add", y, kb("mul", gy, z))))
    code = kb("add", x, kb("add", kb("mul", y, kb.const(10, T.i32)),
                           kb("mul", z, kb.const(100, T.i32))))
    kb.store(kb("addptr", kb.a["o"], lin), code)
    kb.store(kb.a["nx"], kb("add", gx, kb("num_programs", axis=2)))
    k = kb.compile()
    for threads in (1, 2, 3):
        o, nx = poisoned((2, 3, 5), T.i32), poisoned((1,), T.i32)
        k.run([o, nx], (5, 3, 2), num_threads=threads)
        zz, yy, xx = np.meshgrid(range(2), range(3), range(5), indexing="ij")
        np.testing.assert_array_equal(o, xx + 10 * yy + 100 * zz)
        assert nx[0] == 7
    k.run([o, nx], (0,))                      # an empty grid runs nothing


def _vadd(check=True, off_by_one=False, negative=False, line=1):
    BLOCK = 64
    kb = KB("vadd", [("x", ptr(T.f32)), ("out", ptr(T.f32)), ("n", T.i32)], file=__file__)
    pid = kb("program_id", axis=0)
    offs = kb("add", kb.splat(kb("mul", pid, kb.const(BLOCK, T.i32)), (BLOCK,)), kb.arange(BLOCK))
    if negative:
        offs = kb("sub", offs, kb.const(1, tile((BLOCK,), T.i32)))
    mask = kb("cmp", offs, kb.splat(kb.a["n"], (BLOCK,)), pred="le" if off_by_one else "lt")
    x = kb.load(kb.ptrs(kb.a["x"], offs), mask, kb.const(0.0, tile((BLOCK,), T.f32)))
    kb.at(line)
    kb.store(kb.ptrs(kb.a["out"], offs), x, mask)   # FAULT LINE
    return kb.compile(check_bounds=check)


def _fault_line():
    src, start = inspect.getsourcelines(_vadd)
    return start + next(i for i, s in enumerate(src) if "# FAULT LINE" in s)


def test_off_by_one_store_is_caught():
    line = _fault_line()
    k = _vadd(off_by_one=True, line=line)
    n = 100
    x = np.arange(n + 1, dtype=np.float32)          # the load of x[n] is in bounds
    out = poisoned((n,), T.f32)
    with pytest.raises(DeviceFault) as ei:
        k.run([x, out, n], ((n + 63) // 64,))
    e = ei.value
    assert e.loc == Loc(__file__, line, 0)
    assert e.param == "out" and e.index == n and e.length == n
    assert e.program == (1, 0, 0)
    msg = str(e)
    assert f"{__file__}:{line}" in msg and "# FAULT LINE" in msg
    assert "element 100 of 'out'" in msg and "100 elements" in msg


def test_negative_offset_is_caught_on_load():
    k = _vadd(negative=True)
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(DeviceFault) as ei:
        k.run([x, poisoned((64,), T.f32), 64], (1,))
    e = ei.value
    assert e.param == "x" and e.index == -1 and e.length == 64 and e.element == 0
    assert "load of f32" in str(e)


def test_in_bounds_launch_has_no_fault_and_matches():
    k = _vadd()
    n = 1000
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = poisoned((n,), T.f32)
    k.run([x, out, n], ((n + 63) // 64,))
    np.testing.assert_array_equal(out, x)


def test_untraceable_pointer_names_nearest_array():
    """A pointer chosen at run time between two parameters: checked against all arrays."""
    kb = KB("sel", [("a", ptr(T.f32)), ("b", ptr(T.f32)), ("c", T.i1)])
    p = kb("select", kb.a["c"], kb.a["a"], kb.a["b"])
    kb.store(kb("addptr", p, kb.const(16, T.i32)), kb.const(1.0, T.f32))
    k = kb.compile(check_bounds=True)
    a, b = np.zeros(20, np.float32), np.zeros(8, np.float32)
    k.run([a, b, True], (1,))
    assert a[16] == 1.0
    with pytest.raises(DeviceFault) as ei:
        k.run([a, b, False], (1,))
    assert ei.value.param == "b" and ei.value.index == 16 and ei.value.length == 8


def test_device_assert():
    kb = KB("asrt", [("x", ptr(T.i32))])
    v = kb.load(kb.ptrs(kb.a["x"], kb.arange(16)))
    kb.op("assert", [kb("cmp", v, kb.const(0, tile((16,), T.i32)), pred="ge")],
          {"msg": "x must be non-negative"})
    k = kb.compile()
    k.run([np.arange(16, dtype=np.int32)], (3,))
    x = np.arange(16, dtype=np.int32)
    x[5] = -1
    with pytest.raises(DeviceFault, match="x must be non-negative") as ei:
        k.run([x], (3,))
    assert ei.value.element == 5 and ei.value.program == (0, 0, 0)


def test_device_print(capfd):
    kb = KB("pr", [("x", ptr(T.f32)), ("n", T.i32)])
    v = kb.load(kb.ptrs(kb.a["x"], kb.arange(2)))
    kb.op("print", [v], {"prefix": "v: "})
    kb.op("print", [kb.a["n"]], {"prefix": "n="})
    k = kb.compile()
    capfd.readouterr()
    k.run([np.array([1.5, -2.0], np.float32), 7], (2,), num_threads=1)
    out = capfd.readouterr().out.splitlines()
    assert "pid (0, 0, 0) idx (0) v: 1.500000" in out
    assert "pid (1, 0, 0) idx (1) v: -2.000000" in out
    assert "pid (1, 0, 0) n=7" in out and len(out) == 6


def test_serialize_round_trip():
    k = _vadd(check=True)
    k2 = L.deserialize(L.serialize(k))
    x = np.arange(64, dtype=np.float32)
    out = poisoned((64,), T.f32)
    k2.run([x, out, 64], (1,))
    np.testing.assert_array_equal(out, x)
    assert "vadd_programs" in k2.asm["llir"] and k2.metadata["check_bounds"]
    with pytest.raises(DeviceFault):
        k2.run([x, out, 65], (2,))
