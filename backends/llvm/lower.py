"""Lower a kernel's tile IR to an LLVM module with the launch ABI.

The kernel becomes two functions:

* ``<name>_program(i64* args, i32 pid_x, pid_y, pid_z, i32 n_x, n_y, n_z, i64* fault) -> i32``
  (internal, always inlined): one program; returns 0, or 1 after recording a fault;
* ``void <name>_programs(i64* args, i32 gx, i32 gy, i32 gz, i64 start, i64 end, i64* fault)``:
  runs programs with linear ids ``start .. end-1`` (x fastest), stopping at a fault
  (whose linear id it stores in ``fault[4]``).

``args`` holds one i64 per kernel parameter (pointers: addresses; integers: sign- or
zero-extended; floats: their bits in the low bits), then, for bounds checks, a
``[lo, hi)`` byte range per parameter (slots ``n + 2k`` and ``n + 2k + 1``), then the
address and count of the ``[lo, hi)`` pairs of the AddressTable arguments' members
(slots ``3n`` and ``3n + 1``; pointers made from integers are checked against them too).

The fault record (i64 slots): kind (1 out of bounds, 2 assertion, 3 stopped), check index,
address, parameter index (-1 unknown), program id, element index within the tile; slot 7
is the launcher's stop request, polled before each program and at every loop iteration
(Ctrl-C and the watchdog set it; a stopped loop records kind 3 with the loop's check).

The lowering itself is a walk: each op's registered lowering (``@lowers``) runs in
program order; this file only sets up the functions and the parameters.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir

from mutile.errors import CompilationError
from mutile.ir.core import Module
from mutile.ir.types import DescType, PointerType, TileType

# importing the lowering modules registers their ops
from . import lower_atomic, lower_control, lower_debug, lower_desc, lower_dot  # noqa: F401
from . import lower_elementwise, lower_memory, lower_reduce, lower_shape  # noqa: F401
from mutile.ir.analysis import Analysis
from .lower_context import I32, I64, PTR, STOP_SLOT, LowerContext



@dataclass
class Lowered:
    """An LLVM module for one kernel plus what the launcher must know about it."""
    llvm_module: ir.Module
    entry: str                      # name of the <name>_programs function
    param_names: list
    param_types: list
    checks: list = field(default_factory=list)   # (Loc, description) per fault index
    frame_bytes: int = 0
    int_pointers: bool = False      # makes pointers from integers (AddressTable checks)


def _unpack(ctx: LowerContext, slot, t):
    """A parameter's LLVM value from its i64 argument slot."""
    b = ctx.b
    if isinstance(t, PointerType):
        return slot
    ty = ctx.repr_type(t)
    if isinstance(ty, ir.IntType):
        return slot if ty.width == 64 else b.trunc(slot, ty)
    bits = ir.IntType({"half": 16, "float": 32, "double": 64}[str(ty)])
    return b.bitcast(slot if bits.width == 64 else b.trunc(slot, bits), ty)


def _program_fn(module: ir.Module, name: str) -> ir.Function:
    fnty = ir.FunctionType(I32, [PTR, I32, I32, I32, I32, I32, I32, PTR])
    fn = ir.Function(module, fnty, name=f"{name}_program")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    for a in (fn.args[0], fn.args[7]):
        a.add_attribute("noalias")
    return fn


def _programs_fn(module: ir.Module, name: str, program: ir.Function) -> ir.Function:
    """Emit the range loop calling ``program`` for linear ids start..end-1."""
    fnty = ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32, I64, I64, PTR])
    fn = ir.Function(module, fnty, name=f"{name}_programs")
    fn.attributes.add("nounwind")
    args, gx, gy, gz, start, end, fault = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    gx64, gy64 = b.zext(gx, I64), b.zext(gy, I64)
    head = b.append_basic_block("head")
    body = b.append_basic_block("body")
    bad = b.append_basic_block("fault")
    done = b.append_basic_block("done")
    entry = b.block
    b.branch(head)
    b.position_at_end(head)
    lin = b.phi(I64, "lin")
    lin.add_incoming(start, entry)
    flag = b.gep(fault, [ir.Constant(I64, STOP_SLOT)], source_etype=I64)
    stop = b.icmp_signed("!=", b.load_atomic(flag, "monotonic", 8, typ=I64), ir.Constant(I64, 0))
    more = b.and_(b.icmp_signed("<", lin, end), b.not_(stop))
    b.cbranch(more, body, done)
    b.position_at_end(body)
    x = b.trunc(b.urem(lin, gx64), I32)
    rest = b.udiv(lin, gx64)
    y = b.trunc(b.urem(rest, gy64), I32)
    z = b.trunc(b.udiv(rest, gy64), I32)
    status = b.call(program, [args, x, y, z, gx, gy, gz, fault])
    nxt = b.add(lin, ir.Constant(I64, 1))
    lin.add_incoming(nxt, body)
    b.cbranch(b.icmp_unsigned("!=", status, ir.Constant(I32, 0)), bad, head)
    b.position_at_end(bad)
    b.store(lin, b.gep(fault, [ir.Constant(I64, 4)], source_etype=I64), align=8)
    b.ret_void()
    b.position_at_end(done)
    b.ret_void()
    return fn


def lower_kernel(module: Module, options: dict | None = None) -> Lowered:
    """Lower ``module``'s kernel (one function, calls already inlined) to LLVM IR."""
    options = dict(options or {})
    func = module.entry
    for op in func.walk():
        if op.name == "call":
            raise CompilationError("llvm backend: calls must be inlined first", op.loc)
    for a in func.args:
        if isinstance(a.type, (TileType, DescType)):
            raise CompilationError(f"llvm backend: kernel parameter '{a.hint}' of type {a.type}"
                                   " is not supported", func.loc)
    llmod = ir.Module(name=func.name)
    program = _program_fn(llmod, func.name)
    ctx = LowerContext(llmod, program, func, options, Analysis(func))
    ctx.args_ptr, ctx.fault_ptr = program.args[0], program.args[7]
    ctx.pid, ctx.nprog = list(program.args[1:4]), list(program.args[4:7])
    for k, a in enumerate(func.args):
        ctx.bind(a, _unpack(ctx, ctx.arg_slot(k), a.type))
    ctx.walk(func.body)
    if not ctx.b.block.is_terminated:
        ctx.b.ret(ir.Constant(I32, 0))
    entry = _programs_fn(llmod, func.name, program)
    return Lowered(llmod, entry.name, [a.hint for a in func.args], [a.type for a in func.args],
                   ctx.checks, ctx.frame_bytes, ctx.int_pointers)
