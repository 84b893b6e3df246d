"""Host-side ``mutile.TensorDescriptor`` arguments: blocks read and written through them on
both backends (views of padded allocations included), in the short form and in Triton's
(``TensorDescriptor(base, shape, strides, block_shape)``, ``from_tensor``, a block shape
set after construction), and the launch errors."""
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T


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


# ---------------------------------------------------------------- Triton's form
@mutile.jit
def scale_rows(src, dst, alpha, BM: ml.constexpr, BN: ml.constexpr):
    """dst's block (i, j) = alpha * src's block (i, j)."""
    i, j = ml.program_id(0), ml.program_id(1)
    dst.store([i * BM, j * BN], src.load([i * BM, j * BN]) * alpha)


def test_tritons_form_reinterprets_the_base_memory(backend, rng):
    """As Triton's attention tutorial does: a (Z, H, N, D) array seen as (Z*H*N, D)."""
    q = rng.standard_normal((2, 3, 20, 16)).astype(np.float32)
    out = np.full((2, 3, 20, 16), np.nan, np.float32)
    rows = 2 * 3 * 20
    src = mutile.TensorDescriptor(q, shape=[rows, 16], strides=[16, 1], block_shape=[32, 16])
    dst = mutile.TensorDescriptor(out, [rows, 16], [16, 1], [32, 16])
    assert (src.shape, src.strides, src.block_shape) == ([rows, 16], [16, 1], [32, 16])
    scale_rows[(-(-rows // 32), 1)](src, dst, 0.5, BM=32, BN=16, backend=backend)
    np.testing.assert_array_equal(out, q.astype(np.float64) * 0.5)


def test_from_tensor_and_a_block_shape_set_after_construction(backend, rng):
    """``from_tensor`` takes the array's own shape and strides; a hook may set
    ``block_shape`` before the launch (Triton's attention tutorial's pre_hook)."""
    base = rng.standard_normal((40, 70)).astype(np.float32)
    a = base[3:35, 5:53]                                    # a strided view
    out = np.full((32, 48), np.nan, np.float32)
    src = mutile.TensorDescriptor.from_tensor(a, [8, 8])
    dst = mutile.TensorDescriptor.from_tensor(out, [8, 8])
    assert (src.shape, src.strides) == ([32, 48], [70, 1])
    src.block_shape = dst.block_shape = [16, 16]          # what a pre_hook does
    k = scale_rows[(2, 3)](src, dst, -2.0, BM=16, BN=16, backend=backend)
    np.testing.assert_array_equal(out, a.astype(np.float64) * -2.0)
    assert k.spec["src"] == T.DescType(T.f32, (16, 16))
    src.block_shape = [16, 12]
    with pytest.raises(mutile.LaunchError) as e:
        scale_rows[(2, 3)](src, dst, -2.0, BM=16, BN=16, backend=backend)
    assert "powers of two" in str(e.value)


@pytest.mark.parametrize("make, fragment", [
    (lambda a: mutile.TensorDescriptor(a, [32, 33], [32, 1], [16, 16]), "past the 4096 bytes"),
    (lambda a: mutile.TensorDescriptor(a, [32, 32], [32], [16, 16]), "differ in rank"),
    (lambda a: mutile.TensorDescriptor(a, [32, 32], [-32, 1], [16, 16]), "non-negative"),
    (lambda a: mutile.TensorDescriptor(a, [32, 32], [32, 1]), "takes (base, shape, strides"),
    (lambda a: mutile.TensorDescriptor(a, [16, 16], padding="nan"), "padding='nan'"),
    (lambda a: mutile.TensorDescriptor(a, [16, 16], [64, 2], [16, 16]), "innermost dim"),
])
def test_bad_descriptors_of_tritons_form(make, fragment):
    a = np.zeros((32, 32), np.float32)
    with pytest.raises(mutile.LaunchError) as e:
        make(a)
    assert fragment in str(e.value)
