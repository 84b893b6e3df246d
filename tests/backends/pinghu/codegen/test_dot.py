"""dot on the pinghu backend (backends/pinghu/codegen/lowering/dot.py): the WMMA lowering and the FFMA
lowering, bit for bit against the llvm backend (docs/semantics.md: acc + a @ b, each
product and sum rounded in acc's type, k ascending), and within rounding of a float64
numpy reference.

Kernels load A (M x K), B (K x N) and the accumulator, call ``ml.dot`` and store the
result. Cases cover f16, bf16, fp8 (e4m3, e5m2), f32 (ieee and tf32), f64, int8/uint8
into int32 (and int64) and narrow float accumulators; shapes 16..128, non-square, and
shapes that are not multiples of the WMMA tile (the FFMA fallback); 1, 2, 4 and 8 warps,
replicated layouts (fewer outputs than threads) and warps left without a tile. Every
program is verified, survives text -> binary -> text and the assembler, and runs with
the shared-memory sanitizer on a poisoned output. A matmul loop runs through
``kernel[grid](..., backend="pinghu")``.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import ir as mir
from mutile.backends import llvm as llvm_backend
from mutile.backends.pinghu import disassemble, encode
from mutile.backends.pinghu.codegen.lowering.dot import frag_geometry
from mutile.backends.pinghu.codegen.generate import generate
from mutile.backends.pinghu.machine.scheduler import execute
from mutile.backends.pinghu.kernel import check_round_trip
from mutile.backends.pinghu.isa.wmma import coords
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ....conftest import assert_bits_equal, poison, random_data

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I8, U8, I32, I64 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32), np.dtype(np.int64)


@mutile.jit
def dot_kernel(A, B, C, O, M: ml.constexpr, N: ml.constexpr, K: ml.constexpr,
               PREC: ml.constexpr, USE_ACC: ml.constexpr):
    rm, rn, rk = ml.arange(0, M), ml.arange(0, N), ml.arange(0, K)
    a = ml.load(A + rm[:, None] * K + rk[None, :])
    b = ml.load(B + rk[:, None] * N + rn[None, :])
    c = ml.load(C + rm[:, None] * N + rn[None, :]) if USE_ACC else None
    r = ml.dot(a, b, c, input_precision=PREC)
    ml.store(O + rm[:, None] * N + rn[None, :], r)


@functools.lru_cache(maxsize=None)
def _module_text(mnk: tuple, ab: np.dtype, acc: np.dtype, prec: str, use_acc: bool) -> str:
    M, N, K = mnk
    st = T.scalar_from_numpy
    spec = {"A": T.PointerType(st(ab)), "B": T.PointerType(st(ab)),
            "C": T.PointerType(st(acc)), "O": T.PointerType(st(acc)),
            "M": M, "N": N, "K": K, "PREC": prec, "USE_ACC": use_acc}
    module, _, _ = frontend_and_passes(dot_kernel, spec, {})
    return str(module)


def _module(mnk, ab, acc, prec, use_acc):
    return mir.verify(mir.parse(_module_text(tuple(mnk), np.dtype(ab), np.dtype(acc), prec,
                                             use_acc)))


def compile_pinghu(mnk, ab, acc, prec="ieee", use_acc=True, num_warps=4, wmma=True):
    """The verified, round-tripped program of one dot kernel."""
    program = generate(_module(mnk, ab, acc, prec, use_acc),
                       {"num_warps": num_warps, "wmma": wmma})
    program.verify()
    check_round_trip(disassemble(program), encode(program))
    return program


def run_pinghu(args, mnk, ab, acc, prec="ieee", use_acc=True, num_warps=4, wmma=True):
    """(output, program): the poisoned output after one sanitized run."""
    program = compile_pinghu(mnk, ab, acc, prec, use_acc, num_warps, wmma)
    out = poison((mnk[0], mnk[1]), acc)
    execute(program, [*args, out], (1, 1, 1), sanitize=True)
    return out, program


def run_llvm(args, mnk, ab, acc, prec="ieee", use_acc=True):
    k = llvm_backend.compile(_module(mnk, ab, acc, prec, use_acc), {})
    out = poison((mnk[0], mnk[1]), acc)
    k.run([*args, out], (1,))
    return out


def inputs(mnk, ab, acc, rng):
    """Random A, B and accumulator (small integers for integer dots, normal-range floats
    otherwise, so every product is exact where the contract says so)."""
    M, N, K = mnk
    if ab.kind in "iu":
        return (random_data(ab, (M, K), rng), random_data(ab, (K, N), rng),
                rng.integers(-1000, 1000, (M, N)).astype(acc))
    return (random_data(ab, (M, K), rng, specials=False),
            random_data(ab, (K, N), rng, specials=False),
            random_data(acc, (M, N), rng, specials=False))


def reference(a, b, c, acc, use_acc):
    """float64 numpy ``c + a @ b`` (integers exactly, wrapped to the accumulator type)."""
    c0 = c if use_acc else np.zeros_like(c)
    if acc.kind in "iu":
        return (a.astype(np.int64) @ b.astype(np.int64) + c0.astype(np.int64)).astype(acc)
    return a.astype(np.float64) @ b.astype(np.float64) + c0.astype(np.float64)


def check_close(got, a, b, c, acc, use_acc, tf32=False):
    """Within the fma chain's rounding of the float64 reference."""
    want = reference(a, b, c, acc, use_acc)
    if acc.kind in "iu":
        assert_bits_equal(got, want, "integer dot vs numpy")
        return
    a64, b64 = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    mag = a64 @ b64 + np.abs(c.astype(np.float64))
    eps = float(ml_dtypes.finfo(acc).eps) * (a.shape[1] + 2) + (2.0 ** -10 if tf32 else 0)
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= eps * mag).all(), f"max error {err.max():.3g}"


