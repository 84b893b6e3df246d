"""Host-side helpers for checking and timing kernels (``mutile.testing``), with Triton's
``triton.testing`` API: :func:`do_bench`, :func:`assert_close`, :func:`perf_report` and
:class:`Benchmark`; and :func:`time_calls`, which times a given number of calls.

Times are wall-clock milliseconds of each call (kernels run synchronously on the host: no
events, no synchronization), except that :func:`do_bench` of a function launching Pinghu
kernels returns their modelled device time (the cycle model's ``time_ms``; see
:func:`mutile.profile`). Unlike Triton, nothing flushes a cache between calls.
"""
from __future__ import annotations

import os
import statistics
import time
import warnings

import numpy as np

from .errors import LaunchError, MutileError
from .runtime.torch_arrays import is_torch_tensor, torch_view

RETURN_MODES = ("min", "max", "mean", "median", "all")


def _summarize(times: list, quantiles, return_mode: str):
    """Triton's summary of per-call times: the ``quantiles`` (a list, or one number for
    one quantile) if given, else the ``return_mode`` statistic (``"all"``: every time).
    The median of an even count is the lower middle value, as ``torch.median``'s."""
    if quantiles is not None:
        q = [float(v) for v in np.quantile(np.asarray(times, np.float64), list(quantiles))]
        return q[0] if len(q) == 1 else q
    if return_mode == "all":
        return list(times)
    if return_mode == "median":
        return sorted(times)[(len(times) - 1) // 2]
    return {"min": min, "max": max, "mean": statistics.fmean}[return_mode](times)


def _check_mode(return_mode):
    if return_mode not in RETURN_MODES:
        raise LaunchError(f"return_mode must be one of {', '.join(RETURN_MODES)}, got "
                          f"{return_mode!r}")


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Time ``fn()`` as Triton's ``do_bench``, in milliseconds.

    On the pinghu backend it returns the **modelled device time**: the first call of
    ``fn`` (as in Triton, before any clearing of ``grad_to_none``) runs under a private
    profiling session (:func:`mutile.profile`, ``sample=None``), and if that call launched
    Pinghu kernels the result is the sum of their ``time_ms`` (launch overheads between
    them are not counted), for every ``quantiles`` and ``return_mode`` alike, since the
    model is deterministic; ``fn`` is not called again, and ``warmup``, ``rep`` and
    ``grad_to_none`` play no part. Inside an enclosing ``mutile.profile()`` session the
    private one uses its machine file, and the launches are also added to it. Large grids
    are sampled (docs/cycle-model.md): that call then computes only the simulated blocks'
    outputs.

    When that first call launches no Pinghu kernel (the llvm backend), it counts as the
    untimed first call (it compiles) and ``fn`` is timed by wall clock: ``warmup`` and
    ``rep`` are milliseconds; calls that estimate one call's time (up to 5, and they count
    toward the warm-up); more untimed calls until ``warmup`` ms have passed; then
    ``max(1, rep / estimate)`` timed calls, each after clearing ``grad_to_none``.

    Returns the ``quantiles`` of the times (e.g. ``[0.5, 0.2, 0.8]``) if given, else their
    ``return_mode`` ("mean", "median", "min", "max", or "all" for the list)."""
    _check_mode(return_mode)
    modelled = _modelled_ms(fn)
    if modelled is not None:
        return _summarize([modelled], quantiles, return_mode)
    start = time.perf_counter()
    n = 0
    while n < 5:
        fn()
        n += 1
        if (time.perf_counter() - start) * 1e3 >= warmup:
            break
    spent = (time.perf_counter() - start) * 1e3
    estimate = max(spent / n, 1e-6)
    for _ in range(max(0, int((warmup - spent) / estimate))):
        fn()
    times = []
    for _ in range(max(1, int(rep / estimate))):
        for x in grad_to_none or ():
            x.grad = None
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return _summarize(times, quantiles, return_mode)


def _modelled_ms(fn) -> float | None:
    """Call ``fn()`` once under a private profiling session; the modelled milliseconds of
    the Pinghu launches it made (their ``time_ms`` summed), or None if it made none."""
    from .backends.pinghu.machine.timing import session
    from .profiler import Profile
    outer = session.active()
    prof = Profile(machine=getattr(outer, "machine", None), sample=None)
    with prof:                      # on exit the launches also join ``outer``
        fn()
    return prof.time_ms if prof.launches else None


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Triton's graph-replay timer. There are no graphs to replay here, so this is
    :func:`do_bench` with no warm-up beyond its estimate (``rep`` in milliseconds); on the
    pinghu backend it returns the modelled device time, as :func:`do_bench` does."""
    return do_bench(fn, warmup=0, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                    return_mode=return_mode)


