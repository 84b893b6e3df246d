"""The virtual MUSA ISA: the instruction table (rows in :mod:`.table`, the row type and the
registry it fills in :mod:`.instr`), operands, the program container, the binary encoding,
the assembler, the disassembler, the layouts the asynchronous engines and WMMA share
(:mod:`.tensor_memory`, :mod:`.wmma`) and the generator of ``docs/isa.md`` (:mod:`.doc`).
Imports only :mod:`mutile.ir` and :mod:`mutile.errors`; :mod:`..codegen`, :mod:`..machine`
and the backend's face import it, never the reverse."""
from . import table  # noqa: F401  (fills INSTRS and BY_MNEMONIC)
from .instr import BY_MNEMONIC, INSTRS, LATENCY_CLASSES, UNITS, Instr, table_hash

__all__ = ["BY_MNEMONIC", "INSTRS", "LATENCY_CLASSES", "UNITS", "Instr", "table_hash"]
