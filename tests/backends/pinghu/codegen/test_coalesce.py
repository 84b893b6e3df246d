"""Loop carriers in registers (backends/pinghu/codegen/coalesce.py, fold_broadcast.py,
inplace.py): a [128, 128] f32 accumulator carried around a loop on 4 warps is 128
registers per thread; ``acc = acc * x[:, None]`` (and an SQMMA on top) must update it in
place, with no back-edge copy and no local-memory traffic inside the loop, and the
results must match numpy's float64 ones (outputs poisoned first)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

import mutile
import mutile.language as ml
import mutile.language.pinghu as ph

from ....conftest import poison

R = 128


@mutile.jit
def k_scale(A, X, Out, n):
    r, c = ml.arange(0, R), ml.arange(0, R)
    acc = ml.load(A + r[:, None] * R + c[None, :])
    for j in range(n):
        x = ml.load(X + j * R + r)
        acc = acc * x[:, None]
        acc = acc + x[:, None]
    ml.store(Out + r[:, None] * R + c[None, :], acc)


@mutile.jit
def k_scale_mma(A, B, C, X, Out, n, K: ml.constexpr):
    ra, ka = ml.arange(0, R), ml.arange(0, K)
    a_s = ph.alloc_shared((R, K), ml.bfloat16)
    b_s = ph.alloc_shared((K, R), ml.bfloat16)
    a_s.store(ml.load(A + ra[:, None] * K + ka[None, :]))
    b_s.store(ml.load(B + ka[:, None] * R + ra[None, :]))
    ph.fence_shared()
    ph.sync_warps()
    acc = ml.load(C + ra[:, None] * R + ra[None, :])
    for j in range(n):
        x = ml.load(X + j * R + ra)
        acc = acc * x[:, None]
        acc = ph.sqmma(a_s, b_s, acc)
        acc = ph.sqmma_wait(acc)
    ml.store(Out + ra[:, None] * R + ra[None, :], acc)


def _loop_body(asm: str) -> list[str]:
    """The listing's lines from the loop's head label to its back branch."""
    lines = [ln.split("//")[0].strip() for ln in asm.splitlines()]
    head = next(i for i, ln in enumerate(lines) if ln.startswith("L_for") and ln.endswith(":"))
    label = lines[head][:-1]
    back = next(i for i in range(head, len(lines)) if lines[i] == f"BRA {label}")
    return [ln for ln in lines[head + 1:back] if ln]


def _assert_in_registers(asm: str) -> None:
    body = _loop_body(asm)
    assert body, "no loop in the listing"
    # the kernel spills (its 256-register address tiles), so a few scalars may be
    # reloaded in the loop; nothing is stored there and no run is moved
    assert not [ln for ln in body if "ST.LOCAL" in ln], "a spill store in the loop"
    assert len([ln for ln in body if "LD.LOCAL" in ln]) <= 4, "runs reloaded in the loop"
    assert not [ln for ln in body if ln.startswith("ALU.MOV.B32 R[")], \
        "a run copied in the loop (the back-edge move or a broadcast)"


def test_carried_accumulator_scaled_in_place(rng):
    """``acc = acc * x[:, None]; acc = acc + x[:, None]``: one register range, no copy."""
    n = 3
    a = rng.standard_normal((R, R)).astype(np.float32)
    x = rng.uniform(0.5, 1.5, (n, R)).astype(np.float32)
    out = poison((R, R), np.float32)
    k_scale[(1,)](a, x, out, n, backend="pinghu", num_warps=4)
    want = a.astype(np.float64)
    for j in range(n):
        want = want * x[j, :, None] + x[j, :, None]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    k = k_scale.warmup(a, x, out, n, backend="pinghu", num_warps=4, grid=(1,))
    _assert_in_registers(k.asm["musa"])


def test_carried_sqmma_accumulator_scaled_in_place(rng):
    """The same carrier scaled and then accumulated into by SQMMA (written asynchronously
    until the wait): the SQMMA accumulates into the carrier's own registers."""
    n, K = 3, 32
    bf = np.dtype(ml_dtypes.bfloat16)
    A = rng.standard_normal((R, K)).astype(bf)
    B = rng.standard_normal((K, R)).astype(bf)
    C = rng.standard_normal((R, R)).astype(np.float32)
    x = rng.uniform(0.5, 1.5, (n, R)).astype(np.float32)
    out = poison((R, R), np.float32)
    k_scale_mma[(1,)](A, B, C, x, out, n, K=K, backend="pinghu", num_warps=4,
                      sanitize=True)
    prod = A.astype(np.float64) @ B.astype(np.float64)
    want = C.astype(np.float64)
    for j in range(n):
        want = want * x[j, :, None] + prod
    bound = 4 * n * K * 2.0 ** -24 * (np.abs(want) + n * np.abs(A.astype(np.float64))
                                      @ np.abs(B.astype(np.float64)) + 1.0)
    assert (np.abs(out - want) <= bound).all()
    k = k_scale_mma.warmup(A, B, C, x, out, n, K=K, backend="pinghu", num_warps=4, grid=(1,))
    _assert_in_registers(k.asm["musa"])
