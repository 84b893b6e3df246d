"""LSU rows on the interpreter: loads and stores of every width in global, shared and
local memory with address runs, offsets and guards; arguments that are non-contiguous
views (stores land in the user's array); scalar parameters of every type."""
import ml_dtypes
import numpy as np
import pytest

from mutile.backends.pinghu.isa import INSTRS

from ....conftest import assert_bits_equal, random_data
from .interp_kit import BLOCK, NT, PROLOGUE, from_image, header, poisoned, run, transfer

K = 4
LOADS = {"U8": (1, np.uint8), "S8": (1, np.int8), "U16": (2, np.uint16), "S16": (2, np.int16),
         "B32": (4, np.uint32), "B64": (8, np.uint64), "B128": (16, np.uint32)}
STORES = {"B8": 1, "B16": 2, "B32": 4, "B64": 8, "B128": 16}
COVERS = {r.mnemonic for r in INSTRS if r.unit == "LSU"}


def _expected_load(mem: np.ndarray, t: str, index: np.ndarray) -> np.ndarray:
    """Register image (K * regs, NT) a load of type ``t`` at element ``index`` gives."""
    nbytes, dt = LOADS[t]
    if nbytes == 16:
        q = mem.view(np.uint32).reshape(-1, 4)[index]               # (K, NT, 4)
        return q.transpose(0, 2, 1).reshape(4 * K, NT)
    v = mem.view(dt)[index]
    if nbytes == 8:
        return v.view(np.uint32).reshape(K, NT, 2).transpose(0, 2, 1).reshape(2 * K, NT)
    return v.astype(np.int64).astype(np.int32).view(np.uint32) if np.dtype(dt).kind == "i" \
        else v.astype(np.uint32)


def _addresses(space: str, nbytes: int, param: int = 1, offset: int = 0) -> str:
    """Addresses of element e of thread g: global, slot e * NT + g of ``nbytes`` (pairs in
    R[216:224]); shared, slot e * BLOCK + R253; local, slot e (in R[160:164])."""
    if space == "GLOBAL":
        return (f"        ALU.IOTA.S32 R[200:204], R250, {NT}\n"
                f"        ALU.IMAD.WIDE.S32 R[216:224], R[200:204], {nbytes}, "
                f"c[0x{8 * param:x}]\n")
    base, stride = ("0", 1) if space == "LOCAL" else ("R253", BLOCK)
    return (f"        ALU.IOTA.S32 R[160:164], {base}, {stride}\n"
            f"        ALU.IMUL.S32 R[160:164], R[160:164], {nbytes}\n")


def _mem_operand(space: str, offset: int = 0) -> str:
    off = f"+0x{offset:x}" if offset > 0 else f"-0x{-offset:x}" if offset < 0 else ""
    return f"[R[216:224]{off}]" if space == "GLOBAL" else f"[R[160:164]{off}]"


