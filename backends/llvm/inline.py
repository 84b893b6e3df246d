"""Running a one-thread launch on the calling (main) thread.

A launch that uses one thread (a grid of one program, ``num_threads=1``, a one-CPU
machine) gains nothing from a worker: handing it over and waiting for it costs more
than a tiny kernel runs, and on a busy machine the worker may wait for a CPU. Such a
launch runs here, on the main thread, when its frame fits the main thread's stack,
with the two guarantees the workers give kept:

* **Ctrl-C stops it.** Python's own SIGINT handler only trips a flag that is looked at
  between bytecodes, so it cannot reach native code. While inline launches are in use,
  SIGINT goes to a small native handler (:data:`_IR`'s ``mutile_sigint``) that sets the
  running launch's stop slot (which the kernel polls before each program and at every
  loop iteration) and then calls the handler it replaced (Python's), so Python raises
  KeyboardInterrupt as soon as the kernel returns. Before each inline launch the installed
  handler is checked: if someone (``signal.signal``) replaced it, it is put back in front
  of the new one; if SIGINT is ignored or kills the process (``SIG_IGN``, ``SIG_DFL``),
  the launch goes to the workers instead, as it does while SIGINT's Python handler is
  not Python's default one (a handler of the user's may return: the kernel must go on).
* **The watchdog stops it.** A daemon thread (it needs the GIL only while the main thread
  is inside the kernel, which released it) looks at the running launch every tenth of
  the limit and sets its stop slot once the limit has passed; it ends after two idle
  seconds and is started again by the next launch.

Only the main thread launches inline (one launch at a time, one stop slot to publish);
other threads use the workers.
"""
from __future__ import annotations

import ctypes
import platform
import resource
import signal
import threading
import time

import numpy as np

from .engine import Engine
from .lower_context import STOP_SLOT

FAULT_SLOTS = 8
SIGINT = 2
SA_SIGINFO = 4                  # Linux, x86_64 and aarch64
SIGACTION_BYTES = 152           # glibc's struct sigaction: handler, 128-byte mask, flags
HANDLER_AT, FLAGS_AT = 0, 136
MAX_FRAME = 1 << 20             # tile buffers an inline launch may put on the main stack
IDLE_SECONDS = 2.0
try:                     # the C function: signal.getsignal's wrapper costs an exception
    from _signal import getsignal as _getsignal
except ImportError:  # pragma: no cover - another Python
    _getsignal = signal.getsignal
_DEFAULT_INT = signal.default_int_handler
_get_ident, _monotonic = threading.get_ident, time.monotonic

