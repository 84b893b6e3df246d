"""Per-block FP8 GEMM (DeepSeek-V3's recipe) and its quantizers, in Triton's dialect.

    q_a, s_a = quantize_act_1x128(x)          # x: [M, K] -> e4m3 [M, K], f32 [M, ceil(K/128)]
    q_w, s_w = quantize_weight_128x128(w)     # w: [N, K] -> e4m3 [N, K],
                                              #    f32 [ceil(N/128), ceil(K/128)]
    y = fp8_gemm_blockwise(q_a, s_a, q_w, s_w)   # ~= x @ w.T, bf16 [M, N]

Scales are dequantization multipliers (``x ~= q * scale``). **Quantization**, per 1x128
(activations) or 128x128 (weights) block: ``amax = max |x|`` over the block (in f32),
``scale = amax / 448`` (1.0 for an all-zero block), ``q = e4m3(clamp(x * (448 / amax),
-448, 448))``: the f32 product rounded once to nearest, ties to even, after a clamp that
makes it saturating (mutile's own f32 -> e4m3 conversion is non-saturating: above 464
gives NaN, docs/semantics.md "Overflow"; the clamp keeps the product's rounding from
pushing the block's largest element over 448).

**The GEMM.** ``out[m, n] = sum_kb s_a[m, kb] * s_w[n // 128, kb] * (sum_{k in kb}
q_a[m, k] * q_w[n, k])``: the 128-long partial dot of each K block accumulates in f32 on
the tensor cores (``ml.dot`` into a fresh accumulator), then is scaled by the product
of its two block scales and added to the f32 result once per K block -- the promotion
DeepSeek-V3 describes. ``K`` need not be a multiple of 128 (the last block is short and
its out-of-bounds elements read as zero). On ``backend="pinghu"`` the K loop is a TME +
SQMMA pipeline (the compiler's async lowering); the scales are read with ordinary loads
into registers in the accumulator's layout, one vector of ``BLOCK_M`` A scales and one of
``BLOCK_N`` weight scales per K block (the explicit kernel loads them a block ahead).
"""
import numpy as np

import mutile
import mutile.language as ml

import mutile.language.pinghu as ph

from .gemm_common import _cores, prune_bm_bn, prune_for_shape, tile_coords
from .gemm_pinghu import program_steps

E4M3_MAX = 448.0
QBLOCK = 128


