"""The code generator's state and the helpers every op lowering uses.

:class:`Codegen` walks the tile IR in program order (the ``@lowers`` registry maps an op
name to its lowering), binds each IR value to a :mod:`.values` value, and appends
virtual instructions (:class:`~.values.VIns`) that :mod:`.regalloc` later turns into a
:class:`~..isa.program.Program`. Helpers here: register types of IR types, operands of values,
materializing uniforms, element-index runs of the block layout, predicates from ``i1``
registers, and the shared-memory *gather* that moves elements between threads.
"""
from __future__ import annotations

import struct

from mutile.errors import CompilationError, Loc
from mutile.ir import types as T
from mutile.ir.registry import registry
from mutile.ir.types import PointerType, ScalarType, TileType

from .values import VP, VR, Layout, PtrTile, TileVal, Uniform, VIns, VMem, VReg, log2, numel
from .recipe import size as recipe_size
from ..isa import BY_MNEMONIC
from ..isa.operands import FloatImm, IntImm
from ..isa.program import MAX_SHARED

REMAT_NODES = 3
LOWERINGS, lowers = registry()     # op name -> lowering; @lowers("add", ...)
# helpers the lowerings provide to this module, which cannot import them (they import it):
# "recipe", the evaluator of an index recipe (lowering/elementwise.py)
HELPERS, helper = registry()


# ---------------------------------------------------------------- types
def width(t) -> int:
    """Registers one element of IR type ``t`` takes (pointers and 64-bit values: 2)."""
    if isinstance(t, PointerType):
        return 2
    return 2 if t.bits == 64 else 1


def isa_int(t: ScalarType) -> str:
    """The ISA integer type a register of ``t`` computes in (narrow types in 32 bits)."""
    if t.is_bool():
        return "U32"
    s = "S" if t.is_int_signed() else "U"
    return f"{s}64" if t.bits == 64 else f"{s}32"


CVT_NAMES = {"f64": "F64", "f32": "F32", "f16": "F16", "bf16": "BF16", "f8e4m3": "F8E4M3",
             "f8e5m2": "F8E5M2", "f8e4b8": "F8E4B8", "f8e5b16": "F8E5B16", "i64": "S64",
             "u64": "U64", "i32": "S32", "u32": "U32",
             "i16": "S16", "u16": "U16", "i8": "S8", "u8": "U8", "i1": "U32"}


def cvt_name(t: ScalarType) -> str:
    """The CVT suffix of ``t`` (i1 converts as a 0/1 u32)."""
    return CVT_NAMES[t.name]


def is_narrow_float(t) -> bool:
    return isinstance(t, ScalarType) and t.is_floating() and t.bits < 32


