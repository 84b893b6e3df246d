"""``mutile tune script.py [args]``: runs a script written for Triton, prints every tuning
decision (kernel, key, winner, runner-up, the table of modelled times) and ``--export``s
them; ``autotune(..., configs_file=...)`` then launches the exported winners without
tuning. Bad configs files are clear errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import poison
from .conftest import block_grid

SCRIPT = '''
import sys
import numpy as np
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w)
                          for b in (16, 32, 64) for w in (2, 4)], key=["n"])
@triton.jit
def double_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * 2.0, mask=offs < n)


rng = np.random.default_rng(int(sys.argv[1]))
for n in (100, 300):
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full_like(x, np.nan)
    double_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, backend="pinghu")
    assert np.array_equal(y, x * 2), "wrong result"
print("script done")
'''


def mutile_tune(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k != "MUTILE_BACKEND"}
    env["MUTILE_TUNE_WORKERS"] = "1"
    return subprocess.run([sys.executable, "-m", "mutile", "tune", *map(str, args)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_tune_prints_the_decisions_and_exports_them(tmp_path):
    script = tmp_path / "tuned_script.py"
    script.write_text(SCRIPT)
    out = tmp_path / "tuned.json"
    r = mutile_tune(tmp_path, "--export", out, script, 7)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "script done" in text and "mutile tune: 2 tuning decisions" in text
    assert text.count("kernel double_kernel") == 2
    assert "key (100, 'float32', 'float32')" in text and "key (300, 'float32', 'float32')" in text
    assert text.count("winner:") == 2 and text.count("runner-up:") == 2
    assert "modelled ms" in text and text.count("measured") >= 12
    doc = json.loads(out.read_text())
    assert doc["format"] == "mutile-tuned-configs" and len(doc["decisions"]) == 2
    for d in doc["decisions"]:
        assert d["kernel"] == "double_kernel" and d["backend"] == "pinghu"
        assert d["config"]["kwargs"]["BLOCK"] in (16, 32, 64) and len(d["table"]) == 6
        assert d["ms"] == min(row["ms"] for row in d["table"])


def test_tune_of_a_missing_or_failing_script(tmp_path):
    r = mutile_tune(tmp_path, tmp_path / "nope.py")
    assert r.returncode == 2 and "no such file" in r.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nsys.exit(4)\n")
    r = mutile_tune(tmp_path, bad)
    assert r.returncode == 4 and "0 tuning decisions" in r.stdout


@mutile.jit
def double_kernel(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    ml.store(Y + offs, ml.load(X + offs, mask=offs < n) * 2.0, mask=offs < n)


def test_configs_file_launches_without_tuning(tmp_path, rng, backend):
    configs = [mutile.Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64) for w in (2, 4)]
    first = mutile.autotune(configs=configs, key=["n"], warmup=1, rep=2)(double_kernel)
    x = rng.standard_normal(300).astype(np.float32)
    first[block_grid(300)](x, poison(x.shape, x.dtype), 300, backend=backend)
    path = tmp_path / "tuned.json"
    from mutile.autotune import report
    assert report.export(path, first.tuning_log) == 1
    calls = []
    prod = mutile.autotune(configs=configs, key=["n"], configs_file=str(path),
                           do_bench=lambda fn, quantiles: calls.append(1) or 1.0)(double_kernel)
    y = poison(x.shape, x.dtype)
    prod[block_grid(300)](x, y, 300, backend=backend)
    np.testing.assert_array_equal(y, x * 2)
    assert calls == [] and prod.tuning_log[-1].source == "configs_file"
    assert prod.best_config is next(c for c in configs
                                    if c.kwargs == first.best_config.kwargs
                                    and c.num_warps == first.best_config.num_warps)
    y = poison((100,), np.float32)                 # a key the file lacks: tuned as usual
    prod[block_grid(100)](x[:100], y, 100, backend=backend)
    np.testing.assert_array_equal(y, x[:100] * 2)
    assert len(calls) == 6 and prod.tuning_log[-1].source == "tuned"


@pytest.mark.parametrize("content, match", [
    (None, "cannot read it"),
    ("{", "is not JSON"),
    ('{"decisions": []}', "not a file written by `mutile tune --export`"),
    ('{"format": "mutile-tuned-configs", "decisions": [{"kernel": "k"}]}', "a decision lacks"),
])
def test_bad_configs_files(tmp_path, content, match):
    path = tmp_path / "tuned.json"
    if content is not None:
        path.write_text(textwrap.dedent(content))
    with pytest.raises(mutile.LaunchError, match=match):
        mutile.autotune(configs=[mutile.Config({"BLOCK": 16})], key=["n"],
                        configs_file=str(path))(double_kernel)
