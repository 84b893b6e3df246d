"""``prof.save_trace(path)``: valid Chrome trace-event JSON whose events are the records'
launches, slices and counters, in microseconds of device time."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import mutile
from mutile.backends.pinghu.machine.timing.record import Slice

from .record_kit import make_record


@pytest.fixture
def saved(rng, tmp_path):
    prof = mutile.profile()
    for k in ("attn_fwd", "gemm"):
        prof.add(make_record(rng, kernel=k))
    path = tmp_path / "t.json"
    assert prof.save_trace(path) == str(path)
    return prof, json.loads(path.read_text())


def us(cycles, r):
    return cycles / r.clock_hz * 1e6


def names(doc, meta: str) -> dict:
    return {(e["pid"], e["tid"]) if meta == "thread_name" else e["pid"]: e["args"]["name"]
            for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == meta}


def test_is_a_trace_event_document(saved):
    prof, doc = saved
    assert set(doc) >= {"traceEvents", "displayTimeUnit", "otherData"}
    assert doc["otherData"]["machine_hash"] == prof.machine.hash
    for e in doc["traceEvents"]:
        assert e["ph"] in ("M", "X", "C") and isinstance(e["pid"], int)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and math.isfinite(e["ts"]) and isinstance(e["tid"], int)


def test_processes_per_mp_and_a_device(saved):
    _, doc = saved
    assert names(doc, "process_name") == {0: "device", 1: "MP 0", 2: "MP 1"}
    threads = names(doc, "thread_name")
    assert threads[0, 0] == "launches"
    assert sorted(v for (pid, _), v in threads.items() if pid == 1) == \
        ["MP", "TME", "block 0,0,0 warp 1"]
    assert [v for (pid, _), v in threads.items() if pid == 2] == ["SQMMA"]


def test_launches_are_slices_on_the_device_track(saved):
    prof, doc = saved
    launches = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "launch"]
    assert [e["name"] for e in launches] == [r.kernel for r in prof.launches]
    for e, r in zip(launches, prof.launches):
        assert (e["pid"], e["tid"]) == (0, 0)
        assert e["ts"] == pytest.approx(us(r.start, r)) and e["ts"] > 0
        assert e["dur"] == pytest.approx(us(r.cycles, r))
        assert e["args"]["grid"] == list(r.grid) and e["args"]["cycles"] == r.cycles
    assert launches[1]["ts"] >= launches[0]["ts"] + launches[0]["dur"]


def test_slices_land_on_their_tracks_at_device_time(saved):
    prof, doc = saved
    pids = {v: k for k, v in names(doc, "process_name").items()}
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "launch"]
    assert len(xs) == sum(len(r.slices) for r in prof.launches)
    it = iter(xs)
    for i, r in enumerate(prof.launches):
        for s in r.slices:
            e = next(it)
            assert e["name"] == s.name and e["args"]["launch"] == i
            mp = f"MP {s.track[1]}"
            want = {"MP": "MP", "unit": s.track[-1],
                    "warp": f"block 0,0,0 warp {s.track[-1]}"}[s.track[0]]
            assert e["pid"] == pids[mp]
            assert names(doc, "thread_name")[e["pid"], e["tid"]] == want
            assert e["ts"] == pytest.approx(us(r.start + s.start, r))
            assert e["dur"] == pytest.approx(us(s.dur, r))
            for k, v in s.args.items():
                assert e["args"][k] == (v.item() if isinstance(v, np.generic) else v)


def test_counters_follow_the_timeline(saved):
    prof, doc = saved
    cs = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert {e["name"] for e in cs} == {"SQMMA busy", "TME busy", "HBM busy"}
    for unit in ("SQMMA", "TME", "HBM"):
        got = [e for e in cs if e["name"] == f"{unit} busy"]
        want = []
        for r in prof.launches:
            t0 = us(r.start, r)
            want += [(t0 + us(k * r.bucket_cycles, r), float(v))
                     for k, v in enumerate(r.timeline[unit])]
            want.append((t0 + us(r.cycles, r), 0.0))      # the counter drops at the end
        assert [e["args"]["busy"] for e in got] == [v for _, v in want]
        assert [e["ts"] for e in got] == pytest.approx([t for t, _ in want])


def test_an_empty_session_is_a_valid_trace(tmp_path):
    path = tmp_path / "empty.json"
    mutile.profile().save_trace(path)
    doc = json.loads(path.read_text())
    assert [e["ph"] for e in doc["traceEvents"]] == ["M"] * 4    # the device process only


def test_a_track_of_unknown_shape_is_refused(rng, tmp_path):
    prof = mutile.profile()
    r = make_record(rng)
    r.slices.append(Slice(("sm", 0), "odd", 0.0, 1.0))
    prof.add(r)
    with pytest.raises(ValueError, match=r"track \('sm', 0\)"):
        prof.save_trace(tmp_path / "bad.json")
