"""``mutile bench``: mutile's JIT against numpy, side by side in one run, as ratios.

Every figure is a median of repeated runs (``mutile.testing.do_bench``); the machine
is shared and noisy, so compare the ratios, not the absolute times.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import numpy as np

from .testing import do_bench


def _threads():
    try:
        from threadpoolctl import threadpool_info
        n = [i["num_threads"] for i in threadpool_info() if i.get("internal_api") == "openblas"]
        if n:
            return n[0]
    except ImportError:
        pass
    return int(os.environ.get("OPENBLAS_NUM_THREADS", os.cpu_count() or 1))


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _row(cols, widths):
    return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in
                     enumerate(zip(cols, widths)))


def bench_matmul(sizes, threads, rng):
    from .kernels import matmul as mm
    rows = []
    for n in sizes:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        mm.matmul(a, b, block_m=128, block_n=128, block_k=32, num_threads=threads)
        ours = do_bench(lambda: mm.matmul(a, b, block_m=128, block_n=128, block_k=32,
                                          num_threads=threads))
        ref = do_bench(lambda: a @ b)
        flops = 2 * n ** 3
        rows.append((f"matmul fp32 {n}^3", flops / ours / 1e6, flops / ref / 1e6))
    return rows


def bench_attention(heads, seq, d, threads, rng):
    from .kernels import flash_attention as fa
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(np.float32) for _ in range(3))
    fa.attention(q, k, v, num_threads=threads)
    ours = do_bench(lambda: fa.attention(q, k, v, num_threads=threads), rep=5)

    def naive():
        s = q @ np.swapaxes(k, -1, -2) * (1.0 / np.sqrt(d))
        s = np.exp(s - s.max(-1, keepdims=True))
        return (s / s.sum(-1, keepdims=True)) @ v

    ref = do_bench(naive, rep=5)
    return ours, ref


_COMPILE_SNIPPET = r"""
import os, sys, time, numpy as np
t0 = time.perf_counter()
from mutile.kernels import flash_attention as fa
q = np.ones((1, 64, 64), np.float32)
t1 = time.perf_counter()
k = fa.attention_fwd_kernel.warmup(q, q, q, q, 64, 64, 0.1, 4096, 64, 4096, 64, 4096, 64,
                                   HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, grid=(1,))
t2 = time.perf_counter()
print(t2 - t1, k.metadata["cache_hit"])
"""


def bench_compile():
    """Cold (empty cache dir) and warm (disk cache) compile of the attention kernel,
    each in a fresh process."""
    out = []
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, MUTILE_CACHE_DIR=d)
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", _COMPILE_SNIPPET], env=env,
                               capture_output=True, text=True, check=True)
            secs, hit = r.stdout.split()
            out.append((float(secs), hit == "True"))
    return out


def run_bench(quick: bool = False, backend: str = "llvm") -> int:
    if backend != "llvm":
        print(f"mutile bench: backend '{backend}' is not available yet", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    threads = _threads()
    print(f"mutile bench — {_cpu_name()}, {os.cpu_count()} cores; numpy (OpenBLAS) threads: "
          f"{threads}; mutile JIT threads: {threads}; medians of repeated runs\n")
    sizes = [256, 512] if quick else [512, 1024]
    w = [24, 14, 14, 10]
    print(_row(["matmul", "mutile GFLOP/s", "numpy GFLOP/s", "ratio"], w))
    for name, ours, ref in bench_matmul(sizes, threads, rng):
        print(_row([name, f"{ours:.1f}", f"{ref:.1f}", f"{ours / ref:.2f}"], w))
    heads, seq = (4, 512) if quick else (8, 1024)
    ours, ref = bench_attention(heads, seq, 64, threads, rng)
    print()
    print(_row(["attention fwd", "mutile ms", "naive numpy ms", "speedup"], w))
    print(_row([f"{heads}h seq{seq} d64 fp32", f"{ours:.1f}", f"{ref:.1f}", f"{ref / ours:.2f}"], w))
    print()
    (cold, _), (warm, hit) = bench_compile()
    print(_row(["compile (attention)", "seconds", "", "cache hit"], w))
    print(_row(["cold (empty cache)", f"{cold:.3f}", "", "no"], w))
    print(_row(["warm (disk cache)", f"{warm:.3f}", "", "yes" if hit else "NO"], w))
    return 0
