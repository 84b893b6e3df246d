"""Illegal uses of ``mutile.language.pinghu`` (``ph``) are refused at the user's line.

Each kernel below breaks one rule of Pinghu's asynchronous engines (shared buffers,
AsyncBarriers, TME copies, SQMMA, warp specialization) and marks the offending line with
``# LINE-MARK: <text>``. Compiling it with ``kernel.warmup(..., backend="pinghu")`` must
raise a :class:`mutile.CompilationError` whose message names the rule and whose location
is that line (``file:line:col``, then the source line and a caret). The rules live in
``mutile/ir/ops_pinghu.py`` (per op), ``backends/pinghu/cg_async.py`` (per kernel: totals,
warps, in-flight SQMMA results, partitions) and ``mutile/frontend/compiler.py``
(``ph.warp_specialize`` forms). Legal neighbours of the refused cases compile, so a rule
that refuses too much fails here too.
"""
from __future__ import annotations

import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph
from mutile.ir import parse, verify
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import marked

BF16_64 = T.DescType(T.bf16, (64, 64))
F32_64 = T.DescType(T.f32, (64, 64))
P32 = T.PointerType(T.f32)
USER_ERROR_NOT_BUG = ("produced invalid IR", "internal error", "malformed op")
COMPILER_FILES = ("mutile/", "codegen.py", "compiler.py", "semantic.py", "standard.py",
                  "pinghu.py", "ops_pinghu.py", "cg_async.py", "cg_context.py",
                  "site-packages", "Traceback")


@pytest.fixture(autouse=True)
def _plain_environment(tmp_path, monkeypatch):
    """What a user's ``warmup`` does by default: no verifier switch, a private cache."""
    monkeypatch.setenv("MUTILE_CACHE_DIR", str(tmp_path / "mutile-cache"))
    for name in ("MUTILE_VERIFY", "MUTILE_BACKEND", "MUTILE_CHECK_BOUNDS"):
        monkeypatch.delenv(name, raising=False)


def warm(kernel, *args, num_warps=4, backend="pinghu", **kw):
    return kernel.warmup(*args, backend=backend, grid=(1,), num_warps=num_warps, **kw)


def refused(kernel, *args, **kw) -> mutile.CompilationError:
    with pytest.raises(mutile.CompilationError) as info:
        warm(kernel, *args, **kw)
    return info.value


def check_at_mark(e: mutile.CompilationError, kernel, *fragments: str,
                  alt: str | None = None) -> None:
    """``e`` says every one of ``fragments`` and points at ``kernel``'s LINE-MARK line
    (or, given ``alt``, the line marked ``# <alt>``): ``file:line:`` heads the text, the
    source line and a caret follow, and no compiler file shows."""
    m = marked(kernel)
    if alt is not None and e.loc is not None and e.loc.line != m.line:
        m = marked(kernel, alt)
    text = str(e)
    for f in fragments:
        assert f in e.msg, f"message lacks {f!r}:\n{text}"
    for blame in USER_ERROR_NOT_BUG:
        assert blame not in e.msg, f"a user's mistake reported as a compiler bug:\n{text}"
    assert e.loc is not None, f"no location:\n{text}"
    assert (e.loc.file, e.loc.line) == (m.file, m.line), \
        f"error at {e.loc}, expected line {m.line} ({m.text.strip()!r}):\n{text}"
    lines = text.split("\n")
    assert len(lines) == 3, text
    assert lines[0].startswith(f"{m.file}:{m.line}:"), text
    assert lines[1] == "    " + m.text, text
    assert lines[2].strip() == "^", text
    rest = text.replace(m.file, "<user file>")
    for name in COMPILER_FILES:
        assert name not in rest, f"compiler file {name!r} leaks into:\n{text}"


# ===================================================================== shared buffers
@mutile.jit
def k_alloc_swizzle(SW: ml.constexpr):
    a_s = ph.alloc_shared((64, 64), ml.bfloat16, swizzle=SW)  # LINE-MARK: ph.alloc_shared
    a_s.store(1.0)


@pytest.mark.parametrize("sw", [8, 48, 128, 256, -16, 1])
def test_swizzle_must_be_0_16_32_64(sw):
    e = refused(k_alloc_swizzle, SW=sw)
    check_at_mark(e, k_alloc_swizzle, "swizzle must be one of 0, 16, 32, 64 bytes",
                  f"got {sw}")


@pytest.mark.parametrize("sw", [0, 16, 32, 64])
def test_legal_swizzles_compile(sw):
    warm(k_alloc_swizzle, SW=sw)


@mutile.jit
def k_alloc_dtype(DT: ml.constexpr):
    a_s = ph.alloc_shared((16, 64), DT)  # LINE-MARK: ph.alloc_shared
    a_s.store(1)


@pytest.mark.parametrize("dt", [T.i1, P32], ids=str)
def test_shared_buffers_hold_numbers(dt):
    e = refused(k_alloc_dtype, DT=dt)
    check_at_mark(e, k_alloc_dtype, "shared buffers hold numbers", f"got {dt}")


@mutile.jit
def k_alloc_dims(D0: ml.constexpr):
    a_s = ph.alloc_shared((D0, 64), ml.float32)  # LINE-MARK: ph.alloc_shared
    a_s.store(1.0)


@pytest.mark.parametrize("d0", [0, -2])
def test_shared_dims_positive(d0):
    e = refused(k_alloc_dims, D0=d0)
    check_at_mark(e, k_alloc_dims, "shared buffer dims must be positive integers",
                  f"[{d0}, 64]")


@mutile.jit
def k_alloc_runtime_dim(n):
    a_s = ph.alloc_shared((n, 64), ml.float32)  # LINE-MARK: ph.alloc_shared
    a_s.store(1.0)


def test_shared_dims_compile_time():
    e = refused(k_alloc_runtime_dim, T.i32)
    check_at_mark(e, k_alloc_runtime_dim, "shared buffer dims", "compile-time integer")


@mutile.jit
def k_alloc_row(DT: ml.constexpr, W: ml.constexpr):
    a_s = ph.alloc_shared((64, W), DT)  # LINE-MARK: ph.alloc_shared
    a_s.store(1)


