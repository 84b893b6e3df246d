"""The machine file (``mutile/machines/pinghu.toml``) and its loader: every entry names its
source, what is not public says "assumed" and why, the derived peaks reproduce the
published MTT S5000 figures, and a user's what-if file changes exactly the entries it
lists or is refused with a message naming the entry."""
from __future__ import annotations

import re

import pytest

from mutile import machines
from mutile.backends.pinghu.machine.device import MachineParams
from mutile.backends.pinghu.machine.timing.model import TimingMachine
from mutile.backends.pinghu.machine.timing.params import Timing
from mutile.machines import MachineFileError

from .timing_kit import write_machine

DEFAULT = machines.default()
# Public material the sources may cite (issue 12 §1); anything else must be "assumed".
PUBLIC = ("MUTLASS", "MUSA", "Moore Threads", "mate", "tilelang_musa", "FlagTree")
# Facts the issue names as not public: the file must mark them assumed.
NOT_PUBLIC = [("device", "mp_count"), ("device", "clock_hz"), ("memory", "l2_bytes"),
              ("memory", "l2_bytes_per_s"), ("memory", "shared_banks"),
              ("memory", "shared_bank_bytes"), ("memory", "hbm_latency"),
              ("memory", "l2_latency"), ("memory", "tme_bytes_per_cycle"),
              ("memory", "tme_latency"), ("rates", "sqmma_flops_per_cycle"),
              ("rates", "wmma_flops_per_cycle"), ("rates", "ii"), ("latency", "cycles")]


# Entries whose source says what was assumed but not why (strict: a new one fails, and an
# entry given its reason must leave the list).
WHY_MISSING: set = set()


def _entry_param(k):
    mark = pytest.mark.xfail(strict=True, reason="the source gives no reason") \
        if k in WHY_MISSING else ()
    return pytest.param(k, id=f"{k[0]}.{k[1]}", marks=mark)


@pytest.mark.parametrize("key", [_entry_param(k) for k in sorted(DEFAULT.entries)])
def test_every_entry_names_its_source(key):
    e = DEFAULT.entry(*key)
    assert isinstance(e.source, str) and e.source.strip(), key
    if e.assumed:
        # "assumed: why" -- a reason of a few words after the colon
        head, _, why = e.source.partition(":")
        assert why.strip() and len(why.split()) >= 3, (key, e.source)
    else:
        assert any(p in e.source for p in PUBLIC), (key, e.source)


@pytest.mark.parametrize("key", NOT_PUBLIC, ids=lambda k: f"{k[0]}.{k[1]}")
def test_unpublished_facts_are_marked_assumed(key):
    assert DEFAULT.entry(*key).source.startswith("assumed: "), key


def test_mp_count_is_the_tilelang_figure_and_says_so():
    e = DEFAULT.entry("device", "mp_count")
    assert e.value == 56 and "tilelang_musa" in e.source and e.assumed


def test_derived_peaks_reproduce_the_published_figures():
    t = Timing()
    fp8 = t.mp_count * t.clock_hz * t.sqmma_rate["e4m3"]
    assert t.peak_flops("e4m3") == fp8
    assert abs(fp8 / 1e15 - 1) <= 0.02                  # MTT S5000: about 1 PFLOP/s FP8
    assert t.peak_flops("bf16") == pytest.approx(fp8 / 2)   # 16-bit at half the FP8 rate
    assert t.peak_hbm == pytest.approx(1.6e12, rel=1e-12)   # 1.6 TB/s
    # 80 GB, read as binary gigabytes (80 GiB), and the interpreter checks against it
    assert DEFAULT.value("device", "memory_bytes") == 80 * 2 ** 30
    assert MachineParams().memory_bytes == 80 * 2 ** 30
    assert MachineParams().memory_bandwidth == 1.6e12


