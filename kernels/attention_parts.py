"""The score pipeline's building blocks shared by every attention kernel (the portable
forward and backward of :mod:`.attention`/:mod:`.attention_bwd`, the explicit Pinghu
forward and backward of :mod:`.attention_pinghu`, :mod:`.attention_bwd_pinghu`): the identity
mods, the raw scores (steps 1-3 of :mod:`.attention`'s pipeline), the visibility mask
(step 5), varlen offsets, the key range a query block can see and the query range a key
block is seen by."""
import mutile
import mutile.language as ml

LOG2E = 1.4426950408889634


@mutile.jit
def no_score_mod(score, b, h, q_idx, kv_idx):
    """The identity score mod (what ``score_mod=None`` compiles to)."""
    return score


@mutile.jit
def no_mask_mod(b, h, q_idx, kv_idx):
    """Keeps every position (what ``mask_mod=None`` compiles to)."""
    return q_idx >= 0


@mutile.jit
def raw_scores(q, k, sm_scale, softcap, slope, rows, cols, shift,
               SOFTCAP: ml.constexpr, ALIBI: ml.constexpr, FP32: ml.constexpr):
    """Steps 1-3 of the score pipeline for one [BLOCK_M, BLOCK_N] tile: returns the
    scores and their derivative with respect to ``q.k * sm_scale`` (the backward's
    chain factor; 1 unless ``softcap`` is set)."""
    if FP32:
        s = ml.dot(q, ml.trans(k), input_precision="ieee") * sm_scale
    else:
        s = ml.dot(q, ml.trans(k)) * sm_scale
    return mod_scores(s, softcap, slope, rows[:, None], cols[None, :], shift, SOFTCAP, ALIBI)


@mutile.jit
def mod_scores(s, softcap, slope, q_idx, kv_idx, shift, SOFTCAP: ml.constexpr,
               ALIBI: ml.constexpr):
    """Steps 2-3 on the scaled dot ``s = q.k * sm_scale`` of one tile whose query and key
    positions are the broadcastable ``q_idx``, ``kv_idx`` ([M, 1] and [1, N]; [1, M] and
    [N, 1] for a transposed tile): (scores, d scores / d s)."""
    grad = ml.full(s.shape, 1.0, ml.float32)
    if SOFTCAP:
        t = ml.math.tanh(s / softcap)
        s = softcap * t
        grad = grad * (1.0 - t * t)
    if ALIBI:
        dist = (q_idx + shift - kv_idx).to(ml.float32)
        s = s - slope * ml.abs(dist)
    return s, grad


@mutile.jit
def visible(b, h, q_idx, kv_idx, seq_k, shift, left, right, CAUSAL: ml.constexpr,
            WINDOW: ml.constexpr, MASK_MOD: ml.constexpr, mask_mod):
    """Step 5: which (query, key) pairs of the tile take part in the softmax, for the
    broadcastable positions ``q_idx``, ``kv_idx`` (as :func:`mod_scores`)."""
    keep = (kv_idx < seq_k) & (q_idx >= 0)
    diag = q_idx + shift
    if CAUSAL:
        keep = keep & (kv_idx <= diag)
    if WINDOW:
        keep = keep & (kv_idx >= diag - left) & (kv_idx <= diag + right)
    if MASK_MOD:
        keep = keep & mask_mod(b, h, q_idx, kv_idx)
    return keep


@mutile.jit
def lse_base2(lse):
    """The forward's natural-log ``lse`` as :func:`score_grads` takes it: in base 2, and
    0 for a row that sees no key (-inf), whose probabilities are all 0. Applied to the
    per-row vector before it is broadcast over a tile."""
    return ml.where(lse == -float("inf"), 0.0, lse) * LOG2E


@mutile.jit
def score_grads(s, g, dp, lse2, delta, b, h, q_idx, kv_idx, seq_q, seq_k, shift, left, right,
                CAUSAL: ml.constexpr, WINDOW: ml.constexpr, SCORE_MOD: ml.constexpr,
                MASK_MOD: ml.constexpr, score_mod, score_grad, mask_mod):
    """(p, ds) of one tile from its step-1-3 scores ``s``, their chain factor ``g`` and
    ``dp = do . v``; ``lse2`` (:func:`lse_base2` of the forward's lse), ``delta`` and the
    positions ``q_idx``, ``kv_idx`` broadcast
    against the tile ([M, 1], [1, N]; or [1, M], [N, 1] for a transposed tile)."""
    if SCORE_MOD:
        g = g * score_grad(s, b, h, q_idx, kv_idx)
        s = score_mod(s, b, h, q_idx, kv_idx)
    keep = visible(b, h, q_idx, kv_idx, seq_k, shift, left, right, CAUSAL, WINDOW, MASK_MOD,
                   mask_mod) & (q_idx < seq_q)
    p = ml.where(keep, ml.exp2(s * LOG2E - lse2), 0.0)
    ds = p * (dp - delta) * g
    return p, ds


@mutile.jit
def seq_info(CuQ, CuK, b, seq_q_all, seq_k_all, VARLEN: ml.constexpr):
    """(q0, seq_q, k0, seq_k, batch index into the arrays) of sequence ``b``: from the
    cumulative lengths when VARLEN (packed in batch 0), else the dense lengths."""
    if VARLEN:
        q0 = ml.load(CuQ + b)
        k0 = ml.load(CuK + b)
        return q0, ml.load(CuQ + b + 1) - q0, k0, ml.load(CuK + b + 1) - k0, 0
    return 0, seq_q_all, 0, seq_k_all, b


@mutile.jit
def kv_bounds(start_m, seq_k, shift, left, right, BLOCK_M: ml.constexpr,
              BLOCK_N: ml.constexpr, CAUSAL: ml.constexpr, WINDOW: ml.constexpr):
    """[lo, hi): the key range query block ``start_m`` can see under causal/window."""
    lo = 0
    hi = seq_k
    if CAUSAL or WINDOW:
        hi = ml.minimum((start_m + 1) * BLOCK_M + shift + right, seq_k)
    if WINDOW:
        lo = ml.maximum(start_m * BLOCK_M + shift - left, 0)
        lo = (lo // BLOCK_N) * BLOCK_N
    return lo, hi


@mutile.jit
def q_bounds(start_n, seq_q, shift, left, right, BLOCK_M: ml.constexpr,
             BLOCK_N: ml.constexpr, CAUSAL: ml.constexpr, WINDOW: ml.constexpr):
    """[lo, hi): the query range that can see key block ``start_n`` under causal/window
    (``lo`` a multiple of BLOCK_M)."""
    lo = 0
    hi = seq_q
    if CAUSAL or WINDOW:
        lo = ml.maximum(start_n * BLOCK_N - shift - right, 0)
        lo = (lo // BLOCK_M) * BLOCK_M
    if WINDOW:
        hi = ml.minimum((start_n + 1) * BLOCK_N - shift + left, seq_q)
    return lo, hi
