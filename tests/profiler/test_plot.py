"""``prof.plot(path)``: the utilization timeline drawn by matplotlib, and the error that
names the extra when matplotlib is missing."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import mutile
from mutile.profiler import PlotExtraMissing
from mutile.profiler.plot import series

from .record_kit import make_record


@pytest.fixture
def prof(rng):
    p = mutile.profile()
    for k in ("attn_fwd", "gemm"):
        p.add(make_record(rng, kernel=k))
    return p


def test_plot_writes_an_image(prof, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "t.png"
    assert prof.plot(png) == str(png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    svg = tmp_path / "t.svg"
    prof.plot(svg)
    text = svg.read_text()
    for word in ("SQMMA", "TME", "HBM", "0: attn_fwd", "1: gemm", "device time (us)"):
        assert word in text, word


def test_plot_of_an_empty_session(tmp_path):
    pytest.importorskip("matplotlib")
    svg = tmp_path / "empty.svg"
    mutile.profile().plot(svg)
    assert "no utilization timeline recorded" in svg.read_text()


def test_series_places_each_launch_on_the_timeline(prof):
    data = series(prof)
    assert set(data) == {"SQMMA", "TME", "HBM"}
    ts, vs = data["TME"]
    for r in prof.launches:
        t0, t1 = r.start / r.clock_hz * 1e6, r.end / r.clock_hz * 1e6
        inside = (ts >= t0) & (ts <= t1)
        # every bucket's value appears twice (its start and end), zeros at both edges
        assert np.array_equal(vs[inside][1:-1], np.repeat(r.timeline["TME"], 2))
        assert vs[inside][0] == 0 and vs[inside][-1] == 0
        assert ts[inside][0] == pytest.approx(t0) and ts[inside][-1] == pytest.approx(t1)
    assert np.all(np.diff(ts) >= -1e-9)


def test_without_matplotlib_the_error_names_the_extra(prof, tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # import matplotlib fails
    with pytest.raises(PlotExtraMissing) as e:
        prof.plot(tmp_path / "t.png")
    assert isinstance(e.value, ImportError)
    assert "pip install 'mutile[plot]'" in str(e.value)
    assert not (tmp_path / "t.png").exists()
