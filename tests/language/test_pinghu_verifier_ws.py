"""Illegal uses of ``mutile.language.pinghu``, refused at the user's line: ph.warp_specialize
(the scheme is described in pinghu_verify_kit.py)."""
from __future__ import annotations

import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph
from mutile.ir import types as T

from .pinghu_verify_kit import (P32, _plain_environment, check_at_mark,  # noqa: F401
                               refused, warm)

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
    ml.store(y_ptr, ml.sum(ml.load(x_ptr + r), 0))  # LINE-MARK: ml.sum


@mutile.jit
def p_sum_too(x_ptr, y_ptr):
    r = ml.arange(0, 512)
    ml.store(y_ptr + 1, ml.sum(ml.load(x_ptr + r), 0))


@mutile.jit
def k_ws_two_scratch(x_ptr, y_ptr):
    ph.warp_specialize([(p_sum, (x_ptr, y_ptr), 4), (p_sum_too, (x_ptr, y_ptr), 4)])


def test_ws_one_partition_uses_shared_scratch():
    """The error names the reduction of the partition lowered second: the first one,
    since the partitions' code is laid out last partition first."""
    e = refused(k_ws_two_scratch, P32, P32)
    check_at_mark(e, p_sum, "two ph.warp_specialize partitions move tiles through "
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
    check_at_mark(e, p_sqmma, "no SQMMA instructions tile the accumulator's part of one "
                  f"WarpSquad: {m} rows over {w // 4} squad(s) give {per_squad}x64")


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


@mutile.jit
def _ws_mma_part(a_s, b_s):
    acc = ph.sqmma(a_s, b_s)  # LINE-MARK: sqmma
    acc = ph.sqmma_wait(acc)


@mutile.jit
def _ws_idle_part(x):
    pass


@mutile.jit
def k_ws_sqmma_misaligned():
    a_s = ph.alloc_shared((64, 64), ml.bfloat16)
    b_s = ph.alloc_shared((64, 64), ml.bfloat16)
    ph.warp_specialize([(_ws_idle_part, (1,), 4), (_ws_idle_part, (2,), 2),
                        (_ws_mma_part, (a_s, b_s), 4)])


def test_sqmma_partition_must_start_at_a_squad():
    e = refused(k_ws_sqmma_misaligned)
    check_at_mark(e, _ws_mma_part, "whole WarpSquads", "starts at warp 6")
