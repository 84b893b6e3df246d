"""GPU core dumps (``MUTILE_COREDUMP=DIR``, ``mutile coredump FILE``): a planted fault
writes one file naming the kernel, the program, the faulting access and the Python line,
on both backends; the fault's message names the file; ``mutile coredump`` prints the
report later, in another process; damaged files and unwritable folders are errors that
say so, never a crash and never a hidden fault."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.runtime import coredump

from ..conftest import marked, poison


@mutile.jit
def store_past(X, n, BLOCK: ml.constexpr):
    o = ml.arange(0, BLOCK)
    ml.store(X + o + n, o.to(ml.float32))  # FAULT


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mutile", "coredump", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def _fault(backend, tmp_path, monkeypatch, n=10):
    monkeypatch.setenv("MUTILE_COREDUMP", str(tmp_path / "cores"))
    x = poison(16, np.float32)
    with pytest.raises(mutile.DeviceFault) as ei:
        store_past[(2,)](x, n, BLOCK=8, backend=backend)
    files = sorted((tmp_path / "cores").glob("mutile-core-store_past-*.npz"))
    assert len(files) == 1, files
    return ei.value, files[0], x


def test_a_fault_writes_a_core_dump_and_names_it(backend, tmp_path, monkeypatch):
    err, path, x = _fault(backend, tmp_path, monkeypatch)
    assert f"core dump written to {path}" in str(err)
    dump = coredump.load(path)
    mark = marked(store_past.fn, "FAULT")
    assert dump["backend"] == backend and dump["kernel"] == "store_past"
    assert dump["location"]["file"] == mark.file and dump["location"]["line"] == mark.line
    assert "ml.store(X + o + n" in dump["location"]["source"]
    launch = dump["launch"]
    assert launch["grid"] == [2, 1, 1] and launch["args"]["n"] == {"value": 10}
    assert launch["args"]["X"]["shape"] == [16] and launch["args"]["X"]["dtype"] == "float32"
    assert dump["message"].startswith(str(err).split("\ncore dump written")[0][:60])
    if backend == "llvm":
        acc = dump["access"]
        assert acc["parameter"] == "X" and acc["element"] == 16 and acc["length"] == 16
        assert acc["program"] == [0, 0, 0] and acc["tile_element"] == 6
        assert dump["other_faulting_programs"] == [[1, 0, 0]]


def test_mutile_coredump_prints_the_report_in_another_process(backend, tmp_path, monkeypatch):
    err, path, _ = _fault(backend, tmp_path, monkeypatch)
    r = _cli(path)
    assert r.returncode == 0, r.stderr
    mark = marked(store_past.fn, "FAULT")
    out = r.stdout
    assert f"{backend} backend, kernel 'store_past'" in out
    assert f"Python line: {mark.file}:{mark.line}" in out
    assert "grid (2, 1, 1)" in out and "float32[16]" in out
    if backend == "llvm":
        assert "parameter    X" in out and "element      16" in out


def test_no_dump_without_the_variable(tmp_path, monkeypatch, backend):
    monkeypatch.delenv("MUTILE_COREDUMP", raising=False)
    monkeypatch.chdir(tmp_path)
    x = poison(16, np.float32)
    with pytest.raises(mutile.DeviceFault) as ei:
        store_past[(1,)](x, 10, BLOCK=8, backend=backend)
    assert "core dump" not in str(ei.value)
    assert not list(tmp_path.rglob("*.npz"))


def test_an_unwritable_folder_is_said_and_the_fault_still_raised(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MUTILE_COREDUMP", str(blocker / "cores"))
    x = poison(16, np.float32)
    with pytest.raises(mutile.DeviceFault, match="core dump NOT written to"):
        store_past[(1,)](x, 10, BLOCK=8, backend="llvm")


@pytest.mark.parametrize("content", [b"", b"garbage", b"PK\x03\x04broken zip"])
def test_a_damaged_file_is_an_error_not_a_crash(tmp_path, content):
    path = tmp_path / "core.npz"
    path.write_bytes(content)
    r = _cli(path)
    assert r.returncode == 2 and "not a mutile core dump" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_pickles_are_never_loaded(tmp_path):
    path = tmp_path / "core.npz"
    np.savez(path, meta=np.array([{"format": coredump.FORMAT}], dtype=object))
    r = _cli(path)
    assert r.returncode == 2 and "not a mutile core dump" in r.stderr


def test_arrays_and_nesting_survive_the_file(tmp_path, rng):
    """What a backend attaches (nested dicts and lists holding arrays) comes back."""
    regs = rng.integers(0, 2**32, (12, 32), dtype=np.uint64).astype(np.uint32)
    shared = rng.integers(0, 256, 1024, dtype=np.uint8)

    class Fault(Exception):
        loc = None
    f = Fault("boom")
    f.coredump = {"backend": "pinghu", "kernel": "k",
                  "faulting": {"block": [1, 0, 0], "warp": 2, "pc": 7, "lanes": [3],
                               "registers": regs},
                  "shared": shared, "barriers": [{"id": 0, "arrived": 1}],
                  "warps": [{"block": [1, 0, 0], "warp": 2, "pc": 7, "state": "running",
                             "where": "x.py:3"}], "program": ".kernel k\n  EXIT"}
    launch = {"kernel": "k", "file": "x.py", "line": 1, "grid": [2, 1, 1], "args": {},
              "options": {"backend": "'pinghu'"}}
    path = coredump.write(f, launch, tmp_path)
    back = coredump.load(path)
    assert np.array_equal(back["faulting"]["registers"], regs)
    assert back["faulting"]["registers"].dtype == np.uint32
    assert np.array_equal(back["shared"], shared)
    assert back["barriers"] == [{"id": 0, "arrived": 1}]
    text = coredump.report(back)
    assert "faulting warp: block (1, 0, 0) warp 2 pc 7" in text
    assert f"{int(regs[0, 3]):#010x}" in text
    assert f"  000000: {shared[0]:02x}" in text and ".kernel k" in text
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
