"""Bit-exact floating-point format conversions emitted as branch-free LLVM IR.

Every conversion produced here is bit-identical to the NumPy / ml_dtypes cast
``np.asarray(bits).view(src_dtype).astype(dst_dtype)`` on x86-64, for every
input pattern: NaNs (the output payload follows the reference rules below),
infinities, signed zeros, subnormals on both sides, overflow and
round-to-nearest-even ties.

The code is generic.  A format is described by ``_Fmt`` (exponent bits,
mantissa bits, whether the all-ones exponent encodes inf/NaN IEEE style or,
for ``float8_e4m3fn``, only the all-ones pattern is NaN).  Two routines do all
the work on integer bit patterns:

* ``_widen``: exact conversion into a format with at least as many exponent
  and mantissa bits (subnormal inputs are renormalised via an exact int->float conversion);
* ``_round``: round-to-nearest-even narrowing from f32/f64 into any narrower
  format (normal, subnormal, overflow and NaN cases computed side by side
  and merged with ``select``).

Any other pair goes through f32 first: the widening step is exact, so only
one rounding happens.  The one deliberate double rounding is f64 -> bf16/f8,
because ml_dtypes itself casts those through f32 (f64 -> f16 is NumPy's
direct single rounding).

NaN payload rules of the reference implementation (all keep the sign bit):

* into bf16 / f8, from f8, and bf16 -> f16: the canonical quiet NaN;
* f16 -> f32/f64, bf16 -> f32: payload shifted, not quieted;
* f32 -> f64, bf16 -> f64, f64 -> f32: payload shifted/truncated, quieted
  (x86 ``cvtss2sd`` / ``cvtsd2ss`` behaviour);
* f32/f64 -> f16: payload truncated, not quieted, forced non-zero.

f32 <-> f64 use LLVM ``fpext``/``fptrunc`` (exact / IEEE round-to-nearest-even
in LLVM's default floating-point environment) and only patch the NaN lanes;
f64 -> bf16/f8 also starts with ``fptrunc`` to f32.  Everything else is
integer arithmetic (plus one exact int -> float conversion used to find the
leading bit of subnormal mantissas), so it does not depend on MXCSR
flush-to-zero / denormals-are-zero settings; the ``fptrunc`` steps assume
the default (no FTZ) environment, as the NumPy reference itself does.  No branches are emitted; scalars and
``ir.VectorType`` values are handled alike, so the code works inside loops
that LLVM vectorizes.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

__all__ = ["FORMATS", "storage_type", "convert_float"]

FORMATS = frozenset({"f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2"})


@dataclass(frozen=True)
class _Fmt:
    """Static description of a binary floating-point format."""

    name: str
    ebits: int
    mbits: int
    ieee: bool  # all-ones exponent = inf/NaN; False: only all-ones = NaN

    @property
    def width(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def sign_bit(self) -> int:
        return 1 << (self.width - 1)

    @property
    def abs_mask(self) -> int:
        return self.sign_bit - 1

    @property
    def mant_mask(self) -> int:
        return (1 << self.mbits) - 1

    @property
    def inf_bits(self) -> int:
        """Bits of +inf (IEEE) or of the all-ones exponent (non-IEEE)."""
        return ((1 << self.ebits) - 1) << self.mbits

    @property
    def quiet_bit(self) -> int:
        return 1 << (self.mbits - 1)

    @property
    def max_finite(self) -> int:
        return self.inf_bits - 1 if self.ieee else self.abs_mask - 1

    @property
    def qnan(self) -> int:
        """Canonical positive quiet NaN."""
        return self.inf_bits | self.quiet_bit if self.ieee else self.abs_mask


_F = {
    "f64": _Fmt("f64", 11, 52, True),
    "f32": _Fmt("f32", 8, 23, True),
    "f16": _Fmt("f16", 5, 10, True),
    "bf16": _Fmt("bf16", 8, 7, True),
    "f8e4m3": _Fmt("f8e4m3", 4, 3, False),
    "f8e5m2": _Fmt("f8e5m2", 5, 2, True),
}

_FLOAT_STORAGE = {"f64": ir.DoubleType(), "f32": ir.FloatType(), "f16": ir.HalfType()}

# NaN output policies (see module docstring).
_CANON, _KEEP, _QUIET = "canonical", "keep", "quiet"


def storage_type(fmt: str) -> ir.Type:
    """Return the LLVM scalar type used to store values of format ``fmt``.

    f64 -> double, f32 -> float, f16 -> half, bf16 -> i16, f8e4m3/f8e5m2 -> i8.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown float format {fmt!r}; expected one of {sorted(FORMATS)}")
    if fmt in _FLOAT_STORAGE:
        return _FLOAT_STORAGE[fmt]
    return ir.IntType(_F[fmt].width)


