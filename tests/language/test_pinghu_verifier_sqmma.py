"""Illegal uses of ``mutile.language.pinghu``, refused at the user's line: SQMMA
(the scheme is described in pinghu_verify_kit.py)."""
from __future__ import annotations

import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from .pinghu_verify_kit import (F32_64, P32, _plain_environment, check_at_mark,  # noqa: F401
                               refused, warm)

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
                                   (T.u8, T.i8), (T.i8, T.u8), (T.u8, T.f8e4m3),
                                   (T.i32, T.i32)], ids=str)
def test_sqmma_operand_types(da, db):
    e = refused(k_sqmma, **sqmma_spec(da, db, 64, 64, 64))
    check_at_mark(e, k_sqmma, f"SQMMA has no {da} x {db} form")


@pytest.mark.parametrize("da,db", [(T.bf16, T.bf16), (T.f16, T.f16), (T.f32, T.f32),
                                   (T.i8, T.i8), (T.u8, T.u8), (T.f8e4m3, T.f8e5m2),
                                   (T.f8e5m2, T.f8e4m3)], ids=str)
def test_sqmma_legal_operand_types_compile(da, db):
    warm(k_sqmma, **sqmma_spec(da, db, 64, 64, 64))


SHAPES = ("16x64, 32x32, 32x64, 32x128, 64x16, 64x32, 64x64, 64x128, 128x32, 128x64, "
          "128x128")                       # the machine file's SQMMA instructions (M x N)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
@pytest.mark.parametrize("m,n", [(64, 8), (8, 64), (16, 16), (16, 32), (32, 16), (8, 8)])
def test_sqmma_tile_no_instructions_cover(m, n, ta, tb):
    """Only the machine file's M x N exist (not every M x N of 16 .. 128): an
    accumulator no grid of one of them tiles is refused, naming them."""
    e = refused(k_sqmma, **sqmma_spec(T.bf16, T.bf16, m, n, 32, ta=ta, tb=tb))
    check_at_mark(e, k_sqmma, f"no SQMMA instructions tile a {m}x{n} accumulator",
                  f"one instruction is M x N (M per WarpSquad) {SHAPES}")


@pytest.mark.parametrize("ta,tb,note", [(False, False, True), (True, True, True),
                                        (False, True, False)])
def test_sqmma_tf32_shapes_depend_on_the_majors(ta, tb, note):
    """f32 operands (as tf32) have 128x64 only with K-major A and B (A stored M x K, B
    stored N x K): the refusal names the shapes the operands' majors allow."""
    e = refused(k_sqmma, **sqmma_spec(T.f32, T.f32, 16, 16, 8, ta=ta, tb=tb))
    shapes = SHAPES if not note else SHAPES.replace(", 128x64", "")
    check_at_mark(e, k_sqmma, "no SQMMA instructions tile a 16x16 accumulator",
                  f"(M per WarpSquad) {shapes}")
    assert ("128x64 for f32 as tf32 need K-major A and B" in e.msg) == note, e.msg


@pytest.mark.parametrize("m,n", [(64, 256), (256, 64), (16, 128), (128, 16), (1024, 64),
                                 (32, 512)])
def test_sqmma_tiles_larger_than_an_instruction_pass_the_verifier(m, n):
    """The IR's SQMMA is any tile a grid of instructions covers (codegen splits it over
    the squads and into instructions; tests/backends/pinghu/codegen/test_sqmma.py runs
    such splits)."""
    _, stages, _ = frontend_and_passes(k_sqmma, sqmma_spec(T.bf16, T.bf16, m, n, 32),
                                       {"backend": "pinghu"}, verify=True)
    text = stages[list(stages)[-1]]
    assert f"tile<{m}x{n}xf32>" in text and "ph.sqmma" in text, text


@pytest.mark.parametrize("m,n", [(64, 48), (48, 64), (96, 64)])
def test_sqmma_m_n_not_powers_of_two(m, n):
    """The accumulator is a tile, so its dims are powers of two before SQMMA's own sets."""
    e = refused(k_sqmma, **sqmma_spec(T.bf16, T.bf16, m, n, 32))
    check_at_mark(e, k_sqmma, f"shape [{m}, {n}]: every dim must be a power of two")


@pytest.mark.parametrize("m,n,warps,part", [(16, 64, 8, "8x64"), (32, 64, 16, "8x64"),
                                             (64, 16, 8, "32x16"), (32, 32, 8, "16x32"),
                                             (128, 16, 32, "16x16")])
def test_sqmma_part_of_a_squad_no_instructions_cover(m, n, warps, part):
    """The IR tile is covered (the verifier passes), but the rows split over more squads
    leave each a part no instruction shape tiles: codegen refuses it at the line."""
    e = refused(k_sqmma, num_warps=warps, **sqmma_spec(T.bf16, T.bf16, m, n, 32))
    check_at_mark(e, k_sqmma, "no SQMMA instructions tile the accumulator's part of one "
                  f"WarpSquad: {m} rows over {warps // 4} squad(s) give {part}", SHAPES)


@pytest.mark.parametrize("m,n,warps", [(16, 64, 4), (128, 32, 4), (256, 64, 8), (64, 64, 8),
                                       (16, 128, 4), (128, 16, 4), (256, 64, 4),
                                       (64, 256, 4)])
def test_sqmma_m_per_squad_legal_compiles(m, n, warps):
    warm(k_sqmma, num_warps=warps, **sqmma_spec(T.bf16, T.bf16, m, n, 32))


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
