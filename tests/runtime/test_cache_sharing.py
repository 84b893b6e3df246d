"""The disk cache seen from outside one process: two checkouts of the same kernel file
sharing one cache directory each name their own file, and an edited listing in
``MUTILE_OVERRIDE_DIR`` is used by the next launch of the same process."""
from __future__ import annotations

import json

import numpy as np

import mutile
import mutile.language as ml

from ..conftest import poison


# ---------------------------------------------------------------- two checkouts, one cache
CHECKOUT_KERNEL = """
import mutile
import mutile.language as ml


@mutile.jit
def shifted(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    x = ml.load(X + offs, mask=offs < n)
    ml.store(Y + offs + n, x)   # out of bounds once n > 0
"""

CHECKOUT_RUNNER = """
import json, sys
import numpy as np
import mutile
sys.path.insert(0, sys.argv[1])
import checkout_kernel as m
x = np.random.rand(16).astype(np.float32)
y = np.full(16, np.nan, np.float32)
out = {}
for backend in ("llvm", "pinghu"):
    k = m.shifted.warmup(x, y, 16, BLOCK=16, grid=(1,), backend=backend, check_bounds=True)
    out[backend + "_hit"] = k.metadata["cache_hit"]
    if backend == "pinghu":
        out["listing"] = k.asm["musa"]
    try:
        m.shifted[(1,)](x, y, 16, BLOCK=16, backend=backend, check_bounds=True)
    except mutile.DeviceFault as e:
        out[backend] = str(e)
print(json.dumps(out))
"""


def test_a_second_checkout_sharing_the_cache_names_its_own_files(tmp_path, run_script,
                                                                 cache_dir):
    """The same kernel file at two paths (two clones sharing one cache directory): each
    process's fault reports and ISA listing name the file that is running, never the
    other clone's."""
    dirs = [tmp_path / "clone_a", tmp_path / "clone_b"]
    runs = []
    for d in dirs:
        d.mkdir()
        (d / "checkout_kernel.py").write_text(CHECKOUT_KERNEL)
        r = run_script(CHECKOUT_RUNNER, d)
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    # the second clone runs again, now warm: it finds its own entries
    again = json.loads(run_script(CHECKOUT_RUNNER, dirs[1]).stdout.strip().splitlines()[-1])
    assert again["llvm_hit"] and again["pinghu_hit"]
    for d, out in zip(dirs + [dirs[1]], runs + [again]):
        mine, other = str(d / "checkout_kernel.py"), str(
            (dirs[0] if d == dirs[1] else dirs[1]) / "checkout_kernel.py")
        for key in ("llvm", "pinghu", "listing"):
            assert f"{mine}:" in out[key], f"{key} does not name {mine}:\n{out[key]}"
            assert other not in out[key], f"{key} names the other checkout:\n{out[key]}"


# ---------------------------------------------------------------- edited listings
@mutile.jit
def twice(X, Y, n, BLOCK: ml.constexpr):
    o = ml.arange(0, BLOCK)
    ml.store(Y + o, ml.load(X + o, mask=o < n) * 2.0, mask=o < n)


def test_an_edited_override_listing_is_used_by_the_next_launch(tmp_path, monkeypatch, rng):
    """Each edit of the listing in MUTILE_OVERRIDE_DIR takes effect at the next launch of
    the same process (the in-memory cache knows the listing's content)."""
    n = 100
    x = rng.standard_normal(n).astype(np.float32)
    text = twice.warmup(x, x, n, BLOCK=128, backend="pinghu", grid=(1,)).asm["musa"]
    lines = text.splitlines(keepends=True)
    [at] = [i for i, ln in enumerate(lines) if "ALU.FMUL" in ln and "2.0" in ln]
    monkeypatch.setenv("MUTILE_OVERRIDE_DIR", str(tmp_path))
    for factor in ("3.0", "5.0", "3.0"):
        edited = lines[:at] + [lines[at].replace("2.0", factor)] + lines[at + 1:]
        (tmp_path / "twice.musa").write_text("".join(edited))
        y = poison(n, np.float32)
        twice[(1,)](x, y, n, BLOCK=128, backend="pinghu")
        np.testing.assert_array_equal(y, x * np.float32(float(factor)), err_msg=factor)
