"""Binary form of a :class:`Program`: fixed 128-bit instruction words in a small container.

Word layout (bit 0 = least significant bit of the little-endian 16-byte word) is
:data:`WORD_FIELDS`; operands follow from bit 32 in row order, each a 4-bit tag (the
value class, :data:`OPERAND_TAGS`) and the payload that tag fixes. The container
(:data:`HEADER`) holds the kernel header, the code, and a metadata section with the name,
parameters, labels and comments, so ``decode(encode(p)) == p``.
"""
from __future__ import annotations

import struct

from .errors import DecodeError
from .instr import INSTRS, table_hash
from .operands import (SPECIAL_REG_IDS, SPECIAL_REG_NAMES, CBank, Comment, FloatImm, IntImm,
    Label, Mem, Pred, PredRun, Reg, Run, SReg, Target)
from .program import Instruction, Param, Program, attach_locations

WORD_BYTES = 16
VERSION = 1
# (name, first bit, bits, meaning)
WORD_FIELDS = [
    ("opcode", 0, 12, "index of the instruction's row in the table"),
    ("guarded", 12, 1, "1 if the instruction has a guard"),
    ("guard_neg", 13, 1, "1 for @!P"),
    ("guard_run", 14, 1, "1 if the guard is a predicate run P[s:e]"),
    ("guard_pred", 15, 8, "guard predicate (run: first predicate)"),
    ("count", 23, 8, "elements of the instruction's runs (0: no run)"),
    ("reserved", 31, 1, "0"),
    ("operands", 32, 96, "operand slots in row order: 4-bit tag, then its payload"),
]
_F = {name: (lo, bits) for name, lo, bits, _ in WORD_FIELDS}
OPERAND_BITS = _F["operands"][1]


def _s32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


# (tag, value class, run base?, payload fields [(name, bits)], meaning)
OPERAND_TAGS = [
    (1, Reg, False, [("n", 8)], "register (255 = RZ)"),
    (2, Run, False, [("start", 8)], "register run; end = start + count * width"),
    (3, Pred, False, [("n", 8), ("neg", 1)], "predicate (255 = PT); neg: 1 for !P"),
    (4, PredRun, False, [("start", 8), ("neg", 1)],
     "predicate run; end = start + count; neg: 1 for !P"),
    (5, SReg, False, [("id", 8)], "special register (index in the table)"),
    (6, IntImm, False, [("bits", 32)], "integer immediate (two's complement)"),
    (7, FloatImm, False, [("bits", 32)], "f32 immediate (IEEE bits)"),
    (8, CBank, False, [("offset", 16)], "constant-bank byte offset"),
    (9, Mem, False, [("base", 8), ("offset", 32)], "address register + signed offset"),
    (10, Mem, True, [("start", 8), ("offset", 32)], "address run + signed offset"),
    (11, Target, False, [("pc", 24)], "branch target: instruction index"),
    (12, IntImm, False, [("bits", 8)], "integer immediate of a short kind (u1, u2)"),
]
_TAG_BITS = 4

# value class -> value -> payload field values
_PACK = {
    Reg: lambda v: [v.n], Run: lambda v: [v.start], Pred: lambda v: [v.n, int(v.neg)],
    PredRun: lambda v: [v.start, int(v.neg)], SReg: lambda v: [SPECIAL_REG_IDS[v.name]],
    IntImm: lambda v: [v.value & 0xFFFFFFFF], FloatImm: lambda v: [v.bits],
    CBank: lambda v: [v.offset], Target: lambda v: [v.pc],
    Mem: lambda v: [v.base.n if isinstance(v.base, Reg) else v.base.start,
                    v.offset & 0xFFFFFFFF],
}
# tag -> (payload field values, slot spec, run count) -> value
_UNPACK = {
    1: lambda f, s, n: Reg(f[0]),
    2: lambda f, s, n: Run(f[0], f[0] + (s.group or n * s.width)),
    3: lambda f, s, n: Pred(f[0], bool(f[1])),
    4: lambda f, s, n: PredRun(f[0], f[0] + n, bool(f[1])),
    5: lambda f, s, n: SReg(SPECIAL_REG_NAMES[f[0]]),
    6: lambda f, s, n: IntImm(s.int_kind.from_bits(f[0])),
    7: lambda f, s, n: FloatImm(f[0]),
    8: lambda f, s, n: CBank(f[0]),
    9: lambda f, s, n: Mem(Reg(f[0]), _s32(f[1])),
    10: lambda f, s, n: Mem(Run(f[0], f[0] + n * s.base_width), _s32(f[1])),
    11: lambda f, s, n: Target(f[0]),
    12: lambda f, s, n: IntImm(f[0]),
}
_BY_TAG = {t[0]: t for t in OPERAND_TAGS}


