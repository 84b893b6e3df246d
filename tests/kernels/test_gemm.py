"""mutile.kernels.gemm on both backends: every dtype and layout, ragged shapes, each
epilogue, split-K, persistent grids, the autotuner's choice, and the errors."""
import importlib

import ml_dtypes
import numpy as np
import pytest

import mutile

from ..conftest import poison

G = importlib.import_module("mutile.kernels.gemm")    # the module (mutile.kernels.gemm
#                                                       is the function it defines)

BF16, E4M3, E5M2 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
# one config for the correctness tests (the tuner is tested on its own, below)
CFG = mutile.Config(dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=2, PERSISTENT=0),
                    num_warps=4, num_stages=3)
M, N, K = 70, 90, 100           # not multiples of the tiles


def operands(rng, dtype, m=M, n=N, k=K, layout="rr"):
    if dtype == np.int8:
        a = rng.integers(-128, 128, (m, k)).astype(np.int8)
        b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    else:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
    if layout[0] == "c":
        a = np.asfortranarray(a)        # column-major: as a transposed view is
    if layout[1] == "c":
        b = np.asfortranarray(b)
    return a, b


def check(out, ref, a64, b64, rel, k=K):
    """|out - ref| within ``rel`` of |ref| (the output's rounding) plus the f32
    accumulation's bound ``k * 2**-24 * (|a| @ |b|)``."""
    bound = rel * np.abs(ref) + k * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64)) + 1e-30
    err = np.abs(out.astype(np.float64) - ref)
    assert np.isfinite(out.astype(np.float64)).all()
    assert (err <= bound).all(), f"max excess {(err - bound).max()} at {np.argmax(err - bound)}"


DTYPES = [  # (name, dtype, extra gemm keywords)
    ("f32-ieee", np.float32, {}),
    ("f32-tf32", np.float32, {"input_precision": "tf32"}),
    ("f16", np.float16, {}),
    ("bf16", BF16, {}),
    ("e4m3", E4M3, {"a_scale": 0.5, "b_scale": 3.0}),
    ("e5m2", E5M2, {"a_scale": 2.0}),
]


# every dtype row- and column-major; the mixed layouts for one 16-bit and one 8-bit type
CASES = [(d, lay) for d in DTYPES for lay in ("rr", "cc")] + \
        [(d, lay) for d in DTYPES if d[0] in ("f16", "e4m3") for lay in ("rc", "cr")]


@pytest.mark.parametrize("case,layout", CASES, ids=[f"{d[0]}-{lay}" for d, lay in CASES])
def test_float_dtypes_and_layouts(case, layout, rng, backend):
    name, dtype, kw = case
    a, b = operands(rng, dtype, layout=layout)
    out = poison((M, N), np.float32)
    G.gemm(a, b, out=out, backend=backend, config=CFG, **kw)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    s = kw.get("a_scale", 1.0) * kw.get("b_scale", 1.0)
    ref = s * (a64 @ b64)
    if name == "f32-tf32":      # each operand rounded to 10 mantissa bits: 2**-11 each
        bound = 2.0 ** -10 * (np.abs(a64) @ np.abs(b64))
        assert (np.abs(out - ref) <= bound * 1.01 + 1e-6).all()
        assert np.abs(out - ref).max() > 1e-5      # really rounded (not ieee)
    else:
        check(out, ref, s * a64, b64, 0.0)


CFG_PTR = mutile.Config(dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=2, PERSISTENT=0,
                              USE_DESC=False), num_warps=4, num_stages=1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, E4M3, np.int8])
def test_pointer_loads_path(dtype, rng, backend):
    """``USE_DESC=False`` (the CPU's tuned form): masked pointer loads, both layouts."""
    for layout in ("rr", "cc"):
        a, b = operands(rng, dtype, layout=layout)
        out = poison((M, N), np.float32)
        G.gemm(a, b, out=out, backend=backend, config=CFG_PTR)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        check(out, a64 @ b64, a64, b64, 0.0)


def test_default_out_dtypes(rng, backend):
    for dtype, want in [(np.float32, np.float32), (np.float16, np.float16), (BF16, BF16),
                        (E4M3, BF16), (np.int8, np.int32)]:
        a, b = operands(rng, dtype, 20, 24, 40)
        out = G.gemm(a, b, backend=backend, config=CFG)
        assert out.dtype == np.dtype(want)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        if want == np.int32:
            assert (out == ref).all()
        else:
            check(out, ref, a.astype(np.float64), b.astype(np.float64),
                  float(ml_dtypes.finfo(want).eps), 40)


