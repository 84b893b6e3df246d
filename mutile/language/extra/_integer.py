"""libdevice's integer functions (``clz``, ``popc``, ``brev``, ``ffs``, ``byte_perm``,
``mulhi``, ``mul24``, ``sad``, ``hadd``, ``rhadd``) from shifts, masks and products.

Each works on the unsigned bit pattern of its 32- or 64-bit operand and returns the type
Triton's libdevice declares.
"""
from __future__ import annotations

from ...ir import types as T
from ._emit import UINT_OF, Emit


def _u(e: Emit, x):
    return e.bitcast(x, UINT_OF[x.dtype.bits]) if x.dtype.kind != "uint" else x


def _mask(width: int, pattern: int) -> int:
    """``pattern`` (a byte) repeated over ``width`` bits."""
    return int.from_bytes(bytes([pattern]) * (width // 8), "little")


def clz(e: Emit, x):
    """Leading zero bits (int32): a binary search over halves, quarters..."""
    w = x.dtype.bits
    u, n = _u(e, x), e.const(0, T.i32)
    s = w // 2
    while s:
        top_clear = e.eq(e.shr(u, w - s), 0)
        n = e.add(n, e.where(top_clear, s, 0))
        u = e.where(top_clear, e.shl(u, s), u)
        s //= 2
    return e.add(n, e.where(e.eq(x, 0), 1, 0))


def popc(e: Emit, x):
    """Set bits (int32), by summing bit fields of doubling width."""
    w = x.dtype.bits
    u = _u(e, x)
    u = e.sub(u, e.and_(e.shr(u, 1), _mask(w, 0x55)))
    u = e.add(e.and_(u, _mask(w, 0x33)), e.and_(e.shr(u, 2), _mask(w, 0x33)))
    u = e.and_(e.add(u, e.shr(u, 4)), _mask(w, 0x0F))
    return e.cast(e.shr(e.mul(u, _mask(w, 0x01)), w - 8), T.i32)


def brev(e: Emit, x):
    """The bits in reverse order (x's type), by swapping ever larger fields."""
    w = x.dtype.bits
    u = _u(e, x)
    for s, m in ((1, 0x55), (2, 0x33), (4, 0x0F)):
        u = e.or_(e.and_(e.shr(u, s), _mask(w, m)), e.shl(e.and_(u, _mask(w, m)), s))
    s = 8
    while s < w:
        m = int.from_bytes((b"\xff" * (s // 8) + b"\x00" * (s // 8)) * (w // (2 * s)), "little")
        u = e.or_(e.and_(e.shr(u, s), m), e.shl(e.and_(u, m), s))
        s *= 2
    return e.bitcast(u, x.dtype)


def ffs(e: Emit, x):
    """1-based position of the lowest set bit, 0 for 0 (int32)."""
    u = _u(e, x)
    low = e.and_(u, e.sub(e.const(0, u.dtype), u))           # x & -x
    return e.where(e.eq(u, 0), 0, e.sub(x.dtype.bits, clz(e, low)))


def byte_perm(e: Emit, x, y, s):
    """CUDA's __byte_perm: byte n of the result is byte ``(s >> 4n) & 7`` of (y:x)."""
    v = e.or_(e.shl(e.cast(_u(e, y), T.u64), 32), e.cast(_u(e, x), T.u64))
    sel = _u(e, s)
    out = e.const(0, T.u64)
    for n in range(4):
        k = e.cast(e.and_(e.shr(sel, 4 * n), 7), T.u64)
        byte = e.and_(e.shr(v, e.mul(k, 8)), 0xFF)
        out = e.or_(out, e.shl(byte, 8 * n))
    return e.bitcast(e.cast(out, T.u32), T.i32)


def mulhi(e: Emit, x, y):
    """High half of the double-width product, signed or unsigned as the operands."""
    t = x.dtype
    if t.bits == 32:
        wide = T.i64 if t.is_int_signed() else T.u64
        return e.cast(e.shr(e.mul(e.cast(x, wide), e.cast(y, wide)), 32), t)
    ux, uy = _u(e, x), _u(e, y)
    m = 0xFFFFFFFF
    x0, x1, y0, y1 = e.and_(ux, m), e.shr(ux, 32), e.and_(uy, m), e.shr(uy, 32)
    p00, p01, p10, p11 = e.mul(x0, y0), e.mul(x0, y1), e.mul(x1, y0), e.mul(x1, y1)
    mid = e.add(e.add(e.shr(p00, 32), e.and_(p01, m)), e.and_(p10, m))
    hi = e.add(e.add(e.add(p11, e.shr(p01, 32)), e.shr(p10, 32)), e.shr(mid, 32))
    if t.is_int_signed():       # signed = unsigned - (x < 0 ? y : 0) - (y < 0 ? x : 0)
        hi = e.sub(hi, e.where(e.lt(x, 0), uy, 0))
        hi = e.sub(hi, e.where(e.lt(y, 0), ux, 0))
    return e.bitcast(hi, t)


def mul24(e: Emit, x, y):
    """The low 32 bits of the product of the low 24 bits (sign-extended if signed)."""
    if x.dtype.is_int_signed():
        x, y = e.shr(e.shl(x, 8), 8), e.shr(e.shl(y, 8), 8)
    else:
        x, y = e.and_(x, 0xFFFFFF), e.and_(y, 0xFFFFFF)
    return e.mul(x, y)


def sad(e: Emit, x, y, z):
    """|x - y| + z, the difference taken without overflow."""
    d = e.where(e.gt(x, y), e.sub(_u(e, x), _u(e, y)), e.sub(_u(e, y), _u(e, x)))
    r = e.add(d, z)
    return r if x.dtype.kind == "uint" else e.bitcast(r, T.i32)


def hadd(e: Emit, x, y):
    """floor((x + y) / 2) without overflow."""
    return e.add(e.and_(x, y), e.shr(e.xor(x, y), 1))


def rhadd(e: Emit, x, y):
    """floor((x + y + 1) / 2) without overflow."""
    return e.sub(e.or_(x, y), e.shr(e.xor(x, y), 1))
