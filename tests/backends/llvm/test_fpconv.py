"""Bit-exactness tests for backends.llvm.fpconv: float -> float and int -> float.

The reference is mutile's rule (round once, to nearest even, from the exact
value): the exact oracle of tests/ir/exact_fp.py on every pair (its edge cases
and random patterns), and ``semantics.convert`` (itself checked against the
oracle, tests/ir/test_convert.py) where millions of inputs are needed.  NaN
payloads are compared too.  Every (src, dst) pair of the six formats is
compiled twice into one JIT module: a ``<16 x T>`` vector kernel and a scalar
loop (which LLVM's loop vectorizer turns into vector code plus a scalar
remainder); every integer type -> float format pair once, as a vector kernel.
8/16-bit sources are checked exhaustively; f32/f64 sources with millions of
random patterns plus targeted ties, overflow thresholds, subnormal boundaries
and NaNs.
"""
import ctypes
import re
import zlib

import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir
import llvmlite.binding as llvm

from backends.llvm import fpconv
from mutile.ir import semantics
from mutile.ir import types as T

from ...ir import exact_fp as X

DT = {"f64": np.float64, "f32": np.float32, "f16": np.float16,
      "bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn,
      "f8e5m2": ml_dtypes.float8_e5m2, "f8e4b8": ml_dtypes.float8_e4m3fnuz,
      "f8e5b16": ml_dtypes.float8_e5m2fnuz}
UT = {"f64": np.uint64, "f32": np.uint32, "f16": np.uint16, "bf16": np.uint16,
      "f8e4m3": np.uint8, "f8e5m2": np.uint8, "f8e4b8": np.uint8, "f8e5b16": np.uint8}
NAMES = list(DT)
PAIRS = [(s, d) for s in NAMES for d in NAMES if s != d]
INT_NAMES = list(X.INTS)
INT_PAIRS = [(s, d) for s in INT_NAMES for d in NAMES]
LANES = 16
I64 = ir.IntType(64)
PTR = ir.PointerType()
KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def _storage(fmt):
    return fpconv.storage_type(fmt) if fmt in fpconv.FORMATS else ir.IntType(X.INTS[fmt][0])


def _convert(b, x, src, dst):
    if src in fpconv.FORMATS:
        return fpconv.convert_float(b, x, src, dst)
    return fpconv.convert_int(b, x, X.INTS[src][1], dst)


def _emit_loop(mod, name, src, dst, lanes):
    """void name(src*, dst*, i64 n): dst[i] = convert(src[i]), ``lanes`` per step."""
    st, dt = _storage(src), _storage(dst)
    vs = ir.VectorType(st, lanes) if lanes > 1 else st
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), name=name)
    p_src, p_dst, n = fn.args
    entry, head, body, done = (fn.append_basic_block(x) for x in ("entry", "head", "body", "done"))
    b = ir.IRBuilder(entry)
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, n), body, done)
    b.position_at_end(body)
    x = b.load(b.gep(p_src, [i], source_etype=st), typ=vs, align=1)
    b.store(_convert(b, x, src, dst), b.gep(p_dst, [i], source_etype=dt), align=1)
    nxt = b.add(i, ir.Constant(I64, lanes))
    i.add_incoming(nxt, body)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()


class _Jit:
    def __init__(self):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        mod = ir.Module("fpconv_test")
        mod.triple = llvm.get_process_triple()
        for s, d in PAIRS:
            _emit_loop(mod, f"vec_{s}_{d}", s, d, LANES)
            _emit_loop(mod, f"scl_{s}_{d}", s, d, 1)
        for s, d in INT_PAIRS:
            _emit_loop(mod, f"vec_{s}_{d}", s, d, LANES)
        self.llmod = llvm.parse_assembly(str(mod))
        self.llmod.verify()
        self.tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(self.tm, pto)
        pb.getModulePassManager().run(self.llmod, pb)
        self.opt_ir = str(self.llmod)
        self.ee = llvm.create_mcjit_compiler(self.llmod, self.tm)
        self.ee.finalize_object()
        self._fns = {}

    def run(self, kind, src, dst, bits):
        name = f"{kind}_{src}_{dst}"
        if name not in self._fns:
            self._fns[name] = KERNEL(self.ee.get_function_address(name))
        bits = np.ascontiguousarray(bits, dtype=UT.get(src) or X.DTYPE[src])
        n = bits.size
        if kind == "vec":
            pad = (-n) % LANES
            bits = np.concatenate([bits, np.zeros(pad, bits.dtype)])
        out = np.zeros(bits.size, UT[dst])
        self._fns[name](bits.ctypes.data, out.ctypes.data, bits.size)
        return out[:n]