@pytest.mark.parametrize("dt,w", [(T.f16, 4), (T.bf16, 12), (T.f32, 2), (T.i8, 8),
                                  (T.f8e4m3, 24), (T.f32, 6)], ids=str)
def test_shared_rows_multiple_of_16_bytes(dt, w):
    """TME and SQMMA move 16-byte units; a buffer (and so a TME box, whose buffer must
    match it) has rows of a multiple of 16 bytes."""
    e = refused(k_alloc_row, DT=dt, W=w)
    check_at_mark(e, k_alloc_row, "rows must be a multiple of 16 bytes",
                  f"{w} x {dt} is {w * dt.itemsize} bytes")


@mutile.jit
def k_alloc_huge():
    a_s = ph.alloc_shared((4, 128, 128), ml.float32)  # LINE-MARK: ph.alloc_shared
    a_s[0].store(1.0)


def test_one_buffer_over_192_kib():
    e = refused(k_alloc_huge)
    check_at_mark(e, k_alloc_huge, "needs 262144 bytes", "196608 (192 KiB)")


@mutile.jit
def k_alloc_total(D0: ml.constexpr):
    a_s = ph.alloc_shared((256, 256), ml.bfloat16)
    b_s = ph.alloc_shared((D0, 256), ml.bfloat16)  # LINE-MARK: ph.alloc_shared
    a_s.store(1.0)
    b_s.store(2.0)


def test_buffers_together_over_192_kib():
    e = refused(k_alloc_total, D0=256)       # 128 KiB + 128 KiB
    check_at_mark(e, k_alloc_total, "shared buffers and scratch need 262144 bytes",
                  "196608 (192 KiB)")


def test_buffers_filling_192_kib_compile():
    warm(k_alloc_total, D0=128)              # 128 KiB + 64 KiB


@mutile.jit
def k_smem_index_rank1():
    a_s = ph.alloc_shared((64,), ml.float32)
    s = a_s[0]  # LINE-MARK: a_s[0]
    s.store(1.0)


def test_stage_index_needs_rank_2():
    e = refused(k_smem_index_rank1)
    check_at_mark(e, k_smem_index_rank1, "only a buffer of rank >= 2 is indexed by stage")


@mutile.jit
def k_smem_index_float():
    a_s = ph.alloc_shared((2, 16, 64), ml.float32)
    s = a_s[1.5]  # LINE-MARK: a_s[1.5]
    s.store(1.0)


def test_stage_index_integer():
    e = refused(k_smem_index_float)
    check_at_mark(e, k_smem_index_float, "an index must be an integer scalar", "f32")


@mutile.jit
def k_shared_store_shape():
    a_s = ph.alloc_shared((64, 64), ml.float32)
    a_s.store(ml.zeros((32, 64), ml.float32))  # LINE-MARK: a_s.store


def test_shared_store_tile_must_fit():
    e = refused(k_shared_store_shape)
    check_at_mark(e, k_shared_store_shape, "32", "64")


# ===================================================================== barriers
@mutile.jit
def k_bar_count(N: ml.constexpr):
    bars = ph.alloc_barriers(N)  # LINE-MARK: ph.alloc_barriers
    ph.barrier_arrive(bars[0])


@pytest.mark.parametrize("n", [64, 100, 0])
def test_barrier_count_at_most_63(n):
    e = refused(k_bar_count, N=n)
    check_at_mark(e, k_bar_count, "a block has 63 usable AsyncBarriers", f"asked for {n}")


def test_63_barriers_compile():
    warm(k_bar_count, N=63)


@mutile.jit
def k_bar_total(N: ml.constexpr):
    full = ph.alloc_barriers(40)
    empty = ph.alloc_barriers(N)  # LINE-MARK: ph.alloc_barriers
    ph.barrier_arrive(full[0])
    ph.barrier_arrive(empty[0])


def test_barriers_together_over_63():
    e = refused(k_bar_total, N=24)
    check_at_mark(e, k_bar_total, "this kernel allocates 64 AsyncBarriers",
                  "63 usable ones")


def test_barriers_together_63_compile():
    warm(k_bar_total, N=23)


@mutile.jit
def k_arrive_warps(W: ml.constexpr):
    bars = ph.alloc_barriers(2, arrive_warps=W)  # LINE-MARK: ph.alloc_barriers
    ph.barrier_arrive(bars[0])


@pytest.mark.parametrize("w", [0, 33, -1])
def test_arrive_warps_1_to_32(w):
    e = refused(k_arrive_warps, W=w)
    check_at_mark(e, k_arrive_warps, "arrive_warps must be 1..32 warps", f"got {w}")


def test_arrive_warps_beyond_the_block():
    e = refused(k_arrive_warps, W=8, num_warps=4)
    check_at_mark(e, k_arrive_warps, "barriers wait for 8 warp arrivals",
                  "the block has 4 warps")


@mutile.jit
def k_expect_tx_array():
    bars = ph.alloc_barriers(2)
    ph.barrier_expect_tx(bars, 128)  # LINE-MARK: ph.barrier_expect_tx


def test_expect_tx_on_one_barrier():
    e = refused(k_expect_tx_array)
    check_at_mark(e, k_expect_tx_array, "must be one barrier (index the array: bars[i])")


@mutile.jit
def k_expect_tx_bytes(NB: ml.constexpr):
    bars = ph.alloc_barriers(2)
    ph.barrier_expect_tx(bars[0], NB)  # LINE-MARK: ph.barrier_expect_tx


@pytest.mark.parametrize("nb", [0, -64])
def test_expect_tx_positive_bytes(nb):
    e = refused(k_expect_tx_bytes, NB=nb)
    check_at_mark(e, k_expect_tx_bytes, "expect_tx needs a positive byte count", f"got {nb}")


@mutile.jit
def k_expect_tx_runtime(n):
    bars = ph.alloc_barriers(2)
    ph.barrier_expect_tx(bars[0], n)  # LINE-MARK: ph.barrier_expect_tx


