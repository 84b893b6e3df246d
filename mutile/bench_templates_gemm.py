"""Benchmark rows of the GEMM templates (``mutile.kernels.gemm``, ``fp8_blockwise``):
the cycle model's figures on Pinghu (:func:`rows`) and the llvm-vs-numpy f32 ratio
(:func:`llvm_rows`). ``python -m mutile.bench_templates_gemm [--quick] [--llvm]`` prints
them.

A Pinghu row is ``{"name", "mutile", "max_abs_err", "model", "utilization"}`` as
``mutile/bench.py``'s model table takes them: ``model`` is the ``_modelled``-style dict of
one profiled launch (``sample="wave"``: large grids simulate two waves and estimate the
rest, so their outputs are not all computed); ``mutile`` is that profiled run's wall time
(a plain run of a 4096^3 GEMM on the interpreter computes every block and takes minutes);
``max_abs_err`` is measured on a 256^3 (384^3 for the block-scaled GEMM) problem with the
same kernel and config, against float64; ``utilization`` is the MMA flops over the peak
at the dtype times the modelled time.
"""
from __future__ import annotations

import importlib
import numpy as np

from .bench_model import profiled

# The configs the rows run: the best measured on the cycle model at 4096^3 (the explicit
# warp-specialized kernel, kernels/gemm_pinghu.py; docs/templates-gemm.md has the table).
BEST = {"bf16": dict(BM=256, BN=128, BK=128, GROUP_M=8, STAGES=2, NUM_WARPS=8, PERSISTENT=1),
        "e4m3": dict(BM=256, BN=128, BK=256, GROUP_M=8, STAGES=2, NUM_WARPS=8, PERSISTENT=0)}
# (per-block FP8: two 128-row squads, each a partition, and the producer warp: 227 registers)
BLOCKWISE = dict(block_m=256, block_n=128, num_warps=8, num_stages=4)


def _row(name, fn, err) -> dict:
    model, peak = profiled(fn)
    return {"name": name, "mutile": model["profiled_s"], "max_abs_err": err, "model": model,
            "utilization": model["tflops"] / peak}


def _gemm_case(kind, n, rng):
    import ml_dtypes

    import mutile
    G = importlib.import_module("mutile.kernels.gemm")   # the module, not the function
    dt = {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn}[kind]
    cfg = mutile.Config(BEST[kind], num_warps=BEST[kind]["NUM_WARPS"])
    kw = dict(backend="pinghu", config=cfg)          # bf16 output
    if kind == "e4m3":
        kw.update(a_scale=0.5, b_scale=0.25)

    def run(m):
        a = rng.standard_normal((m, m)).astype(dt)
        b = rng.standard_normal((m, m)).astype(dt)
        return a, b, lambda: G.gemm(a, b, **kw)
    a, b, small = run(256)
    s = kw.get("a_scale", 1.0) * kw.get("b_scale", 1.0)
    ref = s * (a.astype(np.float64) @ b.astype(np.float64))
    err = float(np.abs(small().astype(np.float64) - ref).max())
    _, _, big = run(n)
    return _row(f"gemm {kind} {n}^3 ({_cfg_name(cfg)})", big, err)


def _cfg_name(cfg) -> str:
    k = cfg.kwargs
    return (f"{k['BM']}x{k['BN']}x{k['BK']}, {cfg.num_warps}+1 warps, {k['STAGES']} stages"
            f"{', persistent' if k['PERSISTENT'] else ''}")


def _blockwise_case(n, rng):
    """The small problem goes through the quantizer kernels; the big one's e4m3 operands
    and scales are drawn directly (quantizing 4096^2 on the interpreter takes minutes)."""
    import ml_dtypes

    from .kernels import fp8_blockwise as F
    x = rng.standard_normal((384, 384)).astype(np.float32)
    w = rng.standard_normal((384, 384)).astype(np.float32)
    qa, sa = F.quantize_act_1x128(x, backend="pinghu")
    qw, sw = F.quantize_weight_128x128(w, backend="pinghu")
    exact = (qa.astype(np.float64) * np.repeat(sa, 128, 1)) @ \
        (qw.astype(np.float64) * np.repeat(np.repeat(sw, 128, 0), 128, 1)).T
    y = F.fp8_gemm_blockwise(qa, sa, qw, sw, backend="pinghu", **BLOCKWISE)   # bf16 out
    err = float(np.abs(y.astype(np.float64) - exact).max())
    e4m3, kb = ml_dtypes.float8_e4m3fn, n // 128
    qa, qw = (rng.standard_normal((n, n)).astype(e4m3) for _ in range(2))
    sa = rng.uniform(0.5, 2.0, (n, kb)).astype(np.float32)
    sw = rng.uniform(0.5, 2.0, (kb, kb)).astype(np.float32)
    c = BLOCKWISE
    return _row(f"fp8 blockwise {n}^3 ({c['block_m']}x{c['block_n']}, "
                f"{c['num_warps']}+1 warps, {c['num_stages']} stages)",
                lambda: F.fp8_gemm_blockwise(qa, sa, qw, sw, backend="pinghu", **BLOCKWISE),
                err)


def rows(quick: bool) -> list[dict]:
    """The Pinghu model rows: bf16 and per-tensor e4m3 GEMMs and the per-block FP8 GEMM,
    at 4096^3 (1024^3 with ``quick``)."""
    rng = np.random.default_rng(0)
    n = 1024 if quick else 4096
    return [_gemm_case("bf16", n, rng), _gemm_case("e4m3", n, rng), _blockwise_case(n, rng)]