_IR = f"""
@active_stop = global i64* null
@prev = global [{SIGACTION_BYTES} x i8] zeroinitializer
declare i32 @sigaction(i32, i8*, i8*)

; SIGINT: ask the running inline launch to stop, then run the handler this one replaced
define void @mutile_sigint(i32 %sig, i8* %info, i8* %ctx) {{
entry:
  %p = load atomic i64*, i64** @active_stop seq_cst, align 8
  %has = icmp ne i64* %p, null
  br i1 %has, label %stop, label %chain
stop:
  %sp = getelementptr i64, i64* %p, i64 {STOP_SLOT}
  store atomic i64 1, i64* %sp seq_cst, align 8
  br label %chain
chain:
  %hp = bitcast [{SIGACTION_BYTES} x i8]* @prev to i8**
  %h = load i8*, i8** %hp
  %hv = ptrtoint i8* %h to i64
  %real = icmp ugt i64 %hv, 1
  br i1 %real, label %call, label %out
call:
  %fp = getelementptr [{SIGACTION_BYTES} x i8], [{SIGACTION_BYTES} x i8]* @prev, i64 0, i64 {FLAGS_AT}
  %fl = bitcast i8* %fp to i32*
  %flags = load i32, i32* %fl
  %si = and i32 %flags, {SA_SIGINFO}
  %three = icmp ne i32 %si, 0
  br i1 %three, label %c3, label %c1
c3:
  %f3 = bitcast i8* %h to void (i32, i8*, i8*)*
  call void %f3(i32 %sig, i8* %info, i8* %ctx)
  br label %out
c1:
  %f1 = bitcast i8* %h to void (i32)*
  call void %f1(i32 %sig)
  br label %out
out:
  ret void
}}

; run programs [lo, hi) of a kernel with its fault record published to the handler;
; returns 1 without running them when SIGINT's handler is not mutile_sigint
define i32 @mutile_run_inline(i8* %fn, i8* %slots, i32 %gx, i32 %gy, i32 %gz, i64 %lo,
                              i64 %hi, i64* %faults, i8* %scratch) {{
entry:
  %q = call i32 @sigaction(i32 {SIGINT}, i8* null, i8* %scratch)
  %hp = bitcast i8* %scratch to i8**
  %h = load i8*, i8** %hp
  %ours = bitcast void (i32, i8*, i8*)* @mutile_sigint to i8*
  %same = icmp eq i8* %h, %ours
  %ok = icmp eq i32 %q, 0
  %go = and i1 %same, %ok
  br i1 %go, label %run, label %refuse
refuse:
  ret i32 1
run:
  store atomic i64* %faults, i64** @active_stop seq_cst, align 8
  %f = bitcast i8* %fn to void (i8*, i32, i32, i32, i64, i64, i8*)*
  %fb = bitcast i64* %faults to i8*
  call void %f(i8* %slots, i32 %gx, i32 %gy, i32 %gz, i64 %lo, i64 %hi, i8* %fb)
  store atomic i64* null, i64** @active_stop seq_cst, align 8
  ret i32 0
}}

define i8* @mutile_prev() {{
  %p = bitcast [{SIGACTION_BYTES} x i8]* @prev to i8*
  ret i8* %p
}}

define i64** @mutile_active() {{
  ret i64** @active_stop
}}
"""


def _main_stack_ok() -> bool:
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    return soft == resource.RLIM_INFINITY or soft >= 8 * MAX_FRAME


