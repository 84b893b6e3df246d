"""Small llvmlite IR-building helpers (loops, conditionals, allocas, constants).

Every helper works on an ``llvmlite.ir.IRBuilder`` and emits plain LLVM IR;
nothing here depends on the rest of mutile.
"""

import contextlib

from llvmlite import ir

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()  # opaque pointer


def const(ty, value):
    """Return the constant ``ty value`` (no instruction); a scalar splats across vector types."""
    if isinstance(ty, ir.VectorType) and not isinstance(value, (list, tuple)):
        return ir.Constant(ty, [value] * ty.count)
    return ir.Constant(ty, value)


def as_value(ty, value):
    """Return ``value`` unchanged if it is an IR value, else a constant of type ``ty`` (no IR)."""
    if isinstance(value, ir.Value):
        return value
    return ir.Constant(ty, value)


def gep_flat(b, ptr, idx, elem_ty=None, name=""):
    """Emit ``getelementptr inbounds elem_ty, ptr, idx`` (flat element offset).

    ``idx`` may be a Python int (becomes an i64 constant) or an integer IR value.
    ``elem_ty`` defaults to the pointee of a typed pointer; it is required for
    opaque pointers.
    """
    if elem_ty is None:
        if ptr.type.is_opaque:
            raise TypeError("gep_flat on an opaque pointer needs elem_ty")
        elem_ty = ptr.type.pointee
    return b.gep(ptr, [as_value(I64, idx)], inbounds=True, name=name,
                 source_etype=elem_ty)


def opaque_ptr(b, ptr, name=""):
    """Return ``ptr`` if already opaque, else emit ``bitcast ptr %p to ptr`` typed as opaque.

    llvmlite treats typed and opaque pointers as equal, so ``b.bitcast``
    would be a no-op; stores of arbitrary types need the opaque view.
    """
    if ptr.type.is_opaque:
        return ptr
    cast = ir.instructions.CastInstr(b.block, "bitcast", ptr, PTR, name)
    b._insert(cast)
    return cast


def entry_alloca(b, ty, count=None, name="", align=64):
    """Emit ``alloca ty, count, align`` at the start of the function's entry block.

    ``count`` must be None or a Python int so the slot is a static stack
    allocation.  The builder's position is left unchanged.
    """
    if count is not None and not isinstance(count, int):
        raise TypeError("entry_alloca count must be a Python int (static size)")
    if count is not None and count <= 0:
        raise ValueError("entry_alloca count must be positive")
    entry = b.function.entry_basic_block
    eb = ir.IRBuilder(entry)
    eb.position_at_start(entry)
    slot = eb.alloca(ty, name=name,
                     size=None if count is None else ir.Constant(I64, count))
    slot.align = align
    # The alloca went in before the caller's insertion point if both are in
    # the entry block: keep the caller's builder pointing at the same spot.
    if b.block is entry:
        b._anchor += 1
    return slot


@contextlib.contextmanager
def for_range(b, start, stop, step=1, name="i"):
    """Emit a counted loop ``for (i = start; i < stop; i += step)`` and yield ``i``.

    IR shape: ``br header``; header: ``phi``, ``icmp slt/sgt``, ``cbranch
    body/end``; body (the ``with`` block); latch: ``add nsw``, ``br header``.
    The index type follows ``start`` when it is an IR integer (i32 or i64),
    else the first IR value among ``stop``/``step``; Python ints become
    constants of that type (i64 if all three are Python ints).  A
    Python-int ``step`` may be negative (the comparison becomes ``>``); an
    IR-value ``step`` must be positive.
    On exit the builder is positioned in the block after the loop.
    """
    if isinstance(step, int) and step == 0:
        raise ValueError("for_range step must be non-zero")
    ty = next((v.type for v in (start, stop, step) if isinstance(v, ir.Value)), I64)
    if not isinstance(ty, ir.IntType):
        raise TypeError("for_range start must be an integer, got %s" % ty)
    start_v, stop_v, step_v = (as_value(ty, v) for v in (start, stop, step))
    if stop_v.type != ty or step_v.type != ty:
        raise TypeError("for_range start/stop/step must share one integer type")
    cmp = ">" if isinstance(step, int) and step < 0 else "<"

    pre = b.block
    header = b.append_basic_block(name + ".header")
    body = b.append_basic_block(name + ".body")
    latch = b.append_basic_block(name + ".latch")
    end = b.append_basic_block(name + ".end")

    b.branch(header)
    b.position_at_end(header)
    idx = b.phi(ty, name=name)
    idx.add_incoming(start_v, pre)
    b.cbranch(b.icmp_signed(cmp, idx, stop_v), body, end)

    b.position_at_end(body)
    yield idx
    if not b.block.is_terminated:
        b.branch(latch)

    b.position_at_end(latch)
    nxt = b.add(idx, step_v, name=name + ".next", flags=("nsw",))
    idx.add_incoming(nxt, latch)
    b.branch(header)
    b.position_at_end(end)


@contextlib.contextmanager
def if_then(b, pred, likely=None):
    """Emit ``cbranch pred, then, end``; the ``with`` body fills ``then``.

    Thin wrapper over ``IRBuilder.if_then``; builder ends up in ``end``.
    """
    with b.if_then(pred, likely=likely) as end:
        yield end


@contextlib.contextmanager
def if_else(b, pred, likely=None):
    """Emit ``cbranch pred, then, else`` and yield two context managers ``(then, otherwise)``.

    Usage::

        with if_else(b, pred) as (then, otherwise):
            with then:
                ...
            with otherwise:
                ...

    Thin wrapper over ``IRBuilder.if_else``; builder ends up in the join block.
    """
    with b.if_else(pred, likely=likely) as (then, otherwise):
        yield then, otherwise


def declare_intrinsic(module, name, ret_ty, arg_tys):
    """Declare (once) and return the intrinsic ``name`` with the given signature (no IR)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret_ty, list(arg_tys)), name=name)


def fma(b, x, y, z, name=""):
    """Emit ``call @llvm.fma.<ty>(x, y, z)`` for float scalars/vectors (one rounding)."""
    ty = x.type
    if y.type != ty or z.type != ty:
        raise TypeError("fma operands must share one type, got %s, %s, %s"
                        % (ty, y.type, z.type))
    fn = declare_intrinsic(b.module, "llvm.fma." + _intrinsic_suffix(ty), ty,
                           [ty, ty, ty])
    return b.call(fn, [x, y, z], name=name)


def _intrinsic_suffix(ty):
    """Return the LLVM overloaded-intrinsic suffix for a float scalar/vector type (no IR)."""
    names = {"float": "f32", "double": "f64", "half": "f16"}
    if isinstance(ty, ir.VectorType):
        return "v%d%s" % (ty.count, names[str(ty.element)])
    return names[str(ty)]


def splat(b, x, count, name=""):
    """Emit ``insertelement`` + ``shufflevector`` broadcasting scalar ``x`` to ``<count x ty>``."""
    vty = ir.VectorType(x.type, count)
    v = b.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(I32, 0))
    return b.shuffle_vector(v, ir.Constant(vty, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, count), [0] * count),
                            name=name)
