"""The ``mutile`` command: ``demo``, ``ir``, ``asm``, ``bench``, ``coredump``, ``run``,
``profile``, ``tune``."""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np


def _load_kernel(target: str):
    """``path/to/file.py::kernel_name`` -> the JITFunction."""
    if "::" not in target:
        raise SystemExit(f"mutile: expected FILE.py::KERNEL, got '{target}'")
    path, name = target.rsplit("::", 1)
    if not os.path.exists(path):
        raise SystemExit(f"mutile: no such file: {path}")
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    fn = getattr(mod, name, None)
    if fn is None or not getattr(fn, "__mutile_jit__", False):
        raise SystemExit(f"mutile: {path} has no @mutile.jit function '{name}'")
    return fn


def _parse_const(text: str):
    import mutile.language as ml
    k, _, v = text.partition("=")
    if not _:
        raise SystemExit(f"mutile: --const expects NAME=VALUE, got '{text}'")
    for conv in (int, float):
        try:
            return k, conv(v)
        except ValueError:
            pass
    if v in ("True", "False"):
        return k, v == "True"
    if v in ml.DTYPES:
        return k, ml.DTYPES[v]
    return k, v


def _spec(args):
    """The kernel named by ``args.target`` and its specialization from --signature and
    --const (exits with a message when they do not fit the kernel)."""
    from .runtime.specialize import parse_signature_type
    fn = _load_kernel(args.target)
    consts = dict(_parse_const(c) for c in args.const)
    sig = [s for s in args.signature.split(",") if s.strip()] if args.signature else []
    runtime = [p for p in fn.arg_names if p not in fn.constexpr_names and p not in consts]
    if len(sig) != len(runtime):
        raise SystemExit(f"mutile: --signature lists {len(sig)} types but {fn.__name__} has "
                         f"{len(runtime)} runtime parameters ({', '.join(runtime)})")
    spec = {}
    for p in fn.arg_names:
        if p in consts:
            spec[p] = consts[p]
        elif p in fn.constexpr_names:
            default = fn.signature.parameters[p].default
            if default is fn.signature.parameters[p].empty:
                raise SystemExit(f"mutile: constexpr '{p}' needs --const {p}=VALUE")
            spec[p] = default
        else:
            spec[p] = sig[runtime.index(p)]
    fn.constexpr_names = frozenset(fn.constexpr_names) | set(consts)
    return fn, spec, runtime


def cmd_ir(args) -> int:
    from .errors import MutileError
    from .runtime.compile import frontend_and_passes
    from .runtime.specialize import parse_signature_type
    fn, spec, runtime = _spec(args)
    try:
        for p in runtime:
            spec[p] = parse_signature_type(spec[p])
        _, stages, _ = frontend_and_passes(fn, spec, {}, verify=True)
    except MutileError as e:
        print(e, file=sys.stderr)
        return 1
    names = [args.pass_name] if args.pass_name else list(stages)
    for n in names:
        if n not in stages:
            raise SystemExit(f"mutile: no stage '{n}'; stages: {', '.join(stages)}")
        print(f"// ----- {n} -----")
        print(stages[n])
    return 0


def cmd_asm(args) -> int:
    """Print a kernel's Pinghu ISA listing (and its metadata with --meta)."""
    from .backends.pinghu import compile as pinghu_compile
    from .errors import MutileError
    from .runtime.compile import frontend_and_passes
    from .runtime.specialize import parse_signature_type
    fn, spec, runtime = _spec(args)
    options = {"num_warps": args.num_warps}
    try:
        for p in runtime:
            spec[p] = parse_signature_type(spec[p])
        module, _, _ = frontend_and_passes(fn, spec, options, verify=True)
        kernel = pinghu_compile(module, options)
    except MutileError as e:
        print(e, file=sys.stderr)
        return 1
    print(kernel.asm["musa"], end="")
    if args.meta:
        for k, v in kernel.metadata.items():
            print(f"// {k}: {v}")
    return 0


