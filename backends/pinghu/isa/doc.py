"""Generate ``docs/isa.md`` from the instruction table
(``python -m mutile.backends.pinghu.isa.doc > docs/isa.md``); a test fails when it is stale."""
from __future__ import annotations

import struct
import sys

from mutile.ir.ops_pinghu import BARRIER_IDS, USABLE_BARRIERS

from . import encoding as E
from . import tensor_memory as TM
from .instr import INSTRS, LATENCY_CLASSES, UNITS
from .operands import IMM_KINDS, MAX_PRED, MAX_REG, SPECIAL_REGS
from .program import MAX_SHARED, MAX_THREADS, PARAM_TYPES
from .wmma import FRAGMENTS

INTRO = f"""\
# The virtual MUSA ISA (Pinghu)

Generated from `backends/pinghu/isa/table.py` and its neighbours by
`python -m mutile.backends.pinghu.isa.doc > docs/isa.md`; a test fails when this file is stale.

A SIMT, thread-level instruction set in the style of Moore Threads' Pinghu GPU (MUSA
compute capability 3.1). Each thread has 32-bit registers `R0`..`R{MAX_REG}` (`RZ` reads 0,
writes to it are dropped) and predicates `P0`..`P{MAX_PRED}` (`PT` reads true, writes are
dropped); 32 threads form a warp, 4 warps a WarpSquad. Every instruction is one row of the
table below; the assembler, disassembler, encoder, interpreter and this page all read it.

## Listing syntax

One statement per line: a header directive, a label `NAME:`, an instruction, or nothing;
each may end in a `// comment`, which is kept (in the binary too). A comment of the form
`// file.py:LINE  source` sets the Python location of the instructions after it.

```
// scale a row: Y = alpha * X
.kernel scale_rows
.param X ptr c[0x0]
.param alpha f32 c[0x8]
.threads 128
.regs 8
.shared 0
.local 0

        // kernel.py:4  x = ml.load(X + offs)
        S2R R0, SR_TID.X
        ALU.IMAD.WIDE.S32 R2, R0, 4, RZ
        ALU.IADD.S64 R2, R2, c[0x0]
        LSU.LD.GLOBAL.B32 R4, [R2]
        ALU.FMUL.F32 R4, R4, c[0x8]
L_done:
        EXIT
```

"""

DIRECTIVES = [
    ("`.kernel NAME`", "first directive, required: the kernel's name"),
    ("`.param NAME TYPE c[OFF]`", "a parameter at byte `OFF` of constant bank 0, naturally "
     "aligned; TYPE is one of " + ", ".join(f"`{t}`" for t in PARAM_TYPES)
     + " (`ptr`: a 64-bit global address)"),
    ("`.threads N`", f"threads per block, a multiple of 32 up to {MAX_THREADS} (default 128)"),
    ("`.regs N`", "registers per thread; operands must stay below `RN` (default: highest "
     "used + 1)"),
    ("`.shared N`", f"bytes of shared memory per block, at most {MAX_SHARED} (default 0)"),
    ("`.local N`", "bytes of local (spill) memory per thread (default 0)"),
]

AFTER_DIRECTIVES = """
Directives come before the first label or instruction. The canonical text (what the
disassembler prints) lists them in this order, then a blank line, labels at column 0,
comments and instructions indented by 8 spaces, a trailing comment two spaces after its
instruction. Mnemonics are upper case; operands are separated by commas.

## Operands
"""

OPERAND_SYNTAX = [
    ("`R6`, `RZ`", "a register. In a 64-bit slot (`R2` in the table) `R6` names the pair "
     "R6 (low word), R7; in a 128-bit slot (`R4`) the quad R4..R7. Pairs start at an even "
     "register, quads at a multiple of 4"),
    ("`R[8:40]`", "a register run, end exclusive: the instruction applies to each element "
     "(see Runs)"),
    ("`P3`, `!P3`, `PT`", "a predicate; `!` negates a source predicate"),
    ("`P[0:32]`, `!P[0:32]`", "a predicate run"),
    ("`SR_TID.X`", "a special register (read by `S2R` only)"),
    ("`42`, `-1`, `0xff`", "an integer immediate (kinds below)"),
    ("`1.5`, `-0.0`, `1e-3`, `inf`, `nan`, `0f7FC00001`", "an f32 immediate; `0f` + 8 hex "
     "digits gives the exact bits (NaN payloads)"),
    ("`c[0x10]`", "the parameter word(s) at byte 0x10 of constant bank 0"),
    ("`[R4+0x10]`, `[R4-8]`, `[R[8:40]+4]`, `[0x100]`", "a memory address: base register(s) "
     "plus a signed 32-bit byte offset; global addresses are 64-bit pairs, shared and local "
     "addresses 32-bit; `[0x100]` is absolute (base `RZ`)"),
    ("`L_loop`", "a label (a branch target)"),
    ("`R[8:15]` (group)", "in a slot written `R[7]`: exactly that many consecutive registers, "
     "any start, naming one operand (a TME descriptor or coordinates, an SQMMA accumulator); "
     "not an element run. A group of one may be written `R8`"),
]

