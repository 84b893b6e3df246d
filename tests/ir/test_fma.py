"""mutile.ir.fma.fma_f32 against exact rational arithmetic: the cases where rounding the
f64 sum to f32 rounds twice (midpoints, results below f32's normal range), broadcasting,
0-d operands, and ``out`` being one of the operands."""
from fractions import Fraction

import numpy as np
import pytest

from mutile.ir.fma import fma_f32


def _exact(a, b, c) -> np.ndarray:
    """a * b + c of finite f32 arrays rounded once to f32 (ties to even), via fractions."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape, c.shape), np.float32)
    for i, (x, y, z) in enumerate(zip(*(np.broadcast_to(v, out.shape).ravel().tolist()
                                        for v in (a, b, c)))):
        q = Fraction(x) * Fraction(y) + Fraction(z)
        if q == 0:
            out.flat[i] = np.float32(x * y + z)
            continue
        lo = np.float32(float(q))                        # within one f32 step of q
        cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
        cands = [f for f in cands if np.isfinite(f)]
        err = [abs(Fraction(float(f)) - q) for f in cands]
        best = min(err)
        ties = [f for f, e in zip(cands, err) if e == best]
        out.flat[i] = min(ties, key=lambda f: int(np.array(f).view(np.uint32)) & 1)
    return out


def _cases(rng, n):
    a = (rng.standard_normal(n) * np.exp2(rng.integers(-70, 60, n))).astype(np.float32)
    b = (rng.standard_normal(n) * np.exp2(rng.integers(-70, 60, n))).astype(np.float32)
    c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(n) * 2.0 ** -20)) \
        .astype(np.float32)
    c[::3] = (rng.standard_normal(len(c[::3])) * np.exp2(rng.integers(-150, 0, len(c[::3])))) \
        .astype(np.float32)
    a[::5], b[::7] = 1.0, 0.5                            # exact sums: f32 midpoints occur
    # the f64 sum lands on an f32-subnormal midpoint, the exact value just below it
    a[1], b[1], c[1] = 2.0 ** -75 * (1 + 2.0 ** -23), 2.0 ** -75 * (1 - 2.0 ** -23), \
        (2 ** 22 + 1) * 2.0 ** -149
    # ... and on the midpoint between the largest subnormal and 2**-126
    a[2], b[2], c[2] = 8392705 * 2.0 ** -98, -16769026 * 2.0 ** -99, 2.0 ** -126
    # ... on the midpoint 1 + 2**-24, the exact value just above it (8392705 * 16769026
    # = 2**47 + 2)
    a[3], b[3], c[3] = 8392705 * 2.0 ** -23, 16769026 * 2.0 ** -48, 1.0
    return a, b, c


def test_rounded_once(rng):
    a, b, c = _cases(rng, 3000)
    with np.errstate(all="ignore"):
        got = fma_f32(a, b, c)
    np.testing.assert_array_equal(got.view(np.uint32), _exact(a, b, c).view(np.uint32))


@pytest.mark.parametrize("shape", [(), (1,), (7, 1)])
def test_shapes_and_out(shape, rng):
    a, b, c = _cases(rng, 70)
    a = a[:int(np.prod(shape))].reshape(shape)
    b, c = b.reshape(7, 10), c.reshape(7, 10)
    with np.errstate(all="ignore"):
        want = _exact(a, b, c)
        np.testing.assert_array_equal(fma_f32(a, b, c).view(np.uint32), want.view(np.uint32))
        acc = c.copy()
        assert fma_f32(a, b, acc, out=acc) is acc       # out may be the addend
        np.testing.assert_array_equal(acc.view(np.uint32), want.view(np.uint32))
        s = [np.array(v, np.float32) for v in (a.ravel()[0] if a.size else 1.0, b[0, 0], c[0, 0])]
        got = fma_f32(*s)
        assert got.shape == ()
        assert got.view(np.uint32) == _exact(*s).view(np.uint32)