def cmd_demo(args) -> int:
    from .kernels import attention_basic as fa
    from .kernels import matmul as mm
    from .testing import do_bench
    rng = np.random.default_rng(0)
    print(f"mutile demo on {os.cpu_count()} threads\n")

    H, S, D = 4, 256, 64
    q, k, v = (rng.standard_normal((H, S, D)).astype(np.float32) for _ in range(3))
    t0 = time.perf_counter()
    out = fa.attention(q, k, v, causal=True)
    t_first = time.perf_counter() - t0
    ref = fa.attention_reference(q, k, v, causal=True)
    err = float(np.max(np.abs(out - ref)))
    ms = do_bench(lambda: fa.attention(q, k, v, causal=True), return_mode="median")
    print(f"causal attention  [{H} heads, seq {S}, d {D}, fp32]  max |err| vs float64 numpy "
          f"= {err:.2e}  compile+run {t_first:.2f} s, run {ms:.2f} ms (median)")
    ok = err < 1e-4

    M = N = K = 256
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    t0 = time.perf_counter()
    c = mm.matmul(a, b, activation="leaky_relu", out_dtype=np.float32)
    t_first = time.perf_counter() - t0
    r = a.astype(np.float64) @ b.astype(np.float64)
    r = np.where(r >= 0, r, 0.01 * r)
    merr = float(np.max(np.abs(c - r) / (1 + np.abs(r))))
    ms = do_bench(lambda: mm.matmul(a, b, activation="leaky_relu", out_dtype=np.float32),
                  return_mode="median")
    print(f"matmul + leaky_relu [{M}x{K} @ {K}x{N}, fp16 in, fp32 acc]  max rel err = {merr:.2e}  "
          f"compile+run {t_first:.2f} s, run {ms:.2f} ms (median)")
    ok = ok and merr < 1e-5

    kern = fa.attention_fwd_kernel.warmup(q, k, v, np.empty_like(q), S, S, 0.125, S * D, D,
                                          S * D, D, S * D, D, HEAD_DIM=D, BLOCK_M=64, BLOCK_N=64,
                                          CAUSAL=True, grid=(1,))
    lines = kern.asm["dce"].splitlines()
    start = next(i for i, line in enumerate(lines) if " for " in line)
    print("\nThe attention kernel's inner loop in the tile IR (k.asm['dce']):")
    print("\n".join(lines[start:start + 14]))
    print("  ...")

    # the same matmul compiled to the Pinghu ISA and run on the Pinghu interpreter
    t0 = time.perf_counter()
    cp = mm.matmul(a, b, activation="leaky_relu", out_dtype=np.float32, backend="pinghu",
                   block_m=64, block_n=64, block_k=32)
    t_run = time.perf_counter() - t0
    same = bool(np.array_equal(cp, mm.matmul(a, b, activation="leaky_relu",
                                             out_dtype=np.float32, block_m=64, block_n=64,
                                             block_k=32)))
    print(f"\nthe matmul on the Pinghu interpreter (backend='pinghu', 64x64x32 tiles): "
          f"{'bit-identical to' if same else 'DIFFERENT from'} the llvm backend, "
          f"compile+run {t_run:.2f} s")
    ok = ok and same
    pk = mm.matmul_kernel.warmup(a, b, np.empty((M, N), np.float32), M, N, K, K, 1, N, 1, N, 1,
                                 BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
                                 ACTIVATION="leaky_relu", backend="pinghu", grid=(1,))
    isa = pk.asm["musa"].splitlines()
    at = next(i for i, line in enumerate(isa) if "SQMMA." in line or "WMMA." in line)
    print(f"Its ISA around the tensor-core step (k.asm['musa'], "
          f"{pk.metadata['registers_per_thread']} registers/thread): the tiles are staged "
          f"in shared memory for the WarpSquad MMA (docs/pinghu-async.md)")
    print("\n".join(isa[at - 12:at + 3]))
    print("  ...")
    print("\nall results match numpy" if ok else "\nMISMATCH against numpy")
    return 0 if ok else 1


def cmd_coredump(args) -> int:
    from .runtime import coredump
    try:
        dump = coredump.load(args.file)
    except coredump.CoredumpError as e:
        print(f"mutile coredump: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(coredump.report(dump))
    return 0


def _parse_sample(text: str):
    """``--sample``: auto (None), off (False), wave, or a number of blocks."""
    words = {"auto": None, "off": False, "wave": "wave"}
    if text in words:
        return words[text]
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--sample {text!r}: expected auto, off, wave or a number of "
                         f"blocks") from None


def trace_path(script: str) -> str:
    """Where ``mutile profile`` writes the trace by default: beside the script, its name
    with ``.trace.json`` instead of ``.py``."""
    root, ext = os.path.splitext(script)
    return (root if ext == ".py" else script) + ".trace.json"


