"""The SQMMA unit in the interpreter: ``SQMMA.M{m}N{n}K{k}.{acc}.{a}.{b}`` and
``SQMMA.WAIT``.

A WarpSquad (warps 4s .. 4s+3 of a block) issues an SQMMA; each of its warps records a
pending operation (the descriptors of A and B from its first active lane). The operation
reads shared memory and writes D when it *completes*: when its warp executes SQMMA.WAIT,
at a completion event (no warp can run), or when the warp exits. Squad thread ``i``
(``tid % 128``) holds elements ``[i*E, (i+1)*E)`` of the row-major m x n D tile (``E =
m*n/128``) in its register group, so warp ``q`` of the squad owns rows ``[q*m/4,
(q+1)*m/4)`` and computes them from its quarter of A and all of B. Completion writes D
in all 32 lanes of the warp (the squad's accumulator), whichever lanes were active.

Operand element ``(r, c)`` of a stored operand is at ``swizzle_address(start + r *
stride + c * size)`` (:func:`...isa.tensor_memory.operand_addresses`); A is stored K-major
(rows m) unless ``trans`` bit 0 (MN-major: rows k), B MN-major (rows k) unless bit 1
(K-major: rows n). ``neg`` (ScaleIn) bit 0 multiplies -A, bit 1 -B; ``scale`` (ScaleOut)
0 ignores D's old value. Arithmetic is the WMMA rule (:mod:`.warp`): ``acc = fma(A[:,
k], B[k, :], acc)`` in f32, k ascending, one f32 multiply and add per step when the
products are exact (always for f16 and fp8 inputs); tf32 operands are the stored f32
values rounded to nearest even to 10 mantissa bits (CVT.TF32.F32's rule); S8 and U8 sums
wrap in 32 bits (S32, U32). Operations of one issue
complete together: a few numpy passes over (warps, m/4, n) per k step, warps chunked to
stay in the cache.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .engine import LANES, Engine, stepping_row, thread_fault, values1
from .fmath import fma_f32
from .alu import _tf32
from ..rows import impl
from .warp import _exact_f32_products
from ...isa.tensor_memory import swizzle_address, unpack_smem_desc

SIZE = {"BF16": 2, "F16": 2, "TF32": 4, "E4M3": 1, "E5M2": 1, "S8": 1, "U8": 1}
_INT_VIEW = {"S32": "i32", "U32": "u32"}     # integer accumulators
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}
_FP8 = {t: np.arange(256, dtype=np.uint8).view(dt).astype(np.float32)
        for t, dt in [("E4M3", ml_dtypes.float8_e4m3fn), ("E5M2", ml_dtypes.float8_e5m2)]}
_EXACT = {"F16", "E4M3", "E5M2"}        # products of these are always exact in f32
_CHUNK = 1 << 17                         # accumulator elements per chunk of warps


def _values(raw: np.ndarray, t: str) -> np.ndarray:
    """Operand elements (their bits, uint<size>) as f32 (S8: int8, U8: uint8)."""
    if t == "BF16":
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
    if t == "F16":
        return raw.view(np.float16).astype(np.float32)
    if t == "TF32":     # f32 operands round to tf32 (nearest even), as CVT.TF32.F32 does
        return _tf32(raw.view(np.float32))
    if t == "S8":
        return raw.view(np.int8)
    if t == "U8":
        return raw
    return _FP8[t][raw]


class Sqmma:
    """One SQMMA row's geometry and arithmetic."""

    def __init__(self, ins):
        at = ins.op.attrs
        self.m, self.n, self.k = at["m"], at["n"], at["k"]
        self.ta, self.tb, self.acc = at["a"], at["b"], at["acc"]
        d, self.ra, self.rb, scale, trans, neg = ins.operands
        self.rows = slice(d.start, d.end)
        self.E, self.mq = d.end - d.start, self.m // 4     # D per squad thread; rows per warp
        self.scale = scale.value
        self.a_mn, self.b_k = bool(trans.value & 1), bool(trans.value & 2)
        self.neg_a, self.neg_b = bool(neg.value & 1), bool(neg.value & 2)

    # ------------------------------------------------------------ operands
    def _stored(self, desc: int, which: str) -> np.ndarray:
        """Physical shared offsets of the whole operand of descriptor word ``desc``:
        A (m, k) or B (k, n), element (i, j) of the matrix."""
        start, stride, sw = (int(x) for x in unpack_smem_desc(desc))
        size = SIZE[self.ta if which == "A" else self.tb]
        rows, cols = (self.m, self.k) if which == "A" else (self.k, self.n)
        i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
        # the stored operand's row is the matrix column for MN-major A and K-major B
        flip = self.a_mn if which == "A" else self.b_k
        logical = start + (j * stride + i * size if flip else i * stride + j * size)
        return swizzle_address(logical, sw)

    def operand(self, st, pc: int, warps, desc, which: str) -> np.ndarray:
        """Element indices (into the shared view of the operand's element size) of each
        warp's A rows (warps, m/4, k) or of B (warps, k, n); faults if an operand leaves
        the block's shared memory."""
        size = SIZE[self.ta if which == "A" else self.tb]
        uniq, inv = np.unique(desc, return_inverse=True)
        full = np.stack([self._stored(int(d), which) for d in uniq.tolist()])
        hi = full.reshape(len(uniq), -1).max(axis=1) + size
        mem = st.shared_mem.size
        if (hi > mem).any():
            j = int(np.argmax(hi[inv] > mem))
            thread_fault(st, warps[j] * 32, pc, f"SQMMA operand {which} reaches shared address "
                         f"0x{int(hi[inv[j]]) - size:x}, past the block's {mem} bytes of "
                         f"shared memory (.shared {mem})")
        full //= size
        if which == "A":
            q = (warps % st.warps_per_block) % 4
            idx = full[inv[:, None], q[:, None] * self.mq + np.arange(self.mq)]
        else:
            idx = full[inv]
        off = warps // st.warps_per_block * (st.shared_mem.pad // size)
        return idx + off[:, None, None]

    def operand_bytes(self, st, pc: int, warps, da, db) -> np.ndarray:
        """The shared bytes (warps, bytes) each warp's operation reads."""
        out = []
        for which, desc in (("A", da), ("B", db)):
            size = SIZE[self.ta if which == "A" else self.tb]
            idx = self.operand(st, pc, warps, desc, which).reshape(len(warps), -1, 1)
            out.append((idx * size + np.arange(size)).reshape(len(warps), -1))
        return np.concatenate(out, axis=1)

    @staticmethod
    def _squads(st, warps, db) -> bool:
        """Whether ``warps`` are whole WarpSquads, in order, each with one B descriptor."""
        if len(warps) % 4:
            return False
        w, b = warps.reshape(-1, 4), db.reshape(-1, 4)
        return bool(((w[:, 0] % st.warps_per_block) % 4 == 0).all()
                    and (w == w[:, :1] + np.arange(4)).all() and (b == b[:, :1]).all())

    # ------------------------------------------------------------ arithmetic
    def compute(self, st, pc: int, warps, da, db) -> None:
        """Complete the operations of ``warps``: read A and B, write D. Whole squads
        share their B and compute m rows at once ((squads, m, n) is (warps, m/4, n))."""
        views = st.shared_mem.views
        sa, sb = SIZE[self.ta], SIZE[self.tb]
        W = len(warps)
        A = _values(views[sa][self.operand(st, pc, warps, da, "A")], self.ta)
        if self._squads(st, warps, db):
            G, r = W // 4, self.m
            B = self.operand(st, pc, warps[::4], db[::4], "B")
        else:
            G, r = W, self.mq
            B = self.operand(st, pc, warps, db, "B")
        B = _values(views[sb][B], self.tb)                                 # (G, k, n)
        A = A.reshape(G, r, self.k)
        thr = (warps[:, None] * 32 + LANES).ravel()
        shape = (G, r, self.n)
        if self.acc in _INT_VIEW:       # exact in f64: |sums| < 2**24; then wrap to 32 bits
            acc = np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(np.int64)
            if self.neg_a != self.neg_b:
                acc = -acc
            if self.scale:
                acc += self._read_d(st, thr, _INT_VIEW[self.acc], shape)
            out = (acc & 0xFFFFFFFF).astype(np.uint32)
        else:
            acc = self._read_d(st, thr, "f32", shape) if self.scale else \
                np.zeros(shape, np.float32)
            self._steps(-A if self.neg_a else A, -B if self.neg_b else B, acc)
            out = acc.view(np.uint32)
        st.R[self.rows, thr] = out.reshape(W, 32, self.E).transpose(2, 0, 1).reshape(self.E, -1)
        st.stamp(self.rows)

    def _read_d(self, st, thr, view, shape) -> np.ndarray:
        d = st.reg[view][self.rows][:, thr]                                 # (E, W * 32)
        return np.ascontiguousarray(d.reshape(self.E, -1, 32).transpose(1, 2, 0)) \
            .reshape(shape)

    def _steps(self, A, B, acc) -> None:
        """acc (G, r, n) += A (G, r, k) @ B (G, k, n) one f32 k step at a time, in chunks
        of G."""
        At = np.ascontiguousarray(A.transpose(2, 0, 1))                    # (k, G, r)
        Bt = np.ascontiguousarray(B.transpose(1, 0, 2))                    # (k, G, n)
        per = max(1, _CHUNK // (acc.shape[1] * self.n))
        exact = self.ta in _EXACT and self.tb in _EXACT
        for w0 in range(0, acc.shape[0], per):
            w1 = min(acc.shape[0], w0 + per)
            a, b, c = At[:, w0:w1, :, None], Bt[:, w0:w1, None, :], acc[w0:w1]
            if exact or _exact_f32_products(a, b):
                tmp = np.empty_like(c)
                for kk in range(self.k):
                    np.multiply(a[kk], b[kk], out=tmp)
                    np.add(c, tmp, out=c)
            else:
                for kk in range(self.k):
                    fma_f32(a[kk], b[kk], c, out=c)


class _Pending:
    """The operations one SQMMA issue left pending: the op, its pc, the warps that have
    not completed it, their descriptor words, the sanitizer's group id."""
    __slots__ = ("op", "pc", "warps", "da", "db", "gid")

    def __init__(self, op, pc, warps, da, db, gid):
        self.op, self.pc, self.warps, self.da, self.db, self.gid = op, pc, warps, da, db, gid


class SqmmaUnit(Engine):
    """Pending SQMMA operations, in issue order."""
    KEY = "sqmma"

    def __init__(self, st):
        super().__init__(st)
        self.pending: list[_Pending] = []

    def busy(self) -> bool:
        return bool(self.pending)

    def fingerprint(self, h) -> None:
        for p in self.pending:
            h.update(int(p.pc).to_bytes(8, "little"))
            for a in (p.warps, p.da, p.db):
                h.update(np.ascontiguousarray(a))

    def settle(self) -> None:
        self.complete(None)

    def exited(self, done: np.ndarray) -> None:
        self.complete(done)

    def complete(self, warps) -> None:
        """Complete the pending operations of ``warps`` (None: all), in issue order."""
        keep = []
        san = self.st.asyn.san
        for p in self.pending:
            m = np.ones(len(p.warps), bool) if warps is None else np.isin(p.warps, warps)
            if m.any():
                p.op.compute(self.st, p.pc, p.warps[m], p.da[m], p.db[m])
                if san is not None:
                    san.sqmma_done(p.gid, int(m.sum()))
            if not m.all():
                keep.append(_Pending(p.op, p.pc, p.warps[~m], p.da[~m], p.db[~m], p.gid))
        self.pending = keep


@impl("SQMMA")
def _sqmma(ins):
    op = Sqmma(ins)

    def run(st, s, x):
        wpb = st.warps_per_block
        squad = (x.warps % wpb) // 4
        bad = 4 * (squad + 1) > wpb
        if bad.any():
            j = int(np.argmax(bad))
            thread_fault(st, x.first[j], s.pc, f"SQMMA needs a whole WarpSquad: warp "
                         f"{int(x.warps[j] % wpb)} is in squad {int(squad[j])} (warps "
                         f"{4 * int(squad[j])} .. {4 * int(squad[j]) + 3}), but the block has "
                         f"{wpb} warps")
        da, db = values1(st, op.ra, x.first), values1(st, op.rb, x.first)
        gid = -1
        san = st.asyn.san
        if san is not None:
            gid = san.sqmma_issue(x.first, s.pc, op.operand_bytes(st, s.pc, x.warps, da, db))
        if st.timing is not None:
            st.timing.sqmma(st, op, s.pc, x.warps)
        SqmmaUnit.of(st).pending.append(_Pending(op, s.pc, x.warps, da, db, gid))
    return stepping_row(run)


@impl("SQMMA.WAIT")
def _sqmma_wait(ins):
    def run(st, s, x):
        if "sqmma" in st.asyn.engines:
            SqmmaUnit.of(st).complete(x.warps)
    return stepping_row(run)