AFTER_OPERANDS = """
In the table an operand slot is written `name:kinds`: `R`, `R2`, `R4` a register or run of
1/2/4-register elements, `R[n]` a group of n registers, `P`/`!P` a destination/source predicate or predicate run, `SR` a
special register, `c` a parameter, `[R2+off]`/`[R+off]` a memory address, `label`, or an
immediate kind:
"""

SEMANTICS = """
## Guards

`@P0 INSTR` executes INSTR only in lanes where P0 is true, `@!P0` where it is false. A
guard may be a predicate run (`@P[0:32] LSU.ST.GLOBAL.B32 [R[40:104]], R[8:40]`): element
`i` of the instruction is guarded by predicate `i` of the run. `SSY` cannot be guarded.

## Runs

A row marked *runs* may name register runs: `ALU.FADD.F32 R[8:40], R[40:72], 1.0` adds 1.0
to each of 32 elements, so an elementwise tile op is one instruction. Rules:

- An element is as many registers as its slot's width: `R[8:40]` is 32 f32 elements, or 16
  f64 elements in a 64-bit slot; a run starts and ends at multiples of the width.
- Every run of an instruction (operands, memory-address runs, a guard run) has the same
  number of *elements*; `CVT.F64.F32 R[8:40], R[40:56]` converts 16 elements.
- A plain register, immediate or `c[...]` in a source slot is broadcast to every element;
  when an instruction has runs, its destinations must be runs.
- All elements are read before any is written (one vector operation).
- In a memory operand the run is of addresses (`[R[40:104]]`: 32 global addresses), one
  per data element; WMMA runs are runs of fragments (A, B may be single fragments broadcast
  across a run of C/D fragments).

## Register conventions

A value narrower than 32 bits sits in the low bits of one register: integers sign- or
zero-extended to 32 bits (`S8`, `S16` sign, `U8`, `U16` zero), floats (`F16`, `BF16`,
`F8E4M3`, `F8E5M2`, `F8E4B8`, `F8E5B16`) with the upper bits zero; WMMA A and B fragments
of 16-bit types pack two elements per register (`ALU.PACK.B16`). A 64-bit value is a pair,
low word in the even register. An `i1` is a predicate, or `0`/`1` in a register
(`ALU.P2R.B32`). A `ptr` is a 64-bit global address.

## Reconvergence

Each warp has an active mask and a reconvergence stack; control flow is structured by the
code generator as follows:

```
        SSY L_join            // push (L_join, active lanes)
        @!P0 BRA L_else       // divergent: push (L_else, taken lanes), run the others
        ...then...
        SYNC                  // these lanes wait; none left -> pop: run the else lanes
L_else:
        ...else...
        SYNC                  // none left -> pop the SSY entry: all lanes at L_join
L_join:
```

- `SSY t` pushes a reconvergence entry `(t, active mask)`.
- `@P BRA t`: lanes whose guard holds jump, the others fall through. If both sets are
  non-empty, the warp pushes a divergence entry `(t, taken lanes)` and continues with the
  fall-through lanes (the not-taken path runs first). An unguarded `BRA` (or one whose
  lanes all agree) simply jumps.
- `SYNC` (possibly guarded): the executing lanes leave the active mask and wait at the
  innermost reconvergence point. While lanes remain active they continue at the next
  instruction; when none remain, the warp pops the top entry: a divergence entry resumes
  its lanes at its pc, a reconvergence entry resumes its lanes (minus lanes that exited)
  at its label and is removed. A `SYNC` that lanes execute while their warp's stack is
  empty has no point to wait at: the interpreter reports it as a device fault.
- A loop whose lanes leave at different iterations: `SSY L_exit` before the loop,
  `@P_done SYNC` at the exit test, `BRA L_head` at the bottom, `L_exit:` after it.
- `EXIT` finishes the executing lanes: they leave the active mask and every stack entry;
  if no lane is left active the warp pops the stack as `SYNC` does, and it is done when
  the stack is empty too. Running past the last instruction is `EXIT`.
- `BAR.SYNC` must be reached by every thread of the block that has not exited.
- A shuffle reads the source lane's register whether that lane is active or not.
"""