def cmd_profile(args) -> int:
    """Run a script as ``mutile run`` does, inside ``mutile.profile()``; then print the
    summary and write the trace, also when the script fails (its exception then goes on
    to the caller, with its traceback)."""
    from .compat import run_script
    from .errors import MutileError
    from .profiler import profile
    if not os.path.isfile(args.script):
        print(f"mutile profile: no such file: {args.script}", file=sys.stderr)
        return 2
    try:
        prof = profile(machine=args.machine, sample=_parse_sample(args.sample))
    except (ValueError, TypeError, MutileError) as e:
        print(f"mutile profile: {e}", file=sys.stderr)
        return 2
    out = os.path.abspath(args.output or trace_path(args.script))   # the script may chdir
    try:
        with prof:
            return run_script(args.script, args.args)
    finally:
        sys.stdout.flush()
        print(f"\n==== mutile profile {args.script} ====")
        prof.summary()
        print(f"trace: {prof.save_trace(out)} (open in https://ui.perfetto.dev or "
              f"chrome://tracing)")
        sys.stdout.flush()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="mutile", description="mutile: tile DSL and compiler")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("demo", help="compile and run attention and matmul, checked against numpy")
    pi = sub.add_parser("ir", help="print a kernel's tile IR after each pass")
    pi.add_argument("target", help="FILE.py::KERNEL")
    pi.add_argument("--signature", default="", help='runtime parameter types, e.g. "*fp16,*fp16,i32"')
    pi.add_argument("--const", action="append", default=[], help="constexpr NAME=VALUE")
    pi.add_argument("--pass", dest="pass_name", default=None,
                    help="print only this stage (ir, inline, canonicalize, cse, licm, dce)")
    pa = sub.add_parser("asm", help="print a kernel's Pinghu ISA listing")
    pa.add_argument("target", help="FILE.py::KERNEL")
    pa.add_argument("--signature", default="", help='runtime parameter types, e.g. "*fp16,*fp16,i32"')
    pa.add_argument("--const", action="append", default=[], help="constexpr NAME=VALUE")
    pa.add_argument("--num-warps", type=int, default=4)
    pa.add_argument("--meta", action="store_true", help="also print registers, shared bytes, "
                    "instruction counts")
    pb = sub.add_parser("bench", help="speed tables: mutile vs numpy, side by side")
    pb.add_argument("--quick", action="store_true", help="smaller sizes")
    pb.add_argument("--backend", default="llvm")
    pb.add_argument("--baseline", default=None, metavar="REV",
                    help="git revision to compare with (default: the last commit; 'none' to skip)")
    pb.add_argument("--json", action="store_true", help="print this version's figures as JSON")
    pb.add_argument("--no-compile", action="store_true", help="with --json: skip compile times")
    pc = sub.add_parser("coredump", help="print the report of a GPU core dump "
                        "(written by a faulting launch under MUTILE_COREDUMP=DIR)")
    pc.add_argument("file", help="a mutile-core-*.npz file")
    pr = sub.add_parser("run", help="run a Python script written for Triton, with `triton` "
                        "aliased to mutile (mutile.as_triton())")
    pr.add_argument("script", help="the script (FILE.py)")
    pr.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    pf = sub.add_parser("profile", help="run a Python script with the Pinghu profiler on "
                        "(mutile.profile()): print the summary, write a trace beside it")
    pf.add_argument("--sample", default="auto", help="auto (sample large grids), off (every "
                    "block), wave (one full wave) or a number of blocks; a sampled launch "
                    "computes only its simulated blocks' outputs")
    pf.add_argument("--machine", default=None, metavar="FILE",
                    help="a machine file (default: MUTILE_MACHINE, else the shipped one)")
    pf.add_argument("-o", "--output", default=None, metavar="TRACE.json",
                    help="the trace file (default: the script's name with .trace.json)")
    pf.add_argument("script", help="the script (FILE.py); `triton` is aliased to mutile")
    pf.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    from .autotune.cli import add_parser as add_tune_parser
    add_tune_parser(sub)
    args = p.parse_args(argv)
    try:
        return _dispatch(args)
    except BrokenPipeError:          # e.g. `mutile ir ... | head`
        sys.stderr.close()
        return 0


def _dispatch(args) -> int:
    if args.cmd == "tune":
        from .autotune.cli import cmd_tune
        return cmd_tune(args)
    if args.cmd == "demo":
        return cmd_demo(args)
    if args.cmd == "ir":
        return cmd_ir(args)
    if args.cmd == "asm":
        return cmd_asm(args)
    if args.cmd == "coredump":
        return cmd_coredump(args)
    if args.cmd == "profile":
        return cmd_profile(args)
    if args.cmd == "run":
        from .compat import run_script
        return run_script(args.script, args.args)
    from .bench import run_bench
    return run_bench(quick=args.quick, backend=args.backend, baseline=args.baseline,
                     as_json=args.json, compile_times=not args.no_compile)


if __name__ == "__main__":
    sys.exit(main())
