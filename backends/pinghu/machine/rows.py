"""Instruction semantics of the interpreter: one builder per instruction *family*.

A builder takes one :class:`~..isa.program.Instruction` and returns a closure
``run(st, sel)`` that executes it for every selected thread at once. The register file
is register-major, ``st.R`` of shape (registers, threads) uint32, so a run ``R[8:40]``
over the selected threads is ``R[8:40, sel.threads]``: a contiguous block when every
thread is selected. ``sel.threads`` is a slice (the common case: views, no copies) or an
index array; ``sel.mask`` is None (every element writes) or a boolean array (1, n) /
(count, n) from the active lanes and the guard. Values are arrays of shape
(elements, threads); 64-bit values (register pairs, low word in the even register) are
assembled from and split into their two rows on access. Operands are resolved when the
program is decoded: a register or run becomes a row range, an immediate a (1, 1) numpy
constant, a ``c[...]`` a (1, 1) view of the launch's constant bank. Results are computed
from whole arrays before anything is written, so runs read all elements first.

Scalar rules come from :mod:`mutile.ir.semantics` (division, remainder, float -> int
conversion; numpy's shifts already follow its rule for counts of at least the width), so
the interpreter computes what the llvm backend computes. When every selected element
writes and the threads are a slice, results are computed straight into the destination
rows (``elementwise``'s ``into``).
:data:`IMPLS` maps every family of the table to its builder (a test checks every row);
the other families' modules (:mod:`.units.lsu`, :mod:`.units.warp`, :mod:`.units.debug`,
:mod:`.units.barriers` and its engines) register theirs when :mod:`.scheduler` imports them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mutile.ir import types as T


from ..isa.operands import PT, RZ, CBank, FloatImm, IntImm, Pred, PredRun, Reg, Run

# register type suffix -> (value type, registers per value)
VIEW = {"F32": ("f32", 1), "F64": ("f64", 2), "S32": ("i32", 1), "U32": ("u32", 1),
        "B32": ("u32", 1), "S64": ("i64", 2), "U64": ("u64", 2), "B64": ("u64", 2)}
DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32,
          "i64": np.int64, "u64": np.uint64}
SCALAR = {"F64": T.f64, "F32": T.f32, "F16": T.f16, "BF16": T.bf16, "F8E4M3": T.f8e4m3,
          "F8E5M2": T.f8e5m2, "F8E4B8": T.f8e4b8, "F8E5B16": T.f8e5b16, "S64": T.i64,
          "U64": T.u64, "S32": T.i32, "U32": T.u32,
          "S16": T.i16, "U16": T.u16, "S8": T.i8, "U8": T.u8}

IMPLS: dict = {}


def impl(*families):
    """Register a builder for the named families."""
    def deco(fn):
        for f in families:
            assert f not in IMPLS, f
            IMPLS[f] = fn
        return fn
    return deco


def build(ins):
    """The closure (or control descriptor) executing ``ins``; KeyError if the family has
    no builder."""
    return IMPLS[ins.op.family](ins)


@dataclass(frozen=True)
class Control:
    """A control-flow row for the scheduler: ``kind`` is BRA, SSY, SYNC, EXIT, BAR or
    ASYNC; ``target`` the branch/reconvergence pc, ``bar`` the barrier id; ASYNC rows
    (:mod:`.units.barriers`) are run by ``fn(st, step, warps, executing lane masks,
    machine)``, which also moves the warps' pcs."""
    kind: str
    target: int = -1
    bar: int = -1
    fn: object = None


# ---------------------------------------------------------------- operand access
def const(value: int, view: str) -> np.ndarray:
    """A (1, 1) array holding integer ``value`` (signed or unsigned) as type ``view``."""
    dt = np.dtype(DTYPES[view])
    u = np.array([[value % (1 << (8 * dt.itemsize))]], f"u{dt.itemsize}")
    return u.view(dt)


