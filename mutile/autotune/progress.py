"""The tuning progress bar (tqdm, from the ``[tune]`` extra): config i of n, the best time
so far and the time left. Quiet when stdout is not a terminal, when tqdm is missing, or
when ``MUTILE_TUNE_PROGRESS=0``; ``MUTILE_TUNE_PROGRESS=1`` shows it on any stream."""
from __future__ import annotations

import math
import os
import sys


def _wanted(stream) -> bool:
    env = os.environ.get("MUTILE_TUNE_PROGRESS", "").strip()
    if env in ("0", "1"):
        return env == "1"
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """``with Progress(name, n) as p: ... p.update(ms)`` once per measured config."""

    def __init__(self, name: str, total: int, stream=None):
        self.name, self.total = name, total
        self.stream = stream if stream is not None else sys.stdout
        self.best = math.inf
        self.bar = None
        if total > 1 and _wanted(self.stream):
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, desc=f"tuning {name}", file=self.stream,
                            unit="config", leave=False, dynamic_ncols=True)

    def update(self, ms: float, cached: bool = False) -> None:
        self.best = min(self.best, ms)
        if self.bar is None:
            return
        best = f"{self.best:.4g} ms" if math.isfinite(self.best) else "none yet"
        self.bar.set_postfix_str(f"best {best}", refresh=False)
        self.bar.update(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False


__all__ = ["Progress"]