@pytest.fixture(scope="module")
def jit():
    return _Jit()


def reference(bits, src, dst):
    """mutile's conversion of the ``src`` bit patterns, as ``dst`` bits."""
    x = np.asarray(bits, UT[src]).view(DT[src])
    return semantics.convert(x, T.SCALARS[src], T.SCALARS[dst]).view(UT[dst])


def check(jit, src, dst, bits, ref=None, kinds=("vec", "scl")):
    bits = np.asarray(bits, UT.get(src) or X.DTYPE[src])
    ref = reference(bits, src, dst) if ref is None else ref
    for kind in kinds:
        out = jit.run(kind, src, dst, bits)
        bad = np.nonzero(out != ref)[0]
        if bad.size:
            ex = [(hex(int(bits[j])), hex(int(out[j])), hex(int(ref[j]))) for j in bad[:8]]
            pytest.fail(f"{kind} {src}->{dst}: {bad.size}/{bits.size} mismatches "
                        f"(input, got, expected): {ex}")


# ----------------------------------------------------------------- inputs

def special_bits(fmt):
    """Zeros, infinities, NaNs with assorted payloads, extreme finite values."""
    w = np.dtype(UT[fmt]).itemsize * 8
    ebits, mbits = {"f64": (11, 52), "f32": (8, 23)}[fmt]
    inf = ((1 << ebits) - 1) << mbits
    m = (1 << mbits) - 1
    q = 1 << (mbits - 1)
    pos = [0, 1, 2, m - 1, m, m + 1, inf - 1, inf, inf + 1, inf + 2, inf + q, inf + q + 1,
           inf + m, inf + q - 1, inf + (q >> 1), inf + (1 << (mbits - 10)), inf + (1 << (mbits - 11)),
           (1 << (w - 2)), (1 << (w - 2)) - 1]
    pos = np.array(pos, dtype=np.uint64)
    return np.concatenate([pos, pos | np.uint64(1 << (w - 1))]).astype(UT[fmt])


def dst_midpoints(dst):
    """Exact midpoints between consecutive positive finite dst values (float64),
    including 0 / min subnormal and max finite / overflow threshold."""
    if dst == "f32":
        rng = np.random.default_rng(7)
        exps = np.repeat(np.arange(0, 255, dtype=np.uint32), 40)
        mants = rng.integers(0, 1 << 23, size=exps.size, dtype=np.uint32)
        mants[::40], mants[1::40], mants[2::40] = 0, 1, (1 << 23) - 2
        lo = (exps << 23) | mants
    else:
        w = np.dtype(UT[dst]).itemsize * 8
        allb = np.arange(1 << (w - 1), dtype=np.uint64).astype(UT[dst])
        with np.errstate(all="ignore"):
            vals = allb.view(DT[dst]).astype(np.float64)
        lo = allb[np.isfinite(vals)]
    lo = np.sort(lo)
    v_lo = lo.view(DT[dst]).astype(np.float64)
    hi = (lo + 1).astype(UT[dst])
    v_hi = hi.view(DT[dst]).astype(np.float64)
    top = lo[-1] if dst != "f32" else np.uint32(0x7F7FFFFF)
    top_v = np.array([top], UT[dst]).view(DT[dst]).astype(np.float64)[0]
    below = np.array([top - 1], UT[dst]).view(DT[dst]).astype(np.float64)[0]
    v_hi = np.where(np.isfinite(v_hi), v_hi, np.nan)
    mids = (v_lo + v_hi) / 2
    mids = mids[np.isfinite(mids)]
    overflow = top_v + (top_v - below) / 2
    return np.concatenate([mids, [overflow, top_v]])


def targeted_bits(src, dst):
    """Ties, near-ties and thresholds of ``dst`` expressed in ``src`` (f32/f64)."""
    if dst == "f64":
        return special_bits(src)
    mids = dst_midpoints(dst)
    sv = mids.astype(DT[src])
    sv = sv[sv.astype(np.float64) == mids]  # keep exactly representable ones
    base = np.concatenate([sv, -sv]).view(UT[src]).astype(np.int64 if src == "f32" else np.uint64)
    deltas = [-2, -1, 0, 1, 2]
    if src == "f64":  # f64 values that round (in f32) onto a dst tie
        deltas += [s * d for s in (1, -1) for d in ((1 << 28), (1 << 29) - 1, 1 << 29, (1 << 29) + 1)]
    parts = [(base.astype(np.int64) + d).astype(np.uint64) for d in deltas]
    return np.concatenate(parts).astype(UT[src])


