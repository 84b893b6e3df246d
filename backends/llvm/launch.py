"""Launching a compiled kernel: argument packing, threads, faults.

``launch(kernel, args, grid)`` packs one i64 per parameter (see :mod:`lower` for the
ABI), adds each pointer parameter's ``[lo, hi)`` byte range (used by bounds checks) and
the ranges of the members of ``mutile.AddressTable`` arguments (an object with
``__mutile_address_table__``, ``arrays`` and ``addresses``; the kernel gets the
addresses),
splits the grid's linear program ids over ``num_threads`` threads (``os.cpu_count()``
by default) and calls ``<name>_programs`` from each through ctypes, which releases
the GIL, so the threads run in parallel. Worker threads get a stack large enough
for the kernel's tile buffers. The first fault (lowest program id) is raised as a
:class:`mutile.errors.DeviceFault` pointing at the op's Python source line, with a
``coredump`` dict (the program ids, the faulting access, the arrays' ranges).

The main thread never runs kernel code: it waits for the workers, so Ctrl-C reaches it.
On SIGINT (or when the watchdog's ``MUTILE_WATCHDOG`` seconds, default 600, have passed)
it sets every thread's stop slot, which the kernel polls before each program and at
every loop iteration; the launch then raises KeyboardInterrupt (or a DeviceFault naming
the loop each program was in) and the workers are free for the next launch.

Argument values: a pointer parameter takes a numpy array (or anything numpy can view
without copying: buffer protocol, ``__array_interface__``, ``__dlpack__``) or an int
address (then its range comes from ``arg_ranges`` or is unbounded); integer
parameters take ints (wrapped to their width); float parameters take floats, packed
as the bits of the parameter's type in the low bits of the slot.
"""
from __future__ import annotations

import ctypes
import os
import queue
import struct
import threading
import time

import numpy as np

from mutile.errors import DeviceFault, LaunchError
from mutile.watchdog import WATCHDOG_ENV, watchdog_seconds_now
from mutile.ir import semantics
from mutile.ir import types as T
from mutile.ir.types import PointerType

from . import inline, native_pool
from .lower_context import FAULT_STOP, STOP_SLOT
from .native_pool import (REC_BARRIER, REC_GX, REC_GY, REC_GZ, REC_SIZE, REC_SLOTS,
                          REC_TOTAL)

FAULT_SLOTS = 8
_STACK_LOCK = threading.Lock()
_PROGRAMS_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                               ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
_libc = ctypes.CDLL(None)


def _as_array(obj):
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__dlpack__") and not hasattr(obj, "__array_interface__"):
        return np.from_dlpack(obj)
    return np.asarray(obj)


def _array_range(a: np.ndarray, base: int) -> tuple[int, int]:
    """[lo, hi) bytes touched by any element of ``a`` at ``base`` (strides may be < 0)."""
    if a.size == 0:
        return base, base
    if a.flags.c_contiguous:
        return base, base + a.nbytes
    lo = hi = 0
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return base + lo, base + hi + a.itemsize


def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


_NO_MEMBERS = np.zeros((1, 2), np.uint64)     # the ranges slot of a launch without tables


def _table_ranges(name, table):
    """(label, lo, hi, base, itemsize) of each member of AddressTable argument ``name``."""
    out = []
    for i, a in enumerate(table.arrays):
        lo, hi = _array_range(a, a.ctypes.data)
        out.append((f"array {i} of AddressTable '{name}'", lo, hi, a.ctypes.data, a.itemsize))
    return out


