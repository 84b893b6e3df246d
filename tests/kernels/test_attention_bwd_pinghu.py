"""The explicit Pinghu FlashAttention backward (kernels/attention_bwd_pinghu.py): gradients
against the float64 analytic ones for every option it takes, every config of its spaces,
the dispatch of ``flash_attention_backward`` on pinghu (explicit passes or portable ones)
and the tuners' choice."""
import numpy as np
import pytest

import mutile
from mutile.kernels import attention_bwd_pinghu as abp
from mutile.kernels import block_mask as bmk
from mutile.kernels.attention import flash_attention
from mutile.kernels.attention_bwd import flash_attention_backward
from mutile.kernels.attention_host import prepare

from .attention_kit import (BF16, F16, assert_grads, checkerboard, forget_decisions, head_bias,
                            misaligned, poisoned_like, portable_kwargs, qkv, reference_grads)

EXPLICIT = ["attn_bwd_dkdv_ph_kernel", "attn_bwd_dq_ph_kernel", "attn_bwd_stats_kernel"]
PORTABLE = ["_delta_kernel", "dkdv_kernel", "dq_kernel"]
FWD_KEYS = ("causal", "window", "alibi_slopes", "softcap", "score_mod", "mask_mod",
            "enable_gqa", "sm_scale", "block_mask", "cu_seqlens_q", "cu_seqlens_k")


def run(q, k, v, do, backend="pinghu", **kw):
    """The forward's o and lse, then flash_attention_backward into NaN-poisoned outputs;
    also the kernels the backward launched (each once: the tuners' trials repeat them)."""
    o, lse = flash_attention(q, k, v, return_lse=True, backend=backend,
                             **{n: x for n, x in kw.items() if n in FWD_KEYS})
    out = tuple(poisoned_like(x) for x in (q, k, v))
    with mutile.profile(sample=False) as prof:
        got = flash_attention_backward(do, q, k, v, o, lse, out=out, backend=backend, **kw)
    assert all(g is x for g, x in zip(got, out))
    return got, sorted({r.kernel for r in prof.launches})


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_dense_ragged(rng, dtype, d, causal):
    """Batch 2, seq_q != seq_k, neither a multiple of a block: boxes past the sequences
    read TME's zeros; causal (bottom-right) leaves the first 57 query rows without a key
    (lse -inf: their dq is 0)."""
    q, k, v, do = qkv(rng, 2, 2, 2, 150, 93, d, dtype, n=4)
    got, kernels = run(q, k, v, do, causal=causal)
    assert kernels == EXPLICIT
    assert_grads(got, reference_grads(q, k, v, do, causal=causal), dtype)
    if causal:
        assert (got[0][:, :, :57] == 0).all()


