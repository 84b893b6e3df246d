"""The generic tile-IR passes and the pipeline that runs them.

Each pass lives in its own file named like the pass (``cse.py`` is ``cse``) and
registers itself with ``@register("cse")``; a pass takes a module, rewrites it in
place and returns it. ``PIPELINE`` is the default order; ``run_pipeline`` runs a list
of named stages and keeps the IR text after each one (``k.asm[name]``,
``mutile ir --pass NAME``).
"""
from __future__ import annotations

import os

from ..errors import VerifyError
from ..ir import Module, verify as verify_module
from .registry import PASSES, register

# importing the pass files fills PASSES
from . import canonicalize, cse, dce, inline, licm  # noqa: E402,F401

PIPELINE = [
    "inline",        # one function: the kernel, every call inlined
    "canonicalize",  # fold constants, exact identities, constant if/for
    "cse",           # merge identical pure ops
    "licm",          # hoist loop-invariant pure ops out of for bodies
    "dce",           # drop unused pure ops, loop-carried values and if results
]


def run_pipeline(module: Module, names=PIPELINE, verify: bool = False, dump=None):
    """Run the passes ``names`` in order on ``module`` (rewritten in place).

    Returns ``(module, stages)``: ``stages`` maps each stage name to the IR text after
    it, in order. With ``verify`` (or env ``MUTILE_VERIFY=1``) the verifier checks the
    input and the output of every pass. ``dump``, if given, is called as
    ``dump(name, text)`` after each stage.
    """
    verify = verify or os.environ.get("MUTILE_VERIFY") == "1"
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise ValueError(f"unknown pass {unknown[0]!r}; passes are {', '.join(sorted(PASSES))}")
    if verify:
        _verify(module, "before the passes")
    stages: dict[str, str] = {}
    for name in names:
        module = PASSES[name](module)
        if verify:
            _verify(module, f"after pass '{name}'")
        stages[name] = str(module)
        if dump is not None:
            dump(name, stages[name])
    return module, stages


def _verify(module: Module, when: str) -> None:
    try:
        verify_module(module)
    except VerifyError as e:
        raise VerifyError(f"{when}: {e.msg}", e.loc) from e


__all__ = ["PASSES", "PIPELINE", "register", "run_pipeline"]
