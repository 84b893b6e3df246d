"""Hand-written IR for whole kernels (what the frontend makes of Triton's tutorials):
vector add and a tiled matmul. Used by tests and by the matmul benchmark."""
from __future__ import annotations

from mutile.ir import Block, Builder
from mutile.ir import types as T

from .conftest import KB, ptr, tile


def vector_add(BLOCK=1024, t=T.f32):
    kb = KB("vadd", [("x", ptr(t)), ("y", ptr(t)), ("out", ptr(t)), ("n", T.i32)])
    pid = kb("program_id", axis=0)
    offs = kb("add", kb.splat(kb("mul", pid, kb.const(BLOCK, T.i32)), (BLOCK,)), kb.arange(BLOCK))
    mask = kb("cmp", offs, kb.splat(kb.a["n"], (BLOCK,)), pred="lt")
    x = kb.load(kb.ptrs(kb.a["x"], offs), mask)
    y = kb.load(kb.ptrs(kb.a["y"], offs), mask)
    kb.store(kb.ptrs(kb.a["out"], offs), kb("add", x, y), mask)
    return kb


def matmul(BM=128, BN=128, BK=32, t=T.f32, acc_t=T.f32, precision="ieee"):
    """C = A @ B for row-major tiles with runtime strides; masks on every edge."""
    i32 = T.i32
    names = ["M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn"]
    kb = KB("matmul", [("a", ptr(t)), ("b", ptr(t)), ("c", ptr(acc_t))] +
            [(n, i32) for n in names])
    a = kb.a
    pm, pn = kb("program_id", axis=0), kb("program_id", axis=1)
    offs_m = kb("add", kb.splat(kb("mul", pm, kb.const(BM, i32)), (BM,)), kb.arange(BM))
    offs_n = kb("add", kb.splat(kb("mul", pn, kb.const(BN, i32)), (BN,)), kb.arange(BN))
    offs_k = kb.arange(BK)

    def col(v, rows, cols):       # v[:, None] broadcast to (rows, cols)
        return kb("broadcast", kb("expand_dims", v, axis=1), type=tile((rows, cols), v.type.scalar))

    def row(v, rows, cols):       # v[None, :] broadcast to (rows, cols)
        return kb("broadcast", kb("expand_dims", v, axis=0), type=tile((rows, cols), v.type.scalar))

    def scaled(v, s):
        return kb("mul", v, kb.splat(s, v.type.shape))

    a_off = kb("add", scaled(col(offs_m, BM, BK), a["sam"]), scaled(row(offs_k, BM, BK), a["sak"]))
    b_off = kb("add", scaled(col(offs_k, BK, BN), a["sbk"]), scaled(row(offs_n, BK, BN), a["sbn"]))
    a_ptrs, b_ptrs = kb.ptrs(a["a"], a_off), kb.ptrs(a["b"], b_off)
    m_ok = kb("cmp", col(offs_m, BM, BK), kb.splat(a["M"], (BM, BK)), pred="lt")
    n_ok = kb("cmp", row(offs_n, BK, BN), kb.splat(a["N"], (BK, BN)), pred="lt")
    acc0 = kb.const(0.0 if acc_t.is_floating() else 0, tile((BM, BN), acc_t))

    # loop-invariant steps, defined before the loop (as the frontend's LICM leaves them)
    step_a = kb.splat(kb("mul", kb.const(BK, i32), a["sak"]), (BM, BK))
    step_b = kb.splat(kb("mul", kb.const(BK, i32), a["sbk"]), (BK, BN))
    body = Block([i32, acc0.type, a_ptrs.type, b_ptrs.type])
    k, acc, ap, bp = body.args
    outer, kb.b = kb.b, Builder(body, kb.b.loc)
    left = kb("sub", a["K"], k)
    ka = kb("cmp", row(offs_k, BM, BK), kb.splat(left, (BM, BK)), pred="lt")
    kbm = kb("cmp", col(offs_k, BK, BN), kb.splat(left, (BK, BN)), pred="lt")
    zero = 0.0 if t.is_floating() else 0
    av = kb.load(ap, kb("and", ka, m_ok), kb.const(zero, tile((BM, BK), t)))
    bv = kb.load(bp, kb("and", kbm, n_ok), kb.const(zero, tile((BK, BN), t)))
    acc2 = kb("dot", av, bv, acc, input_precision=precision)
    kb.b.create("yield", [acc2, kb("addptr", ap, step_a), kb("addptr", bp, step_b)])
    kb.b = outer
    acc, _, _ = kb.b.create("for", [kb.const(0, i32), a["K"], kb.const(BK, i32), acc0, a_ptrs,
                                    b_ptrs], regions=[body]).results
    c_off = kb("add", scaled(col(offs_m, BM, BN), a["scm"]), scaled(row(offs_n, BM, BN), a["scn"]))
    c_ok = kb("and", kb("cmp", col(offs_m, BM, BN), kb.splat(a["M"], (BM, BN)), pred="lt"),
              kb("cmp", row(offs_n, BM, BN), kb.splat(a["N"], (BM, BN)), pred="lt"))
    kb.store(kb.ptrs(a["c"], c_off), acc, c_ok)
    return kb


def matmul_args(A, B, C):
    M, K = A.shape
    N = B.shape[1]
    s = A.itemsize
    return [A, B, C, M, N, K, A.strides[0] // s, A.strides[1] // s, B.strides[0] // s,
            B.strides[1] // s, C.strides[0] // C.itemsize, C.strides[1] // C.itemsize]
