"""The simulated Pinghu machine that executes an ISA program: its parameters and event hooks
(:mod:`.device`), the decoded program and machine state (:mod:`.state`), the scheduler
(:mod:`.scheduler`, ``execute``), the row registry (:mod:`.rows`), memories, one module per
execution unit (:mod:`.units`), the sanitizers, the progress watchdog and the core dump.
Imports :mod:`..isa`, :mod:`mutile.ir` and :mod:`mutile.errors`; only :mod:`..kernel` (and
tests) import it."""
from .scheduler import execute

__all__ = ["execute"]