@mutile.jit
def fp8_blockwise_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, out_ptr, M, N, K, stride_am,
                         stride_bn, stride_asm, stride_bsn, stride_om, stride_on,
                         BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr, GROUP_M: ml.constexpr,
                         PERSISTENT: ml.constexpr = 0):
    """Programs walk the output tiles (grouped order) ``pid, pid + P, ...`` in one
    flattened loop over (tile, 128-wide K block). ``PERSISTENT`` is read by the host's
    grid only."""
    BLOCK_K: ml.constexpr = 128
    a_desc = ml.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = ml.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                       block_shape=[BLOCK_N, BLOCK_K])
    pid, nprog, num_pid_m, num_pid_n, k_steps, steps = program_steps(M, N, K, BLOCK_M,
                                                                     BLOCK_N, BLOCK_K)
    acc = ml.zeros((BLOCK_M, BLOCK_N), dtype=ml.float32)
    for it in range(0, steps):
        kk = it % k_steps
        pid_m, pid_n = tile_coords(pid + (it // k_steps) * nprog, num_pid_m, num_pid_n,
                                   GROUP_M)
        a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, kk * BLOCK_K])
        part = ml.dot(a, ml.trans(b), ml.zeros((BLOCK_M, BLOCK_N), dtype=ml.float32))
        offs_m = pid_m * BLOCK_M + ml.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + ml.arange(0, BLOCK_N)
        sa = ml.load(as_ptr + offs_m * stride_asm + kk, mask=offs_m < M, other=0.0)
        sb = ml.load(bs_ptr + (offs_n // 128) * stride_bsn + kk, mask=offs_n < N, other=0.0)
        acc += part * (sa[:, None] * sb[None, :])
        if kk == k_steps - 1:
            mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
            ml.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on,
                     acc.to(out_ptr.dtype.element_ty), mask=mask)
            acc = ml.zeros((BLOCK_M, BLOCK_N), dtype=ml.float32)


@mutile.jit
def _blockwise_producer(a_desc, b_desc, a_s, b_s, full, empty, M, N, K, BM: ml.constexpr,
                        BN: ml.constexpr, GROUP_M: ml.constexpr, STAGES: ml.constexpr,
                        SQUADS: ml.constexpr):
    """One warp: per (tile, 128-K block) of this program, wait until its stage is free,
    then copy A's rows in one box per consumer squad (``a_s[SQUADS * s + q]``) and B's
    rows in two halves of the tile's columns (``b_s[2 * s + j]``)."""
    pid, nprog, num_pid_m, num_pid_n, k_steps, steps = program_steps(M, N, K, BM, BN, 128)
    for it in range(steps):
        s = it % STAGES
        ph.barrier_wait(empty[s], ((it // STAGES) & 1) ^ 1)
        pid_m, pid_n = tile_coords(pid + (it // k_steps) * nprog, num_pid_m, num_pid_n,
                                   GROUP_M)
        k0 = (it % k_steps) * 128
        ph.barrier_expect_tx(full[s], (BM + BN) * 128)
        for q in ml.static_range(SQUADS):
            ph.tme_load(a_desc, [pid_m * BM + q * (BM // SQUADS), k0], a_s[SQUADS * s + q],
                        full[s])
        for j in ml.static_range(2):
            ph.tme_load(b_desc, [pid_n * BN + j * (BN // 2), k0], b_s[2 * s + j], full[s])


@mutile.jit
def _blockwise_consumer(a_s, b_s, full, empty, as_ptr, bs_ptr, out_ptr, M, N, K, stride_asm,
                        stride_bsn, stride_om, stride_on, BM: ml.constexpr, BN: ml.constexpr,
                        GROUP_M: ml.constexpr, STAGES: ml.constexpr, SQUADS: ml.constexpr,
                        SQUAD: ml.constexpr):
    """One consumer WarpSquad, a partition of its own: rows ``SQUAD * BM / SQUADS`` on of
    each tile. Per 128-K block and half of the tile's columns, an SQMMA into a fresh f32
    partial, then ``acc_j = fma(partial, s_a[:, None] * s_b, acc_j)`` with the A scales
    in registers in the accumulator's layout, loaded a K block ahead (their latency hides
    behind this block's SQMMAs). A half-width partial is what lets a 128-row
    squad hold its 128 x 128 accumulator (128 registers a thread) and promote without
    spilling (a full-width one would need 256); the other squad's SQMMAs run while this
    one scales."""
    SM: ml.constexpr = BM // SQUADS
    HN: ml.constexpr = BN // 2
    pid, nprog, num_pid_m, num_pid_n, k_steps, steps = program_steps(M, N, K, BM, BN, 128)
    it = 0
    for tile in range(pid, num_pid_m * num_pid_n, nprog):
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BM + SQUAD * SM + ml.arange(0, SM)
        acc0 = ml.zeros((SM, HN), ml.float32)
        acc1 = ml.zeros((SM, HN), ml.float32)
        sb_row = bs_ptr + (pid_n * BN // 128) * stride_bsn                  # BN = 128
        sa_rows = as_ptr + offs_m[:, None] * stride_asm
        in_m = offs_m[:, None] < M
        nsb = ml.load(sb_row)
        nsa = ml.load(sa_rows, mask=in_m, other=0.0)
        for kk in range(k_steps):
            s = it % STAGES
            sab = nsa * nsb
            # the next K block's scales, loaded while this block's SQMMAs run
            more = kk + 1 < k_steps
            nsb = ml.load(sb_row + kk + 1, mask=more, other=0.0)
            nsa = ml.load(sa_rows + kk + 1, mask=in_m & more, other=0.0)
            a = a_s[SQUADS * s + SQUAD]
            ph.barrier_wait(full[s], (it // STAGES) & 1)
            part = ph.sqmma_wait(ph.sqmma(a, b_s[2 * s], None, trans_b=True))
            acc0 = ml.fma(part, sab, acc0)
            part = ph.sqmma_wait(ph.sqmma(a, b_s[2 * s + 1], None, trans_b=True))
            ph.barrier_arrive(empty[s])
            acc1 = ml.fma(part, sab, acc1)
            it += 1
        offs_n = pid_n * BN + ml.arange(0, HN)
        o = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
        rows = offs_m[:, None] < M
        ty = out_ptr.dtype.element_ty
        ml.store(o, acc0.to(ty), mask=rows & (offs_n[None, :] < N))
        ml.store(o + HN * stride_on, acc1.to(ty), mask=rows & (offs_n[None, :] + HN < N))


@mutile.jit
def fp8_blockwise_ws_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, out_ptr, M, N, K, stride_am,
                            stride_bn, stride_asm, stride_bsn, stride_om, stride_on,
                            BM: ml.constexpr, BN: ml.constexpr, GROUP_M: ml.constexpr,
                            STAGES: ml.constexpr, NUM_WARPS: ml.constexpr,
                            PERSISTENT: ml.constexpr = 0):
    """The explicit Pinghu path (``backend="pinghu"``, ``BN`` = 128): a TME producer warp
    (B stored [N, K]) feeding ``NUM_WARPS / 4`` (1 or 2) consumer squads, each a
    partition of its own, that promote and scale once per 128-K block. Launched with
    ``num_warps=4`` (the first partition's warps)."""
    SQUADS: ml.constexpr = NUM_WARPS // 4
    a_desc = ml.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BM // SQUADS, 128])
    b_desc = ml.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                       block_shape=[BN // 2, 128])
    a_s = ph.alloc_shared((SQUADS * STAGES, BM // SQUADS, 128), a_desc.dtype, swizzle=64)
    b_s = ph.alloc_shared((2 * STAGES, BN // 2, 128), b_desc.dtype, swizzle=64)
    full = ph.alloc_barriers(STAGES, arrive_warps=1)
    empty = ph.alloc_barriers(STAGES, arrive_warps=NUM_WARPS)
    ring = (_blockwise_producer, (a_desc, b_desc, a_s, b_s, full, empty, M, N, K, BM, BN,
                                  GROUP_M, STAGES, SQUADS), 1)
    first = (_blockwise_consumer, (a_s, b_s, full, empty, as_ptr, bs_ptr, out_ptr, M, N, K,
                                   stride_asm, stride_bsn, stride_om, stride_on, BM, BN,
                                   GROUP_M, STAGES, SQUADS, 0), 4)
    if SQUADS == 1:
        ph.warp_specialize([first, ring])
    else:
        ph.warp_specialize([first, (_blockwise_consumer, (
            a_s, b_s, full, empty, as_ptr, bs_ptr, out_ptr, M, N, K, stride_asm, stride_bsn,
            stride_om, stride_on, BM, BN, GROUP_M, STAGES, SQUADS, 1), 4), ring])


@mutile.jit
def quantize_kernel(x_ptr, q_ptr, s_ptr, R, C, stride_xr, stride_qr, stride_sr,
                    BLOCK_R: ml.constexpr, BLOCK_C: ml.constexpr, ROWWISE: ml.constexpr):
    """Quantize the ``BLOCK_R x BLOCK_C`` block (program ids: row block, column block) of
    ``x`` to e4m3 with its f32 scale(s): one per row (``ROWWISE``, the 1x128 recipe) or
    one for the block (128x128)."""
    offs_r = ml.program_id(0) * BLOCK_R + ml.arange(0, BLOCK_R)
    offs_c = ml.program_id(1) * BLOCK_C + ml.arange(0, BLOCK_C)
    mask = (offs_r[:, None] < R) & (offs_c[None, :] < C)
    x = ml.load(x_ptr + offs_r[:, None] * stride_xr + offs_c[None, :], mask=mask,
                other=0.0).to(ml.float32)
    if ROWWISE:
        amax = ml.max(ml.abs(x), axis=1)                    # [BLOCK_R]: one per row
    else:
        amax = ml.max(ml.max(ml.abs(x), axis=1), axis=0)    # one for the block
    nonzero = amax > 0.0
    scale = ml.where(nonzero, amax / 448.0, 1.0)
    inv = ml.where(nonzero, 448.0 / ml.where(nonzero, amax, 1.0), 1.0)
    if ROWWISE:
        q = ml.clamp(x * inv[:, None], -448.0, 448.0)
        ml.store(s_ptr + offs_r * stride_sr + ml.program_id(1), scale, mask=offs_r < R)
    else:
        q = ml.clamp(x * inv, -448.0, 448.0)
        ml.store(s_ptr + ml.program_id(0) * stride_sr + ml.program_id(1), scale)
    ml.store(q_ptr + offs_r[:, None] * stride_qr + offs_c[None, :],
             q.to(q_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------- host side
def _e4m3():
    import ml_dtypes
    return ml_dtypes.float8_e4m3fn


def _quantize(x, rowwise, backend, launch):
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"quantize: x must be 2-D, got shape {x.shape}")
    if x.dtype.name not in ("float32", "float16", "bfloat16"):
        raise TypeError(f"quantize: x must be float32, float16 or bfloat16, got {x.dtype}")
    x = np.ascontiguousarray(x)
    R, C = x.shape
    q = np.empty((R, C), _e4m3())
    nr = mutile.cdiv(R, QBLOCK)
    s = np.empty((R if rowwise else nr, mutile.cdiv(C, QBLOCK)), np.float32)
    if R == 0 or C == 0:
        return q, s
    block_r = 32 if rowwise else QBLOCK
    grid = (mutile.cdiv(R, block_r), mutile.cdiv(C, QBLOCK))
    quantize_kernel[grid](x, q, s, R, C, C, C, s.shape[1], BLOCK_R=block_r, BLOCK_C=QBLOCK,
                          ROWWISE=rowwise, backend=_backend(backend), num_warps=4, **launch)
    return q, s


def _backend(backend):
    from mutile.runtime.jit import default_backend
    return backend or default_backend()


def quantize_act_1x128(x, backend=None, **launch):
    """Quantize activations ``x`` [M, K] (f32/f16/bf16) to e4m3 with one f32 scale per
    row per 128 columns: returns ``(q [M, K] e4m3, scale [M, ceil(K/128)] f32)``,
    ``x ~= q * scale`` (saturating, amax-based; rounding in the module docstring)."""
    return _quantize(x, True, backend, launch)


def quantize_weight_128x128(w, backend=None, **launch):
    """Quantize a weight ``w`` [N, K] (f32/f16/bf16) to e4m3 with one f32 scale per
    128x128 block: returns ``(q [N, K] e4m3, scale [ceil(N/128), ceil(K/128)] f32)``."""
    return _quantize(w, False, backend, launch)


def _ws_space() -> list:
    """The explicit kernel's tuned configs: 256 x 128 tiles on two 128-row squads or
    128 x 128 on one; three or four stages; the first also persistent. (A block is
    8 + 1 or 4 + 1 warps: within the register file at 227 registers a thread. A squad
    holds whole rows, one a thread, so the scales need no shared memory and each squad
    can be a partition of its own.)"""
    out = [mutile.Config(dict(BM=bm, BN=128, GROUP_M=8, STAGES=stages, NUM_WARPS=w,
                              PERSISTENT=0), num_warps=4)
           for bm, w in ((256, 8), (128, 4)) for stages in (3, 4)]
    out.append(mutile.Config(dict(BM=256, BN=128, GROUP_M=8, STAGES=4, NUM_WARPS=8,
                                  PERSISTENT=1), num_warps=4))
    return out


def _portable_space() -> list:
    """The portable kernel's tuned configs (tiles; 8 warps, 2 stages)."""
    return [mutile.Config(dict(BLOCK_M=bm, BLOCK_N=bn, GROUP_M=8, PERSISTENT=0), num_warps=8,
                          num_stages=2) for bm, bn in ((64, 64), (64, 128), (128, 64),
                                                       (128, 128))]


TUNE_KEY = ["M", "N", "K"]
ws_tuned = mutile.autotune(configs=_ws_space(), key=TUNE_KEY,
                           prune_configs_by={"early_config_prune": prune_bm_bn})(
    fp8_blockwise_ws_kernel)
portable_tuned = mutile.autotune(configs=_portable_space(), key=TUNE_KEY,
                                 prune_configs_by={"early_config_prune": prune_for_shape})(
    fp8_blockwise_kernel)
_FIXED = dict(block_m=128, block_n=128, persistent=0, num_stages=2)      # portable
_FIXED_WS = dict(block_m=256, block_n=128, persistent=0, num_stages=4)   # explicit


def fp8_gemm_blockwise(a, a_scale, b, b_scale, out_dtype=None, out=None, backend=None,
                       block_m=None, block_n=None, group_m=8, persistent=None,
                       num_warps=None, num_stages=None, explicit=None, **launch):
    """``out = (a * a_scale) @ (b * b_scale).T`` with DeepSeek-V3's block scales: ``a``
    [M, K] e4m3 with ``a_scale`` [M, ceil(K/128)] (1x128 blocks), ``b`` [N, K] e4m3 (the
    weight layout) with ``b_scale`` [ceil(N/128), ceil(K/128)] (128x128 blocks); f32
    accumulation scaled once per 128-K block; ``out`` [M, N] of ``out_dtype``
    (default bfloat16, or ``out``'s dtype). ``block_n`` must divide 128 or be a multiple
    of it; ``persistent``: programs per core (0: one per tile). ``explicit`` (default:
    on pinghu when the rows are 4-byte aligned and ``block_n`` is 128): the
    warp-specialized ``ph`` kernel instead of the portable one, with ``num_warps`` 4 or
    8 consumer warps (one or two squads, each a partition of its own, beside the
    producer warp: 227 registers a thread at most, as the MP's register file holds
    65,536). ``num_warps`` defaults to 8. With none of ``block_m``, ``block_n``,
    ``persistent``, ``num_warps``, ``num_stages`` given, the config is the autotuner's
    (``ws_tuned`` / ``portable_tuned``, keyed on M, N, K)."""
    import ml_dtypes
    a, b = np.asarray(a), np.asarray(b)
    a_scale, b_scale = np.asarray(a_scale), np.asarray(b_scale)
    e4m3 = np.dtype(ml_dtypes.float8_e4m3fn)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"fp8_gemm_blockwise: a and b must be 2-D, got {a.shape}, {b.shape}")
    if a.dtype != e4m3 or b.dtype != e4m3:
        raise TypeError(f"fp8_gemm_blockwise: a and b must be float8_e4m3fn, got {a.dtype} "
                        f"and {b.dtype}")
    M, K = a.shape
    N = b.shape[0]
    if b.shape[1] != K:
        raise ValueError(f"fp8_gemm_blockwise: b must be [N, K] with K = {K}, got {b.shape}")
    kb = mutile.cdiv(K, QBLOCK)
    for name, s, want in (("a_scale", a_scale, (M, kb)),
                          ("b_scale", b_scale, (mutile.cdiv(N, QBLOCK), kb))):
        if s.shape != want:
            raise ValueError(f"fp8_gemm_blockwise: {name} must have shape {want}, got {s.shape}")
        if s.dtype != np.float32:
            raise TypeError(f"fp8_gemm_blockwise: {name} must be float32, got {s.dtype}")
    given = dict(block_m=block_m, block_n=block_n, persistent=persistent,
                 num_stages=num_stages)
    tune = all(v is None for v in given.values()) and num_warps is None
    if block_n is not None and not (QBLOCK % block_n == 0 or block_n % QBLOCK == 0):
        raise ValueError(f"fp8_gemm_blockwise: block_n {block_n} must divide 128 or be a "
                         "multiple of it")
    od = np.dtype(out_dtype if out_dtype is not None else
                  (out.dtype if out is not None else ml_dtypes.bfloat16))
    if od.name not in ("bfloat16", "float16", "float32"):
        raise TypeError(f"fp8_gemm_blockwise: out_dtype must be bfloat16, float16 or "
                        f"float32, got {od}")
    if out is None:
        out = np.empty((M, N), od)
    elif out.shape != (M, N) or out.dtype != od:
        raise ValueError(f"fp8_gemm_blockwise: out must be [{M}, {N}] of {od}, got "
                         f"{out.shape} {out.dtype}")
    if M == 0 or N == 0:
        return out
    if K == 0:
        raise ValueError("fp8_gemm_blockwise: K must be at least 1")
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    a_scale, b_scale = np.ascontiguousarray(a_scale), np.ascontiguousarray(b_scale)
    backend = _backend(backend)
    so = tuple(s // out.itemsize for s in out.strides)
    aligned = K % 4 == 0 and all(x.__array_interface__["data"][0] % 16 == 0 for x in (a, b))
    squads = (num_warps or 8) // 4
    can = backend == "pinghu" and aligned and block_n in (None, QBLOCK) and \
        (num_warps or 8) in (4, 8) and block_m in (None, 128 * squads)
    if explicit is None:
        explicit = can
    if explicit and not can:
        raise ValueError("fp8_gemm_blockwise: explicit=True needs backend='pinghu', K a "
                         "multiple of 4 (TME's 4-byte aligned rows), block_n = 128, "
                         "num_warps 4 or 8 and block_m = 32 * num_warps")
    block_m, block_n, persistent, num_stages = (
        (_FIXED_WS if explicit else _FIXED)[k] if v is None else v for k, v in given.items())
    tiles = mutile.cdiv(M, block_m) * mutile.cdiv(N, block_n)
    grid = (min(tiles, persistent * _cores(backend, launch)) if persistent else tiles,)
    args = (a, a_scale, b, b_scale, out, M, N, K, K, K, kb, kb, *so)
    if tune:
        def tuned_grid(meta):
            bm, bn = meta.get("BM", meta.get("BLOCK_M")), meta.get("BN", meta.get("BLOCK_N"))
            n_tiles = mutile.cdiv(M, bm) * mutile.cdiv(N, bn)
            per = meta["PERSISTENT"]
            return (min(n_tiles, per * _cores(backend, launch)) if per else n_tiles,)
        (ws_tuned if explicit else portable_tuned)[tuned_grid](*args, backend=backend,
                                                               **launch)
        return out
    num_warps = num_warps or 8
    if explicit:
        fp8_blockwise_ws_kernel[grid](*args, BM=block_m, BN=block_n, GROUP_M=group_m,
                                      STAGES=num_stages, NUM_WARPS=num_warps,
                                      PERSISTENT=persistent, backend=backend,
                                      num_warps=4, **launch)
    else:
        fp8_blockwise_kernel[grid](*args, BLOCK_M=block_m, BLOCK_N=block_n, GROUP_M=group_m,
                                   PERSISTENT=persistent, backend=backend,
                                   num_warps=num_warps, num_stages=num_stages, **launch)
    return out


def reference_blockwise(a, a_scale, b, b_scale):
    """The recipe in numpy (float32 partial products per 128-K block, scaled and added
    in float32), the oracle the tests hold the kernel to."""
    M, K = a.shape
    out = np.zeros((M, b.shape[0]), np.float32)
    bs = np.repeat(b_scale, QBLOCK, axis=0)[:b.shape[0]]
    for kb in range(mutile.cdiv(K, QBLOCK)):
        sl = slice(kb * QBLOCK, (kb + 1) * QBLOCK)
        part = a[:, sl].astype(np.float32) @ b[:, sl].astype(np.float32).T
        out += part * (a_scale[:, kb:kb + 1] * bs[:, kb][None, :])
    return out