def _short(spec) -> bool:
    """Whether the integer immediates of slot ``spec`` take the short tag."""
    return spec.int_kind is not None and spec.int_kind.short


def _tag_of(v, spec) -> tuple:
    if isinstance(v, Mem):
        return _BY_TAG[10 if isinstance(v.base, Run) else 9]
    if isinstance(v, IntImm):
        return _BY_TAG[12 if _short(spec) else 6]
    return next(t for t in OPERAND_TAGS if t[1] is type(v))


def _slot_tags(spec) -> list:
    """The tags slot ``spec`` may hold."""
    return [t for t in OPERAND_TAGS if t[1] in spec.accepts
            and (t[1] is not IntImm or (t[0] == 12) == _short(spec))]


def _operand_bits(tag_row) -> int:
    return _TAG_BITS + sum(b for _, b in tag_row[3])


def _worst_bits(row) -> int:
    return sum(max(_operand_bits(t) for t in _slot_tags(s)) for s in row.operands)


for _row in INSTRS:   # every row's widest operand combination fits its word
    assert _worst_bits(_row) <= OPERAND_BITS, f"{_row.mnemonic} does not fit 96 operand bits"
assert len(INSTRS) <= 1 << _F["opcode"][1]


def encode_instruction(ins: Instruction) -> int:
    """The 128-bit word of one (valid) instruction, as an int."""
    count = ins.count
    word = ins.op.opcode
    g = ins.guard
    if g is not None:
        word |= 1 << _F["guarded"][0] | int(g.neg) << _F["guard_neg"][0]
        word |= int(isinstance(g, PredRun)) << _F["guard_run"][0]
        word |= (g.n if isinstance(g, Pred) else g.start) << _F["guard_pred"][0]
    word |= count << _F["count"][0]
    pos = _F["operands"][0]
    for v, spec in zip(ins.operands, ins.op.operands):
        tag = _tag_of(v, spec)
        fields = _PACK[type(v)](v)
        word |= tag[0] << pos
        pos += _TAG_BITS
        for (_, bits), x in zip(tag[3], fields):
            word |= x << pos
            pos += bits
    return word


def _field(word: int, name: str) -> int:
    lo, bits = _F[name]
    return word >> lo & ((1 << bits) - 1)


def decode_instruction(word: int, pc: int = 0) -> Instruction:
    """The instruction a 128-bit word holds (no prelude or comment)."""
    op_i = _field(word, "opcode")
    if op_i >= len(INSTRS):
        raise DecodeError(f"pc {pc}: opcode {op_i} is not in the table ({len(INSTRS)} rows)")
    row = INSTRS[op_i]
    count = _field(word, "count")
    guard = None
    if _field(word, "guarded"):
        p, neg = _field(word, "guard_pred"), bool(_field(word, "guard_neg"))
        guard = PredRun(p, p + count, neg) if _field(word, "guard_run") else Pred(p, neg)
    if _field(word, "reserved"):
        raise DecodeError(f"pc {pc}: reserved bit set")
    pos, ops = _F["operands"][0], []
    for spec in row.operands:
        t = word >> pos & 0xF
        pos += _TAG_BITS
        tag = _BY_TAG.get(t)
        if tag is None or tag not in _slot_tags(spec):
            raise DecodeError(f"pc {pc}: bad operand tag {t} for {spec.name} of {row.mnemonic}")
        fields = []
        for _, bits in tag[3]:
            fields.append(word >> pos & ((1 << bits) - 1))
            pos += bits
        try:
            ops.append(_UNPACK[t](fields, spec, count))
        except IndexError:
            raise DecodeError(f"pc {pc}: no special register #{fields[0]}") from None
    if word >> pos:
        raise DecodeError(f"pc {pc}: stray bits after the operands of {row.mnemonic}")
    return Instruction(row, tuple(ops), guard)


# ---------------------------------------------------------------- container
# (struct format, meaning) of each header field, in order; zero padding fills 64 bytes
HEADER_FIELDS = [("4s", "magic `MUSA`"), ("H", "format version"),
                 ("H", "bits per instruction word (128)"),
                 ("I", "table hash (CRC-32 of the rows)"), ("I", "instruction count"),
                 ("I", ".threads"), ("I", ".regs"), ("I", ".shared"), ("I", ".local"),
                 ("I", "metadata offset (64 + 16 * count)"), ("I", "metadata size")]
