"""``mutile.profile``: the session's parameters, its registration with the Pinghu backend,
and the device timeline it places launches on."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mutile
from mutile import machines
from mutile.backends.pinghu.machine.timing import session

from .record_kit import make_record

REPO = Path(mutile.__file__).resolve().parents[1]


def test_exported_from_mutile():
    assert mutile.profile is mutile.profiler.profile
    assert "profile" in mutile.__all__


@pytest.mark.parametrize("sample", [None, False, "wave", 1, 64, np.int32(7)])
def test_sample_accepted(sample):
    prof = mutile.profile(sample=sample)
    assert prof.sample == sample and type(prof.sample) is (
        int if isinstance(sample, np.integer) else type(sample))


@pytest.mark.parametrize("sample, words", [
    (True, ["True", "bool"]), (0, ["sample=0", "positive"]), (-4, ["-4", "positive"]),
    ("waves", ["'waves'", "wave"]), ("", ["''"]), (2.0, ["2.0", "float"]),
    ([64], ["[64]", "list"])])
def test_bad_sample_is_a_clear_error(sample, words):
    with pytest.raises(ValueError) as e:
        mutile.profile(sample=sample)
    for w in words:
        assert w in str(e.value), str(e.value)
    assert session.active() is None


def test_machine_default_path_and_file(tmp_path, monkeypatch):
    monkeypatch.delenv(machines.ENV, raising=False)
    assert mutile.profile().machine is machines.default()
    fast = tmp_path / "fast_tme.toml"
    fast.write_text('[memory]\ntme_bytes_per_cycle = { value = 256, source = "what if" }\n')
    for given in (fast, str(fast), machines.load(fast)):
        m = mutile.profile(machine=given).machine
        assert m.value("memory", "tme_bytes_per_cycle") == 256
        assert m.hash != machines.default().hash
    monkeypatch.setenv(machines.ENV, str(fast))
    assert mutile.profile().machine.value("memory", "tme_bytes_per_cycle") == 256


def test_bad_machine_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="machine=42 must be a path"):
        mutile.profile(machine=42)
    with pytest.raises(machines.MachineFileError, match="nope.toml"):
        mutile.profile(machine=tmp_path / "nope.toml")


def test_the_with_block_registers_the_session_and_pops_it():
    assert session.active() is None
    with mutile.profile() as outer:
        assert session.active() is outer
        with mutile.profile(sample="wave") as inner:
            assert session.active() is inner and inner is not outer
        assert session.active() is outer
    assert session.active() is None


def test_an_inner_session_hands_its_launches_to_the_outer_one(rng):
    with mutile.profile() as outer:
        outer.add(make_record(rng, kernel="first"))
        inner = mutile.profile(sample=4)
        inner.add(make_record(rng, kernel="before the block"))   # not part of the block
        with inner:
            session.active().add(make_record(rng, kernel="inner"))
            assert [r.kernel for r in outer.launches] == ["first"]
        session.active().add(make_record(rng, kernel="last"))
    assert [r.kernel for r in inner.launches] == ["before the block", "inner"]
    assert [r.kernel for r in outer.launches] == ["first", "inner", "last"]
    copy, mine = outer.launches[1], inner.launches[1]
    assert copy is not mine and copy.cycles == mine.cycles and copy.by_line is mine.by_line
    assert mine.start == pytest.approx(inner.launches[0].end + mine.launch_overhead_cycles)
    assert copy.start == pytest.approx(outer.launches[0].end + copy.launch_overhead_cycles)
    assert outer.launches[2].start > copy.end


def test_the_session_is_popped_on_an_exception():
    prof = mutile.profile()
    with pytest.raises(ZeroDivisionError):
        with prof:
            assert session.active() is prof
            1 / 0
    assert session.active() is None
    with prof:                                   # and may be entered again afterwards
        with pytest.raises(RuntimeError, match="already active"):
            prof.__enter__()
        assert session.active() is prof
    assert session.active() is None


def test_launches_are_placed_on_a_timeline(rng):
    prof = mutile.profile()
    recs = [make_record(rng, kernel=f"k{i}", overhead=float(rng.uniform(100, 5000)))
            for i in range(4)]
    for r in recs:
        r.start = -1.0                          # whatever the record came with
        prof.add(r)
    assert prof.launches == recs
    assert recs[0].start == recs[0].launch_overhead_cycles
    for prev, r in zip(recs, recs[1:]):
        assert r.start == pytest.approx(prev.end + r.launch_overhead_cycles)
        assert r.start > prev.end
    assert prof.end == pytest.approx(sum(r.cycles + r.launch_overhead_cycles for r in recs))
    assert prof.time_ms == pytest.approx(sum(r.cycles for r in recs) / recs[0].clock_hz * 1e3)


def test_records_added_through_the_backend_seam(rng):
    """What the Pinghu launcher does: ``session.active().add(record)``."""
    recs = [make_record(rng) for _ in range(2)]
    with mutile.profile() as prof:
        for r in recs:
            session.active().add(r)
    assert prof.launches == recs and recs[1].start > recs[0].end
    assert "2 launches" in repr(prof)


def test_importing_mutile_imports_no_backend():
    code = ("import sys, mutile\n"
            "print(sorted(m for m in sys.modules if m.startswith('mutile.backends')))\n"
            "p = mutile.profile(sample='wave')\n"
            "print(sorted(m for m in sys.modules if m.startswith('mutile.backends')))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.splitlines() == ["[]", "[]"], r.stdout


def test_the_profiler_uses_only_the_two_seams_of_the_machine():
    """docs/layers.md: mutile.profiler imports timing.session and timing.record of the
    Pinghu machine and nothing else of the backend."""
    allowed = {"mutile.backends.pinghu.machine.timing.session",
               "mutile.backends.pinghu.machine.timing.record",
               "mutile.backends.pinghu.machine.timing"}
    seen = set()
    for path in (REPO / "mutile" / "profiler").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and "backends" in node.module:
                base = "mutile." + node.module.lstrip(".") if node.level else node.module
                names = {f"{base}.{a.name}" for a in node.names}
                seen |= {n for n in names if n in allowed} or {base}
    assert seen and seen <= allowed, seen
