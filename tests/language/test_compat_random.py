"""``ml.rand`` & co.: Triton's Philox 4x32-10 random numbers, bit for bit.

The oracle here is an independent implementation of the Philox spec (Salmon, Moraes, Dror
and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11): 4x32 in numpy uint64
arithmetic, 4x64 with Python integers. It is first checked on Random123's published
known-answer vectors (its ``tests/kat_vectors``), then every mutile function is checked
against it on random seeds and offsets: integers exactly; ``rand``'s floats exactly too
(one int -> f32 conversion and one f32 multiply, both correctly rounded); ``randn``'s
Box-Muller within ``2**-20 * (r + 1)`` of the float64 transform of the same uniforms
(``r`` the radius; about 16 f32 ulps at 1, over the 2 + 2 ulp that log and cos may
take). Distribution sanity of rand/randn is checked on top, with bounds of six standard
errors.

Triton's conventions (``triton/language/random.py``): the key is (seed's low 32 bits,
its high 32 bits) of the seed as uint64; the counter is (offset's low word, high word (0
for 32-bit offsets), 0, 0); a uniform is ``where(x < 0, -x - 1, x) * 4.6566127342e-10``
of the word read as int32.
"""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.runtime.compile import frontend_and_passes

from ..conftest import assert_bits_equal, marked, poison, tile_offsets

M32, M64 = 0xFFFFFFFF, (1 << 64) - 1

# ------------------------------------------------------------------ the oracle
# Round multipliers and Weyl key increments of Philox 4xW (SC'11, section 5).
SPEC = {32: (0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85),
        64: (0xD2E7470EE14C6C93, 0xCA5A826395121157, 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B)}


def philox4x32(ctr, key, rounds=10):
    """Philox 4x32 on uint32 arrays ``ctr`` (4 words) and ``key`` (2), in uint64
    arithmetic: each round maps (x0, x1, x2, x3) to (hi(M1 x2) ^ x1 ^ k0, lo(M1 x2),
    hi(M0 x0) ^ x3 ^ k1, lo(M0 x0)), and the key gains the Weyl constants between rounds."""
    m0, m1, w0, w1 = (np.uint64(v) for v in SPEC[32])
    x = [np.asarray(c, np.uint64) & np.uint64(M32) for c in ctr]
    k0, k1 = (np.asarray(k, np.uint64) & np.uint64(M32) for k in key)
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + w0) & np.uint64(M32), (k1 + w1) & np.uint64(M32)
        p0, p1 = m0 * x[0], m1 * x[2]                     # < 2**64: exact in uint64
        x = [(p1 >> np.uint64(32)) ^ x[1] ^ k0, p1 & np.uint64(M32),
             (p0 >> np.uint64(32)) ^ x[3] ^ k1, p0 & np.uint64(M32)]
    return [v.astype(np.uint32) for v in x]


def philox4x64(ctr, key, rounds=10):
    """Philox 4x64 with Python integers (128-bit products); lists in, lists out."""
    m0, m1, w0, w1 = SPEC[64]
    out = []
    for c0, c1, c2, c3, k0, k1 in zip(*ctr, *key):
        x = [int(c0), int(c1), int(c2), int(c3)]
        k0, k1 = int(k0), int(k1)
        for r in range(rounds):
            if r:
                k0, k1 = (k0 + w0) & M64, (k1 + w1) & M64
            p0, p1 = m0 * x[0], m1 * x[2]
            x = [(p1 >> 64) ^ x[1] ^ k0, p1 & M64, (p0 >> 64) ^ x[3] ^ k1, p0 & M64]
        out.append(x)
    return [np.array([o[i] for o in out], np.uint64) for i in range(4)]


