"""``mutile bench --backend pinghu``'s cycle-model rows (``mutile.bench._modelled`` and
its table): the figures of one row against a profile of the same call."""
from __future__ import annotations

import ml_dtypes
import pytest

import mutile
from mutile import bench
from mutile.kernels import pinghu_gemm as pg


def test_a_row_has_the_profiles_figures(rng):
    a = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)

    def fn():
        pg.gemm(a, b, stages=2)
        pg.gemm(a, b, stages=2, warp_specialize=True)
    with mutile.profile() as prof:
        fn()
    m = bench._modelled(fn, secs=0.25)
    assert m["launches"] == 2 and m["plain_s"] == 0.25 and m["profiled_s"] > 0
    assert m["cycles"] == sum(r.cycles for r in prof.launches)
    assert m["time_us"] == pytest.approx(prof.time_ms * 1e3)
    want = sum(r.utilization["SQMMA"] * r.cycles for r in prof.launches) / m["cycles"]
    assert m["sqmma"] == pytest.approx(want) and 0 < m["sqmma"] <= 1
    assert m["tflops"] == pytest.approx(4 * 128 ** 3 / (prof.time_ms / 1e3) / 1e12)


def test_the_table(capsys):
    model = {"launches": 3, "cycles": 123456.0, "time_us": 112.23, "tflops": 45.6,
             "sqmma": 0.4567, "profiled_s": 0.9, "plain_s": 0.6}
    bench._print_model([{"name": "some GEMM", "model": model}, {"name": "no model row"}])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("some GEMM"))
    assert row.split()[2:] == ["3", "123,456", "112.23", "45.6", "45.7%", "0.600", "0.900",
                               "1.50x"]
    assert "no model row" not in out
