"""Faults reported like a GPU core dump, with the Python line: the bugs the ISA issue
names that a Python kernel cannot make by itself (an uninitialized shared read, a barrier
deadlock) are planted in the listing of a real kernel through ``MUTILE_OVERRIDE_DIR``, the
way a user edits ISA. (Off-by-one stores, wrong strides and negative offsets are in
tests/runtime/test_bounds.py, on both backends.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mutile
import mutile.language as ml

HERE = Path(__file__).resolve()


@mutile.jit
def transpose(X, Y, B: ml.constexpr):
    i = ml.arange(0, B)
    x = ml.load(X + i[:, None] * B + i[None, :])
    y = ml.trans(x)  # TRANS
    ml.store(Y + i[:, None] * B + i[None, :], y)


def _line(tag: str) -> int:
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {tag}"):
            return n
    raise AssertionError(tag)


def _listing(B=16) -> str:
    x = np.zeros((B, B), np.float32)
    return transpose.warmup(x, x, B=B, backend="pinghu", grid=(1,)).asm["musa"]


def _section(text: str, tag: str) -> tuple[int, int]:
    """Line indices [start, end) of the listing's code under the ``# tag`` source line."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("//")
                 and f":{_line(tag)}  " in ln)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("//")),
               len(lines))
    return start, end


def _run_edited(text, tmp_path, monkeypatch, **kw):
    (tmp_path / "transpose.musa").write_text(text)
    monkeypatch.setenv("MUTILE_OVERRIDE_DIR", str(tmp_path))
    B = 16
    x = np.arange(B * B, dtype=np.float32).reshape(B, B)
    y = np.full_like(x, np.nan)
    transpose[(2,)](x, y, B=B, backend="pinghu", **kw)
    return x, y


def test_the_unedited_listing_runs(tmp_path, monkeypatch):
    x, y = _run_edited(_listing(), tmp_path, monkeypatch, sanitize=True)
    np.testing.assert_array_equal(y, x.T)


def test_uninitialized_shared_read_is_reported(tmp_path, monkeypatch):
    """Drop the transpose's store into shared memory: its load reads bytes nobody wrote."""
    text = _listing()
    lines = text.splitlines()
    s, e = _section(text, "TRANS")
    stores = [i for i in range(s, e) if "LSU.ST.SHARED" in lines[i]]
    assert stores, text
    del lines[stores[0]]
    with pytest.raises(mutile.DeviceFault) as ei:
        _run_edited("\n".join(lines) + "\n", tmp_path, monkeypatch, sanitize=True)
    msg = str(ei.value)
    assert "uninitialized shared memory read" in msg
    assert f"{HERE}:{_line('TRANS')}" in msg and "y = ml.trans(x)" in msg
    assert "LSU.LD.SHARED" in msg and "block (0, 0, 0)" in msg


def test_uninitialized_shared_read_passes_silently_without_the_sanitizer(tmp_path,
                                                                        monkeypatch):
    text = _listing()
    lines = text.splitlines()
    s, e = _section(text, "TRANS")
    del lines[next(i for i in range(s, e) if "LSU.ST.SHARED" in lines[i])]
    _run_edited("\n".join(lines) + "\n", tmp_path, monkeypatch)        # no fault


def test_barrier_deadlock_is_reported(tmp_path, monkeypatch):
    """Warp 0 waits on barrier 0 while the other warps wait on barrier 1: nothing can
    run, and the report names the barrier's Python line instead of hanging."""
    text = _listing()
    lines = text.splitlines()
    s, e = _section(text, "TRANS")
    k = next(i for i in range(s, e) if lines[i].strip() == "BAR.SYNC 0")
    regs = int(next(ln for ln in lines if ln.startswith(".regs")).split()[1])
    lines[k:k + 1] = [
        "        S2R R{0}, SR_WARPID".format(regs),
        "        ALU.ISETP.EQ.U32 P200, R{0}, 0".format(regs),
        "        @P200 BRA L_warp0",
        "        BAR.SYNC 1",
        "        BRA L_joined",
        "L_warp0:",
        "        BAR.SYNC 0",
        "L_joined:",
    ]
    text = "\n".join(lines) + "\n"
    text = text.replace(f".regs {regs}\n", f".regs {regs + 1}\n")
    with pytest.raises(mutile.DeviceFault) as ei:
        _run_edited(text, tmp_path, monkeypatch)
    msg = str(ei.value)
    assert "deadlock" in msg
    assert f"{HERE}:{_line('TRANS')}" in msg and "y = ml.trans(x)" in msg
    assert "BAR.SYNC 1" in msg and "BAR.SYNC 0" in msg


