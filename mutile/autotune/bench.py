"""The autotuner's figures (``mutile bench --backend autotune [--quick]``):

* **pinghu GEMM**: the descriptor GEMM of ``kernels/matmul.py`` (bf16, f32 accumulate)
  tuned exhaustively over tile shapes, K step, warps, stages and warp specialization on
  modelled time; the winner re-measured on its own, and its factor over the list's first
  config;
* **wall time** of tuning 16 of those configs at 512^3 serially, with two worker
  processes, and again with the cache warm (each in a fresh process and cache);
* **llvm**: the grouped matmul tuned on wall time; every config re-measured, and how far
  the winner is from the best re-measured time;
* **budgets**: how close 20% random and model (Optuna TPE) searches get to the
  exhaustive best on the GEMM and the attention (``kernels/attention_basic.py``) spaces.

The tuners are module-level names, so worker processes can rebuild them.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import mutile
from ..kernels import attention_basic as fa
from ..kernels import matmul as mm
from . import rounds
from .api import autotune
from .config import ConfigSpace, identity, short

GEMM_SPACE = ConfigSpace(BLOCK_M=[64, 128], BLOCK_N=[64, 128], BLOCK_K=[32, 64],
                         num_warps=[4, 8], num_stages=[2, 3], warp_specialize=[False, True])
ATTENTION_SPACE = ConfigSpace(BLOCK_M=[32, 64, 128], BLOCK_N=[32, 64], num_warps=[4, 8],
                              num_stages=[2, 3])
LLVM_CONFIGS = [mutile.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8})
                for m, n, k in ((32, 32, 32), (64, 64, 32), (64, 128, 32), (128, 64, 32),
                                (128, 128, 32), (32, 64, 64))]

gemm = autotune(configs=GEMM_SPACE, key=["M", "N", "K"])(mm.matmul_descriptor_kernel)
gemm16 = autotune(configs=GEMM_SPACE.configs()[::4], key=["M", "N", "K"])(
    mm.matmul_descriptor_kernel)
attention = autotune(configs=ATTENTION_SPACE, key=["seq_q", "seq_k"])(fa.attention_fwd_kernel)
llvm_matmul = autotune(configs=LLVM_CONFIGS, key=["M", "N", "K"])(mm.matmul_kernel)


def _bf16(rng, shape):
    import ml_dtypes
    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)


def run_gemm(tuner, n: int, seed: int = 0):
    """Launch ``tuner`` (a descriptor-GEMM tuner) at n^3 on pinghu; returns c, a, b."""
    rng = np.random.default_rng(seed)
    a, b = _bf16(rng, (n, n)), _bf16(rng, (n, n))
    c = np.full((n, n), np.nan, np.float32)
    grid = lambda meta: (mutile.cdiv(n, meta["BLOCK_M"]), mutile.cdiv(n, meta["BLOCK_N"]))
    tuner[grid](a, b, c, n, n, n, backend="pinghu")
    return c, a, b


def run_attention(tuner, heads: int, seq: int, d: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(np.float16) for _ in range(3))
    out = np.full_like(q, np.nan)
    grid = lambda meta: (mutile.cdiv(seq, meta["BLOCK_M"]), heads)
    tuner[grid](q, k, v, out, seq, seq, 1.0 / d ** 0.5, seq * d, d, seq * d, d, seq * d, d,
                HEAD_DIM=d, CAUSAL=False, backend="pinghu")
    return out, q, k, v


def _best(d) -> float:
    return min(t[0] for t in d.timings.values())


def pinghu_gemm(n: int) -> dict:
    """Exhaustive tuning of the GEMM space: the winner, its factor over the first config,
    and both re-measured alone (the model is deterministic, so they must agree)."""
    from ..testing import do_bench
    c, a, b = run_gemm(gemm, n)
    d = gemm.tuning_log[-1]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.abs(c - ref).max() / np.abs(ref).max())

    def alone(config):
        out = np.empty((n, n), np.float32)
        grid = (mutile.cdiv(n, config.kwargs["BLOCK_M"]), mutile.cdiv(n, config.kwargs["BLOCK_N"]))
        return do_bench(lambda: mm.matmul_descriptor_kernel[grid](
            a, b, out, n, n, n, backend="pinghu", **config.all_kwargs()))
    first = gemm.configs[0]
    failed = {short(d.configs[i]): r for i, r in d.reasons.items()}
    return {"n": n, "configs": len(d.configs), "failed": failed, "winner": short(d.winner),
            "winner_ms": d.timings[identity(d.winner)][0], "best_ms": _best(d),
            "first": short(first), "first_ms": d.timings[identity(first)][0],
            "winner_alone_ms": alone(d.winner), "first_alone_ms": alone(first),
            "tuning_s": d.seconds, "rel_err": err}


_WALL_SNIPPET = r"""
import json, sys, time
from mutile.autotune import bench as B
B.gemm16.workers = int(sys.argv[1])
t = time.perf_counter()
B.run_gemm(B.gemm16, int(sys.argv[2]))
d = B.gemm16.tuning_log[-1]
print(json.dumps({"s": time.perf_counter() - t, "measured": len(d.measured),
                  "cached": len(d.cached), "winner": B.short(d.winner),
                  "timings": d.timings}))