SLOPES = np.array([0.3, 0.7], np.float32)
OPTIONS = {
    "window": (dict(window=(70, 20)), {}),
    "window_causal": (dict(window=90, causal=True), {}),
    "softcap": (dict(softcap=0.8), {}),
    "alibi": (dict(alibi_slopes=SLOPES, causal=True), {}),
    "sm_scale": (dict(sm_scale=0.3), {}),
    "relative_position_bias": (
        dict(score_mod=bmk.relative_position_bias(0.05), causal=True),
        dict(score_fn=lambda s, b, h, i, j: s + 0.05 * (i - j))),
    "softcap_score_mod": (dict(score_mod=bmk.softcap_score_mod(0.5)),
                          dict(score_fn=lambda s, b, h, i, j: 0.5 * np.tanh(s / 0.5),
                               score_grad_fn=lambda s, b, h, i, j: 1 - np.tanh(s / 0.5) ** 2)),
    "user_mods": (dict(score_mod=head_bias, score_mod_grad=bmk.unit_grad,
                       mask_mod=checkerboard),
                  dict(score_fn=lambda s, b, h, i, j: s + (h * 2 - b) * 0.25,
                       mask_fn=lambda b, h, i, j: ((i // 8 + j // 8 + h) % 2 == 0) | (i == j))),
}


@pytest.mark.parametrize("opt", list(OPTIONS))
def test_options(rng, opt):
    kern_kw, ref_only = OPTIONS[opt]
    q, k, v, do = qkv(rng, 2, 2, 2, 100, 136, 64, F16, n=4)
    got, kernels = run(q, k, v, do, **kern_kw)
    assert kernels == EXPLICIT
    ref_kw = {n: x for n, x in kern_kw.items()
              if n not in ("score_mod", "score_mod_grad", "mask_mod")}
    assert_grads(got, reference_grads(q, k, v, do, **ref_kw, **ref_only), F16)


@pytest.mark.parametrize("hk", [1, 2])
def test_gqa_sums_every_head_of_the_group(rng, hk):
    """4 query heads on 2 or 1 kv heads: dK/dV programs sweep every head of their group."""
    q, k, v = qkv(rng, 1, 4, hk, 96, 80, 128, BF16)
    do = rng.standard_normal(q.shape).astype(BF16)
    got, kernels = run(q, k, v, do, causal=True, softcap=1.5, enable_gqa=True)
    assert kernels == EXPLICIT
    assert_grads(got, reference_grads(q, k, v, do, causal=True, softcap=1.5), BF16)


@pytest.mark.parametrize("name", abp.PASSES)
def test_every_config_gives_the_gradients(rng, name):
    """Each config of a pass's space (the tuner may launch any of them at another shape),
    on GQA, causal, window and ragged sequences, d128."""
    q, k, v = qkv(rng, 1, 4, 2, 200, 170, 128, F16)
    do = rng.standard_normal(q.shape).astype(F16)
    kw = dict(causal=True, window=(120, 0), enable_gqa=True)
    o, lse = flash_attention(q, k, v, return_lse=True, backend="pinghu", **kw)
    want = reference_grads(q, k, v, do, causal=True, window=(120, 0))
    a = prepare(q, k, v, backend="pinghu", **kw)
    st = abp.stats(a, o, do, lse)
    part = slice(0, 1) if name == "dq" else slice(1, 3)
    for c in abp.SPACES[name]:
        cfg = dict(zip(("BLOCK_M", "BLOCK_N", "STAGES", "SQUADS"), c))
        out = tuple(poisoned_like(x) for x in (q, k, v))
        abp.run_pass(a, do, st, out, name, cfg)
        assert_grads(out[part], want[part], F16)


def test_launches_tme_and_sqmma(rng):
    q, k, v, do = qkv(rng, 1, 1, 1, 128, 128, 128, BF16, n=4)
    o, lse = flash_attention(q, k, v, return_lse=True, backend="pinghu")
    a = prepare(q, k, v, backend="pinghu")
    st = abp.stats(a, o, do, lse)
    out = tuple(poisoned_like(x) for x in (q, k, v))
    cfg = dict(BLOCK_M=32, BLOCK_N=64, STAGES=2, SQUADS=1)
    for name in abp.PASSES:
        with mutile.profile(sample=False) as prof:
            abp.run_pass(a, do, st, out, name, cfg)
        rec, = prof.launches
        text = "\n".join(row.text for row in rec.by_pc)
        assert "TME.LD.TILE.2D" in text and "SQMMA." in text and "ASYNC.BAR.WAIT" in text
        assert "WMMA" not in text
    assert_grads(out, reference_grads(q, k, v, do), BF16)


@pytest.mark.parametrize("case", ["head_dim_32", "varlen", "block_mask", "misaligned_k",
                                  "misaligned_do", "llvm"])
def test_other_arguments_take_the_portable_kernels(rng, case):
    d = 32 if case == "head_dim_32" else 64
    q, k, v, do = qkv(rng, 1, 2, 2, 64, 64, d, F16, n=4)
    kw = portable_kwargs(case)
    if case == "misaligned_k":
        k = misaligned(k)
    if case == "misaligned_do":
        do = misaligned(do)
    backend = "llvm" if case == "llvm" else "pinghu"
    assert not abp.supports(prepare(q, k, v, backend=backend, **kw), do)
    got, kernels = run(q, k, v, do, backend=backend, **kw)
    assert kernels == ([] if backend == "llvm" else PORTABLE)   # profiles record pinghu's
    if case == "varlen":
        return          # the varlen gradients are test_attention_bwd's (finite differences)
    ref = dict(causal=True) if case == "block_mask" else {}
    assert_grads(got, reference_grads(q, k, v, do, **ref), F16)


def test_supports_is_the_forwards_scope(rng):
    q, k, v, do = qkv(rng, 1, 1, 1, 64, 64, 64, F16, n=4)
    assert abp.supports(prepare(q, k, v, backend="pinghu"), do)
    f32 = [x.astype(np.float32) for x in (q, k, v, do)]
    assert not abp.supports(prepare(*f32[:3], backend="pinghu"), f32[3])
    assert not abp.supports(prepare(q, k, v, backend="llvm"), do)


@pytest.mark.parametrize("causal", [False, True])
def test_tuned_choice_is_the_cycle_models_fastest(rng, causal):
    """Each pass launches its tuner's config: every candidate's recorded time is its
    modelled time (do_bench of that config alone), the winner the least."""
    q, k, v, do = qkv(rng, 1, 2, 2, 200, 200, 64, F16, n=4)
    tuners = abp.tuner_for(None, None, None)
    counts = forget_decisions(*tuners)
    got, kernels = run(q, k, v, do, causal=causal)
    assert [len(t.tuning_log) for t in tuners] == [c + 1 for c in counts]
    assert kernels == EXPLICIT
    assert_grads(got, reference_grads(q, k, v, do, causal=causal), F16)
    a = prepare(q, k, v, causal=causal, backend="pinghu")
    st = abp.stats(a, np.zeros_like(q), do, np.zeros(q.shape[:3], np.float32))
    out = tuple(np.empty_like(x) for x in (q, k, v))
    for name, tuner in zip(abp.PASSES, tuners):
        d = tuner.tuning_log[-1]
        assert tuner.best_config is d.winner and len(d.timings) == 4    # unpruned
        (win,) = [i for i, cfg in d.configs.items() if cfg is d.winner]
        assert d.timings[win][0] == min(t[0] for t in d.timings.values())
        for ident, cfg in d.configs.items():
            ms = mutile.testing.do_bench(
                lambda: abp.run_pass(a, do, st, out, name, cfg.kwargs))
            assert ms == pytest.approx(d.timings[ident][0], rel=1e-9)


def test_run_pass_checks_its_config(rng):
    q, k, v, do = qkv(rng, 1, 1, 1, 64, 64, 64, F16, n=4)
    a = prepare(q, k, v, backend="pinghu")
    st = abp.stats(a, np.zeros_like(q), do, np.zeros(q.shape[:3], np.float32))
    out = tuple(np.empty_like(x) for x in (q, k, v))
    with pytest.raises(ValueError, match="BLOCK_M, BLOCK_N, STAGES and SQUADS"):
        abp.run_pass(a, do, st, out, "dq", dict(BLOCK_M=64))
    with pytest.raises(ValueError, match="'dkdv' or 'dq'"):
        abp.run_pass(a, do, st, out, "dk", dict(BLOCK_M=64, BLOCK_N=64, STAGES=2, SQUADS=1))
    for name in abp.PASSES:         # one partition per squad: one or two of them
        with pytest.raises(mutile.CompilationError, match="SQUADS must be 1 or 2"):
            abp.run_pass(a, do, st, out, name, dict(BLOCK_M=64, BLOCK_N=64, STAGES=2,
                                                    SQUADS=4))