class Codegen:
    """Per-kernel state: the virtual instruction list, value bindings, labels, the
    thread count and the shared-memory high-water mark."""

    def __init__(self, func, options: dict):
        self.func = func
        self.options = options
        warps = options.get("num_warps")
        warps = 4 if warps is None else warps
        if not isinstance(warps, int) or warps < 1 or warps > 32 or warps & (warps - 1):
            raise CompilationError(f"pinghu backend: num_warps must be a power of two from 1 "
                                   f"to 32 (a block has at most 1024 threads), got {warps!r}",
                                   func.loc)
        self.threads = 32 * warps
        self.code: list[VIns] = []
        self.values: dict = {}
        self.loc: Loc | None = func.loc
        self._ids = 0
        self._labels = 0
        self._loops = 0
        self.shared_top = 0           # bytes of shared memory the kernel needs
        self.tid: VR | None = None
        self.prints: list[dict] = []      # device_print formats (see lowering/debug.py)
        self.partition = None             # (index, warps, first warp) inside ph partitions
        self.scratch_partitions: set = set()
        # ph.alloc_shared op -> byte offset (lowering/asynchronous.py)
        self.smem_offsets: dict = {}
        self.barriers_used = 0
        self.inflight: set = set()        # ph.sqmma results not yet waited for
        self.inflight_stack: list = []    # (state before, states at region ends) per op
        self.tme_descs: set = set()       # descriptors TME ops read (lowering/asynchronous.py)
        self.desc_runs: dict = {}         # id(DescVal) -> (DescVal, register run)
        self.asserts: list[str] = []      # device_assert messages

    # ---------------------------------------------------------------- emission
    def vreg(self, nregs: int, align: int = 1, kind: str = "R") -> VReg:
        """A fresh virtual register (or predicate) block."""
        self._ids += 1
        return VReg(self._ids, nregs, align, kind)

    def emit(self, mnemonic: str, *operands, guard: VP | None = None) -> VIns:
        """Append one instruction (row ``mnemonic``) at the current location."""
        row = BY_MNEMONIC.get(mnemonic)
        if row is None:
            raise CompilationError(f"pinghu codegen: no instruction {mnemonic}", self.loc)
        ops = tuple(self._fit(spec, o) for spec, o in zip(row.operands, operands)) + \
            tuple(operands[len(row.operands):])
        ins = VIns(row, ops, guard, self.loc)
        self.code.append(ins)
        return ins

    def _fit(self, spec, o):
        """An immediate as the slot wants it: normalized to its kind, or moved into a
        register when the slot takes no immediate of that class."""
        if isinstance(o, IntImm):
            k = spec.int_kind
            if IntImm in spec.accepts and k is not None:
                v = o.value & 0xFFFFFFFF
                if k.signed and v >= 1 << 31:
                    v -= 1 << 32
                if k.lo <= v <= k.hi:
                    return IntImm(v)
            return self._imm_reg(IntImm(o.value & 0xFFFFFFFF), spec.width)
        if isinstance(o, FloatImm) and FloatImm not in spec.accepts:
            return self._imm_reg(o, spec.width)
        return o

    def _imm_reg(self, imm, w: int) -> VR:
        v = self.vreg(w, w)
        self.emit("ALU.MOV.IMM", VR(v, 0, 1), imm)
        if w == 2:      # a 32-bit immediate in a 64-bit slot: sign-extended
            hi = 0xFFFFFFFF if isinstance(imm, IntImm) and imm.value >> 31 else 0
            self.emit("ALU.MOV.IMM", VR(v, 1, 1), IntImm(hi))
        return VR(v, 0, w)

    @staticmethod
    def const_int(u) -> int | None:
        """The signed value of a uniform integer constant, else None."""
        if not isinstance(u, Uniform):
            return None
        if isinstance(u.src, IntImm):
            v = u.src.value & 0xFFFFFFFF
            return v - (1 << 32) if u.ty.is_int_signed() and v >> 31 else v
        if isinstance(u.src, int):
            return u.src
        return None

    def label(self, hint: str = "L") -> str:
        self._labels += 1
        return f"{hint}{self._labels}"

    def place(self, name: str) -> None:
        self.code.append(VIns(None, label=name, loc=self.loc))

    def loop_mark(self, kind: str, ident: int) -> None:
        self.code.append(VIns(None, loop=(kind, ident), loc=self.loc))

    def new_loop(self) -> int:
        self._loops += 1
        return self._loops

    def fail(self, msg: str):
        raise CompilationError(f"pinghu codegen: {msg}", self.loc)

    # ---------------------------------------------------------------- values
    def bind(self, irval, val) -> None:
        self.values[irval] = val

    def get(self, irval):
        """The codegen value of ``irval``. Cheap index arithmetic (a recipe of at most
        :data:`REMAT_NODES` nodes) is recomputed at each use instead of keeping its
        registers live from its definition (often before a loop) to a distant use."""
        val = self.values[irval]
        r = getattr(val, "recipe", None)
        if isinstance(val, TileVal) and r is not None and val.E > 1 and \
                self.options.get("remat", True) and recipe_size(r) <= REMAT_NODES:
            return HELPERS["recipe"](self, r, val.shape, val.ty)
        return val

    def layout(self, shape: tuple) -> Layout:
        return Layout(numel(shape), self.threads)

    def new_tile(self, shape: tuple, ty) -> TileVal:
        """An empty register tile of ``shape`` and element type ``ty``."""
        E = self.layout(shape).E
        w = width(ty)
        return TileVal(self.vreg(E * w, w), shape, ty, E, w)

    def operand(self, val, allow_imm: bool = True):
        """The source operand of a value in the block layout: a run for register tiles, a
        register or immediate for uniforms."""
        if isinstance(val, TileVal):
            return val.run()
        if isinstance(val, Uniform):
            if isinstance(val.src, (IntImm, FloatImm)):
                return val.src if allow_imm else self.materialize_scalar(val)
            if isinstance(val.src, (int, float)):
                return self.materialize_scalar(val)
            return val.src
        if isinstance(val, PtrTile):
            return self.addresses(val).run()
        self.fail(f"a {type(val).__name__} cannot be an operand here")

    def materialize_scalar(self, u: Uniform) -> VR:
        """A register holding a uniform's scalar (moves immediates into a register)."""
        if isinstance(u.src, VR):
            return u.src
        w = width(u.ty)
        v = self.vreg(w, w)
        if w == 1:
            imm = u.src if isinstance(u.src, (IntImm, FloatImm)) else self.imm32(u.ty, u.src)
            self.emit("ALU.MOV.IMM", VR(v, 0, 1), imm)
        else:
            bits = self.bits64(u.ty, u.src)
            self.emit("ALU.MOV.IMM", VR(v, 0, 1), IntImm(bits & 0xFFFFFFFF))
            self.emit("ALU.MOV.IMM", VR(v, 1, 1), IntImm(bits >> 32))
        return VR(v, 0, w)

    def imm32(self, ty, value):
        """The 32-bit register image of constant ``value`` of type ``ty`` as an immediate."""
        if isinstance(value, (IntImm, FloatImm)):
            return value
        if ty.is_floating():
            if ty == T.f32:
                return FloatImm.of(value)
            import numpy as np
            bits = int(np.array(value, ty.to_numpy()).view(
                {8: np.uint8, 16: np.uint16}[ty.bits]))
            return IntImm(bits)
        v = int(value)
        if ty.is_bool():
            v = int(bool(v))
        elif ty.bits < 32:
            m = (1 << ty.bits) - 1
            v &= m
            if ty.is_int_signed() and v >> (ty.bits - 1):
                v -= 1 << ty.bits
        return IntImm(v & 0xFFFFFFFF)

    @staticmethod
    def bits64(ty, value) -> int:
        if isinstance(ty, ScalarType) and ty.is_floating():
            return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
        return int(value) & (2**64 - 1)

    def materialize(self, val) -> TileVal:
        """``val`` as a register tile (uniforms are moved into every element)."""
        if isinstance(val, TileVal):
            return val
        if isinstance(val, PtrTile):
            return self.addresses(val)
        out = self.new_tile(val.shape, val.ty)
        src = self.operand(val, allow_imm=True)
        if out.w == 1:
            mn = "ALU.MOV.IMM" if isinstance(src, (IntImm, FloatImm)) else "ALU.MOV.B32"
            if mn == "ALU.MOV.IMM" and out.E > 1:     # MOV.IMM takes no runs: via a register
                src = self.materialize_scalar(val)
                mn = "ALU.MOV.B32"
            self.emit(mn, out.run(), src)
        else:
            self.emit("ALU.MOV.B64", out.run(), self.materialize_scalar(val))
        return out

    def as_uniform(self, val):
        """A uniform view of a one-element register tile (else ``val`` unchanged)."""
        if isinstance(val, TileVal) and numel(val.shape) == 1:
            return Uniform(val.run(0, 1), val.shape, val.ty)
        return val

    # ---------------------------------------------------------------- pointers
    def addresses(self, p: PtrTile) -> TileVal:
        """The 64-bit addresses of a based pointer tile: base + offset * element size."""
        size = p.ty.element_ty.itemsize if hasattr(p.ty, "element_ty") else 1
        out = self.new_tile(p.shape, p.ty)
        base = self.operand(p.base)
        off = p.off
        if isinstance(off, Uniform) and isinstance(off.src, IntImm):
            off = Uniform(self.materialize_scalar(Uniform(off.src, (), T.i32)), off.shape, T.i32)
        if out.E > 1 and not isinstance(off, TileVal):
            off = self.materialize(Uniform(off.src, p.shape, T.i32))
        self.emit("ALU.IMAD.WIDE.S32", out.run(), self.operand(off, False), IntImm(size), base)
        return out

    # ---------------------------------------------------------------- predicates
    def pred_of(self, val, neg: bool = False) -> VP:
        """Predicates (one per element) that are true where the i1 value ``val`` is 1 (the
        ones the value was computed from when it has them)."""
        cached = getattr(val, "pred", None)
        if cached is not None and self.options.get("_cache_preds", True):
            return cached.negated() if neg else cached
        if isinstance(val, Uniform) and isinstance(val.src, IntImm):
            p = self.vreg(1, kind="P")
            self.emit("ALU.ISETP.NE.U32", VP(p, 0, 1), self.materialize_scalar(val), IntImm(0))
            return VP(p, 0, 1, neg)
        src = self.operand(val, False)
        n = src.count
        p = self.vreg(n, kind="P")
        self.emit("ALU.ISETP.NE.U32", VP(p, 0, n), src, IntImm(0))
        return VP(p, 0, n, neg)

    def pred_reg(self, pred: VP, shape: tuple) -> TileVal:
        """An i1 register tile (0/1) from predicates."""
        out = self.new_tile(shape, T.i1)
        self.emit("ALU.P2R.B32", out.run(), pred)
        return out

    def owner_pred(self, shape: tuple) -> VP | None:
        """Predicate true in the threads that own (not replicate) a tile of ``shape``; None
        when every thread owns distinct elements."""
        lay = self.layout(shape)
        if not lay.replicated:
            return None
        p = self.vreg(1, kind="P")
        self.emit("ALU.ISETP.LT.S32", VP(p, 0, 1), self.tid, IntImm(lay.n))
        return VP(p, 0, 1)

    def and_preds(self, a: VP | None, b: VP | None) -> VP | None:
        if a is None or b is None:
            return a or b
        n = max(a.count, b.count)
        p = self.vreg(n, kind="P")
        self.emit("ALU.PLOP.AND", VP(p, 0, n), a, b)
        return VP(p, 0, n)

    # ---------------------------------------------------------------- indices
    def index_run(self, shape: tuple, start: int = 0, count: int | None = None) -> TileVal:
        """i32 tile: the row-major element index each thread holds in the block layout
        (with ``start``/``count``: of its elements ``start .. start+count-1`` only)."""
        lay = self.layout(shape)
        count = lay.E if count is None else count
        out = TileVal(self.vreg(count), shape, T.i32, count, 1)
        first = self.vreg(1)
        if lay.E > 1:
            self.emit("ALU.SHL.B32", VR(first, 0, 1), self.tid, IntImm(log2(lay.E)))
        else:
            self.emit("ALU.MOV.B32", VR(first, 0, 1), self.tid)
        if start:
            self.emit("ALU.IADD.S32", VR(first, 0, 1), VR(first, 0, 1), IntImm(start))
        self.emit("ALU.IOTA.S32", out.run(), VR(first, 0, 1), IntImm(1))
        if lay.replicated:
            self.emit("ALU.LOP.AND.B32", out.run(), out.run(), IntImm(lay.n - 1))
        return out

    def coord(self, index: TileVal, shape: tuple, dim: int) -> TileVal:
        """i32 tile: coordinate ``dim`` of row-major indices ``index`` into ``shape``."""
        inner = numel(shape[dim + 1:])
        out = self.new_tile(index.shape, T.i32)
        src = index.run()
        if inner > 1:
            self.emit("ALU.SHR.U32", out.run(), src, IntImm(log2(inner)))
            src = out.run()
        self.emit("ALU.LOP.AND.B32", out.run(), src, IntImm(shape[dim] - 1))
        return out

    # ---------------------------------------------------------------- shared memory moves
    def block_sync(self) -> None:
        """A barrier for every warp running this code: the block, or inside a
        ph.warp_specialize partition only that partition's warps."""
        if self.partition is None:
            self.emit("BAR.SYNC", IntImm(0))
        else:
            self.emit("BAR.SYNC.CNT", IntImm(1 + self.partition[0]), IntImm(self.partition[1]))

    def reserve_shared(self, nbytes: int) -> int:
        """Make the kernel's shared area at least ``nbytes``; the scratch starts at 0."""
        if self.partition is not None:
            self.scratch_partitions.add(self.partition[0])
            if len(self.scratch_partitions) > 1:
                self.fail("two ph.warp_specialize partitions move tiles through shared memory; "
                          "only one partition may (keep reductions and layout changes in one)")
        if nbytes > MAX_SHARED:
            self.fail(f"this op needs {nbytes} bytes of shared memory to move a tile between "
                      f"threads; a block has {MAX_SHARED} (use smaller tiles or more warps)")
        self.shared_top = max(self.shared_top, nbytes)
        self.scratch_top = max(getattr(self, "scratch_top", 0), nbytes)
        return 0

    def to_shared(self, val, base: int = 0) -> int:
        """Store every element of ``val`` at ``base + index * (4 * w)`` in shared memory
        (after a barrier that protects earlier readers); returns the element stride."""
        t = self.materialize(val)
        stride = 4 * t.w
        self.reserve_shared(base + numel(t.shape) * stride)
        idx = self.index_run(t.shape)
        self.emit("ALU.SHL.B32", idx.run(), idx.run(), IntImm(log2(stride)))
        self.block_sync()
        mn = "LSU.ST.SHARED.B32" if t.w == 1 else "LSU.ST.SHARED.B64"
        self.emit(mn, VMem(idx.run(), base), t.run(), guard=self.owner_pred(t.shape))
        self.block_sync()
        return stride

    def from_shared(self, shape: tuple, ty, src_index: TileVal, stride: int,
                    base: int = 0) -> TileVal:
        """A tile of ``shape`` whose element ``i`` is the shared element ``src_index[i]``."""
        out = self.new_tile(shape, ty)
        addr = self.new_tile(shape, T.i32)
        self.emit("ALU.SHL.B32", addr.run(), src_index.run(), IntImm(log2(stride)))
        mn = "LSU.LD.SHARED.B32" if out.w == 1 else "LSU.LD.SHARED.B64"
        self.emit(mn, out.run(), VMem(addr.run(), base))
        return out

    def gather(self, val, shape: tuple, index_fn) -> TileVal:
        """A tile of ``shape`` whose element at row-major index ``i`` is ``val``'s element
        ``index_fn(i)``: ``index_fn`` gets the i32 index tile and emits the source index
        tile. Moves through shared memory."""
        stride = self.to_shared(val)
        idx = self.index_run(shape)
        src = index_fn(idx)
        return self.from_shared(shape, val.ty, src, stride)

def element(t):
    return t.element if isinstance(t, TileType) else t
