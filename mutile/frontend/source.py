"""A kernel's Python source: its AST, file, and the map from AST positions to
``Loc(file, line, col)`` in the original file."""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import CompilationError, Loc


@dataclass
class FunctionSource:
    fn: object
    tree: ast.FunctionDef
    file: str
    first_line: int
    indent: int
    text: str

    @property
    def name(self) -> str:
        return self.fn.__name__

    @property
    def globals(self) -> dict:
        return self.fn.__globals__

    def loc(self, node) -> Loc:
        line = getattr(node, "lineno", None)
        if line is None:
            return Loc(self.file, self.first_line, self.indent)
        return Loc(self.file, self.first_line + line - 1, getattr(node, "col_offset", 0) + self.indent)


_CACHE: dict = {}


def function_source(fn) -> FunctionSource:
    """Parse ``fn``'s source once (cached on the code object and the text)."""
    try:
        lines, first = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as e:
        raise CompilationError(f"cannot read the source of {fn.__name__}: {e}") from None
    text = "".join(lines)
    key = (file, first, text)
    if key in _CACHE:
        return _CACHE[key]
    indent = len(lines[0]) - len(lines[0].lstrip())
    module = ast.parse(textwrap.dedent(text))
    tree = next((n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if tree is None:
        raise CompilationError(f"{fn.__name__} is not a function defined with def",
                               Loc(file, first, indent))
    if isinstance(tree, ast.AsyncFunctionDef):
        raise CompilationError("async functions cannot be kernels", Loc(file, first, indent))
    src = FunctionSource(fn, tree, file, first, indent, text)
    _CACHE[key] = src
    return src


def closure_cells(fn) -> dict:
    """The variables ``fn`` reads from the functions that enclose it: name -> cell (a
    cell's value is read when the kernel compiles; it may be empty until assigned)."""
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
    if code is None or not cells:
        return {}
    return dict(zip(code.co_freevars, cells))
