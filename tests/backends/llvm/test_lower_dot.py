"""dot: f32 (ieee and tf32), f16/bf16/fp8 inputs, integer and non-f32 accumulators.

The reference follows the rounding contract (per (i, j): ``c = fma(a[i,k], b[k,j], c)``
for k ascending, one rounding each) through ``semantics.evaluate("fma")``, so f32
results are compared bit for bit; a float64 matmul bounds them as a sanity check."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mutile.ir import semantics
from mutile.ir import types as T

from .conftest import KB, assert_same_bits, poisoned, ptr, tile


def _dot_kernel(et, at, M, N, K, precision="ieee", acc_from_memory=True):
    kb = KB("dot", [("a", ptr(et)), ("b", ptr(et)), ("c", ptr(at)), ("o", ptr(at))])
    a = kb.load2d(kb.a["a"], M, K, kb.const(K, T.i32))
    b = kb.load2d(kb.a["b"], K, N, kb.const(N, T.i32))
    if acc_from_memory:
        c = kb.load2d(kb.a["c"], M, N, kb.const(N, T.i32))
    else:
        c = kb.const(0.0 if at.is_floating() else 0, tile((M, N), at))
    r = kb("dot", a, b, c, input_precision=precision)
    kb.store2d(kb.a["o"], r, kb.const(N, T.i32))
    return kb.compile()


def _round_tf32(x):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    out = np.where(np.isnan(x), bits, r).astype(np.uint32)
    return out.view(np.float32)


def _fma_chain_f32(A, B, C):
    c = C.astype(np.float32).copy()
    for k in range(A.shape[1]):
        a = np.broadcast_to(A[:, k:k + 1], c.shape).astype(np.float32)
        b = np.broadcast_to(B[k:k + 1, :], c.shape).astype(np.float32)
        c = semantics.evaluate("fma", {}, [a, b, c], T.f32, T.f32)
    return c


def _run(et, at, M, N, K, rng, precision="ieee", acc_from_memory=True):
    npd = et.to_numpy()
    if et.is_int():
        A = rng.integers(-128, 128, (M, K)).astype(npd)
        B = rng.integers(-128, 128, (K, N)).astype(npd)
        C = rng.integers(-1000, 1000, (M, N)).astype(at.to_numpy())
    else:
        A = rng.standard_normal((M, K)).astype(npd)
        B = rng.standard_normal((K, N)).astype(npd)
        C = rng.standard_normal((M, N)).astype(at.to_numpy())
    out = poisoned((M, N), at)
    k = _dot_kernel(et, at, M, N, K, precision, acc_from_memory)
    k.run([A, B, C, out], (1,))
    if not acc_from_memory:
        C = np.zeros_like(C)
    return A, B, C, out


@pytest.mark.parametrize("MNK", [(16, 16, 16), (32, 64, 16), (8, 32, 64), (64, 16, 8),
                                 (2, 16, 4), (4, 4, 4)], ids=str)
def test_dot_f32_bit_exact(MNK, rng):
    A, B, C, out = _run(T.f32, T.f32, *MNK, rng)
    assert_same_bits(out, _fma_chain_f32(A, B, C), T.f32, "dot f32")
    np.testing.assert_allclose(out, C + A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


def test_dot_zero_accumulator_and_tf32(rng):
    A, B, C, out = _run(T.f32, T.f32, 32, 32, 32, rng, "tf32", acc_from_memory=False)
    want = _fma_chain_f32(_round_tf32(A), _round_tf32(B), C)
    assert_same_bits(out, want, T.f32, "dot tf32")
    assert not np.array_equal(out, _fma_chain_f32(A, B, C))     # rounding did something


@pytest.mark.parametrize("et", [T.f16, T.bf16, T.f8e4m3, T.f8e5m2], ids=str)
def test_dot_narrow_inputs_f32_acc(et, rng):
    A, B, C, out = _run(et, T.f32, 32, 32, 16, rng)
    want = _fma_chain_f32(A.astype(np.float32), B.astype(np.float32), C)
    assert_same_bits(out, want, T.f32, f"dot {et}")


def test_dot_int8(rng):
    A, B, C, out = _run(T.i8, T.i32, 16, 32, 64, rng)
    want = (C.astype(np.int64) + A.astype(np.int64) @ B.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(out, want)


def test_dot_f16_accumulator(rng):
    A, B, C, out = _run(T.f16, T.f16, 16, 16, 16, rng)
    c = C.copy()
    for k in range(A.shape[1]):
        c = (A[:, k:k + 1].astype(np.float64) * B[k:k + 1, :].astype(np.float64)
             + c.astype(np.float64)).astype(np.float16)
    assert_same_bits(out, c, T.f16, "dot f16 acc")


def test_dot_f64(rng):
    A, B, C, out = _run(T.f64, T.f64, 4, 8, 8, rng)
    want = np.empty_like(C)
    for i in range(4):
        for j in range(8):
            c = C[i, j]
            for k in range(8):
                c = float(Fraction(A[i, k]) * Fraction(B[k, j]) + Fraction(c))
            want[i, j] = c
    assert_same_bits(out, want, T.f64, "dot f64")
