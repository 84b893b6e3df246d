"""Register-blocked f32 matmul micro-kernel generator for the LLVM CPU backend.

``emit_dot_f32`` emits, inline in the current function, ``C += A @ B`` for
small contiguous row-major tiles (A: MxK, B: KxN, C: MxN, all ``float``).

Rounding contract (shared by every mutile backend): for each (i, j)::

    c = C[i, j]
    for k in range(K):
        c = fma(A[i, k], B[k, j], c)      # single rounding, k strictly in order
    C[i, j] = c

The generated code never reassociates across k; vectorisation is only across
j (columns), so each vector lane carries one exact sequential fma chain.

Code shape (outer to inner): column panels of NR = ``nvec * W`` columns (an
LLVM loop over full panels plus one statically sized remainder panel made of
narrower vectors / scalars) -> row blocks of MR rows (an LLVM loop plus one
static remainder block) -> a bottom-tested k loop whose MR x nvec vector
accumulators are loop-carried phis.  Per k it loads ``B[k, j0:j0+NR]`` as
vectors, broadcasts ``A[i0+r, k]`` and issues MR * nvec ``llvm.fma`` calls.
A is read in place: the MR row streams (stride K) stay in L1.  Packing an
MR x K panel of A (k-major, rows-outer loop order) measured 5-10% slower on
AVX2 (the copy is not amortised over N/NR panels), so it is not done.

W and the register budget come from the host CPU (AVX-512: 16 lanes x 32
registers -> 12 x 32 block, 24 zmm accumulators; AVX/AVX2: 8 x 16 -> 6 x 16
block, 12 ymm accumulators; otherwise SSE 4 x 16) unless given explicitly.
"""

import contextlib
import functools
import operator

from llvmlite import binding as llvm
from llvmlite import ir

from . import cgutils

F32 = ir.FloatType()
I32 = ir.IntType(32)
I64 = ir.IntType(64)

TF32_DROPPED_BITS = 13  # f32 has 23 explicit mantissa bits, tf32 keeps 10


@functools.lru_cache(maxsize=None)
def host_simd():
    """Return ``(vector_width_in_f32_lanes, vector_register_count)`` for the host (no IR)."""
    feats = llvm.get_host_cpu_features()
    if feats.get("avx512f"):
        return 16, 32
    if feats.get("avx"):
        return 8, 16
    return 4, 16


def plan_blocking(M, N, vec_width, num_regs, nvec=2, max_rows=None):
    """Return the static blocking plan for an MxN output (no IR).

    Result: list of panels ``(j_start, n_panels, chunks, mr)`` where ``chunks``
    is a tuple of ``(column_offset, width)`` vector pieces covering one panel
    (width 1 means scalar), ``n_panels`` consecutive panels of the same shape
    start at ``j_start``, and ``mr`` is the row-block height for that panel.
    """
    if M <= 0 or N <= 0:
        raise ValueError("plan_blocking needs positive M, N")
    if vec_width < 1 or nvec < 1 or num_regs < 3:
        raise ValueError("plan_blocking needs vec_width, nvec >= 1 and num_regs >= 3")
    nr = nvec * vec_width
    panels = []
    n_full = N // nr
    if n_full:
        full_chunks = tuple((v * vec_width, vec_width) for v in range(nvec))
        panels.append((0, n_full, full_chunks, _rows_for(len(full_chunks), num_regs, M, max_rows)))
    rem = N - n_full * nr
    if rem:
        chunks, off, width = [], 0, vec_width
        while rem:
            while width > rem:
                width //= 2
            chunks.append((off, width))
            off += width
            rem -= width
        mr = _rows_for(len(chunks), num_regs, M, max_rows)
        panels.append((n_full * nr, 1, tuple(chunks), mr))
    return panels


def _rows_for(n_chunks, num_regs, M, max_rows=None):
    """Return MR so MR*n_chunks accumulators + B vectors + a broadcast fit in registers (no IR)."""
    if max_rows is None:
        max_rows = 12 if num_regs >= 32 else 6
    mr = (num_regs - n_chunks - 1) // n_chunks
    return max(1, min(mr, max_rows, M))


