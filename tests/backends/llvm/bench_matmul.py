"""GFLOP/s of the hand-written tiled matmul IR kernel vs numpy.matmul (same threads).

    python -m tests.backends.llvm.bench_matmul [size] [BM BN BK]
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from .ir_kernels import matmul, matmul_args


def _best(fn, reps=5):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main(argv):
    n = int(argv[0]) if argv else 1024
    BM, BN, BK = (int(x) for x in argv[1:4]) if len(argv) >= 4 else (128, 128, 32)
    threads = os.cpu_count()
    t0 = time.perf_counter()
    k = matmul(BM, BN, BK).compile()
    print(f"compile: {time.perf_counter() - t0:.2f} s, frame {k.frame_bytes / 1024:.0f} KiB")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n)).astype(np.float32)
    B = rng.standard_normal((n, n)).astype(np.float32)
    C = np.empty((n, n), np.float32)
    args = matmul_args(A, B, C)
    grid = (-(-n // BM), -(-n // BN))
    flops = 2.0 * n ** 3
    for th in sorted({1, threads}):
        t = _best(lambda: k.run(args, grid, num_threads=th))
        print(f"mutile llvm {BM}x{BN}x{BK}, {th} thread(s): {flops / t / 1e9:7.1f} GFLOP/s")
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-3, atol=1e-3)
    for th in sorted({1, threads}):
        print(f"numpy.matmul, {th} thread(s):            {_numpy_gflops(n, th):7.1f} GFLOP/s")


def _numpy_gflops(n, threads):
    """numpy.matmul GFLOP/s in a fresh process limited to ``threads`` BLAS threads."""
    code = ("import numpy as np, time\n"
            f"n = {n}\n"
            "A = np.random.rand(n, n).astype(np.float32)\n"
            "B = np.random.rand(n, n).astype(np.float32)\n"
            "np.matmul(A, B); ts = []\n"
            "for _ in range(5):\n"
            "    t = time.perf_counter(); np.matmul(A, B); ts.append(time.perf_counter() - t)\n"
            "print(2 * n ** 3 / min(ts) / 1e9)\n")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return float(out.stdout.strip())

if __name__ == "__main__":
    main(sys.argv[1:])
