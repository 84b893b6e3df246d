"""Counter-based random numbers: Philox 4x32-10 (and 4x64), with ``triton.language``'s
names, arguments and bits.

Philox (Salmon, Moraes, Dror and Shaw, SC'11) maps a 4-word counter and a 2-word key to 4
words of noise in ``n_rounds`` rounds of multiply-high/low and xor. As in Triton:

* ``philox(seed, c0, c1, c2, c3)``: the key is the 64-bit ``seed`` split into its low and
  high 32-bit words (for 64-bit counters: the whole seed and 0);
* ``randint4x(seed, offset)``: the counter is ``(offset's low word, its high word (0 for
  offsets of 32 bits or fewer), 0, 0)``; ``randint`` is its first result;
* ``uint_to_uniform_float``: the word read as signed, ``x < 0`` folded to ``-x - 1``, times
  the largest scale that keeps the result below 1.0 (so results lie in [0, 1));
* ``randn``: the Box-Muller transform of the first two uniforms.

Every function is a builtin composed of other builtins, so the integer results are the
same bits on every backend; the float ones follow the rounding of mutile's ``*``, ``log``,
``sqrt``, ``sin`` and ``cos``. ``n_rounds`` must be a compile-time integer (10 by default).
"""
from __future__ import annotations

from ..ir import types as T
from . import semantic as S
from .core import _unwrap, builtin, tensor
from .semantic import fail

N_ROUNDS_DEFAULT = 10

# (round multipliers A, B; Weyl key increments) per counter width
_CONSTANTS = {
    32: (0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85),
    64: (0xD2E7470EE14C6C93, 0xCA5A826395121157, 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B),
}
# largest scale with (2**(bits-1) - 1) * scale < 1.0 after rounding to f32
_UNIFORM_SCALE = {32: 4.6566127342e-10, 64: 1.0842020432385337e-19}
_TWO_PI = 6.283185307179586


def _rounds(n_rounds) -> int:
    n = _unwrap(n_rounds)
    if isinstance(n, tensor) or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        fail(f"n_rounds must be a compile-time integer >= 0 (a constexpr), got {n!r}")
    return n


def _int_tensor(x, what: str, b) -> tensor:
    x = S.to_tensor(x, b)
    if not x.dtype.is_int() or x.dtype.is_bool():
        fail(f"{what} must be an integer (scalar or tile), got {S.describe(x)}")
    return x


def _mulhi(x: tensor, y: tensor, b) -> tensor:
    """High word of the double-width unsigned product of two u32 or u64 tiles."""
    if x.dtype.bits == 32:
        wide = S.mul(S.cast(x, T.u64, b), S.cast(y, T.u64, b), b)
        return S.cast(S.bitwise("shr", wide, 32, b), T.u32, b)
    # 64 x 64 -> 128 bits from four 32 x 32 -> 64-bit partial products
    lo_mask = 0xFFFFFFFF
    x0, x1 = S.bitwise("and", x, lo_mask, b), S.bitwise("shr", x, 32, b)
    y0, y1 = S.bitwise("and", y, lo_mask, b), S.bitwise("shr", y, 32, b)
    p00, p01 = S.mul(x0, y0, b), S.mul(x0, y1, b)
    p10, p11 = S.mul(x1, y0, b), S.mul(x1, y1, b)
    mid = S.add(S.add(S.bitwise("shr", p00, 32, b), S.bitwise("and", p01, lo_mask, b), b),
                S.bitwise("and", p10, lo_mask, b), b)
    hi = S.add(S.add(p11, S.bitwise("shr", p01, 32, b), b), S.bitwise("shr", p10, 32, b), b)
    return S.add(hi, S.bitwise("shr", mid, 32, b), b)


