"""Every name Triton 3.4's ``triton.language`` exports (its ``__all__``, listed here so the
gap is visible in one place) exists in ``mutile.language``: it works, or calling it in a
kernel is a CompilationError at the call saying mutile does not support it.
``docs/triton-compat.md`` is the table of these names with their status; this file checks
that the table and the code agree."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import mutile
import mutile.language as ml

REPO = Path(__file__).resolve().parents[2]

# triton.language.__all__ of Triton 3.4.0 (python/triton/language/__init__.py)
TRITON_3_4 = [
    "PropagateNan", "TRITON_MAX_TENSOR_NUMEL", "load_tensor_descriptor",
    "store_tensor_descriptor", "make_tensor_descriptor", "tensor_descriptor", "abs", "add",
    "advance", "arange", "argmax", "argmin", "associative_scan", "assume", "async_task",
    "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
    "atomic_xchg", "atomic_xor", "bfloat16", "bitonic_merge", "block_type", "broadcast",
    "broadcast_to", "cat", "cast", "cdiv", "ceil", "clamp", "const", "constexpr",
    "constexpr_function", "cos", "cumprod", "cumsum", "debug_barrier", "device_assert",
    "device_print", "div_rn", "dot", "dot_scaled", "dtype", "erf", "exp", "exp2",
    "expand_dims", "extra", "fdiv", "flip", "float16", "float32", "float64", "float8e4b15",
    "float8e4nv", "float8e4b8", "float8e5", "float8e5b16", "floor", "fma", "full", "gather",
    "histogram", "inline_asm_elementwise", "interleave", "int1", "int16", "int32", "int64",
    "int8", "join", "load", "log", "log2", "make_block_ptr", "math", "max", "max_constancy",
    "max_contiguous", "maximum", "min", "minimum", "multiple_of", "num_programs",
    "pair_uniform_to_normal", "permute", "philox", "philox_impl", "pi32_t", "pointer_type",
    "program_id", "rand", "rand4x", "randint", "randint4x", "randn", "randn4x", "range",
    "ravel", "reduce", "reduce_or", "reshape", "rsqrt", "slice", "sigmoid", "sin", "softmax",
    "sort", "split", "sqrt", "sqrt_rn", "static_assert", "static_print", "static_range",
    "store", "sum", "swizzle2d", "tensor", "topk", "trans", "tuple", "uint16", "uint32",
    "uint64", "uint8", "uint_to_uniform_float", "umulhi", "view", "void", "where", "xor_sum",
    "zeros", "zeros_like",
]

# the names mutile refuses: calling one is a CompilationError at the call
REFUSED = {"make_block_ptr", "advance", "async_task", "const", "slice", "inline_asm_elementwise",
           "float8e4b15"}


def test_every_triton_name_exists():
    assert [n for n in TRITON_3_4 if not hasattr(ml, n)] == []


def _kernel_calling(fn):
    @mutile.jit
    def calls(X):
        fn(X)  # CALL
    return calls


@mutile.jit
def _inline_asm(X):
    x = ml.load(X)
    fn = ml.inline_asm_elementwise
    fn("mov.b32 $0, $1;", "=r,r", [x], ml.float32, True, 1)  # CALL


@mutile.jit
def _cast(X, DT: ml.constexpr):
    ml.store(X, ml.load(X).to(DT))  # CALL


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_name_fails_at_its_call(name, backend):
    x = np.zeros(4, np.float32)
    with pytest.raises(mutile.CompilationError) as e:
        if name.startswith("float8"):           # a dtype: refused where a builtin takes it
            _cast.warmup(x, DT=getattr(ml, name), grid=(1,), backend=backend)
        elif name == "inline_asm_elementwise":
            _inline_asm.warmup(x, grid=(1,), backend=backend)
        else:
            _kernel_calling(getattr(ml, name)).warmup(x, grid=(1,), backend=backend)
    text = str(e.value)
    assert name in text and ("does not support" in text or "cannot" in text), text
    assert f"{Path(__file__).name}:" in text and "  # CALL" in text, text


def _doc_rows() -> dict[str, str]:
    rows = {}
    for line in (REPO / "docs" / "triton-compat.md").read_text().splitlines():
        m = re.match(r"\|\s*`(?:tl\.)?([\w.]+)`\s*\|\s*(\w+)", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_the_compat_table_lists_every_name_with_its_status():
    rows = _doc_rows()
    missing = [n for n in TRITON_3_4 if n not in rows]
    assert missing == [], f"docs/triton-compat.md lacks rows for {missing}"
    for n in TRITON_3_4:
        want = "refused" if n in REFUSED else "supported"
        assert rows[n] in (want, "partial") if want == "supported" else rows[n] == want, \
            f"{n}: the table says {rows[n]}, the code says {want}"


def test_every_supported_name_is_exercised_by_a_test():
    """A supported name is used by some test kernel or host test (``ml.NAME``, ``tl.NAME``,
    ``.NAME(`` on a tensor), so "supported" always has a test behind it."""
    text = "\n".join(p.read_text() for p in (REPO / "tests").rglob("*.py")
                     if p.name != Path(__file__).name)
    unused = [n for n in TRITON_3_4 if n not in REFUSED and not re.search(
        rf"(?:\bml|\btl|\bS)\.{re.escape(n)}\b|\.{re.escape(n)}\(", text)]
    assert unused == []
