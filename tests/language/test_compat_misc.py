"""``ml.debug_barrier``, ``ml.map_elementwise`` and ``ml.inline_asm_elementwise`` (issue
10, family 6).

* ``debug_barrier`` in a kernel that needs one: each thread reads back elements other
  threads stored (a tile written, then read reversed); on the Pinghu machine it is a
  block-wide ``BAR.SYNC`` listed under its Python line, on the llvm backend (one thread
  per program) it orders nothing further — both give numpy's answer.
* ``map_elementwise`` calls a ``@jit`` function on whole tiles, broadcast, with one or
  several results and with ``pack``.
* ``inline_asm_elementwise`` is a CompilationError at the call that names it and says
  mutile cannot run inline assembly.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import assert_bits_equal, marked, poison


# ---------------------------------------------------------------- debug_barrier
@mutile.jit
def reverse_through_memory(X, T, Y, N: ml.constexpr, ROUNDS: ml.constexpr):
    offs = ml.arange(0, N)
    x = ml.load(X + offs)
    for r in ml.static_range(ROUNDS):
        ml.store(T + offs, x * 2.0 + r)
        ml.debug_barrier()  # BARRIER
        x = ml.load(T + (N - 1 - offs))        # written by other threads
        ml.debug_barrier()                     # before the next round overwrites T
    ml.store(Y + offs, x)


@pytest.mark.parametrize("num_warps", [1, 4])
def test_debug_barrier_orders_stores_before_loads(num_warps, rng, backend):
    N, rounds = 256, 3
    x = rng.standard_normal(N).astype(np.float32)
    t, y = poison(N, np.float32), poison(N, np.float32)
    reverse_through_memory[(2,)](x, t, y, N=N, ROUNDS=rounds, backend=backend,
                                 num_warps=num_warps)
    want = x
    for r in range(rounds):         # each round rounds once, to float32
        want = (want.astype(np.float64) * 2 + r).astype(np.float32)[::-1]
    assert_bits_equal(y, want, "three rounds through memory")


def test_debug_barrier_is_a_block_barrier_on_pinghu(rng):
    x = rng.standard_normal(64).astype(np.float32)
    k = reverse_through_memory.warmup(x, poison(64, np.float32), poison(64, np.float32), N=64,
                                      ROUNDS=1, grid=(1,), backend="pinghu", num_warps=4)
    m = marked(reverse_through_memory, "BARRIER")
    lines = k.asm["musa"].splitlines()
    at = [i for i, ln in enumerate(lines) if ln.strip().startswith(f"// {m.file}:{m.line} ")]
    assert at, f"no listing block for line {m.line}"
    assert lines[at[0] + 1].strip() == "BAR.SYNC 0", lines[at[0]:at[0] + 3]


# ---------------------------------------------------------------- map_elementwise
@mutile.jit
def selu(x, alpha, scale):
    return scale * ml.where(x > 0, x, alpha * (ml.exp(x) - 1.0))


@mutile.jit
def divmod_fn(a, b):
    return a // b, a % b


@mutile.jit
def swap_and_sum(a0, a1):
    """pack=2: two neighbours in, two out (swapped), and their sum twice."""
    return a1, a0, a0 + a1, a0 + a1


@mutile.jit
def map_kernel(X, P, Q, SELU, DIV, MOD, SWAP, PAIR, N: ml.constexpr):
    offs = ml.arange(0, N)
    x = ml.load(X + offs)
    ml.store(SELU + offs, ml.map_elementwise(selu, x, 1.5, 1.05))
    p = ml.load(P + offs)
    q = ml.load(Q + offs)
    d, m = ml.map_elementwise(divmod_fn, p, q)
    ml.store(DIV + offs, d)
    ml.store(MOD + offs, m)
    s, t = ml.map_elementwise(swap_and_sum, x, pack=2)
    ml.store(SWAP + offs, s)
    ml.store(PAIR + offs, t)


def test_map_elementwise(rng, backend):
    N = 64
    x = rng.standard_normal(N).astype(np.float32)
    p = rng.integers(-100, 100, N).astype(np.int32)
    q = rng.integers(1, 9, N).astype(np.int32) * rng.choice([-1, 1], N).astype(np.int32)
    outs = [poison(N, np.float32), poison(N, np.int32), poison(N, np.int32),
            poison(N, np.float32), poison(N, np.float32)]
    map_kernel[(1,)](x, p, q, *outs, N=N, backend=backend)
    x64 = x.astype(np.float64)
    want_selu = 1.05 * np.where(x64 > 0, x64, 1.5 * (np.exp(x64) - 1))
    np.testing.assert_allclose(outs[0], want_selu, rtol=1e-5, atol=1e-6, err_msg="selu")
    trunc = np.trunc(p / q).astype(np.int32)                  # C division, as Triton's
    assert_bits_equal(outs[1], trunc, "//")
    assert_bits_equal(outs[2], (p - trunc * q).astype(np.int32), "%")
    pairs = x.reshape(-1, 2)
    assert_bits_equal(outs[3], pairs[:, ::-1].reshape(-1), "pack=2: swapped neighbours")
    assert_bits_equal(outs[4], np.repeat(pairs.sum(1, dtype=np.float32), 2), "pack=2: sums")


@mutile.jit
def branchy(x):
    if x > 0:  # LINE-MARK: x > 0
        return x
    return -x


@mutile.jit
def err_branch(X):
    x = ml.load(X + ml.arange(0, 16))
    ml.store(X + ml.arange(0, 16), ml.map_elementwise(branchy, x))


# ---------------------------------------------------------------- inline assembly
@mutile.jit
def err_inline_asm(X):
    x = ml.load(X + ml.arange(0, 16))
    y = ml.inline_asm_elementwise(  # LINE-MARK: ml.inline_asm_elementwise
        "shf.l.wrap.b32 $0, $1, $2, 3;", "=r,r,r", [x, x], dtype=ml.int32, is_pure=True, pack=1)
    ml.store(X + ml.arange(0, 16), y)


@pytest.mark.parametrize("kernel,pattern,tag", [
    (err_inline_asm, r"^inline_asm_elementwise: mutile cannot run inline assembly", None),
    (err_branch, r"a condition must be a scalar.*ml.map_elementwise calls branchy once on "
                 r"whole tiles", "branchy"),
])
def test_unsupported_constructs_point_at_the_line(kernel, pattern, tag):
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, {"X": T.PointerType(T.f32)}, {}, verify=True)
    e, m = info.value, marked(branchy if tag else kernel)
    assert re.search(pattern, e.msg), e.msg
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert f"{m.file}:{m.line}:{m.col + 1}" in str(e)
    assert "tiles.py" not in str(e) and "combine.py" not in str(e)
