"""A tensor descriptor returned from a nested ``@jit`` function and used by the caller
(issue 10, family 9: descriptors built in a helper, as Triton's persistent matmul and
attention kernels build theirs), on both backends against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import poison


@mutile.jit
def row_major_desc(base, M, N, BM: ml.constexpr, BN: ml.constexpr):
    return ml.make_tensor_descriptor(base, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])


@mutile.jit
def two_descs(X, Y, M, N, BM: ml.constexpr, BN: ml.constexpr):
    """A tuple of a descriptor, a number and a descriptor."""
    return row_major_desc(X, M, N, BM, BN), BM * BN, row_major_desc(Y, M, N, BM, BN)


@mutile.jit
def passthrough(d):
    return d


@mutile.jit
def scale_blocks(X, Y, Z, M, N, alpha, BM: ml.constexpr, BN: ml.constexpr):
    """Y = alpha * X + 1 block by block through descriptors made in helpers; Z (a host
    descriptor) goes through a helper and back and gets X's block too."""
    i, j = ml.program_id(0), ml.program_id(1)
    x_desc, size, y_desc = two_descs(X, Y, M, N, BM, BN)
    block = x_desc.load([i * BM, j * BN])
    y_desc.store([i * BM, j * BN], block * alpha + size / (BM * BN))     # + 1.0
    passthrough(Z).store([i * BM, j * BN], passthrough(x_desc).load([i * BM, j * BN]))


@pytest.mark.parametrize("shape,block", [((48, 40), (16, 16)), ((33, 70), (32, 64))])
def test_descriptor_returned_from_a_helper(shape, block, rng, backend):
    M, N = shape
    x = rng.standard_normal(shape).astype(np.float32)
    y = poison(shape, np.float32)
    z = poison(shape, np.float32)
    grid = (-(-M // block[0]), -(-N // block[1]))
    scale_blocks[grid](x, y, mutile.TensorDescriptor(z, list(block)), M, N, 0.5,
                       BM=block[0], BN=block[1], backend=backend)
    np.testing.assert_array_equal(y, (x.astype(np.float64) * 0.5 + 1.0).astype(np.float32))
    np.testing.assert_array_equal(z, x)
