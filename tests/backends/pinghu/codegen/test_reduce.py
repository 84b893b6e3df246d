"""reduce and scan on the pinghu backend (backends/pinghu/codegen/lowering/reduce.py, scan.py).

Kernels load a whole 1-D/2-D/3-D tile, reduce or scan it along one axis and store the
result row-major. The IR comes from a DSL kernel (``ml.max`` / ``ml.argmax`` /
``ml.cumprod``) whose op ``kind`` is then rewritten in the IR text, so every kind of the
IR (prod, or, and, cummax, ...) runs, not only those the language exposes; the kernel
also stores its input tile after the op, which must come back unchanged. Shapes cover
the shuffle path (last axis, E > 1, E = 1, lines across warps), the in-register path
(last axis, K < E), the shared-memory path (other axes, chunked lines) and replicated
tiles (fewer elements than threads), on 1, 2, 4 and 8 warps; scans cover the sequential
line path and the split integer path. References: float64 numpy for reductions (integer
and max/min/argmax/argmin exact, float sums and products within rounding), a sequential
scan in the compute type and the llvm backend for scans (both bit for bit). Outputs are
poisoned before each run; runs use the interpreter's shared-memory sanitizer, and every
program is verified and survives the listing/binary round trip.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import semantics
from mutile import ir as mir
from mutile.backends import llvm as llvm_backend
from mutile.backends.pinghu import disassemble, encode
from mutile.backends.pinghu.codegen.generate import generate
from mutile.backends.pinghu.machine.scheduler import execute
from mutile.backends.pinghu.kernel import check_round_trip
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ....conftest import assert_bits_equal, poison, random_data, tile_offsets

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)


@mutile.jit
def reduce_kernel(X, O, Y, S0: ml.constexpr, S1: ml.constexpr, S2: ml.constexpr,
                  NDIM: ml.constexpr, AXIS: ml.constexpr, OP: ml.constexpr,
                  R0: ml.constexpr, R1: ml.constexpr):
    offs = tile_offsets(S0, S1, S2, NDIM)
    x = ml.load(X + offs)
    if OP == "scan":
        ml.store(O + offs, ml.cumprod(x, axis=AXIS))
    else:
        if OP == "arg":
            r = ml.argmax(x, axis=AXIS)
        else:
            r = ml.max(x, axis=AXIS)
        if len(r.shape) == 0:
            ml.store(O, r)
        else:
            ml.store(O + tile_offsets(R0, R1, 1, len(r.shape)), r)
    ml.store(Y + offs, x)       # the input must survive the op


_NP_TO_IR = {np.dtype(np.float32): T.f32, np.dtype(np.float16): T.f16, BF16: T.bf16,
             np.dtype(np.float64): T.f64, np.dtype(np.int32): T.i32, np.dtype(np.int8): T.i8,
             np.dtype(np.uint8): T.u8, np.dtype(np.int64): T.i64, np.dtype(np.uint64): T.u64,
             np.dtype(np.uint32): T.u32, np.dtype(np.bool_): T.i1, E4M3: T.f8e4m3,
             E5M2: T.f8e5m2}


@functools.lru_cache(maxsize=None)
def _module_text(shape: tuple, axis: int, op: str, kind: str, dtype: np.dtype) -> str:
    """IR text of the kernel reducing (``op`` "reduce"/"arg") or scanning ``shape``."""
    dims = tuple(shape) + (1,) * (3 - len(shape))
    rshape = shape if op == "scan" else shape[:axis] + shape[axis + 1:]
    rdims = tuple(rshape) + (1,) * (2 - len(rshape))
    et = _NP_TO_IR[np.dtype(dtype)]
    ot = T.i32 if op == "arg" else et
    spec = {"X": T.PointerType(et), "O": T.PointerType(ot), "Y": T.PointerType(et),
            "S0": dims[0], "S1": dims[1], "S2": dims[2], "NDIM": len(shape), "AXIS": axis,
            "OP": op, "R0": rdims[0], "R1": rdims[1]}
    module, _, _ = frontend_and_passes(reduce_kernel, spec, {})
    text = str(module)
    base = {"reduce": "max", "arg": "argmax", "scan": "prod"}[op]
    assert text.count(f'kind = "{base}"') == 1, text
    return text.replace(f'kind = "{base}"', f'kind = "{kind}"')


def run_pinghu(x, shape, axis, op, kind, num_warps=4, out_shape=None):
    """The pinghu result (poisoned output, sanitizer on) of one reduce/scan kernel and
    its program; checks that the kernel's input tile survives the op."""
    text = _module_text(tuple(shape), axis, op, kind, x.dtype)
    program = generate(mir.verify(mir.parse(text)), {"num_warps": num_warps})
    program.verify()
    check_round_trip(disassemble(program), encode(program))
    out = poison(out_shape if out_shape is not None else _out_shape(shape, axis, op),
                 np.int32 if op == "arg" else x.dtype)
    y = poison(x.shape, x.dtype)
    execute(program, [x, out, y], (1, 1, 1), sanitize=True)
    assert_bits_equal(y, x, "the input tile after the op")
    return out, program


