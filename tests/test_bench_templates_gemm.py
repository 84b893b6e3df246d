"""The GEMM bench's steady-state analysis (``python -m mutile.bench_templates_gemm
--what-if``) on a small config: one row per machine file, the step cost never below the
step's SQMMA work, and twice the SQMMA rate never slower. The config is one whose step the
SQMMA work weighs on (128x128x64: 256 of about 880 cycles); on a latency-bound one
(64x64x64: 64 of about 600) a what-if machine shifts when each MP's copies miss or hit
L2 (the tiles the wave's MPs share), which can move a three-step difference either way."""
from mutile import bench_templates_gemm as B

SMALL = dict(BM=128, BN=128, BK=64, GROUP_M=8, STAGES=2, NUM_WARPS=4, PERSISTENT=0)


def test_steady_state_rows():
    rows = B.steady_state(SMALL, ks=(128, 320))
    assert [r["machine"] for r in rows] == ["shipped machine file", *B.WHAT_IF]
    by = {r["machine"]: r for r in rows}
    base = by["shipped machine file"]
    assert base["sqmma_step"] == 2 * 128 * 128 * 64 / 8192
    for r in rows:
        assert r["cycles"][1] > r["cycles"][0]
        assert r["step"] >= r["sqmma_step"] / (2 if r["machine"] == "2x SQMMA rate" else 1)
    assert by["2x SQMMA rate"]["step"] <= base["step"]
