"""FlashAttention backward, explicitly on Pinghu's engines (``mutile.language.pinghu``).

The portable backward's structure (:mod:`.attention_bwd`: a pre-pass, dK/dV with K and V
resident, dQ) written the way :mod:`.attention_pinghu` writes the forward. Each pass is a
``ph.warp_specialize`` of one **producer warp**, which TME-loads the program's resident
tiles once (a box per squad) and then streams the swept tiles through a ring of
``STAGES`` shared stages with full/empty AsyncBarriers (:func:`.attention_pinghu.load_ring`),
and ``SQUADS`` **consumer WarpSquads, one partition each**, so that one squad's pointwise
work runs while another's SQMMAs do (FA3's ping-pong).

- **Pre-pass** (:func:`attn_bwd_stats_kernel`): per query row ``-log2(e) * lse`` and
  ``Delta = sum(O * dO)``, in rows padded per head to :data:`STAT_PAD` (-inf and 0), one
  array for both passes (:func:`stats`).
- **dK/dV** (grid ``(cdiv(seq_k, BLOCK_N), batch * kv_heads)``): squad ``i`` owns keys
  ``i * BLOCK_N / SQUADS ..`` of the block; the ring carries the Q and dO boxes of every
  query block that can see them (:func:`.attention_parts.q_bounds`), for every query
  head of the GQA group in turn, so the program owns its dK, dV rows (no atomics). Per
  block: ``S = Q K^T`` and ``dP = dO V^T`` by SQMMA (query rows, key columns, as in the
  forward), ``P`` and ``dS`` (:func:`squad_grads`) stored to the squad's shared tiles in
  q's dtype, then ``dV += P^T dO`` and ``dK += dS^T Q`` with SQMMA reading the stored
  tiles transposed (``trans_a``).
- **dQ** (grid ``(cdiv(seq_q, BLOCK_M), batch * heads)``): squad ``i`` owns query rows
  ``i * BLOCK_M / SQUADS ..``; the ring carries the K and V boxes of every visible key
  block (:func:`.attention_parts.kv_bounds`); ``S``, ``dP``, ``dS`` to shared,
  ``dQ += dS K``.

In both loops the next block's ``S``, ``dP`` are issued right behind this block's
accumulating SQMMAs and one wait covers them all (the forward's ``kv_loop``), and a
block's statistics are loaded a block ahead as ``[ROWS, 128 / ROWS]`` tiles, one element
per thread, which the block layout broadcasts over the score tile inside each thread
(:func:`row_stats`, :func:`over_tile`). With no mask and no mod a tile needs no
visibility test (:func:`squad_grads`); otherwise the portable score pipeline runs
(:func:`.attention_parts.mod_scores`, :func:`.attention_parts.score_grads`). Outputs are
stored with pointer stores (rows past the sequence dropped), dK and dQ times ``sm_scale``.

:func:`supports` is the forward's scope (and a TME-aligned ``do``); :func:`run` launches
the three kernels, each pass autotuned on modelled time (:func:`tuner_for`);
:func:`run_pass` one pass with one config.
"""
import functools

import numpy as np

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph

from . import attention_pinghu as fwd
from .attention_parts import (LOG2E, kv_bounds, lse_base2, mod_scores, no_mask_mod,
                              no_score_mod, q_bounds, score_grads)
from .attention_pinghu import load_ring


STAT_PAD = 128      # the statistics' rows per head are a multiple of the largest BLOCK_M
STAT_BLOCK = 4      # the pre-pass's rows a program (4 x 128 elements: few registers, many
                    # programs resident to cover the loads' latency; docs/templates.md)


