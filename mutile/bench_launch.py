"""``mutile bench --backend launch``: what a launch costs from Python, and what a
:class:`mutile.Graph` saves.

Rows (every time a median of many runs, on a machine that may be shared: compare ratios):

* eager launch of a cached kernel with four arguments (grid (1,), a tiny add), in µs;
* a chain of 100 small kernels (50 x RMSNorm then residual add, on 4096 float32
  elements) on llvm: eager launches vs one graph replay, µs per kernel and the ratio;
* the same chain on pinghu under the cycle model (``mutile.profile()``): modelled device
  time with and without the graph (launch overhead once per graph instead of per kernel).
"""
from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np

import mutile
import mutile.language as ml

N = 4096
CHAIN = 100                     # kernels in the chain (pairs of RMSNorm + residual add)


@mutile.jit
def tiny_add(X, Y, Z, n, BLOCK: ml.constexpr):
    o = ml.arange(0, BLOCK)
    m = o < n
    ml.store(Z + o, ml.load(X + o, mask=m) + ml.load(Y + o, mask=m), mask=m)


@mutile.jit
def rmsnorm(X, W, Y, n, eps, BLOCK: ml.constexpr):
    """Y = X / sqrt(mean(X^2) + eps) * W over one row of n <= BLOCK elements."""
    o = ml.arange(0, BLOCK)
    m = o < n
    x = ml.load(X + o, mask=m, other=0.0)
    r = 1.0 / ml.sqrt(ml.sum(x * x, axis=0) / n + eps)
    ml.store(Y + o, x * r * ml.load(W + o, mask=m), mask=m)


@mutile.jit
def residual_add(X, R, Out, n, BLOCK: ml.constexpr):
    """Out = X + R, BLOCK elements per program."""
    o = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = o < n
    ml.store(Out + o, ml.load(X + o, mask=m) + ml.load(R + o, mask=m), mask=m)


def chain_reference(x, w, r, steps):
    """float64 numpy: ``steps`` times h = rmsnorm(h) * w + r."""
    h = x.astype(np.float64)
    for _ in range(steps):
        h = h / np.sqrt(np.mean(h * h) + 1e-6) * w + r
    return h


def run_chain(h, w, r, tmp, backend, steps):
    """Launch the chain: per step RMSNorm of ``h`` into ``tmp``, then ``h = tmp + r``."""
    for _ in range(steps):
        rmsnorm[(1,)](h, w, tmp, N, 1e-6, BLOCK=N, backend=backend)
        residual_add[(N // 1024,)](tmp, r, h, N, BLOCK=1024, backend=backend)


def _median_us(fn, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def eager_launch_us(reps: int = 3000) -> float:
    """Median µs of one eager launch of a cached four-argument kernel (grid (1,))."""
    x = np.ones(64, np.float32)
    y, z = x.copy(), x.copy()
    k = tiny_add[(1,)]
    for _ in range(100):
        k(x, y, z, 64, BLOCK=64)
    return _median_us(lambda: k(x, y, z, 64, BLOCK=64), reps)


def _chain_arrays(rng):
    x = rng.standard_normal(N).astype(np.float32)
    w = rng.uniform(0.5, 1.5, N).astype(np.float32)
    r = (0.1 * rng.standard_normal(N)).astype(np.float32)
    return x, w, r


def chain_llvm(rng, reps: int) -> dict:
    """µs per kernel of the chain, eager and replayed, and the replay's max |error|."""
    steps = CHAIN // 2
    x, w, r = _chain_arrays(rng)
    h, tmp = x.copy(), np.empty_like(x)
    run_chain(h, w, r, tmp, "llvm", steps)          # compile, warm the plans
    eager = _median_us(lambda: run_chain(h, w, r, tmp, "llvm", steps), reps) / CHAIN
    g = mutile.Graph()
    hg = g.placeholder("h", like=x)
    with g.capture():
        run_chain(hg, w, r, tmp, "llvm", steps)
    start = x.copy()
    g.replay(h=start)
    err = float(np.abs(start - chain_reference(x, w, r, steps)).max())
    replay = _median_us(g.replay, reps) / CHAIN
    return {"eager_us_per_kernel": eager, "graph_us_per_kernel": replay,
            "ratio": eager / replay, "max_abs_err": err}


def chain_pinghu(rng) -> dict:
    """Modelled device µs of the chain on pinghu, eager and replayed (launch overheads
    included: the profile's end)."""
    steps = CHAIN // 2
    x, w, r = _chain_arrays(rng)
    h, tmp = x.copy(), np.empty_like(x)
    run_chain(h, w, r, tmp, "pinghu", 1)            # compile
    h = x.copy()
    with mutile.profile() as eager:
        run_chain(h, w, r, tmp, "pinghu", steps)
    g = mutile.Graph()
    hg = g.placeholder("h", like=x)
    with g.capture():
        run_chain(hg, w, r, tmp, "pinghu", steps)
    start = x.copy()
    with mutile.profile() as graph:
        g.replay(h=start)
    clock = graph.machine.value("device", "clock_hz")
    return {"eager_us": eager.end / clock * 1e6, "graph_us": graph.end / clock * 1e6,
            "launches": len(graph.launches),
            "max_abs_err": float(np.abs(start - h).max())}


def measure(quick: bool) -> dict:
    rng = np.random.default_rng(0)
    return {"eager_launch_us": eager_launch_us(1000 if quick else 3000),
            "chain_llvm": chain_llvm(rng, 5 if quick else 20),
            "chain_pinghu": chain_pinghu(rng)}


def run(quick: bool = False, as_json: bool = False, cpu: str = "") -> int:
    """Measure and print (``cpu``: the processor's name, for the header)."""
    m = measure(quick)
    if as_json:
        print(json.dumps(m))
        return 0
    c, p = m["chain_llvm"], m["chain_pinghu"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print("mutile bench --backend launch: launch cost and mutile.Graph (medians; a shared "
          "machine is noisy)")
    print(f"machine: {cpu}, {os.cpu_count()} CPUs, llvm launches on up to "
          f"{os.cpu_count()} threads (one thread, inline, when that is faster); "
          f"load average {load:.2f}\n")
    print(f"eager launch, cached kernel, 4 args, grid (1,), llvm   {m['eager_launch_us']:8.1f} "
          "us   (goal <= 15 us)")
    print(f"chain of {CHAIN} kernels (RMSNorm + residual add, {N} f32), llvm:")
    print(f"  eager                                                 "
          f"{c['eager_us_per_kernel']:8.2f} us/kernel")
    print(f"  graph replay                                          "
          f"{c['graph_us_per_kernel']:8.2f} us/kernel   {c['ratio']:.1f}x fewer (goal >= 5x)"
          f"   max |err| vs float64 {c['max_abs_err']:.1e}")
    print(f"same chain on pinghu, modelled (mutile.profile, {p['launches']} launches):")
    print(f"  eager launches                                        {p['eager_us']:8.2f} us")
    print(f"  graph replay                                          {p['graph_us']:8.2f} us"
          f"   ({p['eager_us'] - p['graph_us']:.2f} us of launch overhead saved; replay vs "
          f"eager max |diff| {p['max_abs_err']:.1e})")
    return 0