def test_an_override_changes_exactly_its_entries(tmp_path):
    path = write_machine(tmp_path, "four.toml", '[device]\n'
                         'mp_count = { value = 4, source = "test" }\n')
    mf = machines.load(path)
    changed = {k for k in DEFAULT.entries if mf.entries[k] != DEFAULT.entries[k]}
    assert changed == {("device", "mp_count")}
    assert mf.overrides == (("device", "mp_count"),)
    assert mf.entry("device", "mp_count") == machines.Entry(4, "test")
    assert mf.hash != DEFAULT.hash
    assert Timing(mf).mp_count == 4 and Timing(mf).peak_hbm == Timing().peak_hbm


def test_a_dict_override_changes_only_its_keys(tmp_path):
    path = write_machine(tmp_path, "sfu.toml", '[latency]\ncycles = { value = { sfu = 33 } }\n')
    mf = machines.load(path)
    old, new = DEFAULT.value("latency", "cycles"), mf.value("latency", "cycles")
    assert set(new) == set(old)
    assert {k for k in old if new[k] != old[k]} == {"sfu"} and new["sfu"] == 33
    assert mf.entry("latency", "cycles").source == f"changed by {path}"
    assert Timing(mf).latency["sfu"] == 33 and Timing(mf).latency["alu"] == old["alu"]


BAD = [
    ("isa.toml", "[isa]\nwarp_size = { value = 64 }\n",
     r"\[isa\] warp_size is a fact of the instruction set"),
    ("unknown.toml", "[device]\nwarp_engines = { value = 2 }\n",
     r"\[device\] warp_engines is not an entry.*mp_count"),
    ("section.toml", "[gpu]\nmp_count = { value = 2 }\n",
     r"\[gpu\] mp_count is not an entry.*sections: .*device"),
    ("shape.toml", '[device]\nmp_count = { value = "four" }\n',
     r"\[device\] mp_count = 'four' does not have the shape of the default 56"),
    ("dict.toml", "[latency]\ncycles = { value = { warp_drive = 3 } }\n",
     r"\[latency\] cycles = .*warp_drive.* does not have the shape"),
    ("scalar.toml", "[memory]\nhbm_latency = 400\n",
     r"\[memory\] hbm_latency must be \{ value = \.\.\., source"),
    ("keys.toml", "[memory]\nhbm_latency = { value = 400, unit = \"cycles\" }\n",
     r"\[memory\] hbm_latency has unknown keys \['unit'\]"),
    ("toml.toml", "[memory\nhbm_latency = { value = 400 }\n", r"is not valid TOML"),
]


@pytest.mark.parametrize("name,text,message", BAD, ids=[b[0] for b in BAD])
def test_a_bad_file_is_refused_naming_the_entry(tmp_path, name, text, message):
    path = write_machine(tmp_path, name, text)
    with pytest.raises(MachineFileError, match=message) as info:
        machines.load(path)
    assert path in str(info.value) or name in str(info.value)


def test_an_isa_entry_restated_unchanged_is_accepted(tmp_path):
    path = write_machine(tmp_path, "same.toml", "[isa]\nwarp_size = { value = 32 }\n")
    assert machines.load(path).value("isa", "warp_size") == 32


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(MachineFileError, match=re.escape("cannot read machine file")):
        machines.load(tmp_path / "absent.toml")


def test_mutile_machine_is_honoured(tmp_path, monkeypatch):
    path = write_machine(tmp_path, "env.toml", '[device]\nmp_count = { value = 4 }\n'
                         '[memory]\nhbm_latency = { value = 321, source = "what if" }\n')
    assert TimingMachine(None).t.mp_count == 56
    monkeypatch.setenv("MUTILE_MACHINE", path)
    m = TimingMachine(None)
    assert m.t.mp_count == 4 and m.t.hbm_latency == 321
    assert m.params.mp_count == 4 and m.t.file.path == path
    # an explicit file wins over the environment
    assert TimingMachine(machines.default()).t.mp_count == 56
