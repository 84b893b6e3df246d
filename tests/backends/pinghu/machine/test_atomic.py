"""ATOM rows on the interpreter: every op and type over address runs that collide (the
4 elements of each of 128 threads hit 8 addresses), against a serial numpy reference in
the order the row promises (thread index, then element); guarded elements; faults on
out-of-bounds and read-only memory."""
import ml_dtypes
import numpy as np
import pytest

from mutile.backends.pinghu.isa import INSTRS
from mutile.errors import DeviceFault

from ....conftest import random_data
from .interp_kit import NT, PROLOGUE, header, poisoned, run, to_image, transfer

K, NA = 4, 8
COVERS = {r.mnemonic for r in INSTRS if r.unit == "ATOM"}
DT = {"S32": np.int32, "U32": np.uint32, "B32": np.uint32, "F32": np.float32,
      "S64": np.int64, "U64": np.uint64, "B64": np.uint64, "F64": np.float64,
      "F16": np.float16, "BF16": ml_dtypes.bfloat16}


def _image(v, t):
    """Register image of values (K, NT) of type ``t``."""
    if t in ("F16", "BF16"):
        return v.view(np.uint16).astype(np.uint32)
    return to_image(v)


def _from_image(img, t):
    dt = np.dtype(DT[t])
    if dt.itemsize == 2:
        return img.astype(np.uint16).view(dt)
    if dt.itemsize == 4:
        return img.view(dt)
    return np.ascontiguousarray(img.reshape(K, 2, NT).transpose(0, 2, 1)).view(dt).reshape(K, NT)


def _serial(op, t, mem, s, c, guard):
    """(olds (K, NT), final memory): elements applied in thread order, then element order."""
    mem = mem.copy()
    old = np.zeros((K, NT), mem.dtype)
    with np.errstate(all="ignore"):
        for g in range(NT):
            for e in range(K):
                if not guard[e, g]:
                    continue
                a = (e * NT + g) % NA
                o, v = mem[a], s[e, g]
                old[e, g] = o
                if op == "ADD":
                    n = (np.float32(o) + np.float32(v)).astype(mem.dtype) \
                        if mem.dtype.itemsize == 2 else o + v
                elif op in ("MAX", "MIN"):
                    f = {"MAX": np.fmax, "MIN": np.fmin} if t[0] == "F" else \
                        {"MAX": np.maximum, "MIN": np.minimum}
                    n = f[op](o, v)
                elif op in ("AND", "OR", "XOR"):
                    n = {"AND": np.bitwise_and, "OR": np.bitwise_or,
                         "XOR": np.bitwise_xor}[op](o, v)
                elif op == "EXCH":
                    n = v
                else:
                    n = v if o == c[e, g] else o
                mem[a] = n
    return old, mem


@pytest.mark.parametrize("guarded", [False, True], ids=["all", "guarded"])
@pytest.mark.parametrize("row", sorted(COVERS))
def test_atom(row, guarded, rng):
    _, op, t, _ = row.split(".")
    dt = np.dtype(DT[t])
    regs = K * (2 if dt.itemsize == 8 else 1)
    specials = t[0] != "F"
    if op == "CAS":
        pool = random_data(dt, (3,), rng, specials=False)
        mem0, s, c = (pool[rng.integers(0, 3, n)] for n in (NA, (K, NT), (K, NT)))
    else:
        mem0 = random_data(dt, (NA,), rng, specials=specials)
        s = random_data(dt, (K, NT), rng, specials=specials)
        c = s
    guard = rng.random((K, NT)) < 0.6 if guarded else np.ones((K, NT), bool)
    mem = mem0.copy()
    d = poisoned(regs)
    if guarded:
        d[:] = 0           # guarded-off elements keep their registers: start them at 0
    text = header([("Y", "ptr"), ("S", "ptr"), ("C", "ptr"), ("D", "ptr"), ("G", "ptr")]) \
        + PROLOGUE + "\n" + transfer("LD", 1, 8, regs) + "\n" + transfer("LD", 2, 40, regs) \
        + "\n" + transfer("LD", 3, 72, regs) + "\n" + transfer("LD", 4, 104, K) + "\n" \
        + f"        ALU.ISETP.NE.U32 P[0:{K}], R[104:{104 + K}], 0\n" \
        + f"        ALU.IOTA.S32 R[200:204], R250, {NT}\n" \
        + f"        ALU.LOP.AND.B32 R[200:204], R[200:204], {NA - 1}\n" \
        + f"        ALU.IMAD.WIDE.S32 R[216:224], R[200:204], {dt.itemsize}, c[0x0]\n" \
        + ("        @P[0:4] " if guarded else "        ") \
        + f"{row} R[72:{72 + regs}], [R[216:224]], " \
        + (f"R[40:{40 + regs}], " if op == "CAS" else "") + f"R[8:{8 + regs}]\n" \
        + transfer("ST", 3, 72, regs) + "\n"
    run(text, [mem, _image(s, t), _image(c, t), d, guard.astype(np.uint32)], (2, 1, 1))
    want_old, want_mem = _serial(op, t, mem0, s, c, guard)
    got_old = _from_image(d, t)
    bits = f"u{dt.itemsize}"
    assert (got_old.view(bits) == want_old.view(bits)).all(), "old values"
    assert (mem.view(bits) == want_mem.view(bits)).all(), "memory"


def _one_add(index: int):
    return header([("Y", "ptr")]) + PROLOGUE + "\n" \
        + f"        ALU.IADD.S32 R200, R250, {index}\n" \
        + "        ALU.IMAD.WIDE.S32 R216, R200, 4, c[0x0]\n" \
        + "        ALU.MOV.IMM R8, 1\n" \
        + "        ATOM.ADD.S32.GLOBAL R9, [R216], R8\n"


def test_atom_out_of_bounds_faults():
    y = np.zeros(NT - 1, np.int32)
    with pytest.raises(DeviceFault, match="out-of-bounds global atomic of 4 bytes") as info:
        run(_one_add(0), [y], (2, 1, 1))
    assert "block (1, 0, 0), warp 1, lane 31" in str(info.value)
    assert (y == 0).all(), "a faulting atomic changes nothing"


def test_atom_read_only_faults():
    y = np.zeros(NT, np.int32)
    y.flags.writeable = False
    with pytest.raises(DeviceFault, match="global atomic to read-only parameter 'Y'"):
        run(_one_add(0), [y], (2, 1, 1))
    assert (y == 0).all()