def test_expect_tx_bytes_compile_time():
    e = refused(k_expect_tx_runtime, T.i32)
    check_at_mark(e, k_expect_tx_runtime, "nbytes must be a compile-time integer")


@mutile.jit
def k_arrive_array():
    bars = ph.alloc_barriers(2)
    ph.barrier_arrive(bars)  # LINE-MARK: ph.barrier_arrive


def test_arrive_on_one_barrier():
    e = refused(k_arrive_array)
    check_at_mark(e, k_arrive_array, "must be one barrier (index the array: bars[i])")


@mutile.jit
def k_wait_array():
    bars = ph.alloc_barriers(2)
    ph.barrier_wait(bars, 0)  # LINE-MARK: ph.barrier_wait


def test_wait_on_one_barrier():
    e = refused(k_wait_array)
    check_at_mark(e, k_wait_array, "must be one barrier (index the array: bars[i])")


@mutile.jit
def k_wait_phase_float():
    bars = ph.alloc_barriers(2)
    ph.barrier_wait(bars[0], 0.5)  # LINE-MARK: ph.barrier_wait


def test_wait_phase_integer():
    e = refused(k_wait_phase_float)
    check_at_mark(e, k_wait_phase_float, "the phase must be an integer scalar")


@mutile.jit
def k_wait_phase_tile():
    bars = ph.alloc_barriers(2)
    ph.barrier_wait(bars[0], ml.arange(0, 16))  # LINE-MARK: ph.barrier_wait


def test_wait_phase_scalar():
    e = refused(k_wait_phase_tile)
    check_at_mark(e, k_wait_phase_tile, "the phase must be an integer scalar")


@mutile.jit
def k_wait_not_barrier():
    a_s = ph.alloc_shared((16, 64), ml.float32)
    ph.barrier_wait(a_s, 0)  # LINE-MARK: ph.barrier_wait


def test_wait_needs_a_barrier():
    e = refused(k_wait_not_barrier)
    check_at_mark(e, k_wait_not_barrier, "expected a barrier (from ph.alloc_barriers)",
                  "shared_buffer")


@mutile.jit
def k_bar_index_float():
    bars = ph.alloc_barriers(2)
    ph.barrier_arrive(bars[0.5])  # LINE-MARK: bars[0.5]


def test_barrier_index_integer():
    e = refused(k_bar_index_float)
    check_at_mark(e, k_bar_index_float, "an index must be an integer scalar")


# ===================================================================== TME
@mutile.jit
def k_tme_box(a_desc, R: ml.constexpr, C: ml.constexpr, DT: ml.constexpr):
    a_s = ph.alloc_shared((R, C), DT)
    full = ph.alloc_barriers(1)
    ph.barrier_expect_tx(full[0], R * C * 2)
    ph.tme_load(a_desc, [0, 0], a_s, full[0])  # LINE-MARK: ph.tme_load
    ph.barrier_wait(full[0], 0)


@pytest.mark.parametrize("r,c,dt", [(64, 32, T.bf16), (32, 64, T.bf16), (64, 64, T.f16),
                                    (64, 128, T.bf16)], ids=str)
def test_tme_load_buffer_is_the_box(r, c, dt):
    e = refused(k_tme_box, BF16_64, R=r, C=c, DT=dt)
    check_at_mark(e, k_tme_box, "tme_load: the buffer", "is not the descriptor's block",
                  f"smem<{r}x{c}x{dt}", "64x64xbf16")


def test_tme_load_matching_box_compiles():
    warm(k_tme_box, BF16_64, R=64, C=64, DT=T.bf16)


@mutile.jit
def k_tme_coords(a_desc):
    a_s = ph.alloc_shared((64, 64), ml.bfloat16)
    full = ph.alloc_barriers(1)
    ph.barrier_expect_tx(full[0], 8192)
    ph.tme_load(a_desc, [0], a_s, full[0])  # LINE-MARK: ph.tme_load
    ph.barrier_wait(full[0], 0)


def test_tme_load_one_coordinate_per_dim():
    e = refused(k_tme_coords, BF16_64)
    check_at_mark(e, k_tme_coords, "tme_load needs 2 coordinates, got 1")


@mutile.jit
def k_tme_coord_float(a_desc):
    a_s = ph.alloc_shared((64, 64), ml.bfloat16)
    full = ph.alloc_barriers(1)
    ph.barrier_expect_tx(full[0], 8192)
    ph.tme_load(a_desc, [0, 1.5], a_s, full[0])  # LINE-MARK: ph.tme_load
    ph.barrier_wait(full[0], 0)


def test_tme_coordinates_integer():
    e = refused(k_tme_coord_float, BF16_64)
    check_at_mark(e, k_tme_coord_float, "an index must be an integer scalar")


@mutile.jit
def k_tme_bar_array(a_desc):
    a_s = ph.alloc_shared((64, 64), ml.bfloat16)
    full = ph.alloc_barriers(2)
    ph.tme_load(a_desc, [0, 0], a_s, full)  # LINE-MARK: ph.tme_load
    ph.barrier_wait(full[0], 0)


def test_tme_load_counts_on_one_barrier():
    e = refused(k_tme_bar_array, BF16_64)
    check_at_mark(e, k_tme_bar_array, "must be one barrier (index the array: bars[i])")


@mutile.jit
def k_tme_not_desc(x_ptr):
    a_s = ph.alloc_shared((64, 64), ml.float32)
    full = ph.alloc_barriers(1)
    ph.tme_load(x_ptr, [0, 0], a_s, full[0])  # LINE-MARK: ph.tme_load


def test_tme_load_needs_a_descriptor():
    e = refused(k_tme_not_desc, P32)
    check_at_mark(e, k_tme_not_desc, "expected a tensor descriptor")


@mutile.jit
def k_tme_tile_not_buffer(a_desc):
    full = ph.alloc_barriers(1)
    t = ml.zeros((64, 64), ml.bfloat16)
    ph.tme_load(a_desc, [0, 0], t, full[0])  # LINE-MARK: ph.tme_load


def test_tme_load_needs_a_shared_buffer():
    e = refused(k_tme_tile_not_buffer, BF16_64)
    check_at_mark(e, k_tme_tile_not_buffer, "expected a shared buffer (from ph.alloc_shared)")


