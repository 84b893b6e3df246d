"""Helpers shared by the IR, frontend and language tests.

* ``compile_ir(kernel, **spec)`` compiles a ``@mutile.jit`` function to tile IR only
  (no backend): the verifier runs before and after every pass, and every stage's text
  must parse back to an equal module that prints to the same text. It returns a
  :class:`Compiled` whose ``stage(name)`` is that stage's IR as a module.
* ``marked(fn, tag)`` finds the source line of ``fn`` holding ``# <tag>`` and the
  column of the text after ``<tag>:`` on that line, so tests name the construct they
  expect an error or an op to point at instead of hard-coding line numbers.
"""
from __future__ import annotations

import inspect
import os
import shutil
import tempfile
import zlib

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import ir as mir
from mutile.runtime.compile import frontend_and_passes


# ---------------------------------------------------------------- isolation
# The suite never reads or writes the user's cache (``~/.cache/mutile``) nor obeys the
# caller's mutile switches: one temporary cache directory for the whole run (tests that
# need their own take a fresh one, see tests/runtime/conftest.py), removed at the end.
_KEEP_ENV = ("MUTILE_TEST_SEED",)
_SESSION_CACHE = None


def pytest_configure(config):
    global _SESSION_CACHE
    for name in [n for n in os.environ if n.startswith("MUTILE_") and n not in _KEEP_ENV]:
        del os.environ[name]
    _SESSION_CACHE = tempfile.mkdtemp(prefix="mutile-test-cache-")
    os.environ["MUTILE_CACHE_DIR"] = _SESSION_CACHE


def pytest_unconfigure(config):
    if _SESSION_CACHE is not None:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@mutile.jit
def tile_offsets(S0: ml.constexpr, S1: ml.constexpr, S2: ml.constexpr, NDIM: ml.constexpr):
    """Row-major offsets of a (S0,), (S0, S1) or (S0, S1, S2) tile."""
    if NDIM == 1:
        return ml.arange(0, S0)
    if NDIM == 2:
        return ml.arange(0, S0)[:, None] * S1 + ml.arange(0, S1)[None, :]
    return (ml.arange(0, S0)[:, None, None] * S1 + ml.arange(0, S1)[None, :, None]) * S2 \
        + ml.arange(0, S2)[None, None, :]


@mutile.jit
def put(base, slot, v, BLOCK: ml.constexpr):
    """base[slot, program's block] = v, after checking v's dtype is base's element type
    (base is a (slots, BLOCK * num_programs) array)."""
    ml.static_assert(v.dtype == base.dtype.element_ty, "result dtype differs from the slot's")
    n = BLOCK * ml.num_programs(0)
    ml.store(base + slot * n + ml.program_id(0) * BLOCK + ml.arange(0, BLOCK), v)


def check_text_round_trip(text: str, what: str = "") -> mir.Module:
    """Parse ``text``, verify it and check that it prints back to ``text`` exactly.
    Returns the parsed module."""
    m = mir.verify(mir.parse(text))
    again = str(m)
    assert again == text, f"{what}: printing the parsed text changes it:\n{again}"
    return m


class Compiled:
    """The IR of one kernel specialization, stage by stage."""

    def __init__(self, module: mir.Module, stages: dict):
        self.module, self.stages = module, stages
        self._parsed: dict = {}

    def stage(self, name: str = "ir") -> mir.Module:
        if name not in self._parsed:
            self._parsed[name] = mir.parse(self.stages[name])
        return self._parsed[name]

    def ops(self, stage: str = "ir", func: str | None = None) -> list:
        """Every op of the kernel (or of ``func``) at ``stage``, in program order."""
        m = self.stage(stage)
        return list(m.funcs[func or m.kernel].walk())

    def names(self, stage: str = "ir") -> list[str]:
        return [op.name for op in self.ops(stage)]

    def only(self, name: str, stage: str = "ir"):
        """The single op called ``name`` of the kernel at ``stage``."""
        found = [op for op in self.ops(stage) if op.name == name]
        assert len(found) == 1, f"expected one '{name}' op, found {len(found)}:\n" \
                                f"{self.stages[stage]}"
        return found[0]


def _fill_defaults(kernel, spec: dict) -> dict:
    spec = dict(spec)
    for p, par in inspect.signature(kernel.fn).parameters.items():
        if p not in spec and par.default is not inspect.Parameter.empty:
            spec[p] = par.default
    return spec


@pytest.fixture
def compile_ir():
    def run(kernel, **spec) -> Compiled:
        module, stages, _ = frontend_and_passes(kernel, _fill_defaults(kernel, spec), {},
                                                verify=True)
        c = Compiled(module, stages)
        for name, text in stages.items():
            c._parsed[name] = check_text_round_trip(text, f"stage '{name}' of "
                                                          f"{kernel.fn.__name__}")
        assert c.stage(list(stages)[-1]) == module, "parse(print(m)) != m"
        return c
    return run


class Mark:
    """Where ``# tag: snippet`` sits: ``file``, ``line`` (1-based), ``col`` (0-based
    column of ``snippet`` in the line) and the line's ``text``."""

    def __init__(self, file, line, col, text):
        self.file, self.line, self.col, self.text = file, line, col, text