def pack_args(param_types, param_names, args, arg_ranges=None, extra=None):
    """(ctypes i64 array of 3n + 2 slots, keep-alive list, ranges) for one launch; the
    last two slots address the ``[lo, hi)`` pairs of the AddressTable arguments' members
    and count them (``extra``, a list, receives their descriptions)."""
    n = len(param_types)
    if len(args) != n:
        raise LaunchError(f"kernel takes {n} arguments ({', '.join(param_names)}), got {len(args)}")
    slots = (ctypes.c_int64 * (3 * n + 2))()
    keep, ranges = [], []
    members = []
    for t, name, v in zip(param_types, param_names, args):
        if isinstance(t, PointerType) and getattr(v, "__mutile_address_table__", False) is True:
            members += _table_ranges(name, v)
            keep.append(v)
    if extra is not None:
        extra += members
    if members:                                 # else the shared empty table: no allocation
        pairs = np.array([(lo, hi) for _, lo, hi, _, _ in members], np.uint64)
        keep.append(pairs)
    else:
        pairs = _NO_MEMBERS
    slots[3 * n] = _wrap64(pairs.ctypes.data)
    slots[3 * n + 1] = len(members)
    for k, (t, name, v) in enumerate(zip(param_types, param_names, args)):
        rng = arg_ranges[k] if arg_ranges is not None and arg_ranges[k] is not None else None
        rng = None if rng is None else (int(rng[0]), int(rng[1]))
        if isinstance(t, PointerType):
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                addr = int(v)
                rng = rng or (0, (1 << 64) - 1)
            else:
                try:
                    a = _as_array(v)
                except Exception as e:
                    raise LaunchError(f"argument '{name}' must be an array or an address: {e}")
                keep.append(a)
                addr = a.ctypes.data
                rng = rng or _array_range(a, addr)
            slots[k] = _wrap64(addr)
        else:
            slots[k] = _scalar_bits(t, name, v)
            rng = None
        ranges.append(rng)
        if rng is not None:
            slots[n + 2 * k] = _wrap64(rng[0])
            slots[n + 2 * k + 1] = _wrap64(rng[1])
    return slots, keep, ranges


_F32, _U32 = struct.Struct("<f"), struct.Struct("<I")
_NO_MEMBERS_AT = _wrap64(_NO_MEMBERS.ctypes.data)
_F32_MAX = 3.4e38           # below float32's largest finite value: one rounding, no overflow


def _param_kinds(kernel) -> tuple:
    """Per parameter: "p" (pointer), "i" (integer or bool), "f" (f32) or None (other)."""
    kinds = getattr(kernel, "_param_kinds", None)
    if kinds is None:
        kinds = kernel._param_kinds = tuple(
            "p" if isinstance(t, PointerType) else "f" if t == T.f32 else
            None if t.is_floating() else "i" for t in kernel.param_types)
    return kinds


def pack_plain(kernel, args):
    """:func:`pack_args` for the common launch, quickly: every pointer argument a numpy
    array, every other an ``int`` (or a finite ``float`` for an f32 parameter), no ranges
    given. None when the launch is not of that kind (then :func:`pack_args` packs it)."""
    kinds = _param_kinds(kernel)
    n = len(kinds)
    if len(args) != n:
        return None
    slots = (ctypes.c_int64 * (3 * n + 2))()
    slots[3 * n] = _NO_MEMBERS_AT
    keep, ranges = [], []
    for k, kind, v in zip(range(n), kinds, args):
        if kind == "p":
            if type(v) is not np.ndarray:
                return None
            try:
                addr = ctypes.addressof(ctypes.c_char.from_buffer(v))
            except (TypeError, ValueError, BufferError):    # read-only, empty, strided
                addr = v.ctypes.data
            rng = (addr, addr + v.nbytes) if v.flags.c_contiguous else _array_range(v, addr)
            keep.append(v)
            slots[k] = addr
            slots[n + 2 * k], slots[n + 2 * k + 1] = rng
            ranges.append(rng)
            continue
        if kind == "i" and type(v) is int and -(1 << 63) <= v < 1 << 63:
            slots[k] = v
        elif kind == "f" and type(v) is float and -_F32_MAX < v < _F32_MAX:
            slots[k] = _U32.unpack(_F32.pack(v))[0]
        else:
            return None
        ranges.append(None)
    return slots, keep, ranges


def _scalar_bits(t, name, v) -> int:
    try:
        if t.is_floating():
            # one rounding from the exact double (mutile's rule, whatever ml_dtypes does)
            val = semantics.convert(np.array([float(v)], np.float64), T.f64, t)
            bits = np.asarray(val, dtype=t.to_numpy())[0].view(f"u{max(1, t.bits // 8)}")
            return _wrap64(int(bits))
        return _wrap64(int(v))
    except (TypeError, ValueError) as e:
        raise LaunchError(f"argument '{name}' must be a {t} scalar, got {v!r} ({e})") from None


def _grid3(grid) -> tuple[int, int, int]:
    if type(grid) is tuple and len(grid) == 3:          # the runtime's (x, y, z)
        gx, gy, gz = grid
        if (type(gx) is int and type(gy) is int and type(gz) is int
                and 0 <= gx < 1 << 31 and 0 <= gy < 1 << 31 and 0 <= gz < 1 << 31):
            return grid
    g = tuple(int(x) for x in (grid if isinstance(grid, (tuple, list)) else (grid,)))
    if not 1 <= len(g) <= 3 or any(x < 0 or x >= 1 << 31 for x in g):
        raise LaunchError(f"grid must be 1 to 3 non-negative sizes, got {grid!r}")
    return (g + (1, 1))[:3]