@mutile.jit
def k_tme_rank6(a_desc):
    a_s = ph.alloc_shared((2, 2, 2, 2, 2, 16), ml.bfloat16)
    full = ph.alloc_barriers(1)
    ph.barrier_expect_tx(full[0], 2048)
    ph.tme_load(a_desc, [0, 0, 0, 0, 0, 0], a_s, full[0])  # LINE-MARK: ph.tme_load
    ph.barrier_wait(full[0], 0)


def test_tme_rank_at_most_5():
    e = refused(k_tme_rank6, T.DescType(T.bf16, (2, 2, 2, 2, 2, 16)))
    check_at_mark(e, k_tme_rank6, "TME descriptors have rank <= 5, got 6")


@mutile.jit
def k_tme_rank5(a_desc):
    a_s = ph.alloc_shared((2, 2, 2, 2, 16), ml.bfloat16)
    full = ph.alloc_barriers(1)
    ph.barrier_expect_tx(full[0], 1024)
    ph.tme_load(a_desc, [0, 0, 0, 0, 0], a_s, full[0])
    ph.barrier_wait(full[0], 0)


def test_tme_rank_5_compiles():
    warm(k_tme_rank5, T.DescType(T.bf16, (2, 2, 2, 2, 16)))


@mutile.jit
def k_tme_narrow_box(a_desc):
    a_s = ph.alloc_shared((64, 4), ml.float16)  # LINE-MARK: ph.alloc_shared
    full = ph.alloc_barriers(1)
    ph.barrier_expect_tx(full[0], 512)
    ph.tme_load(a_desc, [0, 0], a_s, full[0])
    ph.barrier_wait(full[0], 0)


def test_tme_box_rows_multiple_of_16_bytes():
    """A box of 8-byte rows cannot be copied; its buffer is refused first."""
    e = refused(k_tme_narrow_box, T.DescType(T.f16, (64, 4)))
    check_at_mark(e, k_tme_narrow_box, "multiple of 16 bytes", "4 x f16 is 8 bytes")


@mutile.jit
def k_tme_store_box(c_desc, R: ml.constexpr, C: ml.constexpr):
    c_s = ph.alloc_shared((R, C), ml.float32)
    c_s.store(1.0)
    ph.fence_shared()
    ph.tme_store(c_desc, [0, 0], c_s)  # LINE-MARK: ph.tme_store
    ph.tme_store_wait()


def test_tme_store_buffer_is_the_box():
    e = refused(k_tme_store_box, F32_64, R=64, C=32)
    check_at_mark(e, k_tme_store_box, "tme_store: the buffer", "is not the descriptor's block")


def test_tme_store_matching_box_compiles():
    warm(k_tme_store_box, F32_64, R=64, C=64)


@mutile.jit
def k_tme_store_coords(c_desc):
    c_s = ph.alloc_shared((64, 64), ml.float32)
    c_s.store(1.0)
    ph.fence_shared()
    ph.tme_store(c_desc, [0, 0, 0], c_s)  # LINE-MARK: ph.tme_store
    ph.tme_store_wait()


def test_tme_store_one_coordinate_per_dim():
    e = refused(k_tme_store_coords, F32_64)
    check_at_mark(e, k_tme_store_coords, "tme_store needs 2 coordinates, got 3")


# ===================================================================== SQMMA
@mutile.jit
def k_sqmma(DA: ml.constexpr, DB: ml.constexpr, A0: ml.constexpr, A1: ml.constexpr,
            B0: ml.constexpr, B1: ml.constexpr, TA: ml.constexpr, TB: ml.constexpr):
    a_s = ph.alloc_shared((A0, A1), DA)
    b_s = ph.alloc_shared((B0, B1), DB)
    acc = ph.sqmma(a_s, b_s, trans_a=TA, trans_b=TB)  # LINE-MARK: ph.sqmma
    acc = ph.sqmma_wait(acc)


def sqmma_spec(da, db, m, n, k, ta=False, tb=False):
    """Operands of an M x N x K SQMMA, stored as ``trans_a``/``trans_b`` say."""
    a0, a1 = (k, m) if ta else (m, k)
    b0, b1 = (n, k) if tb else (k, n)
    return dict(DA=da, DB=db, A0=a0, A1=a1, B0=b0, B1=b1, TA=ta, TB=tb)


@pytest.mark.parametrize("da,db", [(T.bf16, T.f16), (T.f16, T.bf16), (T.f16, T.f32),
                                   (T.f32, T.bf16), (T.i8, T.bf16), (T.i8, T.f8e4m3),
                                   (T.f8e5m2, T.i8), (T.f64, T.f64), (T.i16, T.i16),
                                   (T.u8, T.u8), (T.i32, T.i32)], ids=str)
def test_sqmma_operand_types(da, db):
    e = refused(k_sqmma, **sqmma_spec(da, db, 64, 64, 64))
    check_at_mark(e, k_sqmma, f"SQMMA has no {da} x {db} form")


@pytest.mark.parametrize("da,db", [(T.bf16, T.bf16), (T.f16, T.f16), (T.f32, T.f32),
                                   (T.i8, T.i8), (T.f8e4m3, T.f8e5m2),
                                   (T.f8e5m2, T.f8e4m3)], ids=str)
def test_sqmma_legal_operand_types_compile(da, db):
    warm(k_sqmma, **sqmma_spec(da, db, 64, 64, 64))


@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("n", [8, 256, 512])
def test_sqmma_n(n, tb):
    e = refused(k_sqmma, **sqmma_spec(T.bf16, T.bf16, 64, n, 32, tb=tb))
    check_at_mark(e, k_sqmma, "SQMMA N is one of 16, 32, 64, 128", f"got {n}")


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("m", [8, 2048])
def test_sqmma_m(m, ta):
    e = refused(k_sqmma, **sqmma_spec(T.bf16, T.bf16, m, 64, 32, ta=ta))
    check_at_mark(e, k_sqmma, "SQMMA M is 16, 32, 64 or 128 per WarpSquad", f"got {m}")


