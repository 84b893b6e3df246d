"""The explicit Pinghu FlashAttention forward (kernels/attention_pinghu.py): answers
against float64 numpy, the dispatch of ``flash_attention`` on pinghu (explicit kernel or
portable one), the causal block skipping, and llvm's portable answers on the same data."""
import numpy as np
import pytest

import mutile
from mutile.kernels import attention_pinghu as aph
from mutile.kernels import block_mask as bmk
from mutile.kernels.attention import flash_attention
from mutile.kernels.attention_host import prepare

from .attention_kit import (ATOL, BF16, F16, check, checkerboard, forget_decisions, head_bias,
                           misaligned, poisoned_like, portable_kwargs, qkv)

CFG = dict(BLOCK_M=128, BLOCK_N=64, STAGES=2, SQUADS=1)
EXPLICIT = "attn_fwd_ph_kernel"


def run(q, k, v, backend="pinghu", **kw):
    """flash_attention into NaN-poisoned outputs; also the kernels it launched (each
    once: the tuner's trial runs launch the same kernel)."""
    out = poisoned_like(q)
    with mutile.profile(sample=False) as prof:
        o, lse = flash_attention(q, k, v, return_lse=True, out=out, backend=backend, **kw)
    assert o is out
    return o, lse, sorted({r.kernel for r in prof.launches})


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_dense_ragged(rng, dtype, d, causal):
    """Batch 2, 3 heads, seq_q != seq_k, neither a multiple of the blocks (boxes past
    the sequence read TME's zeros; causal is aligned bottom-right)."""
    q, k, v = qkv(rng, 2, 3, 3, 150, 93, d, dtype)
    o, lse, kernels = run(q, k, v, causal=causal)
    assert kernels == [EXPLICIT]
    check(o, lse, q, k, v, causal=causal)


@pytest.mark.parametrize("config", aph._space(), ids=lambda c: "x".join(
    str(c.kwargs[k]) for k in ("BLOCK_M", "BLOCK_N", "STAGES", "SQUADS")))
@pytest.mark.parametrize("opt", ["plain", "causal", "window_gqa"])
def test_every_config_gives_the_answer(rng, config, opt):
    """Each config of the tuned space, launched directly (two-squad configs run a
    partition per squad, the second squad's rows from 128 on): ragged seq_q != seq_k past
    256 queries, d128, into NaN-poisoned outputs."""
    kw = {"plain": {}, "causal": dict(causal=True),
          "window_gqa": dict(window=(70, 20), enable_gqa=True)}[opt]
    q, k, v = qkv(rng, 1, 2, 1 if opt == "window_gqa" else 2, 300, 333, 128, BF16)
    a = prepare(q, k, v, backend="pinghu", **kw)
    out = poisoned_like(q)
    lse = np.full(q.shape[:3], np.nan, np.float32)
    aph.run(a, out, lse, config=dict(config.kwargs))
    check(out, lse, q, k, v, **{n: x for n, x in kw.items() if n != "enable_gqa"})


@pytest.mark.parametrize("programs", [1, 3, 5])
@pytest.mark.parametrize("config", [CFG, dict(BLOCK_M=256, BLOCK_N=32, STAGES=3, SQUADS=2)],
                         ids=["128x64x2x1", "256x32x3x2"])
def test_a_program_takes_many_work_items(rng, monkeypatch, programs, config):
    """Fewer programs than work items (the persistent grid, cut down): each program
    takes its snake share of the (batch, head, query block) items, longest first, with
    the K/V ring, Q's two buffers and their barrier phases running on across items. 2 x
    2 heads of ragged causal seq 300 x 333: 12 items of 128 rows (1 program: all; 5
    programs: rounds of 5, 5 and 2) or 8 of 256."""
    monkeypatch.setattr(aph, "programs", lambda items, kw, d: min(items, programs))
    q, k, v = qkv(rng, 2, 2, 2, 300, 333, 64, BF16)
    a = prepare(q, k, v, causal=True, backend="pinghu")
    out = poisoned_like(q)
    lse = np.full(q.shape[:3], np.nan, np.float32)
    with mutile.profile(sample=False) as prof:
        aph.run(a, out, lse, config=config)
    assert prof.launches[0].grid[0] == programs
    check(out, lse, q, k, v, causal=True)


