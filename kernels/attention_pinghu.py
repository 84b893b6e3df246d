"""FlashAttention forward, explicitly on Pinghu's engines (``mutile.language.pinghu``).

The structure of FlashAttention-3 on Pinghu's vocabulary. A *work item* is ``BLOCK_M``
query rows of one (batch, head), ``BLOCK_M / SQUADS`` per consumer WarpSquad. The grid is
**persistent**: as many programs as the MPs hold at once (:func:`programs`), each taking
its share of the items (:func:`work_item`: longest first, dealt in a snake, so that
under causal masking every program's total stays near the mean, where one program per
item left the last waves' MPs idle). A program's warps are split
(``ph.warp_specialize``) into

- one **producer warp**: per item, TME-loads its Q rows (a box per squad) into one of
  two Q buffers (on that buffer's ``q_bar`` barrier, once the squads freed it on
  ``q_free``) and then, for every key block the item can see (causal and window limits
  come from :func:`kernels.attention.kv_bounds`), waits until a stage of the K/V ring is
  empty and TME-loads that block's K and V boxes into it, counting their bytes on the
  stage's ``full`` barrier; the ring and its phases run on from item to item;
- ``SQUADS`` **consumer WarpSquads**, each a partition of its own (so each runs its own
  instruction stream: while one squad is in its softmax, another's SQMMAs run, FA3's
  "ping-pong"): per key block, ``S = Q K^T`` by SQMMA into f32 registers, the scores
  through the same mods and masks as the portable kernel (``raw_scores``' steps 2-3,
  ``score_mod``, :func:`kernels.attention.visible`), the online softmax in base 2, ``P``
  cast to q's dtype and stored to the squad's shared ``p_s``, then ``O += P V`` by SQMMA
  from ``p_s`` and the V stage, with the next block's ``S`` issued behind it. After its
  last SQMMA on a stage a squad arrives on the stage's ``empty`` barrier (which counts
  every consumer warp).

The epilogue divides by the row sums, stages O in the squad's Q buffer (its last SQMMA
has read Q), TME-stores it (rows past ``seq_q`` are dropped), stores the natural-log lse
with a pointer store (a row that sees no key gives 0 and -inf, as the portable kernel)
and, once the store has read the buffer, frees it for the item after next. Q/K/V boxes
past the sequence read zeros (TME's out-of-bounds fill), and their keys are masked by
``j < seq_k``.

``run(a, out, lse)`` launches it on checked :class:`AttnArgs`; :func:`supports` says
whether it takes them (``kernels.attention.run_forward`` asks it on ``backend="pinghu"``).
"""
import functools

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph

from .attention_parts import LOG2E, kv_bounds, no_mask_mod, no_score_mod, visible
from .gemm_common import _cores, shared_limit

SQUAD_ROWS = 64                   # query rows per consumer WarpSquad (SQMMA M 64)


@mutile.jit
def item_count(pid, nprog, total):
    """How many of the ``total`` work items program ``pid`` of ``nprog`` takes in the
    snake order of :func:`work_item`: one per full round, and one of the last, partial
    round (taken forward on even rounds, backward on odd ones)."""
    rounds = total // nprog
    rem = total % nprog
    last = ml.where(rounds % 2 == 0, pid < rem, pid >= nprog - rem)
    return rounds + ml.where(last, 1, 0)


@mutile.jit
def work_item(t, pid, nprog, n_bh, nm):
    """The ``t``-th work item of program ``pid``: (batch * heads index, query block).
    Items are ranked longest first (the last query blocks first: under causal masking
    they see the most keys) and dealt to the programs in a snake, forward on even rounds
    and backward on odd ones, so each program's total stays close to the mean."""
    r = t * nprog + ml.where(t % 2 == 0, pid, nprog - 1 - pid)
    return r % n_bh, nm - 1 - r // n_bh


@mutile.jit
def key_blocks(start_m, seq_k, shift, left, right, BLOCK_M: ml.constexpr,
               BLOCK_N: ml.constexpr, CAUSAL: ml.constexpr, WINDOW: ml.constexpr):
    """(first key, number of key blocks) query block ``start_m`` sees: what the producer
    loads and the squads consume, one definition for both sides of the ring."""
    lo, hi = kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    return lo, ml.cdiv(ml.maximum(hi - lo, 0), BLOCK_N)