class Inline:
    """The process's inline runner (see the module docstring)."""

    def __init__(self):
        self.engine = Engine(_IR)
        addr = self.engine.address
        self.handler = addr("mutile_sigint")
        self._run = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                     ctypes.c_int32, ctypes.c_int32, ctypes.c_int64,
                                     ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)(
                                         addr("mutile_run_inline"))
        self.prev = ctypes.CFUNCTYPE(ctypes.c_void_p)(addr("mutile_prev"))()
        self.active = ctypes.c_void_p.from_address(
            ctypes.CFUNCTYPE(ctypes.c_void_p)(addr("mutile_active"))())
        self._sigaction = ctypes.CDLL(None, use_errno=True).sigaction
        self._sigaction.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
        self._now = (ctypes.c_char * SIGACTION_BYTES)()
        self._scratch = (ctypes.c_char * SIGACTION_BYTES)()
        self._scratch_at = ctypes.addressof(self._scratch)
        self._new = (ctypes.c_char * SIGACTION_BYTES)()
        self.faults = np.zeros(FAULT_SLOTS, np.int64)   # one launch at a time uses it
        self._faults_at = self.faults.ctypes.data
        self._stop = memoryview(self.faults)
        self.main = threading.main_thread().ident
        self.stack_ok = _main_stack_ok()
        self.lock = threading.Lock()
        self.watcher = None
        self.busy = False             # a launch from a signal handler during one: workers
        self.launches = 0             # inline launches so far (the watchdog's idle test)
        self.t0 = 0.0
        self.limit = 0.0
        self.stopped = None           # seconds after which the watchdog stopped the launch
        self.seconds = None           # how long the last inline launch ran (None: it did not)

    # ------------------------------------------------------------ the SIGINT handler
    def handler_ready(self) -> bool:
        """Whether ours is SIGINT's handler now (installing it in front of the present
        one if that is a function); False when SIGINT is ignored or kills the process."""
        now = self._now
        if self._sigaction(SIGINT, None, now) != 0:
            return False
        current = int.from_bytes(now[HANDLER_AT:HANDLER_AT + 8], "little")
        if current == self.handler:
            return True
        if current <= 1:                       # SIG_DFL, SIG_IGN: leave SIGINT alone
            return False
        ctypes.memmove(self.prev, now, SIGACTION_BYTES)     # chained before we install
        ctypes.memmove(self._new, now, SIGACTION_BYTES)
        new = self._new
        new[HANDLER_AT:HANDLER_AT + 8] = self.handler.to_bytes(8, "little")
        flags = int.from_bytes(now[FLAGS_AT:FLAGS_AT + 4], "little") | SA_SIGINFO
        new[FLAGS_AT:FLAGS_AT + 4] = flags.to_bytes(4, "little")
        return self._sigaction(SIGINT, new, None) == 0

    # ------------------------------------------------------------ the watchdog
    def _watch(self) -> None:
        idle, seen = 0.0, self.launches
        while True:
            tick = min(0.25, max(0.002, self.limit / 10))
            time.sleep(tick)
            stop = self.active.value
            if not stop:
                idle = 0.0 if self.launches != seen else idle + tick
                seen = self.launches
                if idle > IDLE_SECONDS:
                    with self.lock:          # a launch counted after this starts a new one
                        if self.launches == seen and not self.active.value:
                            self.watcher = None
                            return
                continue
            idle = 0.0
            spent = time.monotonic() - self.t0
            if self.limit > 0 and spent > self.limit and self.stopped is None:
                self.stopped = spent
                ctypes.c_int64.from_address(stop + 8 * STOP_SLOT).value = 1

    def _start_watcher(self) -> None:
        with self.lock:
            if self.watcher is None:
                self.watcher = threading.Thread(target=self._watch, daemon=True,
                                                name="mutile-llvm-watchdog")
                self.watcher.start()

    # ------------------------------------------------------------ running
    def run(self, fn_address, slots_address, gx, gy, gz, total, limit):
        """Run programs [0, total) here if this launch may (the main thread, not inside
        another inline launch, Python's default SIGINT handler): returns what
        ``launch.run_records`` returns, or None when it did not run (then the workers
        take it), also when SIGINT is ignored or kills the process (:meth:`handler_ready`).
        The caller checked the frame against ``MAX_FRAME`` and ``stack_ok``."""
        self.seconds = None
        if self.busy or _get_ident() != self.main or _getsignal(SIGINT) is not _DEFAULT_INT:
            return None
        f = self._stop
        f[0] = f[STOP_SLOT] = 0
        self.stopped = None
        self.limit = limit
        self.launches += 1
        if limit > 0 and self.watcher is None:
            self._start_watcher()
        self.busy = True
        try:
            self.t0 = _monotonic()
            run, at, scratch = self._run, self._faults_at, self._scratch_at
            if run(fn_address, slots_address, gx, gy, gz, 0, total, at, scratch):
                if not self.handler_ready():
                    return None
                self.t0 = _monotonic()
                if run(fn_address, slots_address, gx, gy, gz, 0, total, at, scratch):
                    return None
            self.seconds = _monotonic() - self.t0
            if f[0] == 0 and f[STOP_SLOT] == 0:
                return (), (), None
            return self.faults[None, :].copy(), [0], self.stopped
        finally:
            self.busy = False

    def fits(self, frame_bytes: int) -> bool:
        """Whether a kernel with this frame may run on the main thread's stack."""
        return self.stack_ok and frame_bytes <= MAX_FRAME


_INLINE = None
_LOCK = threading.Lock()


def inline() -> Inline | None:
    """The process's inline runner (made on first use), None where it does not apply."""
    global _INLINE
    if _INLINE is None and platform.system() == "Linux" and \
            platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        with _LOCK:
            if _INLINE is None:
                _INLINE = Inline()
    return _INLINE