def test_the_persistent_grid_fills_the_machine():
    """One program per work item up to what the MPs hold at once: 56 MPs, one 256-row
    block an MP (two squads), two 128-row blocks where shared memory has room."""
    big = dict(BLOCK_M=256, BLOCK_N=32, STAGES=3, SQUADS=2)
    small = dict(BLOCK_M=128, BLOCK_N=32, STAGES=3, SQUADS=1)
    assert aph.programs(10, big, 128) == 10
    assert aph.programs(10 ** 6, big, 128) == 56
    assert aph.programs(10 ** 6, small, 64) == 112
    assert aph.programs(10 ** 6, dict(BLOCK_M=128, BLOCK_N=64, STAGES=3, SQUADS=1), 128) == 56


def test_causal_long_sequence_two_heads(rng):
    """Seq 1024 causal on 2 heads: the last query blocks of both heads loop longest, alone,
    with their loop state in spill slots (this once looped forever: the interpreter lost
    spill stores of warps selected far apart)."""
    q, k, v = qkv(rng, 1, 2, 2, 1024, 1024, 64, F16)
    o, lse, kernels = run(q, k, v, causal=True)
    assert kernels == [EXPLICIT]
    check(o, lse, q, k, v, causal=True)


def test_causal_more_queries_than_keys_leaves_rows_empty(rng):
    q, k, v = qkv(rng, 1, 1, 1, 160, 20, 64, BF16)
    o, lse, kernels = run(q, k, v, causal=True)
    assert kernels == [EXPLICIT]
    assert (o[:, :, :140] == 0).all() and np.isneginf(lse[:, :, :140]).all()
    check(o, lse, q, k, v, causal=True)


@pytest.mark.parametrize("opt", ["window", "window_causal", "alibi", "softcap", "gqa",
                                 "sm_scale"])
def test_builtin_options(rng, opt):
    hk = 1 if opt == "gqa" else 2
    q, k, v = qkv(rng, 1, 2, hk, 136, 200, 64, F16)
    kw = {"window": dict(window=(70, 20)), "window_causal": dict(window=90, causal=True),
          "alibi": dict(alibi_slopes=rng.uniform(0.1, 1, 2).astype(np.float32)),
          "softcap": dict(softcap=0.5), "gqa": dict(causal=True),
          "sm_scale": dict(sm_scale=0.3)}[opt]
    extra = dict(enable_gqa=True) if opt == "gqa" else {}
    o, lse, kernels = run(q, k, v, **kw, **extra)
    assert kernels == [EXPLICIT]
    check(o, lse, q, k, v, **kw)


