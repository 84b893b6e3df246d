"""The assembler: MUSA assembly text (``grammar/musa_asm.lark``) -> :class:`Program`.

``assemble(disassemble(p)) == p`` for every valid program, and malformed text raises
:class:`~.errors.AssemblyError` naming the line and column with the line and a caret.
Header directives (``.kernel`` first, then ``.param``, ``.threads``, ``.regs``, ``.shared``,
``.local``) come before the first label or instruction; comments are kept.
"""
from __future__ import annotations

import difflib
import functools
import math
import re
from dataclasses import dataclass
from importlib import resources

import lark

from .errors import AssemblyError, OperandError
from .instr import BY_MNEMONIC
from .operands import (PT, RZ, SPECIAL_REG_IDS, CBank, Comment, FloatImm, IntImm, Label, Mem,
    Pred, PredRun, Reg, Run, SReg, Target, parse_float)
from .program import (MAX_SHARED, MAX_THREADS, PARAM_TYPES, Instruction, Param, Program,
    attach_locations, check_header, check_instruction, registers_used)

RESERVED_LABEL = re.compile(r"(R[0-9]+|RZ|P[0-9]+|PT|SR_.*|inf|nan)$")


@functools.lru_cache(maxsize=None)
def _parser() -> lark.Lark:
    text = resources.files("mutile.grammar").joinpath("musa_asm.lark").read_text()
    return lark.Lark(text, parser="lalr", lexer="contextual", propagate_positions=True,
                     maybe_placeholders=True)


def _int(text: str) -> int:
    t = text.replace(" ", "").replace("\t", "")
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("+-")
    return sign * int(t, 16 if t.lower().startswith("0x") else 10)


@dataclass(frozen=True)
class _LabelRef:
    name: str


@dataclass(frozen=True)
class _IntLit:
    value: int


@dataclass(frozen=True)
class _FloatLit:
    text: str


def _bang(c) -> bool:
    return c is not None


def _run_bounds(tok) -> tuple[int, int]:
    a, b = str(tok)[2:-1].split(":")
    return int(a), int(b)


class _Misnamed(Exception):
    """A register or predicate token whose number is the zero register's (``R255`` is
    not ``RZ`` in the text: R0 .. R254 exist), raised with the token."""

    def __init__(self, msg: str, tok):
        super().__init__(msg)
        self.msg, self.tok = msg, tok


def _named_reg(tok) -> int:
    s = str(tok)[1:]
    if s == "Z":
        return RZ
    if int(s) == RZ:
        raise _Misnamed(f"register {tok} does not exist (R0 .. R{RZ - 1}, RZ)", tok)
    return int(s)


def _named_pred(tok) -> int:
    s = str(tok)[1:]
    if s == "T":
        return PT
    if int(s) == PT:
        raise _Misnamed(f"predicate {tok} does not exist (P0 .. P{PT - 1}, PT)", tok)
    return int(s)


def _mem(c):
    base = Reg(_named_reg(c[0])) if c[0].type == "REG" else Run(*_run_bounds(c[0]))
    return Mem(base, _int(str(c[1])) if c[1] is not None else 0)


# parse-tree node -> operand value (labels and literals stay placeholders until the slot
# that receives them is known)
_OPERANDS = {
    "reg": lambda c: Reg(_named_reg(c[0])),
    "run": lambda c: Run(*_run_bounds(c[0])),
    "pred": lambda c: Pred(_named_pred(c[1]), _bang(c[0])),
    "prun": lambda c: PredRun(*_run_bounds(c[1]), _bang(c[0])),
    "sreg": lambda c: SReg(str(c[0])),
    "int": lambda c: _IntLit(_int(str(c[0]))),
    "float": lambda c: _FloatLit(str(c[0])),
    "cbank": lambda c: CBank(_int(str(c[0])[2:-1].strip())),
    "mem": _mem,
    "absmem": lambda c: Mem(Reg(RZ), _int(str(c[0]))),
    "target": lambda c: _LabelRef(str(c[0])),
}
# directive -> (argument shapes, usage text)
_DIRECTIVES = {
    ".kernel": (("dname",), ".kernel NAME"),
    ".param": (("dname", "dname", "dcbank"), ".param NAME TYPE c[OFFSET]"),
    ".threads": (("dint",), ".threads N"),
    ".regs": (("dint",), ".regs N"),
    ".shared": (("dint",), ".shared BYTES"),
    ".local": (("dint",), ".local BYTES"),
}