@pytest.mark.parametrize("m,n", [(64, 48), (48, 64), (96, 64)])
def test_sqmma_m_n_not_powers_of_two(m, n):
    """The accumulator is a tile, so its dims are powers of two before SQMMA's own sets."""
    e = refused(k_sqmma, **sqmma_spec(T.bf16, T.bf16, m, n, 32))
    check_at_mark(e, k_sqmma, f"shape [{m}, {n}]: every dim must be a power of two")


@pytest.mark.parametrize("m,warps,per_squad", [(16, 8, "8"), (32, 16, "8"), (256, 4, "256"),
                                               (512, 4, "512")])
def test_sqmma_m_per_warp_squad(m, warps, per_squad):
    e = refused(k_sqmma, num_warps=warps, **sqmma_spec(T.bf16, T.bf16, m, 64, 32))
    check_at_mark(e, k_sqmma, "SQMMA M per WarpSquad is 16, 32, 64, 128",
                  f"{m} rows over {warps // 4} squad(s) gives {per_squad}")


@pytest.mark.parametrize("m,warps", [(16, 4), (128, 4), (256, 8), (64, 8)])
def test_sqmma_m_per_squad_legal_compiles(m, warps):
    warm(k_sqmma, num_warps=warps, **sqmma_spec(T.bf16, T.bf16, m, 64, 32))


@pytest.mark.parametrize("dt,k,step", [(T.bf16, 8, 16), (T.bf16, 24, 16), (T.f16, 40, 16),
                                       (T.f8e4m3, 16, 32), (T.f8e5m2, 48, 32),
                                       (T.i8, 16, 32), (T.f32, 4, 8), (T.f32, 12, 8)],
                         ids=str)
def test_sqmma_k_span(dt, k, step):
    e = refused(k_sqmma, **sqmma_spec(dt, dt, 64, 64, k))
    check_at_mark(e, k_sqmma, f"SQMMA on {dt} steps K by",
                  f"K={k} is not a multiple of {step}")


@pytest.mark.parametrize("dt,k", [(T.bf16, 16), (T.bf16, 48), (T.i8, 32), (T.f32, 8),
                                  (T.f8e4m3, 96)], ids=str)
def test_sqmma_k_legal_compiles(dt, k):
    warm(k_sqmma, **sqmma_spec(dt, dt, 64, 64, k))


def test_sqmma_inner_dims_differ():
    e = refused(k_sqmma, DA=T.bf16, DB=T.bf16, A0=64, A1=32, B0=64, B1=64, TA=False,
                TB=False)
    check_at_mark(e, k_sqmma, "sqmma inner dims differ: A is 64x32, B is 64x64")


@pytest.mark.parametrize("warps", [1, 2])
def test_sqmma_needs_warp_squads(warps):
    e = refused(k_sqmma, num_warps=warps, **sqmma_spec(T.bf16, T.bf16, 64, 64, 32))
    check_at_mark(e, k_sqmma, "SQMMA is issued by WarpSquads of 4 warps",
                  f"runs on {warps} warp(s)")


