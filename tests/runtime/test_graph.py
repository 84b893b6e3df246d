"""``mutile.Graph``: capture records without running, replay equals eager launches
(random data, poisoned outputs) on both backends, placeholders and updates, every error
(unsupported arguments, wrong shape/dtype, a kernel still compiling, a fault during
replay naming the kernel, its position and the captured line), llvm's overlap option and
the Pinghu cycle model charging the launch overhead once per graph."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import mutile
import mutile.language as ml
import mutile.runtime.compile as mcompile
from mutile import machines

from ..conftest import marked, poison


@mutile.jit
def axpy(X, Y, Out, a, n, BLOCK: ml.constexpr):
    o = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = o < n
    ml.store(Out + o, a * ml.load(X + o, mask=m) + ml.load(Y + o, mask=m), mask=m)


@mutile.jit
def norm(X, Out, n, BLOCK: ml.constexpr):
    """Out = X / sqrt(mean(X^2) + 1e-6), one program."""
    o = ml.arange(0, BLOCK)
    m = o < n
    x = ml.load(X + o, mask=m, other=0.0)
    ml.store(Out + o, x / ml.sqrt(ml.sum(x * x, axis=0) / n + 1e-6), mask=m)


@mutile.jit
def store_past(X, n, BLOCK: ml.constexpr):
    o = ml.arange(0, BLOCK)
    ml.store(X + o + n, o.to(ml.float32))  # FAULT


N, B = 1000, 256
GRID = (-(-N // B),)


def chain(x, y, t1, t2, out, backend):
    axpy[GRID](x, y, t1, 0.5, N, BLOCK=B, backend=backend)
    norm[(1,)](t1, t2, N, BLOCK=1024, backend=backend)
    axpy[GRID](t2, x, out, -2.0, N, BLOCK=B, backend=backend)


def reference(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    t1 = 0.5 * x + y
    t2 = t1 / np.sqrt(np.mean(t1 * t1) + 1e-6)
    return -2.0 * t2 + x


def data(rng):
    return (rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32))


def test_replay_equals_eager(backend, rng):
    x, y = data(rng)
    eager = poison(N, np.float32)
    chain(x, y, poison(N, np.float32), poison(N, np.float32), eager, backend)
    g = mutile.Graph()
    t1, t2, out = (poison(N, np.float32) for _ in range(3))
    with g.capture():
        chain(x, y, t1, t2, out, backend)
    assert len(g) == 3 and np.isnan(out).all() and np.isnan(t1).all()   # nothing ran
    g.replay()
    np.testing.assert_array_equal(out, eager)
    np.testing.assert_allclose(out, reference(x, y), rtol=1e-5, atol=1e-5)
    out[:] = np.nan
    g.replay()                                   # again: the same arrays, the same result
    np.testing.assert_array_equal(out, eager)


def test_placeholders_take_new_arrays(backend, rng):
    g = mutile.Graph()
    x = g.placeholder("x", (N,), np.float32)
    out = g.placeholder("out", like=np.empty(N, np.float32))
    y = rng.standard_normal(N).astype(np.float32)
    t1, t2 = poison(N, np.float32), poison(N, np.float32)
    with g.capture():
        chain(x, y, t1, t2, out, backend)
    for step in range(3):                       # a decode loop: one replay per step
        xs = rng.standard_normal(N).astype(np.float32)
        o = poison(N, np.float32)
        if step == 1:
            g.update(x=xs, out=o)
            g.replay()
        else:
            g.replay(x=xs, out=o)
        np.testing.assert_allclose(o, reference(xs, y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad,fragment", [
    (lambda: np.zeros(N + 1, np.float32), "captured as shape (1000,) dtype float32"),
    (lambda: np.zeros(N, np.float64), "got shape (1000,) dtype float64"),
    (lambda: np.zeros(2 * N, np.float32)[::2], "strides (8,)"),
    (lambda: [0.0] * N, "must be a numpy array"),
])
def test_update_with_another_shape_or_dtype_is_an_error(backend, rng, bad, fragment):
    g = mutile.Graph()
    x = g.placeholder("x", (N,), np.float32)
    with g.capture():
        axpy[GRID](x, x, poison(N, np.float32), 1.0, N, BLOCK=B, backend=backend)
    with pytest.raises(mutile.LaunchError, match="'x'") as e:
        g.replay(x=bad())
    assert fragment in str(e.value)
    with pytest.raises(mutile.LaunchError, match="'y' is not a placeholder"):
        g.update(y=np.zeros(N, np.float32))


def test_read_only_placeholder_for_a_stored_argument(backend):
    g = mutile.Graph()
    out = g.placeholder("out", (N,), np.float32)
    x = np.ones(N, np.float32)
    with g.capture():
        axpy[GRID](x, x, out, 1.0, N, BLOCK=B, backend=backend)
    ro = np.zeros(N, np.float32)
    ro.flags.writeable = False
    with pytest.raises(mutile.LaunchError, match="'out' is read-only"):
        g.update(out=ro)


@mutile.jit
def copy_desc(src, dst, BM: ml.constexpr):
    dst.store([0], src.load([0]))


@mutile.jit
def gather_first(T, Out):
    ml.store(Out, ml.load(T))


def test_unsupported_arguments_are_errors(backend):
    a = np.ones(16, np.float32)
    g = mutile.Graph()
    with g.capture():
        with pytest.raises(mutile.LaunchError, match=r"argument 'src' \(TensorDescriptor\) "
                           "cannot be captured.*arrays and numbers") as e:
            copy_desc[(1,)](mutile.TensorDescriptor(a, [16]), mutile.TensorDescriptor(a, [16]),
                            BM=16, backend=backend)
        assert "test_graph.py" in str(e.value)          # the launch's line
        with pytest.raises(mutile.LaunchError, match=r"argument 'T' \(AddressTable\) cannot"):
            gather_first[(1,)](mutile.AddressTable([a]), poison(1, np.int64), backend=backend)
    assert len(g) == 0


def test_capture_errors(backend):
    x = np.ones(N, np.float32)
    g = mutile.Graph()
    with pytest.raises(mutile.LaunchError, match="nothing captured"):
        g.replay()
    with g.capture():
        with pytest.raises(mutile.LaunchError, match="already capturing"):
            with mutile.Graph().capture():
                pass
        with pytest.raises(mutile.LaunchError, match="cannot replay while capturing"):
            g.replay()
        axpy[GRID](x, x, poison(N, np.float32), 1.0, N, BLOCK=B, backend=backend)
        other = "pinghu" if backend == "llvm" else "llvm"
        with pytest.raises(mutile.LaunchError, match="a graph holds the launches of one"):
            axpy[GRID](x, x, poison(N, np.float32), 1.0, N, BLOCK=B, backend=other)
    with pytest.raises(mutile.LaunchError, match="holds a capture already"):
        with g.capture():
            pass
    g.reset()
    assert len(g) == 0


def test_a_kernel_still_compiling_elsewhere_is_an_error(backend, monkeypatch):
    started, release = threading.Event(), threading.Event()
    real = mcompile.build

    def slow_build(*a, **kw):
        started.set()
        release.wait(30)
        return real(*a, **kw)

    monkeypatch.setattr(mcompile, "build", slow_build)
    G128 = (-(-N // 128),)
    x = np.ones(N, np.float32)
    args = (x, x, poison(N, np.float32), 1.0, N)
    worker = threading.Thread(target=lambda: axpy.warmup(*args, BLOCK=128, backend=backend,
                                                         grid=G128))
    worker.start()
    try:
        assert started.wait(30)
        g = mutile.Graph()
        with g.capture():
            with pytest.raises(mutile.LaunchError, match="axpy.*still compiling in another "
                                                         "thread"):
                axpy[G128](*args, BLOCK=128, backend=backend)
    finally:
        release.set()
        worker.join()
    out = poison(N, np.float32)
    g = mutile.Graph()
    with g.capture():                       # compiled now: the capture takes it
        axpy[G128](x, x, out, 1.0, N, BLOCK=128, backend=backend)
    g.replay()
    np.testing.assert_array_equal(out, 2 * x)


def test_a_fault_during_replay_names_kernel_position_and_line(backend, rng):
    x, y = data(rng)
    t1 = poison(N, np.float32)
    small = np.zeros(16, np.float32)
    g = mutile.Graph()
    with g.capture():
        axpy[GRID](x, y, t1, 0.5, N, BLOCK=B, backend=backend)
        store_past[(1,)](small, 10, BLOCK=16, backend=backend)  # CAPTURE
        axpy[GRID](t1, y, poison(N, np.float32), 1.0, N, BLOCK=B, backend=backend)
    line = marked(test_a_fault_during_replay_names_kernel_position_and_line, "CAPTURE").line
    with pytest.raises(mutile.DeviceFault) as e:
        g.replay()
    msg = str(e.value)
    assert "graph replay: kernel 'store_past' (launch 2 of 3 in the graph" in msg
    assert f"test_graph.py:{line}" in msg                      # the captured launch's line
    assert e.value.graph_index == 1 and e.value.capture_loc.line == line
    mark = marked(store_past.fn, "FAULT")
    assert e.value.loc.line == mark.line                        # the faulting op's line
    np.testing.assert_allclose(t1, 0.5 * x.astype(np.float64) + y, rtol=1e-6)  # ran first


def test_overlap_drops_barriers_between_independent_kernels(rng):
    x, y = data(rng)
    a, b, c = (poison(N, np.float32) for _ in range(3))
    g = mutile.Graph(overlap=True)
    with g.capture():
        axpy[GRID](x, y, a, 2.0, N, BLOCK=B)        # independent of the next
        axpy[GRID](y, x, b, 3.0, N, BLOCK=B)
        axpy[GRID](a, b, c, 1.0, N, BLOCK=B)        # reads both: a barrier before it
    g.replay()
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    np.testing.assert_allclose(c, (2 * xd + yd) + (3 * yd + xd), rtol=1e-5, atol=1e-5)
    assert g._plan.records[:, -1].tolist() == [0, 1, 1]
    strict = mutile.Graph()
    with strict.capture():
        axpy[GRID](x, y, a, 2.0, N, BLOCK=B)
        axpy[GRID](y, x, b, 3.0, N, BLOCK=B)
    strict.replay()
    assert strict._plan.records[:, -1].tolist() == [1, 1]


def test_pinghu_profile_charges_the_launch_overhead_once_per_graph(rng):
    x, y = data(rng)
    t1, t2, out = (poison(N, np.float32) for _ in range(3))
    with mutile.profile() as eager:
        chain(x, y, t1, t2, out, "pinghu")
    g = mutile.Graph()
    with g.capture():
        chain(x, y, t1, t2, out, "pinghu")
    with mutile.profile() as prof:
        g.replay()
    m = machines.default()
    clock = m.value("device", "clock_hz")
    first = m.value("device", "graph_launch_overhead_us") * 1e-6 * clock
    node = m.value("device", "graph_node_overhead_us") * 1e-6 * clock
    per_launch = m.value("device", "launch_overhead_us") * 1e-6 * clock
    assert [r.launch_overhead_cycles for r in prof.launches] == pytest.approx(
        [first, node, node])
    assert [r.graph_node for r in prof.launches] == [0, 1, 2]
    assert [r.launch_overhead_cycles for r in eager.launches] == pytest.approx([per_launch] * 3)
    assert all(r.graph_node is None for r in eager.launches)
    kernels = sum(r.cycles for r in prof.launches)
    assert prof.end == pytest.approx(kernels + first + 2 * node)
    assert eager.end - prof.end == pytest.approx(3 * per_launch - first - 2 * node, rel=0.05,
                                                 abs=sum(r.cycles for r in eager.launches) * 0.05)
    np.testing.assert_allclose(out, reference(x, y), rtol=1e-5, atol=1e-5)


def test_watchdog_stops_a_replay_and_names_the_kernel(monkeypatch):
    monkeypatch.setenv("MUTILE_WATCHDOG", "0.5")
    x = poison(4, np.float32)
    g = mutile.Graph()
    with g.capture():
        axpy[(1,)](np.ones(4, np.float32), np.ones(4, np.float32), x, 1.0, 4, BLOCK=4)
        spin[(2,)](x, 5)
    with pytest.raises(mutile.DeviceFault, match="kernel 'spin' \\(launch 2 of 2.*watchdog"):
        g.replay()
    np.testing.assert_array_equal(x, 2.0)


@mutile.jit
def spin(X, n):
    i = n * 0
    while i < n:                # i never changes
        i = i * 1
    ml.store(X + ml.program_id(0), i.to(ml.float32))
