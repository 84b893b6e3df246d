"""What a config *is* to the tuner: its identity (the text the disk cache and the log key
it by), its JSON form (``mutile tune --export``, ``configs_file=``), and
:class:`ConfigSpace`, a product of meta-parameter and option values that expands to
:class:`~mutile.runtime.jit.Config` objects.

Unlike Triton, a config's ``pre_hook`` is part of its identity by qualified name, so a
config with a hook can still be cached on disk."""
from __future__ import annotations

import itertools
import json

from ..errors import LaunchError
from ..runtime.jit import Config

# the option fields of Config, in the order its constructor takes them
OPTION_FIELDS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "warp_specialize")


def hook_name(fn) -> str | None:
    """``module:qualname`` of a hook (None for none)."""
    if fn is None:
        return None
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def identity(config: Config) -> str:
    """A stable text naming ``config``: its meta-parameters (sorted), its options and its
    pre-hook's qualified name. Two configs with the same identity launch the same way."""
    kw = ", ".join(f"{k}={config.kwargs[k]!r}" for k in sorted(config.kwargs))
    opts = ", ".join(f"{f}={getattr(config, f, None)!r}" for f in OPTION_FIELDS)
    hook = hook_name(config.pre_hook)
    return f"{{{kw}}} {opts}" + (f" pre_hook={hook}" if hook else "")


def short(config: Config) -> str:
    """The config as the tables print it: ``BLOCK_M=64 BLOCK_N=32 w4 s3 ws``."""
    parts = [f"{k}={v}" for k, v in config.kwargs.items()]
    parts += [f"w{config.num_warps}", f"s{config.num_stages}"]
    if config.num_ctas != 1:
        parts.append(f"ctas{config.num_ctas}")
    if config.maxnreg:
        parts.append(f"maxnreg{config.maxnreg}")
    if getattr(config, "warp_specialize", False):
        parts.append("ws")
    return " ".join(parts)


def _plain(v):
    """A JSON value for a meta-parameter (numbers, strings, bools as is; others by repr)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return repr(v)


def to_dict(config: Config) -> dict:
    """The JSON form of ``config`` (the pre-hook by name only)."""
    out = {"kwargs": {k: _plain(v) for k, v in config.kwargs.items()}}
    out.update({f: getattr(config, f, None) for f in OPTION_FIELDS})
    out["pre_hook"] = hook_name(config.pre_hook)
    return out


def from_dict(d: dict, known=()) -> Config:
    """The config of ``d`` (from :func:`to_dict`): one of ``known`` with that identity if
    there is one (it keeps its hook), else a new Config without a hook."""
    if not isinstance(d, dict) or not isinstance(d.get("kwargs"), dict):
        raise LaunchError(f"a tuned config must be a dict with 'kwargs', got {d!r}")
    opts = {f: d[f] for f in OPTION_FIELDS if d.get(f) is not None}
    config = Config(d["kwargs"], **opts)
    want = identity(config).split(" pre_hook=")[0]
    for c in known:
        if identity(c).split(" pre_hook=")[0] == want and hook_name(c.pre_hook) == d.get(
                "pre_hook"):
            return c
    return config


def key_text(key: tuple) -> str:
    """A tuning key as JSON text (what ``configs_file`` decisions are matched by)."""
    return json.dumps([_plain(k) for k in key])


class ConfigSpace:
    """A space of configs: every combination of the values given, kept if ``constraint``
    (a function of the dict of one combination's values) returns true.

        mutile.ConfigSpace(BLOCK_M=[32, 64], BLOCK_N=[32, 64], num_warps=[4, 8],
                           num_stages=[2, 3], warp_specialize=[False, True],
                           constraint=lambda c: c["BLOCK_M"] * c["BLOCK_N"] <= 64 * 64)

    Names that are Config options (``num_warps``, ``num_stages``, ``num_ctas``,
    ``maxnreg``, ``warp_specialize``) become options, the rest meta-parameters.
    ``pre_hook`` applies to every config. ``len()`` is the number of configs."""

    def __init__(self, constraint=None, pre_hook=None, **axes):
        if not axes:
            raise LaunchError("ConfigSpace needs at least one axis, e.g. BLOCK=[32, 64]")
        for name, values in axes.items():
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                raise LaunchError(f"ConfigSpace: {name} must be a list of values, got "
                                  f"{values!r}")
            if not list(values):
                raise LaunchError(f"ConfigSpace: {name} has no values")
        if constraint is not None and not callable(constraint):
            raise LaunchError(f"ConfigSpace: constraint must be a function of the dict of "
                              f"one config's values, got {constraint!r}")
        self.axes = {name: list(values) for name, values in axes.items()}
        self.constraint, self.pre_hook = constraint, pre_hook
        self._configs = None

    def point_config(self, point: dict) -> Config:
        """The Config of one combination ``point`` (axis name -> value)."""
        kwargs = {k: v for k, v in point.items() if k not in OPTION_FIELDS}
        opts = {k: v for k, v in point.items() if k in OPTION_FIELDS}
        return Config(kwargs, pre_hook=self.pre_hook, **opts)

    def allows(self, point: dict) -> bool:
        if self.constraint is None:
            return True
        try:
            return bool(self.constraint(dict(point)))
        except Exception as e:
            raise LaunchError(f"ConfigSpace: the constraint raised {type(e).__name__}: {e} "
                              f"for {point}") from e

    def points(self) -> list[dict]:
        """Every allowed combination, in the order of the axes' values (last axis fastest)."""
        names = list(self.axes)
        combos = (dict(zip(names, vals)) for vals in itertools.product(*self.axes.values()))
        return [p for p in combos if self.allows(p)]

    def configs(self) -> list[Config]:
        if self._configs is None:
            self._configs = [self.point_config(p) for p in self.points()]
            if not self._configs:
                raise LaunchError(f"ConfigSpace: the constraint rejects every one of the "
                                  f"{self.size()} combinations")
        return self._configs

    def size(self) -> int:
        """The number of combinations before the constraint."""
        n = 1
        for values in self.axes.values():
            n *= len(values)
        return n

    def __len__(self):
        return len(self.configs())

    def __iter__(self):
        return iter(self.configs())

    def __repr__(self):
        axes = ", ".join(f"{k}={v}" for k, v in self.axes.items())
        return f"ConfigSpace({axes}{', constraint' if self.constraint else ''})"


__all__ = ["ConfigSpace", "OPTION_FIELDS", "from_dict", "identity", "key_text", "short",
           "to_dict"]
