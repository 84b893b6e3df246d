"""The instruction rows, generated from small family tables (imported by :mod:`.instr`).

Order is the opcode order: append new families at the end of their unit's section; a
binary records :func:`~.instr.table_hash` so a reordered table never misreads old bytes.
Type suffixes: ``F`` float, ``S``/``U`` signed/unsigned integer, ``B`` raw bits. A 64-bit
operand is an aligned register pair (low word in the even register), 128-bit a quad.
"""
from __future__ import annotations

from mutile.ir.ops_pinghu import SQMMA_K_BYTES, SQMMA_MN, SQMMA_TF32_KMAJOR_MN, SQUAD_THREADS

from .instr import define
from .operands import dst, group, imm, label, mem, pdst, pred, reg, sreg
from .tensor_memory import MAX_RANK, desc_words
from .wmma import TF32_SHAPES, WMMA_SHAPES, layout, registers, shape_name

WIDTH = {"F64": 2, "S64": 2, "U64": 2, "B64": 2}          # registers per value (default 1)
IMM = {"F32": "f32", "S32": "s32", "U32": "u32", "S64": "s32", "U64": "u32", "B32": "b32"}
CMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def w(t: str) -> int:
    """Registers one value of type ``t`` occupies."""
    return WIDTH.get(t, 1)


def lat(t: str) -> str:
    """The latency class of a simple ALU op on type ``t``."""
    return "fp64" if t == "F64" else "alu64" if w(t) == 2 else "alu"


def src(name: str, t: str, immediate: bool = True, c: bool = True):
    """A source slot of type ``t``: register or run, plus its immediate kind and c[...]."""
    return reg(name, w(t), IMM.get(t, "") if immediate else "", c)


def binary(name: str, t: str, doc: str, latency: str = "", **attrs):
    """``d, a, b`` with b taking an immediate or a parameter."""
    define(f"ALU.{name}.{t}", "ALU", latency or lat(t), [dst("d", w(t)), src("a", t, False, False),
           src("b", t)], doc, family=f"ALU.{name}", type=t, **attrs)


# ---------------------------------------------------------------- ALU: floats
for _n, _d in [("FADD", "d = a + b"), ("FSUB", "d = a - b"), ("FMUL", "d = a * b"),
               ("FDIV", "d = a / b, correctly rounded (virtual: hardware expands it)"),
               ("FREM", "d = fmod(a, b), exact, sign of a (virtual: hardware expands it)"),
               ("FMNMX.MIN", "d = min(a, b); a NaN loses to a number; -0 < +0"),
               ("FMNMX.MAX", "d = max(a, b); a NaN loses to a number; -0 < +0")]:
    for _t in ("F32", "F64"):
        binary(_n, _t, _d, "div" if _n in ("FDIV", "FREM") else "")
for _t in ("F32", "F64"):
    define(f"ALU.FFMA.{_t}", "ALU", lat(_t), [dst("d", w(_t)), src("a", _t, False, False),
           src("b", _t), src("c", _t, False)], "d = a * b + c, rounded once",
           family="ALU.FFMA", type=_t)
for _m, _d in [("RN", "to nearest even"), ("RM", "toward -inf (floor)"),
               ("RP", "toward +inf (ceil)"), ("RZ", "toward zero (trunc)")]:
    for _t in ("F32", "F64"):
        define(f"ALU.FRND.{_m}.{_t}", "ALU", lat(_t), [dst("d", w(_t)), src("a", _t, False)],
               f"d = a rounded to an integral value {_d}", family="ALU.FRND", mode=_m, type=_t)
for _c, _op in CMP.items():
    for _t in ("F32", "F64"):
        _d = "unordered: true if a or b is NaN" if _c == "NE" else "ordered: false on NaN"
        define(f"ALU.FSETP.{_c}.{_t}", "ALU", lat(_t), [pdst("p"), src("a", _t, False, False),
               src("b", _t)], f"p = a {_op} b ({_d})", family="ALU.FSETP", cmp=_c, type=_t)

