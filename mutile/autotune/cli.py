"""``mutile tune script.py [args]``: run a script (``triton`` aliased to mutile, as
``mutile run`` does), then print every tuning decision it made — kernel, key, winner,
runner-up and the table of configs with their modelled (Pinghu) or measured (llvm)
times — and with ``--export tuned.json`` write them for ``autotune(configs_file=...)``."""
from __future__ import annotations

import sys

from . import report


def add_parser(sub) -> None:
    """The ``tune`` subcommand of the ``mutile`` command."""
    p = sub.add_parser("tune", help="run a Python script, then print every autotuning "
                       "decision it made (and --export them as JSON)")
    p.add_argument("--export", default=None, metavar="TUNED.json",
                   help="write the decisions for mutile.autotune(..., configs_file=...)")
    p.add_argument("script", help="the script (FILE.py); `triton` is aliased to mutile")
    p.add_argument("args", nargs="...", help="the script's arguments")


def cmd_tune(args) -> int:
    from ..compat import run_script
    start = len(report.DECISIONS)
    status = run_script(args.script, args.args)
    sys.stdout.flush()
    made = report.DECISIONS[start:]
    print(f"\nmutile tune: {len(made)} tuning decision{'s' if len(made) != 1 else ''}")
    for d in made:
        print(d.table())
    if args.export:
        n = report.export(args.export, made)
        print(f"mutile tune: wrote {n} decision{'s' if n != 1 else ''} to {args.export}")
    return status


__all__ = ["add_parser", "cmd_tune"]
