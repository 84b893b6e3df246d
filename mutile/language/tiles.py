"""Builtins over whole tiles: dot, reductions, scans, tensor descriptors, hints and
debugging output."""
from __future__ import annotations

from ..ir import types as T
from . import compose as C
from . import semantic as S
from .core import _unwrap, builtin, tensor
from .semantic import fail
from .standard import _const_int, _dtype, _shape, expand_dims, reshape


# ---------------------------------------------------------------- dot
@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=T.f32, _builder=None) -> tensor:
    """``acc + input @ other`` for 2-D tiles (M x K) @ (K x N), or batched: 3-D tiles
    (B x M x K) @ (B x K x N) multiply each of the B pairs of matrices (more leading
    dims are batch dims too).

    Float inputs accumulate in ``out_dtype`` (float32); int8 inputs in int32.
    ``input_precision`` is ``"tf32"`` (default for float32 inputs, as in Triton: inputs
    rounded to 10 mantissa bits) or ``"ieee"``. Each product is added in k order with
    one rounding (fused multiply-add), identically on every backend.
    """
    b = _builder
    a, bb = S.to_tensor(input, b), S.to_tensor(other, b)
    for t in (a.dtype, bb.dtype):
        if t in (T.f8e4b8, T.f8e5b16):
            fail(f"dot does not take {t!r} operands (fnuz fp8); convert them to float16 "
                 "first (exactly: every value fits)")
    if len(a.shape) != len(bb.shape) or len(a.shape) < 2:
        fail(f"dot needs two 2-D tiles (or two 3-D tiles, batched), got shapes {a.shape} and "
             f"{bb.shape}")
    if len(a.shape) > 2:
        return _batched_dot(a, bb, _unwrap(acc), input_precision, allow_tf32, out_dtype, b)
    if a.shape[1] != bb.shape[0]:
        fail(f"dot: inner dims differ, {a.shape} @ {bb.shape}")
    if a.dtype != bb.dtype:
        if a.dtype.is_floating() and bb.dtype.is_floating():
            common = S.computation_type(a.dtype, bb.dtype)
            a, bb = S.cast(a, common, b), S.cast(bb, common, b)
        else:
            fail(f"dot operands must have the same dtype, got {a.dtype!r} and {bb.dtype!r}")
    prec = _unwrap(input_precision)
    if prec is None:
        tf32 = _unwrap(allow_tf32)
        prec = "ieee" if tf32 is False else "tf32"
    if prec == "tf32x3":
        prec = "ieee"
    if prec not in ("tf32", "ieee"):
        fail(f"input_precision must be 'tf32' or 'ieee', got {prec!r}")
    if a.dtype != T.f32:
        prec = "ieee"
    out_dtype = _dtype(out_dtype)
    if a.dtype.is_int():
        if a.dtype.bits != 8:
            fail(f"integer dot needs int8/uint8 operands, got {a.dtype!r}")
        out_dtype = T.i32
    elif not a.dtype.is_floating():
        fail(f"dot needs numeric operands, got {a.dtype!r}")
    shape = [a.shape[0], bb.shape[1]]
    acc = _unwrap(acc)
    if acc is None:
        acc = S.constant(b, 0, T.TileType(tuple(shape), out_dtype))
    else:
        acc = S.to_tensor(acc, b)
        if acc.shape != shape:
            fail(f"dot accumulator has shape {acc.shape}, expected {shape}")
        if a.dtype.is_int() != acc.dtype.is_int():
            fail(f"dot accumulator {acc.dtype!r} does not suit {a.dtype!r} operands")
    return tensor(b("dot", a.handle, bb.handle, acc.handle, input_precision=prec))


