"""The LSU instructions: loads and stores of global, shared and local memory.

Every access first tries a *plan* that checks all its elements at once from the extremes
of the base registers (min, max, and their OR for alignment) and moves the data with one
``np.take`` or fancy assignment; whatever the quick checks cannot clear (an element out of
bounds or misaligned, several global regions, a read-only region, the shared sanitizer)
runs the checked path of :mod:`..memory`, which reports the first bad element. Plans:

* global: the address pairs share their high word and fall in one region: one index
  (low word - region base) per element;
* shared, *block-uniform*: every block of the selection computes the same addresses
  (they derive from the thread index, the usual case): the address pattern of one block
  is checked and indexed; when it is ``p0 + element * s + thread * t`` a strided view
  of every block's stretch is read or written with plain copies, otherwise each block
  gathers the pattern from its own stretch (``np.take(..., axis=1)``), cache-friendly
  (stores whose elements could share an address keep the flat path and its order);
* local, *uniform*: one address per element for all threads (spills): whole rows of the
  word-interleaved local table;
* otherwise one flat index per element (shared, local).

Values travel in *word form* ``(elements, words, blocks, threads per block)``: the 4-byte
words of an element (1 for narrower types, which keep their own dtype) in register order,
so a load writes its destination registers with one assignment. Masked-off elements of a
load read a selected element's address (their values are not written); those of a store
write on-chip memory's spare slot, or are left out (global).
"""
from __future__ import annotations

import numpy as np

from ..memory import WIDTHS, _global, _onchip
from ..rows import elements, impl, reader, registers, store, writer
from ...isa.operands import RZ, Reg, Run

# Tests set this to build only the checked paths, the reference the plans are compared to.
CHECKED_ONLY = False

_LOADS = {"U8": (1, np.uint8, "u32"), "S8": (1, np.int8, "i32"), "U16": (2, np.uint16, "u32"),
          "S16": (2, np.int16, "i32"), "B32": (4, np.uint32, "u32"),
          "B64": (8, np.uint64, "u64"), "B128": (16, np.uint32, "u32")}
_STORES = {"B8": (1, "u32"), "B16": (2, "u32"), "B32": (4, "u32"), "B64": (8, "u64"),
           "B128": (16, "u32")}


def _is_rz(v) -> bool:
    return isinstance(v, Reg) and v.n == RZ


# ---------------------------------------------------------------- checked paths
def _address(ins, m):
    """``(st, sel) -> int64 addresses (count, n)`` of memory operand ``m``."""
    k = elements(ins)
    off = m.offset
    if ins.op.attrs["space"] == "GLOBAL":
        r = reader(m.base, "i64")
        return lambda st, sel: np.broadcast_to(r(st, sel.threads) + off, (k, sel.n))
    r = reader(m.base, "u32")
    return lambda st, sel: np.broadcast_to(r(st, sel.threads).astype(np.int64) + off,
                                           (k, sel.n))


def _access(ins):
    space = ins.op.attrs["space"]
    if space == "GLOBAL":
        return lambda st, sel, a, m, nb, vals=None: _global(st, sel, ins, a, m, nb, vals)
    return lambda st, sel, a, m, nb, vals=None: _onchip(st, sel, ins, a, m, nb, space, vals)


def _load_checked(ins):
    nbytes, dt, view = _LOADS[ins.op.attrs["type"]]
    d, m = ins.operands
    k = elements(ins)
    addr, access = _address(ins, m), _access(ins)
    w = writer(d, view, 4 if nbytes == 16 else 0)
    quad = nbytes == 16
    wide = {"u32": np.uint32, "i32": np.int32, "u64": np.uint64}[view]

    def run(st, sel):
        a = addr(st, sel)
        got, pick = access(st, sel, a, sel.mask, nbytes)
        got = got.view(dt)
        if pick is not None:
            full = np.zeros((a.size,) + got.shape[1:], got.dtype)
            full[pick] = got
            got = full
        if quad:                      # (k * n, 4) -> rows 4 * element + word
            got = got.reshape(k, sel.n, 4).transpose(0, 2, 1)
        w(st, sel, got.reshape(4 * k if quad else k, sel.n).astype(wide, copy=False))
    return run


