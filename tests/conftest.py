"""Helpers shared by the IR, frontend and language tests.

* ``compile_ir(kernel, **spec)`` compiles a ``@mutile.jit`` function to tile IR only
  (no backend): the verifier runs before and after every pass, and every stage's text
  must parse back to an equal module that prints to the same text. It returns a
  :class:`Compiled` whose ``stage(name)`` is that stage's IR as a module.
* ``marked(fn, tag)`` finds the source line of ``fn`` holding ``# <tag>`` and the
  column of the text after ``<tag>:`` on that line, so tests name the construct they
  expect an error or an op to point at instead of hard-coding line numbers.
"""
from __future__ import annotations

import inspect

import pytest

from mutile import ir as mir
from mutile.runtime.compile import frontend_and_passes


def check_text_round_trip(text: str, what: str = "") -> mir.Module:
    """Parse ``text``, verify it and check that it prints back to ``text`` exactly.
    Returns the parsed module."""
    m = mir.verify(mir.parse(text))
    again = str(m)
    assert again == text, f"{what}: printing the parsed text changes it:\n{again}"
    return m


class Compiled:
    """The IR of one kernel specialization, stage by stage."""

    def __init__(self, module: mir.Module, stages: dict):
        self.module, self.stages = module, stages
        self._parsed: dict = {}

    def stage(self, name: str = "ir") -> mir.Module:
        if name not in self._parsed:
            self._parsed[name] = mir.parse(self.stages[name])
        return self._parsed[name]

    def ops(self, stage: str = "ir", func: str | None = None) -> list:
        """Every op of the kernel (or of ``func``) at ``stage``, in program order."""
        m = self.stage(stage)
        return list(m.funcs[func or m.kernel].walk())

    def names(self, stage: str = "ir") -> list[str]:
        return [op.name for op in self.ops(stage)]

    def only(self, name: str, stage: str = "ir"):
        """The single op called ``name`` of the kernel at ``stage``."""
        found = [op for op in self.ops(stage) if op.name == name]
        assert len(found) == 1, f"expected one '{name}' op, found {len(found)}:\n" \
                                f"{self.stages[stage]}"
        return found[0]


def _fill_defaults(kernel, spec: dict) -> dict:
    spec = dict(spec)
    for p, par in inspect.signature(kernel.fn).parameters.items():
        if p not in spec and par.default is not inspect.Parameter.empty:
            spec[p] = par.default
    return spec


@pytest.fixture
def compile_ir():
    def run(kernel, **spec) -> Compiled:
        module, stages, _ = frontend_and_passes(kernel, _fill_defaults(kernel, spec), {},
                                                verify=True)
        c = Compiled(module, stages)
        for name, text in stages.items():
            c._parsed[name] = check_text_round_trip(text, f"stage '{name}' of "
                                                          f"{kernel.fn.__name__}")
        assert c.stage(list(stages)[-1]) == module, "parse(print(m)) != m"
        return c
    return run


class Mark:
    """Where ``# tag: snippet`` sits: ``file``, ``line`` (1-based), ``col`` (0-based
    column of ``snippet`` in the line) and the line's ``text``."""

    def __init__(self, file, line, col, text):
        self.file, self.line, self.col, self.text = file, line, col, text


def marked(fn, tag: str = "LINE-MARK") -> Mark:
    fn = getattr(fn, "fn", fn)
    lines, first = inspect.getsourcelines(fn)
    hits = [(first + i, ln) for i, ln in enumerate(lines) if f"# {tag}" in ln]
    assert len(hits) == 1, f"{fn.__name__} has {len(hits)} '# {tag}' marks"
    line, text = hits[0]
    code, _, comment = text.partition(f"# {tag}")
    snippet = comment.partition(":")[2].partition("#")[0].strip()
    col = code.index(snippet) if snippet else len(code) - len(code.lstrip())
    return Mark(inspect.getsourcefile(fn), line, col, text.rstrip("\n"))


@pytest.fixture
def mark():
    return marked
