"""``ml.dot`` on small tiles: int8/uint8 -> int32, f16/bf16/fp8/f32 -> f32 with and
without an accumulator, mixed float operands, and f32 with the default precision (tf32),
``input_precision="ieee"`` and ``allow_tf32=False`` — bit for bit against the documented
semantics: for each output, c = fma(a[i,k], b[k,j], c) for k = 0..K-1 in f32 (int32 for
8-bit integers), starting from the accumulator, with tf32 inputs rounded to nearest even
to 10 mantissa bits first."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import semantics
from mutile.ir import types as T

from ..conftest import assert_bits_equal, poison, random_data

M, N, K = 16, 8, 32


@mutile.jit
def dot_kernel(A, B, C, O, M: ml.constexpr, N: ml.constexpr, K: ml.constexpr,
               MODE: ml.constexpr, USE_ACC: ml.constexpr):
    rm, rn, rk = ml.arange(0, M), ml.arange(0, N), ml.arange(0, K)
    a = ml.load(A + rm[:, None] * K + rk[None, :])
    b = ml.load(B + rk[:, None] * N + rn[None, :])
    acc = ml.load(C + rm[:, None] * N + rn[None, :]) if USE_ACC else None
    if MODE == "default":
        r = ml.dot(a, b, acc)
    elif MODE == "no_tf32":
        r = ml.dot(a, b, acc, allow_tf32=False)
    else:
        r = ml.dot(a, b, acc, input_precision=MODE)
    ml.static_assert(r.dtype == O.dtype.element_ty, "dot result dtype")
    ml.store(O + rm[:, None] * N + rn[None, :], r)


def to_tf32(x):
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 13) & 1
    return ((bits + 0xFFF + lsb) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)


def fma_chain(a, b, c):
    """The documented dot, through the shared scalar semantics' fma (rounded once)."""
    c = c.copy()
    for k in range(a.shape[1]):
        x = np.broadcast_to(a[:, k, None], c.shape)
        y = np.broadcast_to(b[None, k, :], c.shape)
        c = semantics.evaluate("fma", {}, [x, y, c], T.f32, T.f32)
    return c


CASES = [  # (a dtype, b dtype, mode, accumulate)
    (np.int8, np.int8, "default", True), (np.uint8, np.uint8, "default", False),
    (np.float16, np.float16, "default", True),
    (ml_dtypes.bfloat16, ml_dtypes.bfloat16, "ieee", False),
    (ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2, "default", True),
    (np.float16, ml_dtypes.bfloat16, "ieee", True),
    (np.float32, np.float32, "default", True), (np.float32, np.float32, "ieee", True),
    (np.float32, np.float32, "no_tf32", False), (np.float32, np.float32, "tf32", False),
]


@pytest.mark.parametrize("ad,bd,mode,use_acc", CASES,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}-{m}-{'acc' if u else 'noacc'}"
                              for a, b, m, u in CASES])
def test_dot(ad, bd, mode, use_acc, rng, backend):
    is_int = np.dtype(ad).kind in "iu"
    od = np.int32 if is_int else np.float32
    if is_int:
        a = random_data(ad, (M, K), rng)
        b = random_data(bd, (K, N), rng)
        c = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    else:
        a = random_data(ad, (M, K), rng, specials=False)
        b = random_data(bd, (K, N), rng, specials=False)
        c = random_data(np.float32, (M, N), rng, specials=False)
    o = poison((M, N), od)
    dot_kernel[(1,)](a, b, c, o, M=M, N=N, K=K, MODE=mode, USE_ACC=use_acc, backend=backend)
    c0 = c if use_acc else np.zeros((M, N), od)
    if is_int:
        want = (a.astype(np.int64) @ b.astype(np.int64) + c0).astype(np.int32)
        assert_bits_equal(o, want, "integer dot")
        return
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    if np.dtype(ad) == np.float32 and mode in ("default", "tf32"):
        a32, b32 = to_tf32(a32), to_tf32(b32)
    assert_bits_equal(o, fma_chain(a32, b32, c0.astype(np.float32)), f"dot {mode}")


def test_tf32_is_the_default_for_f32(rng, backend):
    """The default rounds f32 inputs (so it differs from "ieee" on random data)."""
    a = random_data(np.float32, (M, K), rng, specials=False)
    b = random_data(np.float32, (K, N), rng, specials=False)
    c = np.zeros((M, N), np.float32)
    outs = []
    for mode in ("default", "ieee"):
        o = poison((M, N), np.float32)
        dot_kernel[(1,)](a, b, c, o, M=M, N=N, K=K, MODE=mode, USE_ACC=True, backend=backend)
        outs.append(o)
    assert (outs[0] != outs[1]).any()
