"""``mutile.AddressTable``: arrays whose addresses a kernel reads from memory.

Published grouped GEMMs take an int64 array of matrix addresses and turn each entry into a
pointer (``tl.load(ptrs + g).to(tl.pointer_type(tl.float16))``). Passing that array as an
:class:`AddressTable` tells mutile which arrays those addresses belong to:

    table = mutile.AddressTable([a0, a1, a2])      # numpy arrays, torch CPU tensors...
    kernel[grid](table, ...)                        # the kernel sees a pointer to int64
    table.addresses                                 # int64 [a0.ctypes.data, ...]

On the llvm backend the kernel reads the real addresses, and the bounds checks accept an
access through a pointer made from an integer when it lies inside one of the launch's
arrays: a pointer argument or a member of an AddressTable argument. The Pinghu interpreter
gives every array a virtual address, so it backs the table with the members' virtual
addresses instead; a raw int64 array of real addresses faults there (docs/semantics.md,
"Pointers from integers"). The table itself is read-only to kernels.
"""
from __future__ import annotations

import numpy as np

from ..errors import LaunchError
from .specialize import as_array


class AddressTable:
    """The arrays ``arrays`` (in order) and ``addresses``, a read-only int64 numpy array of
    their data addresses (the address of element 0, as ``t.data_ptr()`` / ``a.ctypes.data``).

    Passed as a kernel argument it is a pointer to int64. The arrays are kept alive by the
    table; an array is not copied, so a kernel's stores through a pointer made from its
    address land in it."""

    __mutile_address_table__ = True

    def __init__(self, arrays):
        try:
            items = list(arrays)
        except TypeError:
            raise LaunchError(f"AddressTable takes a sequence of arrays, got "
                              f"{type(arrays).__name__}") from None
        views = []
        for i, a in enumerate(items):
            arr = as_array(a)
            if arr is None:
                raise LaunchError(f"AddressTable: entry {i} is a {type(a).__name__}, not an "
                                  "array (numpy array, torch CPU tensor, buffer)")
            views.append(arr)
        self.sources = tuple(items)                 # what the caller passed (kept alive)
        self.arrays = tuple(views)                  # their numpy views
        addrs = np.array([v.ctypes.data for v in views], dtype=np.uint64).view(np.int64)
        addrs.flags.writeable = False
        self.addresses = addrs

    @property
    def __array_interface__(self):
        """The ``addresses`` array's, so numpy (and mutile's type inference) see int64."""
        return self.addresses.__array_interface__

    def __len__(self) -> int:
        return len(self.arrays)

    def __getitem__(self, i):
        return self.arrays[i]

    def __repr__(self) -> str:
        kinds = ", ".join(f"{'x'.join(map(str, a.shape)) or 'scalar'} {a.dtype}"
                          for a in self.arrays)
        return f"AddressTable([{kinds}])"


def is_address_table(value) -> bool:
    return getattr(value, "__mutile_address_table__", False) is True
