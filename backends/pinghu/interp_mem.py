"""Memory of the interpreter: global regions backed by the user's arrays, shared and local
memory, the LSU instructions, bounds and alignment checks and the shared-memory sanitizer.

Global memory is one region per pointer parameter: the bytes its array's elements span,
as a writable uint8 view of the array's own memory (stores land in the user's array). A
region sits at virtual address ``(i + 1) << 40`` plus the low 12 bits of the array's real
address, so a virtual address has the alignment of the real one and maps back to its
region with ``np.searchsorted``. Every access is checked for all elements of an
instruction at once; the first bad element is reported as a core dump (see
:meth:`.interp.State.fault`).
"""
from __future__ import annotations

import ctypes

import numpy as np

from .interp_ops import elements, fault_first, impl, reader, registers, writer
from .operands import RZ, Reg, Run

REGION_SHIFT = 40
WIDTHS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_LANE4 = np.arange(4)


def typed_views(buf: np.ndarray, shift_of=lambda w: 0) -> dict:
    """Views of a flat uint8 buffer as 1/2/4/8-byte unsigned integers and as 16-byte
    records (rows of four uint32); element 0 of the w-byte view starts at byte
    ``shift_of(w)``."""
    out = {}
    for w, dt in [*WIDTHS.items(), (16, np.uint32)]:
        s = shift_of(w)
        n = max(0, (len(buf) - s) // w)
        out[w] = buf[s:s + n * w].view(dt)
    out[16] = out[16].reshape(-1, 4)
    return out


def _gather(views: dict, byte: np.ndarray, nbytes: int, shift: int = 0) -> np.ndarray:
    if nbytes == 16:
        return views[4][((byte - shift) // 4)[:, None] + _LANE4]
    return views[nbytes][(byte - shift) // nbytes]


def _scatter(views: dict, byte: np.ndarray, nbytes: int, vals: np.ndarray, shift: int = 0):
    if nbytes == 16:
        views[4][((byte - shift) // 4)[:, None] + _LANE4] = vals
    else:
        views[nbytes][(byte - shift) // nbytes] = vals


# ---------------------------------------------------------------- global memory
class Region:
    """One pointer parameter's array as global memory."""

    def __init__(self, index: int, name: str, a: np.ndarray):
        self.name, self.array = name, a
        lo = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0 and n)
        hi = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0 and n)
        self.size = 0 if a.size == 0 else hi - lo + a.itemsize
        real = a.ctypes.data + lo
        self.start = ((index + 1) << REGION_SHIFT) + (real & 0xFFF)
        self.pointer = self.start - lo                 # the address of element 0
        self.readonly = not a.flags.writeable
        if self.size:
            raw = (ctypes.c_uint8 * self.size).from_address(real)
            self.buf = np.frombuffer(raw, np.uint8)
        else:
            self.buf = np.zeros(0, np.uint8)
        self.shift = {w: (-real) % w for w in (*WIDTHS, 16)}
        self.views = typed_views(self.buf, self.shift.get)

    def describe(self) -> str:
        """``parameter 'X' (4096 bytes, 1024 x float32)``."""
        shape = " x ".join(map(str, self.array.shape)) or "scalar"
        view = "" if self.array.flags.c_contiguous else " view"
        return f"parameter '{self.name}' ({self.size} bytes, {shape} x {self.array.dtype}{view})"


class GlobalMemory:
    """The regions of one launch, sorted by virtual address."""

    def __init__(self, regions: list[Region]):
        self.regions = regions
        self.starts = np.array([r.start for r in regions] or [0], np.int64)
        self.ends = np.array([r.start + r.size for r in regions] or [0], np.int64)

    def where(self, addr: int, nbytes: int) -> tuple[str, dict]:
        """Where an access of ``nbytes`` at ``addr`` falls relative to the nearest array:
        (text, {param, index, length, address}); ``index`` counts elements from the
        array's lowest byte (negative before it)."""
        if not self.regions:
            return "the kernel has no pointer parameters", {"address": addr}
        def dist(r):
            return 0 if r.start <= addr < r.start + r.size else \
                min(abs(addr - r.start), abs(addr + nbytes - r.start - r.size))
        r = min(self.regions, key=dist)
        end, off = r.start + r.size, addr - r.start
        item = r.array.itemsize
        info = {"param": r.name, "index": off // item, "length": r.size // item,
                "address": addr}
        if addr < r.start:
            return f"{r.start - addr} bytes before the start of {r.describe()}: element " \
                   f"{off // item}", info
        if addr + nbytes > end:
            return f"{addr + nbytes - end} bytes past the end of {r.describe()}: element " \
                   f"{off // item}, byte offset {off}", info
        return f"element {off // item}, byte offset {off} of {r.describe()}", info

    def locate(self, addr: np.ndarray, nbytes: int) -> np.ndarray:
        """Region index of each address (-1 where the access is not inside one)."""
        i = np.searchsorted(self.starts, addr, side="right") - 1
        ok = (i >= 0) & (addr + nbytes <= self.ends[np.maximum(i, 0)])
        return np.where(ok, i, -1)


def _selected(addr, mask):
    """(flat addresses of the elements that access memory, their flat indices into the
    (count, n) address array, or None when every element accesses)."""
    if mask is None:
        return addr.ravel(), None
    pick = np.flatnonzero(np.broadcast_to(mask, addr.shape))
    return addr.ravel()[pick], pick


def _located(head: str, where: tuple[str, dict]) -> tuple[str, dict]:
    return f"{head}: {where[0]}", where[1]


def _global(st, sel, ins, addr, mask, nbytes, vals=None):
    """Load (vals None; returns the values of the selected elements) or store ``vals``."""
    g = st.glob
    a, pick = _selected(addr, mask)
    if not a.size:
        return a, pick
    what = "store" if vals is not None else "load"
    lo, hi = int(a.min()), int(a.max())
    one = g.locate(np.array([lo, hi]), nbytes)
    if one[0] >= 0 and one[0] == one[1] and (hi + nbytes <= g.ends[one[0]]):
        ri = np.full(1, one[0])
        region_of = None
    else:
        region_of = g.locate(a, nbytes)
        if (region_of < 0).any():
            bad = region_of < 0
            fault_first(st, sel, ins, bad, pick, lambda j: _located(
                f"out-of-bounds global {what} of {nbytes} bytes at address 0x{int(a[j]):x}",
                g.where(int(a[j]), nbytes)))
        ri = np.unique(region_of)
    if nbytes > 1 and (a & (nbytes - 1)).any():
        bad = (a & (nbytes - 1)) != 0
        fault_first(st, sel, ins, bad, pick, lambda j: _located(
            f"misaligned global {what} of {nbytes} bytes at address 0x{int(a[j]):x} (not a "
            f"multiple of {nbytes})", g.where(int(a[j]), nbytes)))
    out = None
    for r_i in ri:
        r = g.regions[int(r_i)]
        sub = slice(None) if region_of is None else region_of == r_i
        byte = (a if region_of is None else a[sub]) - r.start
        shift = r.shift[min(nbytes, 4) if nbytes == 16 else nbytes]
        if vals is None:
            got = _gather(r.views, byte, nbytes, shift)
            if region_of is None:
                return got, pick
            if out is None:
                out = np.zeros((len(a),) + got.shape[1:], got.dtype)
            out[sub] = got
            continue
        if r.readonly:
            bad = np.ones(len(a), bool) if region_of is None else sub
            fault_first(st, sel, ins, bad, pick, lambda j: (
                f"global store to read-only {r.describe()} at address 0x{int(a[j]):x}"))
        _scatter(r.views, byte, nbytes, vals if region_of is None else vals[sub], shift)
    return out, pick


# ---------------------------------------------------------------- shared and local memory
def _onchip(st, sel, ins, addr, mask, nbytes, space, vals=None):
    """Shared or local access: returns (values or None, pick)."""
    if space == "SHARED":
        size, pad, views = st.program.shared, st.shared_pad, st.shared_views
        owner = st.thread_block[sel.threads][None, :]
        what = f"the block's {size} bytes of shared memory (.shared {size})"
    else:
        size, pad, views = st.program.local, st.local_pad, st.local_views
        owner = st.thread_index[sel.threads][None, :]
        what = f"the thread's {size} bytes of local memory (.local {size})"
    a, pick = _selected(addr, mask)
    if not a.size:
        return a, pick
    kind = f"{space.lower()} {'store' if vals is not None else 'load'} of {nbytes} bytes"
    bad = (a < 0) | (a + nbytes > size)
    if bad.any():
        fault_first(st, sel, ins, bad, pick, lambda j: (
            f"out-of-bounds {kind} at {space.lower()} address 0x{int(a[j]) & 0xFFFFFFFF:x}"
            f"{' (' + str(int(a[j])) + ')' if a[j] < 0 else ''}: outside {what}"))
    if nbytes > 1 and (a & (nbytes - 1)).any():
        bad = (a & (nbytes - 1)) != 0
        fault_first(st, sel, ins, bad, pick, lambda j: (
            f"misaligned {kind} at {space.lower()} address 0x{int(a[j]):x} (not a multiple "
            f"of {nbytes})"))
    own = np.broadcast_to(owner, addr.shape)
    own = own.ravel() if pick is None else own.ravel()[pick]
    byte = own * pad + a
    san = st.sanitizer if space == "SHARED" else None
    if san is not None:
        thr = np.broadcast_to(sel.thread_array()[None, :], addr.shape).ravel()
        warp = thr // 32 if pick is None else thr[pick] // 32
        (san.read if vals is None else san.write)(st, sel, ins, byte, nbytes, pick, own,
                                                 warp)
    if vals is None:
        return _gather(views, byte, nbytes), pick
    _scatter(views, byte, nbytes, vals)
    return None, pick


# ---------------------------------------------------------------- LSU instructions
_LOADS = {"U8": (1, np.uint8, "u32"), "S8": (1, np.int8, "i32"), "U16": (2, np.uint16, "u32"),
          "S16": (2, np.int16, "i32"), "B32": (4, np.uint32, "u32"),
          "B64": (8, np.uint64, "u64"), "B128": (16, np.uint32, "u32")}
_STORES = {"B8": (1, "u32"), "B16": (2, "u32"), "B32": (4, "u32"), "B64": (8, "u64"),
           "B128": (16, "u32")}


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


# ---------------------------------------------------------------- fast paths
# Every element's access is checked at once from the extremes of the base registers
# (min, max, and their OR for alignment); the view index of each element is then two
# integer passes, and the access one np.take / one fancy assignment. Whatever the quick
# checks cannot clear (an element out of bounds or misaligned, several global regions,
# a read-only region, the shared sanitizer) takes the checked path above, which reports
# the fault with the first bad element.
def _first(mask) -> tuple[int, int]:
    """(row, column) of the first selected element of a (rows, n) mask."""
    return divmod(int(np.argmax(mask)), mask.shape[1])


def _filled(x, mask, at):
    """``x`` with unselected elements replaced by the selected element ``at`` (so that
    they hold a valid address; their result is discarded)."""
    r, c = at
    return np.where(mask, x, x[min(r, x.shape[0] - 1), min(c, x.shape[1] - 1)])


def _shifted(x, nbytes: int):
    return x >> np.uint32(nbytes.bit_length() - 1) if nbytes > 1 else x


def _aligned(x, off: int, nbytes: int) -> bool:
    return nbytes == 1 or (off % nbytes == 0
                           and not int(np.bitwise_or.reduce(x, axis=None)) & (nbytes - 1))


def _onchip_index(ins, m, nbytes: int):
    """``(st, sel, mask) -> (views, index)`` of a shared/local access: view indices
    (rows, n) int64 of every element, or None (use the checked path)."""
    space, off = ins.op.attrs["space"], m.offset
    rb = reader(m.base, "u32")
    shift = nbytes.bit_length() - 1

    def index(st, sel, mask):
        if space == "SHARED" and st.sanitizer is not None:
            return None
        base = rb(st, sel.threads)
        if mask is not None:
            base = _filled(base, mask, _first(mask))
        size = st.program.shared if space == "SHARED" else st.program.local
        if int(base.min()) + off < 0 or int(base.max()) + off + nbytes > size \
                or not _aligned(base, off, nbytes):
            return None
        views, start = st.onchip[space]
        return views, np.add(_shifted(base, nbytes), (start[:, sel.threads] + off) >> shift)
    return index


def _global_index(ins, m, nbytes: int, store: bool):
    """``(st, sel, mask) -> (views, index)`` of a global access whose elements all fall in
    one region (and whose address pairs share their high word), or None."""
    off = m.offset
    if not isinstance(m.base, (Reg, Run)) or m.base == Reg(RZ):
        return lambda st, sel, mask: None
    r0, r1 = registers(m.base, 2)
    lo_rows, hi_rows = slice(r0, r1, 2), slice(r0 + 1, r1, 2)

    def index(st, sel, mask):
        lo, hi = st.R[lo_rows, sel.threads], st.R[hi_rows, sel.threads]
        if mask is not None:
            at = _first(mask)
            lo, hi = _filled(lo, mask, at), _filled(hi, mask, at)
        h = int(hi.min())
        if h != int(hi.max()):
            return None
        g, top = st.glob, h << 32
        first, last = top + int(lo.min()) + off, top + int(lo.max()) + off
        i = int(np.searchsorted(g.starts, first, side="right")) - 1
        if i < 0 or first < g.starts[i] or last + nbytes > g.ends[i] \
                or not _aligned(lo, off, nbytes):
            return None
        r = g.regions[i]
        if store and r.readonly:
            return None
        c = r.start - top - off + r.shift[nbytes]
        return r.views, _shifted(np.subtract(lo, np.int64(c)), nbytes)
    return index


def _fast_index(ins, m, nbytes: int, store: bool = False):
    if ins.op.attrs["space"] == "GLOBAL":
        return _global_index(ins, m, nbytes, store)
    return _onchip_index(ins, m, nbytes)


def _dest_rows(d, nregs: int) -> slice:
    r0 = d.start if isinstance(d, Run) else d.n
    return slice(r0, r0 + nregs)


@impl("LSU.LD")
def _load(ins):
    nbytes, dt, view = _LOADS[ins.op.attrs["type"]]
    d, m = ins.operands
    k = elements(ins)
    checked = _load_checked(ins)
    fast = _fast_index(ins, m, nbytes)
    w = writer(d, view, 4 if nbytes == 16 else 0)
    direct = nbytes == 4 and not (isinstance(d, Reg) and d.n == RZ)
    rows = _dest_rows(d, k)

    def run(st, sel):
        got = fast(st, sel, sel.mask)
        if got is None:
            return checked(st, sel)
        views, idx = got
        idx = np.broadcast_to(idx, (k, sel.n))
        if direct and sel.mask is None and sel.is_slice:
            np.take(views[4], idx, out=st.R[rows, sel.threads], mode="clip")
            return
        v = np.take(views[nbytes], idx, axis=0)
        if nbytes == 16:                          # (k, n, 4) -> rows 4 * element + word
            v = v.transpose(0, 2, 1).reshape(4 * k, sel.n)
        w(st, sel, v.view(dt))
    return run


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


@impl("LSU.ST")
def _store(ins):
    nbytes, view = _STORES[ins.op.attrs["type"]]
    m, s = ins.operands
    k = elements(ins)
    checked = _store_checked(ins)
    fast = _fast_index(ins, m, nbytes, store=True)
    val = reader(s, view, 4 if nbytes == 16 else 0)
    dt = WIDTHS.get(nbytes, np.uint32)
    onchip = ins.op.attrs["space"] != "GLOBAL"

    def run(st, sel):
        mask = sel.mask
        got = fast(st, sel, mask)
        if got is None:
            return checked(st, sel)
        views, idx = got
        v = val(st, sel.threads)
        if nbytes == 16:                          # rows 4 * element + word -> (k, n, 4)
            v = np.broadcast_to(v, (max(v.shape[0], 4), sel.n)).reshape(-1, 4, sel.n)
            v = np.broadcast_to(v.transpose(0, 2, 1), (k, sel.n, 4))
        else:
            v = np.broadcast_to(v, (k, sel.n)).astype(dt, copy=False)
        idx = np.broadcast_to(idx, (k, sel.n))
        if mask is not None and onchip:         # unselected elements write the spare slot
            idx = np.where(mask, idx, len(views[nbytes]) - 1)
        elif mask is not None:
            mask = np.broadcast_to(mask, (k, sel.n))
            idx, v = idx[mask], v[mask]
        views[nbytes][idx] = v
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


# ---------------------------------------------------------------- sanitizer
class SharedSanitizer:
    """Tracks, per byte of every resident block's shared memory, whether it was written
    and by which warp in which barrier epoch; reports reads of never-written bytes and
    read/write races between warps of a block with no BAR.SYNC between them."""

    def __init__(self, nbytes: int, warps_per_block: int, blocks: int):
        self.init = np.zeros(nbytes, bool)
        self.writer = np.full(nbytes, -1, np.int32)
        self.wepoch = np.full(nbytes, -1, np.int64)
        self.reader = np.full(nbytes, -1, np.int32)
        self.repoch = np.full(nbytes, -1, np.int64)
        self.epoch = np.zeros(blocks, np.int64)

    def barrier(self, blocks) -> None:
        """The barriers of ``blocks`` released: accesses before and after are ordered."""
        self.epoch[blocks] += 1

    @staticmethod
    def _bytes(byte, nbytes):
        return byte[:, None] + np.arange(nbytes)

    def read(self, st, sel, ins, byte, nbytes, pick, block, warp):
        """Check a shared load of ``nbytes`` at flat byte offsets ``byte`` by ``warp``
        (per element; ``block``: the element's block in the wave)."""
        b = self._bytes(byte, nbytes)
        bad = ~self.init[b].all(axis=1)
        if bad.any():
            fault_first(st, sel, ins, bad, pick, lambda j: (
                f"uninitialized shared memory read: {nbytes}-byte shared load at shared "
                f"address 0x{int(byte[j] - block[j] * st.shared_pad):x} reads bytes no "
                f"thread of the block has written"))
        ep = self.epoch[block][:, None]
        w, me = self.writer[b], warp[:, None]
        racy = (w >= 0) & (w != me) & (self.wepoch[b] == ep)
        if racy.any():
            fault_first(st, sel, ins, racy.any(axis=1), pick, lambda j: self._race(
                st, "reads", byte[j], block[j], int(w[j][racy[j]][0]), nbytes))
        r, same = self.reader[b], self.repoch[b] == ep
        self.reader[b] = np.where(~same | (r == -1), me, np.where(r == me, r, -2))
        self.repoch[b] = ep

    def write(self, st, sel, ins, byte, nbytes, pick, block, warp):
        """Record a shared store by ``warp`` (per element), checking it for races."""
        b = self._bytes(byte, nbytes)
        ep = self.epoch[block][:, None]
        w, r, me = self.writer[b], self.reader[b], warp[:, None]
        waw = (w >= 0) & (w != me) & (self.wepoch[b] == ep)
        war = (r != -1) & (r != me) & (self.repoch[b] == ep)
        race = (waw | war).any(axis=1)
        if race.any():
            def text(j):
                if waw[j].any():
                    return self._race(st, "writes", byte[j], block[j], int(w[j][waw[j]][0]),
                                      nbytes, "written")
                return self._race(st, "writes", byte[j], block[j], int(r[j][war[j]][0]),
                                  nbytes, "read")
            fault_first(st, sel, ins, race, pick, text)
        self.init[b] = True
        self.writer[b] = me
        self.wepoch[b] = ep
        self.reader[b] = -1

    @staticmethod
    def _race(st, verb, byte, block, other, nbytes, done="written"):
        off = int(byte - block * st.shared_pad)
        who = "several warps" if other == -2 else f"warp {other % st.warps_per_block}"
        return (f"shared memory race: this warp {verb} {nbytes} bytes at shared address "
                f"0x{off:x} {done} by {who} of the block with no BAR.SYNC between")