HEADER = struct.Struct("<" + "".join(f for f, _ in HEADER_FIELDS) + "24x")
MAGIC = b"MUSA"
_PRELUDE_KIND = {Label: 0, Comment: 1}
_TRAILING = 2


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def encode(program: Program) -> bytes:
    """The binary of ``program`` (verified first): header, 16-byte words, metadata."""
    program.verify()
    code = b"".join(encode_instruction(i).to_bytes(WORD_BYTES, "little")
                    for i in program.instructions)
    meta = [_str(program.name), struct.pack("<I", len(program.params))]
    meta += [_str(p.name) + _str(p.type) + struct.pack("<I", p.offset) for p in program.params]
    meta.append(struct.pack("<I", len(program.header_comments)))
    meta += [_str(c) for c in program.header_comments]
    records = []
    for pc, ins in enumerate(program.instructions):
        records += [(pc, _PRELUDE_KIND[type(x)], x.name if isinstance(x, Label) else x.text)
                    for x in ins.prelude]
        if ins.comment is not None:
            records.append((pc, _TRAILING, ins.comment))
    n = len(program.instructions)
    records += [(n, _PRELUDE_KIND[type(x)], x.name if isinstance(x, Label) else x.text)
                for x in program.epilogue]
    meta.append(struct.pack("<I", len(records)))
    meta += [struct.pack("<IB", pc, k) + _str(t) for pc, k, t in records]
    meta_b = b"".join(meta)
    head = HEADER.pack(MAGIC, VERSION, 8 * WORD_BYTES, table_hash(), n, program.threads,
                       program.regs, program.shared, program.local, HEADER.size + len(code),
                       len(meta_b))
    return head + code + meta_b


class _Reader:
    def __init__(self, data: bytes, pos: int, end: int):
        self.data, self.pos, self.end = data, pos, end

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > self.end:
            raise DecodeError("truncated metadata")
        out = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return out

    def str(self) -> str:
        (n,) = self.take("<I")
        if self.pos + n > self.end:
            raise DecodeError("truncated metadata")
        self.pos += n
        return self.data[self.pos - n:self.pos].decode()


def decode(data: bytes) -> Program:
    """The :class:`Program` that ``encode`` made ``data`` from."""
    if len(data) < HEADER.size:
        raise DecodeError("not a MUSA binary: shorter than its header")
    (magic, version, wbits, thash, n, threads, regs, shared, local, moff,
     msize) = HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION or wbits != 8 * WORD_BYTES:
        raise DecodeError(f"not a MUSA binary of format {VERSION} (magic {magic!r}, "
                          f"version {version})")
    if thash != table_hash():
        raise DecodeError(f"made from another instruction table (hash 0x{thash:08x}, this "
                          f"table 0x{table_hash():08x})")
    if moff != HEADER.size + n * WORD_BYTES or moff + msize > len(data):
        raise DecodeError("truncated binary")
    insts = [decode_instruction(int.from_bytes(data[HEADER.size + WORD_BYTES * pc:
                                                    HEADER.size + WORD_BYTES * (pc + 1)],
                                               "little"), pc) for pc in range(n)]
    r = _Reader(data, moff, moff + msize)
    name = r.str()
    params = tuple(Param(r.str(), r.str(), r.take("<I")[0]) for _ in range(r.take("<I")[0]))
    header_comments = tuple(r.str() for _ in range(r.take("<I")[0]))
    preludes: list[list] = [[] for _ in range(n + 1)]
    for _ in range(r.take("<I")[0]):
        pc, kind = r.take("<IB")
        text = r.str()
        if pc > n or kind > _TRAILING or (kind == _TRAILING and pc == n):
            raise DecodeError(f"bad metadata record (pc {pc}, kind {kind})")
        if kind == _TRAILING:
            insts[pc].comment = text
        else:
            preludes[pc].append(Label(text) if kind == 0 else Comment(text))
    for ins, pre in zip(insts, preludes):
        ins.prelude = tuple(pre)
    prog = Program(name, params, threads, regs, shared, local, insts, header_comments,
                   tuple(preludes[n]))
    try:
        prog.verify()
    except ValueError as e:
        raise DecodeError(f"decoded program is invalid: {e}") from None
    attach_locations(prog)
    return prog
