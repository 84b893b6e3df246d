"""The ATOM instructions: atomic read-modify-write of global memory.

One instruction's elements are serialized per address as the memory system does: the
elements that hit one address apply one after another in thread order (then element
order within a thread's run), and each returns the value memory held just before its
own update. The elements are sorted by (address, that order); round ``r`` applies the
``r``-th update of every address at once, so an instruction takes as many numpy rounds
as the most elements one address receives (float adds round once per update, in that
serial order). Bounds, alignment and read-only regions are checked like the LSU's
(:func:`..memory._global`): the first bad element faults before memory changes. A
compare-and-swap that changes nothing writes nothing (so a spinning lock is not
progress to :mod:`..progress`); a warp that ran CAS or EXCH is marked in
``st.spun`` for the scheduler's fairness rule (:mod:`..scheduler`).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..memory import _global
from ..rows import elements, impl, reader, writer

# type suffix -> (bytes, memory dtype, register view)
_TYPES = {"S32": (4, np.int32, "i32"), "U32": (4, np.uint32, "u32"),
          "B32": (4, np.uint32, "u32"), "F32": (4, np.float32, "f32"),
          "S64": (8, np.int64, "i64"), "U64": (8, np.uint64, "u64"),
          "B64": (8, np.uint64, "u64"), "F64": (8, np.float64, "f64"),
          "F16": (2, np.float16, "u32"), "BF16": (2, ml_dtypes.bfloat16, "u32")}


def _update(op: str, floating: bool):
    """``(old, value, compare) -> new`` arrays of the memory dtype."""
    if op == "ADD":
        return lambda old, v, c: old + v
    if op in ("MAX", "MIN"):
        fn = (np.fmax if op == "MAX" else np.fmin) if floating else \
            (np.maximum if op == "MAX" else np.minimum)
        return lambda old, v, c: fn(old, v)
    if op in ("AND", "OR", "XOR"):
        fn = {"AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor}[op]
        return lambda old, v, c: fn(old, v)
    if op == "EXCH":
        return lambda old, v, c: v
    return lambda old, v, c: np.where(old == c, v, old)          # CAS (B32/B64: bits)


def _from_regs(x, t: str, dt):
    """Register values (view dtype) -> memory dtype (16-bit floats: the low 16 bits)."""
    if t in ("F16", "BF16"):
        return x.astype(np.uint16).view(dt)
    return x.astype(dt, copy=False)


def _to_regs(x, t: str):
    if t in ("F16", "BF16"):
        return x.view(np.uint16).astype(np.uint32)
    return x


@impl("ATOM")
def _atom(ins):
    op, t = ins.op.attrs["op"], ins.op.attrs["type"]
    nbytes, dt, view = _TYPES[t]
    d, m, *srcs = ins.operands
    k = elements(ins)
    base, off = reader(m.base, "i64"), m.offset
    vals = [reader(s, view) for s in srcs]               # CAS: compare, value
    w = writer(d, view)
    update = _update(op, t[0] == "F")
    spins = op in ("CAS", "EXCH")

    def run(st, sel):
        n = sel.n
        a = np.broadcast_to(base(st, sel.threads) + off, (k, n))
        got, pick = _global(st, sel, ins, a, sel.mask, nbytes, what="atomic")
        if spins:
            st.spun[sel.thread_array()[::32] // 32] = True
        if not got.size:
            return
        got = got.view(dt)
        if pick is None:
            pick = np.arange(k * n)
        e, i = np.divmod(pick, n)
        order = np.lexsort((i * k + e, a.ravel()[pick]))  # by address, then serial order
        sa = a.ravel()[pick][order]
        start = np.empty(len(sa), bool)
        start[0], start[1:] = True, sa[1:] != sa[:-1]
        group = np.cumsum(start) - 1
        heads = np.flatnonzero(start)
        rank = np.arange(len(sa)) - heads[group]
        src = [_from_regs(np.broadcast_to(r(st, sel.threads), (k, n)).ravel()[pick][order],
                          t, dt) for r in vals]
        value, cmp = src[-1], src[0] if len(src) == 2 else None
        cur = got[order][heads].copy()
        first = cur.copy()
        olds = np.empty(len(sa), dt)
        for r in range(int(rank.max()) + 1):
            at = np.flatnonzero(rank == r)
            g = group[at]
            olds[at] = cur[g]
            cur[g] = update(cur[g], value[at], None if cmp is None else cmp[at])
        changed = np.ones(len(heads), bool) if op != "CAS" else \
            first.view(f"u{nbytes}") != cur.view(f"u{nbytes}")
        if changed.any():
            flat = pick[order][heads][changed]
            keep = np.argsort(flat)
            mask = np.zeros(k * n, bool)
            mask[flat] = True
            _global(st, sel, ins, a, mask.reshape(k, n), nbytes,
                    cur[changed][keep].view(f"u{nbytes}"), what="atomic")
        out = np.zeros(k * n, dt)
        out[pick[order]] = olds
        w(st, sel, _to_regs(out.reshape(k, n), t))
    return run
