"""``mutile bench --backend templates`` (also the templates table of ``--backend pinghu``):
the reference templates' efficiency on the cycle model and their llvm ratios.

Pinghu rows (``bench_templates_gemm.rows``, ``bench_templates_attention.rows``): modelled
time and utilization = useful MMA flops / (peak flops at that dtype x modelled time),
against issue 14's floors, at the issue's shapes (GEMMs 4096^3; attention bf16, 16 heads,
seq 4096, d128: its launches fit the default watchdog since the forward's grid is
persistent; ``--quick``: 1024^3 and 2 heads, seq 1024). llvm rows: GEMM f32 against numpy (OpenBLAS) and attention
against torch's CPU SDPA (when torch is installed), at the same thread count.
"""
from __future__ import annotations

FLOORS = {"gemm bf16": 0.90, "gemm e4m3": 0.90, "attention fwd": 0.75, "attention bwd": 0.55}


def _floor(name: str):
    for key, floor in FLOORS.items():
        if name.startswith(key) or name.startswith(key.replace("gemm", "GEMM")):
            return floor
    return None


def pinghu_rows(quick: bool) -> list:
    from . import bench_templates_attention, bench_templates_gemm
    return bench_templates_gemm.rows(quick) + bench_templates_attention.rows(quick)


def print_pinghu(rows) -> None:
    print(f"{'templates on the cycle model':58s} {'time (us)':>10s} {'util':>7s} "
          f"{'floor':>6s}  max |err|")
    for r in rows:
        floor = _floor(r["name"])
        print(f"{r['name']:58s} {r['model']['time_us']:10.1f} {100 * r['utilization']:6.1f}% "
              f"{'' if floor is None else f'{100 * floor:.0f}%':>6s}  {r['max_abs_err']:.2g}")
    ratio = blockwise_ratio(rows)
    if ratio is not None:
        print(f"{'fp8 blockwise time / gemm e4m3 (per-tensor) time':58s} {ratio:10.3f}x "
              f"(floor {BLOCKWISE_FLOOR:.2f}x)")
    print("  util: useful MMA flops / (peak at the dtype x modelled time); each row names its "
          "shape; floors from issue 14.")


BLOCKWISE_FLOOR = 1.05      # the per-block FP8 GEMM within 5% of the per-tensor one's time


def blockwise_ratio(rows):
    """The per-block FP8 GEMM's modelled time over the per-tensor e4m3 GEMM's, when both
    rows are there (the same shape: both come from ``bench_templates_gemm.rows``)."""
    times = {key: r["model"]["time_us"] for r in rows
             for key in ("fp8 blockwise", "gemm e4m3") if r["name"].startswith(key)}
    if len(times) < 2:
        return None
    return times["fp8 blockwise"] / times["gemm e4m3"]


def run(quick: bool = False, as_json: bool = False) -> int:
    import json

    from . import bench_templates_attention, bench_templates_gemm
    rows = pinghu_rows(quick)
    llvm = bench_templates_gemm.llvm_rows(quick) + bench_templates_attention.llvm_rows()
    if as_json:
        print(json.dumps({"pinghu": rows, "llvm": llvm}, default=str))
        return 0
    print_pinghu(rows)
    print()
    for r in llvm:
        base = "numpy" if "numpy" in r else "torch"
        print(f"llvm {r['name']:52s} time ratio vs {base} {r['ratio']:.2f}x (floor 1.25x)")
    if not any("torch" in r for r in llvm):
        print("llvm attention vs torch: torch not installed, not measured")
    return 0
