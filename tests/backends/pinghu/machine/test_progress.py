"""No kernel hangs the process (backends/pinghu/machine/progress.py): a launch whose
machine state comes back with no global write in between loops forever and is reported at
once; a launch that keeps changing state runs on (past the old one-million-step budget)
until ``MUTILE_WATCHDOG`` seconds; Ctrl-C interrupts a launch and leaves the process
usable. Launches that would hang if this broke run in a subprocess with a timeout."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.backends.pinghu.machine.scheduler import execute
from mutile.backends.pinghu.machine.device import Machine

HERE = Path(__file__).resolve()


def line_of(tag: str) -> int:
    """The line of this file ending with ``# tag``."""
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {tag}"):
            return n
    raise AssertionError(tag)


@mutile.jit
def poll(X, Y, n):
    v = ml.load(X)
    while v < n:  # POLL
        v = ml.load(X)            # a flag nobody will ever set
    ml.store(Y, v)


@mutile.jit
def toggle(X, Y, n):
    v = ml.load(X)
    flag = 0
    while v < n:
        flag = 1 - flag  # TOGGLE
    ml.store(Y, v + flag)


# Y[0] = the sum over i < n of X[i % 4] (wrapping in 32 bits): the state changes in
# every iteration
@mutile.jit
def count_up(X, Y, n):
    i = 0
    acc = 0
    while i < n:  # COUNT
        acc = acc + ml.load(X + i % 4)
        i += 1
    ml.store(Y, acc)


