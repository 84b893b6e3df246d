"""Instructions that act on whole warps: shuffles, warp-level MMA, and the control-flow
rows (branches, reconvergence, exit, barriers), which the scheduler in :mod:`.interp`
executes from the :class:`Control` descriptors built here.

Selections always hold whole warps (32 consecutive threads each), so a register read
(elements, threads) reshapes to ``(elements, warps, 32 lanes)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .interp_math import fma_f32
from .interp_ops import elements, impl, reader, writer
from .operands import IntImm, Run
from .wmma import coords

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


def _places(shape: str, operand: str, rows: int, cols: int, per_reg: int):
    """(register within the fragment, slot within the warp's row of that register) of each
    matrix element, two (rows, cols) arrays; a register row of a warp holds ``32 *
    per_reg`` slots (lane * per_reg + half for 16-bit elements). Checks that the fragments
    cover the matrix exactly once."""
    r, c = coords(shape, operand)                               # (32 lanes, E)
    reg, slot = np.full((rows, cols), -1), np.full((rows, cols), -1)
    e = np.arange(r.shape[1])
    reg[r, c] = e // per_reg
    slot[r, c] = LANES[:, None] * per_reg + e % per_reg
    assert (reg >= 0).all() and np.bincount((r * cols + c).ravel()).max() == 1, (shape, operand)
    return reg, slot


def _frag_values(x, per_reg: int):
    """Register rows (nregs, n) -> (nregs, warps, 32 * per_reg) element slots (u16 for
    16-bit elements, u32 otherwise)."""
    x = x.reshape(x.shape[0], -1, 32)
    return x.view(np.uint16) if per_reg == 2 else x


def _exact_f32_products(a, b) -> bool:
    """Whether every product of an element of ``a`` and one of ``b`` (f32 arrays) is
    exact in f32 (no underflow below the normal range, no overflow, no NaN/inf)."""
    aa, bb = np.abs(a), np.abs(b)
    hi = float(aa.max()) * float(bb.max())
    if not hi < _HUGE:
        return False
    lo_a = aa[aa > 0]
    lo_b = bb[bb > 0]
    return not lo_a.size or not lo_b.size or float(lo_a.min()) * float(lo_b.min()) >= _TINY


@impl("WMMA")
def _wmma(ins):
    """d = a @ b + c per warp and fragment: the accumulator is laid out (m, count, n,
    warps) (the warps innermost, so every numpy pass runs over long rows), and each of the
    k steps is ``acc = fma(A[:, k], B[k, :], acc)`` in f32, k ascending. 16-bit and tf32
    products are exact in f32 unless they leave its normal range (f16 never does), so the
    step is one f32 multiply and one f32 add; bf16/tf32 operands whose products can leave
    the normal range run the steps through the exact :func:`fma_f32`."""
    at = ins.op.attrs
    shape, m, n, k, ab = at["shape"], at["m"], at["n"], at["k"], at["ab"]
    d, a, b, c = ins.operands
    cnt = elements(ins)
    per = 1 if ab == "TF32" else 2                  # elements per register of A and B
    cnt_a, cnt_b, cnt_c = (cnt if isinstance(v, Run) else 1 for v in (a, b, c))
    regs_a, regs_b = 4, 2                           # registers per A and B fragment
    ra_, sa = _places(shape, "A", m, k, per)         # (m, k)
    rb_, sb = _places(shape, "B", k, n, per)         # (k, n)
    rc_, sc = _places(shape, "C", m, n, 1)           # (m, n)
    # gather indices: A -> (k, m, cnt_a), B -> (k, cnt_b, n), C -> (m, cnt, n)
    ia = (ra_.T[:, :, None] + regs_a * np.arange(cnt_a), np.broadcast_to(
        sa.T[:, :, None], (k, m, cnt_a)))
    ib = (rb_[:, None, :] + regs_b * np.arange(cnt_b)[:, None], np.broadcast_to(
        sb[:, None, :], (k, cnt_b, n)))
    ic = (rc_[:, None, :] + 4 * (np.arange(cnt)[:, None] if cnt_c > 1 else 0),
          np.broadcast_to(sc[:, None, :], (m, cnt, n)))
    # D: register 4 * f + e of lane l holds acc[row, f, col] with (row, col) of (l, e)
    r, cl = coords(shape, "C")
    out_i, out_j = r.T, cl.T                         # (4 elements, 32 lanes)
    ra, rb, rc = reader(a, "u32", 4), reader(b, "u32", 2), reader(c, "f32", 4)
    w = writer(d, "f32", 4)
    d0 = d.n if not isinstance(d, Run) else d.start
    narrow = {"F16": np.float16, "BF16": ml_dtypes.bfloat16}.get(ab)

    def operand(x, idx):
        v = _frag_values(x, per)[idx[0], :, idx[1]]
        if narrow is not None:
            return v.view(narrow).astype(np.float32)
        return (v & np.uint32(0xFFFFE000)).view(np.float32)

    def run(st, sel):
        th = sel.threads
        am = operand(ra(st, th), ia)                 # (k, m, cnt_a, warps)
        bm = operand(rb(st, th), ib)                 # (k, cnt_b, n, warps)
        acc = _frag_values(rc(st, th), 1)[ic[0], :, ic[1]]     # (m, cnt, n, warps)
        acc = np.ascontiguousarray(acc, np.float32)
        if narrow is np.float16 or _exact_f32_products(am, bm):
            tmp = np.empty_like(acc)
            for kk in range(k):                     # one f32 rounding per k step
                np.multiply(am[kk][:, :, None, :], bm[kk][None], out=tmp)
                np.add(acc, tmp, out=acc)
        else:
            for kk in range(k):
                acc = fma_f32(am[kk][:, :, None, :], bm[kk][None], acc)
        res = acc[out_i, :, out_j, :]                # (4, 32, cnt, warps)
        res = res.transpose(2, 0, 3, 1)              # (cnt, 4, warps, 32)
        if sel.mask is None and sel.is_slice:
            st.reg["f32"][d0:d0 + 4 * cnt, th].reshape(res.shape, copy=False)[...] = res
            return
        w(st, sel, res.reshape(4 * cnt, sel.n))
    return run


# ---------------------------------------------------------------- control flow
@dataclass(frozen=True)
class Control:
    """A control-flow row for the scheduler: ``kind`` is BRA, SSY, SYNC, EXIT or BAR;
    ``target`` the branch/reconvergence pc, ``bar`` the barrier id."""
    kind: str
    target: int = -1
    bar: int = -1


@impl("BRA", "SSY")
def _branch(ins):
    return Control(ins.op.mnemonic, target=ins.operands[0].pc)


@impl("SYNC", "EXIT")
def _sync_exit(ins):
    return Control(ins.op.mnemonic)


@impl("BAR.SYNC")
def _bar(ins):
    return Control("BAR", bar=ins.operands[0].value)