def registers(v, width: int) -> tuple[int, int]:
    """Registers [r0, r1) a Reg of a ``width``-register slot, or a Run, names."""
    return (v.n, v.n + width) if isinstance(v, Reg) else (v.start, v.end)


def wide(view: str) -> bool:
    """Whether values of type ``view`` take a register pair."""
    return view in ("f64", "i64", "u64")


def get_pairs(R, r0: int, r1: int, threads, dt) -> np.ndarray:
    """The 64-bit values of pairs r0, r0+2 .. < r1 (low word in the even register) of
    ``threads``, as an array (pairs, n) of ``dt``."""
    lo = R[r0:r1:2, threads]
    out = np.empty(lo.shape + (2,), np.uint32)
    out[..., 0] = lo
    out[..., 1] = R[r0 + 1:r1:2, threads]
    return out.view(dt)[..., 0]


def reader(v, view: str, width: int = 0):
    """A function ``(st, threads) -> array`` (2-D, broadcastable to (count, n)) reading
    source value ``v`` as type ``view``; ``width``: registers per element of the slot
    (default: the type's)."""
    width = width or (2 if wide(view) else 1)
    if isinstance(v, Reg) and v.n == RZ:
        z = const(0, view)
        return lambda st, th: z
    if isinstance(v, (Reg, Run)):
        r0, r1 = registers(v, width)
        if wide(view):
            dt = DTYPES[view]
            return lambda st, th: get_pairs(st.R, r0, r1, th, dt)
        return lambda st, th: st.reg[view][r0:r1, th]
    if isinstance(v, IntImm):
        k = const(v.value, view)
        return lambda st, th: k
    if isinstance(v, FloatImm):
        k = np.array([[v.bits]], np.uint32).view(np.float32)
        k = k if view == "f32" else k.view(np.uint32) if view == "u32" else k.astype(DTYPES[view])
        return lambda st, th: k
    if isinstance(v, CBank):
        i = v.offset // np.dtype(DTYPES[view]).itemsize
        return lambda st, th: st.cb[view][i]
    if isinstance(v, (Pred, PredRun)):
        return pred_reader(v)
    raise TypeError(f"no reader for {v!r}")


def pred_reader(p):
    """``(st, threads) -> bool array`` of a source predicate, ``!P``, ``PT`` or a run."""
    if isinstance(p, Pred):
        if p.n == PT:
            k = np.array([[not p.neg]])
            return lambda st, th: k
        s, e = p.n, p.n + 1
    else:
        s, e = p.start, p.end
    if p.neg:
        return lambda st, th: ~st.P[s:e, th]
    return lambda st, th: st.P[s:e, th]


def store(arr, sel, rows: slice, val, rep: int = 1) -> None:
    """``arr[rows, sel.threads] = val`` where ``sel.mask`` allows (``rep`` registers per
    mask element)."""
    mask = sel.mask
    if mask is None:
        arr[rows, sel.threads] = val
        return
    if rep > 1 and mask.shape[0] > 1:
        mask = np.repeat(mask, rep, axis=0)
    if sel.is_slice:
        np.copyto(arr[rows, sel.threads], val, casting="unsafe", where=mask)
    else:
        arr[rows, sel.threads] = np.where(mask, val, arr[rows, sel.threads])


def writer(v, view: str, width: int = 0):
    """A function ``(st, sel, value)`` writing destination ``v`` (register/run as type
    ``view``, or a predicate/predicate run when ``view`` is "pred") under ``sel.mask``.
    Writes to RZ and PT are dropped."""
    if view == "pred":
        if isinstance(v, Pred) and v.n == PT:
            return lambda st, sel, val: None
        rows = slice(v.n, v.n + 1) if isinstance(v, Pred) else slice(v.start, v.end)
        return lambda st, sel, val: store(st.P, sel, rows, val)
    if isinstance(v, Reg) and v.n == RZ:
        return lambda st, sel, val: None
    width = width or (2 if wide(view) else 1)
    r0, r1 = registers(v, width)
    if wide(view):
        dt, k = DTYPES[view], (r1 - r0) // 2
        lo, hi = slice(r0, r1, 2), slice(r0 + 1, r1, 2)

        def write_pairs(st, sel, val):
            val = np.asarray(val).astype(dt, copy=False)
            words = np.ascontiguousarray(val).view(np.uint32).reshape(val.shape + (2,))
            if sel.mask is None and sel.is_slice:        # both words in one pass
                st.R[r0:r1, sel.threads].reshape(k, 2, sel.n)[...] = \
                    np.moveaxis(words, -1, -2)
                return
            words = np.broadcast_to(words, (k, sel.n, 2))
            store(st.R, sel, lo, words[..., 0])
            store(st.R, sel, hi, words[..., 1])
        return write_pairs
    rows, rep = slice(r0, r1), width
    return lambda st, sel, val: store(st.reg[view], sel, rows, val, rep)


