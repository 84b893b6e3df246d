"""Rematerialized constants (backends/pinghu/codegen/remat.py): a kernel whose scalar
parameters are read only after a loop keeps them live across it, beside the tiles; where
that leaves no register, their constant-bank moves are emitted again at the reads and
nothing spills. Answers against numpy's float64 ones, outputs poisoned first."""
from __future__ import annotations

import numpy as np

import mutile
import mutile.language as ml
from mutile.backends.pinghu.codegen.remat import constants, rematerialize
from mutile.backends.pinghu.codegen.values import VR, VIns, VReg
from mutile.backends.pinghu.isa import BY_MNEMONIC
from mutile.backends.pinghu.isa.operands import IntImm

from ....conftest import poison

BLOCK = 2048            # 16 f32 a thread on 4 warps: 16 registers, 32 for its addresses
BUDGET = 72             # the load's and store's peak fits; the parameters on top do not
                        # (at 80 they do, since tiles may be placed from the top down)
CS = (1.5, -0.5, 0.75, 0.25, -1.25, 2.0, 0.5, -0.125)


@mutile.jit
def after_loop(X, Out, n, c0, c1, c2, c3, c4, c5, c6, c7, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    acc = ml.load(X + offs)
    for j in range(n):
        acc = ml.where(acc > 1.0, 0.25, acc)
        acc = ml.where(acc < -1.0, -0.75, acc) * 1.5
    acc = ((acc * c0 + c1) * c2 + c3) * c4 + c5
    ml.store(Out + offs, acc * c6 + c7)


def _want(x, n):
    acc = x.astype(np.float64)
    for _ in range(n):
        acc = np.where(acc > 1.0, 0.25, acc)
        acc = np.where(acc < -1.0, -0.75, acc) * 1.5
    c = CS
    return (((acc * c[0] + c[1]) * c[2] + c[3]) * c[4] + c[5]) * c[6] + c[7]


def test_parameters_read_after_a_loop_do_not_spill(rng):
    """Eight f32 parameters live from the kernel's start to its epilogue need eight
    registers the budget does not have (before rematerialization: 416 local bytes)."""
    x = (2 * rng.standard_normal(BLOCK)).astype(np.float32)
    out = poison(BLOCK, np.float32)
    after_loop[(1,)](x, out, 3, *CS, BLOCK=BLOCK, backend="pinghu", maxnreg=BUDGET)
    np.testing.assert_allclose(out, _want(x, 3), rtol=1e-5, atol=1e-5)
    k = after_loop.warmup(x, out, 3, *CS, BLOCK=BLOCK, backend="pinghu", maxnreg=BUDGET,
                          grid=(1,))
    assert k.metadata["local_bytes"] == 0
    assert k.metadata["registers_per_thread"] <= BUDGET
    epilogue = k.asm["musa"].split("L_end")[-1]
    assert all(f"c[{hex(0x14 + 4 * i)}]" in epilogue for i in range(8))


def _ins(mnemonic, *ops):
    return VIns(BY_MNEMONIC[mnemonic], ops)


def test_a_copy_per_straight_stretch():
    """A constant block's definition is dropped and emitted again before its reads: one
    copy for reads close together, a new one after a label; a block written twice or
    computed from a register is no constant."""
    c, t, u = VReg(1, 1), VReg(2, 1), VReg(3, 1)
    code = [_ins("ALU.MOV.IMM", VR(c, 0, 1), IntImm(7)),
            _ins("ALU.MOV.IMM", VR(t, 0, 1), IntImm(1)),
            _ins("ALU.IADD.S32", VR(t, 0, 1), VR(t, 0, 1), VR(c, 0, 1)),
            _ins("ALU.IADD.S32", VR(u, 0, 1), VR(t, 0, 1), VR(c, 0, 1)),
            VIns(None, label="L"),
            _ins("ALU.IADD.S32", VR(u, 0, 1), VR(u, 0, 1), VR(c, 0, 1))]
    blocks = constants(code)
    assert list(blocks) == [c]
    out = rematerialize(code, blocks)
    names = [i.row.mnemonic if i.row else i.label for i in out]
    assert names == ["ALU.MOV.IMM", "ALU.MOV.IMM", "ALU.IADD.S32", "ALU.IADD.S32", "L",
                     "ALU.MOV.IMM", "ALU.IADD.S32"]
    first, second = out[1].operands[0].v, out[5].operands[0].v
    assert first is not c and second is not c and first is not second
    assert out[2].operands[2].v is first and out[3].operands[2].v is first
    assert out[6].operands[2].v is second
