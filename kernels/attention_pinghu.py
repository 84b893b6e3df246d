"""FlashAttention forward, explicitly on Pinghu's engines (``mutile.language.pinghu``).

The structure of FlashAttention-3 on Pinghu's vocabulary. One program owns
``BLOCK_M`` query rows of one (batch, head), ``BLOCK_M / SQUADS`` per consumer WarpSquad;
its warps are split (``ph.warp_specialize``) into

- one **producer warp**: TME-loads the program's Q rows once (a box per squad, on the
  ``q_bar`` barrier) and then, for every key block the program can see (causal and
  window limits come from :func:`kernels.attention.kv_bounds`), waits until a stage of the
  K/V ring is empty and TME-loads that block's K and V boxes into it, counting their bytes
  on the stage's ``full`` barrier;
- ``SQUADS`` **consumer WarpSquads**, each a partition of its own (so each runs its own
  instruction stream: while one squad is in its softmax, another's SQMMAs run, FA3's
  "ping-pong"): per key block, ``S = Q K^T`` by SQMMA into f32 registers, the scores
  through the same mods and masks as the portable kernel (``raw_scores``' steps 2-3,
  ``score_mod``, :func:`kernels.attention.visible`), the online softmax in base 2, ``P``
  cast to q's dtype and stored to the squad's shared ``p_s``, then ``O += P V`` by SQMMA
  from ``p_s`` and the V stage. After its last SQMMA on a stage a squad arrives on the stage's
  ``empty`` barrier (which counts every consumer warp).

The epilogue divides by the row sums, stages O in the squad's Q buffer (its last SQMMA
has read Q) and TME-stores it (rows past ``seq_q`` are dropped), and stores the
natural-log lse with a pointer store (a row that sees no key gives 0 and -inf, as the
portable kernel). Q/K/V boxes past the sequence read zeros (TME's out-of-bounds fill),
and their keys are masked by ``j < seq_k``.

``run(a, out, lse)`` launches it on checked :class:`AttnArgs`; :func:`supports` says
whether it takes them (``kernels.attention.run_forward`` asks it on ``backend="pinghu"``).
"""
import functools

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph

from .attention_parts import LOG2E, kv_bounds, no_mask_mod, no_score_mod, visible
from .gemm_common import shared_limit

SQUAD_ROWS = 64                   # query rows per consumer WarpSquad (SQMMA M 64)


@mutile.jit
def producer(q_desc, k_desc, v_desc, q_s, k_s, v_s, q_bar, full, empty, start_m, seq_k,
             shift, left, right, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
             STAGES: ml.constexpr, CAUSAL: ml.constexpr,
             WINDOW: ml.constexpr):
    """One warp: Q once, then the K and V boxes of every visible key block, ``STAGES``
    blocks ahead of the consumers."""
    ph.barrier_expect_tx(q_bar, BLOCK_M * q_s.shape[2] * q_s.dtype.itemsize)
    for i in ml.static_range(0, q_s.shape[0]):
        ph.tme_load(q_desc, [start_m * BLOCK_M + i * q_s.shape[1], 0], q_s[i], q_bar)
    lo, hi = kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    load_ring(k_desc, v_desc, k_s, v_s, full, empty, lo, BLOCK_N, ml.cdiv(hi - lo, BLOCK_N),
              0, STAGES)


@mutile.jit
def load_pair(a_desc, b_desc, a_s, b_s, bar, row):
    """Announce two boxes' bytes on ``bar`` and TME-load the boxes at ``[row, 0]`` of two
    descriptors into ``a_s`` and ``b_s``."""
    ph.barrier_expect_tx(bar, (a_s.shape[0] * a_s.shape[1] + b_s.shape[0] * b_s.shape[1])
                         * a_s.dtype.itemsize)
    ph.tme_load(a_desc, [row, 0], a_s, bar)
    ph.tme_load(b_desc, [row, 0], b_s, bar)


