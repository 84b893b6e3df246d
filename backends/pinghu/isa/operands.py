"""Operands of the virtual MUSA ISA: the values an instruction names, the immediate kinds,
the special registers and the operand *specs* that instruction rows are built from.

A value class (``Reg``, ``Run``, ``Pred`` ...) is what an assembled instruction holds; an
:class:`OperandSpec` is one slot of a row (which value classes it accepts, how many
registers one element occupies, which immediates fit). Both the assembler's checks and
the encoder read these definitions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mutile.ir.ops_pinghu import BARRIER_IDS, USABLE_BARRIERS

RZ = 255          # register index that reads 0; writes to it are dropped
PT = 255          # predicate index that reads true; writes to it are dropped
MAX_REG = 254     # R0 .. R254 are real registers
MAX_PRED = 254    # P0 .. P254 are real predicates

# ---------------------------------------------------------------- special registers
SPECIAL_REGS: dict[str, str] = {
    "SR_TID.X": "thread index in the block, 0 .. SR_NTID.X-1",
    "SR_LANEID": "lane index in the warp, 0 .. 31",
    "SR_WARPID": "warp index in the block (SR_TID.X / 32)",
    "SR_SQUADID": "WarpSquad index in the block (SR_WARPID / 4)",
    "SR_CTAID.X": "block index in the grid along x",
    "SR_CTAID.Y": "block index in the grid along y",
    "SR_CTAID.Z": "block index in the grid along z",
    "SR_NCTAID.X": "grid size in blocks along x",
    "SR_NCTAID.Y": "grid size in blocks along y",
    "SR_NCTAID.Z": "grid size in blocks along z",
    "SR_NTID.X": "threads per block (the .threads directive)",
}
SPECIAL_REG_IDS = {name: i for i, name in enumerate(SPECIAL_REGS)}
SPECIAL_REG_NAMES = list(SPECIAL_REGS)


# ---------------------------------------------------------------- operand values
@dataclass(frozen=True)
class Reg:
    """A register ``R<n>`` (``RZ`` for 255). In a 64- or 128-bit slot it names the aligned
    pair/quad starting at ``n``."""
    n: int


@dataclass(frozen=True)
class Run:
    """A register run ``R[start:end]`` (end exclusive): the instruction applies to each
    element of the run; an element is as many registers as the slot's width."""
    start: int
    end: int


@dataclass(frozen=True)
class Pred:
    """A predicate ``P<n>`` (``PT`` for 255), negated ``!P<n>`` where a source allows it."""
    n: int
    neg: bool = False


@dataclass(frozen=True)
class PredRun:
    """A predicate run ``P[start:end]`` (end exclusive), optionally negated as a whole."""
    start: int
    end: int
    neg: bool = False


@dataclass(frozen=True)
class SReg:
    """A special register such as ``SR_TID.X`` (read only, by ``S2R``)."""
    name: str


@dataclass(frozen=True)
class IntImm:
    """An integer immediate, normalized by the slot's kind (signed for s32, unsigned bits
    otherwise)."""
    value: int


@dataclass(frozen=True)
class FloatImm:
    """An f32 immediate kept as its 32 raw bits, so -0.0, inf and NaN payloads survive."""
    bits: int

    @staticmethod
    def of(x: float) -> "FloatImm":
        """The f32 immediate nearest to ``x`` (round to nearest even)."""
        return FloatImm(int(np.array(x, np.float32).view(np.uint32)))

    @property
    def value(self) -> float:
        """The immediate as a Python float."""
        return float(np.array(self.bits, np.uint32).view(np.float32))


@dataclass(frozen=True)
class CBank:
    """A kernel parameter read from constant bank 0: ``c[0x10]`` is the byte offset."""
    offset: int


@dataclass(frozen=True)
class Mem:
    """A memory address ``[base+offset]``; ``base`` is a Reg (RZ: absolute) or a Run of
    address registers (one address per element)."""
    base: Reg | Run
    offset: int = 0