def launch(kernel, args, grid, num_threads=None, arg_ranges=None) -> None:
    """Run ``kernel`` (an :class:`LLVMKernel`) over ``grid``; raise the first fault."""
    gx, gy, gz = _grid3(grid)
    total = gx * gy * gz
    if total == 0:
        return
    limit = watchdog_seconds_now()           # every check that can raise comes before the run
    extra = []
    packed = pack_plain(kernel, args) if arg_ranges is None else None
    if packed is None:
        packed = pack_args(kernel.param_types, kernel.param_names, args, arg_ranges, extra)
    slots, keep, ranges = packed
    nthreads = max(1, min(int(num_threads or CPUS), total))
    faults, stopped = run_packed(kernel, programs_address(kernel), ctypes.addressof(slots),
                                 gx, gy, gz, total, nthreads, limit, inline_runner(kernel))
    del keep
    if len(faults) or stopped is not None:
        raise_faults(kernel, faults, ranges, (gx, gy, gz), slots, extra, stopped, limit)


def run_packed(kernel, fn_address, slots_address, gx, gy, gz, total, nthreads, limit, here):
    """Run a packed launch: inline on the main thread when it uses one thread and may
    (``here``: :func:`inline_runner`), else on the workers; flush the kernel's prints.
    Returns (the fault records of the workers that faulted or stopped, empty when none
    did; the seconds after which the watchdog stopped it, or None)."""
    ran = None
    if nthreads == 1 and here is not None:
        ran = here.run(fn_address, slots_address, gx, gy, gz, total, limit)
    if ran is None:
        rec = (ctypes.c_int64 * REC_SIZE)(fn_address, slots_address, gx, gy, gz, total, 0)
        ran = run_records(ctypes.addressof(rec), [kernel], nthreads, kernel.frame_bytes, limit)
    if kernel.prints:
        _libc.fflush(None)
    return ran[0], ran[2]


def inline_runner(kernel):
    """The process's inline runner if ``kernel``'s frame fits the main thread, else None."""
    here = inline.inline()
    return here if here is not None and here.fits(kernel.frame_bytes) else None


def raise_faults(kernel, faults, ranges, grid, slots, extra, stopped, limit) -> None:
    """Raise the first fault in ``faults`` (the lowest program id), or the watchdog's
    report when it stopped the launch ``stopped`` seconds in."""
    hit = [f for f in faults if f[0] not in (0, FAULT_STOP)]
    if hit:
        first = min(hit, key=lambda f: f[4])
        raise _fault(kernel, first, ranges, grid, slots, [f for f in hit if f is not first],
                     extra)
    if stopped is not None:
        raise _watchdog_fault(kernel, faults, grid, grid[0] * grid[1] * grid[2], stopped, limit)


def programs_address(kernel) -> int:
    """The entry address of ``kernel``'s ``<name>_programs`` function."""
    at = getattr(kernel, "_programs_at", None)
    if at is None:
        at = kernel._programs_at = ctypes.cast(kernel.programs, ctypes.c_void_p).value
    return at


# ---------------------------------------------------------------- running, Ctrl-C, watchdog
CPUS = os.cpu_count() or 1


def run_records(records_address, kernels, nthreads, stack_bytes, limit):
    """Run the launch records at ``records_address`` (``native_pool.REC_SIZE`` int64 each,
    one per kernel of ``kernels``) on ``nthreads`` workers, in order, and wait, keeping
    the main thread responsive: Ctrl-C asks every worker to stop at its next loop
    iteration or program, waits for them and re-raises; the watchdog does the same after
    ``limit`` seconds. Returns (a copy of each worker's fault record, the record index in
    which each worker faulted or stopped, -1 for none, both empty when none did; the
    seconds after which the watchdog stopped the run, or None)."""
    pool = native_pool.pool()
    if pool is None or stack_bytes + (1 << 20) > pool.STACK // 2:
        return _run_in_threads(records_address, kernels, nthreads, stack_bytes, limit)
    with pool.lock:
        pool.grow(nthreads, _STACK_LOCK)
        stopped, interrupted, t0 = None, None, None
        try:
            pool.post(records_address, len(kernels), nthreads)
        except BaseException as e:      # Ctrl-C before or after the one native post
            interrupted = e
            pool.stop(nthreads)
        while True:
            try:           # a signal may land anywhere in here: every path stops them
                if pool.wait(nthreads, 0.02):
                    break
                t0 = t0 or time.monotonic()
                if stopped is None and limit > 0 and time.monotonic() - t0 > limit:
                    stopped = time.monotonic() - t0
                    pool.stop(nthreads)
            except BaseException as e:   # never leave while a worker uses the launch's memory
                interrupted = interrupted or e
                pool.stop(nthreads)
        if pool.clean(nthreads):
            faults, where = (), ()
        else:
            faults = pool.fault_rows[:nthreads].copy()
            where = [pool.where(i) for i in range(nthreads)]
    if interrupted is not None:
        raise interrupted
    return faults, where, stopped


