"""torch CPU tensors as kernel arrays (issue 10, family 13): every dtype mutile has a type
for (bf16 and fp8 included), tensors that require grad, and non-contiguous views passed as
their data pointer plus strides, as Triton passes them; descriptors of tensors; the
launch errors. Skipped unless torch is installed (.ci/run installs it for this file)."""
from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import testing

torch = pytest.importorskip("torch")

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.float8_e4m3fn,
          torch.float8_e5m2]
SIGNED = [torch.int8, torch.int16, torch.int32, torch.int64]
UNSIGNED = [torch.uint8, torch.uint16, torch.uint32, torch.uint64]
NP_INT = {torch.int8: np.int8, torch.int16: np.int16, torch.int32: np.int32,
          torch.int64: np.int64, torch.uint8: np.uint8, torch.uint16: np.uint16,
          torch.uint32: np.uint32, torch.uint64: np.uint64}
NP = {torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16,
      torch.float32: np.float32, torch.float64: np.float64,
      torch.float8_e4m3fn: ml_dtypes.float8_e4m3fn, torch.float8_e5m2: ml_dtypes.float8_e5m2}


@mutile.jit
def widen(X, Y, n, BLOCK: ml.constexpr):
    """Y = X converted to Y's element type (a widening: exact)."""
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    ml.store(Y + offs, ml.load(X + offs, mask=mask).to(Y.dtype.element_ty), mask=mask)


def poisoned(n, dtype):
    if dtype.is_floating_point:
        return torch.full((n,), float("nan"), dtype=dtype)
    return torch.full((n,), torch.iinfo(dtype).max, dtype=dtype)


def random_tensor(rng, n, dtype):
    """Random values of ``dtype``, made in numpy (bits for integers) and copied in."""
    if dtype == torch.bool:
        return torch.from_numpy(rng.integers(0, 2, n).astype(np.bool_))
    if dtype.is_floating_point:
        v = rng.standard_normal(n) * np.exp2(rng.integers(-4, 5, n))
        return torch.from_numpy(v.astype(np.float32)).to(dtype)
    info = torch.iinfo(dtype)
    raw = rng.integers(0, 256, n * info.bits // 8, dtype=np.uint8)
    return torch.from_numpy(raw).view(dtype).clone()


@pytest.mark.parametrize("dtype", FLOATS + SIGNED + UNSIGNED + [torch.bool], ids=str)
def test_every_dtype_is_read_through_its_data_pointer(backend, rng, dtype):
    n = 100
    x = random_tensor(rng, n, dtype)
    if dtype.is_floating_point:
        out, ref = torch.float64, x.to(torch.float64).numpy()      # torch's own conversion
    elif dtype == torch.bool:
        out, ref = torch.int32, x.numpy().astype(np.int32)
    else:
        out, wide = (torch.int64, np.int64) if dtype in SIGNED else (torch.uint64, np.uint64)
        ref = x.view(torch.uint8).numpy().view(NP_INT[dtype]).astype(wide)   # by the bits
    y = poisoned(n, out)
    widen[(4,)](x, y, n, BLOCK=32, backend=backend)
    got = y.numpy()
    if dtype.is_floating_point:
        assert not np.isnan(got).any()
    np.testing.assert_array_equal(got, ref)



@mutile.jit
def axpb(X, Y, n, a, b, BLOCK: ml.constexpr):
    """Y = a * X + b, computed in f32 and rounded to Y's element type."""
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    x = ml.load(X + offs, mask=mask).to(ml.float32)
    ml.store(Y + offs, (a * x + b).to(Y.dtype.element_ty), mask=mask)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2,
                                   torch.float16], ids=str)
def test_results_are_written_into_bf16_and_fp8_tensors(backend, rng, dtype):
    n = 90
    x = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    y = poisoned(n, dtype)
    axpb[(3,)](x, y, n, 2.0, 0.25, BLOCK=32, backend=backend)
    want = (x.numpy().astype(np.float64) * 2.0 + 0.25).astype(np.float32)   # as the f32 add
    want_bits = want.astype(NP[dtype])      # rounded once, to nearest even (ml_dtypes)
    got = y.view(torch.uint8 if y.element_size() == 1 else torch.int16).numpy()
    np.testing.assert_array_equal(got, want_bits.view(got.dtype))


@mutile.jit
def scale_2d(X, Y, M, N, sxm, sxn, sym, syn, alpha, BM: ml.constexpr, BN: ml.constexpr):
    """Y[i, j] = alpha * X[i, j] through explicit strides, as Triton kernels take them."""
    rm = ml.program_id(0) * BM + ml.arange(0, BM)
    rn = ml.program_id(1) * BN + ml.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = ml.load(X + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask)
    ml.store(Y + rm[:, None] * sym + rn[None, :] * syn, x * alpha, mask=mask)