def count_ref(x: np.ndarray, n: int) -> int:
    s = int(x.astype(np.int64).sum()) * (n // 4) + int(x[:n % 4].astype(np.int64).sum())
    return (s + 2**31) % 2**32 - 2**31


def script(body: str, timeout: float = 240, **env) -> subprocess.CompletedProcess:
    """Run ``body`` in a fresh interpreter that has this file's kernels (``k``: this
    module) and numpy as ``np``; returns the finished process."""
    head = textwrap.dedent(f"""
        import importlib.util, os, signal, sys, threading, time
        import numpy as np
        import mutile
        spec = importlib.util.spec_from_file_location("progress_kernels", {str(HERE)!r})
        k = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(k)
        """)
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", head + textwrap.dedent(body)], env=full,
                          capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------- no progress
def test_a_loop_polling_a_value_that_never_changes_is_reported_at_once():
    r = script("""
        x = np.zeros(1, np.float32); y = np.full(1, np.nan, np.float32)
        k.poll.warmup(x, y, 1.0, backend="pinghu", grid=(2,))
        t = time.monotonic()
        try:
            k.poll[(2,)](x, y, 1.0, backend="pinghu")
        except mutile.DeviceFault as e:
            print("FAULT", round(time.monotonic() - t, 2)); print(e)
        x[0] = 3.0
        k.poll[(2,)](x, y, 1.0, backend="pinghu")
        print("AFTER", y[0])
        """)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    took = float(re.search(r"FAULT (\S+)", out).group(1))
    assert took < 5, out
    assert re.search(r"kernel 'poll': no progress: the machine returns to the same state "
                     r"every \d+ scheduling steps, with no global-memory write in between "
                     r"\(it loops forever\)", out), out
    assert f"{HERE}:{line_of('POLL')}" in out and "LSU.LD.GLOBAL" in out
    assert "AFTER 3.0" in out                   # the process goes on launching


def test_a_flag_toggling_between_two_states_is_reported_as_no_progress():
    r = script("""
        x = np.zeros(1, np.float32); y = np.full(1, np.nan, np.float32)
        try:
            k.toggle[(1,)](x, y, 1.0, backend="pinghu")
        except mutile.DeviceFault as e:
            print(e)
        x[0] = 2.0
        k.toggle[(1,)](x, y, 1.0, backend="pinghu")
        print("AFTER", y[0])
        """)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    m = re.search(r"no progress: the machine returns to the same state every (\d+) "
                  r"scheduling steps", out)
    assert m, out
    assert f"{HERE}:{line_of('TOGGLE')}" in out and "flag = 1 - flag" in out
    assert "AFTER 2.0" in out


class _Controls(Machine):
    """Counts control instructions: a scheduling step issues at most one."""

    def on_issue(self, pc, row, warps):
        super().on_issue(pc, row, warps)
        self.controls = getattr(self, "controls", 0) + (row.unit == "BRA")


@pytest.mark.slow
def test_a_long_loop_whose_state_changes_runs_to_its_end(rng):
    """No step budget any more (the old watchdog stopped every launch after 1,000,000
    scheduling steps): a loop whose state keeps changing runs until it ends. Here 120,000
    steps, so the progress checker samples it about a hundred times (every 1024 steps)
    with no false stop; more steps would only cost the suite time."""
    x = rng.integers(-1000, 1000, 4).astype(np.int32)
    y = np.full(1, -7, np.int32)
    small = count_up.warmup(x, y, 10, backend="pinghu", grid=(1,), num_warps=1)

    def controls(n):
        m = _Controls()
        execute(small.binary.program, [x, y, n], (1, 1, 1), machine=m)
        return m.controls
    per_iter = (controls(2000) - controls(1000)) / 1000
    n = int(120_000 / per_iter) + 1
    count_up[(1,)](x, y, n, backend="pinghu", num_warps=1)
    assert int(y[0]) == count_ref(x, n)


# ---------------------------------------------------------------- the watchdog
def test_the_watchdog_stops_a_long_running_launch_after_its_seconds():
    r = script("""
        x = np.arange(1, 5, dtype=np.int32); y = np.full(1, -7, np.int32)
        k.count_up.warmup(x, y, 10, backend="pinghu", grid=(2,))
        t = time.monotonic()
        try:
            k.count_up[(2,)](x, y, 2**31 - 1, backend="pinghu")
        except mutile.DeviceFault as e:
            print("FAULT", round(time.monotonic() - t, 2)); print(e)
        k.count_up[(1,)](x, y, 10, backend="pinghu")
        print("AFTER", y[0])
        """, MUTILE_WATCHDOG="1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    took = float(re.search(r"FAULT (\S+)", out).group(1))
    assert 1.0 <= took < 5, out
    m = re.search(r"kernel 'count_up': watchdog: still running after (\S+) s "
                  r"\(MUTILE_WATCHDOG=1: raise MUTILE_WATCHDOG for longer runs, 0 turns it "
                  r"off\); (\d+) warp instructions retired; 8 warp\(s\) still running", out)
    assert m, out
    assert float(m.group(1)) >= 1.0 and int(m.group(2)) > 1000
    assert "block (0, 0, 0), warp 0" in out and f"{HERE}:" in out
    assert "AFTER 23" in out                   # 1+2+3+4+1+2+3+4+1+2


def test_the_watchdog_limit_must_be_a_number(monkeypatch, rng):
    monkeypatch.setenv("MUTILE_WATCHDOG", "2000 steps")
    x = rng.integers(-9, 9, 4).astype(np.int32)
    y = np.full(1, -7, np.int32)
    with pytest.raises(mutile.LaunchError, match="MUTILE_WATCHDOG='2000 steps': expected a "
                       "number of seconds"):
        count_up[(1,)](x, y, 3, backend="pinghu")


def test_a_finishing_launch_is_untouched_by_a_short_watchdog(monkeypatch, rng):
    monkeypatch.setenv("MUTILE_WATCHDOG", "30")
    x = rng.integers(-9, 9, 4).astype(np.int32)
    y = np.full(1, -7, np.int32)
    count_up[(3,)](x, y, 3000, backend="pinghu")          # ~6,000 steps
    assert int(y[0]) == count_ref(x, 3000)


# ---------------------------------------------------------------- Ctrl-C
def test_ctrl_c_interrupts_a_launch_and_the_next_launch_works():
    r = script("""
        x = np.arange(1, 5, dtype=np.int32); y = np.full(1, -7, np.int32)
        k.count_up.warmup(x, y, 10, backend="pinghu", grid=(1,))
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t = time.monotonic()
        try:
            k.count_up[(1,)](x, y, 2**31 - 1, backend="pinghu")
            print("FINISHED")
        except KeyboardInterrupt:
            print("INTERRUPTED", round(time.monotonic() - t, 2))
        k.count_up[(1,)](x, y, 6, backend="pinghu")
        print("AFTER", y[0])
        """, MUTILE_WATCHDOG="0")
    assert r.returncode == 0, r.stderr
    took = float(re.search(r"INTERRUPTED (\S+)", r.stdout).group(1))
    assert took < 3, r.stdout
    assert "AFTER 13" in r.stdout, r.stdout      # 1+2+3+4+1+2
