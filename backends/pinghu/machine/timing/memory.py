"""Memory in the cycle model, from the addresses the interpreter computed.

* Global accesses: the lanes of a warp coalesce into 32-byte *sectors* (the distinct
  ``addr >> 5`` of each element row of the instruction); the LSU moves them to L1 at
  ``l1_bytes_per_cycle``.
* L2: sector-granular, cold at the start of each launch. A sector is a hit if it was
  brought in (or written) less than ``l2_bytes`` of later misses ago: an L2 that evicts
  in the order sectors came in (FIFO), sized by the machine file; the sectors of one
  instruction are looked up together, against the misses before it. Misses move their bytes
  over HBM; stores allocate their sectors (write-back: each sector's first write costs its
  bytes of HBM traffic once). A load that misses any sector waits ``hbm_latency``, else
  ``l2_latency``. Blocks of one wave run at the same time, so a sector another block of
  the same wave brought in is still on its way: it costs that access ``hbm_latency`` too
  (its bytes cross HBM once). Only a sector the access's own block, or a block of an
  earlier wave, brought in is a hit -- whatever order the interpreter ran the blocks in.
* Shared memory: ``shared_banks`` banks of ``shared_bank_bytes``; a warp's access is split
  into phases of 128 bytes (32 lanes of <= 4 bytes, 16 lanes of 8, 8 lanes of 16) and each
  phase takes as many wavefronts as the most distinct words any one bank holds (the same
  word read by several lanes is a broadcast). Conflicts are counted from the real
  addresses, so a swizzled layout read column-wise visibly beats an unswizzled one.
"""
from __future__ import annotations

import numpy as np

REGION_SHIFT = 40
MEMO_ENTRIES = 512           # shared-memory address patterns remembered per launch
_LOW = (1 << REGION_SHIFT) - 1


