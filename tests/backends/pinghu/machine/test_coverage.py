"""Every row of the instruction table has interpreter semantics, and the interpreter
tests run every row (each test module lists the rows it exercises in ``COVERS``)."""
import pytest

import mutile.backends.pinghu.machine  # noqa: F401  (every unit's rows register)
from mutile.backends.pinghu.machine.rows import IMPLS, build
from mutile.backends.pinghu.isa import INSTRS

from . import (test_alu, test_async, test_atomic, test_control, test_cvt_sfu, test_faults,
               test_memory, test_warp)
from ..gen import Draw, instruction


@pytest.mark.parametrize("row", INSTRS, ids=lambda r: r.mnemonic)
def test_every_row_has_semantics(row):
    assert row.family in IMPLS, f"{row.mnemonic}: no interpreter builder for {row.family}"
    for seed in range(3):
        build(instruction(Draw.rng(seed * 1000 + row.opcode), row, 4))


def test_every_row_is_exercised():
    covered = set().union(*(m.COVERS for m in (
        test_alu, test_async, test_atomic, test_control, test_cvt_sfu, test_faults,
        test_memory, test_warp)))
    missing = sorted(r.mnemonic for r in INSTRS if r.mnemonic not in covered)
    assert not missing, f"rows no interpreter test runs: {missing}"
