"""flash_attention forward: dtypes, head dims, causal alignment, GQA/MQA, varlen, the
built-in mods and user score/mask mods, on both backends against float64 numpy."""
import numpy as np
import pytest

from mutile.kernels import block_mask as bmk
from mutile.kernels.attention import flash_attention

from .attention_kit import (BF16, F16, F32, check, checkerboard, head_bias, poisoned_like, qkv,
                           skip_dtype)


def run(q, k, v, backend, **kw):
    out = poisoned_like(q)
    o, lse = flash_attention(q, k, v, return_lse=True, out=out, backend=backend, **kw)
    assert o is out
    return o, lse


@pytest.mark.parametrize("dtype", [F16, BF16, F32], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_dense_dtypes_and_causal(backend, rng, dtype, causal):
    """Ragged lengths, Sq != Sk: causal is aligned bottom-right (FlashAttention-2)."""
    skip_dtype(backend, dtype)
    q, k, v = qkv(rng, 2, 2, 2, 70, 90, 64, dtype)
    check(*run(q, k, v, backend, causal=causal), q, k, v, causal=causal)


def test_head_dim_128_and_sm_scale(backend, rng):
    q, k, v = qkv(rng, 1, 2, 2, 64, 64, 128, F16)
    check(*run(q, k, v, backend, causal=True, sm_scale=0.3), q, k, v, causal=True,
          sm_scale=0.3)


def test_causal_more_queries_than_keys_leaves_rows_empty(backend, rng):
    """Bottom-right alignment with Sq > Sk: the first Sq - Sk rows see no key: o = 0,
    lse = -inf."""
    q, k, v = qkv(rng, 1, 1, 1, 48, 20, 64, F16)
    o, lse = run(q, k, v, backend, causal=True)
    assert (o[:, :, :28] == 0).all() and np.isneginf(lse[:, :, :28]).all()
    check(o, lse, q, k, v, causal=True)


@pytest.mark.parametrize("hk", [2, 1], ids=["gqa", "mqa"])
def test_gqa_mqa(backend, rng, hk):
    q, k, v = qkv(rng, 1, 4, hk, 40, 40, 64, F16)
    check(*run(q, k, v, backend, enable_gqa=True, causal=True), q, k, v, causal=True)


def test_varlen(backend, rng):
    cu_q = np.array([0, 17, 50, 64], np.int32)
    cu_k = np.array([0, 30, 41, 75], np.int32)
    q, k, v = qkv(rng, 1, 2, 2, 64, 75, 64, F16)
    slopes = rng.uniform(0.1, 0.5, (3, 2)).astype(np.float32)
    kw = dict(causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, alibi_slopes=slopes)
    check(*run(q, k, v, backend, **kw), q, k, v, **kw)


@pytest.mark.parametrize("opt", ["window", "window_causal", "alibi", "softcap"])
def test_builtin_mods(backend, rng, opt):
    q, k, v = qkv(rng, 2, 2, 2, 72, 72, 64, F16)
    kw = {"window": dict(window=(10, 5)), "window_causal": dict(window=12, causal=True),
          "alibi": dict(alibi_slopes=rng.uniform(0.1, 1, 2).astype(np.float32)),
          "softcap": dict(softcap=0.5)}[opt]
    check(*run(q, k, v, backend, **kw), q, k, v, **kw)


def _alibi_np(s, b, h, i, j, H=2):
    return s + 2.0 ** (-8.0 * (h + 1) / H) * (j - i)


MODS = {
    "causal": (dict(mask_mod=bmk.causal_mask), dict(mask_fn=lambda b, h, i, j: i >= j)),
    "sliding": (dict(mask_mod=bmk.sliding_window_mask(9)),
                dict(mask_fn=lambda b, h, i, j: (i >= j) & (i - j <= 9))),
    "prefix_lm": (dict(mask_mod=bmk.prefix_lm_mask(20)),
                  dict(mask_fn=lambda b, h, i, j: (j < 20) | (i >= j))),
    "document": (dict(mask_mod=bmk.document_mask([13, 30, 21], causal=True)),
                 dict(mask_fn=lambda b, h, i, j: (np.searchsorted([13, 43], i, "right")
                                                  == np.searchsorted([13, 43], j, "right"))
                      & (i >= j))),
    "alibi": (dict(score_mod=bmk.alibi_score_mod(2)), dict(score_fn=_alibi_np)),
    "softcap": (dict(score_mod=bmk.softcap_score_mod(0.7)),
                dict(score_fn=lambda s, b, h, i, j: 0.7 * np.tanh(s / 0.7))),
    "relative": (dict(score_mod=bmk.relative_position_bias(0.05)),
                 dict(score_fn=lambda s, b, h, i, j: s + 0.05 * (i - j))),
}


@pytest.mark.parametrize("name", list(MODS))
def test_standard_mods(backend, rng, name):
    kern_kw, ref_kw = MODS[name]
    q, k, v = qkv(rng, 1, 2, 2, 64, 64, 64, F16)
    check(*run(q, k, v, backend, **kern_kw), q, k, v, **ref_kw)


def test_user_score_and_mask_mod_see_b_h_and_indices(backend, rng):
    q, k, v = qkv(rng, 2, 2, 2, 40, 40, 64, BF16)
    o, lse = run(q, k, v, backend, score_mod=head_bias, mask_mod=checkerboard, causal=True)
    check(o, lse, q, k, v, causal=True,
          score_fn=lambda s, b, h, i, j: s + (h * 2 - b) * 0.25,
          mask_fn=lambda b, h, i, j: ((i // 8 + j // 8 + h) % 2 == 0) | (i == j))


def test_return_lse_false_gives_the_array():
    rng = np.random.default_rng(1)
    q, k, v = qkv(rng, 1, 1, 1, 16, 16, 64, F32)
    o = flash_attention(q, k, v)
    assert isinstance(o, np.ndarray) and o.shape == q.shape


@pytest.mark.parametrize("kw,err,msg", [
    (dict(enable_gqa=False, hk=1), ValueError, "enable_gqa"),
    (dict(window=-1), ValueError, "window"),
    (dict(softcap=0.0), ValueError, "softcap"),
    (dict(alibi_slopes=np.ones(5)), ValueError, "alibi_slopes"),
    (dict(score_mod=lambda *a: a[0]), TypeError, "score_mod"),
    (dict(cu_seqlens_q=np.array([0, 16])), ValueError, "together"),
    (dict(cu_seqlens_q=np.array([0, 9]), cu_seqlens_k=np.array([0, 16])), ValueError,
     "packed length"),
    (dict(dtype=np.float64), TypeError, "float16"),
    (dict(out=np.zeros((1, 2, 16, 64), np.float16)), ValueError, "out"),
])
def test_bad_inputs(kw, err, msg):
    rng = np.random.default_rng(2)
    hk = kw.pop("hk", 2)
    dtype = kw.pop("dtype", np.float32)
    q, k, v = qkv(rng, 1, 2, hk, 16, 16, 64, dtype)
    with pytest.raises(err, match=msg):
        flash_attention(q, k, v, **kw)
