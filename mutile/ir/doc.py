"""Generate ``docs/ir-ops.md`` from the op table (``python -m mutile.ir.doc``)."""
from __future__ import annotations

import sys

from .ops import OPS


def render() -> str:
    lines = ["# Tile IR ops", "",
             "Generated from `mutile/ir/ops.py` by `python -m mutile.ir.doc > docs/ir-ops.md`;",
             "a test fails when this file is stale. Operands: `x?` optional, `x*` variadic.", "",
             "| op | operands | attributes | regions | meaning |",
             "|---|---|---|---|---|"]
    for name, d in OPS.items():
        attrs = ", ".join(list(d.attrs) + [f"{a}?" for a in d.optional_attrs])
        ops = ", ".join(d.operands)
        lines.append(f"| `{name}` | {ops} | {attrs} | {d.regions or ''} | {d.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
