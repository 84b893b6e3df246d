"""Programs and control flow: program_id / num_programs on 1-, 2- and 3-D grids, a grid
given as a callable of the meta-parameters, ``range`` / ``ml.range`` with negative and
non-unit (runtime and constexpr) steps, ``while``, ``if`` with results (and the
conditional expression), ``static_range``, ``device_print`` (stdout text),
``device_assert``, and the hints multiple_of / max_contiguous / max_constancy / assume
not changing results."""
from __future__ import annotations

import re

import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import assert_bits_equal, poison, random_data


# ---------------------------------------------------------------- program ids
@mutile.jit
def ids_kernel(O):
    p0, p1, p2 = ml.program_id(0), ml.program_id(1), ml.program_id(2)
    n0, n1, n2 = ml.num_programs(0), ml.num_programs(1), ml.num_programs(2)
    linear = (p2 * n1 + p1) * n0 + p0
    row = O + linear * 6
    vals = (p0, p1, p2, n0, n1, n2)
    for i in ml.static_range(6):
        ml.store(row + i, vals[i])


@pytest.mark.parametrize("grid", [(7,), (3, 5), (2, 3, 4)], ids=["1d", "2d", "3d"])
def test_program_ids(grid, backend):
    """Every program writes its ids and the grid size; each row must be its own."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    n = int(np.prod(g))
    o = poison((n + 2, 6), np.int32)
    ids_kernel[grid](o, backend=backend)
    p2, p1, p0 = np.meshgrid(np.arange(g[2]), np.arange(g[1]), np.arange(g[0]), indexing="ij")
    want = np.stack([p0.ravel(), p1.ravel(), p2.ravel()] + [np.full(n, s) for s in g], 1)
    assert_bits_equal(o[:n], want.astype(np.int32), f"grid {grid}")
    assert_bits_equal(o[n:], poison((2, 6), np.int32), "rows past the grid")


@mutile.jit
def scaled_copy(X, Y, n, alpha, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    ml.store(Y + offs, ml.load(X + offs, mask=offs < n) * alpha, mask=offs < n)


def test_grid_callable_of_meta(rng, backend):
    """The grid may be a function of the bound arguments (constexprs included)."""
    n = 1000
    x = random_data(np.float32, n, rng, specials=False)
    y = poison(n, np.float32)
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (mutile.cdiv(meta["n"], meta["BLOCK"]),)

    scaled_copy[grid](x, y, n, 2.0, BLOCK=128, backend=backend)
    assert_bits_equal(y, x * np.float32(2), "y")
    assert seen and seen[0]["n"] == n and seen[0]["BLOCK"] == 128


def test_numpy_scalar_arguments(rng, backend):
    """numpy scalars (np.int64, np.float32) are numbers, like Python's (as in Triton)."""
    n = 300
    x = random_data(np.float32, n, rng, specials=False)
    want = poison(n, np.float32)
    scaled_copy[(3,)](x, want, n, 2.0, BLOCK=128, backend=backend)
    y = poison(n, np.float32)
    scaled_copy[(3,)](x, y, np.int64(n), np.float32(2.0), BLOCK=128, backend=backend)
    assert_bits_equal(y, want, "numpy scalars")


# ---------------------------------------------------------------- loops and branches
@mutile.jit
def loops_kernel(O, start, end, step, n, STEP: ml.constexpr):
    # a runtime step (of either sign)
    count = 0
    total = 0
    for i in ml.range(start, end, step):
        count += 1
        total += i * (count + 1)
    ml.store(O + 0, count)
    ml.store(O + 1, total)
    # a constexpr step, negative bounds, plain range() and num_stages
    acc = 0
    for i in range(end, start, STEP):
        acc = acc * 3 + i
    ml.store(O + 2, acc)
    acc2 = 0
    for i in ml.range(0, n, 3, num_stages=2):
        acc2 += i
    ml.store(O + 3, acc2)
    # nested loops whose inner bound depends on the outer variable
    tri = 0
    for i in range(0, n):
        for j in range(i, n, 2):
            tri += j - i
    ml.store(O + 4, tri)
    # while: the Collatz length of n
    c = n
    steps = 0
    while c != 1:
        if c % 2 == 0:
            c = c // 2
        else:
            c = 3 * c + 1
        steps += 1
    ml.store(O + 5, steps)
    # static_range: unrolled, i is a constexpr
    s = 0
    for i in ml.static_range(1, 10, 3):
        ml.static_assert(i % 3 == 1)
        s = s * 10 + i
    ml.store(O + 6, s)
    # a while whose condition is false at once
    k = n
    while k < 0:
        k += 1
    ml.store(O + 7, k)


