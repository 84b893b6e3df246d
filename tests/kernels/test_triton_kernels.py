"""Whole kernels in Triton's dialect on random inputs, against float64 numpy references:
vector add, row softmax, layernorm forward, the grouped matmul of ``kernels/matmul.py``
(every epilogue, every input precision and dtype), the descriptor matmul, and
FlashAttention forward of ``kernels/attention_basic.py``.

Every output is poisoned (NaN / the integer maximum) before the launch, so an element
the kernel does not write fails the comparison. Tolerances are derived from the
precision of each computation and stated next to each check; where the semantics
(docs/semantics.md) fix the bits, the check is exact.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.kernels.attention_basic import attention, attention_fwd_kernel, attention_reference
from mutile.kernels.matmul import matmul, matmul_descriptor_kernel, matmul_kernel

from ..conftest import poison

F32_EPS = 2.0 ** -24            # unit roundoff of float32
F16_EPS = 2.0 ** -11
BF16_EPS = 2.0 ** -8


def randn(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def assert_close(got, want, atol, rtol=0.0, what=""):
    """|got - want| <= atol + rtol * |want| elementwise (atol may be an array); NaN in
    ``got`` (an unwritten, poisoned element) always fails."""
    got64 = np.asarray(got, np.float64)
    want64 = np.asarray(want, np.float64)
    assert got64.shape == want64.shape, f"{what}: shape {got64.shape} != {want64.shape}"
    err = np.abs(got64 - want64)
    bound = atol + rtol * np.abs(want64)
    bad = ~(err <= bound)
    if bad.any():
        i = np.unravel_index(np.flatnonzero(bad)[0], bad.shape)
        b = np.broadcast_to(bound, bad.shape)[i]
        raise AssertionError(f"{what}: {bad.sum()} of {bad.size} elements off, first at {i}: "
                             f"got {got64[i]!r}, want {want64[i]!r}, bound {b:.3g}")


# ---------------------------------------------------------------- vector add
@mutile.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: ml.constexpr):
    pid = ml.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + ml.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = ml.load(x_ptr + offsets, mask=mask)
    y = ml.load(y_ptr + offsets, mask=mask)
    ml.store(out_ptr + offsets, x + y, mask=mask)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32],
                         ids=["f32", "f16", "bf16", "i32"])
@pytest.mark.parametrize("block", [128, 1024])
def test_vector_add(dtype, block, rng, backend):
    """x + y is one correctly rounded operation (f16/bf16 compute in f32 and round once,
    which is exact-then-round because f32 holds the exact sum's rounding), so the result
    equals the float64 sum rounded to the dtype, bit for bit; int32 wraps."""
    for n in (1, block - 1, 3 * block + 17, 9973):
        if np.dtype(dtype) == np.int32:
            x = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
            y = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
            want = ((x.astype(np.int64) + y) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        else:
            x, y = randn(rng, n, dtype, 8.0), randn(rng, n, dtype)
            want = (x.astype(np.float64) + y.astype(np.float64)).astype(np.float32).astype(dtype)
        out = poison(n + 64, dtype)
        add_kernel[(mutile.cdiv(n, block),)](x, y, out, n, BLOCK_SIZE=block, backend=backend)
        np.testing.assert_array_equal(out[:n], want, err_msg=f"n={n}")
        assert (out[n:] == poison(64, dtype)).all() if np.dtype(dtype) == np.int32 \
            else np.isnan(out[n:].astype(np.float32)).all(), f"n={n}: wrote past n"


# ---------------------------------------------------------------- softmax
@mutile.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                   BLOCK_SIZE: ml.constexpr):
    row_idx = ml.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = ml.arange(0, BLOCK_SIZE)
    input_ptrs = row_start_ptr + col_offsets
    row = ml.load(input_ptrs, mask=col_offsets < n_cols, other=-float("inf")).to(ml.float32)
    row_minus_max = row - ml.max(row, axis=0)
    numerator = ml.exp(row_minus_max)
    denominator = ml.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    ml.store(output_row_start_ptr + col_offsets, softmax_output, mask=col_offsets < n_cols)


@pytest.mark.parametrize("n_cols,dtype", [(97, np.float32), (781, np.float32), (200, np.float16)],
                         ids=["97-f32", "781-f32", "200-f16"])
def test_softmax(n_cols, dtype, rng, backend):
    """Rows of a wider buffer (input stride != n_cols, output stride != both). Tolerance:
    exp is a few ulp, the row sum of n positive terms in f32 is off by at most
    n * 2^-24 relatively, the division adds 1/2 ulp (and an f16 output 2^-11 relative,
    or half its subnormal spacing, 2^-25, absolute)."""
    rows, in_stride, out_stride = 37, n_cols + 13, n_cols + 5
    x = randn(rng, (rows, in_stride), dtype, 3.0)
    out = poison((rows, out_stride), dtype)
    softmax_kernel[(rows,)](out, x, in_stride, out_stride, n_cols,
                            BLOCK_SIZE=mutile.next_power_of_2(n_cols), backend=backend)
    xs = x[:, :n_cols].astype(np.float64)
    e = np.exp(xs - xs.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    rtol = (n_cols + 8) * F32_EPS + (F16_EPS if dtype == np.float16 else 0.0)
    atol = 2.0 ** -25 if dtype == np.float16 else 1e-30
    assert_close(out[:, :n_cols], want, atol=atol, rtol=rtol, what="softmax")
    assert np.isnan(out[:, n_cols:].astype(np.float32)).all(), "wrote past n_cols"


# ---------------------------------------------------------------- layernorm
@mutile.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: ml.constexpr):
    row = ml.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = ml.zeros([BLOCK_SIZE], dtype=ml.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + ml.arange(0, BLOCK_SIZE)
        a = ml.load(X + cols, mask=cols < N, other=0.).to(ml.float32)
        _mean += a
    mean = ml.sum(_mean, axis=0) / N
    _var = ml.zeros([BLOCK_SIZE], dtype=ml.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + ml.arange(0, BLOCK_SIZE)
        x = ml.load(X + cols, mask=cols < N, other=0.).to(ml.float32)
        x = ml.where(cols < N, x - mean, 0.)
        _var += x * x
    var = ml.sum(_var, axis=0) / N
    rstd = 1 / ml.sqrt(var + eps)
    ml.store(Mean + row, mean)
    ml.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + ml.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = ml.load(W + cols, mask=mask)
        b = ml.load(B + cols, mask=mask)
        x = ml.load(X + cols, mask=mask, other=0.).to(ml.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        ml.store(Y + cols, y, mask=mask)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_layernorm(dtype, rng, backend):
    """Ragged N over several BLOCK_SIZE chunks, rows in a wider buffer. Tolerance: sums
    of N f32 terms (relative N * 2^-24 on mean and variance, halved in rstd), a few
    more roundings per element, and an f16 output's 2^-11."""
    rows, N, stride, eps = 23, 300, 333, 1e-5
    x = randn(rng, (rows, stride), dtype, 2.0) + dtype(0.5)
    w = randn(rng, N, dtype)
    b = randn(rng, N, dtype)
    y = poison((rows, stride), dtype)
    mean, rstd = poison(rows, np.float32), poison(rows, np.float32)
    layer_norm_fwd[(rows,)](x, y, w, b, mean, rstd, stride, N, eps, BLOCK_SIZE=128,
                            backend=backend)
    xs = x[:, :N].astype(np.float64)
    mu = xs.mean(1)
    sd = 1 / np.sqrt(xs.var(1) + np.float32(eps))
    want = (xs - mu[:, None]) * sd[:, None] * w.astype(np.float64) + b.astype(np.float64)
    rel = (N + 16) * F32_EPS
    assert_close(mean, mu, atol=rel * np.abs(xs).mean(1), what="mean")
    assert_close(rstd, sd, atol=0, rtol=rel, what="rstd")
    scale = np.abs((xs - mu[:, None]) * sd[:, None] * w.astype(np.float64)) + np.abs(b)
    out_eps = F16_EPS if dtype == np.float16 else F32_EPS
    assert_close(y[:, :N], want, atol=(rel * 4 + 1e-6) * (scale + 1) + out_eps * np.abs(want),
                 what="y")
    assert np.isnan(y[:, N:].astype(np.float32)).all(), "wrote past N"


# ---------------------------------------------------------------- grouped matmul
def to_tf32(x):
    """Round float32 values to nearest even with 10 mantissa bits (tf32)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 13) & 1
    rounded = ((bits + 0xFFF + lsb) & ~np.uint64(0x1FFF)).astype(np.uint32)
    return rounded.view(np.float32)


def sequential_fma_f32(a32, b32):
    """The documented dot: c = fma(a[i,k], b[k,j], c) in f32 for k = 0..K-1. Exact here
    because every product of these inputs (<= 11 significant bits each) fits in f32."""
    c = np.zeros((a32.shape[0], b32.shape[1]), np.float32)
    for k in range(a32.shape[1]):
        c = c + a32[:, k, None] * b32[None, k, :]
    return c


def launch_matmul(a, b, c, activation="", input_precision="ieee", *, backend,
                  block_m=64, block_n=64, block_k=32, group_m=8):
    """matmul()'s launch, into a caller-provided (poisoned) output."""
    M, K = a.shape
    N = b.shape[1]
    grid = (mutile.cdiv(M, block_m) * mutile.cdiv(N, block_n),)
    sa, sb, sc = (tuple(s // x.itemsize for s in x.strides) for x in (a, b, c))
    matmul_kernel[grid](a, b, c, M, N, K, *sa, *sb, *sc, BLOCK_M=block_m, BLOCK_N=block_n,
                        BLOCK_K=block_k, GROUP_M=group_m, ACTIVATION=activation,
                        INPUT_PRECISION=input_precision, backend=backend)
    return c


def activation_ref(c, activation):
    if activation == "relu":
        return np.maximum(c, 0)
    if activation == "leaky_relu":
        return np.where(c >= 0, c, c.dtype.type(0.01) * c)
    return c


def matmul_bound(a64, b64, K, out_eps=0.0, ref=None):
    """|fl(A B) - A B| <= K * u * (|A| |B|) for K sequential roundings in f32 (u = 2^-24),
    plus the output's rounding."""
    bound = (K + 2) * F32_EPS * (np.abs(a64) @ np.abs(b64)) + 1e-30
    if ref is not None:
        bound = bound + out_eps * np.abs(ref)
    return bound


@pytest.mark.parametrize("activation", ["", "relu", "leaky_relu"])
def test_matmul_fp16(activation, rng, backend):
    """fp16 inputs, fp32 accumulation and output, through the nested @jit epilogue chosen
    by the ACTIVATION string: bit-exact against the documented k-ordered f32 fma chain
    (products of f16 values are exact in f32), and within K * 2^-24 * |A||B| of float64."""
    for M, N, K in [(100, 75, 33), (256, 128, 64)]:
        a, b = randn(rng, (M, K), np.float16), randn(rng, (K, N), np.float16)
        c = launch_matmul(a, b, poison((M, N), np.float32), activation, backend=backend)
        exact = activation_ref(sequential_fma_f32(a.astype(np.float32), b.astype(np.float32)),
                               activation)
        np.testing.assert_array_equal(c, exact, err_msg=f"{M}x{N}x{K} {activation}")
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        ref = activation_ref(a64 @ b64, activation)
        assert_close(c, ref, atol=matmul_bound(a64, b64, K), what=f"{M}x{N}x{K} vs f64")
        if activation == "relu":
            assert (c >= 0).all() and (c[ref < 0] == 0).all()


def test_matmul_fp16_output_and_wrapper(rng, backend):
    """fp16 output (accumulate in f32, round once at the store: + 2^-11 relative), a
    non-contiguous B (strided view), and the ``matmul`` host wrapper agreeing bit for bit
    with the poisoned launch."""
    M, N, K = 100, 75, 33
    a = randn(rng, (M, K), np.float16)
    b_full = randn(rng, (K, 2 * N), np.float16)
    b = b_full[:, ::2]
    c = launch_matmul(a, b, poison((M, N), np.float16), "leaky_relu", backend=backend)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = activation_ref(a64 @ b64, "leaky_relu")
    assert_close(c, ref, atol=matmul_bound(a64, b64, K, F16_EPS, ref) + 2 ** -24, what="f16 out")
    exact = activation_ref(sequential_fma_f32(a.astype(np.float32), b.astype(np.float32)),
                           "leaky_relu").astype(np.float16)
    np.testing.assert_array_equal(c, exact)
    np.testing.assert_array_equal(matmul(a, b, activation="leaky_relu", backend=backend), c)


@pytest.mark.parametrize("precision", ["ieee", "tf32"])
def test_matmul_f32(precision, rng, backend):
    """f32 inputs. ieee: within K * 2^-24 * |A||B| of the float64 product. tf32: each input
    is first rounded to nearest even to 10 mantissa bits, so it is compared with the f64
    product of the tf32-rounded inputs (same bound), bit for bit with the sequential fma
    chain of those inputs, and it must differ from the unrounded product (the rounding
    really happens)."""
    for M, N, K in [(100, 75, 33), (256, 128, 64)]:
        a, b = randn(rng, (M, K), np.float32), randn(rng, (K, N), np.float32)
        c = launch_matmul(a, b, poison((M, N), np.float32), "", precision, backend=backend)
        if precision == "tf32":
            ar, br = to_tf32(a), to_tf32(b)
            np.testing.assert_array_equal(c, sequential_fma_f32(ar, br))
            full = a.astype(np.float64) @ b.astype(np.float64)
            assert np.abs(c - full).max() > 100 * F32_EPS * np.abs(full).max(), \
                "tf32 result matches the unrounded inputs' product: no tf32 rounding"
        else:
            ar, br = a, b
        a64, b64 = ar.astype(np.float64), br.astype(np.float64)
        assert_close(c, a64 @ b64, atol=matmul_bound(a64, b64, K), what=f"{precision} {M}x{N}x{K}")


def test_to_tf32_reference():
    """The test's tf32 rounding itself: ties to even, carries into the exponent."""
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -20, 2 - 2 ** -12, -1.5],
                 np.float32)
    want = np.array([1.0, 1 + 4 * 2 ** -11, 1 + 2 ** -10, 2.0, -1.5], np.float32)
    np.testing.assert_array_equal(to_tf32(x), want)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                   ml_dtypes.float8_e5m2], ids=["bf16", "e4m3", "e5m2"])
