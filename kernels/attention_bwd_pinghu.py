"""FlashAttention backward, explicitly on Pinghu's engines (``mutile.language.pinghu``).

The portable backward's two passes (:mod:`.attention_bwd`: the Delta pre-pass stays its
pointer kernel) written the way :mod:`.attention_pinghu` writes the forward: each program
is a ``ph.warp_specialize`` of one **producer warp**, which TME-loads the program's
resident tiles once and then streams the swept tiles through a ring of ``STAGES`` shared
stages with full/empty AsyncBarriers (:func:`.attention_pinghu.load_ring`), and one
consumer partition of ``SQUADS`` WarpSquads (64 rows of every SQMMA each).

- **dK/dV** (grid ``(cdiv(seq_k, BLOCK_N), batch * kv_heads)``): K and V of ``BLOCK_N``
  keys resident; the ring carries the Q and dO boxes of every query block that can see
  them (:func:`.attention_parts.q_bounds`), for every query head of the GQA group in
  turn, so the program owns its dK, dV rows (no atomics). Per block, transposed so that
  the keys are the SQMMA rows throughout: ``S^T = K Q^T`` and ``dP^T = V dO^T`` by SQMMA,
  the score pipeline (:func:`.attention_parts.mod_scores`,
  :func:`.attention_parts.score_grads`: ``P^T``, ``dS^T`` with the mods' chain factors;
  positions, lse and Delta broadcast as ``[1, BLOCK_M]`` rows), ``P^T`` and ``dS^T``
  stored to shared memory in q's dtype, then ``dV += P^T dO`` and ``dK += dS^T Q``.
- **dQ** (grid ``(cdiv(seq_q, BLOCK_M), batch * heads)``): Q and dO resident; the ring
  carries the K and V boxes of every visible key block (:func:`.attention_parts.kv_bounds`);
  ``S = Q K^T``, ``dP = dO V^T``, ``dS`` stored to shared, ``dQ += dS K``.

lse and Delta are read with pointer loads; the outputs are stored with pointer stores
(rows past the sequence dropped), dK and dQ times ``sm_scale``. Boxes past a sequence read
TME's zeros and their positions are masked, as in the forward.

A score_mod and mask_mod receive their positions as broadcastable tiles: ``[BLOCK_M, 1]``
and ``[1, BLOCK_N]`` in dQ, ``[1, BLOCK_M]`` and ``[BLOCK_N, 1]`` in dK/dV (elementwise
mods, as every mod of :mod:`.block_mask`, do not see the difference).

:func:`supports` is the forward's scope (and a TME-aligned ``do``);
:func:`run` launches both passes, each autotuned on modelled time (:func:`tuner_for`);
:func:`run_pass` one pass with one config.
"""
import functools

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph

from . import attention_pinghu as fwd
from .attention_parts import (kv_bounds, mod_scores, no_mask_mod, no_score_mod, q_bounds,
                              score_grads)
from .attention_pinghu import load_pair, load_ring


@mutile.jit
def pair_descs(A, B, off, seq, stride, ROWS: ml.constexpr, HEAD_DIM: ml.constexpr):
    """TME descriptors of the two [seq, HEAD_DIM] matrices at ``A + off`` and ``B + off``
    (row stride ``stride``), in boxes of ``ROWS`` rows."""
    return (ml.make_tensor_descriptor(A + off, shape=[seq, HEAD_DIM], strides=[stride, 1],
                                      block_shape=[ROWS, HEAD_DIM]),
            ml.make_tensor_descriptor(B + off, shape=[seq, HEAD_DIM], strides=[stride, 1],
                                      block_shape=[ROWS, HEAD_DIM]))


@mutile.jit
def pair_shared(shape, dtype, swizzle: ml.constexpr):
    """Two shared buffers of one shape (the resident pair, or a ring's two operands)."""
    return ph.alloc_shared(shape, dtype, swizzle=swizzle), ph.alloc_shared(shape, dtype,
                                                                            swizzle=swizzle)


