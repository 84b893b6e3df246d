"""The tile IR's text form. :mod:`mutile.ir.parser` reads exactly this back.

Every op prints in one generic shape, driven by its definition::

    %r = name %a, %b {attr = value} : result-types loc(#file:line:col)

followed, for ops with regions, by each region as ``(%arg: type, ...) { ops }``.
Source files are listed once at the top (``#0 = "path"``). Values keep the Python
variable names the frontend gave them (``%offs``), made unique per function.
"""
from __future__ import annotations

import math

from .core import MODULE_HOOKS, Block, Func, Module, Op, Value
from .types import Type


def format_attr(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return '"' + "".join(_escape(c) for c in v) + '"'
    if isinstance(v, Type):
        return str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    raise TypeError(f"attribute value {v!r} has no text form")


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(c: str) -> str:
    """``c`` as it appears inside a string literal (read back with Python's rules)."""
    if c in _ESCAPES:
        return _ESCAPES[c]
    if c.isprintable():
        return c
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


class _Namer:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.count = 0

    def define(self, v: Value) -> str:
        # a hint is kept if it is a name the parser reads back as one (a parsed
        # numbered value, hint "3", is renumbered like any unnamed value)
        h = v.hint
        ok = bool(h) and h.isascii() and h.replace("_", "a").isalnum() and not h[0].isdigit()
        base = h if ok else ""
        if base and base not in self.used:
            name = base
        elif base:
            n = 1
            while f"{base}_{n}" in self.used:
                n += 1
            name = f"{base}_{n}"
        else:
            while str(self.count) in self.used:
                self.count += 1
            name = str(self.count)
        self.used.add(name)
        self.names[id(v)] = "%" + name
        return "%" + name

    def __getitem__(self, v: Value) -> str:
        return self.names.get(id(v), "%<undefined>")


class Printer:
    def __init__(self, module: Module):
        self.files: dict[str, int] = {}
        for op in module.walk():
            self.files.setdefault(op.loc.file, len(self.files))
        for f in module.funcs.values():
            self.files.setdefault(f.loc.file, len(self.files))
        self.lines: list[str] = []

    def loc(self, loc) -> str:
        return f"loc(#{self.files[loc.file]}:{loc.line}:{loc.col})"

    def module(self, m: Module) -> str:
        for path, i in self.files.items():
            self.lines.append(f"#{i} = {format_attr(path)}")
        for f in m.funcs.values():
            self.func(f, f.name == m.kernel)
        return "\n".join(self.lines) + "\n"

    def func(self, f: Func, is_kernel: bool):
        names = _Namer()
        args = ", ".join(f"{names.define(a)}: {a.type}" for a in f.args)
        res = ", ".join(map(str, f.result_types))
        kw = "kernel" if is_kernel else "func"
        attrs = "" if not f.attrs else " " + _attr_dict(f.attrs)
        self.lines.append(f"{kw} @{f.name}({args}) -> ({res}){attrs} {self.loc(f.loc)} {{")
        self.block_ops(f.body, names, 1)
        self.lines.append("}")

    def block_ops(self, b: Block, names: _Namer, depth: int):
        for op in b.ops:
            self.op(op, names, depth)

    def op(self, op: Op, names: _Namer, depth: int):
        pad = "  " * depth
        operands = ", ".join(names[v] for v in op.operands)
        results = ", ".join(names.define(r) for r in op.results)
        text = f"{results} = {op.name}" if op.results else op.name
        if operands:
            text += " " + operands
        if op.attrs:
            text += " " + _attr_dict(op.attrs)
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        text += " " + self.loc(op.loc)
        if not op.regions:
            self.lines.append(pad + text)
            return
        for i, r in enumerate(op.regions):
            args = ", ".join(f"{names.define(a)}: {a.type}" for a in r.args)
            self.lines.append(pad + text + f" ({args}) {{")
            self.block_ops(r, names, depth + 1)
            text = "}"
        self.lines.append(pad + "}")


def _attr_dict(attrs: dict) -> str:
    return "{" + ", ".join(f"{k} = {format_attr(v)}" for k, v in sorted(attrs.items())) + "}"


def print_module(m: Module) -> str:
    """The module as text that :func:`mutile.ir.parser.parse` turns back into it."""
    return Printer(m).module(m)


MODULE_HOOKS["print"] = print_module
