"""Malformed assembly: each error names the line and column, shows the line and a caret."""
import pytest

from mutile.backends.pinghu import AssemblyError, assemble
from mutile.errors import CompilationError

HEAD = ".kernel k\n.param X ptr c[0x0]\n.param n s32 c[0x8]\n"   # 3 lines


def error(text: str, head: str = HEAD) -> AssemblyError:
    with pytest.raises(AssemblyError) as e:
        assemble(head + text)
    return e.value


def at(text: str, col_of, msg: str, line: int = 4, head: str = HEAD, nth: int = 0):
    """Assembling ``text`` fails on ``line`` at the column where ``col_of`` starts (its
    ``nth`` occurrence on that line; an int is the 0-based column itself) with ``msg``,
    showing the line and a caret."""
    e = error(text, head)
    src = (head + text).splitlines()[line - 1]
    col = col_of if isinstance(col_of, int) else -1
    for _ in range(0 if isinstance(col_of, int) else nth + 1):
        col = src.index(col_of, col + 1)
    assert str(e) == f"<asm>:{line}:{col + 1}: error: {msg}\n    {src}\n    {' ' * col}^"
    assert (e.line, e.col, e.msg) == (line, col + 1, msg)
    return e


def test_is_a_compilation_error():
    assert issubclass(AssemblyError, CompilationError)


def test_unknown_mnemonic():
    at("ALU.FADDD.F32 R1, R2, R3", "ALU", "unknown mnemonic 'ALU.FADDD.F32' "
       "(did you mean ALU.FADD.F32?)")
    at("        alu.fadd.f32 R1, R2, R3", "alu", "unknown mnemonic 'alu.fadd.f32' "
       "(did you mean ALU.FADD.F32?)")
    at("FROB R1", "FROB", "unknown mnemonic 'FROB'")


def test_wrong_operand_count():
    at("ALU.FADD.F32 R1, R2", "ALU", "ALU.FADD.F32 takes 3 operands (d, a, b), got 2")
    at("EXIT R1", "EXIT", "EXIT takes 0 operands (none), got 1")
    at("S2R R1", "S2R", "S2R takes 2 operands (d, s), got 1")


def test_wrong_operand_kind():
    at("ALU.FADD.F32 R1, R2, P0", "P0", "operand b of ALU.FADD.F32 must be a register, a run, "
       "an f32 immediate or a parameter c[...], not P0")
    at("ALU.IADD.S32 R1, R2, 1.5", "1.5", "operand b of ALU.IADD.S32 must be a register, a run, "
       "an s32 immediate or a parameter c[...], not immediate 1.5")
    at("BRA R1", "R1", "operand t of BRA must be a label, not R1")
    at("S2R R1, R2", "R2", "operand s of S2R must be a special register, not R2")
    at("LSU.LD.GLOBAL.B32 R1, R2", "R2", "operand m of LSU.LD.GLOBAL.B32 must be a memory "
       "address [R+off], not R2")
    at("ALU.ISETP.LT.S32 R1, R2, R3", "R1", "operand p of ALU.ISETP.LT.S32 must be a predicate "
       "or a predicate run, not R1")
    at("ALU.ISETP.LT.S32 !P0, R2, R3", "!P0", "destination predicate p cannot be negated")
    at("S2R R1, SR_FOO.X", "SR_FOO", "unknown special register 'SR_FOO.X'")


def test_register_pairs_and_quads_are_aligned():
    at("ALU.IADD.S64 R1, R2, R4", "R1", "R1 is not aligned: a 64-bit operand starts at a "
       "register number divisible by 2")
    at("LSU.LD.GLOBAL.B128 R6, [R4]", "R6", "R6 is not aligned: a 128-bit operand starts at a "
       "register number divisible by 4")
    at("LSU.LD.GLOBAL.B32 R6, [R3]", "[", "R3 is not aligned: a 64-bit operand starts at a "
       "register number divisible by 2")
    at("ALU.MOV.B64 R254, R0", "R254", "R254 runs past R254")
    at("ALU.FADD.F32 R1, R2, R300", "R300", "register R300 does not exist (R0 .. R254, RZ)")


