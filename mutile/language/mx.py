"""``dot_scaled``: the matrix product of microscaling (OCP MX) operands.

An MX operand is a tile of narrow floats — e2m1 (fp4, two per uint8, the first element
in the low nibble), e4m3 or e5m2 (fp8, as their fp8 dtype or as uint8 bits) — plus, per
32 consecutive elements along K, one e8m0 scale (a uint8 ``s`` meaning ``2**(s - 127)``;
255 is NaN). bf16 and fp16 operands (as themselves or uint16 bits) take no packing and
usually no scale. mutile decodes both operands to float32 with integer ops (exact:
every e2m1/e4m3/e5m2/bf16/fp16 value is a float32, and so is its product with a power of
two in float32's range), multiplies by the scales, and runs the ``ieee`` float32 ``dot``
(products exact, sums rounded in float32, k ascending) — where Triton's emulation
upcasts to bf16 (fp16 if an operand is fp16), whose smaller range can flush or overflow
extreme scaled values that float32 keeps.
"""
from __future__ import annotations

from ..ir import types as T
from . import compose as C
from . import semantic as S
from .core import _unwrap, builtin, tensor
from .semantic import fail
from .tiles import dot

FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")
_FLOAT_OF = {"e4m3": (T.f8e4m3, T.u8), "e5m2": (T.f8e5m2, T.u8), "bf16": (T.bf16, T.u16),
             "fp16": (T.f16, T.u16)}
GROUP = 32            # elements along K per e8m0 scale


def _u32(x, b):
    return S.cast(x, T.u32, b)


def _e2m1_to_f32(nib: tensor, b) -> tensor:
    """float32 of 4-bit e2m1 codes (uint32 0..15): sign, 2 exponent bits (bias 1), 1
    mantissa bit; exponent 0 is the subnormal 0 / 0.5."""
    sign = S.bitwise("shl", S.bitwise("shr", nib, 3, b), 31, b)
    exp = S.bitwise("and", S.bitwise("shr", nib, 1, b), 3, b)
    man = S.bitwise("and", nib, 1, b)
    normal = S.bitwise("or", S.bitwise("shl", S.add(exp, 126, b), 23, b),
                       S.bitwise("shl", man, 22, b), b)
    sub = S.mul(man, 126 << 23, b)                    # 0.5 or 0
    bits = S.bitwise("or", S.where(S.compare("eq", exp, 0, b), sub, normal, b), sign, b)
    return tensor(b("bitcast", bits.handle, to=T.f32))


def _unpack_e2m1(x: tensor, axis: int, b) -> tensor:
    """float32 of a uint8 tile holding two e2m1 values per byte along ``axis`` (the
    element of the lower index in the low nibble); ``axis`` doubles."""
    w = _u32(x, b)
    lo = _e2m1_to_f32(S.bitwise("and", w, 15, b), b)
    hi = _e2m1_to_f32(S.bitwise("shr", w, 4, b), b)
    shape = list(x.shape)
    shape[axis] *= 2
    return C.reshape(C.stack(lo, hi, axis + 1, b), shape, b)


def _decode(x, fmt: str, k_pack: bool, is_rhs: bool, what: str, b) -> tensor:
    """The float32 values of operand ``x`` in format ``fmt``."""
    x = S.to_tensor(x, b)
    if len(x.shape) not in (2, 3):
        fail(f"dot_scaled: {what} must be a 2-D (or 3-D, batched) tile, got shape {x.shape}")
    if fmt == "e2m1":
        if x.dtype != T.u8:
            fail(f"dot_scaled: an e2m1 {what} holds two values per byte as uint8, got "
                 f"{x.dtype!r}")
        axis = len(x.shape) - (2 if k_pack == is_rhs else 1)     # the packed dim
        return _unpack_e2m1(x, axis, b)
    if not k_pack:
        fail(f"dot_scaled: only e2m1 operands can be packed along M/N ({what}_k_pack=False "
             f"with {fmt})")
    ft, bits = _FLOAT_OF[fmt]
    if x.dtype == bits:
        x = tensor(b("bitcast", x.handle, to=ft))
    elif x.dtype != ft:
        fail(f"dot_scaled: a {fmt} {what} must be {ft!r} (or its bits as {bits!r}), got "
             f"{x.dtype!r}")
    return S.cast(x, T.f32, b)


