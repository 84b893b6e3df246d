"""The 128-bit words at their field boundaries, the container, and decode errors."""
import struct

import numpy as np
import pytest

from mutile.backends.pinghu import BY_MNEMONIC, DecodeError, assemble, decode, encode
from mutile.backends.pinghu.isa.encoding import (HEADER, OPERAND_TAGS, WORD_FIELDS,
    decode_instruction, encode_instruction)
from mutile.backends.pinghu.isa import INSTRS
from mutile.backends.pinghu.isa.operands import (FloatImm, IntImm, Mem, Pred, PredRun, Reg, Run,
    format_float, parse_float)

HEAD = ".kernel k\n.param A ptr c[0x0]\n.param B f32 c[0x8]\n"


def words(text: str) -> list[int]:
    data = encode(assemble(HEAD + text))
    (n,) = struct.unpack_from("<I", data, 12)
    return [int.from_bytes(data[HEADER.size + 16 * i:HEADER.size + 16 * (i + 1)], "little")
            for i in range(n)]


def field(word: int, name: str) -> int:
    lo, bits = next((lo, b) for n, lo, b, _ in WORD_FIELDS if n == name)
    return word >> lo & ((1 << bits) - 1)


def round_trip(line: str):
    p = assemble(HEAD + line)
    q = decode(encode(p))
    assert q == p
    return q.instructions[0]


def test_fields_tile_the_word():
    bits = sorted((lo, b) for _, lo, b, _ in WORD_FIELDS)
    pos = 0
    for lo, b in bits:
        assert lo == pos
        pos += b
    assert pos == 128


def test_opcode_is_the_table_index():
    for mn in ("ALU.FADD.F32", "NOP", "EXIT", "WMMA.M16N8K8.F32.TF32.TF32"):
        (w,) = words(mn if mn in ("NOP", "EXIT") else f"{mn} " + {
            "ALU.FADD.F32": "R0, R1, R2", "WMMA.M16N8K8.F32.TF32.TF32": "R0, R4, R8, R12"}[mn])
        assert field(w, "opcode") == BY_MNEMONIC[mn].opcode == INSTRS.index(BY_MNEMONIC[mn])
    (w,) = words("NOP")
    assert w == BY_MNEMONIC["NOP"].opcode     # no guard, no count, no operands


def test_operand_layout_of_a_register_and_an_immediate():
    (w,) = words("ALU.IADD.S32 R254, RZ, -1")
    ops = w >> 32
    assert ops & 0xF == 1 and ops >> 4 & 0xFF == 254           # tag Reg, R254
    assert ops >> 12 & 0xF == 1 and ops >> 16 & 0xFF == 255    # RZ
    assert ops >> 24 & 0xF == 6 and ops >> 28 & 0xFFFFFFFF == 0xFFFFFFFF  # -1
    assert ops >> 60 == 0


@pytest.mark.parametrize("line, value", [
    ("ALU.IADD.S32 R0, R1, -2147483648", -2**31), ("ALU.IADD.S32 R0, R1, 2147483647", 2**31 - 1),
    ("ALU.IADD.S32 R0, R1, -1", -1), ("ALU.IMUL.HI.U32 R0, R1, 4294967295", 2**32 - 1),
    ("ALU.LOP.AND.B32 R0, R1, -1", 2**32 - 1), ("ALU.LOP.AND.B32 R0, R1, 0x80000000", 2**31),
    ("ALU.IADD.S64 R0, R2, -7", -7), ("SHFL.BFLY.B32 R0, R1, 31", 31), ("BAR.SYNC 15", 15),
])
def test_integer_immediates_at_their_limits(line, value):
    ins = round_trip(line)
    assert ins.operands[-1] == IntImm(value)


BITS = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
        0xFFFFFFFF, 0x00000001, 0x80000001, 0x7F7FFFFF, 0x3DCCCCCD, 0x4B800001]


@pytest.mark.parametrize("bits", BITS, ids=hex)
def test_float_immediates_are_bit_exact(bits):
    text = format_float(bits)
    assert parse_float(text) == bits
    ins = round_trip(f"ALU.FADD.F32 R0, R1, {text}")
    assert ins.operands[2] == FloatImm(bits)
    (w,) = words(f"ALU.FADD.F32 R0, R1, {text}")
    assert w >> (32 + 24) & 0xF == 7 and w >> (32 + 28) & 0xFFFFFFFF == bits


@pytest.mark.parametrize("text, bits", [("-0.0", 0x80000000), ("inf", 0x7F800000),
                                        ("-inf", 0xFF800000), ("nan", 0x7FC00000),
                                        ("0fFFC00000", 0xFFC00000), ("1", 0x3F800000),
                                        ("0.1", 0x3DCCCCCD), ("1e-45", 0x00000001)])
def test_float_spellings(text, bits):
    assert round_trip(f"ALU.FMUL.F32 R0, R1, {text}").operands[2].bits == bits
    assert np.array(bits, np.uint32).view(np.float32).tobytes() == struct.pack("<I", bits)


def test_negative_zero_and_nan_print_distinctly():
    assert format_float(0x80000000) == "-0.0"
    assert format_float(0x7FC00000) == "nan"
    assert format_float(0xFFC00000) == "0fFFC00000"
    assert format_float(0x7FC00001) == "0f7FC00001"


