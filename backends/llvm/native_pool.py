"""Worker threads that wait, launch and synchronize in native code.

Each worker is a Python thread (with a large stack: tile buffers live on it) that makes
one ctypes call, ``mutile_worker(mailbox)``, and stays in it: it spins a little on its
mailbox's sequence number, then sleeps on it (a futex; ``MB_SLEEPING`` counts it), so
a launch reaches it in about a microsecond when launches come back to back and costs
nothing when they do not. A job is
an array of launch *records*, each ``(programs function, argument slots, gx, gy, gz,
programs, barrier after)``; the worker runs its share of every record's programs in
order, waiting at a barrier after each record that asks for one, so a whole chain of
kernels (a replayed graph) runs with no Python between kernels. After a fault (or a stop
request) in any record every worker skips the remaining records but still meets each
barrier, so none waits forever (the records before the fault's run to their end).

The main thread only posts jobs and polls for their end in Python, so Ctrl-C and the
watchdog keep working (:func:`run_job`'s caller sets the stop slots).

Layouts (int64 slots): mailbox ``MB_*``; record ``REC_*``; the shared barrier block
``count, generation, first faulting record, sleepers``.
"""
from __future__ import annotations

import ctypes
import platform
import threading

import numpy as np

from .engine import Engine
from .lower_context import STOP_SLOT

MB_SEQ, MB_DONE, MB_SLEEPING, MB_QUIT, MB_RECS, MB_NRECS, MB_INDEX, MB_NTHREADS, \
    MB_FAULTS, MB_BARRIER, MB_WHERE, MB_WAITER = range(12)
MB_SIZE = 16
REC_FN, REC_SLOTS, REC_GX, REC_GY, REC_GZ, REC_TOTAL, REC_BARRIER = range(7)
REC_SIZE = 7
NO_FAULT = (1 << 63) - 1
BARRIER_TICKS = 3_000_000   # cycle-counter ticks a worker spins at a barrier (~1 ms), then sleeps
SPIN_TICKS = 300_000        # cycle-counter ticks worker 0 spins after a job (~0.1 ms)

# (futex syscall number, spin hint) per machine; elsewhere the old Python pool is used
_PAUSE = ("declare void @llvm.x86.sse2.pause()\n"
          "define private void @relax() {\n  call void @llvm.x86.sse2.pause()\n  ret void\n}")
_YIELD = ("declare void @llvm.aarch64.hint(i32)\n"
          "define private void @relax() {\n  call void @llvm.aarch64.hint(i32 1)\n  ret void\n}")
_ARCH = {"x86_64": (202, _PAUSE), "AMD64": (202, _PAUSE), "aarch64": (98, _YIELD),
         "arm64": (98, _YIELD)}


def supported() -> bool:
    return platform.machine() in _ARCH


