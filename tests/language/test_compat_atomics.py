"""Triton's atomics (issue 10, family 4): ``atomic_add/max/min/and/or/xor/xchg`` and
``atomic_cas`` on scalar pointers and tiles of pointers, with masks, on both backends.

Many programs hit few addresses, so updates really race (llvm: the launcher's threads;
pinghu: the warps of every resident block, serialized per address). Each test checks
the final memory against a float64 numpy reference and the returned old values for
consistency with *some* serial order: per address, the multiset {initial value} + {each
element's own update applied to its old value} equals {the olds} + {the final value}
(bitwise, in the element type), which holds exactly when the olds chain into a serial
order. Masked-off elements return 0.
"""
import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import poison, random_data

NADDR, BLOCK, NPROG = 8, 32, 6

RMW = {"add": ml.atomic_add, "max": ml.atomic_max, "min": ml.atomic_min,
       "and": ml.atomic_and, "or": ml.atomic_or, "xor": ml.atomic_xor, "xchg": ml.atomic_xchg}
INTS = [np.int32, np.uint32, np.int64, np.uint64]
FLOATS = [np.float32, np.float64]
CASES = ([("add", d) for d in INTS + FLOATS + [np.float16, ml_dtypes.bfloat16]]
         + [(op, d) for op in ("max", "min") for d in INTS + FLOATS]
         + [(op, d) for op in ("and", "or", "xor") for d in INTS]
         + [("xchg", d) for d in INTS + FLOATS])


def _is_float(dt) -> bool:
    return np.dtype(dt).kind == "f" or np.dtype(dt) == np.dtype(ml_dtypes.bfloat16)


def _np_update(op, old, v):
    """Each element's own update, in the element type (floats: rounded once)."""
    if op == "add":
        if old.dtype.itemsize == 2:        # 16-bit floats add in f32, rounded once
            return (old.astype(np.float32) + v.astype(np.float32)).astype(old.dtype)
        return old + v
    return {"max": np.fmax if _is_float(old.dtype) else np.maximum,
            "min": np.fmin if _is_float(old.dtype) else np.minimum,
            "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
            "xchg": lambda o, x: x}[op](old, v)


def _bits(x):
    return np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}")


def check_serial(op, init, final, idx, vals, olds, active, cmp=None):
    """The olds of each address chain from its initial to its final value."""
    with np.errstate(all="ignore"):
        new = _np_update(op, olds, vals) if cmp is None else \
            np.where(_bits(olds) == _bits(cmp), vals, olds)
    for a in range(len(init)):
        sel = active & (idx == a)
        lhs = np.sort(np.concatenate([_bits(init[a:a + 1]), _bits(new[sel])]))
        rhs = np.sort(np.concatenate([_bits(olds[sel]), _bits(final[a:a + 1])]))
        assert (lhs == rhs).all(), f"address {a}: olds do not chain into a serial order"
    assert (_bits(olds[~active]) == 0).all(), "masked-off elements must return 0"


def reference(op, init, idx, vals, active):
    """Final memory computed in float64 (ints exactly, in Python integers)."""
    out = []
    for a in range(len(init)):
        v = vals[active & (idx == a)]
        if op == "xchg":
            out.append(None)
            continue
        if _is_float(init.dtype):
            x = np.concatenate([init[a:a + 1], v]).astype(np.float64)
            out.append({"add": np.sum, "max": np.max, "min": np.min}[op](x))
            continue
        acc = int(init[a])
        for y in v.tolist():
            acc = {"add": acc + y, "max": max(acc, y), "min": min(acc, y), "and": acc & y,
                   "or": acc | y, "xor": acc ^ y}[op]
        out.append(acc % (1 << (8 * init.dtype.itemsize)))
    return out


def check_final(op, init, final, idx, vals, active):
    for a, want in enumerate(reference(op, init, idx, vals, active)):
        if want is None:                   # xchg: some active value (or the initial one)
            cand = vals[active & (idx == a)]
            assert _bits(final[a:a + 1])[0] in set(_bits(cand).tolist()) or not cand.size
        elif _is_float(init.dtype):
            n = int((active & (idx == a)).sum()) + 1
            absum = np.abs(np.concatenate([init[a:a + 1], vals[active & (idx == a)]])
                           .astype(np.float64)).sum()
            eps = float(ml_dtypes.finfo(init.dtype).eps)
            tol = n * eps * absum if op == "add" else 0.0
            assert abs(float(final[a]) - want) <= tol, (a, float(final[a]), want)
        else:
            assert int(final[a]) % (1 << (8 * init.dtype.itemsize)) == want, a


