"""The TME (Tensor Memory Engine) in the interpreter: ``TME.LD.TILE.{R}D`` copies a box
of a global tensor into shared memory, ``TME.ST.TILE.{R}D`` the other way; the layouts
(descriptor, box operand, swizzle) are :mod:`...isa.tensor_memory`'s.

Each executing thread issues one copy; the issue checks alignment and bounds (256-byte
aligned shared box inside the block's shared memory, a global base and non-innermost
byte strides 4-byte aligned and multiples of the element size, innermost box row a
multiple of 16 bytes, a box of at least 32 bytes, the AsyncBarrier initialized; the numbers
are the machine file's) and records the copy. A *load* lands at a completion event
(:meth:`.barriers.AsyncUnit.settle`): the box's elements inside the tensor are read
from global memory (bounds-checked like an LSU load), the others are the fill (0, or the
type's NaN); the box is written row-major, dim 0 outermost, to
``swizzle_address(s + index * size)``; then the barrier's transaction bytes drop by the
box's bytes (below zero is a fault naming the ADD_TRANS and TME lines) and its phase may
complete. A *store* reads the box from shared memory when its warp's ``TME.ST.WAIT``
covers it (committed with ``TME.ST.COMMIT``) or when the warp exits, and writes the
elements inside the tensor. Copies of one pc land together, as numpy operations over all
their elements.
"""
from __future__ import annotations

import numpy as np

from .engine import NBARS, Engine, stepping_row, thread_fault, values, values1, where
from ..rows import impl
from ...isa.tensor_memory import (ELEMENTS, FILL_NAN, GLOBAL_ALIGN, LINE, ROW_UNIT, SHARED_ALIGN,
    TME_MIN_BOX_BYTES, fill_bits, swizzle_address, unpack_box)

SIZES = np.array([size for _, size in ELEMENTS], np.int64)
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_BIG = np.iinfo(np.int64).max


