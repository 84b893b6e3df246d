"""DeepSeek-V3's per-block FP8 GEMM and its quantizers on both backends, against the
recipe in numpy and float64 products; scale edge cases (all-zero blocks, amax at 448)."""
import ml_dtypes
import numpy as np
import pytest

from mutile.kernels import fp8_blockwise as F

from ..conftest import poison

E4M3, BF16 = ml_dtypes.float8_e4m3fn, ml_dtypes.bfloat16


def np_quantize(x, rows, cols):
    """The recipe in numpy: per rows x cols block, scale = amax / 448 (1 if all zero),
    q = e4m3(clip(x * (448 / amax), -448, 448)), all in float32."""
    x = x.astype(np.float32)
    R, C = x.shape
    q = np.empty((R, C), E4M3)
    s = np.empty((-(-R // rows), -(-C // cols)), np.float32)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            blk = x[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols]
            amax = np.float32(np.abs(blk).max())
            sc = amax / np.float32(448) if amax > 0 else np.float32(1)
            inv = np.float32(448) / amax if amax > 0 else np.float32(1)
            s[i, j] = sc
            q[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols] = \
                np.clip(blk * inv, -448, 448).astype(E4M3)
    return q, s


def deq(q, s, rows, cols):
    full = np.repeat(np.repeat(s.astype(np.float64), rows, 0), cols, 1)
    return q.astype(np.float64) * full[:q.shape[0], :q.shape[1]]


def with_edge_blocks(x):
    """Block (0, 0) all zero, row 1's second K block with amax exactly 448, and a block
    whose values are far beyond e4m3's range."""
    x = x.copy()
    x[:, :128] = 0
    x[1, 128:256] = np.clip(x[1, 128:256], -400, 400)
    x[1, 130] = 448.0
    x[2:4, 256:] *= 1e4
    return x


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16])
def test_quantizers_match_the_recipe(dtype, rng, backend):
    x = with_edge_blocks(rng.standard_normal((70, 300)).astype(np.float32)).astype(dtype)
    if dtype == np.float16:
        x[2:4, 256:] = np.float16(3e4)
    for fn, rows in ((F.quantize_act_1x128, 1), (F.quantize_weight_128x128, 128)):
        q, s = fn(x, backend=backend)
        qr, sr = np_quantize(x, rows, 128)
        assert q.dtype == E4M3 and s.dtype == np.float32 and s.shape == sr.shape
        assert (s == sr).all()
        assert (q.view(np.uint8) == qr.view(np.uint8)).all()
        qf = q.astype(np.float32)
        assert np.isfinite(qf).all() and np.abs(qf).max() == 448.0      # saturating
        assert (qf[:, :128] == 0).all() and (s[0, 0] == 1.0)                # all-zero block
        rel = np.abs(deq(q, s, rows, 128) - x.astype(np.float64))
        assert (rel <= 2.0 ** -4 * np.abs(x.astype(np.float64)) +
                np.repeat(np.repeat(s, rows, 0), 128, 1)[:70, :300] * 2.0 ** -9).all()
    q, s = F.quantize_act_1x128(x, backend=backend)
    assert s[1, 1] == 1.0 and q[1, 130].astype(np.float32) == 448.0          # amax = 448


def blockwise_inputs(rng, m, n, k):
    x = with_edge_blocks(rng.standard_normal((m, k)).astype(np.float32))
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    w[:128, 128:256] = 0                                  # an all-zero weight block
    qa, sa = np_quantize(x, 1, 128)
    qw, sw = np_quantize(w, 128, 128)
    return x, w, qa, sa, qw, sw


@pytest.mark.parametrize("m,n,k,block_n,explicit,tile", [
    (70, 200, 300, 128, None, {}),
    (70, 200, 300, 128, False, {}),
    (130, 96, 257, 64, None, {}),
    (300, 200, 300, 128, True, dict(block_m=256, num_warps=8, num_stages=4)),
    (130, 200, 300, 128, True, dict(block_m=128, num_warps=4, num_stages=3))])
def test_blockwise_gemm_numerics(m, n, k, block_n, explicit, tile, rng, backend):
    """Error against the float64 product of the dequantized inputs no worse than the
    numpy recipe's; the error against the unquantized product is reported. On pinghu,
    aligned rows take the explicit ph kernel by default (explicit=False: the portable
    one; K = 257 cannot take it); explicit=True: its two-squad and one-squad tiles on
    ragged M, N and K."""
    if explicit is not None and backend == "llvm":
        pytest.skip("the explicit path is pinghu's")
    x, w, qa, sa, qw, sw = blockwise_inputs(rng, m, n, k)
    out = poison((m, n), np.float32)
    F.fp8_gemm_blockwise(qa, sa, qw, sw, out=out, backend=backend, block_n=block_n,
                         explicit=explicit, **tile)
    exact = deq(qa, sa, 1, 128) @ deq(qw, sw, 128, 128).T
    ref = F.reference_blockwise(qa, sa, qw, sw)
    err, ref_err = np.abs(out - exact).max(), np.abs(ref - exact).max()
    assert np.isfinite(out).all()
    assert err <= ref_err * 1.25 + 1e-6 * np.abs(exact).max(), (err, ref_err)
    unq = np.abs(out - x.astype(np.float64) @ w.astype(np.float64).T).max()
    print(f"\nmax |err| vs dequantized {err:.3g} (numpy recipe {ref_err:.3g}); "
          f"vs unquantized {unq:.3g} of max |y| {np.abs(exact).max():.3g}")
    assert unq <= 0.1 * np.abs(exact).max()


def test_blockwise_gemm_bf16_out_and_quantizer_round_trip(rng, backend):
    """The full path: the quantizer kernels, then the GEMM into a poisoned bf16 output."""
    m, n, k = 64, 160, 384
    x = rng.standard_normal((m, k)).astype(BF16)
    w = (rng.standard_normal((n, k)) * 0.1).astype(BF16)
    qa, sa = F.quantize_act_1x128(x, backend=backend)
    qw, sw = F.quantize_weight_128x128(w, backend=backend)
    out = poison((m, n), BF16)
    y = F.fp8_gemm_blockwise(qa, sa, qw, sw, out=out, backend=backend)
    assert y is out and y.dtype == BF16
    exact = deq(qa, sa, 1, 128) @ deq(qw, sw, 128, 128).T
    err = np.abs(out.astype(np.float64) - exact)
    assert (err <= 2.0 ** -8 * np.abs(exact) + 1e-5 * np.abs(exact).max()).all()


@pytest.mark.parametrize("where", ["pinghu", "llvm"])
def test_tuned_choice_is_the_fastest_measured(where, rng):
    """With no tile arguments the GEMM launches the autotuner's config: on pinghu the
    explicit kernel's tuner, whose recorded times are each config's modelled time
    (do_bench of that config alone) and whose winner has the least; on llvm the portable
    kernel's tuner (wall times: the winner is the least recorded)."""
    import mutile
    m, n, k = 200, 256, 256
    x, w, qa, sa, qw, sw = blockwise_inputs(rng, m, n, k)
    out = poison((m, n), np.float32)
    F.fp8_gemm_blockwise(qa, sa, qw, sw, out=out, backend=where)
    exact = deq(qa, sa, 1, 128) @ deq(qw, sw, 128, 128).T
    ref_err = np.abs(F.reference_blockwise(qa, sa, qw, sw) - exact).max()
    assert np.abs(out - exact).max() <= ref_err * 1.25 + 1e-6 * np.abs(exact).max()
    tuner = F.ws_tuned if where == "pinghu" else F.portable_tuned
    d = tuner.tuning_log[-1]
    assert tuner.best_config is d.winner and len(d.timings) >= 2
    (win,) = [i for i, cfg in d.configs.items() if cfg is d.winner]
    assert d.timings[win][0] == min(t[0] for t in d.timings.values())
    if where != "pinghu":
        return
    for ident, cfg in d.configs.items():
        kw = cfg.kwargs
        ms = mutile.testing.do_bench(lambda: F.fp8_gemm_blockwise(
            qa, sa, qw, sw, out=out, backend="pinghu", block_m=kw["BM"], block_n=kw["BN"],
            num_stages=kw["STAGES"], num_warps=kw["NUM_WARPS"], persistent=kw["PERSISTENT"]))
        assert ms == pytest.approx(d.timings[ident][0], rel=1e-9)


def test_bad_inputs():
    qa = np.zeros((4, 200), E4M3)
    sa = np.ones((4, 2), np.float32)
    qw = np.zeros((8, 200), E4M3)
    sw = np.ones((1, 2), np.float32)
    cases = [
        (TypeError, "float8_e4m3fn", (qa.astype(np.float32), sa, qw, sw), {}),
        (ValueError, "b must be", (qa, sa, qw[:, :100], sw), {}),
        (ValueError, "a_scale must have shape", (qa, sa[:, :1], qw, sw), {}),
        (ValueError, "b_scale must have shape", (qa, sa, qw, np.ones((2, 2), np.float32)), {}),
        (TypeError, "b_scale must be float32", (qa, sa, qw, sw.astype(np.float16)), {}),
        (ValueError, "block_n", (qa, sa, qw, sw), {"block_n": 96}),
        (TypeError, "out_dtype", (qa, sa, qw, sw), {"out_dtype": np.int32}),
        (ValueError, "explicit=True", (qa, sa, qw, sw), {"explicit": True}),
        (ValueError, "block_m = 32", (qa, sa, qw, sw), {"explicit": True, "block_m": 64}),
    ]
    for exc, text, args, kw in cases:
        with pytest.raises(exc, match=text):
            F.fp8_gemm_blockwise(*args, backend="llvm", **kw)
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        F.quantize_act_1x128(np.zeros((4, 4), np.int32), backend="llvm")
    with pytest.raises(ValueError, match="2-D"):
        F.quantize_weight_128x128(np.zeros(4, np.float32), backend="llvm")
