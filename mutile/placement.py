"""Where an array sits in the allocation it views: the one rule by which the Pinghu
interpreter places arrays in its virtual memory (``backends/pinghu/machine/memory.py``),
and by which the autotuner's workers place their copies, so a modelled time depends on
an array's alignment, never on the address the host's allocator returned."""
from __future__ import annotations

import numpy as np


def allocation_offset(a: np.ndarray, real: int | None = None) -> int:
    """``real`` (an address in ``a``'s memory; default: ``a``'s data pointer) as an
    offset from the start of the allocation ``a`` views, if that allocation is 16-byte
    aligned (so alignment modulo 16 is the real one); else ``real`` itself."""
    real = a.ctypes.data if real is None else real
    owner = a
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    base = owner.ctypes.data
    return real - base if base % 16 == 0 and real >= base else real