def _scale_f32(s: tensor, b) -> tensor:
    """float32 of e8m0 scale bytes: ``2**(s - 127)``; 0 is 2**-127, 255 is NaN."""
    w = _u32(s, b)
    bits = S.bitwise("shl", w, 23, b)
    bits = S.where(S.compare("eq", w, 0, b), 0x00400000, bits, b)
    bits = S.where(S.compare("eq", w, 255, b), 0x7FC00000, bits, b)
    return tensor(b("bitcast", bits.handle, to=T.f32))


def _apply_scale(v: tensor, scale, k: int, rows: int, is_rhs: bool, what: str, b) -> tensor:
    """``v`` (float32, K along its last dim for lhs, its second-to-last for rhs) times
    the e8m0 ``scale`` ([.., rows, K / 32]), or ``v`` when ``scale`` is None."""
    scale = _unwrap(scale)
    if scale is None:
        return v
    s = S.to_tensor(scale, b)
    want = v.shape[:-2] + [rows, k // GROUP]
    if s.dtype not in (T.u8, T.i8):
        fail(f"dot_scaled: {what}_scale must hold e8m0 scales as uint8, got {s.dtype!r}")
    if k % GROUP or s.shape != want:
        fail(f"dot_scaled: {what}_scale must have shape {want} (one e8m0 scale per {GROUP} "
             f"elements along K={k}), got {s.shape}")
    if s.dtype == T.i8:
        s = tensor(b("bitcast", s.handle, to=T.u8))
    f = _scale_f32(s, b)
    f = S.broadcast_to(C.reshape(f, f.shape + [1], b), f.shape + [GROUP], b)
    f = C.reshape(f, f.shape[:-2] + [k], b)                   # [.., rows, K]
    if is_rhs:
        f = C.move_axis(f, len(f.shape) - 1, len(f.shape) - 2, b)   # [.., K, N]
    return S.mul(v, f, b)


def _format(f, what: str) -> str:
    f = _unwrap(f)
    if f not in FORMATS:
        fail(f"dot_scaled: {what}_format must be one of {', '.join(FORMATS)}, got {f!r}")
    return f


@builtin
def dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None,
               fast_math=False, lhs_k_pack=True, rhs_k_pack=True, out_dtype=T.f32,
               _builder=None) -> tensor:
    """``acc + (lhs * lhs_scale) @ (rhs * rhs_scale)`` with microscaled operands.

    ``lhs`` is [M, K] and ``rhs`` [K, N] in ``lhs_format``/``rhs_format`` (``"e2m1"``:
    uint8, two values per byte along K — along M/N with ``*_k_pack=False``; ``"e4m3"``,
    ``"e5m2"``: fp8 or uint8; ``"bf16"``, ``"fp16"``). ``lhs_scale`` is [M, K/32] and
    ``rhs_scale`` [N, K/32] (not transposed) uint8 e8m0 scales, or None. 3-D operands
    (and scales) with a leading batch dim multiply per batch. The result is float32.
    """
    b = _builder
    lf, rf = _format(lhs_format, "lhs"), _format(rhs_format, "rhs")
    if _unwrap(out_dtype) != T.f32:
        fail(f"dot_scaled: out_dtype must be float32, got {_unwrap(out_dtype)!r}")
    lv = _decode(lhs, lf, bool(_unwrap(lhs_k_pack)), False, "lhs", b)
    rv = _decode(rhs, rf, bool(_unwrap(rhs_k_pack)), True, "rhs", b)
    if len(lv.shape) != len(rv.shape) or lv.shape[:-2] != rv.shape[:-2] \
            or lv.shape[-1] != rv.shape[-2]:
        fail(f"dot_scaled: the operands do not multiply: lhs holds {lv.shape} and rhs "
             f"{rv.shape} values")
    k = lv.shape[-1]
    lv = _apply_scale(lv, lhs_scale, k, lv.shape[-2], False, "lhs", b)
    rv = _apply_scale(rv, rhs_scale, k, rv.shape[-1], True, "rhs", b)
    acc = _unwrap(acc)
    if acc is not None:
        acc = S.to_tensor(acc, b)
        if acc.dtype != T.f32:
            fail(f"dot_scaled: the accumulator must be float32, got {acc.dtype!r}")
    return dot(lv, rv, acc, input_precision="ieee", _builder=b)