def _async() -> list[str]:
    """The words of the asynchronous engines (tensor_memory.py), and their rules."""
    codes = ", ".join(f"{i} `{n}`" for i, (n, _) in enumerate(TM.ELEMENTS))
    swz = ", ".join(f"{c}: {s or 'none'}" for s, c in TM.SWIZZLE_CODES.items())
    return ["", "## Asynchronous engines", "",
            "TME copies, AsyncBarriers and SQMMA complete asynchronously; `docs/pinghu.md`",
            "(\"Asynchronous engines\") describes the model. Their words are defined once, in",
            "`backends/pinghu/isa/tensor_memory.py`:", "",
            "- **TME descriptor** (a group of `3 + 2 * rank` registers): `[0:2]` the global "
            "base address",
            f"  (64-bit, {TM.GLOBAL_ALIGN}-byte aligned), `[2]` info (bits 0-3 element code, "
            "4-6 rank, bit 8: out-of-bounds",
            "  elements are NaN instead of 0), `[3:3+rank]` dims in elements, "
            "`[3+rank:3+2*rank]` byte",
            "  strides (outermost first; the innermost is the element size, the others "
            f"multiples of {TM.GLOBAL_ALIGN}).",
            f"  Element codes: {codes}.",
            "- **Box operand** (u32): bits `4i..4i+3` hold log2 of box dim `i` (outermost "
            "first), bits 24-25",
            f"  the swizzle code ({swz} bytes). The box's innermost dim is a multiple of "
            f"{TM.ROW_UNIT} bytes, the box",
            f"  at least {TM.TME_MIN_BOX_BYTES} bytes; its",
            f"  shared address is {TM.SHARED_ALIGN}-byte aligned; it is stored row-major, "
            "element `j` at",
            "  `swizzle(s + j * size)`.",
            f"- **Swizzle** with granularity G: `phys = addr ^ ((addr >> 8) & ({TM.LINE} / G "
            "- 1)) * G`: unit `u` of",
            f"  {TM.LINE}-byte line `l` moves to unit `u ^ (l mod ({TM.LINE} / G))`.",
            "- **SQMMA descriptor** (a register): bits 0-13 start address / 16, bits 14-27 the "
            "byte stride",
            "  between stored rows / 16, bits 28-29 the swizzle code. Element `(r, c)` of the "
            "stored operand",
            "  is at `swizzle(start + r * stride + c * size)`. `trans` bit 0: A is stored "
            "MN-major (rows k)",
            "  instead of K-major (rows m); bit 1: B is stored K-major (rows n) instead of "
            "MN-major (rows k);",
            "  rows whose trans is the `kmajor` kind exist with K-major A and B only. `neg` "
            "(ScaleIn) bit 0",
            "  multiplies -A, bit 1 -B; `scale` (ScaleOut) 0 ignores D's old value.",
            "- **SQMMA accumulator**: thread `i` of the WarpSquad (`tid % 128`) holds elements "
            "`[i*E, (i+1)*E)`",
            "  of the row-major m x n D tile in its group `R[d:d+E]`, `E = m*n/128`.",
            f"- **AsyncBarrier ids** 0 .. {USABLE_BARRIERS - 1} per block ("
            + (f"{USABLE_BARRIERS}" if BARRIER_IDS - USABLE_BARRIERS == 1 else
               f"{USABLE_BARRIERS} .. {BARRIER_IDS - 1}")
            + " reserved); arrivals are counted per warp."]