@pytest.mark.parametrize("layout", ["rr", "cc"])
def test_int8_exact_with_int_bias(layout, rng, backend):
    a, b = operands(rng, np.int8, layout=layout)
    bias = rng.integers(-1000, 1000, N).astype(np.int32)
    out = poison((M, N), np.int32)
    G.gemm(a, b, bias=bias, out=out, backend=backend, config=CFG)
    assert (out == a.astype(np.int64) @ b.astype(np.int64) + bias).all()


def act_ref(x, name):
    if name == "relu":
        return np.maximum(x, 0)
    if name == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    if name == "silu":
        return x / (1 + np.exp(-x))
    return x


@pytest.mark.parametrize("activation", [None, "relu", "gelu_tanh", "silu"])
def test_epilogue(activation, rng, backend):
    """bias, activation, alpha/beta with a column-major residual c, a bf16 output into
    a strided ``out`` view; int8 operands with a float epilogue too."""
    for dtype in (BF16, np.int8):
        a, b = operands(rng, dtype)
        bias = rng.standard_normal(N).astype(np.float32)
        c = np.asfortranarray(rng.standard_normal((M, N)).astype(np.float16))
        alpha, beta = (0.75, -1.5) if dtype == BF16 else (1e-3, 0.5)
        big = poison((M, 2 * N), BF16)
        out = big[:, ::2]                           # a strided output view
        G.gemm(a, b, bias=bias, activation=activation, alpha=alpha, beta=beta, c=c,
               out_dtype=BF16, out=out, backend=backend, config=CFG)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        pre = alpha * (a64 @ b64) + bias + beta * c.astype(np.float64)
        ref = act_ref(pre, activation)
        slack = 4 * K * 2.0 ** -24 * alpha * (np.abs(a64) @ np.abs(b64)) + 1e-6
        err = np.abs(out.astype(np.float64) - ref)
        assert (err <= 2.0 ** -8 * np.abs(ref) + slack).all(), (dtype, err.max())
        assert np.isnan(big[:, 1::2].astype(np.float32)).all()     # untouched


@pytest.mark.parametrize("m,n,k", [(1, 130, 77), (129, 1, 64), (65, 63, 9), (200, 140, 257)])
def test_ragged_shapes(m, n, k, rng, backend):
    a, b = operands(rng, np.float16, m, n, k)
    out = poison((m, n), np.float32)
    G.gemm(a, b, out=out, backend=backend, config=CFG)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    check(out, a64 @ b64, a64, b64, 0.0, k)


def test_split_k_skinny(rng, backend):
    """M and N small, K large: the default splits K; the reduction applies the
    epilogue, in float and in exact int32."""
    m, n, k = 16, 40, 2048
    assert G.split_k_for(m, n, k, 56) > 1 and G.split_k_for(4096, 4096, 4096, 56) == 1
    a, b = operands(rng, BF16, m, n, k)
    bias = rng.standard_normal(n).astype(np.float32)
    out = poison((m, n), np.float32)
    G.gemm(a, b, bias=bias, activation="relu", out=out, backend=backend, config=CFG,
           split_k=4)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    check(out, np.maximum(a64 @ b64 + bias, 0), a64, b64, 0.0, k)
    ai, bi = operands(rng, np.int8, m, n, 1000)
    outi = poison((m, n), np.int32)
    G.gemm(ai, bi, out=outi, backend=backend, config=CFG, split_k=3)
    assert (outi == ai.astype(np.int64) @ bi.astype(np.int64)).all()


def test_persistent_grid_any_size(rng, backend):
    """Programs walk the work items pid, pid + P, ...: any grid computes every tile."""
    a, b = operands(rng, np.float16, 200, 150, 96)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for grid in (1, 3):
        out = poison((200, 150), np.float32)
        G.gemm_kernel[(grid,)](a, b, out, out, out, out, 200, 150, 96, 96, 1, 150, 1, 0, 0,
                               150, 1, 1.0, 0.0, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                               GROUP_M=2, SPLIT_K=1, A_ROW=True, B_ROW=True, HAS_BIAS=False,
                               HAS_C=False, ACTIVATION="", INT_ACC=False, INT_OUT=False,
                               INPUT_PRECISION="ieee", backend=backend, num_warps=4)
        check(out, a64 @ b64, a64, b64, 0.0, 96)


CFG_PH = mutile.Config(dict(BM=64, BN=64, BK=64, GROUP_M=2, STAGES=2, NUM_WARPS=4,
                             PERSISTENT=0), num_warps=4)


