"""Helpers for the runtime tests (caches, launches, bounds checks).

* Every test here gets its own empty ``MUTILE_CACHE_DIR`` (``cache_dir``) and runs with
  the environment switches that change compilation (``MUTILE_BACKEND``,
  ``MUTILE_CHECK_BOUNDS``, ``MUTILE_VERIFY``) unset, whatever the caller's shell has.
* ``compiles`` records every run of the frontend (one per real compilation; a cache
  hit, in memory or on disk, does not run it).
* ``kernel_module`` writes a Python module holding ``@mutile.jit`` kernels into
  ``tmp_path`` and imports it, so a test can edit the kernels' source and reload.
* ``run_script`` runs a Python script in a fresh interpreter with the test's
  environment (the same ``MUTILE_CACHE_DIR``).

The shared ``backend`` fixture, ``poison`` and ``rng`` come from ``tests/conftest.py``.
"""
from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys
import textwrap

import pytest

import mutile.runtime.compile as mcompile

_ENV_SWITCHES = ("MUTILE_BACKEND", "MUTILE_CHECK_BOUNDS", "MUTILE_VERIFY")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """A fresh, empty disk cache for this test only."""
    d = tmp_path / "mutile-cache"
    monkeypatch.setenv("MUTILE_CACHE_DIR", str(d))
    for name in _ENV_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    return d


@pytest.fixture
def compiles(monkeypatch):
    """The qualnames of the kernels the frontend compiled during the test, in order."""
    seen: list[str] = []
    real = mcompile.frontend_and_passes

    def counting(jitfn, *args, **kwargs):
        seen.append(jitfn.fn.__qualname__)
        return real(jitfn, *args, **kwargs)

    monkeypatch.setattr(mcompile, "frontend_and_passes", counting)
    return seen


def cache_entries(d) -> list:
    """The entry files of the disk cache rooted at ``d`` (no temporary files)."""
    return sorted(p for p in d.rglob("*.bin") if p.is_file()) if d.exists() else []


_counter = itertools.count()


class KernelModule:
    """A module of ``@mutile.jit`` kernels living in a file under ``tmp_path``.

    ``write(src)`` (re)writes the file, moving its mtime forward as a real edit would
    (so neither the bytecode cache nor ``linecache`` can mistake it for the old one);
    ``load()`` imports the module the first time and reloads it afterwards."""

    def __init__(self, directory, name):
        self.dir, self.name = directory, name
        self.path = directory / f"{name}.py"
        self.module = None
        self._mtime = None

    def write(self, src: str) -> "KernelModule":
        self.path.write_text(textwrap.dedent(src))
        st = os.stat(self.path)
        mtime = st.st_mtime if self._mtime is None else max(st.st_mtime, self._mtime + 2)
        os.utime(self.path, (mtime, mtime))
        self._mtime = mtime
        importlib.invalidate_caches()
        return self

    def load(self):
        if self.module is None:
            self.module = importlib.import_module(self.name)
        else:
            self.module = importlib.reload(self.module)
        return self.module


@pytest.fixture
def kernel_module(tmp_path, monkeypatch):
    """``kernel_module(src, stem="k")``: a :class:`KernelModule` with a unique module name
    (returned unloaded); modules made this way leave ``sys.modules`` after the test."""
    d = tmp_path / "kmods"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    made: list[KernelModule] = []

    def make(src: str, stem: str = "k") -> KernelModule:
        km = KernelModule(d, f"mutile_rt_{stem}_{os.getpid()}_{next(_counter)}")
        made.append(km)
        return km.write(src)

    yield make
    for km in made:
        sys.modules.pop(km.name, None)


@pytest.fixture
def run_script(tmp_path):
    """``run_script(code, *argv, env=None, check=True)``: run ``code`` in a fresh
    interpreter (the test's environment plus ``env``); returns the CompletedProcess."""
    counter = itertools.count()

    def run(code: str, *argv, env=None, check=True, timeout=120):
        path = tmp_path / f"script_{next(counter)}.py"
        path.write_text(textwrap.dedent(code))
        r = subprocess.run([sys.executable, str(path), *map(str, argv)],
                           env={**os.environ, **(env or {})}, capture_output=True, text=True,
                           timeout=timeout)
        if check:
            assert r.returncode == 0, f"script failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return r

    return run
