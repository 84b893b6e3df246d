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
``BLOCK_N`` weight scales per K block.
"""
import numpy as np

import mutile
import mutile.language as ml

import mutile.language.pinghu as ph

from .gemm_common import _cores, prune_bm_bn, prune_for_shape, tile_coords
from .gemm_pinghu import producer, program_steps

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
def _blockwise_consumer(a_s, b_s, full, empty, as_ptr, bs_ptr, out_ptr, M, N, K, stride_asm,
                        stride_bsn, stride_om, stride_on, BM: ml.constexpr, BN: ml.constexpr,
                        GROUP_M: ml.constexpr, STAGES: ml.constexpr):
    """The WarpSquads of the explicit path: per 128-K block, an SQMMA into a fresh f32
    partial, released stage, then ``acc += partial * (s_a[:, None] * s_b[None, :])``
    with the scales loaded into registers in the accumulator's layout."""
    pid, nprog, num_pid_m, num_pid_n, k_steps, steps = program_steps(M, N, K, BM, BN, 128)
    acc = ml.zeros((BM, BN), ml.float32)
    for it in range(steps):
        s = it % STAGES
        kk = it % k_steps
        pid_m, pid_n = tile_coords(pid + (it // k_steps) * nprog, num_pid_m, num_pid_n,
                                   GROUP_M)
        offs_m = pid_m * BM + ml.arange(0, BM)
        offs_n = pid_n * BN + ml.arange(0, BN)
        sb = ml.load(bs_ptr + (pid_n * BN // 128) * stride_bsn + kk)   # BN divides 128
        sab = ml.load(as_ptr + offs_m[:, None] * stride_asm + kk, mask=offs_m[:, None] < M,
                      other=0.0) * sb
        ph.barrier_wait(full[s], (it // STAGES) & 1)
        part = ph.sqmma(a_s[s], b_s[s], None, accumulate=False, trans_b=True)
        part = ph.sqmma_wait(part)
        ph.barrier_arrive(empty[s])
        acc += part * sab
        if kk == k_steps - 1:
            mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
            ml.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on,
                     acc.to(out_ptr.dtype.element_ty), mask=mask)
            acc = ml.zeros((BM, BN), ml.float32)


@mutile.jit
def fp8_blockwise_ws_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, out_ptr, M, N, K, stride_am,
                            stride_bn, stride_asm, stride_bsn, stride_om, stride_on,
                            BM: ml.constexpr, BN: ml.constexpr, GROUP_M: ml.constexpr,
                            STAGES: ml.constexpr, NUM_WARPS: ml.constexpr,
                            PERSISTENT: ml.constexpr = 0):
    """The explicit Pinghu path (``backend="pinghu"``): the GEMM template's TME producer
    warp (kernels/gemm_pinghu.py, B stored [N, K]) feeding ``NUM_WARPS`` consumer warps
    that promote and scale once per 128-K block."""
    a_desc = ml.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BM, 128])
    b_desc = ml.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                       block_shape=[BN, 128])
    a_s = ph.alloc_shared((STAGES, BM, 128), a_desc.dtype, swizzle=64)
    b_s = ph.alloc_shared((STAGES, BN, 128), b_desc.dtype, swizzle=64)
    full = ph.alloc_barriers(STAGES, arrive_warps=1)
    empty = ph.alloc_barriers(STAGES, arrive_warps=NUM_WARPS)
    ph.warp_specialize([
        (_blockwise_consumer, (a_s, b_s, full, empty, as_ptr, bs_ptr, out_ptr, M, N, K,
                               stride_asm, stride_bsn, stride_om, stride_on, BM, BN,
                               GROUP_M, STAGES), NUM_WARPS),
        (producer, (a_desc, b_desc, a_s, b_s, full, empty, M, N, K, BM, BN, 128, GROUP_M,
                    STAGES, True), 1)])


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
    """The explicit kernel's tuned configs: 128x128 tiles on 16 consumer warps or 128x64
    on 8, two or three stages, and the 128x128 one persistent."""
    out = [mutile.Config(dict(BM=128, BN=bn, GROUP_M=8, STAGES=stages, NUM_WARPS=w,
                              PERSISTENT=0), num_warps=w)
           for bn, w in ((128, 16), (64, 8)) for stages in (2, 3)]
    out.append(mutile.Config(dict(BM=128, BN=128, GROUP_M=8, STAGES=2, NUM_WARPS=16,
                                  PERSISTENT=1), num_warps=16))
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
_FIXED = dict(block_m=128, block_n=128, persistent=0, num_stages=2)


def fp8_gemm_blockwise(a, a_scale, b, b_scale, out_dtype=None, out=None, backend=None,
                       block_m=None, block_n=None, group_m=8, persistent=None,
                       num_warps=None, num_stages=None, explicit=None, **launch):
    """``out = (a * a_scale) @ (b * b_scale).T`` with DeepSeek-V3's block scales: ``a``
    [M, K] e4m3 with ``a_scale`` [M, ceil(K/128)] (1x128 blocks), ``b`` [N, K] e4m3 (the
    weight layout) with ``b_scale`` [ceil(N/128), ceil(K/128)] (128x128 blocks); f32
    accumulation scaled once per 128-K block; ``out`` [M, N] of ``out_dtype``
    (default bfloat16, or ``out``'s dtype). ``block_n`` must divide 128 or be a multiple
    of it; ``persistent``: programs per core (0: one per tile). ``explicit`` (default:
    on pinghu when the rows are 4-byte aligned): the warp-specialized ``ph`` kernel
    instead of the portable one (``block_n`` <= 128 then: one weight scale per tile and K
    block). ``num_warps`` defaults to 8 (explicit: 8 consumer warps and the producer
    get 227 registers a thread; at 16 consumer warps a block's 544 threads get at most
    120, as the MP's register file holds 65,536, and the accumulator and partial
    spill). With none of ``block_m``, ``block_n``, ``persistent``, ``num_warps``,
    ``num_stages`` given, the config is the autotuner's (``ws_tuned`` / ``portable_tuned``, keyed on M, N, K)."""
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
    block_m, block_n, persistent, num_stages = (_FIXED[k] if v is None else v
                                                for k, v in given.items())
    if not (QBLOCK % block_n == 0 or block_n % QBLOCK == 0):
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
    tiles = mutile.cdiv(M, block_m) * mutile.cdiv(N, block_n)
    grid = (min(tiles, persistent * _cores(backend, launch)) if persistent else tiles,)
    so = tuple(s // out.itemsize for s in out.strides)
    aligned = K % 4 == 0 and all(x.__array_interface__["data"][0] % 16 == 0 for x in (a, b))
    if explicit is None:
        explicit = backend == "pinghu" and aligned and block_n <= QBLOCK
    if explicit and not (backend == "pinghu" and aligned and block_n <= QBLOCK):
        raise ValueError("fp8_gemm_blockwise: explicit=True needs backend='pinghu', K a "
                         "multiple of 4 (TME's 4-byte aligned rows) and block_n <= 128")
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
                                      num_warps=num_warps, **launch)
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