def _batched_dot(a, bb, acc, input_precision, allow_tf32, out_dtype, b) -> tensor:
    """One 2-D dot per matrix of the batch (the leading dims), restacked: each is the
    2-D dot's result bit for bit."""
    batch = a.shape[:-2]
    if bb.shape[:-2] != batch:
        fail(f"dot: the batch dims differ, {a.shape} @ {bb.shape}")
    if a.shape[-1] != bb.shape[-2]:
        fail(f"dot: inner dims differ, {a.shape} @ {bb.shape}")
    shape = batch + [a.shape[-2], bb.shape[-1]]
    n = 1
    for d in batch:
        n *= d
    flat = [C.reshape(t, [n] + t.shape[-2:], b) for t in (a, bb)]
    accs = [None] * n
    if acc is not None:
        acc = S.to_tensor(acc, b)
        if acc.shape != shape:
            fail(f"dot accumulator has shape {acc.shape}, expected {shape}")
        accs = C.unstack(C.reshape(acc, [n] + shape[-2:], b), b)
    parts = [dot(x, y, c, input_precision, allow_tf32, out_dtype=out_dtype, _builder=b)
             for x, y, c in zip(C.unstack(flat[0], b), C.unstack(flat[1], b), accs)]
    return C.reshape(C.restack(parts, b), shape, b)


# ---------------------------------------------------------------- reductions
def _axis(x: tensor, axis):
    axis = _unwrap(axis)
    if axis is None:
        return None
    axis = _const_int(axis, "axis")
    if not -len(x.shape) <= axis < len(x.shape):
        fail(f"axis {axis} out of range for shape {x.shape}")
    return axis % len(x.shape)


def _reduce(x, axis, kind, keep_dims, b, dtype=None) -> tensor:
    x = S.to_tensor(x, b)
    if not x.shape:
        fail(f"{kind} needs a tile, got a scalar")
    if x.dtype.is_ptr():
        fail(f"cannot reduce pointers ({kind})")
    if dtype is not None:
        x = S.cast(x, dtype, b)
    if kind in ("xor", "or", "and") and not x.dtype.is_int():
        fail(f"{kind} reduction needs integers, got {x.dtype!r}")
    ax = _axis(x, axis)
    if ax is None:
        flat = reshape(x, [x.numel], _builder=b) if len(x.shape) > 1 else x
        r = tensor(b("reduce", flat.handle, axis=0, kind=kind))
        if keep_dims:
            r = S.broadcast_to(r, [1] * len(x.shape), b)
        return r
    r = tensor(b("reduce", x.handle, axis=ax, kind=kind))
    if keep_dims:
        r = expand_dims(r, ax, _builder=b) if r.shape else S.broadcast_to(r, [1], b)
    return r


@builtin
def sum(input, axis=None, keep_dims=False, dtype=None, _builder=None) -> tensor:
    """Sum along ``axis`` (all axes if None). Integers narrower than 32 bits and floats
    narrower than 32 bits sum in int32 / float32 unless ``dtype`` says otherwise."""
    x = S.to_tensor(input, _builder)
    dt = _unwrap(dtype)
    if dt is None:
        if x.dtype.is_int() and x.dtype.bits < 32:
            dt = T.i32 if x.dtype.kind == "int" or x.dtype.is_bool() else T.u32
        elif x.dtype.is_floating() and x.dtype.bits < 32:
            dt = T.f32
    return _reduce(x, axis, "sum", keep_dims, _builder, dt)


def _extreme(kind, input, axis, return_indices, keep_dims, b):
    r = _reduce(input, axis, kind, keep_dims, b)
    if _unwrap(return_indices):
        return r, _reduce(input, axis, "arg" + kind, keep_dims, b)
    return r


@builtin
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False, _builder=None):
    """Maximum along ``axis``; with ``return_indices`` also the (first) index."""
    return _extreme("max", input, axis, return_indices, keep_dims, _builder)


@builtin
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False, _builder=None):
    """Minimum along ``axis``; with ``return_indices`` also the (first) index."""
    return _extreme("min", input, axis, return_indices, keep_dims, _builder)


@builtin
def argmax(input, axis, tie_break_left=True, keep_dims=False, _builder=None) -> tensor:
    """Index (int32) of the first maximum along ``axis``."""
    return _reduce(input, axis, "argmax", keep_dims, _builder)


@builtin
def argmin(input, axis, tie_break_left=True, keep_dims=False, _builder=None) -> tensor:
    """Index (int32) of the first minimum along ``axis``."""
    return _reduce(input, axis, "argmin", keep_dims, _builder)


