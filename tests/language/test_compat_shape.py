"""Triton's shape builtins beyond reshape/permute (issue 10, family 6): ``join``,
``split``, ``interleave``, ``cat`` (along each dim), ``ravel``, ``expand_dims``,
``squeeze``/``unsqueeze``, ``gather`` along each axis, and ``swizzle2d``'s grouped
order — bit for bit against numpy for several dtypes (elements move as their bits, so
NaN payloads and -0.0 survive), outputs poisoned, both backends.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import assert_bits_equal, marked, poison, random_data, tile_offsets

A, B = 4, 8


@mutile.jit
def join_split_kernel(X, Y, JOIN, SPLIT_A, SPLIT_B, INTER, CAT0, CAT1, RAVEL, UNSQ, SQ,
                      A: ml.constexpr, B: ml.constexpr):
    offs = tile_offsets(A, B, 1, 2)
    x = ml.load(X + offs)
    y = ml.load(Y + offs)
    j = ml.join(x, y)                                          # [A, B, 2]
    ml.store(JOIN + tile_offsets(A, B, 2, 3), j)
    p, q = ml.split(ml.flip(j, 2))                             # halves of the last dim
    ml.store(SPLIT_A + offs, p)
    ml.store(SPLIT_B + offs, q)
    ml.store(INTER + tile_offsets(A, 2 * B, 1, 2), ml.interleave(x, y))
    ml.store(CAT0 + tile_offsets(2 * A, B, 1, 2), ml.cat(x, y))
    ml.store(CAT1 + tile_offsets(A, 2 * B, 1, 2), ml.cat(x, y, dim=1))
    ml.store(RAVEL + ml.arange(0, A * B), ml.ravel(x))
    u = ml.unsqueeze(x, -1)                                    # [A, B, 1]
    ml.store(UNSQ + tile_offsets(A, B, 1, 3), u)
    ml.store(SQ + offs, ml.squeeze(ml.squeeze(ml.expand_dims(u, 0), 0), -1))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int8, np.int64])
def test_join_split_interleave_cat_ravel_squeeze(dtype, rng, backend):
    x, y = random_data(dtype, (A, B), rng), random_data(dtype, (A, B), rng)
    outs = [poison((A, B, 2), dtype), poison((A, B), dtype), poison((A, B), dtype),
            poison((A, 2 * B), dtype), poison((2 * A, B), dtype), poison((A, 2 * B), dtype),
            poison(A * B, dtype), poison((A, B, 1), dtype), poison((A, B), dtype)]
    join_split_kernel[(1,)](x, y, *outs, A=A, B=B, backend=backend)
    assert_bits_equal(outs[0], np.stack([x, y], -1), "join")
    assert_bits_equal(outs[1], y, "split of the flipped join: first")
    assert_bits_equal(outs[2], x, "split: second")
    inter = np.empty((A, 2 * B), dtype)
    inter[:, 0::2], inter[:, 1::2] = x, y
    assert_bits_equal(outs[3], inter, "interleave")
    assert_bits_equal(outs[4], np.concatenate([x, y], 0), "cat")
    assert_bits_equal(outs[5], np.concatenate([x, y], 1), "cat(dim=1)")
    assert_bits_equal(outs[6], x.reshape(-1), "ravel")
    assert_bits_equal(outs[7], x[:, :, None], "unsqueeze(-1)")
    assert_bits_equal(outs[8], x, "squeeze(squeeze(expand_dims(unsqueeze)))")


@mutile.jit
def scalar_join_kernel(X, O, O2):
    a = ml.load(X)
    b = ml.load(X + 1)
    j = ml.join(a, b)                                          # two scalars: shape [2]
    ml.store(O + ml.arange(0, 2), j)
    lo, hi = ml.split(j)                                       # back to scalars
    ml.store(O2, hi * 10.0 + lo)
    ml.store(O2 + 1 + ml.arange(0, 4), ml.interleave(ml.join(a, 7.0), ml.join(b, 9.0)))


def test_join_of_scalars_and_numbers(rng, backend):
    x = rng.standard_normal(2).astype(np.float32)
    o, o2 = poison(2, np.float32), poison(5, np.float32)
    scalar_join_kernel[(1,)](x, o, o2, backend=backend)
    assert_bits_equal(o, x, "join of scalars")
    want = np.array([np.float32(x[1]) * np.float32(10) + x[0], x[0], x[1], 7, 9], np.float32)
    assert_bits_equal(o2, want, "split to scalars; interleave of joins")


@mutile.jit
def gather_kernel(X, I0, I1, G0, G1, A: ml.constexpr, B: ml.constexpr, C: ml.constexpr):
    x = ml.load(X + tile_offsets(A, B, 1, 2))
    i0 = ml.load(I0 + tile_offsets(C, B, 1, 2))         # picks rows: [C, B] indices into A
    ml.store(G0 + tile_offsets(C, B, 1, 2), ml.gather(x, i0, 0))
    i1 = ml.load(I1 + tile_offsets(A, C, 1, 2))         # picks columns: [A, C] indices into B
    ml.store(G1 + tile_offsets(A, C, 1, 2), x.gather(i1, axis=-1))


@pytest.mark.parametrize("dtype,itype", [(np.float32, np.int32), (ml_dtypes.bfloat16, np.int64),
                                         (np.uint16, np.int16)])
def test_gather(dtype, itype, rng, backend):
    C = 16
    x = random_data(dtype, (A, B), rng)
    i0 = rng.integers(0, A, (C, B)).astype(itype)
    i1 = rng.integers(0, B, (A, C)).astype(itype)
    g0, g1 = poison((C, B), dtype), poison((A, C), dtype)
    gather_kernel[(1,)](x, i0, i1, g0, g1, A=A, B=B, C=C, backend=backend)
    assert_bits_equal(g0, np.take_along_axis(x, i0.astype(np.int64), 0), "gather axis 0")
    assert_bits_equal(g1, np.take_along_axis(x, i1.astype(np.int64), 1), "gather axis 1")


@mutile.jit
def wide_gather_kernel(X, I, G, R: ml.constexpr, S: ml.constexpr):
    offs = tile_offsets(R, S, 1, 2)
    ml.store(G + offs, ml.gather(ml.load(X + offs), ml.load(I + offs), 1))


def test_a_gather_larger_than_one_step(rng, backend):
    """index.numel * n = 4 * 64 * 64, twice the budget: the gather runs in pieces."""
    from mutile.language.shapes import GATHER_BUDGET
    R, S = 4, 64
    assert R * S * S > GATHER_BUDGET
    x = random_data(np.float32, (R, S), rng)
    idx = rng.integers(0, S, (R, S)).astype(np.int32)
    g = poison((R, S), np.float32)
    wide_gather_kernel[(1,)](x, idx, g, R=R, S=S, backend=backend)
    assert_bits_equal(g, np.take_along_axis(x, idx.astype(np.int64), 1), "gather in pieces")


@mutile.jit
def swizzle_kernel(NI, NJ, size_i, size_j, size_g, R: ml.constexpr, S: ml.constexpr):
    i = ml.arange(0, R)[:, None]
    j = ml.arange(0, S)[None, :]
    a, b = ml.swizzle2d(i, j, size_i, size_j, size_g)
    m = (i < size_i) & (j < size_j)
    ml.store(NI + i * S + j, a, mask=m)
    ml.store(NJ + i * S + j, b, mask=m)


def _swizzle_ref(si, sj, sg):
    ni, nj = np.zeros((si, sj), np.int32), np.zeros((si, sj), np.int32)
    for i in range(si):
        for j in range(sj):
            ij = i * sj + j
            first = ij // (sg * sj) * sg
            rows = min(si - first, sg)
            ni[i, j] = first + (ij % (sg * sj)) % rows
            nj[i, j] = (ij % (sg * sj)) // rows
    return ni, nj


@pytest.mark.parametrize("si,sj,sg", [(4, 4, 2), (7, 8, 3), (8, 5, 8)])
def test_swizzle2d(si, sj, sg, backend):
    R = S = 8
    ni, nj = poison((R, S), np.int32), poison((R, S), np.int32)
    swizzle_kernel[(1,)](ni, nj, si, sj, sg, R=R, S=S, backend=backend)
    want_i, want_j = _swizzle_ref(si, sj, sg)
    assert_bits_equal(ni[:si, :sj], want_i, "new i")
    assert_bits_equal(nj[:si, :sj], want_j, "new j")
    assert len(set(zip(ni[:si, :sj].ravel(), nj[:si, :sj].ravel()))) == si * sj, \
        "a permutation of the grid"
    if (si, sj, sg) == (4, 4, 2):              # the example of Triton's docstring
        moved = np.zeros((4, 4), np.int32)
        moved[ni[:4, :4], nj[:4, :4]] = np.arange(16).reshape(4, 4)
        assert_bits_equal(moved, np.array([[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14],
                                           [9, 11, 13, 15]], np.int32), "docstring example")


# ---------------------------------------------------------------- errors
@mutile.jit
def err_split(X):
    x = ml.load(X + ml.arange(0, 16))
    a, b = ml.split(ml.reshape(x, [4, 4]))  # LINE-MARK: ml.split
    ml.store(X + ml.arange(0, 4), a)


@mutile.jit
def err_cat(X):
    x = ml.load(X + ml.arange(0, 16))
    y = ml.cat(x, ml.reshape(x, [2, 8]))  # LINE-MARK: ml.cat
    ml.store(X + ml.arange(0, 32), y)


@mutile.jit
def err_join_dtypes(X):
    x = ml.load(X + ml.arange(0, 16))
    y = ml.join(x, x.to(ml.float16))  # LINE-MARK: ml.join
    ml.store(X + ml.arange(0, 16), y)


@mutile.jit
def err_squeeze(X):
    x = ml.load(X + ml.arange(0, 16))
    y = ml.squeeze(ml.reshape(x, [2, 8]), 1)  # LINE-MARK: ml.squeeze
    ml.store(X + ml.arange(0, 16), y)


@mutile.jit
def err_gather_shape(X):
    x = ml.load(X + tile_offsets(4, 8, 1, 2))
    y = ml.gather(x, ml.zeros([2, 4], ml.int32), 1)  # LINE-MARK: ml.gather
    ml.store(X + tile_offsets(2, 4, 1, 2), y)


@mutile.jit
def err_gather_float(X):
    x = ml.load(X + ml.arange(0, 16))
    y = ml.gather(x, x, 0)  # LINE-MARK: ml.gather
    ml.store(X + ml.arange(0, 16), y)


@pytest.mark.parametrize("kernel,pattern", [
    (err_split, r"split needs a last dim of size 2, got shape \[4, 4\]"),
    (err_cat, r"cat needs two tiles of one shape, got \[16\] and \[2, 8\]"),
    (err_join_dtypes, r"join needs two tensors of one dtype, got ml.float32 and ml.float16"),
    (err_squeeze, r"squeeze: dim 1 of shape \[2, 8\] has size 8, not 1"),
    (err_gather_shape, r"gather: index shape \[2, 4\] must equal src shape \[4, 8\] except "
                       r"along axis 1"),
    (err_gather_float, r"gather: index must be an integer tile, got ml.float32"),
])
def test_bad_shapes_point_at_the_call(kernel, pattern):
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, {"X": T.PointerType(T.f32)}, {}, verify=True)
    e, m = info.value, marked(kernel)
    assert re.search(pattern, e.msg), e.msg
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert "shapes.py" not in str(e) and "compose.py" not in str(e)
