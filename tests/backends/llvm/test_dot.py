"""Bit-exact tests for the f32 dot micro-kernel and the tf32 rounding helper.

Reference for ``fma`` in f32 (``fma_f32``): with a, b, c float32,
  1. p = a*b in float64 is exact (24+24 significant bits <= 53; the f32
     exponent range squared stays inside f64's normal range);
  2. TwoSum gives s = fl64(p + c) and err with s + err == p + c exactly
     (no overflow possible for f32-sized inputs);
  3. s is replaced by the round-to-odd value of p + c at 53 bits (if err != 0
     and s has an even significand, step one f64 ulp toward err);
  4. rounding that to f32 (round-to-nearest-even) is then correct, because
     round-to-odd at precision p followed by RN at precision q <= p - 2 equals
     direct RN at q (Boldo & Melquiond); f32 subnormals are f64 normals.
``test_fma_reference_matches_fractions`` re-checks it against exact rational
arithmetic, including a case where naive ``float32(float64(a*b + c))``
double-rounds wrongly.
"""

import ctypes
import math
from fractions import Fraction

import numpy as np
import pytest
from llvmlite import ir

from backends.llvm import bench_dot, cgutils, dot


# --------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------

def fma_f32(a, b, c):
    """Return round_f32(a*b + c) exactly (single rounding) for float32 arrays."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    even = (s.view(np.int64) & 1) == 0
    toward = np.where(err > 0, np.inf, -np.inf)
    s = np.where((err != 0) & even, np.nextafter(s, toward), s)
    return s.astype(np.float32)


def ref_dot(A, B, C):
    """Return C + A@B with the kernel's contract: fma chain over k in order."""
    c = C.copy()
    for k in range(A.shape[1]):
        c = fma_f32(A[:, k:k + 1], B[k:k + 1, :], c)
    return c


def round_fraction(x, mant_bits):
    """Round a Fraction to a binary float with ``mant_bits`` explicit bits and
    f32's exponent range, ties to even; return a Python float (inf on overflow)."""
    if x == 0:
        return 0.0
    sign = -1 if x < 0 else 1
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    q = max(e - mant_bits, -126 - mant_bits)
    m = round(x / Fraction(2) ** q)  # Fraction.__round__ is half-to-even
    val = Fraction(m) * Fraction(2) ** q
    if val >= 2 ** 128:
        return sign * math.inf
    return sign * float(val)


