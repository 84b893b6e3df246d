"""Text-level helpers for the pass tests.

IR in the tests is written without the file header and with short locations:
``loc(7)`` stands for ``loc(#0:7:0)`` in file ``t.py``. Every pass output is
verified before it is compared (``ir.check``), structurally: value names do not
matter, locations do.
"""
from __future__ import annotations

import re

import pytest

from mutile import ir as mir
from mutile.passes import PASSES


class IRText:
    @staticmethod
    def text(src: str) -> str:
        return '#0 = "t.py"\n' + re.sub(r"loc\((\d+)\)", r"loc(#0:\1:0)", src)

    def parse(self, src: str) -> mir.Module:
        """Parse and verify ``src``."""
        return mir.verify(mir.parse(self.text(src)))

    def run(self, src: str, *names: str) -> mir.Module:
        """Parse ``src``, run the named passes in order and verify the result."""
        m = self.parse(src)
        for name in names:
            m = PASSES[name](m)
            mir.verify(m)
        return m

    def check(self, m: mir.Module, expected: str) -> None:
        """``m`` verifies and equals the module written as ``expected``."""
        mir.verify(m)
        want = self.parse(expected)
        assert m == want, f"got:\n{m}\nexpected:\n{want}"

    @staticmethod
    def ops(m: mir.Module) -> list[str]:
        """The names of every op of the kernel, in program order."""
        return [op.name for op in m.entry.walk()]


@pytest.fixture
def ir() -> IRText:
    return IRText()
