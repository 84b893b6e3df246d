"""GEMM written explicitly against Pinghu's asynchronous engines (``mutile.language.pinghu``):
TME copies into a ring of shared buffers, AsyncBarrier full/empty pairs, WarpSquad MMA,
and a TME store of the result -- once in one instruction stream, once warp-specialized
(a producer warp issues the copies, the consumer squads multiply). Copy and vary them.

Operands: ``a`` (M x K) and ``b`` (K x N) as host ``mutile.TensorDescriptor``s of bf16,
f16 or fp8 (e4m3/e5m2), ``c`` (M x N) f32; any M, N, K (out-of-bounds elements of a box
read as zero and are not stored). Runs on ``backend="pinghu"``.
"""
import mutile
import mutile.language as ml
import mutile.language.pinghu as ph


@mutile.jit
def gemm_tme_kernel(a_desc, b_desc, c_desc, K, BM: ml.constexpr, BN: ml.constexpr,
                    BK: ml.constexpr, STAGES: ml.constexpr, NUM_WARPS: ml.constexpr):
    """One program computes a BM x BN tile of C, STAGES - 1 copies ahead of the MMA."""
    off_m = ml.program_id(0) * BM
    off_n = ml.program_id(1) * BN
    a_s = ph.alloc_shared((STAGES, BM, BK), a_desc.dtype, swizzle=64)
    b_s = ph.alloc_shared((STAGES, BK, BN), b_desc.dtype, swizzle=64)
    c_s = ph.alloc_shared((BM, BN), c_desc.dtype)
    full = ph.alloc_barriers(STAGES, arrive_warps=1)           # the copies of a stage landed
    empty = ph.alloc_barriers(STAGES, arrive_warps=NUM_WARPS)  # every warp is done with it
    n = ml.cdiv(K, BK)
    for s in ml.static_range(STAGES - 1):                      # prologue
        if s < n:
            _load_stage(a_desc, b_desc, a_s, b_s, full[s], s, off_m, off_n, s * BK)
    acc = ml.zeros((BM, BN), ml.float32)
    for k in range(n):
        nk = k + STAGES - 1                                    # refill the oldest stage
        if nk < n:
            ns = nk % STAGES
            ph.barrier_wait(empty[ns], ((nk // STAGES) & 1) ^ 1)   # its readers are done
            _load_stage(a_desc, b_desc, a_s, b_s, full[ns], ns, off_m, off_n, nk * BK)
        acc = _mma_stage(a_s, b_s, full, empty, k, acc, STAGES)
    _store_tile(c_desc, c_s, acc, off_m, off_n)


@mutile.jit
def _load_stage(a_desc, b_desc, a_s, b_s, bar, s, off_m, off_n, k0):
    """Copy the A and B boxes of K offset ``k0`` into stage ``s``, counted on ``bar``."""
    ph.barrier_expect_tx(bar, (a_s.shape[1] * a_s.shape[2] + b_s.shape[1] * b_s.shape[2])
                         * a_s.dtype.itemsize)
    ph.tme_load(a_desc, [off_m, k0], a_s[s], bar)
    ph.tme_load(b_desc, [k0, off_n], b_s[s], bar)


@mutile.jit
def _mma_stage(a_s, b_s, full, empty, k, acc, STAGES: ml.constexpr):
    """Step ``k``: wait until its stage landed, multiply it into ``acc``, release it."""
    s = k % STAGES
    ph.barrier_wait(full[s], (k // STAGES) & 1)
    acc = ph.sqmma(a_s[s], b_s[s], acc)
    acc = ph.sqmma_wait(acc)
    ph.barrier_arrive(empty[s])
    return acc


@mutile.jit
def _store_tile(c_desc, c_s, acc, off_m, off_n):
    """The epilogue: the accumulator to shared memory, then one TME store of the tile."""
    c_s.store(acc)
    ph.fence_shared()
    ph.tme_store(c_desc, [off_m, off_n], c_s)
    ph.tme_store_wait()


@mutile.jit
def _producer(a_desc, b_desc, a_s, b_s, full, empty, off_m, off_n, n, BK: ml.constexpr,
              STAGES: ml.constexpr):
    """One warp: wait until a stage is free, then copy the next A and B boxes into it."""
    for k in range(n):
        s = k % STAGES
        ph.barrier_wait(empty[s], ((k // STAGES) & 1) ^ 1)
        _load_stage(a_desc, b_desc, a_s, b_s, full[s], s, off_m, off_n, k * BK)


@mutile.jit
def _consumer(c_desc, a_s, b_s, c_s, full, empty, off_m, off_n, n, BM: ml.constexpr,
              BN: ml.constexpr, STAGES: ml.constexpr):
    """The WarpSquads: wait for a stage, multiply, release it; then store C."""
    acc = ml.zeros((BM, BN), ml.float32)
    for k in range(n):
        acc = _mma_stage(a_s, b_s, full, empty, k, acc, STAGES)
    _store_tile(c_desc, c_s, acc, off_m, off_n)


@mutile.jit
def gemm_ws_kernel(a_desc, b_desc, c_desc, K, BM: ml.constexpr, BN: ml.constexpr,
                   BK: ml.constexpr, STAGES: ml.constexpr, NUM_WARPS: ml.constexpr):
    """The same GEMM, warp-specialized: NUM_WARPS consumer warps and one producer warp."""
    off_m = ml.program_id(0) * BM
    off_n = ml.program_id(1) * BN
    a_s = ph.alloc_shared((STAGES, BM, BK), a_desc.dtype, swizzle=64)
    b_s = ph.alloc_shared((STAGES, BK, BN), b_desc.dtype, swizzle=64)
    c_s = ph.alloc_shared((BM, BN), c_desc.dtype)
    full = ph.alloc_barriers(STAGES, arrive_warps=1)
    empty = ph.alloc_barriers(STAGES, arrive_warps=NUM_WARPS)
    n = ml.cdiv(K, BK)
    ph.warp_specialize([
        (_consumer, (c_desc, a_s, b_s, c_s, full, empty, off_m, off_n, n, BM, BN, STAGES),
         NUM_WARPS),
        (_producer, (a_desc, b_desc, a_s, b_s, full, empty, off_m, off_n, n, BK, STAGES), 1)])


def gemm(a, b, block_m=64, block_n=64, block_k=64, stages=3, num_warps=4,
         warp_specialize=False, **launch):
    """Host wrapper: ``a @ b`` in f32 for 2-D arrays of bf16/f16/fp8 (Pinghu backend)."""
    import numpy as np
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"inner dims differ: {a.shape} @ {b.shape}")
    c = np.empty((M, N), np.float32)
    descs = (mutile.TensorDescriptor(a, [block_m, block_k]),
             mutile.TensorDescriptor(b, [block_k, block_n]),
             mutile.TensorDescriptor(c, [block_m, block_n]))
    kernel = gemm_ws_kernel if warp_specialize else gemm_tme_kernel
    grid = (mutile.cdiv(M, block_m), mutile.cdiv(N, block_n))
    launch.setdefault("backend", "pinghu")
    kernel[grid](*descs, K, BM=block_m, BN=block_n, BK=block_k, STAGES=stages,
                 NUM_WARPS=num_warps, num_warps=num_warps, **launch)
    return c
