"""``mutile profile script.py [args]``: the script runs as under ``mutile run`` inside a
profiling session; the summary is printed and the trace written beside the script, also
when the script fails (its traceback and a non-zero status still come out)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# A script that "launches" by handing records to the active session (the Pinghu
# launcher's seam), checks the session's parameters, then maybe fails.
SCRIPT = '''
import sys
import numpy as np
import triton                                  # the aliases of `mutile run` are installed
sys.path.insert(0, {kit!r})
from record_kit import make_record
from mutile.backends.pinghu.machine.timing import session

prof = session.active()
print("sample", repr(prof.sample), "tme", prof.machine.value("memory", "tme_bytes_per_cycle"))
print("argv", sys.argv[1:])
rng = np.random.default_rng(int(sys.argv[1]))
for kernel in ("attn_fwd", "gemm_ws"):
    prof.add(make_record(rng, kernel=kernel))
if sys.argv[2] == "raise":
    raise RuntimeError("the script failed after two launches")
sys.exit(int(sys.argv[2]))
'''


def mutile_profile(cwd, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MUTILE_") or
           k == "MUTILE_CACHE_DIR"}
    return subprocess.run([sys.executable, "-m", "mutile", "profile", *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "my_model.py"
    path.write_text(textwrap.dedent(SCRIPT.format(kit=str(HERE))))
    return path


def test_profile_prints_the_summary_and_writes_the_trace(script, tmp_path):
    r = mutile_profile(tmp_path, script, 7, 0)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "sample None tme 128" in out and "argv ['7', '0']" in out
    assert out.index("argv") < out.index("==== mutile profile")
    assert "mutile profile: 2 Pinghu launches" in out
    for section in ("Kernels", "Launches", "Utilization", "Warp states", "Roofline",
                    "Kernel attn_fwd (launch 0)", "Kernel gemm_ws (launch 1)"):
        assert f"\n{section}" in out, section
    trace = tmp_path / "my_model.trace.json"
    assert f"trace: {trace}" in out
    doc = json.loads(trace.read_text())
    launches = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "launch"]
    assert launches == ["attn_fwd", "gemm_ws"]


def test_options_sample_machine_output_and_exit_status(script, tmp_path):
    fast = tmp_path / "fast.toml"
    fast.write_text('[memory]\ntme_bytes_per_cycle = { value = 256, source = "what if" }\n')
    out = tmp_path / "sub" / "t.json"
    out.parent.mkdir()
    r = mutile_profile(tmp_path, "--sample", "wave", "--machine", fast, "-o", out, script, 3, 5)
    assert r.returncode == 5, r.stderr                # the script's own exit status
    assert "sample 'wave' tme 256" in r.stdout and "argv ['3', '5']" in r.stdout
    assert json.loads(out.read_text())["otherData"]["machine"] == str(fast)
    assert not (tmp_path / "my_model.trace.json").exists()
    for given, want in (("off", "False"), ("12", "12"), ("auto", "None")):
        r = mutile_profile(tmp_path, "--sample", given, script, 1, 0)
        assert r.returncode == 0 and f"sample {want} tme 128" in r.stdout, r.stderr


def test_a_failing_script_still_gets_its_profile(script, tmp_path):
    r = mutile_profile(tmp_path, script, 11, "raise")
    assert r.returncode == 1
    assert "Traceback" in r.stderr and "RuntimeError: the script failed after two launches" \
        in r.stderr and "my_model.py" in r.stderr
    assert "mutile profile: 2 Pinghu launches" in r.stdout
    doc = json.loads((tmp_path / "my_model.trace.json").read_text())
    assert len([e for e in doc["traceEvents"] if e.get("cat") == "launch"]) == 2


@pytest.mark.parametrize("args, words", [
    (["--sample", "0"], ["sample=0", "positive"]),
    (["--sample", "lots"], ["--sample 'lots'", "auto, off, wave"]),
    (["--machine", "nope.toml"], ["nope.toml"]),
])
def test_bad_options_are_one_line_errors(script, tmp_path, args, words):
    r = mutile_profile(tmp_path, *args, script, 1, 0)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr
    assert "argv" not in r.stdout                     # the script did not run


def test_a_missing_script(tmp_path):
    r = mutile_profile(tmp_path, tmp_path / "nope.py")
    assert r.returncode == 2 and "no such file" in r.stderr and r.stdout == ""