# ---------------------------------------------------------------- ALU: integers
for _t in ("S32", "S64"):
    binary("IADD", _t, "d = a + b (wraps)")
    binary("ISUB", _t, "d = a - b (wraps)")
    binary("IMUL", _t, "d = the low bits of a * b", "imul")
for _t in ("S32", "U32"):
    binary("IMUL.HI", _t, "d = the high 32 bits of the 64-bit product a * b", "imul")
define("ALU.IMAD.S32", "ALU", "imul", [dst("d"), src("a", "S32", False, False), src("b", "S32"),
       src("c", "S32", False)], "d = a * b + c (low 32 bits)", family="ALU.IMAD", type="S32")
for _t in ("S32", "U32"):
    define(f"ALU.IMAD.WIDE.{_t}", "ALU", "imul", [dst("d", 2), src("a", _t, False, False),
           src("b", _t), reg("c", 2, c=True)],
           f"d (64-bit) = {'sign' if _t == 'S32' else 'zero'}-extended a * b + c (64-bit)",
           family="ALU.IMAD.WIDE", type=_t)
for _t in ("S32", "U32", "S64", "U64"):
    binary("IDIV", _t, "d = a / b truncated toward zero; a / 0 = all ones", "div")
    binary("IREM", _t, "d = a % b with the sign of a; a % 0 = a", "div")
    binary("IMNMX.MIN", _t, "d = min(a, b)")
    binary("IMNMX.MAX", _t, "d = max(a, b)")
for _t in ("S32", "S64"):
    define(f"ALU.IABS.{_t}", "ALU", lat(_t), [dst("d", w(_t)), src("a", _t, False)],
           "d = |a| (the minimum value stays itself)", family="ALU.IABS", type=_t)
for _c, _op in CMP.items():
    for _t in ("S32", "U32", "S64", "U64"):
        define(f"ALU.ISETP.{_c}.{_t}", "ALU", lat(_t), [pdst("p"), src("a", _t, False, False),
               src("b", _t)], f"p = a {_op} b ({'signed' if _t[0] == 'S' else 'unsigned'})",
               family="ALU.ISETP", cmp=_c, type=_t)
for _n, _op in [("AND", "&"), ("OR", "|"), ("XOR", "^")]:
    for _t in ("B32", "B64"):
        binary(f"LOP.{_n}", _t, f"d = a {_op} b", op=_n)
for _t in ("B32", "B64"):
    define(f"ALU.SHL.{_t}", "ALU", lat(_t), [dst("d", w(_t)), src("a", _t, False, False),
           src("b", "U32")], "d = a << b; b >= the width gives 0", family="ALU.SHL", type=_t)
for _t in ("S32", "U32", "S64", "U64"):
    _d = "arithmetic; b >= the width gives the sign fill" if _t[0] == "S" else \
        "logical; b >= the width gives 0"
    define(f"ALU.SHR.{_t}", "ALU", lat(_t), [dst("d", w(_t)), src("a", _t, False, False),
           src("b", "U32")], f"d = a >> b, {_d}", family="ALU.SHR", type=_t)
for _t in ("B32", "B64"):
    define(f"ALU.SEL.{_t}", "ALU", lat(_t), [dst("d", w(_t)), src("a", _t, False, False),
           src("b", _t), pred("p")], "d = p ? a : b", family="ALU.SEL", type=_t)
    define(f"ALU.MOV.{_t}", "ALU", lat(_t), [dst("d", w(_t)), src("a", _t, False)], "d = a",
           family="ALU.MOV", type=_t)
define("ALU.MOV.IMM", "ALU", "alu", [dst("d"), imm("v", "b32|f32")],
       "d = v (32 bits: an integer, or an f32 value)", family="ALU.MOV.IMM")