@mutile.jit
def attn_bwd_stats_kernel(O, dO, Lse, Stats, seq_q, s_ob, s_oh, s_om, s_lb, s_lh,
                          HEAD_DIM: ml.constexpr, BLOCK: ml.constexpr):
    """The pre-pass, grid ``(rows per head / BLOCK, heads, batch)``: per query row ``r`` of
    head ``bh``, ``Stats[0, bh, r] = -log2(e) * lse`` (0 for a row that sees no key) and
    ``Stats[1, bh, r] = Delta = sum(O * dO)``; a padding row (``r >= seq_q``) gets -inf
    and 0, so that its probabilities are exactly 0 without a mask."""
    h = ml.program_id(1)
    b = ml.program_id(2)
    per_head = ml.num_programs(0) * BLOCK
    rows = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    ok = rows < seq_q
    off = b * s_ob + h * s_oh + rows[:, None] * s_om + ml.arange(0, HEAD_DIM)[None, :]
    o = ml.load(O + off, mask=ok[:, None], other=0.0).to(ml.float32)
    do = ml.load(dO + off, mask=ok[:, None], other=0.0).to(ml.float32)
    lse = ml.load(Lse + b * s_lb + h * s_lh + rows, mask=ok, other=0.0)
    at = Stats + (b * ml.num_programs(1) + h) * per_head + rows
    ml.store(at, ml.where(ok, -lse_base2(lse), -float("inf")))
    ml.store(at + ml.num_programs(1) * ml.num_programs(2) * per_head, ml.sum(o * do, axis=1))


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
def load_resident(a_desc, b_desc, a_s, b_s, bar, row, ROWS: ml.constexpr,
                  SQUADS: ml.constexpr):
    """The program's resident pair: ``SQUADS`` boxes of ``ROWS`` rows from ``row`` of
    each descriptor (box ``i`` into ``a_s[i]``, ``b_s[i]``, squad ``i``'s), counted on
    ``bar``."""
    ph.barrier_expect_tx(bar, 2 * SQUADS * ROWS * a_s.shape[2] * a_s.dtype.itemsize)
    for i in ml.static_range(0, SQUADS):
        ph.tme_load(a_desc, [row + i * ROWS, 0], a_s[i], bar)
        ph.tme_load(b_desc, [row + i * ROWS, 0], b_s[i], bar)


