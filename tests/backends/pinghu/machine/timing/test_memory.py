"""The cycle model's memory functions against plain-Python oracles: global accesses
(coalescing per element row, the L2's FIFO stamps, first touchers, the same-wave rule),
TME copies' sectors, and the distinct-key helper's dense and sorted paths."""
from types import SimpleNamespace

import numpy as np
import pytest

from mutile.backends.pinghu.machine.timing import memory
from mutile.backends.pinghu.machine.timing.record import Slice, SliceTable

SECTOR = 32


def _t(l2_sectors):
    return SimpleNamespace(sector=SECTOR, l2_bytes=l2_sectors * SECTOR, hbm_latency=500.0,
                           l2_latency=200.0, latency={"st_global": 30.0})


class OracleL2:
    """The L2 of memory.py's docstring, one sector at a time."""

    def __init__(self, capacity, per_wave):
        self.cap, self.pw = capacity, per_wave
        self.stamp, self.owner, self.count = {}, {}, 0

    def instruction(self, touches, block_of, nunits):
        """``touches``: (unit, sector) pairs. Returns per unit HBM sectors and slow."""
        first = {}
        for u, s in sorted(touches):
            first.setdefault(s, u)
        miss, owner = {}, {}
        region = memory.REGION_SHIFT - 5            # an allocation's sectors are looked
        count = {}                                  # up at once, against one miss count
        for s in sorted(first):
            b = block_of[first[s]]
            now = count.setdefault(s >> region, self.count)
            m = s not in self.stamp or now - self.stamp[s] >= self.cap
            if m:
                self.stamp[s] = self.count
                self.count += 1
            miss[s] = m
            owner[s] = b if m else self.owner[s]
            if m or b // self.pw < self.owner[s] // self.pw:
                self.owner[s] = b
        hbm, slow = [0] * nunits, [False] * nunits
        for s, u in first.items():
            hbm[u] += miss[s]
        for u, s in touches:
            b = block_of[u]
            if (miss[s] if owner[s] == b else owner[s] // self.pw >= b // self.pw):
                slow[u] = True
        return np.array(hbm), np.array(slow)


def _oracle_global(o, t, addr, mask, nw, store, blocks):
    k = addr.shape[0]
    moved, touches = np.zeros(nw), set()
    for w in range(nw):
        for e in range(k):
            lanes = range(w * 32, w * 32 + 32)
            secs = {int(addr[e, i]) // SECTOR for i in lanes if mask is None or mask[e, i]}
            moved[w] += len(secs) * SECTOR
            touches |= {(w, s) for s in secs}
    block_of = [0] * nw if blocks is None else [int(b) for b in blocks]
    hbm, slow = o.instruction(touches, block_of, nw)
    lat = np.full(nw, 30.0) if store else np.where(slow, 500.0, 200.0)
    return lat, moved, hbm * float(SECTOR), moved


@pytest.mark.parametrize("seed", range(40))
def test_global_access_matches_the_oracle(seed):
    rng = np.random.default_rng(seed)
    cap, pw = int(rng.integers(4, 200)), int(rng.integers(1, 4))
    t = _t(cap)
    l2, o = memory.L2(t, pw), OracleL2(cap, pw)
    for step in range(4):
        k, nw = int(rng.integers(1, 5)), int(rng.integers(1, 7))
        span = int(rng.choice([256, 8192, 1 << 26]))
        addr = rng.integers(0, span, (k, nw * 32)).astype(np.int64)
        if rng.random() < 0.5:                          # a coalesced vector load
            addr = (np.arange(nw * 32)[None, :] * k + np.arange(k)[:, None]) * 2 \
                + int(rng.integers(0, span))
        if rng.random() < 0.2:                          # another allocation
            addr = addr + (np.int64(int(rng.integers(1, 3))) << memory.REGION_SHIFT)
        mask = None if rng.random() < 0.4 else rng.random(addr.shape) < rng.random()
        blocks = None if rng.random() < 0.3 else np.sort(rng.integers(0, 5, nw))
        store = bool(rng.random() < 0.25)
        got = memory.global_access(t, l2, addr, mask, 2, nw, store, blocks)
        want = _oracle_global(o, t, addr, mask, nw, store, blocks)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        assert l2.count == o.count


@pytest.mark.parametrize("seed", range(20))
def test_tme_sectors_match_the_oracle(seed):
    rng = np.random.default_rng(100 + seed)
    cap, pw = int(rng.integers(4, 100)), int(rng.integers(1, 3))
    l2, o = memory.L2(_t(cap), pw), OracleL2(cap, pw)
    for step in range(3):
        copies, n = int(rng.integers(1, 6)), int(rng.integers(1, 64))
        addr = rng.integers(0, 4096, (copies, n)).astype(np.int64)
        inside = None if rng.random() < 0.4 else rng.random(addr.shape) < 0.7
        blocks = None if rng.random() < 0.3 else np.sort(rng.integers(0, 4, copies))
        hbm, slow = memory.tme_sectors(l2, addr, inside, False, blocks)
        touches = {(c, int(addr[c, i]) // SECTOR) for c in range(copies) for i in range(n)
                   if inside is None or inside[c, i]}
        block_of = [0] * copies if blocks is None else [int(b) for b in blocks]
        want_hbm, want_slow = o.instruction(touches, block_of, copies)
        np.testing.assert_array_equal(hbm, want_hbm * float(SECTOR))
        np.testing.assert_array_equal(slow, want_slow)


@pytest.mark.parametrize("span", [1, 50, 100_000, 1 << 40])
def test_distinct_equals_numpy_unique(span):
    rng = np.random.default_rng(span % 97)
    keys = rng.integers(0, span, 5000).astype(np.int64) + 7
    uniq, inv = memory._distinct(keys)
    want, want_inv = np.unique(keys, return_inverse=True)
    np.testing.assert_array_equal(uniq, want)
    np.testing.assert_array_equal(inv, want_inv)
    np.testing.assert_array_equal(memory._distinct(keys, inverse=False)[0], want)


def test_distinct_counts_per_row_ignore_masked_lanes():
    keys = np.array([[3, 3, -1, 5], [-1, -1, -1, -1], [9, 1, 9, 1]], np.int64)
    np.testing.assert_array_equal(memory.distinct_count_per_row(keys), [2, 0, 2])
    count, flat, row = memory.distinct_per_row(keys)
    np.testing.assert_array_equal(count, [2, 0, 2])
    np.testing.assert_array_equal(flat, [3, 5, 1, 9])
    np.testing.assert_array_equal(row, [0, 0, 2, 2])


def test_slice_table_reads_as_slices_in_order():
    tab = SliceTable()
    tab.add("barrier wait", False, np.array([4, 5]), np.array([0, 1]), np.array([2, 3]),
            np.array([1.0, 2.0]), np.array([0.5, 0.25]))
    assert len(tab) == 2 and tab._items is None          # nothing built yet
    tab.append(Slice(("unit", 0, "TME"), "TME load", 3.0, 1.0))
    tab.add("SQMMA 64x64x16", True, np.array([6]), np.array([2]), np.array([1]),
            np.array([7.0]), np.array([9.0]))
    got = list(tab)
    assert len(tab) == len(got) == 4
    assert got[0] == Slice(("warp", 2, 4, 0), "barrier wait", 1.0, 0.5, {"block": 4, "warp": 0})
    assert got[1].track == ("warp", 3, 5, 1) and got[2].name == "TME load"
    assert got[3] == Slice(("unit", 1, "SQMMA"), "SQMMA 64x64x16", 7.0, 9.0,
                           {"block": 6, "warp": 2})
    assert tab[-1] is got[3]
