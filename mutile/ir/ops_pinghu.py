"""The Pinghu stage of the tile IR: shared buffers, AsyncBarriers, TME copies, WarpSquad
MMA (SQMMA) and warp specialization, each op defined once (imported by :mod:`.ops`).

The machine facts the rules check are public ones, read from the machine file's [isa]
section (:mod:`mutile.machines`, ``pinghu.toml``, which names their sources).
"""
from __future__ import annotations

import mutile.machines as machines

from . import types as T
from .ops import define, need
from .types import BarrierType, DescType, ScalarType, SharedType, TileType

_ISA = machines.default()
SHARED_BYTES = _ISA.value("isa", "shared_bytes")      # per block (192 KiB)
REGISTER_FILE = _ISA.value("device", "register_file")  # 32-bit registers per MP
SQUAD_THREADS = _ISA.value("isa", "warp_size") * _ISA.value("isa", "squad_warps")  # 128
BARRIER_IDS = _ISA.value("isa", "barrier_ids")        # AsyncBarrier ids per block ...
USABLE_BARRIERS = BARRIER_IDS - _ISA.value("isa", "reserved_barriers")   # ... the last reserved
SWIZZLES = (0, 16, 32, 64)          # bytes; 0 = no swizzle
MAX_DESC_RANK = 5
TME_UNIT = 16                       # shared side: TME and SQMMA move 16-byte rows
TME_GLOBAL_ALIGN = _ISA.value("isa", "tme_global_align")     # global base and strides
TME_MIN_BOX_BYTES = _ISA.value("isa", "tme_min_box_bytes")   # the smallest box
SHARED_ALIGN = 256                  # TME / SQMMA shared buffers
# (M, N) of one SQMMA instruction per WarpSquad, and those TF32 has only with K-major A, B
SQMMA_MN = tuple(tuple(mn) for mn in _ISA.value("isa", "sqmma_mn"))
SQMMA_TF32_KMAJOR_MN = tuple(tuple(mn) for mn in _ISA.value("isa", "sqmma_tf32_kmajor_mn"))
SQMMA_K_BYTES = tuple(_ISA.value("isa", "sqmma_k_bytes"))    # the K span of one instruction
FP8 = ("f8e4m3", "f8e5m2")
NO_TME = ("f8e4b8", "f8e5b16")      # the TME info word's 4-bit element code is full