define("ALU.IOTA.S32", "ALU", "alu", [dst("d"), src("a", "S32"), imm("s", "s32")],
       "element i of d = a + i * s (a run of d gets consecutive values)", family="ALU.IOTA")
define("ALU.PACK.B16", "ALU", "alu", [dst("d"), src("a", "B32", False, False),
       src("b", "B32", False, False)], "d = (a & 0xffff) | (b << 16)", family="ALU.PACK")
define("ALU.P2R.B32", "ALU", "alu", [dst("d"), pred("p")], "d = p ? 1 : 0", family="ALU.P2R")
for _n, _op in [("AND", "&"), ("OR", "|"), ("XOR", "^")]:
    define(f"ALU.PLOP.{_n}", "ALU", "alu", [pdst("p"), pred("a"), pred("b")],
           f"p = a {_op} b on predicates (!P negates a source)", family="ALU.PLOP", op=_n)

# ---------------------------------------------------------------- SFU
# The virtual SFU returns the function's exact value rounded once to the result type (the
# interpreter computes f32 functions in f64); hardware would run an approximation plus a
# refinement sequence. Codegen maps each tile-IR math op to one row.
SFU_FUNCS = [("EX2", "2 ** a"), ("LG2", "log2(a)"), ("EXP", "e ** a"), ("LOG", "ln(a)"),
             ("RSQ", "1 / sqrt(a)"), ("RCP", "1 / a"), ("SQRT", "sqrt(a)"), ("SIN", "sin(a)"),
             ("COS", "cos(a)"), ("TANH", "tanh(a)"), ("ERF", "erf(a)")]
for _t in ("F32", "F64"):
    for _n, _d in SFU_FUNCS:
        define(f"SFU.{_n}.{_t}", "SFU", "sfu", [dst("d", w(_t)), src("a", _t, False, False)],
               f"d = {_d}, rounded once", family=f"SFU.{_n}", type=_t)
    define(f"SFU.POW.{_t}", "SFU", "sfu", [dst("d", w(_t)), src("a", _t, False, False),
           src("b", _t, False)], "d = a ** b (C pow), rounded once", family="SFU.POW", type=_t)

# ---------------------------------------------------------------- CVT
FLOATS = ("F64", "F32", "F16", "BF16", "F8E4M3", "F8E5M2", "F8E4B8", "F8E5B16")
INTS = ("S64", "U64", "S32", "U32", "S16", "U16", "S8", "U8")
_RULE = {
    (True, True): "a rounded once to nearest even from its exact value (widening is exact)",
    (False, True): "a rounded to nearest even",
    (True, False): "a truncated toward zero; NaN gives 0, out of range saturates",
    (False, False): "a modulo 2**bits of the result type (sign-/zero-extended to the register)",
}
for _d in FLOATS + INTS:
    for _s in FLOATS + INTS:
        if _d != _s:
            define(f"CVT.{_d}.{_s}", "CVT", "cvt", [dst("d", w(_d)), src("a", _s, False, False)],
                   f"d = {_RULE[(_s in FLOATS, _d in FLOATS)]}", family="CVT", dst=_d, src=_s)
define("CVT.TF32.F32", "CVT", "cvt", [dst("d"), src("a", "F32", False, False)],
       "d = a rounded to nearest even to 10 mantissa bits (tf32, kept as f32)",
       family="CVT", dst="TF32", src="F32")

# ---------------------------------------------------------------- LSU
SPACES = {"GLOBAL": 2, "SHARED": 1, "LOCAL": 1}      # space -> address registers
LOADS = {"U8": (1, "the zero-extended byte"), "S8": (1, "the sign-extended byte"),
         "U16": (1, "the zero-extended 16 bits"), "S16": (1, "the sign-extended 16 bits"),
         "B32": (1, "the 32 bits"), "B64": (2, "the 64 bits"), "B128": (4, "the 128 bits")}