def _store_checked(ins):
    nbytes, view = _STORES[ins.op.attrs["type"]]
    m, s = ins.operands
    k = elements(ins)
    addr, access = _address(ins, m), _access(ins)
    val = reader(s, view, 4 if nbytes == 16 else 0)
    dt = WIDTHS.get(nbytes, np.uint32)

    def run(st, sel):
        a = addr(st, sel)
        v = val(st, sel.threads)
        if nbytes == 16:
            v = np.broadcast_to(v, (max(v.shape[0], 4), sel.n)).reshape(-1, 4, sel.n)
            v = np.broadcast_to(v.transpose(0, 2, 1), (k, sel.n, 4)).reshape(-1, 4)
        else:
            v = np.broadcast_to(v, a.shape).astype(dt, copy=False).ravel()
        mask = sel.mask
        if mask is not None:
            pick = np.flatnonzero(np.broadcast_to(mask, a.shape))
            v = v[pick]
        access(st, sel, a, mask, nbytes, v)
    return run


# ---------------------------------------------------------------- helpers
def _first(mask) -> tuple[int, int]:
    """(row, column) of the first selected element of a (rows, n) mask."""
    return divmod(int(np.argmax(mask)), mask.shape[1])


def _filled(x, mask):
    """``x`` with unselected elements replaced by the first selected one (so that they
    hold a valid address; their results are discarded)."""
    r, c = _first(mask)
    return np.where(mask, x, x[min(r, x.shape[0] - 1), min(c, x.shape[1] - 1)])


def _aligned(x, off: int, nbytes: int) -> bool:
    return nbytes == 1 or (off % nbytes == 0
                           and not int(np.bitwise_or.reduce(x, axis=None)) & (nbytes - 1))


def _inside(x, off: int, nbytes: int, size: int) -> bool:
    """Whether every address ``x + off`` (x: uint32 array) is an aligned access inside
    ``size`` bytes."""
    return int(x.min()) + off >= 0 and int(x.max()) + off + nbytes <= size \
        and _aligned(x, off, nbytes)


def _word_form(v, nbytes: int):
    """Gathered values (elements, blocks, threads per block[, 4]) (8 bytes: uint64) ->
    word form (elements, words, blocks, threads per block)."""
    if nbytes == 16:
        return np.moveaxis(v, -1, 1)
    if nbytes == 8:
        return np.moveaxis(v.view(np.uint32).reshape(v.shape + (2,)), -1, 1)
    return v[:, None]


def _values(w, nbytes: int):
    """Word form (elements, words, ...) -> the values a typed view stores (..., [4])."""
    if nbytes == 16:
        return np.moveaxis(w, 1, -1)
    if nbytes == 8:
        out = np.empty(w.shape[:1] + w.shape[2:] + (2,), np.uint32)
        out[..., 0], out[..., 1] = w[:, 0], w[:, 1]
        return out.view(np.uint64)[..., 0]
    return w[:, 0]


def _rows_cols(rows, threads):
    """Index of word rows (elements, words) of the local table for ``threads``."""
    if isinstance(threads, slice):
        return rows, threads
    return rows[..., None], threads


def const_local(ins, m, nbytes: int) -> bool:
    """Whether ``m`` is a constant, aligned local address of a 4-byte-or-wider access."""
    return ins.op.attrs["space"] == "LOCAL" and _is_rz(m.base) and nbytes >= 4 \
        and m.offset >= 0 and m.offset % nbytes == 0


def _first_row(d) -> int:
    return d.start if isinstance(d, Run) else d.n


# ---------------------------------------------------------------- plans
def _global_plan(ins, m, nbytes: int, store: bool):
    """``(st, sel, mask) -> (region, index (rows, n)) | None``: view indices of a global
    access whose elements all fall in one region and share the high address word."""
    off = m.offset
    if not isinstance(m.base, (Reg, Run)) or _is_rz(m.base):
        return lambda st, sel, mask: None
    r0, r1 = registers(m.base, 2)
    lo_rows, hi_rows = slice(r0, r1, 2), slice(r0 + 1, r1, 2)
    shift = np.uint32(nbytes.bit_length() - 1)

    def region(st, lo, hi):
        """The region holding every address, or None."""
        h = int(hi.min())
        if h != int(hi.max()):
            return None
        g, top = st.glob, h << 32
        first, last = top + int(lo.min()) + off, top + int(lo.max()) + off
        i = int(np.searchsorted(g.starts, first, side="right")) - 1
        if i < 0 or first < g.starts[i] or last + nbytes > g.ends[i] \
                or not _aligned(lo, off, nbytes) or (store and g.regions[i].readonly):
            return None
        return g.regions[i], top

    def plan(st, sel, mask):
        lo, hi = st.R[lo_rows, sel.threads], st.R[hi_rows, sel.threads]
        got = region(st, lo, hi)
        if got is None and mask is not None:    # unselected elements may point anywhere
            lo, hi = _filled(lo, mask), _filled(hi, mask)
            got = region(st, lo, hi)
        if got is None:
            return None
        r, top = got
        idx = np.subtract(lo, np.int64(r.start - top - off + r.shift[nbytes]))
        return r, idx >> shift if nbytes > 1 else idx
    return plan


