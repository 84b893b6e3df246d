"""The instruction table is coherent: one row per mnemonic, every row documented and
dispatchable, units and latency classes named, families generated as designed."""
import pytest

from mutile.backends.pinghu.isa import BY_MNEMONIC, INSTRS, LATENCY_CLASSES, UNITS, table_hash
from mutile.backends.pinghu.isa.operands import FloatImm, IntImm, Mem, PredRun, Run, Target
from mutile.backends.pinghu.isa.wmma import FRAGMENTS, coords


def test_rows_are_unique_and_indexed():
    assert len({r.mnemonic for r in INSTRS}) == len(INSTRS)
    assert [r.opcode for r in INSTRS] == list(range(len(INSTRS)))
    assert all(BY_MNEMONIC[r.mnemonic] is r for r in INSTRS)
    assert isinstance(table_hash(), int)


def test_every_row_has_unit_latency_and_semantics():
    for r in INSTRS:
        assert r.unit in UNITS and r.latency in LATENCY_CLASSES and r.doc.strip()
        assert r.mnemonic.split(".")[0] == r.unit or r.unit == "BRA"
        assert r.family and r.mnemonic.startswith(r.family.split(".")[0])
    assert {r.unit for r in INSTRS} == set(UNITS)
    assert {r.latency for r in INSTRS} == set(LATENCY_CLASSES)


@pytest.mark.parametrize("mnemonic", [
    "ALU.FADD.F32", "ALU.FMUL.F32", "ALU.FFMA.F32", "ALU.FMNMX.MIN.F32", "ALU.FMNMX.MAX.F32",
    "ALU.IADD.S32", "ALU.IMAD.S32", "ALU.ISETP.LT.S32", "ALU.LOP.AND.B32", "ALU.SHL.B32",
    "ALU.SHR.S32", "ALU.SHR.U32", "ALU.SEL.B32", "ALU.MOV.B32", "ALU.MOV.IMM", "SFU.EX2.F32",
    "SFU.LG2.F32", "SFU.RSQ.F32", "SFU.RCP.F32", "SFU.SIN.F32", "SFU.COS.F32", "CVT.F32.BF16",
    "CVT.F8E4M3.F32", "CVT.F8E5M2.F16", "CVT.S32.F64", "CVT.U32.F32", "CVT.TF32.F32",
    "LSU.LD.GLOBAL.B32", "LSU.LD.GLOBAL.B64", "LSU.LD.GLOBAL.B128", "LSU.ST.GLOBAL.B128",
    "LSU.LD.SHARED.B32", "LSU.ST.SHARED.B32", "LSU.LD.LOCAL.B32", "SHFL.BFLY.B32",
    "SHFL.IDX.B32", "BAR.SYNC", "WMMA.M16N8K16.F32.F16.F16", "WMMA.M16N8K16.F32.BF16.BF16",
    "WMMA.M16N8K8.F32.TF32.TF32", "S2R", "BRA", "SSY", "SYNC", "EXIT", "NOP",
    "ALU.IADD.S64", "ALU.IMAD.WIDE.S32", "ALU.FADD.F64"])
def test_the_isa_has(mnemonic):
    assert mnemonic in BY_MNEMONIC


def test_cvt_covers_every_pair_of_types():
    types = ["F64", "F32", "F16", "BF16", "F8E4M3", "F8E5M2", "S64", "U64", "S32", "U32",
             "S16", "U16", "S8", "U8"]
    cvt = {(r.attrs["dst"], r.attrs["src"]) for r in INSTRS if r.family == "CVT"}
    assert {(d, s) for d in types for s in types if d != s} <= cvt


def test_widths_follow_the_types():
    assert [s.width for s in BY_MNEMONIC["CVT.F64.F32"].operands] == [2, 1]
    assert [s.width for s in BY_MNEMONIC["WMMA.M16N8K16.F32.F16.F16"].operands] == [4, 4, 2, 4]
    assert BY_MNEMONIC["LSU.LD.GLOBAL.B128"].operands[1].base_width == 2
    assert BY_MNEMONIC["LSU.LD.SHARED.B128"].operands[1].base_width == 1


def test_control_rows_take_no_runs_and_ssy_no_guard():
    for m in ("BRA", "SSY", "SYNC", "EXIT", "NOP", "BAR.SYNC", "S2R"):
        assert not BY_MNEMONIC[m].runs
    assert not BY_MNEMONIC["SSY"].guardable
    for r in INSTRS:
        if r.runs:
            assert all(Target not in s.accepts for s in r.operands)


def test_immediate_slots_name_their_kind():
    for r in INSTRS:
        for s in r.operands:
            assert (IntImm in s.accepts) == (s.int_kind is not None)
            assert (FloatImm in s.accepts) == (s.float_kind is not None)
            assert (Run in s.accepts) or (PredRun in s.accepts) or not s.dst
            assert (Mem in s.accepts) == (s.base_width > 0)


def test_families_share_dispatch_keys():
    isetp = [r for r in INSTRS if r.family == "ALU.ISETP"]
    assert len(isetp) == 24 and {r.attrs["cmp"] for r in isetp} == {"EQ", "NE", "LT", "LE",
                                                                     "GT", "GE"}
    assert BY_MNEMONIC["LSU.ST.SHARED.B64"].attrs == {"space": "SHARED", "type": "B64"}
    assert BY_MNEMONIC["WMMA.M16N8K8.F32.TF32.TF32"].attrs["k"] == 8


@pytest.mark.parametrize("row", [r for r in INSTRS if r.family == "WMMA"],
                         ids=lambda r: r.mnemonic)
def test_wmma_fragments_cover_each_matrix_once(row):
    shape, m, n, k = (row.attrs[x] for x in ("layout", "m", "n", "k"))
    for op, (rows, cols) in {"A": (m, k), "B": (k, n), "C": (m, n)}.items():
        r, c = coords(shape, op)
        assert r.shape == (32, len(FRAGMENTS[shape][op]))
        cells = sorted(zip(r.ravel().tolist(), c.ravel().tolist()))
        assert cells == [(i, j) for i in range(rows) for j in range(cols)]
