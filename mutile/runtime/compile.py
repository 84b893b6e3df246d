"""Build one specialization: frontend -> passes -> backend, through the disk cache."""
from __future__ import annotations

import importlib
import os
import time

from ..errors import CompilationError, LaunchError
from ..frontend import RuntimeArg, compile_kernel
from ..ir import types as T
from ..passes import run_pipeline
from . import cache
from .kernel import CompiledKernel
from .specialize import stored_params

BACKENDS = {"llvm": "mutile.backends.llvm", "pinghu": "mutile.backends.pinghu"}
_PAYLOAD_KEYS = frozenset({"binary", "asm", "metadata", "deps", "stored"})


def get_backend(name: str):
    """The backend module called ``name`` (``compile``, ``serialize``, ``deserialize``)."""
    if name not in BACKENDS:
        known = ", ".join(sorted(BACKENDS))
        raise LaunchError(f"unknown backend '{name}' (available: {known})")
    return importlib.import_module(BACKENDS[name])


def _spec_repr(jitfn, spec):
    return tuple((p, str(v) if isinstance(v, T.Type) and p not in jitfn.constexpr_names else
                  ("const", repr(v))) for p, v in spec.items())


def frontend_and_passes(jitfn, spec, options, verify=None):
    """IR after the frontend and after each pass: (module, stages, compiler)."""
    bindings = {p: (RuntimeArg(v) if p not in jitfn.constexpr_names else v)
                for p, v in spec.items()}
    try:
        module, comp = compile_kernel(jitfn, bindings)
        stages = {"ir": str(module)}
        module, pass_stages = run_pipeline(module, verify=verify)
    except CompilationError as e:
        raise type(e)(e.msg, e.loc) from None
    stages.update(pass_stages)
    return module, stages, comp


def build(jitfn, spec, options):
    backend_name = options.get("backend", "llvm")
    backend = get_backend(backend_name)
    key_options = tuple(sorted((k, repr(v)) for k, v in options.items() if k != "num_threads"))
    key = cache.make_key("kernel", jitfn.fn.__module__, jitfn.fn.__qualname__,
                         cache.source_hash(jitfn.fn), _spec_repr(jitfn, spec), key_options)
    t0 = time.perf_counter()
    # an edited listing in MUTILE_OVERRIDE_DIR replaces the program: never reuse a build
    payload = None if os.environ.get("MUTILE_OVERRIDE_DIR") else cache.load(key)
    if not (isinstance(payload, dict) and _PAYLOAD_KEYS <= payload.keys()
            and isinstance(payload["deps"], list)):
        payload = None
    if payload is not None and cache.deps_hold(payload["deps"]):
        try:
            binary = backend.deserialize(payload["binary"])
        except Exception:  # a stale or damaged object: rebuild below
            binary = None
        if binary is not None:
            meta = dict(payload["metadata"], cache_hit=True,
                        compile_seconds=time.perf_counter() - t0)
            return CompiledKernel(jitfn, jitfn.params, spec, options, binary, payload["asm"], meta,
                                  payload["stored"], payload["deps"])
    module, stages, comp = frontend_and_passes(jitfn, spec, options)
    binary = backend.compile(module, dict(options))
    asm = dict(stages)
    # the kernel's own source is part of the key; its callees are dependencies
    deps = [("jit", f.fn.__module__, f.fn.__qualname__, cache.source_hash(f.fn))
            for f in comp.jit_functions if f is not jitfn]
    deps += [("global", mod, name, repr(v)) for (_, mod, name), v in comp.globals_read.items()]
    stored = stored_params(module)
    meta = {"name": module.kernel, "backend": backend_name, "num_warps": options.get("num_warps"),
            "num_stages": options.get("num_stages"),
            "signature": {p: str(v) for p, v in spec.items()
                          if p in jitfn.params and p not in jitfn.constexpr_names},
            "constants": {p: v for p, v in spec.items() if p in jitfn.constexpr_names},
            "cache_key": key}
    meta.update(getattr(binary, "metadata", {}))
    if not os.environ.get("MUTILE_OVERRIDE_DIR"):
        cache.store(key, {"binary": backend.serialize(binary), "asm": asm, "metadata": meta,
                          "deps": deps, "stored": stored})
    meta = dict(meta, cache_hit=False, compile_seconds=time.perf_counter() - t0)
    return CompiledKernel(jitfn, jitfn.params, spec, options, binary, asm, meta, stored, deps)
