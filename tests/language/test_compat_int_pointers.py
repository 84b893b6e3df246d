"""Pointers from integers (issue 10, family 8): ``x.to(tl.pointer_type(T))`` on 64-bit
integers, and ``mutile.AddressTable``, the host object whose int64 addresses a kernel
loads and turns into pointers (as published grouped GEMMs do).

Checked on both backends against float64 numpy, outputs poisoned: gathers by address of
several dtypes (``.to`` and ``tl.cast``, int64 and uint64 sources, scalars and tiles),
stores through such pointers, pointer -> int64 -> pointer round trips; an access past a
table member's end faults naming the member; a raw int64 array of real addresses faults
on Pinghu (suggesting ``mutile.AddressTable``) and on llvm with the checks on, and runs
on llvm with them off; any other source dtype is a CompilationError at the user's line.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as tl
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import marked, poison

BLOCK = 32


# ---------------------------------------------------------------- gathers by address
@mutile.jit
def scaled_groups(Table, Lens, Out, DTYPE: tl.constexpr, BLOCK: tl.constexpr,
                  UNSIGNED: tl.constexpr, VIA_CAST: tl.constexpr):
    """Out[g, :len_g] = X_g * 3 + 1, where X_g's address is Table[g]."""
    g = tl.program_id(0)
    addr = tl.load(Table + g)
    if UNSIGNED:
        addr = addr.to(tl.uint64)
    if VIA_CAST:
        x_ptr = tl.cast(addr, tl.pointer_type(DTYPE))
    else:
        x_ptr = addr.to(tl.pointer_type(DTYPE))
    n = tl.load(Lens + g)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = x * 3 + 1
    tl.store(Out + g * BLOCK + offs, y.to(Out.dtype.element_ty), mask=offs < n)


def _is_int(dtype) -> bool:
    return np.issubdtype(np.dtype(dtype), np.integer)


def _data(dtype, n, rng):
    if _is_int(dtype):
        return rng.integers(-1000, 1000, n).astype(dtype)
    return rng.standard_normal(n).astype(dtype)


CASES = [(np.float32, tl.float32, False, False), (np.float16, tl.float16, False, True),
         (np.float64, tl.float64, True, False), (np.int32, tl.int32, True, True),
         (ml_dtypes.bfloat16, tl.bfloat16, False, False), (np.int8, tl.int8, False, False)]


@pytest.mark.parametrize("np_dtype,dtype,unsigned,via_cast", CASES,
                         ids=["f32", "f16-cast", "f64-u64", "i32-u64-cast", "bf16", "i8"])
def test_gather_by_address(np_dtype, dtype, unsigned, via_cast, rng, backend):
    lens = np.array([BLOCK, 7, 20], np.int32)
    xs = [_data(np_dtype, int(n), rng) for n in lens]
    out_dtype = np.int64 if _is_int(np_dtype) else np.float64
    out = poison((3, BLOCK), out_dtype)
    table = mutile.AddressTable(xs)
    scaled_groups[(3,)](table, lens, out, DTYPE=dtype, BLOCK=BLOCK, UNSIGNED=unsigned,
                        VIA_CAST=via_cast, backend=backend)
    for g, x in enumerate(xs):
        want = x.astype(np.float64) * 3 + 1
        if _is_int(np_dtype):                 # computed in the element type: wraps
            want = (x * np_dtype(3) + np_dtype(1)).astype(np.int64)
        got = out[g, :lens[g]]
        if not _is_int(np_dtype):             # two roundings in the element type
            eps = float(ml_dtypes.finfo(np_dtype).eps)
            np.testing.assert_allclose(got, want, rtol=2 * eps, atol=2 * eps)
        else:
            np.testing.assert_array_equal(got, want)
        assert np.isnan(out[g, lens[g]:]).all() if out_dtype == np.float64 else \
            (out[g, lens[g]:] == np.iinfo(np.int64).max).all()


@mutile.jit
def tile_of_addresses(Table, Idx, Out, BLOCK: tl.constexpr):
    """Out[i] = member[Idx[i] % 3][i]: a tile of pointers, each made from a loaded int64."""
    i = tl.arange(0, BLOCK)
    which = tl.load(Idx + i)
    p = tl.load(Table + which).to(tl.pointer_type(tl.float32)) + i
    tl.store(Out + i, tl.load(p) - 0.5)


def test_tile_of_pointers_from_integers(rng, backend):
    xs = [rng.standard_normal(BLOCK).astype(np.float32) for _ in range(3)]
    idx = rng.integers(0, 3, BLOCK).astype(np.int32)
    out = poison(BLOCK, np.float32)
    tile_of_addresses[(1,)](mutile.AddressTable(xs), idx, out, BLOCK=BLOCK, backend=backend)
    want = np.array([xs[w][i] for i, w in enumerate(idx)], np.float64) - 0.5
    np.testing.assert_array_equal(out, want.astype(np.float32))


