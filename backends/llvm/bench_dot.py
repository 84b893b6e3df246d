"""JIT harness and single-thread benchmark for the f32 dot micro-kernel.

Run ``python -m backends.llvm.bench_dot`` (from the repo root) to print the
GFLOP/s of ``emit_dot_f32`` alone for a few tile shapes, with the tiles
resident in cache and the kernel repeated inside the JIT function.
``python -m backends.llvm.bench_dot --asm 64 64 64`` dumps the assembly.
"""

import ctypes
import sys
import time

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from . import cgutils, dot

_initialized = False


def _init_llvm():
    """Initialise the native target and asm printer once (no IR)."""
    global _initialized
    if _initialized:
        return
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    _initialized = True


def _target_machine():
    """Return a fresh host target machine (one per engine; no IR)."""
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=3)


class JitModule:
    """An O3-optimised, MCJIT-compiled llvmlite module; keeps the engine alive."""

    def __init__(self, module):
        _init_llvm()
        self.tm = _target_machine()
        module.triple = self.tm.triple
        module.data_layout = str(self.tm.target_data)
        self.mod = llvm.parse_assembly(str(module))
        self.mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pb = llvm.create_pass_builder(self.tm, pto)
        pb.getModulePassManager().run(self.mod, pb)
        self.engine = llvm.create_mcjit_compiler(self.mod, self.tm)
        self.engine.finalize_object()

    def address(self, name):
        """Return the native address of function ``name``."""
        return self.engine.get_function_address(name)

    def asm(self):
        """Return the optimised module's assembly text."""
        return self.tm.emit_assembly(self.mod)


def build_mm(M, N, K, repeat=False, **kw):
    """JIT ``void mm(float* A, float* B, float* C[, i64 reps])`` running emit_dot_f32.

    With ``repeat`` the kernel body is wrapped in a ``reps`` loop (for
    benchmarking).  Returns ``(JitModule, ctypes function)``.
    """
    fptr = ir.PointerType()
    args = [fptr, fptr, fptr] + ([cgutils.I64] if repeat else [])
    module = ir.Module(name="mm_%dx%dx%d" % (M, N, K))
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name="mm")
    for a in fn.args[:3]:
        a.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    a_p, b_p, c_p = fn.args[:3]
    if repeat:
        with cgutils.for_range(b, 0, fn.args[3], 1, "rep"):
            dot.emit_dot_f32(b, a_p, b_p, c_p, M, N, K, **kw)
    else:
        dot.emit_dot_f32(b, a_p, b_p, c_p, M, N, K, **kw)
    b.ret_void()
    jit = JitModule(module)
    fp = ctypes.POINTER(ctypes.c_float)
    proto = ctypes.CFUNCTYPE(None, fp, fp, fp, *([ctypes.c_int64] if repeat else []))
    return jit, proto(jit.address("mm"))