def _ir_text(futex: int, hint: str) -> str:
    """The module: ``mutile_worker`` (the wait loop), ``mutile_post`` (hand a job to the first
    n workers, waking those that sleep), ``mutile_wait`` (the main thread's sleep) and the record runner with its barrier."""
    return f"""
declare i64 @syscall(i64, ...)
declare i64 @llvm.readcyclecounter()

{hint}

define private i64* @slot(i64* %base, i64 %i) {{
  %p = getelementptr i64, i64* %base, i64 %i
  ret i64* %p
}}

define private i64* @ptr_at(i64* %base, i64 %i) {{
  %p = getelementptr i64, i64* %base, i64 %i
  %v = load i64, i64* %p
  %q = inttoptr i64 %v to i64*
  ret i64* %q
}}

; wait until *%word is no longer %old: spin for %ticks cycle-counter ticks, then sleep on
; it (a futex), counted in *%sleepers so whoever changes the word knows to wake someone
define private void @await_change(i64* %word, i64 %old, i64 %ticks, i64* %sleepers) {{
entry:
  %t0 = call i64 @llvm.readcyclecounter()
  br label %poll
poll:
  %now = load atomic i64, i64* %word acquire, align 8
  %moved = icmp ne i64 %now, %old
  br i1 %moved, label %out, label %again
again:
  %tn = call i64 @llvm.readcyclecounter()
  %spent = sub i64 %tn, %t0
  %spinning = icmp ult i64 %spent, %ticks
  br i1 %spinning, label %relax_it, label %sleep
relax_it:
  call void @relax()
  br label %poll
sleep:
  %s0 = atomicrmw add i64* %sleepers, i64 1 seq_cst
  %again_v = load atomic i64, i64* %word seq_cst, align 8
  %same = icmp eq i64 %again_v, %old
  br i1 %same, label %futex, label %slept
futex:
  %fw = call i64 (i64, ...) @syscall(i64 {futex}, i64* %word, i64 128, i64 %old, i8* null)
  br label %slept
slept:
  %s1 = atomicrmw sub i64* %sleepers, i64 1 seq_cst
  br label %poll
out:
  ret void
}}

; store %value in *%word, then wake up to %n threads sleeping on it if *%sleepers says any
define private void @publish(i64* %word, i64 %value, i64* %sleepers, i64 %n) {{
entry:
  store atomic i64 %value, i64* %word seq_cst, align 8
  %sl = load atomic i64, i64* %sleepers seq_cst, align 8
  %any = icmp ne i64 %sl, 0
  br i1 %any, label %wake, label %out
wake:
  %w = call i64 (i64, ...) @syscall(i64 {futex}, i64* %word, i64 129, i64 %n)
  br label %out
out:
  ret void
}}

; every worker arrives; the last one resets the count, moves the generation on and wakes
; the sleepers; the others wait for the generation to move (spinning, then sleeping, so
; a descheduled peer gets the CPU); bar[3] counts the sleepers
define private void @barrier(i64* %bar, i64 %n) {{
entry:
  %genp = getelementptr i64, i64* %bar, i64 1
  %sleepers = getelementptr i64, i64* %bar, i64 3
  %gen = load atomic i64, i64* %genp acquire, align 8
  %old = atomicrmw add i64* %bar, i64 1 acq_rel
  %nm1 = sub i64 %n, 1
  %last = icmp eq i64 %old, %nm1
  br i1 %last, label %release, label %wait
release:
  store atomic i64 0, i64* %bar release, align 8
  %gen1 = add i64 %gen, 1
  call void @publish(i64* %genp, i64 %gen1, i64* %sleepers, i64 2147483647)
  br label %out
wait:
  call void @await_change(i64* %genp, i64 %gen, i64 {BARRIER_TICKS}, i64* %sleepers)
  br label %out
out:
  ret void
}}

define private void @run_records(i64* %mb) {{
entry:
  %recs = call i64* @ptr_at(i64* %mb, i64 {MB_RECS})
  %np = call i64* @slot(i64* %mb, i64 {MB_NRECS})
  %n = load i64, i64* %np
  %ip = call i64* @slot(i64* %mb, i64 {MB_INDEX})
  %i = load i64, i64* %ip
  %tp = call i64* @slot(i64* %mb, i64 {MB_NTHREADS})
  %nth = load i64, i64* %tp
  %faults = call i64* @ptr_at(i64* %mb, i64 {MB_FAULTS})
  %bar = call i64* @ptr_at(i64* %mb, i64 {MB_BARRIER})
  %wherep = call i64* @slot(i64* %mb, i64 {MB_WHERE})
  %abortp = getelementptr i64, i64* %bar, i64 2
  %stopp = getelementptr i64, i64* %faults, i64 {STOP_SLOT}
  %i1 = add i64 %i, 1
  br label %head
head:
  %r = phi i64 [0, %entry], [%r1, %next]
  %more = icmp ult i64 %r, %n
  br i1 %more, label %body, label %done
body:
  %off = mul i64 %r, {REC_SIZE}
  %recp = getelementptr i64, i64* %recs, i64 %off
  %ab = load atomic i64, i64* %abortp acquire, align 8
  %f0 = load atomic i64, i64* %faults monotonic, align 8
  %st = load atomic i64, i64* %stopp monotonic, align 8
  %x1 = or i64 %f0, %st
  %mine = icmp ne i64 %x1, 0
  %earlier = icmp slt i64 %ab, %r
  %skip = or i1 %mine, %earlier
  br i1 %skip, label %sync, label %run
run:
  %totp = getelementptr i64, i64* %recp, i64 {REC_TOTAL}
  %total = load i64, i64* %totp
  %a = mul i64 %i, %total
  %lo = udiv i64 %a, %nth
  %b = mul i64 %i1, %total
  %hi = udiv i64 %b, %nth
  %some = icmp ult i64 %lo, %hi
  br i1 %some, label %call, label %sync
call:
  %fnp = getelementptr i64, i64* %recp, i64 {REC_FN}
  %fnv = load i64, i64* %fnp
  %fn = inttoptr i64 %fnv to void (i8*, i32, i32, i32, i64, i64, i8*)*
  %slp = getelementptr i64, i64* %recp, i64 {REC_SLOTS}
  %slv = load i64, i64* %slp
  %slots = inttoptr i64 %slv to i8*
  %gxp = getelementptr i64, i64* %recp, i64 {REC_GX}
  %gx64 = load i64, i64* %gxp
  %gx = trunc i64 %gx64 to i32
  %gyp = getelementptr i64, i64* %recp, i64 {REC_GY}
  %gy64 = load i64, i64* %gyp
  %gy = trunc i64 %gy64 to i32
  %gzp = getelementptr i64, i64* %recp, i64 {REC_GZ}
  %gz64 = load i64, i64* %gzp
  %gz = trunc i64 %gz64 to i32
  %fb = bitcast i64* %faults to i8*
  call void %fn(i8* %slots, i32 %gx, i32 %gy, i32 %gz, i64 %lo, i64 %hi, i8* %fb)
  %f1 = load atomic i64, i64* %faults monotonic, align 8
  %st1 = load atomic i64, i64* %stopp monotonic, align 8
  %bad0 = or i64 %f1, %st1
  %bad = icmp ne i64 %bad0, 0
  br i1 %bad, label %record, label %sync
record:
  store i64 %r, i64* %wherep
  %was = atomicrmw min i64* %abortp, i64 %r acq_rel
  br label %sync
sync:
  %barp = getelementptr i64, i64* %recp, i64 {REC_BARRIER}
  %wantb = load i64, i64* %barp
  %needb = icmp ne i64 %wantb, 0
  br i1 %needb, label %wait, label %next
wait:
  call void @barrier(i64* %bar, i64 %nth)
  br label %next
next:
  %r1 = add i64 %r, 1
  br label %head
done:
  ret void
}}

define void @mutile_worker(i64* %mb) {{
entry:
  %seqp = call i64* @slot(i64* %mb, i64 {MB_SEQ})
  %donep = call i64* @slot(i64* %mb, i64 {MB_DONE})
  %sleepp = call i64* @slot(i64* %mb, i64 {MB_SLEEPING})
  %quitp = call i64* @slot(i64* %mb, i64 {MB_QUIT})
  %waiterp = call i64* @slot(i64* %mb, i64 {MB_WAITER})
  %indexp = call i64* @slot(i64* %mb, i64 {MB_INDEX})
  br label %top
top:
  %last = phi i64 [0, %entry], [%s, %ran]
  %me = load i64, i64* %indexp
  %first = icmp eq i64 %me, 0
  %limit = select i1 %first, i64 {SPIN_TICKS}, i64 0
  call void @await_change(i64* %seqp, i64 %last, i64 %limit, i64* %sleepp)
  %s = load atomic i64, i64* %seqp acquire, align 8
  %q = load atomic i64, i64* %quitp acquire, align 8
  %quit = icmp ne i64 %q, 0
  br i1 %quit, label %leave, label %work
work:
  call void @run_records(i64* %mb)
  call void @publish(i64* %donep, i64 %s, i64* %waiterp, i64 1)
  br label %ran
ran:
  br label %top
leave:
  ret void
}}

; sleep until the worker's job ``seq`` is done, a signal arrives or ``ns`` pass
define void @mutile_wait(i64* %mb, i64 %seq, i64 %ns) {{
entry:
  %ts = alloca [2 x i64]
  %tsec = getelementptr [2 x i64], [2 x i64]* %ts, i64 0, i64 0
  %tnsec = getelementptr [2 x i64], [2 x i64]* %ts, i64 0, i64 1
  store i64 0, i64* %tsec
  store i64 %ns, i64* %tnsec
  %waiterp = getelementptr i64, i64* %mb, i64 {MB_WAITER}
  %donep = getelementptr i64, i64* %mb, i64 {MB_DONE}
  store atomic i64 1, i64* %waiterp seq_cst, align 8
  %d = load atomic i64, i64* %donep seq_cst, align 8
  %ready = icmp eq i64 %d, %seq
  br i1 %ready, label %out, label %sleep
sleep:
  %w = call i64 (i64, ...) @syscall(i64 {futex}, i64* %donep, i64 128, i64 %d, [2 x i64]* %ts)
  br label %out
out:
  store atomic i64 0, i64* %waiterp seq_cst, align 8
  ret void
}}

define void @mutile_post(i64* %addrs, i64 %n) {{
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %next]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %body, label %out
body:
  %ap = getelementptr i64, i64* %addrs, i64 %i
  %av = load i64, i64* %ap
  %mb = inttoptr i64 %av to i64*
  %seqp = getelementptr i64, i64* %mb, i64 {MB_SEQ}
  %old = load i64, i64* %seqp
  %seq = add i64 %old, 1
  %sleepp = getelementptr i64, i64* %mb, i64 {MB_SLEEPING}
  call void @publish(i64* %seqp, i64 %seq, i64* %sleepp, i64 1)
  br label %next
next:
  %i1 = add i64 %i, 1
  br label %head
out:
  ret void
}}
"""