def test_user_score_and_mask_mod(rng):
    q, k, v = qkv(rng, 2, 2, 2, 100, 130, 64, BF16)
    o, lse, kernels = run(q, k, v, score_mod=head_bias, mask_mod=checkerboard)
    assert kernels == [EXPLICIT]
    check(o, lse, q, k, v, score_fn=lambda s, b, h, i, j: s + (h * 2 - b) * 0.25,
          mask_fn=lambda b, h, i, j: ((i // 8 + j // 8 + h) % 2 == 0) | (i == j))


def test_standard_score_mod(rng):
    q, k, v = qkv(rng, 1, 2, 2, 128, 128, 64, F16)
    o, lse, kernels = run(q, k, v, score_mod=bmk.relative_position_bias(0.05), causal=True)
    assert kernels == [EXPLICIT]
    check(o, lse, q, k, v, causal=True, score_fn=lambda s, b, h, i, j: s + 0.05 * (i - j))


@pytest.mark.parametrize("case", ["head_dim_32", "varlen", "block_mask", "misaligned"])
def test_other_arguments_take_the_portable_kernel(rng, case):
    d = 32 if case == "head_dim_32" else 64
    q, k, v = qkv(rng, 1, 2, 2, 64, 64, d, F16)
    kw = portable_kwargs(case)
    if case == "misaligned":
        k = misaligned(k)
        assert k.ctypes.data % 4 == 2
    assert not aph.supports(prepare(q, k, v, backend="pinghu", **kw))
    o, lse, kernels = run(q, k, v, **kw)
    assert kernels[-1] == "flash_fwd_kernel"
    ref = {"varlen": dict(cu_seqlens_q=kw.get("cu_seqlens_q"),
                          cu_seqlens_k=kw.get("cu_seqlens_k")),
           "block_mask": dict(causal=True)}.get(case, {})
    check(o, lse, q, k, v, **ref)


def test_supports_only_pinghu(rng):
    q, k, v = qkv(rng, 1, 1, 1, 64, 64, 64, F16)
    assert aph.supports(prepare(q, k, v, backend="pinghu"))
    assert not aph.supports(prepare(q, k, v, backend="llvm"))


def test_explicit_kernel_issues_tme_and_sqmma_and_skips_masked_blocks(rng):
    """Causal (seq 256, blocks of 128 x 64): the query blocks see 2 and 4 key blocks
    instead of 4 and 4, so they issue 2 x 2 + 4 x 2 block SQMMAs instead of 16; and each
    loop over key blocks that runs (the unmasked and the masked one: one and two of them
    causal, one a query block otherwise) issues one redundant Q K^T after its last
    block (kv_loop); the ISA has TME copies and SQMMAs."""
    q, k, v = qkv(rng, 1, 1, 1, 256, 256, 128, BF16)
    flops = {}
    for causal in (False, True):
        out, lse = poisoned_like(q), np.full(q.shape[:3], np.nan, np.float32)
        with mutile.profile(sample=False) as prof:
            aph.run(prepare(q, k, v, causal=causal, backend="pinghu"), out, lse, config=CFG)
        rec, = prof.launches
        assert rec.kernel == EXPLICIT
        text = "\n".join(row.text for row in rec.by_pc)
        assert "TME.LD.TILE.2D" in text and "SQMMA.M128N64K64.F32.BF16.BF16" in text
        flops[causal] = rec.flops
        check(out, lse, q, k, v, causal=causal)
    one = 2 * 128 * 64 * 128                   # one SQMMA's flops (QK^T or PV)
    assert flops[False] == (2 * 4 * 2 + 2) * one
    assert flops[True] == (2 * 2 + 4 * 2 + 3) * one


@pytest.mark.parametrize("causal", [False, True])
def test_tuned_choice_is_the_cycle_models_fastest(rng, causal):
    """flash_attention on pinghu launches the tuner's config: every candidate's recorded
    time is its modelled time (do_bench of that config alone), the winner the least, and
    the output the float64 reference's."""
    q, k, v = qkv(rng, 1, 2, 2, 200, 200, 64, F16)
    out = poisoned_like(q)
    tuner = aph.tuner_for(None, None)
    n, = forget_decisions(tuner)
    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True, out=out,
                             backend="pinghu")
    check(o, lse, q, k, v, causal=causal)
    assert len(tuner.tuning_log) == n + 1
    d = tuner.tuning_log[-1]
    assert tuner.best_config is d.winner and len(d.timings) == len(aph._space())  # unpruned
    (win,) = [i for i, cfg in d.configs.items() if cfg is d.winner]
    assert d.timings[win][0] == min(t[0] for t in d.timings.values())
    a = prepare(q, k, v, causal=causal, backend="pinghu")
    scratch = np.empty(q.shape[:3], np.float32)
    for ident, cfg in d.configs.items():
        ms = mutile.testing.do_bench(lambda: aph.run(a, out, scratch, config=cfg.kwargs))
        assert ms == pytest.approx(d.timings[ident][0], rel=1e-9)


def test_a_config_names_all_four_blocks(rng):
    q, k, v = qkv(rng, 1, 1, 1, 64, 64, 64, F16)
    a = prepare(q, k, v, backend="pinghu")
    with pytest.raises(ValueError, match="BLOCK_M, BLOCK_N, STAGES and SQUADS"):
        aph.run(a, np.empty_like(q), np.empty((1, 1, 64), np.float32), config=dict(BLOCK_M=128))
    with pytest.raises(ValueError, match="STAGES must be at least 2"):
        aph.run(a, np.empty_like(q), np.empty((1, 1, 64), np.float32),
                config=dict(BLOCK_M=128, BLOCK_N=64, STAGES=1, SQUADS=1))


def test_llvm_gives_the_same_answers_through_the_portable_kernel(rng):
    q, k, v = qkv(rng, 1, 2, 2, 100, 77, 64, BF16)
    ph_o, ph_lse, kernels = run(q, k, v, causal=True)
    assert kernels == [EXPLICIT]
    cpu_o, cpu_lse = flash_attention(q, k, v, causal=True, return_lse=True, backend="llvm",
                                     out=poisoned_like(q))
    check(cpu_o, cpu_lse, q, k, v, causal=True)
    np.testing.assert_allclose(cpu_o.astype(np.float64), ph_o.astype(np.float64),
                               atol=ATOL[BF16], rtol=ATOL[BF16])
    np.testing.assert_allclose(cpu_lse, ph_lse, atol=1e-4, rtol=1e-4)
