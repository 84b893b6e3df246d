"""The GEMM template's explicit Pinghu path (``mutile.language.pinghu``): persistent,
warp-specialized, a ring of TME stages, WarpSquad MMAs, the shared epilogue from
registers. ``mutile.kernels.gemm(..., config=...)`` with ``EXPLICIT=1`` in the config
(pinghu only) runs it; the Triton-dialect ``gemm_kernel`` stays the portable path.

Why it exists: on the cycle model each block's TME copies queue on the block's own
engine (latency + bytes, one after the other), and in a single instruction stream the
warps that issue a copy wait for that engine before their next SQMMA. Here one producer
warp issues every copy (``STAGES`` steps ahead, across tile boundaries, since the loop
over (tile, k step) is flattened) while the consumer squads only wait, multiply and run
the epilogue; with ``BK = 128`` each copy moves twice the bytes per latency paid.

Operands: ``a`` [M, K] and ``b`` [K, N] row-major arrays of bf16, f16, fp8 or int8 with
4-byte aligned bases and strides (the host checks; other cases take the portable
kernel); any M, N, K.
"""
import mutile
import mutile.language as ml
import mutile.language.pinghu as ph

from .gemm_common import epilogue_store, prune_bm_bn, shared_limit, tile_coords


@mutile.jit
def program_steps(M, N, K, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr):
    """This program's share of the flattened (tile, k step) loop: (pid, programs, tile
    rows, tile columns, k steps per tile, steps), its tiles being pid, pid + P, ..."""
    pid = ml.program_id(0)
    nprog = ml.num_programs(0)
    num_pid_m = ml.cdiv(M, BM)
    num_pid_n = ml.cdiv(N, BN)
    k_steps = ml.cdiv(K, BK)
    return pid, nprog, num_pid_m, num_pid_n, k_steps, \
        (num_pid_m * num_pid_n - pid + nprog - 1) // nprog * k_steps


