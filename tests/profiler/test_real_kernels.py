"""The profiler on real Pinghu launches (the cycle model of
``backends/pinghu/machine/timing``): a small elementwise kernel written here, and the
explicit pipelined GEMM of ``kernels/pinghu_gemm.py``; the summary, trace and do_bench
read what the model recorded."""
from __future__ import annotations

import inspect
import io
import json
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.kernels import pinghu_gemm as pg
from mutile.testing import do_bench


@mutile.jit
def scale_rows(X, Y, n_cols, alpha, BLOCK: ml.constexpr):
    row = ml.program_id(0)
    cols = ml.arange(0, BLOCK)
    x = ml.load(X + row * n_cols + cols, mask=cols < n_cols, other=0.0)  # line: load
    ml.store(Y + row * n_cols + cols, x * alpha, mask=cols < n_cols)      # line: store


def line_of(tag: str) -> int:
    src, first = inspect.getsourcelines(scale_rows.fn)
    return first + next(i for i, s in enumerate(src) if f"# line: {tag}" in s)


def launch(x, alpha, rows):
    y = np.full_like(x, np.nan)
    scale_rows[(rows,)](x, y, x.shape[1], alpha, BLOCK=128, backend="pinghu")
    return y


@pytest.fixture
def data(rng):
    return rng.standard_normal((24, 100)).astype(np.float32)


def test_two_launches_recorded_in_order(data):
    with mutile.profile(sample=False) as prof:
        y1 = launch(data, 2.0, 24)
        y2 = launch(data, -3.0, 12)
    np.testing.assert_array_equal(y1, data * np.float32(2.0))
    np.testing.assert_array_equal(y2[:12], data[:12] * np.float32(-3.0))
    assert [r.kernel for r in prof.launches] == ["scale_rows", "scale_rows"]
    a, b = prof.launches
    assert tuple(a.grid)[:1] == (24,) and tuple(b.grid)[:1] == (12,)
    assert not a.sampled and a.blocks == 24 and a.cycles > 0 and a.time_ms > 0
    assert a.start == pytest.approx(a.launch_overhead_cycles) and a.launch_overhead_cycles > 0
    assert b.start == pytest.approx(a.end + b.launch_overhead_cycles)
    for r in prof.launches:
        assert all(0.0 <= v <= 1.0 for v in r.utilization.values())
        assert sum(row.warp_cycles for row in r.by_line) == pytest.approx(r.warp_cycles)


def test_a_sampled_launch(data):
    with mutile.profile(sample=4) as prof:
        launch(data, 2.0, 24)
    (r,) = prof.launches
    assert prof.sample == 4 and r.sampled and (r.blocks, r.blocks_simulated) == (24, 4)
    text = prof.summary(file=io.StringIO())
    assert " 4/24 " in text and "outputs NOT computed" in text


def test_summary_names_the_kernels_lines(data):
    with mutile.profile() as prof:
        launch(data, 2.0, 24)
    text = prof.summary(file=io.StringIO())
    here = os.path.relpath(__file__)
    assert "Kernel scale_rows (launch 0)" in text
    hot = [line for line in text.splitlines() if here in line]
    assert any(f"{here}:{line_of('load')}" in line for line in hot), text
    assert any(f"{here}:{line_of('store')}" in line for line in hot), text


def test_the_same_launch_gives_the_same_cycles_and_do_bench_reports_them(data):
    with mutile.profile() as prof:
        launch(data, 2.0, 24)
    again = do_bench(lambda: launch(data, 2.0, 24))
    assert again == prof.launches[0].time_ms
    with mutile.profile() as prof2:
        launch(data, 2.0, 24)
    assert prof2.launches[0].cycles == prof.launches[0].cycles


def test_trace_of_a_real_launch(data, tmp_path):
    with mutile.profile() as prof:
        launch(data, 2.0, 24)
    doc = json.loads(open(prof.save_trace(tmp_path / "t.json")).read())
    r = prof.launches[0]
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in xs if e["cat"] == "launch"] == ["scale_rows"]
    assert len(xs) == 1 + len(r.slices)
    end = (r.start + r.cycles) / r.clock_hz * 1e6
    for e in xs:
        assert e["ts"] >= 0 and e["ts"] + e["dur"] <= end * (1 + 1e-9) + 1e-6


def test_pipelined_gemm(rng):
    n = 128
    a = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    with mutile.profile(sample=False) as prof:
        c = pg.gemm(a, b, stages=2)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3,
                               atol=1e-2)
    (r,) = prof.launches
    assert r.kernel == "gemm_tme_kernel" and r.dtype == "bf16"
    assert r.flops == 2 * n ** 3 and r.utilization["SQMMA"] > 0
    assert r.tflops <= r.peak_tflops and r.hbm_gbps <= r.peak_hbm_gbps
    text = prof.summary(file=io.StringIO())
    assert "gemm_tme_kernel" in text and "bf16" in text and "pinghu_gemm.py:" in text


SCRIPT = '''
import numpy as np
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


x = np.arange(300, dtype=np.float32)
out = np.empty_like(x)
add_kernel[(triton.cdiv(300, 64),)](x, x, out, 300, BLOCK_SIZE=64, backend="pinghu")
assert np.array_equal(out, 2 * x)
ms = triton.testing.do_bench(lambda: add_kernel[(5,)](x, x, out, 300, BLOCK_SIZE=64,
                                                       backend="pinghu"))
print("do_bench", ms)
'''


def test_mutile_profile_of_a_triton_script(tmp_path):
    script = tmp_path / "tutorial.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MUTILE_") or
           k == "MUTILE_CACHE_DIR"}
    r = subprocess.run([sys.executable, "-m", "mutile", "profile", script], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "mutile profile: 2 Pinghu launches" in r.stdout   # do_bench's joins the profile
    assert "Kernel add_kernel (launches 0, 1)" in r.stdout
    ms = float(r.stdout.split("do_bench ")[1].split()[0])
    doc = json.loads((tmp_path / "tutorial.trace.json").read_text())
    launches = [e for e in doc["traceEvents"] if e.get("cat") == "launch"]
    assert [e["name"] for e in launches] == ["add_kernel"] * 2
    assert launches[1]["dur"] / 1e3 == pytest.approx(ms)
