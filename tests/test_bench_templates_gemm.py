"""The GEMM bench's steady-state analysis (``python -m mutile.bench_templates_gemm
--what-if``) on a small config: one row per machine file, the step cost never below the
step's SQMMA work, and twice the SQMMA rate never slower."""
from mutile import bench_templates_gemm as B

SMALL = dict(BM=64, BN=64, BK=64, GROUP_M=8, STAGES=2, NUM_WARPS=4, PERSISTENT=0)


def test_steady_state_rows():
    rows = B.steady_state(SMALL, ks=(128, 320))
    assert [r["machine"] for r in rows] == ["shipped machine file", *B.WHAT_IF]
    by = {r["machine"]: r for r in rows}
    base = by["shipped machine file"]
    assert base["sqmma_step"] == 2 * 64 * 64 * 64 / 8192
    for r in rows:
        assert r["cycles"][1] > r["cycles"][0]
        assert r["step"] >= r["sqmma_step"] / (2 if r["machine"] == "2x SQMMA rate" else 1)
    assert by["2x SQMMA rate"]["step"] <= base["step"]
