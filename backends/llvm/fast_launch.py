"""The steady-state launch of one compiled kernel, with everything that does not change
between launches looked up once.

``runner(kernel, num_threads)`` returns ``go(args, grid)`` or None. The runtime's launch
plans (``mutile/runtime/launch_plan.py``) call it for launches whose signature they have
seen: every pointer argument is then a numpy array of the specialized dtype, every int
fits i32 and every float is a Python float, and the grid is three positive ints. ``go``
packs the argument slots straight from them (an array's address and byte range, an
int, an f32's bits) and runs the launch as :func:`launch.launch` does, inline or on the
workers; any argument it does not expect goes to :func:`launch.launch` whole, so a
check is never skipped. The fault path rebuilds the argument ranges from the slots.

Small launches run on one thread: handing programs to the workers and waiting for them
costs tens of microseconds (more on a busy machine). So the first planned launch, and
every ``PROBE``-th after it, runs on the calling thread alone (inline, see
:mod:`.inline`); after a run whose time times its threads is under ``SERIAL_SECONDS``
the next one runs on one thread too, after a longer one on the workers.
"""
from __future__ import annotations

import ctypes
import struct
import time

import numpy as np

from mutile.watchdog import watchdog_seconds_now

from .launch import (CPUS, _NO_MEMBERS_AT, _param_kinds, inline_runner, launch,
                     programs_address, raise_faults, run_packed)

_F32, _U32 = struct.Struct("<f"), struct.Struct("<I")
_F32_MAX = 3.4e38
SERIAL_SECONDS = 30e-6
PROBE = 64
_addressof, _from_buffer = ctypes.addressof, ctypes.c_char.from_buffer


def runner(kernel, num_threads=None):
    """``go(args, grid)`` for ``kernel`` (see the module docstring); None when a
    parameter is of a kind it does not pack (f64, f16 and other non-f32 floats)."""
    kinds = _param_kinds(kernel)
    if None in kinds:
        return None
    n = len(kinds)
    pointers = tuple(k for k, c in enumerate(kinds) if c == "p")
    ints = tuple(k for k, c in enumerate(kinds) if c == "i")
    floats = tuple(k for k, c in enumerate(kinds) if c == "f")
    slots_type = ctypes.c_int64 * (3 * n + 2)
    threads = int(num_threads or CPUS)
    fn_address, here = programs_address(kernel), inline_runner(kernel)
    serial = [True, 0]          # one thread is enough (as far as we know); launches since
    perf = time.perf_counter

    def ranges_of(slots):
        return [(slots[n + 2 * k], slots[n + 2 * k + 1]) if c == "p" else None
                for k, c in enumerate(kinds)]

    def go(args, grid):
        slots = slots_type()
        slots[3 * n] = _NO_MEMBERS_AT
        for k in pointers:
            v = args[k]
            if type(v) is not np.ndarray:
                return launch(kernel, args, grid, num_threads)
            try:                                 # a writeable C-contiguous buffer
                lo = _addressof(_from_buffer(v))
                hi = lo + v.nbytes
            except (TypeError, ValueError, BufferError):    # read-only, empty, strided
                return launch(kernel, args, grid, num_threads)
            slots[k] = slots[n + 2 * k] = lo
            slots[n + 2 * k + 1] = hi
        for k in ints:
            v = args[k]
            if type(v) is not int or not -(1 << 63) <= v < 1 << 63:
                return launch(kernel, args, grid, num_threads)
            slots[k] = v
        for k in floats:
            v = args[k]
            if type(v) is not float or not -_F32_MAX < v < _F32_MAX:
                return launch(kernel, args, grid, num_threads)
            slots[k] = _U32.unpack(_F32.pack(v))[0]
        gx, gy, gz = grid
        total = gx * gy * gz
        limit = watchdog_seconds_now()
        serial[1] += 1
        one = here is not None and (serial[0] or serial[1] % PROBE == 0)
        nthreads = 1 if one else min(threads, total)
        t0 = perf()
        faults, stopped = run_packed(kernel, fn_address, _addressof(slots), gx, gy, gz, total,
                                     nthreads, limit, here)
        spent = here.seconds if one and here.seconds is not None else perf() - t0
        serial[0] = here is not None and spent * nthreads < SERIAL_SECONDS
        if len(faults) or stopped is not None:
            raise_faults(kernel, faults, ranges_of(slots), grid, slots, [], stopped, limit)

    return go