def marked(fn, tag: str = "LINE-MARK") -> Mark:
    fn = getattr(fn, "fn", fn)
    lines, first = inspect.getsourcelines(fn)
    hits = [(first + i, ln) for i, ln in enumerate(lines) if f"# {tag}" in ln]
    assert len(hits) == 1, f"{fn.__name__} has {len(hits)} '# {tag}' marks"
    line, text = hits[0]
    code, _, comment = text.partition(f"# {tag}")
    snippet = comment.partition(":")[2].partition("#")[0].strip()
    col = code.index(snippet) if snippet else len(code) - len(code.lstrip())
    return Mark(inspect.getsourcefile(fn), line, col, text.rstrip("\n"))


@pytest.fixture
def mark():
    return marked


# ---------------------------------------------------------------- launching kernels
# Every backend-dependent test takes the ``backend`` fixture and launches with
# ``backend=backend``; a new backend is added to this list and every such test runs on it.
BACKENDS = ["llvm", "pinghu"]


@pytest.fixture(autouse=True, scope="session")
def _pinghu_round_trip():
    """Every pinghu kernel compiled by the tests checks that its listing survives
    text -> binary -> text and the assembler (the ISA round-trip acceptance)."""
    from mutile.backends.pinghu import kernel
    kernel.CHECK_ROUND_TRIP = True
    yield
    kernel.CHECK_ROUND_TRIP = False


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def poison(shape, dtype):
    """A fresh output array of ``shape`` and ``dtype`` (numpy, ml_dtypes or an ``ml``
    dtype) that no correct kernel result can be mistaken for: NaN for floats, the dtype's
    maximum for integers, and for bool the byte 0x5A, which is neither False (0) nor True
    (1) — compare bools by their bytes, as :func:`assert_bits_equal` does. Use it for
    every output before a launch so an element the kernel fails to write cannot pass."""
    if hasattr(dtype, "to_numpy"):
        dtype = dtype.to_numpy()
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.full(shape, 0x5A, dtype=np.uint8).view(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return np.full(shape, np.iinfo(dtype).max, dtype=dtype)
    return np.full(shape, np.nan, dtype=dtype)


@pytest.fixture
def rng(request):
    """A generator seeded from the test's id (xor ``MUTILE_TEST_SEED`` to vary the data
    between runs): fresh data per test, reproducible from the failure message's seed."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode())
                                 ^ int(os.environ.get("MUTILE_TEST_SEED", "0")))


def random_data(dtype, shape, rng, specials=True, scale=1.0):
    """Random values of ``dtype`` (numpy / ml_dtypes) for op tests, never all zeros.

    Integers: a mix of full-range bit patterns and small values (so signs, wrap-around
    and zero divisors all occur), with 0, 1, -1, the minimum and the maximum up front.
    Floats: normals spread over 2^-6 .. 2^6 times ``scale``; with ``specials``, 0, -0,
    +-inf, NaN and a subnormal up front.
    """
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype)
        small = rng.integers(max(info.min, -20), 21, n).astype(dtype)
        out = np.where(rng.random(n) < 0.4, small, raw).astype(dtype)
        if specials:
            edges = [0, 1, info.max, info.min, info.max - 1] + ([-1, info.min + 1] if info.min
                                                               else [2, 3])
            out[: len(edges)] = np.array(edges[:n], dtype=object).astype(dtype)
        return out.reshape(shape)
    v = rng.standard_normal(n) * np.exp2(rng.integers(-6, 7, n)) * scale
    out = v.astype(dtype)
    if specials:
        tiny = float(ml_dtypes.finfo(dtype).smallest_subnormal) * 3
        sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -1.0, 1.0])[:n]
        out[: len(sp)] = sp.astype(dtype)
    return out.reshape(shape)


def assert_bits_equal(got, want, what=""):
    """Bit-exact equality of two arrays of the same dtype; NaN == NaN (any payload)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind == "b":      # by bytes: a poisoned bool (0x5A) is neither 0 nor 1
        bad = got.view(np.uint8) != want.view(np.uint8)
    elif got.dtype.kind in "iu":
        bad = got != want
    else:
        g64, w64 = got.astype(np.float64), want.astype(np.float64)
        u = np.dtype(f"u{got.dtype.itemsize}")
        bad = (got.view(u) != want.view(u)) & ~(np.isnan(g64) & np.isnan(w64))
    if bad.any():
        idx = np.argwhere(bad)[:6]
        pairs = ", ".join(f"{tuple(i)}: got {got[tuple(i)]!r} want {want[tuple(i)]!r}"
                          for i in idx)
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} differ ({pairs})")


class ArrayInterfaceOnly:
    """Exposes a numpy array only through ``__array_interface__``."""

    def __init__(self, a):
        self._a = a

    @property
    def __array_interface__(self):
        return self._a.__array_interface__


class DLPackOnly:
    """Exposes a numpy array only through ``__dlpack__``/``__dlpack_device__``."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()