def wmma_count(program) -> int:
    return sum(ins.op.unit == "WMMA" for ins in program.instructions)


# ---------------------------------------------------------------- WMMA and FFMA vs llvm
# (M, N, K), operand dtype, accumulator dtype, precision, WMMA expected
CASES = [
    ((16, 8, 16), F16, F32, "ieee", True),
    ((64, 64, 32), F16, F32, "ieee", True),
    ((32, 128, 16), F16, F32, "ieee", True),
    ((128, 16, 32), BF16, F32, "ieee", True),
    ((32, 32, 64), BF16, F32, "ieee", True),
    ((64, 32, 16), E4M3, F32, "ieee", True),
    ((16, 64, 32), E5M2, F32, "ieee", True),
    ((64, 16, 8), F32, F32, "tf32", True),
    ((32, 64, 32), F32, F32, "tf32", True),
    ((32, 32, 32), F32, F32, "ieee", False),
    ((16, 16, 8), F16, F32, "ieee", False),      # K not a multiple of 16
    ((8, 32, 16), BF16, F32, "ieee", False),     # M not a multiple of 16
    ((32, 4, 16), F16, F32, "ieee", False),      # N not a multiple of 8
    ((16, 16, 4), F32, F32, "tf32", False),      # K not a multiple of 8
    ((32, 16, 32), I8, I32, "ieee", False),
    ((16, 32, 16), U8, I32, "ieee", False),
    ((32, 16, 16), I8, I64, "ieee", False),
    ((32, 32, 16), F64, F64, "ieee", False),
    ((16, 16, 32), F16, F16, "ieee", False),     # each step rounded to f16
    ((16, 32, 16), BF16, BF16, "ieee", False),
    ((32, 16, 16), F64, F32, "ieee", False),     # f64 fma rounded to f32 per step
    ((16, 16, 16), F32, F16, "tf32", False),     # no tf32 rounding for an f16 acc
    ((4, 4, 4), F32, F32, "ieee", False),        # replicated on every warp count
]


def _case_id(c):
    (M, N, K), ab, acc, prec, _ = c
    return f"{M}x{N}x{K}-{ab.name}-{acc.name}-{prec}"


WARPS = [(c, w) for c in CASES for w in (1, 2, 4, 8)]