"""


def wall_times(n: int) -> dict:
    """Tuning 16 GEMM configs: serial, 2 workers, then warm (each a fresh process; the
    first two with an empty cache, the warm run reusing the parallel run's cache)."""
    out = {}
    with tempfile.TemporaryDirectory() as serial_dir, tempfile.TemporaryDirectory() as par_dir:
        for label, workers, d in (("serial", 1, serial_dir), ("parallel (2 workers)", 2, par_dir),
                                  ("warm cache", 2, par_dir)):
            env = dict(os.environ, MUTILE_CACHE_DIR=d)
            r = subprocess.run([sys.executable, "-c", _WALL_SNIPPET, str(workers), str(n)],
                               env=env, capture_output=True, text=True, check=True)
            out[label] = json.loads(r.stdout.strip().splitlines()[-1])
    same = out["serial"]["timings"] == out["parallel (2 workers)"]["timings"]
    return {"n": n, "runs": out, "same_timings": same}


def llvm_pick(n: int, rep_ms: float = 4000.0) -> dict:
    """Wall-time tuning on llvm, then every config re-measured side by side (interleaved
    rounds, :mod:`mutile.autotune.rounds`, about ``rep_ms`` in all; medians): the
    winner's re-measured time against the best."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.full((n, n), np.nan, np.float32)
    strides = (n, 1, n, 1, n, 1)

    def grid(meta):
        return (mutile.cdiv(n, meta["BLOCK_M"]) * mutile.cdiv(n, meta["BLOCK_N"]),)
    start = time.perf_counter()
    llvm_matmul[grid](a, b, c, n, n, n, *strides, backend="llvm")
    tuning_s = time.perf_counter() - start
    err = float(np.abs(c - a.astype(np.float64) @ b).max())
    winner = llvm_matmul.best_config

    def call(cfg):
        g = grid(cfg.kwargs)
        return lambda: mm.matmul_kernel[g](a, b, c, n, n, n, *strides, backend="llvm",
                                           **cfg.all_kwargs())
    samples = rounds.interleaved({short(cfg): call(cfg) for cfg in LLVM_CONFIGS}, rep_ms,
                                 seed=1)
    med = {k: float(np.median(v)) for k, v in samples.items()}
    best = min(med.values())
    return {"n": n, "winner": short(winner), "winner_ms": med[short(winner)], "best_ms": best,
            "best": min(med, key=med.get), "within": med[short(winner)] / best - 1,
            "max_abs_err": err, "remeasured": med, "tuning_s": tuning_s,
            "rounds": len(next(iter(samples.values())))}


def budgets(full, space, run, seeds=(0, 1, 2, 3, 4)) -> dict:
    """20%-budget random (5 seeds) and model (3 seeds) searches of a space whose every
    config is already measured (warm cache): found best / exhaustive best."""
    best = _best(full)
    out = {"configs": len(full.timings), "budget": 0.2}
    for search, ss in (("random", seeds), ("model", seeds[:3])):
        try:
            ratios = []
            for s in ss:
                t = autotune(configs=space, key=list(run.keys), search=search, budget=0.2,
                             seed=s)(run.fn)
                run.launch(t)
                ratios.append(_best(t.tuning_log[-1]) / best)
            out[search] = {"mean": statistics.fmean(ratios), "worst": max(ratios),
                           "hit_best": sum(r == 1.0 for r in ratios), "runs": len(ratios)}
        except mutile.LaunchError as e:          # no optuna: say so, keep the rest
            out[search] = {"error": str(e)}
    return out


class _Run:
    def __init__(self, fn, keys, launch):
        self.fn, self.keys, self.launch = fn, keys, launch


def measure(quick: bool = False) -> dict:
    """Every figure (``mutile bench --backend autotune --json``)."""
    with tempfile.TemporaryDirectory() as d:       # cold caches, never the user's
        old = os.environ.get("MUTILE_CACHE_DIR")
        os.environ["MUTILE_CACHE_DIR"] = d
        try:
            return _measure(quick)
        finally:
            if old is None:
                os.environ.pop("MUTILE_CACHE_DIR", None)
            else:
                os.environ["MUTILE_CACHE_DIR"] = old


def _measure(quick: bool) -> dict:
    n = 256 if quick else 512
    seq = 128 if quick else 256
    res = {"gemm": pinghu_gemm(n)}
    res["gemm_budgets"] = budgets(gemm.tuning_log[-1], GEMM_SPACE, _Run(
        mm.matmul_descriptor_kernel, ["M", "N", "K"], lambda t: run_gemm(t, n)))
    start = time.perf_counter()
    out, q, k, v = run_attention(attention, 2, seq)
    ref = fa.attention_reference(*(x.astype(np.float64) for x in (q, k, v)))
    res["attention"] = {"seq": seq, "configs": len(attention.tuning_log[-1].timings),
                        "winner": short(attention.best_config),
                        "tuning_s": time.perf_counter() - start,
                        "max_abs_err": float(np.abs(out - ref).max())}
    res["attention_budgets"] = budgets(attention.tuning_log[-1], ATTENTION_SPACE, _Run(
        fa.attention_fwd_kernel, ["seq_q", "seq_k"], lambda t: run_attention(t, 2, seq)))
    res["wall"] = wall_times(256 if quick else 512)
    res["llvm"] = llvm_pick(128 if quick else 256)
    return res


def report(res: dict) -> str:
    g, w, L = res["gemm"], res["wall"], res["llvm"]
    lines = [f"autotune — pinghu GEMM bf16 {g['n']}^3, descriptor kernel, {g['configs']} "
             f"configs (tiles x K step x warps x stages x warp specialization), modelled time",
             f"  winner {g['winner']}: {g['winner_ms'] * 1e3:.2f} us (least of all: "
             f"{g['winner_ms'] == g['best_ms']}; re-measured alone {g['winner_alone_ms'] * 1e3:.2f} us)",
             f"  first config {g['first']}: {g['first_ms'] * 1e3:.2f} us -> the winner is "
             f"{g['first_ms'] / g['winner_ms']:.2f}x faster (modelled)",
             f"  {len(g['failed'])} configs failed (scored infinity): "
             + "; ".join(f"{k}: {v.partition('error: ')[2][:80] or v[:80]}" for k, v in list(g["failed"].items())[:2]),
             f"  tuning took {g['tuning_s']:.1f} s; result max rel err {g['rel_err']:.1e}",
             f"wall time, tuning 16 GEMM configs at {w['n']}^3 (fresh process, fresh cache):"]
    for label, r in w["runs"].items():
        lines.append(f"  {label:22s} {r['s']:7.2f} s  ({r['measured']} measured, "
                     f"{r['cached']} from cache, winner {r['winner']})")
    lines.append(f"  serial and parallel modelled times identical: {w['same_timings']}")
    lines.append(f"llvm matmul f32 {L['n']}^3, wall time, {len(L['remeasured'])} configs: "
                 f"winner {L['winner']} re-measured {L['winner_ms']:.3f} ms, best "
                 f"{L['best']} {L['best_ms']:.3f} ms: within {100 * L['within']:.1f}% "
                 f"(target 5%)")
    a = res["attention"]
    lines.append(f"attention fwd fp16 2h seq{a['seq']} d64: {a['configs']} configs, winner "
                 f"{a['winner']}, tuned in {a['tuning_s']:.1f} s")
    for name in ("gemm_budgets", "attention_budgets"):
        b = res[name]
        for s in ("random", "model"):
            r = b[s]
            if "error" in r:
                lines.append(f"  {name[:-8]} {s} 20%: unavailable ({r['error'][:60]})")
                continue
            lines.append(f"{name[:-8]:9s} space ({b['configs']} configs), {s} search, 20% "
                         f"budget: best found / exhaustive best = {r['mean']:.3f} mean, "
                         f"{r['worst']:.3f} worst, {r['hit_best']}/{r['runs']} runs found it")
    return "\n".join(lines)


def run(quick: bool = False, as_json: bool = False) -> int:
    res = measure(quick)
    print(json.dumps(res, default=repr) if as_json else report(res))
    return 0


__all__ = ["measure", "report", "run"]
