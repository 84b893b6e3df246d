"""``prof.summary()``: the tables' contents against the records they come from."""
from __future__ import annotations

import io
import re

import pytest

import mutile
from mutile.backends.pinghu.machine.timing.record import STALLS, UTILIZATION_UNITS
from mutile.profiler import summary

from .record_kit import FILE, make_record


def section(text: str, title: str) -> list[str]:
    """The lines of the table headed by a line starting with ``title`` (up to a blank)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(title))
    out = []
    for line in lines[at + 1:]:
        if not line.strip():
            break
        out.append(line)
    return out


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


@pytest.fixture
def prof(rng):
    p = mutile.profile()
    for kernel, sampled in [("attn_fwd", False), ("gemm_ws", True), ("attn_fwd", False)]:
        p.add(make_record(rng, kernel=kernel, sampled=sampled))
    p.add(make_record(rng, kernel="copy", flops=0.0, dtype=None, grid=(3, 1, 1)))
    return p


def test_prints_and_returns_the_text(prof, capsys):
    text = prof.summary()
    assert capsys.readouterr().out == text
    buf = io.StringIO()
    assert prof.summary(file=buf) == text == buf.getvalue()
    assert capsys.readouterr().out == ""


def test_header_gives_machine_and_device_time(prof):
    text = prof.summary(file=io.StringIO())
    first, second = text.splitlines()[:2]
    assert "4 Pinghu launches" in first and prof.machine.hash in first and "56 MPs" in first
    clock = prof.launches[0].clock_hz
    kernels = sum(r.cycles for r in prof.launches)
    overhead = sum(r.launch_overhead_cycles for r in prof.launches)
    assert f"device time {prof.end / clock * 1e6:.3f} us" in second
    assert f"kernels {kernels / clock * 1e6:.3f} us" in second
    assert f"launch overhead {overhead / clock * 1e6:.3f} us" in second


def test_launch_rows(prof):
    rows = section(prof.summary(file=io.StringIO()), "Launches")
    head, body, note = cells(rows[0]), [cells(line) for line in rows[1:-1]], rows[-1]
    assert head[:7] == ["#", "kernel", "grid", "sampled", "waves", "cycles", "time (us)"]
    assert len(body) == 4 and note.strip().startswith("sampled: simulated blocks / blocks")
    for i, (r, row) in enumerate(zip(prof.launches, body)):
        got = dict(zip(head, row))
        assert got["#"] == str(i) and got["kernel"] == r.kernel
        assert got["grid"] == "x".join(map(str, r.grid))
        assert got["sampled"] == (f"{r.blocks_simulated}/{r.blocks}" if r.sampled else "no")
        assert got["cycles"] == f"{r.cycles:,.0f}"
        assert got["time (us)"] == f"{r.time_ms * 1e3:.3f}"
        assert got["TFLOP/s"] == f"{r.tflops:.2f}"
        assert got["GB/s"] == f"{r.hbm_gbps:.1f}"
        assert row[8] == f"{100 * r.tflops / r.peak_tflops:.1f}%"          # of peak flops
        assert row[10] == f"{100 * r.hbm_gbps / r.peak_hbm_gbps:.1f}%"      # of peak HBM
        assert got["occupancy"].startswith(f"{100 * r.occupancy['fraction']:.0f}%")
        assert "shared memory" in got["occupancy"] and got["bound"] == r.bound


def test_kernel_table_sums_the_launches(prof):
    rows = [cells(line) for line in section(prof.summary(file=io.StringIO()), "Kernels")[1:]]
    total = sum(r.time_ms for r in prof.launches)
    by = {row[-1]: row for row in rows}
    attn = [r for r in prof.launches if r.kernel == "attn_fwd"]
    t = sum(r.time_ms for r in attn)
    assert by["attn_fwd"][:3] == [f"{100 * t / total:.1f}%", f"{t * 1e3:.3f}", "2"]
    assert by["attn_fwd"][4] == f"{min(r.time_ms for r in attn) * 1e3:.3f}"
    assert [float(row[1]) for row in rows] == sorted((float(row[1]) for row in rows),
                                                      reverse=True)


def test_utilization_and_stall_tables(prof):
    text = prof.summary(file=io.StringIO())
    util = section(text, "Utilization")
    assert cells(util[0])[2:] == list(UTILIZATION_UNITS)
    assert len({len(line) for line in util}) == 1, "columns are not aligned"
    for r, line in zip(prof.launches, util[1:]):
        assert cells(line)[2:] == [f"{100 * r.utilization[u]:.1f}%" for u in UTILIZATION_UNITS]
    stalls = section(text, "Warp states")
    assert cells(stalls[0])[2:] == ["warp-cycles", "issued", *STALLS]
    for r, line in zip(prof.launches, stalls[1:]):
        row = cells(line)
        assert row[2] == f"{r.warp_cycles:,.0f}"
        assert row[3] == f"{100 * r.issued / r.warp_cycles:.1f}%"
        assert row[4:] == [f"{100 * r.stalls[s] / r.warp_cycles:.1f}%" for s in STALLS]


def test_roofline_position(prof):
    rows = [cells(line) for line in section(prof.summary(file=io.StringIO()), "Roofline")[1:]]
    for r, row in zip(prof.launches, rows):
        ridge = r.peak_tflops * 1e3 / r.peak_hbm_gbps
        assert row[6] == f"{ridge:.1f}"
        if r.flops == 0:
            assert row[7] == "no MMA" and row[-1] == "-"
            continue
        ai = r.flops / r.hbm_bytes
        assert row[5] == f"{ai:.1f}"
        assert row[7] == ("memory" if ai < ridge else "compute")
        roof = min(r.peak_tflops, ai * r.peak_hbm_gbps / 1e3)
        assert row[8] == f"{roof:.1f}" and row[9] == f"{100 * r.tflops / roof:.1f}%"


@pytest.mark.parametrize("flops, hbm, side", [(1e12, 1e6, "compute"), (1e6, 1e9, "memory"),
                                              (1e9, 0.0, "compute")])
def test_roofline_sides(rng, flops, hbm, side):
    p = summary.roofline(make_record(rng, flops=flops, hbm_bytes=hbm))
    peak = make_record(rng).peak_tflops
    assert p["side"] == side
    assert p["attainable"] == pytest.approx(peak if side == "compute" else flops / hbm * 1.6)


def test_per_line_table_merges_launches_of_a_kernel(prof):
    text = prof.summary(file=io.StringIO(), top=3)
    rows = section(text, "Kernel attn_fwd (launches 0, 2)")
    head, body = cells(rows[0]), [cells(line) for line in rows[1:]]
    assert head == ["file:line", "warp-cycles", "%", "issued", "main stalls", "source"]
    attn = [r for r in prof.launches if r.kernel == "attn_fwd"]
    total = sum(r.warp_cycles for r in attn)
    want = {}
    for r in attn:
        for row in r.by_line:
            w = want.setdefault(row.line, {"wc": 0.0, "st": dict.fromkeys(STALLS, 0.0),
                                           "src": row.source})
            w["wc"] += row.warp_cycles
            for s in STALLS:
                w["st"][s] += row.stalls[s]
    hot = sorted(want, key=lambda k: -want[k]["wc"])[:3]
    assert len(body) == 3
    for line, row in zip(hot, body):
        w = want[line]
        assert row[0] == f"{FILE}:{line}" and row[5] == w["src"]
        assert row[1] == f"{w['wc']:,.0f}" and row[2] == f"{100 * w['wc'] / total:.1f}%"
        s1, s2 = sorted(STALLS, key=lambda s: -w["st"][s])[:2]
        assert row[4] == (f"{s1} {100 * w['st'][s1] / w['wc']:.1f}%, "
                          f"{s2} {100 * w['st'][s2] / w['wc']:.1f}%")
    assert "top 3 of 5 source lines" in text


def test_per_pc_table(prof):
    text = prof.summary(file=io.StringIO(), top=4)
    lines = text.splitlines()
    at = lines.index(next(x for x in lines if x.startswith("Kernel gemm_ws (launch 1)")))
    pcs = section("\n".join(lines[at:]), "  top 4 of 10 ISA pcs")
    rec = prof.launches[1]
    want = sorted(rec.by_pc, key=lambda p: -p.warp_cycles)[:4]
    for p, line in zip(want, pcs[1:]):
        row = cells(line)
        assert row[:4] == [str(p.pc), f"{p.count:,}", f"{p.warp_cycles:,.0f}",
                           f"{100 * p.warp_cycles / rec.warp_cycles:.1f}%"]
        assert row[5:] == [f"{FILE}:{p.line}", p.text]


def test_no_launches_says_why(capsys):
    text = mutile.profile().summary()
    assert "0 Pinghu launches" in text and "backend='pinghu'" in text


def test_many_launches_are_summed_not_all_listed(rng):
    p = mutile.profile()
    for _ in range(summary.MAX_LAUNCH_ROWS + 3):
        p.add(make_record(rng, kernel="step"))
    text = p.summary(file=io.StringIO())
    assert len(section(text, "Launches")) == summary.MAX_LAUNCH_ROWS + 2   # header, note
    assert "... 3 more launches" in text
    assert cells(section(text, "Kernels")[1])[2] == str(summary.MAX_LAUNCH_ROWS + 3)


def test_table_alignment():
    out = summary.table(["name", "n"], [["a", 1], ["long name", 12345]])
    assert out.splitlines() == ["  name           n", "  a              1",
                                "  long name  12345"]


def test_sampled_launches_carry_a_warning(rng):
    p = mutile.profile()
    p.add(make_record(rng))
    assert "NOT computed" not in p.summary(file=io.StringIO())
    p.add(make_record(rng, sampled=True, grid=(64, 2, 1)))
    text = p.summary(file=io.StringIO())
    assert "16/64" not in text and "32/128" in text
    assert "outputs NOT computed (sample=False" in text