def convert_float(b: ir.IRBuilder, x: ir.Value, src: str, dst: str) -> ir.Value:
    """Emit IR converting ``x`` from format ``src`` to format ``dst``.

    ``x`` is a scalar or ``ir.VectorType`` of ``storage_type(src)``; the result
    has the same shape with element type ``storage_type(dst)``.  The result is
    bit-identical to ``x.view(src).astype(dst)`` with NumPy / ml_dtypes dtypes
    for every input bit pattern.  Emits no branches.
    """
    for fmt in (src, dst):
        if fmt not in FORMATS:
            raise ValueError(f"unknown float format {fmt!r}; expected one of {sorted(FORMATS)}")
    elem = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    if elem != storage_type(src):
        raise TypeError(f"expected {storage_type(src)} (or a vector of it) for {src}, got {x.type}")
    if src == dst:
        return x
    if (src, dst) in (("f32", "f64"), ("f64", "f32")):
        return _convert_hw(b, x, src, dst)
    ops = _Ops(b, x.type)
    bits = ops.to_bits(x, src)
    S, D = _F[src], _F[dst]
    policy = _nan_policy(src, dst)
    if D.ebits >= S.ebits and D.mbits >= S.mbits:
        out = _widen(ops, bits, S, D, policy)
    elif src == "f64" and dst != "f16":
        # ml_dtypes casts f64 -> bf16/f8 through f32 (double rounding).  The
        # canonical-NaN policy makes the f32 NaN payload irrelevant.
        mid = ops.to_bits(b.fptrunc(x, ops.ty(ir.FloatType())), "f32")
        out = _round(ops, mid, _F["f32"], D, policy)
    elif src in ("f32", "f64"):
        out = _round(ops, bits, S, D, policy)
    else:
        mid = _widen(ops, bits, S, _F["f32"], _KEEP)
        out = _round(ops, mid, _F["f32"], D, policy)
    return ops.from_bits(out, dst)


def _nan_policy(src: str, dst: str) -> str:
    """NaN payload policy matching NumPy / ml_dtypes for the pair."""
    narrow = ("bf16", "f8e4m3", "f8e5m2")
    if dst in narrow or src in ("f8e4m3", "f8e5m2") or (src, dst) == ("bf16", "f16"):
        return _CANON
    if (src, dst) in (("f32", "f64"), ("bf16", "f64"), ("f64", "f32")):
        return _QUIET
    return _KEEP