STORES = {"B8": (1, "the low byte of s"), "B16": (1, "the low 16 bits of s"),
          "B32": (1, "s (32 bits)"), "B64": (2, "s (64 bits)"), "B128": (4, "s (128 bits)")}
for _sp, _aw in SPACES.items():
    for _t, (_w, _d) in LOADS.items():
        define(f"LSU.LD.{_sp}.{_t}", "LSU", f"ld_{_sp.lower()}", [dst("d", _w), mem("m", _aw)],
               f"d = {_d} at address m", family="LSU.LD", space=_sp, type=_t)
    for _t, (_w, _d) in STORES.items():
        define(f"LSU.ST.{_sp}.{_t}", "LSU", f"st_{_sp.lower()}", [mem("m", _aw),
               reg("s", _w)], f"memory at address m = {_d}", family="LSU.ST", space=_sp,
               type=_t)

# ---------------------------------------------------------------- ATOM
# Elements of one instruction that hit one address apply one after another in thread
# order (then element order within a thread's run), each returning the value before
# its own update; floats add rounding once per update, max/min let a NaN lose.
ATOM_OPS = {"ADD": ("S32", "S64", "F16", "BF16", "F32", "F64"),
            "MAX": ("S32", "U32", "S64", "U64", "F32", "F64"),
            "MIN": ("S32", "U32", "S64", "U64", "F32", "F64"),
            "AND": ("B32", "B64"), "OR": ("B32", "B64"), "XOR": ("B32", "B64"),
            "EXCH": ("B32", "B64")}
_ATOM_DOC = {"ADD": "m + s (integers wrap)", "MAX": "max(m, s)", "MIN": "min(m, s)",
             "AND": "m & s", "OR": "m | s", "XOR": "m ^ s", "EXCH": "s"}
for _op, _ts in ATOM_OPS.items():
    for _t in _ts:
        define(f"ATOM.{_op}.{_t}.GLOBAL", "ATOM", "atom_global",
               [dst("d", w(_t)), mem("m", 2), reg("s", w(_t))],
               f"atomically d = memory at m, then memory at m = {_ATOM_DOC[_op]}"
               + (" (16 bits; d zero-extended)" if _t in ("F16", "BF16") else ""),
               family="ATOM", op=_op, type=_t)
for _t in ("B32", "B64"):
    define(f"ATOM.CAS.{_t}.GLOBAL", "ATOM", "atom_global",
           [dst("d", w(_t)), mem("m", 2), reg("c", w(_t)), reg("s", w(_t))],
           "atomically d = memory at m, then memory at m = s if d == c (bitwise)",
           family="ATOM", op="CAS", type=_t)

# ---------------------------------------------------------------- SHFL, BAR
for _m, _d in [("IDX", "lane b & 31"),
               ("UP", "lane laneid - b, or the lane's own a below lane 0"),
               ("DOWN", "lane laneid + b, or the lane's own a above lane 31"),
               ("BFLY", "lane laneid ^ (b & 31)")]:
    define(f"SHFL.{_m}.B32", "SHFL", "shfl", [dst("d"), src("a", "B32", False, False),
           reg("b", 1, "lane")], f"d = a of {_d}", family="SHFL", mode=_m)
define("BAR.SYNC", "BAR", "bar", [imm("b", "bar")],
       "wait until every thread of the block has reached BAR.SYNC b", runs=False)
define("BAR.SYNC.CNT", "BAR", "bar", [imm("b", "bar"), imm("n", "u32")],
       "wait until n warps of the block wait at BAR.SYNC.CNT b, then release those n warps",
       runs=False)

