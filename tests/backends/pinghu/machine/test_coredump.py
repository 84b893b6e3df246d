"""The GPU core dump of a faulting pinghu launch (backends/pinghu/machine/coredump.py):
``DeviceFault.coredump`` names the faulting block, warp, lanes and pc with its ISA and
Python lines, holds that warp's registers and predicates, its block's shared memory and
barriers, every resident warp's state and the listing; every value is JSON or numpy."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph

HERE = Path(__file__).resolve()
KEYS = {"backend", "kernel", "message", "source", "grid", "block_dim", "warps_per_block",
        "wave", "retired", "warps", "faulting", "shared", "barriers", "program"}


def line_of(tag: str) -> int:
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {tag}"):
            return n
    raise AssertionError(tag)


def check_plain(v, path="coredump"):
    """Every value is JSON (str, int, float, bool, None, list, dict) or a numpy array."""
    if isinstance(v, dict):
        for k, x in v.items():
            assert isinstance(k, str), path
            check_plain(x, f"{path}[{k!r}]")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            check_plain(x, f"{path}[{i}]")
    else:
        assert v is None or isinstance(v, (str, int, float, bool, np.ndarray)), \
            f"{path}: {type(v).__name__}"


def check_common(cd: dict, err, kernel: str, grid, warps_per_block: int, regs: int):
    check_plain(cd)
    assert KEYS <= set(cd)
    assert cd["backend"] == "pinghu" and cd["kernel"] == kernel
    assert cd["message"] == str(err)
    assert cd["grid"] == list(grid) and cd["warps_per_block"] == warps_per_block
    assert cd["block_dim"] == [32 * warps_per_block, 1, 1]
    f = cd["faulting"]
    assert f["registers"].dtype == np.uint32 and f["registers"].shape == (regs, 32)
    assert f["predicates"].dtype == bool and f["predicates"].shape[1] == 32
    assert cd["shared"].dtype == np.uint8
    assert cd["program"].startswith(f".kernel {kernel}\n")
    assert len(cd["warps"]) == cd["wave"]["blocks"] * warps_per_block
    for w in cd["warps"]:
        assert set(w) >= {"block", "warp", "pc", "state", "where"}
        assert w["state"] in ("running", "barrier", "async_barrier", "done")
    return f


def regs_of(k) -> int:
    return int(next(ln for ln in k.asm["musa"].splitlines() if ln.startswith(".regs"))
               .split()[1])


# ---------------------------------------------------------------- out of bounds
@mutile.jit
def shifted_double(X, Y, n, shift, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs, mask=offs < n)
    ml.store(Y + offs + shift, x * 2.0, mask=offs < n)  # OOB


def test_an_out_of_bounds_store_dumps_the_faulting_lane(rng):
    n, block = 1000, 256
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    with pytest.raises(mutile.DeviceFault, match="out-of-bounds global store") as ei:
        shifted_double[(4,)](x, y, n, 3, BLOCK=block, backend="pinghu")
    e = ei.value
    k = shifted_double.warmup(x, y, n, 3, BLOCK=block, backend="pinghu", grid=(4,))
    f = check_common(e.coredump, e, "shifted_double", (4, 1, 1), 4, regs_of(k))
    assert f["block"] == list(e.program) == [3, 0, 0]
    assert (f["warp"], f["lanes"], f["pc"]) == (e.warp, [e.lane], e.pc)
    assert "LSU.ST.GLOBAL" in f["where"] and f"{HERE}:{line_of('OOB')}" in f["where"]
    assert e.coredump["source"] == f"{HERE}:{line_of('OOB')}"
    # the faulting thread holds x * 2 for its elements; element 997 + 3 is past the end
    t = 32 * e.warp + e.lane
    held = 768 + np.arange(2 * t, 2 * t + 2)
    assert 997 in held
    for i in held:
        assert (np.float32(2 * x[i]).view(np.uint32) == f["registers"][:, e.lane]).any()
    mine = [w for w in e.coredump["warps"] if w["block"] == [3, 0, 0] and w["warp"] == e.warp]
    assert mine[0]["state"] == "running" and mine[0]["pc"] == e.pc


# ---------------------------------------------------------------- barrier deadlock
@mutile.jit
def transpose(X, Y, B: ml.constexpr):
    i = ml.arange(0, B)
    x = ml.load(X + i[:, None] * B + i[None, :])
    y = ml.trans(x)  # TRANS
    ml.store(Y + i[:, None] * B + i[None, :], y)


def _deadlocked_listing(B: int) -> str:
    """transpose with the BAR.SYNC after its shared store split: warp 0 waits at
    barrier 0, the others at 1."""
    x = np.zeros((B, B), np.float32)
    lines = transpose.warmup(x, x, B=B, backend="pinghu", grid=(1,)).asm["musa"].splitlines()
    tag = f":{line_of('TRANS')}  "
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("//") and tag in ln)
    st = next(i for i in range(start, len(lines)) if "LSU.ST.SHARED" in lines[i])
    k = next(i for i in range(st, len(lines)) if lines[i].strip() == "BAR.SYNC 0")
    regs = int(next(ln for ln in lines if ln.startswith(".regs")).split()[1])
    lines[k:k + 1] = [f"        S2R R{regs}, SR_WARPID",
                      f"        ALU.ISETP.EQ.U32 P200, R{regs}, 0",
                      "        @P200 BRA L_warp0", "        BAR.SYNC 1", "        BRA L_joined",
                      "L_warp0:", "        BAR.SYNC 0", "L_joined:"]
    return "\n".join(lines).replace(f".regs {regs}\n", f".regs {regs + 1}\n") + "\n"


def test_a_deadlock_dumps_the_barriers_and_the_shared_memory(rng, tmp_path, monkeypatch):
    B = 16
    (tmp_path / "transpose.musa").write_text(_deadlocked_listing(B))
    monkeypatch.setenv("MUTILE_OVERRIDE_DIR", str(tmp_path))
    x = rng.standard_normal((B, B)).astype(np.float32)
    y = np.full_like(x, np.nan)
    with pytest.raises(mutile.DeviceFault, match="deadlock") as ei:
        transpose[(2,)](x, y, B=B, backend="pinghu")
    e = ei.value
    cd = e.coredump
    listing = (tmp_path / "transpose.musa").read_text()
    f = check_common(cd, e, "transpose", (2, 1, 1), 4, regs_of_text(listing))
    assert f["block"] == [0, 0, 0] and f["warp"] == 0 and f["lanes"] == list(range(32))
    assert "BAR.SYNC 0" in f["where"] and f"{HERE}:{line_of('TRANS')}" in f["where"]
    states = {(tuple(w["block"]), w["warp"]): (w["state"], w.get("barrier"))
              for w in cd["warps"]}
    for b in ((0, 0, 0), (1, 0, 0)):
        assert states[(b, 0)] == ("barrier", 0)
        assert [states[(b, w)] for w in (1, 2, 3)] == [("barrier", 1)] * 3
    assert [d for d in cd["barriers"] if d["kind"] == "sync"] == [
        {"kind": "sync", "id": 0, "count": None, "waiting": [0]},
        {"kind": "sync", "id": 1, "count": None, "waiting": [1, 2, 3]}]
    # before its barrier the transpose stored its tile, row-major, into shared memory
    staged = cd["shared"][:B * B * 4].view(np.float32).reshape(B, B)
    np.testing.assert_array_equal(staged, x)
    assert cd["program"] == listing


def regs_of_text(listing: str) -> int:
    return int(next(ln for ln in listing.splitlines() if ln.startswith(".regs")).split()[1])


@mutile.jit
def waits_for_bytes(X, Y):
    bar = ph.alloc_barrier(4)
    ph.barrier_expect_tx(bar, 256)      # one warp arrives, announcing 256 bytes
    ph.barrier_wait(bar, 0)  # WAIT
    ml.store(Y, ml.load(X))


def test_an_async_barrier_deadlock_dumps_the_barrier_state():
    x = np.ones(1, np.float32)
    y = np.full(1, np.nan, np.float32)
    with pytest.raises(mutile.DeviceFault, match="deadlock") as ei:
        waits_for_bytes[(1,)](x, y, backend="pinghu")
    e = ei.value
    cd = e.coredump
    k = waits_for_bytes.warmup(x, y, backend="pinghu", grid=(1,))
    f = check_common(cd, e, "waits_for_bytes", (1, 1, 1), 4, regs_of(k))
    assert f["warp"] == 0 and "ASYNC.BAR.WAIT" in f["where"]
    assert f"{HERE}:{line_of('WAIT')}" in f["where"]
    assert [w["state"] for w in cd["warps"]] == ["async_barrier"] * 4
    (bar,) = [d for d in cd["barriers"] if d["kind"] == "async"]
    assert {k: bar[k] for k in ("expected", "arrived", "phase", "pending_tx", "waiting")} == \
        {"expected": 4, "arrived": 1, "phase": 0, "pending_tx": 256, "waiting": [0, 1, 2, 3]}
    assert np.isnan(y[0])


# ---------------------------------------------------------------- no progress
@mutile.jit
def spin_on(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    ml.store(Y + ml.program_id(0) * BLOCK + offs, ml.load(X + offs) + 1.0)
    v = ml.load(X)
    while v < n:  # SPIN
        v = ml.load(X)
    ml.store(Y, v)


def test_no_progress_dumps_the_looping_warps(rng):
    x = (rng.random(128) + 0.5).astype(np.float32)
    y = np.full(256, np.nan, np.float32)
    with pytest.raises(mutile.DeviceFault, match="no progress") as ei:
        spin_on[(2,)](x, y, 100.0, BLOCK=128, backend="pinghu")
    e = ei.value
    cd = e.coredump
    k = spin_on.warmup(x, y, 100.0, BLOCK=128, backend="pinghu", grid=(2,))
    f = check_common(cd, e, "spin_on", (2, 1, 1), 4, regs_of(k))
    assert f["block"] == [0, 0, 0] and f["warp"] == 0 and f["lanes"] == list(range(32))
    assert f"{HERE}:{line_of('SPIN')}" in f["where"] or f"{HERE}:{line_of('SPIN') + 1}" \
        in f["where"]
    assert all(w["state"] == "running" for w in cd["warps"])
    # the stores before the loop landed; the thread's loaded flag is in its registers
    np.testing.assert_array_equal(y, np.tile(x + np.float32(1.0), 2))
    assert (f["registers"][:, 0] == x[:1].view(np.uint32)[0]).any()
