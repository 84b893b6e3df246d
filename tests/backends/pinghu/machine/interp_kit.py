"""Helpers of the interpreter tests: build listings, run them as decoded binaries, move
register images between numpy arrays and registers.

Programs run 2 blocks of 64 threads (``NT`` = 128 threads in all); R250 holds the thread's
global index ``g``. A *register image* is a uint32 array (registers, NT): image[j, g] is
register ``start + j`` of thread ``g`` (64-bit values: low word first), loaded and stored
with runs of up to 16 registers through the scratch runs R[200:216] (indices) and
R[216:248] (addresses).
"""
from __future__ import annotations

import numpy as np

from mutile.backends.pinghu import assemble, decode, encode
from mutile.backends.pinghu.machine.scheduler import execute

NT, BLOCK = 128, 64
PROLOGUE = """        S2R R250, SR_TID.X
        S2R R251, SR_CTAID.X
        ALU.IMAD.S32 R250, R251, 64, R250"""


def binary(text: str):
    """Assemble ``text`` and return the program decoded from its binary encoding."""
    p = assemble(text)
    q = decode(encode(p))
    assert q == p
    return q


def run(text: str, args, grid=(1, 1, 1), **kw):
    """Run listing ``text`` (as a decoded binary); returns the stats."""
    return execute(binary(text), args, grid, **kw)


def header(params, name: str = "t", threads: int = BLOCK, shared: int = 0,
           local: int = 0) -> str:
    """Directives: ``params`` is a list of (name, type); offsets are 8 bytes apart."""
    lines = [f".kernel {name}"]
    lines += [f".param {n} {t} c[0x{8 * i:x}]" for i, (n, t) in enumerate(params)]
    lines += [f".threads {threads}", f".shared {shared}", f".local {local}", ""]
    return "\n".join(lines) + "\n"


def transfer(op: str, param: int, start: int, nregs: int, width: int = 4) -> str:
    """Load (op "LD") or store (op "ST") registers R[start:start+nregs] of every thread
    from/to the register image of pointer parameter number ``param``."""
    out = []
    for c0 in range(0, nregs, 16):
        n = min(16, nregs - c0)
        out += [f"ALU.IADD.S32 R252, R250, {c0 * NT}",
                f"ALU.IOTA.S32 R[200:{200 + n}], R252, {NT}",
                f"ALU.IMAD.WIDE.S32 R[216:{216 + 2 * n}], R[200:{200 + n}], {width}, "
                f"c[0x{8 * param:x}]"]
        regs = f"R[{start + c0}:{start + c0 + n}]"
        out.append(f"LSU.LD.GLOBAL.B32 {regs}, [R[216:{216 + 2 * n}]]" if op == "LD" else
                   f"LSU.ST.GLOBAL.B32 [R[216:{216 + 2 * n}]], {regs}")
    return "\n".join("        " + x for x in out)


def to_image(values: np.ndarray) -> np.ndarray:
    """Typed values (k, NT) of 4- or 8-byte elements -> register image (k * w, NT)."""
    v = np.ascontiguousarray(values)
    if v.dtype.itemsize == 4:
        return v.view(np.uint32).copy()
    k = v.shape[0]
    return v.view(np.uint32).reshape(k, NT, 2).transpose(0, 2, 1).reshape(2 * k, NT).copy()


def from_image(img: np.ndarray, dtype) -> np.ndarray:
    """Register image -> typed values (k, NT) of ``dtype`` (4 or 8 bytes)."""
    dtype = np.dtype(dtype)
    if dtype.itemsize == 4:
        return np.ascontiguousarray(img).view(dtype)
    k = img.shape[0] // 2
    return np.ascontiguousarray(img.reshape(k, 2, NT).transpose(0, 2, 1)).view(dtype) \
        .reshape(k, NT)


def poisoned(nregs: int) -> np.ndarray:
    """An output register image no kernel result can be mistaken for (0xDEADBEEF)."""
    return np.full((nregs, NT), 0xDEADBEEF, np.uint32)
