"""The Dask path: chunks as tasks on the `local:N` cluster of two worker processes
(loopback only), gathered into one file identical to the local sweep's; on a machine
with GPUs each worker sees its own and none preallocates."""

import os

import h5py
import numpy as np
import pytest
from distributed import Client

import sim
from sim._distributed import _local_cluster, worker_environment

# 12 runs in chunks of 4: three tasks, so both workers get work; the planted negative
# predators fail on the workers as they do locally.
CONFIG = """
[model]
name = "lotka_volterra"
[time]
t1 = 10.0
save = 11
[sweep]
mode = "zip"
chunk = 4
[sweep.params]
alpha = { linspace = [0.4, 0.6, 12] }
"initial.predator" = { values = [4.0, 3.0, -1.0, 2.0, 4.0, 3.0, 2.0, 1.0, 4.0, -2.0, 2.0, 1.5] }
"""


def worker_runners() -> int:
    from sim._sweep import _cached_runner

    return _cached_runner.cache_info().currsize


@pytest.fixture(scope="module")
def cluster():
    # The cluster `--scheduler local:2` starts, on a machine that shows the GPUs 3 and 5
    # (CUDA_VISIBLE_DEVICES, as a scheduler sets it; a CPU JAX ignores it).
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = "3,5"
    try:
        cluster = _local_cluster(2)
    finally:
        if before is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
    with cluster:
        yield cluster


def test_each_local_worker_sees_one_gpu_and_allocates_as_it_needs(cluster):
    with Client(cluster) as client:
        seen = client.run(
            lambda: (
                os.environ.get("CUDA_VISIBLE_DEVICES"),
                os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
            )
        )
        assert set(client.nthreads().values()) == {1}
    assert sorted(seen.values()) == [("3", "false"), ("5", "false")]


def test_the_worker_environment_takes_the_gpus_in_turn_and_keeps_the_user_s_choice(
    monkeypatch,
):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    assert [worker_environment(i, ["0", "1"])["CUDA_VISIBLE_DEVICES"] for i in range(5)] == [
        "0",
        "1",
        "0",
        "1",
        "0",
    ]
    assert worker_environment(0, []) == {}  # no GPU: nothing added
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    assert worker_environment(1, ["2"]) == {
        "CUDA_VISIBLE_DEVICES": "2",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "true",
    }


def test_dask_equals_local(cluster, tmp_path):
    (tmp_path / "sweep.toml").write_text(CONFIG)
    config = sim.load_config(tmp_path / "sweep.toml")
    remote = sim.sweep(config, tmp_path / "dask.h5", scheduler=cluster.scheduler_address)
    local = sim.sweep(config, tmp_path / "local.h5")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dask.h5", "local.h5", "sweep.toml"]
    with h5py.File(tmp_path / "dask.h5") as a, h5py.File(tmp_path / "local.h5") as b:
        names = []
        a.visititems(
            lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None
        )
        assert "observables/prey" in names and "status" in names
        for name in names:
            assert a[name][()].tobytes() == b[name][()].tobytes(), name
        assert a.attrs["config"] == b.attrs["config"]
    # both workers computed chunks (each compiled the chunk function once)
    with Client(cluster) as client:
        built = client.run(worker_runners)
    assert len(built) == 2 and all(n == 1 for n in built.values()), built
    assert list(np.flatnonzero(remote.status == 2)) == [2, 9]
    assert np.all(np.isfinite(remote.observables["prey"][remote.ok]))
    assert remote.observables["prey"].tobytes() == local.observables["prey"].tobytes()


@pytest.mark.slow
def test_cli_local_scheduler_starts_its_own_cluster(tmp_cwd, capsys):
    from sim.cli import main

    (tmp_cwd / "sweep.toml").write_text(CONFIG)
    with pytest.raises(SystemExit) as info:
        main(["sweep", "sweep.toml", "-o", "out.h5", "--scheduler", "local:2"])
        raise SystemExit(0)
    err = capsys.readouterr().err
    assert info.value.code == 0, err
    assert "12 runs (10 ok, 2 failed)" in err
    assert list(np.flatnonzero(sim.SweepResult.read("out.h5").status == 2)) == [2, 9]
