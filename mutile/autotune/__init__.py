"""Autotuning (issue 13): :func:`autotune` (Triton's decorator) and :class:`Autotuner`,
:class:`ConfigSpace`, searches, the per-config disk cache, parallel and distributed
measurement. ``docs/autotune.md`` is the guide.

    api       the decorator, the Autotuner, the tuning loop
    config    a config's identity and JSON form; ConfigSpace
    search    exhaustive, random and model (Optuna TPE) searches
    measure   one config's run and time (modelled on Pinghu, wall time on llvm)
    store     the disk cache of measurements and decisions
    executor  measuring in worker processes or any concurrent.futures.Executor
    progress  the progress bar (tqdm)
    report    decisions: the log, the tables, export / configs_file
    cli       ``mutile tune script.py``
    bench     the acceptance figures (``mutile bench --backend autotune``)
"""
from .api import Autotuner, autotune
from .config import ConfigSpace
from .report import DECISIONS, Decision

__all__ = ["Autotuner", "ConfigSpace", "DECISIONS", "Decision", "autotune"]
