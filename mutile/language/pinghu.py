"""``mutile.language.pinghu`` (``ph``): Pinghu's asynchronous engines, explicitly.

Shared buffers, AsyncBarriers, TME tile copies and WarpSquad MMA (SQMMA), for kernels
written the way MUTLASS schedules them. Everything here runs on ``backend="pinghu"``
only (the llvm backend reports the first ``ph`` op it meets). A whole pipelined GEMM::

    @mutile.jit
    def gemm(a_desc, b_desc, c_ptr, M, N, K, BM: ml.constexpr, BN: ml.constexpr,
             BK: ml.constexpr, STAGES: ml.constexpr):
        a_s = ph.alloc_shared((STAGES, BM, BK), ml.bfloat16, swizzle=64)
        b_s = ph.alloc_shared((STAGES, BK, BN), ml.bfloat16, swizzle=64)
        full = ph.alloc_barriers(STAGES, arrive_warps=1)
        acc = ml.zeros((BM, BN), ml.float32)
        ...  # prologue: expect_tx + tme_load for the first stages
        for k in range(ml.cdiv(K, BK)):
            s = k % STAGES
            ph.barrier_wait(full[s], (k // STAGES) & 1)
            acc = ph.sqmma(a_s[s], b_s[s], acc)
            acc = ph.sqmma_wait(acc)
            ...  # refill stage s for step k + STAGES

(the complete kernel is ``kernels/pinghu_gemm.py``, installed as
``mutile.kernels.pinghu_gemm``; ``docs/pinghu-async.md`` walks through it). Rules the compiler checks, each a CompilationError at the line:
shared buffers total at most 192 KiB and are 256-byte aligned; a block has 63 usable
AsyncBarriers; TME boxes have rank <= 5, rows of a multiple of 16 bytes and at least 32
bytes; SQMMA covers each WarpSquad's part of the accumulator with instructions of one M x N
of 16x64, 32x32, 32x64, 32x128, 64x16, 64x32, 64x64, 64x128, 128x32, 128x64, 128x128
(TF32 128x64 only with K-major A and B), K in steps of 32/64/128 bytes, operands bf16, f16,
f32 (as tf32), i8, u8 or fp8 (e4m3/e5m2, mixable).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.ops import OpRuleError
from . import semantic as S
from .core import _unwrap, builtin, tensor
from .semantic import fail
from .standard import _const_int, _dtype, full
from .tiles import tensor_descriptor


def _make(b, name, operands=(), attrs=None):
    """Create op ``name`` and check its definition's rules (errors at the kernel line)."""
    try:
        op = b.create(name, list(operands), None, attrs or {})
        if op.opdef.check is not None:
            op.opdef.check(op)
        return op
    except OpRuleError as e:
        what = name[3:]
        msg = str(e)
        fail(msg if msg.startswith(what) else f"{what}: {msg}")


def _index(x, b) -> object:
    i = S.to_tensor(x, b)
    if i.shape or not i.dtype.is_int():
        fail(f"an index must be an integer scalar, got {i.type}")
    return S.cast(i, T.i32, b).handle


class _Indexed:
    """A runtime object named by one IR value (``handle``): passed to ``@jit`` functions
    like a tensor, indexed with ``x[i]`` or ``x.index(i)`` (the op ``INDEX_OP``)."""
    __mutile_desc__ = True
    INDEX_OP = ""

    def __init__(self, handle):
        self.handle = handle

    @property
    def type(self):
        return self.handle.type

    def _with_handle(self, h):
        return type(self)(h)

    def __mutile_getitem__(self, i, b):
        return self.index(i, _builder=b)

    @builtin
    def index(self, i, _builder=None):
        """Element ``i`` (an integer scalar): a stage of a buffer, one of the barriers."""
        return type(self)(_make(_builder, self.INDEX_OP, [self.handle, _index(i, _builder)])
                          .result)


class shared_buffer(_Indexed):
    """A buffer in the block's shared memory (from :func:`alloc_shared`). ``buf[i]`` (or
    ``buf.index(i)``) is stage ``i`` of a buffer whose first dim counts stages."""
    INDEX_OP = "ph.smem_index"

    @property
    def shape(self):
        return list(self.type.shape)

    @property
    def dtype(self):
        return self.type.element

    @builtin
    def load(self, _builder=None) -> tensor:
        """The buffer's contents as a tile (a generic shared-memory read)."""
        return tensor(_make(_builder, "ph.shared_load", [self.handle]).result)

    @builtin
    def store(self, value, _builder=None) -> None:
        """Write tile ``value`` (cast to the buffer's type) into the buffer."""
        b = _builder
        v = S.cast(S.to_tensor_typed(value, self.dtype, b), self.dtype, b)
        v = S.broadcast_to(v, self.shape, b)
        _make(b, "ph.shared_store", [self.handle, v.handle])


class barrier(_Indexed):
    """AsyncBarriers (from :func:`alloc_barriers`); ``bars[i]`` is barrier ``i``."""
    INDEX_OP = "ph.bar_index"