def test_matmul_low_precision_inputs(dtype, rng, backend):
    """bf16 / fp8 inputs from ml_dtypes arrays, f32 output: the inputs convert to f32
    exactly and products are exact, so the result is bit-exact against the sequential
    chain, and within K * 2^-24 * |A||B| of float64."""
    M, N, K = 100, 75, 33
    a, b = randn(rng, (M, K), dtype), randn(rng, (K, N), dtype)
    c = launch_matmul(a, b, poison((M, N), np.float32), "relu", backend=backend)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_close(c, np.maximum(a64 @ b64, 0), atol=matmul_bound(a64, b64, K), what=str(dtype))
    np.testing.assert_array_equal(
        c, np.maximum(sequential_fma_f32(a.astype(np.float32), b.astype(np.float32)), 0))


# ---------------------------------------------------------------- descriptor matmul
@pytest.mark.parametrize("M,N,K", [(100, 75, 33), (64, 128, 64)])
def test_matmul_descriptor(M, N, K, rng, backend):
    """Tensor descriptors: blocks reaching past M, N or K read 0 (the NaN placed right
    after A and B in memory must not leak in) and their stores are dropped (the padding
    region of a larger output buffer stays poisoned)."""
    BM, BN, BK = 32, 32, 16
    a_buf = poison(M * K + 4096, np.float16)
    b_buf = poison(K * N + 4096, np.float16)
    a_buf[:M * K] = randn(rng, M * K, np.float16)
    b_buf[:K * N] = randn(rng, K * N, np.float16)
    c_buf = poison(M * N + 4096, np.float32)
    grid = (mutile.cdiv(M, BM), mutile.cdiv(N, BN))
    matmul_descriptor_kernel[grid](a_buf, b_buf, c_buf, M, N, K, BLOCK_M=BM, BLOCK_N=BN,
                                   BLOCK_K=BK, backend=backend)
    a = a_buf[:M * K].reshape(M, K).astype(np.float32)
    b = b_buf[:K * N].reshape(K, N).astype(np.float32)
    c = c_buf[:M * N].reshape(M, N)
    np.testing.assert_array_equal(c, sequential_fma_f32(a, b))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_close(c, a64 @ b64, atol=matmul_bound(a64, b64, K))
    assert np.isnan(c_buf[M * N:]).all(), "a dropped (out-of-bounds) store was written"


