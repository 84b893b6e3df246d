"""``semantics.convert`` (the constant folder's and the Pinghu interpreter's conversions)
and ``semantics.convert_exact`` (its computation on the bits) against the exact oracle
(exact_fp.py) for every source -> destination pair, NaN payloads included; the bit path
against ml_dtypes too (exhaustively for 16-bit sources), only where every ml_dtypes
version rounds once."""
import warnings
import zlib

import numpy as np
import pytest

from mutile.ir import semantics
from mutile.ir import types as T

from . import exact_fp as X

N = 1500


def bits_of(a, name):
    """The bits of a float array, the values of any other."""
    return a.view(X.uint_of(name)) if name in X.FLOATS else a


def assert_same(got, want, dst, x, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    g, w = bits_of(got, dst), bits_of(want, dst)
    bad = np.nonzero(g.ravel() != w.ravel())[0]
    if bad.size:
        ex = [(repr(x.ravel()[i]), hex(int(g.ravel()[i])), hex(int(w.ravel()[i])))
              for i in bad[:6]]
        pytest.fail(f"{what}: {bad.size}/{g.size} differ (input, got, want): {ex}")


def inputs(src):
    rng = np.random.default_rng(zlib.crc32(src.encode()))
    if src in X.FLOATS and X.FLOATS[src].width == 8:
        return np.arange(256, dtype=np.uint8).view(X.DTYPE[src])      # every pattern
    return X.samples(src, N, rng)


@pytest.mark.parametrize("src", X.NAMES)
def test_every_pair_against_the_oracle(src):
    x = inputs(src)
    for dst in X.NAMES:
        want = X.convert(x, src, dst)
        got = semantics.convert(x, T.SCALARS[src], T.SCALARS[dst])
        assert_same(got, want, dst, x, f"{src} -> {dst}")
        if dst in X.FLOATS and dst != src:
            got = semantics.convert_exact(x, T.SCALARS[src], T.SCALARS[dst])
            assert_same(got, want, dst, x, f"{src} -> {dst} (convert_exact)")


@pytest.mark.parametrize("src,dst,bits,want", [
    # just above a tie of the destination; via f32 each would tie to even instead
    ("f64", "bf16", 0x3FF0100000010000, 0x3F81),   # 1 + 2**-8 + 2**-36 (not 0x3F80)
    ("f64", "f8e4m3", 0x3FF1000000100000, 0x39),   # 1 + 2**-4 + 2**-32 (not 0x38)
    ("f64", "f8e5m2", 0x3FF2000000100000, 0x3D),   # 1 + 2**-3 + 2**-32 (not 0x3C)
    ("f64", "f8e4m3", 0x407D000000100000, 0x7F),   # 464 + 2**-24: NaN (not 448)
    ("f64", "f8e4b8", 0x3FF1000000100000, 0x41),   # 1 + 2**-4 + 2**-32 (not 0x40)
    ("f64", "f8e5b16", 0x3FF2000000100000, 0x41),  # 1 + 2**-3 + 2**-32 (not 0x40)
    ("i32", "bf16", 2 ** 24 + 2 ** 16 + 1, 0x4B81),     # (not 0x4B80)
    ("u64", "bf16", 2 ** 63 + 2 ** 55 + 1, 0x5F01),     # (not 0x5F00)
])
def test_rounds_once(src, dst, bits, want):
    x = np.array([bits], X.uint_of(src)).view(X.DTYPE[src]) if src in X.FLOATS \
        else np.array([bits], X.DTYPE[src])
    for f in (semantics.convert, semantics.convert_exact):
        assert int(f(x, T.SCALARS[src], T.SCALARS[dst]).view(X.uint_of(dst))[0]) == want


def _ml_dtypes_rounds_once(src, dst):
    """Every ml_dtypes version converts these float pairs as mutile does (before 0.7
    f64 -> bf16 / fp8 went through f32 and could round twice)."""
    return not (src == "f64" and dst in X.NARROW)


SIXTEEN = [(s, d) for s in ("f16", "bf16") for d in X.FLOATS if d != s]


@pytest.mark.parametrize("src,dst", SIXTEEN)
def test_16_bit_sources_exhaustively_as_ml_dtypes(src, dst):
    x = np.arange(1 << 16, dtype=np.uint16).view(X.DTYPE[src])
    got = semantics.convert_exact(x, T.SCALARS[src], T.SCALARS[dst])
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        ref = x.astype(X.DTYPE[dst])
    assert_same(got, ref, dst, x, f"{src} -> {dst} vs ml_dtypes")


@pytest.mark.parametrize("src", ["f64", "f32"])
def test_wide_sources_as_ml_dtypes_where_it_rounds_once(src):
    """The bit path on 200000 random patterns, where ml_dtypes is meant to agree."""
    rng = np.random.default_rng(5)
    x = np.concatenate([X.samples(src, 4000, rng),
                        rng.integers(0, 2 ** 63, 200_000, dtype=np.uint64)
                        .astype(X.uint_of(src)).view(X.DTYPE[src])])
    for dst in X.FLOATS:
        if dst == src or not _ml_dtypes_rounds_once(src, dst):
            continue
        got = semantics.convert_exact(x, T.SCALARS[src], T.SCALARS[dst])
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            ref = x.astype(X.DTYPE[dst])
        assert_same(got, ref, dst, x, f"{src} -> {dst} vs ml_dtypes")


def test_shapes_and_python_numbers():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) * np.float32(1.1)
    y = semantics.convert(x, T.f32, T.bf16)
    assert y.shape == (3, 4) and y.dtype == T.bf16.to_numpy()
    s = semantics.convert(np.float64(1 + 2.0 ** -8 + 2.0 ** -36), T.f64, T.bf16)
    assert s.shape == () and int(s.view(np.uint16)) == 0x3F81
    # a Python float for an f64 source, a Python int for an i64 one: exactly typed
    assert int(semantics.convert(1 + 2.0 ** -8 + 2.0 ** -36, T.f64, T.bf16)
               .view(np.uint16)) == 0x3F81
    assert int(semantics.convert(2 ** 24 + 2 ** 16 + 1, T.i64, T.bf16).view(np.uint16)) \
        == 0x4B81


def test_folded_arithmetic_rounds_once_from_f32():
    """Narrow-float ops compute in f32 and round once (through ``convert``)."""
    bf16 = T.bf16.to_numpy()
    a = np.array([0x3F80, 0x4040, 0x3DCD, 0x7FC1], np.uint16).view(bf16)   # 1, 3, ~0.1, NaN
    three = np.array([0x4040] * 4, np.uint16).view(bf16)
    got = semantics.evaluate("div", {}, [a, three], T.bf16, T.bf16)
    a32 = X.convert(a, "bf16", "f32")
    assert_same(got, X.convert(a32 / np.float32(3), "f32", "bf16"), "bf16", a, "bf16 / 3")
