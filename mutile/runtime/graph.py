"""``mutile.Graph``: capture a sequence of launches once, replay it with one submission.

    g = mutile.Graph()
    x = g.placeholder("x", like=x0)          # an array a replay may swap (same shape/dtype)
    with g.capture():                         # launches are recorded, not run
        rmsnorm[(1,)](x, w, y, n, BLOCK=4096)
        add[(4,)](y, r, out, n, BLOCK=1024)
    g.replay()                                # runs them in order, returns when all are done
    g.replay(x=x1)                            # the same with another array for ``x``

As ``torch.cuda.CUDAGraph``: a capture records each launch's compiled kernel, grid and
arguments (arrays by reference: a replay reads and writes the arrays captured, as a
CUDA graph uses the addresses captured); :meth:`Graph.replay` runs them in capture
order. On the llvm backend a replay is one native job on the worker threads (a barrier
between kernels; ``Graph(overlap=True)`` drops the barrier between neighbours that touch
no common array written by either); on pinghu the launches run back to back on the
interpreter and, under ``mutile.profile()``, the launch overhead is charged once per
graph. ``docs/graph.md`` has the whole story.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys

import numpy as np

from ..errors import DeviceFault, LaunchError, Loc
from ..ir import types as T
from .address_table import is_address_table
from .capture import capturing, set_capturing

_RUNTIME_DIRS = tuple(os.path.join(os.path.dirname(os.path.dirname(__file__)), d) + os.sep
                      for d in ("runtime", "autotune"))


def _caller_loc() -> Loc | None:
    """The line that launched: the first frame outside mutile's launch machinery."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_RUNTIME_DIRS):
        f = f.f_back
    return None if f is None else Loc(f.f_code.co_filename, f.f_lineno, 0)


def still_compiling(jitfn) -> LaunchError:
    """The error of a launch, inside a capture, of a specialization another thread is
    compiling: a capture records compiled kernels and never waits for another thread."""
    loc = _caller_loc()
    where = f" (at {loc.file}:{loc.line})" if loc else ""
    return LaunchError(f"graph capture: kernel '{jitfn.__name__}'{where} is still compiling "
                       "in another thread for these arguments; wait for that compile (or "
                       "launch the kernel once) before capturing")


class Captured:
    """One recorded launch: the JIT function, its compiled kernel, grid, the backend's
    argument list (``args``), which of them are placeholders (position -> name), the
    parameter names of the arguments and the launch's source line."""
    __slots__ = ("jitfn", "kernel", "grid", "args", "holes", "names", "loc", "num_threads")

    def __init__(self, jitfn, kernel, grid, args, holes, names, loc, num_threads):
        self.jitfn, self.kernel, self.grid, self.args = jitfn, kernel, grid, args
        self.holes, self.names, self.loc, self.num_threads = holes, names, loc, num_threads

    def __repr__(self):
        return f"<launch {self.jitfn.__name__}[{self.grid}] at {self.loc}>"


