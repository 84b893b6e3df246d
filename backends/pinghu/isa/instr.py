"""The virtual MUSA ISA's instruction rows, and the rules an instruction must follow.

An :class:`Instr` is one row: mnemonic, functional unit, latency class, operand slots,
one-line semantics, and the ``family``/``attrs`` an interpreter dispatches on. The rows
are generated from small family tables in :mod:`.table`; the opcode of a row is its
index in :data:`INSTRS`. The assembler, disassembler, encoder, ISA reference and (later)
the interpreter all read this table; nothing else lists mnemonics.
"""
from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass, field
from types import MappingProxyType

from .errors import OperandError
from .operands import (MAX_PRED, MAX_REG, PT, RZ, CBank, FloatImm, IntImm, Mem, OperandSpec, Pred,
    PredRun, Reg, Run, SReg, Target)

UNITS: dict[str, str] = {
    "ALU": "integer and float arithmetic, logic, compares into predicates, selects, moves",
    "SFU": "special-function unit: f32 transcendental approximations",
    "CVT": "numeric conversions between register types",
    "LSU": "load/store unit: global, shared and local (spill) memory",
    "ATOM": "atomic read-modify-write of global memory, serialized per address",
    "SHFL": "warp shuffles: exchange a register between the lanes of a warp",
    "BAR": "block-wide barriers",
    "WMMA": "warp-level matrix multiply-accumulate on register fragments",
    "TME": "Tensor Memory Engine: asynchronous tile copies between global and shared memory",
    "ASYNC": "AsyncBarriers: phases of warp arrivals and transaction bytes",
    "SQMMA": "WarpSquad matrix multiply-accumulate on shared-memory operands (asynchronous)",
    "FENCE": "memory fences between generic and asynchronous accesses",
    "BRA": "control flow: branches, reconvergence, exit",
    "S2R": "reads of special registers",
    "DBG": "debugging: device_print records and device_assert checks (host-formatted)",
}

# Latency classes name how an instruction is timed; the cycle counts live in the machine
# parameter file, never here.
LATENCY_CLASSES: dict[str, str] = {
    "alu": "32-bit integer/float add, logic, compare, select, move",
    "alu64": "64-bit integer add, logic, compare, select, move",
    "fp64": "f64 arithmetic",
    "imul": "integer multiply and multiply-add",
    "div": "virtual division and remainder (a hardware instruction sequence)",
    "sfu": "SFU transcendental",
    "cvt": "conversion",
    "ld_global": "global-memory load", "st_global": "global-memory store",
    "ld_shared": "shared-memory load", "st_shared": "shared-memory store",
    "ld_local": "local-memory load", "st_local": "local-memory store",
    "atom_global": "global-memory atomic (the old value returns)",
    "shfl": "warp shuffle",
    "bar": "barrier",
    "wmma": "warp-level MMA",
    "tme": "TME copy issue, store commit and wait",
    "async_bar": "AsyncBarrier operation",
    "sqmma": "SQMMA issue and wait",
    "fence": "memory fence",
    "control": "branch, reconvergence, exit, no-op",
    "s2r": "special-register read",
    "debug": "print record or assertion check",
}


