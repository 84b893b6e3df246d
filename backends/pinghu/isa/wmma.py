"""Which matrix element each lane's WMMA fragment holds, for every WMMA form.

The shapes are the machine file's (``[isa] wmma_shapes``: m16n8k8, m16n8k16, m8n16k16,
m16n16k16, m16n16k32, K counted in 16-bit elements); f16 and bf16 have every shape, tf32
the m16n8k8 the codegen uses. The layouts are this model's (Moore Threads does not
publish MP31's): PTX's ``mma.sync`` fragments for m16n8k16 and m16n8k8 (16-bit and tf32),
and for the wider shapes those fragments side by side (N 16: columns ``n`` and ``n+8``;
K 32: k and k+16; M 8: the upper rows only). With ``g = laneid >> 2`` and ``t = laneid &
3``, entry ``k`` of a fragment list is element ``k`` of the lane's fragment as ``(row,
col)`` of the A (M x K), B (K x N) or C/D (M x N) matrix. Elements fill registers in
order; 16-bit elements pack two to a register, element ``2j`` in the low half of
register ``j``; 32-bit elements take one register each. Codegen, the interpreter and the
ISA reference read this one table.
"""
from __future__ import annotations

import numpy as np

import mutile.machines as machines

WMMA_SHAPES = tuple(tuple(s) for s in machines.default().value("isa", "wmma_shapes"))
INPUT_BYTES = {"F16": 2, "BF16": 2, "TF32": 4}      # bytes of one A or B element
TF32_SHAPES = ((16, 8, 8),)                          # the tf32 forms the table has


def shape_name(m: int, n: int, k: int) -> str:
    return f"M{m}N{n}K{k}"


def layout(shape: str, ab: str) -> str:
    """The :data:`FRAGMENTS` key of WMMA ``shape`` ("M16N8K8") on ``ab`` inputs."""
    return shape + (".TF32" if ab == "TF32" else "")


def _shift(entries, dr: str = "", dc: str = ""):
    """``entries`` with ``dr`` added to each row and ``dc`` to each column."""
    return [(r + dr, c + dc) for r, c in entries]


_A16 = [("g", "2*t"), ("g", "2*t+1"), ("g+8", "2*t"), ("g+8", "2*t+1"),
        ("g", "2*t+8"), ("g", "2*t+9"), ("g+8", "2*t+8"), ("g+8", "2*t+9")]    # 16 x 16
_A8 = [("g", "2*t"), ("g", "2*t+1"), ("g", "2*t+8"), ("g", "2*t+9")]           # 8 x 16
_B16 = [("2*t", "g"), ("2*t+1", "g"), ("2*t+8", "g"), ("2*t+9", "g")]           # 16 x 8
_C = [("g", "2*t"), ("g", "2*t+1"), ("g+8", "2*t"), ("g+8", "2*t+1")]          # 16 x 8 f32
_B16N16 = _B16 + _shift(_B16, dc="+8")                                          # 16 x 16
_C16N16 = _C + _shift(_C, dc="+8")                                              # 16 x 16

FRAGMENTS: dict[str, dict[str, list[tuple[str, str]]]] = {
    "M16N8K8": {"A": _A16[:4], "B": _B16[:2], "C": _C},
    "M16N8K16": {"A": _A16, "B": _B16, "C": _C},
    "M8N16K16": {"A": _A8, "B": _B16N16, "C": _A8},
    "M16N16K16": {"A": _A16, "B": _B16N16, "C": _C16N16},
    "M16N16K32": {"A": _A16 + _shift(_A16, dc="+16"), "B": _B16N16 + _shift(_B16N16, "+16"),
                  "C": _C16N16},
    "M16N8K8.TF32": {
        "A": [("g", "t"), ("g+8", "t"), ("g", "t+4"), ("g+8", "t+4")],
        "B": [("t", "g"), ("t+4", "g")],
        "C": _C,
    },
}


def registers(key: str, operand: str) -> int:
    """Registers a lane's fragment ``operand`` ("A", "B" or "C") of layout ``key`` takes."""
    size = 4 if operand == "C" or key.endswith(".TF32") else 2
    return len(FRAGMENTS[key][operand]) * size // 4


def coords(key: str, operand: str) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices, each ``[32 lanes, elements]``, of fragment ``operand``
    ("A", "B" or "C"; D is laid out like C) of layout ``key`` (e.g. "M16N8K16")."""
    lane = np.arange(32)[:, None]
    env = {"g": lane >> 2, "t": lane & 3}
    entries = FRAGMENTS[key][operand]
    rows = [np.broadcast_to(eval(r, {"__builtins__": {}}, env), (32, 1)) for r, _ in entries]
    cols = [np.broadcast_to(eval(c, {"__builtins__": {}}, env), (32, 1)) for _, c in entries]
    return np.concatenate(rows, axis=1), np.concatenate(cols, axis=1)
