"""``None`` arguments, as Triton has them (issue 10, family 2).

A kernel parameter given ``None`` at launch (an optional bias, weight or mask pointer)
is the compile-time value None: ``if B is None:`` / ``is not None`` pick a branch when
the kernel compiles (the other is never compiled, so it may use the pointer), the
kernel has no parameter for it, and None and an array specialize apart (in memory and
on disk). The same holds for a ``None`` default value, a ``constexpr`` None, and None
passed through nested ``@jit`` calls. Checked against numpy on both backends.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import marked, poison

BLOCK = 32


@mutile.jit
def affine(X, W, B, Y, n, BLOCK: ml.constexpr):
    """y = x * w (+ b): W may be None (no scale), B may be None (no bias)."""
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    y = ml.load(X + offs, mask=mask, other=0.0)
    if W is not None:
        y = y * ml.load(W + offs, mask=mask, other=0.0)
    if B is None:
        pass
    else:
        y = y + ml.load(B + offs, mask=mask, other=0.0)
    ml.store(Y + offs, y, mask=mask)


def affine_reference(x, w, b):
    y = x.astype(np.float64)
    if w is not None:
        y = y * w.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y


def run_affine(x, w, b, backend):
    n = x.size
    y = poison(n, np.float32)
    affine[(-(-n // BLOCK),)](x, w, b, y, n, BLOCK=BLOCK, backend=backend)
    return y


@pytest.mark.parametrize("with_w,with_b", [(True, True), (True, False), (False, True),
                                           (False, False)], ids=["wb", "w", "b", "none"])
def test_optional_pointers(with_w, with_b, rng, backend):
    n = 100
    x, w, b = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    w, b = (w if with_w else None), (b if with_b else None)
    y = run_affine(x, w, b, backend)
    np.testing.assert_allclose(y, affine_reference(x, w, b), rtol=2e-7, atol=1e-7)


def test_none_and_an_array_specialize_apart(rng, backend):
    """Alternating None and an array never reuses the other's build: in memory, and
    from the disk cache once the in-memory one is dropped."""
    n = 64
    x, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    k_none = affine.warmup(x, None, None, x, n, BLOCK=BLOCK, grid=(2,), backend=backend)
    k_bias = affine.warmup(x, None, b, x, n, BLOCK=BLOCK, grid=(2,), backend=backend)
    assert k_none is not k_bias
    assert k_none.metadata["cache_key"] != k_bias.metadata["cache_key"]
    # the None specialization has no parameter for B (nor W)
    assert k_none.runtime_params == ["X", "Y", "n"]
    assert k_bias.runtime_params == ["X", "B", "Y", "n"]
    for _ in range(2):
        for bias in (None, b, None, b):
            y = run_affine(x, None, bias, backend)
            np.testing.assert_allclose(y, affine_reference(x, None, bias), rtol=2e-7, atol=1e-7)
        affine.cache.clear()           # the second round loads both from the disk cache


# ---------------------------------------------------------------- the dead branch is not compiled
@mutile.jit
def dead_branch_uses_pointer(X, B, Y, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    if B is None:
        y = x * 2.0
    else:
        y = x + ml.load(B + offs)        # never compiled when B is None
    ml.store(Y + offs, y)


def test_dead_branch_is_not_compiled(rng, backend, compile_ir):
    x, b = rng.standard_normal(BLOCK).astype(np.float32), rng.standard_normal(BLOCK).astype(
        np.float32)
    for bias, want in ((None, x.astype(np.float64) * 2), (b, x.astype(np.float64) + b)):
        y = poison(BLOCK, np.float32)
        dead_branch_uses_pointer[(1,)](x, bias, y, BLOCK=BLOCK, backend=backend)
        np.testing.assert_allclose(y, want, rtol=2e-7)
    p32 = T.PointerType(T.f32)
    c = compile_ir(dead_branch_uses_pointer, X=p32, B=None, Y=p32, BLOCK=BLOCK)
    assert c.names().count("load") == 1 and "if" not in c.names()


# ---------------------------------------------------------------- defaults, constexprs, nesting
@mutile.jit
def bias_or_scale(b, offs, scale):
    """Nested: None comes through as None."""
    if b is None:
        return scale
    return ml.load(b + offs)


@mutile.jit
def with_defaults(X, Y, B=None, SCALE: ml.constexpr = None, BLOCK: ml.constexpr = 32):
    offs = ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    s = 1.0 if SCALE is None else SCALE
    y = x * s + bias_or_scale(B, offs, 0.5)
    ml.store(Y + offs, y)


@pytest.mark.parametrize("pass_b,scale", [(False, None), (True, None), (False, 3.0),
                                          (True, -2.0)])
def test_none_defaults_and_nested_calls(pass_b, scale, rng, backend):
    x, b = rng.standard_normal(BLOCK).astype(np.float32), rng.standard_normal(BLOCK).astype(
        np.float32)
    y = poison(BLOCK, np.float32)
    kwargs = {"B": b} if pass_b else {}
    if scale is not None:
        kwargs["SCALE"] = scale
    with_defaults[(1,)](x, y, backend=backend, **kwargs)
    want = x.astype(np.float64) * (1.0 if scale is None else scale) + (b if pass_b else 0.5)
    np.testing.assert_allclose(y, want, rtol=2e-7, atol=1e-7)


@mutile.jit
def is_on_tensors(X, Y, B):
    x = ml.load(X)
    same = x
    ml.static_assert(x is not None and not (x is None), "a tensor is not None")
    ml.static_assert(same is x and B is None and (B is not x))
    ml.store(Y, x + 1)


def test_is_on_tensors_is_a_compile_time_test(backend):
    x, y = np.array([2.5], np.float32), poison(1, np.float32)
    is_on_tensors[(1,)](x, y, None, backend=backend)
    assert y[0] == 3.5


# ---------------------------------------------------------------- errors
@mutile.jit
def k_unguarded(X, B):
    x = ml.load(X)
    ml.store(X, x + ml.load(B))  # LINE-MARK: ml.load(B)


def test_none_used_as_a_pointer_points_at_the_line(backend):
    x = np.zeros(4, np.float32)
    with pytest.raises(mutile.CompilationError) as info:
        k_unguarded[(1,)](x, None, backend=backend)
    e, m = info.value, marked(k_unguarded)
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert re.search(r"'B' is None \(None was passed for it.*`if B is not None:`", e.msg), e.msg
    assert "codegen.py" not in str(e) and "semantic.py" not in str(e)


def test_none_spec_has_no_runtime_argument():
    """The frontend sees None for a runtime parameter given None (no kernel argument)."""
    p32 = T.PointerType(T.f32)
    module, _, _ = frontend_and_passes(dead_branch_uses_pointer,
                                       {"X": p32, "B": None, "Y": p32, "BLOCK": 8}, {})
    assert [a.hint for a in module.entry.args] == ["X", "Y"]


@pytest.mark.parametrize("compiled_with_b", [False, True])
def test_a_compiled_kernel_refuses_the_other_none_form(compiled_with_b, rng, backend):
    """``warmup`` for B=None and a launch with an array (or the reverse) is a LaunchError
    naming B, never a launch that silently ignores the array."""
    n = 24
    x, w, b = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    y = poison(n, np.float32)
    k = affine.warmup(x, w, b if compiled_with_b else None, y, n, BLOCK=32, grid=(1,),
                      backend=backend)
    with pytest.raises(mutile.LaunchError, match="argument 'B'"):
        k[(1,)](x, w, None if compiled_with_b else b, y, n, BLOCK=32)
    assert np.isnan(y).all()
    k[(1,)](x, w, b if compiled_with_b else None, y, n, BLOCK=32)
    assert not np.isnan(y).any()
