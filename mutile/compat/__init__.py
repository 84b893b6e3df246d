"""Code written for Triton, run by mutile.

:func:`as_triton` puts ``triton`` and its submodules into ``sys.modules`` as aliases of
mutile's modules: ``triton.language`` (and every submodule, ``extra.libdevice``,
``extra.cuda``, ``extra.musa``, ``math``... included) *is* ``mutile.language``,
``triton.testing`` is ``mutile.testing``, ``triton.runtime`` and ``triton.tools`` are the
small modules of this package. Importing any other ``triton.*`` module then fails with an
ImportError that names mutile. :func:`run_script` runs a script with the aliases
installed (``mutile run script.py [args]``).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import runpy
import sys

from ..errors import MutileError
from . import triton as _triton

TRITON_VERSION = _triton.__version__


def _aliases() -> dict:
    """``triton.*`` module name -> the mutile module it stands for."""
    from .. import language, testing
    from ..runtime import descriptor, jit
    from . import autotuner, driver, runtime, tools
    out = {"triton": _triton, "triton.language": language, "triton.testing": testing,
           "triton.runtime": runtime, "triton.runtime.jit": jit,
           "triton.runtime.autotuner": autotuner, "triton.runtime.driver": driver,
           "triton.tools": tools, "triton.tools.tensor_descriptor": descriptor}
    for info in pkgutil.walk_packages(language.__path__, "mutile.language."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue                # a submodule that cannot load: the finder explains
        out["triton.language." + info.name.removeprefix("mutile.language.")] = module
    return out


class _MissingTriton:
    """A ``sys.meta_path`` finder, first in line while the aliases are installed: any
    ``triton.*`` module that is not an alias is an ImportError naming mutile (instead of
    Python finding a real Triton's submodule under mutile's ``triton``)."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if not (fullname == "triton" or fullname.startswith("triton.")):
            return None
        if sys.modules.get("triton") is not _triton:
            return None
        rest = fullname.removeprefix("triton.")
        if rest.startswith("language."):
            mine = "mutile.language." + rest.removeprefix("language.")
            try:
                importlib.import_module(mine)
                why = f"{mine} exists but was not aliased; call mutile.as_triton() again"
            except ImportError as e:
                why = f"{mine} cannot be imported ({e})"
        else:
            why = f"mutile implements Triton {TRITON_VERSION}'s API without a '{fullname}'"
        raise ImportError(f"No module named '{fullname}' in mutile's triton aliases "
                          f"(mutile.as_triton()): {why}; see docs/triton-compat.md",
                          name=fullname)


def as_triton():
    """Install the ``triton`` aliases (once; calling again refreshes them) and return the
    ``triton`` module. Refused with a :class:`~mutile.MutileError` if a real ``triton``
    (or part of one) is already imported."""
    theirs = [n for n, m in sys.modules.items() if (n == "triton" or n.startswith("triton."))
              and m is not None and not _is_ours(m)]
    if theirs:
        where = getattr(sys.modules.get(theirs[0]), "__file__", None) or theirs[0]
        raise MutileError(f"a real triton is already imported ({where}); mutile.as_triton() "
                          "does not replace it: call it before anything imports triton, or "
                          "run the script with `mutile run script.py`")
    if sys.modules.get("triton") is not _triton:
        _let_torch_probe_first()
    sys.modules.update(_aliases())
    if not any(f is _MissingTriton for f in sys.meta_path):
        sys.meta_path.insert(0, _MissingTriton)
    return _triton


def _let_torch_probe_first() -> None:
    """torch asks once (and remembers) whether a Triton package is installed; finding one,
    its compiler stack (``torch._dynamo``, ``torch._inductor``) imports Triton's compiler
    internals, which mutile's aliases do not have. When torch is installed and no real
    Triton is, let torch ask before the aliases exist, so it gets the true answer: no."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton"):
        return
    from torch.utils._triton import has_triton_package
    has_triton_package()


def _is_ours(module) -> bool:
    name = getattr(module, "__name__", "")
    return name == "mutile" or name.startswith("mutile.")


def remove_triton() -> None:
    """Undo :func:`as_triton`: drop the aliases and the finder (a real triton may then be
    imported)."""
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        if _is_ours(sys.modules[name]):
            del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if f is not _MissingTriton]


def run_script(path: str, args=()) -> int:
    """Run the Python script ``path`` as ``__main__`` with ``sys.argv = [path, *args]``
    and the triton aliases installed, as ``python path args...`` would; returns its exit
    status (``sys.exit(n)`` gives n; an uncaught exception propagates)."""
    if not os.path.isfile(path):
        print(f"mutile run: no such file: {path}", file=sys.stderr)
        return 2
    try:
        as_triton()
    except MutileError as e:
        print(f"mutile run: {e}", file=sys.stderr)
        return 1
    sys.argv = [path, *args]
    sys.path[0:1] = [os.path.dirname(os.path.abspath(path))]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    return 0


__all__ = ["TRITON_VERSION", "as_triton", "remove_triton", "run_script"]
