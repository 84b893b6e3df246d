"""What the GEMM templates share (kernels/gemm.py, gemm_pinghu.py, fp8_blockwise.py):
the activations and the epilogue, the grouped tile order, the count of programs that run
at once, and the shape-based pruning of tuning configs."""
import mutile
import mutile.language as ml

ACTIVATIONS = ("", "relu", "gelu_tanh", "silu")


@mutile.jit
def apply_activation(x, ACTIVATION: ml.constexpr):
    """``x`` through the activation named by the string constexpr ``ACTIVATION``:
    ``relu``, ``gelu_tanh`` (tanh approximation of GELU) or ``silu`` (x * sigmoid(x))."""
    if ACTIVATION == "relu":
        x = ml.maximum(x, 0.0)
    elif ACTIVATION == "gelu_tanh":
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        x = 0.5 * x * (1.0 + (2.0 * ml.sigmoid(2.0 * inner) - 1.0))
    elif ACTIVATION == "silu":
        x = x * ml.sigmoid(x)
    return x


@mutile.jit
def epilogue_store(acc, offs_m, offs_n, M, N, scale, beta, bias_ptr, c_ptr, stride_cm,
                   stride_cn, out_ptr, stride_om, stride_on, HAS_BIAS: ml.constexpr,
                   HAS_C: ml.constexpr, ACTIVATION: ml.constexpr, INT_OUT: ml.constexpr):
    """Store ``act(scale * acc + bias + beta * c)`` of the tile at rows ``offs_m``,
    columns ``offs_n`` into ``out`` (its dtype); ``INT_OUT``: the integer accumulator
    plus an integer bias, exactly."""
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if INT_OUT:
        y = acc
        if HAS_BIAS:
            y = y + ml.load(bias_ptr + offs_n, mask=offs_n < N, other=0).to(ml.int32)[None, :]
    else:
        y = acc.to(ml.float32) * scale
        if HAS_BIAS:
            y = y + ml.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(ml.float32)[None, :]
        if HAS_C:
            cv = ml.load(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
                         mask=mask, other=0.0)
            y = y + beta * cv.to(ml.float32)
        y = apply_activation(y, ACTIVATION)
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
    ml.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask)


@mutile.jit
def tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: ml.constexpr):
    """(pid_m, pid_n) of output tile number ``tile`` in grouped order: ``GROUP_M`` tile
    rows are walked column by column, so consecutive tiles share B's columns."""
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = ml.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile % num_pid_in_group) % group_size_m
    pid_n = (tile % num_pid_in_group) // group_size_m
    return pid_m, pid_n


def prune_for_shape(configs, nargs, **kwargs):
    """The configs worth measuring for this shape: tiles no larger than the output needs
    (at least 64), and persistence only when there are more work items than MPs."""
    M, N = nargs["M"], nargs["N"]
    cores = _cores(kwargs.get("backend") or "llvm", kwargs)
    keep = []
    for cfg in configs:
        bm, bn = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
        if bm > max(64, mutile.next_power_of_2(M)) or bn > max(64, mutile.next_power_of_2(N)):
            continue
        items = mutile.cdiv(M, bm) * mutile.cdiv(N, bn) * kwargs.get("SPLIT_K", 1)
        if cfg.kwargs["PERSISTENT"] and items <= cores * cfg.kwargs["PERSISTENT"]:
            continue
        keep.append(cfg)
    return keep or list(configs)[:1]


def prune_bm_bn(configs, nargs, **kwargs):
    """:func:`prune_for_shape` for configs that name their tiles ``BM`` and ``BN`` (the
    explicit Pinghu kernels)."""
    named = [mutile.Config({**c.kwargs, "BLOCK_M": c.kwargs["BM"], "BLOCK_N": c.kwargs["BN"]},
                           num_warps=c.num_warps) for c in configs]
    keep = {id(n) for n in prune_for_shape(named, nargs, **kwargs)}
    return [c for c, n in zip(configs, named) if id(n) in keep]


def shared_limit() -> int:
    """Shared memory per block, from the current machine file (192 KiB on Pinghu)."""
    from mutile import machines
    return int(machines.current().value("isa", "shared_bytes"))


def _cores(backend, launch) -> int:
    """The programs that run at once: the MPs of the machine file, or the CPU threads."""
    if backend == "pinghu":
        from mutile import machines
        return int(machines.current().value("device", "mp_count"))
    import os
    return int(launch.get("num_threads") or os.cpu_count() or 1)