@pytest.mark.parametrize("view", ["offset", "every_other_column", "transposed"])
def test_non_contiguous_views_are_pointer_plus_strides(backend, rng, view):
    base = torch.from_numpy(rng.standard_normal((40, 50)).astype(np.float32))
    x = {"offset": base[3:, 7:], "every_other_column": base[1:37, ::2],
         "transposed": base.t()}[view]
    assert not x.is_contiguous()
    M, N = x.shape
    out = torch.full((M + 2, N + 3), float("nan"))
    y = out[1:M + 1, 2:N + 2]                            # the output is a view too
    scale_2d[(mutile.cdiv(M, 16), mutile.cdiv(N, 16))](
        x, y, M, N, *x.stride(), *y.stride(), -0.5, BM=16, BN=16, backend=backend)
    np.testing.assert_array_equal(y.numpy(), x.numpy().astype(np.float64) * -0.5)
    assert np.isnan(out.numpy()).sum() == out.numel() - M * N         # nothing outside y


def test_tensors_that_require_grad(backend, rng):
    x = torch.from_numpy(rng.standard_normal(64).astype(np.float32)).requires_grad_(True)
    y = torch.full((64,), float("nan"), requires_grad=True)
    axpb[(2,)](x, y, 64, 2.0, -1.0, BLOCK=32, backend=backend)
    want = (x.detach().numpy().astype(np.float64) * 2.0 - 1.0).astype(np.float32)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    assert x.requires_grad and y.requires_grad and x.grad is None


@mutile.jit
def desc_copy(src, dst, BM: ml.constexpr, BN: ml.constexpr):
    i, j = ml.program_id(0), ml.program_id(1)
    dst.store([i * BM, j * BN], src.load([i * BM, j * BN]) + 1)


def test_descriptors_of_torch_tensors(backend, rng):
    base = torch.from_numpy(rng.standard_normal((4, 24, 32)).astype(np.float32))
    a = base.to(torch.bfloat16)
    out = torch.full((4, 24, 32), float("nan"), dtype=torch.bfloat16)
    src = mutile.TensorDescriptor(a, [96, 32], [32, 1], [32, 32])        # Triton's form
    dst = mutile.TensorDescriptor.from_tensor(out.view(96, 32), [32, 32])
    del a                                   # the descriptor keeps the tensor alive
    gc.collect()
    desc_copy[(3, 1)](src, dst, BM=32, BN=32, backend=backend)
    want = base.to(torch.bfloat16).to(torch.float64).numpy() + 1      # exact in f32
    testing.assert_close(out, want.astype(np.float32).astype(ml_dtypes.bfloat16),
                         atol=0, rtol=0)


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_launch_errors_name_the_argument():
    x = torch.zeros(8, dtype=torch.complex64)
    with pytest.raises(mutile.LaunchError) as e:
        axpb[(1,)](x, torch.zeros(8), 8, 1.0, 0.0, BLOCK=8)
    assert "'X'" in str(e.value) and "complex64" in str(e.value)
    with pytest.raises(mutile.LaunchError) as e:
        axpb[(1,)](torch.zeros(8, device="meta"), torch.zeros(8), 8, 1.0, 0.0, BLOCK=8)
    assert "'X'" in str(e.value) and "device 'meta'" in str(e.value)
    with pytest.raises(mutile.LaunchError) as e:           # no numpy counterpart
        axpb[(1,)](torch.zeros(8, dtype=torch.complex32), torch.zeros(8), 8, 1.0, 0.0, BLOCK=8)
    assert "'X'" in str(e.value) and "torch.complex32 are not supported" in str(e.value)


def test_do_bench_clears_tensor_gradients():
    x = torch.ones(4, requires_grad=True)
    grads = []

    def step():
        grads.append(x.grad)
        (x * 2).sum().backward()

    testing.do_bench(step, warmup=0, rep=1, grad_to_none=[x])
    assert grads[0] is None and grads[-1] is None and x.grad is not None


def test_torchs_compiler_stack_imports_under_the_triton_aliases(run_script):
    """torch probes for a Triton package once; under mutile's aliases it must still see
    none, or ``torch._dynamo`` imports Triton's compiler internals and fails."""
    r = run_script("""
        import mutile
        mutile.as_triton()
        import triton
        import torch._dynamo, torch._inductor
        from torch.utils._triton import has_triton_package
        print(has_triton_package(), triton.__name__)
    """)
    assert r.stdout.split() == ["False", "mutile.compat.triton"]
