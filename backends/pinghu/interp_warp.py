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
def _layout(shape: str, operand: str, ncols: int) -> np.ndarray:
    """Index into a lane-major flattened fragment (lane * E + e) of each matrix element in
    row-major order; checks that the fragments cover the matrix exactly once."""
    r, c = coords(shape, operand)
    flat = (r * ncols + c).ravel()
    assert np.array_equal(np.sort(flat), np.arange(flat.size)), (shape, operand)
    return np.argsort(flat)


def _unpack(regs: np.ndarray, ab: str) -> np.ndarray:
    """Registers (..., R) u32 -> fragment elements (..., E) as f32."""
    if ab == "TF32":
        return (regs & np.uint32(0xFFFFE000)).view(np.float32)
    dt = np.float16 if ab == "F16" else ml_dtypes.bfloat16
    return np.ascontiguousarray(regs).view(np.uint16).view(dt).astype(np.float32)


@impl("WMMA")
def _wmma(ins):
    at = ins.op.attrs
    shape, m, n, k, ab = at["shape"], at["m"], at["n"], at["k"], at["ab"]
    d, a, b, c = ins.operands
    cnt = elements(ins)
    inv_a, inv_b, inv_c = _layout(shape, "A", k), _layout(shape, "B", n), _layout(shape, "C", n)
    fwd_c = np.argsort(inv_c)                   # matrix element of each fragment slot
    ra, rb, rc = reader(a, "u32", 4), reader(b, "u32", 2), reader(c, "f32", 4)
    w = writer(d, "f32", 4)
    runs = [cnt if isinstance(v, Run) else 1 for v in (a, b, c)]

    def matrix(x, nregs, count, inv, rows_, cols_, unpack):
        """Registers (nregs * count, n) -> matrices (warps, count, rows_, cols_)."""
        x = np.broadcast_to(x, (nregs * count, x.shape[1])).reshape(count, nregs, -1, 32)
        e = unpack(x.transpose(2, 0, 3, 1))                 # (warps, count, 32, E)
        e = e.reshape(e.shape[0], count, -1)[..., inv]
        return e.reshape(e.shape[0], count, rows_, cols_)

    def run(st, sel):
        th = sel.threads
        am = matrix(ra(st, th), 4, runs[0], inv_a, m, k, lambda x: _unpack(x, ab))
        bm = matrix(rb(st, th), 2, runs[1], inv_b, k, n, lambda x: _unpack(x, ab))
        acc = matrix(rc(st, th), 4, runs[2], inv_c, m, n, lambda x: x)
        acc = np.broadcast_to(acc, (acc.shape[0], cnt, m, n)).astype(np.float32)
        for kk in range(k):                 # one f32 rounding per k step, k ascending
            acc = acc + am[..., :, kk:kk + 1] * bm[..., kk:kk + 1, :]
        frag = acc.reshape(acc.shape[0], cnt, m * n)[..., fwd_c]   # (warps, cnt, 32*4)
        frag = frag.reshape(-1, cnt, 32, 4).transpose(1, 3, 0, 2)  # (cnt, 4, warps, 32)
        w(st, sel, frag.reshape(cnt * 4, sel.n))
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
