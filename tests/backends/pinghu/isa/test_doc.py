"""docs/isa.md is generated from the instruction table and must be current; its example
listing is valid canonical assembly."""
import re
from pathlib import Path

from mutile.backends.pinghu import assemble, disassemble
from mutile.backends.pinghu.isa.doc import render
from mutile.backends.pinghu.isa import INSTRS

DOC = Path(__file__).resolve().parents[4] / "docs" / "isa.md"


def test_isa_reference_is_current():
    assert DOC.read_text() == render(), (
        "docs/isa.md is stale: run `python -m mutile.backends.pinghu.isa.doc > docs/isa.md`")


def test_every_row_is_documented():
    text = render()
    for row in INSTRS:
        assert f"| {row.opcode} | `{row.mnemonic}` |" in text


def test_the_example_listing_is_canonical():
    block = re.search(r"```\n(// scale a row.*?)```", render(), re.S).group(1)
    assert disassemble(assemble(block)) == block
