"""Layer-norm backward as Triton's tutorial 05 writes it: each program computes dX for
its row and accumulates its row's dW/dB contribution into one of GROUP_SIZE_M partial
buffers under an ``atomic_cas`` spin lock (``Count`` marks a buffer's first writer),
released with ``atomic_xchg``; a second kernel sums the partial buffers. Against
float64 numpy, both backends."""
import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import poison


@mutile.jit
def _layer_norm_bwd_dx_fused(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                             GROUP_SIZE_M: ml.constexpr, BLOCK_SIZE_N: ml.constexpr):
    row = ml.program_id(0)
    cols = ml.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = ml.load(X + cols, mask=mask, other=0).to(ml.float32)
    dy = ml.load(DY + cols, mask=mask, other=0).to(ml.float32)
    w = ml.load(W + cols, mask=mask).to(ml.float32)
    mean = ml.load(Mean + row)
    rstd = ml.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = ml.where(mask, xhat, 0.)
    wdy = ml.where(mask, wdy, 0.)
    c1 = ml.sum(xhat * wdy, axis=0) / N
    c2 = ml.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    ml.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = (dy).to(w.dtype)
    while ml.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = ml.load(Count)
    if count == 0:
        ml.atomic_xchg(Count, 1)
    else:
        partial_dw += ml.load(DW, mask=mask)
        partial_db += ml.load(DB, mask=mask)
    ml.store(DW, partial_dw, mask=mask)
    ml.store(DB, partial_db, mask=mask)
    ml.atomic_xchg(Lock, 0)


@mutile.jit
def _layer_norm_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N, BLOCK_SIZE_M: ml.constexpr,
                         BLOCK_SIZE_N: ml.constexpr):
    pid = ml.program_id(0)
    cols = pid * BLOCK_SIZE_N + ml.arange(0, BLOCK_SIZE_N)
    dw = ml.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=ml.float32)
    db = ml.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=ml.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + ml.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += ml.load(DW + offs, mask=mask, other=0.)
        db += ml.load(DB + offs, mask=mask, other=0.)
    sum_dw = ml.sum(dw, axis=0)
    sum_db = ml.sum(db, axis=0)
    ml.store(FINAL_DW + cols, sum_dw, mask=cols < N)
    ml.store(FINAL_DB + cols, sum_db, mask=cols < N)


@pytest.mark.parametrize("M,N,group", [(24, 100, 4), (40, 64, 8)])
def test_layer_norm_backward(M, N, group, backend, rng):
    eps = 1e-5
    x = rng.standard_normal((M, N)).astype(np.float32)
    w = rng.standard_normal(N).astype(np.float32)
    dy = rng.standard_normal((M, N)).astype(np.float32)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1)
    rstd = 1.0 / np.sqrt(x64.var(axis=1) + eps)
    dx = poison((M, N), np.float32)
    lock = np.zeros(2 * group, np.int32)
    pdw, pdb = np.zeros((group, N), np.float32), np.zeros((group, N), np.float32)
    fdw, fdb = poison(N, np.float32), poison(N, np.float32)
    kw = {"backend": backend}
    if backend == "llvm":
        kw["num_threads"] = 4
    block_n = 1 << (N - 1).bit_length()
    _layer_norm_bwd_dx_fused[(M,)](dx, dy, pdw, pdb, x, w, mean.astype(np.float32),
                                   rstd.astype(np.float32), lock, N, N, GROUP_SIZE_M=group,
                                   BLOCK_SIZE_N=block_n, **kw)
    _layer_norm_bwd_dwdb[(-(-N // 32),)](pdw, pdb, fdw, fdb, group, N, BLOCK_SIZE_M=8,
                                          BLOCK_SIZE_N=32, **kw)
    xhat = (x64 - mean[:, None]) * rstd[:, None]
    wdy = w.astype(np.float64) * dy
    c1 = (xhat * wdy).sum(axis=1, keepdims=True) / N
    c2 = wdy.sum(axis=1, keepdims=True) / N
    want_dx = (wdy - (xhat * c1 + c2)) * rstd[:, None]
    np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fdw, (dy * xhat).sum(axis=0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fdb, dy.astype(np.float64).sum(axis=0), rtol=1e-4, atol=1e-4)
    assert (lock[:group] == 0).all() and (lock[group:] == 1).all()
