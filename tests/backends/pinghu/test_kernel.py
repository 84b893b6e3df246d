"""The pinghu backend as users see it: ``k.asm["musa"]`` annotated with Python lines,
``k.asm["musa_bin"]``, ``k.metadata``, ``mutile asm``, ``MUTILE_OVERRIDE_DIR``, register
budgets that force spills, and faults reported with the Python line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.backends.pinghu import decode, disassemble


HERE = Path(__file__).resolve()


def poison(n, dtype):
    return np.full(n, np.nan, dtype)
REPO = Path(mutile.__file__).resolve().parents[1]


@mutile.jit
def axpy(X, Y, Z, a, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = offs < n
    x = ml.load(X + offs, mask=m)
    y = ml.load(Y + offs, mask=m)
    ml.store(Z + offs, a * x + y, mask=m)


def _line(fn, text: str) -> int:
    """The line number of ``text`` in this file (inside ``fn``'s source)."""
    for i, line in enumerate(HERE.read_text().splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(text)


def _axpy(rng, n=1000, block=256, **kw):
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    z = poison(n, np.float32)
    k = axpy[(mutile.cdiv(n, block),)](x, y, z, 1.5, n, BLOCK=block, backend="pinghu", **kw)
    np.testing.assert_array_equal(z, np.float32(1.5) * x + y)   # two roundings, as in f32
    return k


def test_listing_names_python_lines(rng):
    k = axpy.warmup(np.zeros(4, np.float32), np.zeros(4, np.float32),
                    np.zeros(4, np.float32), 1.0, 4, BLOCK=256, backend="pinghu", grid=(1,))
    text = k.asm["musa"]
    line = _line(axpy, "ml.store(Z + offs, a * x + y, mask=m)")
    assert f"{HERE}:{line}  ml.store(Z + offs, a * x + y, mask=m)" in text
    assert "LSU.ST.GLOBAL.B32" in text and "LSU.LD.GLOBAL.B32" in text
    assert disassemble(decode(k.asm["musa_bin"])) == text
    meta = k.metadata
    assert 0 < meta["registers_per_thread"] <= 255
    assert meta["threads_per_block"] == 128 and meta["shared_bytes"] == 0
    assert meta["instructions_by_unit"]["LSU"] == 3
    assert sum(meta["instructions_by_unit"].values()) == meta["instructions"]


@pytest.mark.parametrize("num_warps", [1, 2, 8])
def test_num_warps(rng, num_warps):
    k = axpy.warmup(np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32),
                    1.0, 4, BLOCK=256, backend="pinghu", num_warps=num_warps, grid=(1,))
    assert k.metadata["threads_per_block"] == 32 * num_warps
    _axpy(rng, num_warps=num_warps)


@mutile.jit
def many_live(X, Y, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    a = ml.load(X + offs)
    b = a * 2.0
    c = b + a
    d = c * b
    e = d - c
    f = e * a
    ml.store(Y + offs, a + b + c + d + e + f)


@pytest.mark.parametrize("budget", [64, 255])
def test_spills_keep_results(rng, budget):
    """With a small register budget the tiles spill to local memory; results stay."""
    x = rng.standard_normal(2048).astype(np.float32)
    y = poison(2048, np.float32)
    k = many_live[(1,)](x, y, BLOCK=2048, backend="pinghu", maxnreg=budget)
    x64 = x.astype(np.float64)
    a, b = x64, x64 * 2
    c = b + a
    d = c * b
    e = d - c
    f = e * a
    np.testing.assert_allclose(y, a + b + c + d + e + f, rtol=1e-5, atol=1e-5)
    meta = many_live.warmup(x, y, BLOCK=2048, backend="pinghu", maxnreg=budget,
                            grid=(1,)).metadata
    assert meta["registers_per_thread"] <= budget
    assert (meta["local_bytes"] > 0) == (budget == 64)
    if budget == 64:
        assert "LSU.ST.LOCAL" in many_live.warmup(x, y, BLOCK=2048, backend="pinghu",
                                                  maxnreg=budget, grid=(1,)).asm["musa"]
    del k


def test_shared_limit_is_a_compile_error():
    @mutile.jit
    def big_transpose(X, Y, B: ml.constexpr):
        i = ml.arange(0, B)
        x = ml.load(X + i[:, None] * B + i[None, :])
        ml.store(Y + i[:, None] * B + i[None, :], ml.trans(x))

    x = np.zeros((256, 256), np.float32)
    with pytest.raises(mutile.CompilationError, match="shared memory") as e:
        big_transpose[(1,)](x, x.copy(), B=256, backend="pinghu")
    assert "ml.trans(x)" in str(e.value)


# ---------------------------------------------------------------- override
def test_override_dir_runs_the_edited_listing(rng, tmp_path, monkeypatch):
    """An edited listing in MUTILE_OVERRIDE_DIR replaces the generated program: here the
    multiply by ``a`` becomes a multiply by 3.0."""
    x = np.zeros(4, np.float32)
    k = axpy.warmup(x, x, x, 1.0, 4, BLOCK=256, backend="pinghu", grid=(1,))
    text = k.asm["musa"]
    fmul = [ln for ln in text.splitlines() if "ALU.FMUL.F32" in ln]
    assert len(fmul) == 1, text
    old = fmul[0]
    d, a, x = (o.strip() for o in old.split("ALU.FMUL.F32")[1].split("//")[0].split(","))
    new = old.replace(f"{d}, {a}, {x}", f"{d}, {x}, 3.0")
    assert new != old, old
    (tmp_path / "axpy.musa").write_text(text.replace(old, new))
    monkeypatch.setenv("MUTILE_OVERRIDE_DIR", str(tmp_path))
    n = 300
    xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    z = poison(n, np.float32)
    axpy[(2,)](xs, ys, z, 1.5, n, BLOCK=256, backend="pinghu")
    np.testing.assert_array_equal(z, np.float32(3.0) * xs + ys)
    k2 = axpy.warmup(xs, ys, z, 1.5, n, BLOCK=256, backend="pinghu", grid=(1,))
    assert k2.metadata["override"] == str(tmp_path / "axpy.musa")


def test_override_with_bad_assembly_is_a_compile_error(tmp_path, monkeypatch):
    (tmp_path / "axpy.musa").write_text(".kernel axpy\n        ALU.FROB R1, R2\n")
    monkeypatch.setenv("MUTILE_OVERRIDE_DIR", str(tmp_path))
    x = np.zeros(4, np.float32)
    with pytest.raises(mutile.CompilationError, match="ALU.FROB"):
        axpy[(1,)](x, x, x.copy(), 1.0, 4, BLOCK=256, backend="pinghu")


# ---------------------------------------------------------------- the CLI
def test_mutile_asm_prints_the_listing(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MUTILE_")}
    env["MUTILE_CACHE_DIR"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-m", "mutile", "asm", f"{HERE}::axpy", "--signature",
                        "*fp32,*fp32,*fp32,fp32,i32", "--const", "BLOCK=128", "--meta"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(".kernel axpy")
    assert "LSU.LD.GLOBAL.B32" in r.stdout and "// registers_per_thread:" in r.stdout
    assert "ml.store(Z + offs, a * x + y, mask=m)" in r.stdout


@pytest.mark.parametrize("num_warps", [3, 0, 64])
def test_num_warps_must_be_a_power_of_two(num_warps):
    x = np.zeros(4, np.float32)
    with pytest.raises(mutile.CompilationError, match="num_warps must be a power of two"):
        axpy[(1,)](x, x, x.copy(), 1.0, 4, BLOCK=256, backend="pinghu", num_warps=num_warps)


@mutile.jit
def row_sums(X, Y, rows, BLOCK: ml.constexpr):
    acc = ml.zeros([BLOCK], ml.float32)
    for r in range(rows):
        acc += ml.load(X + r * BLOCK + ml.arange(0, BLOCK))
    ml.store(Y + ml.arange(0, BLOCK), acc)


def test_loop_invariant_instructions_leave_the_loop(rng):
    """The element-index run (IOTA from the thread id) does not change between
    iterations: it is computed once, before the loop."""
    x = rng.standard_normal((7, 512)).astype(np.float32)
    y = poison(512, np.float32)
    row_sums[(1,)](x, y, 7, BLOCK=512, backend="pinghu")
    np.testing.assert_allclose(y, x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    text = row_sums.warmup(x, y, 7, BLOCK=512, backend="pinghu", grid=(1,)).asm["musa"]
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("L_for"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("L_end"))
    assert any("ALU.IOTA" in ln for ln in lines[:head])
    assert not any("ALU.IOTA" in ln for ln in lines[head:end]), "\n".join(lines[head:end])


# ---------------------------------------------------------------- launch limits
def test_grids_past_pinghus_limits_are_launch_errors():
    """x <= 2**31 - 1, y and z <= 65535 (backends/pinghu/machine/device.py). Run in a subprocess:
    a grid that slipped through would run (nearly) forever."""
    code = f"""
import importlib.util, numpy as np, mutile
spec = importlib.util.spec_from_file_location("kernels", {str(HERE)!r})
k = importlib.util.module_from_spec(spec); spec.loader.exec_module(k)
x = np.random.default_rng(1).standard_normal(8).astype(np.float32)
z = np.full(8, np.nan, np.float32)
for grid in [(2**31, 1, 1), (2**40, 1, 1), (1, 65536, 1), (1, 1, 65536)]:
    try:
        k.axpy[grid](x, x, z, 1.5, 8, BLOCK=256, backend="pinghu")
        print("RAN", grid)
    except mutile.LaunchError as e:
        print("LAUNCH", e)
k.axpy[(1, 1, 1)](x, x, z, 1.5, 8, BLOCK=256, backend="pinghu")
print("OK", bool((z == np.float32(1.5) * x + x).all()))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == ("LAUNCH kernel 'axpy': grid (2147483648, 1, 1): 2147483648 blocks along "
                      "x exceed Pinghu's limit of 2147483647 (x <= 2147483647, y and z <= "
                      "65535)"), r.stdout
    assert out[1].startswith("LAUNCH kernel 'axpy': grid (1099511627776, 1, 1)")
    assert "blocks along y exceed Pinghu's limit of 65535" in out[2]
    assert "blocks along z exceed Pinghu's limit of 65535" in out[3]
    assert out[4] == "OK True"


# ---------------------------------------------------------------- predicates
@mutile.jit
def huge_masked(X, Y, n, B: ml.constexpr):
    offs = ml.arange(0, B)
    m = offs < n
    x = ml.load(X + offs, mask=m, other=0.0)  # HUGE MASK
    ml.store(Y + offs, x + 1.0, mask=m)


def test_a_mask_with_more_elements_than_predicates_names_its_line():
    """2**20 elements on 128 threads are 8192 predicates per thread (the machine has 255):
    the error is at the op whose mask needs them, not at the ``def``."""
    x = np.zeros(2**20, np.float32)
    with pytest.raises(mutile.CompilationError) as ei:
        huge_masked.warmup(x, x, 5, B=2**20, backend="pinghu", grid=(1,))
    e = ei.value
    assert e.loc.line == _line(huge_masked, "# HUGE MASK") and e.loc.file == str(HERE)
    assert "this mask needs 8192 predicates per thread and the machine has 255" in str(e)
    assert "x = ml.load(X + offs, mask=m, other=0.0)" in str(e)