def py_loops(start, end, step, n, STEP):
    count = total = 0
    for i in range(start, end, step):
        count += 1
        total += i * (count + 1)
    acc = 0
    for i in range(end, start, STEP):
        acc = acc * 3 + i
    acc2 = sum(range(0, n, 3))
    tri = sum(j - i for i in range(n) for j in range(i, n, 2))
    c, steps = n, 0
    while c != 1:
        c = c // 2 if c % 2 == 0 else 3 * c + 1
        steps += 1
    wrap = lambda v: (v + 2 ** 31) % 2 ** 32 - 2 ** 31   # noqa: E731
    return [wrap(v) for v in (count, total, acc, acc2, tri, steps, 147, n)]


@pytest.mark.parametrize("start,end,step", [(-7, 30, 4), (10, -3, -3), (5, 5, 1), (3, 1, 2),
                                            (0, 10, 1), (20, -20, -7)])
def test_loops(start, end, step, backend):
    """ml.range/range with runtime steps of both signs (empty ranges included), a
    constexpr negative step, nested and while loops, and static_range, against Python."""
    n = 27
    o = poison(8, np.int32)
    loops_kernel[(1,)](o, start, end, step, n, STEP=-2 if end > start else 2, backend=backend)
    assert o.tolist() == py_loops(start, end, step, n, -2 if end > start else 2)


