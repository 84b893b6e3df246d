"""Launching a compiled kernel: argument packing, threads, faults.

``launch(kernel, args, grid)`` packs one i64 per parameter (see :mod:`lower` for the
ABI), adds each pointer parameter's ``[lo, hi)`` byte range (used by bounds checks),
splits the grid's linear program ids over ``num_threads`` threads (``os.cpu_count()``
by default) and calls ``<name>_programs`` from each through ctypes, which releases
the GIL, so the threads run in parallel. Worker threads get a stack large enough
for the kernel's tile buffers. The first fault (lowest program id) is raised as a
:class:`mutile.errors.DeviceFault` pointing at the op's Python source line.

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

import numpy as np

from mutile.errors import DeviceFault, LaunchError
from mutile.ir.types import PointerType

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


def pack_args(param_types, param_names, args, arg_ranges=None):
    """(ctypes i64 array of 3n slots, keep-alive list, ranges) for one launch."""
    n = len(param_types)
    if len(args) != n:
        raise LaunchError(f"kernel takes {n} arguments ({', '.join(param_names)}), got {len(args)}")
    slots = (ctypes.c_int64 * (3 * n))()
    keep, ranges = [], []
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
            bits = np.array(float(v), dtype=t.to_numpy()).view(f"u{max(1, t.bits // 8)}")
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
    slots, keep, ranges = pack_args(kernel.param_types, kernel.param_names, args, arg_ranges)
    nthreads = max(1, min(int(num_threads or os.cpu_count() or 1), total))
    faults = [(ctypes.c_int64 * FAULT_SLOTS)() for _ in range(nthreads)]
    fn = kernel.programs
    bounds = [(i * total // nthreads, (i + 1) * total // nthreads) for i in range(nthreads)]

    def run(i):
        lo, hi = bounds[i]
        fn(ctypes.addressof(slots), gx, gy, gz, lo, hi, ctypes.addressof(faults[i]))

    stack = kernel.frame_bytes + (1 << 20)
    if nthreads == 1 and stack <= 4 << 20:
        run(0)
    else:
        _run_threads(run, nthreads, stack)
    if kernel.prints:
        _libc.fflush(None)
    del keep
    hit = [f for f in faults if f[0] != 0]
    if hit:
        raise _fault(kernel, min(hit, key=lambda f: f[4]), ranges, (gx, gy, gz))


class _Pool:
    """Persistent worker threads with large stacks (tile buffers live on the stack).

    ``run(fns)`` calls each function on its own worker and waits for all of them; the
    ctypes calls inside release the GIL, so the workers run in parallel.
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

    def run(self, fns) -> None:
        with self.lock:                       # one launch at a time uses the workers
            self._grow(len(fns))
            done = queue.SimpleQueue()
            for inbox, fn in zip(self.workers, fns):
                inbox.put((fn, done))
            errors = [e for e in (done.get() for _ in fns) if e is not None]
        if errors:
            raise errors[0]


_POOL = _Pool()


def _run_threads(run, n, stack_bytes) -> None:
    """Run ``run(0) .. run(n-1)`` in parallel on threads whose stacks hold the kernel."""
    fns = [lambda i=i: run(i) for i in range(n)]
    if stack_bytes <= _Pool.STACK // 2:
        _POOL.run(fns)
        return
    size = (stack_bytes + (1 << 20) + 0xFFFF) & ~0xFFFF
    errors = []

    def target(fn):
        try:
            fn()
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    with _STACK_LOCK:
        old = threading.stack_size(size)
        try:
            threads = [threading.Thread(target=target, args=(fn,), daemon=True) for fn in fns]
            for t in threads:
                t.start()
        finally:
            threading.stack_size(old)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _fault(kernel, f, ranges, grid) -> DeviceFault:
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
        if k is None:
            msg = f"{desc} out of bounds in {where}: address {addr:#x} is in no argument array"
            idx = length = None
            name = None
        else:
            name = kernel.param_names[k]
            lo, hi = ranges[k]
            size = max(1, kernel.param_types[k].element_ty.bits // 8)
            idx, length = (addr - lo) // size, (hi - lo) // size
            msg = (f"{desc} out of bounds in {where} (tile element {elem}): element {idx} of "
                   f"'{name}', which has {length} elements (address {addr:#x})")
        err = DeviceFault(msg, loc)
        err.param, err.index, err.length, err.address = name, idx, length, addr
    err.program, err.element, err.kind = pid, elem, kind
    return err


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