def in_range_bits(src, dst, n, rng):
    """Random values whose magnitude lies around the dynamic range of dst."""
    lo_e, hi_e = {"f32": (-150, 129), "f16": (-26, 17), "bf16": (-135, 129),
                  "f8e4m3": (-11, 10), "f8e5m2": (-18, 17), "f8e4b8": (-12, 9),
                  "f8e5b16": (-19, 17), "f64": (-155, 130)}[dst]
    e = rng.integers(lo_e, hi_e, size=n)
    m = rng.random(n) + 1.0
    v = np.ldexp(m, e) * rng.choice([-1.0, 1.0], size=n)
    with np.errstate(all="ignore"):
        v = v.astype(DT[src]).view(UT[src])
    # Randomise the low mantissa bits too (ldexp of a random double is dense).
    low = rng.integers(0, 1 << 8, size=n).astype(UT[src])
    return v ^ low


# ------------------------------------------------------------------- tests

SMALL_PAIRS = [(s, d) for s, d in PAIRS if s not in ("f32", "f64")]
WIDE_PAIRS = [(s, d) for s, d in PAIRS if s in ("f32", "f64")]


@pytest.mark.parametrize("src,dst", SMALL_PAIRS)
def test_exhaustive_small_sources(jit, src, dst):
    w = np.dtype(UT[src]).itemsize * 8
    check(jit, src, dst, np.arange(1 << w, dtype=np.uint64).astype(UT[src]))


@pytest.mark.parametrize("src,dst", WIDE_PAIRS)
def test_wide_sources_special_and_targeted(jit, src, dst):
    check(jit, src, dst, special_bits(src))
    check(jit, src, dst, targeted_bits(src, dst))


@pytest.mark.parametrize("src,dst", WIDE_PAIRS)
def test_wide_sources_random(jit, src, dst):
    rng = np.random.default_rng(zlib.crc32(f"{src}->{dst}".encode()))
    w = np.dtype(UT[src]).itemsize * 8
    uniform = rng.integers(0, 1 << 63, size=1_500_000, dtype=np.uint64) << np.uint64(1)
    uniform ^= rng.integers(0, 2, size=uniform.size, dtype=np.uint64)
    uniform = (uniform >> np.uint64(64 - w)).astype(UT[src])
    check(jit, src, dst, np.concatenate([uniform, in_range_bits(src, dst, 1_500_000, rng)]))


def test_f64_subnormal_sources(jit):
    rng = np.random.default_rng(3)
    sub = rng.integers(0, 1 << 52, size=200_000, dtype=np.uint64)
    for dst in NAMES[1:]:
        check(jit, "f64", dst, np.concatenate([sub, sub | np.uint64(1 << 63)]))


def test_f32_tie_at_every_exponent(jit):
    """Every f32 exponent, mantissa patterns that tie / straddle each dst ulp."""
    e = np.arange(256, dtype=np.uint32) << np.uint32(23)
    pats = []
    for dst_m in (10, 7, 3, 2):
        sh = 23 - dst_m
        for low in (1 << (sh - 1), (1 << (sh - 1)) - 1, (1 << (sh - 1)) + 1, 0, (1 << sh) - 1):
            for lsb in (0, 1 << sh):
                for hi in (0, 0x7F << 16, ((1 << 23) - 1) & ~((1 << sh) - 1)):
                    pats.append(np.uint32(hi | lsb | low) & np.uint32((1 << 23) - 1))
    bits = (e[:, None] | np.array(pats, np.uint32)[None, :]).ravel()
    bits = np.concatenate([bits, bits | np.uint32(1 << 31)])
    for dst in ("f64", "f16", "bf16", "f8e4m3", "f8e5m2", "f8e4b8", "f8e5b16"):
        check(jit, "f32", dst, bits)