class _Ops:
    """Small helper emitting lane-shape-agnostic integer/float operations."""

    def __init__(self, b: ir.IRBuilder, like: ir.Type):
        self.b = b
        self.lanes = like.count if isinstance(like, ir.VectorType) else None

    def ty(self, elem: ir.Type) -> ir.Type:
        return elem if self.lanes is None else ir.VectorType(elem, self.lanes)

    def ity(self, width: int) -> ir.Type:
        return self.ty(ir.IntType(width))

    def const(self, ty: ir.Type, value) -> ir.Constant:
        elem = ty.element if isinstance(ty, ir.VectorType) else ty
        if isinstance(elem, ir.IntType) and value >= 1 << (elem.width - 1):
            value -= 1 << elem.width  # spell large unsigned constants as signed
        if isinstance(ty, ir.VectorType):
            return ir.Constant(ty, [ir.Constant(ty.element, value)] * ty.count)
        return ir.Constant(ty, value)

    def c(self, like: ir.Value, value) -> ir.Constant:
        """Constant of the same type as ``like``."""
        return self.const(like.type, value)

    def width(self, v: ir.Value) -> int:
        t = v.type.element if isinstance(v.type, ir.VectorType) else v.type
        return t.width

    def to_bits(self, x: ir.Value, fmt: str) -> ir.Value:
        if fmt in _FLOAT_STORAGE:
            return self.b.bitcast(x, self.ity(_F[fmt].width))
        return x

    def from_bits(self, v: ir.Value, fmt: str) -> ir.Value:
        if fmt in _FLOAT_STORAGE:
            return self.b.bitcast(v, self.ty(_FLOAT_STORAGE[fmt]))
        return v

    def resize(self, v: ir.Value, width: int) -> ir.Value:
        cur = self.width(v)
        if cur == width:
            return v
        if cur < width:
            return self.b.zext(v, self.ity(width))
        return self.b.trunc(v, self.ity(width))

    def band(self, v, k):
        return self.b.and_(v, self.c(v, k))

    def eq(self, v, k):
        return self.b.icmp_unsigned("==", v, self.c(v, k))

    def ugt(self, v, k):
        return self.b.icmp_unsigned(">", v, self.c(v, k))

    def sel(self, cond, a, other):
        return self.b.select(cond, a, other)

    def msb_index(self, v: ir.Value) -> ir.Value:
        """floor(log2(v)) for integer lanes 1 <= v < 2**24 (same type as v).

        Read off the exponent of the exact ``uitofp`` to float: a single
        vector conversion, cheaper than an expanded ``llvm.ctlz`` on AVX2.
        """
        b = self.b
        f = b.uitofp(self.resize(v, 32), self.ty(ir.FloatType()))
        e = b.lshr(b.bitcast(f, self.ity(32)), self.const(self.ity(32), 23))
        return self.resize(b.sub(e, self.const(self.ity(32), 127)), self.width(v))


def _convert_hw(b: ir.IRBuilder, x: ir.Value, src: str, dst: str) -> ir.Value:
    """f32 <-> f64 via fpext/fptrunc, NaN lanes rebuilt bit-exactly (quieted)."""
    ops = _Ops(b, x.type)
    S, D = _F[src], _F[dst]
    if dst == "f64":
        y = b.fpext(x, ops.ty(ir.DoubleType()))
    else:
        y = b.fptrunc(x, ops.ty(ir.FloatType()))
    bits = ops.to_bits(x, src)
    sign = ops.resize(b.lshr(bits, ops.c(bits, S.width - 1)), D.width)
    sign = b.shl(sign, ops.c(sign, D.width - 1))
    mant = ops.resize(ops.band(bits, S.mant_mask), D.width if D.width > S.width else S.width)
    if D.mbits > S.mbits:
        payload = b.shl(mant, ops.c(mant, D.mbits - S.mbits))
    else:
        payload = ops.resize(b.lshr(mant, ops.c(mant, S.mbits - D.mbits)), D.width)
    nan = b.or_(b.or_(payload, ops.c(payload, D.inf_bits | D.quiet_bit)), sign)
    is_nan = b.fcmp_unordered("uno", x, x)
    return b.select(is_nan, ops.from_bits(nan, dst), y)


def _widen(ops: _Ops, bits: ir.Value, S: _Fmt, D: _Fmt, policy: str) -> ir.Value:
    """Exact conversion of ``S`` bits into the wider (IEEE) format ``D``.

    Requires ``D.ebits >= S.ebits`` and ``D.mbits >= S.mbits``; returns an
    integer of ``D.width`` bits.
    """
    b = ops.b
    W = D.width
    x = ops.resize(bits, W)
    sign = b.shl(ops.band(x, S.sign_bit), ops.c(x, W - S.width))
    a = ops.band(x, S.abs_mask)
    e = b.lshr(a, ops.c(a, S.mbits))
    mant = ops.band(a, S.mant_mask)
    dm = D.mbits - S.mbits
    delta = D.bias - S.bias
    val = b.add(b.shl(a, ops.c(a, dm)), ops.c(a, delta << D.mbits))
    if delta > 0:
        # Subnormal source -> normal destination: move the leading one of the
        # mantissa to the implicit-bit position and lower the exponent by k.
        k = b.sub(ops.c(mant, S.mbits), ops.msb_index(mant))
        k = ops.sel(ops.eq(mant, 0), ops.c(k, 0), k)
        norm = b.shl(b.shl(mant, k), ops.c(mant, dm))
        sub = b.add(norm, b.shl(b.sub(ops.c(k, delta), k), ops.c(k, D.mbits)))
        val = ops.sel(ops.eq(e, 0), sub, val)
        val = ops.sel(ops.eq(a, 0), ops.c(a, 0), val)
    if S.ieee:
        val = ops.sel(ops.eq(a, S.inf_bits), ops.c(a, D.inf_bits), val)
        is_nan = ops.ugt(a, S.inf_bits)
    else:
        is_nan = ops.eq(a, S.abs_mask)
    if policy == _CANON:
        nan = ops.c(a, D.qnan)
    else:
        nan = b.or_(b.shl(mant, ops.c(mant, dm)), ops.c(mant, D.inf_bits))
        if policy == _QUIET:
            nan = b.or_(nan, ops.c(nan, D.quiet_bit))
    val = ops.sel(is_nan, nan, val)
    return b.or_(val, sign)


