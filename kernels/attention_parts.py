"""The score pipeline's building blocks shared by every attention kernel (the portable
forward and backward of :mod:`.attention`/:mod:`.attention_bwd`, the explicit Pinghu
forward of :mod:`.attention_pinghu`): the identity mods, the raw scores (steps 1-3 of
:mod:`.attention`'s pipeline), the visibility mask (step 5), varlen offsets and the key
range a query block can see."""
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
    grad = ml.full(s.shape, 1.0, ml.float32)
    if SOFTCAP:
        t = ml.math.tanh(s / softcap)
        s = softcap * t
        grad = grad * (1.0 - t * t)
    if ALIBI:
        dist = (rows[:, None] + shift - cols[None, :]).to(ml.float32)
        s = s - slope * ml.abs(dist)
    return s, grad


@mutile.jit
def visible(b, h, rows, cols, seq_k, shift, left, right, CAUSAL: ml.constexpr,
            WINDOW: ml.constexpr, MASK_MOD: ml.constexpr, mask_mod):
    """Step 5: which (row, col) pairs of the tile take part in the softmax."""
    keep = (cols[None, :] < seq_k) & (rows[:, None] >= 0)
    diag = rows[:, None] + shift
    if CAUSAL:
        keep = keep & (cols[None, :] <= diag)
    if WINDOW:
        keep = keep & (cols[None, :] >= diag - left) & (cols[None, :] <= diag + right)
    if MASK_MOD:
        keep = keep & mask_mod(b, h, rows[:, None], cols[None, :])
    return keep


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
