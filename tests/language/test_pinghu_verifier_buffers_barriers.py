"""Illegal uses of ``mutile.language.pinghu``, refused at the user's line: shared buffers and AsyncBarriers
(the scheme is described in pinghu_verify_kit.py)."""
from __future__ import annotations

import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph
from mutile.ir import types as T

from .pinghu_verify_kit import (P32, _plain_environment, check_at_mark,  # noqa: F401
                               refused, warm)

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
