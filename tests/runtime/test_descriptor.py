"""Host-side ``mutile.TensorDescriptor`` arguments: blocks read and written through them on
both backends (views of padded allocations included), and the launch errors."""
import numpy as np
import pytest

import mutile
import mutile.language as ml


@mutile.jit
def copy_blocks(src, dst, BM: ml.constexpr, BN: ml.constexpr):
    """dst's block (i, j) = src's block (i, j) + 1 (out-of-bounds: read 0, not written)."""
    i, j = ml.program_id(0), ml.program_id(1)
    t = src.load([i * BM, j * BN])
    dst.store([i * BM, j * BN], t + 1)


@pytest.mark.parametrize("shape,block", [((100, 40), (32, 16)), ((7, 130), (8, 64)),
                                         ((64, 64), (64, 64))])
def test_blocks_through_host_descriptors(backend, shape, block, rng):
    base = rng.standard_normal((shape[0] + 3, shape[1] + 5)).astype(np.float32)
    src = base[1:1 + shape[0], 2:2 + shape[1]]                 # a strided view
    out = np.full((shape[0], shape[1] + 4), np.nan, np.float32)
    dst = out[:, :shape[1]]
    grid = (-(-shape[0] // block[0]), -(-shape[1] // block[1]))
    copy_blocks[grid](mutile.TensorDescriptor(src, block), mutile.TensorDescriptor(dst, block),
                      BM=block[0], BN=block[1], backend=backend)
    np.testing.assert_array_equal(dst, src + 1)
    assert np.isnan(out[:, shape[1]:]).all()                    # nothing past the view


@pytest.mark.parametrize("make,fragment", [
    (lambda a: mutile.TensorDescriptor(a, [16, 12]), "powers of two"),
    (lambda a: mutile.TensorDescriptor(a, [16]), "block_shape [16] has 1 dims"),
    (lambda a: mutile.TensorDescriptor(a[:, ::2], [16, 8]), "innermost dim must be contiguous"),
    (lambda a: mutile.TensorDescriptor(np.zeros((2,) * 6, np.float32), [2] * 6), "rank 6"),
    (lambda a: mutile.TensorDescriptor(3.0, [16]), "needs an array"),
])
def test_bad_descriptors(make, fragment):
    a = np.zeros((32, 32), np.float32)
    with pytest.raises(mutile.LaunchError) as e:
        make(a)
    assert fragment in str(e.value)


def test_descriptor_of_another_type_is_refused(backend):
    a = np.zeros((64, 64), np.float32)
    k = copy_blocks.warmup(mutile.TensorDescriptor(a, [64, 64]),
                           mutile.TensorDescriptor(a, [64, 64]), BM=64, BN=64, grid=(1, 1),
                           backend=backend)
    b = np.zeros((64, 64), np.float64)
    with pytest.raises(mutile.LaunchError) as e:
        k[(1, 1)](mutile.TensorDescriptor(b, [64, 64]), mutile.TensorDescriptor(a, [64, 64]))
    assert "src" in str(e.value)


def test_read_only_destination_is_refused(backend):
    a = np.zeros((64, 64), np.float32)
    ro = np.zeros((64, 64), np.float32)
    ro.flags.writeable = False
    with pytest.raises(mutile.LaunchError) as e:
        copy_blocks[(1, 1)](mutile.TensorDescriptor(a, [64, 64]),
                            mutile.TensorDescriptor(ro, [64, 64]), BM=64, BN=64,
                            backend=backend)
    assert "read-only" in str(e.value)