@dataclass(frozen=True, eq=False)
class Instr:
    """One instruction row. ``runs``: register runs allowed (the op then applies to each
    element); ``guardable``: may carry ``@P``; ``family`` + ``attrs``: the dispatch key of
    an interpreter (e.g. family ``ALU.ISETP``, attrs ``{"cmp": "LT", "type": "S32"}``)."""
    mnemonic: str
    unit: str
    latency: str
    operands: tuple[OperandSpec, ...]
    doc: str
    family: str
    attrs: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    runs: bool = True
    guardable: bool = True
    opcode: int = -1

    def __repr__(self) -> str:
        return f"<Instr {self.mnemonic} #{self.opcode}>"

    def syntax(self) -> str:
        """The operand list as the ISA reference shows it."""
        return ", ".join(o.syntax() for o in self.operands)

    def check(self, operands: tuple, guard=None) -> int:
        """Check ``operands`` and ``guard`` against this row; return the run element count
        (0 when nothing is a run). Raises :class:`OperandError` naming the operand."""
        if len(operands) != len(self.operands):
            names = ", ".join(o.name for o in self.operands) or "none"
            raise OperandError(f"{self.mnemonic} takes {len(self.operands)} operand"
                               f"{'' if len(self.operands) == 1 else 's'} ({names}), "
                               f"got {len(operands)}")
        count, first = 0, ""
        for i, (spec, v) in enumerate(zip(self.operands, operands)):
            if type(v) not in spec.accepts:
                raise OperandError(f"operand {spec.name} of {self.mnemonic} must be "
                                   f"{_expected(spec)}, not {_describe(v)}", i)
            n = _CHECKS[type(v)](spec, v, i)
            if n and not self.runs:
                raise OperandError(f"{self.mnemonic} takes no runs", i)
            if n and count and n != count:
                raise OperandError(f"run of {n} elements, but {first} has {count}", i)
            if n and not count:
                count, first = n, _DESCRIBE[type(v)](v)
        count = self._check_guard(guard, count, first)
        for i, (spec, v) in enumerate(zip(self.operands, operands)):
            if count and spec.dst and type(v) not in (Run, PredRun):
                raise OperandError(f"destination {spec.name} must be a run of {count} "
                                   f"elements when the instruction has runs", i)
        return count

    def _check_guard(self, guard, count: int, first: str) -> int:
        if guard is None:
            return count
        if not self.guardable:
            raise OperandError(f"{self.mnemonic} cannot be guarded", OperandError.GUARD)
        if not isinstance(guard, (Pred, PredRun)):
            raise OperandError(f"a guard is a predicate or a predicate run, not "
                               f"{_describe(guard)}", OperandError.GUARD)
        if isinstance(guard, Pred):
            _check_pred(guard, OperandError.GUARD)
            return count
        n = _check_pred_run(guard, OperandError.GUARD)
        if not self.runs:
            raise OperandError(f"{self.mnemonic} takes no runs", OperandError.GUARD)
        if count and n != count:
            raise OperandError(f"guard run of {n} elements, but {first} has {count}",
                               OperandError.GUARD)
        return n


def _expected(spec: OperandSpec) -> str:
    words = []
    for cls in spec.accepts:
        w = _EXPECT[cls](spec)
        if w not in words:
            words.append(w)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


_WIDTH_WORD = {1: "a register", 2: "a register pair", 4: "a register quad",
               8: "an aligned run of 8 registers"}
_EXPECT = {
    Reg: lambda s: _WIDTH_WORD[s.width],
    Run: lambda s: f"a run of {s.group} registers" if s.group else "a run",
    Pred: lambda s: "a predicate", PredRun: lambda s: "a predicate run",
    SReg: lambda s: "a special register",
    IntImm: lambda s: f"an {s.int_kind.name} immediate",
    FloatImm: lambda s: "an f32 immediate", CBank: lambda s: "a parameter c[...]",
    Mem: lambda s: "a memory address [R+off]", Target: lambda s: "a label",
}
_DESCRIBE = {
    Reg: lambda v: "RZ" if v.n == RZ else f"R{v.n}", Run: lambda v: f"R[{v.start}:{v.end}]",
    Pred: lambda v: ("!" if v.neg else "") + ("PT" if v.n == PT else f"P{v.n}"),
    PredRun: lambda v: ("!" if v.neg else "") + f"P[{v.start}:{v.end}]",
    SReg: lambda v: v.name, IntImm: lambda v: f"immediate {v.value}",
    FloatImm: lambda v: f"immediate {v.value}", CBank: lambda v: f"c[0x{v.offset:x}]",
    Mem: lambda v: f"[{_describe(v.base)}{v.offset:+#x}]", Target: lambda v: "a label",
}


def _describe(v) -> str:
    return _DESCRIBE[type(v)](v) if type(v) in _DESCRIBE else repr(v)


def _check_reg(r: int, width: int, i: int, what: str = "") -> None:
    if r == RZ:
        return
    name = what or f"R{r}"
    if not 0 <= r <= MAX_REG:
        raise OperandError(f"register R{r} does not exist (R0 .. R{MAX_REG}, RZ)", i)
    if r % width:
        raise OperandError(f"{name} is not aligned: a {32 * width}-bit operand starts at a "
                           f"register number divisible by {width}", i)
    if r + width - 1 > MAX_REG:
        raise OperandError(f"{name} runs past R{MAX_REG}", i)


def _check_run(start: int, end: int, width: int, i: int, p: str = "R",
               top: int = MAX_REG) -> int:
    text = f"{p}[{start}:{end}]"
    if end <= start:
        raise OperandError(f"bad run {text}: end must be greater than start", i)
    if start < 0 or end - 1 > top:
        what = "register" if p == "R" else "predicate"
        raise OperandError(f"bad run {text}: {p}{top} is the last {what}", i)
    if (end - start) % width or start % width:
        raise OperandError(f"bad run {text}: a run of {32 * width}-bit elements starts and "
                           f"ends at multiples of {width}", i)
    return (end - start) // width