def _table(head, rows) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + \
        ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def _wmma() -> list[str]:
    out = ["", "## WMMA fragments", "",
           "The layouts of PTX `mma.sync`, and for the wider shapes those side by side",
           "(`backends/pinghu/isa/wmma.py`): with `g = laneid >> 2`",
           "and `t = laneid & 3`, a lane's fragment holds these (row, column) elements in",
           "order. 16-bit A and B elements pack two per register (element 2j in the low",
           "half of register j); tf32 and f32 elements take a register each. D is laid out",
           "like C. A layout's name is its shape (16-bit inputs) or shape.TF32.", ""]
    for shape, ops in FRAGMENTS.items():
        rows = [(op, ", ".join(f"({r}, {c})" for r, c in entries)) for op, entries in ops.items()]
        out += [f"**{shape}**", ""] + _table(["fragment", "elements"], rows) + [""]
    return out


def _encoding() -> list[str]:
    out = ["## Binary encoding", "",
           f"Every instruction is one {8 * E.WORD_BYTES}-bit word, stored little-endian in "
           f"{E.WORD_BYTES} bytes",
           "(bit 0 is the least significant bit of byte 0). The opcode is the row's index in",
           "the table, in the order of this page.", ""]
    out += _table(["field", "bits", "meaning"],
                  [(f"`{n}`", f"{lo}" if b == 1 else f"{lo}..{lo + b - 1}", m)
                   for n, lo, b, m in E.WORD_FIELDS])
    out += ["", "Operands are packed one after another from bit 32 in the row's order, each a",
            "4-bit tag and the payload the tag fixes (low bits first); the bits after the last",
            "operand are zero. A run's end is not stored: it follows from the instruction's",
            "`count` and the slot's width.", ""]
    out += _table(["tag", "operand", "payload (bits)", "meaning"],
                  [(t, cls.__name__ + ((" (run base)" if run else " (register base)")
                                       if cls.__name__ == "Mem" else ""),
                    ", ".join(f"{n} ({b})" for n, b in fields), m)
                   for t, cls, run, fields, m in E.OPERAND_TAGS])
    out += ["", f"A binary is a {E.HEADER.size}-byte little-endian header, the instruction "
            "words, then a",
            "metadata section: the kernel name, the parameters (name, type, offset), the header",
            "comments, and records `(pc, kind, text)` for labels (kind 0) and comment lines",
            "(kind 1) before instruction `pc` and trailing comments (kind 2); strings are a u32",
            "byte length and UTF-8. The decoder refuses a binary whose table hash differs from",
            "the table's.", ""]
    offsets, pos = [], 0
    for fmt, meaning in E.HEADER_FIELDS:
        offsets.append((pos, f"`{fmt}`", meaning))
        pos += struct.calcsize("<" + fmt)
    out += _table(["byte", "struct", "header field"], offsets)
    return out + [""]


def render() -> str:
    """The whole ISA reference as Markdown."""
    out = [INTRO.rstrip("\n"), ""] + _table(["directive", "meaning"], DIRECTIVES)
    out += [AFTER_DIRECTIVES] + _table(["syntax", "meaning"], OPERAND_SYNTAX)
    out += [AFTER_OPERANDS] + _table(["immediate", "range"], [
        (f"`{k.name}`", k.doc + ("" if k.is_float else f" ({k.lo} .. {k.hi})"))
        for k in IMM_KINDS.values()])
    out += [SEMANTICS.rstrip("\n")]
    out += _async()
    out += _wmma()
    out += _encoding()
    out += ["## Special registers", ""] + _table(["register", "meaning"],
                                                  [(f"`{k}`", v) for k, v in SPECIAL_REGS.items()])
    out += ["", "## Latency classes", "",
            "Names only; the cycle counts live in the machine-parameter file.", ""]
    out += _table(["class", "instructions"], [(f"`{k}`", v) for k, v in LATENCY_CLASSES.items()])
    out += ["", "## Instructions", "",
            f"{len(INSTRS)} rows; `op` is the opcode. *runs*: the row accepts register runs;",
            "*guard*: it may be guarded.", ""]
    for unit, doc in UNITS.items():
        rows = [(r.opcode, f"`{r.mnemonic}`", r.syntax().replace("|", "\\|") or "-", r.latency,
                 "yes" if r.runs else "", "yes" if r.guardable else "", r.doc.replace("|", "\\|"))
                for r in INSTRS if r.unit == unit]
        out += [f"### {unit}: {doc}", ""]
        out += _table(["op", "mnemonic", "operands", "latency", "runs", "guard", "semantics"],
                      rows) + [""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render())
