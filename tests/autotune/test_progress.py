"""The tuning progress bar: quiet when stdout is not a terminal; with tqdm (the ``[tune]``
extra) and a terminal (or MUTILE_TUNE_PROGRESS=1) it shows config i of n, the best so far
and the time left."""
from __future__ import annotations

import io

import pytest

from mutile.autotune.progress import Progress


def test_quiet_when_not_a_terminal():
    out = io.StringIO()
    with Progress("k", 5, stream=out) as p:
        for ms in (3.0, 1.0):
            p.update(ms)
    assert out.getvalue() == "" and p.bar is None and p.best == 1.0


def test_shows_i_of_n_and_the_best(monkeypatch):
    pytest.importorskip("tqdm")

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    with Progress("gemm", 4, stream=out) as p:
        p.update(2.5)
        p.update(1.25, cached=True)
        p.bar.refresh()
        text = out.getvalue()
    assert "tuning gemm" in text and "2/4" in text and "best 1.25 ms" in text
    monkeypatch.setenv("MUTILE_TUNE_PROGRESS", "0")
    assert Progress("gemm", 4, stream=Tty()).bar is None