class Copies:
    """The TME copies one execution of a TME row issued (one per executing thread): the
    per-copy arrays ``threads``, ``smem`` (shared byte address), ``base``, ``info``,
    ``dims``/``strides``/``coords`` (copies, rank), ``keys`` (barrier keys, loads),
    ``ids`` (sanitizer copy ids), ``committed`` (stores)."""

    FIELDS = ("threads", "smem", "base", "info", "dims", "strides", "coords", "keys", "ids",
              "committed")

    def __init__(self, pc: int, rank: int, box: tuple, swizzle: int, **arrays):
        self.pc, self.rank, self.box, self.swizzle = pc, rank, box, swizzle
        for f in self.FIELDS:
            setattr(self, f, arrays.get(f))

    @staticmethod
    def issued(st, pc, rank, box, swizzle, threads, s_op, d_op, c_op) -> "Copies":
        desc = values(st, d_op, threads).astype(np.int64)
        coords = np.atleast_2d(values(st, c_op, threads)).view(np.int32)
        return Copies(pc, rank, box, swizzle, threads=threads,
                      smem=values1(st, s_op, threads).astype(np.int64),
                      base=desc[0] | desc[1] << 32, info=desc[2],
                      dims=desc[3:3 + rank].T, strides=desc[3 + rank:3 + 2 * rank].T,
                      coords=coords.T.astype(np.int64),
                      committed=np.zeros(len(threads), bool))

    def subset(self, rows) -> "Copies":
        return Copies(self.pc, self.rank, self.box, self.swizzle,
                      **{f: None if getattr(self, f) is None else getattr(self, f)[rows]
                         for f in self.FIELDS})

    @staticmethod
    def concat(parts: list) -> "Copies":
        if len(parts) == 1:
            return parts[0]
        p = parts[0]
        return Copies(p.pc, p.rank, p.box, p.swizzle, **{
            f: None if getattr(p, f) is None else np.concatenate([getattr(q, f) for q in parts])
            for f in Copies.FIELDS})

    @property
    def code(self) -> np.ndarray:
        return self.info & 0xF

    @property
    def elements(self) -> int:
        return int(np.prod(self.box))

    # ------------------------------------------------------------ issue checks
    def check(self, st, what: str) -> None:
        """Fault (at the first bad copy's thread) unless every copy is well-formed."""
        code = self.code
        self._bad(st, code >= len(ELEMENTS), lambda j: (
            f"the TME descriptor's element code {int(code[j])} is not one of 0 .. "
            f"{len(ELEMENTS) - 1}"))
        size = SIZES[code]
        rank = self.info >> 4 & 7
        self._bad(st, rank != self.rank, lambda j: (
            f"the TME descriptor has rank {int(rank[j])}; this instruction copies a "
            f"{self.rank}-D box"))
        self._bad(st, self.smem % SHARED_ALIGN != 0, lambda j: (
            f"misaligned {what}: shared address 0x{int(self.smem[j]):x} is not a multiple "
            f"of {SHARED_ALIGN}"))
        nbytes = self.elements * size
        mem = st.shared_mem.size
        foot = self._footprint(nbytes)
        self._bad(st, foot > mem, lambda j: (
            f"{what} out of shared memory: the box {'x'.join(map(str, self.box))} "
            f"({int(nbytes[j])} bytes) at shared address 0x{int(self.smem[j]):x} does not "
            f"fit the block's {mem} bytes of shared memory (.shared {mem})"))
        self._bad(st, self.base % GLOBAL_ALIGN != 0, lambda j: (
            f"misaligned {what}: the descriptor's global base address 0x{int(self.base[j]):x}"
            f" is not a multiple of {GLOBAL_ALIGN}"))
        self._bad(st, self.strides[:, -1] != size, lambda j: (
            f"bad TME descriptor: the innermost byte stride {int(self.strides[j, -1])} is not "
            f"the element size {int(size[j])}"))
        outer = (self.strides[:, :-1] % GLOBAL_ALIGN != 0)
        self._bad(st, outer.any(axis=1), lambda j: (
            f"misaligned {what}: byte stride {int(self.strides[j, np.argmax(outer[j])])} of "
            f"dimension {int(np.argmax(outer[j]))} is not a multiple of {GLOBAL_ALIGN}"))
        # elements are naturally aligned in this model's memory (as for LSU accesses)
        self._bad(st, self.base % size != 0, lambda j: (
            f"misaligned {what}: the descriptor's global base address 0x{int(self.base[j]):x}"
            f" is not a multiple of the element size {int(size[j])}"))
        odd = self.strides[:, :-1] % size[:, None] != 0
        self._bad(st, odd.any(axis=1), lambda j: (
            f"misaligned {what}: byte stride {int(self.strides[j, np.argmax(odd[j])])} of "
            f"dimension {int(np.argmax(odd[j]))} is not a multiple of the element size "
            f"{int(size[j])}"))
        row = self.box[-1] * size
        self._bad(st, row % ROW_UNIT != 0, lambda j: (
            f"misaligned {what}: the box's innermost dimension ({self.box[-1]} elements of "
            f"{int(size[j])} bytes) is not a multiple of {ROW_UNIT} bytes"))
        self._bad(st, nbytes < TME_MIN_BOX_BYTES, lambda j: (
            f"{what} of a box too small: {'x'.join(map(str, self.box))} elements of "
            f"{int(size[j])} bytes are {int(nbytes[j])} bytes; a TME box is at least "
            f"{TME_MIN_BOX_BYTES} bytes"))

    def _bad(self, st, bad: np.ndarray, text) -> None:
        if bad.any():
            j = int(np.argmax(bad))
            thread_fault(st, self.threads[j], self.pc, text(j))

    def _footprint(self, nbytes: np.ndarray) -> np.ndarray:
        """One past the highest shared byte each copy's (swizzled) box touches."""
        end = self.smem + nbytes
        if not self.swizzle:
            return end
        out = end.copy()
        for j in np.flatnonzero(end % LINE).tolist():
            line = end[j] // LINE * LINE
            units = swizzle_address(np.arange(line, end[j], self.swizzle), self.swizzle)
            out[j] = max(int(end[j]), int(units.max()) + self.swizzle)
        return out

    # ------------------------------------------------------------ geometry
    def _dims(self):
        """Per dimension: the coordinates (copies, box_i) and whether they are inside."""
        for i in range(self.rank):
            ci = self.coords[:, i, None] + np.arange(self.box[i])
            yield i, ci, (ci >= 0) & (ci < self.dims[:, i, None])

    def _grid(self, per_dim, start) -> np.ndarray:
        """(copies, elements) row-major: ``start`` (copies,) combined with the per-dim
        arrays (copies, box_i) by broadcasting (sum, or AND for bools)."""
        L, R = len(self.threads), self.rank
        out = start.reshape((L,) + (1,) * R)
        for i, x in enumerate(per_dim):
            shape = [L] + [1] * R
            shape[1 + i] = self.box[i]
            out = (out & x.reshape(shape)) if x.dtype == bool else out + x.reshape(shape)
        return np.broadcast_to(out, (L,) + tuple(self.box)).reshape(L, -1)

    def inside(self) -> np.ndarray | None:
        """Which elements lie inside the tensor's dims (copies, elements); None: all."""
        masks = [m for _, _, m in self._dims()]
        if all(m.all() for m in masks):
            return None
        return self._grid(masks, np.ones(len(self.threads), bool))

    def extent(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lowest, highest) global address of each copy's elements inside the tensor, and
        whether it has any."""
        lo, hi = self.base.copy(), self.base.copy()
        has = np.ones(len(self.threads), bool)
        for i, ci, m in self._dims():
            t = ci * self.strides[:, i, None]
            has &= m.any(axis=1)
            lo += np.where(m, t, _BIG).min(axis=1, initial=_BIG)
            hi += np.where(m, t, -_BIG).max(axis=1, initial=-_BIG)
        return np.where(has, lo, 0), np.where(has, hi, 0), has

    def element_index(self, origin: np.ndarray, size: int) -> np.ndarray:
        """``origin`` (copies,) plus each element's global offset in elements of ``size``
        bytes (strides are multiples of the size), (copies, elements)."""
        return self._grid([ci * (self.strides[:, i, None] // size) for i, ci, _ in self._dims()],
                          origin)

    def global_addresses(self) -> np.ndarray:
        """Global byte address of every element (copies, elements)."""
        return self._grid([ci * self.strides[:, i, None] for i, ci, _ in self._dims()],
                          self.base)

    def shared_index(self, st, size: int) -> np.ndarray:
        """Indices into the ``size``-byte view of the wave's shared memory of every box
        element (copies, elements); the swizzle depends on the box start only."""
        uniq, inv = np.unique(self.smem, return_inverse=True)
        logical = uniq[:, None] + np.arange(self.elements) * size
        elems = swizzle_address(logical, self.swizzle) // size
        off = st.thread_block[self.threads] * (st.shared_mem.pad // size)
        return elems[inv] + off[:, None]

    def element_name(self, j: int, e: int) -> str:
        idx = np.unravel_index(e, self.box)
        at = tuple(int(c + i) for c, i in zip(self.coords[j], idx))
        return f"element {tuple(int(i) for i in idx)} of the box, coordinates {at}"


def every_byte(elems: np.ndarray, size: int) -> np.ndarray:
    """Byte offsets (rows, elements * size) of ``size``-byte elements with indices
    ``elems`` (rows, elements)."""
    return (elems[..., None] * size + np.arange(size)).reshape(elems.shape[0], -1)


# ---------------------------------------------------------------- global side
def _regions(st, c: Copies, size: int, what: str) -> np.ndarray:
    """The region index of each copy's elements (-1: none inside); faults like an LSU
    access at the first element outside every array."""
    g = st.glob
    lo, hi, has = c.extent()
    r_lo, r_hi = g.locate(lo, size), g.locate(hi, size)
    ok = ~has | ((r_lo >= 0) & (r_lo == r_hi))
    if not ok.all():
        j = int(np.argmax(~ok))
        inside = c.inside()
        cols = np.flatnonzero(inside[j]) if inside is not None else np.arange(c.elements)
        addr = c.global_addresses()[j, cols]
        loc = g.locate(addr, size)
        e = int(np.argmax(loc < 0)) if (loc < 0).any() else int(np.argmax(loc != loc[0]))
        a = int(addr[e])
        text, info = g.where(a, size)
        thread_fault(st, c.threads[j], c.pc, f"out-of-bounds global {what} of {size} bytes at "
                     f"address 0x{a:x} ({c.element_name(j, int(cols[e]))}): {text}", info)
    return np.where(has, r_lo, -1)


def _index(st, c: Copies, region: int, size: int) -> np.ndarray:
    """Indices into region ``region``'s ``size``-byte view of every element of ``c``."""
    r = st.glob.regions[region]
    return c.element_index((c.base - (r.start + r.shift[size])) // size, size)


def read_global(st, c: Copies, inside, size: int) -> np.ndarray:
    """The elements inside the tensor (others 0), (copies, elements) of uint<size>."""
    region = _regions(st, c, size, "load")
    out = np.zeros((len(c.threads), c.elements), UINT[size])
    for ri in np.unique(region[region >= 0]).tolist():
        rows = region == ri
        part = c if rows.all() else c.subset(rows)
        idx = _index(st, part, ri, size)
        got = np.take(st.glob.regions[ri].views[size], idx, mode="clip")
        if rows.all():
            out = got
        else:
            out[rows] = got
    return out


def write_global(st, c: Copies, inside, size: int, vals) -> None:
    """Store the elements inside the tensor."""
    st.glob.writes += 1
    region = _regions(st, c, size, "store")
    for ri in np.unique(region[region >= 0]).tolist():
        rows = region == ri
        r = st.glob.regions[ri]
        if r.readonly:
            thread_fault(st, c.threads[int(np.argmax(rows))], c.pc, f"global store to "
                         f"read-only {r.describe()} by the TME copy")
        idx, v = _index(st, c.subset(rows), ri, size), vals[rows]
        if inside is not None:
            m = inside[rows]
            idx, v = idx[m], v[m]
        r.views[size][idx] = v


# ---------------------------------------------------------------- the engine
class TmeEngine(Engine):
    """Pending TME loads (until a completion event) and stores (until their wait)."""
    KEY = "tme"

    def __init__(self, st):
        super().__init__(st)
        self.loads: list[Copies] = []
        self.stores: list[Copies] = []

    def busy(self) -> bool:
        return bool(self.loads)

    def fingerprint(self, h) -> None:
        for kind, batches in ((b"L", self.loads), (b"S", self.stores)):
            for c in batches:
                h.update(kind + repr((c.pc, c.rank, c.box, c.swizzle)).encode())
                for f in Copies.FIELDS:
                    if f != "ids" and getattr(c, f) is not None:
                        h.update(np.ascontiguousarray(getattr(c, f)))

    def settle(self) -> None:
        """Land every pending load (grouped by pc and element type), then complete the
        phases they finish."""
        batches, self.loads = self.loads, []
        keys = []
        for pc in dict.fromkeys(b.pc for b in batches):
            c = Copies.concat([b for b in batches if b.pc == pc])
            for code in np.unique(c.code).tolist():
                part = c if (c.code == code).all() else c.subset(c.code == code)
                self._land(part, code)
                keys.append(part.keys)
        if keys:
            self.st.asyn.check_done(np.concatenate(keys))

    def _land(self, c: Copies, code: int) -> None:
        st, u = self.st, self.st.asyn
        name, size = ELEMENTS[code]
        inside = c.inside()
        vals = read_global(st, c, inside, size)
        if inside is not None:
            fill = np.where(c.info & FILL_NAN, fill_bits(name, True), 0).astype(UINT[size])
            vals = np.where(inside, vals, fill[:, None])
        idx = c.shared_index(st, size)
        st.shared_mem.views[size][idx] = vals
        if u.san is not None:
            u.san.tme_land(c.ids, c.keys, every_byte(idx, size))
        tx = u.flat("tx")
        np.subtract.at(tx, c.keys, c.elements * size)
        short = tx[c.keys] < 0
        if short.any():
            j = int(np.argmax(short))
            k = int(c.keys[j])
            adds = u.add_pcs(k)
            named = "".join(f"\n  ADD_TRANS: {where(st, p)}" for p in adds) or \
                "\n  (no ADD_TRANS in this phase)"
            thread_fault(st, c.threads[j], c.pc, f"AsyncBarrier {k % NBARS} received "
                         f"{-int(tx[k])} more transaction bytes than ADD_TRANS announced for "
                         f"its phase (this TME copy brings {c.elements * size}){named}")

    def exited(self, done: np.ndarray) -> None:
        self._perform(lambda c: np.isin(c.threads // 32, done))

    def commit(self, threads: np.ndarray) -> None:
        for c in self.stores:
            c.committed |= np.isin(c.threads, threads)

    def wait(self, warps: np.ndarray) -> None:
        self._perform(lambda c: c.committed & np.isin(c.threads // 32, warps))

    def _perform(self, pick) -> None:
        """Perform the stores ``pick(copies)`` selects, in issue order."""
        keep = []
        for c in self.stores:
            m = pick(c)
            if m.any():
                self._store(c if m.all() else c.subset(m))
            if not m.all():
                keep.append(c.subset(~m))
        self.stores = keep

    def _store(self, c: Copies) -> None:
        st = self.st
        for code in np.unique(c.code).tolist():
            part = c if (c.code == code).all() else c.subset(c.code == code)
            size = ELEMENTS[code][1]
            vals = st.shared_mem.views[size][part.shared_index(st, size)]
            write_global(st, part, part.inside(), size, vals)


# ---------------------------------------------------------------- rows
@impl("TME.LD")
def _tme_load(ins):
    rank = ins.op.attrs["rank"]
    s_op, d_op, c_op, b_op, box_op = ins.operands
    box, swizzle = unpack_box(box_op.value, rank)

    def run(st, s, x):
        thr = x.threads
        c = Copies.issued(st, s.pc, rank, box, swizzle, thr, s_op, d_op, c_op)
        c.keys = st.asyn.keys(values1(st, b_op, thr), thr, s.pc)
        c.check(st, "TME load")
        san = st.asyn.san
        if san is not None:
            c.ids = np.empty(len(thr), np.int64)
            size = SIZES[c.code]
            for z in np.unique(size).tolist():
                m = size == z
                part = c.subset(m)
                c.ids[m] = san.tme_issue(part.threads, s.pc, part.keys,
                                         every_byte(part.shared_index(st, z), z))
        if st.timing is not None:
            st.timing.tme(st, c, True)
        TmeEngine.of(st).loads.append(c)
    return stepping_row(run)


@impl("TME.ST")
def _tme_store(ins):
    rank = ins.op.attrs["rank"]
    d_op, c_op, s_op, box_op = ins.operands
    box, swizzle = unpack_box(box_op.value, rank)

    def run(st, s, x):
        c = Copies.issued(st, s.pc, rank, box, swizzle, x.threads, s_op, d_op, c_op)
        c.check(st, "TME store")
        san = st.asyn.san
        if san is not None:
            size = SIZES[c.code]
            for z in np.unique(size).tolist():
                part = c.subset(size == z)
                san.async_read(part.threads, s.pc, every_byte(part.shared_index(st, z), z),
                               "the TME store")
        if st.timing is not None:
            st.timing.tme(st, c, False)
        TmeEngine.of(st).stores.append(c)
    return stepping_row(run)


@impl("TME.ST.COMMIT")
def _tme_commit(ins):
    def run(st, s, x):
        if "tme" in st.asyn.engines:
            TmeEngine.of(st).commit(x.threads)
    return stepping_row(run)


@impl("TME.ST.WAIT")
def _tme_wait(ins):
    def run(st, s, x):
        if "tme" in st.asyn.engines:
            TmeEngine.of(st).wait(x.warps)
    return stepping_row(run)
