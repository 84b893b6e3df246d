"""Faults reported like a GPU core dump: kernel, block, warp, lane, pc, the ISA line, the
Python line (from the listing's ``// file.py:LINE  source`` comments), the address and
the array it missed; deadlocks; the shared-memory sanitizer; device_print/assert."""
import re

import numpy as np
import pytest

from mutile.errors import DeviceFault, LaunchError

from .interp_kit import header, run

SRC = "// scale.py:{line}  {src}"


def program(body: str, params=(("Y", "ptr"),), threads=64, shared=0, local=0) -> str:
    return header(list(params), name="scale", threads=threads, shared=shared,
                  local=local) + body


def fault(text, args, grid=(1, 1, 1), **kw) -> str:
    with pytest.raises(DeviceFault) as e:
        run(text, args, grid, **kw)
    return str(e.value)


STORE = """        // scale.py:7  ml.store(Y + offs, x)
        S2R R0, SR_TID.X
        S2R R1, SR_CTAID.X
        ALU.IMAD.S32 R0, R1, 64, R0
        ALU.IADD.S32 R0, R0, {shift}
        ALU.IMAD.WIDE.S32 R6, R0, {scale}, c[0x0]
        LSU.ST.GLOBAL.{t} [R6{off}], R4
"""


def test_off_by_one_store_names_the_array_and_the_distance():
    y = np.zeros(1024, np.float32)
    msg = fault(program(STORE.format(shift=1, scale=4, t="B32", off="")), [y], (16, 1, 1))
    assert msg.startswith("scale.py:7:1: device fault: kernel 'scale': out-of-bounds global "
                          "store of 4 bytes"), msg
    assert "4 bytes past the end of parameter 'Y' (4096 bytes, 1024 x float32)" in msg
    assert "block (15, 0, 0), warp 1, lane 31 (thread 63 of the block)" in msg
    assert re.search(r"pc 5: LSU\.ST\.GLOBAL\.B32 \[R6\], R4 +// scale\.py:7  ml\.store", msg)
    assert (y[1:] == 0).all()            # nothing was stored: the fault is checked first


def test_negative_offset_and_a_stray_address():
    y = np.zeros(256, np.int32)
    msg = fault(program(STORE.format(shift=0, scale=4, t="B32", off="-0x8")), [y])
    assert "8 bytes before the start of parameter 'Y' (1024 bytes, 256 x int32)" in msg
    assert "block (0, 0, 0), warp 0, lane 0 (thread 0 of the block)" in msg
    assert "pc 5: LSU.ST.GLOBAL.B32 [R6-0x8], R4" in msg
    msg = fault(program(STORE.format(shift=0, scale=4, t="B32", off="+0x10000000")), [y])
    assert "bytes past the end of parameter 'Y'" in msg


def test_misaligned_access():
    y = np.zeros(256, np.float64)
    msg = fault(program(STORE.format(shift=0, scale=8, t="B64", off="+0x4")), [y])
    assert "misaligned global store of 8 bytes" in msg and "not a multiple of 8" in msg
    assert "byte offset 4 of parameter 'Y'" in msg


def test_run_fault_names_the_element():
    text = program("""        S2R R0, SR_TID.X
        ALU.IOTA.S32 R[8:12], R0, 64
        ALU.IMAD.WIDE.S32 R[16:24], R[8:12], 4, c[0x0]
        LSU.LD.GLOBAL.B32 R[24:28], [R[16:24]]
""")
    msg = fault(text, [np.zeros(200, np.float32)])
    assert "out-of-bounds global load" in msg
    assert "block (0, 0, 0), warp 0, lane 8 (thread 8 of the block), element 3 of the run" in msg


def test_shared_and_local_out_of_range():
    text = program("""        // scale.py:3  buf[tid + 1] = x
        S2R R0, SR_TID.X
        ALU.SHL.B32 R1, R0, 2
        LSU.ST.SHARED.B32 [R1+0x4], R0
""", shared=256)
    msg = fault(text, [np.zeros(1, np.float32)])
    assert "out-of-bounds shared store of 4 bytes at shared address 0x100" in msg
    assert "outside the block's 256 bytes of shared memory (.shared 256)" in msg
    assert "warp 1, lane 31" in msg and msg.startswith("scale.py:3:1")
    text = program("""        ALU.MOV.IMM R1, 16
        LSU.ST.LOCAL.B64 [R1], R2
""", local=16)
    assert "outside the thread's 16 bytes of local memory" in fault(text, [np.zeros(1)])


def test_deadlock_when_a_warp_skips_a_barrier():
    text = program("""        S2R R0, SR_WARPID
        ALU.ISETP.EQ.S32 P0, R0, 1
        @P0 BRA L_skip
        // scale.py:12  ml.barrier()
        BAR.SYNC 0
L_skip:
        // scale.py:14  ml.barrier()
        BAR.SYNC 1
""")
    msg = fault(text, [np.zeros(1)], (3, 1, 1))
    assert msg.startswith("scale.py:12:1: device fault: kernel 'scale': deadlock"), msg
    assert "3 block(s) wait at barriers that can never complete" in msg
    assert "block (0, 0, 0): warp 0 waits at BAR.SYNC 0 (pc 3), warp 1 waits at BAR.SYNC 1 " \
        "(pc 4)" in msg
    assert "pc 3: BAR.SYNC 0    // scale.py:12  ml.barrier()" in msg
    assert "pc 4: BAR.SYNC 1    // scale.py:14  ml.barrier()" in msg


