"""One-thread launches run on the main thread (backends/llvm/inline.py): Ctrl-C still
stops them (the watchdog: test_launch_safety.py), SIGINT handlers of the user's keep working, and launches that
may not run there (other threads, other handlers) still give the right results."""
import threading

import numpy as np
import pytest

import mutile
import mutile.language as ml
from ...conftest import poison

from .test_launch_safety import run_py  # noqa: F401  (the subprocess fixture)

pytestmark = pytest.mark.skipif(
    __import__("importlib").import_module("mutile.backends.llvm.inline").inline() is None,
    reason="no inline runner on this machine")


@mutile.jit
def scale(X, Y, a, n, BLOCK: ml.constexpr):
    o = ml.arange(0, BLOCK)
    m = o < n
    ml.store(Y + o, ml.load(X + o, mask=m) * a, mask=m)


def test_inline_launches_give_the_numpy_result(rng):
    inline = __import__("importlib").import_module("mutile.backends.llvm.inline").inline()
    before = inline.launches
    for n in (1, 37, 256):
        x = rng.standard_normal(n).astype(np.float32)
        y = poison((n,), np.float32)
        scale[(1,)](x, y, 1.5, n, BLOCK=256, backend="llvm")
        np.testing.assert_allclose(y, x.astype(np.float64) * 1.5, rtol=1e-6)
    assert inline.launches == before + 3, "the launches did not run inline"


def test_a_launch_from_another_thread_runs_on_the_workers(rng):
    x = rng.standard_normal(100).astype(np.float32)
    y = poison((100,), np.float32)
    errors = []

    def go():
        try:
            scale[(1,)](x, y, -2.0, 100, BLOCK=128, backend="llvm")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
    t = threading.Thread(target=go)
    t.start()
    t.join()
    assert not errors
    np.testing.assert_allclose(y, x.astype(np.float64) * -2.0, rtol=1e-6)


def test_ctrl_c_stops_an_inline_launch_after_python_reinstalled_its_handler(run_py):
    """signal.signal puts Python's C handler back in front of ours; the next inline
    launch notices and installs ours again, so Ctrl-C still stops an endless kernel."""
    r = run_py("""
        x = np.zeros(1, np.float32)
        fill[(1,)](np.zeros(8, np.float32))           # an inline launch: ours installed
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t = time.monotonic()
        try:
            spin[(1,)](x, 5)
        except KeyboardInterrupt:
            print("INTERRUPTED", round(time.monotonic() - t, 1))
        usable()
        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            time.sleep(5)                              # Python code: Python's handler runs
        except KeyboardInterrupt:
            print("PYTHON INTERRUPTED")
    """)
    assert r.returncode == 0, r.stderr
    assert "INTERRUPTED" in r.stdout and "USABLE" in r.stdout, r.stdout + r.stderr
    assert float(r.stdout.split("INTERRUPTED")[1].split()[0]) < 2
    assert "PYTHON INTERRUPTED" in r.stdout, r.stdout


@pytest.mark.parametrize("handler", ["custom", "ignore"])
def test_sigint_handlers_of_the_user_still_run_and_the_launch_completes(handler, run_py):
    """With a handler of the user's (which may return) or SIGINT ignored, a launch does not
    run inline: a Ctrl-C during it calls the handler (or nothing) and the kernel finishes."""
    install = ("signal.signal(signal.SIGINT, lambda s, f: print('HANDLER'))"
               if handler == "custom" else "signal.signal(signal.SIGINT, signal.SIG_IGN)")
    r = run_py(f"""
        @mutile.jit
        def steps(X, n):
            acc = n * 0
            for i in range(n):
                acc = (acc + i) % 1000003
            ml.store(X, acc)
        x = np.zeros(1, np.int64)
        steps[(1,)](x, 10)
        {install}
        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t = time.monotonic()
        steps[(1,)](x, 200000000)
        print("SECONDS", time.monotonic() - t)
        time.sleep(0.3)
        print("RESULT", x.tolist())
    """)
    n = 200000000
    acc = n * (n - 1) // 2 % 1000003
    assert r.returncode == 0, r.stderr
    assert f"RESULT [{acc}]" in r.stdout, r.stdout + r.stderr
    assert float(r.stdout.split("SECONDS")[1].split()[0]) > 0.2, "the signal came too late"
    assert ("HANDLER" in r.stdout) == (handler == "custom"), r.stdout


@mutile.jit
def scale_many(X, Y, a, n, BLOCK: ml.constexpr):
    o = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = o < n
    ml.store(Y + o, ml.load(X + o, mask=m) * a, mask=m)


def test_planned_launches_run_on_one_thread_while_one_thread_is_fast(rng, monkeypatch):
    """The planned launcher's choice (fast_launch.py), made deterministic by setting its
    threshold: with a threshold no run reaches, every planned launch runs on one thread
    (inline); with 0, only the first (the probe) does, the rest go to the workers. Both
    give the float64 result."""
    fast = __import__("importlib").import_module("mutile.backends.llvm.fast_launch")
    inline = __import__("importlib").import_module("mutile.backends.llvm.inline").inline()
    n = 4096
    x = rng.standard_normal(n).astype(np.float32)
    for threshold, threads, expect in ((1e9, 2, 21), (0.0, 3, 1)):   # threads: a new plan
        monkeypatch.setattr(fast, "SERIAL_SECONDS", threshold)
        for i in range(22):                         # the first launch makes the plan
            if i == 1:
                before = inline.launches
            y = poison((n,), np.float32)
            scale_many[(n // 256,)](x, y, 3.0, n, BLOCK=256, backend="llvm",
                                    num_threads=threads)
            np.testing.assert_allclose(y, x.astype(np.float64) * 3.0, rtol=1e-6)
        assert inline.launches - before == expect, (threshold, inline.launches - before)