@mutile.jit
def producer(Q, K, V, q_s, k_s, v_s, q_bar, q_free, full, empty, seq_q, seq_k, heads, group,
             shift, left, right, n_bh, s_qb, s_qh, s_qm, s_kb, s_kh, s_kn,
             HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr,
             STAGES: ml.constexpr, SQUADS: ml.constexpr, CAUSAL: ml.constexpr,
             WINDOW: ml.constexpr):
    """One warp, for each of this program's work items: its Q rows into one of two
    buffers (item ``t`` uses buffer ``t % 2``, once the squads have stored item ``t - 2``'s
    O from it), then the K and V boxes of its visible key blocks (causal and window
    limits from :func:`kernels.attention.kv_bounds`) into the ring, which runs on across
    items."""
    pid = ml.program_id(0)
    nprog = ml.num_programs(0)
    nm = ml.cdiv(seq_q, BLOCK_M)
    SQUAD_M: ml.constexpr = BLOCK_M // SQUADS
    it0 = 0
    for t in range(item_count(pid, nprog, n_bh * nm)):
        bh, start_m = work_item(t, pid, nprog, n_bh, nm)
        b = bh // heads
        h = bh % heads
        hk = h // group
        q_desc = ml.make_tensor_descriptor(Q + b * s_qb + h * s_qh, shape=[seq_q, HEAD_DIM],
                                           strides=[s_qm, 1], block_shape=[SQUAD_M, HEAD_DIM])
        k_desc = ml.make_tensor_descriptor(K + b * s_kb + hk * s_kh, shape=[seq_k, HEAD_DIM],
                                           strides=[s_kn, 1], block_shape=[BLOCK_N, HEAD_DIM])
        v_desc = ml.make_tensor_descriptor(V + b * s_kb + hk * s_kh, shape=[seq_k, HEAD_DIM],
                                           strides=[s_kn, 1], block_shape=[BLOCK_N, HEAD_DIM])
        lo, n = key_blocks(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL,
                           WINDOW)
        buf = t % 2
        ph.barrier_wait(q_free[buf], ((t // 2) & 1) ^ 1)
        ph.barrier_expect_tx(q_bar[buf], BLOCK_M * HEAD_DIM * q_s.dtype.itemsize)
        for i in ml.static_range(0, SQUADS):
            ph.tme_load(q_desc, [start_m * BLOCK_M + i * SQUAD_M, 0], q_s[buf * SQUADS + i],
                        q_bar[buf])
        load_ring(k_desc, v_desc, k_s, v_s, full, empty, lo, BLOCK_N, n, it0, STAGES)
        it0 += n


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
def kv_loop(q, k_s, v_s, p_buf, full, empty, acc, m_i, l_i, j0, j1, it0, lo, rows, offs_n,
            sm_scale, softcap, slope, b, h, seq_k, shift, left, right, BLOCK_N: ml.constexpr,
            STAGES: ml.constexpr, CAUSAL: ml.constexpr, WINDOW: ml.constexpr,
            SOFTCAP: ml.constexpr, ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr,
            MASK_MOD: ml.constexpr, MASKED: ml.constexpr, score_mod, mask_mod):
    """Key blocks ``j0 <= j < j1`` of the item (ring step ``it0 + j``): ``S = Q K^T``,
    the scores (masked only with ``MASKED``), the online softmax, ``O += P V``; (acc,
    m_i, l_i) after them. The next block's ``S = Q K^T`` is issued right behind this
    block's ``O += P V`` and one wait covers both, so a squad pays one SQMMA latency per
    block, not two. (The last block issues it again on its own keys, whose stage it still
    holds: one redundant ``Q K^T`` per call that runs a block, instead of a branch in the
    loop: an SQMMA result carried out of an ``if`` inside the loop spills.)"""
    s_raw = ml.zeros([q.shape[0], BLOCK_N], ml.float32)
    st = (it0 + j0) % STAGES            # the stage and phase carried, not divided out
    par = ((it0 + j0) // STAGES) & 1
    if j0 < j1:
        ph.barrier_wait(full[st], par)
        s_raw = ph.sqmma_wait(ph.sqmma(q, k_s[st], trans_b=True))
    for j in range(j0, j1):
        s = scores(s_raw, sm_scale, softcap, slope, b, h, rows, lo + j * BLOCK_N + offs_n,
                   seq_k, shift, left, right, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                   MASK_MOD, MASKED, score_mod, mask_mod)
        p, alpha, m_i, l_i = softmax_step(s, m_i, l_i)
        p_buf.store(p)
        ph.fence_shared()
        ph.sync_warps()
        acc = acc * alpha[:, None]
        acc = ph.sqmma(p_buf, v_s[st], acc)
        wrap = st + 1 == STAGES
        last = j + 1 == j1
        nx = ml.where(last, st, ml.where(wrap, 0, st + 1))
        npar = ml.where(wrap & (j + 1 < j1), par ^ 1, par)
        ph.barrier_wait(full[nx], npar)
        s_raw = ph.sqmma(q, k_s[nx], trans_b=True)
        acc, s_raw = ph.sqmma_wait(acc, s_raw)
        ph.barrier_arrive(empty[st])
        st = nx
        par = npar
    return acc, m_i, l_i


@mutile.jit
def consumer(q_s, p_s, k_s, v_s, q_bar, q_free, full, empty, Out, Lse, Slopes, squad,
             seq_q, seq_k, heads, shift, left, right, n_bh, sm_scale, softcap, s_ob, s_oh,
             s_om, s_lb, s_lh, s_ab, HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr,
             BLOCK_N: ml.constexpr, STAGES: ml.constexpr, SQUADS: ml.constexpr,
             CAUSAL: ml.constexpr, WINDOW: ml.constexpr, SOFTCAP: ml.constexpr,
             ALIBI: ml.constexpr, SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr,
             score_mod, mask_mod):
    """One WarpSquad, for each of this program's work items: its ``SQUAD_M`` query rows
    (the ``squad``-th of the item's ``BLOCK_M``) against every key block the item sees,
    then the epilogue (see the module doc), after which Q's buffer is free again."""
    SQUAD_M: ml.constexpr = BLOCK_M // SQUADS
    pid = ml.program_id(0)
    nprog = ml.num_programs(0)
    nm = ml.cdiv(seq_q, BLOCK_M)
    offs_n = ml.arange(0, BLOCK_N)
    it0 = 0
    for t in range(item_count(pid, nprog, n_bh * nm)):
        bh, start_m = work_item(t, pid, nprog, n_bh, nm)
        b = bh // heads
        h = bh % heads
        row0 = start_m * BLOCK_M + squad * SQUAD_M
        rows = row0 + ml.arange(0, SQUAD_M)
        slope = 0.0
        if ALIBI:
            slope = ml.load(Slopes + b * s_ab + h)
        lo, n = key_blocks(start_m, seq_k, shift, left, right, BLOCK_M, BLOCK_N, CAUSAL,
                           WINDOW)
        m_i = ml.full([SQUAD_M], -float("inf"), ml.float32)
        l_i = ml.zeros([SQUAD_M], ml.float32)
        acc = ml.zeros([SQUAD_M, HEAD_DIM], ml.float32)
        buf = t % 2
        q = q_s[buf * SQUADS + squad]
        ph.barrier_wait(q_bar[buf], (t // 2) & 1)
        n_full = unmasked_blocks(start_m, lo, n, seq_k, shift, BLOCK_M, BLOCK_N, CAUSAL,
                                 WINDOW, MASK_MOD)
        acc, m_i, l_i = kv_loop(q, k_s, v_s, p_s, full, empty, acc, m_i, l_i, 0, n_full,
                                it0, lo, rows, offs_n, sm_scale, softcap, slope, b, h, seq_k,
                                shift, left, right, BLOCK_N, STAGES, CAUSAL, WINDOW, SOFTCAP,
                                ALIBI, SCORE_MOD, MASK_MOD, False, score_mod, mask_mod)
        acc, m_i, l_i = kv_loop(q, k_s, v_s, p_s, full, empty, acc, m_i, l_i, n_full, n,
                                it0, lo, rows, offs_n, sm_scale, softcap, slope, b, h, seq_k,
                                shift, left, right, BLOCK_N, STAGES, CAUSAL, WINDOW, SOFTCAP,
                                ALIBI, SCORE_MOD, MASK_MOD, True, score_mod, mask_mod)
        it0 += n
        out = acc / ml.where(l_i == 0.0, 1.0, l_i)[:, None]
        q.store(out.to(q.dtype))        # the last SQMMA has read Q: its buffer stages O
        ph.fence_shared()
        o_desc = ml.make_tensor_descriptor(Out + b * s_ob + h * s_oh, shape=[seq_q, HEAD_DIM],
                                           strides=[s_om, 1], block_shape=[SQUAD_M, HEAD_DIM])
        ph.tme_store(o_desc, [row0, 0], q)
        lse = ml.where(l_i == 0.0, -float("inf"), (m_i + ml.log2(l_i)) / LOG2E)
        ml.store(Lse + b * s_lb + h * s_lh + rows, lse, mask=rows < seq_q)
        ph.tme_store_wait()
        ph.barrier_arrive(q_free[buf])


def build_kernel(score_mod, mask_mod):
    """The explicit forward with ``score_mod`` and ``mask_mod`` inlined (a closure, as
    :func:`kernels.attention.build_forward`)."""
    smod = no_score_mod if score_mod is None else score_mod
    mmod = no_mask_mod if mask_mod is None else mask_mod

    @mutile.jit
    def attn_fwd_ph_kernel(Q, K, V, Out, Lse, Slopes, seq_q, seq_k, heads, group, n_bh,
                           sm_scale, softcap, left, right, s_qb, s_qh, s_qm, s_kb, s_kh, s_kn,
                           s_ob, s_oh, s_om, s_lb, s_lh, s_ab,
                           HEAD_DIM: ml.constexpr, BLOCK_M: ml.constexpr,
                           BLOCK_N: ml.constexpr, STAGES: ml.constexpr, SQUADS: ml.constexpr,
                           CAUSAL: ml.constexpr,
                           WINDOW: ml.constexpr, SOFTCAP: ml.constexpr, ALIBI: ml.constexpr,
                           SCORE_MOD: ml.constexpr, MASK_MOD: ml.constexpr):
        """Persistent: a 1-D grid of programs, each taking its share of the ``n_bh *
        cdiv(seq_q, BLOCK_M)`` work items (:func:`work_item`); 4 * SQUADS + 1 warps."""
        SQUAD_M: ml.constexpr = BLOCK_M // SQUADS
        shift = seq_k - seq_q
        dt = Q.dtype.element_ty
        q_s = ph.alloc_shared((2 * SQUADS, SQUAD_M, HEAD_DIM), dt, swizzle=64)
        k_s = ph.alloc_shared((STAGES, BLOCK_N, HEAD_DIM), dt, swizzle=64)
        v_s = ph.alloc_shared((STAGES, BLOCK_N, HEAD_DIM), dt, swizzle=64)
        p_s = ph.alloc_shared((SQUADS, SQUAD_M, BLOCK_N), dt, swizzle=16)
        q_bar = ph.alloc_barriers(2, arrive_warps=1)
        q_free = ph.alloc_barriers(2, arrive_warps=4 * SQUADS)
        full = ph.alloc_barriers(STAGES, arrive_warps=1)
        empty = ph.alloc_barriers(STAGES, arrive_warps=4 * SQUADS)
        ring = (producer, (Q, K, V, q_s, k_s, v_s, q_bar, q_free, full, empty, seq_q, seq_k,
                           heads, group, shift, left, right, n_bh, s_qb, s_qh, s_qm, s_kb,
                           s_kh, s_kn, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, SQUADS, CAUSAL,
                           WINDOW), 1)
        first = (consumer, (q_s, p_s[0], k_s, v_s, q_bar, q_free, full, empty, Out, Lse,
                            Slopes, 0, seq_q, seq_k, heads, shift, left, right, n_bh, sm_scale,
                            softcap, s_ob, s_oh, s_om, s_lb, s_lh, s_ab, HEAD_DIM, BLOCK_M,
                            BLOCK_N, STAGES, SQUADS, CAUSAL, WINDOW, SOFTCAP, ALIBI, SCORE_MOD,
                            MASK_MOD, smod, mmod), 4)
        if SQUADS == 1:
            ph.warp_specialize([first, ring])
        else:      # one partition per squad: their softmax and SQMMAs interleave
            ph.warp_specialize([first, (consumer, (
                q_s, p_s[1], k_s, v_s, q_bar, q_free, full, empty, Out, Lse, Slopes, 1,
                seq_q, seq_k, heads, shift, left, right, n_bh, sm_scale, softcap, s_ob, s_oh,
                s_om, s_lb, s_lh, s_ab, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, SQUADS, CAUSAL,
                WINDOW, SOFTCAP, ALIBI, SCORE_MOD, MASK_MOD, smod, mmod), 4), ring])

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
    docs/templates.md compares them). Three stages mostly: the squad waits for block
    ``j + 1``'s keys while block ``j``'s stage is still held (:func:`kv_loop`), so with two
    stages each copy has only one block's softmax to arrive in; 256 x 32 with three
    stages fills the 192 KiB of shared memory at head dim 128 (Q is double-buffered)."""
    return [mutile.Config(dict(BLOCK_M=bm, BLOCK_N=bn, STAGES=stages, SQUADS=squads),
                          num_warps=4)
            for bm, bn, stages, squads in ((128, 64, 3, 1), (128, 32, 3, 1), (256, 32, 3, 2),
                                           (256, 32, 2, 2))]


def shared_bytes(kw: dict, head_dim: int) -> int:
    """Shared memory of one config at 2-byte elements: Q's two buffers, the K/V ring and
    P."""
    bm, bn = kw["BLOCK_M"], kw["BLOCK_N"]
    return 2 * (2 * bm * head_dim + 2 * kw["STAGES"] * bn * head_dim + bm * bn)


def programs(items: int, kw: dict, head_dim: int) -> int:
    """The persistent grid: as many programs as the machine holds at once (``mp_count``
    times the blocks an MP holds: its shared memory over the config's, and at most two
    consumer squads an MP, whose registers fill the register file), at most one per work
    item."""
    from mutile import machines
    shared = int(machines.current().value("device", "shared_per_mp"))
    per_mp = max(1, min(shared // shared_bytes(kw, head_dim), 2 // kw["SQUADS"]))
    return max(1, min(items, _cores("pinghu", {}) * per_mp))


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
            a.heads // a.kv_heads, a.batch * a.heads, a.sm_scale, a.softcap, a.window[0],
            a.window[1], qb, qh, qm, kb, kh, kn, ob, oh, om, lb, lh, a.slopes_batch_stride)
    kw = dict(HEAD_DIM=a.head_dim, CAUSAL=f["CAUSAL"], WINDOW=f["WINDOW"], SOFTCAP=f["SOFTCAP"],
              ALIBI=f["ALIBI"], SCORE_MOD=f["SCORE_MOD"], MASK_MOD=f["MASK_MOD"],
              backend="pinghu")

    def grid(meta):
        return (programs(a.batch * a.heads * mutile.cdiv(a.seq_q, meta["BLOCK_M"]), meta,
                         a.head_dim),)
    if config is None:
        tuner_for(a.score_mod, a.mask_mod)[grid](*args, **kw)
        return
    if set(config) != CONFIG_KEYS:
        raise ValueError(f"config must give BLOCK_M, BLOCK_N, STAGES and SQUADS, got "
                         f"{sorted(config)}")
    if config["STAGES"] < 2:
        raise ValueError(f"STAGES must be at least 2 (a squad waits for the next block's "
                         f"keys while it holds this block's stage), got {config['STAGES']}")
    kernel_for(a.score_mod, a.mask_mod)[grid(config)](*args, **kw, **config,
                                                      num_warps=4)
