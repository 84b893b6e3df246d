"""``triton.testing`` as ``mutile.testing`` (issue 10, family 10): ``do_bench`` with
Triton's arguments (``warmup``/``rep`` in milliseconds, ``quantiles``, ``return_mode``,
``grad_to_none``), checked by counting calls under a fake clock; ``perf_report`` and
``Benchmark`` (tables to stdout, CSV, plots when matplotlib is installed); ``assert_close``
with Triton's defaults."""
from __future__ import annotations

import csv
import time

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import testing

from ..conftest import poison


U = 1000 / 512     # ms: 2**-9 s, so sums and ratios of the fake times below are exact


class FakeClock:
    """``time.perf_counter`` for ``do_bench``: each call of ``fn`` takes the next of
    ``durations`` (in units ``U``, cycled), and nothing else takes time."""

    def __init__(self, monkeypatch, durations):
        self.now, self.durations, self.calls = 0.0, list(durations), 0
        monkeypatch.setattr(time, "perf_counter", lambda: self.now)

    def fn(self):
        self.now += self.durations[self.calls % len(self.durations)] * U / 1e3
        self.calls += 1


@pytest.mark.parametrize("warmup, rep, call, calls", [
    (5, 20, 1, 1 + 5 + 0 + 20),     # the estimate's 5 calls already fill the warm-up
    (15, 20, 1, 1 + 5 + 10 + 20),   # 10 more warm-up calls make 15 units
    (16, 64, 32, 1 + 1 + 0 + 2),    # a slow call: one estimate, two timed
    (0, 0, 3, 1 + 1 + 0 + 1),       # at least one timed call
])
def test_do_bench_honours_warmup_and_rep_in_milliseconds(monkeypatch, warmup, rep, call, calls):
    clock = FakeClock(monkeypatch, [call])
    assert testing.do_bench(clock.fn, warmup=warmup * U, rep=rep * U) == pytest.approx(call * U)
    assert clock.calls == calls


def test_do_bench_statistics_are_tritons(monkeypatch):
    durations = [1, 4, 2, 3]
    clock = FakeClock(monkeypatch, durations)

    def bench(**kw):
        clock.calls = 0
        return testing.do_bench(clock.fn, warmup=0, rep=40 * U, **kw)

    times = bench(return_mode="all")
    assert clock.calls == 1 + 1 + 10            # warmup 0: one estimate call (4 U) -> 40 / 4
    want = [durations[i % 4] * U for i in range(2, 12)]
    assert times == pytest.approx(want)
    for mode, f in [("mean", np.mean), ("min", np.min), ("max", np.max)]:
        assert bench(return_mode=mode) == pytest.approx(f(want))
    # an even count: the lower middle value, as torch.median's
    assert bench(return_mode="median") == pytest.approx(sorted(want)[4])
    assert sorted(want)[4] != np.median(want)
    assert bench(quantiles=[0.5, 0.2, 0.8]) == pytest.approx(
        list(np.quantile(want, [0.5, 0.2, 0.8])))
    assert bench(quantiles=[0.5]) == pytest.approx(float(np.quantile(want, 0.5)))


def test_do_bench_clears_the_gradients_before_each_timed_call(monkeypatch):
    class Tensor:
        grad = "stale"

    tensors = [Tensor(), Tensor()]
    clock = FakeClock(monkeypatch, [5])
    seen = []

    def fn():
        seen.append([t.grad for t in tensors])
        for t in tensors:
            t.grad = "accumulated"
        clock.fn()

    testing.do_bench(fn, warmup=0, rep=20 * U, grad_to_none=tensors)
    assert seen[:2] == [["stale"] * 2, ["accumulated"] * 2]     # first call, estimate
    assert seen[2:] == [[None, None]] * 4                        # the timed calls


def test_do_bench_refuses_an_unknown_return_mode():
    with pytest.raises(mutile.LaunchError) as e:
        testing.do_bench(lambda: None, return_mode="average")
    assert "return_mode" in str(e.value) and "median" in str(e.value)


