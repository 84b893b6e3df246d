"""The compilation caches: the disk cache under ``MUTILE_CACHE_DIR`` (warm starts in a
fresh process, corrupt entries, concurrent writers, unwritable directories), the
dependencies an entry records (``@jit`` callees' source, constexpr globals) and the
key (options, specialization, the compiler's own sources).

Kernels live in modules written to ``tmp_path`` (fixture ``kernel_module``) so a test
can edit their source; every test has its own cache directory (fixture ``cache_dir``).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.runtime import cache

from ..conftest import poison
from .conftest import cache_entries

KERNELS = """
import mutile
import mutile.language as ml

SCALE = ml.constexpr({scale!r})
OFFSET = {offset!r}


@mutile.jit
def helper(x):
    return x * {mul!r}


@mutile.jit
def kern(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    x = ml.load(X + offs, mask=mask)
    ml.store(Y + offs, helper(x) * SCALE + OFFSET, mask=mask)
"""
DEFAULTS = {"scale": 2.0, "offset": 0.5, "mul": 3.0}


def source(**changes) -> str:
    return KERNELS.format(**{**DEFAULTS, **changes})


def expected(x, scale=2.0, offset=0.5, mul=3.0):
    return (x.astype(np.float64) * mul * scale + offset)


def launch(mod, x, backend="llvm", block=64, **options):
    """Run ``mod.kern`` over ``x``; returns (output, CompiledKernel)."""
    y = poison(x.shape, x.dtype)
    k = mod.kern[(mutile.cdiv(x.size, block),)](x, y, x.size, BLOCK=block, backend=backend,
                                                **options)
    return y, k


def check(y, x, **params):
    assert not np.isnan(y).any(), "the kernel left elements unwritten"
    np.testing.assert_allclose(y, expected(x, **params), rtol=1e-6, atol=1e-6)


# A fresh process: import the kernel module, run ``kern`` on the saved input, save the
# output and print the metadata as JSON. With FORBID_FRONTEND set, running the frontend
# (i.e. compiling instead of using the disk cache) kills the process. With GO_FILE set,
# it writes READY_FILE once imported and waits for GO_FILE before launching.
RUNNER = """
import importlib, json, os, sys, time
import numpy as np
moddir, modname, inp, out = sys.argv[1:5]
sys.path.insert(0, moddir)
sys.dont_write_bytecode = True
import mutile
import mutile.runtime.compile as C
if os.environ.get("FORBID_FRONTEND"):
    def forbidden(*a, **k):
        raise SystemExit("FORBIDDEN: the frontend ran although the disk cache holds the kernel")
    C.frontend_and_passes = forbidden
mod = importlib.import_module(modname)
x = np.load(inp)
y = np.full_like(x, np.nan)
if os.environ.get("GO_FILE"):
    open(os.environ["READY_FILE"], "w").close()
    deadline = time.time() + 60
    while not os.path.exists(os.environ["GO_FILE"]) and time.time() < deadline:
        time.sleep(0.002)
k = mod.kern[(mutile.cdiv(x.size, 64),)](x, y, x.size, BLOCK=64)
np.save(out, y)
print(json.dumps({"cache_hit": k.metadata["cache_hit"],
                  "compile_seconds": k.metadata["compile_seconds"],
                  "cache_key": k.metadata["cache_key"],
                  "asm": {name: len(k.asm[name]) for name in k.asm}}))
"""


@pytest.fixture
def proc(tmp_path, rng):
    """``proc.run(km, env=...)`` runs RUNNER on a module in a fresh interpreter and
    returns (output, metadata); ``proc.start`` only starts it (Popen)."""

    class Proc:
        x = rng.standard_normal(1000).astype(np.float32)
        inp = tmp_path / "x.npy"
        runner = tmp_path / "runner.py"
        n = 0

        def argv(self, km):
            Proc.n += 1
            out = tmp_path / f"y{Proc.n}.npy"
            return [sys.executable, str(self.runner), str(km.dir), km.name, str(self.inp),
                    str(out)], out

        def start(self, km, env=None):
            argv, out = self.argv(km)
            p = subprocess.Popen(argv, env={**os.environ, **(env or {})},
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            return p, out

        @staticmethod
        def finish(p, out, timeout=120):
            stdout, stderr = p.communicate(timeout=timeout)
            assert p.returncode == 0, f"process failed ({p.returncode}):\n{stdout}\n{stderr}"
            return np.load(out), json.loads(stdout.strip().splitlines()[-1])

        def run(self, km, env=None):
            return self.finish(*self.start(km, env))

    np.save(Proc.inp, Proc.x)
    Proc.runner.write_text(RUNNER)
    return Proc()


# ---------------------------------------------------------------- warm starts
def test_warm_start_in_a_fresh_process_uses_the_disk_cache(kernel_module, proc, cache_dir):
    km = kernel_module(source())
    y_cold, cold = proc.run(km)
    assert cold["cache_hit"] is False
    assert len(cache_entries(cache_dir)) == 1
    y_warm, warm = proc.run(km, env={"FORBID_FRONTEND": "1"})
    assert warm["cache_hit"] is True
    assert warm["cache_key"] == cold["cache_key"]
    for meta in (cold, warm):
        assert isinstance(meta["compile_seconds"], float) and 0 < meta["compile_seconds"] < 60
    check(y_cold, proc.x)
    assert np.array_equal(y_warm, y_cold), "the cached kernel computes something else"
    # every stage's text survives the round trip through the disk
    assert set(warm["asm"]) >= {"ir", "inline", "canonicalize", "cse", "licm", "dce", "llir",
                                "asm"}
    assert all(warm["asm"][s] > 0 for s in ("ir", "dce", "llir", "asm"))
    assert len(cache_entries(cache_dir)) == 1


def test_a_new_jit_object_in_process_uses_the_disk_cache(kernel_module, compiles, rng):
    mod = kernel_module(source()).load()
    x = rng.standard_normal(300).astype(np.float32)
    y1, k1 = launch(mod, x)
    assert compiles == ["kern"] and k1.metadata["cache_hit"] is False
    y2, k2 = launch(mod, x)
    assert k2 is k1 and compiles == ["kern"], "the in-memory cache missed"
    mod.kern.cache.clear()                      # as if the process had restarted
    y3, k3 = launch(mod, x)
    assert compiles == ["kern"], "the disk cache missed"
    assert k3.metadata["cache_hit"] is True
    for y in (y1, y2, y3):
        check(y, x)
    assert np.array_equal(y1, y3)
    # what the entry knows about stores survives the disk: Y may not be read-only, X may
    xr = x.copy()
    xr.setflags(write=False)
    y4 = poison(x.shape, x.dtype)
    mod.kern[(mutile.cdiv(x.size, 64),)](xr, y4, x.size, BLOCK=64)
    check(y4, x)
    y4.setflags(write=False)
    with pytest.raises(mutile.LaunchError, match="'Y'"):
        mod.kern[(mutile.cdiv(x.size, 64),)](x, y4, x.size, BLOCK=64)
    assert compiles == ["kern"]


# ---------------------------------------------------------------- corrupt entries
def _crafted(body: bytes) -> bytes:
    """An entry with a correct header and checksum around ``body``."""
    return cache._MAGIC + hashlib.sha256(body).digest() + body


def _garbage_binary(data: bytes) -> bytes:
    payload = pickle.loads(data[len(cache._MAGIC) + 32:])
    payload["binary"] = b"\x00not an object file\xff" * 8
    return _crafted(pickle.dumps(payload))


CORRUPTIONS = {
    "random-bytes": lambda d: os.urandom(len(d)),
    "truncated": lambda d: d[: len(d) // 2],
    "truncated-to-header": lambda d: d[: len(cache._MAGIC) + 32],
    "empty": lambda d: b"",
    "one-flipped-byte": lambda d: d[:-10] + bytes([d[-10] ^ 0x40]) + d[-9:],
    "garbage-pickle-with-valid-checksum": lambda d: _crafted(b"\x80\x05garbage, not a pickle"),
    "garbage-binary-in-valid-payload": _garbage_binary,
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_entry_is_ignored_and_rebuilt(corruption, kernel_module, compiles, cache_dir,
                                                rng):
    mod = kernel_module(source()).load()
    x = rng.standard_normal(200).astype(np.float32)
    _, k = launch(mod, x)
    [entry] = cache_entries(cache_dir)
    entry.write_bytes(CORRUPTIONS[corruption](entry.read_bytes()))
    mod.kern.cache.clear()
    y, k2 = launch(mod, x)                      # must not raise
    assert k2.metadata["cache_hit"] is False and compiles == ["kern", "kern"]
    check(y, x)
    # the rebuilt entry replaced the corrupt one and is used by the next cold start
    assert cache_entries(cache_dir) == [entry]
    assert isinstance(cache.load(k.metadata["cache_key"]), dict)
    mod.kern.cache.clear()
    y3, k3 = launch(mod, x)
    assert k3.metadata["cache_hit"] is True and compiles == ["kern", "kern"]
    assert np.array_equal(y3, y)


@pytest.mark.parametrize("payload", [{"not": "an entry"}, 42], ids=["dict-without-keys", "int"])
def test_an_entry_of_the_wrong_shape_is_ignored_and_rebuilt(payload, kernel_module, cache_dir,
                                                            rng):
    mod = kernel_module(source()).load()
    x = rng.standard_normal(200).astype(np.float32)
    launch(mod, x)
    [entry] = cache_entries(cache_dir)
    entry.write_bytes(_crafted(pickle.dumps(payload)))
    mod.kern.cache.clear()
    y, k = launch(mod, x)
    assert k.metadata["cache_hit"] is False
    check(y, x)


# ---------------------------------------------------------------- dependencies
def test_editing_a_callee_recompiles_after_reload(kernel_module, compiles, cache_dir, rng):
    km = kernel_module(source(mul=3.0))
    mod = km.load()
    old_kern = mod.kern
    x = rng.standard_normal(300).astype(np.float32)
    y, _ = launch(mod, x)
    check(y, x, mul=3.0)
    km.write(source(mul=-5.0))                  # only helper() changes, kern's text does not
    mod = km.load()
    y, k = launch(mod, x)
    assert compiles == ["kern", "kern"] and k.metadata["cache_hit"] is False
    check(y, x, mul=-5.0)
    # the JITFunction made before the reload re-checks its callee at launch too
    y_old = poison(x.shape, x.dtype)
    old_kern[(mutile.cdiv(x.size, 64),)](x, y_old, x.size, BLOCK=64)
    check(y_old, x, mul=-5.0)


def test_editing_a_callee_recompiles_in_a_new_process(kernel_module, proc, cache_dir):
    km = kernel_module(source(mul=3.0))
    y1, m1 = proc.run(km)
    check(y1, proc.x, mul=3.0)
    km.write(source(mul=0.25))
    y2, m2 = proc.run(km)
    assert m2["cache_hit"] is False, "the entry compiled with the old helper() was reused"
    check(y2, proc.x, mul=0.25)
    y3, m3 = proc.run(km, env={"FORBID_FRONTEND": "1"})   # the rebuilt entry is reused
    assert m3["cache_hit"] is True and np.array_equal(y3, y2)


def test_editing_the_kernel_itself_recompiles(kernel_module, compiles, cache_dir, rng):
    km = kernel_module(source())
    mod = km.load()
    x = rng.standard_normal(100).astype(np.float32)
    y, k1 = launch(mod, x)
    check(y, x)
    km.write(source().replace("helper(x) * SCALE + OFFSET", "helper(x) * SCALE - OFFSET"))
    mod = km.load()
    y, k2 = launch(mod, x)
    assert compiles == ["kern", "kern"] and k2.metadata["cache_hit"] is False
    check(y, x, offset=-0.5)
    assert k2.metadata["cache_key"] != k1.metadata["cache_key"]
    assert len(cache_entries(cache_dir)) == 2


@pytest.mark.parametrize("name, new, params", [
    ("SCALE", ml.constexpr(-4.0), {"scale": -4.0}),         # an ml.constexpr global
    ("OFFSET", 7.25, {"offset": 7.25}),                      # a plain number global
], ids=["constexpr", "plain-number"])
def test_changing_a_global_recompiles_in_process(name, new, params, kernel_module, compiles, rng):
    mod = kernel_module(source()).load()
    x = rng.standard_normal(300).astype(np.float32)
    y, k1 = launch(mod, x)
    check(y, x)
    setattr(mod, name, new)
    y, k2 = launch(mod, x)
    assert compiles == ["kern", "kern"], "the in-memory cache kept code built for the old value"
    check(y, x, **params)
    # a relaunch with the value unchanged hits again
    y, k3 = launch(mod, x)
    assert k3 is k2 and len(compiles) == 2
    check(y, x, **params)


def test_changing_a_global_recompiles_in_a_new_process(kernel_module, proc):
    km = kernel_module(source(scale=2.0))
    y1, m1 = proc.run(km)
    check(y1, proc.x, scale=2.0)
    km.write(source(scale=0.5))
    y2, m2 = proc.run(km)
    assert m2["cache_hit"] is False
    check(y2, proc.x, scale=0.5)


def test_changing_a_global_read_through_a_module_recompiles(kernel_module, compiles, rng):
    cfg = kernel_module("import mutile.language as ml\nSCALE = ml.constexpr(3.0)\n", "cfg")
    cfg_mod = cfg.load()
    mod = kernel_module(f"""
        import mutile
        import mutile.language as ml
        import {cfg.name} as cfg


        @mutile.jit
        def kern(X, Y, n, BLOCK: ml.constexpr):
            offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
            mask = offs < n
            ml.store(Y + offs, ml.load(X + offs, mask=mask) * cfg.SCALE, mask=mask)
        """).load()
    x = rng.standard_normal(100).astype(np.float32)
    y, _ = launch(mod, x)
    np.testing.assert_allclose(y, 3.0 * x, rtol=1e-6)
    cfg_mod.SCALE = ml.constexpr(-1.0)
    y, _ = launch(mod, x)
    np.testing.assert_allclose(y, -x, rtol=1e-6)


def test_a_kernel_defined_in_a_function_is_compiled_once(compiles, rng):
    def make():
        @mutile.jit
        def local_kern(X, Y, n, BLOCK: ml.constexpr):
            offs = ml.arange(0, BLOCK)
            ml.store(Y + offs, ml.load(X + offs, mask=offs < n) + 1.0, mask=offs < n)
        return local_kern

    kern = make()
    x = rng.standard_normal(16).astype(np.float32)
    for _ in range(3):
        y = poison(16, np.float32)
        kern[(1,)](x, y, 16, BLOCK=16)
        np.testing.assert_allclose(y, x + 1.0, rtol=1e-6)
    assert len(compiles) == 1, f"compiled {len(compiles)} times: {compiles}"


# ---------------------------------------------------------------- the key
def test_options_and_specializations_get_their_own_entries(kernel_module, compiles, cache_dir,
                                                           rng):
    mod = kernel_module(source()).load()
    x32 = rng.standard_normal(500).astype(np.float32)
    variants = {
        "base": (x32, 64, {}),
        "num_warps=8": (x32, 64, {"num_warps": 8}),
        "num_stages=1": (x32, 64, {"num_stages": 1}),
        "float64": (x32.astype(np.float64), 64, {}),
        "BLOCK=128": (x32, 128, {}),
        "check_bounds=False": (x32, 64, {"check_bounds": False}),
    }
    keys = {}
    for name, (x, block, opts) in variants.items():
        y, k = launch(mod, x, block=block, **opts)
        assert k.metadata["cache_hit"] is False, name
        check(y, x)
        keys[name] = k.metadata["cache_key"]
    assert len(set(keys.values())) == len(variants), keys
    assert len(cache_entries(cache_dir)) == len(variants)
    assert len(compiles) == len(variants)
    # each variant finds its own entry again, in memory and on disk
    for clear in (False, True):
        if clear:
            mod.kern.cache.clear()
        for name, (x, block, opts) in variants.items():
            y, k = launch(mod, x, block=block, **opts)
            assert k.metadata["cache_key"] == keys[name]
            if "num_warps" in opts:
                assert k.metadata["num_warps"] == opts["num_warps"]
            check(y, x)
    assert len(compiles) == len(variants)
    # the thread count is a launch detail, not part of the code
    y, k = launch(mod, x32, num_threads=1)
    assert k.metadata["cache_key"] == keys["base"] and len(compiles) == len(variants)
    check(y, x32)


def test_two_processes_compiling_at_once_both_succeed(kernel_module, proc, cache_dir, tmp_path):
    km = kernel_module(source())
    go = tmp_path / "go"
    started = []
    for i in range(2):
        env = {"GO_FILE": str(go), "READY_FILE": str(tmp_path / f"ready{i}")}
        started.append(proc.start(km, env))
    deadline = time.time() + 60
    while not all((tmp_path / f"ready{i}").exists() for i in range(2)):
        assert time.time() < deadline and all(p.poll() is None for p, _ in started), \
            "a process died before compiling"
        time.sleep(0.005)
    go.touch()                                  # both compile now
    results = [proc.finish(p, out) for p, out in started]
    for y, meta in results:
        check(y, proc.x)
    assert results[0][1]["cache_key"] == results[1][1]["cache_key"]
    entries = cache_entries(cache_dir)
    assert len(entries) == 1
    assert [p for p in cache_dir.rglob("*") if p.is_file()] == entries, "temporary files left"
    assert isinstance(cache.load(results[0][1]["cache_key"]), dict)
    y, meta = proc.run(km, env={"FORBID_FRONTEND": "1"})
    assert meta["cache_hit"] is True and np.array_equal(y, results[0][0])


def _make_unwritable(kind, tmp_path):
    if kind == "a-regular-file":
        p = tmp_path / "cache-file"
        p.write_text("not a directory")
        return p
    if kind == "under-a-regular-file":
        (tmp_path / "blocker").write_text("not a directory")
        return tmp_path / "blocker" / "cache"
    d = tmp_path / "readonly-cache"
    d.mkdir()
    d.chmod(0o500)
    if os.access(d, os.W_OK):                   # root ignores permissions
        d.chmod(0o700)
        pytest.skip("running as a user who can write to a read-only directory")
    return d


@pytest.mark.parametrize("kind", ["a-regular-file", "under-a-regular-file", "read-only-dir"])
def test_an_unwritable_cache_dir_does_not_break_compilation(kind, kernel_module, monkeypatch,
                                                            tmp_path, compiles, rng):
    d = _make_unwritable(kind, tmp_path)
    monkeypatch.setenv("MUTILE_CACHE_DIR", str(d))
    try:
        mod = kernel_module(source()).load()
        x = rng.standard_normal(300).astype(np.float32)
        y, k = launch(mod, x)
        check(y, x)
        mod.kern.cache.clear()
        y, k = launch(mod, x)
        assert k.metadata["cache_hit"] is False and len(compiles) == 2
        check(y, x)
    finally:
        if d.exists() and d.is_dir():
            d.chmod(0o700)


# ---------------------------------------------------------------- the compiler's own hash
@pytest.fixture
def compiler_copy(tmp_path, monkeypatch):
    """A copy of mutile's sources, backends and grammar; ``compiler_hash`` is computed on
    the copy for the duration of the test (the real sources are never touched)."""
    import mutile.backends
    import mutile.grammar
    copy = tmp_path / "compiler"
    cache.compiler_hash.cache_clear()
    roots = {"installed-hash": cache.compiler_hash()}
    for name, mod in (("mutile", mutile), ("backends", mutile.backends),
                      ("grammar", mutile.grammar)):
        src = Path(mod.__file__).parent
        dst = copy / name
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        monkeypatch.setattr(mod, "__file__", str(dst / Path(mod.__file__).name))
        roots[name] = dst
    cache.compiler_hash.cache_clear()
    yield roots
    cache.compiler_hash.cache_clear()


def _rehash() -> str:
    cache.compiler_hash.cache_clear()
    return cache.compiler_hash()


def test_compiler_hash_depends_on_the_sources_content_only(compiler_copy):
    assert Path(mutile.__file__).is_relative_to(compiler_copy["mutile"])
    copied = _rehash()
    assert copied == compiler_copy["installed-hash"], "the hash depends on where the files are"
    # bytecode and unrelated files do not count
    pyc = compiler_copy["backends"] / "__pycache__" / "lower.cpython-311.pyc"
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(b"\x00" * 64)
    (compiler_copy["mutile"] / "notes.txt").write_text("hello")
    assert _rehash() == copied


@pytest.mark.parametrize("edit", ["frontend-source", "backend-source", "grammar", "new-module"])
def test_compiler_hash_changes_when_a_compiler_file_changes(edit, compiler_copy):
    before = _rehash()
    if edit == "frontend-source":
        p = compiler_copy["mutile"] / "frontend" / "codegen.py"
        p.write_text(p.read_text() + "\n# an edit\n")
    elif edit == "backend-source":
        p = compiler_copy["backends"] / "llvm" / "lower.py"
        p.write_text(p.read_text().replace("def ", "def  ", 1))
    elif edit == "grammar":
        p = compiler_copy["grammar"] / "tile_ir.lark"
        p.write_text(p.read_text() + "\n// an edit\n")
    else:
        (compiler_copy["mutile"] / "passes" / "extra_pass.py").write_text("X = 1\n")
    after = _rehash()
    assert after != before
    # and every cache key changes with it
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cache, "compiler_hash", lambda: before)
        k_before = cache.make_key("kernel", "m", "f")
        mp.setattr(cache, "compiler_hash", lambda: after)
        k_after = cache.make_key("kernel", "m", "f")
    assert k_before != k_after


def test_environment_switches_change_the_key(monkeypatch):
    base = cache.make_key("kernel", "m", "f")
    for name in cache.ENV_SWITCHES:
        monkeypatch.setenv(name, "1")
        assert cache.make_key("kernel", "m", "f") != base, name
        monkeypatch.delenv(name)
    assert cache.make_key("kernel", "m", "f") == base