def run_llvm(x, shape, axis, op, kind):
    text = _module_text(tuple(shape), axis, op, kind, x.dtype)
    k = llvm_backend.compile(mir.verify(mir.parse(text)), {})
    out = poison(_out_shape(shape, axis, op), np.int32 if op == "arg" else x.dtype)
    k.run([x, out, poison(x.shape, x.dtype)], (1,))
    return out


def _out_shape(shape, axis, op):
    return tuple(shape) if op == "scan" else tuple(shape[:axis]) + tuple(shape[axis + 1:])


# ---------------------------------------------------------------- references
def _arg_ref(x: np.ndarray, axis: int, kind: str) -> np.ndarray:
    """First index of the extreme along ``axis``; NaNs ignored unless all are NaN."""
    a = np.moveaxis(x, axis, -1)
    out = np.zeros(a.shape[:-1], np.int32)
    for idx in np.ndindex(*a.shape[:-1]):
        line = a[idx].astype(np.float64) if _is_float(a.dtype) \
            else a[idx].astype(object)
        best = 0
        for k in range(1, len(line)):
            v, b = line[k], line[best]
            if isinstance(v, float) and np.isnan(v):
                continue
            if isinstance(b, float) and np.isnan(b) or (v > b if kind == "argmax" else v < b):
                best = k
        out[idx] = best
    return out


def _is_float(d) -> bool:
    return np.dtype(d).kind == "f" or np.dtype(d) in (BF16, E4M3, E5M2)


def reduce_ref(x: np.ndarray, axis: int, kind: str):
    """``(want, tol)``: the reduction in float64 (floats) or the wrapped integer type;
    tol None means exact."""
    if kind in ("argmax", "argmin"):
        return _arg_ref(x, axis, kind), None
    if _is_float(x.dtype):
        w = x.astype(np.float64)
        if kind in ("max", "min"):
            return (np.fmax if kind == "max" else np.fmin).reduce(w, axis=axis), None
        want = w.sum(axis) if kind == "sum" else w.prod(axis)
        n = x.shape[axis]
        mag = np.abs(w).sum(axis) if kind == "sum" else np.abs(want)
        ulp = 2.0 ** -(ml_dtypes.finfo(x.dtype).nmant)
        u = 2.0 ** -52 if x.dtype == np.float64 else 2.0 ** -23
        return want, n * u * mag + ulp * np.abs(want) + 1e-300
    if x.dtype == np.bool_:
        xi = x.astype(np.uint8)
        fn = {"sum": lambda a: np.bitwise_xor.reduce(a, axis), "prod": lambda a: a.min(axis),
              "max": lambda a: a.max(axis), "min": lambda a: a.min(axis),
              "xor": lambda a: np.bitwise_xor.reduce(a, axis),
              "or": lambda a: a.max(axis), "and": lambda a: a.min(axis)}[kind]
        return fn(xi).astype(np.bool_), None
    fn = {"sum": lambda a: a.sum(axis, dtype=a.dtype),
          "prod": lambda a: a.prod(axis, dtype=a.dtype),
          "max": lambda a: a.max(axis), "min": lambda a: a.min(axis),
          "xor": lambda a: np.bitwise_xor.reduce(a, axis),
          "or": lambda a: np.bitwise_or.reduce(a, axis),
          "and": lambda a: np.bitwise_and.reduce(a, axis)}[kind]
    with np.errstate(over="ignore"):
        return fn(x), None