@mutile.jit
def spin(X, n):
    v = ml.load(X)
    while v < n:  # SPIN
        v = v * 1
    ml.store(X, v)


def test_a_kernel_that_never_finishes_is_reported():
    """No warp is blocked, so it is no deadlock: its state repeats, so it is reported as
    making no progress (tests/backends/pinghu/machine/test_progress.py has the rest)."""
    x = np.zeros(1, np.float32)
    with pytest.raises(mutile.DeviceFault, match="no progress: the machine returns to the "
                       "same state") as ei:
        spin[(1,)](x, 1.0, backend="pinghu")
    assert f"{HERE}:{_line('SPIN')}" in str(ei.value)
    assert ei.value.coredump["faulting"]["pc"] == ei.value.coredump["warps"][0]["pc"]
    x[0] = 3.0
    spin[(1,)](x, 1.0, backend="pinghu")            # a finishing launch is untouched
    assert x[0] == 3.0


# ---------------------------------------------------------------- edited listings
def test_sync_with_an_empty_reconvergence_stack_is_a_fault(tmp_path, monkeypatch):
    """A SYNC outside every SSY region has no point to wait at: its lanes would vanish
    (and the block finish with the tile unwritten)."""
    text = _listing()
    lines = text.splitlines()
    s, _ = _section(text, "TRANS")
    lines.insert(s + 1, "        SYNC")
    with pytest.raises(mutile.DeviceFault, match="SYNC with an empty reconvergence stack") \
            as ei:
        _run_edited("\n".join(lines) + "\n", tmp_path, monkeypatch)
    e = ei.value
    msg = str(e)
    assert f"{HERE}:{_line('TRANS')}" in msg and "y = ml.trans(x)" in msg
    assert f"pc {e.pc}: SYNC" in msg and "block (0, 0, 0), warp 0, lane 0" in msg
    assert e.coredump["faulting"]["pc"] == e.pc and "SYNC" in e.coredump["faulting"]["where"]


def test_r255_is_not_rz_in_a_listing(tmp_path, monkeypatch):
    """R0 .. R254 exist and RZ reads zero: R255 is neither, whatever its number."""
    text = _listing()
    lines = text.splitlines()
    s, e = _section(text, "TRANS")
    k = next(i for i in range(s, e) if "LSU.ST.SHARED" in lines[i])
    lines[k] = lines[k].rsplit(",", 1)[0] + ", R255"
    with pytest.raises(mutile.CompilationError) as ei:
        _run_edited("\n".join(lines) + "\n", tmp_path, monkeypatch)
    msg = str(ei.value)
    assert f"transpose.musa:{k + 1}:" in msg
    assert "register R255 does not exist (R0 .. R254, RZ)" in msg and "LSU.ST.SHARED" in msg


def test_a_non_utf8_byte_in_a_comment_is_tolerated(tmp_path, monkeypatch):
    raw = _listing().encode().replace(b"y = ml.trans(x)", b"y = ml.trans(x) \xff\xfe", 1)
    (tmp_path / "transpose.musa").write_bytes(raw)
    monkeypatch.setenv("MUTILE_OVERRIDE_DIR", str(tmp_path))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 16)).astype(np.float32)
    y = np.full_like(x, np.nan)
    transpose[(2,)](x, y, B=16, backend="pinghu")
    np.testing.assert_array_equal(y, x.T)


def test_a_non_utf8_byte_in_code_names_its_line(tmp_path, monkeypatch):
    text = _listing()
    k = next(i for i, ln in enumerate(text.splitlines()) if "LSU.ST.SHARED" in ln)
    raw = text.encode().replace(b"LSU.ST.SHARED", b"LSU.ST.\xffSHARED", 1)
    (tmp_path / "transpose.musa").write_bytes(raw)
    monkeypatch.setenv("MUTILE_OVERRIDE_DIR", str(tmp_path))
    x = np.zeros((16, 16), np.float32)
    with pytest.raises(mutile.CompilationError) as ei:
        transpose[(2,)](x, x.copy(), B=16, backend="pinghu")
    msg = str(ei.value)
    assert f"transpose.musa:{k + 1}:" in msg and "byte 0xff is not UTF-8 text" in msg