def emit_dot_f32(b, a_ptr, b_ptr, c_ptr, M, N, K, vec_width=None, num_regs=None,
                 nvec=2, max_rows=None, b_packed=False):
    """Emit ``C[i,j] = fma(A[i,K-1], B[K-1,j], ... fma(A[i,0], B[0,j], C[i,j]))`` for all i, j.

    ``a_ptr``/``b_ptr``/``c_ptr`` point at contiguous row-major f32 tiles
    (MxK, KxN, MxN); typed ``float*`` or opaque pointers are accepted.
    M, N, K are positive Python ints.  ``vec_width``/``num_regs`` override
    the host-derived SIMD shape (lanes per vector, vector registers);
    ``nvec`` (vectors per full panel row, NR = nvec * vec_width) and
    ``max_rows`` (cap on MR; default 6 with 16 registers, 12 with 32) are
    tuning knobs.  With ``b_packed`` B is stored panel-major (see
    :func:`packed_b_width`): B[k, j] at ``j0*K + k*NR + (j - j0)``, ``j0`` the start of
    j's NR-wide panel, so each row block streams one contiguous panel; this needs
    N % NR == 0 and the default ``vec_width``/``nvec``.  The result bits never depend
    on any of these knobs.
    The builder is left positioned after the emitted code.
    """
    M, N, K = (operator.index(d) for d in (M, N, K))  # TypeError for non-integers
    if min(M, N, K) <= 0:
        raise ValueError("emit_dot_f32: M, N, K must be positive, got %r" % ((M, N, K),))
    host_w, host_r = host_simd()
    vec_width = vec_width or host_w
    num_regs = num_regs or host_r
    ptrs = [cgutils.opaque_ptr(b, p) for p in (a_ptr, b_ptr, c_ptr)]
    kern = _Kernel(b, *ptrs, M, N, K)
    for j_start, n_panels, chunks, mr in plan_blocking(M, N, vec_width, num_regs,
                                                       nvec, max_rows):
        nr = chunks[-1][0] + chunks[-1][1]
        if b_packed and nr != packed_b_width(N):
            raise ValueError("emit_dot_f32: packed B needs N %% %d == 0" % nr)
        with _blocks(b, j_start, n_panels, nr, "dot.j") as j0:
            n_rows_full = M // mr
            with _blocks(b, 0, n_rows_full, mr, "dot.i") as i0:
                kern.block(i0, j0, mr, chunks, nr if b_packed else 0)
            if M % mr:
                kern.block(_i64(n_rows_full * mr), j0, M % mr, chunks, nr if b_packed else 0)


def packed_b_width(N):
    """Return NR when a KxN B may be stored panel-major for :func:`emit_dot_f32`, else 0.

    Panel-major needs N a multiple of NR (host vectors, default ``nvec``) and more than
    one panel (no IR).
    """
    nr = 2 * host_simd()[0]
    return nr if N % nr == 0 and N > nr else 0


class _Kernel:
    """Emits one MR x NR register block (state: builder, opaque base pointers, sizes)."""

    def __init__(self, b, a, bm, c, M, N, K):
        self.b, self.a, self.bm, self.c = b, a, bm, c
        self.M, self.N, self.K = M, N, K

    def _ptr(self, base, idx):
        """Emit a flat f32 GEP ``base + idx``."""
        return cgutils.gep_flat(self.b, base, idx, F32)

    def _load(self, base, idx, width):
        """Emit a load of ``width`` f32 (scalar when width == 1) at ``base + idx``."""
        ty = F32 if width == 1 else ir.VectorType(F32, width)
        return self.b.load(self._ptr(base, idx), typ=ty, align=4)

    def block(self, i0, j0, mr, chunks, packed_nr=0):
        """Emit load-C / k loop of fmas / store-C for rows i0..i0+mr and the given column chunks.

        ``packed_nr``: B is panel-major with panels that wide (0: row-major).
        """
        b, N, K = self.b, self.N, self.K
        if packed_nr:
            b_base, b_stride = b.mul(j0, _i64(K)), packed_nr
        else:
            b_base, b_stride = j0, N
        c_rows = [b.add(b.mul(b.add(i0, _i64(r)), _i64(N)), j0) for r in range(mr)]
        init = [[self._load(self.c, b.add(c_rows[r], _i64(o)), w) for o, w in chunks]
                for r in range(mr)]
        a_rows = [b.mul(b.add(i0, _i64(r)), _i64(K)) for r in range(mr)]

        pre = b.block
        body = b.append_basic_block("dot.k")
        done = b.append_basic_block("dot.k.end")
        b.branch(body)
        b.position_at_end(body)
        k = b.phi(I64, name="k")
        k.add_incoming(_i64(0), pre)
        accs = [[b.phi(v.type) for v in row] for row in init]
        for row_phis, row_init in zip(accs, init):
            for phi, v in zip(row_phis, row_init):
                phi.add_incoming(v, pre)

        b_row = b.add(b.mul(k, _i64(b_stride)), b_base)
        bvecs = [self._load(self.bm, b.add(b_row, _i64(o)), w) for o, w in chunks]
        new = []
        for r in range(mr):
            a_val = b.load(self._ptr(self.a, b.add(a_rows[r], k)), typ=F32, align=4)
            splats = {}
            row = []
            for (o, w), bv, acc in zip(chunks, bvecs, accs[r]):
                if w not in splats:
                    splats[w] = a_val if w == 1 else cgutils.splat(b, a_val, w)
                row.append(cgutils.fma(b, splats[w], bv, acc))
            new.append(row)

        k_next = b.add(k, _i64(1), flags=("nsw", "nuw"))
        b.cbranch(b.icmp_signed("<", k_next, _i64(K)), body, done)
        latch = b.block
        k.add_incoming(k_next, latch)
        for row_phis, row_new in zip(accs, new):
            for phi, v in zip(row_phis, row_new):
                phi.add_incoming(v, latch)

        b.position_at_end(done)
        for r in range(mr):
            for (o, w), v in zip(chunks, new[r]):
                b.store(v, self._ptr(self.c, b.add(c_rows[r], _i64(o))), align=4)


