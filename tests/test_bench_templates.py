"""The templates table of ``mutile bench --backend templates`` (mutile/bench_templates.py):
floors by row name and the per-block FP8 ratio line, on made-up rows (the rows
themselves take minutes: tests/test_bench_templates_gemm.py runs a small one)."""
from mutile import bench_templates as bt


def _row(name, us, util=0.5):
    return {"name": name, "model": {"time_us": us}, "utilization": util, "max_abs_err": 0.0}


def test_floors_follow_the_row_names():
    assert bt._floor("gemm bf16 4096^3 (256x128x128)") == 0.90
    assert bt._floor("attention bwd bf16 16h seq4096 d128") == 0.55
    assert bt._floor("fp8 blockwise 4096^3") is None


def test_blockwise_ratio_is_per_block_over_per_tensor_time(capsys):
    rows = [_row("gemm e4m3 4096^3 (256x128x256)", 400.0),
            _row("fp8 blockwise 4096^3 (256x128)", 410.0)]
    assert bt.blockwise_ratio(rows) == 410.0 / 400.0
    bt.print_pinghu(rows)
    line = [ln for ln in capsys.readouterr().out.splitlines() if "per-tensor" in ln]
    assert len(line) == 1 and "1.025x" in line[0] and "floor 1.05x" in line[0]


def test_blockwise_ratio_needs_both_rows(capsys):
    rows = [_row("gemm e4m3 4096^3", 400.0)]
    assert bt.blockwise_ratio(rows) is None
    bt.print_pinghu(rows)
    assert "per-tensor" not in capsys.readouterr().out