@pytest.mark.parametrize("line, check", [
    ("LSU.LD.GLOBAL.B32 R0, [R2+0x7fffffff]", lambda i: i.operands[1] == Mem(Reg(2), 2**31 - 1)),
    ("LSU.LD.GLOBAL.B32 R0, [R2-0x80000000]", lambda i: i.operands[1] == Mem(Reg(2), -2**31)),
    ("LSU.LD.SHARED.B32 R0, [0x2fffc]", lambda i: i.operands[1] == Mem(Reg(255), 0x2FFFC)),
    ("LSU.LD.SHARED.B32 R[0:255], [R[0:255]-4]", lambda i: i.count == 255),
    ("ALU.MOV.B64 R[0:254], R[0:254]", lambda i: i.count == 127),
    ("ALU.MOV.B64 R252, R252", lambda i: i.operands[0] == Reg(252)),
    ("LSU.LD.GLOBAL.B128 R248, [R252]", lambda i: i.operands[0] == Reg(248)),
    ("@!P254 ALU.PLOP.XOR PT, !PT, P254", lambda i: i.guard == Pred(254, True)),
    ("@!P[200:255] ALU.PLOP.OR P[0:55], P[55:110], !P[110:165]",
     lambda i: i.guard == PredRun(200, 255, True) and i.count == 55),
    ("@PT NOP", lambda i: i.guard == Pred(255)),
    ("ALU.MOV.B32 R0, c[0x8]", lambda i: i.operands[1].offset == 8),
    ("ALU.MOV.B64 R0, c[0x0]", lambda i: i.operands[1].offset == 0),
    ("WMMA.M16N8K16.F32.BF16.BF16 R[0:128], R128, R[132:196], R[0:128]",
     lambda i: i.count == 32 and i.operands[1] == Reg(128)),
])
def test_field_boundaries_round_trip(line, check):
    assert check(round_trip(line))


def test_a_guard_is_not_the_same_as_no_guard():
    a, b = words("@PT NOP\nNOP")
    assert a != b and field(a, "guarded") == 1 and field(b, "guarded") == 0


def test_run_count_and_guard_fields():
    (w,) = words("@!P[8:12] ALU.FADD.F32 R[8:12], R[12:16], R16")
    assert (field(w, "guarded"), field(w, "guard_neg"), field(w, "guard_run"),
            field(w, "guard_pred"), field(w, "count")) == (1, 1, 1, 8, 4)


def test_every_tag_is_used_by_some_row():
    used = {cls for r in INSTRS for s in r.operands for cls in s.accepts}
    assert {t[1] for t in OPERAND_TAGS} <= used


def test_words_decode_one_by_one():
    p = assemble(HEAD + "ALU.FFMA.F32 R[0:8], R[8:16], -2.5, c[0x8]\n")
    w = encode_instruction(p.instructions[0])
    assert decode_instruction(w) == p.instructions[0].__class__(p.instructions[0].op,
                                                                p.instructions[0].operands)
    assert decode_instruction(w).operands[0] == Run(0, 8)


# ---------------------------------------------------------------- decode errors
GOOD = encode(assemble(HEAD + "        ALU.FADD.F32 R0, R1, R2  // x\n        EXIT\n"))


def patched_word(pc: int, fn) -> bytes:
    off = HEADER.size + 16 * pc
    w = fn(int.from_bytes(GOOD[off:off + 16], "little"))
    return GOOD[:off] + w.to_bytes(16, "little") + GOOD[off + 16:]


@pytest.mark.parametrize("data, msg", [
    (b"MUSX" + GOOD[4:], "not a MUSA binary"),
    (GOOD[:10], "shorter than its header"),
    (GOOD[:8] + b"\0\0\0\0" + GOOD[12:], "made from another instruction table"),
    (GOOD[:-3], "truncated binary"),
    (patched_word(0, lambda w: w | 0xFFF), "opcode 4095 is not in the table"),
    (patched_word(0, lambda w: w | 1 << 31), "reserved bit set"),
    (patched_word(0, lambda w: (w & ~(0xF << 32)) | 7 << 32), "bad operand tag 7 for d"),
    (patched_word(0, lambda w: w | 1 << 127), "stray bits after the operands"),
    (patched_word(1, lambda w: w | 1 << 40), "stray bits after the operands of EXIT"),
])
def test_decode_rejects(data, msg):
    with pytest.raises(DecodeError, match=msg):
        decode(data)


def test_decode_rejects_an_invalid_instruction():
    bad = patched_word(0, lambda w: w | 1 << 36)    # R0 -> R1 as a destination is fine...
    decode(bad)
    bad = patched_word(0, lambda w: (w & ~(0xFF << 36)) | 254 << 36)   # ...R254 > .regs
    with pytest.raises(DecodeError, match="R254 is beyond the 3 registers"):
        decode(bad)


def test_the_last_constant_bank_word():
    p = assemble(".kernel k\n.param Z u64 c[0xfff8]\nALU.MOV.B64 R0, c[0xfff8]\n"
                 "ALU.MOV.B32 R2, c[0xfffc]\n")
    assert decode(encode(p)) == p
    assert [i.operands[1].offset for i in p.instructions] == [0xFFF8, 0xFFFC]


def test_programs_built_in_python_keep_unsigned_bits():
    from mutile.backends.pinghu import Instruction, Program
    row = BY_MNEMONIC["ALU.LOP.AND.B32"]
    p = Program("k", regs=2, instructions=[Instruction(row, (Reg(0), Reg(1), IntImm(-16)))])
    with pytest.raises(ValueError, match=r"pc 0 \(ALU.LOP.AND.B32\): a b32 immediate is kept "
                                         r"as its unsigned bits: IntImm\(0xfffffff0\)"):
        encode(p)
    p.instructions[0].operands = (Reg(0), Reg(1), IntImm(0xFFFFFFF0))
    assert decode(encode(p)) == p