def _i64(v):
    """Return an i64 constant (no IR)."""
    return ir.Constant(I64, v)


@contextlib.contextmanager
def _blocks(b, start, count, step, name):
    """Yield i64 starts ``start + t*step`` for t < count (constant if count is 1, else a loop)."""
    if count < 1:
        raise ValueError("_blocks needs count >= 1")
    if count == 1:
        yield _i64(start)
        return
    with cgutils.for_range(b, _i64(start), start + count * step, step, name) as i:
        yield i


def emit_round_tf32(b, x):
    """Emit integer ops rounding f32 scalar/vector ``x`` to tf32 precision; returns f32.

    Round-to-nearest-even to 10 explicit mantissa bits (low 13 bits of the
    result are zero), the exponent range is unchanged.  Finite values that
    round past the largest tf32 become +-inf (IEEE overflow).  Infinities
    and zeros are returned unchanged; NaNs stay NaN: their low 13 bits are
    cleared and the quiet bit (0x00400000) set, keeping sign and top payload.
    IR: bitcast to i32, ``(bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF``,
    select NaN lanes, bitcast back.
    """
    ty = x.type
    if ty == F32:
        ity = I32
    elif isinstance(ty, ir.VectorType) and ty.element == F32:
        ity = ir.VectorType(I32, ty.count)
    else:
        raise TypeError("emit_round_tf32 expects f32 or <n x f32>, got %s" % ty)

    def c(v):
        return cgutils.const(ity, v)

    keep_mask = (0xFFFFFFFF << TF32_DROPPED_BITS) & 0xFFFFFFFF
    bits = b.bitcast(x, ity)
    lsb = b.and_(b.lshr(bits, c(TF32_DROPPED_BITS)), c(1))
    half = c((1 << (TF32_DROPPED_BITS - 1)) - 1)
    rounded = b.and_(b.add(b.add(bits, half), lsb), c(keep_mask))
    is_nan = b.icmp_unsigned(">", b.and_(bits, c(0x7FFFFFFF)), c(0x7F800000))
    quiet_nan = b.or_(b.and_(bits, c(keep_mask)), c(0x00400000))
    return b.bitcast(b.select(is_nan, quiet_nan, rounded), ty)


def emit_round_tf32_inplace(b, ptr, count):
    """Emit a loop rounding ``count`` contiguous f32 at ``ptr`` to tf32 in place (emit_round_tf32).

    ``count`` is a positive Python int; the loop uses <8 x float> vectors
    plus a scalar tail.
    """
    if not isinstance(count, int) or count <= 0:
        raise ValueError("emit_round_tf32_inplace: count must be a positive int")
    base = cgutils.opaque_ptr(b, ptr)
    width = 8
    n_vec = count // width
    if n_vec:
        vty = ir.VectorType(F32, width)
        with cgutils.for_range(b, 0, n_vec * width, width, "tf32.i") as i:
            p = cgutils.gep_flat(b, base, i, F32)
            b.store(emit_round_tf32(b, b.load(p, typ=vty, align=4)), p, align=4)
    for i in range(n_vec * width, count):
        p = cgutils.gep_flat(b, base, i, F32)
        b.store(emit_round_tf32(b, b.load(p, typ=F32, align=4)), p, align=4)
