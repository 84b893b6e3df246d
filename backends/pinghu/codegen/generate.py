"""Codegen: a kernel's tile IR -> a virtual MUSA ISA :class:`~..isa.program.Program`.

    program = generate(module, {"num_warps": 4})

The kernel's runtime parameters become ``.param`` entries in constant bank 0 (pointers as
64-bit global addresses, every parameter in its own naturally aligned slot of at least 4
bytes). The walk binds every IR value to a codegen value (:mod:`.values`), each op's
lowering (``@lowers`` in the ``cg_*`` modules) appends virtual instructions, and
:mod:`.regalloc` assigns registers and resolves labels. The layout rule and what moves
through shared memory are described in :mod:`.values`.
"""
from __future__ import annotations

from mutile.errors import CompilationError
from mutile.ir import types as T
from mutile.ir.ops_pinghu import REGISTER_FILE
from mutile.ir.types import DescType, PointerType, TileType

from ..isa.operands import CBank, IntImm, SReg
from ..isa.program import Param, Program
from .context import LOWERINGS, Codegen, cvt_name, width
# importing the lowering modules registers their ops
from .lowering import asynchronous, atomic  # noqa: F401
from .lowering import control, debug, descriptors, dot, elementwise  # noqa: F401
from .lowering import memory, reduce, scan, shape, sqmma, vector  # noqa: F401
from .regalloc import PredicatePressure, build_program
from .values import VR, Uniform

# every parameter takes a whole 32-bit word at least: narrow integers travel sign- or
# zero-extended, narrow floats as f32 (rounded to their type in the kernel, once)
_PARAM_TYPE = {"i1": "u32", "i8": "s32", "u8": "u32", "i16": "s32", "u16": "u32", "i32": "s32",
               "u32": "u32", "i64": "s64", "u64": "u64", "f16": "f32", "bf16": "f32",
               "f32": "f32", "f64": "f64", "f8e4m3": "f32", "f8e5m2": "f32",
               "f8e4b8": "f32", "f8e5b16": "f32"}


def param_type(t) -> str:
    """The ``.param`` type of a kernel parameter of IR type ``t``."""
    return "ptr" if isinstance(t, PointerType) else _PARAM_TYPE[t.name]


def walk(cg: Codegen, block) -> list:
    """Lower every op of ``block``; the values its terminator yields (if any)."""
    out = []
    stack = cg.inflight_stack
    if stack:                           # each region starts from the state before its op
        cg.inflight = set(stack[-1][0])
    for op in block.ops:
        cg.loc = op.loc
        sqmma.check_inflight(cg, op)
        if op.name in ("yield", "condition"):
            if stack:
                stack[-1][1].update(cg.inflight)
            return [cg.get(v) for v in op.operands]
        fn = LOWERINGS.get(op.name)
        if fn is None:
            cg.fail(f"op '{op.name}' is not supported")
        if op.regions:
            stack.append((set(cg.inflight), set()))
        try:
            fn(cg, op)
            if op.regions:              # a wait inside a region does not hold after it
                before, ends = stack.pop()
                cg.inflight = before | ends
        except CompilationError:
            raise
        except Exception as e:  # an internal error: name the op and its line
            raise CompilationError(f"pinghu codegen: internal error lowering '{op.name}': "
                                   f"{type(e).__name__}: {e}", op.loc) from e
    return out


def generate(module, options: dict | None = None) -> Program:
    """The ISA program of ``module``'s kernel (calls already inlined); its ``debug``
    attribute holds the device_print formats and device_assert messages.

    i1 values keep the predicates they were computed as, so masks need no conversions;
    if that leaves more predicates live than the machine has, the kernel is generated
    again with masks re-derived from their 0/1 registers at each use (unless one mask
    alone needs more than the machine has: the error names the op that made it)."""
    options = dict(options or {})
    try:
        return _shared_planned(module, options)
    except PredicatePressure as e:
        if e.single:
            raise
        return _shared_planned(module, dict(options, _cache_preds=False))


def _shared_planned(module, options: dict) -> Program:
    """Shared buffers of ``ph.alloc_shared`` sit above the kernel's scratch area, whose
    size is known after a first generation (the second one is then final)."""
    if not any(op.name == "ph.alloc_shared" for op in module.entry.walk()):
        return _generate(module, options)
    first = _generate(module, dict(options, _smem_base=0))
    base = first.__dict__.get("_scratch_top", 0)
    return _generate(module, dict(options, _smem_base=base))


def _generate(module, options: dict) -> Program:
    func = module.entry
    cg = Codegen(func, options)
    cg.walk = lambda block: walk(cg, block)
    cg.smem_offsets = asynchronous.plan_shared(func, options.get("_smem_base", 0))
    cg.tme_descs = asynchronous.tme_descriptors(func)
    total_warps = asynchronous.check_warp_specialized(cg, func)
    if total_warps is not None:
        cg.threads = 32 * total_warps
    params, off = [], 0
    for a in func.args:
        if isinstance(a.type, (TileType, DescType)):
            raise CompilationError(f"pinghu backend: kernel parameter '{a.hint}' of type "
                                   f"{a.type} is not supported", func.loc)
        pt = param_type(a.type)
        size = max(4, Param(a.hint, pt, 0).size)
        off = -(-off // size) * size
        params.append(Param(a.hint or f"arg{len(params)}", pt, off))
        off += size
    cg.loc = func.loc
    tid = cg.vreg(1)
    cg.emit("S2R", VR(tid, 0, 1), SReg("SR_TID.X"))
    cg.tid = VR(tid, 0, 1)
    for a, p in zip(func.args, params):
        cg.bind(a, _load_param(cg, a.type, p))
    walk(cg, func.body)
    if not cg.code or cg.code[-1].row is None or cg.code[-1].row.mnemonic != "EXIT":
        cg.emit("EXIT")
    prog = build_program(func.name, params, cg.code, cg.threads, cg.shared_top, func.loc,
                         pinned=(tid,), budget=register_budget(cg.threads, options))
    prog.debug = {"prints": cg.prints, "asserts": cg.asserts}
    prog.__dict__["_scratch_top"] = getattr(cg, "scratch_top", 0)
    return prog


def register_budget(threads: int, options: dict) -> int:
    """Registers per thread: ``maxnreg`` (255 by default), but no more than let one block
    of ``threads`` fit the MP's register file (the machine file's ``register_file``; a
    block that needs more could not be resident, so it could not launch)."""
    fit = REGISTER_FILE // threads
    return min(int(options.get("maxnreg") or 255), fit)


def _load_param(cg: Codegen, t, p: Param):
    """A parameter as a uniform in a register (a pair for 64-bit ones); narrow floats
    are rounded from their f32 word."""
    w = width(t)
    v = cg.vreg(w, w)
    if w == 2:
        cg.emit("ALU.MOV.B64", VR(v, 0, 2), CBank(p.offset))
        return Uniform(VR(v, 0, 2), (), t)
    cg.emit("ALU.MOV.B32", VR(v, 0, 1), CBank(p.offset))
    if t.is_floating() and t.bits < 32:
        cg.emit(f"CVT.{cvt_name(t)}.F32", VR(v, 0, 1), VR(v, 0, 1))
    elif t == T.i1:
        cg.emit("ALU.LOP.AND.B32", VR(v, 0, 1), VR(v, 0, 1), IntImm(1))
    return Uniform(VR(v, 0, 1), (), t)
