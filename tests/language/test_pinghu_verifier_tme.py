"""Illegal uses of ``mutile.language.pinghu``, refused at the user's line: TME copies
(the scheme is described in pinghu_verify_kit.py)."""
from __future__ import annotations

import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph
from mutile.ir import types as T

from .pinghu_verify_kit import (BF16_64, F32_64, P32, _plain_environment, check_at_mark,  # noqa: F401
                               refused, warm)

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


@pytest.mark.parametrize("dt", [T.f8e4b8, T.f8e5b16], ids=str)
def test_tme_load_of_fnuz_fp8_is_refused(dt):
    e = refused(k_tme_box, T.DescType(dt, (64, 64)), R=64, C=64, DT=dt)
    check_at_mark(e, k_tme_box, "tme_load: TME descriptors have no element code", repr(dt),
                  "uint8")


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


@mutile.jit
def k_tme_const_stride(a_ptr, LD: ml.constexpr):
    d = ml.make_tensor_descriptor(a_ptr, shape=[64, 100], strides=[LD, 1],
                                  block_shape=[64, 64])
    a_s = ph.alloc_shared((64, 64), ml.bfloat16)
    bar = ph.alloc_barrier(1)
    ph.tme_load(d, [0, 0], a_s, bar)  # LINE-MARK: tme_load


@pytest.mark.parametrize("ld", [101, 99, 103])
def test_tme_constant_stride_not_4_byte_multiple(ld):
    """TME's global strides are multiples of the machine file's 4 bytes."""
    e = refused(k_tme_const_stride, T.PointerType(T.bf16), LD=ld)
    check_at_mark(e, k_tme_const_stride, "TME needs strides of a multiple of 4 bytes",
                  f"{ld} x 2 = {2 * ld} bytes")


@pytest.mark.parametrize("ld", [100, 102, 64])
def test_tme_constant_stride_4_byte_multiple_compiles(ld):
    """200 or 204 bytes are not multiples of 16 (the old rule) but of 4: accepted."""
    warm(k_tme_const_stride, T.PointerType(T.bf16), LD=ld)


@mutile.jit
def k_tme_small_box(a_desc, R: ml.constexpr, C: ml.constexpr):
    a_s = ph.alloc_shared((R, C), ml.float16)
    full = ph.alloc_barriers(1)
    ph.barrier_expect_tx(full[0], R * C * 2)
    ph.tme_load(a_desc, [0, 0], a_s, full[0])  # LINE-MARK: ph.tme_load
    ph.barrier_wait(full[0], 0)


def test_tme_box_at_least_32_bytes():
    """A box of one 16-byte row is refused: TME boxes have at least 32 bytes."""
    e = refused(k_tme_small_box, T.DescType(T.f16, (1, 8)), R=1, C=8)
    check_at_mark(e, k_tme_small_box, "tme_load: the box 1x8 of f16 is 16 bytes; a TME box is "
                  "at least 32 bytes")


@pytest.mark.parametrize("r,c", [(1, 16), (2, 8)])
def test_tme_box_of_32_bytes_compiles(r, c):
    warm(k_tme_small_box, T.DescType(T.f16, (r, c)), R=r, C=c)
