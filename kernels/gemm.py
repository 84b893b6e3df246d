"""The GEMM template: ``out = act(alpha * sa * sb * (a @ b) + bias + beta * c)`` in
Triton's dialect (tensor descriptors + ``ml.dot``), one kernel for every dtype, layout
and epilogue, tuned by ``mutile.autotune``. Copy and vary it.

Schedule. The work items are output tiles (times ``SPLIT_K`` slices of K), numbered in
grouped order (``GROUP_M`` tile rows side by side, so the B columns stay in L2). A
program walks the items ``pid, pid + P, pid + 2P, ...`` (persistent when the grid ``P``
is smaller than the item count) in **one flattened loop** over (item, k step): the tile's
epilogue runs when the last k step of an item is done. The loop is a top-level loop over
descriptor loads feeding ``ml.dot``, so on ``backend="pinghu"`` the compiler's async
lowering (passes ``pipeline`` and ``sqmma``, docs/pinghu-async.md) turns it into a TME
ring of ``num_stages`` stages and WarpSquad MMAs, and the copies of the next tile's first
steps are in flight while this tile's epilogue runs. On ``backend="llvm"`` the same code
runs natively. Column-major operands (a transposed numpy view) are read through a
descriptor of the transposed array and ``ml.trans``.

Split-K (``SPLIT_K > 1``, chosen for skinny shapes: M*N small, K large) writes f32 (s32)
partial tiles to a workspace; ``gemm_reduce_kernel`` sums them in a fixed order and
applies the same epilogue, so results do not depend on scheduling.
"""
import numpy as np

import mutile
import mutile.language as ml

from . import gemm_pinghu
from .gemm_common import ACTIVATIONS, _cores, epilogue_store, prune_for_shape, tile_coords

@mutile.jit
def load_desc_tiles(a_desc, b_desc, m0, n0, k0, A_ROW: ml.constexpr, B_ROW: ml.constexpr):
    """The A [BM, BK] and B [BK, BN] tiles at (m0, k0) and (k0, n0); a column-major
    operand's descriptor describes its transpose, so its box is read and transposed."""
    if A_ROW:
        a = a_desc.load([m0, k0])
    else:
        a = ml.trans(a_desc.load([k0, m0]))
    if B_ROW:
        b = b_desc.load([k0, n0])
    else:
        b = ml.trans(b_desc.load([n0, k0]))
    return a, b


