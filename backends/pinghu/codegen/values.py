"""What codegen works with before register allocation: virtual registers, virtual
operands, virtual instructions, and the values a tile-IR value becomes.

Layout (one rule for every tile): a tile of ``N`` elements (row-major order) on a block of
``T`` threads gives each thread ``E = max(1, N // T)`` consecutive elements; thread ``t``
holds elements ``(t * E + j) % N`` for ``j < E`` in the registers of one virtual register
run. When ``N < T`` the tile is replicated (thread ``t`` holds element ``t % N``), and the
*owners* ``t < N`` are the threads that store it. Scalars are tiles of one element.
So warp ``w`` holds the ``32 * E`` consecutive elements from ``32 * E * w`` on, and
WarpSquad ``s`` (warps ``4s .. 4s+3``) the ``128 * E`` from ``128 * E * s``: a row of a
tile lies in one warp or one squad whenever it fits.
``expand_dims`` and ``reshape`` keep the row-major order, so they move nothing; ops that
move elements between threads go through shared memory (:mod:`.context`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mutile.errors import Loc

from ..isa import Instr


@dataclass(eq=False)
class VReg:
    """A virtual register block: ``nregs`` consecutive 32-bit registers aligned to
    ``align`` (``kind`` "R"), or ``nregs`` predicates (``kind`` "P")."""
    id: int
    nregs: int
    align: int = 1
    kind: str = "R"
    name: str = ""

    def __repr__(self) -> str:
        return f"%{self.kind.lower()}{self.id}[{self.nregs}]"


@dataclass(frozen=True, eq=False)
class VR:
    """Registers ``start .. start+count-1`` of a virtual register block (a register when
    ``count`` equals the slot's width, else a run)."""
    v: VReg
    start: int
    count: int


@dataclass(frozen=True, eq=False)
class VP:
    """Predicates ``start .. start+count-1`` of a virtual predicate block, maybe negated."""
    v: VReg
    start: int
    count: int
    neg: bool = False

    def negated(self) -> "VP":
        return VP(self.v, self.start, self.count, not self.neg)


@dataclass(frozen=True, eq=False)
class VMem:
    """A memory operand whose address is the virtual registers ``base`` (or an absolute
    address when ``base`` is None) plus ``offset`` bytes."""
    base: VR | None
    offset: int = 0


@dataclass(eq=False)
class VIns:
    """One virtual instruction: an ISA row and operands that may still name virtual
    registers; ``label``/``loop`` pseudo instructions carry ``row = None``."""
    row: Instr | None
    operands: tuple = ()
    guard: VP | None = None
    loc: Loc | None = None
    label: str | None = None          # a label pseudo instruction
    loop: tuple | None = None         # ("begin" | "end", loop id) pseudo instruction
    comment: str | None = None


# ---------------------------------------------------------------- values
@dataclass(eq=False)
class TileVal:
    """A tile (or scalar) held in registers in the block layout: ``E`` elements per
    thread, each ``w`` registers, in ``vreg``."""
    vreg: VReg
    shape: tuple
    ty: object              # ScalarType or PointerType (a full 64-bit address per element)
    E: int
    w: int
    recipe: object = None   # how to recompute it from the element index (recipe.py)
    pred: object = None     # an i1 tile's predicates (VP), when they are at hand

    def run(self, start: int = 0, count: int | None = None) -> VR:
        """Elements ``start .. start+count-1`` (all by default) as a virtual operand."""
        count = self.E - start if count is None else count
        return VR(self.vreg, start * self.w, count * self.w)


@dataclass(eq=False)
class Uniform:
    """A tile whose elements are all one scalar: a register operand (``VR`` of one
    element) or an immediate (``IntImm``/``FloatImm`` for 32-bit types, a Python number
    for 64-bit ones, materialized on use)."""
    src: object
    shape: tuple
    ty: object
    pred: object = None     # an i1 uniform's predicate (VP), when it is at hand


@dataclass(eq=False)
class PtrTile:
    """A tile of pointers kept as one scalar base address (a 64-bit ``Uniform``) plus an
    i32 tile of element offsets; the 64-bit addresses are formed right before an access."""
    base: Uniform
    off: object             # TileVal or Uniform of i32 element offsets
    shape: tuple
    ty: object              # the PointerType


@dataclass(eq=False)
class DescVal:
    """A tensor descriptor made in the kernel: base pointer, dims and strides (Uniform
    scalars), its block shape and element type."""
    base: Uniform
    dims: list
    strides: list
    block: tuple
    ty: object


@dataclass
class Layout:
    """The block layout of a tile of ``n`` elements on ``threads`` threads."""
    n: int
    threads: int
    E: int = field(init=False)

    def __post_init__(self):
        self.E = max(1, self.n // self.threads)

    @property
    def replicated(self) -> bool:
        """True when more threads than elements: some threads hold copies."""
        return self.n < self.threads


def numel(shape: tuple) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def log2(n: int) -> int:
    assert n > 0 and n & (n - 1) == 0, n
    return n.bit_length() - 1
