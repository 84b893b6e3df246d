"""The tuner's disk cache: a config added to the list is the only one measured; editing the
kernel (or a callee in another file) re-tunes; a corrupt entry is ignored; a config's
pre-hook does not turn caching off; two processes tuning at once agree and leave readable
entries; wall-time tuning (llvm) is cached only when asked."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

import mutile
from mutile import Config
from mutile.autotune import config as C

from ..conftest import poison
from .conftest import block_grid, write

KERNEL = """
import mutile
import mutile.language as ml


@mutile.jit
def scale(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    ml.store(Y + offs, ml.load(X + offs, mask=offs < n) * {factor}, mask=offs < n)
"""


def _tune(jitfn, blocks, x, factor, backend="pinghu", **kw):
    k = mutile.autotune(configs=[Config({"BLOCK": b}) for b in blocks], key=["n"],
                        warmup=1, rep=2, **kw)(jitfn)
    y = poison(x.shape, x.dtype)
    k[block_grid(x.size)](x, y, x.size, backend=backend)
    np.testing.assert_allclose(y, x.astype(np.float64) * factor, rtol=1e-6)
    return k.tuning_log[-1]


def _blocks(d, names):
    return sorted(d.configs[i].kwargs["BLOCK"] for i in names)


def test_an_added_config_is_the_only_one_measured(kernel_module, rng):
    _, load = kernel_module(KERNEL.format(factor=2.0))
    m = load()
    x = rng.standard_normal(200).astype(np.float32)
    first = _tune(m.scale, (16, 32), x, 2.0)
    assert _blocks(first, first.measured) == [16, 32] and first.cached == []
    second = _tune(m.scale, (16, 32, 64), x, 2.0)
    assert _blocks(second, second.measured) == [64]
    assert _blocks(second, second.cached) == [16, 32]
    for i in first.timings:                          # the cached times are the measured ones
        assert second.timings[i] == first.timings[i]
    third = _tune(m.scale, (16, 32, 64), x, 2.0)     # the decision itself is cached
    assert third.source == "disk cache" and third.measured == []
    assert C.identity(third.winner) == C.identity(second.winner)


def test_editing_the_kernel_or_a_callee_re_tunes(kernel_module, rng):
    path, load = kernel_module(KERNEL.format(factor=2.0))
    x = rng.standard_normal(100).astype(np.float32)
    _tune(load().scale, (16, 32), x, 2.0)
    write(path, KERNEL.format(factor=3.0))
    d = _tune(load().scale, (16, 32), x, 3.0)
    assert _blocks(d, d.measured) == [16, 32] and d.cached == []

    cpath, cload = kernel_module("""
        import mutile
        @mutile.jit
        def twice(v):
            return v * 2.0
        """)
    callee = cload()
    _, load2 = kernel_module(f"""
        import mutile
        import mutile.language as ml
        from {callee.__name__} import twice
        @mutile.jit
        def scale(X, Y, n, BLOCK: ml.constexpr):
            offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
            ml.store(Y + offs, twice(ml.load(X + offs, mask=offs < n)), mask=offs < n)
        """)
    m2 = load2()
    d = _tune(m2.scale, (16, 32), x, 2.0)
    assert d.cached == [] and _tune(m2.scale, (16, 32), x, 2.0).source == "disk cache"
    write(cpath, textwrap.dedent("""
        import mutile
        @mutile.jit
        def twice(v):
            return v * 2.0 + 0.0
        """))
    cload()
    d = _tune(m2.scale, (16, 32), x, 2.0)
    assert _blocks(d, d.measured) == [16, 32]


def test_a_corrupt_entry_is_ignored(kernel_module, rng, cache_dir):
    _, load = kernel_module(KERNEL.format(factor=2.0))
    m = load()
    x = rng.standard_normal(64).astype(np.float32)
    first = _tune(m.scale, (16, 32), x, 2.0)
    entries = [p for p in cache_dir.rglob("*.bin")]
    assert entries
    for p in entries:                                    # every entry, truncated or garbled
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2] if len(data) % 2 else data[:-1] + b"x")
    d = _tune(m.scale, (16, 32), x, 2.0)
    assert sorted(d.measured) == sorted(first.measured) and d.cached == []


def hook(nargs):
    nargs["Y"][...] = np.nan          # a pre-hook that poisons the output before each run


def test_a_config_pre_hook_keeps_the_cache(kernel_module, rng):
    _, load = kernel_module(KERNEL.format(factor=2.0))
    m = load()
    x = rng.standard_normal(64).astype(np.float32)

    def tune():
        k = mutile.autotune(configs=[Config({"BLOCK": 16}, pre_hook=hook),
                                     Config({"BLOCK": 32})], key=["n"])(m.scale)
        y = poison(x.shape, x.dtype)
        k[block_grid(64)](x, y, 64, backend="pinghu")
        np.testing.assert_allclose(y, x * 2.0)
        return k.tuning_log[-1]

    assert len(tune().measured) == 2
    d = tune()
    assert d.measured == [] and d.source == "disk cache"
    assert sum(f"pre_hook={__name__}:hook" in i for i in d.configs) == 1


def test_wall_times_are_cached_only_when_asked(kernel_module, rng):
    _, load = kernel_module(KERNEL.format(factor=2.0))
    m = load()
    x = rng.standard_normal(64).astype(np.float32)
    _tune(m.scale, (16, 32), x, 2.0, backend="llvm")
    assert len(_tune(m.scale, (16, 32), x, 2.0, backend="llvm").measured) == 2
    _tune(m.scale, (16, 32), x, 2.0, backend="llvm", cache_results=True)
    d = _tune(m.scale, (16, 32), x, 2.0, backend="llvm", cache_results=True)
    assert d.source == "disk cache"


SCRIPT = """
import sys
import numpy as np
import mutile
sys.path.insert(0, {dir!r})
import {mod} as m
x = np.random.default_rng(int(sys.argv[1])).standard_normal(300).astype(np.float32)
k = mutile.autotune(configs=[mutile.Config({{"BLOCK": b}}, num_warps=w)
                             for b in (16, 32, 64) for w in (2, 4)], key=["n"])(m.scale)
y = np.full_like(x, np.nan)
k[lambda meta: (mutile.cdiv(300, meta["BLOCK"]),)](x, y, 300, backend="pinghu")
assert np.allclose(y, x.astype(np.float64) * 2.0)
d = k.tuning_log[-1]
print(k.best_config.kwargs["BLOCK"], k.best_config.num_warps, len(d.measured), len(d.cached))
"""


def test_two_processes_tuning_at_once(kernel_module, tmp_path, cache_dir):
    path, load = kernel_module(KERNEL.format(factor=2.0))
    script = tmp_path / "tune_two.py"
    script.write_text(SCRIPT.format(dir=str(path.parent), mod=path.stem))
    env = dict(os.environ, MUTILE_CACHE_DIR=str(cache_dir), MUTILE_TUNE_WORKERS="1")
    procs = [subprocess.Popen([sys.executable, str(script), str(s)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for s in (1, 2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(out.split())
    assert outs[0][:2] == outs[1][:2]                   # the same winner
    assert all(int(o[2]) + int(o[3]) == 6 for o in outs)
    r = subprocess.run([sys.executable, str(script), "3"], env=env, text=True,
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == outs[0][:2] + ["0", "6"]  # every entry readable
