"""The async sanitizer (``sanitize=True``) on kernels written with ``mutile.language.pinghu``:
each planted protocol bug is reported as a DeviceFault naming the Python lines of both
sides; a planted deadlock is reported, not hung. The same bugs at the ISA level are in
tests/backends/pinghu/machine/test_async_sanitizer.py."""
import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph

BF16 = ml_dtypes.bfloat16


def _line(fn, marker: str) -> str:
    """The source text of the line of ``fn`` ending in ``# <marker>`` (without it)."""
    import inspect
    for ln in inspect.getsource(fn.fn).splitlines():
        if ln.rstrip().endswith(f"# {marker}"):
            return ln.split("#")[0].strip()
    raise AssertionError(marker)


@mutile.jit
def read_before_wait(a_desc, out, WAIT: ml.constexpr):
    a_s = ph.alloc_shared((64, 64), ml.bfloat16)
    bar = ph.alloc_barrier(1)
    ph.barrier_expect_tx(bar, 64 * 64 * 2)
    ph.tme_load(a_desc, [0, 0], a_s, bar)  # COPY
    if WAIT:
        ph.barrier_wait(bar, 0)
    t = a_s.load()  # READ
    r = ml.arange(0, 64)
    ml.store(out + r[:, None] * 64 + r[None, :], t)


@mutile.jit
def overwrite_while_sqmma(a_desc, b_desc, out, WAIT_FIRST: ml.constexpr):
    a_s = ph.alloc_shared((64, 64), ml.bfloat16)
    b_s = ph.alloc_shared((64, 64), ml.bfloat16)
    bar = ph.alloc_barrier(1)
    ph.barrier_expect_tx(bar, 2 * 64 * 64 * 2)
    ph.tme_load(a_desc, [0, 0], a_s, bar)
    ph.tme_load(b_desc, [0, 0], b_s, bar)
    ph.barrier_wait(bar, 0)
    acc = ph.sqmma(a_s, b_s)  # MMA
    if WAIT_FIRST:
        acc = ph.sqmma_wait(acc)
    a_s.store(ml.zeros((64, 64), ml.bfloat16))  # OVERWRITE
    acc = ph.sqmma_wait(acc)
    r = ml.arange(0, 64)
    ml.store(out + r[:, None] * 64 + r[None, :], acc)


@mutile.jit
def expect_tx_mismatch(a_desc, out, NBYTES: ml.constexpr):
    a_s = ph.alloc_shared((64, 64), ml.bfloat16)
    bar = ph.alloc_barrier(1)
    ph.barrier_expect_tx(bar, NBYTES)  # EXPECT
    ph.tme_load(a_desc, [0, 0], a_s, bar)  # COPY
    ph.barrier_wait(bar, 0)  # WAIT
    t = a_s.load()
    r = ml.arange(0, 64)
    ml.store(out + r[:, None] * 64 + r[None, :], t)


@mutile.jit
def wrong_phase(a_desc, out, N: ml.constexpr, PHASE_BUG: ml.constexpr):
    a_s = ph.alloc_shared((64, 64), ml.bfloat16)
    bar = ph.alloc_barrier(1)
    acc = ml.zeros((64, 64), ml.float32)
    for k in range(N):
        ph.barrier_expect_tx(bar, 64 * 64 * 2)
        ph.tme_load(a_desc, [0, k * 64], a_s, bar)
        if PHASE_BUG:
            ph.barrier_wait(bar, 0)  # WAIT-BUG
        else:
            ph.barrier_wait(bar, k & 1)
        acc += a_s.load().to(ml.float32)
        ph.sync_warps()
    r = ml.arange(0, 64)
    ml.store(out + r[:, None] * 64 + r[None, :], acc)


@mutile.jit
def over_arrival(out, WARPS: ml.constexpr):
    bar = ph.alloc_barrier(WARPS)  # INIT
    p = ph.barrier_arrive(bar)  # ARRIVE
    ph.barrier_wait(bar, 0)
    ml.store(out + ml.arange(0, 1), p)


@mutile.jit
def never_completes(out):
    bar = ph.alloc_barrier(1)
    ph.barrier_wait(bar, 0)  # STUCK
    ml.store(out + ml.arange(0, 1), 1)


def _desc(rng, cols=64):
    a = rng.uniform(-1, 1, (64, cols)).astype(BF16)
    return a, mutile.TensorDescriptor(a, [64, 64])