class Graph:
    """A recorded sequence of launches (see the module docstring).

    ``overlap``: on llvm, let neighbouring kernels that share no array one of them writes
    run without the barrier between them (the capture order stays the dependency order
    for every other pair)."""

    def __init__(self, overlap: bool = False):
        self.overlap = bool(overlap)
        self.launches: list[Captured] = []
        self._holes: dict[str, np.ndarray] = {}       # placeholder name -> current array
        self._hole_ids: dict[int, str] = {}           # id of the captured array -> name
        self._plan = None
        self._backend = None

    # ------------------------------------------------------------ capture
    def placeholder(self, name: str, shape=None, dtype=None, like=None) -> np.ndarray:
        """A new array (zeros) to pass to the captured launches in the place of the one a
        replay may swap: ``g.update(name=array)`` or ``g.replay(name=array)`` then uses
        ``array`` (same shape, dtype and strides) wherever this one was passed."""
        if not isinstance(name, str) or not name.isidentifier():
            raise LaunchError(f"Graph.placeholder: the name must be an identifier, got {name!r}")
        if name in self._holes:
            raise LaunchError(f"Graph.placeholder: '{name}' is already a placeholder")
        if like is not None:
            like = np.asarray(like)
            shape, dtype = like.shape, like.dtype
        if shape is None or dtype is None:
            raise LaunchError("Graph.placeholder: give shape and dtype, or like=an array")
        arr = np.zeros(shape, dtype)
        self._holes[name] = arr
        self._hole_ids[id(arr)] = name
        return arr

    @contextlib.contextmanager
    def capture(self):
        """Record every launch made on this thread inside the block instead of running
        it (the kernels compile as usual if they must)."""
        if capturing() is not None:
            raise LaunchError("Graph.capture: this thread is already capturing a graph "
                              "(captures do not nest)")
        if self.launches:
            raise LaunchError("Graph.capture: this graph holds a capture already; "
                              "call reset() first or make a new Graph")
        set_capturing(self)
        try:
            yield self
        finally:
            set_capturing(None)

    def capture_begin(self):
        """torch's spelling: start capturing (end with :meth:`capture_end`)."""
        self._ctx = self.capture()
        self._ctx.__enter__()

    def capture_end(self):
        ctx, self._ctx = getattr(self, "_ctx", None), None
        if ctx is None:
            raise LaunchError("Graph.capture_end: no capture_begin() before it")
        ctx.__exit__(None, None, None)

    def record(self, jitfn, kernel, grid, bound, options) -> None:
        """Called by the launch path instead of running: check and keep the launch."""
        loc = _caller_loc()
        where = f" (at {loc.file}:{loc.line})" if loc else ""
        name = jitfn.__name__
        backend = options.get("backend", "llvm")
        if self._backend not in (None, backend):
            raise LaunchError(f"graph capture: kernel '{name}'{where} runs on backend "
                              f"'{backend}' but the graph's launches run on '{self._backend}'; "
                              "a graph holds the launches of one backend")
        names = []
        for p in kernel.runtime_params:
            v, t = bound[p], kernel.spec[p]
            if isinstance(t, T.DescType) or is_address_table(v):
                raise LaunchError(f"graph capture: kernel '{name}'{where}: argument '{p}' "
                                  f"({type(v).__name__}) cannot be captured; a graph holds "
                                  "arrays and numbers only (pass the arrays themselves)")
            names.append(p)
        args = kernel.backend_args(bound)
        holes = {i: self._hole_ids[id(a)] for i, a in enumerate(args)
                 if isinstance(a, np.ndarray) and id(a) in self._hole_ids}
        self._backend = backend
        self._plan = None
        self.launches.append(Captured(jitfn, kernel, grid, args, holes, names, loc,
                                      options.get("num_threads")))

    def reset(self) -> None:
        """Forget the capture (the placeholders stay)."""
        self.launches, self._plan, self._backend = [], None, None

    def __len__(self):
        return len(self.launches)

    def __repr__(self):
        return (f"<mutile.Graph: {len(self.launches)} launches"
                f"{' on ' + self._backend if self._backend else ''}>")

    # ------------------------------------------------------------ replay
    def update(self, **arrays) -> None:
        """Use these arrays for the placeholders of those names from the next replay on
        (each of the placeholder's shape, dtype and strides)."""
        for name, arr in arrays.items():
            if name not in self._holes:
                known = ", ".join(self._holes) or "none"
                raise LaunchError(f"Graph.update: '{name}' is not a placeholder of this "
                                  f"graph (placeholders: {known})")
            old = self._holes[name]
            if not isinstance(arr, np.ndarray):
                raise LaunchError(f"Graph.update: '{name}' must be a numpy array, got "
                                  f"{type(arr).__name__}")
            if arr.shape != old.shape or arr.dtype != old.dtype or arr.strides != old.strides:
                raise LaunchError(f"Graph.update: '{name}' was captured as {_describe(old)}, "
                                  f"got {_describe(arr)}")
            if not arr.flags.writeable and any(
                    i in c.kernel.stored for c in self.launches
                    for i, n in c.holes.items() if n == name):
                raise LaunchError(f"Graph.update: '{name}' is read-only but a captured "
                                  "kernel stores to it")
        for name, arr in arrays.items():
            self._holes[name] = arr
            if self._plan is not None:
                for pos, c in enumerate(self.launches):
                    for i, n in c.holes.items():
                        if n == name:
                            c.args[i] = arr
                            self._plan.set_arg(pos, i, arr)
            else:
                for c in self.launches:
                    for i, n in c.holes.items():
                        if n == name:
                            c.args[i] = arr

    def replay(self, **arrays) -> None:
        """Run the captured launches in order and return when all are done
        (``replay(x=a)`` is ``update(x=a)`` then ``replay()``)."""
        if capturing() is not None:
            raise LaunchError("Graph.replay: cannot replay while capturing")
        if not self.launches:
            raise LaunchError("Graph.replay: nothing captured (launch kernels inside "
                              "`with graph.capture():` first)")
        if arrays:
            self.update(**arrays)
        if self._plan is None:
            from .compile import BACKENDS
            backend = importlib.import_module(BACKENDS[self._backend] + ".graph")
            self._plan = backend.GraphPlan(
                [c.kernel.binary for c in self.launches], [c.args for c in self.launches],
                [c.grid for c in self.launches], self._num_threads(), self.overlap,
                [c.kernel.stored for c in self.launches])
        try:
            self._plan.replay()
        except DeviceFault as e:
            raise self._fault(e) from None

    def _num_threads(self):
        given = [c.num_threads for c in self.launches if c.num_threads]
        return max(given) if given else None

    def _fault(self, e: DeviceFault) -> DeviceFault:
        """``e`` (raised by launch ``e.graph_index``) naming the kernel, its position in the
        graph and the line that captured it."""
        i = getattr(e, "graph_index", 0)
        c = self.launches[i]
        at = f", captured at {c.loc.file}:{c.loc.line}" if c.loc else ""
        err = DeviceFault(f"graph replay: kernel '{c.jitfn.__name__}' (launch {i + 1} of "
                          f"{len(self.launches)} in the graph{at}): {e.msg}", e.loc)
        for k, v in vars(e).items():
            if k not in ("msg", "loc"):
                setattr(err, k, v)
        err.graph_index, err.capture_loc = i, c.loc
        return err


def _describe(a: np.ndarray) -> str:
    return f"shape {a.shape} dtype {a.dtype} strides {a.strides}"
