"""Triton's host API on mutile kernels (issue 10, family 10): ``@heuristics`` over ``@jit``
and over each other, ``KernelInterface`` subclasses shaped like FlagGems' ``LibEntry``,
``JITFunction``'s attributes (``fn``, ``src``, ``arg_names``, ``params``, ``constexprs``),
``run(..., warmup=True)``, compiled kernels launched with their runtime arguments only,
``constexpr`` values wherever Triton takes them, and ``triton.runtime.driver.active``."""
from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.compat.driver import driver

from ..conftest import poison


@mutile.jit
def scale_kernel(X, Y, n, alpha, BLOCK: ml.constexpr, SQUARE: ml.constexpr):
    """Y = alpha * X (squared first when SQUARE), in blocks of BLOCK."""
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    x = ml.load(X + offs, mask=mask, other=0.0)
    if SQUARE:
        x = x * x
    ml.store(Y + offs, x * alpha, mask=mask)


def reference(x, alpha, square):
    x64 = x.astype(np.float64)
    return (x64 * x64 if square else x64) * alpha


def check(y, x, alpha, square):
    assert not np.isnan(y).any(), "elements left unwritten"
    np.testing.assert_allclose(y, reference(x, alpha, square), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- heuristics
@mutile.heuristics({"BLOCK": lambda args: min(mutile.next_power_of_2(args["n"]), 64)})
@mutile.heuristics({"SQUARE": lambda args: args["alpha"] < 0})
@mutile.jit
def heur_scale(X, Y, n, alpha, BLOCK: ml.constexpr, SQUARE: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    x = ml.load(X + offs, mask=mask, other=0.0)
    if SQUARE:
        x = x * x
    ml.store(Y + offs, x * alpha, mask=mask)


@pytest.mark.parametrize("n, alpha", [(37, 1.5), (200, -0.75)])
def test_stacked_heuristics_choose_the_meta_parameters(backend, rng, n, alpha):
    x = rng.standard_normal(n).astype(np.float32)
    y = poison(n, np.float32)
    k = heur_scale[lambda meta: (mutile.cdiv(n, meta["BLOCK"]),)](x, y, n, alpha,
                                                                   backend=backend)
    check(y, x, alpha, alpha < 0)
    assert k.spec["BLOCK"] == min(mutile.next_power_of_2(n), 64)
    assert k.spec["SQUARE"] is (alpha < 0)


def test_an_inner_heuristic_sees_the_outer_ones_values(backend, rng):
    seen = []

    def square_if_big_block(args):
        seen.append(args["BLOCK"])
        return args["BLOCK"] >= 32

    kernel = mutile.heuristics({"BLOCK": lambda a: 32})(
        mutile.heuristics({"SQUARE": square_if_big_block})(scale_kernel))
    x = rng.standard_normal(50).astype(np.float32)
    y = poison(50, np.float32)
    kernel[(2,)](x, y, 50, 2.0, backend=backend)
    assert seen == [32]
    check(y, x, 2.0, True)


def test_heuristics_sit_under_a_launch_option_and_compute_options(backend, rng):
    kernel = mutile.heuristics({"num_warps": lambda a: 2 if a["n"] < 100 else 4,
                                "BLOCK": lambda a: 16, "SQUARE": lambda a: False})(scale_kernel)
    x = rng.standard_normal(40).astype(np.float32)
    y = poison(40, np.float32)
    k = kernel[(3,)](x, y, 40, 0.5, backend=backend)
    check(y, x, 0.5, False)
    assert k.metadata["num_warps"] == 2


def test_a_failing_heuristic_is_a_launch_error_naming_it(rng):
    kernel = mutile.heuristics({"BLOCK": lambda a: a["size"]})(scale_kernel)   # no 'size'
    x = rng.standard_normal(8).astype(np.float32)
    with pytest.raises(mutile.LaunchError) as e:
        kernel[(1,)](x, poison(8, np.float32), 8, 1.0, SQUARE=False)
    msg = str(e.value)
    assert "heuristic for 'BLOCK'" in msg and "KeyError" in msg and "size" in msg
    assert __file__ in msg


@pytest.mark.parametrize("make, fragment", [
    (lambda: mutile.heuristics({"BLOCK": 16}), "dict of meta-parameter name"),
    (lambda: mutile.heuristics({"BLOCK": lambda a: 16})(lambda X: None), "above @jit"),
])
def test_bad_heuristics_are_refused(make, fragment):
    with pytest.raises(mutile.LaunchError) as e:
        make()
    assert fragment in str(e.value)


def test_a_heuristic_for_an_unknown_parameter_is_refused(rng):
    kernel = mutile.heuristics({"BLOCKK": lambda a: 16})(scale_kernel)
    x = rng.standard_normal(8).astype(np.float32)
    with pytest.raises(mutile.LaunchError) as e:
        kernel[(1,)](x, poison(8, np.float32), 8, 1.0, BLOCK=8, SQUARE=False)
    assert "BLOCKK" in str(e.value)


# ---------------------------------------------------------------- KernelInterface
class LibEntry(mutile.KernelInterface):
    """FlagGems' ``LibEntry`` (src/flag_gems/utils/libentry.py), cut to what it asks of
    the runtime: the first launch of an argument key goes through ``self.fn.run`` (which
    compiles); it keeps the compiled kernel, recomputes the heuristics' constexprs for the
    grid, and later launches the compiled kernel with the runtime arguments only."""

    def __init__(self, fn):
        self.fn, self.arg_names = fn, fn.arg_names
        while not isinstance(fn, mutile.JITFunction):
            fn = fn.fn
        self.jit_function = fn
        self.specialize_indices = [p.num for p in fn.params
                                   if not p.is_constexpr and not p.do_not_specialize]
        self.do_not_specialize_indices = [p.num for p in fn.params
                                          if not p.is_constexpr and p.do_not_specialize]
        self.kernel_cache, self.first_runs = {}, 0

    def run(self, *args, **kwargs):
        grid = kwargs["grid"]
        k_args, key = {}, []
        names = list(self.jit_function.signature.parameters)
        for i, arg in enumerate(args):
            if i in self.specialize_indices or i in self.do_not_specialize_indices:
                k_args[names[i]] = arg
                key.append(str(arg.dtype) if hasattr(arg, "dtype") else type(arg).__name__)
            else:
                key.append(arg)
        for p in self.jit_function.params[len(args):]:
            if p.name in kwargs:
                val = kwargs[p.name]
            elif not p.has_default:
                continue
            else:
                val = p.default
            if p.is_constexpr:
                key.append(val)
            else:
                k_args[p.name] = val
        key = tuple(key)
        if key not in self.kernel_cache:
            self.first_runs += 1
            kernel = self.fn.run(*args, **kwargs)
            constexprs, fn = {}, self.fn
            while not isinstance(fn, mutile.JITFunction):
                if isinstance(fn, mutile.Heuristics):
                    for v, heur in fn.values.items():
                        constexprs[v] = heur({**dict(zip(fn.arg_names, args)), **kwargs,
                                              **constexprs})
                fn = fn.fn
            for p in self.jit_function.params:
                if p.is_constexpr and p.name not in constexprs and p.has_default:
                    constexprs[p.name] = p.default
            self.kernel_cache[key] = (kernel, constexprs)
            return kernel, constexprs
        kernel, constexprs = self.kernel_cache[key]
        if callable(grid):
            grid = grid({**dict(zip(self.arg_names, args)), **kwargs, **constexprs})
        grid = tuple(grid) + (1, 1)
        kernel[grid[0:3]](*k_args.values())
        return kernel, constexprs


def libentry():
    return LibEntry


@libentry()
@mutile.heuristics({"BLOCK": lambda args: 32 if args["n"] > 40 else 16})
@mutile.jit(do_not_specialize=["n"])
def lib_scale(X, Y, n, alpha, BLOCK: ml.constexpr, SQUARE: ml.constexpr = False):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    x = ml.load(X + offs, mask=mask, other=0.0)
    if SQUARE:
        x = x * x
    ml.store(Y + offs, x * alpha, mask=mask)


def test_a_libentry_subclass_compiles_once_then_launches_the_compiled_kernel(backend, rng,
                                                                            compiles):
    entry = LibEntry(lib_scale.fn)          # a fresh cache of its own for this backend
    assert entry.specialize_indices == [0, 1, 3] and entry.do_not_specialize_indices == [2]
    grid = lambda meta: (mutile.cdiv(meta["n"], meta["BLOCK"]),)       # noqa: E731
    for n, alpha in [(50, 1.25), (70, -2.0), (90, 0.5)]:
        x = rng.standard_normal(n).astype(np.float32)
        y = poison(n, np.float32)
        kernel, constexprs = entry[grid](x, y, n, alpha, backend=backend)
        check(y, x, alpha, False)
        assert constexprs == {"BLOCK": 32, "SQUARE": False}
        assert isinstance(kernel, mutile.CompiledKernel)
    assert entry.first_runs == 1 and compiles == ["lib_scale"]


def test_a_compiled_kernel_takes_its_runtime_arguments_only(backend, rng):
    x = rng.standard_normal(60).astype(np.float32)
    k = scale_kernel.warmup(x, x, 60, 1.0, BLOCK=16, SQUARE=True, backend=backend)
    y = poison(60, np.float32)
    k[(4,)](x, y, 60, 3.0)                      # Triton's form: no constexprs
    check(y, x, 3.0, True)
    y2 = poison(60, np.float32)
    k[(4,)](x, y2, 60, 3.0, BLOCK=16, SQUARE=True)       # every argument also works
    check(y2, x, 3.0, True)
    with pytest.raises(mutile.LaunchError) as e:
        k[(4,)](x, y2, 60, 3.0, BLOCK=32, SQUARE=True)
    assert "BLOCK=16" in str(e.value)


def test_run_with_warmup_compiles_without_launching(backend, rng):
    x = rng.standard_normal(20).astype(np.float32)
    y = poison(20, np.float32)
    k = scale_kernel.run(x, y, 20, 2.0, BLOCK=32, SQUARE=False, grid=(1,), warmup=True,
                         backend=backend)
    assert isinstance(k, mutile.CompiledKernel) and np.isnan(y).all()
    k2 = heur_scale.warmup(x, y, 20, 2.0, grid=(1,), backend=backend)
    assert k2.spec["BLOCK"] == 32 and np.isnan(y).all()
    heur_scale[(1,)](x, y, 20, 2.0, backend=backend)
    check(y, x, 2.0, False)


def test_run_without_a_grid_is_a_launch_error(rng):
    x = rng.standard_normal(4).astype(np.float32)
    with pytest.raises(mutile.LaunchError) as e:
        scale_kernel.run(x, x, 4, 1.0, BLOCK=4, SQUARE=False)
    assert "needs a grid" in str(e.value)


def test_a_kernel_interface_without_run_says_so():
    class Empty(mutile.KernelInterface):
        pass

    with pytest.raises(NotImplementedError) as e:
        Empty()[(1,)](1)
    assert "Empty must implement run" in str(e.value)


# ---------------------------------------------------------------- attributes
def test_jit_function_attributes_are_tritons():
    k = lib_scale.jit_function
    assert k.fn.__name__ == "lib_scale" and k.__name__ == "lib_scale"
    assert k.src.startswith("def lib_scale(") and "@" not in k.src.splitlines()[0]
    assert k.src == inspect.getsource(k.fn)[inspect.getsource(k.fn).index("def "):]
    assert k.arg_names == ["X", "Y", "n", "alpha", "BLOCK", "SQUARE"]
    assert k.constexprs == [4, 5]
    assert [p.num for p in k.params] == list(range(6))
    assert [p.name for p in k.params] == k.arg_names and k.params[4] == "BLOCK"
    assert [p.is_constexpr for p in k.params] == [False] * 4 + [True] * 2
    assert [p.do_not_specialize for p in k.params] == [False, False, True, False, False, False]
    assert k.params[5].has_default and k.params[5].default is False
    assert not k.params[4].has_default and k.params[4].annotation == "constexpr"
    assert k.params[0].annotation == "" and k.starting_line_number == \
        inspect.getsourcelines(k.fn)[1]
    assert isinstance(k.cache_key, str) and len(k.cache_key) >= 32
    assert repr(k).startswith("JITFunction(") and k.signature == inspect.signature(k.fn)


@pytest.mark.parametrize("dns, fragment", [(["m"], "'m' is not a parameter"),
                                           ([7], "index 7 is not a parameter")])
def test_do_not_specialize_names_parameters(dns, fragment):
    with pytest.raises(mutile.LaunchError) as e:
        mutile.jit(do_not_specialize=dns)(scale_kernel.fn)
    assert fragment in str(e.value)


def test_do_not_specialize_takes_indices():
    k = mutile.jit(do_not_specialize=[2, "alpha"])(scale_kernel.fn)
    assert [p.do_not_specialize for p in k.params] == [False, False, True, True, False, False]


# ---------------------------------------------------------------- constexpr
@mutile.jit
def string_annotated(X, Y, n, BLOCK: "tl.constexpr", SQUARE: "ml.constexpr"):  # noqa: F821
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    mask = offs < n
    x = ml.load(X + offs, mask=mask, other=0.0)
    if SQUARE:
        x = x * x
    ml.store(Y + offs, x, mask=mask)


def test_constexpr_wherever_triton_takes_it(backend, rng):
    """``tl.constexpr`` as a string annotation, as launch values of constexpr and runtime
    parameters, in the grid and as an option."""
    assert string_annotated.constexprs == [3, 4]
    n = ml.constexpr(45)
    x = rng.standard_normal(45).astype(np.float32)
    y = poison(45, np.float32)
    k = string_annotated[(ml.constexpr(3),)](x, y, n, BLOCK=ml.constexpr(16),
                                             SQUARE=ml.constexpr(True),
                                             num_warps=ml.constexpr(2), backend=backend)
    check(y, x, 1.0, True)
    assert k.spec["BLOCK"] == 16 and k.metadata["num_warps"] == 2


# ---------------------------------------------------------------- driver
def machine():
    return importlib.import_module("mutile.backends.pinghu.machine.device").PINGHU


def test_the_active_driver_answers_device_questions():
    active = driver.active
    assert active.get_current_device() == 0 and active.get_current_stream() == 0
    dev = active.get_active_torch_device()          # torch's, or one like it without torch
    assert str(dev) == "cpu" and dev.type == "cpu" and dev.index is None
    props = active.utils.get_device_properties(dev.index)
    m = machine()
    assert props["multiprocessor_count"] == m.mp_count
    assert props["max_shared_mem"] == m.shared_bytes
    assert props["warpSize"] == m.warp_size and props["max_num_regs"] == m.register_file
    target = active.get_current_target()
    assert target.backend == "musa" and target.warp_size == m.warp_size
    active.get_device_interface().synchronize()
    assert active.get_benchmarker() is mutile.testing.do_bench
    with pytest.raises(mutile.LaunchError) as e:
        active.set_current_device(1)
    assert "one device, 0" in str(e.value)


def test_a_driver_can_be_set_active_and_reset():
    class Other:
        pass

    other = Other()
    driver.set_active(other)
    try:
        assert driver.active is other
    finally:
        driver.reset_active()
    assert driver.active is driver.default
