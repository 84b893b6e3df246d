"""The explicit-layer GEMMs of kernels/pinghu_gemm.py (TME ring, AsyncBarrier full/empty
pairs, SQMMA, TME store; with and without warp specialization) against numpy in float64,
on ragged sizes, bf16 and fp8 e4m3 inputs, 2-4 stages. The ``ph`` layer is Pinghu's own,
so these run on the pinghu backend only (the llvm backend's refusal is tested in
test_pinghu_verifier.py)."""
import ml_dtypes
import numpy as np
import pytest

import mutile
from mutile.kernels import pinghu_gemm as pg

BF16, E4M3 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn


def _padded(rng, rows, cols, dtype):
    """A (rows, cols) view into a wider allocation: a ragged shape whose rows start
    16-byte aligned (rows of a multiple of 16 elements; TME needs 4)."""
    full = rng.uniform(-2, 2, (rows, cols + (-cols) % 16 + 16)).astype(dtype)
    return full[:, :cols]


def _run(a, b, **kw):
    M, N = a.shape[0], b.shape[1]
    c = np.full((M, N), np.nan, np.float32)
    bm, bn, bk = kw.pop("tiles", (64, 64, 64))
    descs = (mutile.TensorDescriptor(a, [bm, bk]), mutile.TensorDescriptor(b, [bk, bn]),
             mutile.TensorDescriptor(c, [bm, bn]))
    ws = kw.pop("warp_specialize", False)
    kern = pg.gemm_ws_kernel if ws else pg.gemm_tme_kernel
    warps = kw.pop("num_warps", 4)
    k = kern[(-(-M // bm), -(-N // bn))](*descs, a.shape[1], BM=bm, BN=bn, BK=bk,
                                        NUM_WARPS=warps, num_warps=warps, backend="pinghu",
                                        **kw)
    return c, k


@pytest.mark.parametrize("ws", [False, True], ids=["one-stream", "warp-specialized"])
@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("dtype", [BF16, E4M3], ids=["bf16", "e4m3"])
def test_gemm_ragged(dtype, stages, ws, rng):
    M, N, K = 150, 100, 77
    a, b = _padded(rng, M, K, dtype), _padded(rng, K, N, dtype)
    c, k = _run(a, b, STAGES=stages, warp_specialize=ws)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    text = k.asm["musa"]
    for ins in ("TME.LD.TILE.2D", "TME.ST.TILE.2D", "ASYNC.BAR.WAIT", "ASYNC.BAR.ARRIVE",
                "SQMMA.WAIT"):
        assert ins in text


def test_gemm_wrapper_eight_warps(rng):
    a = rng.uniform(-1, 1, (256, 128)).astype(BF16)
    b = rng.uniform(-1, 1, (128, 64)).astype(BF16)
    c = pg.gemm(a, b, block_m=128, block_n=64, block_k=32, stages=3, num_warps=8)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5,
                               atol=1e-4)


def test_gemm_sanitizer_is_quiet_on_correct_kernels(rng):
    a = rng.uniform(-1, 1, (70, 64)).astype(BF16)
    b = rng.uniform(-1, 1, (64, 80)).astype(BF16)
    for ws in (False, True):
        c = pg.gemm(a, b, stages=2, warp_specialize=ws, sanitize=True)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64),
                                   rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("ws", [False, True], ids=["one-stream", "warp-specialized"])
def test_gemm_on_4_byte_aligned_views(ws, rng):
    """TME's global alignment is 4 bytes (the machine file's): A, B and C are views whose
    base is 4 bytes into their arrays and whose rows are 132, 196 and 260 bytes apart
    (none a multiple of 16); the TME loads and the TME store of C run and match numpy's
    float64 product; C's poisoned neighbours stay untouched."""
    M, N, K = 96, 64, 64
    a_mem = rng.uniform(-2, 2, (M, K + 2)).astype(BF16)
    b_mem = rng.uniform(-2, 2, (K, N + 34)).astype(BF16)
    c_mem = np.full((M, N + 1), np.nan, np.float32)
    a, b, c = a_mem[:, 2:], b_mem[:, 2:N + 2], c_mem[:, 1:]
    assert [x.strides[0] % 16 for x in (a, b, c)] == [4, 4, 4]
    descs = (mutile.TensorDescriptor(a, [64, 64]), mutile.TensorDescriptor(b, [64, 64]),
             mutile.TensorDescriptor(c, [64, 64]))
    kern = pg.gemm_ws_kernel if ws else pg.gemm_tme_kernel
    kern[(2, 1)](*descs, K, BM=64, BN=64, BK=64, NUM_WARPS=4, num_warps=4, STAGES=2,
                 backend="pinghu")
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5,
                               atol=1e-4)
    assert np.isnan(c_mem[:, 0]).all()


def test_misaligned_tensor_faults_at_the_copy(rng):
    """TME needs 4-byte aligned rows: a 77-element bf16 row (154 bytes) faults at the
    tme_load line, naming it."""
    a = rng.uniform(-1, 1, (64, 77)).astype(BF16)
    b = rng.uniform(-1, 1, (77, 64)).astype(BF16)
    with pytest.raises(mutile.DeviceFault) as e:
        _run(a, b, STAGES=2)
    assert "ph.tme_load(a_desc" in str(e.value)