def tf32_bits_ref(x):
    """numpy bit-manipulation reference for emit_round_tf32 (float32 in/out)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = np.where(nan, (u & 0xFFFFE000) | 0x00400000, r)
    return r.astype(np.uint32).view(np.float32)


def bits(x):
    """Return the uint32 bit patterns of a float32 array."""
    return np.asarray(x, np.float32).view(np.uint32)


# --------------------------------------------------------------------------
# JIT helpers
# --------------------------------------------------------------------------

def run_mm(M, N, K, A, B, C, **kw):
    """JIT the kernel for (M, N, K) and run it in place on aligned copies."""
    jit, fn = bench_dot.build_mm(M, N, K, **kw)
    a, b_, c = (bench_dot.aligned_f32(x.shape) for x in (A, B, C))
    a[:], b_[:], c[:] = A, B, C
    fn(bench_dot.as_fp(a), bench_dot.as_fp(b_), bench_dot.as_fp(c))
    del jit
    return c


def random_case(M, N, K, seed):
    """Return random float32 (A, B, C) with varied magnitudes."""
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((M, K)) * rng.choice([1e-3, 1.0, 1e3], (M, K)))
    B = rng.standard_normal((K, N))
    C = rng.standard_normal((M, N)) * 10
    return A.astype(np.float32), B.astype(np.float32), C.astype(np.float32)


# --------------------------------------------------------------------------
# The fma reference itself
# --------------------------------------------------------------------------

def test_fma_reference_matches_fractions():
    rng = np.random.default_rng(7)
    n = 3000
    a = rng.standard_normal(n).astype(np.float32)
    b = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    # Heavy cancellation: c close to -a*b.
    c[:1000] = (-(a[:1000].astype(np.float64) * b[:1000])
                * (1 + rng.standard_normal(1000) * 1e-6)).astype(np.float32)
    # Known double-rounding trap: exact = 1+2^-23+2^-24-2^-70.
    a[0], b[0], c[0] = 2.0 ** -24 * (1 + 2.0 ** -23), 1 - 2.0 ** -23, 1 + 2.0 ** -23
    got = fma_f32(a, b, c)
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
             for x, y, z in zip(a, b, c)]
    want = np.array([round_fraction(v, 23) for v in exact], np.float32)
    np.testing.assert_array_equal(bits(got), bits(want))
    naive = np.float32(np.float64(a[0]) * np.float64(b[0]) + np.float64(c[0]))
    assert got[0] == np.float32(1 + 2.0 ** -23) and naive != got[0]


# --------------------------------------------------------------------------
# emit_dot_f32
# --------------------------------------------------------------------------

SHAPES = [(1, 1, 1), (3, 5, 7), (16, 16, 16), (64, 64, 32), (128, 128, 32),
          (17, 33, 9), (1, 64, 8), (64, 1, 8), (7, 8, 1), (13, 15, 5),
          (6, 16, 4), (5, 31, 3), (2, 100, 3), (100, 2, 3), (12, 48, 64),
          (256, 16, 2)]


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_dot_bit_exact(M, N, K):
    A, B, C = random_case(M, N, K, seed=M * 10007 + N * 101 + K)
    got = run_mm(M, N, K, A, B, C)
    want = ref_dot(A, B, C)
    np.testing.assert_array_equal(bits(got), bits(want))
    # And close to the float64 result (error bound of a K-term fma chain).
    exact = C.astype(np.float64) + A.astype(np.float64) @ B.astype(np.float64)
    scale = np.abs(C).astype(np.float64) + np.abs(A).astype(np.float64) @ np.abs(B)
    assert np.all(np.abs(got - exact) <= (K + 1) * 2.0 ** -24 * scale * 1.01 + 1e-30)


@pytest.mark.parametrize("vec_width,num_regs", [(4, 16), (8, 16), (16, 32)])
@pytest.mark.parametrize("M,N,K", [(17, 33, 9), (13, 47, 6), (30, 64, 5)])
def test_dot_bit_exact_any_simd_shape(M, N, K, vec_width, num_regs):
    A, B, C = random_case(M, N, K, seed=99)
    got = run_mm(M, N, K, A, B, C, vec_width=vec_width, num_regs=num_regs)
    np.testing.assert_array_equal(bits(got), bits(ref_dot(A, B, C)))


def test_dot_uses_true_fma():
    # round_f32(1+2^-23 + (2^-24 - 2^-70)) = 1+2^-23; unfused or f64-then-f32
    # evaluation gives 1+2^-22 or 1.
    A = np.array([[2.0 ** -24 * (1 + 2.0 ** -23)]], np.float32)
    B = np.array([[1 - 2.0 ** -23]], np.float32)
    C = np.array([[1 + 2.0 ** -23]], np.float32)
    got = run_mm(1, 1, 1, A, B, C)
    assert got[0, 0] == np.float32(1 + 2.0 ** -23)


def test_dot_special_values():
    M, N, K = 7, 19, 4
    A, B, C = random_case(M, N, K, seed=3)
    A[0, 1] = np.inf
    B[2, 3] = np.nan
    C[4, 5] = -np.inf
    A[5, :] = np.float32(1e-40)  # subnormal products
    got = run_mm(M, N, K, A, B, C)
    with np.errstate(invalid="ignore", over="ignore"):
        want = ref_dot(A, B, C)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(bits(got)[ok], bits(want)[ok])


def _build_typed_twice(M, N, K):
    """JIT ``mm(float*, float*, float*)`` with typed pointers calling the kernel twice."""
    f32p = ir.PointerType(cgutils.F32)
    module = ir.Module(name="twice")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [f32p] * 3), name="mm")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    tmp = cgutils.entry_alloca(b, cgutils.F32, M * N, name="tmp")
    dot.emit_dot_f32(b, *fn.args, M, N, K)
    # tmp = C (copy through a loop), then C += A @ B again via tmp.
    with cgutils.for_range(b, 0, M * N) as i:
        v = b.load(cgutils.gep_flat(b, fn.args[2], i))
        b.store(v, cgutils.gep_flat(b, tmp, i))
    dot.emit_dot_f32(b, fn.args[0], fn.args[1], tmp, M, N, K)
    with cgutils.for_range(b, 0, M * N) as i:
        b.store(b.load(cgutils.gep_flat(b, tmp, i)), cgutils.gep_flat(b, fn.args[2], i))
    b.ret_void()
    jit = bench_dot.JitModule(module)
    fp = ctypes.POINTER(ctypes.c_float)
    return jit, ctypes.CFUNCTYPE(None, fp, fp, fp)(jit.address("mm"))


def test_dot_typed_pointers_and_builder_position():
    M, N, K = 9, 20, 5
    A, B, C = random_case(M, N, K, seed=11)
    jit, fn = _build_typed_twice(M, N, K)
    c = C.copy()
    fn(bench_dot.as_fp(A), bench_dot.as_fp(B), bench_dot.as_fp(c))
    np.testing.assert_array_equal(bits(c), bits(ref_dot(A, B, ref_dot(A, B, C))))
    del jit


def test_dot_rejects_bad_sizes():
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [cgutils.PTR] * 3), name="f")
    b = ir.IRBuilder(fn.append_basic_block())
    for bad in [(0, 1, 1), (1, -1, 1), (1, 1, 2.0)]:
        with pytest.raises((ValueError, TypeError)):
            dot.emit_dot_f32(b, *fn.args, *bad)


def test_plan_covers_columns_once():
    for N in range(1, 70):
        for w, r in [(8, 16), (16, 32), (4, 16)]:
            cols = []
            for j_start, n_panels, chunks, mr in dot.plan_blocking(37, N, w, r):
                nr = chunks[-1][0] + chunks[-1][1]
                assert 1 <= mr <= 37 and mr * len(chunks) + len(chunks) + 1 <= r
                for p in range(n_panels):
                    for off, width in chunks:
                        cols.extend(range(j_start + p * nr + off, j_start + p * nr + off + width))
            assert cols == list(range(N))


# --------------------------------------------------------------------------
# emit_round_tf32
# --------------------------------------------------------------------------

SPECIAL_BITS = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # zeros, infinities
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800FFF, 0x7FBFFFFF, 0x7FFFFFFF,  # NaNs
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F7FF000, 0x7F7FE000, 0x7F7FEFFF,  # near overflow
    0x00000001, 0x00001000, 0x00001001, 0x00003000, 0x00001FFF, 0x007FFFFF,  # subnormals
    0x00800000, 0x3F800FFF, 0x3F801000, 0x3F801001, 0x3F803000, 0xBF803000,  # ties
    0x3FFFF000, 0x3FFFFFFF,  # carry into the exponent
]


def _build_round(count):
    """JIT ``void r(float*)`` rounding ``count`` floats in place."""
    module = ir.Module(name="tf32")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), name="r")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    dot.emit_round_tf32_inplace(b, fn.args[0], count)
    b.ret_void()
    jit = bench_dot.JitModule(module)
    return jit, ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_float))(jit.address("r"))


def test_round_tf32_matches_references():
    rng = np.random.default_rng(5)
    rand_bits = rng.integers(0, 2 ** 32, 4000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([np.array(SPECIAL_BITS, np.uint32), rand_bits]).view(np.float32)
    x = np.concatenate([x, rng.standard_normal(1003).astype(np.float32)])
    jit, fn = _build_round(len(x))  # len % 8 != 0 exercises the scalar tail
    got = x.copy()
    fn(bench_dot.as_fp(got))
    del jit
    np.testing.assert_array_equal(bits(got), bits(tf32_bits_ref(x)))
    assert np.all(bits(got) & 0x1FFF == 0)
    nan = np.isnan(x)
    assert np.all(np.isnan(got[nan]))
    # Independent check of every non-NaN value against exact rounding.
    for xi, gi in zip(x[~nan], got[~nan]):
        want = xi if np.isinf(xi) else math.copysign(round_fraction(Fraction(float(xi)), 10), xi)
        assert bits(np.float32(want)) == bits(gi), hex(int(bits(np.float32(xi))))


def test_round_tf32_rejects_non_f32():
    b = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []),
                                 name="f").append_basic_block())
    with pytest.raises(TypeError):
        dot.emit_round_tf32(b, ir.Constant(ir.DoubleType(), 1.0))


# --------------------------------------------------------------------------
# cgutils
# --------------------------------------------------------------------------

def test_cgutils_loops_conditionals_allocas():
    # long f(long* out): out[0] = sum_{i=10,8,..,2} i (i32 index, negative
    # step); out[1] = #even i in [0,7); out[2] = #odd via if_else; uses an
    # entry alloca created after code was already emitted in the entry block.
    module = ir.Module(name="cg")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), name="f")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    out = fn.args[0]
    for j in range(3):
        b.store(cgutils.const(cgutils.I64, 0), cgutils.gep_flat(b, out, j, cgutils.I64))
    with cgutils.for_range(b, cgutils.const(cgutils.I32, 10), 0, -2) as i:
        assert i.type == cgutils.I32
        slot = cgutils.entry_alloca(b, cgutils.I64, name="unused")
        assert slot.parent is fn.entry_basic_block
        p = cgutils.gep_flat(b, out, 0, cgutils.I64)
        b.store(b.add(b.load(p, typ=cgutils.I64), b.sext(i, cgutils.I64)), p)
    with cgutils.for_range(b, 0, 7) as i:
        is_even = b.icmp_signed("==", b.and_(i, cgutils.const(cgutils.I64, 1)),
                                cgutils.const(cgutils.I64, 0))
        with cgutils.if_then(b, is_even):
            p = cgutils.gep_flat(b, out, 1, cgutils.I64)
            b.store(b.add(b.load(p, typ=cgutils.I64), cgutils.const(cgutils.I64, 1)), p)
        with cgutils.if_else(b, is_even) as (then, otherwise):
            with then:
                pass
            with otherwise:
                p = cgutils.gep_flat(b, out, 2, cgutils.I64)
                b.store(b.add(b.load(p, typ=cgutils.I64), cgutils.const(cgutils.I64, 1)), p)
    b.ret_void()
    jit = bench_dot.JitModule(module)
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(jit.address("f"))
    res = np.zeros(3, np.int64)
    f(res.ctypes.data)
    del jit
    assert list(res) == [30, 4, 3]