@mutile.jit
def load_ring(a_desc, b_desc, a_s, b_s, full, empty, start, step, n, it0,
              STAGES: ml.constexpr):
    """The producer's ring: boxes ``[start + j * step, 0]`` (``j < n``) of two descriptors
    into stage ``(it0 + j) % STAGES`` of ``a_s``/``b_s``, each once its consumers released
    it (``it0``: the ring steps already taken)."""
    for j in range(n):
        it = it0 + j
        s = it % STAGES
        ph.barrier_wait(empty[s], ((it // STAGES) & 1) ^ 1)
        load_pair(a_desc, b_desc, a_s[s], b_s[s], full[s], start + j * step)


@mutile.jit
def scores(s, sm_scale, softcap, slope, b, h, rows, cols, seq_k, shift, left, right,
           CAUSAL: ml.constexpr, WINDOW: ml.constexpr, SOFTCAP: ml.constexpr,
           ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr,
           MASKED: ml.constexpr, score_mod, mask_mod):
    """The portable kernel's score pipeline after the dot (``raw_scores`` steps 2-3,
    ``score_mod``, ``visible``), in base 2: ``log2(e) * score``, -inf where masked (only
    with ``MASKED``: a block every pair of which is visible skips the mask)."""
    if SOFTCAP or ALIBI or SCORE_MOD:
        s = s * sm_scale
        if SOFTCAP:
            s = softcap * ml.math.tanh(s / softcap)
        if ALIBI:
            dist = (rows[:, None] + shift - cols[None, :]).to(ml.float32)
            s = s - slope * ml.abs(dist)
        if SCORE_MOD:
            s = score_mod(s, b, h, rows[:, None], cols[None, :])
        s = s * LOG2E
    else:
        s = s * (sm_scale * LOG2E)
    if MASKED:
        keep = visible(b, h, rows[:, None], cols[None, :], seq_k, shift, left, right,
                       CAUSAL, WINDOW, MASK_MOD, mask_mod)
        s = ml.where(keep, s, -float("inf"))
    return s


@mutile.jit
def unmasked_blocks(start_m, lo, n, seq_k, shift, BLOCK_M: ml.constexpr,
                    BLOCK_N: ml.constexpr, CAUSAL: ml.constexpr, WINDOW: ml.constexpr,
                    MASK_MOD: ml.constexpr):
    """How many of the ``n`` key blocks from ``lo`` every query row of the block sees
    whole: they lie below ``seq_k`` and, under causal masking, at or left of the first
    row's diagonal (with a window or a mask_mod every block is masked)."""
    limit = seq_k
    if CAUSAL:
        limit = ml.minimum(seq_k, start_m * BLOCK_M + shift + 1)
    full = ml.maximum(limit - lo, 0) // BLOCK_N
    if WINDOW or MASK_MOD:
        full = 0
    return ml.minimum(full, n)


@mutile.jit
def softmax_step(s, m_i, l_i):
    """The online softmax of one block of base-2 scores: (p, alpha, m_new, l_new)."""
    m_new = ml.maximum(m_i, ml.max(s, axis=1))
    m_safe = ml.where(m_new == -float("inf"), 0.0, m_new)
    p = ml.exp2(s - m_safe[:, None])
    alpha = ml.exp2(m_i - m_safe)
    return p, alpha, m_new, l_i * alpha + ml.sum(p, axis=1)


@mutile.jit
def kv_loop(q, k_s, v_s, p_buf, full, empty, acc, m_i, l_i, j0, j1, lo, rows, offs_n,
            sm_scale, softcap, slope, b, h, seq_k, shift, left, right, BLOCK_N: ml.constexpr,
            STAGES: ml.constexpr, CAUSAL: ml.constexpr, WINDOW: ml.constexpr,
            SOFTCAP: ml.constexpr, ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr,
            MASK_MOD: ml.constexpr, MASKED: ml.constexpr, score_mod, mask_mod):
    """Key blocks ``j0 <= j < j1`` of the ring: ``S = Q K^T``, the scores (masked only
    with ``MASKED``), the online softmax, ``O += P V``; (acc, m_i, l_i) after them.
    The next block's ``S = Q K^T`` is issued right behind this block's ``O += P V`` and
    one wait covers both, so a squad pays one SQMMA latency per block, not two. (The
    last block issues it again on its own keys, whose stage it still holds: one
    redundant ``Q K^T`` per call that runs a block, instead of a branch in the loop: an
    SQMMA result carried out of an ``if`` inside the loop spills.)"""
    s_raw = ml.zeros([q.shape[0], BLOCK_N], ml.float32)
    if j0 < j1:
        st = j0 % STAGES
        ph.barrier_wait(full[st], (j0 // STAGES) & 1)
        s_raw = ph.sqmma_wait(ph.sqmma(q, k_s[st], trans_b=True))
    for j in range(j0, j1):
        st = j % STAGES
        s = scores(s_raw, sm_scale, softcap, slope, b, h, rows, lo + j * BLOCK_N + offs_n,
                   seq_k, shift, left, right, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                   MASK_MOD, MASKED, score_mod, mask_mod)
        p, alpha, m_i, l_i = softmax_step(s, m_i, l_i)
        p_buf.store(p)
        ph.fence_shared()
        ph.sync_warps()
        acc = acc * alpha[:, None]
        acc = ph.sqmma(p_buf, v_s[st], acc)
        jn = ml.where(j + 1 < j1, j + 1, j)
        nx = jn % STAGES
        ph.barrier_wait(full[nx], (jn // STAGES) & 1)
        s_raw = ph.sqmma(q, k_s[nx], trans_b=True)
        acc, s_raw = ph.sqmma_wait(acc, s_raw)
        ph.barrier_arrive(empty[st])
    return acc, m_i, l_i


@mutile.jit
def consumer(q_s, k_s, v_s, p_s, q_bar, full, empty, o_desc, Lse, Slopes, b, h, bq,
             start_m, row0, seq_q, seq_k, shift, left, right, sm_scale, softcap, s_lb, s_lh,
             s_ab, HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
             STAGES: ml.constexpr, SQUAD_M: ml.constexpr, CAUSAL: ml.constexpr,
             WINDOW: ml.constexpr, SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
             SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr, score_mod, mask_mod):
    """One WarpSquad: its ``SQUAD_M`` query rows from ``row0`` (of the program's
    ``BLOCK_M``) against every key block the program sees, then the epilogue (see the
    module doc)."""
    rows = row0 + ml.arange(0, SQUAD_M)
    offs_n = ml.arange(0, BLOCK_N)
    slope = 0.0
    if ALIBI:
        slope = ml.load(Slopes + b * s_ab + h)
    lo, hi = kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    n = ml.cdiv(hi - lo, BLOCK_N)
    m_i = ml.full([SQUAD_M], -float("inf"), ml.float32)
    l_i = ml.zeros([SQUAD_M], ml.float32)
    acc = ml.zeros([SQUAD_M, HEAD_DIM], ml.float32)
    q = q_s
    p_buf = p_s
    ph.barrier_wait(q_bar, 0)
    n_full = unmasked_blocks(start_m, lo, n, seq_k, shift, BLOCK_M, BLOCK_N, CAUSAL, WINDOW,
                             MASK_MOD)
    acc, m_i, l_i = kv_loop(q, k_s, v_s, p_buf, full, empty, acc, m_i, l_i, 0, n_full, lo,
                            rows, offs_n, sm_scale, softcap, slope, b, h, seq_k, shift, left,
                            right, BLOCK_N, STAGES, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                            MASK_MOD, False, score_mod, mask_mod)
    acc, m_i, l_i = kv_loop(q, k_s, v_s, p_buf, full, empty, acc, m_i, l_i, n_full, n, lo,
                            rows, offs_n, sm_scale, softcap, slope, b, h, seq_k, shift, left,
                            right, BLOCK_N, STAGES, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                            MASK_MOD, True, score_mod, mask_mod)
    out = acc / ml.where(l_i == 0.0, 1.0, l_i)[:, None]
    q_s.store(out.to(q_s.dtype))        # the last SQMMA has read Q: its buffer stages O
    ph.fence_shared()
    ph.tme_store(o_desc, [row0, 0], q_s)
    ok = rows < seq_q
    lse = ml.where(l_i == 0.0, -float("inf"), (m_i + ml.log2(l_i)) / LOG2E)
    ml.store(Lse + bq * s_lb + h * s_lh + rows, lse, mask=ok)
    ph.tme_store_wait()


def build_kernel(score_mod, mask_mod):
    """The explicit forward with ``score_mod`` and ``mask_mod`` inlined (a closure, as
    :func:`kernels.attention.build_forward`)."""
    smod = no_score_mod if score_mod is None else score_mod
    mmod = no_mask_mod if mask_mod is None else mask_mod

    @mutile.jit
    def attn_fwd_ph_kernel(Q, K, V, Out, Lse, Slopes, seq_q, seq_k, heads, group, sm_scale,
                           softcap, left, right, s_qb, s_qh, s_qm, s_kb, s_kh, s_kn,
                           s_ob, s_oh, s_om, s_lb, s_lh, s_ab,
                           HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr,
                           BLOCK_N: ml.constexpr, STAGES: ml.constexpr, SQUADS: ml.constexpr,
                           CAUSAL: ml.constexpr,
                           WINDOW: ml.constexpr, SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
                           SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr):
        """Grid (batch * heads, cdiv(seq_q, BLOCK_M)); 4 * SQUADS + 1 warps. Programs
        run the last query blocks first (under causal masking the longest: blocks of
        like length then share a wave, the longest-first order of FlashAttention-2)."""
        SQUAD_M: ml.constexpr = BLOCK_M // SQUADS
        bh = ml.program_id(0)
        start_m = ml.num_programs(1) - 1 - ml.program_id(1)
        b = bh // heads
        h = bh % heads
        hk = h // group
        shift = seq_k - seq_q
        q_desc = ml.make_tensor_descriptor(Q + b * s_qb + h * s_qh, shape=[seq_q, HEAD_DIM],
                                           strides=[s_qm, 1],
                                           block_shape=[SQUAD_M, HEAD_DIM])
        k_desc = ml.make_tensor_descriptor(K + b * s_kb + hk * s_kh, shape=[seq_k, HEAD_DIM],
                                           strides=[s_kn, 1], block_shape=[BLOCK_N, HEAD_DIM])
        v_desc = ml.make_tensor_descriptor(V + b * s_kb + hk * s_kh, shape=[seq_k, HEAD_DIM],
                                           strides=[s_kn, 1], block_shape=[BLOCK_N, HEAD_DIM])
        o_desc = ml.make_tensor_descriptor(Out + b * s_ob + h * s_oh, shape=[seq_q, HEAD_DIM],
                                           strides=[s_om, 1],
                                           block_shape=[SQUAD_M, HEAD_DIM])
        q_s = ph.alloc_shared((SQUADS, SQUAD_M, HEAD_DIM), q_desc.dtype, swizzle=64)
        k_s = ph.alloc_shared((STAGES, BLOCK_N, HEAD_DIM), q_desc.dtype, swizzle=64)
        v_s = ph.alloc_shared((STAGES, BLOCK_N, HEAD_DIM), q_desc.dtype, swizzle=64)
        p_s = ph.alloc_shared((SQUADS, SQUAD_M, BLOCK_N), q_desc.dtype, swizzle=16)
        q_bar = ph.alloc_barrier(arrive_warps=1)
        full = ph.alloc_barriers(STAGES, arrive_warps=1)
        empty = ph.alloc_barriers(STAGES, arrive_warps=4 * SQUADS)
        first = (consumer, (q_s[0], k_s, v_s, p_s[0], q_bar, full, empty, o_desc, Lse, Slopes,
                            b, h, b, start_m, start_m * BLOCK_M, seq_q, seq_k, shift, left,
                            right, sm_scale, softcap, s_lb, s_lh, s_ab, HEAD_DIM, BLOCK_M,
                            BLOCK_N, STAGES, SQUAD_M, CAUSAL, WINDOW, SOFTCAP, ALIBI,
                            SCORE_MOD, MASK_MOD, smod, mmod), 4)
        ring = (producer, (q_desc, k_desc, v_desc, q_s, k_s, v_s, q_bar, full, empty, start_m,
                           seq_k, shift, left, right, BLOCK_M, BLOCK_N, STAGES, CAUSAL,
                           WINDOW), 1)
        if SQUADS == 1:
            ph.warp_specialize([first, ring])
        else:      # one partition per squad: their softmax and SQMMAs interleave
            ph.warp_specialize([first, (consumer, (
                q_s[1], k_s, v_s, p_s[1], q_bar, full, empty, o_desc, Lse, Slopes, b, h, b,
                start_m, start_m * BLOCK_M + SQUAD_M, seq_q, seq_k, shift, left, right,
                sm_scale, softcap, s_lb, s_lh, s_ab, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                SQUAD_M, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD, MASK_MOD, smod, mmod), 4),
                ring])

    return attn_fwd_ph_kernel


# ---------------------------------------------------------------- host side
kernel_for = functools.cache(build_kernel)   # compiled once per pair of mods


def tme_aligned(x) -> bool:
    """TME's rules for one [B, H, S, D] array: 4-byte aligned base and strides, rows of
    at least 32 bytes with a contiguous inner dim."""
    base = x.__array_interface__["data"][0]
    return (base % 4 == 0 and all(s % 4 == 0 for s in x.strides[:3])
            and x.strides[3] == x.itemsize and x.shape[3] * x.itemsize >= 32)


def supports(a, out=None) -> bool:
    """Whether the explicit kernel takes these checked arguments (and output ``out``,
    when given): the pinghu backend (given or ``MUTILE_BACKEND``), fp16/bf16, head dim 64
    or 128, dense batches (no cu_seqlens), no block mask, TME-aligned arrays. Every
    other option (causal, window, softcap, alibi, score/mask mods, GQA) it supports."""
    from mutile.runtime.jit import default_backend
    if (a.backend or default_backend()) != "pinghu":
        return False
    return (a.q.dtype.itemsize == 2 and a.head_dim in (64, 128) and not a.varlen
            and a.block_mask is None and all(tme_aligned(x) for x in (a.q, a.k, a.v))
            and (out is None or tme_aligned(out)))


def _space() -> list:
    """The tuned configs: 128 query rows on one squad with 64- or 32-key blocks, or 256
    rows on two squads, one partition each (their softmax and SQMMAs interleave), with
    32-key blocks (64-key blocks do not fit two squads' registers: they spill;
    docs/templates.md compares them). Three or four stages: the squad waits for block
    ``j + 1``'s keys while block ``j``'s stage is still held (:func:`kv_loop`), so with two
    stages each copy has only one block's softmax to arrive in."""
    return [mutile.Config(dict(BLOCK_M=bm, BLOCK_N=bn, STAGES=stages, SQUADS=squads),
                          num_warps=4)
            for bm, bn, stages, squads in ((128, 64, 3, 1), (128, 32, 3, 1), (256, 32, 3, 2),
                                           (256, 32, 4, 2))]


def shared_bytes(kw: dict, head_dim: int) -> int:
    """Shared memory of one config at 2-byte elements: Q, the K/V ring and P."""
    bm, bn = kw["BLOCK_M"], kw["BLOCK_N"]
    return 2 * (bm * head_dim + 2 * kw["STAGES"] * bn * head_dim + bm * bn)


def prune(configs, nargs, **kwargs):
    """Configs that fit shared memory and whose blocks the sequences need (256 query rows
    only past 128 queries, 64-key blocks only past 32 keys)."""
    d = kwargs["HEAD_DIM"]
    keep = [c for c in configs if shared_bytes(c.kwargs, d) <= shared_limit()
            and c.kwargs["BLOCK_M"] <= max(128, mutile.next_power_of_2(nargs["seq_q"]))
            and c.kwargs["BLOCK_N"] <= max(32, mutile.next_power_of_2(nargs["seq_k"]))]
    return keep or list(configs)[:1]


CONFIG_KEYS = {"BLOCK_M", "BLOCK_N", "STAGES", "SQUADS"}     # what a config gives
KEY = ["seq_q", "seq_k", "heads", "group", "HEAD_DIM", "CAUSAL", "WINDOW", "SOFTCAP", "ALIBI",
       "SCORE_MOD", "MASK_MOD"]


@functools.cache
def tuner_for(score_mod, mask_mod):
    """The autotuned explicit kernel of a pair of mods (modelled time on pinghu)."""
    return mutile.autotune(configs=_space(), key=KEY,
                           prune_configs_by={"early_config_prune": prune})(
        kernel_for(score_mod, mask_mod))


def run(a, out, lse, config=None):
    """Launch the explicit kernel on checked arguments ``a``, writing ``out`` and ``lse``:
    with ``config`` (a dict of BLOCK_M, BLOCK_N, STAGES, SQUADS) that config, else the
    autotuner's choice for this shape (:func:`tuner_for`)."""
    f = a.flags()
    qb, qh, qm, _ = (s // a.q.itemsize for s in a.q.strides)
    kb, kh, kn, _ = (s // a.k.itemsize for s in a.k.strides)
    ob, oh, om, _ = (s // out.itemsize for s in out.strides)
    lb, lh, _ = (s // 4 for s in lse.strides)
    args = (a.q, a.k, a.v, out, lse, a.slopes, a.seq_q, a.seq_k, a.heads,
            a.heads // a.kv_heads, a.sm_scale, a.softcap, a.window[0], a.window[1],
            qb, qh, qm, kb, kh, kn, ob, oh, om, lb, lh, a.slopes_batch_stride)
    kw = dict(HEAD_DIM=a.head_dim, CAUSAL=f["CAUSAL"], WINDOW=f["WINDOW"], SOFTCAP=f["SOFTCAP"],
              ALIBI=f["ALIBI"], SCORE_MOD=f["SCORE_MOD"], MASK_MOD=f["MASK_MOD"],
              backend="pinghu")

    def grid(meta):
        return (a.batch * a.heads, mutile.cdiv(a.seq_q, meta["BLOCK_M"]))
    if config is None:
        tuner_for(a.score_mod, a.mask_mod)[grid](*args, **kw)
        return
    if set(config) != CONFIG_KEYS:
        raise ValueError(f"config must give BLOCK_M, BLOCK_N, STAGES and SQUADS, got "
                         f"{sorted(config)}")
    kernel_for(a.score_mod, a.mask_mod)[grid(config)](*args, **kw, **config,
                                                      num_warps=4)
