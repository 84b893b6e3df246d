"""The ``mutile`` command (``python -m mutile``): ``demo``, ``ir``, ``bench``; bad inputs
exit non-zero with a one-line reason and no traceback."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mutile
from mutile import ir as mir

REPO = Path(mutile.__file__).resolve().parents[1]
STAGES = ["ir", "inline", "canonicalize", "cse", "licm", "dce"]
TARGET = "kernels/matmul.py::matmul_kernel"
SIGNATURE = "*fp16,*fp16,*fp32," + ",".join(["i32"] * 9)
CONSTS = ["--const", "BLOCK_M=64", "--const", "BLOCK_N=32", "--const", "BLOCK_K=16",
          "--const", "GROUP_M=8"]


@pytest.fixture
def mutile_cmd(tmp_path):
    """``mutile_cmd(*args)`` runs ``python -m mutile args`` from the repository root with
    a private cache directory; returns the CompletedProcess."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MUTILE_BACKEND", "MUTILE_CHECK_BOUNDS", "MUTILE_VERIFY")}
    env["MUTILE_CACHE_DIR"] = str(tmp_path / "cache")

    def run(*args, timeout=300):
        return subprocess.run([sys.executable, "-m", "mutile", *map(str, args)], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=timeout)
    return run


def sections(stdout: str) -> dict:
    """``// ----- name -----`` headed sections of ``mutile ir``'s output, in order."""
    parts = re.split(r"^// ----- (\w+) -----\n", stdout, flags=re.M)
    assert parts[0].strip() == "", f"output before the first stage: {parts[0][:200]}"
    return {name: text for name, text in zip(parts[1::2], parts[2::2])}


def test_demo(mutile_cmd):
    r = mutile_cmd("demo")
    assert r.returncode == 0, r.stderr
    assert "all results match numpy" in r.stdout
    assert "MISMATCH" not in r.stdout
    assert "Traceback" not in r.stderr


def test_ir_prints_every_stage(mutile_cmd):
    r = mutile_cmd("ir", TARGET, "--signature", SIGNATURE, *CONSTS)
    assert r.returncode == 0, r.stderr
    got = sections(r.stdout)
    assert list(got) == STAGES
    for name, text in got.items():
        m = mir.parse(text.strip() + "\n")           # every stage is valid tile IR
        assert m.kernel == "matmul_kernel", name
        assert "ptr<f16>" in text and "ptr<f32>" in text, name
    # the constants specialized the code: 64x16 tiles of A, 16x32 of B
    assert re.search(r"64x16x?f16", got["dce"]) and re.search(r"16x32x?f16", got["dce"]), \
        got["dce"][:2000]
    # the epilogue is a call in the frontend's IR and inlined from the inline stage on
    assert re.search(r"= call\b.*epilogue", got["ir"]) and "func @epilogue" in got["ir"]
    for name in STAGES[1:]:
        assert not re.search(r"= call\b", got[name]), name

    one = mutile_cmd("ir", TARGET, "--signature", SIGNATURE, *CONSTS, "--pass", "cse")
    assert one.returncode == 0, one.stderr
    assert list(sections(one.stdout)) == ["cse"]
    assert sections(one.stdout)["cse"] == got["cse"]


def test_ir_constants_change_the_code(mutile_cmd):
    base = mutile_cmd("ir", TARGET, "--signature", SIGNATURE, *CONSTS, "--pass", "dce")
    relu = mutile_cmd("ir", TARGET, "--signature", SIGNATURE, *CONSTS, "--const",
                      "ACTIVATION=relu", "--pass", "dce")
    assert base.returncode == 0 and relu.returncode == 0, base.stderr + relu.stderr
    assert base.stdout != relu.stdout
    assert "maximum" in relu.stdout or "max" in relu.stdout


BAD_IR_INPUTS = {
    "no-double-colon": (["kernels/matmul.py", "--signature", SIGNATURE, *CONSTS],
                        ["FILE.py::KERNEL"]),
    "missing-file": (["kernels/no_such_file.py::matmul_kernel", "--signature", SIGNATURE,
                      *CONSTS], ["no such file", "no_such_file.py"]),
    "unknown-kernel": (["kernels/matmul.py::no_such_kernel", "--signature", SIGNATURE, *CONSTS],
                       ["no_such_kernel"]),
    "signature-too-short": ([TARGET, "--signature", "*fp16,*fp16", *CONSTS],
                            ["--signature", "2", "12"]),
    "signature-too-long": ([TARGET, "--signature", SIGNATURE + ",i32", *CONSTS],
                           ["--signature", "13", "12"]),
    "unknown-stage": ([TARGET, "--signature", SIGNATURE, *CONSTS, "--pass", "bogus"],
                      ["bogus", "cse"]),
    "missing-constexpr": ([TARGET, "--signature", SIGNATURE, "--const", "BLOCK_M=64"],
                          ["BLOCK_N"]),
    "const-without-value": ([TARGET, "--signature", SIGNATURE, *CONSTS, "--const", "GROUP_M"],
                            ["NAME=VALUE", "GROUP_M"]),
    "unknown-signature-type": (
        [TARGET, "--signature", SIGNATURE.replace("*fp16", "*fp99", 1), *CONSTS], ["fp99"]),
}


