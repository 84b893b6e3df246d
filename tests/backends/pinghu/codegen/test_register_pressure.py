"""What keeps large tiles in registers: 16-byte shared stores, masks built in chunks,
short reduction temporaries, warp-specialized partitions laid out producer first, and
a register budget that lets the block fit the MP's register file (answers on both
backends against numpy, outputs poisoned; the Pinghu listings and metadata)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph
from mutile.ir.ops_pinghu import REGISTER_FILE

BACKENDS = ["llvm", "pinghu"]


@mutile.jit
def through_shared(X, Y, R: ml.constexpr, C: ml.constexpr, SWIZZLE: ml.constexpr):
    """Y = X + 1 through a shared R x C tile of X's dtype."""
    offs = ml.arange(0, R)[:, None] * C + ml.arange(0, C)[None, :]
    buf = ph.alloc_shared((2, R, C), X.dtype.element_ty, swizzle=SWIZZLE)
    buf[1].store(ml.load(X + offs) + 1)
    ph.sync_warps()
    ml.store(Y + offs, buf[1].load())


DTYPES = [np.float32, ml_dtypes.bfloat16, np.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("swizzle", [0, 16, 32, 64])
@pytest.mark.parametrize("shape", [(64, 64), (128, 32), (8, 8)])
def test_tile_through_shared(dtype, swizzle, shape, rng):
    """(Pinghu only: ``ph`` buffers exist on the Pinghu machine alone.) Every swizzle,
    stage 1 of a two-stage buffer, whole chunks per thread or a replicated small tile."""
    x = rng.standard_normal(shape).astype(dtype)
    y = np.full_like(x, np.nan)
    through_shared[(1,)](x, y, R=shape[0], C=shape[1], SWIZZLE=swizzle, num_warps=4,
                         backend="pinghu")
    want = (x.astype(np.float64) + 1).astype(np.float32).astype(dtype)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_whole_chunks_store_16_bytes_at_a_time(dtype):
    """A thread's 32 consecutive elements are 8 or 4 chunks of 16 bytes, stored 16 bytes
    at a time: 32-bit ones by one LSU.ST.SHARED.B128 over a run of chunks, 16-bit ones
    packed two to a register, one B128 store per chunk; no element stores. A tile with
    fewer bytes per thread than a chunk keeps element stores."""
    x = np.zeros((64, 64), dtype)
    k = through_shared.warmup(x, x, R=64, C=64, SWIZZLE=16, grid=(1,), num_warps=4,
                              backend="pinghu")
    text = k.asm["musa"]
    chunks = 32 * x.itemsize // 16
    assert text.count("LSU.ST.SHARED.B128") == (1 if x.itemsize == 4 else chunks)
    assert "LSU.ST.SHARED.B16" not in text and "LSU.ST.SHARED.B32" not in text
    assert text.count("ALU.PACK.B16") == (chunks * 4 if x.itemsize == 2 else 0)
    small = np.zeros((8, 8), dtype)            # 64 elements on 128 threads: replicated
    k = through_shared.warmup(small, small, R=8, C=8, SWIZZLE=0, grid=(1,), num_warps=4,
                              backend="pinghu")
    assert "LSU.ST.SHARED.B128" not in k.asm["musa"]


@mutile.jit
def banded(X, Y, lo, hi, R: ml.constexpr, C: ml.constexpr):
    """Y = X where lo <= col - row < hi, else -1: a [R, C] mask from index arithmetic."""
    rows = ml.arange(0, R)
    cols = ml.arange(0, C)
    offs = rows[:, None] * C + cols[None, :]
    d = cols[None, :] - rows[:, None]
    keep = (d >= lo) & (d < hi)
    ml.store(Y + offs, ml.where(keep, ml.load(X + offs), -1.0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lo, hi", [(-3, 5), (0, 1), (-200, 200), (7, 2)])
def test_a_mask_from_index_arithmetic(backend, lo, hi, rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)
    y = np.full_like(x, np.nan)
    banded[(1,)](x, y, lo, hi, R=128, C=64, num_warps=4, backend=backend)
    d = np.arange(64)[None, :] - np.arange(128)[:, None]
    np.testing.assert_array_equal(y, np.where((d >= lo) & (d < hi), x, -1.0))


def test_a_large_mask_is_compared_16_elements_at_a_time():
    """64 mask elements per thread: each comparison runs on 16-element chunks of its
    index arithmetic (ISETP on 16-predicate runs), none on the whole 64."""
    x = np.zeros((128, 64), np.float32)
    text = banded.warmup(x, x, 0, 1, R=128, C=64, grid=(1,), num_warps=4,
                         backend="pinghu").asm["musa"]
    setps = [ln for ln in text.splitlines() if "ALU.ISETP" in ln and "P[" in ln]
    assert setps and all(":" in ln.split("P[")[1] for ln in setps)
    widths = {int(b) - int(a) for a, b in (ln.split("P[")[1].split("]")[0].split(":")
                                            for ln in setps)}
    assert widths == {16}


# ---------------------------------------------------------------- the attention kernel
def _attention_meta(config, causal=False):
    from mutile.kernels import attention_host, attention_pinghu as aph
    q = np.zeros((1, 1, 512, 128), ml_dtypes.bfloat16)
    out = np.zeros_like(q)
    lse = np.zeros(q.shape[:3], np.float32)
    a = attention_host.prepare(q, q, q, backend="pinghu")
    st = [s // 2 for s in q.strides[:3]]
    args = (q, q, q, out, lse, a.slopes, 512, 512, 1, 1, 1, a.sm_scale, 0.0, 0, 0, *st, *st, *st,
            lse.strides[0] // 4, lse.strides[1] // 4, 0)
    flags = dict(CAUSAL=causal, WINDOW=False, SOFTCAP=False, ALIBI=False, SCORE_MOD=False,
                 MASK_MOD=False)
    k = aph.kernel_for(None, None).warmup(*args, grid=(1,), backend="pinghu", num_warps=4,
                                          HEAD_DIM=128, **flags, **config)
    return k.metadata


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("config", [dict(BLOCK_M=128, BLOCK_N=64, STAGES=2, SQUADS=1),
                                    dict(BLOCK_M=256, BLOCK_N=32, STAGES=2, SQUADS=2),
                                    dict(BLOCK_M=128, BLOCK_N=32, STAGES=3, SQUADS=1),
                                    dict(BLOCK_M=128, BLOCK_N=64, STAGES=3, SQUADS=1),
                                    dict(BLOCK_M=256, BLOCK_N=32, STAGES=3, SQUADS=2)])
def test_the_attention_forward_does_not_spill(config, causal):
    """The explicit forward at head dim 128 (an f32 accumulator of 128 registers per
    thread beside the scores) fits its registers: nothing goes to local memory. Before
    the changes this file tests, its loop-carried O went through local memory every
    key block; causal masks (three comparisons and two ANDs over the block, each of 64
    predicates a thread) ran out of predicates until the ANDs too were evaluated 16
    elements at a time. Since the loop issues the next block's Q K^T behind P V, its score
    carrier is read at the top and rewritten at the bottom: without the linear scan's
    holes (codegen/linear_scan.py) the scaled scores could not take its registers, and
    256x32 spilled 4384 bytes a thread."""
    meta = _attention_meta(config, causal)
    assert meta["local_bytes"] == 0
    assert meta["registers_per_thread"] * meta["threads_per_block"] <= REGISTER_FILE


def test_a_block_fits_the_register_file():
    """Two consumer squads and a producer warp (288 threads): at most 227 registers per
    thread, or the block could not be resident; a spill-heavy config then spills
    instead of overcommitting the register file. (Compiled only: with 64-key blocks one
    stage is all that fits 192 KiB beside Q's two buffers, and ``run`` refuses it.)"""
    meta = _attention_meta(dict(BLOCK_M=256, BLOCK_N=64, STAGES=1, SQUADS=2))
    assert meta["threads_per_block"] == 288
    assert meta["registers_per_thread"] <= REGISTER_FILE // 288 == 227


# ---------------------------------------------------------------- global accesses in chunks
@mutile.jit
def masked_affine(X, Y, R, C, stride, R_: ml.constexpr, C_: ml.constexpr):
    """Y = 2 X + 1 over an R x C window of row stride ``stride`` (masked past R, C)."""
    rows = ml.arange(0, R_)[:, None]
    cols = ml.arange(0, C_)[None, :]
    mask = (rows < R) & (cols < C)
    x = ml.load(X + rows * stride + cols, mask=mask, other=0.0)
    ml.store(Y + rows * stride + cols, x * 2.0 + 1.0, mask=mask)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float32])
@pytest.mark.parametrize("r,c", [(64, 64), (50, 37)])
def test_wide_global_accesses(backend, dtype, r, c, rng):
    """32 elements a thread (64 x 64 on 4 warps) through loads and stores whose 64-bit
    addresses are formed a chunk at a time, masked at ragged edges."""
    x = rng.standard_normal((64, 64)).astype(dtype)
    y = np.full((64, 64), np.nan, dtype)
    masked_affine[(1,)](x, y, r, c, 64, R_=64, C_=64, num_warps=4, backend=backend)
    want = (x.astype(np.float64) * 2 + 1).astype(np.float32).astype(dtype)
    np.testing.assert_array_equal(y[:r, :c], want[:r, :c])
    assert np.isnan(y[r:].astype(np.float32)).all() and \
        np.isnan(y[:, c:].astype(np.float32)).all()


def test_addresses_are_formed_sixteen_elements_at_a_time():
    """The scalar (16-bit) path forms 32 address registers at a time, never the whole
    tile's 64: a GEMM's epilogue stores a 128-register accumulator beside them."""
    import re
    x = np.zeros((64, 64), ml_dtypes.bfloat16)
    k = masked_affine.warmup(x, x, 64, 64, 64, R_=64, C_=64, grid=(1,), num_warps=4,
                             backend="pinghu")
    runs = [int(b) - int(a) for a, b in
            re.findall(r"ALU\.IMAD\.WIDE\.S32 R\[(\d+):(\d+)\]", k.asm["musa"])]
    assert runs and max(runs) == 32
    assert k.asm["musa"].count("LSU.ST.GLOBAL.B16") == 2


def test_the_gemm_epilogues_do_not_spill():
    """The explicit GEMM at 256 x 128 (a 128-register accumulator a thread) and the
    per-block FP8 GEMM at 256 x 128 on two squads (two 64-register accumulators and a
    64-register partial a thread) fit 227 registers: before, the GEMM's epilogue spilled
    (its accumulator, carried around one flattened loop, stayed live beside its scaled
    copy and a whole tile of 64-bit addresses)."""
    from mutile.kernels import fp8_blockwise as F, gemm_pinghu as GP
    n = 1024
    a = np.zeros((n, n), ml_dtypes.float8_e4m3fn)
    out = np.zeros((n, n), ml_dtypes.bfloat16)
    k = GP.gemm_ws_persistent_kernel.warmup(
        a, a, out, out, out, n, n, n, n, n, 0, 0, n, 1, 1.0, 0.0, BM=256, BN=128, BK=256,
        GROUP_M=8, STAGES=2, NUM_WARPS=8, HAS_BIAS=False, HAS_C=False, ACTIVATION="",
        INT_ACC=False, INT_OUT=False, PERSISTENT=0, grid=(1,), backend="pinghu",
        num_warps=8)
    assert k.metadata["local_bytes"] == 0
    sa = np.ones((n, n // 128), np.float32)
    sw = np.ones((n // 128, n // 128), np.float32)
    k = F.fp8_blockwise_ws_kernel.warmup(
        a, sa, a, sw, out, n, n, n, n, n, 8, 8, n, 1, BM=256, BN=128, GROUP_M=8, STAGES=4,
        NUM_WARPS=8, PERSISTENT=0, grid=(1,), backend="pinghu", num_warps=4)
    assert k.metadata["local_bytes"] == 0 and k.metadata["threads_per_block"] == 288
