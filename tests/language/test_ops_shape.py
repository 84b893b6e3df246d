"""Shape builtins: trans (2-D and with dims), ``.T``, permute of a 3-D tile, reshape /
view (row-major), broadcast_to, broadcast, expand_dims (one axis, several, negative),
``x[:, None]`` / ``x[None, :]``, and the constructors full / zeros / zeros_like —
against numpy, bit for bit. Every result goes flattened to its own poisoned slot."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import assert_bits_equal, poison, random_data

A, B = 4, 8                 # the 2-D tile
D0, D1, D2 = 2, 4, 8        # the 3-D tile
SLOT = 64


@mutile.jit
def put(base, slot, v, SLOT: ml.constexpr):
    """Store ``v`` (rank 0..3) flattened row-major at the start of row ``slot``."""
    ml.static_assert(v.dtype == base.dtype.element_ty, "result dtype differs from the slot's")
    p = base + slot * SLOT
    if len(v.shape) == 0:
        ml.store(p, v)
    elif len(v.shape) == 1:
        ml.store(p + ml.arange(0, v.shape[0]), v)
    elif len(v.shape) == 2:
        ml.store(p + ml.arange(0, v.shape[0])[:, None] * v.shape[1]
                 + ml.arange(0, v.shape[1])[None, :], v)
    else:
        i = ml.arange(0, v.shape[0])[:, None, None] * (v.shape[1] * v.shape[2])
        j = ml.arange(0, v.shape[1])[None, :, None] * v.shape[2]
        k = ml.arange(0, v.shape[2])[None, None, :]
        ml.store(p + i + j + k, v)


@mutile.jit
def shape_ops(X, X3, O, A: ml.constexpr, B: ml.constexpr, D0: ml.constexpr,
              D1: ml.constexpr, D2: ml.constexpr, SLOT: ml.constexpr):
    x = ml.load(X + ml.arange(0, A)[:, None] * B + ml.arange(0, B)[None, :])
    i = ml.arange(0, D0)[:, None, None] * (D1 * D2)
    j = ml.arange(0, D1)[None, :, None] * D2
    k = ml.arange(0, D2)[None, None, :]
    x3 = ml.load(X3 + i + j + k)
    r = ml.load(X + ml.arange(0, B))                        # the first row, 1-D
    put(O, 0, ml.trans(x), SLOT)
    put(O, 1, x.T, SLOT)
    put(O, 2, ml.permute(x3, (2, 0, 1)), SLOT)
    put(O, 3, ml.permute(x3, 1, 2, 0), SLOT)
    put(O, 4, ml.trans(x3, 0, 2, 1), SLOT)
    put(O, 5, ml.reshape(x, [B, A]), SLOT)
    put(O, 6, ml.reshape(x, A * B), SLOT)
    put(O, 7, x3.reshape(D0 * D1, D2), SLOT)
    put(O, 8, ml.view(x3, [D2, D0 * D1]), SLOT)
    put(O, 9, ml.broadcast_to(r, [A, B]), SLOT)
    put(O, 10, ml.broadcast_to(r[:, None], (B, 4)), SLOT)
    put(O, 11, r[None, :] + x, SLOT)                         # implicit broadcast
    put(O, 12, ml.expand_dims(r, 0), SLOT)
    put(O, 13, ml.expand_dims(r, 1), SLOT)
    put(O, 14, ml.expand_dims(r, (0, 2)), SLOT)
    put(O, 15, r.expand_dims(-1), SLOT)
    p, q = ml.broadcast(r[:, None], r[None, :])
    put(O, 16, p - q, SLOT)
    put(O, 17, ml.full([A, B], 3, X.dtype.element_ty), SLOT)
    put(O, 18, ml.zeros_like(x) + x * 0 + 1, SLOT)
    put(O, 19, ml.zeros([B], X.dtype.element_ty), SLOT)
    put(O, 20, ml.full([2, 4], ml.load(X + 5), X.dtype.element_ty), SLOT)
    put(O, 21, ml.permute(ml.permute(x3, 2, 0, 1), 1, 2, 0), SLOT)   # round trip
    put(O, 22, ml.reshape(ml.trans(x), [A * B]), SLOT)
    put(O, 23, ml.broadcast_to(ml.load(X + 3), [4]), SLOT)


@pytest.mark.parametrize("dtype", [np.float32, np.int16], ids=["f32", "i16"])
def test_shape_ops(dtype, rng, backend):
    x = random_data(dtype, (A, B), rng, specials=False)
    x3 = random_data(dtype, (D0, D1, D2), rng, specials=False)
    o = poison((24, SLOT), dtype)
    shape_ops[(1,)](x, x3, o, A=A, B=B, D0=D0, D1=D1, D2=D2, SLOT=SLOT, backend=backend)
    r = x[0]
    one = np.ones((A, B), dtype)
    wants = [x.T, x.T, x3.transpose(2, 0, 1), x3.transpose(1, 2, 0), x3.transpose(0, 2, 1),
             x.reshape(B, A), x.reshape(-1), x3.reshape(D0 * D1, D2), x3.reshape(D2, D0 * D1),
             np.broadcast_to(r, (A, B)), np.broadcast_to(r[:, None], (B, 4)), r[None, :] + x,
             r[None, :], r[:, None], r[None, :, None], r[:, None],
             r[:, None] - r[None, :], np.full((A, B), 3, dtype), one, np.zeros(B, dtype),
             np.full((2, 4), x.ravel()[5], dtype), x3, x.T.reshape(-1), np.full(4, x.ravel()[3])]
    for k, want in enumerate(wants):
        want = np.asarray(want).astype(dtype)
        assert_bits_equal(o[k, :want.size], want.ravel(), f"slot {k}")
        assert_bits_equal(o[k, want.size:], poison(SLOT - want.size, dtype), f"slot {k} overrun")


@mutile.jit
def full_0d_plus_scalar(X, Y, eps: ml.constexpr):
    pid = ml.program_id(0)
    e = ml.full((), eps, ml.float32)           # shape (): a scalar, as in Triton
    ml.static_assert(len(e.shape) == 0, "full(()) is a scalar")
    ml.store(Y + pid, ml.load(X + pid) + e)
    ml.store(Y + ml.num_programs(0) + pid, ml.zeros([], ml.float32) - ml.load(X + pid))


@mutile.jit
def store_full_0d(Y, eps: ml.constexpr):
    ml.store(Y + ml.program_id(0), ml.full((), eps, ml.float32))


def test_full_of_empty_shape_combines_with_scalars(rng, backend):
    """``ml.full((), eps, dtype)`` and ``ml.zeros([], dtype)`` add to a scalar (they were
    0-d tiles, and 'operand types differ')."""
    x = random_data(np.float32, 4, rng)
    y = poison(8, np.float32)
    full_0d_plus_scalar[(4,)](x, y, 1.0e-3, backend=backend)
    x64 = x.astype(np.float64)
    assert_bits_equal(y[:4], (x64 + float(np.float32(1.0e-3))).astype(np.float32), "x + eps")
    assert_bits_equal(y[4:], (0.0 - x64).astype(np.float32), "0 - x")


def test_store_of_full_of_empty_shape(backend):
    """A 0-d ``full`` stored at one address per program (the llvm backend crashed on the
    0-d tile; pinghu rejected it)."""
    y = poison(8, np.float32)
    store_full_0d[(4,)](y, 0.25, backend=backend)
    assert_bits_equal(y, np.array([0.25] * 4 + [np.nan] * 4, np.float32), "stored eps")


@mutile.jit
def reshape_to_scalar(X):
    ml.store(X, ml.reshape(ml.load(X + ml.arange(0, 1)), ()))


def test_reshape_to_no_dims_is_refused(compile_ir):
    """A 1-element tile does not become a scalar by reshape (that IR shape, a 0-d tile,
    is not one the backends take); the error says what does."""
    from mutile.ir import types as T
    with pytest.raises(mutile.CompilationError, match=r"cannot reshape the tile \[1\] to a "
                                                      r"scalar; take its element with ml.sum"):
        compile_ir(reshape_to_scalar, X=T.PointerType(T.f32))
