"""A :class:`Program` as canonical assembly text (what :func:`.asm.assemble` reads back).

Canonical form: header comments, then the directives in a fixed order (``.kernel``,
``.param`` per parameter, ``.threads``, ``.regs``, ``.shared``, ``.local``), a blank line,
then the code: labels at column 0, comment lines and instructions indented by 8 spaces,
a trailing comment two spaces after its instruction.
"""
from __future__ import annotations

from .operands import (PT, RZ, CBank, FloatImm, IntImm, Label, Mem, OperandSpec, Pred, PredRun,
    Reg, Run, SReg, Target, format_float, format_int)
from .program import Instruction, Program

INDENT = " " * 8


def _reg(n: int) -> str:
    return "RZ" if n == RZ else f"R{n}"


def _pred(n: int, neg: bool) -> str:
    return ("!" if neg else "") + ("PT" if n == PT else f"P{n}")


def _hex(v: int) -> str:
    return f"-0x{-v:x}" if v < 0 else f"0x{v:x}"


def _mem(m: Mem) -> str:
    if isinstance(m.base, Reg) and m.base.n == RZ:
        return f"[{_hex(m.offset)}]"
    base = _FORMAT[type(m.base)](m.base, None, {})
    if not m.offset:
        return f"[{base}]"
    return f"[{base}{'-' if m.offset < 0 else '+'}0x{abs(m.offset):x}]"


# value class -> (value, slot spec, label names by pc) -> text
_FORMAT = {
    Reg: lambda v, s, names: _reg(v.n),
    Run: lambda v, s, names: f"R[{v.start}:{v.end}]",
    Pred: lambda v, s, names: _pred(v.n, v.neg),
    PredRun: lambda v, s, names: ("!" if v.neg else "") + f"P[{v.start}:{v.end}]",
    SReg: lambda v, s, names: v.name,
    IntImm: lambda v, s, names: format_int(v.value, s.int_kind),
    FloatImm: lambda v, s, names: format_float(v.bits),
    CBank: lambda v, s, names: f"c[0x{v.offset:x}]",
    Mem: lambda v, s, names: _mem(v),
    Target: lambda v, s, names: names.get(v.pc, f"L{v.pc}"),
}


def format_operand(v, spec: OperandSpec, names: dict[int, str] | None = None) -> str:
    """One operand's text (``names``: label name of each branch-target pc)."""
    return _FORMAT[type(v)](v, spec, names or {})


def format_instruction(ins: Instruction, names: dict[int, str] | None = None,
                       comment: bool = True) -> str:
    """One instruction's text without indentation: guard, mnemonic, operands and (if
    ``comment``) its trailing comment."""
    guard = ""
    if ins.guard is not None:
        guard = "@" + _FORMAT[type(ins.guard)](ins.guard, None, {}) + " "
    ops = ", ".join(format_operand(v, s, names) for s, v in zip(ins.op.operands, ins.operands))
    text = f"{guard}{ins.op.mnemonic}{' ' + ops if ops else ''}"
    if comment and ins.comment is not None:
        text += f"  //{' ' if ins.comment else ''}{ins.comment}"
    return text


def label_names(program: Program) -> tuple[dict[int, str], dict[int, str]]:
    """(name of each labelled or targeted pc, labels to invent for targets that have
    none). A pc with several labels is named by its first."""
    names: dict[int, str] = {}
    for name, pc in program.labels().items():
        names.setdefault(pc, name)
    taken = set(program.labels())
    invented: dict[int, str] = {}
    for ins in program.instructions:
        for v in ins.operands:
            if isinstance(v, Target) and v.pc not in names:
                name, k = f"L{v.pc}", 0
                while name in taken:
                    k += 1
                    name = f"L{v.pc}_{k}"
                names[v.pc] = invented[v.pc] = name
                taken.add(name)
    return names, invented


def _prelude(items, invented: str | None) -> list[str]:
    lines = [f"{invented}:"] if invented else []
    for x in items:
        if isinstance(x, Label):
            lines.append(f"{x.name}:")
        else:
            lines.append(f"{INDENT}//{' ' if x.text else ''}{x.text}")
    return lines


def listing(program: Program) -> tuple[str, list[int]]:
    """The canonical text and, for each pc, the 1-based line its instruction is on."""
    out = [f"//{' ' if c else ''}{c}" for c in program.header_comments]
    out.append(f".kernel {program.name}")
    out += [f".param {p.name} {p.type} c[0x{p.offset:x}]" for p in program.params]
    out += [f".threads {program.threads}", f".regs {program.regs}",
            f".shared {program.shared}", f".local {program.local}", ""]
    names, invented = label_names(program)
    lines = []
    for pc, ins in enumerate(program.instructions):
        out += _prelude(ins.prelude, invented.get(pc))
        out.append(INDENT + format_instruction(ins, names))
        lines.append(len(out))
    out += _prelude(program.epilogue, invented.get(len(program.instructions)))
    return "\n".join(out) + "\n", lines


def disassemble(program: Program) -> str:
    """The canonical assembly text of ``program``."""
    return listing(program)[0]