def test_rounds_once(jit):
    """f64 -> every format rounds once: just above a tie of the destination, where
    rounding through f32 first would tie to even instead; so do integers."""
    x = np.array([1 + 2**-8 + 2**-40, 1 + 2**-11 + 2**-40, 1 + 2**-3 + 2**-40,
                  1 + 2**-4 + 2**-40, 464 + 2**-20])
    bits = x.view(np.uint64)
    for kind in ("vec", "scl"):
        assert jit.run(kind, "f64", "bf16", bits)[0] == 0x3F81  # not 0x3F80 (1.0)
        assert jit.run(kind, "f64", "f16", bits)[1] == 0x3C01
        assert jit.run(kind, "f64", "f8e5m2", bits)[2] == 0x3D  # not 0x3C
        assert jit.run(kind, "f64", "f8e4m3", bits)[3] == 0x39  # not 0x38
        assert jit.run(kind, "f64", "f8e4m3", bits)[4] == 0x7F  # NaN, not 448
        assert jit.run(kind, "f64", "f8e5b16", bits)[2] == 0x41  # not 0x40
        assert jit.run(kind, "f64", "f8e4b8", bits)[3] == 0x41  # not 0x40
        assert jit.run(kind, "f64", "f8e4b8", bits)[4] == 0x80  # NaN (fnuz), not 240
    ints = np.array([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**62 + 2**54 + 1], np.int64)
    assert list(jit.run("vec", "i64", "bf16", ints)) == [0x4B81, 0xCB81, 0x5E81]
    assert list(jit.run("vec", "u64", "bf16", np.array([2**63 + 2**55 + 1], np.uint64))) \
        == [0x5F01]
    for dst in NAMES[1:]:
        check(jit, "f64", dst, bits)


@pytest.mark.parametrize("src,dst", PAIRS)
def test_against_the_oracle(jit, src, dst):
    """The exact oracle on the source's special values, values at and around every
    format's ties and thresholds, and random patterns."""
    rng = np.random.default_rng(zlib.crc32(f"oracle {src}->{dst}".encode()))
    x = X.samples(src, 1200, rng)
    check(jit, src, dst, x.view(UT[src]), X.convert(x, src, dst).view(UT[dst]))


@pytest.mark.parametrize("src,dst", INT_PAIRS)
def test_integers_against_the_oracle(jit, src, dst):
    """Integers (limits, at and next to every format's ties, random) rounded once."""
    rng = np.random.default_rng(zlib.crc32(f"oracle {src}->{dst}".encode()))
    x = X.samples(src, 600, rng)
    check(jit, src, dst, x, X.convert(x, src, dst).view(UT[dst]), kinds=("vec",))
    wide = rng.integers(0, 2**64, 100_000, dtype=np.uint64).astype(x.dtype)
    want = semantics.convert(wide, T.SCALARS[src], T.SCALARS[dst]).view(UT[dst])
    check(jit, src, dst, wide, want, kinds=("vec",))


def test_scalar_loop_vectorized(jit):
    """The scalar kernels are branch-free, so LLVM's loop vectorizer widens them."""
    for s, d in [("f32", "bf16"), ("f16", "f32"), ("f8e4m3", "f16"), ("f64", "f8e5m2"),
                 ("f64", "bf16")]:
        body = jit.opt_ir.split(f"@scl_{s}_{d}(")[1].split("\n}\n")[0]
        assert re.search(r"<(4|8|16|32) x (i\d+|float|double)>", body), (s, d)


@pytest.mark.parametrize("lanes", [1, 3, 8])
def test_shapes_and_types(lanes):
    mod = ir.Module()
    for s, d in PAIRS:
        st = fpconv.storage_type(s)
        ty = st if lanes == 1 else ir.VectorType(st, lanes)
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ty]), name=f"f_{s}_{d}_{lanes}")
        b = ir.IRBuilder(fn.append_basic_block())
        y = fpconv.convert_float(b, fn.args[0], s, d)
        want = fpconv.storage_type(d)
        assert y.type == (want if lanes == 1 else ir.VectorType(want, lanes))
        b.ret_void()
    llvm.parse_assembly(str(mod)).verify()


def test_guards():
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.FloatType()]), name="g")
    b = ir.IRBuilder(fn.append_basic_block())
    with pytest.raises(ValueError):
        fpconv.convert_float(b, fn.args[0], "f32", "f4")
    with pytest.raises(TypeError):
        fpconv.convert_float(b, fn.args[0], "f16", "f32")
    with pytest.raises(ValueError):
        fpconv.storage_type("fp8")
    assert fpconv.convert_float(b, fn.args[0], "f32", "f32") is fn.args[0]
    assert str(fpconv.storage_type("bf16")) == "i16"
    assert str(fpconv.storage_type("f8e5m2")) == "i8"
    assert fpconv.FORMATS == {"f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2", "f8e4b8",
                              "f8e5b16"}