def _data(op, dtype, n, rng):
    dtype = np.dtype(dtype)
    if _is_float(dtype):
        return random_data(dtype, (n,), rng, specials=False)
    if op == "add":
        return random_data(dtype, (n,), rng, specials=True)
    return random_data(dtype, (n,), rng)


@mutile.jit
def rmw_tile(Y, X, IDX, M, OLD, OP: ml.constexpr, MASKED: ml.constexpr, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    ptrs = Y + ml.load(IDX + offs)
    if MASKED:
        m = ml.load(M + offs) != 0
        old = ml.atomic_add(ptrs, x, mask=m) if OP == "add" else \
            ml.atomic_max(ptrs, x, mask=m) if OP == "max" else \
            ml.atomic_min(ptrs, x, mask=m) if OP == "min" else \
            ml.atomic_and(ptrs, x, mask=m) if OP == "and" else \
            ml.atomic_or(ptrs, x, mask=m) if OP == "or" else \
            ml.atomic_xor(ptrs, x, mask=m) if OP == "xor" else ml.atomic_xchg(ptrs, x, mask=m)
    else:
        old = ml.atomic_add(ptrs, x) if OP == "add" else \
            ml.atomic_max(ptrs, x) if OP == "max" else \
            ml.atomic_min(ptrs, x) if OP == "min" else \
            ml.atomic_and(ptrs, x) if OP == "and" else \
            ml.atomic_or(ptrs, x) if OP == "or" else \
            ml.atomic_xor(ptrs, x) if OP == "xor" else ml.atomic_xchg(ptrs, x)
    ml.store(OLD + offs, old)


@mutile.jit
def rmw_scalar(Y, X, M, OLD, OP: ml.constexpr, MASKED: ml.constexpr, NADDR: ml.constexpr):
    pid = ml.program_id(0)
    x = ml.load(X + pid)
    p = Y + pid % NADDR
    m = (ml.load(M + pid) != 0) if MASKED else True
    if OP == "add":
        old = p.atomic_add(x, mask=m)              # the tensor-method form
    elif OP == "max":
        old = ml.atomic_max(p, x, mask=m)
    elif OP == "min":
        old = ml.atomic_min(p, x, mask=m)
    elif OP == "and":
        old = ml.atomic_and(p, x, mask=m)
    elif OP == "or":
        old = ml.atomic_or(p, x, mask=m)
    elif OP == "xor":
        old = ml.atomic_xor(p, x, mask=m)
    else:
        old = ml.atomic_xchg(p, x, mask=m)
    ml.store(OLD + pid, old)


def _launch_kw(backend):
    return {"backend": backend, "num_threads": 2} if backend == "llvm" else {"backend": backend}


@pytest.mark.parametrize("masked", [False, True], ids=["all", "masked"])
@pytest.mark.parametrize("op,dtype", CASES, ids=lambda c: c if isinstance(c, str)
                         else np.dtype(c).name)
def test_rmw_tile(op, dtype, masked, backend, rng):
    n = NPROG * BLOCK
    x = _data(op, dtype, n, rng)
    init = _data(op, dtype, NADDR, rng)
    idx = rng.integers(0, NADDR, n).astype(np.int32)
    m = (rng.random(n) < 0.7).astype(np.int32) if masked else np.ones(n, np.int32)
    y = init.copy()
    old = poison(n, dtype)
    rmw_tile[(NPROG,)](y, x, idx, m, old, OP=op, MASKED=masked, BLOCK=BLOCK,
                       **_launch_kw(backend))
    active = m != 0
    check_serial(op, init, y, idx, x, old, active)
    check_final(op, init, y, idx, x, active)


@pytest.mark.parametrize("masked", [False, True], ids=["all", "masked"])
@pytest.mark.parametrize("op,dtype", [c for c in CASES if c[1] in (np.int32, np.uint64,
                                                                   np.float32, np.float16)],
                         ids=lambda c: c if isinstance(c, str) else np.dtype(c).name)
def test_rmw_scalar(op, dtype, masked, backend, rng):
    n = 40
    x, init = _data(op, dtype, n, rng), _data(op, dtype, NADDR, rng)
    m = (rng.random(n) < 0.6).astype(np.int32) if masked else np.ones(n, np.int32)
    y, old = init.copy(), poison(n, dtype)
    rmw_scalar[(n,)](y, x, m, old, OP=op, MASKED=masked, NADDR=NADDR, **_launch_kw(backend))
    idx = np.arange(n) % NADDR
    check_serial(op, init, y, idx, x, old, m != 0)
    check_final(op, init, y, idx, x, m != 0)


@mutile.jit
def cas_tile(Y, C, V, IDX, OLD, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    old = ml.atomic_cas(Y + ml.load(IDX + offs), ml.load(C + offs), ml.load(V + offs))
    ml.store(OLD + offs, old)


@mutile.jit
def cas_scalar(Y, C, V, OLD, NADDR: ml.constexpr):
    pid = ml.program_id(0)
    old = (Y + pid % NADDR).atomic_cas(ml.load(C + pid), ml.load(V + pid), sem="acquire")
    ml.store(OLD + pid, old)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", ["tile", "scalar"])
def test_cas(dtype, shape, backend, rng):
    """Compare values drawn from a few, so many swaps succeed and many fail."""
    n = NPROG * BLOCK if shape == "tile" else 40
    pool = _data("cas", dtype, 4, rng)
    init = pool[rng.integers(0, 4, NADDR)]
    c, v = pool[rng.integers(0, 4, n)], pool[rng.integers(0, 4, n)]
    y, old = init.copy(), poison(n, dtype)
    if shape == "tile":
        idx = rng.integers(0, NADDR, n).astype(np.int32)
        cas_tile[(NPROG,)](y, c, v, idx, old, BLOCK=BLOCK, **_launch_kw(backend))
    else:
        idx = np.arange(n) % NADDR
        cas_scalar[(n,)](y, c, v, old, NADDR=NADDR, **_launch_kw(backend))
    check_serial("cas", init, y, idx, v, old, np.ones(n, bool), cmp=c)
    assert (_bits(old) == _bits(init)[idx]).any()      # some element saw the initial value


@mutile.jit
def histogram(X, H, n, NB: ml.constexpr, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = offs < n
    x = ml.load(X + offs, mask=m, other=0)
    ml.atomic_add(H + x % NB, 1, mask=m, sem="relaxed")


def test_histogram(backend, rng):
    n, nb = 3000, 5
    x = rng.integers(0, 1000, n).astype(np.int32)
    h = np.zeros(nb, np.int32)
    histogram[(-(-n // 64),)](x, h, n, NB=nb, BLOCK=64, **_launch_kw(backend))
    assert (h == np.bincount(x % nb, minlength=nb)).all()


@mutile.jit
def splitk(A, B, C, M, N, K, SPLIT: ml.constexpr, BM: ml.constexpr, BN: ml.constexpr,
           BK: ml.constexpr):
    pid_k = ml.program_id(0)
    rm, rn = ml.arange(0, BM), ml.arange(0, BN)
    acc = ml.zeros((BM, BN), ml.float32)
    for k0 in range(pid_k * BK, K, SPLIT * BK):
        rk = k0 + ml.arange(0, BK)
        a = ml.load(A + rm[:, None] * K + rk[None, :], mask=rk[None, :] < K, other=0.0)
        b = ml.load(B + rk[:, None] * N + rn[None, :], mask=rk[:, None] < K, other=0.0)
        acc += ml.dot(a, b, input_precision="ieee")
    ml.atomic_add(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_split_k(backend, rng):
    M, N, K, split = 16, 16, 200, 4
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    splitk[(split,)](a, b, c, M, N, K, SPLIT=split, BM=16, BN=16, BK=16, **_launch_kw(backend))
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = K * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b))
    assert (np.abs(c - want) <= bound).all()


@mutile.jit
def locked_counter(LOCK, COUNT, SEEN, REPS: ml.constexpr):
    pid = ml.program_id(0)
    for r in range(REPS):
        while ml.atomic_cas(LOCK, 0, 1) == 1:
            pass
        v = ml.load(COUNT, volatile=True)
        ml.store(SEEN + pid * REPS + r, v)
        ml.store(COUNT, v + 1)
        ml.atomic_xchg(LOCK, 0)


@pytest.mark.parametrize("nprog", [12, 40])
def test_spin_lock_counter(nprog, backend):
    """A read-modify-write under an atomic_cas spin lock: every program's increments
    land (exact count), and the values seen are a permutation of 0 .. n-1."""
    reps = 3
    lock, count = np.zeros(1, np.int32), np.zeros(1, np.int32)
    seen = poison(nprog * reps, np.int32)
    kw = _launch_kw(backend)
    if backend == "llvm":
        kw["num_threads"] = 4                     # more threads than the machine's cores
    locked_counter[(nprog,)](lock, count, seen, REPS=reps, **kw)
    assert count[0] == nprog * reps and lock[0] == 0
    assert sorted(seen.tolist()) == list(range(nprog * reps))


@mutile.jit
def sem_scope(Y, OLD, SEM: ml.constexpr, SCOPE: ml.constexpr):
    pid = ml.program_id(0)
    ml.store(OLD + pid, ml.atomic_add(Y, pid + 1, sem=SEM, scope=SCOPE))


@pytest.mark.parametrize("scope", ["gpu", "cta", "sys", None])
@pytest.mark.parametrize("sem", ["acquire", "release", "acq_rel", "relaxed", None])
def test_sem_scope_accepted(sem, scope, backend):
    y, old = np.zeros(1, np.int64), poison(9, np.int64)
    sem_scope[(9,)](y, old, SEM=sem, SCOPE=scope, backend=backend)
    assert y[0] == 45
    check_serial("add", np.zeros(1, np.int64), y, np.zeros(9, int),
                 np.arange(1, 10, dtype=np.int64), old, np.ones(9, bool))


@mutile.jit
def bad_and_float(Y):
    ml.atomic_and(Y, 1.0)  # LINE-MARK: ml.atomic_and


@mutile.jit
def bad_max_half(Y):
    ml.atomic_max(Y, 1.0)  # LINE-MARK: ml.atomic_max


@mutile.jit
def bad_add_int8(Y):
    ml.atomic_add(Y, 1)  # LINE-MARK: ml.atomic_add


@mutile.jit
def bad_cas_half(Y):
    ml.atomic_cas(Y, 0.0, 1.0)  # LINE-MARK: ml.atomic_cas


@mutile.jit
def bad_sem(Y):
    ml.atomic_add(Y, 1, sem="seq_cst")  # LINE-MARK: ml.atomic_add


@mutile.jit
def bad_scope(Y):
    ml.atomic_xchg(Y, 1, scope="device")  # LINE-MARK: ml.atomic_xchg


@mutile.jit
def bad_not_pointer(Y):
    ml.atomic_add(ml.load(Y), 1)  # LINE-MARK: ml.atomic_add


@pytest.mark.parametrize("kernel,arr,pattern", [
    (bad_and_float, np.zeros(1, np.float32), "needs integer elements"),
    (bad_max_half, np.zeros(1, np.float16), "16-bit elements only with atomic_add"),
    (bad_add_int8, np.zeros(1, np.int8), "does not support ml.int8"),
    (bad_cas_half, np.zeros(1, np.float16), "32- or 64-bit"),
    (bad_sem, np.zeros(1, np.int32), "sem must be one of"),
    (bad_scope, np.zeros(1, np.int32), "scope must be one of"),
    (bad_not_pointer, np.zeros(1, np.int32), "needs a pointer"),
], ids=lambda x: getattr(x, "__name__", None) if callable(getattr(x, "fn", x)) else None)
def test_bad_uses_name_the_line(kernel, arr, pattern, mark, backend):
    m = mark(kernel)
    with pytest.raises(mutile.CompilationError) as info:
        kernel[(1,)](arr, backend=backend)
    e = info.value
    assert pattern in str(e)
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)


@mutile.jit
def never_released(LOCK, OUT):
    while ml.atomic_cas(LOCK, 0, 1) == 1:
        pass
    ml.store(OUT + ml.program_id(0), 1)


def test_stuck_lock_is_reported_not_hung():
    """A lock nobody releases: the interpreter reports no progress (it must not hang)."""
    lock, out = np.ones(1, np.int32), poison(4, np.int32)
    with pytest.raises(mutile.DeviceFault, match="no progress"):
        never_released[(4,)](lock, out, backend="pinghu")


def test_ir_round_trip(compile_ir):
    """compile_ir verifies every stage and checks that its text parses back equal."""
    from mutile.ir import types as T
    P = T.PointerType
    c = compile_ir(rmw_tile, Y=P(T.i32), X=P(T.i32), IDX=P(T.i32), M=P(T.i32), OLD=P(T.i32),
                   OP="max", MASKED=True, BLOCK=32)
    op = c.only("atomic_rmw")
    assert op.attrs == {"op": "max", "sem": "acq_rel", "scope": "gpu"}
    c = compile_ir(cas_tile, Y=P(T.f32), C=P(T.f32), V=P(T.f32), IDX=P(T.i32), OLD=P(T.f32),
                   BLOCK=32)
    assert c.only("atomic_cas").attrs == {"sem": "acq_rel", "scope": "gpu"}
