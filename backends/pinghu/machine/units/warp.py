"""Instructions that act on whole warps: shuffles, warp-level MMA, and the control-flow
rows (branches, reconvergence, exit, barriers), which the scheduler in :mod:`..scheduler`
executes from the :class:`~..rows.Control` descriptors built here.

Selections always hold whole warps (32 consecutive threads each), so a register read
(elements, threads) reshapes to ``(elements, warps, 32 lanes)``.
"""
from __future__ import annotations

import numpy as np

from .fmath import fma_f32
from ..rows import Control, elements, impl, reader, writer
from ...isa.operands import IntImm, Run
from ...isa.wmma import coords, registers

LANES = np.arange(32)


# ---------------------------------------------------------------- SHFL
def _source_lane(mode: str, lane, b):
    """The lane each lane reads (int64 arrays, broadcast)."""
    b = np.asarray(b, np.int64)
    if mode == "IDX":
        return b & 31
    if mode == "BFLY":
        return lane ^ (b & 31)
    src = lane - b if mode == "UP" else lane + b
    return np.where((src < 0) | (src > 31), lane, src)


@impl("SHFL")
def _shfl(ins):
    mode = ins.op.attrs["mode"]
    d, a, b = ins.operands
    ra, w = reader(a, "u32"), writer(d, "u32")
    if isinstance(b, IntImm):
        perm = np.broadcast_to(_source_lane(mode, LANES, b.value), (32,))

        def run(st, sel):
            x = ra(st, sel.threads)
            x = x.reshape(x.shape[0], -1, 32)[:, :, perm]
            w(st, sel, x.reshape(x.shape[0], sel.n))
        return run
    rb = reader(b, "u32")

    def run_reg(st, sel):
        x = ra(st, sel.threads)
        lanes = rb(st, sel.threads)
        x3 = x.reshape(x.shape[0], -1, 32)
        src = _source_lane(mode, LANES, lanes.reshape(lanes.shape[0], -1, 32))
        shape = np.broadcast_shapes(x3.shape, src.shape)
        y = np.take_along_axis(np.broadcast_to(x3, shape), np.broadcast_to(src, shape), 2)
        w(st, sel, y.reshape(shape[0], sel.n))
    return run_reg


# ---------------------------------------------------------------- WMMA
_TINY, _HUGE = 2.0 ** -126, 2.0 ** 127
_CHUNK = 1 << 17                # accumulator elements per chunk of warps (measured best)
_F16_SCALE = np.float32(2.0 ** 112)
_F16_KEEP = np.int32(-0x70002000)                 # 0x8FFFE000: sign, exponent, mantissa


def _slots(shape: str, operand: str, rows: int, cols: int) -> np.ndarray:
    """Slot ``element * 32 + lane`` of each matrix element (rows, cols) in a fragment
    unpacked to (elements, 32 lanes); checks that the fragments cover the matrix once."""
    r, c = coords(shape, operand)                               # (32 lanes, E)
    slot = np.full((rows, cols), -1)
    slot[r, c] = np.arange(r.shape[1]) * 32 + LANES[:, None]
    assert np.bincount((r * cols + c).ravel()).max() == 1 and (slot >= 0).all(), \
        (shape, operand)
    return slot


def _lanes_last(x, regs: int) -> np.ndarray:
    """Register rows (count * regs, n) -> (count, regs, 32 lanes, warps), contiguous."""
    x = x.reshape(x.shape[0], -1, 32)
    return np.ascontiguousarray(x.transpose(0, 2, 1)).reshape(-1, regs, 32, x.shape[1])


def _f16_halves(x: np.ndarray) -> np.ndarray:
    """u32 words (..., 32, warps) holding two f16 each -> f32 (..., 2 halves, 32, warps):
    the f16 bits moved into f32's fields (the value times 2**-112, subnormals included)
    and scaled back exactly; infinities and NaNs are converted by numpy."""
    out = np.empty(x.shape[:-2] + (2,) + x.shape[-2:], np.float32)
    lo, hi = out[..., 0, :, :].view(np.int32), out[..., 1, :, :].view(np.int32)
    np.left_shift(x, np.uint32(16), out=lo.view(np.uint32))
    np.right_shift(lo, np.int32(3), out=lo)
    np.right_shift(x.view(np.int32), np.int32(3), out=hi)
    for h in (lo, hi):
        np.bitwise_and(h, _F16_KEEP, out=h)
    out *= _F16_SCALE                               # exponent 31 lands on [2**16, 2**17)
    if out.size and (out.max() >= 65536 or out.min() <= -65536):   # infinities, NaNs
        u16 = np.ascontiguousarray(x).view(np.uint16).reshape(x.shape + (2,))
        out[...] = np.moveaxis(u16.view(np.float16).astype(np.float32), -1, -3)
    return out


def _unpacked(x: np.ndarray, ab: str) -> np.ndarray:
    """Fragment registers (count, regs, 32, warps) u32 -> f32 elements (count, slots,
    warps) in slot order (see :func:`_slots`)."""
    if ab == "TF32":
        v = (x & np.uint32(0xFFFFE000)).view(np.float32)
    elif ab == "F16":
        v = _f16_halves(x)
    else:
        v = np.empty(x.shape[:2] + (2,) + x.shape[2:], np.uint32)
        np.left_shift(x, np.uint32(16), out=v[:, :, 0])
        np.bitwise_and(x, np.uint32(0xFFFF0000), out=v[:, :, 1])
        v = v.view(np.float32)
    return v.reshape(x.shape[0], -1, x.shape[-1])