@mutile.jit
def gemm_kernel(a_ptr, b_ptr, out_ptr, bias_ptr, c_ptr, ws_ptr, M, N, K,
                stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                stride_om, stride_on, scale, beta,
                BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr, BLOCK_K: ml.constexpr,
                GROUP_M: ml.constexpr, SPLIT_K: ml.constexpr, A_ROW: ml.constexpr,
                B_ROW: ml.constexpr, HAS_BIAS: ml.constexpr, HAS_C: ml.constexpr,
                ACTIVATION: ml.constexpr, INT_ACC: ml.constexpr, INT_OUT: ml.constexpr,
                INPUT_PRECISION: ml.constexpr, PERSISTENT: ml.constexpr = 0,
                USE_DESC: ml.constexpr = True):
    """One program's share of the work items (tile x K slice), in one flattened loop.

    ``A_ROW``/``B_ROW``: the operand is row-major (else column-major: its transpose is
    row-major and is read through a descriptor of it). ``SPLIT_K > 1`` writes the f32
    (s32 with ``INT_ACC``) partial tiles to ``ws`` ([SPLIT_K, M, N]); otherwise the
    epilogue stores the tile into ``out``. ``PERSISTENT`` is read by the host's grid
    (programs per core; 0: one program per work item): any grid is correct. ``USE_DESC``
    (default): tensor descriptors, which Pinghu's async lowering pipelines; else masked
    pointer loads (the faster form on the CPU)."""
    pid = ml.program_id(0)
    nprog = ml.num_programs(0)
    if A_ROW:
        a_desc = ml.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
    else:
        a_desc = ml.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[stride_ak, 1],
                                           block_shape=[BLOCK_K, BLOCK_M])
    if B_ROW:
        b_desc = ml.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                           block_shape=[BLOCK_K, BLOCK_N])
    else:
        b_desc = ml.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    num_pid_m = ml.cdiv(M, BLOCK_M)
    num_pid_n = ml.cdiv(N, BLOCK_N)
    k_steps = ml.cdiv(ml.cdiv(K, BLOCK_K), SPLIT_K)       # k steps of one K slice
    items = num_pid_m * num_pid_n * SPLIT_K
    my_items = (items - pid + nprog - 1) // nprog
    if INT_ACC:
        acc = ml.zeros((BLOCK_M, BLOCK_N), dtype=ml.int32)
    else:
        acc = ml.zeros((BLOCK_M, BLOCK_N), dtype=ml.float32)
    for it in range(0, my_items * k_steps):
        item = pid + (it // k_steps) * nprog
        kk = it % k_steps
        pid_m, pid_n = tile_coords(item // SPLIT_K, num_pid_m, num_pid_n, GROUP_M)
        k0 = ((item % SPLIT_K) * k_steps + kk) * BLOCK_K
        if USE_DESC:
            a, b = load_desc_tiles(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, k0,
                                   A_ROW, B_ROW)
        else:
            om = pid_m * BLOCK_M + ml.arange(0, BLOCK_M)
            on = pid_n * BLOCK_N + ml.arange(0, BLOCK_N)
            ok = k0 + ml.arange(0, BLOCK_K)
            a = ml.load(a_ptr + om[:, None] * stride_am + ok[None, :] * stride_ak,
                        mask=(om[:, None] < M) & (ok[None, :] < K), other=0)
            b = ml.load(b_ptr + ok[:, None] * stride_bk + on[None, :] * stride_bn,
                        mask=(ok[:, None] < K) & (on[None, :] < N), other=0)
        acc = ml.dot(a, b, acc, input_precision=INPUT_PRECISION)
        if kk == k_steps - 1:   # the tile's coordinates again: no live range over the dot
            tm, tn = tile_coords(item // SPLIT_K, num_pid_m, num_pid_n, GROUP_M)
            offs_m = tm * BLOCK_M + ml.arange(0, BLOCK_M)
            offs_n = tn * BLOCK_N + ml.arange(0, BLOCK_N)
            if SPLIT_K > 1:
                ws = ws_ptr + (item % SPLIT_K) * M * N
                ml.store(ws + offs_m[:, None] * N + offs_n[None, :], acc,
                         mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
            else:
                epilogue_store(acc, offs_m, offs_n, M, N, scale, beta, bias_ptr, c_ptr,
                               stride_cm, stride_cn, out_ptr, stride_om, stride_on,
                               HAS_BIAS, HAS_C, ACTIVATION, INT_OUT)
            if INT_ACC:
                acc = ml.zeros((BLOCK_M, BLOCK_N), dtype=ml.int32)
            else:
                acc = ml.zeros((BLOCK_M, BLOCK_N), dtype=ml.float32)


@mutile.jit
def gemm_reduce_kernel(ws_ptr, out_ptr, bias_ptr, c_ptr, M, N, stride_cm, stride_cn,
                       stride_om, stride_on, scale, beta, SPLIT_K: ml.constexpr,
                       BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr, HAS_BIAS: ml.constexpr,
                       HAS_C: ml.constexpr, ACTIVATION: ml.constexpr, INT_OUT: ml.constexpr):
    """Split-K's second pass: sum the ``SPLIT_K`` partial tiles in slice order, then the
    epilogue."""
    offs_m = ml.program_id(0) * BLOCK_M + ml.arange(0, BLOCK_M)
    offs_n = ml.program_id(1) * BLOCK_N + ml.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    ptrs = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
    acc = ml.load(ptrs, mask=mask, other=0)
    for s in range(1, SPLIT_K):
        acc += ml.load(ptrs + s * M * N, mask=mask, other=0)
    epilogue_store(acc, offs_m, offs_n, M, N, scale, beta, bias_ptr, c_ptr, stride_cm,
                   stride_cn, out_ptr, stride_om, stride_on, HAS_BIAS, HAS_C, ACTIVATION,
                   INT_OUT)


# ---------------------------------------------------------------- host side
def _space(blocks, warps, stages, persistent=(0,), group=(8,), use_desc=True):
    return mutile.ConfigSpace(
        BLOCK_M=sorted({b[0] for b in blocks}), BLOCK_N=sorted({b[1] for b in blocks}),
        BLOCK_K=sorted({b[2] for b in blocks}), GROUP_M=list(group),
        PERSISTENT=list(persistent), num_warps=list(warps), num_stages=list(stages),
        USE_DESC=[use_desc],
        constraint=lambda c: (c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]) in blocks)


# The tuned spaces: Pinghu's are tile shapes SQMMA takes, ring depths and persistence
# (programs per MP); the CPU's favour tiles that fit its caches. BLOCK_K counts elements
# (the 8-bit types' K span is twice the 16-bit one's in bytes).
PINGHU_SPACE = _space({(64, 64, 64), (128, 128, 64), (128, 256, 64), (256, 128, 64)},
                      warps=[4, 8], stages=[2, 3], persistent=[0, 1])
LLVM_SPACE = _space({(32, 64, 64), (64, 64, 32), (64, 128, 64)}, warps=[4], stages=[1],
                    use_desc=False)

TUNE_KEY = ["M", "N", "K", "SPLIT_K", "A_ROW", "B_ROW", "HAS_BIAS", "HAS_C", "ACTIVATION",
            "INT_ACC", "INT_OUT", "INPUT_PRECISION"]
_PRUNE = {"early_config_prune": prune_for_shape}
gemm_tuned_pinghu = mutile.autotune(configs=list(PINGHU_SPACE), key=TUNE_KEY,
                                    prune_configs_by=_PRUNE)(gemm_kernel)
gemm_tuned_llvm = mutile.autotune(configs=list(LLVM_SPACE), key=TUNE_KEY,
                                  prune_configs_by=_PRUNE)(gemm_kernel)
TUNERS = {"pinghu": gemm_tuned_pinghu, "llvm": gemm_tuned_llvm}

_FLOAT = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
_FP8 = ("float8_e4m3fn", "float8_e5m2")
_DEFAULT_OUT = {"float32": np.float32, "float16": np.float16, "int8": np.int32}  # else bf16


def _layout(x, name):
    """``x`` as a kernel operand: (array, row-major?, element strides); a view that is
    neither row- nor column-major is copied to row-major."""
    if x.ndim != 2:
        raise ValueError(f"gemm: {name} must be 2-D, got shape {x.shape}")
    s0, s1 = (s // x.itemsize for s in x.strides)
    if s1 == 1 and s0 >= max(x.shape[1], 1):
        return x, True, (s0, s1)
    if s0 == 1 and s1 >= max(x.shape[0], 1):
        return x, False, (s0, s1)
    x = np.ascontiguousarray(x)
    return x, True, (x.shape[1], 1)


def _scale(v, name):
    if v is None:
        return 1.0
    arr = np.asarray(v, np.float64)
    if arr.size != 1 or not np.isfinite(arr).all():
        raise ValueError(f"gemm: {name} must be one finite number (a per-tensor scale), got "
                         f"{v!r}")
    return float(arr.reshape(()))


def split_k_for(M, N, K, cores=56) -> int:
    """How many K slices a shape wants: enough that the output tiles (at 128x128) fill
    ``cores`` programs, each slice keeping at least 512 of K; 1 for shapes with enough
    tiles."""
    tiles = mutile.cdiv(M, 128) * mutile.cdiv(N, 128)
    split = 1
    while tiles * split * 2 <= cores and K // (split * 2) >= 512 and split < 16:
        split *= 2
    return split


def _check_args(a, b, bias, c, activation, input_precision, out_dtype, alpha, beta):
    """The operands' dtypes, validated: (kind of a, output numpy dtype)."""
    if a.dtype != b.dtype:
        raise TypeError(f"gemm: a and b must have one dtype, got {a.dtype} and {b.dtype}")
    kind = a.dtype.name
    if kind not in _FLOAT + ("int8",):
        raise TypeError(f"gemm: unsupported dtype {kind} (f32, f16, bf16, fp8 e4m3/e5m2, "
                        "int8)")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm: inner dims differ: {a.shape} @ {b.shape}")
    if activation not in ACTIVATIONS and activation is not None:
        raise ValueError(f"gemm: activation must be one of {ACTIVATIONS[1:]} or None, got "
                         f"{activation!r}")
    if input_precision not in ("ieee", "tf32"):
        raise ValueError(f"gemm: input_precision must be 'ieee' or 'tf32', got "
                         f"{input_precision!r}")
    if input_precision == "tf32" and kind != "float32":
        raise ValueError(f"gemm: input_precision='tf32' is for float32 operands, got {kind}")
    od = np.dtype(out_dtype if out_dtype is not None else _DEFAULT_OUT.get(kind, _bf16()))
    if od.name not in _FLOAT + ("int32",):
        raise TypeError(f"gemm: unsupported out_dtype {od} (a float dtype of a's kinds, or "
                        "int32)")
    if od.kind in "iu":
        if kind != "int8" or od != np.int32:
            raise TypeError(f"gemm: an integer output is int32 from int8 operands, got {od} "
                            f"from {kind}")
        if alpha != 1.0 or beta != 0.0 or c is not None or activation:
            raise ValueError("gemm: an int32 output takes the exact s32 sum (plus an integer "
                             "bias) only; ask for a float out_dtype to use alpha, beta, c or "
                             "an activation")
        if bias is not None and np.asarray(bias).dtype.kind not in "iu":
            raise TypeError(f"gemm: an int32 output takes an integer bias, got {bias.dtype}")
    if c is None and beta != 0.0:
        raise ValueError("gemm: beta != 0 needs the residual c")
    return kind, od


def _bf16():
    import ml_dtypes
    return ml_dtypes.bfloat16


def gemm(a, b, *, a_scale=None, b_scale=None, bias=None, activation=None, alpha=1.0,
         beta=0.0, c=None, out_dtype=None, out=None, backend=None, input_precision="ieee",
         split_k=None, config=None, **launch):
    """``out = act(alpha * a_scale * b_scale * (a @ b) + bias + beta * c)``, cast to
    ``out_dtype`` (default: ``out``'s dtype if given; the cuBLASLt order: the activation
    comes last).

    a: [M, K], b: [K, N] of one dtype -- float32 (``input_precision`` 'ieee' or 'tf32'),
    float16, bfloat16, float8_e4m3fn / float8_e5m2 (with optional per-tensor
    dequantization factors ``a_scale``/``b_scale``) or int8 (s32 accumulation); each
    row-major, column-major (a transposed view) or any other view (copied first).
    bias: [N]; c: [M, N] (any layout); activation: None, 'relu', 'gelu_tanh' or 'silu'.
    out_dtype defaults to the input's for f32/f16/bf16, bfloat16 for fp8, int32 for int8
    (which then takes only an integer bias: the exact s32 sum). ``out``: a preallocated
    [M, N] array (any layout) written and returned. The accumulation is f32 (s32).
    ``split_k`` (default: :func:`split_k_for`) K slices reduced by a second kernel;
    ``config``: a ``mutile.Config`` to launch instead of the autotuner's choice; on
    pinghu, row-major 16-/8-bit operands with aligned rows (and no split-K) take the
    explicit warp-specialized kernel of kernels/gemm_pinghu.py (tuned by its
    ``gemm_ph_tuned``, or a config of its ``BM``/``BN``/``BK``/``STAGES``/... ), the rest
    the portable ``gemm_kernel`` (``TUNERS[backend]``); other keywords are launch
    options."""
    from mutile.runtime.jit import default_backend
    backend = backend or default_backend()
    if backend not in TUNERS:
        raise ValueError(f"gemm: unknown backend {backend!r}")
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"gemm: a and b must be 2-D, got {a.shape} and {b.shape}")
    activation = activation or ""
    alpha, beta = float(alpha), float(beta)
    if out_dtype is None and out is not None:
        out_dtype = out.dtype
    kind, od = _check_args(a, b, bias, c, activation, input_precision, out_dtype, alpha, beta)
    if kind not in _FP8 and (a_scale is not None or b_scale is not None):
        raise ValueError(f"gemm: a_scale/b_scale are the per-tensor factors of fp8 operands, "
                         f"not of {kind}")
    scale = alpha * _scale(a_scale, "a_scale") * _scale(b_scale, "b_scale")
    M, K = a.shape
    N = b.shape[1]
    a, a_row, (sam, sak) = _layout(a, "a")
    b, b_row, (sbk, sbn) = _layout(b, "b")
    if out is None:
        out = np.empty((M, N), od)
    elif out.shape != (M, N) or out.dtype != od:
        raise ValueError(f"gemm: out must be [{M}, {N}] of {od}, got {out.shape} {out.dtype}")
    if bias is not None:
        bias = np.ascontiguousarray(bias)
        if bias.shape != (N,):
            raise ValueError(f"gemm: bias must have shape ({N},), got {bias.shape}")
    if c is not None:
        c = np.asarray(c)
        if c.shape != (M, N):
            raise ValueError(f"gemm: c must have shape ({M}, {N}), got {c.shape}")
    if M == 0 or N == 0:
        return out
    if K == 0:
        raise ValueError("gemm: K must be at least 1")
    cores = _cores(backend, launch)
    split = split_k if split_k is not None else split_k_for(M, N, K, cores)
    if not isinstance(split, int) or split < 1:
        raise ValueError(f"gemm: split_k must be a positive int, got {split!r}")
    int_acc = kind == "int8"
    so, sc = (tuple(s // x.itemsize for s in x.strides) for x in (out, c if c is not None
                                                                   else out))
    ws = np.empty((split, M, N), np.int32 if int_acc else np.float32) if split > 1 else out
    flags = dict(SPLIT_K=split, A_ROW=a_row, B_ROW=b_row, HAS_BIAS=bias is not None,
                 HAS_C=c is not None, ACTIVATION=activation, INT_ACC=int_acc,
                 INT_OUT=od.kind == "i", INPUT_PRECISION=input_precision)
    dummy = out
    args = (a, b, out, bias if bias is not None else dummy, c if c is not None else dummy,
            ws, M, N, K, sam, sak, sbk, sbn, *sc, *so, scale, beta)

    def grid(meta):
        items = mutile.cdiv(M, meta["BLOCK_M"]) * mutile.cdiv(N, meta["BLOCK_N"]) * split
        per_core = meta.get("PERSISTENT", 0)
        return (min(items, per_core * cores) if per_core else items,)

    if backend == "pinghu" and _explicit(config, a, b, a_row, b_row, split):
        gemm_pinghu.launch(a, b, out, args[3], args[4], M, N, K, sc, so, scale, beta, flags,
                           config, cores, launch)
    elif config is not None:
        meta = {**config.all_kwargs(), **launch, **flags, "backend": backend}
        gemm_kernel[grid(meta)](*args, **meta)
    else:
        TUNERS[backend][grid](*args, backend=backend, **flags, **launch)
    if split > 1:
        rgrid = (mutile.cdiv(M, 64), mutile.cdiv(N, 64))
        gemm_reduce_kernel[rgrid](ws, out, args[3], args[4], M, N, *sc, *so, scale, beta,
                                  SPLIT_K=split, BLOCK_M=64, BLOCK_N=64,
                                  HAS_BIAS=flags["HAS_BIAS"], HAS_C=flags["HAS_C"],
                                  ACTIVATION=activation, INT_OUT=flags["INT_OUT"],
                                  backend=backend, num_warps=4, **launch)
    return out


def _explicit(config, a, b, a_row, b_row, split) -> bool:
    """Whether a pinghu launch takes the explicit ``ph`` kernel (kernels/gemm_pinghu.py):
    a config of its parameters (``BM``, ...) asks for it; without a config, the operands
    it takes get it."""
    if config is not None and "BM" not in config.kwargs:
        return False
    ok = gemm_pinghu.explicit_ok(a, b, a_row, b_row, split)
    if config is not None and not ok:
        raise ValueError("gemm: the explicit Pinghu kernel (a config with BM/BN/BK) takes "
                         "row-major 16- or 8-bit operands with 4-byte aligned rows and no "
                         "split-K")
    return ok