@pytest.mark.parametrize("case,num_warps", WARPS, ids=[f"{_case_id(c)}-{w}w" for c, w in WARPS])
def test_dot_matches_llvm(case, num_warps, rng):
    mnk, ab, acc, prec, uses_wmma = case
    args = inputs(mnk, ab, acc, rng)
    want = run_llvm(args, mnk, ab, acc, prec)
    got, program = run_pinghu(args, mnk, ab, acc, prec, num_warps=num_warps)
    assert (wmma_count(program) > 0) == uses_wmma
    assert_bits_equal(got, want, f"pinghu vs llvm, {num_warps} warps")
    check_close(got, *args, acc, True, tf32=prec == "tf32")


WMMA_CASES = [c for c in CASES if c[4]]


# one warp only for small tiles: 64x64 on one warp spills heavily and runs for seconds
WMMA_WARPS = [(c, w) for c in WMMA_CASES for w in (1, 4, 8)
              if w > 1 or c[0][0] * c[0][1] <= 1024]


@pytest.mark.parametrize("case,num_warps", WMMA_WARPS,
                         ids=[f"{_case_id(c)}-{w}w" for c, w in WMMA_WARPS])
def test_wmma_equals_ffma(case, num_warps, rng):
    """Forcing the FFMA path gives the same bits (WMMA's per-k f32 rounding of exact
    products is the fma chain), with and without an accumulator."""
    mnk, ab, acc, prec, _ = case
    args = inputs(mnk, ab, acc, rng)
    for use_acc in (True, False):
        w, pw = run_pinghu(args, mnk, ab, acc, prec, use_acc, num_warps, wmma=True)
        f, pf = run_pinghu(args, mnk, ab, acc, prec, use_acc, num_warps, wmma=False)
        assert wmma_count(pw) > 0 and wmma_count(pf) == 0
        assert_bits_equal(w, f, f"wmma vs ffma, use_acc={use_acc}")
        check_close(w, *args, acc, use_acc, tf32=prec == "tf32")


@pytest.mark.parametrize("ab,acc", [(F16, F32), (I8, I32), (F64, F32)])
def test_no_accumulator(ab, acc, rng):
    """``ml.dot(a, b)`` starts from zeros (a uniform accumulator, never loaded), in f32
    for float operands (f64 ones too: each f64 fma rounds to f32), int32 for int8."""
    mnk = (32, 16, 32)
    args = inputs(mnk, ab, acc, rng)
    got, _ = run_pinghu(args, mnk, ab, acc, use_acc=False)
    assert_bits_equal(got, run_llvm(args, mnk, ab, acc, use_acc=False), "no acc")
    check_close(got, *args, acc, False)


# ---------------------------------------------------------------- code shape
def test_wmma_runs_and_instruction_count():
    """64x64x32 f16 on 4 warps: each warp owns one row of 8 output tiles, so the k loop
    is one WMMA per k step over a run of 8 B and C fragments, with one load of A and one
    of the B run each; the whole dot stays small."""
    program = compile_pinghu((64, 64, 32), F16, F32)
    text = disassemble(program)
    wmmas = [ln.split() for ln in text.splitlines() if "WMMA." in ln]
    assert len(wmmas) == 2
    for parts in wmmas:
        d, a, b, c = (x.rstrip(",") for x in parts[1:5])
        assert d == c and d.startswith("R[") and b.startswith("R[") and not a.startswith("R[")
        lo, hi = (int(x) for x in d[2:-1].split(":"))
        assert hi - lo == 32                 # 8 fragments of 4 registers
    line = [i.loc.line for i in program.instructions if i.op.unit == "WMMA"][0]
    dot = [i for i in program.instructions if i.loc is not None and i.loc.line == line]
    assert len(dot) <= 60, len(dot)
    assert sum(i.op.unit == "BAR" for i in dot) == 3


def test_tall_dot_runs_over_rows():
    """128x8 has one tile column: the run goes down the rows (A run, single B)."""
    program = compile_pinghu((128, 8, 16), F16, F32, num_warps=2)
    wmmas = [ln.split() for ln in disassemble(program).splitlines() if "WMMA." in ln]
    assert len(wmmas) == 1
    a, b = (x.rstrip(",") for x in wmmas[0][2:4])
    assert a.startswith("R[") and not b.startswith("R[")


