"""Tuning in other processes: the default pool of two spawned workers and any
``concurrent.futures.Executor`` — here a real local Dask cluster with two worker processes
(the ``[distributed]`` extra). Kernels are rebuilt in the workers from their source;
modelled Pinghu times are deterministic, so parallel and serial tuning pick the same
config with the same times. On llvm the workers compile, and the wall times are taken
in the tuning process."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import Config
from mutile.autotune import config as C

from ..conftest import poison
from .conftest import block_grid

CONFIGS = [Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64) for w in (2, 4)]


@mutile.jit
def axpy_kernel(X, Y, Z, n, alpha, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = offs < n
    ml.store(Z + offs, alpha * ml.load(X + offs, mask=m) + ml.load(Y + offs, mask=m), mask=m)


serial = mutile.autotune(configs=CONFIGS, key=["n"], workers=1, warmup=1, rep=3)(axpy_kernel)
parallel = mutile.autotune(configs=CONFIGS, key=["n"], workers=2, warmup=1,
                           rep=3)(axpy_kernel)
on_cluster = mutile.autotune(configs=CONFIGS, key=["n"])(axpy_kernel)   # executor: set below


def _axpy(k, x, y, backend):
    z = poison(x.shape, x.dtype)
    k[block_grid(x.size)](x, y, z, x.size, 0.5, backend=backend)
    np.testing.assert_allclose(z, 0.5 * x.astype(np.float64) + y, rtol=1e-6)
    return k.tuning_log[-1]


def test_parallel_and_serial_pick_the_same(backend, rng, cache_dir):
    x, y = (rng.standard_normal(700).astype(np.float32) for _ in range(2))
    d_par = _axpy(parallel, x, y, backend)
    assert len(d_par.measured) == 6
    assert not [n for n in d_par.notes if "serially" in n]      # it really ran in parallel
    if backend == "pinghu":
        for p in cache_dir.rglob("*.bin"):          # no cache: serial measures everything
            p.unlink()
    d_ser = _axpy(serial, x, y, backend)
    assert len(d_ser.measured) == 6
    if backend == "pinghu":
        assert d_par.timings == d_ser.timings
        assert C.identity(d_par.winner) == C.identity(d_ser.winner)
    else:
        assert set(d_par.timings) == set(d_ser.timings)


def test_a_kernel_a_worker_cannot_rebuild_is_tuned_serially(rng):
    # a tuner no module-level name holds (as one made inside a function)
    local = mutile.autotune(configs=CONFIGS[:4], key=["n"], workers=2)(axpy_kernel)

    x, y = (rng.standard_normal(100).astype(np.float32) for _ in range(2))
    d = _axpy(local, x, y, "pinghu")
    assert len(d.measured) == 4 and "measured serially" in d.notes[0]


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.mark.slow
def test_a_dask_cluster_as_the_executor(dask_client, rng, cache_dir):
    on_cluster.executor = dask_client.get_executor()
    x, y = (rng.standard_normal(500).astype(np.float32) for _ in range(2))
    d = _axpy(on_cluster, x, y, "pinghu")
    assert len(d.measured) == 6 and d.notes == []
    workers = dask_client.run(lambda: __import__("os").getpid())
    assert len(workers) == 2
    for p in cache_dir.rglob("*.bin"):
        p.unlink()
    d_ser = _axpy(serial, x, y, "pinghu")
    assert d.timings == d_ser.timings
    assert C.identity(d.winner) == C.identity(d_ser.winner)