def elements(ins) -> int:
    """Elements of ``ins``'s runs, 1 when it has none."""
    return ins.count or 1


def target(v, view: str):
    """``(st, threads) -> array``: the destination rows of ``v`` (type ``view``, or a
    predicate/predicate run for "pred") for threads given by a slice, as a view results
    can be computed into; None for RZ, PT and 64-bit pairs (no such view)."""
    if view == "pred":
        if isinstance(v, Pred) and v.n == PT:
            return None
        rows = slice(v.n, v.n + 1) if isinstance(v, Pred) else slice(v.start, v.end)
        return lambda st, th: st.P[rows, th]
    if wide(view) or (isinstance(v, Reg) and v.n == RZ):
        return None
    r0, r1 = registers(v, 1)
    return lambda st, th: st.reg[view][r0:r1, th]


def elementwise(ins, fn, srcs: list, dst: str, into=None):
    """``d = fn(*sources)``: operand 0 is the destination (type ``dst``), operands 1..
    the sources with the given value types. ``into(*sources, out=rows)`` computes the
    same straight into the destination rows (default: ``fn`` itself when it is a numpy
    ufunc whose sources and destination have one type); it is used when every selected
    element writes (no mask) and the threads are a slice, which saves a copy."""
    w = writer(ins.operands[0], dst)
    rs = [reader(v, t) for v, t in zip(ins.operands[1:], srcs)]
    if into is None and isinstance(fn, np.ufunc) and (dst == "pred" or set(srcs) == {dst}):
        into = fn
    dest = target(ins.operands[0], dst) if into is not None else None
    if dest is None:
        if len(rs) == 1:
            r0, = rs
            return lambda st, sel: w(st, sel, fn(r0(st, sel.threads)))
        if len(rs) == 2:
            r0, r1 = rs
            return lambda st, sel: w(st, sel, fn(r0(st, sel.threads), r1(st, sel.threads)))
        r0, r1, r2 = rs
        return lambda st, sel: w(st, sel, fn(r0(st, sel.threads), r1(st, sel.threads),
                                             r2(st, sel.threads)))

    def run(st, sel):
        th = sel.threads
        args = [r(st, th) for r in rs]
        if sel.mask is None and sel.is_slice:
            into(*args, out=dest(st, th))
        else:
            w(st, sel, fn(*args))
    return run


def fault_first(st, sel, ins, bad, pick, headline) -> None:
    """Raise the core dump for the bad element of the lowest thread (then the lowest
    element): ``bad`` flags elements of the (count, n) array flattened, or of its
    elements listed by flat index in ``pick``; ``headline(j)`` describes bad entry j
    (text, or (text, attributes for the DeviceFault))."""
    js = np.flatnonzero(bad)
    flat = pick[js] if pick is not None else js
    e, i = np.divmod(flat, sel.n)
    j = int(np.argmin(i * (int(e.max()) + 1) + e))
    head = headline(int(js[j]))
    text, info = head if isinstance(head, tuple) else (head, {})
    st.fault(sel, int(i[j]), int(e[j]) if ins.count else None, text, info)


def _view(ins, key: str = "type") -> str:
    return VIEW[ins.op.attrs[key]][0]