def _run_in_threads(records_address, kernels, nthreads, stack_bytes, limit):
    """:func:`run_records` on threads started for the run, with stacks of ``stack_bytes``
    (kernels whose tile buffers do not fit the pool's stacks; machines without it)."""
    recs = np.ctypeslib.as_array((ctypes.c_int64 * (REC_SIZE * len(kernels))).from_address(
        records_address)).reshape(len(kernels), REC_SIZE)
    faults = np.zeros((nthreads, FAULT_SLOTS), np.int64)
    where = [-1] * nthreads
    first = [len(kernels)]          # the first record a worker faulted in
    barrier = threading.Barrier(nthreads)

    def work(i):
        for r, (k, rec) in enumerate(zip(kernels, recs)):
            f = faults[i]
            if not (first[0] < r or f[0] or f[STOP_SLOT]):
                total = int(rec[REC_TOTAL])
                lo, hi = i * total // nthreads, (i + 1) * total // nthreads
                if lo < hi:
                    k.programs(int(rec[REC_SLOTS]), int(rec[REC_GX]), int(rec[REC_GY]),
                               int(rec[REC_GZ]), lo, hi, f.ctypes.data)
                if f[0] or f[STOP_SLOT]:
                    where[i] = r
                    first[0] = min(first[0], r)
            if rec[REC_BARRIER]:
                barrier.wait()

    size = (stack_bytes + (2 << 20) + 0xFFFF) & ~0xFFFF
    done = queue.SimpleQueue()

    def target(i):
        try:
            work(i)
        finally:
            done.put(None)

    started, t0, stopped, interrupted = 0, time.monotonic(), None, None
    with _STACK_LOCK:
        old = threading.stack_size(size)
        try:
            for i in range(nthreads):
                threading.Thread(target=target, args=(i,), daemon=True).start()
                started += 1
        except BaseException as e:        # Ctrl-C while starting them: stop what runs
            interrupted = e
            faults[:, STOP_SLOT] = 1
            barrier.abort()
        finally:
            threading.stack_size(old)
    left = started
    while left:
        try:
            try:
                done.get(timeout=0.05)
                left -= 1
            except queue.Empty:
                if stopped is None and limit > 0 and time.monotonic() - t0 > limit:
                    stopped = time.monotonic() - t0
                    faults[:, STOP_SLOT] = 1
        except BaseException as e:
            interrupted = interrupted or e
            faults[:, STOP_SLOT] = 1
    if interrupted is not None:
        raise interrupted
    return faults, where, stopped