@mutile.jit
def scatter_groups(Table, X, n, BLOCK: tl.constexpr):
    """member_g[:n] = X[:n] * (g + 1): stores through pointers made from integers."""
    g = tl.program_id(0)
    out_ptr = tl.load(Table + g).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * (g + 1).to(tl.float32), mask=offs < n)


def test_store_through_pointers_from_integers(rng, backend):
    n = 25
    x = rng.standard_normal(n).astype(np.float32)
    outs = [poison(n, np.float32) for _ in range(4)]
    scatter_groups[(4,)](mutile.AddressTable(outs), x, n, BLOCK=BLOCK, backend=backend)
    for g, o in enumerate(outs):
        np.testing.assert_array_equal(o, (x.astype(np.float64) * (g + 1)).astype(np.float32))


@mutile.jit
def via_integers(X, Y, n, BLOCK: tl.constexpr):
    """A pointer to int64 and back: Y[i] = X[n - 1 - i] from computed byte addresses."""
    i = tl.arange(0, BLOCK)
    m = i < n
    addr = X.to(tl.int64) + (n - 1 - i).to(tl.int64) * 4
    p = addr.to(tl.pointer_type(tl.float32))
    tl.store(Y + i, tl.load(p, mask=m), mask=m)


def test_pointer_to_int64_and_back(rng, backend):
    n = 27
    x = rng.standard_normal(n).astype(np.float32)
    y = poison(n, np.float32)
    via_integers[(1,)](x, y, n, BLOCK=BLOCK, backend=backend)
    np.testing.assert_array_equal(y, x[::-1])


def test_address_table_object():
    xs = [np.arange(4, dtype=np.float32), np.zeros((2, 3), np.float16)]
    t = mutile.AddressTable(xs)
    assert t.addresses.dtype == np.int64 and not t.addresses.flags.writeable
    assert list(t.addresses) == [a.ctypes.data for a in xs]
    assert len(t) == 2 and t[1] is xs[1]
    assert np.asarray(t).dtype == np.int64          # numpy sees the addresses
    with pytest.raises(mutile.LaunchError, match="entry 1 is a str"):
        mutile.AddressTable([xs[0], "nope"])


def test_table_and_int64_array_share_a_build(rng, backend):
    """The compiled code does not depend on whether the int64 array is an AddressTable."""
    xs = [rng.standard_normal(4).astype(np.float32)]
    lens, out = np.array([4], np.int32), poison((1, BLOCK), np.float32)
    kw = dict(DTYPE=tl.float32, BLOCK=BLOCK, UNSIGNED=False, VIA_CAST=False, grid=(1,),
              backend=backend)
    a = scaled_groups.warmup(mutile.AddressTable(xs), lens, out, **kw)
    b = scaled_groups.warmup(np.zeros(1, np.int64), lens, out, **kw)
    assert a.metadata["cache_key"] == b.metadata["cache_key"]


# ---------------------------------------------------------------- faults
def test_past_a_members_end_faults(rng, backend):
    lens = np.array([BLOCK, 9], np.int32)          # member 1 holds only 8 elements
    xs = [rng.standard_normal(BLOCK).astype(np.float32),
          rng.standard_normal(8).astype(np.float32)]
    out = poison((2, BLOCK), np.float32)
    with pytest.raises(mutile.DeviceFault) as info:
        scaled_groups[(2,)](mutile.AddressTable(xs), lens, out, DTYPE=tl.float32, BLOCK=BLOCK,
                            UNSIGNED=False, VIA_CAST=False, backend=backend)
    msg = str(info.value)
    assert "array 1 of AddressTable 'Table'" in msg, msg
    assert "element 8" in msg, msg
    assert "x = tl.load(x_ptr + offs, mask=offs < n)" in msg, msg


def _raw_table(xs):
    return np.array([a.ctypes.data for a in xs], np.int64)


def test_raw_addresses_fault_on_pinghu():
    xs = [np.ones(BLOCK, np.float32)]
    lens, out = np.array([BLOCK], np.int32), poison((1, BLOCK), np.float32)
    with pytest.raises(mutile.DeviceFault) as info:
        scaled_groups[(1,)](_raw_table(xs), lens, out, DTYPE=tl.float32, BLOCK=BLOCK,
                            UNSIGNED=False, VIA_CAST=False, backend="pinghu")
    msg = str(info.value)
    assert "not in any array of the launch" in msg and "mutile.AddressTable" in msg, msg
    assert np.isnan(out).all()