# ---------------------------------------------------------------- WMMA
# One row per shape of the machine file (wmma.WMMA_SHAPES) for f16 and bf16, and tf32's
# m16n8k8; operand widths are the fragments' registers (wmma.FRAGMENTS).
for _m, _n, _k in WMMA_SHAPES:
    for _ab in ("F16", "BF16") + (("TF32",) if (_m, _n, _k) in TF32_SHAPES else ()):
        _shape = shape_name(_m, _n, _k)
        _lay = layout(_shape, _ab)
        define(f"WMMA.{_shape}.F32.{_ab}.{_ab}", "WMMA", "wmma",
               [dst("d", registers(_lay, "C")), reg("a", registers(_lay, "A")),
                reg("b", registers(_lay, "B")), reg("c", registers(_lay, "C"))],
               f"d = a @ b + c with A {_m}x{_k} {_ab.lower()}, B {_k}x{_n} {_ab.lower()}, C and "
               f"D {_m}x{_n} f32, spread over the warp's lanes (see WMMA fragments, {_lay})",
               family="WMMA", shape=_shape, layout=_lay, m=_m, n=_n, k=_k, acc="F32", ab=_ab)

# ---------------------------------------------------------------- S2R, control
define("S2R", "S2R", "s2r", [dst("d"), sreg("s")], "d = special register s", runs=False)
define("BRA", "BRA", "control", [label("t")],
       "jump to t; lanes whose guard is false fall through (divergence: see Reconvergence)",
       runs=False)
define("SSY", "BRA", "control", [label("t")],
       "push reconvergence point t with the warp's active lanes", runs=False, guardable=False)
define("SYNC", "BRA", "control", [],
       "the executing lanes wait at the innermost SSY point (see Reconvergence)", runs=False)
define("EXIT", "BRA", "control", [], "the executing lanes finish", runs=False)
define("NOP", "BRA", "control", [], "nothing", runs=False)

# ---------------------------------------------------------------- DBG
# Like a GPU's printf FIFO: the device records values, the host formats them after the
# launch with the kernel's print table (format id -> prefix, tile shape, hex).
for _t in ("S32", "U32", "S64", "U64", "F32", "F64", "B32", "B64"):
    define(f"DBG.PRINT.{_t}", "DBG", "debug", [imm("f", "u32"), src("a", _t, False, False),
           src("i", "S32", False, False)],
           "record (format f, block, element index i, value a) for the host to print"
           + (" in hex" if _t[0] == "B" else ""), family="DBG.PRINT", type=_t)
define("DBG.ASSERT", "DBG", "debug", [imm("f", "u32"), pred("p")],
       "fault with the kernel's assertion message f where p is false", family="DBG.ASSERT")

# ---------------------------------------------------------------- TME
# Asynchronous tile copies (docs/pinghu.md, "Asynchronous engines"): the descriptor is a
# group of desc_words(rank) registers, the coordinates a group of rank s32 registers
# (outermost first), box and swizzle one packed u32 immediate (tensor_memory.pack_box).
for _r in range(1, MAX_RANK + 1):
    define(f"TME.LD.TILE.{_r}D", "TME", "tme", [reg("s"), group("d", desc_words(_r)),
           group("c", _r), reg("b"), imm("box", "b32")],
           "each executing thread copies the box at coordinates c of tensor d to shared s "
           "(swizzled; out-of-bounds elements filled); it lands later and counts its bytes "
           "on AsyncBarrier b", family="TME.LD", rank=_r, runs=False)
for _r in range(1, MAX_RANK + 1):
    define(f"TME.ST.TILE.{_r}D", "TME", "tme", [group("d", desc_words(_r)), group("c", _r),
           reg("s"), imm("box", "b32")],
           "each executing thread stores the box at shared s (swizzled) to coordinates c of "
           "tensor d; out-of-bounds elements are dropped; done by TME.ST.WAIT",
           family="TME.ST", rank=_r, runs=False)
define("TME.ST.COMMIT", "TME", "tme", [],
       "close the executing threads' group of TME stores", runs=False)
define("TME.ST.WAIT", "TME", "tme", [],
       "the executing warps' committed TME stores complete (they read shared memory now)",
       runs=False)