@mutile.jit
def dkdv_producer(Q, dO, k_desc, v_desc, q_s, do_s, k_s, v_s, kv_bar, full, empty, b, hk,
                  group, start_n, seq_q, shift, left, right, s_qb, s_qh, s_qm,
                  HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                  STAGES: ml.constexpr, SQUADS: ml.constexpr, CAUSAL: ml.constexpr,
                  WINDOW: ml.constexpr):
    """One warp: K and V once (a box per squad), then every group head's Q and dO boxes
    of the query blocks that see the key block."""
    load_resident(k_desc, v_desc, k_s, v_s, kv_bar, start_n * BLOCK_N, BLOCK_N // SQUADS,
                  SQUADS)
    lo, hi = q_bounds(start_n, seq_q, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    n = ml.cdiv(hi - lo, BLOCK_M)
    for gi in range(group):
        q_desc, do_desc = pair_descs(Q, dO, b * s_qb + (hk * group + gi) * s_qh, seq_q, s_qm,
                                     BLOCK_M, HEAD_DIM)
        load_ring(q_desc, do_desc, q_s, do_s, full, empty, lo, BLOCK_M, n, gi * n, STAGES)


@mutile.jit
def staged(buf, tile):
    """Store ``tile`` (in the buffer's dtype) as an SQMMA operand for every warp of the
    squad."""
    buf.store(tile)
    ph.fence_shared()
    ph.sync_warps()


@mutile.jit
def row_stats(Stats, plane, row0, rows, valid, ROWS: ml.constexpr):
    """(-log2(e) lse, Delta) of a tile's ``ROWS`` query positions ``rows`` of the head
    whose statistics start at ``row0`` (:func:`attn_bwd_stats_kernel`'s padded rows), each
    a ``[ROWS, 128 / ROWS]`` tile of one element per thread of the WarpSquad
    (:func:`over_tile` broadcasts them). Nothing reads them here, so loads issued a block
    ahead wait for no one; nothing is read unless ``valid``."""
    ml.static_assert(ROWS <= 128, "a squad tile has at most 128 query rows")
    at = Stats + row0 + rows[:, None] + ml.zeros([1, 128 // ROWS], ml.int32)
    return (ml.load(at, mask=valid, other=0.0), ml.load(at + plane, mask=valid, other=0.0))


@mutile.jit
def over_tile(x, N: ml.constexpr):
    """A :func:`row_stats` tile ``[ROWS, T]`` broadcast over a ``[ROWS, N]`` score tile.
    In the block layout a thread's run of the score tile lies in the one row whose
    statistic it holds, so the broadcast stays in the thread (no move through shared
    memory) and folds into its readers."""
    ml.static_assert(N >= x.shape[1], "the score tile must have a run for every thread")
    return ml.reshape(ml.broadcast_to(ml.expand_dims(x, 2),
                                      [x.shape[0], x.shape[1], N // x.shape[1]]),
                      [x.shape[0], N])


@mutile.jit
def squad_grads(s, dp, nl, delta, sm_scale, softcap, slope, b, h, rows, cols, seq_q, seq_k,
               shift, left, right, CAUSAL: ml.constexpr, WINDOW: ml.constexpr,
               SOFTCAP: ml.constexpr, ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr,
               MASK_MOD: ml.constexpr, score_mod, score_grad, mask_mod):
    """(p, ds) of a ``[ROWS, N]`` tile of ``s = Q K^T`` and ``dP = dO V^T`` whose query
    and key positions are ``rows``, ``cols``; ``nl`` and ``delta`` the rows' statistics
    over the tile. With no mask and no mods ``p = exp2(s * sm_scale * log2(e) + nl)``
    needs no visibility test: a padding query row has ``nl = -inf`` (p = 0), a key past
    ``seq_k`` has zero K and V rows (TME's fill), so its ``ds`` meets zero K rows in dQ and
    its own dK, dV rows are not stored. Otherwise the portable pipeline
    (:func:`.attention_parts.mod_scores`, :func:`.attention_parts.score_grads`)."""
    if CAUSAL or WINDOW or MASK_MOD or SCORE_MOD or SOFTCAP or ALIBI:
        s, g = mod_scores(s * sm_scale, softcap, slope, rows[:, None], cols[None, :], shift,
                          SOFTCAP, ALIBI)
        return score_grads(s, g, dp, -nl, delta, b, h, rows[:, None], cols[None, :], seq_q,
                           seq_k, shift, left, right, CAUSAL, WINDOW, SCORE_MOD, MASK_MOD,
                           score_mod, score_grad, mask_mod)
    p = ml.exp2(ml.fma(s, sm_scale * LOG2E, nl))
    return p, p * (dp - delta)


@mutile.jit
def next_stage(st, par, last, STAGES: ml.constexpr):
    """The ring step after stage ``st`` of phase ``par``: (stage, phase); the last step
    stays on its own stage (its redundant issue reads the stage it still holds)."""
    wrap = st + 1 == STAGES
    return (ml.where(last, st, ml.where(wrap, 0, st + 1)),
            ml.where(wrap & ~last, par ^ 1, par))


@mutile.jit
def dkdv_consumer(squad, c):
    """WarpSquad ``squad``: the dK, dV of its ``SQUAD_N`` keys (the ``squad``-th of the key
    block) over every group head's query blocks, one ring step each, then their stores.
    A step's ``S``, ``dP`` are issued right behind the previous step's ``dV``, ``dK`` and
    one wait covers all four (as the forward's ``kv_loop``); its statistics and slope are
    loaded a step ahead. ``c``: the kernel's arguments every squad shares (one tuple, so
    the partitions differ in ``squad`` alone)."""
    (k_s, v_s, q_s, do_s, p_s, ds_s, kv_bar, full, empty, Stats, dK, dV, Slopes, b, hk, group,
     heads, start_n, seq_q, seq_k, shift, left, right, sm_scale, softcap, per_head, plane, s_kb,
     s_kh, s_kn, s_ab, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, SQUADS, CAUSAL, WINDOW, SOFTCAP,
     ALIBI, SCORE_MOD, MASK_MOD, score_mod, score_grad, mask_mod) = c
    k_s = k_s[squad]
    v_s = v_s[squad]
    p_s = p_s[squad]
    ds_s = ds_s[squad]
    SQUAD_N: ml.constexpr = BLOCK_N // SQUADS
    cols = start_n * BLOCK_N + squad * SQUAD_N + ml.arange(0, SQUAD_N)
    offs_m = ml.arange(0, BLOCK_M)
    lo, hi = q_bounds(start_n, seq_q, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    n = ml.cdiv(hi - lo, BLOCK_M)
    total = group * n
    dk = ml.zeros([SQUAD_N, HEAD_DIM], ml.float32)
    dv = ml.zeros([SQUAD_N, HEAD_DIM], ml.float32)
    s = ml.zeros([BLOCK_M, SQUAD_N], ml.float32)
    dp = ml.zeros([BLOCK_M, SQUAD_N], ml.float32)
    h0 = hk * group
    Slopes = Slopes + b * s_ab + h0
    head0 = (b * heads + h0) * per_head
    nl, delta = row_stats(Stats, plane, head0, lo + offs_m, total > 0, BLOCK_M)
    slope = 0.0
    if ALIBI:
        slope = ml.load(Slopes)
    ph.barrier_wait(kv_bar, 0)
    if total > 0:
        ph.barrier_wait(full[0], 0)
        s, dp = ph.sqmma_wait(ph.sqmma(q_s[0], k_s, trans_b=True),
                              ph.sqmma(do_s[0], v_s, trans_b=True))
    st = 0              # the step's stage, phase, group head and query block, carried
    par = 0
    gi = 0
    j = 0
    for it in range(total):
        rows = lo + j * BLOCK_M + offs_m
        p, ds = squad_grads(s, dp, over_tile(nl, SQUAD_N), over_tile(delta, SQUAD_N),
                           sm_scale, softcap, slope, b, h0 + gi, rows, cols, seq_q, seq_k,
                           shift, left, right, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                           MASK_MOD, score_mod, score_grad, mask_mod)
        j += 1
        gi = ml.where(j == n, gi + 1, gi)
        j = ml.where(j == n, 0, j)
        last = it + 1 == total
        nl, delta = row_stats(Stats, plane, head0 + gi * per_head, lo + j * BLOCK_M + offs_m,
                              ~last, BLOCK_M)
        if ALIBI:
            slope = ml.load(Slopes + gi, mask=~last, other=0.0)
        p_s.store(p)
        staged(ds_s, ds)
        dv = ph.sqmma(p_s, do_s[st], dv, trans_a=True)
        dk = ph.sqmma(ds_s, q_s[st], dk, trans_a=True)
        nx, npar = next_stage(st, par, last, STAGES)
        ph.barrier_wait(full[nx], npar)
        s = ph.sqmma(q_s[nx], k_s, trans_b=True)
        dp = ph.sqmma(do_s[nx], v_s, trans_b=True)
        dv, dk, s, dp = ph.sqmma_wait(dv, dk, s, dp)
        ph.barrier_arrive(empty[st])
        st = nx
        par = npar
    offs_d = ml.arange(0, HEAD_DIM)
    off = b * s_kb + hk * s_kh + cols[:, None] * s_kn + offs_d[None, :]
    ok = cols[:, None] < seq_k
    ml.store(dK + off, (dk * sm_scale).to(dK.dtype.element_ty), mask=ok)
    ml.store(dV + off, dv.to(dV.dtype.element_ty), mask=ok)


@mutile.jit
def dq_producer(q_desc, do_desc, k_desc, v_desc, q_s, do_s, k_s, v_s, q_bar, full, empty,
                start_m, seq_k, shift, left, right, BLOCK_M: ml.constexpr,
                BLOCK_N: ml.constexpr, STAGES: ml.constexpr, SQUADS: ml.constexpr,
                CAUSAL: ml.constexpr, WINDOW: ml.constexpr):
    """One warp: Q and dO once (a box per squad), then the K and V boxes of every visible
    key block."""
    load_resident(q_desc, do_desc, q_s, do_s, q_bar, start_m * BLOCK_M, BLOCK_M // SQUADS,
                  SQUADS)
    lo, hi = kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    load_ring(k_desc, v_desc, k_s, v_s, full, empty, lo, BLOCK_N, ml.cdiv(hi - lo, BLOCK_N),
              0, STAGES)


@mutile.jit
def dq_consumer(squad, c):
    """WarpSquad ``squad``: the dQ of its ``SQUAD_M`` query rows (the ``squad``-th of the
    query block) over every visible key block, then its store; the next block's ``S``,
    ``dP`` are issued right behind ``dQ += dS K`` (as in :func:`dkdv_consumer`; ``c`` as
    there)."""
    (q_s, do_s, k_s, v_s, ds_s, q_bar, full, empty, Stats, dQ, Slopes, b, h, heads, start_m,
     seq_q, seq_k, shift, left, right, sm_scale, softcap, per_head, plane, s_qb, s_qh, s_qm,
     s_ab, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, SQUADS, CAUSAL, WINDOW, SOFTCAP, ALIBI,
     SCORE_MOD, MASK_MOD, score_mod, score_grad, mask_mod) = c
    q_s = q_s[squad]
    do_s = do_s[squad]
    ds_s = ds_s[squad]
    SQUAD_M: ml.constexpr = BLOCK_M // SQUADS
    rows = start_m * BLOCK_M + squad * SQUAD_M + ml.arange(0, SQUAD_M)
    offs_n = ml.arange(0, BLOCK_N)
    slope = 0.0
    if ALIBI:
        slope = ml.load(Slopes + b * s_ab + h)
    nl, delta = row_stats(Stats, plane, (b * heads + h) * per_head, rows, True, SQUAD_M)
    lo, hi = kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    n = ml.cdiv(hi - lo, BLOCK_N)
    dq = ml.zeros([SQUAD_M, HEAD_DIM], ml.float32)
    s = ml.zeros([SQUAD_M, BLOCK_N], ml.float32)
    dp = ml.zeros([SQUAD_M, BLOCK_N], ml.float32)
    ph.barrier_wait(q_bar, 0)
    if n > 0:
        ph.barrier_wait(full[0], 0)
        s, dp = ph.sqmma_wait(ph.sqmma(q_s, k_s[0], trans_b=True),
                              ph.sqmma(do_s, v_s[0], trans_b=True))
    st = 0
    par = 0
    for j in range(n):
        _, ds = squad_grads(s, dp, over_tile(nl, BLOCK_N), over_tile(delta, BLOCK_N), sm_scale,
                           softcap, slope, b, h, rows, lo + j * BLOCK_N + offs_n, seq_q, seq_k,
                           shift, left, right, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                           MASK_MOD, score_mod, score_grad, mask_mod)
        staged(ds_s, ds)
        dq = ph.sqmma(ds_s, k_s[st], dq)
        nx, npar = next_stage(st, par, j + 1 == n, STAGES)
        ph.barrier_wait(full[nx], npar)
        s = ph.sqmma(q_s, k_s[nx], trans_b=True)
        dp = ph.sqmma(do_s, v_s[nx], trans_b=True)
        dq, s, dp = ph.sqmma_wait(dq, s, dp)
        ph.barrier_arrive(empty[st])
        st = nx
        par = npar
    offs_d = ml.arange(0, HEAD_DIM)
    ml.store(dQ + b * s_qb + h * s_qh + rows[:, None] * s_qm + offs_d[None, :],
             (dq * sm_scale).to(dQ.dtype.element_ty), mask=rows[:, None] < seq_q)


def build_kernels(score_mod, score_grad, mask_mod):
    """The explicit dK/dV and dQ kernels with the mods inlined (closures, as
    :func:`.attention_bwd.build_backward`); each a ``ph.warp_specialize`` of the producer
    warp and one partition per squad (so one squad's pointwise work runs while another's
    SQMMAs do)."""
    smod = no_score_mod if score_mod is None else score_mod
    sgrad = no_score_mod if score_grad is None else score_grad
    mmod = no_mask_mod if mask_mod is None else mask_mod

    @mutile.jit
    def attn_bwd_dkdv_ph_kernel(Q, K, V, dO, Stats, dK, dV, Slopes, seq_q, seq_k, kv_heads,
                                group, sm_scale, softcap, left, right, per_head, plane, s_qb,
                                s_qh, s_qm, s_kb, s_kh, s_kn, s_ab, HEAD_DIM: ml.constexpr,
                                BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                                STAGES: ml.constexpr, SQUADS: ml.constexpr,
                                CAUSAL: ml.constexpr, WINDOW: ml.constexpr,
                                SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
                                SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr):
        """Grid (cdiv(seq_k, BLOCK_N), batch * kv_heads); 4 * SQUADS + 1 warps."""
        ml.static_assert(SQUADS == 1 or SQUADS == 2, "SQUADS must be 1 or 2 (a partition each)")
        start_n = ml.program_id(0)
        bh = ml.program_id(1)
        b = bh // kv_heads
        hk = bh % kv_heads
        SQUAD_N: ml.constexpr = BLOCK_N // SQUADS
        k_desc, v_desc = pair_descs(K, V, b * s_kb + hk * s_kh, seq_k, s_kn, SQUAD_N, HEAD_DIM)
        k_s, v_s = pair_shared((SQUADS, SQUAD_N, HEAD_DIM), k_desc.dtype, 64)
        q_s, do_s = pair_shared((STAGES, BLOCK_M, HEAD_DIM), k_desc.dtype, 64)
        p_s, ds_s = pair_shared((SQUADS, BLOCK_M, SQUAD_N), k_desc.dtype, 16)
        kv_bar, full, empty = ring_barriers(STAGES, SQUADS)
        shift = seq_k - seq_q
        ring = (dkdv_producer, (Q, dO, k_desc, v_desc, q_s, do_s, k_s, v_s, kv_bar, full,
                                empty, b, hk, group, start_n, seq_q, shift, left, right, s_qb,
                                s_qh, s_qm, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, SQUADS, CAUSAL,
                                WINDOW), 1)
        c = (k_s, v_s, q_s, do_s, p_s, ds_s, kv_bar, full, empty, Stats, dK, dV, Slopes, b, hk,
             group, kv_heads * group, start_n, seq_q, seq_k, shift, left, right, sm_scale,
             softcap, per_head, plane, s_kb, s_kh, s_kn, s_ab, HEAD_DIM, BLOCK_M, BLOCK_N,
             STAGES, SQUADS, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD, MASK_MOD, smod, sgrad,
             mmod)
        if SQUADS == 1:
            ph.warp_specialize([(dkdv_consumer, (0, c), 4), ring])
        else:
            ph.warp_specialize([(dkdv_consumer, (0, c), 4), (dkdv_consumer, (1, c), 4), ring])

    @mutile.jit
    def attn_bwd_dq_ph_kernel(Q, K, V, dO, Stats, dQ, Slopes, seq_q, seq_k, heads, group,
                              sm_scale, softcap, left, right, per_head, plane, s_qb, s_qh,
                              s_qm, s_kb, s_kh, s_kn, s_ab, HEAD_DIM: ml.constexpr,
                              BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
                              STAGES: ml.constexpr, SQUADS: ml.constexpr,
                              CAUSAL: ml.constexpr, WINDOW: ml.constexpr,
                              SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
                              SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr):
        """Grid (cdiv(seq_q, BLOCK_M), batch * heads); 4 * SQUADS + 1 warps."""
        ml.static_assert(SQUADS == 1 or SQUADS == 2, "SQUADS must be 1 or 2 (a partition each)")
        start_m = ml.program_id(0)
        bh = ml.program_id(1)
        b = bh // heads
        h = bh % heads
        SQUAD_M: ml.constexpr = BLOCK_M // SQUADS
        q_desc, do_desc = pair_descs(Q, dO, b * s_qb + h * s_qh, seq_q, s_qm, SQUAD_M, HEAD_DIM)
        k_desc, v_desc = pair_descs(K, V, b * s_kb + (h // group) * s_kh, seq_k, s_kn, BLOCK_N,
                                    HEAD_DIM)
        q_s, do_s = pair_shared((SQUADS, SQUAD_M, HEAD_DIM), q_desc.dtype, 64)
        k_s, v_s = pair_shared((STAGES, BLOCK_N, HEAD_DIM), q_desc.dtype, 64)
        ds_s = ph.alloc_shared((SQUADS, SQUAD_M, BLOCK_N), q_desc.dtype, swizzle=16)
        q_bar, full, empty = ring_barriers(STAGES, SQUADS)
        shift = seq_k - seq_q
        ring = (dq_producer, (q_desc, do_desc, k_desc, v_desc, q_s, do_s, k_s, v_s, q_bar,
                              full, empty, start_m, seq_k, shift, left, right, BLOCK_M,
                              BLOCK_N, STAGES, SQUADS, CAUSAL, WINDOW), 1)
        c = (q_s, do_s, k_s, v_s, ds_s, q_bar, full, empty, Stats, dQ, Slopes, b, h, heads,
             start_m, seq_q, seq_k, shift, left, right, sm_scale, softcap, per_head, plane,
             s_qb, s_qh, s_qm, s_ab, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, SQUADS, CAUSAL,
             WINDOW, SOFTCAP, ALIBI, SCORE_MOD, MASK_MOD, smod, sgrad, mmod)
        if SQUADS == 1:
            ph.warp_specialize([(dq_consumer, (0, c), 4), ring])
        else:
            ph.warp_specialize([(dq_consumer, (0, c), 4), (dq_consumer, (1, c), 4), ring])

    return attn_bwd_dkdv_ph_kernel, attn_bwd_dq_ph_kernel


# ---------------------------------------------------------------- host side
kernels_for = functools.cache(build_kernels)    # compiled once per triple of mods


def supports(a, do) -> bool:
    """Whether the explicit kernels take these checked arguments and output gradient:
    the forward's :func:`.attention_pinghu.supports` and a TME-aligned ``do``."""
    return fwd.supports(a) and fwd.tme_aligned(do)


def _config(bm, bn, stages, squads):
    return mutile.Config(dict(BLOCK_M=bm, BLOCK_N=bn, STAGES=stages, SQUADS=squads),
                         num_warps=4)


# the tuned configs, per pass: (BLOCK_M, BLOCK_N, STAGES, SQUADS); each squad a partition of
# its own with the keys (BLOCK_N) split over the squads in dK/dV and the queries (BLOCK_M) in
# dQ; three stages mostly, since a squad waits for the next stage while it holds its own
# (docs/templates.md compares them)
SPACES = {"dkdv": ((32, 128, 3, 2), (32, 64, 3, 1), (64, 64, 3, 1), (32, 128, 2, 2)),
          "dq": ((128, 64, 3, 2), (64, 64, 3, 1), (128, 32, 3, 2), (64, 32, 3, 1))}


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


def stats(a, o, do, lse):
    """The pre-pass (:func:`attn_bwd_stats_kernel`) on checked arguments ``a``, the
    forward's ``o`` and ``lse`` and the output gradient ``do``: a ``[2, batch * heads,
    rows]`` f32 array (``rows`` = ``seq_q`` rounded up to :data:`STAT_PAD`) of
    -log2(e) lse and Delta per query row."""
    per_head = mutile.cdiv(a.seq_q, STAT_PAD) * STAT_PAD
    out = np.empty((2, a.batch * a.heads, per_head), np.float32)
    if do.strides != o.strides:                 # one set of strides for both
        o, do = np.ascontiguousarray(o), np.ascontiguousarray(do)
    ob, oh, om, _ = (s // o.itemsize for s in o.strides)
    lse = np.asarray(lse, np.float32)
    lb, lh, _ = (s // 4 for s in lse.strides)
    attn_bwd_stats_kernel[(per_head // STAT_BLOCK, a.heads, a.batch)](
        o, do, lse, out, a.seq_q, ob, oh, om, lb, lh, HEAD_DIM=a.head_dim, BLOCK=STAT_BLOCK,
        backend="pinghu")
    return out


def _launches(a, do, st, out):
    """{pass: (grid of a config, the kernel's arguments)} and the constexpr flags, with
    the pre-pass's statistics ``st``."""
    dq, dk, dv = out
    f = a.flags()
    qb, qh, qm, _ = (s // a.q.itemsize for s in a.q.strides)
    kb, kh, kn, _ = (s // a.k.itemsize for s in a.k.strides)
    group = a.heads // a.kv_heads
    tail = (a.sm_scale, a.softcap, a.window[0], a.window[1], st.shape[2],
            st.shape[1] * st.shape[2], qb, qh, qm, kb, kh, kn, a.slopes_batch_stride)
    kw = dict(HEAD_DIM=a.head_dim, backend="pinghu",
              **{n: f[n] for n in FLAGS if n != "HEAD_DIM"})
    return {"dkdv": (lambda meta: (mutile.cdiv(a.seq_k, meta["BLOCK_N"]), a.batch * a.kv_heads),
                     (a.q, a.k, a.v, do, st, dk, dv, a.slopes, a.seq_q, a.seq_k, a.kv_heads,
                      group, *tail)),
            "dq": (lambda meta: (mutile.cdiv(a.seq_q, meta["BLOCK_M"]), a.batch * a.heads),
                   (a.q, a.k, a.v, do, st, dq, a.slopes, a.seq_q, a.seq_k, a.heads, group,
                    *tail))}, kw


def run(a, do, o, lse, out, score_grad=None):
    """The pre-pass (:func:`stats`) and both explicit passes on checked arguments ``a``
    (``do``, the forward's ``o`` and ``lse``; ``score_grad`` the score_mod's derivative),
    writing ``out = (dq, dk, dv)``, each pass with its autotuner's choice
    (:func:`tuner_for`)."""
    passes, kw = _launches(a, do, stats(a, o, do, lse), out)
    for name, tuner in zip(PASSES, tuner_for(a.score_mod, score_grad, a.mask_mod)):
        grid, args = passes[name]
        tuner[grid](*args, **kw)


def run_pass(a, do, st, out, name, config, score_grad=None):
    """Launch one pass (``"dkdv"`` or ``"dq"``) on the statistics ``st`` (:func:`stats`)
    with one ``config`` (a dict of BLOCK_M, BLOCK_N, STAGES and SQUADS) instead of the
    tuner's choice."""
    if name not in PASSES or set(config) != fwd.CONFIG_KEYS:
        raise ValueError(f"a pass is 'dkdv' or 'dq' and a config gives BLOCK_M, BLOCK_N, "
                         f"STAGES and SQUADS, got {name!r} and {sorted(config)}")
    passes, kw = _launches(a, do, st, out)
    grid, args = passes[name]
    kernel = kernels_for(a.score_mod, score_grad, a.mask_mod)[PASSES.index(name)]
    kernel[grid(config)](*args, **kw, **config, num_warps=4)
