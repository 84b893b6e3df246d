"""Interpreter speed (not a test; run ``python tests/backends/pinghu/machine/bench_interp.py``).

``converged``: 64 blocks x 128 threads, ~250 instructions on 32-element register runs
(FFMA, FMUL, FADD, FSETP/SEL, MOV, loads and stores): every warp at the same pc, the fast
path. ``divergent``: the same blocks run a block-uniform loop whose trip count depends on
the block (4 .. 19 iterations of 6 run instructions), so warps sit at different pcs and
every step goes through the general scheduler.
"""
import time

import numpy as np

from mutile.backends.pinghu import assemble, decode, encode
from mutile.backends.pinghu.machine.scheduler import execute

HEAD = """.kernel bench
.param X ptr c[0x0]
.param Y ptr c[0x8]
.threads 128
.regs 240

        S2R R0, SR_TID.X
        S2R R1, SR_CTAID.X
        ALU.IMAD.S32 R0, R1, 128, R0
        ALU.IOTA.S32 R[160:192], R0, 8192
        ALU.IMAD.WIDE.S32 R[192:224], R[160:176], 4, c[0x0]
        LSU.LD.GLOBAL.B32 R[32:48], [R[192:224]]
        ALU.IMAD.WIDE.S32 R[192:224], R[176:192], 4, c[0x0]
        LSU.LD.GLOBAL.B32 R[48:64], [R[192:224]]
        ALU.MOV.B32 R[64:96], R[32:64]
        ALU.MOV.B32 R[96:128], R[32:64]
"""
BODY = ["ALU.FFMA.F32 R[32:64], R[32:64], R[64:96], R[96:128]",
        "ALU.FMUL.F32 R[64:96], R[64:96], 0.999",
        "ALU.FADD.F32 R[96:128], R[96:128], R[32:64]",
        "ALU.FSETP.GT.F32 P[0:32], R[32:64], 1.0",
        "ALU.SEL.B32 R[32:64], R[64:96], R[32:64], P[0:32]",
        "ALU.MOV.B32 R[128:160], R[32:64]"]
TAIL = """        ALU.IMAD.WIDE.S32 R[192:224], R[160:176], 4, c[0x8]
        LSU.ST.GLOBAL.B32 [R[192:224]], R[32:48]
        ALU.IMAD.WIDE.S32 R[192:224], R[176:192], 4, c[0x8]
        LSU.ST.GLOBAL.B32 [R[192:224]], R[48:64]
        EXIT
"""
LOOP = """        ALU.LOP.AND.B32 R2, R1, 15
        ALU.IADD.S32 R2, R2, 4
        ALU.MOV.IMM R3, 0
L_loop:
""" + "".join(f"        {b}\n" for b in BODY) + """        ALU.IADD.S32 R3, R3, 1
        ALU.ISETP.LT.S32 P40, R3, R2
        @P40 BRA L_loop
"""


def measure(text: str, what: str, repeat: int = 3) -> None:
    p = decode(encode(assemble(text)))
    x = np.random.rand(32 * 8192).astype(np.float32)
    y = np.full_like(x, np.nan)
    execute(p, [x, y], (64, 1, 1))
    t = time.perf_counter()
    for _ in range(repeat):
        st = execute(p, [x, y], (64, 1, 1))
    dt = (time.perf_counter() - t) / repeat
    print(f"{what}: {st.steps} dispatches, {dt * 1e3:.0f} ms/launch: {st.steps / dt:,.0f} "
          f"instructions/s, {st.warp_instructions / dt / 1e6:.2f}M warp-instructions/s, "
          f"{st.warp_instructions * 32 / dt / 1e6:.0f}M thread-instructions/s")


if __name__ == "__main__":
    measure(HEAD + "".join(f"        {b}\n" for b in BODY * 40) + TAIL, "converged")
    measure(HEAD + LOOP + TAIL, "divergent")
