"""Warp-wide rows: SHFL in every mode (immediate and register lanes, runs, under
divergence: inactive source lanes are still read) and WMMA for f16, bf16 and tf32 against
numpy, with runs of fragments."""
import ml_dtypes
import numpy as np
import pytest

from mutile.backends.pinghu.machine.units import warp
from mutile.backends.pinghu.isa import INSTRS
from mutile.backends.pinghu.isa.wmma import coords
from mutile.ir.fma import fma_f32

from ....conftest import assert_bits_equal, random_data
from .interp_kit import NT, PROLOGUE, from_image, header, poisoned, run, transfer

COVERS = {r.mnemonic for r in INSTRS if r.unit in ("SHFL", "WMMA")}
MODES = ["IDX", "UP", "DOWN", "BFLY"]


def shfl_ref(mode, x, b):
    """x (k, NT) values, b (k or 1, NT) lane operands -> shuffled values."""
    lane = np.arange(NT) % 32
    base = np.arange(NT) - lane
    b = np.broadcast_to(b.astype(np.int64), x.shape)
    src = {"IDX": b & 31, "BFLY": lane ^ (b & 31), "UP": lane - b, "DOWN": lane + b}[mode]
    src = np.where((src < 0) | (src > 31), lane, src)
    return np.take_along_axis(x, base + src, axis=1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lanes", ["imm", "run", "reg"])
def test_shfl(mode, lanes, rng):
    k = 4
    x = random_data(np.uint32, (k, NT), rng)
    if lanes == "imm":
        v = int(rng.integers(0, 32))
        b, op = np.full((1, NT), v), str(v)
    else:
        b = rng.integers(0, 40, (k if lanes == "run" else 1, NT)).astype(np.uint32)
        op = "R[72:76]" if lanes == "run" else "R72"
    y = poisoned(k)
    body = [transfer("LD", 1, 40, k), transfer("LD", 2, 72, b.shape[0]),
            f"        SHFL.{mode}.B32 R[8:12], R[40:44], {op}", transfer("ST", 0, 8, k)]
    run(header([("Y", "ptr"), ("X", "ptr"), ("B", "ptr")]) + PROLOGUE + "\n" + "\n".join(body)
        + "\n", [y, x, b.astype(np.uint32)], (2, 1, 1))
    assert_bits_equal(y, shfl_ref(mode, x, b), f"SHFL.{mode} {lanes}")


def test_shfl_reads_inactive_lanes():
    """Only odd lanes execute the shuffle (inside a divergent branch); they read the even
    lanes' registers; even lanes keep their value."""
    text = header([("Y", "ptr")]) + PROLOGUE + """
        S2R R0, SR_LANEID
        ALU.IMUL.S32 R4, R0, 10
        ALU.IADD.S32 R4, R4, 7
        ALU.LOP.AND.B32 R1, R0, 1
        ALU.ISETP.EQ.S32 P0, R1, 1
        SSY L_join
        @!P0 BRA L_join
        SHFL.BFLY.B32 R4, R4, 1
        SYNC
L_join:
        ALU.IMAD.WIDE.S32 R2, R250, 4, c[0x0]
        LSU.ST.GLOBAL.B32 [R2], R4
"""
    y = np.full(NT, -1, np.int32)
    run(text, [y], (2, 1, 1))
    lane = np.arange(NT) % 32
    assert_bits_equal(y, np.where(lane % 2, (lane ^ 1) * 10 + 7, lane * 10 + 7)
                      .astype(np.int32), "bfly")


# ---------------------------------------------------------------- WMMA
SHAPES = {"F16": ("M16N8K16", 16, np.float16), "BF16": ("M16N8K16", 16, ml_dtypes.bfloat16),
          "TF32": ("M16N8K8.TF32", 8, np.float32)}
DTYPE = {"F16": np.float16, "BF16": ml_dtypes.bfloat16, "TF32": np.float32}
WMMA_ROWS = [r for r in INSTRS if r.family == "WMMA"]


def fragments(mats: np.ndarray, shape: str, operand: str, ab: str) -> np.ndarray:
    """Matrices (warps, count, R, C) -> register image (count * regs, NT)."""
    r, c = coords(shape, operand)                       # (32, E)
    elems = mats[:, :, r, c]                            # (warps, count, 32, E)
    nw, cnt, _, e = elems.shape
    if operand != "C" and ab != "TF32":
        bits = np.ascontiguousarray(elems).view(np.uint16).reshape(nw, cnt, 32, e // 2, 2)
        regs = bits[..., 0].astype(np.uint32) | (bits[..., 1].astype(np.uint32) << 16)
    else:
        regs = np.ascontiguousarray(elems.astype(np.float32)).view(np.uint32)
    return np.ascontiguousarray(regs.transpose(1, 3, 0, 2).reshape(cnt * regs.shape[-1], nw * 32))


def mma_ref(a, b, c):
    """f32 accumulation with one rounding per k step, k ascending (exact products)."""
    acc = c.astype(np.float32)
    for kk in range(a.shape[-1]):
        acc = (acc + a[..., :, kk:kk + 1].astype(np.float32)
               * b[..., kk:kk + 1, :].astype(np.float32)).astype(np.float32)
    return acc


def test_wmma_rows_are_the_machine_files_shapes():
    """Every WMMA shape of the machine file has f16 and bf16 rows, tf32 its m16n8k8, and
    no row has another shape; each row's fragments cover its matrices once."""
    from mutile.machines import default
    want = {tuple(s) for s in default().value("isa", "wmma_shapes")}
    assert want == {(16, 8, 8), (16, 8, 16), (8, 16, 16), (16, 16, 16), (16, 16, 32)}
    got = {(r.attrs["m"], r.attrs["n"], r.attrs["k"]) for r in WMMA_ROWS}
    assert got == want
    for ab in ("F16", "BF16"):
        assert {(r.attrs["m"], r.attrs["n"], r.attrs["k"]) for r in WMMA_ROWS
                if r.attrs["ab"] == ab} == want
    assert [r.mnemonic for r in WMMA_ROWS if r.attrs["ab"] == "TF32"] == \
        ["WMMA.M16N8K8.F32.TF32.TF32"]


@pytest.mark.parametrize("row", WMMA_ROWS, ids=lambda r: r.mnemonic)
@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("chunk", [None, 1])
def test_wmma(row, count, chunk, rng, monkeypatch):
    """D = A @ B + C per warp (4 warps over 2 blocks) for every WMMA row, on random data:
    bit-exact against the k-ordered f32 rule and close to numpy's float64 product. With
    count 2 a single A fragment is broadcast over runs of B, C and D fragments; ``chunk``
    1: one warp at a time."""
    if chunk is not None:
        monkeypatch.setattr(warp, "_CHUNK", chunk)
    at = row.attrs
    lay, m, n, k, ab = at["layout"], at["m"], at["n"], at["k"], at["ab"]
    dt = DTYPE[ab]
    nw = NT // 32
    a = random_data(np.float32, (nw, 1, m, k), rng, specials=False).astype(dt)
    b = random_data(np.float32, (nw, count, k, n), rng, specials=False).astype(dt)
    c = random_data(np.float32, (nw, count, m, n), rng, specials=False)
    if ab == "TF32":            # tf32 inputs: f32 registers holding tf32 values
        a, b = (a.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32), \
            (b.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    fa, fb, fc = fragments(a, lay, "A", ab), fragments(b, lay, "B", ab), \
        fragments(c, lay, "C", ab)
    assert [s.width for s in row.operands] == [fc.shape[0] // count, fa.shape[0],
                                               fb.shape[0] // count, fc.shape[0] // count]
    d_regs = fc.shape[0]
    y = poisoned(d_regs)
    run_or_reg = (lambda base, n: f"R[{base}:{base + n}]") if count > 1 else \
        (lambda base, n: f"R{base}")
    body = [transfer("LD", 1, 40, fa.shape[0]), transfer("LD", 2, 72, fb.shape[0]),
            transfer("LD", 3, 104, fc.shape[0]),
            f"        {row.mnemonic} {run_or_reg(8, d_regs)}, R40, "
            f"{run_or_reg(72, fb.shape[0])}, {run_or_reg(104, fc.shape[0])}",
            transfer("ST", 0, 8, d_regs)]
    run(header([("Y", "ptr"), ("A", "ptr"), ("B", "ptr"), ("C", "ptr")]) + PROLOGUE + "\n"
        + "\n".join(body) + "\n", [y, fa, fb, fc], (2, 1, 1))
    want = mma_ref(np.broadcast_to(a, (nw, count, m, k)), b, c)
    assert_bits_equal(y, fragments(want, lay, "C", ab), row.mnemonic)
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    got = np.empty_like(want)
    r, col = coords(lay, "C")
    img = from_image(y, np.float32).reshape(count, -1, nw, 32)      # (count, regs, warps, lane)
    got[:, :, r, col] = img.transpose(2, 0, 3, 1)
    assert np.abs(got - exact).max() <= 2 * k * 2.0 ** -24 * (
        np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(c)).max()


def test_wmma_bf16_tiny_products_round_once(rng):
    """bf16 products below f32's normal range: each k step is one fma (the product is not
    rounded to f32 first), like the llvm backend's dot."""
    shape, k, dt = SHAPES["BF16"]
    nw = NT // 32
    a = (random_data(np.float32, (nw, 1, 16, k), rng, specials=False) * 2.0 ** -66).astype(dt)
    b = (random_data(np.float32, (nw, 1, k, 8), rng, specials=False) * 2.0 ** -66).astype(dt)
    c = random_data(np.float32, (nw, 1, 16, 8), rng, specials=False) * np.float32(2.0 ** -126)
    fa, fb, fc = fragments(a, shape, "A", "BF16"), fragments(b, shape, "B", "BF16"), \
        fragments(c, shape, "C", "BF16")
    y = poisoned(4)
    body = [transfer("LD", 1, 40, 4), transfer("LD", 2, 72, 2), transfer("LD", 3, 104, 4),
            f"        WMMA.{shape}.F32.BF16.BF16 R8, R40, R72, R104", transfer("ST", 0, 8, 4)]
    run(header([("Y", "ptr"), ("A", "ptr"), ("B", "ptr"), ("C", "ptr")]) + PROLOGUE + "\n"
        + "\n".join(body) + "\n", [y, fa, fb, fc], (2, 1, 1))
    want = c.copy()
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    for kk in range(k):
        want = fma_f32(a32[..., :, kk:kk + 1], b32[..., kk:kk + 1, :], want)
    assert_bits_equal(y, fragments(want, shape, "C", "BF16"), "WMMA bf16 tiny products")
    assert not np.array_equal(want, mma_ref(a, b, c)), "the products must underflow"


def test_wmma_under_a_guard(rng):
    """Lanes whose guard is false keep their D registers (the warp still reads every
    lane's fragments)."""
    shape, k, dt = SHAPES["F16"]
    nw = NT // 32
    a = random_data(np.float32, (nw, 1, 16, k), rng, specials=False).astype(dt)
    b = random_data(np.float32, (nw, 2, k, 8), rng, specials=False).astype(dt)
    c = random_data(np.float32, (nw, 2, 16, 8), rng, specials=False)
    fa, fb, fc = fragments(a, shape, "A", "F16"), fragments(b, shape, "B", "F16"), \
        fragments(c, shape, "C", "F16")
    y = poisoned(8)
    body = [transfer("LD", 1, 40, 4), transfer("LD", 2, 72, 4), transfer("LD", 3, 104, 8),
            "        S2R R1, SR_LANEID", "        ALU.ISETP.LT.S32 P0, R1, 13",
            "        ALU.MOV.IMM R[8:16], 0x7fc00005",
            f"        @P0 WMMA.{shape}.F32.F16.F16 R[8:16], R40, R[72:76], R[104:112]",
            transfer("ST", 0, 8, 8)]
    run(header([("Y", "ptr"), ("A", "ptr"), ("B", "ptr"), ("C", "ptr")]) + PROLOGUE + "\n"
        + "\n".join(body) + "\n", [y, fa, fb, fc], (2, 1, 1))
    want = fragments(mma_ref(np.broadcast_to(a, (nw, 2, 16, k)), b, c), shape, "C", "F16")
    on = (np.arange(NT) % 32) < 13
    assert_bits_equal(y, np.where(on, want, np.uint32(0x7fc00005)), "guarded WMMA")


@pytest.mark.parametrize("ab", ["F16", "BF16"])
@pytest.mark.parametrize("which", ["subnormal", "inf-nan"])
def test_wmma_special_inputs(ab, which, rng):
    """Subnormal, infinite and NaN fragment elements (16-bit inputs are widened exactly;
    each k step is one fma)."""
    shape, k, dt = SHAPES[ab]
    nw = NT // 32
    a = random_data(np.float32, (nw, 1, 16, k), rng, specials=False).astype(dt)
    b = random_data(np.float32, (nw, 2, k, 8), rng, specials=False).astype(dt)
    c = random_data(np.float32, (nw, 2, 16, 8), rng, specials=False)
    tiny = float(ml_dtypes.finfo(dt).smallest_subnormal)
    sp = [tiny, -3 * tiny, 0.0, -0.0] if which == "subnormal" else \
        [np.inf, -np.inf, np.nan, 0.0]
    for x in (a, b):
        flat = x.reshape(-1)
        pick = rng.choice(flat.size, flat.size // 8, replace=False)
        flat[pick] = np.array(sp, np.float32)[rng.integers(0, len(sp), pick.size)].astype(dt)
    fa, fb, fc = fragments(a, shape, "A", ab), fragments(b, shape, "B", ab), \
        fragments(c, shape, "C", ab)
    y = poisoned(8)
    body = [transfer("LD", 1, 40, 4), transfer("LD", 2, 72, 4), transfer("LD", 3, 104, 8),
            f"        WMMA.{shape}.F32.{ab}.{ab} R[8:16], R40, R[72:76], R[104:112]",
            transfer("ST", 0, 8, 8)]
    with np.errstate(all="ignore"):
        run(header([("Y", "ptr"), ("A", "ptr"), ("B", "ptr"), ("C", "ptr")]) + PROLOGUE
            + "\n" + "\n".join(body) + "\n", [y, fa, fb, fc], (2, 1, 1))
        want = c.copy()
        a32, b32 = np.broadcast_to(a, b.shape[:2] + (16, k)).astype(np.float32), \
            b.astype(np.float32)
        for kk in range(k):
            want = fma_f32(a32[..., :, kk:kk + 1], b32[..., kk:kk + 1, :], want)
    assert_bits_equal(from_image(y, np.float32),
                      from_image(fragments(want, shape, "C", ab), np.float32), f"WMMA {ab}")