# Random123 kat_vectors: (name, rounds, counter words, key words, result words)
KAT = [
    (32, 7, [0] * 4, [0] * 2, [0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48]),
    (32, 7, [M32] * 4, [M32] * 2, [0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662]),
    (32, 10, [0] * 4, [0] * 2, [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
    (32, 10, [M32] * 4, [M32] * 2, [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
    (32, 10, [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0],
     [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]),
    (64, 10, [0] * 4, [0] * 2,
     [0x16554d9eca36314c, 0xdb20fe9d672d0fdc, 0xd7e772cee186176b, 0x7e68b68aec7ba23b]),
    (64, 10, [M64] * 4, [M64] * 2,
     [0x87b092c3013fe90b, 0x438c3c67be8d0224, 0x9cc7d7c69cd777b6, 0xa09caebf594f0ba0]),
    (64, 10, [0x243f6a8885a308d3, 0x13198a2e03707344, 0xa4093822299f31d0, 0x082efa98ec4e6c89],
     [0x452821e638d01377, 0xbe5466cf34e90c6c],
     [0xa528f45403e61d95, 0x38c72dbd566e9788, 0xa5a1610e72fd18b5, 0x57bd43b5e52b7fe6]),
]
KAT_IDS = [f"4x{w}-{r}-{i}" for i, (w, r, *_rest) in enumerate(KAT)]


@pytest.mark.parametrize("width,rounds,ctr,key,want", KAT, ids=KAT_IDS)
def test_oracle_matches_random123_known_answers(width, rounds, ctr, key, want):
    fn = philox4x32 if width == 32 else philox4x64
    got = fn([[c] for c in ctr], [[k] for k in key], rounds)
    assert [int(g[0]) for g in got] == want


def triton_key(seed: int):
    """Triton's key for 32-bit counters: the seed as uint64, low word and high word."""
    s = seed & M64
    return s & M32, s >> 32


def randint4x_ref(seed: int, offsets: np.ndarray, rounds=10):
    off = offsets.astype(np.int64).view(np.uint64) if offsets.dtype.itemsize == 8 \
        else offsets.astype(np.int64).astype(np.uint64) & np.uint64(M32)
    lo = off & np.uint64(M32)
    hi = off >> np.uint64(32) if offsets.dtype.itemsize == 8 else np.zeros_like(lo)
    zero = np.zeros_like(lo)
    k0, k1 = triton_key(seed)
    return philox4x32([lo, hi, zero, zero], [np.full_like(lo, k0), np.full_like(lo, k1)],
                      rounds)


def uniform_ref(words: np.ndarray) -> np.ndarray:
    x = words.view(np.int32).astype(np.int64)
    x = np.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)   # one rounding each


def box_muller_ref(u1, u2):
    """The float64 transform of the f32 uniforms, with Triton's f32 clamp and angle."""
    u1 = np.maximum(np.float32(1e-7), u1).astype(np.float64)
    th = (np.float32(6.283185307179586) * u2).astype(np.float64)
    r = np.sqrt(-2.0 * np.log(u1))
    return r, r * np.cos(th), r * np.sin(th)


def check_normal(got, r, want, what):
    assert got.dtype == np.float32, what
    err = np.abs(got.astype(np.float64) - want)
    tol = 2.0 ** -20 * (r + 1)
    bad = ~(err <= tol)
    assert not bad.any(), f"{what}: {int(bad.sum())} off, worst {err.max():.3g} " \
                          f"(at {np.argmax(err / tol)})"


# ------------------------------------------------------------------ the kernels
@mutile.jit
def all_random(SEED, OFF, U, F, seed_arg, S0: ml.constexpr, S1: ml.constexpr,
               S2: ml.constexpr, NDIM: ml.constexpr, SEED_IN_MEMORY: ml.constexpr):
    """U[0..3] = randint4x, U[4] = randint, U[5] = randint with 7 rounds; F[0] = rand,
    F[1..4] = rand4x, F[5] = randn, F[6..9] = randn4x, F[10] = uint_to_uniform_float."""
    offs = tile_offsets(S0, S1, S2, NDIM)
    n = S0 * S1 * S2
    off = ml.load(OFF + offs)
    if SEED_IN_MEMORY:
        seed = ml.load(SEED)
    else:
        seed = seed_arg
    i0, i1, i2, i3 = ml.randint4x(seed, off)
    ml.store(U + offs, i0)
    ml.store(U + n + offs, i1)
    ml.store(U + 2 * n + offs, i2)
    ml.store(U + 3 * n + offs, i3)
    ml.store(U + 4 * n + offs, ml.randint(seed, off))
    ml.store(U + 5 * n + offs, ml.randint(seed, off, n_rounds=7))
    ml.store(F + offs, ml.rand(seed, off))
    u1, u2, u3, u4 = ml.rand4x(seed, off)
    ml.store(F + n + offs, u1)
    ml.store(F + 2 * n + offs, u2)
    ml.store(F + 3 * n + offs, u3)
    ml.store(F + 4 * n + offs, u4)
    ml.store(F + 5 * n + offs, ml.randn(seed, off))
    n1, n2, n3, n4 = ml.randn4x(seed, off)
    ml.store(F + 6 * n + offs, n1)
    ml.store(F + 7 * n + offs, n2)
    ml.store(F + 8 * n + offs, n3)
    ml.store(F + 9 * n + offs, n4)
    ml.store(F + 10 * n + offs, ml.uint_to_uniform_float(i3))


CASES = [  # shape, offset dtype, seed (None: an int64 read from memory)
    ((64,), np.int32, 12345),
    ((8, 16), np.int64, 0x1234_5678_9ABC_DEF0),
    ((8, 16), np.int32, None),
    ((2, 4, 8), np.int64, -7),
]


def offsets_for(shape, dtype, rng):
    info = np.iinfo(dtype)
    n = int(np.prod(shape))
    off = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    off[:6] = np.array([0, 1, -1, info.max, info.min, 2 ** 31 - 1]).astype(dtype)
    if dtype == np.int64:
        off[6:9] = [2 ** 32, -(2 ** 32), 2 ** 31]
    return off.reshape(shape)


@pytest.mark.parametrize("shape,odt,seed", CASES,
                         ids=["1d-i32-seed32", "2d-i64-seed64", "2d-i32-seedmem", "3d-i64-neg"])
def test_random_functions_match_the_oracle(shape, odt, seed, rng, backend):
    off = offsets_for(shape, odt, rng)
    from_memory = seed is None
    if from_memory:
        seed = int(rng.integers(-2 ** 63, 2 ** 63 - 1))
    seed_buf = np.array([seed], np.int64)
    u, f = poison((6,) + shape, np.uint32), poison((11,) + shape, np.float32)
    dims = list(shape) + [1] * (3 - len(shape))
    all_random[(1,)](seed_buf, off, u, f, 0 if from_memory else seed, S0=dims[0], S1=dims[1],
                     S2=dims[2], NDIM=len(shape), SEED_IN_MEMORY=from_memory, backend=backend)
    words = [w.reshape(shape) for w in randint4x_ref(seed, off.reshape(-1))]
    for i in range(4):
        assert_bits_equal(u[i], words[i], f"randint4x word {i}")
    assert_bits_equal(u[4], words[0], "randint")
    assert_bits_equal(u[5], randint4x_ref(seed, off.reshape(-1), 7)[0].reshape(shape),
                      "randint, 7 rounds")
    uni = [uniform_ref(w) for w in words]
    assert_bits_equal(f[0], uni[0], "rand")
    for i in range(4):
        assert_bits_equal(f[1 + i], uni[i], f"rand4x {i}")
    assert_bits_equal(f[10], uni[3], "uint_to_uniform_float")
    r12, c12, s12 = box_muller_ref(uni[0], uni[1])
    r34, c34, s34 = box_muller_ref(uni[2], uni[3])
    check_normal(f[5], r12, c12, "randn")
    for i, (r, want) in enumerate([(r12, c12), (r12, s12), (r34, c34), (r34, s34)]):
        check_normal(f[6 + i], r, want, f"randn4x {i}")


@mutile.jit
def philox_direct(C, K, O, SEED, R: ml.constexpr, BLOCK: ml.constexpr):
    """O[0..3] = philox_impl(C rows, K rows, R rounds); O[4..7] = philox(seed, C rows)."""
    i = ml.arange(0, BLOCK)
    c0, c1 = ml.load(C + i), ml.load(C + BLOCK + i)
    c2, c3 = ml.load(C + 2 * BLOCK + i), ml.load(C + 3 * BLOCK + i)
    k0, k1 = ml.load(K + i), ml.load(K + BLOCK + i)
    a, b, c, d = ml.philox_impl(c0, c1, c2, c3, k0, k1, R)
    e, f, g, h = ml.philox(ml.load(SEED), c0, c1, c2, c3, n_rounds=R)
    outs = (a, b, c, d, e, f, g, h)
    for j in ml.static_range(8):
        ml.store(O + j * BLOCK + i, outs[j])


@pytest.mark.parametrize("width", [32, 64])
def test_philox_known_answers_and_random_counters(width, rng, backend):
    """philox_impl on the known-answer vectors (both round counts) in the first lanes,
    random counters and keys in the rest; philox(seed, ...) with Triton's key split."""
    block = 16
    dt = np.uint32 if width == 32 else np.uint64
    kats = [k for k in KAT if k[0] == width and k[1] == 10]
    c = rng.integers(0, 2 ** width, (4, block), dtype=dt, endpoint=False)
    k = rng.integers(0, 2 ** width, (2, block), dtype=dt, endpoint=False)
    for lane, (_, _, ctr, key, _) in enumerate(kats):
        c[:, lane], k[:, lane] = ctr, key
    seed = int(rng.integers(-2 ** 63, 2 ** 63 - 1))
    o = poison((8, block), dt)
    philox_direct[(1,)](c, k, o, np.array([seed], np.int64), R=10, BLOCK=block, backend=backend)
    fn = philox4x32 if width == 32 else philox4x64
    want = fn(list(c), list(k))
    for lane, kat in enumerate(kats):
        assert [int(o[j, lane]) for j in range(4)] == kat[4], f"known answer {lane}"
    for j in range(4):
        assert_bits_equal(o[j], want[j].astype(dt), f"philox_impl word {j}")
    if width == 32:
        key = [np.full(block, v, np.uint64) for v in triton_key(seed)]
    else:                        # 64-bit counters: the whole seed, and 0
        key = [np.full(block, seed & M64, np.uint64), np.zeros(block, np.uint64)]
    want = fn(list(c), key)
    for j in range(4):
        assert_bits_equal(o[4 + j], want[j].astype(dt), f"philox word {j}")


@mutile.jit
def uniform_stats(O, seed, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    n = BLOCK * ml.num_programs(0)
    ml.store(O + offs, ml.rand(seed, offs))
    ml.store(O + n + offs, ml.randn(seed, offs))


def test_distributions(rng, backend):
    """rand in [0, 1) with mean 1/2 and variance 1/12; randn with mean 0, variance 1;
    different seeds give different streams. Bounds: six standard errors."""
    n = 4096
    seed = int(rng.integers(0, 2 ** 31))
    o, o2 = poison((2, n), np.float32), poison((2, n), np.float32)
    uniform_stats[(n // 512,)](o, seed, BLOCK=512, backend=backend)
    uniform_stats[(n // 512,)](o2, seed + 1, BLOCK=512, backend=backend)
    u, z = o[0].astype(np.float64), o[1].astype(np.float64)
    assert (u >= 0).all() and (u < 1).all()
    assert abs(u.mean() - 0.5) < 6 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 6 * np.sqrt(1 / 180 / n)     # var of U^2-ish terms
    assert abs(z.mean()) < 6 / np.sqrt(n)
    assert abs(z.var() - 1) < 6 * np.sqrt(2 / n)
    assert np.isfinite(z).all() and np.abs(z).max() < 6.0      # the 1e-7 clamp bounds |z|
    assert (o[0] != o2[0]).mean() > 0.99, "seed + 1 gives the same stream"
    # neighbouring offsets are uncorrelated
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 6 / np.sqrt(n)


@mutile.jit
def uniform_words(W32, W64, O, BLOCK: ml.constexpr):
    i = ml.arange(0, BLOCK)
    ml.store(O + i, ml.uint_to_uniform_float(ml.load(W32 + i)))
    ml.store(O + BLOCK + i, ml.uint_to_uniform_float(ml.load(W64 + i)))


def test_uniform_extremes(rng, backend):
    """uint_to_uniform_float on 32- and 64-bit words: the largest words (0x7fff..., 0x8000...)
    give a float just below 1.0 (never 1.0), 0 and all-ones give 0.0; random words exactly as
    the oracle (64-bit words: one int64 -> f32 rounding, times 1.0842020432385337e-19)."""
    block = 32
    w32 = rng.integers(0, 2 ** 32, block, dtype=np.uint32)
    w64 = rng.integers(0, 2 ** 64, block, dtype=np.uint64, endpoint=False)
    w32[:4] = [0x7FFFFFFF, 0x80000000, 0, 0xFFFFFFFF]
    w64[:4] = [2 ** 63 - 1, 2 ** 63, 0, M64]
    o = poison((2, block), np.float32)
    uniform_words[(1,)](w32, w64, o, BLOCK=block, backend=backend)
    x64 = w64.view(np.int64)
    want64 = np.where(x64 < 0, -x64 - 1, x64).astype(np.float32) \
        * np.float32(1.0842020432385337e-19)
    for row, want in ((o[0], uniform_ref(w32)), (o[1], want64)):
        assert_bits_equal(row, want, "uint_to_uniform_float")
        assert row[0] == row[1] and 1 - 2.0 ** -22 <= row[0] < 1.0 and row[2] == row[3] == 0
        assert (row >= 0).all() and (row < 1).all()


# ------------------------------------------------------------------ errors
@mutile.jit
def k_float_seed(X):
    offs = ml.arange(0, 16)
    ml.store(X + offs, ml.rand(1.5, offs))  # LINE-MARK: ml.rand


@mutile.jit
def k_float_offsets(X, seed):
    offs = ml.arange(0, 16).to(ml.float32)
    ml.store(X + ml.arange(0, 16), ml.randint(seed, offs))  # LINE-MARK: ml.randint


@mutile.jit
def k_runtime_rounds(X, seed, r):
    offs = ml.arange(0, 16)
    ml.store(X + offs, ml.rand(seed, offs, r))  # LINE-MARK: ml.rand


@mutile.jit
def k_signed_counter(X, seed):
    c = ml.arange(0, 16)
    a, b, cc, d = ml.philox_impl(c, c, c, c, seed, seed)  # LINE-MARK: ml.philox_impl
    ml.store(X + c, a)


@mutile.jit
def k_mixed_counter(X, seed):
    c = ml.arange(0, 16)
    a, b, cc, d = ml.philox(seed, c, c.to(ml.int64), c, c)  # LINE-MARK: ml.philox
    ml.store(X + c, a)


@pytest.mark.parametrize("kernel,pattern", [
    (k_float_seed, r"philox's seed must be an integer"),
    (k_float_offsets, r"randint's offset must be an integer"),
    (k_runtime_rounds, r"n_rounds must be a compile-time integer"),
    (k_signed_counter, r"philox_impl needs four uint32 \(or four uint64\) counter words"),
    (k_mixed_counter, r"counter words must all be 32-bit or all 64-bit"),
], ids=["float-seed", "float-offsets", "runtime-rounds", "signed-counter", "mixed-counter"])
def test_bad_arguments_point_at_the_call(kernel, pattern):
    import re
    from mutile.ir import types as T
    spec = {"X": T.PointerType(T.f32)}
    for p in ("seed", "r"):
        if p in kernel.params:
            spec[p] = T.i32
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, spec, {}, verify=True)
    e, m = info.value, marked(kernel)
    assert re.search(pattern, e.msg), e.msg
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert "random.py" not in str(e).replace(m.file, "")