class _Assembler:
    def __init__(self, text: str, source: str):
        self.text, self.source = text, source
        self.lines = text.splitlines()
        self.header: dict[str, object] = {}
        self.params: list[Param] = []
        self.header_comments: list[str] = []
        self.pending: list = []          # labels/comments waiting for their instruction
        self.items: list[tuple] = []     # (Instruction, mnemonic col, guard col, operand cols)
        self.label_lines: dict[str, int] = {}
        self.in_code = False

    def fail(self, msg: str, line: int, col: int):
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        raise AssemblyError(msg, self.source, line, col, src)

    # ------------------------------------------------------------ pass 1: lines
    def run(self) -> Program:
        try:
            tree = _parser().parse(self.text if self.text.endswith("\n") else self.text + "\n")
        except lark.exceptions.UnexpectedInput as e:
            self.fail(self._syntax_message(e), e.line, e.column)
        for line in tree.children:
            self.line(line)
        return self.finish()

    @staticmethod
    def _syntax_message(e) -> str:
        tok = getattr(e, "token", None)
        if tok is not None:
            return "syntax error: unexpected end of line" if tok.type == "_NL" else \
                f"syntax error: unexpected '{tok}'"
        return f"syntax error: unexpected character {e.char!r}" if hasattr(e, "char") else \
            "syntax error"

    def line(self, tree) -> None:
        label, stmt, comment = tree.children
        text = None if comment is None else str(comment)[2:].strip()
        if label is not None:
            self.label(label.children[0])
        if stmt is None:
            if text is not None:
                self.pending.append(Comment(text))
        elif stmt.data == "directive":
            self.directive(stmt)
            if text is not None:
                self.header_comments.append(text)
        else:
            self.instr(stmt, text)

    def label(self, tok) -> None:
        name = str(tok)
        if RESERVED_LABEL.match(name):
            self.fail(f"label name '{name}' would read as an operand", tok.line, tok.column)
        if name in self.label_lines:
            self.fail(f"duplicate label '{name}' (first defined on line "
                      f"{self.label_lines[name]})", tok.line, tok.column)
        self.label_lines[name] = tok.line
        self.in_code = True
        self.pending.append(Label(name))

    def directive(self, tree) -> None:
        tok, *args = tree.children
        name = str(tok)
        if name not in _DIRECTIVES:
            self.fail(f"unknown directive '{name}' ({', '.join(_DIRECTIVES)})", tok.line,
                      tok.column)
        if self.in_code:
            self.fail(f"directive {name} after the first label or instruction", tok.line,
                      tok.column)
        if name == ".kernel" and self.header:
            self.fail(".kernel must be the first directive", tok.line, tok.column)
        if name != ".kernel" and ".kernel" not in self.header:
            self.fail(f"{name} before .kernel", tok.line, tok.column)
        shapes, usage = _DIRECTIVES[name]
        if tuple(a.data for a in args) != shapes:
            self.fail(f"expected '{usage}'", tok.line, tok.column)
        if name in self.header and name != ".param":
            self.fail(f"{name} given twice", tok.line, tok.column)
        self.header_comments += [c.text for c in self.pending]
        self.pending = []
        vals = [a.children[0] for a in args]
        self.header[name] = True
        getattr(self, "d_" + name[1:])(vals)

    def d_kernel(self, v) -> None:
        self.header["name"] = str(v[0])

    def d_param(self, v) -> None:
        name, typ, off = v
        if str(typ) not in PARAM_TYPES:
            self.fail(f"unknown parameter type '{typ}' ({', '.join(PARAM_TYPES)})", typ.line,
                      typ.column)
        self.params.append(Param(str(name), str(typ), _int(str(off)[2:-1].strip())))
        try:
            check_header(Program("k", tuple(self.params)))
        except ValueError as e:
            self.fail(str(e), name.line, name.column)

    def _count(self, tok, key: str, lo: int, hi: int, what: str) -> None:
        n = _int(str(tok))
        if not lo <= n <= hi:
            self.fail(f"{what} (got {n})", tok.line, tok.column)
        self.header[key] = n

    def d_threads(self, v) -> None:
        msg = f".threads is a multiple of 32 from 32 to {MAX_THREADS}"
        self._count(v[0], "threads", 32, MAX_THREADS, msg)
        if self.header["threads"] % 32:
            self.fail(f"{msg} (got {self.header['threads']})", v[0].line, v[0].column)

    def d_regs(self, v) -> None:
        self._count(v[0], "regs", 0, RZ, f".regs is at most {RZ} registers per thread")

    def d_shared(self, v) -> None:
        self._count(v[0], "shared", 0, MAX_SHARED,
                    f".shared is at most {MAX_SHARED} bytes (192 KiB) per block")

    def d_local(self, v) -> None:
        self._count(v[0], "local", 0, 2**32 - 1, ".local is at most 2**32-1 bytes")

    def instr(self, tree, comment) -> None:
        try:
            self._instr(tree, comment)
        except _Misnamed as e:
            self.fail(e.msg, e.tok.line, e.tok.column)

    def _instr(self, tree, comment) -> None:
        guard_tree, tok, *ops = tree.children
        ops = [o for o in ops if o is not None]
        if ".kernel" not in self.header:
            self.fail("missing .kernel directive before the first instruction", tok.line,
                      tok.column)
        row = BY_MNEMONIC.get(str(tok))
        if row is None:
            close = [str(tok).upper()] if str(tok).upper() in BY_MNEMONIC else \
                difflib.get_close_matches(str(tok), BY_MNEMONIC, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            self.fail(f"unknown mnemonic '{tok}'{hint}", tok.line, tok.column)
        guard, gcol = None, 0
        if guard_tree is not None:
            bang, p = guard_tree.children
            gcol = guard_tree.meta.column
            guard = Pred(_named_pred(p), _bang(bang)) if p.type == "PRED" else \
                PredRun(*_run_bounds(p), _bang(bang))
        values = [_OPERANDS[o.data](o.children) for o in ops]
        cols = [o.meta.column for o in ops]
        values = [self.coerce(v, row, i, tok.line, c) for i, (v, c) in enumerate(zip(values, cols))]
        ins = Instruction(row, tuple(values), guard, tuple(self.pending), comment, tok.line)
        self.pending = []
        self.in_code = True
        self.items.append((ins, tok.column, gcol, cols))

    def coerce(self, v, row, i: int, line: int, col: int):
        """Turn a literal into the immediate the slot wants (or leave it for the row's
        check to reject); special registers are checked by name here."""
        spec = row.operands[i] if i < len(row.operands) else None
        if isinstance(v, SReg) and v.name not in SPECIAL_REG_IDS:
            self.fail(f"unknown special register '{v.name}'", line, col)
        if isinstance(v, _IntLit):
            kind = spec.int_kind if spec else None
            if kind is not None:
                return IntImm(kind.normalize(v.value) if kind.lo <= v.value <= kind.hi
                              else v.value)
            if spec is not None and spec.float_kind is not None:
                f = FloatImm.of(float(v.value))
                if f.value != v.value:
                    self.fail(f"integer {v.value} is not exactly an f32; write it as a float",
                              line, col)
                return f
            return IntImm(v.value)
        if isinstance(v, _FloatLit):
            f = FloatImm(parse_float(v.text))
            if math.isinf(f.value) and not v.text.startswith("0f") \
                    and math.isfinite(float(v.text)):
                self.fail(f"immediate {v.text} out of range for f32 (largest "
                          f"3.4028235e+38)", line, col)
            return f
        return v

    # ------------------------------------------------------------ pass 2: resolve, check
    def finish(self) -> Program:
        if ".kernel" not in self.header:
            self.fail("missing .kernel directive", 1 if self.lines else 0, 1)
        labels = {}
        for pc, (ins, *_) in enumerate(self.items):
            labels.update((x.name, pc) for x in ins.prelude if isinstance(x, Label))
        labels.update((x.name, len(self.items)) for x in self.pending if isinstance(x, Label))
        insts = [it[0] for it in self.items]
        regs = self.header.get("regs")
        prog = Program(self.header["name"], tuple(self.params), self.header.get("threads", 128),
                       0 if regs is None else regs, self.header.get("shared", 0),
                       self.header.get("local", 0), insts, tuple(self.header_comments),
                       tuple(self.pending))
        if regs is None:
            prog.regs = min(registers_used(insts), RZ)
        for ins, mcol, gcol, cols in self.items:
            self.resolve(ins, labels, cols)
            try:
                check_instruction(prog, ins)
            except OperandError as e:
                col = {OperandError.GUARD: gcol, OperandError.WHOLE: mcol}.get(
                    e.index, cols[e.index] if 0 <= e.index < len(cols) else mcol)
                self.fail(e.msg, ins.line, col)
        attach_locations(prog)
        return prog

    def resolve(self, ins: Instruction, labels: dict, cols: list) -> None:
        ops = list(ins.operands)
        for i, v in enumerate(ops):
            if isinstance(v, _LabelRef):
                if v.name not in labels:
                    self.fail(f"undefined label '{v.name}'", ins.line, cols[i])
                ops[i] = Target(labels[v.name])
        ins.operands = tuple(ops)


def assemble(text: str, source: str = "<asm>") -> Program:
    """Assemble MUSA assembly ``text`` into a :class:`Program`; ``source`` names the text
    in error messages (a file path, or ``<asm>``)."""
    return _Assembler(text, source).run()


def listing_text(data: bytes, source: str = "<asm>") -> str:
    """The text of a listing file's bytes (line ends as ``Path.read_text`` makes them):
    UTF-8, where bytes that are not UTF-8 are tolerated in comments (they read as
    U+FFFD) and elsewhere raise the :class:`~.errors.AssemblyError` naming their line and
    column."""
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    lines = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        try:
            lines.append(raw.decode("utf-8"))
            continue
        except UnicodeDecodeError as e:
            bad = e.start
        cut = raw.find(b"//")
        if 0 <= cut < bad:
            lines.append(raw[:cut].decode("utf-8") + raw[cut:].decode("utf-8", "replace"))
            continue
        text = raw.decode("utf-8", "replace")
        col = len(raw[:bad].decode("utf-8", "replace")) + 1
        raise AssemblyError(f"byte 0x{raw[bad]:02x} is not UTF-8 text (only comments may "
                            f"hold such bytes)", source, n, col, text)
    return "\n".join(lines)