def _round(ops: _Ops, bits: ir.Value, S: _Fmt, D: _Fmt, policy: str) -> ir.Value:
    """Round-to-nearest-even narrowing of ``S`` bits (f32/f64) into ``D``.

    Requires ``S.mbits > D.mbits`` and ``S.bias >= D.bias``; returns an
    integer of ``D.width`` bits.  Normal and subnormal results are computed
    by one shift-and-round whose operand and shift are chosen per lane.
    """
    if not (S.mbits > D.mbits and S.bias >= D.bias):
        raise ValueError(f"cannot round {S.name} into {D.name}")
    b = ops.b
    W = S.width
    sign = ops.band(bits, S.sign_bit)
    a = ops.band(bits, S.abs_mask)
    e = b.lshr(a, ops.c(a, S.mbits))
    mant = ops.band(a, S.mant_mask)
    sh0 = S.mbits - D.mbits
    delta = S.bias - D.bias
    e_zero = ops.eq(e, 0)
    # Biased destination exponent (signed); subnormal sources use exponent 1.
    ed = b.sub(ops.sel(e_zero, ops.c(e, 1), e), ops.c(e, delta))
    is_norm = b.icmp_signed(">=", ed, ops.c(ed, 1))
    a_norm = b.sub(a, ops.c(a, delta << S.mbits))
    implicit = b.shl(b.zext(b.not_(e_zero), a.type), ops.c(a, S.mbits))
    sig = b.or_(mant, implicit)
    sh_sub = b.sub(ops.c(ed, sh0 + 1), ed)
    cap = ops.c(ed, S.mbits + 2)  # any larger shift rounds to zero as well
    sh_sub = ops.sel(b.icmp_signed("<", sh_sub, cap), sh_sub, cap)
    v = ops.sel(is_norm, a_norm, sig)
    sh = ops.sel(is_norm, ops.c(ed, sh0), sh_sub)
    half_m1 = b.sub(b.shl(ops.c(sh, 1), b.sub(sh, ops.c(sh, 1))), ops.c(sh, 1))
    lsb = ops.band(b.lshr(v, sh), 1)
    r = b.lshr(b.add(b.add(v, half_m1), lsb), sh)
    if D.ieee:
        r = ops.sel(b.icmp_unsigned(">=", r, ops.c(r, D.inf_bits)), ops.c(r, D.inf_bits), r)
    else:
        r = ops.sel(ops.ugt(r, D.max_finite), ops.c(r, D.qnan), r)
    if policy == _CANON:
        nan = ops.c(r, D.qnan)
    else:
        payload = b.lshr(mant, ops.c(mant, sh0))
        if policy == _QUIET:
            payload = b.or_(payload, ops.c(payload, D.quiet_bit))
        else:
            payload = b.or_(payload, b.zext(ops.eq(payload, 0), payload.type))
        nan = b.or_(payload, ops.c(payload, D.inf_bits))
    r = ops.sel(ops.ugt(a, S.inf_bits), nan, r)
    out = ops.resize(r, D.width)
    return b.or_(out, ops.resize(b.lshr(sign, ops.c(sign, W - D.width)), D.width))