def test_ffma_k_chunks():
    """The FFMA path loads 4 k's of A with one B128 load and issues one FFMA per k."""
    program = compile_pinghu((32, 32, 32), F32, F32, num_warps=4)
    names = [i.op.mnemonic for i in program.instructions]
    assert names.count("ALU.FFMA.F32") == 32
    assert names.count("LSU.LD.SHARED.B128") == 8


def test_frag_geometry_reproduces_the_table():
    """The lane base and load steps the codegen derives give back every fragment
    element of backends/pinghu/isa/wmma.py (B read transposed)."""
    for shape, size in (("M16N8K16", 2), ("M16N8K8", 4)):
        for op in ("A", "B", "C"):
            per = 2 if op == "C" else 4 // size
            lane_g, lane_t, steps = frag_geometry(shape, op, per)
            rows, cols = coords(shape, op)
            if op == "B":
                rows, cols = cols, rows
            lane = np.arange(32)
            g, t = lane >> 2, lane & 3
            for e in range(rows.shape[1]):
                i, j = divmod(e, per)
                dr = sum(s[0] for b, s in enumerate(steps) if i >> b & 1)
                dc = sum(s[1] for b, s in enumerate(steps) if i >> b & 1) + j
                assert (rows[:, e] == g * lane_g[0] + t * lane_t[0] + dr).all()
                assert (cols[:, e] == g * lane_g[1] + t * lane_t[1] + dc).all()


# ---------------------------------------------------------------- through the runtime
@mutile.jit
def matmul_loop(A, B, C, M, N, K, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr,
                PREC: ml.constexpr):
    """C = A @ B by a k loop of dots over BM x BN tiles (a 2-D grid)."""
    rm = ml.program_id(0) * BM + ml.arange(0, BM)
    rn = ml.program_id(1) * BN + ml.arange(0, BN)
    rk = ml.arange(0, BK)
    acc = ml.zeros((BM, BN), dtype=ml.float32)
    for k0 in range(0, K, BK):
        a = ml.load(A + rm[:, None] * K + (k0 + rk)[None, :])
        b = ml.load(B + (k0 + rk)[:, None] * N + rn[None, :])
        acc = ml.dot(a, b, acc, input_precision=PREC)
    ml.store(C + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("ab,prec,num_warps", [(F16, "ieee", 4), (BF16, "ieee", 2),
                                               (F32, "tf32", 4), (F32, "ieee", 8)])
def test_matmul_loop(ab, prec, num_warps, rng):
    M, N, K, BM, BN, BK = 64, 48, 96, 32, 16, 32
    a = random_data(ab, (M, K), rng, specials=False)
    b = random_data(ab, (K, N), rng, specials=False)
    outs = {}
    for backend in ("llvm", "pinghu"):
        c = poison((M, N), np.float32)
        matmul_loop[(M // BM, N // BN)](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, PREC=prec,
                                         num_warps=num_warps, backend=backend)
        outs[backend] = c
    assert_bits_equal(outs["pinghu"], outs["llvm"], "matmul loop")
    check_close(outs["pinghu"], a, b, np.zeros((M, N), np.float32), F32, False,
                tf32=prec == "tf32")


@pytest.mark.parametrize("ab", [F16, E4M3])
def test_wmma_specials(ab, rng):
    """0, -0, inf, NaN and subnormal operands (a[0, :8] and b[0, :8]; 0 * inf meets at
    k = 0; f16 products are exact in f32, even of subnormals): WMMA still agrees with
    llvm bit for bit (NaN for any NaN)."""
    mnk = (32, 16, 32)
    a = random_data(ab, (32, 32), rng)
    b = random_data(ab, (32, 16), rng)
    c = random_data(F32, (32, 16), rng)
    got, program = run_pinghu((a, b, c), mnk, ab, F32)
    assert wmma_count(program) > 0
    assert_bits_equal(got, run_llvm((a, b, c), mnk, ab, F32), "specials")
