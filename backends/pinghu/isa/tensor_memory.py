"""How Pinghu's asynchronous engines see memory: the one definition of the shared-memory
swizzle, of a TME tensor descriptor held in registers, of the packed box operand of a TME
copy, and of the 32-bit shared-memory descriptor an SQMMA operand is named by.

Codegen builds these words, the interpreter reads them, the docs quote this module. The
bit layouts are this model's choice (Moore Threads does not publish the encodings); the
facts they carry (rank <= 5, box and swizzle as copy operands, 4 B global and 256 B shared
alignment, boxes of at least 32 B, swizzle granularity none/16/32/64 B, start address +
leading stride + swizzle in an SQMMA descriptor) are the public ones of the machine file
(``mutile/machines/pinghu.toml``, read through :mod:`mutile.ir.ops_pinghu`).

**Swizzle** (``swizzle_address``): shared memory is seen in 256-byte *lines*. With a
swizzle granularity of G bytes (16, 32 or 64), each line is G-byte *units*; unit ``u`` of
line ``l`` is stored at unit ``u ^ (l mod (256 / G))`` of the same line. The byte within a
unit does not move. Buffers are 256-byte aligned, so the pattern depends only on offsets
within the buffer. Mode 0 is the identity.

**TME descriptor** (``DESC_WORDS(rank)`` 32-bit registers, uniform across the block):
``[0:2]`` global base address (64-bit, low word first), ``[2]`` info (bits 0-3 element
code ``ELEMENT_CODES``, bits 4-6 rank, bit 8 out-of-bounds fill is NaN instead of 0),
``[3:3+rank]`` dims in elements (outermost first), ``[3+rank:3+2*rank]`` byte strides
(outermost first; the innermost stride is the element size).

**Box operand** (``pack_box``): bits ``4*i .. 4*i+3`` hold log2 of box dim ``i``
(outermost first, up to 5 dims), bits 24-25 the swizzle code ``SWIZZLE_CODES``.

**SQMMA shared descriptor** (``pack_smem_desc``): bits 0-13 start address / 16, bits
14-27 leading byte stride (between consecutive stored rows) / 16, bits 28-29 the swizzle
code.
"""
from __future__ import annotations

import numpy as np

from mutile.ir.ops_pinghu import MAX_DESC_RANK as MAX_RANK
from mutile.ir.ops_pinghu import SHARED_ALIGN, SWIZZLES, TME_MIN_BOX_BYTES
from mutile.ir.ops_pinghu import TME_GLOBAL_ALIGN as GLOBAL_ALIGN   # global base and strides
from mutile.ir.ops_pinghu import TME_UNIT as ROW_UNIT   # a box row: a multiple of 16 bytes

LINE = SHARED_ALIGN                     # bytes per swizzle line (= shared buffer alignment)
_LINE_SHIFT = LINE.bit_length() - 1
SWIZZLE_CODES = {s: i for i, s in enumerate(SWIZZLES)}

# element codes of the TME descriptor info word: code -> (IR scalar name, bytes)
ELEMENTS = [("i8", 1), ("i16", 2), ("i32", 4), ("i64", 8), ("f16", 2), ("bf16", 2),
            ("f32", 4), ("f64", 8), ("f8e4m3", 1), ("f8e5m2", 1), ("u8", 1), ("u16", 2),
            ("u32", 4), ("u64", 8), ("i1", 1)]
ELEMENT_CODES = {name: i for i, (name, _) in enumerate(ELEMENTS)}
FILL_NAN = 1 << 8


