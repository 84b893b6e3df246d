"""The profiling session: :func:`profile` makes a :class:`Profile`, whose ``with`` block
registers it with the Pinghu backend (``mutile.backends.pinghu.machine.timing.session``);
every Pinghu launch in the block then runs under the cycle model and hands its
:class:`~mutile.backends.pinghu.machine.timing.record.LaunchRecord` to :meth:`Profile.add`,
which places it on the session's device timeline."""
from __future__ import annotations

import dataclasses
import numbers
import os

from .. import machines

SAMPLE_WORDS = ("wave",)


def check_sample(sample):
    """``sample`` if it is one the cycle model accepts: None (automatic: grids of more than
    ``[model] auto_sample_waves`` waves simulate the first wave and extrapolate), False (every
    block), ``"wave"`` (one full wave) or a positive number of blocks; else ValueError."""
    if sample is None or sample is False:
        return sample
    if isinstance(sample, str):
        if sample in SAMPLE_WORDS:
            return sample
        raise ValueError(f"mutile.profile: sample={sample!r} is not a sampling mode; use None "
                         f"(automatic), False (every block), 'wave' (one full wave) or a "
                         f"positive number of blocks")
    if isinstance(sample, bool) or not isinstance(sample, numbers.Integral):
        raise ValueError(f"mutile.profile: sample={sample!r} ({type(sample).__name__}) must be "
                         f"None, False, 'wave' or a positive int (a number of blocks)")
    if sample <= 0:
        raise ValueError(f"mutile.profile: sample={sample} blocks: the number of blocks to "
                         f"simulate must be positive (sample=False simulates every block)")
    return int(sample)


def _machine_file(machine) -> machines.MachineFile:
    if machine is not None and not isinstance(machine, (str, os.PathLike,
                                                        machines.MachineFile)):
        raise TypeError(f"mutile.profile: machine={machine!r} must be a path to a machine "
                        f"file or a mutile.machines.MachineFile (None: MUTILE_MACHINE or the "
                        f"shipped pinghu.toml)")
    return machines.current(machine)


class Profile:
    """The launches recorded while the session was active, on one device timeline.

    ``machine``: the :class:`~mutile.machines.MachineFile` in force; ``sample``: the
    sampling mode (see :func:`check_sample`); ``launches``: the records, in launch order.
    Each record's ``start`` is the previous launch's ``end`` plus its own
    ``launch_overhead_cycles`` (the first launch starts after its overhead), in cycles of
    the modelled clock."""

    def __init__(self, machine=None, sample=None):
        self.sample = check_sample(sample)
        self.machine = _machine_file(machine)
        self.launches: list = []
        self._active = False
        self._entered_at = 0

    # -------------------------------------------------------------- the session
    def add(self, record) -> None:
        """Place ``record`` after the last launch (plus its launch overhead) and keep it."""
        prev = self.launches[-1].end if self.launches else 0.0
        record.start = prev + record.launch_overhead_cycles
        self.launches.append(record)

    def __enter__(self) -> "Profile":
        from ..backends.pinghu.machine.timing import session
        if self._active:
            raise RuntimeError("this mutile.profile() session is already active; a session "
                               "can be entered again only after its with-block ended")
        session.push(self)
        self._active = True
        self._entered_at = len(self.launches)
        return self

    def __exit__(self, *exc) -> bool:
        """Pop the session; the launches of the block also join the enclosing session, if
        any (copies, placed on its timeline), so an outer profile misses none."""
        from ..backends.pinghu.machine.timing import session
        session.pop(self)
        self._active = False
        outer = session.active()
        if outer is not None:
            for r in self.launches[self._entered_at:]:
                outer.add(dataclasses.replace(r))
        return False

    # -------------------------------------------------------------- totals
    @property
    def end(self) -> float:
        """Cycles from the session's start to the last launch's end (overheads included)."""
        return self.launches[-1].end if self.launches else 0.0

    @property
    def time_ms(self) -> float:
        """The launches' ``time_ms`` summed (launch overheads excluded)."""
        return sum(r.time_ms for r in self.launches)

    # -------------------------------------------------------------- reports
    def summary(self, file=None, top: int = 10) -> str:
        """Print the tables (to ``file``, default stdout) and return their text: the
        launches (grid, cycles, time, TFLOP/s and GB/s against the peaks, occupancy, what
        bound them), per-unit utilization, stall reasons, the roofline position, and per
        kernel the ``top`` source lines and ISA pcs by warp-cycles."""
        import sys
        from .summary import render
        text = render(self, top=top)
        print(text, file=file if file is not None else sys.stdout, end="")
        return text

    def save_trace(self, path) -> str:
        """Write the Chrome trace-event JSON of the session to ``path`` (Perfetto and
        chrome://tracing open it) and return the path."""
        from .trace import save
        return save(self, path)

    def plot(self, path) -> str:
        """Draw each unit's utilization over the device timeline, launches shaded, into
        ``path`` (PNG, SVG, PDF: matplotlib picks by the suffix); needs matplotlib
        (``pip install 'mutile[plot]'``). Returns the path."""
        from .plot import plot
        return plot(self, path)

    def __repr__(self) -> str:
        return (f"<mutile.profile: {len(self.launches)} launches, {self.time_ms:.4f} ms modelled, "
                f"machine {os.path.basename(self.machine.path)} {self.machine.hash}>")


def profile(machine=None, sample=None) -> Profile:
    """A profiling session: ``with mutile.profile() as prof:`` runs every Pinghu launch in
    the block under the cycle model and records it in ``prof.launches``.

    ``machine``: a machine file's path or a :class:`~mutile.machines.MachineFile` (None:
    ``MUTILE_MACHINE``, else the shipped ``pinghu.toml``). ``sample``: None (automatic: large
    grids are sampled), False (simulate every block), ``"wave"`` (one full wave of blocks),
    or a positive number of blocks; anything else is a ValueError here. A sampled launch
    (``record.sampled``) runs only its simulated blocks: the other blocks' outputs are not
    computed, so use ``sample=False`` when the results matter (docs/cycle-model.md).
    The session records the launches of this thread; sessions nest: the innermost one
    runs the model (with its machine and sampling), and when its block ends its launches
    are added to the enclosing session too. ``prof.summary()``, ``prof.save_trace(path)``
    and ``prof.plot(path)`` report it."""
    return Profile(machine=machine, sample=sample)