def test_raw_addresses_on_llvm_need_the_checks_off(rng):
    xs = [rng.standard_normal(BLOCK).astype(np.float32) for _ in range(2)]
    lens, out = np.array([BLOCK, 5], np.int32), poison((2, BLOCK), np.float32)
    kw = dict(DTYPE=tl.float32, BLOCK=BLOCK, UNSIGNED=False, VIA_CAST=False, backend="llvm")
    with pytest.raises(mutile.DeviceFault) as info:
        scaled_groups[(2,)](_raw_table(xs), lens, out, **kw)
    msg = str(info.value)
    assert "not in any array of the launch" in msg and "mutile.AddressTable" in msg, msg
    scaled_groups[(2,)](_raw_table(xs), lens, out, check_bounds=False, **kw)
    for g, x in enumerate(xs):
        want = (x.astype(np.float64) * 3 + 1)[:lens[g]]
        np.testing.assert_allclose(out[g, :lens[g]], want, rtol=3e-7, atol=3e-7)
    assert np.isnan(out[1, 5:]).all()


@mutile.jit
def write_table(Table, v):
    tl.store(Table, v)


def test_the_table_is_read_only(backend):
    with pytest.raises(mutile.LaunchError, match="AddressTable, which is read-only"):
        write_table[(1,)](mutile.AddressTable([np.zeros(2, np.float32)]), 5, backend=backend)


def test_store_to_a_read_only_member_faults_on_pinghu(rng):
    x = rng.standard_normal(8).astype(np.float32)
    outs = [poison(8, np.float32), poison(8, np.float32)]
    outs[1].flags.writeable = False
    with pytest.raises(mutile.DeviceFault, match="read-only array 1 of AddressTable 'Table'"):
        scatter_groups[(2,)](mutile.AddressTable(outs), x, 8, BLOCK=BLOCK, backend="pinghu")
    assert np.isnan(outs[1]).all()


# ---------------------------------------------------------------- bad conversions
@mutile.jit
def from_i32(X, Y):
    p = tl.load(X).to(tl.pointer_type(tl.float32))  # LINE-MARK: tl.load
    tl.store(Y, tl.load(p))


@mutile.jit
def from_f64(X, Y):
    p = tl.cast(tl.load(X), tl.pointer_type(tl.float32))  # LINE-MARK: tl.cast
    tl.store(Y, tl.load(p))


@mutile.jit
def from_f64_bits(X, Y):
    p = tl.load(X).to(tl.pointer_type(tl.float32), bitcast=True)  # LINE-MARK: tl.load
    tl.store(Y, tl.load(p))


@mutile.jit
def to_i32(X, Y):
    tl.store(Y, X.to(tl.int32))  # LINE-MARK: X.to


@pytest.mark.parametrize("kernel,src,pattern", [
    (from_i32, T.i32, r"cannot convert ml.int32 to pointer_type\(ml.float32\): a pointer is "
                      r"made only from a 64-bit integer"),
    (from_f64, T.f64, r"cannot convert ml.float64 to pointer_type\(ml.float32\): a pointer"),
    (from_f64_bits, T.f64, r"cannot convert ml.float64 to pointer_type\(ml.float32\)"),
    (to_i32, T.f32, r"cannot convert pointer_type\(ml.float32\) to ml.int32"),
], ids=["i32", "f64", "f64-bitcast", "ptr-to-i32"])
def test_bad_conversions_point_at_the_line(kernel, src, pattern):
    spec = {"X": T.PointerType(src), "Y": T.PointerType(T.f32 if kernel is not to_i32
                                                          else T.i32)}
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, spec, {}, verify=True)
    e, m = info.value, marked(kernel)
    assert re.search(pattern, e.msg), e.msg
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert "semantic.py" not in str(e) and "standard.py" not in str(e)


def test_ir_verifier_rejects_other_pointer_bitcasts():
    """The IR's own rule, for IR not made by the frontend: f64 bits are no address."""
    from mutile import ir as mir
    from mutile.errors import VerifyError
    for src, dst in (("f64", "ptr<f32>"), ("ptr<f32>", "f64")):
        text = ('#0 = "v.py"\n'
                f'kernel @k(%x: {src}) -> () loc(#0:1:0) {{\n'
                f'  %0 = bitcast %x {{to = {dst}}} : {dst} loc(#0:2:0)\n'
                '  return loc(#0:3:0)\n}\n')
        with pytest.raises(VerifyError, match="a pointer converts only to or from a 64-bit "
                                              "integer") as info:
            mir.verify(mir.parse(text))
        assert info.value.loc.line == 2