def _philox_rounds(c, k0, k1, n: int, b):
    """``n`` Philox rounds on counter words ``c`` (same unsigned type) and key (k0, k1)."""
    A, B, KA, KB = _CONSTANTS[c[0].dtype.bits]
    t = c[0].dtype
    a, bb = S.constant(b, A, t), S.constant(b, B, t)
    c0, c1, c2, c3 = c
    for _ in range(n):
        c0, c1, c2, c3 = (S.bitwise("xor", S.bitwise("xor", _mulhi(bb, c2, b), c1, b), k0, b),
                          S.mul(bb, c2, b),
                          S.bitwise("xor", S.bitwise("xor", _mulhi(a, c0, b), c3, b), k1, b),
                          S.mul(a, c0, b))
        k0, k1 = S.add(k0, KA, b), S.add(k1, KB, b)
    return c0, c1, c2, c3


@builtin
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds=N_ROUNDS_DEFAULT, _builder=None):
    """``n_rounds`` rounds of Philox on the counter ``(c0, c1, c2, c3)`` (all uint32, or
    all uint64 for Philox 4x64) with the key ``(k0, k1)`` (integers no wider than the
    counter, converted to its type). Returns the four words, broadcast to one shape."""
    b = _builder
    n = _rounds(n_rounds)
    words = [_int_tensor(c, f"philox_impl's c{i}", b) for i, c in enumerate((c0, c1, c2, c3))]
    t = words[0].dtype
    if t not in (T.u32, T.u64) or any(w.dtype != t for w in words):
        fail("philox_impl needs four uint32 (or four uint64) counter words, got "
             + ", ".join(S.describe(w) for w in words))
    keys = []
    for i, k in enumerate((k0, k1)):
        k = _int_tensor(k, f"philox_impl's k{i}", b)
        if k.dtype.bits > t.bits:
            fail(f"philox_impl's k{i} ({S.describe(k)}) is wider than the {t!r} counter")
        keys.append(S.cast(k, t, b))
    shape = []
    for v in words + keys:
        shape = S.broadcast_shapes(shape, v.shape)
    words = [S.broadcast_to(w, shape, b) for w in words]
    return _philox_rounds(words, keys[0], keys[1], n, b)


@builtin
def philox(seed, c0, c1, c2, c3, n_rounds=N_ROUNDS_DEFAULT, _builder=None):
    """Philox with the key taken from ``seed`` (an integer scalar, converted to uint64):
    for 32-bit counters the key is (seed's low word, its high word), for 64-bit counters
    (seed, 0). The counter words (integers of one width) are reinterpreted as unsigned."""
    b = _builder
    seed = S.cast(_int_tensor(seed, "philox's seed", b), T.u64, b)
    words = [_int_tensor(c, f"philox's c{i}", b) for i, c in enumerate((c0, c1, c2, c3))]
    bits = words[0].dtype.bits
    if bits not in (32, 64) or any(w.dtype.bits != bits for w in words):
        fail("philox's counter words must all be 32-bit or all 64-bit integers, got "
             + ", ".join(S.describe(w) for w in words))
    if bits == 32:
        utype = T.u32
        lo = S.cast(S.bitwise("and", seed, 0xFFFFFFFF, b), T.u32, b)
        hi = S.cast(S.bitwise("and", S.bitwise("shr", seed, 32, b), 0xFFFFFFFF, b), T.u32, b)
    else:
        utype, lo, hi = T.u64, seed, S.constant(b, 0, T.u64)
    words = [S.cast(w, utype, b, bitcast=True) for w in words]
    return philox_impl(*words, lo, hi, n_rounds, _builder=b)


@builtin
def randint4x(seed, offset, n_rounds=N_ROUNDS_DEFAULT, _builder=None):
    """Four tiles of random uint32 for the integer ``offset`` tile (any shape) and the
    integer scalar ``seed``: Philox of the counter (offset's low word, its high word, 0,
    0). The fastest entry point: one Philox evaluation gives all four."""
    b = _builder
    offset = _int_tensor(offset, "randint's offset", b)
    lo = S.cast(offset, T.u32, b)
    zero = S.mul(lo, 0, b)
    hi = S.cast(S.bitwise("shr", offset, 32, b), T.u32, b) if offset.dtype.bits > 32 else zero
    return philox(seed, lo, hi, zero, zero, n_rounds, _builder=b)