class L2:
    """The stamp model above: per region, the miss counter (in sectors) when each sector
    came in (-1: never) and the block that brought it in; ``per_wave`` blocks per wave."""

    def __init__(self, t, per_wave: int = 1):
        self.sector_shift = int(t.sector).bit_length() - 1
        self.capacity = t.l2_bytes >> self.sector_shift
        self.per_wave = max(1, int(per_wave))
        self.count = 0                      # sectors brought in so far
        self.stamps: dict[int, np.ndarray] = {}
        self.owners: dict[int, np.ndarray] = {}
        self.hbm_sectors = 0

    def _table(self, region: int, top: int) -> tuple[np.ndarray, np.ndarray]:
        s = self.stamps.get(region)
        if s is None or len(s) <= top:
            n = max(top + 1, 2 * len(s) if s is not None else 1024)
            grown, owner = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
            if s is not None:
                grown[:len(s)] = s
                owner[:len(s)] = self.owners[region]
            s = self.stamps[region] = grown
            self.owners[region] = owner
        return s, self.owners[region]

    def access(self, sectors: np.ndarray, store: bool = False,
               block: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Look up distinct global sector numbers (``addr >> 5``, sorted, unique) that
        blocks ``block`` (one per sector: its first toucher; None: block 0) access.
        Returns which missed, and the block that brought each in (a miss: its toucher,
        who brings it now). Misses (and first writes) come in now; a present sector a
        block of an earlier wave touches becomes that block's."""
        block = np.zeros(len(sectors), np.int64) if block is None else block
        miss = np.zeros(len(sectors), bool)
        owner = np.full(len(sectors), -1, np.int64)
        region = sectors >> (REGION_SHIFT - self.sector_shift)
        local = sectors & (_LOW >> self.sector_shift)
        one = len(region) and region[0] == region[-1]      # sorted: one region
        for r in ([int(region[0])] if one else np.unique(region).tolist()):
            sel = slice(None) if one else region == r
            idx = local[sel]
            tab, own = self._table(r, int(idx.max()))
            st = tab[idx]
            m = (st < 0) | (self.count - st >= self.capacity)
            n = int(m.sum())
            if n:
                tab[idx[m]] = self.count + np.arange(n)
                self.count += n
            miss[sel] = m
            b = block[sel]
            owner[sel] = np.where(m, b, own[idx])
            earlier = m | (b // self.per_wave < own[idx] // self.per_wave)
            own[idx[earlier]] = b[earlier]
        self.hbm_sectors += int(miss.sum())
        return miss, owner

    def slow(self, miss: np.ndarray, owner: np.ndarray, block: np.ndarray) -> np.ndarray:
        """Per access (a sector's ``miss`` and ``owner`` from :meth:`access`, the
        accessing ``block``): does it wait for HBM? Its own block's sector only if it is
        coming in now; another block's if that block runs in the same (or a later) wave."""
        w = self.per_wave
        return np.where(owner == block, miss, owner // w >= block // w)


def _sorted_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``keys`` (rows, lanes) with each row sorted (coalesced rows come sorted and are
    not copied), and the flags of each row's first occurrences of a value >= 0."""
    d = np.diff(keys, axis=1)
    if (d >= 0).all():
        s = keys
    else:
        s = np.sort(keys, axis=1)
        d = np.diff(s, axis=1)
    new = np.empty(s.shape, bool)
    new[:, 0] = True
    np.not_equal(d, 0, out=new[:, 1:])
    new &= s >= 0
    return s, new


def distinct_count_per_row(keys: np.ndarray) -> np.ndarray:
    """For int64 ``keys`` (rows, lanes; -1 = no access): the count of distinct keys per
    row."""
    return _sorted_rows(keys)[1].sum(axis=1)


def distinct_per_row(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """As :func:`distinct_count_per_row`, with the distinct keys (row by row, sorted) and
    their row numbers."""
    s, new = _sorted_rows(keys)
    rows = np.broadcast_to(np.arange(len(s))[:, None], s.shape)
    return new.sum(axis=1), s[new], rows[new]


def _distinct(keys: np.ndarray, inverse: bool = True):
    """The sorted distinct values of int64 ``keys`` (>= 0) and (``inverse``) each key's
    index among them. Keys that span a range not much wider than their count (a tile's sectors in
    one allocation, the usual case) are ranked through a dense table, without a sort."""
    lo, hi = int(keys.min()), int(keys.max())
    span = hi - lo + 1
    if span > 8 * len(keys) + 65536:
        return np.unique(keys, return_inverse=True) if inverse else (np.unique(keys), None)
    idx = keys - lo
    seen = np.zeros(span, bool)
    seen[idx] = True
    uniq = np.flatnonzero(seen) + lo
    return uniq, (np.cumsum(seen) - 1)[idx] if inverse else None


def _touches(l2: L2, keys: np.ndarray, unit: np.ndarray, nunits: int, blocks, store: bool):
    """The L2 side of one instruction: sector numbers ``keys``, each accessed by ``unit``
    (a warp or a copy, each (unit, sector) once; units are numbered in the order the
    hardware sees them, and come in ascending order), the
    units' grid blocks ``blocks`` (None: one block). Looks every distinct sector up once,
    its first toucher (the lowest unit) bringing it in. Returns per unit its HBM
    sectors (the misses it brings in) and whether it waits for HBM (:meth:`L2.slow`)."""
    if not len(keys):
        return np.zeros(nunits, np.int64), np.zeros(nunits, bool)
    uniq, inv = _distinct(keys)
    first = np.full(len(uniq), nunits, np.int64)
    np.minimum.at(first, inv, unit)
    blk = np.zeros(nunits, np.int64) if blocks is None else np.asarray(blocks, np.int64)
    miss, owner = l2.access(uniq, store, blk[first])
    hbm = np.bincount(first[miss], minlength=nunits)
    slow = np.zeros(nunits, bool)
    slow[unit[l2.slow(miss[inv], owner[inv], blk[unit])]] = True
    return hbm, slow


def global_access(t, l2: L2, addr: np.ndarray, mask, nbytes: int, nw: int, store: bool,
                  blocks: np.ndarray | None = None):
    """One global LSU instruction over ``nw`` warps of ``blocks`` (their grid block ids;
    None: one block): ``addr`` int64 (elements, nw * 32), ``mask`` bool broadcastable to
    it (None: every lane). Returns per warp (latency, sector bytes moved to L1, HBM
    bytes, L2 bytes)."""
    k = addr.shape[0]
    sec = addr >> np.int64(l2.sector_shift)
    if mask is not None:
        sec = np.where(np.broadcast_to(mask, addr.shape), sec, -1)
    s3 = sec.reshape(k, nw, 32)
    # L1 traffic: each element row's lanes coalesce; L2: each warp's distinct sectors
    count, keys, warp = distinct_per_row(s3.transpose(1, 2, 0).reshape(nw, 32 * k))
    if k > 1:
        count = distinct_count_per_row(s3.transpose(1, 0, 2).reshape(nw * k, 32))
    per_warp_sectors = count.reshape(nw, k).sum(axis=1)
    hbm, missed = _touches(l2, keys, warp, nw, blocks, store)
    lat = np.where(missed, t.hbm_latency, t.l2_latency) if not store else \
        np.full(nw, t.latency["st_global"])
    moved = per_warp_sectors * float(t.sector)
    return lat, moved, hbm * float(t.sector), moved


def shared_wavefronts(t, addr: np.ndarray, mask, nbytes: int, nw: int,
                      tpb: int = 0, memo: dict | None = None) -> np.ndarray:
    """Wavefronts per warp of one shared LSU instruction: ``addr`` int64 (elements,
    nw * 32) byte addresses in the block's shared memory, ``mask`` as above. When every
    block of ``tpb`` threads uses the same addresses and mask (the usual case), one
    block is counted and the result repeated. ``memo`` (a dict the caller keeps for a
    launch) remembers the counts of address patterns seen before, keyed by their exact
    bytes: a loop reads the same shared tiles every iteration."""
    k = addr.shape[0]
    wpb = tpb // 32
    if wpb and nw > wpb and nw % wpb == 0:
        a3 = addr.reshape(k, -1, tpb)
        m3 = None if mask is None else np.broadcast_to(mask, addr.shape).reshape(k, -1, tpb)
        if (a3 == a3[:, :1]).all() and (m3 is None or (m3 == m3[:, :1]).all()):
            one = shared_wavefronts(t, np.ascontiguousarray(a3[:, 0]),
                                    None if m3 is None else m3[:, 0], nbytes, wpb, 0, memo)
            return np.tile(one, nw // wpb)
    if memo is not None:
        key = (nbytes, nw, addr.tobytes(),
               None if mask is None else np.broadcast_to(mask, addr.shape).tobytes())
        hit = memo.get(key)
        if hit is None:
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            hit = memo[key] = shared_wavefronts(t, addr, mask, nbytes, nw)
            hit.setflags(write=False)
        return hit
    words_per_lane = max(1, nbytes // t.bank_bytes)
    lanes = 32 // words_per_lane                # lanes per 128-byte phase
    word = addr // t.bank_bytes
    if mask is not None:
        word = np.where(np.broadcast_to(mask, addr.shape), word, -1)
    w = word.reshape(k, nw, 32 // lanes, lanes)
    if words_per_lane > 1:
        w = np.where(w[..., None] >= 0, w[..., None] + np.arange(words_per_lane), -1)
    w = w.reshape(-1, lanes * words_per_lane)       # one row per (element, warp, phase)
    count, keys, row = distinct_per_row(w)
    bank = keys % t.banks
    per = np.bincount(row * t.banks + bank, minlength=len(w) * t.banks).reshape(len(w), -1)
    fronts = np.maximum(per.max(axis=1), (count > 0).astype(np.int64))
    return fronts.reshape(k, nw, -1).sum(axis=(0, 2)).astype(np.float64)


def tme_sectors(l2: L2, addr: np.ndarray, inside, store: bool,
                blocks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The copies' HBM bytes, and whether each waits for HBM (see :class:`L2`), per copy,
    from their elements' global byte addresses ``addr`` (copies, elements), masked by
    ``inside`` (None: all inside), issued by ``blocks`` (one per copy; None: one block)."""
    sec = addr >> np.int64(l2.sector_shift)
    if inside is not None:
        sec = np.where(inside, sec, -1)
    count, keys, row = distinct_per_row(sec)
    hbm, slow = _touches(l2, keys, row, len(sec), blocks, store)
    return hbm * float(1 << l2.sector_shift), slow