def _exact_f32_products(a, b) -> bool:
    """Whether every product of an element of ``a`` and one of ``b`` (f32 arrays) is
    exact in f32: no underflow below the normal range, no overflow, no NaN/inf."""
    aa, bb = np.abs(a), np.abs(b)
    if not float(aa.max()) * float(bb.max()) < _HUGE:
        return False
    lo_a, lo_b = aa[aa > 0], bb[bb > 0]
    return not lo_a.size or not lo_b.size or float(lo_a.min()) * float(lo_b.min()) >= _TINY


@impl("WMMA")
def _wmma(ins):
    """d = a @ b + c per warp and fragment. The accumulator is laid out (m, count, n,
    warps), the warps innermost so every numpy pass runs over long rows; each of the k
    steps is ``acc = fma(A[:, k], B[k, :], acc)`` in f32, k ascending. 16-bit and tf32
    products are exact in f32 unless they leave its normal range (f16 products never do),
    so a step is one f32 multiply and one f32 add; bf16/tf32 operands whose products may
    leave the normal range take the steps through the exact :func:`fma_f32`."""
    at = ins.op.attrs
    shape, m, n, k, ab = at["layout"], at["m"], at["n"], at["k"], at["ab"]
    na, nb, nc = (registers(shape, x) for x in "ABC")     # registers per fragment
    d, a, b, c = ins.operands
    cnt = elements(ins)
    cnt_a, cnt_b, cnt_c = (cnt if isinstance(v, Run) else 1 for v in (a, b, c))
    # fancy indices (fragment, slot) gathering A (k, m, cnt_a), B (k, cnt_b, n),
    # C (m, cnt, n) from unpacked fragments (count, slots, warps), and D (cnt, nc, 32)
    # from the accumulator (m, cnt, n)
    gather_a = (np.arange(cnt_a), _slots(shape, "A", m, k).T[:, :, None])
    gather_b = (np.arange(cnt_b)[:, None], _slots(shape, "B", k, n)[:, None, :])
    gather_c = ((np.arange(cnt) if cnt_c > 1 else np.zeros(cnt, int))[:, None],
                _slots(shape, "C", m, n)[:, None, :])
    r, col = coords(shape, "C")
    scatter_d = (r.T, np.arange(cnt)[:, None, None], col.T)
    ra, rb, rc = reader(a, "u32", na), reader(b, "u32", nb), reader(c, "f32", nc)
    w = writer(d, "f32", nc)
    d0 = d.start if isinstance(d, Run) else d.n

    per_chunk = max(1, _CHUNK // (m * n * cnt))     # warps per chunk

    def part(st, th):
        """D of the warps of ``th`` as (cnt, nc, warps, 32)."""
        am = _unpacked(_lanes_last(ra(st, th), na), ab)[gather_a]      # (k, m, cnt_a, W)
        bm = _unpacked(_lanes_last(rb(st, th), nb), ab)[gather_b]      # (k, cnt_b, n, W)
        cm = _lanes_last(rc(st, th), nc).view(np.float32)
        acc = cm.reshape(cm.shape[0], -1, cm.shape[-1])[gather_c]      # (m, cnt, n, W)
        am, bm = am[:, :, :, None, :], bm[:, None]
        if ab == "F16" or _exact_f32_products(am, bm):
            tmp = np.empty_like(acc)
            for kk in range(k):                     # one f32 rounding per k step
                np.multiply(am[kk], bm[kk], out=tmp)
                np.add(acc, tmp, out=acc)
        else:
            for kk in range(k):
                fma_f32(am[kk], bm[kk], acc, out=acc)
        return acc[scatter_d].transpose(0, 1, 3, 2)

    def run(st, sel):
        th, nw = sel.threads, sel.n // 32
        direct = sel.mask is None and sel.is_slice
        out = None if direct else np.empty((cnt, nc, nw, 32), np.float32)
        for w0 in range(0, nw, per_chunk):        # chunks of warps stay in the cache
            w1 = min(nw, w0 + per_chunk)
            sub = slice(th.start + 32 * w0, th.start + 32 * w1) if sel.is_slice \
                else th[32 * w0:32 * w1]
            res = part(st, sub)
            if direct:
                st.reg["f32"][d0:d0 + nc * cnt, sub].reshape(res.shape, copy=False)[...] = res
            else:
                out[:, :, w0:w1] = res
        if not direct:
            w(st, sel, out.reshape(nc * cnt, sel.n))
    return run


# ---------------------------------------------------------------- control flow
@impl("BRA", "SSY")
def _branch(ins):
    return Control(ins.op.mnemonic, target=ins.operands[0].pc)


@impl("SYNC", "EXIT")
def _sync_exit(ins):
    return Control(ins.op.mnemonic)


@impl("BAR.SYNC")
def _bar(ins):
    return Control("BAR", bar=ins.operands[0].value)
