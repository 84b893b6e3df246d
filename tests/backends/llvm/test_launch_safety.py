"""No kernel takes the Python process down on the llvm backend: bounds checks are on by
default (a far out-of-bounds access is a DeviceFault, not a SIGSEGV), Ctrl-C stops an
endless launch with KeyboardInterrupt, ``MUTILE_WATCHDOG`` stops a launch that runs too
long with a report of where each program was, and the process stays usable after each.

The cases that could kill or hang the interpreter run in a fresh subprocess with a
timeout; each asserts the process survived and printed what the user would see. The
extreme-address test checks the fast whole-tile test against a numpy model of which
active elements fall outside the array, on random affine tiles."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mutile
import mutile.language as ml

from ...conftest import poison

PRELUDE = """
import os, signal, sys, threading, time
import numpy as np
import mutile
import mutile.language as ml

@mutile.jit
def spin(X, n):
    i = n * 0
    while i < n:                # i never changes: loops forever
        i = i * 1
    ml.store(X + ml.program_id(0), i.to(ml.float32))

@mutile.jit
def count(X, n):
    acc = 0.0
    for i in range(n):          # a long but finite loop
        acc += 1.0
    ml.store(X + ml.program_id(0), acc)

@mutile.jit
def far(X, Y, off):
    v = ml.load(X + off)
    ml.store(Y, v)

@mutile.jit
def fill(X):
    o = ml.arange(0, 8)
    ml.store(X + o, o.to(ml.float32))

def usable():
    x = np.full(8, np.nan, np.float32)
    fill[(1,)](x)
    assert (x == np.arange(8)).all()
    print("USABLE")