def sqmma_k_choices(element: ScalarType) -> tuple:
    """The K sizes one SQMMA instruction takes for operands of ``element`` (f32 operands
    run as TF32)."""
    size = 4 if element == T.f32 else element.itemsize
    return tuple(b // size for b in SQMMA_K_BYTES)


def sqmma_operand_ok(a: ScalarType, b: ScalarType) -> bool:
    """Whether SQMMA multiplies an ``a`` operand by a ``b`` operand."""
    if a.name in FP8 and b.name in FP8:
        return True
    return a == b and a.name in ("f16", "bf16", "f32", "i8", "u8")


def sqmma_acc_type(a: ScalarType) -> ScalarType:
    """The accumulator of SQMMA on ``a`` operands: i32 for i8, u32 for u8, else f32."""
    return {"i8": T.i32, "u8": T.u32}.get(a.name, T.f32)


def sqmma_instr_shapes(element: ScalarType, trans_a: bool, trans_b: bool) -> tuple:
    """The (M per WarpSquad, N) of the SQMMA instructions for operands of ``element``
    stored as ``trans_a`` (A MN-major) and ``trans_b`` (B K-major) say: TF32 has some
    shapes only with K-major A and B."""
    if element == T.f32 and (trans_a or not trans_b):
        return tuple(mn for mn in SQMMA_MN if mn not in SQMMA_TF32_KMAJOR_MN)
    return SQMMA_MN


def sqmma_tiling(m: int, n: int, shapes) -> tuple | None:
    """The instruction (M, N) of ``shapes`` that tiles an m x n accumulator in the fewest
    instructions (the taller of equals), or None when none tiles it."""
    fits = [(mi, ni) for mi, ni in shapes if m % mi == 0 and n % ni == 0]
    return max(fits, key=lambda s: (s[0] * s[1], s[0]), default=None)


def sqmma_shapes_text(shapes) -> str:
    """``16x64, 32x32, ...``: instruction shapes for a message."""
    return ", ".join(f"{m}x{n}" for m, n in shapes)


# ---------------------------------------------------------------- checks
def _int_scalar(t, what):
    need(isinstance(t, ScalarType) and t.is_int(), f"{what} must be an integer scalar, got {t}")


def _one_barrier(t, what="barrier"):
    need(isinstance(t, BarrierType), f"{what} must be a barrier, got {t}")
    need(t.count == 1, f"{what} must be one barrier (index the array: bars[i]), got {t}")


def _infer_alloc_shared(ts, a):
    shape, el, sw = tuple(a["shape"]), a["dtype"], a["swizzle"]
    need(isinstance(el, ScalarType) and el != T.i1, f"shared buffers hold numbers, got {el}")
    need(len(shape) >= 1 and all(isinstance(d, int) and d >= 1 for d in shape),
         f"shared buffer dims must be positive integers, got {list(shape)}")
    need(sw in SWIZZLES, f"swizzle must be one of {', '.join(map(str, SWIZZLES))} bytes, got {sw}")
    ty = SharedType(shape, el, sw)
    need(shape[-1] * el.itemsize % TME_UNIT == 0,
         f"a shared buffer's rows must be a multiple of {TME_UNIT} bytes (TME and SQMMA move "
         f"{TME_UNIT}-byte units): {shape[-1]} x {el} is {shape[-1] * el.itemsize} bytes")
    need(ty.nbytes <= SHARED_BYTES, f"shared buffer {ty} needs {ty.nbytes} bytes; a block has "
         f"{SHARED_BYTES} (192 KiB)")
    return [ty]


def _infer_alloc_barriers(ts, a):
    n, w = a["count"], a["arrive_warps"]
    need(isinstance(n, int) and 1 <= n <= USABLE_BARRIERS,
         f"a block has {USABLE_BARRIERS} usable AsyncBarriers; asked for {n}")
    need(isinstance(w, int) and 1 <= w <= 32, f"arrive_warps must be 1..32 warps, got {w}")
    return [BarrierType(n)]


def _infer_smem_index(ts, a):
    buf, i = ts
    need(isinstance(buf, SharedType), f"index needs a shared buffer, got {buf}")
    need(len(buf.shape) >= 2, f"only a buffer of rank >= 2 is indexed by stage, got {buf}")
    _int_scalar(i, "a stage index")
    return [SharedType(buf.shape[1:], buf.element, buf.swizzle)]


def _infer_bar_index(ts, a):
    bars, i = ts
    need(isinstance(bars, BarrierType), f"index needs barriers, got {bars}")
    _int_scalar(i, "a barrier index")
    return [BarrierType(1)]


def _check_expect_tx(op):
    _one_barrier(op.operands[0].type)
    n = op.attrs["bytes"]
    need(isinstance(n, int) and n > 0, f"expect_tx needs a positive byte count, got {n}")


def _check_wait(op):
    _one_barrier(op.operands[0].type)
    _int_scalar(op.operands[1].type, "the phase")


def _check_tme(desc, smem, coords, what):
    need(isinstance(desc, DescType), f"{what} needs a tensor descriptor, got {desc}")
    need(isinstance(smem, SharedType), f"{what} needs a shared buffer, got {smem}")
    need(len(desc.block) <= MAX_DESC_RANK, f"TME descriptors have rank <= {MAX_DESC_RANK}, "
         f"got {len(desc.block)}")
    need(desc.element.name not in NO_TME, f"{what}: TME descriptors have no element code for "
         f"{desc.element!r} (fnuz fp8); copy its bytes as uint8 (bitcast) instead")
    need(smem.shape == tuple(desc.block) and smem.element == desc.element,
         f"{what}: the buffer {smem} is not the descriptor's block "
         f"{TileType(tuple(desc.block), desc.element)}")
    need(len(coords) == len(desc.block), f"{what} needs {len(desc.block)} coordinates, got "
         f"{len(coords)}")
    for c in coords:
        _int_scalar(c, "a TME coordinate")
    inner = desc.block[-1] * desc.element.itemsize
    need(inner % TME_UNIT == 0, f"{what}: the box's inner dim is {inner} bytes; TME copies "
         f"rows of a multiple of {TME_UNIT} bytes")
    total = smem.nbytes
    need(total >= TME_MIN_BOX_BYTES, f"{what}: the box {'x'.join(map(str, desc.block))} of "
         f"{desc.element} is {total} bytes; a TME box is at least {TME_MIN_BOX_BYTES} bytes")


def _check_tme_load(op):
    desc, smem, bar, *coords = [v.type for v in op.operands]
    _check_tme(desc, smem, coords, "tme_load")
    _one_barrier(bar)


def _check_tme_store(op):
    desc, smem, *coords = [v.type for v in op.operands]
    _check_tme(desc, smem, coords, "tme_store")


def sqmma_shapes(a: SharedType, b: SharedType, trans_a: bool, trans_b: bool):
    """(M, N, K) of an SQMMA on stored operands ``a`` and ``b``."""
    m, k = a.shape[::-1] if trans_a else a.shape
    k2, n = b.shape[::-1] if trans_b else b.shape
    need(k == k2, f"sqmma inner dims differ: A is {m}x{k}, B is {k2}x{n}")
    return m, n, k


def _infer_sqmma(ts, a):
    x, y, acc = ts
    for t, nm in ((x, "A"), (y, "B")):
        need(isinstance(t, SharedType) and len(t.shape) == 2,
             f"sqmma operand {nm} must be a 2-D shared buffer, got {t}")
    need(sqmma_operand_ok(x.element, y.element), f"SQMMA has no {x.element} x {y.element} form "
         "(bf16, f16, f32 as tf32, i8, u8, and fp8 e4m3/e5m2 in any mix)")
    ta, tb = a.get("trans_a", False), a.get("trans_b", False)
    m, n, k = sqmma_shapes(x, y, ta, tb)
    want = TileType((m, n), sqmma_acc_type(x.element))
    need(acc == want, f"sqmma accumulator must be {want}, got {acc}")
    shapes = sqmma_instr_shapes(x.element, ta, tb)
    need(sqmma_tiling(m, n, shapes) is not None,
         f"no SQMMA instructions tile a {m}x{n} accumulator: one instruction is M x N (M per "
         f"WarpSquad) {sqmma_shapes_text(shapes)}" + _tf32_note(x.element, shapes))
    ks = sqmma_k_choices(x.element)
    need(k % ks[0] == 0, f"SQMMA on {x.element} steps K by {', '.join(map(str, ks))}; "
         f"K={k} is not a multiple of {ks[0]}")
    return [acc]


def _tf32_note(element: ScalarType, shapes) -> str:
    if element != T.f32 or len(shapes) == len(SQMMA_MN):
        return ""
    return (f" ({sqmma_shapes_text(SQMMA_TF32_KMAJOR_MN)} for f32 as tf32 need K-major A and "
            f"B: A stored M x K, B stored N x K with trans_b)")


def _check_shared_store(op):
    s, v = [x.type for x in op.operands]
    need(isinstance(s, SharedType), f"shared_store needs a shared buffer, got {s}")
    need(v == TileType(s.shape, s.element), f"stored tile must be {TileType(s.shape, s.element)}"
         f", got {v}")


def _infer_shared_load(ts, a):
    s = ts[0]
    need(isinstance(s, SharedType), f"shared_load needs a shared buffer, got {s}")
    return [TileType(s.shape, s.element)]


def _check_ws(op):
    warps = op.attrs["warps"]
    need(len(warps) == len(op.regions) >= 2, "warp_specialize needs two or more partitions, "
         "one warp count each")
    need(all(isinstance(w, int) and w >= 1 for w in warps), f"partition warp counts must be "
         f"positive, got {list(warps)}")
    need(sum(warps) <= 32, f"the partitions have {sum(warps)} warps; a block has at most 32")
    for r in op.regions:
        need(not r.args, "partitions take no arguments")
        t = r.terminator
        need(t is not None and t.name == "yield" and not t.operands,
             "a partition ends in an empty yield")


_NONE = {"infer": lambda ts, a: [], "pure": False, "category": "pinghu"}

define("ph.alloc_shared", (), attrs=("shape", "dtype", "swizzle"), infer=_infer_alloc_shared,
       pure=False, category="pinghu", doc="a shared-memory buffer (256-byte aligned)")
define("ph.alloc_barriers", (), attrs=("count", "arrive_warps"), infer=_infer_alloc_barriers,
       pure=False, category="pinghu",
       doc="count AsyncBarriers, each completing a phase after arrive_warps warp arrivals")
define("ph.smem_index", ("buf", "index"), infer=_infer_smem_index, category="pinghu",
       doc="stage index of a buffer: the sub-buffer buf[index]")
define("ph.bar_index", ("bars", "index"), infer=_infer_bar_index, category="pinghu",
       doc="one barrier of an array")
define("ph.expect_tx", ("bar",), attrs=("bytes",), check=_check_expect_tx, **_NONE,
       doc="add bytes to the barrier's expected transactions and arrive once")
define("ph.arrive", ("bar",), infer=lambda ts, a: [T.i32], check=lambda op: _one_barrier(
       op.operands[0].type), pure=False, category="pinghu",
       doc="each executing warp arrives; the result is the phase parity before")
define("ph.wait", ("bar", "phase"), check=_check_wait, **_NONE,
       doc="wait until the barrier's phase of parity `phase` has completed")
define("ph.tme_load", ("desc", "smem", "bar", "coords*"), check=_check_tme_load, **_NONE,
       doc="TME copy of the descriptor's block at coords into smem, counted on bar")
define("ph.tme_store", ("desc", "smem", "coords*"), check=_check_tme_store, **_NONE,
       doc="TME copy of smem to the descriptor's block at coords (out-of-bounds dropped)")
define("ph.tme_store_wait", (), **_NONE, doc="wait until this block's TME stores completed")
define("ph.sqmma", ("a", "b", "acc"), attrs=("accumulate",),
       optional_attrs=("trans_a", "trans_b", "neg_a", "neg_b"), infer=_infer_sqmma, pure=False,
       category="pinghu",
       doc="asynchronous WarpSquad MMA: (-)a @ (-)b (+ acc) from shared operands")
define("ph.sqmma_wait", ("deps*",), infer=lambda ts, a: list(ts), pure=False, category="pinghu",
       doc="wait for the squad's SQMMAs; returns deps, now complete")
define("ph.fence_shared", (), **_NONE,
       doc="order earlier shared writes before later TME/SQMMA reads")
define("ph.shared_load", ("smem",), infer=_infer_shared_load, pure=False, category="pinghu",
       doc="read a shared buffer into a tile")
define("ph.shared_store", ("smem", "value"), check=_check_shared_store, **_NONE,
       doc="write a tile into a shared buffer")
define("ph.warp_specialize", (), attrs=("warps",), regions=-1, check=_check_ws, **_NONE,
       doc="run each region on its own warps (counts in `warps`), concurrently")
define("ph.sync", (), **_NONE, doc="wait for every warp of the block (inside a partition: "
       "of the partition)")
define("ph.desc_aligned", ("desc",), infer=lambda ts, a: [T.i1], category="pinghu",
       check=lambda op: need(isinstance(op.operands[0].type, DescType), "desc_aligned needs "
                             f"a descriptor, got {op.operands[0].type}"),
       doc=f"whether TME can copy through the descriptor ({TME_GLOBAL_ALIGN}-byte aligned base "
           "and strides, contiguous rows)")
