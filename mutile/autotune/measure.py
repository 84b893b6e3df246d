"""Measuring one config: run the kernel with it (the hooks around each call, as Triton's
autotuner does) and time it.

On ``backend="pinghu"`` the time is the cycle model's modelled device time
(:func:`mutile.testing.do_bench` returns it; the model is deterministic, so one run is
enough); on ``llvm`` it is the wall time of :func:`mutile.testing.do_bench` with
``warmup``/``rep`` in milliseconds, as Triton defines them. A config that cannot compile or
run (a :class:`~mutile.errors.MutileError`: too much shared memory, too many registers, a
shape the machine lacks, a fault) scores infinity and keeps its reason."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import LaunchError, MutileError
from ..runtime.torch_arrays import is_torch_tensor

INF = float("inf")
QUANTILES = (0.5, 0.2, 0.8)


@dataclass
class Result:
    """One config's measurement: ``timing`` (median, 20th, 80th percentile, ms; infinity
    for a failure), ``reason`` (why it failed, else None), ``deps`` (the compiled kernel's
    recorded dependencies: its ``@jit`` callees and globals), ``outputs`` (copies of the
    array arguments after the run, when asked), ``seconds`` (the wall time it took) and
    ``cached`` (read from the disk cache rather than measured). Picklable."""
    timing: list
    reason: str | None = None
    deps: tuple = ()
    outputs: list | None = None
    seconds: float = 0.0
    cached: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def ms(self) -> float:
        return self.timing[0]

    @property
    def failed(self) -> bool:
        return self.reason is not None or not math.isfinite(self.timing[0])


def failure(reason: str, seconds: float = 0.0) -> Result:
    return Result([INF, INF, INF], reason, seconds=seconds)


# ------------------------------------------------------------ reset_to_zero / restore_value
def _zero(x):
    if is_torch_tensor(x):
        x.zero_()
    else:
        x[...] = 0


def _clone(x):
    return x.clone() if is_torch_tensor(x) else np.array(x, copy=True)


def _copy_back(x, saved):
    if is_torch_tensor(x):
        x.copy_(saved)
    else:
        x[...] = saved


class ResetRestore:
    """Triton's default hooks when ``reset_to_zero`` or ``restore_value`` is given: before a
    trial run, zero the ``reset_to_zero`` arrays and save the ``restore_value`` ones; after
    it, write the saved values back. ``pre(nargs, reset_only=True)`` only zeros (before the
    real launch, after tuning)."""

    def __init__(self, reset_to_zero=(), restore_value=()):
        self.reset_to_zero, self.restore_value = list(reset_to_zero), list(restore_value)
        self._saved: dict = {}

    def pre(self, nargs: dict, reset_only: bool = False) -> None:
        for name in self.reset_to_zero:
            _zero(_arg(nargs, name, "reset_to_zero"))
        if not reset_only:
            self._saved = {name: _clone(_arg(nargs, name, "restore_value"))
                           for name in self.restore_value}

    def post(self, nargs: dict, exception=None) -> None:
        for name, saved in self._saved.items():
            _copy_back(nargs[name], saved)
        self._saved = {}


def _arg(nargs: dict, name: str, what: str):
    if name not in nargs:
        raise LaunchError(f"autotune {what}: '{name}' is not an argument of the launch "
                          f"({', '.join(nargs)})")
    return nargs[name]


def _arrays(nargs: dict) -> list:
    """Copies of every array argument, in argument order (what ``check=`` compares)."""
    out = []
    for v in nargs.values():
        if isinstance(v, np.ndarray):
            out.append(np.array(v, copy=True))
        elif is_torch_tensor(v):
            out.append(v.detach().cpu().numpy().copy())
    return out


# ------------------------------------------------------------ one trial
def conflicts(kwargs: dict, config) -> None:
    clash = sorted(kwargs.keys() & config.kwargs.keys())
    if clash:
        raise LaunchError(f"conflicting meta-parameters: {', '.join(clash)} are tuned by "
                          "@autotune and also passed at launch; do not pass tuned symbols")


def trial_call(tuner, args: tuple, kwargs: dict, config, grid):
    """``(call, nargs, compiled)``: ``call()`` runs ``tuner``'s kernel once with
    ``config`` between the hooks, as Triton's autotuner does (the config's pre-hook, then
    the tuner's; the tuner's post-hook after, also when the launch raises); ``compiled``
    collects the launched kernels."""
    conflicts(kwargs, config)
    current = {**kwargs, **config.all_kwargs()}
    nargs = {**dict(zip(tuner.arg_names, args)), **current}
    compiled = []

    def call():
        if config.pre_hook is not None:
            config.pre_hook(nargs)
        tuner.pre_hook(nargs)
        try:
            compiled.append(tuner.fn.run(*args, grid=grid, warmup=False, **current))
        except Exception as e:
            try:
                tuner.post_hook(nargs, exception=e)
            finally:
                raise
        tuner.post_hook(nargs, exception=None)
    return call, nargs, compiled


def run_config(tuner, args: tuple, kwargs: dict, config, grid, backend: str,
               want_outputs: bool = False, compile_only: bool = False) -> Result:
    """Measure ``config`` for one launch of ``tuner``'s kernel (``args``, the launch's
    ``kwargs`` and ``grid``). ``compile_only``: compile it and record only its failure, if
    any (the llvm backend's parallel stage; timing happens in the tuning process)."""
    start = time.perf_counter()
    if compile_only:
        conflicts(kwargs, config)
        current = {**kwargs, **config.all_kwargs()}
        try:
            k = tuner.fn.run(*args, grid=grid, warmup=True, **current)
        except MutileError as e:
            return failure(_reason(e), time.perf_counter() - start)
        return Result([0.0, 0.0, 0.0], deps=_deps([k]), seconds=time.perf_counter() - start)
    kernel_call, nargs, compiled = trial_call(tuner, args, kwargs, config, grid)
    try:
        timing = _bench(tuner, kernel_call, backend)
    except MutileError as e:
        return failure(_reason(e), time.perf_counter() - start)
    outputs = _arrays(nargs) if want_outputs else None
    return Result(timing, None, _deps(compiled), outputs, time.perf_counter() - start)


def _bench(tuner, kernel_call, backend: str) -> list:
    from .. import testing
    if tuner.do_bench is not None:
        t = tuner.do_bench(kernel_call, quantiles=QUANTILES)
    elif backend == "pinghu":
        t = testing.do_bench(kernel_call, quantiles=QUANTILES)     # modelled, one run
    else:
        t = testing.do_bench(kernel_call, warmup=tuner.num_warmups, rep=tuner.num_reps,
                             quantiles=QUANTILES)
    t = list(t) if isinstance(t, (list, tuple)) else [float(t)] * 3
    return [float(x) for x in t] + [float(t[0])] * (3 - len(t))


def _deps(compiled) -> tuple:
    k = compiled[-1] if compiled else None
    return tuple(getattr(k, "deps", ()) or ())


def _reason(e: MutileError) -> str:
    """The error's first line (for a compile error: ``file:line:col: error: what``; the
    source excerpt and caret under it are left out)."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:500]


def check_outputs(results: dict, order: list, tol) -> None:
    """``check=``: compare each measured config's outputs with those of the first config of
    ``order`` that ran; a config whose outputs differ scores infinity, its reason says by
    how much. ``tol``: a number (rtol = atol) or a dict with ``rtol``/``atol``."""
    rtol, atol = (tol.get("rtol", 1e-5), tol.get("atol", 1e-8)) if isinstance(tol, dict) \
        else (float(tol), float(tol))
    ref_name, ref = None, None
    for name in order:
        r = results.get(name)
        if r is None or r.failed or r.outputs is None:
            continue
        if ref is None:
            ref_name, ref = name, r.outputs
            continue
        for i, (want, got) in enumerate(zip(ref, r.outputs)):
            if want.shape != got.shape:
                continue
            w, g = want.astype(np.float64), got.astype(np.float64)
            if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
                diff = np.abs(g - w)
                worst = float(np.nanmax(diff)) if not np.isnan(diff).all() else float("nan")
                r.reason = (f"check failed: array argument {i} differs from the output of "
                            f"{ref_name} (max |diff| {worst:.3g}, rtol={rtol}, atol={atol})")
                r.timing = [INF, INF, INF]
                break


__all__ = ["INF", "ResetRestore", "Result", "check_outputs", "failure", "run_config", "trial_call"]