@pytest.mark.parametrize("dtype", [np.float16, BF16, E4M3, E5M2, np.int8])
def test_explicit_pinghu_path(dtype, rng):
    """The warp-specialized persistent ``ph`` kernel: each 16-/8-bit dtype, a ragged
    shape, the full epilogue (int8: exact s32 plus an int bias), a 3-program grid."""
    from mutile.kernels import gemm_pinghu as P
    m, n, k = 150, 136, 200
    a, b = operands(rng, dtype, m, n, k)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if dtype == np.int8:
        bias = rng.integers(-99, 99, n).astype(np.int32)
        out = poison((m, n), np.int32)
        G.gemm(a, b, bias=bias, out=out, backend="pinghu", config=CFG_PH)
        assert (out == a.astype(np.int64) @ b.astype(np.int64) + bias).all()
        return
    bias = rng.standard_normal(n).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = poison((m, n), np.float32)
    G.gemm(a, b, bias=bias, activation="gelu_tanh", alpha=0.5, beta=2.0, c=c, out=out,
           backend="pinghu", config=CFG_PH)
    ref = act_ref(0.5 * (a64 @ b64) + bias + 2.0 * c, "gelu_tanh")
    slack = 4 * k * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64)) + 1e-6
    assert (np.abs(out - ref) <= 1e-6 * np.abs(ref) + slack).all()
    out = poison((m, n), np.float32)       # persistent: 3 programs walk all 9 tiles
    P.gemm_ws_persistent_kernel[(3,)](a, b, out, out, out, m, n, k, k, n, 0, 0, n, 1, 1.0,
                                      0.0, **CFG_PH.kwargs, HAS_BIAS=False, HAS_C=False,
                                      ACTIVATION="", INT_ACC=False, INT_OUT=False,
                                      backend="pinghu", num_warps=4)
    check(out, a64 @ b64, a64, b64, 0.0, k)


def test_explicit_path_refuses_what_it_cannot_take(rng):
    a, b = operands(rng, np.float16, 64, 64, 64, layout="cr")
    with pytest.raises(ValueError, match="explicit Pinghu kernel"):
        G.gemm(a, b, backend="pinghu", config=CFG_PH)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["rr", "cr"])
def test_tuned_choice_is_the_cycle_models_fastest(layout, rng, monkeypatch):
    """On pinghu the tuner measures each candidate's modelled time and launches the
    fastest: the recorded times are do_bench's modelled times, the winner their min.
    Row-major operands take the explicit kernel's tuner, the others the portable one."""
    from mutile.kernels import gemm_pinghu as P
    monkeypatch.setenv("MUTILE_TUNE_WORKERS", "1")      # in-process: no worker start-up
    a, b = operands(rng, BF16, 96, 80, 128, layout=layout)
    out = poison((96, 80), np.float32)
    G.gemm(a, b, out=out, backend="pinghu")
    tuner = P.gemm_ph_tuned if layout == "rr" else G.TUNERS["pinghu"]
    d = tuner.tuning_log[-1]
    assert tuner.best_config is d.winner and len(d.timings) >= 2
    (win,) = [i for i, cfg in d.configs.items() if cfg is d.winner]
    assert d.timings[win][0] == min(t[0] for t in d.timings.values())
    for ident in [win, max(d.timings, key=lambda i: d.timings[i][0])]:
        cfg = d.configs[ident]
        ms = mutile.testing.do_bench(lambda: G.gemm(a, b, out=out, backend="pinghu",
                                                     config=cfg))
        assert ms == pytest.approx(d.timings[ident][0], rel=1e-9)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    check(out, a64 @ b64, a64, b64, 0.0, 128)       # the last run (a config) wrote out


def test_bad_inputs():
    a = np.ones((4, 8), np.float32)
    b = np.ones((8, 5), np.float32)
    cases = [
        (TypeError, "one dtype", dict(b=b.astype(np.float16))),
        (ValueError, "inner dims", dict(b=np.ones((7, 5), np.float32))),
        (ValueError, "activation", dict(activation="tanh")),
        (ValueError, "tf32", dict(a=a.astype(np.float16), b=b.astype(np.float16),
                                  input_precision="tf32")),
        (ValueError, "per-tensor factors", dict(a_scale=2.0)),
        (ValueError, "beta", dict(beta=1.0)),
        (ValueError, "bias", dict(bias=np.ones(4, np.float32))),
        (ValueError, "out must be", dict(out=np.empty((4, 6), np.float32))),
        (ValueError, "out must be", dict(out=np.empty((4, 5), np.float16), out_dtype=np.float32)),
        (TypeError, "unsupported dtype", dict(a=a.astype(np.float64), b=b.astype(np.float64))),
        (ValueError, "int32 output", dict(a=a.astype(np.int8), b=b.astype(np.int8), alpha=2.0)),
        (TypeError, "integer output", dict(out_dtype=np.int32)),
        (ValueError, "one finite number", dict(a=a.astype(E4M3), b=b.astype(E4M3),
                                               a_scale=np.ones(3))),
        (ValueError, "split_k", dict(split_k=0)),
    ]
    for exc, text, kw in cases:
        args = {"a": a, "b": b, **kw}
        with pytest.raises(exc, match=text):
            G.gemm(args.pop("a"), args.pop("b"), backend="llvm", **args)
