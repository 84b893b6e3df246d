"""Bounds checking (on by default; ``check_bounds=False`` or ``MUTILE_CHECK_BOUNDS=0``
turns it off): an access
outside the arrays passed to the launch raises ``mutile.DeviceFault`` naming the
Python ``file:line`` of the ``ml.load``/``ml.store``, the parameter and the element
index (never a compiler file); in-bounds kernels compute the same bits with and
without the checks, and masked-off lanes are never checked."""
from __future__ import annotations

import re

import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import poison


@mutile.jit
def scale_rows(X, Y, n_cols, alpha, BLOCK: ml.constexpr, EXTRA: ml.constexpr):
    row = ml.program_id(0)
    cols = ml.arange(0, BLOCK)
    x = ml.load(X + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    ml.store(Y + row * n_cols + cols, x * alpha, mask=cols < n_cols + EXTRA)  # STORE-ROWS


@mutile.jit
def copy_rows(X, Y, stride_x, n_cols, BLOCK: ml.constexpr):
    row = ml.program_id(0)
    cols = ml.arange(0, BLOCK)
    mask = cols < n_cols
    x = ml.load(X + row * stride_x + cols, mask=mask)  # LOAD-STRIDED
    ml.store(Y + row * n_cols + cols, x, mask=mask)


@mutile.jit
def shift_right(X, Y, n, BLOCK: ml.constexpr, SHIFT: ml.constexpr, GUARD: ml.constexpr):
    """Y[i] = X[i - SHIFT] for i >= GUARD (else 0): GUARD < SHIFT reads X[-1]..."""
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs - SHIFT, mask=(offs < n) & (offs >= GUARD), other=0.0)  # LOAD-SHIFT
    ml.store(Y + offs, x, mask=offs < n)


@mutile.jit
def pick(X, Y, idx):
    v = ml.load(X + idx)  # LOAD-SCALAR
    ml.store(Y, v)


@pytest.fixture(params=["option", "env"])
def bounds(request, monkeypatch):
    """``bounds(on)`` turns bounds checking on or off (the launch option or the
    environment variable) and returns the launch keywords to use from then on."""
    def switch(on: bool):
        if request.param == "env":
            monkeypatch.setenv("MUTILE_CHECK_BOUNDS", "1" if on else "0")
            return {}
        return {"check_bounds": on}
    return switch


@pytest.fixture
def checked(bounds):
    return lambda: bounds(True)


@pytest.fixture
def unchecked(bounds):
    return lambda: bounds(False)


def head_of(err) -> str:
    """The fault's first line without its ``file:line:col:`` prefix."""
    first = str(err).splitlines()[0]
    return first.split(": device fault: ", 1)[-1]


def check_fault(err, mark, param, indices):
    """``err`` names ``mark``'s file:line, ``param`` and one of ``indices``; no other file."""
    msg = str(err)
    assert f"{mark.file}:{mark.line}" in msg, f"not located at {mark.file}:{mark.line}:\n{msg}"
    files = set(re.findall(r"([^\s'\"():]+\.py)\b", msg))
    assert files == {mark.file}, f"the message names other files: {files - {mark.file}}"
    assert "Traceback" not in msg
    head = head_of(err)
    assert re.search(rf"\b{param}\b", head), f"parameter {param!r} not named: {head}"
    found = [i for i in indices if re.search(rf"(?<![\w.-]){i}(?![\w.])", head)]
    assert found, f"no offending element index ({sorted(indices)[:4]}...) in: {head}"


# ---------------------------------------------------------------- faults
def test_off_by_one_store(checked, mark, backend, rng):
    R, C = 64, 100
    x = rng.standard_normal((R, C)).astype(np.float32)
    kw = checked()
    with pytest.raises(mutile.DeviceFault) as ei:
        scale_rows[(R,)](x, poison((R, C), np.float32), C, 2.0, BLOCK=128, EXTRA=1,
                         backend=backend, **kw)
    # rows 0..R-2 spill into the next row (in bounds); the last row's spill is element R*C
    check_fault(ei.value, mark(scale_rows, "STORE-ROWS"), "Y", {R * C})


def test_wrong_stride(checked, mark, backend, rng):
    R, C = 8, 16
    x = rng.standard_normal((R, C)).astype(np.float32)
    stride = 43                                   # the right one is C
    bad = {r * stride + c for r in range(R) for c in range(C) if r * stride + c >= R * C}
    assert not bad & {R * C, C, R}                # no other number can pass for an index
    kw = checked()
    with pytest.raises(mutile.DeviceFault) as ei:
        copy_rows[(R,)](x, poison((R, C), np.float32), stride, C, BLOCK=C, backend=backend, **kw)
    check_fault(ei.value, mark(copy_rows, "LOAD-STRIDED"), "X", bad)


def test_negative_offset(checked, mark, backend, rng):
    n = 300
    x = rng.standard_normal(n).astype(np.float32)
    kw = checked()
    with pytest.raises(mutile.DeviceFault) as ei:
        shift_right[(mutile.cdiv(n, 128),)](x, poison(n, np.float32), n, BLOCK=128, SHIFT=1,
                                            GUARD=0, backend=backend, **kw)
    check_fault(ei.value, mark(shift_right, "LOAD-SHIFT"), "X", {-1})


@pytest.mark.parametrize("idx", [-3, 50, 1 << 20], ids=["negative", "one-past", "far"])
def test_scalar_access(idx, checked, mark, backend, rng):
    x = rng.standard_normal(50).astype(np.float32)
    kw = checked()
    y = poison(1, np.float32)
    with pytest.raises(mutile.DeviceFault) as ei:
        pick[(1,)](x, y, idx, backend=backend, **kw)
    check_fault(ei.value, mark(pick, "LOAD-SCALAR"), "X", {idx})
    pick[(1,)](x, y, 49, backend=backend, **kw)   # the kernel still works afterwards
    assert y[0] == x[49]


