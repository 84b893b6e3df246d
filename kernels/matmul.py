"""GEMM templates in Triton's dialect: a grouped-ordering matmul with a pluggable
epilogue, and a tensor-descriptor matmul. Copy and vary them."""
import mutile
import mutile.language as ml


@mutile.jit
def leaky_relu(x):
    return ml.where(x >= 0, x, 0.01 * x)


@mutile.jit
def epilogue(acc, ACTIVATION: ml.constexpr):
    """Apply the activation named by the string constexpr ``ACTIVATION``."""
    if ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)
    elif ACTIVATION == "relu":
        acc = ml.maximum(acc, 0.0)
    return acc


@mutile.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr, BLOCK_K: ml.constexpr,
                  GROUP_M: ml.constexpr, ACTIVATION: ml.constexpr = "",
                  INPUT_PRECISION: ml.constexpr = "ieee"):
    """C = act(A @ B): programs walk output tiles in groups of GROUP_M rows (L2 reuse)."""
    pid = ml.program_id(0)
    num_pid_m = ml.cdiv(M, BLOCK_M)
    num_pid_n = ml.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = ml.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + ml.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + ml.arange(0, BLOCK_N)
    offs_k = ml.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = ml.zeros((BLOCK_M, BLOCK_N), dtype=ml.float32)
    for k in range(0, ml.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = ml.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = ml.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = ml.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = epilogue(acc, ACTIVATION)
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    ml.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b, activation="", block_m=64, block_n=128, block_k=64, group_m=8,
           input_precision="ieee", out_dtype=None, **launch):
    """Host wrapper: ``act(a @ b)`` for 2-D numpy arrays, output in ``out_dtype``."""
    import numpy as np
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"inner dims differ: {a.shape} @ {b.shape}")
    c = np.empty((M, N), dtype=out_dtype or a.dtype)
    grid = (mutile.cdiv(M, block_m) * mutile.cdiv(N, block_n),)
    sa, sb, sc = (tuple(s // x.itemsize for s in x.strides) for x in (a, b, c))
    matmul_kernel[grid](a, b, c, M, N, K, *sa, *sb, *sc, BLOCK_M=block_m, BLOCK_N=block_n,
                        BLOCK_K=block_k, GROUP_M=group_m, ACTIVATION=activation,
                        INPUT_PRECISION=input_precision, **launch)
    return c


@mutile.jit
def matmul_descriptor_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: ml.constexpr,
                             BLOCK_N: ml.constexpr, BLOCK_K: ml.constexpr):
    """C = A @ B for row-major A (MxK), B (KxN), C (MxN) through tensor descriptors."""
    pid_m = ml.program_id(0)
    pid_n = ml.program_id(1)
    a_desc = ml.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = ml.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BLOCK_K, BLOCK_N])
    c_desc = ml.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    acc = ml.zeros((BLOCK_M, BLOCK_N), dtype=ml.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([k, pid_n * BLOCK_N])
        acc = ml.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))