@mutile.jit
def k_sqmma_acc(AM: ml.constexpr, AN: ml.constexpr, ADT: ml.constexpr):
    a_s = ph.alloc_shared((64, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    acc = ml.zeros((AM, AN), ADT)
    acc = ph.sqmma(a_s, b_s, acc)  # LINE-MARK: ph.sqmma
    acc = ph.sqmma_wait(acc)


@pytest.mark.parametrize("am,an,adt", [(64, 64, T.f16), (64, 32, T.f32), (32, 64, T.f32),
                                       (64, 64, T.i32)], ids=str)
def test_sqmma_accumulator_type(am, an, adt):
    e = refused(k_sqmma_acc, AM=am, AN=an, ADT=adt)
    check_at_mark(e, k_sqmma_acc, "sqmma accumulator must be", "64x64xf32")


@mutile.jit
def k_sqmma_staged():
    a_s = ph.alloc_shared((2, 64, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    acc = ph.sqmma(a_s, b_s)  # LINE-MARK: ph.sqmma
    acc = ph.sqmma_wait(acc)


def test_sqmma_operands_are_2d():
    e = refused(k_sqmma_staged)
    check_at_mark(e, k_sqmma_staged, "sqmma operands must be 2-D shared buffers")


@mutile.jit
def k_sqmma_staged_acc():
    a_s = ph.alloc_shared((2, 64, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    acc = ml.zeros((64, 64), ml.float32)
    acc = ph.sqmma(a_s, b_s, acc)  # LINE-MARK: ph.sqmma
    acc = ph.sqmma_wait(acc)


def test_sqmma_operands_are_2d_with_acc():
    e = refused(k_sqmma_staged_acc)
    check_at_mark(e, k_sqmma_staged_acc, "sqmma operand A must be a 2-D shared buffer")


@mutile.jit
def k_sqmma_tile_operand():
    a = ml.zeros((64, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    acc = ph.sqmma(a, b_s)  # LINE-MARK: ph.sqmma
    acc = ph.sqmma_wait(acc)


def test_sqmma_operands_in_shared_memory():
    e = refused(k_sqmma_tile_operand)
    check_at_mark(e, k_sqmma_tile_operand, "expected a shared operand (from ph.alloc_shared)")


@mutile.jit
def k_sqmma_no_wait_store(c_desc):
    a_s = ph.alloc_shared((64, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    c_s = ph.alloc_shared((64, 64), ml.float32)
    acc = ph.sqmma(a_s, b_s)
    c_s.store(acc)  # LINE-MARK: c_s.store
    ph.fence_shared()
    ph.tme_store(c_desc, [0, 0], c_s)
    ph.tme_store_wait()


def test_sqmma_result_before_wait_stored():
    e = refused(k_sqmma_no_wait_store, F32_64)
    check_at_mark(e, k_sqmma_no_wait_store, "uses the result of ph.sqmma before "
                  "ph.sqmma_wait", "acc = ph.sqmma_wait(acc)")


@mutile.jit
def k_sqmma_no_wait_math(x_ptr):
    a_s = ph.alloc_shared((64, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    acc = ph.sqmma(a_s, b_s)
    r = ml.arange(0, 64)
    ml.store(x_ptr + r[:, None] * 64 + r[None, :], acc * 2.0)  # LINE-MARK: acc * 2.0


def test_sqmma_result_before_wait_computed():
    e = refused(k_sqmma_no_wait_math, P32)
    check_at_mark(e, k_sqmma_no_wait_math, "uses the result of ph.sqmma before "
                  "ph.sqmma_wait")


@mutile.jit
def k_sqmma_wait_on_one_path(x_ptr, n):
    a_s = ph.alloc_shared((64, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    acc = ph.sqmma(a_s, b_s)
    if n > 0:  # OR-HERE: if
        acc = ph.sqmma_wait(acc)
    r = ml.arange(0, 64)
    ml.store(x_ptr + r[:, None] * 64 + r[None, :], acc)  # LINE-MARK: ml.store


def test_sqmma_result_waited_on_one_path_only():
    """When n <= 0 nothing waits for the SQMMA before the store reads its result (the
    error may name the read or the ``if`` that lets the unwaited value through)."""
    e = refused(k_sqmma_wait_on_one_path, P32, T.i32)
    check_at_mark(e, k_sqmma_wait_on_one_path, "uses the result of ph.sqmma before "
                  "ph.sqmma_wait", alt="OR-HERE")


@mutile.jit
def k_sqmma_waited(x_ptr):
    a_s = ph.alloc_shared((64, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    acc = ph.sqmma(a_s, b_s)
    acc = ph.sqmma(a_s, b_s, acc)                # chaining in flight is fine
    acc = ph.sqmma_wait(acc)
    r = ml.arange(0, 64)
    ml.store(x_ptr + r[:, None] * 64 + r[None, :], acc * 2.0)


def test_sqmma_result_after_wait_compiles():
    warm(k_sqmma_waited, P32)


# ===================================================================== warp_specialize
@mutile.jit
def p_store(x_ptr, V: ml.constexpr):
    ml.store(x_ptr + ml.arange(0, 32), V)


@mutile.jit
def p_nothing(bars):
    ph.barrier_arrive(bars[0])


@mutile.jit
def k_ws_first_warps(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 2), (p_nothing, (bars,), 1)])  # LINE-MARK: ph


def test_ws_first_partition_runs_on_num_warps():
    e = refused(k_ws_first_warps, P32, num_warps=4)
    check_at_mark(e, k_ws_first_warps, "first partition runs on the kernel's num_warps=4 "
                  "warps, but asks for 2")


def test_ws_first_partition_on_num_warps_compiles():
    warm(k_ws_first_warps, P32, num_warps=2)


@mutile.jit
def p_alloc_shared(x_ptr):
    a_s = ph.alloc_shared((16, 64), ml.float32)  # LINE-MARK: ph.alloc_shared
    a_s.store(1.0)
    ml.store(x_ptr + ml.arange(0, 32), 1.0)


@mutile.jit
def k_ws_alloc_shared(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_alloc_shared, (x_ptr,), 4), (p_nothing, (bars,), 1)])


def test_ws_no_shared_buffer_inside_a_partition():
    e = refused(k_ws_alloc_shared, P32)
    check_at_mark(e, p_alloc_shared, "allocate shared buffers before ph.warp_specialize, "
                  "not inside a partition")


@mutile.jit
def p_alloc_barriers(x_ptr):
    bars = ph.alloc_barriers(2)  # LINE-MARK: ph.alloc_barriers
    ph.barrier_arrive(bars[0])
    ml.store(x_ptr + ml.arange(0, 32), 1.0)


@mutile.jit
def k_ws_alloc_barriers(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_alloc_barriers, (x_ptr,), 4), (p_nothing, (bars,), 1)])


def test_ws_no_barriers_inside_a_partition():
    e = refused(k_ws_alloc_barriers, P32)
    check_at_mark(e, p_alloc_barriers, "allocate barriers before ph.warp_specialize, "
                  "not inside a partition")


@mutile.jit
def k_ws_tile_outside(x_ptr):
    bars = ph.alloc_barriers(1)
    ml.store(x_ptr + ml.arange(0, 64), 2.0)  # LINE-MARK: ml.store
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_nothing, (bars,), 1)])


def test_ws_tile_code_outside_partitions():
    e = refused(k_ws_tile_outside, P32)
    check_at_mark(e, k_ws_tile_outside, "tile code and control flow run inside partitions")


@mutile.jit
def k_ws_loop_outside(x_ptr, n):
    bars = ph.alloc_barriers(1)
    for i in range(n):  # LINE-MARK: for
        ml.store(x_ptr + i, 2.0)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_nothing, (bars,), 1)])


def test_ws_control_flow_outside_partitions():
    e = refused(k_ws_loop_outside, P32, T.i32)
    check_at_mark(e, k_ws_loop_outside, "tile code and control flow run inside partitions")


@mutile.jit
def k_ws_scalars_outside(x_ptr, n):
    bars = ph.alloc_barriers(1)
    off = ml.program_id(0) * 64 + n
    ph.warp_specialize([(p_store, (x_ptr + off, 1.0), 4), (p_nothing, (bars,), 1)])


def test_ws_scalar_code_outside_partitions_compiles():
    warm(k_ws_scalars_outside, P32, T.i32)


@mutile.jit
def p_sum(x_ptr, y_ptr):
    r = ml.arange(0, 512)
    ml.store(y_ptr, ml.sum(ml.load(x_ptr + r), 0))


@mutile.jit
def p_sum_too(x_ptr, y_ptr):
    r = ml.arange(0, 512)
    ml.store(y_ptr + 1, ml.sum(ml.load(x_ptr + r), 0))  # LINE-MARK: ml.sum


@mutile.jit
def k_ws_two_scratch(x_ptr, y_ptr):
    ph.warp_specialize([(p_sum, (x_ptr, y_ptr), 4), (p_sum_too, (x_ptr, y_ptr), 4)])


def test_ws_one_partition_uses_shared_scratch():
    e = refused(k_ws_two_scratch, P32, P32)
    check_at_mark(e, p_sum_too, "two ph.warp_specialize partitions move tiles through "
                  "shared memory; only one partition may")


@mutile.jit
def k_ws_one_scratch(x_ptr, y_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_sum, (x_ptr, y_ptr), 4), (p_nothing, (bars,), 1)])


def test_ws_one_partition_with_scratch_compiles():
    warm(k_ws_one_scratch, P32, P32)


@mutile.jit
def p_sqmma(a_s, b_s):
    acc = ph.sqmma(a_s, b_s)  # LINE-MARK: ph.sqmma
    acc = ph.sqmma_wait(acc)


@mutile.jit
def k_ws_sqmma_one_warp(x_ptr):
    a_s = ph.alloc_shared((64, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_sqmma, (a_s, b_s), 1)])


def test_ws_sqmma_partition_needs_warp_squads():
    e = refused(k_ws_sqmma_one_warp, P32)
    check_at_mark(e, p_sqmma, "SQMMA is issued by WarpSquads of 4 warps",
                  "runs on 1 warp(s)")


@mutile.jit
def k_ws_sqmma_warps(x_ptr, W: ml.constexpr, M: ml.constexpr):
    a_s = ph.alloc_shared((M, 32), ml.bfloat16)
    b_s = ph.alloc_shared((32, 64), ml.bfloat16)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_sqmma, (a_s, b_s), W)])


