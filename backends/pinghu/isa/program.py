"""Assembled programs: a kernel header and a list of decoded instructions.

The assembler and the decoder both produce a :class:`Program`; the disassembler and the
encoder both consume one. Comments and labels travel with the instruction they precede
(its ``prelude``) so a listing survives text -> binary -> text; a comment of the form
``// file.py:LINE  source`` also sets the Python location of the instructions after it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from mutile.errors import Loc
from mutile.ir.ops_pinghu import SHARED_BYTES

from .errors import OperandError
from .instr import Instr
from .operands import MAX_REG, RZ, CBank, Comment, Label, Mem, Pred, PredRun, Reg, Run, Target

MAX_THREADS = 1024
MAX_SHARED = SHARED_BYTES               # per block (a public Pinghu fact, see ops_pinghu)
PARAM_TYPES = {"ptr": 8, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4, "s64": 8,
               "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8}
LOC_COMMENT = re.compile(r"(?P<file>\S+\.py|<[^>\s]+>):(?P<line>\d+)(?:\s+(?P<src>.*))?$")


@dataclass(frozen=True)
class Param:
    """A kernel parameter: ``.param name type c[offset]``; it lives in constant bank 0."""
    name: str
    type: str
    offset: int

    @property
    def size(self) -> int:
        """Bytes the parameter takes in constant bank 0."""
        return PARAM_TYPES[self.type]


@dataclass
class Instruction:
    """One instruction: its row, operand values, guard (a Pred or PredRun, or None), the
    labels and comment lines before it, its trailing comment. ``line`` (the listing line it
    was assembled from, 0 if unknown) and ``loc`` (the Python location from the latest
    ``// file.py:LINE`` comment) are metadata, not compared."""
    op: Instr
    operands: tuple = ()
    guard: Pred | PredRun | None = None
    prelude: tuple = ()
    comment: str | None = None
    line: int = field(default=0, compare=False)
    loc: Loc | None = field(default=None, compare=False)

    @property
    def count(self) -> int:
        """Elements of the instruction's runs (0 when it names no run)."""
        return self.op.check(self.operands, self.guard)


@dataclass
class Program:
    """A kernel: name, parameters, threads per block, registers per thread, shared and
    local (spill) bytes, instructions, comments before the header and after the code."""
    name: str
    params: tuple[Param, ...] = ()
    threads: int = 128
    regs: int = 0
    shared: int = 0
    local: int = 0
    instructions: list[Instruction] = field(default_factory=list)
    header_comments: tuple[str, ...] = ()
    epilogue: tuple = ()

    def labels(self) -> dict[str, int]:
        """Label name -> pc (``len(instructions)`` for labels after the last one)."""
        out = {}
        for pc, ins in enumerate(self.instructions):
            out.update((x.name, pc) for x in ins.prelude if isinstance(x, Label))
        out.update((x.name, len(self.instructions)) for x in self.epilogue
                   if isinstance(x, Label))
        return out

    @property
    def param_bytes(self) -> int:
        """Bytes of constant bank 0 the parameters take."""
        return max((p.offset + p.size for p in self.params), default=0)

    def verify(self) -> None:
        """Check every instruction against its row and the header; raises ValueError
        naming the pc and the operand."""
        check_header(self)
        for pc, ins in enumerate(self.instructions):
            try:
                check_instruction(self, ins)
            except OperandError as e:
                raise ValueError(f"pc {pc} ({ins.op.mnemonic}): {e.msg}") from None


def check_header(p: Program) -> None:
    """Rules of the header directives; raises ValueError."""
    if not 32 <= p.threads <= MAX_THREADS or p.threads % 32:
        raise ValueError(f".threads {p.threads}: a multiple of 32 from 32 to {MAX_THREADS}")
    if not 0 <= p.regs <= MAX_REG + 1:
        raise ValueError(f".regs {p.regs}: at most {MAX_REG + 1} registers per thread")
    if not 0 <= p.shared <= MAX_SHARED:
        raise ValueError(f".shared {p.shared}: at most {MAX_SHARED} bytes per block")
    if not 0 <= p.local < 1 << 32:
        raise ValueError(f".local {p.local}: out of range")
    seen: dict[str, Param] = {}
    for q in p.params:
        if q.name in seen:
            raise ValueError(f"parameter {q.name} declared twice")
        if q.type not in PARAM_TYPES:
            raise ValueError(f"unknown parameter type {q.type} ({', '.join(PARAM_TYPES)})")
        if q.offset % q.size or not 0 <= q.offset < 1 << 16:
            raise ValueError(f"parameter {q.name} at c[0x{q.offset:x}] is not {q.size}-byte "
                             f"aligned")
        for o in seen.values():
            if q.offset < o.offset + o.size and o.offset < q.offset + q.size:
                raise ValueError(f"parameter {q.name} overlaps {o.name}")
        seen[q.name] = q


def check_instruction(p: Program, ins: Instruction) -> int:
    """Check ``ins`` against its row and against ``p``'s header (register budget,
    parameter area, branch targets); returns its run element count. Raises
    :class:`OperandError`."""
    count = ins.op.check(ins.operands, ins.guard)
    for i, (spec, v) in enumerate(zip(ins.op.operands, ins.operands)):
        top = _top_register(v, spec.width, spec.base_width)
        if top >= p.regs:
            raise OperandError(f"R{top} is beyond the {p.regs} registers of .regs {p.regs}", i)
        if isinstance(v, CBank) and v.offset + 4 * spec.width > p.param_bytes:
            raise OperandError(f"c[0x{v.offset:x}] is beyond the parameters "
                               f"(0x{p.param_bytes:x} bytes)", i)
        if isinstance(v, Target) and not 0 <= v.pc <= len(p.instructions):
            raise OperandError(f"branch target pc {v.pc} is outside the program", i)
    return count


def _top_register(v, width: int, base_width: int) -> int:
    """The highest register index a value names (-1 for none or RZ)."""
    if isinstance(v, Mem):
        return _top_register(v.base, base_width, 0)
    if isinstance(v, Reg):
        return -1 if v.n == RZ else v.n + width - 1
    if isinstance(v, Run):
        return v.end - 1
    return -1


def registers_used(instructions) -> int:
    """One more than the highest register any instruction names (the default .regs)."""
    top = -1
    for ins in instructions:
        for spec, v in zip(ins.op.operands, ins.operands):
            top = max(top, _top_register(v, spec.width, spec.base_width))
    return top + 1


def attach_locations(program: Program) -> None:
    """Set each instruction's ``loc`` from the latest ``// file.py:LINE  source`` comment
    before it (in program order)."""
    loc = None
    for ins in program.instructions:
        for item in ins.prelude:
            m = LOC_COMMENT.match(item.text) if isinstance(item, Comment) else None
            if m:
                loc = Loc(m["file"], int(m["line"]), 0)
        ins.loc = loc