@mutile.jit
def axpy(X, Y, Z, n, a, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    ml.store(Z + offs, a * ml.load(X + offs, mask=mask) + ml.load(Y + offs, mask=mask),
             mask=mask)


def test_do_bench_times_a_kernel(backend, rng):
    x, y = rng.standard_normal((2, 300)).astype(np.float32)
    z = poison(300, np.float32)
    ms = testing.do_bench(lambda: axpy[(3,)](x, y, z, 300, 1.5, BLOCK=128, backend=backend),
                          warmup=1, rep=5, return_mode="median")
    assert isinstance(ms, float) and ms > 0
    np.testing.assert_allclose(z, 1.5 * x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- perf_report
def bench_table(plot_name="axpy-speed", styles=None):
    return testing.Benchmark(x_names=["size"], x_vals=[128, 256], line_arg="provider",
                             line_vals=["mutile", "numpy"], line_names=["mutile", "NumPy"],
                             plot_name=plot_name, args={"scale": 2.0}, ylabel="GB/s",
                             styles=styles)


def measure(size, provider, scale):
    """A deterministic cell: (value, min, max) for mutile, a bare number for numpy."""
    v = size * scale + (1 if provider == "mutile" else 0)
    return (v, v - 1, v + 1) if provider == "mutile" else float(v)


def test_perf_report_prints_the_table_and_writes_csv(tmp_path, capsys):
    mark = testing.perf_report(bench_table())(measure)
    assert mark.run(print_data=True, save_path=str(tmp_path)) is None
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "axpy-speed:"
    assert out[1].split() == ["size", "mutile", "NumPy"]
    assert out[2].split() == ["0", "128", "257", "256"]
    assert out[3].split() == ["1", "256", "513", "512"]
    with open(tmp_path / "axpy-speed.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["size", "mutile", "NumPy"]
    assert [[float(v) for v in r] for r in rows[1:]] == [[128, 257, 256], [256, 513, 512]]


def test_perf_report_several_x_names_a_diff_column_and_extra_arguments(capsys):
    bench = testing.Benchmark(x_names=["M", "N"], x_vals=[(2, 3), 4], line_arg="p",
                              line_vals=[1, 10], line_names=["one", "ten"], plot_name="",
                              args={})
    mark = testing.perf_report([bench])(lambda M, N, p, k: float(M * N * p + k))
    mark.run(print_data=True, diff_col=True, k=1)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["M", "N", "one", "ten", "Diff"]
    assert lines[2].split() == ["0", "2", "3", "7", "61", "54"]
    assert lines[3].split() == ["1", "4", "4", "17", "161", "144"]


def test_perf_report_refuses_an_x_value_of_the_wrong_length():
    bench = testing.Benchmark(["M", "N"], [(1, 2, 3)], "p", [1], ["one"], "t", {})
    with pytest.raises(mutile.LaunchError) as e:
        testing.perf_report(bench)(lambda M, N, p: 1.0).run()
    assert "one value per name" in str(e.value)


def test_perf_report_of_a_kernel(backend, rng, tmp_path):
    """The shape of Triton's vector-add tutorial benchmark, on a mutile kernel."""
    def speed(size, provider):
        x, y = rng.standard_normal((2, size)).astype(np.float32)
        z = poison(size, np.float32)
        if provider == "mutile":
            fn = lambda: axpy[(mutile.cdiv(size, 128),)](x, y, z, size, 1.0, BLOCK=128,  # noqa
                                                          backend=backend)
        else:
            fn = lambda: np.add(x, y, out=z)        # noqa: E731
        ms = testing.do_bench(fn, warmup=0, rep=2)
        np.testing.assert_array_equal(z, x + y)
        return 3 * size * 4 / ms * 1e-6
    bench = testing.Benchmark(["size"], [64, 512], "provider", ["mutile", "numpy"],
                              ["mutile", "numpy"], f"add-{backend}", {})
    testing.perf_report(bench)(speed).run(save_path=str(tmp_path))
    with open(tmp_path / f"add-{backend}.csv") as f:
        rows = list(csv.reader(f))
    assert [r[0] for r in rows] == ["size", "64", "512"] and all(float(v) > 0 for v in rows[1][1:])


def test_perf_report_plots_with_matplotlib(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    mark = testing.perf_report(bench_table(styles=[("red", "-"), ("blue", "--")]))(measure)
    mark.run(save_path=str(tmp_path))
    png = (tmp_path / "axpy-speed.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert '<image src="axpy-speed.png"/>' in (tmp_path / "results.html").read_text()


def test_perf_report_without_matplotlib(tmp_path, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    mark = testing.perf_report(bench_table())(measure)
    mark.run(save_path=str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["axpy-speed.csv"]
    with pytest.warns(UserWarning, match=r"mutile\[plot\]"):
        mark.run(show_plots=True)


def test_return_df_needs_pandas():
    mark = testing.perf_report(bench_table(plot_name=""))(measure)
    try:
        import pandas
    except ImportError:
        with pytest.raises(mutile.MutileError) as e:
            mark.run(return_df=True)
        assert "pandas" in str(e.value)
        return
    df = mark.run(return_df=True)
    assert isinstance(df, pandas.DataFrame) and list(df["mutile"]) == [257, 513]


# ---------------------------------------------------------------- assert_close
def test_assert_close_has_tritons_defaults(rng):
    x = rng.standard_normal(64)
    testing.assert_close(x + 0.009, x)                      # atol 1e-2, rtol 0
    with pytest.raises(AssertionError):
        testing.assert_close(x + 0.011, x)
    testing.assert_close(x * 1.5, x * 1.5 + 1e-3, atol=lambda dt: 1e-2 if dt == np.float64
                         else 0.0)
    y = x.copy()
    y[3] = x[3] = np.nan
    testing.assert_close(x, y)                              # NaN where both are NaN
    with pytest.raises(AssertionError) as e:
        testing.assert_close(1.0, 1.5, err_msg="scalar")
    assert "scalar 1.0 is not close to 1.5" in str(e.value)
    import ml_dtypes
    b = x.astype(ml_dtypes.bfloat16)
    testing.assert_close(b, x, atol=0.05, rtol=0.01)