@pytest.mark.parametrize("w", [2, 6, 7])
def test_ws_sqmma_partition_warps_multiple_of_4(w):
    """num_warps is a power of two; a partition's warp count is any number."""
    e = refused(k_ws_sqmma_warps, P32, W=w, M=64)
    check_at_mark(e, p_sqmma, "SQMMA is issued by WarpSquads of 4 warps",
                  f"runs on {w} warp(s)")


@pytest.mark.parametrize("w,m,per_squad", [(12, 64, "21.3333"), (12, 128, "42.6667"),
                                           (20, 64, "12.8"), (8, 16, "8")])
def test_ws_sqmma_m_per_warp_squad_of_a_partition(w, m, per_squad):
    e = refused(k_ws_sqmma_warps, P32, W=w, M=m)
    check_at_mark(e, p_sqmma, "SQMMA M per WarpSquad is 16, 32, 64, 128",
                  f"{m} rows over {w // 4} squad(s) gives {per_squad}")


def test_ws_sqmma_partition_of_8_warps_compiles():
    warm(k_ws_sqmma_warps, P32, W=8, M=64)


@mutile.jit
def k_ws_two(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_nothing, (bars,), 1)])
    ph.warp_specialize([(p_store, (x_ptr, 2.0), 4), (p_nothing, (bars,), 1)])  # LINE-MARK: ph


def test_ws_at_most_once():
    e = refused(k_ws_two, P32)
    check_at_mark(e, k_ws_two, "a kernel has at most one ph.warp_specialize")


@mutile.jit
def p_nested(x_ptr, bars):
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 2), (p_nothing, (bars,), 2)])  # LINE-MARK: ph


@mutile.jit
def k_ws_nested(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_nested, (x_ptr, bars), 4), (p_nothing, (bars,), 1)])


def test_ws_does_not_nest():
    e = refused(k_ws_nested, P32)
    check_at_mark(e, p_nested, "ph.warp_specialize cannot nest")


@mutile.jit
def k_ws_warps(x_ptr, W: ml.constexpr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_nothing, (bars,), W)])  # LINE-MARK: ph


def test_ws_at_most_32_warps():
    e = refused(k_ws_warps, P32, W=29)
    check_at_mark(e, k_ws_warps, "the partitions have 33 warps; a block has at most 32")


@pytest.mark.parametrize("w", [0, -1])
def test_ws_partition_warps_positive(w):
    e = refused(k_ws_warps, P32, W=w)
    check_at_mark(e, k_ws_warps, "partition warp counts must be positive", f"[4, {w}]")


def test_ws_28_extra_warps_compile():
    warm(k_ws_warps, P32, W=28)


@mutile.jit
def p_returns(x_ptr):
    ml.store(x_ptr, 1.0)
    return 1


@mutile.jit
def k_ws_returns(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_returns, (x_ptr,), 4), (p_nothing, (bars,), 1)])  # LINE-MARK: ph


def test_ws_partition_returns_nothing():
    e = refused(k_ws_returns, P32)
    check_at_mark(e, k_ws_returns, "partition p_returns must not return a value")


def plain_python(x):
    return x


@mutile.jit
def k_ws_one_partition(x_ptr):
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4)])  # LINE-MARK: ph


@mutile.jit
def k_ws_not_a_list(x_ptr):
    ph.warp_specialize(p_store)  # LINE-MARK: ph


@mutile.jit
def k_ws_two_arguments(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_nothing, (bars,), 1)], 4)  # LINE-MARK: ph


FORM_MSG = "takes one list of two or more partitions (function, arguments, warps)"


@pytest.mark.parametrize("kernel", [k_ws_one_partition, k_ws_not_a_list, k_ws_two_arguments],
                         ids=lambda k: k.fn.__name__)
def test_ws_takes_one_list_of_partitions(kernel):
    check_at_mark(refused(kernel, P32), kernel, FORM_MSG)


@mutile.jit
def k_ws_pair(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_nothing, (bars,))])  # LINE-MARK: ph


@mutile.jit
def k_ws_not_jit(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (plain_python, (bars,), 1)])  # LINE-MARK: ph


@mutile.jit
def k_ws_float_warps(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_nothing, (bars,), 1.0)])  # LINE-MARK: ph


