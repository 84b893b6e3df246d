"""flash_attention_backward: against float64 finite differences of the reference on small
shapes (every mod, GQA, varlen) and the analytic float64 gradients elsewhere."""
import numpy as np
import pytest

import mutile
from mutile.kernels import block_mask as bmk
from mutile.kernels.attention import attention_reference, flash_attention
from mutile.kernels.attention_bwd import flash_attention_backward

from .attention_kit import BF16, F16, F32, assert_grads, poisoned_like, qkv, reference_grads


def grads(q, k, v, do, backend, **kw):
    fwd_kw = {n: x for n, x in kw.items() if n != "score_mod_grad"}
    o, lse = flash_attention(q, k, v, return_lse=True, backend=backend, **fwd_kw)
    out = tuple(poisoned_like(x) for x in (q, k, v))
    got = flash_attention_backward(do, q, k, v, o, lse, out=out, backend=backend, **kw)
    assert all(g is x for g, x in zip(got, out))
    return got


def finite_differences(q, k, v, do, ref_kw, picks=10, eps=1e-6, seed=0):
    """Central differences of sum(o * do) in float64 at ``picks`` random entries of each
    of q, k, v: [(index, value)] per input."""
    arrs = [np.asarray(x, np.float64) for x in (q, k, v)]
    do = np.asarray(do, np.float64)
    rng = np.random.default_rng(seed)
    out = []
    for t in range(3):
        got = []
        for flat in rng.choice(arrs[t].size, picks, replace=False):
            idx = np.unravel_index(flat, arrs[t].shape)
            vals = []
            for sign in (1, -1):
                a = [x.copy() for x in arrs]
                a[t][idx] += sign * eps
                vals.append((attention_reference(*a, **ref_kw)[0] * do).sum())
            got.append((idx, (vals[0] - vals[1]) / (2 * eps)))
        out.append(got)
    return out


SLOPES = np.array([0.3, 0.7], np.float32)
FD_CASES = {
    "plain": ({}, {}),
    "causal_softcap_alibi": (dict(causal=True, softcap=0.6, alibi_slopes=SLOPES),
                             dict(causal=True, softcap=0.6, alibi_slopes=SLOPES)),
    "window_softcap_mod_prefix": (
        dict(window=(9, 3), score_mod=bmk.softcap_score_mod(0.5),
             mask_mod=bmk.prefix_lm_mask(7)),
        dict(window=(9, 3), score_fn=lambda s, b, h, i, j: 0.5 * np.tanh(s / 0.5),
             mask_fn=lambda b, h, i, j: (j < 7) | (i >= j))),
    "relative_mod": (dict(score_mod=bmk.relative_position_bias(0.1), causal=True),
                     dict(score_fn=lambda s, b, h, i, j: s + 0.1 * (i - j), causal=True)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FD_CASES))
def test_against_finite_differences(backend, rng, name):
    kern_kw, ref_kw = FD_CASES[name]
    dtype = F32 if backend == "llvm" else F16
    q, k, v, do = qkv(rng, 1, 2, 2, 24, 30, 16, dtype, n=4)
    got = grads(q, k, v, do, backend, **kern_kw)
    atol = 1e-4 if dtype == F32 else 5e-3
    for t, picks in enumerate(finite_differences(q, k, v, do, ref_kw)):
        for idx, want in picks:
            assert abs(float(got[t][idx]) - want) <= atol + atol * abs(want), \
                ("dq dk dv".split()[t], idx, float(got[t][idx]), want)


@pytest.mark.slow
def test_gqa_and_varlen_against_finite_differences(backend, rng):
    dtype = F32 if backend == "llvm" else F16
    cu_q, cu_k = np.array([0, 9, 24], np.int32), np.array([0, 14, 26], np.int32)
    q, k, v = qkv(rng, 1, 4, 2, 24, 26, 16, dtype)
    do = rng.standard_normal(q.shape).astype(dtype)
    kw = dict(causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    got = grads(q, k, v, do, backend, enable_gqa=True, **kw)
    atol = 1e-4 if dtype == F32 else 5e-3
    for t, picks in enumerate(finite_differences(q, k, v, do, kw, picks=14)):
        for idx, want in picks:
            assert abs(float(got[t][idx]) - want) <= atol + atol * abs(want), (t, idx)


@pytest.mark.slow
@pytest.mark.parametrize("dtype,causal", [(F16, False), (BF16, True)], ids=str)
def test_analytic_dtypes(backend, rng, dtype, causal):
    q, k, v, do = qkv(rng, 2, 2, 2, 70, 90, 64, dtype, n=4)
    assert_grads(grads(q, k, v, do, backend, causal=causal),
                 reference_grads(q, k, v, do, causal=causal), dtype)


@pytest.mark.slow
def test_analytic_head_dim_128_gqa_softcap(backend, rng):
    q, k, v = qkv(rng, 1, 4, 1, 64, 64, 128, F16)
    do = rng.standard_normal(q.shape).astype(F16)
    kw = dict(causal=True, softcap=1.5)
    assert_grads(grads(q, k, v, do, backend, enable_gqa=True, **kw),
                 reference_grads(q, k, v, do, **kw), F16)


@pytest.mark.slow
def test_analytic_with_block_mask(backend, rng):
    mod = bmk.document_mask([40, 25, 31], causal=True)
    bm = bmk.create_block_mask(mod, None, None, 96, 96, BLOCK_SIZE=32, backend=backend)
    q, k, v, do = qkv(rng, 1, 2, 2, 96, 96, 64, F16, n=4)
    fn = (lambda b, h, i, j: (np.searchsorted([40, 65], i, "right")
                              == np.searchsorted([40, 65], j, "right")) & (i >= j))
    assert_grads(grads(q, k, v, do, backend, block_mask=bm),
                 reference_grads(q, k, v, do, mask_fn=fn), F16)


@mutile.jit
def square_mod(score, b, h, q_idx, kv_idx):
    return score * score * 0.5


@mutile.jit
def square_grad(score, b, h, q_idx, kv_idx):
    return score


def test_user_score_mod_with_its_derivative(backend, rng):
    q, k, v, do = qkv(rng, 1, 1, 1, 32, 32, 16, F16, n=4)
    got = grads(q, k, v, do, backend, score_mod=square_mod, score_mod_grad=square_grad)
    want = reference_grads(q, k, v, do, score_fn=lambda s, b, h, i, j: s * s * 0.5,
                           score_grad_fn=lambda s, b, h, i, j: s)
    assert_grads(got, want, F16)


def test_score_mod_without_derivative_is_refused():
    rng = np.random.default_rng(4)
    q, k, v, do = qkv(rng, 1, 1, 1, 16, 16, 16, F32, n=4)
    o, lse = flash_attention(q, k, v, score_mod=square_mod, return_lse=True)
    with pytest.raises(ValueError, match="no known derivative"):
        flash_attention_backward(do, q, k, v, o, lse, score_mod=square_mod)
    with pytest.raises(ValueError, match="lse"):
        flash_attention_backward(do, q, k, v, o, lse[:, :, :3])
    with pytest.raises(ValueError, match="do must be"):
        flash_attention_backward(do[:, :, :3], q, k, v, o, lse)