# ---------------------------------------------------------------- flash attention
def launch_attention(q, k, v, out, causal, backend, block_m=64, block_n=64):
    """attention()'s launch, into a caller-provided (poisoned) output."""
    H, Sq, D = q.shape
    Sk = k.shape[1]
    grid = (mutile.cdiv(Sq, block_m), H)
    attention_fwd_kernel[grid](q, k, v, out, Sq, Sk, 1.0 / math.sqrt(D), Sq * D, D, Sk * D, D,
                               Sq * D, D, HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n,
                               CAUSAL=causal, backend=backend)
    return out


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float16, marks=pytest.mark.slow)],
                         ids=["f32", "f16"])
def test_flash_attention(causal, dtype, rng, backend):
    """Ragged seq_q != seq_k (both orders), several heads. The output is a weighted mean
    of V's rows, so errors are relative errors of the weights times max|v|. fp32: the
    scores (|s| < 2^5 here) carry ~2^-23 |s| absolute error into exp2, i.e. ~2^-18
    relative per weight, plus a few ulp for exp2 and the online rescaling and
    seq_k * 2^-24 for the sums; 2^-16 * max|v| bounds it with margin. fp16: P is rounded
    to f16 before P @ V (2^-11 relative per weight) and the output to f16 (2^-11 |out|),
    so |err| <= 2 * 2^-11 * max|v| + 2^-11 |out| on top of the fp32 term."""
    H, D = 3, 32
    for Sq, Sk in [(100, 77), (77, 100)]:
        q, k, v = (randn(rng, (H, S, D), dtype) for S in (Sq, Sk, Sk))
        out = launch_attention(q, k, v, poison((H, Sq, D), dtype), causal, backend)
        ref = attention_reference(q, k, v, causal=causal)
        vmax = np.abs(v.astype(np.float64)).max()
        atol = (2.0 ** -16 + Sk * F32_EPS) * vmax
        if dtype == np.float16:
            atol += 2 * F16_EPS * vmax + F16_EPS * np.abs(ref)
        assert_close(out, ref, atol=atol, what=f"Sq={Sq} Sk={Sk} causal={causal}")
        if causal and Sq > Sk:
            # the first Sq - Sk queries see no key: their output is defined as 0
            assert (out[:, :Sq - Sk] == 0).all()
    np.testing.assert_array_equal(attention(q, k, v, causal=causal, backend=backend), out)