def _check_group(spec, v: Run, i: int) -> int:
    """A register group: exactly ``spec.group`` registers, any start (not an element run)."""
    text = f"R[{v.start}:{v.end}]"
    if v.end - v.start != spec.group:
        raise OperandError(f"operand {spec.name} is a group of {spec.group} registers, not "
                           f"{text}", i)
    if v.start < 0 or v.end - 1 > MAX_REG:
        raise OperandError(f"bad group {text}: R{MAX_REG} is the last register", i)
    return 0


def _check_pred(p: Pred, i: int) -> None:
    if p.n != PT and not 0 <= p.n <= MAX_PRED:
        raise OperandError(f"predicate P{p.n} does not exist (P0 .. P{MAX_PRED}, PT)", i)


def _check_pred_run(p: PredRun, i: int) -> int:
    return _check_run(p.start, p.end, 1, i, "P", MAX_PRED)


def _pred_slot(spec, v, i):
    if v.neg and spec.dst:
        raise OperandError(f"destination predicate {spec.name} cannot be negated", i)
    if isinstance(v, Pred):
        _check_pred(v, i)
        return 0
    return _check_pred_run(v, i)


def _int_slot(spec, v, i):
    k = spec.int_kind
    raw = v.value
    if not k.lo <= raw <= k.hi:
        raise OperandError(f"immediate {raw} out of range for {k.name} ({k.lo} .. {k.hi})", i)
    if k.normalize(raw) != raw:
        raise OperandError(f"a {k.name} immediate is kept as its unsigned bits: "
                           f"IntImm({k.normalize(raw):#x}), not IntImm({raw})", i)
    return 0


def _mem_slot(spec, v, i):
    if not -2**31 <= v.offset < 2**31:
        raise OperandError(f"address offset {v.offset} out of range (signed 32-bit)", i)
    if isinstance(v.base, Run):
        return _check_run(v.base.start, v.base.end, spec.base_width, i)
    _check_reg(v.base.n, spec.base_width, i)
    return 0


def _cbank_slot(spec, v, i):
    size = 4 * spec.width
    if not 0 <= v.offset < 1 << 16 or v.offset % size:
        raise OperandError(f"c[0x{v.offset:x}] must be a multiple of {size} below 0x10000", i)
    return 0


def _float_slot(spec, v, i):
    if not 0 <= v.bits < 1 << 32:
        raise OperandError(f"f32 immediate bits 0x{v.bits:x} out of range", i)
    return 0


# value class -> (slot spec, value, operand index) -> run element count (0: not a run)
_CHECKS = {
    Reg: lambda s, v, i: _check_reg(v.n, s.width, i) or 0,
    Run: lambda s, v, i: _check_group(s, v, i) if s.group else
    _check_run(v.start, v.end, s.width, i),
    Pred: _pred_slot, PredRun: _pred_slot,
    SReg: lambda s, v, i: 0, IntImm: _int_slot, FloatImm: _float_slot,
    CBank: _cbank_slot, Mem: _mem_slot,
    Target: lambda s, v, i: 0,
}

# ---------------------------------------------------------------- the table
INSTRS: list[Instr] = []
BY_MNEMONIC: dict[str, Instr] = {}


def define(mnemonic: str, unit: str, latency: str, operands, doc: str, family: str = "",
           runs: bool = True, guardable: bool = True, **attrs) -> Instr:
    """Append one row to the table (its opcode is its index)."""
    assert mnemonic not in BY_MNEMONIC, f"{mnemonic} defined twice"
    assert unit in UNITS and latency in LATENCY_CLASSES, mnemonic
    assert doc, f"{mnemonic} needs a one-line semantics"
    assert mnemonic.split(".")[0] == unit or unit == "BRA", f"{mnemonic} is not a {unit} name"
    row = Instr(mnemonic, unit, latency, tuple(operands), doc, family or mnemonic,
                MappingProxyType(dict(attrs)), runs, guardable, len(INSTRS))
    INSTRS.append(row)
    BY_MNEMONIC[mnemonic] = row
    return row


@functools.lru_cache(maxsize=None)
def table_hash() -> int:
    """CRC-32 of every row's mnemonic and operand syntax: a binary records it, and the
    decoder refuses bytes made from a different table."""
    sig = "\n".join(f"{r.mnemonic} {r.syntax()} {r.runs} {r.guardable}" for r in INSTRS)
    return zlib.crc32(sig.encode())