@dataclass(frozen=True)
class Target:
    """A branch target: the index (pc) of an instruction; text names it by its label."""
    pc: int


@dataclass(frozen=True)
class Label:
    """``name:`` before an instruction (in its prelude)."""
    name: str


@dataclass(frozen=True)
class Comment:
    """A ``// text`` line before an instruction (in its prelude)."""
    text: str


# ---------------------------------------------------------------- immediate kinds
@dataclass(frozen=True)
class ImmKind:
    """The immediates a slot takes: a range for integers (``lo``..``hi``), or f32."""
    name: str
    lo: int = 0
    hi: int = 0
    signed: bool = False
    is_float: bool = False
    doc: str = ""
    short: bool = False         # encoded in 8 bits (the binary's short-immediate tag)

    def normalize(self, v: int) -> int:
        """The stored value: signed for signed kinds, the unsigned 32 bits otherwise."""
        return v if self.signed else v & 0xFFFFFFFF

    def from_bits(self, bits: int) -> int:
        """The value a 32-bit encoding field holds."""
        return bits - (1 << 32) if self.signed and bits >= 1 << 31 else bits


IMM_KINDS = {k.name: k for k in [
    ImmKind("s32", -2**31, 2**31 - 1, True, doc="signed 32-bit; sign-extended in 64-bit ops"),
    ImmKind("u32", 0, 2**32 - 1, doc="unsigned 32-bit; zero-extended in 64-bit ops"),
    ImmKind("b32", -2**31, 2**32 - 1, doc="32 raw bits, written signed or unsigned"),
    ImmKind("lane", 0, 31, doc="a lane index or lane mask"),
    ImmKind("bar", 0, 15, doc="a barrier id"),
    ImmKind("abar", 0, BARRIER_IDS - 1, doc=f"an AsyncBarrier id (ids from {USABLE_BARRIERS} "
            f"on are reserved: using one faults)"),
    ImmKind("u1", 0, 1, doc="a flag, 0 or 1; encoded in 8 bits", short=True),
    ImmKind("u2", 0, 3, doc="two flag bits; encoded in 8 bits", short=True),
    ImmKind("kmajor", 2, 2, doc="the majors of a row that exists only with K-major A and B: "
            "2; encoded in 8 bits", short=True),
    ImmKind("f32", is_float=True, doc="an f32 value: decimal, inf, nan, or 0f + 8 hex digits "
            "for the exact bits"),
]}


def format_int(v: int, kind: ImmKind) -> str:
    """Canonical text of an integer immediate: decimal, except b32 values far from 0 in hex."""
    if kind.name != "b32":
        return str(v)
    s = v - (1 << 32) if v >= 1 << 31 else v
    return str(s) if -4096 <= s <= 4096 else f"0x{v:x}"


def format_float(bits: int) -> str:
    """Canonical text of f32 bits: the shortest decimal that reads back to the same bits,
    else (NaN payloads, -nan) ``0f`` and the 8 hex digits."""
    text = str(np.array(bits, np.uint32).view(np.float32)[()])
    return text if parse_float(text) == bits else f"0f{bits:08X}"


def parse_float(text: str) -> int:
    """The f32 bits of a float literal (``1.5``, ``-inf``, ``nan``, ``0f3F800000``)."""
    if text[:2].lower() == "0f":
        return int(text[2:], 16)
    with np.errstate(over="ignore"):
        return int(np.array(float(text), np.float64).astype(np.float32).view(np.uint32))