"""


@pytest.fixture
def run_py(tmp_path):
    """``run_py(body, env=None)``: run PRELUDE + ``body`` as the script ``script.py`` in a
    fresh interpreter (killed after ``timeout`` s); returns the CompletedProcess."""
    import os

    def run(body: str, timeout=60, env=None):
        path = tmp_path / "script.py"
        path.write_text(PRELUDE + textwrap.dedent(body))
        return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})})
    return run


@pytest.mark.parametrize("grid, threads", [((1,), 1), ((4,), 2), ((100000,), 2)])
def test_ctrl_c_stops_an_endless_launch(grid, threads, run_py):
    """SIGINT during an endless loop raises KeyboardInterrupt within a second, on one
    thread and on several; the next launch works."""
    r = run_py(f"""
        x = np.zeros({grid[0]}, np.float32)
        spin.warmup(x, 5, grid={grid})      # compiled first: the signal lands in the launch
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t = time.monotonic()
        try:
            spin[{grid}](x, 5, num_threads={threads})
        except KeyboardInterrupt:
            print("INTERRUPTED", round(time.monotonic() - t - 0.5, 2))
        usable()
    """)
    assert r.returncode == 0, r.stderr
    assert "INTERRUPTED" in r.stdout and "USABLE" in r.stdout, r.stdout + r.stderr
    late = float(r.stdout.split("INTERRUPTED")[1].split()[0])
    assert late < 1.0, f"KeyboardInterrupt came {late} s after SIGINT"


def test_ctrl_c_between_programs_of_a_huge_grid(run_py):
    """Programs without loops: the stop request is also polled before each program."""
    r = run_py("""
        @mutile.jit
        def touch(X):
            ml.store(X, 1.0)
        x = np.zeros(1, np.float32)
        touch.warmup(x, grid=(1,))
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            touch[(2**31 - 1, 65535, 1)](x)
            print("FINISHED")
        except KeyboardInterrupt:
            print("INTERRUPTED")
        usable()
    """)
    assert r.returncode == 0, r.stderr
    assert "INTERRUPTED" in r.stdout and "USABLE" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("programs", [1, 2])    # 1: inline on the main thread (inline.py)
def test_watchdog_stops_a_long_launch_and_names_the_loop(programs, run_py, tmp_path):
    r = run_py(f"""
        x = np.zeros(2, np.float32)
        t = time.monotonic()
        try:
            spin[({programs},)](x, 5)
        except mutile.DeviceFault as e:
            print("FAULT", round(time.monotonic() - t, 1))
            print(e)
        usable()
    """, env={"MUTILE_WATCHDOG": "1"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "FAULT" in out and "USABLE" in out, out + r.stderr
    assert float(out.split("FAULT")[1].split()[0]) < 5
    assert "watchdog" in out and "MUTILE_WATCHDOG=1" in out
    assert "in the while loop at " + str(tmp_path / "script.py") + ":" in out and "program (0, 0, 0)" in out
    assert "backends" not in out, "a compiler file leaks into the report"


def test_watchdog_lets_a_finite_launch_finish(run_py):
    """A launch shorter than the limit is never stopped; 0 turns the watchdog off."""
    for value in ("30", "0"):
        r = run_py("""
            x = np.full(2, np.nan, np.float32)
            count[(2,)](x, 3000000)
            print("RESULT", x.tolist())
        """, env={"MUTILE_WATCHDOG": value})
        assert r.returncode == 0, r.stderr
        assert "RESULT [3000000.0, 3000000.0]" in r.stdout, r.stdout


def test_watchdog_value_must_be_a_number(monkeypatch):
    monkeypatch.setenv("MUTILE_WATCHDOG", "soon")
    x = poison(8, np.float32)
    with pytest.raises(mutile.LaunchError, match="MUTILE_WATCHDOG='soon'"):
        _fill[(1,)](x, backend="llvm")


@mutile.jit
def _fill(X):
    o = ml.arange(0, 8)
    ml.store(X + o, o.to(ml.float32))


@pytest.mark.parametrize("off", [2**40, -2**40, 2**61 + 3, 1 << 20])
def test_far_out_of_bounds_is_a_fault_not_a_crash(off, run_py):
    """By default (no check_bounds option) a far access raises DeviceFault."""
    r = run_py(f"""
        x = np.random.rand(16).astype(np.float32)
        y = np.full(1, np.nan, np.float32)
        try:
            far[(1,)](x, y, {off})
            print("NO FAULT")
        except mutile.DeviceFault as e:
            print("FAULT", e.param, e.index)
        usable()
    """)
    assert r.returncode == 0, f"the process died ({r.returncode}):\n{r.stderr}"
    assert f"FAULT X {off}" in r.stdout and "USABLE" in r.stdout, r.stdout + r.stderr


def test_off_by_one_store_leaves_the_neighbours_alone(rng):
    """The default check stops an off-by-one store before it corrupts the next array."""
    @mutile.jit
    def shifted_copy(X, Y, n, BLOCK: ml.constexpr):
        o = ml.arange(0, BLOCK)
        ml.store(Y + o + 1, ml.load(X + o, mask=o < n), mask=o < n)

    buf = poison(33, np.float32)
    y, guard = buf[:32], buf[32:]
    x = rng.standard_normal(32).astype(np.float32)
    with pytest.raises(mutile.DeviceFault, match="element 32 of 'Y', which has 32"):
        shifted_copy[(1,)](x, y, 32, BLOCK=32, backend="llvm")
    assert np.isnan(guard).all(), "the out-of-bounds store happened"


def test_negative_strides_are_reported_as_offsets(rng):
    a = rng.standard_normal(8).astype(np.float32)
    y = poison(8, np.float32)

    @mutile.jit
    def copy(X, Y, BLOCK: ml.constexpr):
        o = ml.arange(0, BLOCK)
        ml.store(Y + o, ml.load(X + o))

    with pytest.raises(mutile.DeviceFault, match=r"offset 1 from 'X' .* offsets -7\.\.0"):
        copy[(1,)](a[::-1], y, BLOCK=8, backend="llvm")

    @mutile.jit
    def reverse(X, Y, BLOCK: ml.constexpr):
        o = ml.arange(0, BLOCK)
        ml.store(Y + o, ml.load(X - o))     # a correct walk over a reversed view

    reverse[(1,)](a[::-1], y, BLOCK=8, backend="llvm")
    np.testing.assert_array_equal(y, a[::-1])


# ---------------------------------------------------------------- the whole-tile test
@mutile.jit
def window(X, Y, base, s0, s1, n0, n1, R: ml.constexpr, C: ml.constexpr):
    """Y[i, j] = X[base + i*s0 + j*s1] where i < n0 and j < n1."""
    i = ml.arange(0, R)[:, None]
    j = ml.arange(0, C)[None, :]
    m = (i < n0) & (j < n1)
    v = ml.load(X + base + i * s0 + j * s1, mask=m, other=0.0)
    ml.store(Y + i * C + j, v, mask=m)


def test_tile_extremes_test_agrees_with_every_element(rng):
    """Random 2-D affine windows, in, straddling and outside the array, with random
    masks: a fault happens exactly when an active element is outside, and otherwise
    the result is the float64 numpy gather."""
    size, R, C = 97, 4, 8
    x = rng.standard_normal(size).astype(np.float32)
    for trial in range(200):
        s0, s1 = (int(v) for v in rng.integers(-12, 13, 2))
        base = int(rng.integers(-40, size + 40))
        n0, n1 = int(rng.integers(0, R + 1)), int(rng.integers(0, C + 1))
        idx = base + np.arange(R)[:, None] * s0 + np.arange(C)[None, :] * s1
        active = (np.arange(R)[:, None] < n0) & (np.arange(C)[None, :] < n1)
        bad = active & ((idx < 0) | (idx >= size))
        y = poison((R, C), np.float32)
        args = (x, y, base, s0, s1, n0, n1)
        if bad.any():
            with pytest.raises(mutile.DeviceFault, match="out of bounds"):
                window[(1,)](*args, R=R, C=C, backend="llvm")
            continue
        window[(1,)](*args, R=R, C=C, backend="llvm")
        want = np.where(active, x.astype(np.float64)[np.clip(idx, 0, size - 1)], np.nan)
        np.testing.assert_array_equal(np.where(active, y, np.nan), want,
                                      err_msg=f"trial {trial}: {args[2:]}")


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.6])
def test_ctrl_c_at_any_moment_leaves_the_process_usable(delay, run_py):
    """SIGINT while compiling, while handing work to the threads or while they run: the
    KeyboardInterrupt reaches the caller and the next launch works."""
    r = run_py(f"""
        x = np.zeros(100000, np.float32)
        threading.Timer({delay}, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            spin[(100000,)](x, 5, num_threads=2)
        except KeyboardInterrupt:
            print("INTERRUPTED")
        usable()
    """)
    assert r.returncode == 0, r.stderr
    assert "INTERRUPTED" in r.stdout and "USABLE" in r.stdout, r.stdout + r.stderr


def test_ctrl_c_during_a_native_compile_is_delivered_after_it(run_py):
    """A SIGINT that arrives while llvmlite is inside one of its Python callbacks (the
    object cache) reaches the caller once the compile is done, instead of being dropped
    by ctypes (which would leave the next endless launch unstoppable)."""
    r = run_py("""
        from mutile.backends.llvm import engine
        plain = engine.Engine._notify
        def notify(self, module, buf):
            os.kill(os.getpid(), signal.SIGINT)   # handled inside the callback
            plain(self, module, buf)
        engine.Engine._notify = notify
        try:
            engine.Engine("define i32 @f() {\\n  ret i32 1\\n}")
        except KeyboardInterrupt:
            print("INTERRUPTED")
        engine.Engine._notify = plain
        usable()
    """)
    assert r.returncode == 0, r.stderr
    assert "INTERRUPTED" in r.stdout and "USABLE" in r.stdout, r.stdout + r.stderr
    assert "Exception ignored" not in r.stderr, r.stderr
