"""Memory of the interpreter: global regions backed by the user's arrays, shared and local
memory, checked accesses (bounds and alignment) and the shared-memory sanitizer; the LSU
instructions that use them are in :mod:`.units.lsu`.

Global memory is one region per pointer parameter (an AddressTable argument: one per
member array, then the table's read-only int64 array of their virtual addresses, see
``scheduler._bind_table``): the bytes its array's elements span,
as a writable uint8 view of the array's own memory (stores land in the user's array). A
region sits at virtual address ``(i + 1) << 40`` plus the low 12 bits of the array's
offset in the allocation it views (as if allocations were 4 KiB-aligned, as device
allocations are), so a virtual address has the alignment of the real one modulo 16 and
is the same on every run, whatever address the host's allocator returned (which the
cycle model's sectors would otherwise see); memory whose allocation is not 16-byte
aligned keeps its real low bits. A virtual address maps back to its region with
``np.searchsorted``. Every access is checked for all elements of an
instruction at once; the first bad element is reported as a core dump (see
:meth:`.state.State.fault`).

Shared memory is one stretch of the program's ``.shared`` bytes (rounded up to 16) per
resident block. Local memory is interleaved by 4-byte words: word ``w`` of every thread
of the wave is one row ``(threads,)``, so a spilled register at one address is one
contiguous row for all threads (wider accesses take consecutive rows). Both end with a
16-byte spare slot that masked-off elements of fast stores write.
"""
from __future__ import annotations

import ctypes

import numpy as np

from mutile.placement import allocation_offset
from .rows import fault_first

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

    def __init__(self, index: int, name: str, a: np.ndarray, label: str | None = None):
        self.name, self.array = name, a
        self.label = label          # how messages name it (default "parameter 'name'")
        lo = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0 and n)
        hi = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0 and n)
        self.size = 0 if a.size == 0 else hi - lo + a.itemsize
        real = a.ctypes.data + lo
        self.start = ((index + 1) << REGION_SHIFT) + (allocation_offset(a, real) & 0xFFF)
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
        label = self.label or f"parameter '{self.name}'"
        return f"{label} ({self.size} bytes, {shape} x {self.array.dtype}{view})"


class GlobalMemory:
    """The regions of one launch, sorted by virtual address; ``writes`` counts the
    instructions and copies that stored to them (the no-progress detector's clue)."""

    def __init__(self, regions: list[Region]):
        self.regions = regions
        self.writes = 0
        self.starts = np.array([r.start for r in regions] or [0], np.int64)
        self.ends = np.array([r.start + r.size for r in regions] or [0], np.int64)

    def where(self, addr: int, nbytes: int) -> tuple[str, dict]:
        """Where an access of ``nbytes`` at ``addr`` falls relative to the nearest array:
        (text, {param, index, length, address}); ``index`` counts elements from the
        array's lowest byte (negative before it)."""
        if not self.regions:
            return "the kernel has no pointer parameters", {"address": addr}
        near = ((addr + (1 << (REGION_SHIFT - 1))) >> REGION_SHIFT) - 1   # nearest region
        if not 0 <= near < len(self.regions):
            return (f"address 0x{addr:x} is not in any array of the launch (a pointer made "
                    "from an integer must hold an address the interpreter gave out: pass "
                    "the arrays as a mutile.AddressTable, not an int64 array of their real "
                    "addresses)"), {"address": addr}
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


def _global(st, sel, ins, addr, mask, nbytes, vals=None, what=None):
    """Load (vals None; returns the values of the selected elements) or store ``vals``;
    ``what`` names the access in fault messages (default "load"/"store")."""
    g = st.glob
    a, pick = _selected(addr, mask)
    if not a.size:
        return a, pick
    what = what or ("store" if vals is not None else "load")
    g.writes += vals is not None
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
                f"global {what} to read-only {r.describe()} at address 0x{int(a[j]):x}"))
        _scatter(r.views, byte, nbytes, vals if region_of is None else vals[sub], shift)
    return out, pick


