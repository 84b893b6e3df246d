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
import threading
import time

import numpy as np

from mutile.errors import DeviceFault, LaunchError
from mutile.watchdog import WATCHDOG_ENV, watchdog_seconds
from mutile.ir import semantics
from mutile.ir import types as T
from mutile.ir.types import PointerType

from .lower_context import FAULT_STOP, STOP_SLOT

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
    limit = watchdog_seconds()          # every check that can raise comes before the run
    extra = []
    slots, keep, ranges = pack_args(kernel.param_types, kernel.param_names, args, arg_ranges,
                                    extra)
    nthreads = max(1, min(int(num_threads or os.cpu_count() or 1), total))
    faults = [(ctypes.c_int64 * FAULT_SLOTS)() for _ in range(nthreads)]
    fn = kernel.programs
    bounds = [(i * total // nthreads, (i + 1) * total // nthreads) for i in range(nthreads)]

    def run(i):
        lo, hi = bounds[i]
        fn(ctypes.addressof(slots), gx, gy, gz, lo, hi, ctypes.addressof(faults[i]))

    stack = kernel.frame_bytes + (1 << 20)
    stopped = _run_threads(run, nthreads, stack, faults, limit)
    if kernel.prints:
        _libc.fflush(None)
    del keep
    hit = [f for f in faults if f[0] not in (0, FAULT_STOP)]
    if hit:
        first = min(hit, key=lambda f: f[4])
        raise _fault(kernel, first, ranges, (gx, gy, gz), slots,
                     [f for f in hit if f is not first], extra)
    if stopped is not None:
        raise _watchdog_fault(kernel, faults, (gx, gy, gz), total, stopped, limit)


# ---------------------------------------------------------------- waiting, Ctrl-C, watchdog


def _request_stop(faults) -> None:
    for f in faults:
        f[STOP_SLOT] = 1


def _wait(get, n: int, faults, limit: float):
    """Wait for ``n`` workers (``get(timeout)`` returns one's outcome, raises
    queue.Empty) while the main thread stays responsive: Ctrl-C asks every worker to
    stop at its next loop iteration or program, waits for them and re-raises; the
    watchdog does the same after its limit. Returns None, or the seconds after which
    the watchdog stopped the launch."""
    t0 = time.monotonic()
    stopped, errors, left = None, [], n
    interrupted = None
    while left:
        try:                 # a signal may land anywhere in here: every path stops them
            try:
                out = get(0.05)
            except queue.Empty:
                if stopped is None and limit > 0 and time.monotonic() - t0 > limit:
                    stopped = time.monotonic() - t0
                    _request_stop(faults)
                continue
            left -= 1
            if out is not None:  # pragma: no cover - ctypes calls do not raise
                errors.append(out)
        except BaseException as e:   # never leave while a worker uses the launch's memory
            interrupted = interrupted or e
            _request_stop(faults)
    if interrupted is not None:
        raise interrupted
    if errors:  # pragma: no cover
        raise errors[0]
    return stopped


class _Pool:
    """Persistent worker threads with large stacks (tile buffers live on the stack).

    ``run(fns, faults)`` calls each function on its own worker and waits for all of
    them (see :func:`_wait`); the ctypes calls inside release the GIL, so the workers
    run in parallel, and the main thread never runs kernel code, so it can take Ctrl-C.
    """
    STACK = 64 << 20              # virtual size; only the pages a kernel touches are used

    def __init__(self):
        self.lock = threading.Lock()
        self.workers: list = []

    def _worker(self, inbox: queue.SimpleQueue):
        while True:
            fn, done = inbox.get()
            try:
                fn()
                done.put(None)
            except BaseException as e:  # pragma: no cover - ctypes calls do not raise
                done.put(e)

    def _grow(self, n: int) -> None:
        with _STACK_LOCK:
            old = threading.stack_size(self.STACK)
            try:
                while len(self.workers) < n:
                    inbox = queue.SimpleQueue()
                    threading.Thread(target=self._worker, args=(inbox,), daemon=True,
                                     name=f"mutile-llvm-{len(self.workers)}").start()
                    self.workers.append(inbox)
            finally:
                threading.stack_size(old)

    def run(self, fns, faults, limit):
        with self.lock:                       # one launch at a time uses the workers
            self._grow(len(fns))
            done = queue.SimpleQueue()
            sent = 0
            try:
                for inbox, fn in zip(self.workers, fns):
                    inbox.put((fn, done))
                    sent += 1
            except BaseException:         # Ctrl-C while handing out work: stop what runs
                _request_stop(faults)
                _wait(lambda t: done.get(timeout=t), sent, faults, limit)
                raise
            return _wait(lambda t: done.get(timeout=t), sent, faults, limit)


_POOL = _Pool()


def _run_threads(run, n, stack_bytes, faults, limit):
    """Run ``run(0) .. run(n-1)`` in parallel on threads whose stacks hold the kernel;
    returns what :func:`_wait` returns."""
    fns = [lambda i=i: run(i) for i in range(n)]
    if stack_bytes <= _Pool.STACK // 2:
        return _POOL.run(fns, faults, limit)
    size = (stack_bytes + (1 << 20) + 0xFFFF) & ~0xFFFF
    done = queue.SimpleQueue()

    def target(fn):
        try:
            fn()
            done.put(None)
        except BaseException as e:  # pragma: no cover
            done.put(e)

    started = 0
    with _STACK_LOCK:
        old = threading.stack_size(size)
        try:
            for fn in fns:
                threading.Thread(target=target, args=(fn,), daemon=True).start()
                started += 1
        except BaseException:             # Ctrl-C while starting them: stop what runs
            _request_stop(faults)
            _wait(lambda t: done.get(timeout=t), started, faults, limit)
            raise
        finally:
            threading.stack_size(old)
    return _wait(lambda t: done.get(timeout=t), started, faults, limit)


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