# ---------------------------------------------------------------- AsyncBarriers
define("ASYNC.BAR.INIT", "ASYNC", "async_bar", [reg("b", 1, "abar"), imm("n", "u32")],
       "each executing thread (re)initializes AsyncBarrier b: n warp arrivals per phase, "
       "no transaction bytes, phase 0", runs=False)
define("ASYNC.BAR.ARRIVE", "ASYNC", "async_bar", [dst("d"), reg("b", 1, "abar")],
       "each executing warp arrives once on AsyncBarrier b; d = the phase parity before "
       "its arrival", runs=False)
define("ASYNC.BAR.ADD_TRANS", "ASYNC", "async_bar", [reg("b", 1, "abar"), reg("n", 1, "u32")],
       "each executing thread adds n expected transaction bytes to AsyncBarrier b's phase",
       runs=False)
define("ASYNC.BAR.WAIT", "ASYNC", "async_bar", [reg("b", 1, "abar"), reg("p", 1, "u1")],
       "the executing warps wait until the phase of AsyncBarrier b with parity p (bit 0) "
       "has completed (the current parity differs from p)", runs=False)

# ---------------------------------------------------------------- SQMMA
# (A type, B type, accumulator, K choices): K spans SQMMA_K_BYTES (32, 64, 128 bytes); the
# (M, N) of a row are SQMMA_MN's; TF32 has SQMMA_TF32_KMAJOR_MN with K-major A and B only
# (its trans operand is then the "kmajor" kind: 2). ScaleIn negates A and/or B (neg),
# ScaleOut keeps or zeroes D (scale).
SQMMA_TYPES = [(_a, _b, _acc, tuple(_kb // _size for _kb in SQMMA_K_BYTES))
               for _a, _b, _acc, _size in
               [("BF16", "BF16", "F32", 2), ("F16", "F16", "F32", 2), ("TF32", "TF32", "F32", 4)]
               + [(_a, _b, "F32", 1) for _a in ("E4M3", "E5M2") for _b in ("E4M3", "E5M2")]
               + [("S8", "S8", "S32", 1), ("U8", "U8", "U32", 1)]]
for _m, _n in SQMMA_MN:
    for _a, _b, _acc, _ks in SQMMA_TYPES:
        _kmajor = _a == "TF32" and (_m, _n) in SQMMA_TF32_KMAJOR_MN
        for _k in _ks:
            define(f"SQMMA.M{_m}N{_n}K{_k}.{_acc}.{_a}.{_b}", "SQMMA", "sqmma",
                   [group("d", _m * _n // SQUAD_THREADS, is_dst=True), reg("a"), reg("b"),
                    imm("scale", "u1"), imm("trans", "kmajor" if _kmajor else "u2"),
                    imm("neg", "u2")],
                   f"the WarpSquad's D ({_m}x{_n} {_acc.lower()}) = (-)A @ (-)B (+ D if scale) "
                   f"with A {_m}x{_k}, B {_k}x{_n} in shared memory (descriptors a, b; "
                   f"trans bit 0: A MN-major, bit 1: B K-major"
                   + ("; K-major A and B only: trans = 2" if _kmajor else "")
                   + "; neg bit 0: -A, bit 1: -B); done by SQMMA.WAIT",
                   family="SQMMA", m=_m, n=_n, k=_k, acc=_acc, a=_a, b=_b, runs=False,
                   guardable=False)
define("SQMMA.WAIT", "SQMMA", "sqmma", [],
       "the executing warps' SQMMA operations complete: they read shared memory and write D",
       runs=False, guardable=False)

# ---------------------------------------------------------------- FENCE
define("FENCE.ASYNC.SHARED", "FENCE", "fence", [],
       "order the executing threads' earlier shared-memory writes before later asynchronous "
       "reads (TME store sources, SQMMA operands)", runs=False)
