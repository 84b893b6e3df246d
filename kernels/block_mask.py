"""Block-sparse attention masks and the standard score/mask mods.

A ``mask_mod(b, h, q_idx, kv_idx)`` is a ``@mutile.jit`` function returning True where
query ``q_idx`` may see key ``kv_idx`` (FlexAttention's signature; the indices arrive as
broadcastable [BLOCK_M, 1] / [1, BLOCK_N] int32 tensors, ``b`` and ``h`` as scalars). A
``score_mod(score, b, h, q_idx, kv_idx)`` returns the modified f32 score.

:func:`create_block_mask` evaluates a mask_mod block by block (a kernel, on the given
backend) and records, per query block, the key blocks that are partly unmasked (the
mask_mod must run there) and those that are fully unmasked (it can be skipped); fully
masked blocks are never visited by :func:`mutile.kernels.flash_attention` and its
backward.

Differentiable score mods: the backward needs ``d score_mod / d score``. The score mods
made here register theirs (:func:`score_mod_grad`); a user's score_mod is
differentiable when registered with :func:`register_score_mod_grad` (or given as
``score_mod_grad=`` to the backward).
"""
from dataclasses import dataclass

import numpy as np

import mutile
import mutile.language as ml

_GRADS = {}


def register_score_mod_grad(score_mod, grad):
    """Declare ``grad(score, b, h, q_idx, kv_idx)`` (a ``@mutile.jit`` function) as the
    derivative of ``score_mod`` with respect to ``score``; returns ``score_mod``."""
    for f, what in ((score_mod, "score_mod"), (grad, "grad")):
        if not isinstance(f, mutile.JITFunction):
            raise TypeError(f"{what} must be a @mutile.jit function, got {type(f).__name__}")
    _GRADS[score_mod] = grad
    return score_mod


def score_mod_grad(score_mod):
    """The registered derivative of ``score_mod`` (None if it has none)."""
    return _GRADS.get(score_mod)


@mutile.jit
def unit_grad(score, b, h, q_idx, kv_idx):
    """d(score + bias)/d score = 1: the derivative of every additive-bias score mod."""
    return ml.full(score.shape, 1.0, ml.float32)


# ------------------------------------------------------------------ mask mods
@mutile.jit
def causal_mask(b, h, q_idx, kv_idx):
    """FlexAttention's causal mask (top-left aligned: ``q_idx >= kv_idx``)."""
    return q_idx >= kv_idx


