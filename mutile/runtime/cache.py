"""Compilation caches: in memory per specialization, and on disk.

A disk entry's key hashes the kernel's source, the specialization, the options, the
backend, the environment switches that change code, and a hash of the compiler's own
sources; the entry records the dependencies found while compiling (each ``@jit``
callee's source hash and each constant global's value) and is used only while all of
them still hold. Entries are written atomically (temp file + rename) with a checksum;
an unreadable, truncated or corrupt entry is ignored and rebuilt.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import os
import pickle
import sys
import tempfile
from pathlib import Path

_MAGIC = b"MUTILE1\n"
ENV_SWITCHES = ("MUTILE_CHECK_BOUNDS", "MUTILE_VERIFY")


@functools.lru_cache(maxsize=None)
def compiler_hash() -> str:
    """Hash of every source and grammar file of mutile and its backends."""
    h = hashlib.sha256()
    top = sys.modules[__name__.partition(".")[0]]      # mutile, loaded (no import: no circle)
    roots = [os.path.dirname(top.__file__)]
    for sub in ("backends", "grammar"):
        try:
            mod = importlib.import_module(f"mutile.{sub}")
        except ImportError:  # pragma: no cover - partial installs
            continue
        roots.append(os.path.dirname(mod.__file__))
    for root in dict.fromkeys(roots):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".py", ".lark")):
                    path = os.path.join(dirpath, name)
                    h.update(path[len(root):].encode())
                    with open(path, "rb") as f:
                        h.update(f.read())
    return h.hexdigest()


_FILE_HASHES: dict = {}


def _file_hash(path: str) -> str | None:
    """sha256 of a source file, cached while its size and mtime stay the same."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_mtime_ns, st.st_size)
    h = _FILE_HASHES.get(key)
    if h is None:
        with open(path, "rb") as f:
            h = hashlib.sha256(f.read()).hexdigest()
        _FILE_HASHES[key] = h
    return h


def source_hash(fn) -> str:
    """A hash that changes whenever ``fn``'s source may have changed: its file's content
    (so editing anything in that file counts), the file's path, its name and first line.

    The path is part of it because a compiled kernel names its source in every location
    (fault reports, ISA listings): a copy of the same file at another path (a second
    checkout sharing the cache directory) must get its own entry, naming its own file."""
    code = fn.__code__
    fh = _file_hash(code.co_filename)
    if fh is None:                      # no file (an interactive session): hash the text
        try:
            fh = hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()
        except (OSError, TypeError):
            fh = hashlib.sha256(code.co_code).hexdigest()
    return f"{fh}:{os.path.abspath(code.co_filename)}:{fn.__qualname__}:{code.co_firstlineno}"


def cache_dir() -> Path:
    return Path(os.environ.get("MUTILE_CACHE_DIR", Path.home() / ".cache" / "mutile"))


def make_key(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\0")
    for e in ENV_SWITCHES:
        h.update(f"{e}={os.environ.get(e, '')}".encode())
    h.update(compiler_hash().encode())
    return h.hexdigest()


def resolve_function(module_name: str, qualname: str):
    mod = sys.modules.get(module_name)
    obj = mod
    for part in qualname.split("."):
        if obj is None or part == "<locals>":
            return None
        obj = getattr(obj, part, None)
    return obj


def deps_hold(deps) -> bool:
    """True while every recorded dependency still has the value it had at compile time."""
    for d in deps:
        kind = d[0]
        if kind == "global":
            _, module_name, name, value = d
            mod = sys.modules.get(module_name)
            if mod is None or not hasattr(mod, name):
                return False
            cur = getattr(mod, name)
            cur = getattr(cur, "value", cur) if type(cur).__name__ == "constexpr" else cur
            if repr(cur) != value:
                return False
        elif kind == "jit":
            _, module_name, qualname, h = d
            obj = resolve_function(module_name, qualname)
            fn = getattr(obj, "fn", None)
            if fn is None or source_hash(fn) != h:
                return False
    return True


def load(key: str):
    """The payload stored under ``key``, or None (missing, corrupt or truncated)."""
    path = cache_dir() / key[:2] / f"{key}.bin"
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 32:
        return None
    digest, body = data[len(_MAGIC):len(_MAGIC) + 32], data[len(_MAGIC) + 32:]
    if hashlib.sha256(body).digest() != digest:
        return None
    try:
        return pickle.loads(body)
    except Exception:  # a corrupt entry is a cache miss, never a crash
        return None


def store(key: str, payload) -> None:
    """Write ``payload`` atomically; failures to write (read-only dir...) are ignored."""
    d = cache_dir() / key[:2]
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    data = _MAGIC + hashlib.sha256(body).digest() + body
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{key[:8]}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, d / f"{key}.bin")
    except OSError:
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass
