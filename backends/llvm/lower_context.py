"""The lowering context: LLVM types, constants, conversions, tile storage and the op registry.

One :class:`LowerContext` exists per compiled kernel. It owns the llvmlite builder,
the map from IR values to what they became (LLVM scalars, :class:`TileVal` tiles,
:class:`DescVal` descriptors), and the helpers every op lowering shares. Op lowerings
register themselves with ``@lowers("name")`` (see the ``lower_*`` modules); the walker in
:mod:`lower` only looks them up.

Value representations ("repr"): iN/uN as ``iN`` (i1 as ``i1``), f16 as ``half``,
bf16 as ``i16`` and fp8 as ``i8`` (their bits), f32/f64 as ``float``/``double``,
pointers as ``i64`` addresses. In memory ("storage") the same, except i1 as ``i8``.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
from llvmlite import ir

from mutile.errors import CompilationError
from mutile.ir.registry import registry
from mutile.ir.types import PointerType, ScalarType, TileType

from . import cgutils
from .lower_tiles import Buffer, Expr, Sep, TileVal

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()

CHUNK = 16  # lanes per elementwise chunk (2 ymm of f32 on AVX2, 1 zmm on AVX-512)
RECOMPUTE_OPS = 3  # a multi-use expression of at most this many light ops stays lazy

LOWERINGS, lowers = registry()     # op name -> lowering; @lowers("add", ...)


FAULT_STOP = 3      # fault kind: stopped on the launcher's request (Ctrl-C, watchdog)
STOP_SLOT = 7       # fault-record slot the launcher sets to ask a thread to stop


class DescVal:
    """A tensor descriptor: base address (i64), dims and strides (i64, elements)."""

    def __init__(self, base, dims, strides, type, origin=None):
        self.base, self.dims, self.strides, self.type = base, list(dims), list(strides), type
        self.origin = origin


def _vec(ty, w):
    return ty if w == 1 else ir.VectorType(ty, w)


def is_const(v, value=None) -> bool:
    """True if ``v`` is an LLVM integer constant (equal to ``value`` when given)."""
    if not isinstance(v, ir.Constant) or not isinstance(v.type, ir.IntType):
        return False
    return value is None or v.constant == value


class LowerContext:
    """State and shared helpers of one kernel's lowering (see the module docstring)."""

    def __init__(self, module: ir.Module, fn: ir.Function, func, options: dict, analysis):
        self.module, self.fn, self.func = module, fn, func
        self.options = dict(options)
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.values: dict[int, object] = {}
        self.analysis = analysis
        self.checks: list[tuple] = []       # (loc, description) per checked op / assert
        self.frame_bytes = 0
        self.check_bounds = bool(options.get("check_bounds", False))
        self.args_ptr, self.pid, self.nprog, self.fault_ptr = None, [], [], None
        self.nparams = len(func.args)
        # a pointer made from an integer may address an AddressTable member
        self.int_pointers = any(op.name == "bitcast" and op.result.type.scalar.is_ptr() and
                                not op.operands[0].type.scalar.is_ptr() for op in func.walk())
        self._strings: dict[bytes, ir.GlobalVariable] = {}

    # ------------------------------------------------------------------ values
    def __getitem__(self, v):
        try:
            return self.values[id(v)]
        except KeyError:
            raise CompilationError(f"value {v!r} used before it is lowered") from None

    def bind(self, v, cg) -> None:
        self.values[id(v)] = cg

    def fail(self, op, msg: str):
        raise CompilationError(f"llvm backend: '{op.name}': {msg}", op.loc)

    # ------------------------------------------------------------------ types
    @staticmethod
    def repr_type(t) -> ir.Type:
        """The LLVM type of one scalar of IR type ``t`` in registers."""
        if isinstance(t, PointerType):
            return I64
        if t.is_floating():
            return {"f16": F16, "f32": F32, "f64": F64}.get(t.name, ir.IntType(t.bits))
        return ir.IntType(t.bits)

    @classmethod
    def storage_type(cls, t) -> ir.Type:
        """The LLVM type of one element of IR type ``t`` in memory (i1 as i8)."""
        return I8 if getattr(t, "name", "") == "i1" else cls.repr_type(t)

    @staticmethod
    def elem_size(t) -> int:
        return 8 if isinstance(t, PointerType) else max(1, t.bits // 8)

    def vtype(self, t, w: int) -> ir.Type:
        return _vec(self.repr_type(t), w)

    # ------------------------------------------------------------------ constants
    def const(self, t, value, w: int = 1):
        """An LLVM constant of IR scalar type ``t`` (splatted to ``w`` lanes)."""
        ty = self.repr_type(t)
        if isinstance(t, PointerType):
            c = ir.Constant(I64, int(value))
        elif t.is_floating() and isinstance(ty, ir.IntType):    # bf16 / fp8 bits
            bits = np.array(float(value), dtype=t.to_numpy()).view(f"u{ty.width // 8}")
            c = ir.Constant(ty, int(bits))
        elif t.is_floating():
            c = ir.Constant(ty, float(np.array(float(value), dtype=t.to_numpy())))
        else:
            c = ir.Constant(ty, int(value) & ((1 << t.bits) - 1))
        return self.splat(c, w)

    def splat(self, x, w: int):
        """``x`` repeated in ``w`` lanes (``x`` itself when ``w == 1``)."""
        if w == 1:
            return x
        if isinstance(x, ir.Constant):
            return ir.Constant(ir.VectorType(x.type, w), [x] * w)
        return cgutils.splat(self.b, x, w)

    def iota_from(self, f, w: int):
        """``<w x i64>`` ``[f, f+1, ..., f+w-1]``."""
        return self.b.add(self.splat(f, w), ir.Constant(ir.VectorType(I64, w), list(range(w))))

    def unflatten(self, f, shape) -> list:
        """Per-dim indices (i64 or <n x i64> like ``f``) of flat row-major index ``f``."""
        n = f.type.count if isinstance(f.type, ir.VectorType) else 1
        out, inner = [], 1
        for k, d in enumerate(reversed(shape)):
            v = f
            if inner > 1:
                v = self.b.lshr(v, self.splat(ir.Constant(I64, int(math.log2(inner))), n))
            if k < len(shape) - 1:          # the outermost index needs no mask
                v = self.b.and_(v, self.splat(ir.Constant(I64, d - 1), n))
            out.append(v)
            inner *= d
        return out[::-1]

    # ------------------------------------------------------------------ memory
    def _elem_ptr(self, base, t, idx):
        return self.b.gep(base, [idx], source_etype=self.storage_type(t))

    def load_elems(self, base, t, f, w: int, align: int | None = None):
        """Load ``w`` elements of type ``t`` at ``base[f]`` (a stack buffer unless align)."""
        st = self.storage_type(t)
        es = self.elem_size(t)
        al = align or min(64, es * w)
        v = self.b.load(self._elem_ptr(base, t, f), typ=_vec(st, w), align=al)
        return self.from_storage(v, t)

    def store_elems(self, base, t, f, value, align: int | None = None):
        w = value.type.count if isinstance(value.type, ir.VectorType) else 1
        al = align or min(64, self.elem_size(t) * w)
        self.b.store(self.to_storage(value, t), self._elem_ptr(base, t, f), align=al)

    def from_storage(self, v, t):
        if getattr(t, "name", "") == "i1":
            return self.b.trunc(v, _vec(I1, v.type.count) if isinstance(v.type, ir.VectorType)
                                else I1)
        return v

    def to_storage(self, v, t):
        if getattr(t, "name", "") == "i1":
            return self.b.zext(v, _vec(I8, v.type.count) if isinstance(v.type, ir.VectorType)
                               else I8)
        return v

    def vgep(self, base, idx, t):
        """``getelementptr`` with a vector of indices: a ``<n x ptr>`` of element addresses."""
        instr = self.b.gep(base, [idx], source_etype=self.storage_type(t))
        instr.type = ir.VectorType(PTR, idx.type.count)
        return instr

    def gather_elems(self, base, t, idx, mask=None, other=None, align=None):
        """``llvm.masked.gather`` of the elements of ``base`` at vector indices ``idx``."""
        ptrs = self.vgep(base, idx, t)
        return self.masked_gather(ptrs, t, mask, other, align or self.elem_size(t))

    def masked_gather(self, ptrs, t, mask=None, other=None, align=1):
        n = ptrs.type.count
        st = self.storage_type(t)
        vty = ir.VectorType(st, n)
        mask = mask if mask is not None else ir.Constant(ir.VectorType(I1, n), [1] * n)
        other = ir.Constant(vty, ir.Undefined) if other is None else self.to_storage(other, t)
        fn = self.intrinsic(f"llvm.masked.gather.{self.suffix(vty)}.v{n}p0", vty,
                            [ir.VectorType(PTR, n), I32, mask.type, vty])
        v = self.b.call(fn, [ptrs, ir.Constant(I32, align), mask, other])
        return self.from_storage(v, t)

    def alloc(self, ttype: TileType) -> Buffer:
        """A new 64-byte-aligned stack buffer for a tile (alloca in the entry block)."""
        st = self.storage_type(ttype.element)
        self.frame_bytes += ttype.numel * self.elem_size(ttype.element) + 64
        slot = cgutils.entry_alloca(self.b, st, ttype.numel, name="tile")
        slot.type = PTR             # an opaque pointer: chunks are loaded as vectors
        return Buffer(slot, ttype)

    def alloc_scalar(self, ty: ir.Type, name="slot"):
        return cgutils.entry_alloca(self.b, ty, None, name=name, align=8)

    @contextlib.contextmanager
    def for_chunks(self, numel: int, w: int, name="c"):
        """Yield flat i64 chunk starts 0, w, 2w, ... < numel (a loop unless one chunk)."""
        if numel == w:
            yield ir.Constant(I64, 0)
            return
        with cgutils.for_range(self.b, ir.Constant(I64, 0), ir.Constant(I64, numel),
                               ir.Constant(I64, w), name) as f:
            yield f

    @contextlib.contextmanager
    def for_chunks_from(self, start: int, stop: int, step: int, name="k"):
        """Yield i64 ``start, start+step, .. < stop`` (a loop; it may run zero times)."""
        with cgutils.for_range(self.b, ir.Constant(I64, start), ir.Constant(I64, stop),
                               ir.Constant(I64, step), name) as k:
            yield k

    @staticmethod
    def chunk_width(t: TileType) -> int:
        return min(CHUNK, t.numel)

    def write(self, dst: Buffer, v: TileVal) -> None:
        """Store every element of ``v`` into ``dst`` (nothing if ``v`` is ``dst``)."""
        if isinstance(v, Buffer) and v.ptr is dst.ptr:
            return
        w = self.chunk_width(dst.type)
        with self.for_chunks(dst.type.numel, w) as f:
            self.store_elems(dst.ptr, dst.type.element, f, v.chunk(self, f, w))

    def materialize(self, v: TileVal) -> Buffer:
        """``v`` as a buffer (itself if it already is one)."""
        if isinstance(v, Buffer):
            return v
        buf = self.alloc(v.type)
        self.write(buf, v)
        return buf

    # ------------------------------------------------------------------ intrinsics
    @staticmethod
    def suffix(ty) -> str:
        """LLVM overload suffix of a scalar/vector type: f32, v16i64, ..."""
        if isinstance(ty, ir.VectorType):
            return f"v{ty.count}" + LowerContext.suffix(ty.element)
        if isinstance(ty, ir.IntType):
            return f"i{ty.width}"
        return {"half": "f16", "float": "f32", "double": "f64"}[str(ty)]

    def intrinsic(self, name, ret, args):
        return cgutils.declare_intrinsic(self.module, name, ret, args)

    def call_overloaded(self, base: str, args, ret=None, extra_types=()):
        """Call ``llvm.<base>.<suffix of args[0]>`` returning ``ret`` (args[0]'s type)."""
        ty = args[0].type
        name = f"llvm.{base}." + ".".join([self.suffix(ty)] + [self.suffix(t) for t in extra_types])
        fn = self.intrinsic(name, ret or ty, [a.type for a in args])
        return self.b.call(fn, list(args))

    def declare_c(self, name, ret, args, var_arg=False):
        """Declare (once) a C function resolved by the JIT from the process."""
        g = self.module.globals.get(name)
        if g is None:
            g = ir.Function(self.module, ir.FunctionType(ret, args, var_arg=var_arg), name=name)
        return g

    def cstring(self, text: str):
        data = text.encode() + b"\0"
        g = self._strings.get(data)
        if g is None:
            ty = ir.ArrayType(I8, len(data))
            g = ir.GlobalVariable(self.module, ty, f"str.{len(self._strings)}")
            g.initializer = ir.Constant(ty, bytearray(data))
            g.global_constant = True
            g.linkage = "internal"
            self._strings[data] = g
        return g

    # ------------------------------------------------------------------ floats
    def fconv(self, x, src: ScalarType, dst: ScalarType):
        """Bit-exact float conversion of a scalar/vector repr between float types."""
        if src == dst:
            return x
        from . import fpconv
        return fpconv.convert_float(self.b, x, src.name, dst.name)

    def to_compute(self, x, t: ScalarType):
        """A float repr widened to its compute type (f32, or f64 for f64)."""
        if t.is_floating() and t.bits < 32:
            from mutile.ir.types import f32
            return self.fconv(x, t, f32)
        return x

    def from_compute(self, x, t: ScalarType):
        if t.is_floating() and t.bits < 32:
            from mutile.ir.types import f32
            return self.fconv(x, f32, t)
        return x

    # ------------------------------------------------------------------ integers
    def int_cast(self, v, ty: ir.IntType, signed: bool):
        """Resize an integer scalar/vector to ``ty`` lanes (sext/zext/trunc)."""
        src = v.type.element if isinstance(v.type, ir.VectorType) else v.type
        if src.width == ty.width:
            return v
        dst = ir.VectorType(ty, v.type.count) if isinstance(v.type, ir.VectorType) else ty
        if isinstance(v, ir.Constant) and not isinstance(v.type, ir.VectorType):
            val = v.constant
            if signed and val >= 1 << (src.width - 1):
                val -= 1 << src.width
            return ir.Constant(ty, val & ((1 << ty.width) - 1))
        if src.width > ty.width:
            return self.b.trunc(v, dst)
        return self.b.sext(v, dst) if signed else self.b.zext(v, dst)

    def iadd(self, x, y):
        """``x + y`` on integer scalars, folding constants; None stands for 0."""
        if x is None or is_const(x, 0):
            return y
        if y is None or is_const(y, 0):
            return x
        if is_const(x) and is_const(y):
            return ir.Constant(x.type, (x.constant + y.constant) & ((1 << x.type.width) - 1))
        return self.b.add(x, y)

    def imul(self, x, y):
        """``x * y`` on integer scalars, folding constants; None stands for 0."""
        if x is None or y is None or is_const(x, 0) or is_const(y, 0):
            return None
        if is_const(x, 1):
            return y
        if is_const(y, 1):
            return x
        if is_const(x) and is_const(y):
            return ir.Constant(x.type, (x.constant * y.constant) & ((1 << x.type.width) - 1))
        return self.b.mul(x, y)

    def ineg(self, x):
        if x is None:
            return None
        if is_const(x):
            return ir.Constant(x.type, (-x.constant) & ((1 << x.type.width) - 1))
        return self.b.neg(x)

    # ------------------------------------------------------------------ Sep evaluation
    def _term_value(self, sep: Sep, t, i, w: int, contiguous: bool):
        """coeff * ext(vec[i..]) in sep.ity: ``i`` scalar start (contiguous) or index vector."""
        v = t.vec.chunk(self, i, w) if contiguous else t.vec.gather(self, i)
        v = self.int_cast(v, sep.ity, t.signed)
        return self.b.mul(v, self.splat(t.coeff, w))

    def part_scalar(self, sep: Sep, part, i):
        """One dim's contribution at scalar i64 index ``i`` (None for 0)."""
        if part is None:
            return None
        acc = self.imul(part.step, self.int_cast(i, sep.ity, False))
        for t in part.terms:
            acc = self.iadd(acc, self._term_value(sep, t, i, 1, True))
        return acc

    def sep_row(self, sep: Sep, lead_idx):
        """Sum of the leading dims' parts at scalar indices ``lead_idx`` (None for 0)."""
        acc = None
        for part, i in zip(sep.parts, lead_idx):
            acc = self.iadd(acc, self.part_scalar(sep, part, i))
        return acc

    def sep_finish(self, sep: Sep, total):
        """``base + unit * total`` (scalars or vectors)."""
        if total is None:
            return sep.base
        if sep.unit != 1:
            n = total.type.count if isinstance(total.type, ir.VectorType) else 1
            total = self.b.mul(total, self.splat(ir.Constant(sep.ity, sep.unit), n))
        n = total.type.count if isinstance(total.type, ir.VectorType) else 1
        return self.b.add(self.splat(sep.base, n), total)

    def sep_last(self, sep: Sep, row, j0, w: int):
        """Values at the ``w`` consecutive last-dim indices from ``j0`` after ``row``."""
        part = sep.parts[-1]
        if part is None:
            return self.splat(self.sep_finish(sep, row), w)
        j = self.int_cast(j0, sep.ity, False)
        lanes = ir.Constant(_vec(sep.ity, w), list(range(w)) if w > 1 else 0)
        jv = self.b.add(self.splat(j, w), lanes)
        acc = self.b.mul(jv, self.splat(part.step, w)) if part.step is not None else None
        for t in part.terms:
            tv = self._term_value(sep, t, j0, w, True)
            acc = tv if acc is None else self.b.add(acc, tv)
        if acc is None:
            acc = self.splat(ir.Constant(sep.ity, 0), w)
        if row is not None:
            acc = self.b.add(acc, self.splat(row, w))
        return self.sep_finish(sep, acc)

    def sep_eval_vector(self, sep: Sep, idx):
        """Values at per-dim index vectors ``idx`` (each <n x i64>)."""
        n = idx[0].type.count
        acc = None
        for part, i in zip(sep.parts, idx):
            if part is None:
                continue
            iv = self.int_cast(i, sep.ity, False)
            if part.step is not None:
                v = self.b.mul(iv, self.splat(part.step, n))
                acc = v if acc is None else self.b.add(acc, v)
            for t in part.terms:
                tv = self._term_value(sep, t, i, n, False)
                acc = tv if acc is None else self.b.add(acc, tv)
        if acc is None:
            return self.splat(sep.base, n)
        return self.sep_finish(sep, acc)

    # ------------------------------------------------------------------ launch state
    def arg_slot(self, k: int):
        """The i64 in slot ``k`` of the packed argument array."""
        p = self.b.gep(self.args_ptr, [ir.Constant(I64, k)], source_etype=I64)
        return self.b.load(p, typ=I64, align=8)

    def param_range(self, k: int):
        """(lo, hi) byte range of the array passed for parameter ``k`` (bounds slots)."""
        return self.arg_slot(self.nparams + 2 * k), self.arg_slot(self.nparams + 2 * k + 1)

    def extra_ranges(self):
        """(pointer to the ``[lo, hi)`` i64 pairs, their count) of the launch's arrays that
        are not parameters (AddressTable members; slots ``3n`` and ``3n + 1``)."""
        table = self.b.inttoptr(self.arg_slot(3 * self.nparams), PTR)
        return table, self.arg_slot(3 * self.nparams + 1)

    def add_check(self, op, description: str) -> int:
        self.checks.append((op.loc, description))
        return len(self.checks) - 1

    def poll_stop(self, op) -> None:
        """Emit: if the launcher asked this thread to stop (``fault[STOP_SLOT]`` != 0,
        set on Ctrl-C or by the watchdog), record a stop fault at ``op`` (a loop) and end
        the program. One atomic load and a branch, once per loop iteration."""
        b = self.b
        flag = b.gep(self.fault_ptr, [ir.Constant(I64, STOP_SLOT)], source_etype=I64)
        stop = b.icmp_signed("!=", b.load_atomic(flag, "monotonic", 8, typ=I64),
                             ir.Constant(I64, 0))
        with b.if_then(stop, likely=False):
            check = self.add_check(op, f"{op.name} loop")
            self.fault(FAULT_STOP, check, ir.Constant(I64, 0), -1, ir.Constant(I64, 0))

    def fault(self, kind: int, check: int, addr, param: int, elem) -> None:
        """Record a fault (kind, check index, address, param, element) and end the program."""
        b = self.b
        fields = [ir.Constant(I64, kind), ir.Constant(I64, check), addr,
                  ir.Constant(I64, param), elem]
        for i, v in enumerate(fields):
            if i == 4:
                i = 5            # slot 4 holds the program id (written by the launcher loop)
            b.store(v, b.gep(self.fault_ptr, [ir.Constant(I64, i)], source_etype=I64), align=8)
        b.ret(ir.Constant(I32, 1))

    # ------------------------------------------------------------------ walking
    def settle(self, v: TileVal, value) -> TileVal:
        """Keep lazy ``v`` if one op of its own block reads it (fusion); else a buffer now."""
        if isinstance(v, Buffer) or v.cheap():
            return v
        if isinstance(v, Expr) and v.size() <= RECOMPUTE_OPS:
            return v                # recomputing a few light ops beats a buffer round trip
        n = self.analysis.num_uses(value)
        if n == 0 or self.analysis.sole_local_use(value):
            return v
        buf = self.materialize(v)
        buf.sep = v.sep
        return buf

    def walk(self, block):
        """Lower ``block``'s ops in order; return the values its yield/condition passes on."""
        for op in block.ops:
            if op.name in ("yield", "condition"):
                return [self[v] for v in op.operands]
            fn = LOWERINGS.get(op.name)
            if fn is None and op.name.startswith("ph."):
                raise CompilationError(f"mutile.language.pinghu.{op.name[3:]}: Pinghu's "
                                       f"asynchronous engines exist only on the Pinghu machine; "
                                       f"launch with backend='pinghu'", op.loc)
            if fn is None:
                self.fail(op, "has no lowering in the llvm backend")
            fn(self, op)
        return []
