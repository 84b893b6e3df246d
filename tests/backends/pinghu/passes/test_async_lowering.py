"""The automatic asynchronous lowering (passes ``pipeline`` and ``sqmma``): plain
Triton-dialect kernels come out with TME copies, AsyncBarriers and SQMMA, and stay
correct on ragged sizes, any stage count, with and without warp specialization."""
import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.kernels import attention_basic as fa
from mutile.kernels import matmul as mm

BF16, E4M3 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn


@mutile.jit
def range_ws_matmul(a_desc, b_desc, c_ptr, M, N, K, BM: ml.constexpr, BN: ml.constexpr,
                    BK: ml.constexpr):
    """A descriptor matmul whose loop asks for pipelining and warp specialization."""
    pid_m, pid_n = ml.program_id(0), ml.program_id(1)
    acc = ml.zeros((BM, BN), ml.float32)
    for k in ml.range(0, K, BK, num_stages=2, warp_specialize=True):
        acc = ml.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
    rm = pid_m * BM + ml.arange(0, BM)
    rn = pid_n * BN + ml.arange(0, BN)
    ml.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@mutile.jit
def const_stride_matmul(a_ptr, b_ptr, c_ptr, M, LDA: ml.constexpr):
    """A's rows are a constant LDA elements apart (TME copies them when LDA * 2 bytes is a
    multiple of 4); B's rows always can be."""
    a_d = ml.make_tensor_descriptor(a_ptr, shape=[M, 100], strides=[LDA, 1],
                                    block_shape=[64, 64])
    b_d = ml.make_tensor_descriptor(b_ptr, shape=[100, 64], strides=[64, 1],
                                    block_shape=[64, 64])
    acc = ml.zeros((64, 64), ml.float32)
    for k in range(0, 100, 64):
        acc = ml.dot(a_d.load([0, k]), b_d.load([k, 0]), acc)
    r = ml.arange(0, 64)
    ml.store(c_ptr + r[:, None] * 64 + r[None, :], acc)