def time_calls(fn, warmup: int = 3, rep: int = 20, min_seconds: float = 0.05,
               return_mode: str = "median"):
    """Run ``fn()`` and return its wall time in milliseconds (median by default), by
    counts: ``warmup`` untimed calls first; then at least ``rep`` timed calls and at least
    ``min_seconds`` of timing (at most ``10 * rep`` calls). ``return_mode`` as in
    :func:`do_bench`."""
    _check_mode(return_mode)
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < rep or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
        if len(times) >= 10 * rep:
            break
    if return_mode == "median":
        return statistics.median(times)
    return _summarize(times, None, return_mode)


def _host(x) -> np.ndarray:
    """``x`` as a numpy array of a dtype numpy compares (bf16 and fp8 widened to f64)."""
    if is_torch_tensor(x):
        x = torch_view(x.detach().cpu())
    a = np.asarray(x)
    return a if a.dtype.kind in "biufc" else a.astype(np.float64)


def assert_close(x, y, atol=None, rtol=None, err_msg=""):
    """Triton's ``assert_close``: ``|x - y| <= atol + rtol * |y|`` elementwise, NaNs equal
    where both are NaN. ``atol`` defaults to 1e-2, ``rtol`` to 0; either may be a function
    of ``x``'s dtype. Arrays, numbers and torch tensors are accepted."""
    x, y = _host(x), _host(y)
    atol = 1e-2 if atol is None else atol
    atol = atol(x.dtype) if callable(atol) else atol
    rtol = 0.0 if rtol is None else rtol
    rtol = rtol(x.dtype) if callable(rtol) else rtol
    if x.size > 1 or y.size > 1:
        np.testing.assert_allclose(x, y, atol=atol, rtol=rtol, equal_nan=True, err_msg=err_msg)
        return
    if not np.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True):
        raise AssertionError(f"{err_msg} {x} is not close to {y} (atol={atol}, rtol={rtol})")


# ---------------------------------------------------------------- perf_report
class Benchmark:
    """One table (and plot) of :func:`perf_report`: a row per value of ``x_vals`` (given to
    every argument named in ``x_names``, or a tuple of one value per name), a column per
    value of ``line_arg`` in ``line_vals`` (titled by ``line_names``), ``args`` fixed.
    ``plot_name`` names the printed table, the CSV and the PNG; ``xlabel``, ``ylabel``,
    ``x_log``, ``y_log`` and ``styles`` (``(color, linestyle)`` per line) shape the plot."""

    def __init__(self, x_names, x_vals, line_arg, line_vals, line_names, plot_name, args,
                 xlabel="", ylabel="", x_log=False, y_log=False, color=None, styles=None):
        self.x_names, self.x_vals = list(x_names), list(x_vals)
        self.line_arg, self.line_vals, self.line_names = line_arg, list(line_vals), list(line_names)
        self.plot_name, self.args = plot_name, dict(args)
        self.xlabel, self.ylabel, self.x_log, self.y_log = xlabel, ylabel, x_log, y_log
        self.color, self.styles = color, styles