def _onchip_plan(ins, m, nbytes: int, store: bool):
    """``(st, sel, mask) -> (kind, table, index) | None`` of a shared or local access:
    kind "strided" (shared, block-uniform and affine: ``table`` a strided view of the
    elements, (rows, blocks, threads per block[, words])), "gather" (shared, block-uniform
    loads: ``table`` a typed view from the first block and the offset, ``index`` (rows,
    n)), "rows" (local, uniform: ``index`` the first word row of each element (rows, 1))
    or "flat" (``index`` int64 per element: byte addresses for local, view indices for
    shared)."""
    space, off, count = ins.op.attrs["space"], m.offset, elements(ins)
    rb = reader(m.base, "u32")
    shift = np.uint32(nbytes.bit_length() - 1)
    shared = space == "SHARED"
    rows = None if _is_rz(m.base) or not isinstance(m.base, (Reg, Run)) \
        else registers(m.base, 1)

    def plan(st, sel, mask):
        if shared and st.sanitizer is not None:
            return None
        mem = st.shared_mem if shared else st.local_mem
        base = rb(st, sel.threads)
        if mask is None or not store if shared else \
                nbytes >= 4 and (mask is None or not store):
            got = _blocks(st, sel, mem, base, off, nbytes, rows, store, count) if shared else \
                _rows(st, sel, mem, base, off, nbytes)
            if got is not None:
                return got
        if not _inside(base, off, nbytes, mem.size):
            if mask is None:
                return None
            base = _filled(base, mask)          # unselected elements may point anywhere
            if not _inside(base, off, nbytes, mem.size):
                return None
        if not shared:
            return "flat", mem, base.astype(np.int64) + off
        start = (st.thread_block[sel.threads] * mem.pad + off) >> int(shift)
        return "flat", mem, np.add(base >> shift if nbytes > 1 else base, start[None])
    return plan


