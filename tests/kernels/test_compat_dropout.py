"""Dropout with ``tl.rand``, written the way Triton's tutorial 04 ("low-memory dropout")
and the attention kernels that followed it write it, run on both backends (issue 10,
family 5).

``_seeded_dropout`` is the tutorial's kernel: one seed, the element offsets as the Philox
counters, keep where ``rand > p``, scale the kept values by ``1 / (1 - p)``. The mask is
regenerated from the seed alone, so the backward pass needs no stored mask; the tests
recompute it from the independent Philox oracle of ``tests/language/test_compat_random.py``
and check every output bit: the kept values are ``x / (1 - p)`` with ``1 - p`` in f32 and
one correctly rounded f32 division (float64 numpy rounded once to f32 gives exactly that).
``_dropout_rows`` is the 2-D form (a seed read from memory, int64 offsets ``philox_offset
+ row * n_cols + col``, as fused attention/dropout kernels compute them), forward and
backward. Tails are masked off, and the outputs past the end stay poisoned.
"""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as tl

from ..conftest import assert_bits_equal, poison
from ..language.test_compat_random import randint4x_ref, uniform_ref


@mutile.jit
def _seeded_dropout(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def dropout_ref(x, p, seed, offsets):
    """(output, keep mask) from the oracle: keep where rand > p, kept x / (1 - p) in f32."""
    keep = uniform_ref(randint4x_ref(seed, offsets)[0]) > np.float32(p)
    scale = np.float64(np.float32(1) - np.float32(p))
    out = np.where(keep, (x.astype(np.float64) / scale).astype(np.float32), np.float32(0))
    return out, keep


@pytest.mark.parametrize("p,seed", [(0.5, 123), (0.1, 2 ** 40 + 17)], ids=["p0.5", "p0.1-seed64"])
def test_seeded_dropout(p, seed, rng, backend):
    n, block = 1000, 256
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(n + 24, np.float32)
    grid = (mutile.cdiv(n, block),)
    _seeded_dropout[grid](x, out, n, p, seed, BLOCK_SIZE=block, backend=backend)
    want, keep = dropout_ref(x, p, seed, np.arange(n, dtype=np.int32))
    assert_bits_equal(out[:n], want, "dropout output")
    assert np.isnan(out[n:]).all(), "a masked-off lane was stored"
    assert abs(keep.mean() - (1 - p)) < 6 * np.sqrt(p * (1 - p) / n)
    again = poison(n + 24, np.float32)
    _seeded_dropout[grid](x, again, n, p, seed, BLOCK_SIZE=block, backend=backend)
    assert_bits_equal(again, out, "the same seed gives the same mask")
    other = poison(n + 24, np.float32)
    _seeded_dropout[grid](x, other, n, p, seed + 1, BLOCK_SIZE=block, backend=backend)
    # independent masks differ in 2 p (1 - p) of the places; ask for half of that
    assert ((other[:n] == 0) != (out[:n] == 0)).mean() > p * (1 - p), "seed + 1: same mask"


@mutile.jit
def _dropout_rows(X, DY, Y, DX, seed_ptr, philox_offset, n_rows, n_cols, p,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Y = dropout(X) and DX = dropout'(DY) with the same regenerated mask."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    idx = rows[:, None].to(tl.int64) * n_cols + cols[None, :]
    seed = tl.load(seed_ptr)
    keep = tl.rand(seed, philox_offset + idx) > p
    scale = 1.0 / (1.0 - p)
    x = tl.load(X + idx, mask=mask, other=0.0)
    tl.store(Y + idx, tl.where(keep, x * scale, 0.0), mask=mask)
    dy = tl.load(DY + idx, mask=mask, other=0.0)
    tl.store(DX + idx, tl.where(keep, dy * scale, 0.0), mask=mask)


def test_dropout_rows_forward_backward(rng, backend):
    n_rows, n_cols, bm, bn = 20, 48, 8, 64
    p = 0.25
    seed = int(rng.integers(-2 ** 63, 2 ** 63 - 1))
    philox_offset = 3 * 2 ** 32 + 12345           # an int64 launch argument
    x = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
    dy = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
    y, dx = poison((n_rows, n_cols), np.float32), poison((n_rows, n_cols), np.float32)
    _dropout_rows[(mutile.cdiv(n_rows, bm),)](x, dy, y, dx, np.array([seed], np.int64),
                                             philox_offset, n_rows, n_cols, p,
                                             BLOCK_M=bm, BLOCK_N=bn, backend=backend)
    offsets = philox_offset + np.arange(n_rows * n_cols, dtype=np.int64)
    keep = (uniform_ref(randint4x_ref(seed, offsets)[0]) > np.float32(p)).reshape(x.shape)
    scale = np.float32(1) / (np.float32(1) - np.float32(p))       # f32, as in the kernel
    for got, v, what in ((y, x, "forward"), (dx, dy, "backward")):
        want = np.where(keep, (v.astype(np.float64) * np.float64(scale)).astype(np.float32),
                        np.float32(0))
        assert_bits_equal(got, want, what)
    assert ((y == 0) == (dx == 0)).all(), "forward and backward masks differ"