def _bar(x) -> object:
    x = _unwrap(x)
    if not isinstance(x, barrier):
        fail(f"expected a barrier (from ph.alloc_barriers), got {type(x).__name__}")
    return x.handle


def _smem(x, what="buffer") -> object:
    x = _unwrap(x)
    if not isinstance(x, shared_buffer):
        fail(f"expected a shared {what} (from ph.alloc_shared), got {type(x).__name__}")
    return x.handle


@builtin
def alloc_shared(shape, dtype, swizzle=0, _builder=None) -> shared_buffer:
    """A shared-memory buffer of ``shape`` (row-major) and ``dtype``, stored under a
    ``swizzle`` of 0, 16, 32 or 64 bytes; 256-byte aligned. Its first dim may count
    pipeline stages: ``a_s = ph.alloc_shared((3, 64, 64), ml.bfloat16, swizzle=64)``,
    then ``a_s[k % 3]``."""
    shape = _unwrap(shape)
    shape = [shape] if not isinstance(shape, (list, tuple)) else list(shape)
    dims = [_const_int(d, "shared buffer dims") for d in shape]
    dt = _dtype(dtype)
    if not isinstance(dt, T.ScalarType):
        fail(f"shared buffers hold numbers, got {dt}")
    return shared_buffer(_make(_builder, "ph.alloc_shared", (), {
        "shape": dims, "dtype": dt, "swizzle": _const_int(swizzle, "swizzle")}).result)


@builtin
def alloc_barriers(count, arrive_warps=1, _builder=None) -> barrier:
    """``count`` AsyncBarriers, initialized: each completes a phase when ``arrive_warps``
    warps have arrived and its expected transaction bytes have landed.
    ``full = ph.alloc_barriers(3, arrive_warps=1)``; ``full[s]`` is one of them."""
    return barrier(_make(_builder, "ph.alloc_barriers", (), {
        "count": _const_int(count, "count"),
        "arrive_warps": _const_int(arrive_warps, "arrive_warps")}).result)


@builtin
def alloc_barrier(arrive_warps=1, _builder=None) -> barrier:
    """One AsyncBarrier (see :func:`alloc_barriers`): ``done = ph.alloc_barrier(4)``."""
    return alloc_barriers(1, arrive_warps, _builder=_builder)


@builtin
def barrier_expect_tx(bar, nbytes, _builder=None) -> None:
    """Expect ``nbytes`` (a constexpr) more transaction bytes on ``bar`` in its current
    phase, and arrive on it once (issued by one thread of the executing warps, so it is
    one warp's arrival). Put it before the TME copies it covers:
    ``ph.barrier_expect_tx(full[s], 2 * BM * BK)``."""
    _make(_builder, "ph.expect_tx", [_bar(bar)], {"bytes": _const_int(nbytes, "nbytes")})


@builtin
def barrier_arrive(bar, _builder=None) -> tensor:
    """Every executing warp arrives on ``bar``; returns the phase parity (i32 0 or 1)
    the barrier had before. ``ph.barrier_arrive(empty[s])`` releases a stage."""
    return tensor(_make(_builder, "ph.arrive", [_bar(bar)]).result)


@builtin
def barrier_wait(bar, phase, _builder=None) -> None:
    """Wait until the phase of parity ``phase`` (0 or 1) of ``bar`` has completed; the
    waiting warps yield. Step ``k`` of a ring of ``S`` stages waits for phase
    ``(k // S) & 1``: ``ph.barrier_wait(full[k % S], (k // S) & 1)``."""
    c = _unwrap(phase)
    if isinstance(c, int) and not isinstance(c, bool) and c not in (0, 1):
        fail(f"a phase parity is 0 or 1, got {c}")
    p = S.to_tensor(phase, _builder)
    if p.shape or not (p.dtype.is_int() or p.dtype == T.i1):
        fail(f"the phase must be an integer scalar, got {p.type}")
    _make(_builder, "ph.wait", [_bar(bar), S.cast(p, T.i32, _builder).handle])


def _coords(desc, coords, b):
    desc = _unwrap(desc)
    if not isinstance(desc, tensor_descriptor):
        fail(f"expected a tensor descriptor, got {type(desc).__name__}")
    coords = _unwrap(coords)
    coords = list(coords) if isinstance(coords, (list, tuple)) else [coords]
    return desc, [_index(c, b) for c in coords]


@builtin
def tme_load(desc, coords, smem, bar, _builder=None) -> None:
    """Start a TME copy of ``desc``'s block at element ``coords`` into ``smem``; it
    lands asynchronously and counts its bytes on ``bar`` (out-of-bounds elements read
    0). Issued once per block: ``ph.tme_load(a_desc, [off_m, k * BK], a_s[s], full[s])``."""
    d, cs = _coords(desc, coords, _builder)
    _make(_builder, "ph.tme_load", [d.handle, _smem(smem), _bar(bar), *cs])


@builtin
def tme_store(desc, coords, smem, _builder=None) -> None:
    """Start a TME copy of ``smem`` to ``desc``'s block at ``coords`` (elements outside
    the tensor are dropped); it waits for every warp's writes of ``smem`` first. Write
    ``smem`` and :func:`fence_shared` before; finish with :func:`tme_store_wait`:
    ``c_s.store(acc); ph.fence_shared(); ph.tme_store(c_desc, [off_m, off_n], c_s)``."""
    d, cs = _coords(desc, coords, _builder)
    _make(_builder, "ph.tme_store", [d.handle, _smem(smem), *cs])


