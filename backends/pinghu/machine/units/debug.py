"""DBG rows: ``device_print`` records and ``device_assert`` checks.

Like a GPU's printf FIFO, ``DBG.PRINT`` records (format, block, element index, value) for
every executing element; after the launch :meth:`Printer.flush` prints them sorted by
block, then program order, then element index, one line each, exactly as the llvm
backend prints::

    pid (0, 1, 0) idx (3, 7) prefix: 1.500000

The format table comes from the kernel (``debug={"prints": [{"label", "shape", "hex",
"bits"}], "asserts": [message]}``). ``DBG.ASSERT`` faults with its message (and the core
dump of the first failing thread) where the predicate is false.
"""
from __future__ import annotations

import sys

import numpy as np

from ..rows import VIEW, elements, fault_first, impl, pred_reader, reader


class Printer:
    """The print records of one launch."""

    def __init__(self, debug: dict | None):
        debug = debug or {}
        self.formats = debug.get("prints", [])
        self.asserts = debug.get("asserts", [])
        self.chunks: list = []

    def record(self, fmt: int, kind: str, blocks, index, values) -> None:
        """Record ``values`` (of register type ``kind``) printed by ``blocks`` (linear
        block ids) at element ``index``es with format ``fmt``."""
        self.chunks.append((len(self.chunks), fmt, kind, blocks, index, values))

    def lines(self, grid) -> list[str]:
        """The formatted lines, sorted by block, program order, element index."""
        rows = []
        for seq, fmt, kind, blocks, index, values in self.chunks:
            for b, i, v in zip(blocks.tolist(), index.tolist(), values.tolist()):
                rows.append((b, seq, i, fmt, kind, v))
        rows.sort(key=lambda r: r[:3])
        gx, gy, _ = grid
        return [self._line((b % gx, (b // gx) % gy, b // (gx * gy)), i, fmt, kind, v)
                for b, _, i, fmt, kind, v in rows]

    def _line(self, pid, i, fmt, kind, v) -> str:
        f = self.formats[fmt] if fmt < len(self.formats) else \
            {"label": f"[format {fmt}] ", "shape": [], "hex": kind[0] == "B", "bits": 0}
        head = f"pid ({pid[0]}, {pid[1]}, {pid[2]}) "
        if f["shape"]:
            idx = np.unravel_index(i, f["shape"]) if 0 <= i < np.prod(f["shape"]) else (i,)
            head += "idx (" + ", ".join(str(int(x)) for x in idx) + ") "
        if kind[0] == "B" or f.get("hex"):
            bits = f.get("bits") or (64 if kind.endswith("64") else 32)
            text = f"0x{int(v) & ((1 << bits) - 1):x}"
        elif kind[0] == "F":
            text = f"{float(v):f}"
        else:
            text = str(int(v))
        return head + f["label"] + text

    def flush(self, grid) -> None:
        """Print the records (and forget them)."""
        if self.chunks:
            out = self.lines(grid)
            self.chunks = []
            print("\n".join(out), flush=True)
            sys.stdout.flush()


@impl("DBG.PRINT")
def _print(ins):
    kind = ins.op.attrs["type"]
    fmt = ins.operands[0].value
    ra, ri = reader(ins.operands[1], VIEW[kind][0]), reader(ins.operands[2], "i32")
    k = elements(ins)

    def run(st, sel):
        shape = (k, sel.n)
        on = np.ones(shape, bool) if sel.mask is None else np.broadcast_to(sel.mask, shape)
        thr = np.broadcast_to(sel.thread_array()[None, :], shape)[on]
        st.printer.record(fmt, kind, st.block_ids[st.thread_block[thr]],
                          np.broadcast_to(ri(st, sel.threads), shape)[on],
                          np.broadcast_to(ra(st, sel.threads), shape)[on])
    return run


@impl("DBG.ASSERT")
def _assert(ins):
    fmt = ins.operands[0].value
    rp = pred_reader(ins.operands[1])
    k = elements(ins)

    def run(st, sel):
        bad = ~np.broadcast_to(rp(st, sel.threads), (k, sel.n))
        if sel.mask is not None:
            bad = bad & sel.mask
        if bad.any():
            msgs = st.printer.asserts
            msg = msgs[fmt] if fmt < len(msgs) else f"device assertion {fmt} failed"
            fault_first(st, sel, ins, bad.ravel(), None, lambda j: msg)
    return run
