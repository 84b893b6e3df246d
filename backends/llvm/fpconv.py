"""Bit-exact floating-point format conversions emitted as branch-free LLVM IR.

Every conversion produced here follows mutile's rules (docs/semantics.md,
"Conversions"; :func:`mutile.ir.semantics.convert` is the reference): rounded
once, to nearest even, from the exact source value, for every input pattern:
NaNs (payloads by :func:`mutile.ir.semantics.nan_policy`), infinities, signed
zeros, subnormals on both sides, overflow (inf, or NaN in the fp8 formats without
infinity: f8e4m3, f8e4b8, f8e5b16) and ties; the "fnuz" formats (f8e4b8, f8e5b16)
have one NaN (0x80) and no -0 (a result rounding to zero is +0).

The code is generic.  A format is a :class:`mutile.ir.semantics.FloatFormat`
(exponent bits, mantissa bits, whether the all-ones exponent encodes inf/NaN
IEEE style or, for ``float8_e4m3fn``, only the all-ones pattern is NaN).  Two
routines do all the work on integer bit patterns:

* ``_widen``: exact conversion into a format with at least as many exponent
  and mantissa bits (subnormal inputs are renormalised via an exact int->float conversion);
* ``_round``: round-to-nearest-even narrowing from f32/f64 into any narrower
  format (normal, subnormal, overflow and NaN cases computed side by side
  and merged with ``select``).

Any other float pair goes through f32 first: the widening step is exact, so
only one rounding happens.  f64 sources round directly (never through f32,
which would round twice).  Integers (:func:`convert_int`) convert exactly to
f64 first (64-bit integers rounded to odd at 53 bits, which keeps the one
rounding to a narrower format exact), then round once.

f32 <-> f64 use LLVM ``fpext``/``fptrunc`` (exact / IEEE round-to-nearest-even
in LLVM's default floating-point environment) and only patch the NaN lanes.
Everything else is integer arithmetic (plus exact int -> float conversions),
so it does not depend on MXCSR flush-to-zero / denormals-are-zero settings;
the ``fptrunc`` step assumes the default (no FTZ) environment.  No branches
are emitted; scalars and ``ir.VectorType`` values are handled alike, so the
code works inside loops that LLVM vectorizes.
"""
from __future__ import annotations

from llvmlite import ir

from mutile.ir.semantics import CANONICAL, FLOAT_FORMATS, KEEP, QUIET, FloatFormat, nan_policy

__all__ = ["FORMATS", "storage_type", "convert_float", "convert_int"]

FORMATS = frozenset(FLOAT_FORMATS)
_FLOAT_STORAGE = {"f64": ir.DoubleType(), "f32": ir.FloatType(), "f16": ir.HalfType()}


def storage_type(fmt: str) -> ir.Type:
    """Return the LLVM scalar type used to store values of format ``fmt``.

    f64 -> double, f32 -> float, f16 -> half, bf16 -> i16, every fp8 format -> i8.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown float format {fmt!r}; expected one of {sorted(FORMATS)}")
    if fmt in _FLOAT_STORAGE:
        return _FLOAT_STORAGE[fmt]
    return ir.IntType(FLOAT_FORMATS[fmt].width)


def convert_float(b: ir.IRBuilder, x: ir.Value, src: str, dst: str) -> ir.Value:
    """Emit IR converting ``x`` from format ``src`` to format ``dst``.

    ``x`` is a scalar or ``ir.VectorType`` of ``storage_type(src)``; the result
    has the same shape with element type ``storage_type(dst)``.  The result is
    bit-identical to :func:`mutile.ir.semantics.convert` for every input bit
    pattern: rounded once to nearest even.  Emits no branches.
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
    S, D = FLOAT_FORMATS[src], FLOAT_FORMATS[dst]
    policy = nan_policy(src, dst)
    if _widens_exactly(S, D):
        out = _widen(ops, bits, S, D, policy)
    elif src in ("f32", "f64"):
        out = _round(ops, bits, S, D, policy)
    else:
        mid = _widen(ops, bits, S, FLOAT_FORMATS["f32"], KEEP)
        out = _round(ops, mid, FLOAT_FORMATS["f32"], D, policy)
    return ops.from_bits(out, dst)


def _emax(f: FloatFormat) -> int:
    """The exponent of the largest finite binade of ``f``."""
    return (1 << f.ebits) - (2 if f.ieee else 1) - f.bias