@builtin
def tme_store_wait(_builder=None) -> None:
    """Wait until this block's TME stores have completed (they read ``smem`` until then:
    ``ph.tme_store(c_desc, [m, n], c_s); ph.tme_store_wait()`` before reusing ``c_s``)."""
    _make(_builder, "ph.tme_store_wait")


@builtin
def sqmma(a, b, acc=None, accumulate=True, trans_a=False, trans_b=False, neg_a=False,
          neg_b=False, _builder=None) -> tensor:
    """Start a WarpSquad MMA: ``a @ b + acc`` (``accumulate=False`` or ``acc=None``:
    ``a @ b``) with both operands in shared memory. ``trans_a``: ``a`` is stored K x M;
    ``trans_b``: ``b`` is stored N x K (as for ``q @ k.T``). ``neg_a`` / ``neg_b``
    (constexpr; the instruction's ScaleIn): multiply ``-a`` / ``-b`` instead (e.g.
    ``acc - a @ b`` with ``neg_a=True``). The result is valid after
    :func:`sqmma_wait`: ``acc = ph.sqmma(a_s[s], b_s[s], acc); acc = ph.sqmma_wait(acc)``.
    Needs ``num_warps`` a multiple of 4 (the accumulator's rows split over the squads);
    each squad's part is covered by instructions of one of the machine's M x N shapes."""
    bld = _builder
    ha, hb = _smem(a, "operand"), _smem(b, "operand")
    accumulate = bool(_unwrap(accumulate))
    ta, tb = bool(_unwrap(trans_a)), bool(_unwrap(trans_b))
    na, nb = bool(_unwrap(neg_a)), bool(_unwrap(neg_b))
    if acc is None:
        at, bt = ha.type, hb.type
        if not (isinstance(at, T.SharedType) and isinstance(bt, T.SharedType)
                and len(at.shape) == 2 and len(bt.shape) == 2):
            fail("sqmma operands must be 2-D shared buffers")
        m = at.shape[1] if ta else at.shape[0]
        n = bt.shape[0] if tb else bt.shape[1]
        from ..ir.ops_pinghu import sqmma_acc_type
        acc = full([m, n], 0, sqmma_acc_type(at.element), _builder=bld)
        accumulate = False
    acc = S.to_tensor(acc, bld)
    attrs = {"accumulate": accumulate}
    if ta:
        attrs["trans_a"] = True
    if tb:
        attrs["trans_b"] = True
    if na:
        attrs["neg_a"] = True
    if nb:
        attrs["neg_b"] = True
    return tensor(_make(bld, "ph.sqmma", [ha, hb, acc.handle], attrs).result)


@builtin
def sqmma_wait(*deps, _builder=None):
    """Wait until this WarpSquad's SQMMAs have completed; returns ``deps`` (the
    accumulators, now valid): ``acc = ph.sqmma_wait(acc)``."""
    hs = [S.to_tensor(d, _builder).handle for d in deps]
    op = _make(_builder, "ph.sqmma_wait", hs)
    res = [tensor(r) for r in op.results]
    return None if not res else res[0] if len(res) == 1 else tuple(res)


@builtin
def fence_shared(_builder=None) -> None:
    """Order this thread's earlier shared-memory writes before later TME and SQMMA reads
    (after ``smem.store(tile)``, before ``ph.tme_store`` or ``ph.sqmma`` on it)."""
    _make(_builder, "ph.fence_shared")


@builtin
def sync_warps(_builder=None) -> None:
    """A barrier for every warp of the block (inside a ``warp_specialize`` partition: of
    the partition), e.g. before a TME copy overwrites a buffer all warps just read:
    ``t = a_s.load(); ph.sync_warps()``."""
    _make(_builder, "ph.sync")


def warp_specialize(partitions):
    """Run partitions concurrently on their own warps::

        ph.warp_specialize([(consumer, (a_s, b_s, full, empty, ...), 4),
                            (producer, (a_desc, b_desc, a_s, b_s, full, empty, ...), 1)])

    Each entry is (a ``@mutile.jit`` function, its arguments, its warp count). The first
    partition runs on the kernel's ``num_warps`` warps (its warp count must equal it);
    the others add warps to the block. Partitions share the kernel's scalars, shared
    buffers, barriers and descriptors; tile code runs only inside partitions, and a
    partition that issues SQMMA needs a multiple of 4 warps. (Handled by the compiler.)"""
    raise RuntimeError("ph.warp_specialize can only be used inside @mutile.jit")


__all__ = ["alloc_barrier", "alloc_barriers", "alloc_shared", "barrier", "barrier_arrive",
           "barrier_expect_tx", "barrier_wait", "fence_shared", "shared_buffer", "sqmma",
           "sqmma_wait", "sync_warps", "tme_load", "tme_store", "tme_store_wait",
           "warp_specialize"]