def swizzle_address(addr, mode: int):
    """Physical shared byte address of logical address ``addr`` (int or int array) under
    swizzle ``mode`` (0, 16, 32 or 64 bytes)."""
    if mode == 0:
        return addr
    # unit u of line l moves to unit u ^ (l mod (LINE / mode)): flip the unit bits of the
    # address by the low bits of its line number (LINE and mode are powers of two)
    return addr ^ ((addr >> _LINE_SHIFT) & (LINE // mode - 1)) * mode


def swizzle_each(addr: np.ndarray, modes) -> np.ndarray:
    """:func:`swizzle_address` of ``addr`` (int array (W, ...)) with one mode per entry
    of its first axis (``modes``: W ints)."""
    modes = np.asarray(modes)
    first = int(modes.flat[0]) if modes.size else 0
    if (modes == first).all():
        return swizzle_address(addr, first)
    out = np.array(addr, copy=True)
    for mode in np.unique(modes).tolist():
        rows = modes == mode
        out[rows] = swizzle_address(addr[rows], mode)
    return out


# quiet-NaN bits of the float element types (ml_dtypes' canonical NaN)
NAN_BITS = {"f16": 0x7E00, "bf16": 0x7FC0, "f32": 0x7FC00000, "f64": 0x7FF8000000000000,
            "f8e4m3": 0x7F, "f8e5m2": 0x7E}


def fill_bits(element: str, fill_nan: bool) -> int:
    """The bits a TME load writes for an out-of-bounds element: 0, or the element type's
    quiet NaN when the descriptor asks for NaN fill (integer types fill 0 either way)."""
    return NAN_BITS.get(element, 0) if fill_nan else 0


def desc_words(rank: int) -> int:
    """Registers a TME descriptor of ``rank`` dims occupies."""
    return 3 + 2 * rank


def desc_info(element: str, rank: int, fill_nan: bool = False) -> int:
    """The info word of a TME descriptor."""
    return ELEMENT_CODES[element] | rank << 4 | (FILL_NAN if fill_nan else 0)


def unpack_info(info: int) -> tuple[str, int, int, bool]:
    """(element name, element bytes, rank, fill_nan) of an info word."""
    name, size = ELEMENTS[info & 0xF]
    return name, size, info >> 4 & 7, bool(info & FILL_NAN)


def pack_box(box, swizzle: int) -> int:
    """The box operand of a TME copy of ``box`` (power-of-two dims, outermost first)."""
    word = 0
    for i, d in enumerate(box):
        word |= (int(d).bit_length() - 1) << (4 * i)
    return word | SWIZZLE_CODES[swizzle] << 24


def unpack_box(word: int, rank: int) -> tuple[tuple, int]:
    """(box dims, swizzle bytes) of a packed box operand."""
    box = tuple(1 << (word >> (4 * i) & 0xF) for i in range(rank))
    return box, SWIZZLES[word >> 24 & 3]


def pack_smem_desc(start: int, stride: int, swizzle: int) -> int:
    """The 32-bit SQMMA descriptor of an operand at shared ``start`` whose stored rows are
    ``stride`` bytes apart (both multiples of 16)."""
    return (start >> 4) | (stride >> 4) << 14 | SWIZZLE_CODES[swizzle] << 28


def unpack_smem_desc(word):
    """(start, stride, swizzle bytes) of SQMMA descriptor word(s) (int or uint32 array)."""
    w = np.asarray(word, np.int64)
    sw = np.asarray(SWIZZLES)[(w >> 28) & 3]
    return (w & 0x3FFF) << 4, ((w >> 14) & 0x3FFF) << 4, sw


def operand_addresses(start: int, stride: int, rows: int, cols: int, size: int,
                      swizzle: int) -> np.ndarray:
    """Physical byte addresses (rows, cols) of a stored operand: element (r, c) at logical
    ``start + r * stride + c * size``."""
    logical = start + np.arange(rows)[:, None] * stride + np.arange(cols)[None, :] * size
    return swizzle_address(logical, swizzle)


__all__ = ["ELEMENTS", "ELEMENT_CODES", "FILL_NAN", "GLOBAL_ALIGN", "LINE", "MAX_RANK",
           "NAN_BITS", "ROW_UNIT", "SHARED_ALIGN", "SWIZZLES", "SWIZZLE_CODES",
           "TME_MIN_BOX_BYTES", "desc_info", "desc_words", "fill_bits", "operand_addresses",
           "pack_box", "pack_smem_desc", "swizzle_address", "swizzle_each", "unpack_box",
           "unpack_info", "unpack_smem_desc"]