@builtin
def randint(seed, offset, n_rounds=N_ROUNDS_DEFAULT, _builder=None):
    """A tile of random uint32 for ``offset``: the first of :func:`randint4x`'s results."""
    return randint4x(seed, offset, n_rounds, _builder=_builder)[0]


@builtin
def uint_to_uniform_float(x, _builder=None):
    """Random 32- or 64-bit integers ``x`` to float32 in [0, 1): the bits read as signed,
    negatives folded to ``-x - 1``, times 4.6566127342e-10 (2.0**-31 rounded down so that
    the largest input stays below 1.0; 1.0842020432385337e-19 for 64-bit inputs)."""
    b = _builder
    x = _int_tensor(x, "uint_to_uniform_float's argument", b)
    if x.dtype.bits not in (32, 64):
        fail(f"uint_to_uniform_float needs 32- or 64-bit integers, got {S.describe(x)}")
    signed = T.i32 if x.dtype.bits == 32 else T.i64
    x = S.cast(x, signed, b, bitcast=True)
    x = S.where(S.compare("lt", x, 0, b), S.sub(S.neg(x, b), 1, b), x, b)
    return S.mul(x, _UNIFORM_SCALE[signed.bits], b)


@builtin
def rand(seed, offset, n_rounds=N_ROUNDS_DEFAULT, _builder=None):
    """A tile of float32 uniform in [0, 1) for ``offset`` (``uint_to_uniform_float`` of
    :func:`randint`)."""
    return uint_to_uniform_float(randint(seed, offset, n_rounds, _builder=_builder),
                                 _builder=_builder)


@builtin
def rand4x(seed, offsets, n_rounds=N_ROUNDS_DEFAULT, _builder=None):
    """Four tiles of float32 uniform in [0, 1): one per word of :func:`randint4x`."""
    return tuple(uint_to_uniform_float(w, _builder=_builder)
                 for w in randint4x(seed, offsets, n_rounds, _builder=_builder))


@builtin
def pair_uniform_to_normal(u1, u2, _builder=None):
    """Box-Muller: two uniforms to two standard normals, ``r cos(t)`` and ``r sin(t)``
    with ``r = sqrt(-2 log(max(u1, 1e-7)))`` and ``t = 2 pi u2``."""
    b = _builder
    u1 = S.minmax("max", 1.0e-7, u1, b)
    th = S.mul(_TWO_PI, u2, b)
    r = S.unary_float("sqrt", S.mul(-2.0, S.unary_float("log", u1, b), b), b)
    return S.mul(r, S.unary_float("cos", th, b), b), S.mul(r, S.unary_float("sin", th, b), b)


@builtin
def randn(seed, offset, n_rounds=N_ROUNDS_DEFAULT, _builder=None):
    """A tile of float32 standard normals for ``offset``: the cosine half of Box-Muller on
    the first two uniforms of :func:`randint4x`."""
    b = _builder
    i1, i2, _, _ = randint4x(seed, offset, n_rounds, _builder=b)
    u1, u2 = uint_to_uniform_float(i1, _builder=b), uint_to_uniform_float(i2, _builder=b)
    return pair_uniform_to_normal(u1, u2, _builder=b)[0]


@builtin
def randn4x(seed, offset, n_rounds=N_ROUNDS_DEFAULT, _builder=None):
    """Four tiles of float32 standard normals: Box-Muller on (u1, u2) and (u3, u4) of
    :func:`rand4x`."""
    b = _builder
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds, _builder=b)
    return pair_uniform_to_normal(u1, u2, _builder=b) + pair_uniform_to_normal(u3, u4,
                                                                             _builder=b)


__all__ = ["philox_impl", "philox", "randint4x", "randint", "uint_to_uniform_float", "rand",
           "rand4x", "pair_uniform_to_normal", "randn", "randn4x", "N_ROUNDS_DEFAULT"]
