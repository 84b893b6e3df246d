"""The errors a user meets, each pointing at the Python source that caused it.

Every message names ``file:line:col``, shows the source line and a caret under the
column. Compiler-internal frames never appear: the frontend wraps unexpected
exceptions into :class:`CompilationError` with the location of the construct it was
compiling.
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A Python source location: file, 1-based line, 0-based column."""
    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def excerpt(self) -> str:
        """The source line and a caret under the column, or '' if the file is unknown."""
        text = linecache.getline(self.file, self.line).rstrip("\n")
        if not text:
            return ""
        return f"    {text}\n    {' ' * self.col}^"


UNKNOWN = Loc("<unknown>", 0, 0)


def _format(kind: str, msg: str, loc: Loc | None) -> str:
    if loc is None or loc.line <= 0:
        return msg
    excerpt = loc.excerpt()
    head = f"{loc}: {kind}: {msg}"
    return f"{head}\n{excerpt}" if excerpt else head


class MutileError(Exception):
    """Base of every mutile error."""


class CompilationError(MutileError):
    """A kernel could not be compiled; ``loc`` is the Python location at fault."""

    def __init__(self, msg: str, loc: Loc | None = None):
        self.msg, self.loc = msg, loc
        super().__init__(_format("error", msg, loc))


class VerifyError(CompilationError):
    """The tile IR broke an op's rule (raised by the verifier and the parser)."""


class LaunchError(MutileError):
    """A launch was given arguments or a grid that the kernel cannot take."""


class DeviceFault(MutileError):
    """A running kernel touched memory outside an array (like a GPU core dump)."""

    def __init__(self, msg: str, loc: Loc | None = None):
        self.msg, self.loc = msg, loc
        super().__init__(_format("device fault", msg, loc))
