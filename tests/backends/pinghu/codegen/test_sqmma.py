"""ph.sqmma's codegen (backends/pinghu/codegen/lowering/sqmma.py) against numpy: only the
machine file's instruction shapes are emitted (M x N per WarpSquad of 16x64, 32x32, 32x64,
32x128, 64x16, 64x32, 64x64, 64x128, 128x32, 128x64, 128x128; TF32 128x64 with K-major A
and B only), a squad's part of the accumulator that is not one of them is split into
several (through shared memory at the issue and after the wait), ScaleIn negates A and/or
B, u8 x u8 accumulates into u32.

The ``ph`` layer is Pinghu's own (the llvm backend refuses it, tests/language), so these
kernels run on the pinghu backend; outputs are poisoned first, results are bit-exact
against the k-ordered f32 rule (32-bit wrapping sums for integers) and within the f32
rounding bound of numpy's float64 product; every launch runs under the sanitizer.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
import mutile.machines
import mutile.language.pinghu as ph
from mutile.ir import types as T

from ....conftest import marked, poison

DT = {"bf16": (T.bf16, ml_dtypes.bfloat16), "f16": (T.f16, np.float16),
      "f32": (T.f32, np.float32), "u8": (T.u8, np.uint8), "i8": (T.i8, np.int8),
      "e4m3": (T.f8e4m3, ml_dtypes.float8_e4m3fn)}
ACC = {"u8": (T.u32, np.uint32), "i8": (T.i32, np.int32)}


@mutile.jit
def k_mma(a_ptr, b_ptr, c_ptr, d_ptr, reps, DTYPE: ml.constexpr, A0: ml.constexpr,
          A1: ml.constexpr, B0: ml.constexpr, B1: ml.constexpr, M: ml.constexpr,
          N: ml.constexpr, TA: ml.constexpr, TB: ml.constexpr, NA: ml.constexpr,
          NB: ml.constexpr, ACCUMULATE: ml.constexpr, CHAIN: ml.constexpr):
    ra0, ra1 = ml.arange(0, A0), ml.arange(0, A1)
    rb0, rb1 = ml.arange(0, B0), ml.arange(0, B1)
    a_s = ph.alloc_shared((A0, A1), DTYPE, swizzle=32)
    b_s = ph.alloc_shared((B0, B1), DTYPE)
    a_s.store(ml.load(a_ptr + ra0[:, None] * A1 + ra1[None, :]))
    b_s.store(ml.load(b_ptr + rb0[:, None] * B1 + rb1[None, :]))
    ph.fence_shared()
    ph.sync_warps()
    rm, rn = ml.arange(0, M), ml.arange(0, N)
    acc = ml.load(c_ptr + rm[:, None] * N + rn[None, :])
    for _ in range(reps):
        acc = ph.sqmma(a_s, b_s, acc, accumulate=ACCUMULATE, trans_a=TA, trans_b=TB,
                       neg_a=NA, neg_b=NB)
        if CHAIN:
            acc = ph.sqmma(a_s, b_s, acc, trans_a=TA, trans_b=TB, neg_a=NA, neg_b=NB)
        acc = ph.sqmma_wait(acc)
    ml.store(d_ptr + rm[:, None] * N + rn[None, :], acc)


def _operand(rng, dt: str, shape) -> np.ndarray:
    np_dt = DT[dt][1]
    if dt in ("u8", "i8"):
        info = np.iinfo(np_dt)
        return rng.integers(info.min, info.max + 1, shape).astype(np_dt)
    return rng.standard_normal(shape).astype(np_dt)


def _tf32(x: np.ndarray) -> np.ndarray:
    """f32 rounded to nearest even at 10 mantissa bits (SQMMA's f32 operands)."""
    bits = x.view(np.uint32).astype(np.uint64)
    return ((bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def mma(rng, dt, M, N, K, warps=4, ta=False, tb=False, na=False, nb=False,
        accumulate=True, chain=False, reps=1):
    """Run ``k_mma`` on random operands; return (result, expected, float64 reference or
    None for integers, the compiled kernel)."""
    A, B = _operand(rng, dt, (M, K)), _operand(rng, dt, (K, N))
    a_st, b_st = (A.T if ta else A), (B.T if tb else B)
    acc_t, acc_np = ACC.get(dt, (T.f32, np.float32))
    if acc_np == np.float32:
        C = rng.standard_normal((M, N)).astype(np.float32)
    else:
        C = rng.integers(0, 2**32, (M, N)).astype(np.uint32).view(acc_np)
    D = poison((M, N), acc_np)
    k = k_mma[(1,)](np.ascontiguousarray(a_st), np.ascontiguousarray(b_st), C, D, reps,
                    DTYPE=DT[dt][0], A0=a_st.shape[0], A1=a_st.shape[1], B0=b_st.shape[0],
                    B1=b_st.shape[1], M=M, N=N, TA=ta, TB=tb, NA=na, NB=nb,
                    ACCUMULATE=accumulate, CHAIN=chain, backend="pinghu", num_warps=warps,
                    sanitize=True)
    sa, sb = (-1 if na else 1), (-1 if nb else 1)
    passes = reps * (1 + chain) if accumulate else 1 + chain
    if acc_np != np.float32:
        prod = (sa * A.astype(np.int64)) @ (sb * B.astype(np.int64))
        want = (C.astype(np.int64) * accumulate + passes * prod) & 0xFFFFFFFF
        return D.view(np.uint32), want.astype(np.uint32), None, k
    a = sa * (_tf32(A) if dt == "f32" else A.astype(np.float32))
    b = sb * (_tf32(B) if dt == "f32" else B.astype(np.float32))
    want = C.copy() if accumulate else np.zeros((M, N), np.float32)
    for _ in range(passes):
        for kk in range(K):
            want += a[:, kk:kk + 1] * b[kk:kk + 1, :]
    exact = (C.astype(np.float64) if accumulate else 0) + \
        passes * (a.astype(np.float64) @ b.astype(np.float64))
    bound = 2 * passes * K * 2.0 ** -24 * (passes * np.abs(a).astype(np.float64) @ np.abs(b)
                                           + np.abs(C))
    assert (np.abs(D - exact) <= bound + 1e-30).all(), "not within f32 rounding of float64"
    return D, want, exact, k


def _sqmmas(k) -> list[str]:
    return [ln.split()[0] for ln in k.asm["musa"].splitlines()
            if ln.strip().startswith("SQMMA.M")]


# (dtype, M, N, K, warps, trans_a, trans_b, the instruction, how many per k step)
CASES = [
    ("bf16", 64, 64, 32, 4, False, False, "SQMMA.M64N64K32.F32.BF16.BF16", 1),
    ("bf16", 16, 128, 32, 4, False, True, "SQMMA.M16N64K32.F32.BF16.BF16", 2),
    ("bf16", 128, 16, 32, 4, True, False, "SQMMA.M64N16K32.F32.BF16.BF16", 2),
    ("f16", 256, 64, 16, 4, False, False, "SQMMA.M128N64K16.F32.F16.F16", 2),
    ("bf16", 64, 256, 32, 4, True, True, "SQMMA.M64N128K32.F32.BF16.BF16", 2),
    ("bf16", 256, 32, 32, 8, True, False, "SQMMA.M128N32K32.F32.BF16.BF16", 1),
    ("f32", 128, 64, 16, 4, False, True, "SQMMA.M128N64K16.F32.TF32.TF32", 1),
    ("f32", 128, 64, 16, 4, True, False, "SQMMA.M128N32K16.F32.TF32.TF32", 2),
    ("f32", 128, 64, 8, 4, False, False, "SQMMA.M128N32K8.F32.TF32.TF32", 2),
    ("u8", 32, 128, 64, 4, False, False, "SQMMA.M32N128K64.U32.U8.U8", 1),
    ("u8", 128, 16, 32, 4, True, True, "SQMMA.M64N16K32.U32.U8.U8", 2),
    ("i8", 16, 128, 32, 4, False, False, "SQMMA.M16N64K32.S32.S8.S8", 2),
    ("e4m3", 32, 64, 64, 4, False, True, "SQMMA.M32N64K64.F32.E4M3.E4M3", 1),
]


@pytest.mark.parametrize("case", CASES,
                         ids=lambda c: "{}-{}x{}x{}-w{}-t{:d}{:d}".format(*c[:7]))
def test_sqmma_tiles(case, rng):
    """Each squad's part is one instruction shape, or a grid of one (the split: 16x128
    as 2 x 16x64, 128x16 as 2 x 64x16, 256x64 as 2 x 128x64, TF32 128x64 without K-major
    operands as 2 x 128x32 ...), accumulating into a loaded tile."""
    dt, M, N, K, warps, ta, tb, ins, per_k = case
    got, want, _, k = mma(rng, dt, M, N, K, warps, ta, tb)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    kstep = int(ins.split("K")[1].split(".")[0])
    assert _sqmmas(k) == [ins] * (per_k * K // kstep)
    mn = {tuple(int(x) for x in s.split(".")[1][1:].split("K")[0].split("N")) for s in _sqmmas(k)}
    assert mn <= {tuple(x) for x in mutile.machines.default().value("isa", "sqmma_mn")}


@pytest.mark.parametrize("dt,M,N,ta,tb", [("bf16", 128, 16, False, False),
                                          ("bf16", 64, 64, True, False),
                                          ("u8", 16, 128, False, True),
                                          ("f32", 128, 64, True, False)])
@pytest.mark.parametrize("na,nb", [(True, False), (False, True), (True, True)])
def test_sqmma_scale_in_negates(dt, M, N, ta, tb, na, nb, rng):
    """``neg_a`` / ``neg_b`` (ScaleIn): (-A) @ B, A @ (-B), (-A) @ (-B), split or not;
    the neg operand of every instruction says which."""
    got, want, _, k = mma(rng, dt, M, N, 32, ta=ta, tb=tb, na=na, nb=nb)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    neg = (1 if na else 0) | (2 if nb else 0)
    lines = [ln for ln in k.asm["musa"].splitlines() if ln.strip().startswith("SQMMA.M")]
    assert lines and all(ln.split("//")[0].rstrip().endswith(f", {neg}") for ln in lines)


@pytest.mark.parametrize("dt,M,N", [("bf16", 16, 128), ("bf16", 128, 16), ("bf16", 64, 64),
                                    ("u8", 128, 16)])
@pytest.mark.parametrize("accumulate,chain,reps", [(False, False, 1), (False, True, 1),
                                                   (True, True, 3), (True, False, 2)])
def test_sqmma_accumulate_chain_and_loop(dt, M, N, accumulate, chain, reps, rng):
    """Starting from zero or from the loaded tile, two SQMMAs chained in flight before one
    wait, and a loop carrying the accumulator: the split accumulator goes to the
    instructions' order and back at the right points."""
    got, want, _, _ = mma(rng, dt, M, N, 32, accumulate=accumulate, chain=chain, reps=reps)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_part_no_instruction_tiles_is_refused():
    """64x16 on two squads leaves each 32x16: no instruction shape tiles it."""
    with pytest.raises(mutile.CompilationError) as e:
        k_mma.warmup(T.PointerType(T.bf16), T.PointerType(T.bf16), T.PointerType(T.f32),
                     T.PointerType(T.f32), T.i32, DTYPE=T.bf16, A0=64, A1=16, B0=16, B1=16,
                     M=64, N=16, TA=False, TB=False, NA=False, NB=False, ACCUMULATE=True,
                     CHAIN=False, backend="pinghu", num_warps=8, grid=(1,))
    assert "no SQMMA instructions tile the accumulator's part of one WarpSquad: 64 rows " \
           "over 2 squad(s) give 32x16" in e.value.msg


@mutile.jit
def k_chain_two_tilings(d_ptr):
    a_s = ph.alloc_shared((128, 16), ml.float32)
    b_k = ph.alloc_shared((64, 16), ml.float32)       # N x K: K-major
    b_n = ph.alloc_shared((16, 64), ml.float32)       # K x N: MN-major
    acc = ph.sqmma(a_s, b_k, trans_b=True)
    acc = ph.sqmma(a_s, b_n, acc)  # LINE-MARK: ph.sqmma
    acc = ph.sqmma_wait(acc)
    r, c = ml.arange(0, 128), ml.arange(0, 64)
    ml.store(d_ptr + r[:, None] * 64 + c[None, :], acc)


def test_chaining_in_flight_across_tilings_is_refused():
    """TF32 128x64 is one instruction with K-major B, two 128x32 with MN-major B: their
    accumulator registers are laid out differently, so chaining them in flight is
    refused at the second SQMMA's line (a wait between them is fine)."""
    with pytest.raises(mutile.CompilationError) as e:
        k_chain_two_tilings.warmup(T.PointerType(T.f32), backend="pinghu", grid=(1,))
    m = marked(k_chain_two_tilings, "LINE-MARK")
    assert (e.value.loc.file, e.value.loc.line) == (m.file, m.line), str(e.value)
    assert "this SQMMA covers its accumulator with 128x32 instructions, the one in flight " \
           "on it with other shapes" in e.value.msg


@mutile.jit
def k_unread_result(a_ptr, y_ptr, M: ml.constexpr):
    """An SQMMA whose result nobody reads, then a tile computed before its wait."""
    r = ml.arange(0, M)
    a_s = ph.alloc_shared((M, M), ml.bfloat16)
    a_s.store(ml.load(a_ptr + r[:, None] * M + r[None, :]))
    ph.fence_shared()
    ph.sync_warps()
    ph.sqmma(a_s, a_s)
    x = r[:, None].to(ml.float32) * 3.0 + r[None, :].to(ml.float32)   # no loads, no addresses
    ph.sqmma_wait()
    ml.store(y_ptr + r[:, None] * M + r[None, :], x)


def _regs(text: str) -> set:
    """The registers an operand names: ``R7`` or ``R[a:b]``."""
    m = re.fullmatch(r"R(\d+)|R\[(\d+):(\d+)\]", text.strip())
    if not m:
        return set()
    return {int(m[1])} if m[1] else set(range(int(m[2]), int(m[3])))


def test_an_unread_sqmma_result_keeps_its_registers_until_the_wait(rng):
    """The result lands asynchronously, up to the wait: no instruction between the
    SQMMA and its wait may write its destination registers (they were given to the
    tile computed in between, since nothing read the result after the wait)."""
    a = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    y = poison((64, 64), np.float32)
    k_unread_result[(1,)](a, y, M=64, num_warps=4, backend="pinghu", sanitize=True)
    r = np.arange(64, dtype=np.float64)
    np.testing.assert_array_equal(y, r[:, None] * 3.0 + r[None, :])
    text = k_unread_result.warmup(a, y, M=64, num_warps=4, backend="pinghu",
                                  grid=(1,)).asm["musa"]
    lines = [ln.split("//")[0].strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(".") and not ln.endswith(":")]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("SQMMA.M"))
    end = next(i for i, ln in enumerate(lines) if ln == "SQMMA.WAIT")
    dest = _regs(lines[start].split(None, 1)[1].split(",")[0])
    assert dest
    for ln in lines[start + 1:end]:
        parts = ln.split(None, 1)
        if len(parts) == 2 and not parts[0].startswith(("LSU.ST", "@")):
            assert not dest & _regs(parts[1].split(",")[0]), ln
