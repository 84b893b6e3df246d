"""Benchmark rows of the attention templates (``mutile.kernels.flash_attention`` and its
backward) on the cycle model: bf16, batch 1, 16 heads, head dim 128, seq 4096 (with
``quick``: 2 heads, seq 1024, one wave), causal and not; :func:`llvm_rows` against torch's CPU SDPA.
``python -m mutile.bench_templates_attention [--quick | --llvm]`` prints them.

A row is ``{"name", "mutile", "max_abs_err", "model", "utilization"}`` as
``mutile/bench.py``'s model table takes them: ``model`` is the ``_modelled``-style dict of
the profiled launches (``sample="wave"``: two waves simulated, the rest estimated, so the
outputs are not all computed); ``mutile`` is the profiled run's wall time;
causal rows simulate every block (``sample=False``: the explicit kernel runs its longest
query blocks first, so the first waves are not typical of the rest, as the sampled
estimate assumes); ``max_abs_err`` is measured against float64 on a small problem (2 heads, seq 128) with the
same kernels (for the backward row: the relative error of the directional derivative of
``sum(o * do)`` along dq's own direction, dq against float64 central differences); ``utilization`` = useful attention flops /
(bf16 peak x modelled time), with the forward's flops 4 * S^2 * D per head (halved when causal) and the backward's counted
as 2.5x the forward's, as the FlashAttention papers do.

The full shape takes about 24 minutes on a 2-core machine, tuning included (the
backward tunes four configs of each pass at the full shape); since the forward's grid is
persistent each launch fits the default watchdog (600 s; the longest, the non-causal
forward, is profiled in about 65 s), so ``mutile bench --backend templates`` runs these
rows as they are (26 minutes in all on 2026-12-08).
"""
from __future__ import annotations

import numpy as np

from .bench_model import profiled

HEADS, HEAD_DIM = 16, 128


def _errors(causal, rng) -> tuple:
    """Max |error| of forward and backward against float64 on 2 heads, seq 128."""
    import ml_dtypes

    from .kernels.attention import attention_reference, flash_attention
    from .kernels.attention_bwd import flash_attention_backward
    bf = ml_dtypes.bfloat16
    q, k, v, do = (rng.standard_normal((1, 2, 128, HEAD_DIM)).astype(bf) for _ in range(4))
    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True, backend="pinghu")
    ref = attention_reference(q, k, v, causal=causal)[0]
    dq, _, _ = flash_attention_backward(do, q, k, v, o, lse, causal=causal, backend="pinghu")
    qd, kd, vd, dod = (x.astype(np.float64) for x in (q, k, v, do))
    eps = 1e-6          # the directional derivative along dq itself (well conditioned:
    dirn = dq.astype(np.float64)                # about |dq|, where a random one is ~0)
    dirn /= np.linalg.norm(dirn)
    plus = attention_reference(qd + eps * dirn, kd, vd, causal=causal)[0]
    minus = attention_reference(qd - eps * dirn, kd, vd, causal=causal)[0]
    want = ((plus - minus) * dod).sum() / (2 * eps)
    got = float((dq.astype(np.float64) * dirn).sum())
    return float(np.abs(o.astype(np.float64) - ref).max()), abs(got - want) / abs(want)


def rows(quick: bool, shape: tuple | None = None) -> list[dict]:
    """Forward causal/non-causal and backward non-causal rows (see the module doc)."""
    import ml_dtypes

    from .kernels.attention import flash_attention
    from .kernels.attention_bwd import flash_attention_backward
    rng = np.random.default_rng(0)
    seq, heads = shape or ((1024, 2) if quick else (4096, HEADS))
    bf = ml_dtypes.bfloat16
    q, k, v, do = (rng.standard_normal((1, heads, seq, HEAD_DIM)).astype(bf)
                   for _ in range(4))
    out = []
    for causal in (False, True):
        fwd_flops = 4.0 * seq * seq * HEAD_DIM * heads * (0.5 if causal else 1.0)
        err, _ = _errors(causal, rng)
        model, peak = profiled(lambda: flash_attention(q, k, v, causal=causal,
                                                        backend="pinghu"), warm=True,
                               sample=False if causal else "wave")
        name = f"attention fwd bf16 {heads}h seq{seq} d128{' causal' if causal else ''}"
        out.append(_row(name, model, err, fwd_flops / (peak * 1e12 * model["time_us"] / 1e6)))
    # the sampled forward does not compute every output: time the backward on stand-ins
    o = np.zeros_like(q)
    lse = np.zeros(q.shape[:3], np.float32)
    _, rel = _errors(False, rng)
    model, peak = profiled(lambda: flash_attention_backward(do, q, k, v, o, lse,
                                                             backend="pinghu"), warm=True)
    bwd_flops = 2.5 * 4.0 * seq * seq * HEAD_DIM * heads
    out.append(_row(f"attention bwd bf16 {heads}h seq{seq} d128", model, rel,
                    bwd_flops / (peak * 1e12 * model["time_us"] / 1e6)))
    return out


def llvm_rows(seq: int = 1024, heads: int = 8, head_dim: int = 64) -> list[dict]:
    """flash_attention on llvm (f32) against torch's CPU SDPA at the same thread count
    (the llvm backend's default, ``os.cpu_count()``); empty when torch is not installed.
    ``ratio`` = mutile seconds / torch seconds (medians of 5)."""
    import os
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return []
    from .kernels.attention import flash_attention
    from .testing import time_calls
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, heads, seq, head_dim)).astype(np.float32)
               for _ in range(3))
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    out = []
    for causal in (False, True):
        flash_attention(q, k, v, causal=causal)                  # compile
        ours = time_calls(lambda: flash_attention(q, k, v, causal=causal), rep=5) / 1e3
        theirs = time_calls(lambda: F.scaled_dot_product_attention(tq, tk, tv,
                                                                   is_causal=causal),
                            rep=5) / 1e3
        out.append({"name": f"attention fwd f32 {heads}h seq{seq} d{head_dim}"
                            f"{' causal' if causal else ''} ({threads} threads)",
                    "mutile": ours, "torch": theirs, "ratio": ours / theirs})
    return out


def _row(name, model, err, util) -> dict:
    return {"name": name, "mutile": model["profiled_s"], "max_abs_err": err, "model": model,
            "utilization": util}


if __name__ == "__main__":
    import sys
    if "--llvm" in sys.argv:
        for r in llvm_rows():
            print(f"{r['name']:48s} mutile {r['mutile'] * 1e3:8.2f} ms  torch "
                  f"{r['torch'] * 1e3:8.2f} ms  ratio {r['ratio']:.2f}x")
        sys.exit(0)
    for r in rows("--quick" in sys.argv):
        m = r["model"]
        print(f"{r['name']:44s} {m['time_us']:10.1f} us  utilization {100 * r['utilization']:5.1f}%"
              f"  err {r['max_abs_err']:.2e}  (profiled in {m['profiled_s']:.0f} s)")