def test_sanitizer_reports_uninitialized_shared_reads():
    text = program("""        S2R R0, SR_TID.X
        ALU.SHL.B32 R1, R0, 2
        ALU.ISETP.NE.S32 P0, R0, 37
        @P0 LSU.ST.SHARED.B32 [R1], R0
        BAR.SYNC 0
        // scale.py:9  y = buf[tid]
        LSU.LD.SHARED.B32 R4, [R1]
""", shared=256)
    run(text, [np.zeros(1)])                      # without the sanitizer: no report
    msg = fault(text, [np.zeros(1)], sanitize=True)
    assert "uninitialized shared memory read: 4-byte shared load at shared address 0x94" in msg
    assert "warp 1, lane 5 (thread 37 of the block)" in msg and "scale.py:9" in msg


def test_sanitizer_reports_races_and_mismatched_barriers():
    race = program("""        S2R R0, SR_TID.X
        ALU.SHL.B32 R1, R0, 2
        LSU.ST.SHARED.B32 [R1], R0
        ALU.IADD.S32 R2, R1, 128
        ALU.LOP.AND.B32 R2, R2, 255
        LSU.LD.SHARED.B32 R4, [R2]
""", shared=256)
    run(race, [np.zeros(1)])
    msg = fault(race, [np.zeros(1)], sanitize=True)
    assert "shared memory race: this warp reads 4 bytes at shared address" in msg
    assert "with no BAR.SYNC between" in msg
    mismatched = program("""        S2R R0, SR_WARPID
        ALU.ISETP.EQ.S32 P0, R0, 1
        @P0 BRA L_other
        BAR.SYNC 0
        EXIT
L_other:
        BAR.SYNC 0
""")
    run(mismatched, [np.zeros(1)])              # hardware lets them meet (same id)
    msg = fault(mismatched, [np.zeros(1)], sanitize=True)
    assert "met at one barrier from different BAR.SYNC instructions" in msg
    assert "warp 0 at pc 3, warp 1 at pc 5" in msg


def test_device_assert_and_print(capfd):
    text = program("""        S2R R0, SR_TID.X
        ALU.IADD.S32 R1, R0, 0
        ALU.I2F_PLACEHOLDER
        DBG.PRINT.F32 0, R2, R0
        DBG.PRINT.S32 1, R0, RZ
        ALU.ISETP.LT.S32 P0, R0, 60
        // scale.py:20  ml.device_assert(x < 60, "x must be small")
        DBG.ASSERT 0, P0
""".replace("        ALU.I2F_PLACEHOLDER\n", "        CVT.F32.S32 R2, R0\n"), threads=64)
    debug = {"prints": [{"label": "x: ", "shape": [64], "hex": False, "bits": 0},
                        {"label": "n=", "shape": [], "hex": False, "bits": 0}],
             "asserts": ["device assertion failed: x must be small"]}
    with pytest.raises(DeviceFault) as e:
        run(text, [np.zeros(1)], (2, 1, 1), debug=debug)
    msg = str(e.value)
    assert "device assertion failed: x must be small" in msg and "lane 28" in msg
    out = capfd.readouterr().out.splitlines()
    assert "pid (0, 0, 0) idx (5) x: 5.000000" in out and "pid (1, 0, 0) n=63" in out
    assert len(out) == 2 * 64 * 2
    assert out.index("pid (0, 0, 0) n=63") < out.index("pid (1, 0, 0) idx (0) x: 0.000000")


def test_launch_errors():
    with pytest.raises(LaunchError, match="takes 1 arguments"):
        run(program("        EXIT\n"), [])
    with pytest.raises(LaunchError, match="does not fit s32"):
        run(program("        EXIT\n", params=[("n", "s32")]), [2**40])


PRINTS = {"S32": ("-5", -5), "U32": ("4294967291", -5), "S64": ("-5", -5),
          "U64": ("18446744073709551611", -5), "F32": ("-5.000000", -5),
          "F64": ("-5.000000", -5), "B32": ("0xfffffffb", -5), "B64": ("0xfffffffffffffffb", -5)}
COVERS = {f"DBG.PRINT.{t}" for t in PRINTS} | {"DBG.ASSERT"}


@pytest.mark.parametrize("t", list(PRINTS))
def test_device_print_of_every_type(t, capfd):
    """Each DBG.PRINT type formats like the llvm backend (decimal, %f, hex)."""
    make = {"F32": "CVT.F32.S32 R4, R0", "F64": "CVT.F64.S32 R4, R0",
            "S64": "CVT.S64.S32 R4, R0", "U64": "CVT.S64.S32 R4, R0",
            "B64": "CVT.S64.S32 R4, R0"}.get(t, "ALU.MOV.B32 R4, R0")
    text = program(f"""        ALU.MOV.IMM R0, -5
        {make}
        ALU.MOV.IMM R1, 2
        DBG.PRINT.{t} 0, R4, R1
""", threads=32)
    run(text, [np.zeros(1)], debug={"prints": [{"label": "v ", "shape": [4], "hex": False,
                                                "bits": 0}]})
    out = capfd.readouterr().out.splitlines()
    assert out[0] == f"pid (0, 0, 0) idx (2) v {PRINTS[t][0]}" and len(out) == 32
