"""A drop-in ``triton`` (issue 10, family 12): ``mutile.as_triton()`` installs ``triton``,
``triton.language`` (with ``extra.libdevice``, ``extra.cuda``, ``extra.musa``),
``triton.testing``, ``triton.runtime`` and ``triton.tools`` as aliases of mutile's modules;
``mutile run script.py [args]`` runs a script written for Triton with them."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import compat


@pytest.fixture
def triton():
    """The aliases, installed for one test and removed after it."""
    module = mutile.as_triton()
    yield module
    compat.remove_triton()
    assert "triton" not in sys.modules


def test_the_aliases_are_mutiles_modules(triton):
    import triton.language as tl
    import triton.language.extra.cuda.libdevice as cuda_libdevice
    import triton.language.extra.libdevice as libdevice
    import triton.language.extra.musa.libdevice as musa_libdevice
    import triton.runtime
    import triton.testing
    from triton.runtime import driver
    from triton.tools.tensor_descriptor import TensorDescriptor
    import mutile.language.extra.libdevice as mine

    assert tl is ml and tl.constexpr is ml.constexpr and tl.extra is ml.extra
    assert libdevice is mine
    assert cuda_libdevice is sys.modules["mutile.language.extra.cuda.libdevice"]
    assert musa_libdevice is sys.modules["mutile.language.extra.musa.libdevice"]
    assert triton.testing is mutile.testing and triton.testing.do_bench is mutile.testing.do_bench
    assert TensorDescriptor is mutile.TensorDescriptor
    assert driver is compat.driver.driver and driver.active.get_current_device() == 0
    assert triton.jit is mutile.jit and triton.Config is mutile.Config
    assert triton.heuristics is mutile.heuristics
    assert triton.KernelInterface is mutile.KernelInterface
    assert triton.JITFunction is triton.runtime.JITFunction is mutile.JITFunction
    assert triton.runtime.jit.JITFunction is mutile.JITFunction
    assert triton.runtime.Heuristics is mutile.Heuristics
    assert triton.cdiv(10, 4) == 3 and triton.next_power_of_2(33) == 64
    assert triton.__version__ == compat.TRITON_VERSION
    major, minor = (int(v) for v in triton.__version__.split(".")[:2])
    assert (major, minor) >= (3, 0)         # published code picks its 3.x paths


def test_autotune_is_mutiles(triton):
    """``triton.autotune`` and ``triton.runtime.Autotuner`` are mutile's real ones (issue 13;
    tests/autotune/ tests them), and FlagGems' way of subclassing the tuner works."""
    import triton.runtime.autotuner as autotuner
    assert triton.autotune is mutile.autotune is autotuner.autotune
    assert triton.runtime.Autotuner is mutile.Autotuner is autotuner.Autotuner

    @triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})],
                     key=["n"])
    @triton.jit
    def k(X, n, BLOCK: triton.language.constexpr):
        pass

    assert isinstance(k, triton.runtime.Autotuner) and k.keys == ["n"] and len(k.configs) == 2

    class LibTuner(triton.runtime.Autotuner):       # FlagGems subclasses it at import
        pass

    t = LibTuner(None, [], [], [], None, None)
    assert t.configs[0].kwargs == {} and t.cache == {}


def test_a_missing_triton_module_names_mutile(triton, monkeypatch):
    with pytest.raises(ImportError) as e:
        import triton.compiler.compiler      # noqa: F401
    assert "mutile" in str(e.value) and "triton.compiler" in str(e.value)
    with pytest.raises(ImportError) as e:
        import triton.language.no_such_module      # noqa: F401
    assert "mutile.language.no_such_module" in str(e.value)


def test_without_mutiles_libdevice_its_alias_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "mutile.language.extra.libdevice", None)
    monkeypatch.delitem(sys.modules, "triton.language.extra.libdevice", raising=False)
    try:
        mutile.as_triton()
        with pytest.raises(ImportError) as e:
            import triton.language.extra.libdevice      # noqa: F401
        assert "mutile.language.extra.libdevice cannot be imported" in str(e.value)
    finally:
        compat.remove_triton()


def test_a_real_triton_is_not_replaced(monkeypatch):
    real = types.ModuleType("triton")
    real.__file__ = "/site-packages/triton/__init__.py"
    monkeypatch.setitem(sys.modules, "triton", real)
    with pytest.raises(mutile.MutileError) as e:
        mutile.as_triton()
    assert "a real triton is already imported" in str(e.value)
    assert "/site-packages/triton/__init__.py" in str(e.value)
    assert sys.modules["triton"] is real


def test_as_triton_twice_is_the_same_module(triton):
    assert mutile.as_triton() is triton and sys.modules["triton"] is triton


# ---------------------------------------------------------------- mutile run
SCRIPT = '''
"""Written for Triton, as its vector-add tutorial: only `mutile run` makes it mutile's."""
import sys

import numpy as np
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.heuristics({"EVEN": lambda args: args["n_elements"] % args["BLOCK_SIZE"] == 0})
@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr,
               EVEN: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EVEN:
        x = tl.load(x_ptr + offsets)
        y = tl.load(y_ptr + offsets)
        tl.store(output_ptr + offsets, x + y)
    else:
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(output_ptr + offsets, x + y, mask=mask)


def add(x, y, backend):
    output = np.full_like(x, np.nan)
    n_elements = output.size
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]), )
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=64, backend=backend)
    return output


if __name__ == "__main__":
    backend, out, seed, status = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(seed)
    arrays = {}
    for size in (256, 300):                 # a multiple of the block (EVEN) and not
        x = rng.standard_normal(size).astype(np.float32)
        y = rng.standard_normal(size).astype(np.float32)
        arrays.update({f"x{size}": x, f"y{size}": y, f"z{size}": add(x, y, backend)})
    np.savez(out, device=str(DEVICE), version=triton.__version__, name=__name__, **arrays)
    sys.exit(status)
'''


def mutile_run(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k != "MUTILE_BACKEND"}
    return subprocess.run([sys.executable, "-m", "mutile", "run", *map(str, args)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_mutile_run_runs_a_script_written_for_triton(backend, tmp_path, rng):
    script = tmp_path / "tutorial_add.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = tmp_path / "out.npz"
    r = mutile_run(tmp_path, script, backend, out, int(rng.integers(1 << 30)), 3)
    assert r.returncode == 3, r.stderr            # the script's exit status
    got = np.load(out)
    assert str(got["device"]) == "cpu" and str(got["name"]) == "__main__"
    assert str(got["version"]) == compat.TRITON_VERSION
    for size in (256, 300):
        x, y, z = got[f"x{size}"], got[f"y{size}"], got[f"z{size}"]
        assert x.shape == (size,) and not np.isnan(z).any()
        np.testing.assert_array_equal(z, (x.astype(np.float64) + y).astype(np.float32))


def test_mutile_run_reports_a_missing_script_and_a_failing_one(tmp_path):
    r = mutile_run(tmp_path, tmp_path / "nope.py")
    assert r.returncode == 2 and "no such file" in r.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport triton\nprint(sys.argv[1:])\nraise ValueError('boom')\n")
    r = mutile_run(tmp_path, bad, "--flag", "x")
    assert r.returncode == 1 and "ValueError: boom" in r.stderr
    assert r.stdout.strip() == "['--flag', 'x']"
