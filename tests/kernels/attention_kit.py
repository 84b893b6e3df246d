"""Shared by the attention tests: random inputs, tolerances and the float64 backward."""
import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.kernels.attention import attention_reference, reference_scores

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
ATOL = {F32: 3e-5, F16: 3e-3, BF16: 2.5e-2}


def dtypes_for(backend):
    """fp16/bf16 everywhere, fp32 on llvm (pinghu's MMA takes 16-bit operands here)."""
    return [F16, BF16] + ([F32] if backend == "llvm" else [])


def skip_dtype(backend, dtype):
    if dtype == F32 and backend != "llvm":
        pytest.skip("fp32 attention is an llvm configuration")


def qkv(rng, B, Hq, Hk, Sq, Sk, D, dtype, n=3):
    """q [B, Hq, Sq, D], k and v [B, Hk, Sk, D] (and more arrays of q's shape)."""
    q = rng.standard_normal((B, Hq, Sq, D)).astype(dtype)
    k = rng.standard_normal((B, Hk, Sk, D)).astype(dtype)
    v = rng.standard_normal((B, Hk, Sk, D)).astype(dtype)
    extra = [rng.standard_normal((B, Hq, Sq, D)).astype(dtype) for _ in range(n - 3)]
    return (q, k, v, *extra)


def check(o, lse, q, k, v, **ref_kw):
    """o and lse against the float64 reference: lse is -inf exactly where no key is visible."""
    ro, rl = attention_reference(q, k, v, **ref_kw)
    atol = ATOL[q.dtype]
    np.testing.assert_allclose(o.astype(np.float64), ro, atol=atol, rtol=atol)
    finite = np.isfinite(rl)
    assert (np.isfinite(lse) == finite).all(), "lse is -inf exactly where no key is visible"
    np.testing.assert_allclose(lse[finite], rl[finite], atol=1e-4, rtol=1e-4)


# a score mod and a mask mod that read b, h and both indices (the user-mod tests)
@mutile.jit
def head_bias(score, b, h, q_idx, kv_idx):
    return score + (h * 2 - b).to(ml.float32) * 0.25


@mutile.jit
def checkerboard(b, h, q_idx, kv_idx):
    return ((q_idx // 8 + kv_idx // 8 + h) % 2 == 0) | (q_idx == kv_idx)


def misaligned(x):
    """A C-contiguous copy of ``x`` whose base address is 2 bytes past a 4-byte one."""
    buf = np.empty(x.nbytes + 8, np.uint8)
    off = (-buf.ctypes.data) % 4 + 2
    y = buf[off:off + x.nbytes].view(x.dtype).reshape(x.shape)
    y[...] = x
    return y


def portable_kwargs(case: str) -> dict:
    """Attention arguments (seq 64) that the explicit Pinghu kernels leave to the portable
    ones: a varlen batch or a block mask (other cases: none)."""
    from mutile.kernels import block_mask as bmk
    return {"varlen": dict(cu_seqlens_q=np.array([0, 30, 64]),
                           cu_seqlens_k=np.array([0, 20, 64])),
            "block_mask": dict(block_mask=bmk.create_block_mask(
                bmk.causal_mask, None, None, 64, 64, BLOCK_SIZE=32, backend="pinghu"))
            }.get(case, {})


def forget_decisions(*tuners) -> list:
    """Make the tuners decide again at their next launch (another test may have tuned
    the same key in this process); returns their log lengths now."""
    for t in tuners:
        t.cache.clear()
        t._chosen.clear()
    return [len(t.tuning_log) for t in tuners]


def poisoned_like(x):
    return np.full(x.shape, np.nan, x.dtype)


def assert_grads(got, want, dtype):
    """(dq, dk, dv) against float64 ones, within the dtype's tolerance of their scale."""
    for g, w, name in zip(got, want, ("dq", "dk", "dv")):
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g.astype(np.float64), w, atol=2 * ATOL[dtype] * scale,
                                   err_msg=name)


def reference_grads(q, k, v, do, *, causal=False, sm_scale=None, score_fn=None,
                    score_grad_fn=None, mask_fn=None, window=None, alibi_slopes=None,
                    softcap=None):
    """Analytic float64 (dq, dk, dv) of the reference attention (dense batches)."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    B, Hq, Sq, D = q.shape
    Hk, Sk = k.shape[1], k.shape[2]
    grp = Hq // Hk
    sc = 1 / np.sqrt(D) if sm_scale is None else sm_scale
    kr, vr = np.repeat(k, grp, 1), np.repeat(v, grp, 1)
    s = reference_scores(q, k, causal, sm_scale, score_fn, mask_fn, window, alibi_slopes,
                         softcap)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    den = p.sum(-1, keepdims=True)
    p = p / np.where(den == 0, 1, den)
    o = p @ vr
    dv = np.swapaxes(p, -1, -2) @ do
    ds = p * (do @ np.swapaxes(vr, -1, -2) - (o * do).sum(-1, keepdims=True))
    raw = q @ np.swapaxes(kr, -1, -2) * sc
    if softcap:
        ds = ds * (1 - np.tanh(raw / softcap) ** 2)
    if score_grad_fn is not None:
        pre = reference_scores(q, k, False, sm_scale, None, None, None, alibi_slopes, softcap)
        i, j = np.arange(Sq)[:, None], np.arange(Sk)[None, :]
        for b in range(B):
            for h in range(Hq):
                ds[b, h] *= score_grad_fn(pre[b, h], b, h, i, j)
    dq = ds @ kr * sc
    dk = (np.swapaxes(ds, -1, -2) @ q * sc).reshape(B, Hk, grp, Sk, D).sum(2)
    return dq, dk, dv.reshape(B, Hk, grp, Sk, D).sum(2)
