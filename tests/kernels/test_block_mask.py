"""create_block_mask: the block classification against numpy, the forward with a block
mask against the dense reference, and the profiler's proof that masked blocks are skipped."""
import numpy as np
import pytest

import mutile
from mutile.kernels import block_mask as bmk
from mutile.kernels.attention import flash_attention

from .attention_kit import F16, check, poisoned_like, qkv


def numpy_classes(mask_fn, Q, K, bq, bk):
    i, j = np.arange(Q)[:, None], np.arange(K)[None, :]
    keep = np.broadcast_to(mask_fn(i, j), (Q, K))
    nq, nk = -(-Q // bq), -(-K // bk)
    cls = np.zeros((nq, nk), int)
    for m in range(nq):
        for n in range(nk):
            blk = keep[m * bq:(m + 1) * bq, n * bk:(n + 1) * bk]
            cls[m, n] = 0 if not blk.any() else (2 if blk.all() else 1)
    return cls


CASES = {
    "causal": (bmk.causal_mask, lambda i, j: i >= j),
    "sliding": (bmk.sliding_window_mask(20), lambda i, j: (i >= j) & (i - j <= 20)),
    "prefix_lm": (bmk.prefix_lm_mask(40), lambda i, j: (j < 40) | (i >= j)),
    "document": (bmk.document_mask([50, 30, 20]),
                 lambda i, j: np.searchsorted([50, 80], i, "right")
                 == np.searchsorted([50, 80], j, "right")),
}


@pytest.mark.parametrize("name", list(CASES))
def test_classification_matches_numpy(backend, name):
    mod, fn = CASES[name]
    bm = bmk.create_block_mask(mod, None, None, 100, 100, BLOCK_SIZE=16, backend=backend)
    want = numpy_classes(fn, 100, 100, 16, 16)
    for c, num, idx in ((1, bm.kv_num_blocks, bm.kv_indices),
                        (2, bm.full_kv_num_blocks, bm.full_kv_indices)):
        for m in range(want.shape[0]):
            got = idx[0, 0, m, :num[0, 0, m]]
            assert list(got) == list(np.nonzero(want[m] == c)[0]), (name, c, m)
        qn = bm.q_num_blocks if c == 1 else bm.full_q_num_blocks
        qi = bm.q_indices if c == 1 else bm.full_q_indices
        for n in range(want.shape[1]):
            assert list(qi[0, 0, n, :qn[0, 0, n]]) == list(np.nonzero(want[:, n] == c)[0])
    assert 0 < bm.density() < 1


@pytest.mark.parametrize("name", ["sliding", "document"])
def test_forward_with_block_mask(backend, rng, name):
    mod, fn = CASES[name]
    q, k, v = qkv(rng, 1, 2, 2, 100, 100, 64, F16)
    bm = bmk.create_block_mask(mod, 1, 2, 100, 100, BLOCK_SIZE=32, backend=backend)
    out = poisoned_like(q)
    o, lse = flash_attention(q, k, v, block_mask=bm, return_lse=True, out=out,
                             backend=backend)
    check(o, lse, q, k, v, mask_fn=lambda b, h, i, j: fn(i, j))


@mutile.jit
def keep_all(b, h, q_idx, kv_idx):
    return q_idx >= 0


def test_block_mask_skips_blocks_in_the_profile(rng):
    """The sliding window visits 3 key blocks of 8 per query block at most: against a
    block mask that visits every block (same tiles), the modelled MMA flops fall by
    exactly the block mask's density, and fewer instructions run."""
    mod = bmk.sliding_window_mask(40)
    S = 256
    q, k, v = qkv(rng, 1, 1, 1, S, S, 64, F16)
    bm = bmk.create_block_mask(mod, None, None, S, S, BLOCK_SIZE=32)
    full = bmk.create_block_mask(keep_all, None, None, S, S, BLOCK_SIZE=32)
    assert full.density() == 1.0
    recs = {}
    for how, kw in (("dense", dict(block_mask=full)), ("sparse", dict(block_mask=bm))):
        with mutile.profile(sample=False) as prof:
            flash_attention(q, k, v, backend="pinghu", **kw)
        recs[how] = prof.launches[-1]
    dense, sparse = recs["dense"], recs["sparse"]
    assert sparse.flops == pytest.approx(dense.flops * bm.density(), rel=1e-9)
    assert bm.density() < 0.45
    assert sparse.instructions < 0.6 * dense.instructions


def test_bad_block_mask_inputs():
    with pytest.raises(TypeError, match="mask_mod"):
        bmk.create_block_mask(lambda b, h, i, j: i >= j, 1, 1, 64, 64)
    with pytest.raises(ValueError, match="BLOCK_SIZE"):
        bmk.create_block_mask(bmk.causal_mask, 1, 1, 64, 64, BLOCK_SIZE=24)
    with pytest.raises(ValueError, match="window"):
        bmk.sliding_window_mask(0)
    bm = bmk.create_block_mask(bmk.causal_mask, 1, 1, 64, 64, BLOCK_SIZE=32)
    q, k, v = qkv(np.random.default_rng(3), 1, 1, 1, 48, 48, 64, F16)
    with pytest.raises(ValueError, match="block_mask was made for"):
        flash_attention(q, k, v, block_mask=bm)
    with pytest.raises(ValueError, match="differs"):
        flash_attention(q, k, v, block_mask=bm, mask_mod=bmk.prefix_lm_mask(3))
