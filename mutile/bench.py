"""``mutile bench``: mutile's JIT against numpy and against a previous version of
mutile, side by side in one run, as ratios.

Every figure is a median of repeated runs (``mutile.testing.time_calls``); the machine
is shared and noisy, so compare the ratios, not the absolute times. The previous
version (``--baseline REV``, by default the last commit, or ``HEAD`` when the tree has
uncommitted changes) is installed from git into a temporary folder and measured in
alternation with the current code, each in its own process.

``--backend pinghu`` times the interpreter instead, and runs every row once more under the
cycle model (``mutile.profile()``): the modelled cycles, time and SQMMA utilization of the
row's launches, and the interpreter's wall time with profiling on against the time without.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .testing import time_calls


def _threads() -> int:
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


# ---------------------------------------------------------------- measurements
def _matmul(n, threads, rng):
    from .kernels import matmul as mm
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    kw = dict(block_m=64, block_n=128, block_k=64, num_threads=threads)
    mm.matmul(a, b, **kw)
    mm.matmul(a, b, check_bounds=False, **kw)
    ours = time_calls(lambda: mm.matmul(a, b, **kw))
    unchecked = time_calls(lambda: mm.matmul(a, b, check_bounds=False, **kw))
    ref = time_calls(lambda: a @ b)
    gf = 2 * n ** 3 / 1e6
    return {"name": f"matmul fp32 {n}^3", "unit": "GFLOP/s", "higher": True,
            "mutile": gf / ours, "numpy": gf / ref, "unchecked": gf / unchecked}


def _attention(heads, seq, d, threads, rng):
    from .kernels import attention_basic as fa
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(np.float32) for _ in range(3))
    fa.attention(q, k, v, num_threads=threads)
    fa.attention(q, k, v, num_threads=threads, check_bounds=False)
    ours = time_calls(lambda: fa.attention(q, k, v, num_threads=threads), rep=5)
    unchecked = time_calls(lambda: fa.attention(q, k, v, num_threads=threads,
                                                check_bounds=False), rep=5)

    def naive():
        s = q @ np.swapaxes(k, -1, -2) * (1.0 / np.sqrt(d))
        s = np.exp(s - s.max(-1, keepdims=True))
        return (s / s.sum(-1, keepdims=True)) @ v

    ref = time_calls(naive, rep=5)
    return {"name": f"attention fwd {heads}h seq{seq} d{d} fp32", "unit": "ms", "higher": False,
            "mutile": ours, "numpy": ref, "unchecked": unchecked}


# Triton's own interpreter on the same tiles, as measured for the pinghu issue (seconds);
# quoted, not measured by this command (Triton is not a dependency).
TRITON_INTERPRETER = {"matmul fp16 512^3": 1.3, "attention fwd 2h seq512 d64": 0.35}


def _modelled(fn, secs: float) -> dict:
    """``fn``'s Pinghu launches under the cycle model (``mutile.profile()``): their modelled
    cycles and time summed, TFLOP/s, SQMMA utilization (cycle-weighted over the launches),
    and the interpreter's wall time with profiling on (median of 3) against ``secs``, the
    time without it."""
    from .profiler import profile

    def profiled():
        with profile() as prof:
            fn()
        return prof
    prof = profiled()
    cycles = sum(r.cycles for r in prof.launches)
    flops = sum(r.flops for r in prof.launches)
    busy = sum(r.utilization.get("SQMMA", 0.0) * r.cycles for r in prof.launches)
    wall = time_calls(profiled, rep=3, warmup=0) / 1e3
    secs_model = prof.time_ms / 1e3
    return {"launches": len(prof.launches), "cycles": cycles, "time_us": prof.time_ms * 1e3,
            "tflops": flops / secs_model / 1e12 if secs_model else 0.0,
            "sqmma": busy / cycles if cycles else 0.0, "profiled_s": wall, "plain_s": secs}


def _pinghu_matmul(n, rng):
    """fp16 matmul (f32 accumulate, 64x64x32 tiles) on the Pinghu interpreter."""
    from .kernels import matmul as mm
    a = rng.standard_normal((n, n)).astype(np.float16)
    b = rng.standard_normal((n, n)).astype(np.float16)
    kw = dict(block_m=64, block_n=64, block_k=32, out_dtype=np.float32, backend="pinghu")
    c = mm.matmul(a, b, **kw)
    err = float(np.abs(c - a.astype(np.float64) @ b.astype(np.float64)).max())
    secs = time_calls(lambda: mm.matmul(a, b, **kw), rep=3, warmup=0) / 1e3
    row = {"name": f"matmul fp16 {n}^3 (64x64x32 tiles)", "unit": "s", "higher": False,
           "mutile": secs, "max_abs_err": err,
           "model": _modelled(lambda: mm.matmul(a, b, **kw), secs)}
    if n == 512:
        row["triton"] = TRITON_INTERPRETER["matmul fp16 512^3"]
    return row


def _pinghu_attention(heads, seq, d, rng, dtype=np.float16):
    """FlashAttention forward (64x64 tiles) on the Pinghu interpreter."""
    from .kernels import attention_basic as fa
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(dtype) for _ in range(3))
    out = fa.attention(q, k, v, backend="pinghu")
    ref = fa.attention_reference(*(x.astype(np.float64) for x in (q, k, v)))
    err = float(np.abs(out.astype(np.float64) - ref).max())
    secs = time_calls(lambda: fa.attention(q, k, v, backend="pinghu"), rep=3, warmup=0) / 1e3
    row = {"name": f"attention fwd {heads}h seq{seq} d{d} {np.dtype(dtype).name}", "unit": "s",
           "higher": False, "mutile": secs, "max_abs_err": err,
           "model": _modelled(lambda: fa.attention(q, k, v, backend="pinghu"), secs)}
    if seq == 512:   # Triton's figure is for 2 heads: scale it to this row's heads
        row["triton"] = TRITON_INTERPRETER["attention fwd 2h seq512 d64"] * heads / 2
    return row


def _timed(fn, ref):
    """(seconds, max |err| against ``ref``, the cycle model's figures) of ``fn``."""
    out = fn()
    err = float(np.abs(np.asarray(out, np.float64) - ref).max())
    secs = time_calls(fn, rep=3, warmup=0) / 1e3
    return secs, err, _modelled(fn, secs)


def _async_rows(quick: bool, rng) -> list:
    """The same kernels with and without the asynchronous lowering (TME + SQMMA +
    pipelining vs. LSU loads + WMMA), side by side."""
    import ml_dtypes
    from .kernels import attention_basic as fa
    from .kernels import matmul as mm
    from .kernels import pinghu_gemm as pg
    n = 256 if quick else 512
    bf = ml_dtypes.bfloat16
    a = rng.standard_normal((n, n)).astype(bf)
    b = rng.standard_normal((n, n)).astype(bf)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    grid = (n // 64, n // 64)

    def desc_mm(lowering, ws=False):
        c = np.empty((n, n), np.float32)
        mm.matmul_descriptor_kernel[grid](a, b, c, n, n, n, BLOCK_M=64, BLOCK_N=64,
                                          BLOCK_K=64, backend="pinghu", num_stages=3,
                                          async_lowering=lowering, warp_specialize=ws)
        return c

    rows = []
    for name, fn in [(f"descriptor GEMM bf16 {n}^3, 3 stages", lambda: desc_mm(True)),
                     (f"  same, warp-specialized", lambda: desc_mm(True, True))]:
        secs, err, model = _timed(fn, ref)
        rows.append({"name": name, "mutile": secs, "max_abs_err": err, "model": model})
    base, err, model = _timed(lambda: desc_mm(False), ref)
    rows.append({"name": f"  same, no async lowering (LSU + WMMA)", "mutile": base,
                 "max_abs_err": err, "model": model})
    for ws in (False, True):
        secs, err, model = _timed(lambda: pg.gemm(a, b, stages=3, warp_specialize=ws), ref)
        rows.append({"name": f"explicit ph GEMM bf16 {n}^3{' (ws)' if ws else ''}",
                     "mutile": secs, "max_abs_err": err, "model": model})
    seq = 256 if quick else 512
    q, k, v = (rng.standard_normal((4, seq, 64)).astype(np.float16) for _ in range(3))
    ref = fa.attention_reference(*(x.astype(np.float64) for x in (q, k, v)))
    for name, lowering in [(f"attention fwd 4h seq{seq} d64 fp16 (SQMMA)", True),
                           ("  same, no async lowering (WMMA)", False)]:
        secs, err, model = _timed(lambda: fa.attention(q, k, v, backend="pinghu",
                                                       async_lowering=lowering), ref)
        rows.append({"name": name, "mutile": secs, "max_abs_err": err, "model": model})
    return rows


def measure_pinghu(quick: bool) -> dict:
    """The interpreter rows (``mutile bench --backend pinghu --json``)."""
    rng = np.random.default_rng(0)
    rows = [_pinghu_matmul(n, rng) for n in ((256,) if quick else (256, 512))]
    seq = 256 if quick else 512
    rows.append(_pinghu_attention(4, seq, 64, rng, np.float16))
    rows.append(_pinghu_attention(4, seq, 64, rng, np.float32))
    from .bench_templates import pinghu_rows      # minutes at 4096^3: not with --quick
    return {"threads": 1, "rows": rows, "async": _async_rows(quick, rng),
            "templates": [] if quick else pinghu_rows(quick)}


_COMPILE_SNIPPET = r"""
import time
t = time.perf_counter()
import numpy as np
import mutile, mutile.backends.llvm, mutile.runtime.compile
from mutile.kernels import attention_basic as fa
t_import = time.perf_counter() - t
q = np.ones((1, 64, 64), np.float32)
t = time.perf_counter()
k = fa.attention_fwd_kernel.warmup(q, q, q, q, 64, 64, 0.1, 4096, 64, 4096, 64, 4096, 64,
                                   HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, grid=(1,))
print(time.perf_counter() - t, k.metadata["cache_hit"], t_import)
"""


def _compile_times():
    """Cold (empty cache) and warm (disk cache) compile of the attention kernel, each
    in a fresh process so nothing is cached in memory."""
    rows = []
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, MUTILE_CACHE_DIR=d)
        for label in ("cold (empty cache)", "warm (disk cache)"):
            r = subprocess.run([sys.executable, "-c", _COMPILE_SNIPPET], env=env,
                               capture_output=True, text=True, check=True)
            secs, hit, t_import = r.stdout.split()[:3]
            rows.append({"name": f"compile {label}", "unit": "ms", "higher": False,
                         "mutile": float(secs) * 1e3, "cache_hit": hit == "True"})
    rows.append({"name": "import mutile + llvmlite (once a process)", "unit": "ms",
                 "higher": False, "mutile": float(t_import) * 1e3})
    return rows


def measure(quick: bool, compile_times: bool = True, backend: str = "llvm") -> dict:
    """Every benchmark row of this version of mutile (``mutile bench --json``), with
    numpy and mutile on the same number of threads (OPENBLAS_NUM_THREADS)."""
    if backend == "pinghu":
        return measure_pinghu(quick)
    rng = np.random.default_rng(0)
    threads = _threads()
    tag = f" ({threads} thread{'s' if threads > 1 else ''})"
    rows = [_matmul(n, threads, rng) for n in ((256, 512) if quick else (512, 1024))]
    rows.append(_attention(*((4, 512, 64) if quick else (8, 1024, 64)), threads, rng))
    for r in rows:
        r["name"] += tag
    if compile_times:
        rows += _compile_times()
    return {"threads": threads, "rows": rows}


# ---------------------------------------------------------------- the previous version
def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def _default_baseline(repo) -> str:
    dirty = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return "HEAD" if dirty else "HEAD~1"


def install_baseline(repo: Path, rev: str, into: Path) -> Path:
    """Lay mutile at git revision ``rev`` out under ``into/site`` as an install would
    (``backends/``, ``grammar/`` and ``kernels/`` inside the ``mutile`` package, as
    pyproject.toml's package-dir maps them); no network, no build step."""
    src = into / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    pkg = into / "site" / "mutile"
    shutil.copytree(src / "mutile", pkg)
    for sub in ("backends", "grammar", "kernels"):
        if (src / sub).is_dir():
            shutil.copytree(src / sub, pkg / sub)
    return into / "site"


def _run_json(quick, threads, pythonpath=None, compile_times=True) -> dict:
    """One worker process measuring one version at ``threads`` threads."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    cmd = [sys.executable, "-m", "mutile", "bench", "--json"] + (["--quick"] if quick else [])
    if not compile_times:
        cmd.append("--no-compile")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    if r.returncode != 0:
        raise RuntimeError((r.stderr or r.stdout).strip().splitlines()[-1:] or ["failed"])
    return json.loads(r.stdout)


def _median_rows(runs):
    out = {}
    for run in runs:
        for row in run["rows"]:
            out.setdefault(row["name"], []).append(row)
    merged = {}
    for name, rows in out.items():
        merged[name] = dict(rows[0], mutile=statistics.median(r["mutile"] for r in rows))
        for extra in ("numpy", "unchecked"):
            if extra in rows[0]:
                merged[name][extra] = statistics.median(r[extra] for r in rows)
    return merged


# ---------------------------------------------------------------- tables
def _row(cols, widths):
    return "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                     for i, (c, w) in enumerate(zip(cols, widths)))


def _print_pinghu(result: dict) -> int:
    print(f"mutile bench --backend pinghu — {_cpu_name()}; the Pinghu interpreter (numpy, "
          "one thread) running the ISA the codegen emits; medians of 3 runs\n")
    w = [46, 6, 10, 10, 9]
    print(_row(["interpreter", "unit", "mutile", "Triton*", "ratio"], w))
    for r in result["rows"]:
        tri = r.get("triton")
        print(_row([r["name"], r["unit"], f"{r['mutile']:.3f}",
                    f"{tri:.3f}" if tri else "", f"{tri / r['mutile']:.1f}x" if tri else ""], w)
              + f"   max |err| {r['max_abs_err']:.1e}")
    print("  * Triton's interpreter on the same tiles, as measured for the issue (1.3 s for "
          "the 512^3 matmul, 0.35 s for 2-head seq-512 attention, scaled by heads);\n"
          "    not measured by this command. ratio > 1: the Pinghu interpreter is faster.")
    rows = result.get("async") or []
    if rows:
        print()
        print(_row(["asynchronous engines (TME, SQMMA)", "unit", "mutile", "vs no-async"], w[:4]))
        for grp in (rows[:5], rows[5:]):
            ref = next((r["mutile"] for r in grp if "no async" in r["name"]), None)
            for r in grp:
                rel = "" if ref is None or "no async" in r["name"] else f"{r['mutile'] / ref:.2f}x"
                print(_row([r["name"], "s", f"{r['mutile']:.3f}", rel], w[:4])
                      + f"   max |err| {r['max_abs_err']:.1e}")
        print("  vs no-async: time with the async lowering / time without it (the same "
              "kernel through LSU loads and WMMA); below 2x meets the issue's bound.")
    _print_model(result["rows"] + rows)
    print()
    if result.get("templates"):
        from .bench_templates import print_pinghu
        print_pinghu(result["templates"])
    else:
        print("templates on the cycle model: not with --quick (mutile bench --backend "
              "templates --quick runs them at 1024^3)")
    return 0


def _print_model(rows) -> None:
    """The cycle model's table: what each row's launches would take on Pinghu, and what
    profiling costs the interpreter."""
    rows = [r for r in rows if "model" in r]
    if not rows:
        return
    print()
    w = [46, 8, 12, 10, 8, 6, 8, 9, 6]
    print(_row(["cycle model (mutile.profile)", "launches", "cycles", "time (us)", "TFLOP/s",
                "SQMMA", "plain s", "profiled", "ratio"], w))
    for r in rows:
        m = r["model"]
        print(_row([r["name"], m["launches"], f"{m['cycles']:,.0f}", f"{m['time_us']:.2f}",
                    f"{m['tflops']:.1f}", f"{100 * m['sqmma']:.1f}%", f"{m['plain_s']:.3f}",
                    f"{m['profiled_s']:.3f}", f"{m['profiled_s'] / m['plain_s']:.2f}x"], w))
    print("  cycles and time: the launches' modelled cycles summed (at the machine file's "
          "clock, launch overheads excluded);\n  SQMMA: its utilization, cycle-weighted over "
          "the launches; plain / profiled: the interpreter's wall time without and with\n"
          "  profiling (medians of 3); ratio: their quotient (the issue's bound is 2x).")


def _ratio(ours, other, higher):
    return ours / other if higher else other / ours


def _autotune_section(quick: bool, as_json: bool) -> int:
    """``mutile bench --backend autotune``: the autotuner's figures (docs/autotune.md)."""
    from .autotune.bench import run
    return run(quick=quick, as_json=as_json)


def _launch_section(quick: bool, as_json: bool) -> int:
    """``mutile bench --backend launch``: launch cost and mutile.Graph (docs/graph.md)."""
    from .bench_launch import run
    return run(quick=quick, as_json=as_json, cpu=_cpu_name())


def run_bench(quick: bool = False, backend: str = "llvm", baseline: str | None = None,
              as_json: bool = False, compile_times: bool = True) -> int:
    if backend == "templates":
        from .bench_templates import run
        return run(quick=quick, as_json=as_json)
    if backend == "launch":
        return _launch_section(quick, as_json)
    if backend == "autotune":
        return _autotune_section(quick, as_json)
    if backend not in ("llvm", "pinghu"):
        print(f"mutile bench: unknown backend '{backend}' (llvm, pinghu, autotune, launch, templates)",
              file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(measure(quick, compile_times, backend)))
        return 0
    if backend == "pinghu":
        return _print_pinghu(measure_pinghu(quick))
    repo = Path(__file__).resolve().parent.parent
    in_git = (repo / ".git").exists()
    base_site, base_note = None, ""
    tmp = tempfile.TemporaryDirectory()
    if baseline != "none" and in_git:
        rev = baseline or _default_baseline(repo)
        try:
            label = _git(repo, "rev-parse", "--short", rev)
            base_site = install_baseline(repo, rev, Path(tmp.name))
            base_note = f"{rev} ({label})"
        except (subprocess.CalledProcessError, OSError) as e:
            base_note = f"unavailable: could not install {rev} ({e})"
    elif baseline != "none":
        base_note = "unavailable: not run from a git checkout (use --baseline none)"
    ours_runs, base_runs = [], []
    all_threads = os.cpu_count() or 1
    configs = [(1, False), (all_threads, True)] if all_threads > 1 else [(1, True)]
    for _ in range(2):                      # alternate, so both see the same noise
        for threads, ct in configs:
            ours_runs.append(_run_json(quick, threads, compile_times=ct))
            if base_site is None:
                continue
            try:
                base_runs.append(_run_json(quick, threads, base_site, compile_times=ct))
            except (RuntimeError, json.JSONDecodeError) as e:
                base_note, base_site = f"unavailable: {base_note} failed to run ({e})", None
    ours = _median_rows(ours_runs)
    print(f"mutile bench — {_cpu_name()}, {all_threads} cores; each row runs numpy (OpenBLAS) "
          "and mutile's JIT on the same number of threads; medians of repeated runs, "
          "two alternating rounds\n")
    w = [46, 8, 9, 9, 8]
    print(_row(["vs numpy", "unit", "mutile", "numpy", "ratio"], w))
    for r in ours.values():
        if "numpy" in r:
            print(_row([r["name"], r["unit"], f"{r['mutile']:.1f}", f"{r['numpy']:.1f}",
                        f"{_ratio(r['mutile'], r['numpy'], r['higher']):.2f}x"], w))
    print("  (ratio > 1: mutile is faster)\n")
    print(_row(["cost of bounds checks (on by default)", "unit", "checked", "off",
                "cost"], w))
    for r in ours.values():
        if "unchecked" in r:
            slow = 1 / _ratio(r["mutile"], r["unchecked"], r["higher"]) - 1
            print(_row([r["name"], r["unit"], f"{r['mutile']:.1f}", f"{r['unchecked']:.1f}",
                        f"{100 * slow:+.1f}%"], w))
    print("  (off: check_bounds=False / MUTILE_CHECK_BOUNDS=0; cost: extra time with the "
          "checks)\n")
    for r in ours.values():
        if "numpy" not in r:
            hit = ("" if r.get("cache_hit", True) == (not r["name"].startswith("compile cold"))
                   else "  UNEXPECTED cache result")
            print(_row([r["name"], r["unit"], f"{r['mutile']:.1f}", "", ""], w) + hit)
    print()
    if not base_runs:
        print(f"vs previous version: {base_note or 'skipped (--baseline none)'}")
        return 0
    base = _median_rows(base_runs)
    print(_row([f"vs previous version {base_note}", "unit", "now", "before", "ratio"], w))
    for name, r in ours.items():
        if name in base:
            b = base[name]
            print(_row([name, r["unit"], f"{r['mutile']:.1f}", f"{b['mutile']:.1f}",
                        f"{_ratio(r['mutile'], b['mutile'], r['higher']):.2f}x"], w))
    print("  (ratio > 1: now is faster)")
    tmp.cleanup()
    return 0