def _operands(rng, M, N, K, dtype):
    a = rng.uniform(-2, 2, (M, K)).astype(dtype)
    b = rng.uniform(-2, 2, (K, N)).astype(dtype)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def _desc_matmul(a, b, **opts):
    M, K = a.shape
    N = b.shape[1]
    c = np.full((M, N), np.nan, np.float32)
    k = mm.matmul_descriptor_kernel[(-(-M // 64), -(-N // 64))](
        a, b, c, M, N, K, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, backend="pinghu", **opts)
    return c, k


def _mnemonics(k) -> set:
    return {ln.split()[0] if not ln.strip().startswith("@") else ln.split()[1]
            for ln in k.asm["musa"].splitlines() if ln.startswith("        ")}


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("ws", [False, True])
def test_descriptor_matmul_pipelined(stages, ws, rng):
    a, b, want = _operands(rng, 200, 136, 88, BF16)      # ragged, 16-byte aligned rows
    got, k = _desc_matmul(a, b, num_stages=stages, warp_specialize=ws)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    names = _mnemonics(k)
    assert "TME.LD.TILE.2D" in names and "ASYNC.BAR.WAIT" in names
    assert any(n.startswith("SQMMA.M64N64K64.F32.BF16.BF16") for n in names)
    ir = k.asm["pinghu_ir"]
    assert f"shape = [{stages}, 64, 64]" in ir
    assert ("ph.warp_specialize" in ir) == ws


@pytest.mark.parametrize("ws", [False, True])
def test_descriptor_matmul_fp8(ws, rng):
    a, b, want = _operands(rng, 130, 64, 96, E4M3)
    got, k = _desc_matmul(a, b, num_stages=2, warp_specialize=ws)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert any(n.startswith("SQMMA.M64N64K") and n.endswith(".E4M3.E4M3")
               for n in _mnemonics(k))


@pytest.mark.parametrize("backend", ["llvm", "pinghu"])
def test_range_warp_specialize(backend, rng):
    """``ml.range(..., num_stages=2, warp_specialize=True)``: a producer warp and consumer
    squads on Pinghu (host TensorDescriptor arguments); the plain loop on llvm."""
    a, b, want = _operands(rng, 96, 80, 144, BF16)
    c = np.full((96, 80), np.nan, np.float32)
    k = range_ws_matmul[(2, 2)](mutile.TensorDescriptor(a, [64, 64]),
                                mutile.TensorDescriptor(b, [64, 64]), c, 96, 80, 144,
                                BM=64, BN=64, BK=64, backend=backend)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    if backend == "pinghu":
        assert "ph.warp_specialize {warps = [4, 1]}" in k.asm["pinghu_ir"]
        assert "shape = [2, 64, 64]" in k.asm["pinghu_ir"]
        assert k.metadata["threads_per_block"] == 160


@pytest.fixture
def executed(monkeypatch):
    """The interpreter's Stats of every launch from here on (by_unit counts the warp
    instructions each unit executed), recorded around the real ``execute``."""
    from mutile.backends.pinghu.machine import scheduler
    seen, real = [], scheduler.execute

    def spy(*a, **kw):
        stats = real(*a, **kw)
        seen.append(stats)
        return stats
    monkeypatch.setattr(scheduler, "execute", spy)
    return seen


@pytest.mark.parametrize("backend", ["llvm", "pinghu"])
@pytest.mark.parametrize("K, tme", [(100, True), (64, True), (101, False)])
def test_rows_need_4_byte_alignment_for_tme(backend, K, tme, rng, executed):
    """TME's global alignment is the machine file's 4 bytes: K = 100 bf16 rows (200 bytes,
    not a multiple of 16) take the pipelined TME loop at run time, K = 101 (202 bytes)
    the loop's original form (still on SQMMA, operands staged through shared memory);
    the llvm backend runs the plain loop. All match numpy in float64."""
    a, b, want = _operands(rng, 64, 64, K, BF16)
    M, N = a.shape[0], b.shape[1]
    c = np.full((M, N), np.nan, np.float32)
    k = mm.matmul_descriptor_kernel[(1, 1)](a, b, c, M, N, K, BLOCK_M=64, BLOCK_N=64,
                                            BLOCK_K=64, backend=backend)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    if backend == "pinghu":
        assert "TME.LD.TILE.2D" in _mnemonics(k) and "ph.desc_aligned" in k.asm["pinghu_ir"]
        assert (executed[-1].by_unit.get("TME", 0) > 0) == tme, executed[-1].by_unit


@pytest.mark.parametrize("lda, pipelined", [(101, 1), (100, 2)])
def test_constant_stride_pipelined_when_4_byte_aligned(lda, pipelined, rng):
    """A constant row stride is checked at compile time: 202 bytes can never be
    TME-copied (A is not pipelined, B is), 200 bytes can (both are)."""
    a, b, want = _operands(rng, 64, 64, 100, BF16)
    a_mem = np.zeros((64, lda), BF16)
    a_mem[:, :100] = a
    c = np.full((64, 64), np.nan, np.float32)
    k = const_stride_matmul[(1,)](a_mem, b, c, 64, LDA=lda, backend="pinghu")
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    ir = k.asm["pinghu_ir"]
    assert ir.count("ph.tme_load") >= 1 and "shape = [3, 64, 64]" in ir
    assert ir.count("ph.alloc_shared {dtype = bf16, shape = [3,") == pipelined


def test_eight_warps_two_squads(rng):
    a, b, want = _operands(rng, 128, 64, 128, BF16)
    M, K = a.shape
    c = np.full((M, 64), np.nan, np.float32)
    k = mm.matmul_descriptor_kernel[(1, 1)](a, b, c, M, 64, K, BLOCK_M=128, BLOCK_N=64,
                                            BLOCK_K=64, backend="pinghu", num_warps=8)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    assert any(n.startswith("SQMMA.M64N64K64") for n in _mnemonics(k))


def test_no_async_lowering_option(rng):
    a, b, want = _operands(rng, 64, 64, 64, BF16)
    got, k = _desc_matmul(a, b, async_lowering=False)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    names = _mnemonics(k)
    assert not any(n.startswith(("TME.", "SQMMA")) for n in names)


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_attention_uses_sqmma(dtype, rng):
    q, k, v = (rng.standard_normal((2, 100, 64)).astype(dtype) for _ in range(3))
    got = fa.attention(q, k, v, backend="pinghu")
    want = fa.attention_reference(q, k, v)
    np.testing.assert_allclose(got.astype(np.float64), want, atol=2e-2, rtol=2e-2)
    kern = [c for c in fa.attention_fwd_kernel.cache.values()
            if c.options.get("backend") == "pinghu" and c.spec["Q"].element_ty.name ==
            np.dtype(dtype).name.replace("float16", "f16").replace("bfloat16", "bf16")][-1]
    assert any(n.startswith("SQMMA.") for n in _mnemonics(kern))


@pytest.mark.parametrize("backend", ["llvm", "pinghu"])
def test_attention_descriptors_use_tme(backend, rng):
    q, k, v = (rng.standard_normal((2, 100, 64)).astype(BF16) for _ in range(3))
    out = np.full(q.shape, np.nan, BF16)
    got = fa.attention_desc(q, k, v, backend=backend)
    out[...] = got
    want = fa.attention_reference(q, k, v)
    np.testing.assert_allclose(out.astype(np.float64), want, atol=2e-2, rtol=2e-2)
    if backend == "pinghu":
        kern = [c for c in fa.attention_desc_kernel.cache.values()
                if c.options.get("backend") == "pinghu"][-1]
        names = _mnemonics(kern)
        assert "TME.LD.TILE.2D" in names and any(n.startswith("SQMMA.") for n in names)


def test_docs_schedule_listing_is_current():
    """docs/pinghu-async.md quotes the pipelined GEMM's main loop: it must be what the
    compiler prints today (the `#` notes stripped, paths from kernels/)."""
    import re
    from pathlib import Path

    from mutile.ir import types as T
    from mutile.kernels import pinghu_gemm as pg
    doc = (Path(__file__).parents[4] / "docs" / "pinghu-async.md").read_text()
    block = doc.split("## The pipelined GEMM's schedule")[1].split("```")[1].strip("\n")
    quoted = [ln if ln.strip().startswith("//") else re.sub(r"\s+# .*$", "", ln)
              for ln in block.splitlines()]
    d = T.DescType(T.bf16, (64, 64))
    k = pg.gemm_tme_kernel.warmup(d, d, T.DescType(T.f32, (64, 64)), T.i32, BM=64, BN=64,
                                  BK=64, STAGES=3, NUM_WARPS=4, backend="pinghu", grid=(1,))
    text = re.sub(r"// \S*kernels/", "// kernels/", k.asm["musa"])
    start = text.index(quoted[0] + "\n")
    assert text[start:].splitlines()[:len(quoted)] == quoted


@mutile.jit
def small_dot(a_ptr, b_ptr, c_ptr, d_ptr, M: ml.constexpr, N: ml.constexpr,
              K: ml.constexpr):
    rm, rn, rk = ml.arange(0, M), ml.arange(0, N), ml.arange(0, K)
    a = ml.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = ml.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = ml.load(c_ptr + rm[:, None] * N + rn[None, :])
    ml.store(d_ptr + rm[:, None] * N + rn[None, :], ml.dot(a, b, acc))


@pytest.mark.parametrize("M, N, sqmma", [(64, 64, "SQMMA.M64N64K64.U32.U8.U8"),
                                         (32, 128, "SQMMA.M32N128K64.U32.U8.U8"),
                                         (16, 16, None)])
def test_u8_dot_accumulates_into_u32(M, N, sqmma, backend, rng):
    """u8 x u8 -> u32 (wrapping): an SQMMA of the machine file's shapes on Pinghu (16x16
    is none: the dot stays off SQMMA), the same numbers on llvm."""
    K = 64
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(0, 256, (K, N)).astype(np.uint8)
    c = rng.integers(0, 2**32, (M, N)).astype(np.uint32)
    d = np.full((M, N), 0xFFFFFFFF, np.uint32)
    k = small_dot[(1,)](a, b, c, d, M=M, N=N, K=K, backend=backend)
    want = (c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)) & 0xFFFFFFFF
    assert np.array_equal(d, want.astype(np.uint32))
    if backend == "pinghu":
        names = {n for n in _mnemonics(k) if n.startswith("SQMMA.M")}
        assert names == ({sqmma} if sqmma else set()), names


@pytest.mark.parametrize("M, N, warps, sqmma", [(16, 16, 4, None), (128, 16, 4, None),
                                                (16, 64, 4, "SQMMA.M16N64K32"),
                                                (128, 32, 8, "SQMMA.M64N32K32")])
def test_dot_takes_sqmma_only_in_the_machine_files_shapes(M, N, warps, sqmma, backend, rng):
    """The sqmma pass maps a dot whose squads' part is one instruction shape (16x16 or
    128x16 on one squad are not: they stay on WMMA); results agree on both backends."""
    a = rng.uniform(-2, 2, (M, 32)).astype(BF16)
    b = rng.uniform(-2, 2, (32, N)).astype(BF16)
    c = rng.uniform(-2, 2, (M, N)).astype(np.float32)
    d = np.full((M, N), np.nan, np.float32)
    k = small_dot[(1,)](a, b, c, d, M=M, N=N, K=32, backend=backend, num_warps=warps)
    want = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-4)
    if backend == "pinghu":
        names = {n for n in _mnemonics(k) if n.startswith(("SQMMA.M", "WMMA."))}
        assert names == ({f"{sqmma}.F32.BF16.BF16"} if sqmma else
                         {"WMMA.M16N8K16.F32.BF16.BF16"}), names
