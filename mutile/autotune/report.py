"""Tuning decisions: the record of one (``kernel.tuning_log`` holds them), the table
``mutile tune`` prints, the JSON file ``--export`` writes and ``configs_file=`` reads, and
the list of every decision made in this process (what ``mutile tune`` reports)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from ..errors import LaunchError
from . import config as C

FORMAT = "mutile-tuned-configs"
DECISIONS: list = []            # every Decision of this process, in order (mutile tune)
_MAX_KEPT = 10_000


@dataclass
class Decision:
    """One tuning decision: ``kernel`` (qualified name), ``key`` (the tuning key),
    ``backend``, ``winner`` (the Config), ``timings`` (identity -> [median, p20, p80] ms,
    modelled on Pinghu), ``reasons`` (identity -> why a config failed), ``measured`` and
    ``cached`` (identities measured now / read from the disk cache), ``source``
    ("tuned", "disk cache" or "configs_file"), ``seconds`` (wall time of the tuning),
    ``configs`` (identity -> Config, in the order considered) and ``notes``."""
    kernel: str
    key: tuple
    backend: str
    winner: object
    timings: dict = field(default_factory=dict)
    reasons: dict = field(default_factory=dict)
    measured: list = field(default_factory=list)
    cached: list = field(default_factory=list)
    source: str = "tuned"
    seconds: float = 0.0
    configs: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def ranked(self) -> list:
        """(identity, timing) of every timed config, fastest first."""
        return sorted(self.timings.items(), key=lambda kv: kv[1])

    @property
    def runner_up(self):
        r = [i for i, t in self.ranked() if math.isfinite(t[0])]
        return self.configs.get(r[1]) if len(r) > 1 else None

    def line(self) -> str:
        """The one line ``MUTILE_PRINT_AUTOTUNING=1`` prints."""
        return (f"Autotuning kernel {self.kernel} with config {self.winner} finished after "
                f"{self.seconds:.2f}s, key {self.key}, backend {self.backend} "
                f"({len(self.measured)} measured, {len(self.cached)} from the cache)")

    def table(self) -> str:
        unit = "modelled ms" if self.backend == "pinghu" else "median ms"
        rows = [f"kernel {self.kernel}  key {self.key}  backend {self.backend}  "
                f"({self.source}, {self.seconds:.2f}s)",
                f"  winner:    {C.short(self.winner)}"]
        if self.runner_up is not None:
            rows.append(f"  runner-up: {C.short(self.runner_up)}")
        width = max([len(C.short(c)) for c in self.configs.values()] + [6])
        rows.append(f"  {'config'.ljust(width)}  {unit:>12}  from")
        for ident, t in self.ranked():
            c = self.configs.get(ident)
            name = C.short(c) if c is not None else ident
            where = "cache" if ident in self.cached else "measured"
            ms = f"{t[0]:.6g}" if math.isfinite(t[0]) else "failed"
            rows.append(f"  {name.ljust(width)}  {ms:>12}  {where}"
                        + (f"  ({self.reasons[ident]})" if ident in self.reasons else ""))
        rows += [f"  note: {n}" for n in self.notes]
        return "\n".join(rows)

    def to_json(self) -> dict:
        runner = self.runner_up
        return {"kernel": self.kernel, "key": C.key_text(self.key), "backend": self.backend,
                "config": C.to_dict(self.winner),
                "runner_up": C.to_dict(runner) if runner is not None else None,
                "ms": self.timings.get(C.identity(self.winner), [None])[0],
                "table": [{"config": C.to_dict(self.configs[i]), "ms": t[0],
                           "reason": self.reasons.get(i)}
                          for i, t in self.ranked() if i in self.configs]}


def record(decision: Decision) -> None:
    DECISIONS.append(decision)
    del DECISIONS[:-_MAX_KEPT]


def export(path, decisions=None) -> int:
    """Write ``decisions`` (default: every one of this process; the last per kernel, key
    and backend) to ``path`` as JSON; returns how many."""
    last = {}
    for d in DECISIONS if decisions is None else decisions:
        last[d.kernel, C.key_text(d.key), d.backend] = d
    doc = {"format": FORMAT, "version": 1, "decisions": [d.to_json() for d in last.values()]}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=repr)
    return len(last)


def load(path) -> dict:
    """``configs_file``: (kernel, key text, backend) -> the config's JSON form."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise LaunchError(f"autotune configs_file {path}: cannot read it ({e.strerror})") \
            from None
    except json.JSONDecodeError as e:
        raise LaunchError(f"autotune configs_file {path} is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise LaunchError(f"autotune configs_file {path} is not a file written by "
                          f"`mutile tune --export` (no \"format\": \"{FORMAT}\")")
    out = {}
    for d in doc.get("decisions", []):
        try:
            out[d["kernel"], d["key"], d["backend"]] = d["config"]
        except (KeyError, TypeError):
            raise LaunchError(f"autotune configs_file {path}: a decision lacks kernel, key, "
                              f"backend or config: {d!r}") from None
    return out


__all__ = ["DECISIONS", "Decision", "export", "load", "record"]