@pytest.mark.parametrize("args, fragments", [
    *BAD_IR_INPUTS.values()], ids=list(BAD_IR_INPUTS))
def test_ir_bad_inputs(args, fragments, mutile_cmd):
    r = mutile_cmd("ir", *args)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr, r.stderr
    for f in fragments:
        assert f in r.stderr, f"{f!r} not in: {r.stderr}"
    assert len(r.stderr.strip().splitlines()) <= 3, r.stderr
    assert "// -----" not in r.stdout


def test_ir_reports_a_compilation_error_with_its_location(mutile_cmd, tmp_path):
    bad = tmp_path / "bad_kernel.py"
    bad.write_text("import mutile\nimport mutile.language as ml\n\n\n@mutile.jit\n"
                   "def k(X, BLOCK: ml.constexpr):\n"
                   "    ml.static_assert(BLOCK < 16, 'BLOCK is too big')\n"
                   "    ml.store(X + ml.arange(0, BLOCK), 1.0)\n")
    r = mutile_cmd("ir", f"{bad}::k", "--signature", "*fp32", "--const", "BLOCK=64")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr, r.stderr
    assert f"{bad}:7" in r.stderr and "BLOCK is too big" in r.stderr
    ok = mutile_cmd("ir", f"{bad}::k", "--signature", "*fp32", "--const", "BLOCK=8")
    assert ok.returncode == 0, ok.stderr
    assert list(sections(ok.stdout)) == STAGES


def test_no_command_is_a_usage_error(mutile_cmd):
    r = mutile_cmd()
    assert r.returncode != 0 and "usage" in r.stderr.lower() and "Traceback" not in r.stderr


@pytest.mark.slow
def test_bench_quick(mutile_cmd):
    r = mutile_cmd("bench", "--quick", timeout=900)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    num = r"(\d+(?:\.\d+)?)"
    assert re.search(r"same number of threads", out), out
    # 1. matmul: mutile and numpy GFLOP/s at the same thread count, and their ratio
    rows = re.findall(rf"^matmul fp32 (\d+)\^3 \((\d+) threads?\)\s+GFLOP/s\s+{num}\s+{num}"
                      rf"\s+{num}x\s*$", out, re.M)
    assert {t for _, t, *_ in rows} >= {"1"} and len(rows) >= 2, out
    for n, _, ours, ref, ratio in rows:
        ours, ref, ratio = float(ours), float(ref), float(ratio)
        assert ours > 0 and ref > 0
        # the figures are printed to 0.1, the ratio to 0.01: allow for that rounding
        lo, hi = (ours - 0.05) / (ref + 0.05), (ours + 0.05) / max(ref - 0.05, 1e-9)
        assert lo - 0.005 <= ratio <= hi + 0.005, (n, ours, ref, ratio)
    # 2. attention forward against naive numpy (ratio = numpy time / mutile time)
    att = re.findall(rf"^attention fwd \d+h seq\d+ d\d+ fp32 \(\d+ threads?\)\s+ms\s+{num}"
                     rf"\s+{num}\s+{num}x\s*$", out, re.M)
    assert att, out
    for ours, ref, ratio in att:
        ours, ref, ratio = float(ours), float(ref), float(ratio)
        lo, hi = (ref - 0.05) / (ours + 0.05), (ref + 0.05) / max(ours - 0.05, 1e-9)
        assert lo - 0.005 <= ratio <= hi + 0.005, (ours, ref, ratio)
    # 3. compile times: cold, then warm from the disk cache (a hit, not flagged)
    cold = re.search(rf"^compile cold \(empty cache\)\s+ms\s+{num}\s*$", out, re.M)
    warm = re.search(rf"^compile warm \(disk cache\)\s+ms\s+{num}\s*$", out, re.M)
    assert cold and warm, out
    assert float(cold.group(1)) > float(warm.group(1)) > 0
    assert "UNEXPECTED" not in out
    # 4. the previous-version table, or the reason it is missing
    assert re.search(r"^vs previous version", out, re.M), out


@pytest.mark.slow
def test_bench_pinghu_quick(mutile_cmd):
    """The interpreter's rows: time, error against numpy, and Triton's figure where the
    issue gives one (none for the quick sizes)."""
    r = mutile_cmd("bench", "--backend", "pinghu", "--quick", timeout=900)
    assert r.returncode == 0, r.stderr
    num = r"(\d+(?:\.\d+)?)"
    rows = re.findall(rf"^(matmul fp16 256\^3 \(64x64x32 tiles\)|attention fwd 4h seq256 d64 "
                      rf"float(?:16|32))\s+s\s+{num}\s+max \|err\| ([\d.e+-]+)$", r.stdout, re.M)
    assert len(rows) == 3, r.stdout
    for name, secs, err in rows:
        assert float(secs) > 0 and float(err) < 1e-2, (name, err)


def test_asm_command_errors_are_one_line(mutile_cmd):
    r = mutile_cmd("asm", TARGET, "--signature", "*fp16")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "--signature lists 1 types" in r.stderr