def _widens_exactly(S: FloatFormat, D: FloatFormat) -> bool:
    """Whether ``_widen`` converts ``S`` into ``D`` exactly: IEEE ``D`` with as many
    mantissa bits, a range covering ``S``'s, and ``S``'s subnormals either subnormal
    at the same bias or normal in ``D``."""
    delta = D.bias - S.bias
    return D.ieee and D.mbits >= S.mbits and D.ebits >= S.ebits and _emax(D) >= _emax(S) \
        and (delta == 0 or delta >= S.mbits)


def convert_int(b: ir.IRBuilder, x: ir.Value, signed: bool, dst: str) -> ir.Value:
    """Emit IR converting the integer scalar/vector ``x`` to float format ``dst``.

    Rounded once to nearest even (as :func:`mutile.ir.semantics.convert`): f32/f64
    by ``sitofp``/``uitofp``; narrower formats from an exact f64 (a 64-bit
    integer beyond 2**53 first rounded to odd at bit 11, exact in f64 and
    rounding like the integer to any format of at most 51 bits).  Emits no
    branches.
    """
    if dst not in FORMATS:
        raise ValueError(f"unknown float format {dst!r}; expected one of {sorted(FORMATS)}")
    ops = _Ops(b, x.type)
    tofp = b.sitofp if signed else b.uitofp
    if dst in ("f32", "f64"):
        return tofp(x, ops.ty(_FLOAT_STORAGE[dst]))
    if ops.width(x) > 53:
        x = _round_to_odd(ops, x, signed, ops.width(x) - 53)
    return convert_float(b, tofp(x, ops.ty(ir.DoubleType())), "f64", dst)


def _round_to_odd(ops, x: ir.Value, signed: bool, k: int) -> ir.Value:
    """``x`` if it fits 53 bits, else ``x`` rounded to odd at bit ``k``: the bits
    below cleared, bit ``k`` set if any of them was (in two's complement too)."""
    b = ops.b
    w = ops.width(x)
    low = ops.band(x, (1 << k) - 1)
    sticky = b.shl(b.zext(b.icmp_unsigned("!=", low, ops.c(low, 0)), x.type), ops.c(x, k))
    odd = b.or_(ops.band(x, ((1 << w) - 1) ^ ((1 << k) - 1)), sticky)
    if signed:      # -2**53 <= x < 2**53  <=>  x + 2**53 < 2**54 (unsigned)
        big = b.icmp_unsigned(">=", b.add(x, ops.c(x, 1 << 53)), ops.c(x, 1 << 54))
    else:
        big = b.icmp_unsigned(">=", x, ops.c(x, 1 << 53))
    return b.select(big, odd, x)


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
            return self.b.bitcast(x, self.ity(FLOAT_FORMATS[fmt].width))
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
    S, D = FLOAT_FORMATS[src], FLOAT_FORMATS[dst]
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


def _widen(ops: _Ops, bits: ir.Value, S: FloatFormat, D: FloatFormat, policy: str) -> ir.Value:
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
    elif S.fnuz:
        is_nan = ops.eq(x, S.sign_bit)      # 0x80; it keeps its sign, as every NaN
    else:
        is_nan = ops.eq(a, S.abs_mask)
    if policy == CANONICAL or S.fnuz:       # fnuz has no payload (KEEP would give inf)
        nan = ops.c(a, D.qnan)
    else:
        nan = b.or_(b.shl(mant, ops.c(mant, dm)), ops.c(mant, D.inf_bits))
        if policy == QUIET:
            nan = b.or_(nan, ops.c(nan, D.quiet_bit))
    val = ops.sel(is_nan, nan, val)
    return b.or_(val, sign)


def _round(ops: _Ops, bits: ir.Value, S: FloatFormat, D: FloatFormat, policy: str) -> ir.Value:
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
    if policy == CANONICAL:
        nan = ops.c(r, D.qnan)
    else:
        payload = b.lshr(mant, ops.c(mant, sh0))
        if policy == QUIET:
            payload = b.or_(payload, ops.c(payload, D.quiet_bit))
        else:
            payload = b.or_(payload, b.zext(ops.eq(payload, 0), payload.type))
        nan = b.or_(payload, ops.c(payload, D.inf_bits))
    r = ops.sel(ops.ugt(a, S.inf_bits), nan, r)
    out = ops.resize(r, D.width)
    sign = ops.resize(b.lshr(sign, ops.c(sign, W - D.width)), D.width)
    if D.fnuz:                              # no -0: a zero result is +0
        sign = ops.sel(ops.eq(out, 0), ops.c(sign, 0), sign)
    return b.or_(out, sign)