@pytest.mark.parametrize("t", list(LOADS))
def test_global_load(t, rng):
    nbytes, _ = LOADS[t]
    mem = random_data(np.uint8, (K * NT * nbytes,), rng)
    regs = K * max(1, nbytes // 4)
    y = poisoned(regs)
    text = header([("Y", "ptr"), ("M", "ptr")]) + PROLOGUE + "\n" + _addresses("GLOBAL", nbytes) \
        + f"        LSU.LD.GLOBAL.{t} R[8:{8 + regs}], {_mem_operand('GLOBAL')}\n" \
        + transfer("ST", 0, 8, regs) + "\n"
    run(text, [y, mem], (2, 1, 1))
    index = np.arange(K)[:, None] * NT + np.arange(NT)
    assert_bits_equal(y, _expected_load(mem, t, index), f"LD.GLOBAL.{t}")


@pytest.mark.parametrize("t", list(STORES))
def test_global_store(t, rng):
    nbytes = STORES[t]
    regs = K * max(1, nbytes // 4)
    img = random_data(np.uint32, (regs, NT), rng)
    out = np.full(K * NT * nbytes, 0xA5, np.uint8)
    text = header([("M", "ptr"), ("A", "ptr")]) + PROLOGUE + "\n" + transfer("LD", 1, 40, regs) \
        + "\n" + _addresses("GLOBAL", nbytes, 0) \
        + f"        LSU.ST.GLOBAL.{t} {_mem_operand('GLOBAL')}, R[40:{40 + regs}]\n"
    run(text, [out, img], (2, 1, 1))
    want = np.zeros_like(out)
    if nbytes >= 4:
        per = nbytes // 4
        words = img.reshape(K, per, NT).transpose(0, 2, 1)            # (K, NT, per)
        want.view(np.uint32)[:] = words.reshape(-1)
    else:
        want.view(np.uint8 if nbytes == 1 else np.uint16)[:] = \
            img.astype(np.uint8 if nbytes == 1 else np.uint16).reshape(-1)
    assert_bits_equal(out, want, f"ST.GLOBAL.{t}")


@pytest.mark.parametrize("space", ["SHARED", "LOCAL"])
@pytest.mark.parametrize("t", list(STORES))
def test_onchip_round_trip(space, t, rng):
    """Store K values per thread, then load them back with every load of that width, at a
    nonzero offset; in shared memory each thread reads the slots its neighbour (tid ^ 1)
    wrote, after a barrier (with the sanitizer on)."""
    nbytes = STORES[t]
    per = max(1, nbytes // 4)
    regs = K * per
    img = random_data(np.uint32, (regs, NT), rng)
    loads = [lt for lt, (nb, _) in LOADS.items() if nb == nbytes]
    body = [transfer("LD", 0, 40, regs), "        S2R R253, SR_TID.X",
            "        ALU.LOP.XOR.B32 R254, R253, 1", _addresses(space, nbytes),
            f"        LSU.ST.{space}.{t} {_mem_operand(space, 16)}, R[40:{40 + regs}]"]
    if space == "SHARED":
        body += ["        BAR.SYNC 0", "        ALU.MOV.B32 R253, R254",
                 _addresses(space, nbytes)]
    outs = []
    for i, lt in enumerate(loads):
        body += [f"        LSU.LD.{space}.{lt} R[8:{8 + regs}], {_mem_operand(space, 16)}",
                 transfer("ST", 1 + i, 8, regs)]
        outs.append(poisoned(regs))
    params = [("A", "ptr")] + [(f"Y{i}", "ptr") for i in range(len(loads))]
    text = header(params, shared=K * BLOCK * nbytes + 16 if space == "SHARED" else 0,
                  local=K * nbytes + 16 if space == "LOCAL" else 0) + PROLOGUE + "\n" \
        + "\n".join(body) + "\n"
    run(text, [img] + outs, (2, 1, 1), sanitize=True)
    src = np.arange(NT) ^ (1 if space == "SHARED" else 0)
    mem = np.zeros((NT, K, nbytes), np.uint8)            # the slots each thread wrote
    if nbytes >= 4:
        mem.view(np.uint32)[:] = img.reshape(K, per, NT).transpose(2, 0, 1)
    else:
        mem[:] = img.T.copy().view(np.uint8).reshape(NT, K, 4)[:, :, :nbytes]
    read = mem[src].transpose(1, 0, 2).reshape(-1)      # slot e of the source thread
    index = np.arange(K)[:, None] * NT + np.arange(NT)
    for lt, y in zip(loads, outs):
        assert_bits_equal(y, _expected_load(read, lt, index), f"{space} {lt}")


def test_guarded_memory_ops_touch_only_enabled_elements(rng):
    """A predicate-run guard on a store and a plain guard on a load: disabled elements
    neither write memory nor registers (and their addresses, out of bounds, do not
    fault)."""
    x = random_data(np.float32, (K, NT), rng)
    out = np.full((K, NT), -7.0, np.float32)
    y = poisoned(K)
    text = header([("Y", "ptr"), ("X", "ptr"), ("O", "ptr")]) + PROLOGUE + f"""
        ALU.IOTA.S32 R[200:204], R250, {NT}
        ALU.IMAD.WIDE.S32 R[216:224], R[200:204], 4, c[0x8]
        ALU.IOTA.S32 R[204:208], 0, 1
        ALU.LOP.AND.B32 R[208:212], R250, 3
        ALU.ISETP.LE.S32 P[0:4], R[204:208], R[208:212]
        ALU.ISETP.EQ.S32 P9, R208, 1
        ALU.MOV.IMM R[8:12], 0x7fc00001
        LSU.LD.GLOBAL.B32 R[8:12], [R[216:224]]
        @P9 LSU.LD.GLOBAL.B32 R[8:12], [R[216:224]+0x40000]
        ALU.IMAD.WIDE.S32 R[216:224], R[200:204], 4, c[0x10]
        ALU.IMAD.WIDE.S32 R[224:232], R[200:204], 4, RZ
        @P[0:4] LSU.ST.GLOBAL.B32 [R[216:224]], R[8:12]
        @!P[0:4] LSU.ST.GLOBAL.B32 [R[224:232]+0x10], R[8:12]
""" + transfer("ST", 0, 8, K) + "\n"
    with pytest.raises(Exception, match="out-of-bounds global load"):
        run(text, [y, x, out], (2, 1, 1))
    text = text.replace("@P9 LSU", "@!PT LSU").replace("@!P[0:4] LSU", "@!PT LSU")
    y = poisoned(K)
    run(text, [y, x, out], (2, 1, 1))
    assert_bits_equal(from_image(y, np.float32), x, "loaded")
    enabled = np.arange(K)[:, None] <= (np.arange(NT) & 3)
    assert_bits_equal(out, np.where(enabled, x, np.float32(-7.0)), "guarded store")


def test_non_contiguous_views_are_read_and_written_in_place(rng):
    """Strided, transposed and reversed views: global memory is exactly the bytes their
    elements span, element 0 is at the pointer, stores land in the user's array."""
    base = random_data(np.float32, (2 * NT,), rng, specials=False)
    big = np.full((NT, 4), np.nan, np.float32)
    text = header([("X", "ptr"), ("Y", "ptr")]) + PROLOGUE + """
        ALU.IMAD.WIDE.S32 R2, R250, XSTRIDE, c[0x0]
        LSU.LD.GLOBAL.B32 R4, [R2]
        ALU.FMUL.F32 R4, R4, 3.0
        ALU.IMAD.WIDE.S32 R2, R250, YSTRIDE, c[0x8]
        LSU.ST.GLOBAL.B32 [R2], R4
"""
    run(text.replace("XSTRIDE", "8").replace("YSTRIDE", "16"), [base[::2], big.T[1]], (2, 1, 1))
    assert_bits_equal(big[:, 1], base[::2] * np.float32(3.0), "strided store")
    assert np.isnan(big[:, [0, 2, 3]]).all()
    out = np.full(2 * NT, np.nan, np.float32)
    run(text.replace("XSTRIDE", "-4").replace("YSTRIDE", "4"), [base[::-1], out], (2, 1, 1))
    assert_bits_equal(out[:NT], base[::-1][:NT] * np.float32(3.0), "reversed view")
    assert np.isnan(out[NT:]).all()


@pytest.mark.parametrize("ptype,value,dt", [
    ("s8", -5, np.int8), ("u8", 250, np.uint8), ("s16", -300, np.int16), ("u16", 65000, np.uint16),
    ("s32", -123456, np.int32), ("u32", 4000000000, np.uint32), ("s64", -2**40, np.int64),
    ("u64", 2**63 + 5, np.uint64), ("f16", 1.5, np.float16), ("bf16", -2.5, ml_dtypes.bfloat16),
    ("f32", 0.1, np.float32), ("f64", 0.1, np.float64)])
def test_scalar_parameters(ptype, value, dt):
    """Scalars are written into constant bank 0 with their type; c[...] reads the word."""
    wide = np.dtype(dt).itemsize == 8
    y = np.zeros(2 if wide else 1, np.uint32)
    b = "B64" if wide else "B32"
    text = header([("Y", "ptr"), ("V", ptype), ("pad", "u32")], threads=32) + f"""
        ALU.MOV.B64 R2, c[0x0]
        ALU.MOV.{b} R4, c[0x8]
        LSU.ST.GLOBAL.{b} [R2], R4
"""
    run(text, [y, value, 0], (1, 1, 1))
    raw = np.array(value).astype(dt)
    want = np.zeros(8, np.uint8)
    want[:raw.itemsize] = np.frombuffer(raw.tobytes(), np.uint8)
    assert y.view(np.uint8).tolist() == want[:y.nbytes].tolist()


# ---------------------------------------------------------------- fast plans vs checked paths
_SIZE = {"SHARED": 4096, "LOCAL": 256}


def _onchip_addresses(pattern: str, nbytes: int, size: int, off: str = "!P[0:4]") -> str:
    """Addresses R[160:164] of K elements: ``uniform`` (from the thread index, the same in
    every block), ``block`` (also from the block index), ``same`` (one per thread, every
    element), ``spill`` (one for all threads: an immediate address), ``row`` (one for all
    threads, from a register), ``wild`` (out of bounds where ``off``);
    wrapped into the first half of ``size`` bytes."""
    step = nbytes if pattern != "same" else 0
    start = {"uniform": f"R253, {K * nbytes}", "block": f"R250, {K * nbytes}",
             "same": f"R253, {nbytes}", "spill": f"RZ, {nbytes}", "row": f"R255, {nbytes}",
             "wild": f"R253, {K * nbytes}"}[pattern]
    base, scale = start.split(", ")
    out = [f"ALU.IMUL.S32 R164, {base}, {scale}" if base not in ("RZ", "R255") else
           f"ALU.MOV.IMM R164, {0 if base == 'RZ' else 0x40}",
           f"ALU.IOTA.S32 R[160:164], R164, {step}"]
    out.append(f"ALU.LOP.AND.B32 R[160:164], R[160:164], {(size // 2 - 1) & ~15}")
    if pattern == "wild":
        out.append(f"@{off} ALU.IADD.S32 R[160:164], R[160:164], 0x100000")
    return "\n".join("        " + x for x in out)


def _global_addresses(pattern: str, nbytes: int, off: str = "!P[0:4]") -> str:
    """Address pairs R[100:108]: slot e * NT + g of array X (c[0x8]); ``split``: odd
    threads in array Z (c[0x10]); ``wild``: out of bounds where ``off``."""
    out = [f"ALU.IOTA.S32 R[200:204], R250, {NT}",
           f"ALU.IMAD.WIDE.S32 R[100:108], R[200:204], {nbytes}, c[0x8]"]
    if pattern == "split":
        out.append(f"@P5 ALU.IMAD.WIDE.S32 R[100:108], R[200:204], {nbytes}, c[0x10]")
    if pattern == "wild":
        out.append(f"@{off} ALU.IMAD.WIDE.S32 R[100:108], R[200:204], {nbytes}, RZ")
    return "\n".join("        " + x for x in out)


def _cases():
    for space in ("GLOBAL", "SHARED", "LOCAL"):
        pats = ["plain", "split", "wild"] if space == "GLOBAL" else \
            ["uniform", "block", "same", "wild"] + (["spill", "row"] if space == "LOCAL" else [])
        for p in pats:
            for t in STORES:
                yield space, p, t


@pytest.mark.parametrize("space,pattern,t", list(_cases()))
def test_plans_match_the_checked_paths(space, pattern, t, rng, monkeypatch):
    """Every store width then every load of that width, unguarded and under a per-element
    guard, through the fast plans and through the checked paths alone: the same
    registers and the same memory."""
    from mutile.backends.pinghu.machine.units import lsu
    nbytes = STORES[t]
    regs = K * max(1, nbytes // 4)
    guard = "@P[0:4] " if regs == K else "@P4 "
    off = "!" + guard.strip()[1:]
    addr = (lambda: _global_addresses(pattern, nbytes, off)) if space == "GLOBAL" else \
        (lambda: _onchip_addresses(pattern, nbytes, _SIZE[space], off))
    mem = "[R[100:108]]" if space == "GLOBAL" else "[R[160:164]+0x10]" \
        if pattern != "spill" else "[0x10]"
    loads = [lt for lt, (nb, _) in LOADS.items() if nb == nbytes]
    body = [transfer("LD", 0, 40, regs), "        S2R R253, SR_TID.X",
            "        ALU.IOTA.S32 R[204:208], 0, 1", "        ALU.LOP.AND.B32 R208, R250, 3",
            "        ALU.ISETP.LE.S32 P[0:4], R[204:208], R208",
            "        ALU.ISETP.NE.S32 P4, R208, 2", "        ALU.LOP.AND.B32 R209, R250, 1",
            "        ALU.ISETP.EQ.S32 P5, R209, 1", addr(),
            f"        {guard if pattern == 'wild' else ''}LSU.ST.{space}.{t} {mem}, "
            f"R[40:{40 + regs}]",
            f"        {guard}LSU.ST.{space}.{t} {mem}, R[{40 + regs}:{40 + 2 * regs}]"]
    if space == "SHARED":
        body.append("        BAR.SYNC 0")
    for i, lt in enumerate(loads):
        for g in ("", guard):
            body += [f"        ALU.MOV.IMM R[8:{8 + regs}], 0x5a5a5a5a",
                     f"        {g or (guard if pattern == 'wild' else '')}LSU.LD.{space}.{lt} "
                     f"R[8:{8 + regs}], {mem}",
                     transfer("ST", 3 + len(body), 8, regs)]
    outs = [i for i, line in enumerate(body) if line.startswith("        ALU.MOV.IMM R[8:")]
    params = [("A", "ptr"), ("X", "ptr"), ("Z", "ptr")] + [(f"Y{i}", "ptr") for i in outs]
    text = header(params, shared=_SIZE["SHARED"], local=_SIZE["LOCAL"]) + PROLOGUE + "\n"
    for n, i in enumerate(outs):                 # number the output parameters
        body[i + 2] = body[i + 2].replace(f"c[0x{8 * (3 + i):x}]", f"c[0x{8 * (3 + n):x}]")
    text += "\n".join(body) + "\n"
    img = random_data(np.uint32, (2 * regs, NT), rng)
    results = []
    for checked in (False, True):
        monkeypatch.setattr(lsu, "CHECKED_ONLY", checked)
        x, z = np.zeros(K * NT * nbytes, np.uint8), np.zeros(K * NT * nbytes, np.uint8)
        ys = [poisoned(regs) for _ in outs]
        run(text, [img, x, z] + ys, (2, 1, 1))
        results.append([x, z] + ys)
    for a, b in zip(*results):
        assert_bits_equal(a, b, f"{space} {pattern} {t}")


@pytest.mark.parametrize("t", ["B32", "B64", "B128"])
def test_spill_slots_match_the_checked_paths(t, rng, monkeypatch):
    """Single-register stores and loads at immediate local addresses (spill slots), guarded
    and not: the same as the checked paths."""
    from mutile.backends.pinghu.machine.units import lsu
    nbytes = STORES[t]
    regs = max(1, nbytes // 4)
    body = [transfer("LD", 0, 40, 2 * regs), "        ALU.LOP.AND.B32 R208, R250, 3",
            "        ALU.ISETP.NE.S32 P4, R208, 2",
            f"        LSU.ST.LOCAL.{t} [0x20], R40", f"        @P4 LSU.ST.LOCAL.{t} [0x20], "
            f"R{40 + regs}", f"        LSU.ST.LOCAL.{t} [0x40], R{40 + regs}",
            f"        ALU.MOV.IMM R[8:{8 + 2 * regs}], 0x5a5a5a5a",
            f"        LSU.LD.LOCAL.{t} R8, [0x20]", f"        @!P4 LSU.LD.LOCAL.{t} R{8 + regs}, "
            f"[0x40]", transfer("ST", 1, 8, 2 * regs)]
    text = header([("A", "ptr"), ("Y", "ptr")], local=128) + PROLOGUE + "\n" + \
        "\n".join(body) + "\n"
    img = random_data(np.uint32, (2 * regs, NT), rng)
    results = []
    for checked in (False, True):
        monkeypatch.setattr(lsu, "CHECKED_ONLY", checked)
        y = poisoned(2 * regs)
        run(text, [img, y], (2, 1, 1))
        results.append(y)
    assert_bits_equal(results[0], results[1], f"spill {t}")


def test_spill_stores_of_warps_far_apart_land():
    """Warps selected as an index array (2 warps of 10 one-warp blocks at one pc) store
    to a spill slot in place: a loop counter kept in local memory counts to its limit
    (a store into a copy of the local table made this loop run forever)."""
    body = ["        S2R R250, SR_TID.X", "        S2R R251, SR_CTAID.X",
            "        ALU.IMAD.S32 R250, R251, 32, R250", "        ALU.IREM.S32 R252, R251, 9",
            "        ALU.ISETP.EQ.S32 P0, R252, 0", "        @!P0 BRA L_out",
            "        ALU.MOV.IMM R10, 0", "        LSU.ST.LOCAL.B32 [0x10], R10", "L_loop:",
            "        LSU.LD.LOCAL.B32 R11, [0x10]", "        ALU.IADD.S32 R11, R11, 1",
            "        LSU.ST.LOCAL.B32 [0x10], R11", "        ALU.ISETP.LT.S32 P1, R11, 5",
            "        @P1 BRA L_loop", "L_out:", "        LSU.LD.LOCAL.B32 R12, [0x10]",
            "        ALU.IMAD.WIDE.S32 R[216:218], R250, 4, c[0x0]",
            "        LSU.ST.GLOBAL.B32 [R[216:218]], R12", "        EXIT"]
    text = header([("Y", "ptr")], threads=32, local=32) + "\n".join(body) + "\n"
    y = np.full(10 * 32, 0xDEAD, np.uint32)
    run(text, [y], (10, 1, 1))
    want = np.zeros((10, 32), np.uint32)
    want[[0, 9]] = 5
    assert_bits_equal(y, want.ravel(), "spill counter")


def test_shared_address_facts_follow_register_writes(rng, monkeypatch):
    """Loads that share base registers reuse what was found about them (every block has
    the same addresses) only while the registers are unchanged: a write to them in one
    block, or a full rewrite, is seen by the next load."""
    from mutile.backends.pinghu.machine.units import lsu
    img = random_data(np.uint32, (K, NT), rng)
    body = [transfer("LD", 0, 40, K), "        S2R R253, SR_TID.X",
            "        ALU.IMUL.S32 R164, R253, 16", "        ALU.IOTA.S32 R[160:164], R164, 4",
            "        LSU.ST.SHARED.B32 [R[160:164]], R[40:44]", "        BAR.SYNC 0",
            "        ALU.ISETP.EQ.S32 P0, R251, 1", "        ALU.IOTA.S32 R[160:164], R164, 4"]
    outs = []
    for change in ("", "@P0 ALU.IADD.S32 R[160:164], R[160:164], 4",
                   "ALU.LOP.XOR.B32 R[160:164], R[160:164], 16", "ALU.IADD.S32 R161, R161, 8"):
        body += [f"        {change}", "        LSU.LD.SHARED.B32 R[8:12], [R[160:164]]",
                 "        LSU.LD.SHARED.B32 R[12:16], [R[160:164]+0x4]",
                 transfer("ST", 1 + len(outs), 8, 8)]
        outs.append(None)
    params = [("A", "ptr")] + [(f"Y{i}", "ptr") for i in range(len(outs))]
    text = header(params, shared=BLOCK * 16 + 64) + PROLOGUE + "\n" + "\n".join(body) + "\n"
    results = []
    for checked in (False, True):
        monkeypatch.setattr(lsu, "CHECKED_ONLY", checked)
        ys = [poisoned(8) for _ in outs]
        run(text, [img] + ys, (2, 1, 1))
        results.append(ys)
    for i, (a, b) in enumerate(zip(*results)):
        assert_bits_equal(a, b, f"load after change {i}")


def _placed(n: int, at: int, dtype=np.float32) -> np.ndarray:
    """A fresh ``n``-element array whose memory starts ``at`` bytes into a host buffer (so
    its real address has the alignment ``at`` gives it), owning no numpy base."""
    size = n * np.dtype(dtype).itemsize
    raw = np.zeros(size + 256, np.uint8)
    lo = (-raw.ctypes.data) % 128 + at
    return np.frombuffer(memoryview(raw)[lo:lo + size], dtype)


def test_virtual_addresses_do_not_depend_on_the_host_allocator():
    from mutile.backends.pinghu.machine.memory import REGION_SHIFT, Region
    starts = {Region(0, "x", _placed(64, at)).start for at in (0, 16, 32, 48, 64, 96)}
    assert starts == {1 << REGION_SHIFT}          # 16-aligned allocations: offset 0
    a = np.zeros(1000, np.float32)
    for off in (0, 1, 8, 100):                    # a view keeps its offset in its allocation
        r = Region(1, "v", a[off:])
        assert r.start == (2 << REGION_SHIFT) + 4 * off
        assert r.start % 16 == a[off:].ctypes.data % 16
    odd = _placed(64, 4)                          # not 16-aligned: its real low bits
    assert Region(0, "o", odd).start % 4096 == odd.ctypes.data % 4096