def _minmax_scan(x: np.ndarray, axis: int, kind: str) -> np.ndarray:
    """Running float max/min with the semantics table's rule (a NaN loses to a number,
    -0 < +0)."""
    out = np.moveaxis(x.copy(), axis, 0)
    for k in range(1, out.shape[0]):
        out[k] = semantics.float_minmax(out[k - 1], out[k], kind == "max")
    return np.moveaxis(out, 0, axis)


def scan_ref(x: np.ndarray, axis: int, kind: str) -> np.ndarray:
    """Sequential inclusive scan in the compute type (f32 for narrow floats), rounded
    once per element."""
    if _is_float(x.dtype):
        ct = np.float64 if x.dtype == np.float64 else np.float32
        if kind in ("max", "min"):
            return _minmax_scan(x.astype(ct), axis, kind).astype(x.dtype)
        ufunc = {"sum": np.add, "prod": np.multiply}[kind]
        with np.errstate(all="ignore"):
            return ufunc.accumulate(x.astype(ct), axis=axis).astype(x.dtype)
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[kind]
    with np.errstate(over="ignore"):
        return ufunc.accumulate(x, axis=axis, dtype=x.dtype)


def check(got, want, tol, what):
    want = np.asarray(want)
    got = np.asarray(got).reshape(want.shape)
    if tol is None:
        if _is_float(got.dtype):       # max/min: by value (-0 == +0), NaN == NaN
            g, w = got.astype(np.float64), want.astype(np.float64)
            bad = ~((g == w) | (np.isnan(g) & np.isnan(w)))
            assert not bad.any(), \
                f"{what}: {np.argwhere(bad)[:5]} got {g[bad][:5]} want {w[bad][:5]}"
        else:
            assert_bits_equal(got, want.astype(got.dtype), what)
        return
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= tol).all(), f"{what}: err {np.nanmax(err):.3g}, {int((~(err <= tol)).sum())} bad"