@mutile.jit
def branches_kernel(X, O, flag, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    first = ml.load(X)
    # an if whose branches define a tile and a scalar used after it
    if first > 0:
        y = x * 2
        tag = 1
    else:
        y = x - 1
        tag = 2
    ml.store(O + offs, y)
    ml.store(O + BLOCK, tag)
    # an if without else that rebinds a variable; nested ifs
    z = x
    if flag > 1:
        z = z + 100
        if flag > 2:
            z = z * 0 - 5
    ml.store(O + BLOCK + 1 + offs, z)
    # a conditional expression on a runtime condition
    w = first if flag == 2 else first + 1000
    ml.store(O + 2 * BLOCK + 1, w)
    # a compile-time condition is resolved while compiling (no branch)
    if BLOCK > 4:
        ml.store(O + 2 * BLOCK + 2, 7)
    else:
        ml.store(O + 2 * BLOCK + 2, 8)


@pytest.mark.parametrize("sign,flag", [(1, 1), (-1, 2), (1, 3)])
def test_if_with_results(sign, flag, rng, backend):
    B = 16
    x = rng.integers(1, 50, B).astype(np.int32) * sign
    o = poison(2 * B + 3, np.int32)
    branches_kernel[(1,)](x, o, flag, BLOCK=B, backend=backend)
    first = int(x[0])
    want_y = x * 2 if first > 0 else x - 1
    z = x + 100 if flag > 1 else x
    z = np.full(B, -5) if flag > 2 else z
    want = list(want_y) + [1 if first > 0 else 2] + list(z) + \
        [first if flag == 2 else first + 1000, 7]
    assert o.tolist() == [int(v) for v in want]


# ---------------------------------------------------------------- device_print
@mutile.jit
def print_kernel(X, n, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    ml.device_print("x: ", x)
    ml.device_print("n=", n)
    ml.device_print("pair", offs, x)
    ml.device_print("bits ", (x * 0 + 1.5).to(ml.int32, bitcast=False), hex=True)
    ml.device_print("fx ", x, hex=True)


def test_device_print(capfd, backend):
    x = np.array([1.5, -2.25, 0.0, 3.0], np.float32)
    print_kernel[(1,)](x, 42, BLOCK=4, backend=backend)
    out = capfd.readouterr().out
    lines = out.splitlines()
    for i, v in enumerate(x):
        assert f"pid (0, 0, 0) idx ({i}) x: {v:f}" in lines, out
        assert f"pid (0, 0, 0) idx ({i}) pair (operand 0){i}" in lines, out
        assert f"pid (0, 0, 0) idx ({i}) pair (operand 1){v:f}" in lines, out
        assert f"pid (0, 0, 0) idx ({i}) bits 0x1" in lines, out
        assert f"pid (0, 0, 0) idx ({i}) fx 0x{int(x[i:i + 1].view(np.uint32)[0]):x}" in lines, out
    assert "pid (0, 0, 0) n=42" in lines, out
    assert len(lines) == 5 * 4 + 1, out


def test_device_print_program_ids(capfd, backend):
    """Each program prints its own ids."""
    x = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    print_kernel[(2, 1, 3)](x, 7, BLOCK=4, backend=backend)
    lines = capfd.readouterr().out.splitlines()
    pids = {tuple(int(v) for v in m.groups()) for m in
            (re.match(r"pid \((\d+), (\d+), (\d+)\) n=7$", ln) for ln in lines) if m}
    assert pids == {(a, 0, c) for a in range(2) for c in range(3)}


# ---------------------------------------------------------------- device_assert
@mutile.jit
def assert_kernel(X, BLOCK: ml.constexpr):
    x = ml.load(X + ml.arange(0, BLOCK))
    ml.device_assert(x >= 0, "x must be non-negative")


def test_device_assert(backend):
    x = np.arange(8, dtype=np.int32)
    assert_kernel[(1,)](x, BLOCK=8, backend=backend)
    x[5] = -1
    with pytest.raises(mutile.DeviceFault, match="x must be non-negative"):
        assert_kernel[(1,)](x, BLOCK=8, backend=backend)


# ---------------------------------------------------------------- hints
@mutile.jit
def hinted_copy(X, Y, n, stride, HINTS: ml.constexpr, BLOCK: ml.constexpr):
    pid = ml.program_id(0)
    offs = pid * BLOCK + ml.arange(0, BLOCK)
    if HINTS:
        ml.assume(n > 0)
        ml.assume(stride == 1)
        offs = ml.multiple_of(offs, BLOCK)
        offs = ml.max_contiguous(offs, BLOCK)
        offs = ml.max_constancy(offs, 1)
        start = ml.multiple_of(pid * BLOCK, [BLOCK])
    else:
        start = pid * BLOCK
    x = ml.load(X + offs * stride, mask=offs < n, other=-1.0)
    ml.store(Y + offs, x + start, mask=offs < n)


def test_hints_do_not_change_results(rng, backend):
    """multiple_of / max_contiguous / max_constancy / assume (all true here) leave the
    results of a masked, ragged copy unchanged."""
    n, B = 1000, 64
    x = random_data(np.float32, n, rng, specials=False)
    ys = []
    for hints in (False, True):
        y = poison(n + 24, np.float32)
        hinted_copy[(mutile.cdiv(n, B),)](x, y, n, 1, HINTS=hints, BLOCK=B, backend=backend)
        ys.append(y)
    want = x + (np.arange(n) // B * B).astype(np.float32)
    assert_bits_equal(ys[0][:n], want, "without hints")
    assert_bits_equal(ys[1], ys[0], "with hints")


# ---------------------------------------------------------------- unsigned loop bounds
@mutile.jit
def unsigned_loop(B, O):
    lo = ml.load(B)
    hi = ml.load(B + 1)
    count = 0
    last = (lo - lo).to(ml.uint64)
    for i in range(lo, hi):
        count += 1
        last = i.to(ml.uint64)
    ml.store(O, count)
    ml.store(O + 1, last)


@pytest.mark.parametrize("dtype,lo,hi", [(np.uint32, 10, 14), (np.int64, -5, -1)])
def test_loop_bounds_of_other_integer_types(dtype, lo, hi, backend):
    o = poison(2, np.uint64)
    unsigned_loop[(1,)](np.array([lo, hi], dtype), o, backend=backend)
    assert o[0] == hi - lo and o[1] == np.array(hi - 1).astype(np.uint64)


@pytest.mark.parametrize("dtype,lo,hi", [(np.uint32, 2 ** 31 - 2, 2 ** 31 + 2),
                                         (np.uint64, 2 ** 63 - 2, 2 ** 63 + 2)],
                         ids=["u32", "u64"])
def test_unsigned_loop_bounds_past_the_signed_range(dtype, lo, hi, backend):
    o = poison(2, np.uint64)
    unsigned_loop[(1,)](np.array([lo, hi], dtype), o, backend=backend)
    assert o[0] == hi - lo and o[1] == hi - 1
