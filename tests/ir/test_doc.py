"""docs/ir-ops.md is generated from the op table and must be current."""
from pathlib import Path

from mutile.ir import OPS
from mutile.ir.doc import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "ir-ops.md"


def test_ir_ops_reference_is_current():
    assert DOC.read_text() == render(), (
        "docs/ir-ops.md is stale: run `python -m mutile.ir.doc > docs/ir-ops.md`")


def test_every_op_has_a_meaning():
    missing = [name for name, d in OPS.items() if not d.doc.strip()]
    assert not missing, f"ops without a one-line meaning: {missing}"
