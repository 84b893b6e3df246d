"""The pinghu backend's compiled kernel: an ISA program run by the interpreter.

    kernel = compile(module, {"num_warps": 4})
    kernel.run([x, y, n], grid=(64,))
    print(kernel.asm["musa"])          # the listing, with // file.py:LINE  source lines

``compile`` generates the program (:mod:`.codegen.generate`), or, when ``MUTILE_OVERRIDE_DIR``
holds ``<kernel>.musa``, assembles that edited listing instead (its parameters must be
the kernel's). ``serialize``/``deserialize`` keep the binary encoding.
"""
from __future__ import annotations

import os
import pickle
from collections import Counter
from pathlib import Path

from mutile.errors import CompilationError

from .isa.asm import assemble, listing_text
from .isa.disasm import disassemble
from .isa.encoding import decode, encode
from .isa.errors import AssemblyError
from .isa.program import Program

OVERRIDE_ENV = "MUTILE_OVERRIDE_DIR"
# Set by the test suite: every kernel compiled checks text -> binary -> text and
# text -> assembler -> text reproduce its listing.
CHECK_ROUND_TRIP = False


class PinghuKernel:
    """A compiled kernel: ``run(args, grid)``, ``asm`` ("musa" listing, "musa_bin"
    bytes) and ``metadata`` (registers per thread, shared and local bytes, instruction
    counts by unit)."""

    def __init__(self, program: Program, options: dict, overridden: str | None = None,
                 debug: dict | None = None):
        self.program = program
        self.debug = debug if debug is not None else getattr(program, "debug", {})
        self.name = program.name
        self.options = dict(options)
        text = disassemble(program)
        self.asm = {"musa": text, "musa_bin": encode(program)}
        if CHECK_ROUND_TRIP:
            check_round_trip(text, self.asm["musa_bin"])
        units = Counter(ins.op.unit for ins in program.instructions)
        self.metadata = {
            "name": program.name, "registers_per_thread": program.regs,
            "shared_bytes": program.shared, "local_bytes": program.local,
            "threads_per_block": program.threads, "num_warps": program.threads // 32,
            "instructions": len(program.instructions),
            "instructions_by_unit": dict(sorted(units.items())),
            "override": overridden,
        }

    def run(self, args, grid, arg_ranges=None, num_threads=None) -> None:
        """Execute on the Pinghu interpreter over ``grid`` (numpy arrays for pointers)."""
        from .machine.scheduler import execute
        from .machine.timing import session
        g = tuple(grid) + (1,) * (3 - len(grid))
        sanitize = bool(self.options.get("sanitize"))
        prof = session.active()
        if prof is None:
            execute(self.program, list(args), g, sanitize=sanitize, kernel_name=self.name,
                    debug=self.debug)
            return
        from .machine.timing.model import TimingMachine
        m = TimingMachine(prof.machine, sample=prof.sample)
        execute(self.program, list(args), g, sanitize=sanitize, kernel_name=self.name,
                debug=self.debug, machine=m)
        prof.add(m.record)

    launch = run

    def __repr__(self) -> str:
        return f"<PinghuKernel {self.name} ({self.program.regs} regs/thread)>"


def check_round_trip(text: str, binary: bytes) -> None:
    """Raise AssertionError unless the binary and the assembler both give ``text`` back."""
    again = disassemble(decode(binary))
    if again != text:
        raise AssertionError(f"binary round trip changed the listing:\n{_diff(text, again)}")
    again = disassemble(assemble(text))
    if again != text:
        raise AssertionError(f"assembler round trip changed the listing:\n{_diff(text, again)}")


def _diff(a: str, b: str) -> str:
    import difflib
    return "\n".join(list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm=""))[:20])


def _override(program: Program) -> tuple[Program, str] | None:
    folder = os.environ.get(OVERRIDE_ENV)
    if not folder:
        return None
    path = Path(folder) / f"{program.name}.musa"
    if not path.is_file():
        return None
    try:
        edited = assemble(listing_text(path.read_bytes(), str(path)), source=str(path))
    except AssemblyError as e:
        raise CompilationError(f"override {path}: {e}") from None
    mine = [(p.name, p.type, p.offset) for p in program.params]
    theirs = [(p.name, p.type, p.offset) for p in edited.params]
    if mine != theirs:
        raise CompilationError(f"override {path}: parameters {theirs} do not match the "
                               f"kernel's {mine}")
    if edited.name != program.name:
        raise CompilationError(f"override {path}: .kernel {edited.name}, expected "
                               f"{program.name}")
    return edited, str(path)


def lower_async(module, options: dict) -> str:
    """The Pinghu stage of ``module`` (rewritten in place): TME pipelining of descriptor
    loops (pass ``pipeline``), then ``dot`` -> SQMMA (pass ``sqmma``); ``async_lowering=
    False`` skips both. Returns the IR text after them (``k.asm["pinghu_ir"]``)."""
    from mutile.errors import CompilationError
    from mutile.ir import verify
    from .passes import pipeline, sqmma
    if options.get("async_lowering", True):
        provided = pipeline.run(module, options)
        sqmma.run(module, options.get("num_warps") or 4, provided)
        try:
            verify(module)
        except CompilationError as e:       # a bug of the passes: say so, with the op's line
            raise CompilationError(f"pinghu async lowering produced invalid IR: {e.msg}",
                                   e.loc) from None
    return str(module)


def compile(module, options: dict | None = None) -> PinghuKernel:
    """Generate (or take the override of) ``module``'s kernel program."""
    from .codegen.generate import generate
    options = dict(options or {})
    ir_text = lower_async(module, options)
    program = generate(module, options)
    over = _override(program)
    if over is not None:
        k = PinghuKernel(over[0], options, over[1], program.debug)
    else:
        k = PinghuKernel(program, options)
    k.asm["pinghu_ir"] = ir_text
    return k


def serialize(kernel: PinghuKernel) -> bytes:
    """The kernel's binary encoding and options."""
    return pickle.dumps({"version": 1, "binary": kernel.asm["musa_bin"],
                         "options": kernel.options, "override": kernel.metadata["override"],
                         "debug": kernel.debug, "pinghu_ir": kernel.asm.get("pinghu_ir", "")})


def deserialize(data: bytes) -> PinghuKernel:
    """The kernel :func:`serialize` saved (decoded from its binary)."""
    d = pickle.loads(data)
    if d.get("version") != 1:
        raise ValueError("unknown serialized pinghu kernel version")
    program = decode(d["binary"])
    k = PinghuKernel(program, d["options"], d.get("override"), d.get("debug", {}))
    k.asm["pinghu_ir"] = d.get("pinghu_ir", "")
    return k
