"""Helpers for the llvm backend tests: build kernels with the IR builder, make
inputs, compare bit patterns.

``KB(name, [("x", ptr<f32>), ...])`` wraps a :class:`mutile.ir.Builder` on a fresh kernel
with a few shorthands (``arange``, ``splat``, ``ptrs``, ``load``, ``store``...);
``kb.compile(**options)`` verifies the module and compiles it.
"""
from __future__ import annotations

import numpy as np
import pytest

from mutile.backends import llvm as L
from mutile.errors import Loc
from mutile.ir import Builder, Func, Module, verify
from mutile.ir import types as T

FLOATS = [T.f32, T.f64, T.f16, T.bf16, T.f8e4m3, T.f8e5m2]
SIGNED = [T.i8, T.i16, T.i32, T.i64]
UNSIGNED = [T.u8, T.u16, T.u32, T.u64]
INTS = SIGNED + UNSIGNED
ALL = FLOATS + INTS + [T.i1]


def tile(shape, elem):
    return T.TileType(tuple(shape), elem)


def ptr(t):
    return T.PointerType(t)


class KB:
    """A kernel under construction (see module docstring)."""

    def __init__(self, name, params, file="test_kernel.py"):
        self.func = Func(name, [t for _, t in params], [], [n for n, _ in params],
                         loc=Loc(file, 1, 0))
        self.b = Builder(self.func.body, loc=Loc(file, 1, 0))
        self.a = {n: v for (n, _), v in zip(params, self.func.args)}

    def __call__(self, name, *operands, type=None, **attrs):
        return self.b(name, *operands, type=type, **attrs)

    def op(self, name, operands, attrs=None, results=None, loc=None):
        return self.b.create(name, operands, results, attrs, loc=loc)

    def at(self, line):
        """Stamp later ops with ``test_kernel.py:line``."""
        self.b.loc = Loc(self.b.loc.file, line, 0)
        return self

    def const(self, value, t):
        return self.b("constant", type=t, value=value)

    def arange(self, n, start=0):
        return self.b("arange", start=start, end=start + n)

    def splat(self, v, shape):
        return self.b("splat", v, type=tile(shape, v.type))

    def ptrs(self, base, offs):
        """addptr(splat(base), offs)."""
        return self.b("addptr", self.splat(base, offs.type.shape), offs)

    def load(self, p, mask=None, other=None):
        return self.b("load", *[v for v in (p, mask, other) if v is not None])

    def store(self, p, v, mask=None):
        self.op("store", [x for x in (p, v, mask) if x is not None])

    def grid2d(self, rows, cols, row_stride):
        """Offsets ``r * row_stride + c`` of a rows x cols tile (i32 tile)."""
        r = self.b("expand_dims", self.arange(rows), axis=1)
        c = self.b("expand_dims", self.arange(cols), axis=0)
        rs = self.b("mul", r, self.splat(row_stride, (rows, 1)))
        shape = (rows, cols)
        return self.b("add", self.b("broadcast", rs, type=tile(shape, T.i32)),
                      self.b("broadcast", c, type=tile(shape, T.i32)))

    def load2d(self, base, rows, cols, row_stride, mask=None, other=None):
        """Load a rows x cols tile at ``base[r * row_stride + c]`` (row_stride an i32 value)."""
        return self.load(self.ptrs(base, self.grid2d(rows, cols, row_stride)), mask, other)

    def store2d(self, base, value, row_stride, mask=None):
        rows, cols = value.type.shape
        self.store(self.ptrs(base, self.grid2d(rows, cols, row_stride)), value, mask)

    def module(self):
        self.op("return", [])
        m = Module([self.func])
        verify(m)
        return m

    def compile(self, **options):
        return L.compile(self.module(), options)


# ---------------------------------------------------------------- data
def bits_dtype(t):
    return np.dtype(f"u{max(1, t.bits // 8)}")


def random_values(t, n, rng, kind="any"):
    """``n`` values of scalar type ``t`` (numpy array of t's host dtype).

    kind ``any``: edge cases plus random bit patterns (floats) / full-range integers;
    ``finite``: finite floats of moderate size; ``shift``: 0 .. bits+3.
    """
    npd = t.to_numpy()
    if t == T.i1:
        return rng.integers(0, 2, n).astype(bool)
    if t.is_int():
        if kind == "shift":
            return rng.integers(0, t.bits + 4, n).astype(npd)
        info = np.iinfo(npd)
        edges = np.array([0, 1, info.max, info.min, info.max - 1, 2, 3, 7], dtype=np.int64 if
                         info.min < 0 else np.uint64).astype(npd)
        if info.min < 0:
            edges[-2:] = np.array([-1, -7]).astype(npd)
        raw = rng.integers(0, 256, n * t.itemsize, dtype=np.uint8).view(npd).copy()
        small = rng.integers(-20 if info.min < 0 else 0, 20, n).astype(npd)
        out = np.where(rng.random(n) < 0.3, small, raw)
        out[: len(edges)] = edges[:n]
        return out
    if kind == "finite" or t in (T.f32, T.f64):
        v = rng.standard_normal(n) * np.exp2(rng.integers(-6, 7, n))
        out = v.astype(npd)
        if kind == "any":
            specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5])
            out[: len(specials)] = specials[:n].astype(npd)
            if t in (T.f32, T.f64):
                out[8:10] = np.array([1e-40, -3e-39] if t == T.f32 else [1e-310, -4e-320],
                                     npd)[: max(0, min(2, n - 8))]
        return out
    raw = rng.integers(0, 1 << t.bits, n).astype(bits_dtype(t))
    return raw.view(npd)


def assert_same_bits(got, want, t, what="", signed_zero=True):
    """Bit-exact equality; NaNs only need to be NaN on both sides."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if t == T.i1 or t.is_int():
        bad = got != want
    else:
        with np.errstate(invalid="ignore"):
            gf, wf = got.astype(np.float64), want.astype(np.float64)
        gb, wb = got.view(bits_dtype(t)), want.view(bits_dtype(t))
        same = (gb == wb) | (np.isnan(gf) & np.isnan(wf))
        if not signed_zero:
            same |= (gf == 0) & (wf == 0)
        bad = ~same
    if bad.any():
        i = np.flatnonzero(bad)[:8]
        raise AssertionError(f"{what}: {bad.sum()} of {bad.size} differ, e.g. at {i.tolist()}: "
                             f"got {got.ravel()[i].tolist()} want {want.ravel()[i].tolist()}")


def poisoned(shape, t):
    """An output array filled with NaN (floats) or a sentinel pattern (integers)."""
    npd = t.to_numpy()
    if t.is_floating():
        return np.full(shape, np.nan, dtype=npd)
    if t == T.i1:
        return np.zeros(shape, dtype=bool)
    return np.full(shape, 0x5A, dtype=np.uint8).view(npd)[: int(np.prod(shape))].reshape(shape) \
        if t.bits == 8 else np.full(shape, np.array(0x5A5A5A5A5A5A5A5A, np.uint64).astype(npd))


@pytest.fixture
def rng(request):
    return np.random.default_rng(abs(hash(request.node.nodeid)) % (1 << 32))