class NativePool:
    """The persistent native workers (see the module docstring); one job at a time."""
    STACK = 64 << 20              # virtual size; only the pages a kernel touches are used

    def __init__(self):
        futex, hint = _ARCH[platform.machine()]
        self.engine = Engine(_ir_text(futex, hint))
        self._worker = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
            self.engine.address("mutile_worker"))
        self._post = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(
            self.engine.address("mutile_post"))
        self._sleep = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
            self.engine.address("mutile_wait"))
        self.lock = threading.Lock()
        self._arrays: list = []           # one int64 array per worker (kept alive)
        self.mailboxes: list = []         # memoryviews of them (fast element access)
        self.addresses: list = []         # their addresses
        self.barrier = np.zeros(4, np.int64)
        self._barrier_at = self.barrier.ctypes.data
        self._barrier = memoryview(self.barrier)
        self.fault_rows = np.zeros((0, 8), np.int64)
        self._faults_at = 0

    def grow(self, n: int, stack_lock) -> None:
        """Start workers until there are ``n``."""
        if len(self.mailboxes) >= n:
            return
        with stack_lock:
            old = threading.stack_size(self.STACK)
            try:
                while len(self.mailboxes) < n:
                    mb = np.zeros(MB_SIZE, np.int64)
                    threading.Thread(target=self._worker, args=(mb.ctypes.data,), daemon=True,
                                     name=f"mutile-llvm-{len(self.mailboxes)}").start()
                    self._arrays.append(mb)
                    self.mailboxes.append(memoryview(mb))
                    self.addresses.append(mb.ctypes.data)
                    self._address_array_keep = np.array(self.addresses, np.int64)
                    self._address_array = self._address_array_keep.ctypes.data
            finally:
                threading.stack_size(old)
        self.fault_rows = np.zeros((len(self.mailboxes), 8), np.int64)
        self._faults_at = self.fault_rows.ctypes.data
        self._rows = memoryview(self.fault_rows.reshape(-1))

    def post(self, records_address: int, n_records: int, nthreads: int):
        """Hand the records at ``records_address`` (REC_SIZE int64 each) to ``nthreads``
        workers; the caller holds ``lock``, then waits for :meth:`finished`. Returns the
        fault rows of those workers (zeroed here, filled by the kernels)."""
        fa, ba, post, rows = self._faults_at, self._barrier_at, self._post, self._rows
        self._barrier[2] = NO_FAULT     # the first faulting record (the count is back at 0)
        for i in range(nthreads):
            rows[8 * i] = rows[8 * i + STOP_SLOT] = 0   # a fault writes every other slot
            mb = self.mailboxes[i]
            mb[MB_RECS] = records_address
            mb[MB_NRECS] = n_records
            mb[MB_INDEX] = i
            mb[MB_NTHREADS] = nthreads
            mb[MB_FAULTS] = fa + 64 * i
            mb[MB_BARRIER] = ba
            mb[MB_WHERE] = -1
        post(self._address_array, nthreads)     # one native call: all of them or none
        return self.fault_rows[:nthreads]

    def finished(self, nthreads: int) -> bool:
        for mb in self.mailboxes[:nthreads]:
            if mb[MB_DONE] != mb[MB_SEQ]:
                return False
        return True

    def wait(self, nthreads: int, seconds: float, spins: int = 200) -> bool:
        """Wait up to about ``seconds`` for the job to end: a short spin (a tiny launch
        ends within it), then sleeping until the workers wake this thread. A signal
        (Ctrl-C) ends the sleep early; True when every worker is done."""
        for _ in range(spins):
            if self.finished(nthreads):
                return True
        ns = max(1000, min(int(seconds * 1e9), 999_999_999))
        for i in range(nthreads):
            mb = self.mailboxes[i]
            seq = mb[MB_SEQ]
            if mb[MB_DONE] != seq:
                self._sleep(self.addresses[i], seq, ns)
                if mb[MB_DONE] != seq:
                    return False
        return True

    def clean(self, nthreads: int) -> bool:
        """Whether no worker of the last job faulted or was asked to stop."""
        rows = self._rows
        for i in range(nthreads):
            if rows[8 * i] or rows[8 * i + STOP_SLOT]:
                return False
        return True

    def stop(self, nthreads: int) -> None:
        """Ask the workers' kernels to stop (they poll the stop slot)."""
        for i in range(nthreads):
            self._rows[8 * i + STOP_SLOT] = 1

    def where(self, i: int) -> int:
        """The record in which worker ``i`` faulted or stopped in its last job (-1: none)."""
        return int(self.mailboxes[i][MB_WHERE])


_POOL = None
_POOL_LOCK = threading.Lock()


def pool() -> NativePool | None:
    """The process's native pool (made on first use), or None on machines without one."""
    global _POOL
    if _POOL is None and supported():
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = NativePool()
    return _POOL