# ---------------------------------------------------------------- shared and local memory
class SharedMemory:
    """The shared memory of a wave: ``pad`` bytes per block (``size`` rounded up to 16),
    then the spare slot; ``views`` as in :func:`typed_views`, ``blocks[w]`` the w-byte
    view as (blocks, pad / w) (16: (blocks, pad / 16, 4))."""

    def __init__(self, size: int, blocks: int):
        self.size, self.pad = size, -(-size // 16) * 16
        self.buf = np.zeros(blocks * self.pad + 16, np.uint8)
        self.views = typed_views(self.buf)
        self.blocks = {w: v[:blocks * self.pad // w].reshape(blocks, self.pad // w, *v.shape[1:])
                       for w, v in self.views.items()}


class LocalMemory:
    """The local memory of a wave's ``threads`` threads, interleaved by 4-byte words:
    ``table`` is (words, threads) uint32, then the spare slot."""

    def __init__(self, size: int, threads: int):
        self.size, self.threads = size, threads
        self.words = -(-size // 16) * 4
        self.buf = np.zeros(self.words * threads * 4 + 16, np.uint8)
        self.views = typed_views(self.buf)
        self.table = self.views[4][:self.words * threads].reshape(self.words, threads)

    def _word(self, a, t):
        return (a >> 2) * self.threads + t

    def gather(self, a, t, nbytes: int) -> np.ndarray:
        """The ``nbytes`` values at byte addresses ``a`` of threads ``t`` (int arrays,
        broadcast; checked): like :func:`_gather` (16 bytes: (..., 4) uint32 words)."""
        w = self._word(a, t)
        if nbytes == 4:
            return self.views[4][w]
        if nbytes < 4:
            byte = w * 4 + (a & 3)
            return self.views[nbytes][byte >> (nbytes - 1)]
        words = [self.views[4][w + j * self.threads] for j in range(nbytes // 4)]
        if nbytes == 8:
            return words[0].astype(np.uint64) | (words[1].astype(np.uint64) << np.uint64(32))
        return np.stack(words, axis=-1)

    def scatter(self, a, t, nbytes: int, vals) -> None:
        """Store ``vals`` (as :meth:`gather` returns them) at ``a`` of threads ``t``."""
        w = self._word(a, t)
        if nbytes == 4:
            self.views[4][w] = vals
        elif nbytes < 4:
            self.views[nbytes][(w * 4 + (a & 3)) >> (nbytes - 1)] = vals
        elif nbytes == 8:
            vals = np.asarray(vals, np.uint64)
            self.views[4][w] = vals.astype(np.uint32)
            self.views[4][w + self.threads] = (vals >> np.uint64(32)).astype(np.uint32)
        else:
            for j in range(4):
                self.views[4][w + j * self.threads] = vals[..., j]


def _onchip(st, sel, ins, addr, mask, nbytes, space, vals=None):
    """Shared or local access: returns (values or None, pick)."""
    if space == "SHARED":
        mem = st.shared_mem
        owner = st.thread_block[sel.threads][None, :]
        what = f"the block's {mem.size} bytes of shared memory (.shared {mem.size})"
    else:
        mem = st.local_mem
        owner = st.thread_index[sel.threads][None, :]
        what = f"the thread's {mem.size} bytes of local memory (.local {mem.size})"
    size = mem.size
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
    if space == "LOCAL":
        if vals is None:
            return mem.gather(a, own, nbytes), pick
        mem.scatter(a, own, nbytes, vals)
        return None, pick
    byte = own * mem.pad + a
    san = st.sanitizer
    if san is not None:
        thr = np.broadcast_to(sel.thread_array()[None, :], addr.shape).ravel()
        warp = thr // 32 if pick is None else thr[pick] // 32
        (san.read if vals is None else san.write)(st, sel, ins, byte, nbytes, pick, own,
                                                 warp)
    if vals is None:
        return _gather(mem.views, byte, nbytes), pick
    _scatter(mem.views, byte, nbytes, vals)
    return None, pick


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
        self.asyn = None      # the asynchronous checks (async_sanitizer.py), if any

    def barrier(self, blocks) -> None:
        """The barriers of ``blocks`` released: accesses before and after are ordered."""
        self.epoch[blocks] += 1
        if self.asyn is not None:
            self.asyn.block_barrier(blocks)

    @staticmethod
    def _bytes(byte, nbytes):
        return byte[:, None] + np.arange(nbytes)

    def read(self, st, sel, ins, byte, nbytes, pick, block, warp):
        """Check a shared load of ``nbytes`` at flat byte offsets ``byte`` by ``warp``
        (per element; ``block``: the element's block in the wave)."""
        b = self._bytes(byte, nbytes)
        if self.asyn is not None:
            self.asyn.generic(st, sel, ins, b, pick, warp, False)
        bad = ~self.init[b].all(axis=1)
        if bad.any():
            fault_first(st, sel, ins, bad, pick, lambda j: (
                f"uninitialized shared memory read: {nbytes}-byte shared load at shared "
                f"address 0x{int(byte[j] - block[j] * st.shared_mem.pad):x} reads bytes no "
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
        if self.asyn is not None:
            self.asyn.generic(st, sel, ins, b, pick, warp, True)
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
        off = int(byte - block * st.shared_mem.pad)
        who = "several warps" if other == -2 else f"warp {other % st.warps_per_block}"
        return (f"shared memory race: this warp {verb} {nbytes} bytes at shared address "
                f"0x{off:x} {done} by {who} of the block with no BAR.SYNC between")
