"""``x.to(dtype)`` on every backend against the exact conversion oracle (tests/ir/
exact_fp.py), bit for bit, NaN payloads included: every source dtype to all seventeen
destinations, on the source's special values, values at and around every float type's
ties, thresholds and the integer limits, and random bit patterns. Outputs are poisoned
with a NaN whose payload no conversion produces."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import poison
from ..ir import exact_fp as X

N, TILE = 1024, 128
GRID = (N // TILE,)
POISON_NAN = {"f64": 0x7FF5A5A5A5A5A5A5, "f32": 0x7FA5A5A5, "f16": 0x7D5A, "bf16": 0x7FA5}


@mutile.jit
def put(base, v, BLOCK: ml.constexpr):
    ml.static_assert(v.dtype == base.dtype.element_ty, "result dtype differs from the output's")
    ml.store(base + ml.program_id(0) * BLOCK + ml.arange(0, BLOCK), v)


@mutile.jit
def convert_all(S, O0, O1, O2, O3, O4, O5, O6, O7, O8, O9, O10, O11, O12, O13, O14, O15, O16,
                BLOCK: ml.constexpr):
    """O<i> = S converted to O<i>'s dtype."""
    x = ml.load(S + ml.program_id(0) * BLOCK + ml.arange(0, BLOCK))
    outs = (O0, O1, O2, O3, O4, O5, O6, O7, O8, O9, O10, O11, O12, O13, O14, O15, O16)
    for i in ml.static_range(17):
        put(outs[i], x.to(outs[i].dtype.element_ty), BLOCK)


def poisoned(dst):
    out = poison(N, X.DTYPE[dst])
    if dst in POISON_NAN:
        out.view(X.uint_of(dst))[:] = POISON_NAN[dst]
    return out


def bits(a, name):
    if name in X.FLOATS:
        return a.view(X.uint_of(name))
    return a.view(np.uint8) if name == "i1" else a     # a poisoned bool is byte 0x5A


@pytest.mark.parametrize("src", X.NAMES)
def test_every_pair_against_the_oracle(src, rng, backend):
    x = X.samples(src, N, rng)
    outs = [poisoned(d) for d in X.NAMES]
    convert_all[GRID](x, *outs, BLOCK=TILE, backend=backend)
    for dst, got in zip(X.NAMES, outs):
        want = X.convert(x, src, dst)
        bad = np.nonzero(bits(got, dst) != bits(want, dst))[0]
        if bad.size:
            ex = [(repr(x[i]), repr(got[i]), repr(want[i]), hex(int(bits(got, dst)[i])))
                  for i in bad[:6]]
            pytest.fail(f"{src} -> {dst} [{backend}]: {bad.size}/{N} differ "
                        f"(input, got, want, got bits): {ex}")


@mutile.jit
def constant_kernel(O, C: ml.constexpr, BLOCK: ml.constexpr):
    """O[i] = C in O's dtype (a Python float taking the tile's type)."""
    offs = ml.arange(0, BLOCK)
    old = ml.load(O + offs)
    ml.store(O + offs, ml.where(offs >= 0, C, old))


@pytest.mark.parametrize("dst,c,want", [
    ("bf16", 1 + 2.0 ** -8 + 2.0 ** -36, 0x3F81),     # via f32 it would tie down: 0x3F80
    ("f8e4m3", 1 + 2.0 ** -4 + 2.0 ** -32, 0x39),
    ("f8e5m2", 1 + 2.0 ** -3 + 2.0 ** -32, 0x3D),
    ("f8e4m3", 464 + 2.0 ** -20, 0x7F),               # NaN, not 448
    ("f8e4b8", 1 + 2.0 ** -4 + 2.0 ** -32, 0x41),
    ("f8e5b16", 1 + 2.0 ** -3 + 2.0 ** -32, 0x41),
    ("f8e4b8", -2.0 ** -12, 0x00),                    # fnuz: +0, never -0
    ("f16", 1 + 2.0 ** -11 + 2.0 ** -40, 0x3C01),
])
def test_python_float_constants_round_once(dst, c, want, backend):
    out = poisoned(dst)[:TILE]
    constant_kernel[(1,)](out, C=c, BLOCK=TILE, backend=backend)
    assert (bits(out, dst) == want).all(), (hex(int(bits(out, dst)[0])), hex(want))
