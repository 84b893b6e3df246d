"""Shared helpers of the ph verifier tests (test_pinghu_verifier_*.py).

Each kernel there breaks one rule of Pinghu's asynchronous engines (shared buffers,
AsyncBarriers, TME copies, SQMMA, warp specialization) and marks the offending line with
``# LINE-MARK: <text>``. Compiling it with ``kernel.warmup(..., backend="pinghu")`` must
raise a :class:`mutile.CompilationError` whose message names the rule and whose location
is that line (``file:line:col``, then the source line and a caret). The rules live in
``mutile/ir/ops_pinghu.py`` (per op),
``backends/pinghu/codegen/lowering/asynchronous.py`` (per kernel: totals,
warps, in-flight SQMMA results, partitions) and ``mutile/frontend/compiler.py``
(``ph.warp_specialize`` forms). Legal neighbours of the refused cases compile, so a rule
that refuses too much fails there too.
"""
from __future__ import annotations

import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph
from mutile.ir import parse, verify
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import marked  # noqa: F401  (re-exported to the tests)

BF16_64 = T.DescType(T.bf16, (64, 64))
F32_64 = T.DescType(T.f32, (64, 64))
P32 = T.PointerType(T.f32)
USER_ERROR_NOT_BUG = ("produced invalid IR", "internal error", "malformed op")
COMPILER_FILES = ("mutile/", "codegen.py", "compiler.py", "semantic.py", "standard.py",
                  "pinghu.py", "ops_pinghu.py", "backends/", "asynchronous.py", "context.py",
                  "site-packages", "Traceback")


@pytest.fixture(autouse=True)
def _plain_environment(tmp_path, monkeypatch):
    """What a user's ``warmup`` does by default: no verifier switch, a private cache."""
    monkeypatch.setenv("MUTILE_CACHE_DIR", str(tmp_path / "mutile-cache"))
    for name in ("MUTILE_VERIFY", "MUTILE_BACKEND", "MUTILE_CHECK_BOUNDS"):
        monkeypatch.delenv(name, raising=False)


def warm(kernel, *args, num_warps=4, backend="pinghu", **kw):
    return kernel.warmup(*args, backend=backend, grid=(1,), num_warps=num_warps, **kw)


def refused(kernel, *args, **kw) -> mutile.CompilationError:
    with pytest.raises(mutile.CompilationError) as info:
        warm(kernel, *args, **kw)
    return info.value


def check_at_mark(e: mutile.CompilationError, kernel, *fragments: str,
                  alt: str | None = None) -> None:
    """``e`` says every one of ``fragments`` and points at ``kernel``'s LINE-MARK line
    (or, given ``alt``, the line marked ``# <alt>``): ``file:line:`` heads the text, the
    source line and a caret follow, and no compiler file shows."""
    m = marked(kernel)
    if alt is not None and e.loc is not None and e.loc.line != m.line:
        m = marked(kernel, alt)
    text = str(e)
    for f in fragments:
        assert f in e.msg, f"message lacks {f!r}:\n{text}"
    for blame in USER_ERROR_NOT_BUG:
        assert blame not in e.msg, f"a user's mistake reported as a compiler bug:\n{text}"
    assert e.loc is not None, f"no location:\n{text}"
    assert (e.loc.file, e.loc.line) == (m.file, m.line), \
        f"error at {e.loc}, expected line {m.line} ({m.text.strip()!r}):\n{text}"
    lines = text.split("\n")
    assert len(lines) == 3, text
    assert lines[0].startswith(f"{m.file}:{m.line}:"), text
    assert lines[1] == "    " + m.text, text
    assert lines[2].strip() == "^", text
    rest = text.replace(m.file, "<user file>")
    for name in COMPILER_FILES:
        assert name not in rest, f"compiler file {name!r} leaks into:\n{text}"