@builtin
def xor_sum(input, axis=None, keep_dims=False, _builder=None) -> tensor:
    """Bitwise xor of the elements along ``axis``."""
    return _reduce(input, axis, "xor", keep_dims, _builder)


@builtin
def reduce_or(input, axis, keep_dims=False, _builder=None) -> tensor:
    """Bitwise or of the (integer) elements along ``axis``."""
    return _reduce(input, axis, "or", keep_dims, _builder)


@builtin
def softmax(x, dim=None, keep_dims=None, ieee_rounding=False, _builder=None) -> tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``dim`` (default 0, as in Triton — not
    the last dim). The result keeps ``x``'s shape (``keep_dims`` is accepted and ignored,
    as Triton 3.9 does); floats narrower than 32 bits compute in float32, as Triton's
    ``max`` promotes them."""
    b = _builder
    x = S.to_tensor(x, b)
    if not x.dtype.is_floating():
        fail(f"softmax needs floating-point values, got {x.dtype!r}")
    d = 0 if _unwrap(dim) is None else dim
    m = _reduce(S.cast(x, T.f32, b) if x.dtype.bits < 32 else x, d, "max", True, b)
    num = S.unary_float("exp", S.sub(x, m, b), b)
    den = _reduce(num, d, "sum", True, b)
    return S.truediv(num, den, b)


def _scan(x, axis, kind, reverse, b) -> tensor:
    x = S.to_tensor(x, b)
    ax = _axis(x, axis)
    if ax is None:
        fail(f"cum{kind} needs an axis")
    if not _unwrap(reverse):
        return tensor(b("scan", x.handle, axis=ax, kind=kind))
    r = tensor(b("scan", C.flip_axis(x, ax, b).handle, axis=ax, kind=kind))
    return C.flip_axis(r, ax, b)


@builtin
def cumsum(input, axis=0, reverse=False, dtype=None, _builder=None) -> tensor:
    """Inclusive prefix sum along ``axis`` (suffix sum with ``reverse=True``)."""
    x = S.to_tensor(input, _builder)
    dt = _unwrap(dtype)
    if dt is None and x.dtype.is_int() and x.dtype.bits < 32:
        dt = T.u32 if x.dtype.kind == "uint" else T.i32
    if dt is not None:
        x = S.cast(x, dt, _builder)
    return _scan(x, axis, "sum", reverse, _builder)


@builtin
def cumprod(input, axis=0, reverse=False, _builder=None) -> tensor:
    """Inclusive prefix product along ``axis`` (suffix product with ``reverse=True``)."""
    return _scan(input, axis, "prod", reverse, _builder)


# ---------------------------------------------------------------- tensor descriptors
class tensor_descriptor:
    """A global tensor read and written in fixed blocks: ``desc.load([i, j])``."""
    __mutile_desc__ = True

    def __init__(self, handle, block_shape, dtype):
        self.handle, self.block_shape, self.dtype = handle, block_shape, dtype

    def _with_handle(self, h):
        return tensor_descriptor(h, self.block_shape, self.dtype)

    @builtin
    def load(self, offsets, _builder=None) -> tensor:
        """The block at ``offsets`` (elements outside the tensor read as zero)."""
        offs = self._offsets(offsets, _builder)
        return tensor(_builder("desc_load", self.handle, *offs))

    @builtin
    def store(self, offsets, value, _builder=None) -> None:
        """Write ``value`` as the block at ``offsets`` (outside elements are dropped)."""
        b = _builder
        offs = self._offsets(offsets, b)
        v = S.broadcast_to(S.cast(S.to_tensor_typed(value, self.dtype, b), self.dtype, b),
                           self.block_shape, b)
        b.create("desc_store", [self.handle, *offs, v.handle])

    def _offsets(self, offsets, b):
        offsets = _unwrap(offsets)
        if not isinstance(offsets, (list, tuple)) or len(offsets) != len(self.block_shape):
            fail(f"a rank-{len(self.block_shape)} descriptor needs {len(self.block_shape)} offsets")
        out = []
        for o in offsets:
            o = S.to_tensor(o, b)
            if o.shape or not o.dtype.is_int():
                fail(f"descriptor offsets must be integer scalars, got {o.type}")
            out.append(S.cast(o, T.i32, b).handle)
        return out


@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, _builder=None) -> tensor_descriptor:
    """Describe a row-major global tensor (``shape``, ``strides`` in elements) to be
    read and written in blocks of ``block_shape``."""
    b = _builder
    p = S.to_tensor(base, b)
    if not p.dtype.is_ptr() or p.shape:
        fail(f"make_tensor_descriptor needs a scalar pointer base, got {p.type}")
    shape, strides = list(_unwrap(shape)), list(_unwrap(strides))
    block = _shape(block_shape, "block_shape")
    if not len(shape) == len(strides) == len(block):
        fail(f"shape, strides and block_shape must have the same rank, got "
             f"{len(shape)}, {len(strides)}, {len(block)}")
    sizes = []
    for s in shape + strides:
        t = S.to_tensor(s, b)
        if t.shape or not t.dtype.is_int():
            fail(f"descriptor shape and strides must be integer scalars, got {t.type}")
        sizes.append(S.cast(t, T.i64, b).handle)
    h = b("make_desc", p.handle, *sizes, block=block)
    return tensor_descriptor(h, block, p.dtype.element_ty)


# ---------------------------------------------------------------- hints and debugging
def _hint_values(values):
    values = _unwrap(values)
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    return [_const_int(v, "hint value") for v in values]


@builtin
def multiple_of(input, values, _builder=None) -> tensor:
    """Tell the compiler each element of ``input`` is a multiple of ``values``."""
    x = S.to_tensor(input, _builder)
    return tensor(_builder("hint", x.handle, multiple_of=_hint_values(values)))


@builtin
def max_contiguous(input, values, _builder=None) -> tensor:
    """Tell the compiler runs of ``values`` consecutive elements are contiguous."""
    x = S.to_tensor(input, _builder)
    return tensor(_builder("hint", x.handle, max_contiguous=_hint_values(values)))


@builtin
def max_constancy(input, values, _builder=None) -> tensor:
    """Accepted for Triton compatibility; carries no information here."""
    return S.to_tensor(input, _builder)


@builtin
def assume(cond, _builder=None) -> None:
    """Let the compiler take ``cond`` as true."""
    c = S.as_bool(cond, _builder)
    if c.shape:
        fail("assume() takes a scalar condition")
    _builder.create("assume", [c.handle])


@builtin
def device_print(prefix, *args, hex=False, _builder=None) -> None:
    """Each program prints ``prefix``, its program ids and the values of ``args``."""
    prefix = _unwrap(prefix)
    if not isinstance(prefix, str):
        fail("device_print's first argument must be a string prefix")
    vals = [S.to_tensor(a, _builder).handle for a in args]
    attrs = {"prefix": prefix}
    if _unwrap(hex):
        attrs["hex"] = True
    _builder.create("print", vals, None, attrs)


@builtin
def debug_barrier(_builder=None) -> None:
    """Wait until every thread of the program (the block) reaches this point; memory
    written before it is visible to every thread after it. On the llvm backend a
    program runs on one thread, so this orders nothing that is not already ordered."""
    _builder.create("ph.sync", [])


@builtin
def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack, _builder=None):
    """Not supported: mutile cannot run inline assembly (its backends are a CPU JIT and
    the Pinghu interpreter, neither of which runs the GPU assembly Triton kernels embed)."""
    fail("inline_asm_elementwise: mutile cannot run inline assembly (the string is GPU "
         "assembly for NVIDIA or AMD, which neither the llvm CPU backend nor the Pinghu "
         "interpreter executes); write the operation with mutile.language builtins, or "
         "with ml.map_elementwise over a @mutile.jit function")


@builtin
def device_assert(cond, msg="", _builder=None) -> None:
    """Fault (naming this line) where ``cond`` is false."""
    c = S.as_bool(cond, _builder)
    _builder.create("assert", [c.handle], None, {"msg": str(_unwrap(msg))})
