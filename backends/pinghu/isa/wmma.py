"""Which matrix element each lane's WMMA fragment holds, for every WMMA shape.

The layouts are PTX's ``mma.sync`` fragment layouts (m16n8k16 for 16-bit inputs, m16n8k8
for tf32). With ``g = laneid >> 2`` and ``t = laneid & 3``, entry ``k`` of a fragment list
is element ``k`` of the lane's fragment as ``(row, col)`` of the A (M x K), B (K x N) or
C/D (M x N) matrix. Elements fill registers in order; 16-bit elements pack two to a
register, element ``2j`` in the low half of register ``j``; 32-bit elements take one
register each. Codegen, the interpreter and the ISA reference read this one table.
"""
from __future__ import annotations

import numpy as np

FRAGMENTS: dict[str, dict[str, list[tuple[str, str]]]] = {
    "M16N8K16": {
        "A": [("g", "2*t"), ("g", "2*t+1"), ("g+8", "2*t"), ("g+8", "2*t+1"),
              ("g", "2*t+8"), ("g", "2*t+9"), ("g+8", "2*t+8"), ("g+8", "2*t+9")],
        "B": [("2*t", "g"), ("2*t+1", "g"), ("2*t+8", "g"), ("2*t+9", "g")],
        "C": [("g", "2*t"), ("g", "2*t+1"), ("g+8", "2*t"), ("g+8", "2*t+1")],
    },
    "M16N8K8": {
        "A": [("g", "t"), ("g+8", "t"), ("g", "t+4"), ("g+8", "t+4")],
        "B": [("t", "g"), ("t+4", "g")],
        "C": [("g", "2*t"), ("g", "2*t+1"), ("g+8", "2*t"), ("g+8", "2*t+1")],
    },
}


def coords(shape: str, operand: str) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices, each ``[32 lanes, elements]``, of fragment ``operand``
    ("A", "B" or "C"; D is laid out like C) of WMMA ``shape`` (e.g. "M16N8K16")."""
    lane = np.arange(32)[:, None]
    env = {"g": lane >> 2, "t": lane & 3}
    entries = FRAGMENTS[shape][operand]
    rows = [np.broadcast_to(eval(r, {"__builtins__": {}}, env), (32, 1)) for r, _ in entries]
    cols = [np.broadcast_to(eval(c, {"__builtins__": {}}, env), (32, 1)) for _, c in entries]
    return np.concatenate(rows, axis=1), np.concatenate(cols, axis=1)