def test_the_zero_register_and_true_predicate_have_no_number():
    """255 encodes RZ and PT, but the text names them RZ and PT only."""
    at("ALU.FADD.F32 R255, R1, R2", "R255", "register R255 does not exist (R0 .. R254, RZ)")
    at("ALU.FADD.F32 R1, R255, R2", "R255", "register R255 does not exist (R0 .. R254, RZ)")
    at("LSU.LD.GLOBAL.B32 R1, [R255]", "R255", "register R255 does not exist (R0 .. R254, RZ)")
    at("@P255 EXIT", "P255", "predicate P255 does not exist (P0 .. P254, PT)")
    at("ALU.ISETP.LT.S32 P255, R1, R2", "P255", "predicate P255 does not exist (P0 .. P254, "
       "PT)")
    assemble(HEAD + "ALU.FADD.F32 R254, RZ, R2\n@PT EXIT\n")


def test_listing_bytes_that_are_not_utf8():
    from mutile.backends.pinghu.isa.asm import listing_text
    text = listing_text(HEAD.encode() + b"EXIT    // caf\xe9\r\n")
    assert text == HEAD + "EXIT    // caf\ufffd\n"
    with pytest.raises(AssemblyError) as e:
        listing_text(HEAD.encode() + b"EX\xffIT  // fine\n", "k.musa")
    assert str(e.value) == ("k.musa:4:3: error: byte 0xff is not UTF-8 text (only comments may "
                            "hold such bytes)\n    EX\ufffdIT  // fine\n      ^")


def test_bad_register_runs():
    at("ALU.FADD.F32 R[8:40], R[40:8], R2", "R[40:8]",
       "bad run R[40:8]: end must be greater than start")
    at("ALU.FADD.F32 R[8:40], R[40:40], R2", "R[40:40]",
       "bad run R[40:40]: end must be greater than start")
    at("ALU.FADD.F32 R[200:256], R0, R2", "R[200",
       "bad run R[200:256]: R254 is the last register")
    at("ALU.MOV.B64 R[8:13], R[0:5]", "R[8", "bad run R[8:13]: a run of 64-bit elements starts "
       "and ends at multiples of 2")
    at("ALU.FADD.F32 R[8:40], R[40:72], R[72:80]", "R[72", "run of 8 elements, but R[8:40] "
       "has 32")
    at("ALU.FADD.F32 R1, R[40:72], R2", "R1", "destination d must be a run of 32 elements when "
       "the instruction has runs")
    at("@P[0:4] ALU.FADD.F32 R[8:16], R[16:24], R2", "@", "guard run of 4 elements, but "
       "R[8:16] has 8")
    at("@P[0:4] BRA L\nL: EXIT", "@", "BRA takes no runs")
    at("S2R R[0:4], SR_TID.X", "R[0", "S2R takes no runs")
    at("ALU.PLOP.AND P[4:2], P0, P1", "P[4:2]", "bad run P[4:2]: end must be greater than start")


def test_labels():
    at("BRA L9", "L9", "undefined label 'L9'")
    at("L1:\nNOP\n  L1:  // again\nNOP", "L1", "duplicate label 'L1' (first defined on line 4)",
       line=6)
    at("R1: NOP", "R1", "label name 'R1' would read as an operand")
    at("SSY L1\n@P0 SSY L1\nL1: NOP", "@", "SSY cannot be guarded", line=5)