def sliding_window_mask(window: int, causal: bool = True):
    """Keys at most ``window`` positions before the query (and, if not ``causal``, at
    most ``window`` after it)."""
    W = _positive_int(window, "window")
    if causal:
        @mutile.jit
        def sliding_window(b, h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & (q_idx - kv_idx <= W)
        return sliding_window

    @mutile.jit
    def band(b, h, q_idx, kv_idx):
        return ml.abs(q_idx - kv_idx) <= W
    return band


def prefix_lm_mask(prefix: int):
    """Bidirectional over the first ``prefix`` keys, causal after them."""
    P = _positive_int(prefix, "prefix")

    @mutile.jit
    def prefix_lm(b, h, q_idx, kv_idx):
        return (kv_idx < P) | (q_idx >= kv_idx)
    return prefix_lm


def document_mask(doc_lengths, causal: bool = False):
    """Queries see only keys of their own document; ``doc_lengths`` are the lengths of
    the documents packed into one sequence (compile-time values: one compare per
    document boundary)."""
    lengths = [_positive_int(n, "doc_lengths entry") for n in doc_lengths]
    if not lengths:
        raise ValueError("document_mask needs at least one document length")
    BOUNDS = tuple(int(x) for x in np.cumsum(lengths)[:-1])
    N = len(BOUNDS)
    CAUSAL = bool(causal)

    @mutile.jit
    def doc_id(i):
        d = i * 0
        for t in ml.static_range(N):
            d += (i >= BOUNDS[t]).to(ml.int32)
        return d

    @mutile.jit
    def document(b, h, q_idx, kv_idx):
        same = doc_id(q_idx) == doc_id(kv_idx)
        if CAUSAL:
            same = same & (q_idx >= kv_idx)
        return same
    return document


# ------------------------------------------------------------------ score mods
def alibi_score_mod(num_heads: int):
    """ALiBi as in FlexAttention's example: ``score + slope_h * (kv_idx - q_idx)`` with
    ``slope_h = 2^(-8 (h + 1) / num_heads)``. Differentiable (derivative 1)."""
    H = float(_positive_int(num_heads, "num_heads"))

    @mutile.jit
    def alibi(score, b, h, q_idx, kv_idx):
        slope = ml.exp2(-8.0 * (h + 1).to(ml.float32) / H)
        return score + slope * (kv_idx - q_idx).to(ml.float32)
    return register_score_mod_grad(alibi, unit_grad)


def softcap_score_mod(cap: float):
    """``cap * tanh(score / cap)``. Differentiable (``1 - tanh^2``)."""
    if not (isinstance(cap, (int, float)) and cap > 0):
        raise ValueError(f"softcap must be a positive number, got {cap!r}")
    C = float(cap)

    @mutile.jit
    def softcap(score, b, h, q_idx, kv_idx):
        return C * ml.math.tanh(score / C)

    @mutile.jit
    def softcap_grad(score, b, h, q_idx, kv_idx):
        t = ml.math.tanh(score / C)
        return 1.0 - t * t
    return register_score_mod_grad(softcap, softcap_grad)


def relative_position_bias(scale: float = 1.0):
    """``score + scale * (q_idx - kv_idx)`` (FlexAttention's relative_positional).
    Differentiable (derivative 1)."""
    S = float(scale)

    @mutile.jit
    def relative_bias(score, b, h, q_idx, kv_idx):
        return score + S * (q_idx - kv_idx).to(ml.float32)
    return register_score_mod_grad(relative_bias, unit_grad)


def _positive_int(x, what):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise ValueError(f"{what} must be a positive integer, got {x!r}")
    return int(x)


# ------------------------------------------------------------------ block mask
@dataclass(frozen=True)
class BlockMask:
    """Which key blocks each query block visits (arrays of int32, shapes [B, H, nq] and
    [B, H, nq, nk]; B and H are 1 when the mask does not depend on them): the
    ``kv_indices[..., :kv_num_blocks]`` partly masked blocks run ``mask_mod``, the
    ``full_kv_indices[..., :full_kv_num_blocks]`` ones skip it. ``q_*`` are the same
    per key block (the backward's dK/dV pass)."""
    mask_mod: object
    shape: tuple            # (B, H, Q_LEN, KV_LEN)
    block_size: tuple       # (BLOCK_Q, BLOCK_KV)
    kv_num_blocks: np.ndarray
    kv_indices: np.ndarray
    full_kv_num_blocks: np.ndarray
    full_kv_indices: np.ndarray
    q_num_blocks: np.ndarray
    q_indices: np.ndarray
    full_q_num_blocks: np.ndarray
    full_q_indices: np.ndarray

    def density(self) -> float:
        """Fraction of (query block, key block) pairs visited."""
        nq, nk = self.kv_indices.shape[-2:]
        visited = self.kv_num_blocks.sum() + self.full_kv_num_blocks.sum()
        return float(visited) / (self.kv_num_blocks.size * nk)


def _build_classifier(mask_mod):
    @mutile.jit
    def classify(Cls, q_len, kv_len, heads, nq, nk, BLOCK_Q: ml.constexpr,
                 BLOCK_KV: ml.constexpr):
        """Cls[b, h, m, n] = 0 (fully masked), 1 (partly), 2 (fully unmasked)."""
        m = ml.program_id(0)
        n = ml.program_id(1)
        bh = ml.program_id(2)
        b = bh // heads
        h = bh % heads
        rows = m * BLOCK_Q + ml.arange(0, BLOCK_Q)
        cols = n * BLOCK_KV + ml.arange(0, BLOCK_KV)
        inside = (rows[:, None] < q_len) & (cols[None, :] < kv_len)
        keep = mask_mod(b, h, rows[:, None], cols[None, :]) & inside
        count = ml.sum(ml.sum(keep.to(ml.int32), axis=1), axis=0)
        total = ml.sum(ml.sum(inside.to(ml.int32), axis=1), axis=0)
        cls = ml.where(count == 0, 0, ml.where(count == total, 2, 1))
        ml.store(Cls + (bh * nq + m) * nk + n, cls)
    return classify


_CLASSIFIERS = {}


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, BLOCK_SIZE=128, backend=None):
    """Evaluate ``mask_mod`` over (B, H, Q_LEN, KV_LEN) block by block (``BLOCK_SIZE`` an
    int or a (BLOCK_Q, BLOCK_KV) pair; B or H None: the mask does not depend on it) and
    return the :class:`BlockMask` the attention kernels use to skip masked blocks."""
    if not isinstance(mask_mod, mutile.JITFunction):
        raise TypeError(f"mask_mod must be a @mutile.jit function, got {type(mask_mod).__name__}")
    B = 1 if B is None else _positive_int(B, "B")
    H = 1 if H is None else _positive_int(H, "H")
    Q_LEN, KV_LEN = _positive_int(Q_LEN, "Q_LEN"), _positive_int(KV_LEN, "KV_LEN")
    bq, bk = (BLOCK_SIZE, BLOCK_SIZE) if not isinstance(BLOCK_SIZE, tuple) else BLOCK_SIZE
    for x in (bq, bk):
        if _positive_int(x, "BLOCK_SIZE") & (x - 1) or x < 16:
            raise ValueError(f"BLOCK_SIZE must be a power of two >= 16, got {BLOCK_SIZE!r}")
    nq, nk = mutile.cdiv(Q_LEN, bq), mutile.cdiv(KV_LEN, bk)
    if mask_mod not in _CLASSIFIERS:
        _CLASSIFIERS[mask_mod] = _build_classifier(mask_mod)
    cls = np.full((B, H, nq, nk), -1, np.int32)
    launch = {} if backend is None else {"backend": backend}
    _CLASSIFIERS[mask_mod][(nq, nk, B * H)](cls, Q_LEN, KV_LEN, H, nq, nk, BLOCK_Q=bq,
                                             BLOCK_KV=bk, **launch)
    if not np.isin(cls, (0, 1, 2)).all():
        raise RuntimeError("block classification left blocks unwritten")
    kv = [_compact(cls == c) for c in (1, 2)]
    qt = [_compact(np.swapaxes(cls, -1, -2) == c) for c in (1, 2)]
    return BlockMask(mask_mod, (B, H, Q_LEN, KV_LEN), (bq, bk), kv[0][0], kv[0][1],
                     kv[1][0], kv[1][1], qt[0][0], qt[0][1], qt[1][0], qt[1][1])


def _compact(sel):
    """(count [..., m], indices [..., m, n]) of the True entries of each row of ``sel``,
    in increasing order, padded with 0."""
    counts = sel.sum(-1).astype(np.int32)
    order = np.argsort(~sel, axis=-1, kind="stable").astype(np.int32)
    idx = np.where(np.arange(sel.shape[-1]) < counts[..., None], order, 0).astype(np.int32)
    return np.ascontiguousarray(counts), np.ascontiguousarray(idx)