@mutile.jit
def k_ws_bare_args(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([(p_store, (x_ptr, 1.0), 4), (p_nothing, bars, 1)])  # LINE-MARK: ph


@mutile.jit
def k_ws_bare_function(x_ptr):
    bars = ph.alloc_barriers(1)
    ph.warp_specialize([p_store, (p_nothing, (bars,), 1)])  # LINE-MARK: ph


@pytest.mark.parametrize("kernel,index", [(k_ws_pair, 1), (k_ws_not_jit, 1),
                                          (k_ws_float_warps, 1), (k_ws_bare_args, 1),
                                          (k_ws_bare_function, 0)],
                         ids=lambda k: getattr(getattr(k, "fn", None), "__name__", str(k)))
def test_ws_partition_form(kernel, index):
    check_at_mark(refused(kernel, P32), kernel, f"partition {index} of ph.warp_specialize "
                  "must be (a @jit function, a tuple of arguments, a warp count)")


def test_ws_outside_a_kernel():
    with pytest.raises(RuntimeError, match="only be used inside @mutile.jit"):
        ph.warp_specialize([])


# ===================================================================== llvm backend
@mutile.jit
def k_ph_on_llvm(x_ptr):
    r = ml.arange(0, 64)
    ml.store(x_ptr + r, 1.0)
    a_s = ph.alloc_shared((64,), ml.float32)  # LINE-MARK: ph.alloc_shared
    a_s.store(ml.load(x_ptr + r))


def test_llvm_refuses_ph_ops():
    e = refused(k_ph_on_llvm, P32, backend="llvm")
    check_at_mark(e, k_ph_on_llvm, "mutile.language.pinghu.alloc_shared",
                  "launch with backend='pinghu'")


# ===================================================================== IR text
@mutile.jit
def p_consumer(c_desc, a_s, b_s, c_s, full, empty, n, STAGES: ml.constexpr):
    acc = ml.zeros((64, 64), ml.float32)
    for k in range(n):
        s = k % STAGES
        ph.barrier_wait(full[s], (k // STAGES) & 1)
        acc = ph.sqmma(a_s[s], b_s[s], acc, trans_b=True)
        acc = ph.sqmma_wait(acc)
        ph.barrier_arrive(empty[s])
    c_s.store(acc)
    ph.fence_shared()
    ph.tme_store(c_desc, [0, 0], c_s)
    ph.tme_store_wait()


@mutile.jit
def p_producer(a_desc, b_desc, a_s, b_s, full, empty, n, STAGES: ml.constexpr):
    for k in range(n):
        s = k % STAGES
        ph.barrier_wait(empty[s], ((k // STAGES) & 1) ^ 1)
        ph.barrier_expect_tx(full[s], 2 * 64 * 32 * 2)
        ph.tme_load(a_desc, [0, k * 32], a_s[s], full[s])
        ph.tme_load(b_desc, [0, k * 32], b_s[s], full[s])


@mutile.jit
def k_ws_gemm(a_desc, b_desc, c_desc, K, STAGES: ml.constexpr):
    a_s = ph.alloc_shared((STAGES, 64, 32), ml.bfloat16, swizzle=64)
    b_s = ph.alloc_shared((STAGES, 64, 32), ml.bfloat16, swizzle=32)
    c_s = ph.alloc_shared((64, 64), ml.float32)
    full = ph.alloc_barriers(STAGES, arrive_warps=1)
    empty = ph.alloc_barriers(STAGES, arrive_warps=4)
    n = ml.cdiv(K, 32)
    ph.warp_specialize([(p_consumer, (c_desc, a_s, b_s, c_s, full, empty, n, STAGES), 4),
                        (p_producer, (a_desc, b_desc, a_s, b_s, full, empty, n, STAGES), 1)])


GEMM_SPEC = dict(a_desc=T.DescType(T.bf16, (64, 32)), b_desc=T.DescType(T.bf16, (64, 32)),
                 c_desc=F32_64, K=T.i32, STAGES=2)


def test_ph_ir_prints_and_parses_back():
    _, stages, _ = frontend_and_passes(k_ws_gemm, GEMM_SPEC, {"backend": "pinghu"},
                                       verify=True)
    for name, text in stages.items():
        for op in ("ph.alloc_shared", "ph.alloc_barriers", "ph.warp_specialize"):
            assert op in text, f"stage {name} lacks {op}:\n{text}"
        assert str(parse(text)) == text, f"stage {name} changes when parsed and printed"
        verify(parse(text))
    final = stages[list(stages)[-1]]
    for op in ("ph.sqmma", "ph.sqmma_wait", "ph.tme_load", "ph.tme_store", "ph.expect_tx",
               "ph.wait", "ph.arrive", "ph.fence_shared", "ph.tme_store_wait",
               "ph.smem_index", "ph.bar_index", "swizzle=64", "trans_b"):
        assert op in final, f"the inlined IR lacks {op}:\n{final}"


def test_ph_gemm_compiles():
    warm(k_ws_gemm, *GEMM_SPEC.values())


# ===================================================================== without async lowering
# ``async_lowering=False`` skips the backend's TME/SQMMA passes, not the rules of the ph ops
# a kernel writes itself.
UNLOWERED = [
    (k_expect_tx_array, (), {}, "must be one barrier"),
    (k_expect_tx_bytes, (), {"NB": 0}, "expect_tx needs a positive byte count"),
    (k_arrive_array, (), {}, "must be one barrier"),
    (k_wait_array, (), {}, "must be one barrier"),
    (k_tme_box, (BF16_64,), {"R": 64, "C": 32, "DT": T.bf16}, "is not the descriptor's block"),
    (k_tme_coords, (BF16_64,), {}, "tme_load needs 2 coordinates, got 1"),
    (k_tme_bar_array, (BF16_64,), {}, "must be one barrier"),
    (k_tme_rank6, (T.DescType(T.bf16, (2, 2, 2, 2, 2, 16)),), {}, "TME descriptors have rank"),
    (k_tme_store_box, (F32_64,), {"R": 64, "C": 32}, "is not the descriptor's block"),
    (k_ws_warps, (P32,), {"W": 29}, "the partitions have 33 warps"),
    (k_ws_warps, (P32,), {"W": 0}, "partition warp counts must be positive"),
]


@pytest.mark.parametrize("kernel,args,kw,msg", UNLOWERED,
                         ids=["-".join([c[0].fn.__name__, *map(str, c[2].values())])
                              for c in UNLOWERED])
def test_rules_hold_without_async_lowering(kernel, args, kw, msg):
    e = refused(kernel, *args, async_lowering=False, **kw)
    check_at_mark(e, kernel, msg)
