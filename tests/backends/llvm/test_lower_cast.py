"""cast between every pair of scalar types and bitcast between same-width types,
bit-exact against ``mutile.ir.semantics.convert`` (tiles and scalars)."""
from __future__ import annotations

import numpy as np
import pytest

from mutile.ir import semantics

from .conftest import ALL, KB, assert_same_bits, poisoned, ptr, random_values

N = 64


def _inputs(src, rng):
    x = random_values(src, N, rng)
    if src.is_floating() and src.bits >= 16:
        # values around the integer limits, to see truncation and saturation
        big = np.array([127.9, -128.9, 255.5, 32767.4, -32769.0, 65535.9, 2.0 ** 31,
                        -2.0 ** 31 - 1e3, 4.3e9, 2.0 ** 63, -2.0 ** 63, 1.9e19, -0.9, 0.999, 3.5,
                        -7.25])
        with np.errstate(over="ignore"):
            x[16:32] = big.astype(src.to_numpy())
    return x


def _kernel(src, dsts, scalar):
    params = [("x", ptr(src))] + [(f"o{j}", ptr(d)) for j, (_, d) in enumerate(dsts)]
    kb = KB(f"cast_{src}", params)
    if scalar:
        pid = kb("program_id", axis=0)
        x = kb.load(kb("addptr", kb.a["x"], pid))
        for j, (op, d) in enumerate(dsts):
            kb.store(kb("addptr", kb.a[f"o{j}"], pid), kb(op, x, to=d))
    else:
        offs = kb.arange(N)
        x = kb.load(kb.ptrs(kb.a["x"], offs))
        for j, (op, d) in enumerate(dsts):
            kb.store(kb.ptrs(kb.a[f"o{j}"], offs), kb(op, x, to=d))
    return kb.compile()


SCALAR_SOURCES = {"f32", "f64", "f16", "bf16", "f8e4m3", "i8", "u64", "i1"}
CASES = [(s, False) for s in ALL] + [(s, True) for s in ALL if s.name in SCALAR_SOURCES]


@pytest.mark.parametrize("src,scalar", CASES, ids=lambda v: str(v) if not isinstance(v, bool)
                         else ("scalar" if v else "tile"))
def test_cast_all_pairs(src, scalar, rng):
    dsts = [("cast", d) for d in ALL]
    dsts += [("bitcast", d) for d in ALL if d.bits == src.bits and d != src]
    k = _kernel(src, dsts, scalar)
    x = _inputs(src, rng)
    outs = [poisoned((N,), d) for _, d in dsts]
    k.run([x, *outs], (N,) if scalar else (1,))
    for (op, d), got in zip(dsts, outs):
        want = semantics.evaluate(op, {"to": d}, [x], d, src)
        assert_same_bits(got, want, d, f"{op} {src} -> {d}")