@mutile.jit
def producer(a_desc, b_desc, a_s, b_s, full, empty, M, N, K, BM: ml.constexpr,
             BN: ml.constexpr, BK: ml.constexpr, GROUP_M: ml.constexpr,
             STAGES: ml.constexpr, B_KMAJOR: ml.constexpr = False):
    """One warp: for every (tile, k step) of this program, wait until its stage is free
    and copy the A and B boxes into it (``B_KMAJOR``: B is stored [N, K], its box
    BN x BK)."""
    pid, nprog, num_pid_m, num_pid_n, k_steps, steps = program_steps(M, N, K, BM, BN, BK)
    for it in range(steps):
        s = it % STAGES
        ph.barrier_wait(empty[s], ((it // STAGES) & 1) ^ 1)
        pid_m, pid_n = tile_coords(pid + (it // k_steps) * nprog, num_pid_m, num_pid_n,
                                   GROUP_M)
        k0 = (it % k_steps) * BK
        ph.barrier_expect_tx(full[s], (BM * BK + BK * BN) * a_s.dtype.itemsize)
        ph.tme_load(a_desc, [pid_m * BM, k0], a_s[s], full[s])
        if B_KMAJOR:
            ph.tme_load(b_desc, [pid_n * BN, k0], b_s[s], full[s])
        else:
            ph.tme_load(b_desc, [k0, pid_n * BN], b_s[s], full[s])


@mutile.jit
def _consumer(a_s, b_s, full, empty, out_ptr, bias_ptr, c_ptr, M, N, K, stride_cm,
              stride_cn, stride_om, stride_on, scale, beta, BM: ml.constexpr,
              BN: ml.constexpr, BK: ml.constexpr, GROUP_M: ml.constexpr,
              STAGES: ml.constexpr, HAS_BIAS: ml.constexpr, HAS_C: ml.constexpr,
              ACTIVATION: ml.constexpr, INT_ACC: ml.constexpr, INT_OUT: ml.constexpr):
    """The WarpSquads: per k step wait for the stage, multiply, release it; after a
    tile's last step, the epilogue straight from the accumulator registers. A loop over
    the program's tiles around the k loop (not one flattened loop, as the producer's):
    the accumulator then dies in the epilogue, whose scaled copy and output cast take
    its registers; carried around a flattened loop it stays live beside them."""
    pid, nprog, num_pid_m, num_pid_n, k_steps, steps = program_steps(M, N, K, BM, BN, BK)
    it = 0
    for tile in range(pid, num_pid_m * num_pid_n, nprog):
        if INT_ACC:
            acc = ml.zeros((BM, BN), ml.int32)
        else:
            acc = ml.zeros((BM, BN), ml.float32)
        for kk in range(k_steps):
            s = it % STAGES
            ph.barrier_wait(full[s], (it // STAGES) & 1)
            acc = ph.sqmma(a_s[s], b_s[s], acc)
            acc = ph.sqmma_wait(acc)
            ph.barrier_arrive(empty[s])
            it += 1
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BM + ml.arange(0, BM)
        offs_n = pid_n * BN + ml.arange(0, BN)
        epilogue_store(acc, offs_m, offs_n, M, N, scale, beta, bias_ptr, c_ptr, stride_cm,
                       stride_cn, out_ptr, stride_om, stride_on, HAS_BIAS, HAS_C,
                       ACTIVATION, INT_OUT)


@mutile.jit
def gemm_ws_persistent_kernel(a_ptr, b_ptr, out_ptr, bias_ptr, c_ptr, M, N, K, stride_am,
                              stride_bk, stride_cm, stride_cn, stride_om, stride_on, scale,
                              beta,
                              BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr,
                              GROUP_M: ml.constexpr, STAGES: ml.constexpr,
                              NUM_WARPS: ml.constexpr, HAS_BIAS: ml.constexpr,
                              HAS_C: ml.constexpr, ACTIVATION: ml.constexpr,
                              INT_ACC: ml.constexpr, INT_OUT: ml.constexpr,
                              PERSISTENT: ml.constexpr = 0):
    """``NUM_WARPS`` consumer warps and one producer warp share a ``STAGES``-deep ring
    of A (BM x BK) and B (BK x BN) boxes; programs walk tiles pid, pid + P, ...
    (``PERSISTENT``: programs per MP, read by the host's grid)."""
    a_desc = ml.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BM, BK])
    b_desc = ml.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                       block_shape=[BK, BN])
    a_s = ph.alloc_shared((STAGES, BM, BK), a_desc.dtype, swizzle=64)
    b_s = ph.alloc_shared((STAGES, BK, BN), b_desc.dtype, swizzle=64)
    full = ph.alloc_barriers(STAGES, arrive_warps=1)
    empty = ph.alloc_barriers(STAGES, arrive_warps=NUM_WARPS)
    ph.warp_specialize([
        (_consumer, (a_s, b_s, full, empty, out_ptr, bias_ptr, c_ptr, M, N, K, stride_cm,
                     stride_cn, stride_om, stride_on, scale, beta, BM, BN, BK, GROUP_M,
                     STAGES, HAS_BIAS, HAS_C, ACTIVATION, INT_ACC, INT_OUT), NUM_WARPS),
        (producer, (a_desc, b_desc, a_s, b_s, full, empty, M, N, K, BM, BN, BK, GROUP_M,
                    STAGES), 1)])


# ---------------------------------------------------------------- host side
def _ph_space():
    """The explicit path's configs: 128x128 or 256x128 tiles, BK of 64 to 256 elements
    (256: 8-bit types), two or three stages within the 192 KiB of shared memory,
    persistent or not."""
    out = []
    for bm, bn, bk, warps in ((128, 128, 64, 4), (128, 128, 128, 4), (256, 128, 64, 8),
                              (256, 128, 128, 8), (256, 128, 256, 8)):
        for stages in (2, 3):
            for persistent in (0, 1):
                out.append(mutile.Config(dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, STAGES=stages,
                                              NUM_WARPS=warps, PERSISTENT=persistent),
                                         num_warps=warps))
    return out


def _fits(cfg, itemsize) -> bool:
    k = cfg.kwargs
    return k["STAGES"] * (k["BM"] + k["BN"]) * k["BK"] * itemsize <= shared_limit()


def prune_ph(configs, nargs, **kwargs):
    """Configs whose ring fits shared memory at this dtype and whose tiles the shape
    needs (persistence only with more tiles than MPs)."""
    itemsize = nargs["a_ptr"].dtype.itemsize
    keep = [c for c in prune_bm_bn(configs, nargs, **kwargs) if _fits(c, itemsize)]
    return keep or [c for c in configs if _fits(c, itemsize)][:1]


PH_KEY = ["M", "N", "K", "HAS_BIAS", "HAS_C", "ACTIVATION", "INT_ACC", "INT_OUT"]
gemm_ph_tuned = mutile.autotune(configs=_ph_space(), key=PH_KEY,
                                prune_configs_by={"early_config_prune": prune_ph})(
    gemm_ws_persistent_kernel)


def explicit_ok(a, b, a_row, b_row, split) -> bool:
    """Whether the explicit path takes these operands: row-major 16- or 8-bit arrays
    with 4-byte aligned bases and row strides, no split-K."""
    if not (a_row and b_row and split == 1 and a.dtype.itemsize in (1, 2)):
        return False
    return all(x.__array_interface__["data"][0] % 16 == 0 and x.strides[0] % 4 == 0
               for x in (a, b))


def launch(a, b, out, bias, c, M, N, K, sc, so, scale, beta, flags, config, cores,
           launch_opts):
    """Run the explicit kernel: ``config`` (a Config of BM/BN/BK/...) or the tuner's."""
    args = (a, b, out, bias, c, M, N, K, a.strides[0] // a.itemsize,
            b.strides[0] // b.itemsize, *sc, *so, scale, beta)
    kw = dict(HAS_BIAS=flags["HAS_BIAS"], HAS_C=flags["HAS_C"],
              ACTIVATION=flags["ACTIVATION"], INT_ACC=flags["INT_ACC"],
              INT_OUT=flags["INT_OUT"], backend="pinghu", **launch_opts)

    def grid(meta):
        tiles = mutile.cdiv(M, meta["BM"]) * mutile.cdiv(N, meta["BN"])
        per = meta.get("PERSISTENT", 0)
        return (min(tiles, per * cores) if per else tiles,)
    if config is not None:
        meta = {**config.all_kwargs(), **kw}
        gemm_ws_persistent_kernel[grid(meta)](*args, **meta)
    else:
        gemm_ph_tuned[grid](*args, **kw)