def _blocks(st, sel, mem, base, off, nbytes, rows, store, count):
    """The "strided" or "gather" plan when every block of the selection has the same
    base addresses; whether registers ``rows`` do, and their pattern, is remembered until
    they change (:meth:`..state.State.stamp`), so the accesses that share an address run
    check once."""
    tpb = st.threads
    th = sel.threads
    if not sel.is_slice or th.start % tpb or sel.n % tpb or sel.n == tpb \
            or base.shape[1] not in (1, sel.n):
        return None
    entry = None
    if base.shape[1] == 1:
        pat = base
    else:
        key = (rows, th.start, th.stop)
        stamp = int(st.version[rows[0]:rows[1]].max())
        entry = st.plans.get(key)
        if entry is None or entry[0] != stamp:
            pat = base[:, :tpb]
            b3 = base.reshape(base.shape[0], -1, tpb)
            pat = pat.copy() if (b3 == pat[:, None, :]).all() else None
            entry = st.plans[key] = (stamp, pat, {})
        pat = entry[1]
        if pat is None:
            return None
    if not _inside(pat, off, nbytes, mem.size):
        return None
    shift = nbytes.bit_length() - 1
    idx = np.broadcast_to(pat.astype(np.int64) + off >> shift, (pat.shape[0], tpb))
    blocks = slice(th.start // tpb, th.stop // tpb)
    view = _strided(mem, blocks, idx, nbytes, store, count)
    if view is not None:
        return "strided", view, None
    if store:
        return None
    # one flat index per element, from the selection's first block and without the
    # offset (it moves the view instead), kept with the pattern
    full = entry[2].get(nbytes) if entry is not None else None
    if full is None:
        nblk, slots = blocks.stop - blocks.start, mem.pad >> shift
        full = (pat.astype(np.int64) >> shift)[:, None, :] + \
            (np.arange(nblk) * slots)[:, None]
        full = np.broadcast_to(full, (pat.shape[0], nblk, tpb)).reshape(pat.shape[0], -1)
        if entry is not None:
            entry[2][nbytes] = full
    return "gather", mem.views[nbytes][blocks.start * (mem.pad >> shift) + (off >> shift):], \
        full


def _strided(mem, blocks: slice, idx, nbytes: int, store: bool, count: int):
    """When a block's element indices ``idx`` (rows, threads per block) are ``p0 + row *
    s_row + thread * s_thread``: a strided view (rows, blocks, threads per block[, words])
    of those elements in every block (4-byte words for accesses of 4 bytes and more),
    which a plain copy reads or writes; for a store (of ``count`` elements), only if no
    two elements share an address (the order of such writes matters). Else None."""
    rows, tpb = idx.shape
    p0 = int(idx[0, 0])
    s_t = int(idx[0, 1]) - p0
    s_r = int(idx[1, 0]) - p0 if rows > 1 else 0
    if not np.array_equal(idx, p0 + s_r * np.arange(rows)[:, None] + s_t * np.arange(tpb)):
        return None
    if store and (s_t == 0 or rows != count or rows > 1 and not (
            abs(s_t) >= rows * abs(s_r) > 0 or abs(s_r) >= tpb * abs(s_t))):
        return None
    nw = nbytes // 4
    table = mem.blocks[4 if nw else nbytes][blocks]
    unit = table.itemsize * max(nw, 1)              # bytes per element
    flat = table.reshape(-1)[p0 * max(nw, 1):]
    shape = (rows, table.shape[0], tpb) + ((nw,) if nw else ())
    strides = (s_r * unit, table.strides[0], s_t * unit) + ((table.itemsize,) if nw else ())
    return np.lib.stride_tricks.as_strided(flat, shape, strides)


def _rows(st, sel, mem, base, off, nbytes):
    """The "rows" plan of a local access whose elements each have one address for every
    thread: the first word row of each element."""
    col = base[:, :1]
    if base.shape[1] != 1 and not (base == col).all():
        return None
    if not _inside(col, off, nbytes, mem.size):
        return None
    return "rows", mem, (col.astype(np.int64) + off) >> 2


# ---------------------------------------------------------------- loads
def _load_writer(d, view: str, k: int, nw: int):
    """``(st, sel, words)``: write word form (rows, nw, blocks, threads per block) to the
    destination registers (``nw`` per element) under ``sel.mask``."""
    if _is_rz(d):
        return lambda st, sel, v: None
    rows = slice(_first_row(d), _first_row(d) + k * nw)

    def write(st, sel, v):
        if sel.mask is None and sel.is_slice:
            dest = st.reg[view][rows, sel.threads]
            dest.reshape((k, nw) + v.shape[2:], copy=False)[...] = v
            return
        flat = np.broadcast_to(v, (k, nw) + v.shape[2:]).reshape(k * nw, sel.n)
        store(st.reg[view], sel, rows, flat, nw)
    return write


@impl("LSU.LD")
def _load(ins):
    nbytes, dt, view = _LOADS[ins.op.attrs["type"]]
    d, m = ins.operands
    k = elements(ins)
    nw = max(1, nbytes // 4)
    checked = _load_checked(ins)
    if CHECKED_ONLY:
        return checked
    glob = ins.op.attrs["space"] == "GLOBAL"
    plan = (_global_plan if glob else _onchip_plan)(ins, m, nbytes, False)
    w = _load_writer(d, "u32" if nbytes >= 4 else view, k, nw)
    direct = nbytes == 4 and not _is_rz(d)
    rows = slice(_first_row(d), _first_row(d) + k)

    if const_local(ins, m, nbytes):               # a spill slot: rows of the local table
        w0 = m.offset >> 2

        def run_const(st, sel):
            if m.offset + nbytes > st.local_mem.size:
                return checked(st, sel)
            w(st, sel, st.local_mem.table[w0:w0 + nw, sel.threads][None, :, None, :])
        return run_const

    def flat(st, sel, view, idx):
        """Gather elements ``idx`` (rows, n) of typed view ``view`` and write them."""
        if direct and sel.mask is None and sel.is_slice and idx.shape[0] == k:
            np.take(view, idx, out=st.R[rows, sel.threads], mode="clip")
            return
        v = np.take(view, idx, axis=0).view(dt)
        w(st, sel, _word_form(v.reshape((v.shape[0], 1) + v.shape[1:]), nbytes))

    def run(st, sel):
        got = plan(st, sel, sel.mask)
        if got is None:
            return checked(st, sel)
        if glob:
            return flat(st, sel, got[0].views[nbytes], got[1])
        kind, mem, idx = got
        if kind == "strided":                    # mem: (rows, blocks, tpb[, words])
            return w(st, sel, (np.moveaxis(mem, -1, 1) if nbytes >= 4 else mem[:, None])
                     .view(dt if nbytes < 4 else np.uint32))
        if kind == "gather":                     # mem: a typed view, idx (rows, n)
            return flat(st, sel, mem, idx)
        if kind == "rows":
            return w(st, sel, mem.table[_rows_cols(idx + np.arange(nw), sel.threads)]
                     [:, :, None, :])
        if mem is st.shared_mem:
            return flat(st, sel, mem.views[nbytes], idx)
        v = mem.gather(idx, st.thread_index[sel.threads], nbytes).view(dt)
        w(st, sel, _word_form(v.reshape((v.shape[0], 1) + v.shape[1:]), nbytes))
    return run


# ---------------------------------------------------------------- stores
def _store_words(s, nbytes: int, k: int):
    """``(st, threads) -> word form (k, words, n)`` of store source ``s`` (narrow
    stores: its low bytes)."""
    nw = max(1, nbytes // 4)
    r = reader(s, "u32", nw)
    narrow = WIDTHS[nbytes] if nbytes < 4 else None

    def words(st, th):
        x = r(st, th)
        if narrow is not None:
            x = x.astype(narrow)
        x = x.reshape(-1, nw, x.shape[-1]) if x.shape[0] % nw == 0 else x[:, None]
        return np.broadcast_to(x, (k, nw, x.shape[-1] if x.shape[-1] > 1 else 1))
    return words


@impl("LSU.ST")
def _store(ins):
    nbytes, _ = _STORES[ins.op.attrs["type"]]
    m, s = ins.operands
    k = elements(ins)
    nw = max(1, nbytes // 4)
    checked = _store_checked(ins)
    if CHECKED_ONLY:
        return checked
    glob = ins.op.attrs["space"] == "GLOBAL"
    plan = (_global_plan if glob else _onchip_plan)(ins, m, nbytes, True)
    words = _store_words(s, nbytes, k)
    if k == 1 and const_local(ins, m, nbytes):   # a spill slot: rows of the local table
        rows = slice(m.offset >> 2, (m.offset >> 2) + nw)

        def run_const(st, sel):
            if m.offset + nbytes > st.local_mem.size:
                return checked(st, sel)
            table, v = st.local_mem.table, words(st, sel.threads)[0]
            if not sel.is_slice:        # an index array: table[rows, threads] is a copy
                table[rows, sel.threads] = v if sel.mask is None else \
                    np.where(sel.mask, v, table[rows, sel.threads])
            elif sel.mask is None:
                table[rows, sel.threads] = v
            else:
                np.copyto(table[rows, sel.threads], v, where=sel.mask)
        return run_const

    def run(st, sel):
        mask = sel.mask
        got = plan(st, sel, mask)
        if got is None:
            return checked(st, sel)
        n = sel.n
        w = np.broadcast_to(words(st, sel.threads), (k, nw, n))
        if glob:
            region, idx = got
            st.glob.writes += 1
            v, idx = _values(w, nbytes), np.broadcast_to(idx, (k, n))
            if mask is not None:
                mask = np.broadcast_to(mask, (k, n))
                idx, v = idx[mask], v[mask]
            region.views[nbytes][idx] = v
            return
        kind, mem, idx = got
        if kind == "strided":                    # mem: (rows, blocks, tpb[, words])
            v = w.reshape((k, nw) + mem.shape[1:3])
            for e, j in np.ndindex(k, nw):       # one copy per register row (numpy
                if nbytes >= 4:                  # would walk the rows innermost)
                    mem[e, ..., j] = v[e, j]
                else:
                    mem[e] = v[e, 0]
            return
        if kind == "rows":
            mem.table[_rows_cols(np.broadcast_to(idx + np.arange(nw), (k, nw)),
                                 sel.threads)] = w
            return
        idx = np.broadcast_to(idx, (k, n))
        if mem is st.shared_mem:
            if mask is not None:                 # unselected elements write the spare slot
                idx = np.where(mask, idx, len(mem.views[nbytes]) - 1)
            mem.views[nbytes][idx] = _values(w, nbytes)
            return
        t, v = np.broadcast_to(st.thread_index[sel.threads], (k, n)), _values(w, nbytes)
        if mask is not None:
            mask = np.broadcast_to(mask, (k, n))
            idx, t, v = idx[mask], t[mask], v[mask]
        mem.scatter(idx, t, nbytes, v)
    return run