def _watchdog_fault(kernel, faults, grid, total, seconds, limit) -> DeviceFault:
    """The report of a launch the watchdog stopped: where each thread's program was."""
    gx, gy, _ = grid
    where, first = [], None
    for f in faults:
        if f[0] != FAULT_STOP:
            continue
        lin = int(f[4])
        pid = (lin % gx, (lin // gx) % gy, lin // (gx * gy))
        loc, desc = kernel.checks[int(f[1])]
        first = first or loc
        where.append(f"  program {pid}: in the {desc} at {loc}")
    lines = "\n".join(where) or "  (between programs)"
    err = DeviceFault(f"kernel '{kernel.name}': watchdog: still running after {seconds:.1f} s "
                      f"({WATCHDOG_ENV}={limit:g}; it may loop forever: raise "
                      f"{WATCHDOG_ENV} for longer runs, 0 turns it off); {total} programs "
                      f"launched; stopped\n{lines}", first)
    err.kind = FAULT_STOP
    err.coredump = {"backend": "llvm", "kernel": kernel.name, "grid": list(grid),
                    "watchdog_seconds": seconds,
                    "stopped": [{"program": _pid(int(f[4]), grid),
                                 "loop": str(kernel.checks[int(f[1])][0])}
                                for f in faults if f[0] == FAULT_STOP]}
    return err


def _fault(kernel, f, ranges, grid, slots, others=(), extra=()) -> DeviceFault:
    """The DeviceFault of fault record ``f`` (with its core dump; ``others``: the records
    of the other threads that faulted too; ``extra``: the AddressTable members)."""
    kind, check, addr, param, lin, elem = (int(f[i]) for i in (0, 1, 2, 3, 4, 5))
    gx, gy, _ = grid
    pid = (lin % gx, (lin // gx) % gy, lin // (gx * gy))
    loc, desc = kernel.checks[check]
    where = f"program {pid}"
    if kind == 2:
        err = DeviceFault(f"{desc} ({where}, tile element {elem})", loc)
    else:
        addr &= (1 << 64) - 1
        k = param if param >= 0 else _nearest(kernel, ranges, addr)
        member = _member_near(extra, addr) if param < 0 else None
        raw = param < 0 and kernel_int_pointers(kernel) and not extra
        if member is not None and (k is None or _dist(member[1:3], addr) <
                                   _dist(ranges[k], addr)):
            label, lo, hi, base, size = member
            name, idx, length = label, (addr - base) // size, (hi - lo) // size
            msg = (f"{desc} out of bounds in {where} (tile element {elem}): element {idx} "
                   f"of {label}, which has {length} elements (address {addr:#x})")
        elif k is None or raw:
            msg = (f"{desc} out of bounds in {where}: address {addr:#x} is not in any array "
                   "of the launch" + (" (a pointer made from an integer is checked against "
                   "the pointer arguments and the members of mutile.AddressTable arguments: "
                   "pass the arrays as a mutile.AddressTable, or launch with "
                   "check_bounds=False to use raw addresses unchecked)"
                   if kernel_int_pointers(kernel) else ""))
            idx = length = None
            name = None
        else:
            name = kernel.param_names[k]
            lo, hi = ranges[k]
            size = max(1, kernel.param_types[k].element_ty.bits // 8)
            base = int(slots[k]) & ((1 << 64) - 1)
            idx, length = (addr - lo) // size, (hi - lo) // size
            if base == lo:
                msg = (f"{desc} out of bounds in {where} (tile element {elem}): element {idx} "
                       f"of '{name}', which has {length} elements (address {addr:#x})")
            else:   # a view whose first element is not its lowest address (negative strides)
                off = (addr - base) // size
                msg = (f"{desc} out of bounds in {where} (tile element {elem}): offset {off} "
                       f"from '{name}' (its first element), outside the offsets "
                       f"{(lo - base) // size}..{(hi - base) // size - 1} that its array spans "
                       f"(a view with negative strides; address {addr:#x})")
                idx = off
        err = DeviceFault(msg, loc)
        err.param, err.index, err.length, err.address = name, idx, length, addr
    err.program, err.element, err.kind = pid, elem, kind
    access = {"kind": "assertion" if kind == 2 else "out of bounds", "op": desc,
              "program": list(pid), "tile_element": elem}
    if kind != 2:
        access.update(address=f"{err.address:#x}", parameter=err.param, element=err.index,
                      length=err.length)
    err.coredump = {
        "backend": "llvm", "kernel": kernel.name, "grid": list(grid), "access": access,
        "arrays": {n: [f"{r[0]:#x}", f"{r[1]:#x}"] for n, r, t in
                   zip(kernel.param_names, ranges, kernel.param_types)
                   if isinstance(t, PointerType) and r is not None},
        "other_faulting_programs": [_pid(int(g[4]), grid) for g in others],
    }
    return err


def _pid(lin, grid):
    gx, gy, _ = grid
    return [lin % gx, (lin // gx) % gy, lin // (gx * gy)]


def kernel_int_pointers(kernel) -> bool:
    """Whether the kernel makes pointers from integers (its checks name AddressTable)."""
    return bool(getattr(kernel, "int_pointers", False))


def _dist(r, addr) -> int:
    return 0 if r[0] <= addr < r[1] else min(abs(addr - r[0]), abs(addr - r[1]))


def _member_near(extra, addr):
    """The AddressTable member (label, lo, hi, base, itemsize) nearest ``addr``, or None."""
    return min(extra, key=lambda m: _dist(m[1:3], addr), default=None)


def _nearest(kernel, ranges, addr):
    best, dist = None, None
    for k, (t, r) in enumerate(zip(kernel.param_types, ranges)):
        if not isinstance(t, PointerType) or r is None or r == (0, (1 << 64) - 1):
            continue
        d = 0 if r[0] <= addr < r[1] else min(abs(addr - r[0]), abs(addr - r[1]))
        if dist is None or d < dist:
            best, dist = k, d
    return best


def programs_function(address: int):
    """The ctypes callable of a ``<name>_programs`` entry point."""
    return _PROGRAMS_T(address)