# ---------------------------------------------------------------- operand specs
@dataclass(frozen=True)
class OperandSpec:
    """One operand slot of an instruction row.

    ``accepts``: the value classes the slot takes; ``width``: registers per element (1, 2
    or 4; a plain register names that many registers starting at it, aligned);
    ``imm``: the immediate kinds (at most one integer kind, and/or f32); ``base_width``:
    registers of a memory operand's address (2 global, 1 shared/local); ``dst``: written;
    ``group``: the slot names exactly this many consecutive registers as one operand (a
    *register group* such as a TME descriptor: written as a run ``R[a:a+group]``, any
    start, never an element run).
    """
    name: str
    accepts: tuple
    width: int = 1
    imm: tuple = ()
    base_width: int = 0
    dst: bool = False
    group: int = 0

    @property
    def int_kind(self) -> ImmKind | None:
        """The slot's integer immediate kind, if it takes one."""
        return next((k for k in self.imm if not k.is_float), None)

    @property
    def float_kind(self) -> ImmKind | None:
        """The slot's f32 immediate kind, if it takes one."""
        return next((k for k in self.imm if k.is_float), None)

    def syntax(self) -> str:
        """The slot as the ISA reference writes it, e.g. ``b:R|s32|c`` or ``m:[R2+off]``."""
        w = "" if self.width == 1 else str(self.width)
        parts = []
        for cls in self.accepts:
            part = _SYNTAX[cls](self, w)
            if part and part not in parts:
                parts.append(part)
        return f"{self.name}:{'|'.join(parts)}"


_SYNTAX = {
    Reg: lambda s, w: f"R{w}", Run: lambda s, w: f"R[{s.group}]" if s.group else f"R{w}",
    Pred: lambda s, w: "P" if s.dst else "!P", PredRun: lambda s, w: None,
    SReg: lambda s, w: "SR", IntImm: lambda s, w: s.int_kind.name, FloatImm: lambda s, w: "f32",
    CBank: lambda s, w: "c", Target: lambda s, w: "label",
    Mem: lambda s, w: f"[R{'' if s.base_width == 1 else s.base_width}+off]",
}


def reg(name: str, width: int = 1, imm: str = "", c: bool = False) -> OperandSpec:
    """A source register slot (plain or run); ``imm`` names an immediate kind ("s32",
    "f32", "b32|f32" ...), ``c`` allows a constant-bank parameter ``c[...]``."""
    kinds = tuple(IMM_KINDS[k] for k in imm.split("|") if k)
    accepts = (Reg, Run) + ((IntImm,) if any(not k.is_float for k in kinds) else ()) \
        + ((FloatImm,) if any(k.is_float for k in kinds) else ()) + ((CBank,) if c else ())
    return OperandSpec(name, accepts, width, kinds)


def dst(name: str, width: int = 1) -> OperandSpec:
    """A destination register slot (plain or run)."""
    return OperandSpec(name, (Reg, Run), width, dst=True)


def group(name: str, n: int, is_dst: bool = False) -> OperandSpec:
    """A register-group slot: exactly ``n`` consecutive registers ``R[a:a+n]`` (a plain
    register too when ``n`` is 1); ``is_dst``: the instruction writes them."""
    return OperandSpec(name, (Reg, Run) if n == 1 else (Run,), group=n, dst=is_dst)


def pred(name: str) -> OperandSpec:
    """A source predicate slot (``P3``, ``!P3``, ``PT``, or a predicate run)."""
    return OperandSpec(name, (Pred, PredRun))


def pdst(name: str) -> OperandSpec:
    """A destination predicate slot (no negation)."""
    return OperandSpec(name, (Pred, PredRun), dst=True)


def imm(name: str, kinds: str) -> OperandSpec:
    """An immediate-only slot taking the kinds named in ``kinds`` ("bar", "b32|f32")."""
    ks = tuple(IMM_KINDS[k] for k in kinds.split("|"))
    accepts = ((IntImm,) if any(not k.is_float for k in ks) else ()) \
        + ((FloatImm,) if any(k.is_float for k in ks) else ())
    return OperandSpec(name, accepts, imm=ks)


def mem(name: str, base_width: int) -> OperandSpec:
    """A memory operand ``[base+offset]`` whose address is ``base_width`` registers."""
    return OperandSpec(name, (Mem,), base_width=base_width)


def sreg(name: str) -> OperandSpec:
    """A special-register slot."""
    return OperandSpec(name, (SReg,))


def label(name: str) -> OperandSpec:
    """A branch-target slot (a label in text, a pc in binary)."""
    return OperandSpec(name, (Target,))