def _out(dtype=np.float32, n=64 * 64):
    return np.full(n, np.nan, dtype) if np.dtype(dtype).kind == "f" else np.zeros(n, dtype)


def test_read_before_the_copy_is_waited_for(rng):
    a, d = _desc(rng)
    out = _out(BF16)
    read_before_wait[(1,)](d, out, WAIT=True, backend="pinghu", sanitize=True)
    np.testing.assert_array_equal(out.reshape(64, 64), a)
    with pytest.raises(mutile.DeviceFault) as e:
        read_before_wait[(1,)](d, _out(BF16), WAIT=False, backend="pinghu", sanitize=True)
    msg = str(e.value)
    assert "has not been waited for" in msg
    assert _line(read_before_wait, "READ") in msg and _line(read_before_wait, "COPY") in msg


def test_overwrite_while_an_sqmma_reads(rng):
    a, da = _desc(rng)
    b, db = _desc(rng)
    out = _out()
    overwrite_while_sqmma[(1,)](da, db, out, WAIT_FIRST=True, backend="pinghu", sanitize=True)
    np.testing.assert_allclose(out.reshape(64, 64), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(mutile.DeviceFault) as e:
        overwrite_while_sqmma[(1,)](da, db, _out(), WAIT_FIRST=False, backend="pinghu",
                                    sanitize=True)
    msg = str(e.value)
    assert "still reads" in msg
    assert _line(overwrite_while_sqmma, "OVERWRITE") in msg
    assert _line(overwrite_while_sqmma, "MMA") in msg


def test_expect_tx_fewer_bytes_than_the_copies(rng):
    _, d = _desc(rng)
    with pytest.raises(mutile.DeviceFault) as e:
        expect_tx_mismatch[(1,)](d, _out(BF16), NBYTES=4096, backend="pinghu", sanitize=True)
    msg = str(e.value)
    assert _line(expect_tx_mismatch, "EXPECT") in msg
    assert _line(expect_tx_mismatch, "COPY") in msg


def test_expect_tx_more_bytes_than_the_copies_deadlocks(rng):
    _, d = _desc(rng)
    with pytest.raises(mutile.DeviceFault) as e:
        expect_tx_mismatch[(1,)](d, _out(BF16), NBYTES=16384, backend="pinghu", sanitize=True)
    msg = str(e.value)
    assert "deadlock" in msg and "8192" in msg
    assert _line(expect_tx_mismatch, "WAIT") in msg
    assert _line(expect_tx_mismatch, "EXPECT") in msg


def test_wait_on_the_wrong_phase(rng):
    a, d = _desc(rng, 128)
    out = _out()
    wrong_phase[(1,)](d, out, N=2, PHASE_BUG=False, backend="pinghu", sanitize=True)
    want = a[:, :64].astype(np.float64) + a[:, 64:].astype(np.float64)
    np.testing.assert_allclose(out.reshape(64, 64), want, rtol=1e-6)
    with pytest.raises(mutile.DeviceFault) as e:
        wrong_phase[(1,)](d, _out(), N=2, PHASE_BUG=True, backend="pinghu", sanitize=True)
    msg = str(e.value)
    assert "already waited for" in msg
    assert msg.count(_line(wrong_phase, "WAIT-BUG")) >= 2      # this wait and the earlier one


def test_more_arrivals_than_initialized():
    out = np.zeros(1, np.int32)
    over_arrival[(1,)](out, WARPS=4, backend="pinghu", sanitize=True)
    with pytest.raises(mutile.DeviceFault) as e:
        over_arrival[(1,)](out, WARPS=1, backend="pinghu", sanitize=True)
    msg = str(e.value)
    assert "more warps than" in msg or "arrived on by" in msg
    assert _line(over_arrival, "INIT") in msg and _line(over_arrival, "ARRIVE") in msg


@pytest.mark.parametrize("sanitize", [False, True])
def test_planted_deadlock_is_reported(sanitize):
    with pytest.raises(mutile.DeviceFault) as e:
        never_completes[(2,)](np.zeros(1, np.int32), backend="pinghu", sanitize=sanitize)
    msg = str(e.value)
    assert "deadlock" in msg
    assert _line(never_completes, "STUCK") in msg
    assert "phase" in msg
