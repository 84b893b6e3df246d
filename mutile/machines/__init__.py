"""Machine files: every number the verifier, the codegen and the cycle model use, one file
per machine (``pinghu.toml`` here), each entry with its source or the word *assumed*.

    facts = machines.default()            # the shipped Pinghu file
    facts.value("device", "mp_count")     # 56
    other = machines.load("fast_tme.toml")  # the default, with that file's entries changed

A user's file lists only what it changes, under the same sections and names; it may not
change ``[isa]`` (the instruction set's facts: the compiler checks kernels against them).
``MUTILE_MACHINE=path`` makes :func:`current` load that file. This module is in the base
layer: it imports nothing of mutile's but the errors.
"""
from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from mutile.errors import MutileError

ENV = "MUTILE_MACHINE"
DEFAULT_PATH = Path(__file__).with_name("pinghu.toml")
FIXED_SECTIONS = ("isa",)


class MachineFileError(MutileError):
    """A machine file that cannot be read, or names an entry the default does not have."""


@dataclass(frozen=True)
class Entry:
    """One fact: its value and where it comes from ("assumed: why" when not public)."""
    value: object
    source: str

    @property
    def assumed(self) -> bool:
        return self.source.lower().startswith(("assumed", "modelling choice", "interpreter"))


class MachineFile:
    """The entries of one machine, by (section, name); ``hash`` identifies the values
    (the autotuner's cache and the profiler's records carry it)."""

    def __init__(self, entries: dict, path: str, overrides: tuple = ()):
        self.entries = entries
        self.path = path
        self.overrides = overrides          # (section, name) the user's file changed
        text = repr(sorted((k, repr(e.value)) for k, e in entries.items()))
        self.hash = hashlib.sha256(text.encode()).hexdigest()[:16]

    def value(self, section: str, name: str):
        """The value of entry ``name`` of ``section``."""
        try:
            return self.entries[section, name].value
        except KeyError:
            raise MachineFileError(f"machine file {self.path}: no entry [{section}] {name}") \
                from None

    def entry(self, section: str, name: str) -> Entry:
        return self.entries[section, name]

    def __repr__(self) -> str:
        return f"<MachineFile {self.path} ({len(self.entries)} entries, {self.hash})>"


def _read(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except OSError as e:
        raise MachineFileError(f"cannot read machine file {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise MachineFileError(f"machine file {path} is not valid TOML: {e}") from None
    out = {}
    for section, table in raw.items():
        if not isinstance(table, dict):
            raise MachineFileError(f"machine file {path}: '{section}' must be a section "
                                   f"([{section}]) of entries")
        for name, e in table.items():
            if not isinstance(e, dict) or "value" not in e:
                raise MachineFileError(f"machine file {path}: [{section}] {name} must be "
                                       f"{{ value = ..., source = \"...\" }}")
            extra = set(e) - {"value", "source"}
            if extra:
                raise MachineFileError(f"machine file {path}: [{section}] {name} has unknown "
                                       f"keys {sorted(extra)} (only value and source)")
            out[section, name] = (e["value"], e.get("source"))
    return out


@lru_cache(maxsize=None)
def default() -> MachineFile:
    """The shipped Pinghu machine file; every entry must name its source."""
    entries = {}
    for k, (v, src) in _read(DEFAULT_PATH).items():
        if not isinstance(src, str) or not src.strip():
            raise MachineFileError(f"{DEFAULT_PATH}: [{k[0]}] {k[1]} has no source")
        entries[k] = Entry(v, src)
    return MachineFile(entries, str(DEFAULT_PATH))


def _same_shape(old, new) -> bool:
    if isinstance(old, bool) or isinstance(new, bool):
        return type(old) is type(new)
    if isinstance(old, (int, float)):
        return isinstance(new, (int, float))
    if isinstance(old, dict):
        return isinstance(new, dict) and set(new) <= set(old) and \
            all(_same_shape(old[k], new[k]) for k in new)
    return type(old) is type(new)


def load(path=None) -> MachineFile:
    """The default machine with the entries of the file at ``path`` changed (None: the
    default). A changed dict entry (e.g. ``[latency] cycles = { value = { tme = 50 } }``)
    changes only the keys it lists."""
    if path is None:
        return default()
    if isinstance(path, MachineFile):
        return path
    return _load(str(Path(path).resolve()), os.path.getmtime(path) if os.path.exists(path)
                 else 0.0)


@lru_cache(maxsize=32)
def _load(path: str, _mtime: float) -> MachineFile:
    base = default()
    entries = dict(base.entries)
    changed = []
    for (section, name), (v, src) in _read(Path(path)).items():
        old = base.entries.get((section, name))
        if old is None:
            near = sorted(n for (s, n) in base.entries if s == section)
            raise MachineFileError(f"machine file {path}: [{section}] {name} is not an entry "
                                   f"of the Pinghu machine" + (f" (the section has: "
                                   f"{', '.join(near)})" if near else
                                   f" (sections: {', '.join(sorted({s for s, _ in base.entries}))})"))
        if section in FIXED_SECTIONS and v != old.value:
            raise MachineFileError(f"machine file {path}: [{section}] {name} is a fact of the "
                                   f"instruction set (kernels are compiled and checked "
                                   f"against it); a machine file cannot change it")
        if not _same_shape(old.value, v):
            raise MachineFileError(f"machine file {path}: [{section}] {name} = {v!r} does not "
                                   f"have the shape of the default {old.value!r}")
        if isinstance(old.value, dict):
            v = {**old.value, **v}
        entries[section, name] = Entry(v, src if isinstance(src, str) and src.strip()
                                       else f"changed by {path}")
        changed.append((section, name))
    return MachineFile(entries, path, tuple(changed))


def current(machine=None) -> MachineFile:
    """``machine`` (a path or a MachineFile) if given, else the file ``MUTILE_MACHINE``
    names, else the default."""
    if machine is not None:
        return load(machine)
    env = os.environ.get(ENV)
    return load(env) if env else default()
