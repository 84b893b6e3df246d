"""The pinghu backend: Moore Threads' Pinghu GPU (MUSA compute capability 3.1) as mutile runs it.

A folder per concern, dependencies running one way (``docs/pinghu.md`` opens with the map):
:mod:`.isa` (the virtual MUSA ISA: table, operands, encoding, assembler, disassembler, docs)
at the bottom; :mod:`.passes` (tile IR -> Pinghu tile IR) and :mod:`.codegen` (tile IR ->
ISA) and :mod:`.machine` (the simulated Pinghu that executes a program) above it; here at
the top only the backend's face, ``compile``/``serialize``/``deserialize`` and the
:class:`PinghuKernel` (:mod:`.kernel`), with the ISA's entry points re-exported."""
from .isa import BY_MNEMONIC, INSTRS, Instr
from .isa.asm import assemble
from .isa.disasm import disassemble, format_instruction, listing
from .isa.encoding import decode, encode
from .isa.errors import AssemblyError, DecodeError
from .isa.program import Instruction, Param, Program
from .kernel import PinghuKernel, compile, deserialize, serialize

__all__ = ["assemble", "disassemble", "format_instruction", "listing", "encode", "decode",
           "AssemblyError", "DecodeError", "INSTRS", "BY_MNEMONIC", "Instr", "Instruction",
           "Param", "Program", "PinghuKernel", "compile", "serialize", "deserialize"]