def data(dtype, shape, rng, kind):
    """Random input; products stay near 1, sums avoid inf/NaN (tolerances need them)."""
    if kind == "prod" and _is_float(dtype):
        return rng.uniform(0.9, 1.1, shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    return random_data(dtype, shape, rng, specials=kind not in ("sum", "prod"))


# ---------------------------------------------------------------- reductions
FLOATS = [np.float32, np.float16, BF16, np.float64, E4M3, E5M2]
INTS = [np.int32, np.int8, np.uint8, np.int64, np.uint64]
KINDS_F = ["sum", "prod", "max", "min", "argmax", "argmin"]
KINDS_I = KINDS_F + ["xor", "or", "and"]


def _cases():
    for d in FLOATS + INTS + [np.bool_]:
        kinds = KINDS_F if _is_float(d) else KINDS_I
        for kind in kinds:
            yield d, kind


@pytest.mark.parametrize("dtype,kind", list(_cases()),
                         ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
@pytest.mark.parametrize("shape,axis", [((16, 32), 0), ((16, 32), 1), ((64,), 0)])
def test_reduce_kinds(dtype, kind, shape, axis, rng):
    x = data(dtype, shape, rng, kind)
    op = "arg" if kind.startswith("arg") else "reduce"
    got, _ = run_pinghu(x, shape, axis, op, kind)
    want, tol = reduce_ref(x, axis, kind)
    check(got, want, tol, f"{kind} {np.dtype(dtype).name} {shape} axis {axis}")


SHAPES = [((16,), 0), ((128,), 0), ((1024,), 0), ((4096,), 0), ((2, 2), 0), ((2, 2), 1),
          ((64, 64), 0), ((64, 64), 1), ((8, 16), 0), ((8, 16), 1), ((4, 256), 1),
          ((256, 4), 0), ((256, 4), 1), ((128, 2), 1), ((64, 8), 1), ((128, 8), 1),
          ((1, 64), 1), ((64, 1), 1),
          ((32, 128), 1), ((4, 8, 16), 0), ((4, 8, 16), 1), ((4, 8, 16), 2),
          ((16, 4, 32), 1), ((16, 4, 32), 2), ((2, 2, 2), 1), ((8, 32, 8), 2),
          ((8, 32, 8), 0)]


def _fits(shapes, warps=(1, 2, 4, 8)):
    """(shape, axis, num_warps) with at most 64 elements per thread (bigger tiles spill
    a lot, which is not what these tests are about)."""
    return [(s, a, w) for s, a in shapes for w in warps if np.prod(s) <= 64 * 32 * w]


@pytest.mark.parametrize("shape,axis,num_warps", _fits(SHAPES), ids=str)
@pytest.mark.parametrize("kind,dtype", [("sum", np.float32), ("argmax", np.float32),
                                        ("argmin", np.int64), ("sum", np.int8)],
                         ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_reduce_shapes(kind, dtype, shape, axis, num_warps, rng):
    x = data(dtype, shape, rng, kind)
    op = "arg" if kind.startswith("arg") else "reduce"
    got, _ = run_pinghu(x, shape, axis, op, kind, num_warps)
    want, tol = reduce_ref(x, axis, kind)
    check(got, want, tol, f"{kind} {shape} axis {axis} on {num_warps} warps")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("shape", [(8, 32), (8, 256)], ids=str)
def test_arg_nan_and_ties(dtype, kind, shape):
    """First index of the extreme; NaN loses to every number (-inf too); all-NaN lines
    give 0; -0 and +0 tie."""
    nan, inf = np.nan, np.inf
    x = np.full(shape, 0.5, dtype)
    n = shape[1]
    ext = 3.0 if kind == "argmax" else -3.0
    x[0, [5, 9, n - 1]] = ext                   # ties: the first wins
    x[1, :] = nan                               # all NaN -> 0
    x[2, :] = nan
    x[2, n - 2] = -inf if kind == "argmax" else inf   # a number among NaNs wins
    x[3, 0] = nan
    x[3, [4, 7]] = ext                          # NaN first, then a tie
    x[4, :] = 0.0
    x[4, 3] = -0.0                              # -0 == +0: index 0
    x[5, :] = -inf if kind == "argmax" else inf
    x[5, n - 1] = nan                           # all the same -> 0
    x[6, n - 1] = ext
    x[6, n // 2] = nan
    x[7, :] = nan
    x[7, n - 1] = 1.0
    got, _ = run_pinghu(x, shape, 1, "arg", kind)
    assert_bits_equal(got, _arg_ref(x, 1, kind), f"{kind} {shape}")
    got0, _ = run_pinghu(np.ascontiguousarray(x.T), shape[::-1], 0, "arg", kind)
    assert_bits_equal(got0, _arg_ref(x.T, 0, kind), f"{kind} {shape[::-1]} axis 0")


def test_integer_ties():
    x = np.zeros((4, 64), np.int8)
    x[0, [3, 10, 63]] = 100
    x[1, [0, 1]] = -128
    x[2, 40:] = 127
    got, _ = run_pinghu(x, (4, 64), 1, "arg", "argmax")
    assert_bits_equal(got, x.argmax(1).astype(np.int32), "argmax i8")
    got, _ = run_pinghu(x, (4, 64), 1, "arg", "argmin")
    assert_bits_equal(got, x.argmin(1).astype(np.int32), "argmin i8")


# ---------------------------------------------------------------- scans
def _scan_cases():
    for d in FLOATS + INTS:
        for kind in ("sum", "prod", "max", "min"):
            yield d, kind


@pytest.mark.parametrize("dtype,kind", list(_scan_cases()),
                         ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
@pytest.mark.parametrize("shape,axis", [((16, 32), 0), ((16, 32), 1)])
def test_scan_kinds(dtype, kind, shape, axis, rng):
    """Every scan kind and dtype equals a sequential scan and the llvm backend bit for
    bit, NaN, inf and signed zeros included."""
    x = data(dtype, shape, rng, "scan" if kind != "prod" else "prod")
    got, _ = run_pinghu(x, shape, axis, "scan", kind)
    what = f"cum{kind} {np.dtype(dtype).name} {shape} axis {axis}"
    assert_bits_equal(got, scan_ref(x, axis, kind), what)
    assert_bits_equal(got, run_llvm(x, shape, axis, "scan", kind), what + " vs llvm")


@pytest.mark.parametrize("shape,axis,num_warps", _fits(
    [((16,), 0), ((512,), 0), ((1024,), 0), ((64, 64), 0), ((64, 64), 1), ((256, 4), 0),
     ((4, 256), 1), ((2, 8), 1), ((4, 8, 16), 0), ((4, 8, 16), 1), ((4, 8, 16), 2)]), ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
def test_scan_shapes_match_llvm(dtype, shape, axis, num_warps, rng):
    """cumsum equals the llvm backend's bit for bit (and numpy's sequential sum)."""
    x = random_data(dtype, shape, rng, specials=False)
    got, _ = run_pinghu(x, shape, axis, "scan", "sum", num_warps)
    assert_bits_equal(got, scan_ref(x, axis, "sum"), f"cumsum {shape} axis {axis}")
    assert_bits_equal(got, run_llvm(x, shape, axis, "scan", "sum"), "pinghu vs llvm")


@mutile.jit
def column_scan(X, Y, BM: ml.constexpr, PROD: ml.constexpr):
    offs = ml.arange(0, BM)[:, None] + ml.arange(0, 1)[None, :]
    x = ml.load(X + offs)
    if PROD:
        y = ml.cumprod(x, axis=0)
    else:
        y = ml.cumsum(x, axis=0)
    ml.store(Y + offs, y)


@mutile.jit
def column_scan3(X, Y, BM: ml.constexpr):
    offs = (ml.arange(0, 4)[:, None, None] * BM + ml.arange(0, BM)[None, :, None]
            + ml.arange(0, 1)[None, None, :])
    ml.store(Y + offs, ml.cumsum(ml.load(X + offs), axis=1))


def _wrapped_scan(x: np.ndarray, axis: int, prod: bool, out) -> np.ndarray:
    """Integer cumsum/cumprod wrapping in ``out``'s width (exact: mod 2**64 first)."""
    w = np.cumprod(x.astype(np.uint64), axis) if prod else \
        np.cumsum(x.astype(np.int64).astype(np.uint64), axis)
    return w.astype(np.dtype(out).str.replace("i", "u")).view(out)


@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("BM", [4, 8, 32, 128, 512, 2048])
@pytest.mark.parametrize("prod,dtype,out", [
    (False, np.int32, np.int32), (False, np.int64, np.int64), (False, np.int16, np.int32),
    (False, np.uint8, np.uint32), (True, np.int32, np.int32), (True, np.int64, np.int64)],
    ids=lambda v: {False: "cumsum", True: "cumprod"}[v] if isinstance(v, bool)
    else np.dtype(v).name)
def test_integer_scan_down_a_column(prod, dtype, out, BM, num_warps, rng):
    """Axis 0 of a (BM, 1) tile: the lines are contiguous as along a last axis (the
    split path); was an internal error. Equals numpy (wrapping) and the llvm backend."""
    lo, hi = (-3, 4) if prod else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    x = rng.integers(max(lo, -10**6), min(hi, 10**6), (BM, 1), endpoint=False).astype(dtype)
    want = _wrapped_scan(x, 0, prod, out)
    for backend in ("pinghu", "llvm"):
        y = np.full((BM, 1), np.iinfo(out).max // 3, out)
        column_scan[(1,)](x, y, BM=BM, PROD=prod, backend=backend, num_warps=num_warps)
        np.testing.assert_array_equal(y, want, err_msg=backend)


@pytest.mark.parametrize("BM", [8, 64, 256])
def test_integer_cumsum_down_the_middle_axis_of_3d_tiles(BM, rng):
    x = rng.integers(-10**6, 10**6, (4, BM, 1)).astype(np.int32)
    y = np.full_like(x, -7)
    column_scan3[(1,)](x, y, BM=BM, backend="pinghu")
    np.testing.assert_array_equal(y, _wrapped_scan(x, 1, False, np.int32))


# ---------------------------------------------------------------- code
def _reduce_instructions(k) -> list[str]:
    """Mnemonics of the instructions a program spends after its global load and before
    its store (the reduction itself)."""
    names = [i.op.mnemonic for i in k.instructions]
    first = max(i for i, n in enumerate(names) if n.startswith("LSU.LD.GLOBAL")) + 1
    last = min(i for i, n in enumerate(names) if n.startswith("LSU.ST.GLOBAL") and i > first)
    return [n for n in names[first:last] if not n.startswith("ALU.IMAD.WIDE")]


def test_sum_last_axis_is_cheap(rng):
    """64x64 f32 sum over axis 1 on 4 warps: a tree over the thread's 32 slots, one
    butterfly, a move through shared memory."""
    x = random_data(np.float32, (64, 64), rng, specials=False)
    got, k = run_pinghu(x, (64, 64), 1, "reduce", "sum")
    check(got, *reduce_ref(x, 1, "sum"), "sum")
    body = _reduce_instructions(k)
    assert body.count("ALU.FADD.F32") == 6 and body.count("SHFL.BFLY.B32") == 1
    assert len(body) <= 16, body


@mutile.jit
def softmax_rows(X, O, n_cols, BR: ml.constexpr, BC: ml.constexpr):
    rows = ml.arange(0, BR)[:, None]
    cols = ml.arange(0, BC)[None, :]
    mask = cols < n_cols
    x = ml.load(X + rows * n_cols + cols, mask=mask, other=-float("inf"))
    e = ml.exp(x - ml.max(x, axis=1)[:, None])
    ml.store(O + rows * n_cols + cols, e / ml.sum(e, axis=1)[:, None], mask=mask)


@pytest.mark.parametrize("BC", [16, 128])
def test_softmax(BC, backend, rng):
    """Reductions feeding elementwise ops, broadcast back over their rows."""
    x = random_data(np.float32, (8, BC - 3), rng, specials=False)
    o = poison(x.shape, np.float32)
    softmax_rows[(1,)](x, o, BC - 3, BR=8, BC=BC, backend=backend)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(o, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


@mutile.jit
def uniform_reductions(O, I, v, BLOCK: ml.constexpr):
    t = ml.full((BLOCK, BLOCK), v, ml.int32)
    ml.store(O + ml.arange(0, BLOCK), ml.sum(t, axis=0))
    ml.store(O + BLOCK + ml.arange(0, BLOCK), ml.max(t, axis=1))
    ml.store(O + 2 * BLOCK, ml.xor_sum(t))
    ml.store(I + ml.arange(0, BLOCK), ml.argmax(t, axis=1))
    ml.store(I + BLOCK, ml.argmin(t, axis=None))
    ml.store(O + 2 * BLOCK + 1 + ml.arange(0, BLOCK), ml.cumsum(ml.full((BLOCK,), v, ml.int32)))


def test_reductions_of_uniform_tiles(backend):
    """Tiles of one value (kept as a scalar by the pinghu codegen) reduce and scan."""
    o, i = poison(2 * 16 + 1 + 16, np.int32), poison(17, np.int32)
    uniform_reductions[(1,)](o, i, 7, BLOCK=16, backend=backend)
    want = np.concatenate([np.full(16, 112), np.full(16, 7), [0], 7 * np.arange(1, 17)])
    assert_bits_equal(o, want.astype(np.int32), "sum, max, xor_sum, cumsum")
    assert_bits_equal(i, np.zeros(17, np.int32), "argmax, argmin")


def test_spilled_in_place_scan_steps_read_before_they_write(rng):
    """On one warp a 64x64 int32 cumsum along axis 1 spills, and its in-place log-step
    instructions (``d[i + s] += d[i]``) are split into chunks: the chunks must run
    top-down to keep "all reads before any write" (bottom-up gives wrong sums)."""
    x = random_data(np.int32, (64, 64), rng, specials=False)
    got, p = run_pinghu(x, (64, 64), 1, "scan", "sum", 1)
    assert p.local > 0
    np.testing.assert_array_equal(got, scan_ref(x, 1, "sum"))
