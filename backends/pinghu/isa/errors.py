"""Errors of the Pinghu assembler and of the binary decoder."""
from __future__ import annotations

from mutile.errors import CompilationError


class AssemblyError(CompilationError):
    """Malformed assembly text: names ``file:line:col`` of the text, shows the line and a
    caret under the column (``line``/``col`` are 1-based; 0 when no position applies)."""

    def __init__(self, msg: str, source: str = "<asm>", line: int = 0, col: int = 0,
                 text: str = ""):
        self.line, self.col, self.source = line, col, source
        head = f"{source}:{line}:{col}: error: {msg}" if line > 0 else f"{source}: error: {msg}"
        full = f"{head}\n    {text}\n    {' ' * max(col - 1, 0)}^" if text else head
        super().__init__(full)
        self.msg = msg


class DecodeError(CompilationError):
    """Bytes that are not a program of this instruction table (bad magic, table hash,
    opcode, operand tag or truncated data)."""


class OperandError(Exception):
    """An instruction breaks a rule of its row. ``index`` is the operand at fault
    (``GUARD`` for the guard, ``WHOLE`` for the instruction as a whole); the assembler
    turns it into an :class:`AssemblyError` pointing at that operand's column."""

    GUARD, WHOLE = -2, -1

    def __init__(self, msg: str, index: int = -1):
        super().__init__(msg)
        self.msg, self.index = msg, index