class Mark:
    """What :func:`perf_report` returns: ``.run(show_plots=False, print_data=False,
    save_path="", return_df=False, **kwargs)`` measures every cell of each benchmark's
    table; it prints the table with ``print_data``, writes ``<plot_name>.csv`` (and, when
    matplotlib is installed, ``<plot_name>.png`` and ``results.html``) into ``save_path``,
    and shows the plots with ``show_plots`` (a warning without matplotlib)."""

    def __init__(self, fn, benchmarks):
        self.fn, self.benchmarks = fn, benchmarks

    def _table(self, bench: Benchmark, **kwargs):
        """(columns, rows of means, rows of (min, max) per line)."""
        rows, spans = [], []
        for x in bench.x_vals:
            xs = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
            if len(xs) != len(bench.x_names):
                raise LaunchError(f"perf_report: x value {x!r} does not give one value per "
                                  f"name of {bench.x_names}")
            x_args = dict(zip(bench.x_names, xs))
            means, span = [], []
            for y in bench.line_vals:
                ret = self.fn(**x_args, **{bench.line_arg: y}, **bench.args, **kwargs)
                mean, lo, hi = ret if isinstance(ret, (tuple, list)) else (ret, None, None)
                means.append(mean)
                span.append((lo, hi))
            rows.append(xs + means)
            spans.append(span)
        return bench.x_names + bench.line_names, rows, spans

    def _plot(self, bench, rows, spans, save_path, show_plots) -> str | None:
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            if show_plots:
                warnings.warn("perf_report: show_plots=True needs matplotlib, which is not "
                              "installed (pip install 'mutile[plot]'); the tables still print",
                              stacklevel=4)
            return None
        fig, ax = plt.subplots()
        nx = len(bench.x_names)
        xs = [r[0] for r in rows]
        for i, name in enumerate(bench.line_names):
            color, style = bench.styles[i] if bench.styles else (None, None)
            ax.plot(xs, [r[nx + i] for r in rows], label=name, color=color, ls=style)
            lo, hi = [s[i][0] for s in spans], [s[i][1] for s in spans]
            if all(v is not None for v in lo + hi):
                ax.fill_between(xs, lo, hi, alpha=0.15, color=color)
        ax.legend()
        ax.set_xlabel(bench.xlabel or bench.x_names[0])
        ax.set_ylabel(bench.ylabel)
        ax.set_xscale("log" if bench.x_log else "linear")
        ax.set_yscale("log" if bench.y_log else "linear")
        png = None
        if save_path:
            png = f"{bench.plot_name}.png"
            fig.savefig(os.path.join(save_path, png))
        if show_plots:
            plt.show()
        plt.close(fig)
        return png

    def _run(self, bench, save_path, show_plots, print_data, diff_col=False, save_precision=6,
             **kwargs):
        columns, rows, spans = self._table(bench, **kwargs)
        png = self._plot(bench, rows, spans, save_path, show_plots) if bench.plot_name else None
        if diff_col and len(bench.line_names) == 2:
            columns = columns + ["Diff"]
            rows = [r + [r[-1] - r[-2]] for r in rows]
        if print_data:
            print(f"{bench.plot_name}:")
            print(_format_table(columns, rows))
        if save_path:
            with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as f:
                f.write(",".join(columns) + "\n")
                for r in rows:
                    f.write(",".join(f"{v:.{save_precision}f}" if isinstance(v, float) else str(v)
                                     for v in r) + "\n")
        return columns, rows, png

    def run(self, show_plots=False, print_data=False, save_path="", return_df=False, **kwargs):
        single = isinstance(self.benchmarks, Benchmark)
        benches = [self.benchmarks] if single else list(self.benchmarks)
        results = [self._run(b, save_path, show_plots, print_data, **kwargs) for b in benches]
        pngs = [png for _, _, png in results if png]
        if save_path and pngs:
            with open(os.path.join(save_path, "results.html"), "w") as f:
                f.write("<html><body>\n" + "".join(f'<image src="{p}"/>\n' for p in pngs)
                        + "</body></html>\n")
        if not return_df:
            return None
        try:
            import pandas as pd
        except ImportError:
            raise MutileError("perf_report: return_df=True needs pandas") from None
        dfs = [pd.DataFrame(rows, columns=cols) for cols, rows, _ in results]
        return dfs[0] if single else dfs


def _format_table(columns, rows) -> str:
    """The table as pandas prints a DataFrame: a row index, columns right-aligned."""
    def cell(v):
        return f"{v:.6f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)
    body = [[str(i)] + [cell(v) for v in r] for i, r in enumerate(rows)]
    head = [""] + list(columns)
    widths = [max(len(row[j]) for row in body + [head]) for j in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in [head] + body)


def perf_report(benchmarks):
    """Decorator: ``@perf_report(Benchmark(...))`` (or a list of them) over a function of
    the x and line arguments returning a number or ``(mean, min, max)``; ``.run(...)`` on
    the result measures and reports (:class:`Mark`)."""
    return lambda fn: Mark(fn, benchmarks)


__all__ = ["Benchmark", "Mark", "assert_close", "do_bench", "do_bench_cudagraph",
           "perf_report", "time_calls"]
