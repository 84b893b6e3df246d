"""Helpers for the autotuner's tests.

* Every test gets its own empty ``MUTILE_CACHE_DIR`` and, unless it asks for workers,
  tunes serially (``MUTILE_TUNE_WORKERS=1``), so no test depends on another's cache and
  only the tests about parallel tuning start worker processes.
* ``block_grid(n)``: the grid of a 1-D kernel over ``n`` elements, a function of the
  config's BLOCK, as Triton's tutorials write it.
* ``kernel_module`` writes kernels into a module file, so a test can edit and reload them
  (and worker processes can import them).
"""
from __future__ import annotations

import importlib
import itertools
import os
import sys
import textwrap

import pytest

import mutile
from mutile.autotune import report


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "mutile-cache"
    monkeypatch.setenv("MUTILE_CACHE_DIR", str(d))
    monkeypatch.setenv("MUTILE_TUNE_WORKERS", "1")
    for name in ("MUTILE_BACKEND", "MUTILE_PRINT_AUTOTUNING", "MUTILE_TUNE_PROGRESS"):
        monkeypatch.delenv(name, raising=False)
    del report.DECISIONS[:]
    return d


def block_grid(n):
    return lambda meta: (mutile.cdiv(n, meta["BLOCK"]),)


_counter = itertools.count()


@pytest.fixture
def kernel_module(tmp_path, monkeypatch):
    """``kernel_module(src) -> (path, load)``: a module of kernels in a file under
    ``tmp_path`` with a unique name; ``load()`` imports it, or reloads it after an edit
    (``write(path, src)`` moves the file's mtime forward, as a real edit does)."""
    d = tmp_path / "kmods"
    d.mkdir(exist_ok=True)
    monkeypatch.syspath_prepend(str(d))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    made = []

    def make(src: str, name: str | None = None):
        name = name or f"mutile_at_{os.getpid()}_{next(_counter)}"
        path = d / f"{name}.py"
        write(path, src)
        made.append(name)

        def load():
            importlib.invalidate_caches()
            if name in sys.modules:
                return importlib.reload(sys.modules[name])
            return importlib.import_module(name)
        return path, load

    yield make
    for name in made:
        sys.modules.pop(name, None)


def write(path, src: str) -> None:
    old = path.stat().st_mtime if path.exists() else None
    path.write_text(textwrap.dedent(src))
    if old is not None:
        os.utime(path, (old + 2, old + 2))