def aligned_f32(shape, align=64):
    """Return a zeroed, ``align``-byte aligned C-contiguous float32 array."""
    n = int(np.prod(shape))
    raw = np.zeros(n + align // 4, dtype=np.float32)
    off = (-raw.ctypes.data % align) // 4
    return raw[off:off + n].reshape(shape)


def as_fp(arr):
    """Return a ``float*`` for a contiguous float32 array."""
    return arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def measure(M, N, K, run_time=0.05, runs=15, warmup=0.3, **kw):
    """Return the best GFLOP/s over ``runs`` timed calls (single thread).

    Each call repeats the kernel inside the JIT function for ~``run_time``
    seconds on the same cache-resident tiles; ``warmup`` seconds of calls
    first let the (virtualised) core reach its steady clock.
    """
    jit, fn = build_mm(M, N, K, repeat=True, **kw)
    rng = np.random.default_rng(0)
    A = aligned_f32((M, K))
    B = aligned_f32((K, N))
    C = aligned_f32((M, N))
    A[:] = rng.standard_normal((M, K)) * 1e-3
    B[:] = rng.standard_normal((K, N)) * 1e-3
    pa, pb, pc = as_fp(A), as_fp(B), as_fp(C)
    reps = 1
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn(pa, pb, pc, reps)
        dt = time.perf_counter() - t0
        if dt < run_time:
            reps *= 2
        elif time.perf_counter() - t_start > warmup:
            break
    best = dt
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(pa, pb, pc, reps)
        best = min(best, time.perf_counter() - t0)
    del jit  # the engine must outlive every call through fn
    return 2.0 * M * N * K * reps / best / 1e9


def fma_loop_report(M, N, K, **kw):
    """Return ``(fmas, stack_refs, vregs)`` summed over asm blocks that contain FMAs.

    ``stack_refs`` counts ``(%rsp)``/``(%rbp)`` operands (spills/reloads) in
    those blocks, ``vregs`` the distinct ymm/zmm registers they use.
    """
    jit, _ = build_mm(M, N, K, **kw)
    blocks, cur = [], None
    for line in jit.asm().splitlines():
        s = line.strip()
        if s.startswith(".LBB") and s.endswith(":"):
            cur = []
            blocks.append(cur)
        elif cur is not None:
            cur.append(s)
    hot = [ln for blk in blocks if any("vfmadd" in x for x in blk) for ln in blk]
    fmas = sum("vfmadd" in x for x in hot)
    spills = sum(("(%rsp)" in x or "(%rbp)" in x) for x in hot)
    vregs = {tok.strip(",") for x in hot for tok in x.split()
             if tok.startswith(("%ymm", "%zmm"))}
    return fmas, spills, len(vregs)


def numpy_gflops(M, N, K, run_time=0.02, runs=15):
    """Return numpy's best GFLOP/s for an (M,K)@(K,N) float32 matmul."""
    A = np.ones((M, K), np.float32)
    B = np.ones((K, N), np.float32)
    best = 0.0
    for _ in range(runs):
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < run_time:
            A @ B
            n += 1
        best = max(best, 2.0 * M * N * K * n / (time.perf_counter() - t0) / 1e9)
    return best


def peak_fma_gflops(n_acc=12, iters=20_000_000, runs=7):
    """Return the best GFLOP/s of a register-only loop of independent vector fmas (host peak)."""
    w, _ = dot.host_simd()
    vty = ir.VectorType(cgutils.F32, w)
    module = ir.Module(name="peak")
    fn = ir.Function(module, ir.FunctionType(cgutils.F32, [cgutils.I64]), name="peak")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    accs = [cgutils.const(vty, float(i)) for i in range(n_acc)]
    x, y = cgutils.const(vty, 1.0000001), cgutils.const(vty, 0.9999999)
    slots = [cgutils.entry_alloca(b, vty) for _ in range(n_acc)]
    for slot, v in zip(slots, accs):
        b.store(v, slot)
    with cgutils.for_range(b, 0, fn.args[0], 1, "it"):
        for slot in slots:
            b.store(cgutils.fma(b, x, y, b.load(slot)), slot)
    total = b.load(slots[0])
    for slot in slots[1:]:
        total = b.fadd(total, b.load(slot))
    b.ret(b.extract_element(total, cgutils.const(cgutils.I32, 0)))
    jit = JitModule(module)
    f = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(jit.address("peak"))
    best = 0.0
    for _ in range(runs):
        t0 = time.perf_counter()
        f(iters)
        best = max(best, 2.0 * w * n_acc * iters / (time.perf_counter() - t0) / 1e9)
    del jit
    return best


SHAPES = [(64, 64, 64), (128, 128, 32), (128, 64, 64), (256, 256, 64), (16, 16, 16)]


def bench(shapes=SHAPES):
    """Print kernel GFLOP/s per (M, N, K), FMA-loop asm stats and numpy's figure.

    Figures are best-of-15 (other processes share the cores).  For a
    single-thread numpy comparison run with OPENBLAS_NUM_THREADS=1.
    """
    w, r = dot.host_simd()
    print("host SIMD: %d f32 lanes, %d vector registers; register-only fma peak %.1f GFLOP/s"
          % (w, r, peak_fma_gflops()))
    for M, N, K in shapes:
        gf = measure(M, N, K)
        fmas, spills, vregs = fma_loop_report(M, N, K)
        print("%4dx%4dx%4d: %6.1f GFLOP/s  (fma loops: %d vfmadd, %d vregs, %d stack refs;"
              " numpy %5.1f GFLOP/s)" % (M, N, K, gf, fmas, vregs, spills,
                                         numpy_gflops(M, N, K)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--asm":
        M, N, K = (int(v) for v in sys.argv[2:5])
        print(build_mm(M, N, K)[0].asm())
    else:
        bench()