def llvm_rows(quick: bool, threads: int | None = None) -> list[dict]:
    """f32 GEMM on llvm against numpy's ``a @ b`` at the same thread count: GFLOP/s of
    both and their ratio (numpy / mutile time). Run with OPENBLAS_NUM_THREADS set to the
    thread count (and without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE) for a fair baseline."""
    import os

    G = importlib.import_module("mutile.kernels.gemm")   # the module, not the function
    from .testing import time_calls
    threads = threads or os.cpu_count() or 1
    rng = np.random.default_rng(0)
    out = []
    for n in ((512,) if quick else (512, 1024)):
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        c = G.gemm(a, b, backend="llvm", num_threads=threads)          # tunes
        err = float(np.abs(c - a.astype(np.float64) @ b.astype(np.float64)).max())
        ours = time_calls(lambda: G.gemm(a, b, backend="llvm", num_threads=threads))
        ref = time_calls(lambda: a @ b)
        gf = 2 * n ** 3 / 1e6
        out.append({"name": f"gemm f32 {n}^3 ({threads} threads)", "unit": "GFLOP/s",
                    "higher": True, "mutile": gf / ours, "numpy": gf / ref,
                    "ratio": ours / ref, "max_abs_err": err,
                    "config": repr(G.TUNERS["llvm"].best_config)})
    return out


WHAT_IF = {      # machine-file overrides: each doubles one resource (or halves latencies)
    "2x L2 bandwidth": '[memory]\nl2_bytes_per_s = { value = 8.0e12, source = "what if" }\n',
    "2x SQMMA rate": '[rates]\nsqmma_flops_per_cycle = { value = { e4m3 = 32768, e5m2 = '
                     '32768, s8 = 32768, f16 = 16384, bf16 = 16384, tf32 = 8192 }, source = '
                     '"what if" }\n',
    "2x TME rate": '[memory]\ntme_bytes_per_cycle = { value = 256, source = "what if" }\n',
    "half the latencies": '[memory]\nl2_latency = { value = 125, source = "what if" }\n'
                          'hbm_latency = { value = 250, source = "what if" }\n'
                          'tme_latency = { value = 50, source = "what if" }\n'}


def steady_state(cfg: dict | None = None, ks=(768, 1536)) -> list[dict]:
    """What bounds the explicit bf16 GEMM once its pipeline runs: one wave (7 x 8 tiles on
    the 56 MPs), exact simulation at two K; the cycles one K step costs are their
    difference over the added steps, against the step's SQMMA work and its L2 floor (the
    TME boxes' bytes over the L2 bandwidth), on the shipped machine file and on each
    :data:`WHAT_IF` variant."""
    import os
    import tempfile

    import ml_dtypes

    from . import machines
    from .profiler import profile
    G = importlib.import_module("mutile.kernels.gemm")
    cfg = cfg or BEST["bf16"]
    k = {**cfg, "PERSISTENT": 0}
    bm, bn, bk = k["BM"], k["BN"], k["BK"]
    M, N = 7 * bm, 8 * bn
    config = __import__("mutile").Config(k, num_warps=k["NUM_WARPS"])
    rng = np.random.default_rng(0)
    mf = machines.load(None)
    clock, mps = mf.value("device", "clock_hz"), mf.value("device", "mp_count")
    mma = 2 * bm * bn * bk / mf.value("rates", "sqmma_flops_per_cycle")["bf16"]
    l2 = mps * (bm + bn) * bk * 2 / (mf.value("memory", "l2_bytes_per_s") / clock)
    out = []
    with tempfile.TemporaryDirectory() as d:
        for name, text in [("shipped machine file", None)] + list(WHAT_IF.items()):
            path = None
            if text is not None:
                path = os.path.join(d, "what_if.toml")
                with open(path, "w") as f:
                    f.write(text)
            cycles = []
            for K in ks:
                a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
                b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
                with profile(machine=path, sample=False) as prof:
                    G.gemm(a, b, backend="pinghu", config=config)
                cycles.append(sum(r.cycles for r in prof.launches))
            out.append({"machine": name, "cycles": cycles,
                        "step": (cycles[1] - cycles[0]) / ((ks[1] - ks[0]) / bk),
                        "sqmma_step": mma, "l2_step": l2})
    return out


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--llvm", action="store_true", help="the llvm-vs-numpy rows instead")
    p.add_argument("--what-if", action="store_true",
                   help="the bf16 GEMM's cycles per K step on what-if machine files")
    args = p.parse_args(argv)
    if args.what_if:
        k = BEST["bf16"]
        rs = steady_state()
        print(f"bf16 GEMM {k['BM']}x{k['BN']}x{k['BK']}, {k['NUM_WARPS']}+1 warps, "
              f"{k['STAGES']} stages, one wave of 56 tiles: cycles per K step (its SQMMA "
              f"work {rs[0]['sqmma_step']:.0f}, its L2 floor on the shipped file "
              f"{rs[0]['l2_step']:.0f})")
        for r in rs:
            print(f"  {r['machine']:22s} {r['step']:7.0f}  ({r['step'] / rs[0]['step']:.2f}x)")
        return 0
    if args.llvm:
        for r in llvm_rows(args.quick):
            print(f"{r['name']:32s} mutile {r['mutile']:8.1f} GFLOP/s  numpy "
                  f"{r['numpy']:8.1f} GFLOP/s  time ratio {r['ratio']:.2f}x  {r['config']}")
        return 0
    rs = rows(args.quick)
    for r in rs:
        print(f"{r['name']:60s} SQMMA {100 * r['utilization']:5.1f}%  "
              f"{r['model']['time_us']:9.1f} us  max|err| {r['max_abs_err']:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