def test_immediates_out_of_range():
    at("ALU.IADD.S32 R1, R2, 0x80000000", "0x8", "immediate 2147483648 out of range for s32 "
       "(-2147483648 .. 2147483647)")
    at("ALU.IADD.S32 R1, R2, -2147483649", "-2", "immediate -2147483649 out of range for s32 "
       "(-2147483648 .. 2147483647)")
    at("ALU.IMUL.HI.U32 R1, R2, -1", "-1", "immediate -1 out of range for u32 (0 .. 4294967295)")
    at("ALU.LOP.OR.B32 R1, R2, 0x100000000", "0x1", "immediate 4294967296 out of range for b32 "
       "(-2147483648 .. 4294967295)")
    at("ALU.FADD.F32 R1, R2, 1e39", "1e39", "immediate 1e39 out of range for f32 (largest "
       "3.4028235e+38)")
    at("ALU.FADD.F32 R1, R2, 16777217", "1677", "integer 16777217 is not exactly an f32; write "
       "it as a float")
    at("SHFL.BFLY.B32 R1, R2, 32", "32", "immediate 32 out of range for lane (0 .. 31)", nth=1)
    at("BAR.SYNC 16", "16", "immediate 16 out of range for bar (0 .. 15)")
    at("LSU.LD.SHARED.B32 R1, [R2+0x80000000]", "[", "address offset 2147483648 out of range "
       "(signed 32-bit)")
    at("ALU.MOV.B64 R0, c[0x4]", "c[", "c[0x4] must be a multiple of 8 below 0x10000")


def test_header_limits():
    at("ALU.FADD.F32 R1, R2, c[0xc]", "c[", "c[0xc] is beyond the parameters (0xc bytes)")
    at(".regs 4\nALU.FADD.F32 R1, R2, R4", "R4", "R4 is beyond the 4 registers of .regs 4",
       line=5)
    at(".regs 4\nALU.IADD.S64 R2, R2, R2\nALU.MOV.B64 R[0:4], R[2:6]", "R[2", "R5 is beyond the "
       "4 registers of .regs 4", line=6)


def test_directives():
    head = ".kernel k\n"
    at(".threads 100", "100", ".threads is a multiple of 32 from 32 to 1024 (got 100)", 2, head)
    at(".threads 2048", "2048", ".threads is a multiple of 32 from 32 to 1024 (got 2048)", 2,
       head)
    at(".shared 300000", "300000", ".shared is at most 196608 bytes (192 KiB) per block "
       "(got 300000)", 2, head)
    at(".regs 256", "256", ".regs is at most 255 registers per thread (got 256)", 2, head)
    at(".regs x", ".regs", "expected '.regs N'", 2, head)
    at(".param X ptr c[0x4]", "X", "parameter X at c[0x4] is not 8-byte aligned", 2, head)
    at(".param X ptr c[0x0]\n.param Y f32 c[0x4]", "Y", "parameter Y overlaps X", 3, head)
    at(".param X ptr c[0x0]\n.param X f32 c[0x8]", "X", "parameter X declared twice", 3, head)
    at(".param X vec4 c[0x0]", "vec4", "unknown parameter type 'vec4' (ptr, s8, u8, s16, u16, "
       "s32, u32, s64, u64, f16, bf16, f32, f64)", 2, head)
    at(".foo 1", ".foo", "unknown directive '.foo' (.kernel, .param, .threads, .regs, .shared, "
       ".local)", 2, head)
    at(".regs 8\n.regs 8", ".regs", ".regs given twice", 3, head)
    at("NOP\n.regs 4", ".regs", "directive .regs after the first label or instruction", 3, head)
    at(".kernel j", ".kernel", ".kernel must be the first directive", 2, head)
    at(".regs 4", ".regs", ".regs before .kernel", 1, "")
    at("NOP", "NOP", "missing .kernel directive before the first instruction", 1, "")
    e = error("// nothing\n", "")
    assert str(e) == "<asm>:1:1: error: missing .kernel directive\n    // nothing\n    ^"


def test_syntax_errors():
    at("ALU.FADD.F32 R1 R2, R3", "R2", "syntax error: unexpected 'R2'")
    at("ALU.FADD.F32 R1, R2, R3 junk", "junk", "syntax error: unexpected 'junk'")
    at("ALU.FADD.F32 R1, R2,", 20, "syntax error: unexpected end of line")
    at("ALU.FADD.F32 R1, R2, #3", "#", "syntax error: unexpected character '#'")


def test_the_source_name_is_used():
    with pytest.raises(AssemblyError, match=r"^kernel\.musa:2:1: error: unknown mnemonic"):
        assemble(".kernel k\nFROB\n", source="kernel.musa")
