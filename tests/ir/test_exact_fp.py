"""The exact conversion oracle (exact_fp.py) on values worked out by hand."""
import struct
from fractions import Fraction

import pytest

from .exact_fp import FLOATS, convert_one, decode, floor_log2, round_to

F = Fraction
P = Fraction(2)


def f64(v):
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def f32(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


@pytest.mark.parametrize("src,bits,want", [
    ("f64", f64(1.0), ("num", 0, F(1))),
    ("f64", f64(-0.0), ("num", 1, F(0))),
    ("f64", 1, ("num", 0, P ** -1074)),                        # smallest subnormal
    ("f32", 0x7F7FFFFF, ("num", 0, (2 - P ** -23) * P ** 127)),
    ("f16", 0x7BFF, ("num", 0, F(65504))),
    ("f16", 0x0001, ("num", 0, P ** -24)),
    ("bf16", 0x3F81, ("num", 0, 1 + P ** -7)),
    ("f8e4m3", 0x7E, ("num", 0, F(448))),                      # S.1111.110: a number
    ("f8e4m3", 0x78, ("num", 0, F(256))),
    ("f8e4m3", 0x01, ("num", 0, P ** -9)),
    ("f8e4m3", 0xFF, ("nan", 1, 7)),
    ("f8e5m2", 0x7B, ("num", 0, F(57344))),
    ("f8e5m2", 0x7C, ("inf", 0)),
    ("f8e5m2", 0xFE, ("nan", 1, 2)),
    ("f8e4b8", 0x7F, ("num", 0, F(240))),                      # fnuz: every S.1111.xxx a number
    ("f8e4b8", 0x40, ("num", 0, F(1))),                        # bias 8
    ("f8e4b8", 0x01, ("num", 0, P ** -10)),
    ("f8e4b8", 0x80, ("nan", 1, 0)),                           # the only NaN
    ("f8e4b8", 0xFF, ("num", 1, F(240))),
    ("f8e5b16", 0x7F, ("num", 0, F(57344))),
    ("f8e5b16", 0x7C, ("num", 0, F(32768))),                   # no infinity
    ("f8e5b16", 0x01, ("num", 0, P ** -17)),
    ("f8e5b16", 0x80, ("nan", 1, 0)),
])
def test_decode(src, bits, want):
    assert decode(src, bits) == want


def test_floor_log2():
    assert [floor_log2(v) for v in (F(1), F(3, 2), F(2), F(1, 3), P ** -1074, F(2 ** 64 - 1))] \
        == [0, 0, 1, -2, -1074, 63]


@pytest.mark.parametrize("dst,sign,v,want", [
    ("bf16", 0, 1 + P ** -8 + P ** -40, 0x3F81),   # above the tie: up (via f32: 0x3F80)
    ("bf16", 0, 1 + P ** -8, 0x3F80),              # the tie: to even
    ("bf16", 0, 1 + 3 * P ** -8, 0x3F82),          # the tie: to even (up)
    ("f16", 0, 1 + P ** -11 + P ** -40, 0x3C01),
    ("f16", 0, F(65519), 0x7BFF),
    ("f16", 0, F(65520), 0x7C00),                  # the tie above max rounds to inf
    ("f16", 1, F(10 ** 6), 0xFC00),
    ("f16", 0, P ** -25, 0x0000),                  # half the smallest subnormal: to 0
    ("f16", 1, P ** -25, 0x8000),                  # ... keeping the sign
    ("f16", 0, 3 * P ** -26, 0x0001),
    ("f16", 0, (2 ** 10 - F(1, 2)) * P ** -24, 0x0400),   # subnormal rounds up to normal
    ("f8e4m3", 0, F(464), 0x7E),                   # tie between 448 and (480): even
    ("f8e4m3", 0, F(465), 0x7F),                   # overflow: NaN (no infinity)
    ("f8e4m3", 1, F(1000), 0xFF),
    ("f8e4b8", 0, F(247), 0x7F),                   # below the tie above 240
    ("f8e4b8", 0, F(248), 0x80),                   # the tie: to (256), overflow: NaN
    ("f8e4b8", 1, F(1000), 0x80),                  # the NaN has the sign bit
    ("f8e4b8", 1, P ** -11, 0x00),                 # rounds to zero: +0 (no -0)
    ("f8e4b8", 1, P ** -11 + P ** -20, 0x81),
    ("f8e4b8", 1, F(0), 0x00),
    ("f8e5b16", 0, F(61440), 0x80),                # tie above 57344: to (65536), NaN
    ("f8e5b16", 0, F(61439), 0x7F),
    ("f8e5b16", 1, 3 * P ** -19, 0x81),            # 0.75 * 2**-17: the smallest subnormal
    ("f8e5b16", 1, P ** -18, 0x00),                # the tie with 0: even, +0
    ("f8e4m3", 0, P ** -10, 0x00),
    ("f8e4m3", 0, 3 * P ** -11, 0x01),
    ("f8e4m3", 0, F(17), 0x58),                    # 16 + 1: tie between 16 and 18, even
    ("f8e5m2", 0, F(61439), 0x7B),
    ("f8e5m2", 0, F(61440), 0x7C),                 # tie above max: inf
    ("f8e5m2", 0, P ** -17, 0x00),
    ("f8e5m2", 0, P ** -17 + P ** -30, 0x01),
    ("f32", 0, F(2 ** 64 - 1), 0x5F800000),
    ("f32", 0, F(2 ** 24 + 1), 0x4B800000),
    ("f32", 0, F(2 ** 24 + 3), 0x4B800002),
    ("f64", 0, F(2 ** 53 + 1), f64(2.0 ** 53)),
    ("bf16", 0, F(2 ** 24 + 2 ** 16 + 1), 0x4B81),   # via f32 it would tie down: 0x4B80
])
def test_round_to(dst, sign, v, want):
    assert round_to(dst, sign, v) == want


@pytest.mark.parametrize("src,x,dst,want", [
    ("f64", f64(1 + 2.0 ** -8 + 2.0 ** -40), "bf16", 0x3F81),
    ("f64", f64(1 + 2.0 ** -4 + 2.0 ** -40), "f8e4m3", 0x39),
    ("f64", f64(1 + 2.0 ** -3 + 2.0 ** -40), "f8e5m2", 0x3D),
    ("f64", f64(-1e-300), "bf16", 0x8000),
    ("f32", f32(float("inf")), "f8e4m3", 0x7F),
    ("f32", f32(float("-inf")), "f8e4m3", 0xFF),
    ("f32", f32(float("inf")), "f8e5m2", 0x7C),
    ("f32", 0x7F800001, "f64", 0x7FF8000020000000),  # signalling NaN widened: quieted
    ("f32", 0x7F800001, "f16", 0x7C01),              # payload truncated to 0: kept a NaN
    ("f16", 0x7C01, "f32", 0x7F802000),              # shifted, not quieted
    ("bf16", 0xFF81, "f16", 0xFE00),                 # canonical, sign kept
    ("f32", 0xFFC00001, "bf16", 0xFFC0),
    ("f8e4m3", 0x7F, "f32", 0x7FC00000),
    ("f8e5m2", 0x7D, "f16", 0x7E00),
    ("i32", 2 ** 24 + 2 ** 16 + 1, "bf16", 0x4B81),
    ("i64", -(2 ** 63), "bf16", 0xDF00),
    ("u64", 2 ** 64 - 1, "f16", 0x7C00),
    ("i16", 465, "f8e4m3", 0x7F),
    ("i1", True, "f32", 0x3F800000),
    ("f32", f32(-2.5), "i8", -2),
    ("f32", f32(300.0), "i8", 127),
    ("f32", f32(-1.0), "u8", 0),
    ("f32", f32(-0.75), "i32", 0),
    ("f32", 0x7FC00000, "i32", 0),
    ("f32", f32(float("inf")), "u32", 2 ** 32 - 1),
    ("f32", f32(float("-inf")), "i64", -(2 ** 63)),
    ("f64", f64(2.0 ** 63), "i64", 2 ** 63 - 1),
    ("f64", f64(-(2.0 ** 63)), "i64", -(2 ** 63)),
    ("f64", f64(2.0 ** 64), "u64", 2 ** 64 - 1),
    ("f8e4m3", 0x7E, "u8", 255),
    ("f8e4m3", 0x7E, "i8", 127),
    ("f32", 0x7FC00000, "i1", True),
    ("f8e4b8", 0x80, "f32", 0xFFC00000),           # NaN keeps its sign: -qNaN
    ("f8e4b8", 0x80, "f8e5b16", 0x80),
    ("f8e4b8", 0x80, "i32", 0),
    ("f8e4m3", 0x7E, "f8e4b8", 0x80),              # 448: overflow
    ("f8e4m3", 0x80, "f8e4b8", 0x00),              # -0 -> +0
    ("f8e4m3", 0x7F, "f8e4b8", 0x80),              # NaN
    ("f8e5m2", 0xFC, "f8e5b16", 0x80),             # -inf: NaN
    ("f8e5m2", 0x01, "f8e5b16", 0x02),             # 2**-16 exactly
    ("f8e5b16", 0x01, "f8e5m2", 0x00),             # 2**-17: tie with 0, to even
    ("f8e5b16", 0x81, "f8e5m2", 0x80),             # ... -0 in e5m2
    ("f8e5b16", 0x03, "f8e5m2", 0x02),             # 3 * 2**-17: tie, to even (2**-15)
    ("f8e4b8", 0x01, "f8e4m3", 0x00),              # 2**-10: tie with 0
    ("f8e4b8", 0x03, "f8e4m3", 0x02),              # 1.5 * 2**-9: tie, to even
    ("f8e4b8", 0x7F, "f16", 0x5B80),               # 240
    ("f8e5b16", 0x7F, "f16", 0x7B00),              # 57344
    ("f8e5b16", 0x01, "f16", 0x0080),              # 2**-17: an f16 subnormal
    ("f32", f32(-0.0), "i1", False),
    ("i32", -1, "u8", 255),
    ("u64", 2 ** 64 - 1, "i64", -1),
    ("i16", 300, "i8", 44),
    ("i8", -3, "i1", True),
])
def test_convert_one(src, x, dst, want):
    assert convert_one(x, src, dst) == want


def test_formats():
    assert {n: (f.bias, f.max_bits) for n, f in FLOATS.items()} == {
        "f64": (1023, 0x7FEFFFFFFFFFFFFF), "f32": (127, 0x7F7FFFFF), "f16": (15, 0x7BFF),
        "bf16": (127, 0x7F7F), "f8e4m3": (7, 0x7E), "f8e5m2": (15, 0x7B),
        "f8e4b8": (8, 0x7F), "f8e5b16": (16, 0x7F)}
