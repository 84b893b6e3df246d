"""Argument checking shared by the attention forward and backward entry points."""
import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import mutile

from .block_mask import BlockMask

_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32))
_NONE_I32 = np.zeros(1, np.int32)
_NONE_F32 = np.zeros(1, np.float32)


@dataclass
class AttnArgs:
    """The checked inputs of one attention call and the launch values derived from them."""
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    batch: int
    heads: int
    kv_heads: int
    seq_q: int              # per sequence (the longest one when varlen)
    seq_k: int
    head_dim: int
    sm_scale: float
    causal: bool
    window: tuple           # (left, right); (0, 0) when unused
    softcap: float
    slopes: np.ndarray
    slopes_batch_stride: int
    cu_q: np.ndarray
    cu_k: np.ndarray
    block_mask: object
    mask_mod: object
    score_mod: object
    backend: object
    has_window: bool

    @property
    def varlen(self):
        return self.cu_q is not _NONE_I32

    def flags(self):
        """The constexpr switches of the kernels."""
        return dict(CAUSAL=self.causal, WINDOW=self.has_window,
                    SOFTCAP=self.softcap != 0.0, ALIBI=self.slopes is not _NONE_F32,
                    SCORE_MOD=self.score_mod is not None, MASK_MOD=self.mask_mod is not None,
                    SPARSE=self.block_mask is not None, VARLEN=self.varlen,
                    FP32=self.q.dtype == np.float32)

    def mask_arrays(self):
        """(num, idx, full_num, full_idx) of the block mask by query block and their
        strides (:func:`bm_strides`), or placeholders."""
        bm = self.block_mask
        if bm is None:
            return (_NONE_I32,) * 4, (0, 0, 0)
        arrs = (bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.full_kv_indices)
        return arrs, bm_strides(bm.kv_num_blocks, bm.kv_indices)

    def launch(self):
        return {} if self.backend is None else {"backend": self.backend}


def bm_strides(num, idx):
    """(b, h, row) strides of a block mask's count/index arrays (0 on broadcast dims)."""
    B, H, n = num.shape
    return ((H * n if B > 1 else 0), (n if H > 1 else 0), idx.shape[-1])


def _check_array(x, name):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(x).__name__}")
    if x.ndim != 4:
        raise ValueError(f"{name} must be [batch, heads, seq, head_dim], got shape {x.shape}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"{name} must be float16, bfloat16 or float32, got {x.dtype}")
    return np.ascontiguousarray(x)


def _cu(cu, name, total):
    cu = np.asarray(cu)
    if cu.ndim != 1 or cu.size < 2 or cu.dtype.kind not in "iu":
        raise ValueError(f"{name} must be a 1-D integer array of batch + 1 offsets")
    if cu[0] != 0 or (np.diff(cu) < 0).any() or cu[-1] != total:
        raise ValueError(f"{name} must rise from 0 to the packed length {total}, got {cu}")
    return np.ascontiguousarray(cu, np.int32)


def prepare(q, k, v, *, causal=False, sm_scale=None, score_mod=None, mask_mod=None,
            block_mask=None, window=None, alibi_slopes=None, softcap=None, enable_gqa=False,
            cu_seqlens_q=None, cu_seqlens_k=None, backend=None) -> AttnArgs:
    """Check the attention options (raising ValueError/TypeError naming what is wrong)."""
    q, k, v = _check_array(q, "q"), _check_array(k, "k"), _check_array(v, "v")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape, got {k.shape} and {v.shape}")
    B, Hq, Sq, D = q.shape
    Bk, Hk, Sk, Dk = k.shape
    if D != Dk or D not in (16, 32, 64, 128):
        raise ValueError(f"head_dim must be one of 16, 32, 64, 128 and match, got q {D}, k {Dk}")
    if Bk != B:
        raise ValueError(f"q and k must have one batch size, got {B} and {Bk}")
    if Hq != Hk and not enable_gqa:
        raise ValueError(f"q has {Hq} heads and k {Hk}: pass enable_gqa=True for GQA/MQA")
    if Hq % Hk:
        raise ValueError(f"q's heads ({Hq}) must be a multiple of k's ({Hk})")
    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        raise ValueError("cu_seqlens_q and cu_seqlens_k must be given together")
    cu_q = cu_k = _NONE_I32
    if cu_seqlens_q is not None:
        if B != 1:
            raise ValueError("with cu_seqlens, q, k, v are packed as [1, heads, total, dim]")
        cu_q, cu_k = _cu(cu_seqlens_q, "cu_seqlens_q", Sq), _cu(cu_seqlens_k, "cu_seqlens_k", Sk)
        if cu_q.size != cu_k.size:
            raise ValueError("cu_seqlens_q and cu_seqlens_k must have the same length")
        B = cu_q.size - 1
        Sq, Sk = int(np.diff(cu_q).max()), int(np.diff(cu_k).max())
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, (int, float)):
        raise TypeError(f"sm_scale must be a number, got {type(sm_scale).__name__}")
    has_window = window is not None
    if window is None:
        win = (0, 0)
    elif isinstance(window, (int, np.integer)) and not isinstance(window, bool):
        win = (int(window), int(window))
    elif isinstance(window, tuple) and len(window) == 2:
        win = tuple(int(w) for w in window)
    else:
        raise ValueError(f"window must be an int or a (left, right) pair, got {window!r}")
    if min(win) < 0:
        raise ValueError(f"window sizes must be >= 0, got {window!r}")
    if causal:
        win = (win[0], 0)
    if softcap is None:
        softcap = 0.0
    elif isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or softcap <= 0:
        raise ValueError(f"softcap must be a positive number, got {softcap!r}")
    slopes, s_ab = _NONE_F32, 0
    if alibi_slopes is not None:
        slopes = np.ascontiguousarray(alibi_slopes, np.float32)
        if slopes.shape == (Hq,):
            s_ab = 0
        elif slopes.shape == (B, Hq):
            s_ab = Hq
        else:
            raise ValueError(f"alibi_slopes must be [{Hq}] or [{B}, {Hq}], got {slopes.shape}")
    for f, what in ((score_mod, "score_mod"), (mask_mod, "mask_mod")):
        if f is not None and not isinstance(f, mutile.JITFunction):
            raise TypeError(f"{what} must be a @mutile.jit function, got {type(f).__name__}")
    if block_mask is not None:
        if not isinstance(block_mask, BlockMask):
            raise TypeError("block_mask must come from create_block_mask")
        if mask_mod is not None and mask_mod is not block_mask.mask_mod:
            raise ValueError("mask_mod differs from the block_mask's mask_mod")
        mask_mod = block_mask.mask_mod
        mB, mH, mQ, mK = block_mask.shape
        if (mQ, mK) != (Sq, Sk) or mB not in (1, B) or mH not in (1, Hq):
            raise ValueError(f"block_mask was made for (B, H, Q, KV) = {block_mask.shape}, "
                             f"the inputs are ({B}, {Hq}, {Sq}, {Sk})")
        if cu_q is not _NONE_I32:
            raise ValueError("block_mask with cu_seqlens is not supported")
    return AttnArgs(q, k, v, B, Hq, Hk, Sq, Sk, D, float(sm_scale), bool(causal), win,
                    float(softcap), slopes, s_ab, cu_q, cu_k, block_mask, mask_mod, score_mod,
                    backend, has_window)