@mutile.jit
def ring_barriers(STAGES: ml.constexpr, SQUADS: ml.constexpr):
    """(the resident tiles' barrier, the ring's full and empty barriers): the producer's
    one arrival completes the first two (with their bytes), every consumer warp the
    last."""
    return (ph.alloc_barrier(arrive_warps=1), ph.alloc_barriers(STAGES, arrive_warps=1),
            ph.alloc_barriers(STAGES, arrive_warps=4 * SQUADS))


@mutile.jit
def dkdv_producer(Q, dO, k_desc, v_desc, q_s, do_s, k_s, v_s, kv_bar, full, empty, b, hk,
                  group, start_n, seq_q, shift, left, right, s_qb, s_qh, s_qm,
                  HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                  STAGES: ml.constexpr, CAUSAL: ml.constexpr, WINDOW: ml.constexpr):
    """One warp: K and V once, then every group head's Q and dO boxes of the query blocks
    that see the key block."""
    load_pair(k_desc, v_desc, k_s, v_s, kv_bar, start_n * BLOCK_N)
    lo, hi = q_bounds(start_n, seq_q, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    n = ml.cdiv(hi - lo, BLOCK_M)
    for gi in range(group):
        q_desc, do_desc = pair_descs(Q, dO, b * s_qb + (hk * group + gi) * s_qh, seq_q, s_qm,
                                     BLOCK_M, HEAD_DIM)
        load_ring(q_desc, do_desc, q_s, do_s, full, empty, lo, BLOCK_M, n, gi * n, STAGES)


@mutile.jit
def swept_products(a_s, b_s, c_s, d_s, full, it, STAGES: ml.constexpr):
    """Wait for ring step ``it``'s stage and multiply the resident tiles by its boxes:
    ``(a b_s[st]^T, c d_s[st]^T)`` in f32 (the squad's SQMMAs, complete)."""
    st = it % STAGES
    ph.barrier_wait(full[st], (it // STAGES) & 1)
    x = ph.sqmma(a_s, b_s[st], trans_b=True)
    y = ph.sqmma(c_s, d_s[st], trans_b=True)
    return ph.sqmma_wait(x, y)


@mutile.jit
def staged(buf, tile):
    """Store ``tile`` (in the buffer's dtype) as an SQMMA operand for every warp."""
    buf.store(tile)
    ph.fence_shared()
    ph.sync_warps()


@mutile.jit
def dkdv_consumer(k_s, v_s, q_s, do_s, p_s, ds_s, kv_bar, full, empty, Lse, Delta, dK, dV,
                  Slopes, b, hk, group, start_n, seq_q, seq_k, shift, left, right, sm_scale,
                  softcap, s_kb, s_kh, s_kn, s_lb, s_lh, s_ab, HEAD_DIM: ml.constexpr,
                  BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr, STAGES: ml.constexpr,
                  CAUSAL: ml.constexpr, WINDOW: ml.constexpr, SOFTCAP: ml.constexpr,
                  ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr,
                  score_mod, score_grad, mask_mod):
    """The WarpSquads: the key block's dK, dV over every group head's query blocks
    (transposed tiles, see the module doc), then their stores."""
    cols = start_n * BLOCK_N + ml.arange(0, BLOCK_N)
    offs_m = ml.arange(0, BLOCK_M)
    lo, hi = q_bounds(start_n, seq_q, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    n = ml.cdiv(hi - lo, BLOCK_M)
    dk = ml.zeros([BLOCK_N, HEAD_DIM], ml.float32)
    dv = ml.zeros([BLOCK_N, HEAD_DIM], ml.float32)
    ph.barrier_wait(kv_bar, 0)
    for gi in range(group):
        h = hk * group + gi
        slope = 0.0
        if ALIBI:
            slope = ml.load(Slopes + b * s_ab + h)
        row0 = b * s_lb + h * s_lh
        for j in range(n):
            it = gi * n + j
            rows = lo + j * BLOCK_M + offs_m
            lse = ml.load(Lse + row0 + rows, mask=rows < seq_q, other=0.0)
            delta = ml.load(Delta + row0 + rows, mask=rows < seq_q, other=0.0)
            s_t, dp_t = swept_products(k_s, q_s, v_s, do_s, full, it, STAGES)
            s_t, g_t = mod_scores(s_t * sm_scale, softcap, slope, rows[None, :], cols[:, None],
                                  shift, SOFTCAP, ALIBI)
            p_t, ds_t = score_grads(s_t, g_t, dp_t, lse[None, :], delta[None, :], b, h,
                                    rows[None, :], cols[:, None], seq_q, seq_k, shift, left,
                                    right, CAUSAL, WINDOW, SCORE_MOD, MASK_MOD, score_mod,
                                    score_grad, mask_mod)
            p_s.store(p_t)
            staged(ds_s, ds_t)
            st = it % STAGES
            dv = ph.sqmma(p_s, do_s[st], dv)
            dk = ph.sqmma(ds_s, q_s[st], dk)
            dv, dk = ph.sqmma_wait(dv, dk)
            ph.barrier_arrive(empty[st])
    offs_d = ml.arange(0, HEAD_DIM)
    off = b * s_kb + hk * s_kh + cols[:, None] * s_kn + offs_d[None, :]
    ok = cols[:, None] < seq_k
    ml.store(dK + off, (dk * sm_scale).to(dK.dtype.element_ty), mask=ok)
    ml.store(dV + off, dv.to(dV.dtype.element_ty), mask=ok)


@mutile.jit
def dq_producer(q_desc, do_desc, k_desc, v_desc, q_s, do_s, k_s, v_s, q_bar, full, empty,
                start_m, seq_k, shift, left, right, BLOCK_M: ml.constexpr,
                BLOCK_N: ml.constexpr, STAGES: ml.constexpr, CAUSAL: ml.constexpr,
                WINDOW: ml.constexpr):
    """One warp: Q and dO once, then the K and V boxes of every visible key block."""
    load_pair(q_desc, do_desc, q_s, do_s, q_bar, start_m * BLOCK_M)
    lo, hi = kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    load_ring(k_desc, v_desc, k_s, v_s, full, empty, lo, BLOCK_N, ml.cdiv(hi - lo, BLOCK_N),
              0, STAGES)


@mutile.jit
def dq_consumer(q_s, do_s, k_s, v_s, ds_s, q_bar, full, empty, Lse, Delta, dQ, Slopes, b, h,
                start_m, seq_q, seq_k, shift, left, right, sm_scale, softcap, s_qb, s_qh,
                s_qm, s_lb, s_lh, s_ab, HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr,
                BLOCK_N: ml.constexpr, STAGES: ml.constexpr, CAUSAL: ml.constexpr,
                WINDOW: ml.constexpr, SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
                SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr, score_mod, score_grad,
                mask_mod):
    """The WarpSquads: the query block's dQ over every visible key block, then its store."""
    rows = start_m * BLOCK_M + ml.arange(0, BLOCK_M)
    offs_n = ml.arange(0, BLOCK_N)
    slope = 0.0
    if ALIBI:
        slope = ml.load(Slopes + b * s_ab + h)
    row0 = b * s_lb + h * s_lh
    lse = ml.load(Lse + row0 + rows, mask=rows < seq_q, other=0.0)
    delta = ml.load(Delta + row0 + rows, mask=rows < seq_q, other=0.0)
    lo, hi = kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    n = ml.cdiv(hi - lo, BLOCK_N)
    dq = ml.zeros([BLOCK_M, HEAD_DIM], ml.float32)
    ph.barrier_wait(q_bar, 0)
    for j in range(n):
        cols = lo + j * BLOCK_N + offs_n
        s, dp = swept_products(q_s, k_s, do_s, v_s, full, j, STAGES)
        s, g = mod_scores(s * sm_scale, softcap, slope, rows[:, None], cols[None, :], shift,
                          SOFTCAP, ALIBI)
        _, ds = score_grads(s, g, dp, lse[:, None], delta[:, None], b, h, rows[:, None],
                            cols[None, :], seq_q, seq_k, shift, left, right, CAUSAL, WINDOW,
                            SCORE_MOD, MASK_MOD, score_mod, score_grad, mask_mod)
        staged(ds_s, ds)
        st = j % STAGES
        dq = ph.sqmma(ds_s, k_s[st], dq)
        dq = ph.sqmma_wait(dq)
        ph.barrier_arrive(empty[st])
    offs_d = ml.arange(0, HEAD_DIM)
    ml.store(dQ + b * s_qb + h * s_qh + rows[:, None] * s_qm + offs_d[None, :],
             (dq * sm_scale).to(dQ.dtype.element_ty), mask=rows[:, None] < seq_q)


def build_kernels(score_mod, score_grad, mask_mod):
    """The explicit dK/dV and dQ kernels with the mods inlined (closures, as
    :func:`.attention_bwd.build_backward`)."""
    smod = no_score_mod if score_mod is None else score_mod
    sgrad = no_score_mod if score_grad is None else score_grad
    mmod = no_mask_mod if mask_mod is None else mask_mod

    @mutile.jit
    def attn_bwd_dkdv_ph_kernel(Q, K, V, dO, Lse, Delta, dK, dV, Slopes, seq_q, seq_k,
                                kv_heads, group, sm_scale, softcap, left, right, s_qb, s_qh,
                                s_qm, s_kb, s_kh, s_kn, s_lb, s_lh, s_ab,
                                HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr,
                                BLOCK_N: ml.constexpr, STAGES: ml.constexpr,
                                SQUADS: ml.constexpr, CAUSAL: ml.constexpr,
                                WINDOW: ml.constexpr, SOFTCAP: ml.constexpr,
                                ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr,
                                MASK_MOD: ml.constexpr):
        """Grid (cdiv(seq_k, BLOCK_N), batch * kv_heads); 4 * SQUADS + 1 warps."""
        start_n = ml.program_id(0)
        bh = ml.program_id(1)
        b = bh // kv_heads
        hk = bh % kv_heads
        k_desc, v_desc = pair_descs(K, V, b * s_kb + hk * s_kh, seq_k, s_kn, BLOCK_N, HEAD_DIM)
        k_s, v_s = pair_shared((BLOCK_N, HEAD_DIM), k_desc.dtype, 64)
        q_s, do_s = pair_shared((STAGES, BLOCK_M, HEAD_DIM), k_desc.dtype, 64)
        p_s, ds_s = pair_shared((BLOCK_N, BLOCK_M), k_desc.dtype, 16)
        kv_bar, full, empty = ring_barriers(STAGES, SQUADS)
        shift = seq_k - seq_q
        ph.warp_specialize([
            (dkdv_consumer, (k_s, v_s, q_s, do_s, p_s, ds_s, kv_bar, full, empty, Lse, Delta,
                             dK, dV, Slopes, b, hk, group, start_n, seq_q, seq_k, shift, left,
                             right, sm_scale, softcap, s_kb, s_kh, s_kn, s_lb, s_lh, s_ab,
                             HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, CAUSAL, WINDOW, SOFTCAP,
                             ALIBI, SCORE_MOD, MASK_MOD, smod, sgrad, mmod), 4 * SQUADS),
            (dkdv_producer, (Q, dO, k_desc, v_desc, q_s, do_s, k_s, v_s, kv_bar, full, empty,
                             b, hk, group, start_n, seq_q, shift, left, right, s_qb, s_qh,
                             s_qm, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, CAUSAL, WINDOW), 1)])

    @mutile.jit
    def attn_bwd_dq_ph_kernel(Q, K, V, dO, Lse, Delta, dQ, Slopes, seq_q, seq_k, heads,
                              group, sm_scale, softcap, left, right, s_qb, s_qh, s_qm, s_kb,
                              s_kh, s_kn, s_lb, s_lh, s_ab, HEAD_DIM: ml.constexpr,
                              BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                              STAGES: ml.constexpr, SQUADS: ml.constexpr,
                              CAUSAL: ml.constexpr, WINDOW: ml.constexpr,
                              SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
                              SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr):
        """Grid (cdiv(seq_q, BLOCK_M), batch * heads); 4 * SQUADS + 1 warps."""
        start_m = ml.program_id(0)
        bh = ml.program_id(1)
        b = bh // heads
        h = bh % heads
        q_desc, do_desc = pair_descs(Q, dO, b * s_qb + h * s_qh, seq_q, s_qm, BLOCK_M, HEAD_DIM)
        k_desc, v_desc = pair_descs(K, V, b * s_kb + (h // group) * s_kh, seq_k, s_kn, BLOCK_N,
                                    HEAD_DIM)
        q_s, do_s = pair_shared((BLOCK_M, HEAD_DIM), q_desc.dtype, 64)
        k_s, v_s = pair_shared((STAGES, BLOCK_N, HEAD_DIM), q_desc.dtype, 64)
        ds_s = ph.alloc_shared((BLOCK_M, BLOCK_N), q_desc.dtype, swizzle=16)
        q_bar, full, empty = ring_barriers(STAGES, SQUADS)
        shift = seq_k - seq_q
        ph.warp_specialize([
            (dq_consumer, (q_s, do_s, k_s, v_s, ds_s, q_bar, full, empty, Lse, Delta, dQ,
                           Slopes, b, h, start_m, seq_q, seq_k, shift, left, right, sm_scale,
                           softcap, s_qb, s_qh, s_qm, s_lb, s_lh, s_ab, HEAD_DIM, BLOCK_M,
                           BLOCK_N, STAGES, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                           MASK_MOD, smod, sgrad, mmod), 4 * SQUADS),
            (dq_producer, (q_desc, do_desc, k_desc, v_desc, q_s, do_s, k_s, v_s, q_bar, full,
                           empty, start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, STAGES,
                           CAUSAL, WINDOW), 1)])

    return attn_bwd_dkdv_ph_kernel, attn_bwd_dq_ph_kernel


# ---------------------------------------------------------------- host side
kernels_for = functools.cache(build_kernels)    # compiled once per triple of mods


def supports(a, do) -> bool:
    """Whether the explicit kernels take these checked arguments and output gradient:
    the forward's :func:`.attention_pinghu.supports` and a TME-aligned ``do``."""
    return fwd.supports(a) and fwd.tme_aligned(do)


def _config(bm, bn, stages, squads):
    return mutile.Config(dict(BLOCK_M=bm, BLOCK_N=bn, STAGES=stages, SQUADS=squads),
                         num_warps=4 * squads)


# the tuned configs, per pass: (BLOCK_M, BLOCK_N, STAGES, SQUADS); the squads split the rows of
# every SQMMA, the keys (BLOCK_N) in dK/dV and the queries (BLOCK_M) in dQ
SPACES = {"dkdv": ((32, 32, 2, 1), (32, 64, 2, 1), (64, 64, 2, 1), (32, 128, 2, 2)),
          "dq": ((32, 64, 3, 1), (32, 32, 3, 1), (64, 64, 2, 1), (128, 64, 2, 2))}


def shared_bytes(kw: dict, head_dim: int, resident: str) -> int:
    """Shared memory of one config at 2-byte elements: the two resident tiles of
    ``resident`` rows ("BLOCK_M" or "BLOCK_N"), the other block's ring of two tiles per
    stage, and the staged P/dS tiles (two in dK/dV, one in dQ)."""
    swept = "BLOCK_N" if resident == "BLOCK_M" else "BLOCK_M"
    staged_tiles = 1 if resident == "BLOCK_M" else 2
    return 2 * (2 * kw[resident] * head_dim + 2 * kw["STAGES"] * kw[swept] * head_dim
                + staged_tiles * kw["BLOCK_M"] * kw["BLOCK_N"])


def pruner(resident: str):
    """An ``early_config_prune`` for a pass: configs that fit shared memory and whose
    blocks the sequences need (as :func:`.attention_pinghu.prune`)."""
    def prune(configs, nargs, **kwargs):
        d = kwargs["HEAD_DIM"]
        keep = [c for c in configs
                if shared_bytes(c.kwargs, d, resident) <= fwd.shared_limit()
                and c.kwargs["BLOCK_M"] <= max(64, mutile.next_power_of_2(nargs["seq_q"]))
                and c.kwargs["BLOCK_N"] <= max(64, mutile.next_power_of_2(nargs["seq_k"]))]
        return keep or list(configs)[:1]
    return prune


FLAGS = ["HEAD_DIM", "CAUSAL", "WINDOW", "SOFTCAP", "ALIBI", "SCORE_MOD", "MASK_MOD"]


@functools.cache
def tuner_for(score_mod, score_grad, mask_mod):
    """The autotuned (dK/dV, dQ) kernels of a triple of mods (modelled time on pinghu)."""
    dkdv, dq = kernels_for(score_mod, score_grad, mask_mod)
    return (mutile.autotune(configs=[_config(*c) for c in SPACES["dkdv"]],
                            key=["seq_q", "seq_k", "kv_heads", "group"] + FLAGS,
                            prune_configs_by={"early_config_prune": pruner("BLOCK_N")})(dkdv),
            mutile.autotune(configs=[_config(*c) for c in SPACES["dq"]],
                            key=["seq_q", "seq_k", "heads", "group"] + FLAGS,
                            prune_configs_by={"early_config_prune": pruner("BLOCK_M")})(dq))


PASSES = ("dkdv", "dq")


def _launches(a, do, lse, delta, out):
    """{pass: (grid of a config, the kernel's arguments)} and the constexpr flags."""
    dq, dk, dv = out
    f = a.flags()
    qb, qh, qm, _ = (s // a.q.itemsize for s in a.q.strides)
    kb, kh, kn, _ = (s // a.k.itemsize for s in a.k.strides)
    lb, lh, _ = (s // 4 for s in lse.strides)
    group = a.heads // a.kv_heads
    tail = (a.sm_scale, a.softcap, a.window[0], a.window[1], qb, qh, qm, kb, kh, kn, lb, lh,
            a.slopes_batch_stride)
    kw = dict(HEAD_DIM=a.head_dim, backend="pinghu",
              **{n: f[n] for n in FLAGS if n != "HEAD_DIM"})
    return {"dkdv": (lambda meta: (mutile.cdiv(a.seq_k, meta["BLOCK_N"]), a.batch * a.kv_heads),
                     (a.q, a.k, a.v, do, lse, delta, dk, dv, a.slopes, a.seq_q, a.seq_k,
                      a.kv_heads, group, *tail)),
            "dq": (lambda meta: (mutile.cdiv(a.seq_q, meta["BLOCK_M"]), a.batch * a.heads),
                   (a.q, a.k, a.v, do, lse, delta, dq, a.slopes, a.seq_q, a.seq_k, a.heads,
                    group, *tail))}, kw


def run(a, do, lse, delta, out, score_grad=None):
    """Launch both explicit passes on checked arguments ``a`` (``do``, the forward's
    ``lse``, the pre-pass's ``delta``; ``score_grad`` the score_mod's derivative), writing
    ``out = (dq, dk, dv)``, each pass with its autotuner's choice (:func:`tuner_for`)."""
    passes, kw = _launches(a, do, lse, delta, out)
    for name, tuner in zip(PASSES, tuner_for(a.score_mod, score_grad, a.mask_mod)):
        grid, args = passes[name]
        tuner[grid](*args, **kw)


def run_pass(a, do, lse, delta, out, name, config, score_grad=None):
    """Launch one pass (``"dkdv"`` or ``"dq"``) with one ``config`` (a dict of BLOCK_M,
    BLOCK_N, STAGES and SQUADS) instead of the tuner's choice."""
    if name not in PASSES or set(config) != fwd.CONFIG_KEYS:
        raise ValueError(f"a pass is 'dkdv' or 'dq' and a config gives BLOCK_M, BLOCK_N, "
                         f"STAGES and SQUADS, got {name!r} and {sorted(config)}")
    passes, kw = _launches(a, do, lse, delta, out)
    grid, args = passes[name]
    kernel = kernels_for(a.score_mod, score_grad, a.mask_mod)[PASSES.index(name)]
    kernel[grid(config)](*args, **kw, **config, num_warps=4 * config["SQUADS"])
