"""Illegal uses of ``mutile.language.pinghu``, refused at the user's line: the llvm backend's refusal, the IR text, the rules without async lowering
(the scheme is described in pinghu_verify_kit.py)."""
from __future__ import annotations

import pytest

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph
from mutile.ir import parse, verify
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from .pinghu_verify_kit import (BF16_64, F32_64, P32, _plain_environment, check_at_mark,  # noqa: F401
                               refused, warm)
from .test_pinghu_verifier_buffers_barriers import k_arrive_array, k_expect_tx_array, k_expect_tx_bytes, k_wait_array  # noqa: E501
from .test_pinghu_verifier_tme import k_tme_bar_array, k_tme_box, k_tme_coords, k_tme_rank6, k_tme_store_box  # noqa: E501
from .test_pinghu_verifier_ws import k_ws_warps  # noqa: E501

# ===================================================================== llvm backend
@mutile.jit
def k_ph_on_llvm(x_ptr):
    r = ml.arange(0, 64)
    ml.store(x_ptr + r, 1.0)
    a_s = ph.alloc_shared((64,), ml.float32)  # LINE-MARK: ph.alloc_shared
    a_s.store(ml.load(x_ptr + r))


def test_llvm_refuses_ph_ops():
    e = refused(k_ph_on_llvm, P32, backend="llvm")
    check_at_mark(e, k_ph_on_llvm, "mutile.language.pinghu.alloc_shared",
                  "launch with backend='pinghu'")


# ===================================================================== IR text
@mutile.jit
def p_consumer(c_desc, a_s, b_s, c_s, full, empty, n, STAGES: ml.constexpr):
    acc = ml.zeros((64, 64), ml.float32)
    for k in range(n):
        s = k % STAGES
        ph.barrier_wait(full[s], (k // STAGES) & 1)
        acc = ph.sqmma(a_s[s], b_s[s], acc, trans_b=True)
        acc = ph.sqmma_wait(acc)
        ph.barrier_arrive(empty[s])
    c_s.store(acc)
    ph.fence_shared()
    ph.tme_store(c_desc, [0, 0], c_s)
    ph.tme_store_wait()


@mutile.jit
def p_producer(a_desc, b_desc, a_s, b_s, full, empty, n, STAGES: ml.constexpr):
    for k in range(n):
        s = k % STAGES
        ph.barrier_wait(empty[s], ((k // STAGES) & 1) ^ 1)
        ph.barrier_expect_tx(full[s], 2 * 64 * 32 * 2)
        ph.tme_load(a_desc, [0, k * 32], a_s[s], full[s])
        ph.tme_load(b_desc, [0, k * 32], b_s[s], full[s])


@mutile.jit
def k_ws_gemm(a_desc, b_desc, c_desc, K, STAGES: ml.constexpr):
    a_s = ph.alloc_shared((STAGES, 64, 32), ml.bfloat16, swizzle=64)
    b_s = ph.alloc_shared((STAGES, 64, 32), ml.bfloat16, swizzle=32)
    c_s = ph.alloc_shared((64, 64), ml.float32)
    full = ph.alloc_barriers(STAGES, arrive_warps=1)
    empty = ph.alloc_barriers(STAGES, arrive_warps=4)
    n = ml.cdiv(K, 32)
    ph.warp_specialize([(p_consumer, (c_desc, a_s, b_s, c_s, full, empty, n, STAGES), 4),
                        (p_producer, (a_desc, b_desc, a_s, b_s, full, empty, n, STAGES), 1)])


GEMM_SPEC = dict(a_desc=T.DescType(T.bf16, (64, 32)), b_desc=T.DescType(T.bf16, (64, 32)),
                 c_desc=F32_64, K=T.i32, STAGES=2)


def test_ph_ir_prints_and_parses_back():
    _, stages, _ = frontend_and_passes(k_ws_gemm, GEMM_SPEC, {"backend": "pinghu"},
                                       verify=True)
    for name, text in stages.items():
        for op in ("ph.alloc_shared", "ph.alloc_barriers", "ph.warp_specialize"):
            assert op in text, f"stage {name} lacks {op}:\n{text}"
        assert str(parse(text)) == text, f"stage {name} changes when parsed and printed"
        verify(parse(text))
    final = stages[list(stages)[-1]]
    for op in ("ph.sqmma", "ph.sqmma_wait", "ph.tme_load", "ph.tme_store", "ph.expect_tx",
               "ph.wait", "ph.arrive", "ph.fence_shared", "ph.tme_store_wait",
               "ph.smem_index", "ph.bar_index", "swizzle=64", "trans_b"):
        assert op in final, f"the inlined IR lacks {op}:\n{final}"


def test_ph_gemm_compiles():
    warm(k_ws_gemm, *GEMM_SPEC.values())


# ===================================================================== without async lowering
# ``async_lowering=False`` skips the backend's TME/SQMMA passes, not the rules of the ph ops
# a kernel writes itself.
UNLOWERED = [
    (k_expect_tx_array, (), {}, "must be one barrier"),
    (k_expect_tx_bytes, (), {"NB": 0}, "expect_tx needs a positive byte count"),
    (k_arrive_array, (), {}, "must be one barrier"),
    (k_wait_array, (), {}, "must be one barrier"),
    (k_tme_box, (BF16_64,), {"R": 64, "C": 32, "DT": T.bf16}, "is not the descriptor's block"),
    (k_tme_coords, (BF16_64,), {}, "tme_load needs 2 coordinates, got 1"),
    (k_tme_bar_array, (BF16_64,), {}, "must be one barrier"),
    (k_tme_rank6, (T.DescType(T.bf16, (2, 2, 2, 2, 2, 16)),), {}, "TME descriptors have rank"),
    (k_tme_store_box, (F32_64,), {"R": 64, "C": 32}, "is not the descriptor's block"),
    (k_ws_warps, (P32,), {"W": 29}, "the partitions have 33 warps"),
    (k_ws_warps, (P32,), {"W": 0}, "partition warp counts must be positive"),
]


@pytest.mark.parametrize("kernel,args,kw,msg", UNLOWERED,
                         ids=["-".join([c[0].fn.__name__, *map(str, c[2].values())])
                              for c in UNLOWERED])
def test_rules_hold_without_async_lowering(kernel, args, kw, msg):
    e = refused(kernel, *args, async_lowering=False, **kw)
    check_at_mark(e, kernel, msg)