def test_a_fault_on_a_view_is_against_the_view(checked, mark, backend, rng):
    """The bounds are the array passed, not the buffer it is a view of."""
    base = rng.standard_normal(400).astype(np.float32)
    x = base[100:300]
    kw = checked()
    with pytest.raises(mutile.DeviceFault) as ei:
        shift_right[(2,)](x, poison(200, np.float32), 200, BLOCK=128, SHIFT=1, GUARD=0,
                          backend=backend, **kw)
    check_fault(ei.value, mark(shift_right, "LOAD-SHIFT"), "X", {-1})


# ---------------------------------------------------------------- in-bounds kernels
def _in_bounds_runs(rng, backend, **kw):
    """Every kernel above with correct arguments: {name: output}."""
    R, C = 64, 100
    x = rng.standard_normal((R, C)).astype(np.float32)
    out = {}
    y = poison((R, C), np.float32)
    scale_rows[(R,)](x, y, C, 2.5, BLOCK=128, EXTRA=0, backend=backend, **kw)
    out["scale_rows"] = (y, 2.5 * x)
    y = poison((R, C), np.float32)
    copy_rows[(R,)](x, y, C, C, BLOCK=128, backend=backend, **kw)
    out["copy_rows"] = (y, x)
    wide = rng.standard_normal((R, 2 * C)).astype(np.float32)     # a real row stride
    y = poison((R, C), np.float32)
    copy_rows[(R,)](wide, y, 2 * C, C, BLOCK=128, backend=backend, **kw)
    out["copy_rows strided"] = (y, wide[:, :C])
    v = x.ravel()[:1000]
    y = poison(1000, np.float32)
    shift_right[(8,)](v, y, 1000, BLOCK=128, SHIFT=3, GUARD=3, backend=backend, **kw)
    out["shift_right"] = (y, np.concatenate([np.zeros(3, np.float32), v[:-3]]))
    y = poison(1, np.float32)
    pick[(1,)](v, y, 999, backend=backend, **kw)
    out["pick"] = (y, v[999:])
    return out


def test_in_bounds_kernels_give_the_same_results_with_checks(checked, backend):
    plain = _in_bounds_runs(np.random.default_rng(7), backend)
    kw = checked()
    with_checks = _in_bounds_runs(np.random.default_rng(7), backend, **kw)
    for name, (got, want) in with_checks.items():
        assert not np.isnan(got).any(), f"{name}: elements left unwritten"
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert np.array_equal(got, plain[name][0]), f"{name}: checks change the results"
        np.testing.assert_array_equal(plain[name][0], plain[name][1], err_msg=name)


def test_checks_are_on_by_default_and_can_be_turned_off(unchecked, backend, rng):
    """A launch checks its accesses unless told not to (``check_bounds=False`` or
    ``MUTILE_CHECK_BOUNDS=0``), which compiles another specialization."""
    x = rng.standard_normal(100).astype(np.float32)
    args = (x, poison(100, np.float32), 100)
    checked = shift_right.warmup(*args, BLOCK=128, SHIFT=1, GUARD=1, backend=backend)
    base = rng.standard_normal(300).astype(np.float32)
    y = poison(100, np.float32)
    with pytest.raises(mutile.DeviceFault):
        shift_right[(1,)](base[100:200], y, 100, BLOCK=128, SHIFT=1, GUARD=0, backend=backend)
    kw = unchecked()
    if backend == "pinghu":
        # the interpreter checks every access like a GPU core dump, asked or not
        with pytest.raises(mutile.DeviceFault):
            shift_right[(1,)](base[100:200], y, 100, BLOCK=128, SHIFT=1, GUARD=0,
                              backend=backend, **kw)
        return
    plain = shift_right.warmup(*args, BLOCK=128, SHIFT=1, GUARD=1, backend=backend, **kw)
    assert plain is not checked
    assert plain.metadata["cache_key"] != checked.metadata["cache_key"]
    assert plain.metadata["check_bounds"] is False and checked.metadata["check_bounds"] is True
    # without checks an out-of-bounds read is not reported (it stays inside the buffer here)
    shift_right[(1,)](base[100:200], y, 100, BLOCK=128, SHIFT=1, GUARD=0, backend=backend, **kw)
    np.testing.assert_array_equal(y, base[99:199])


@pytest.mark.parametrize("value, on", [("0", False), ("false", False), ("off", False),
                                       ("", True), ("1", True)])
def test_mutile_check_bounds_values(value, on, monkeypatch, rng):
    """``MUTILE_CHECK_BOUNDS``: 0/false/off turn the checks off; empty or 1 keep them;
    an explicit ``check_bounds=`` launch option wins over the variable (llvm; the
    interpreter always checks)."""
    base = rng.standard_normal(300).astype(np.float32)
    monkeypatch.setenv("MUTILE_CHECK_BOUNDS", value)
    y = poison(100, np.float32)
    launch = shift_right[(1,)]
    if on:
        with pytest.raises(mutile.DeviceFault):
            launch(base[100:200], y, 100, BLOCK=128, SHIFT=1, GUARD=0, backend="llvm")
        launch(base[100:200], y, 100, BLOCK=128, SHIFT=1, GUARD=0, backend="llvm",
               check_bounds=False)
    else:
        launch(base[100:200], y, 100, BLOCK=128, SHIFT=1, GUARD=0, backend="llvm")
        with pytest.raises(mutile.DeviceFault):
            launch(base[100:200], y, 100, BLOCK=128, SHIFT=1, GUARD=0, backend="llvm",
                   check_bounds=True)
    np.testing.assert_array_equal(y, base[99:199])
