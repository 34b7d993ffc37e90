"""Memory checks on the device a run computes on: a run's state is compared with a GPU's
own memory where the run is on one (`sim._limits.device_memory`), with the machine's
memory on a CPU; the GPUs a process may use are found without starting JAX
(`visible_gpus`: CUDA_VISIBLE_DEVICES, else `nvidia-smi -L`)."""

import os
import stat
import types

import jax
import pytest

from sim import _limits
from sim.cli import main

GIB = 1 << 30


def test_the_visible_gpus_are_those_cuda_visible_devices_names(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 7")
    assert _limits.visible_gpus() == ["2", "7"]
    for none in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", none)
        assert _limits.visible_gpus() == []


def test_without_cuda_visible_devices_the_gpus_are_what_nvidia_smi_lists(monkeypatch, tmp_path):
    tool = tmp_path / "nvidia-smi"
    tool.write_text(
        "#!/bin/sh\n"
        "echo 'GPU 0: NVIDIA H100 (UUID: GPU-a)'\n"
        "echo 'GPU 1: NVIDIA H100 (UUID: GPU-b)'\n"
    )
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    _limits._listed_gpus.cache_clear()
    try:
        assert _limits.visible_gpus() == ["0", "1"]
        monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))  # no tool: no GPU
        _limits._listed_gpus.cache_clear()
        assert _limits.visible_gpus() == []
    finally:
        _limits._listed_gpus.cache_clear()


def test_on_a_cpu_the_device_is_the_machine():
    jax.devices()  # (JAX started, on the CPU)
    assert _limits.device_memory() is None
    limit = _limits.physical_memory()
    assert _limits.memory_problem(limit // 2, "half", device=True) is None
    assert "more than this machine has" in _limits.memory_problem(2 * limit, "twice", device=True)


def fake_gpus(monkeypatch, *limits):
    devices = [
        types.SimpleNamespace(
            platform="gpu", id=i, memory_stats=lambda b=b: {"bytes_limit": b, "bytes_in_use": 0}
        )
        for i, b in enumerate(limits)
    ]
    monkeypatch.setattr(jax, "local_devices", lambda: devices)


def test_on_gpus_the_smallest_device_s_memory_bounds_a_run(monkeypatch):
    fake_gpus(monkeypatch, 80 * GIB, 40 * GIB)
    assert _limits.device_memory() == (40 * GIB, "gpu:1")
    # a state of 60 GiB fits in the machine's memory of this test, not in a 40 GiB GPU
    monkeypatch.setattr(_limits, "physical_memory", lambda: 1 << 50)
    line = _limits.memory_problem(60 * GIB, "a grid of 1,000 points", device=True)
    assert line == (
        "a grid of 1,000 points would need at least 60 GiB of memory on the device, more "
        "than gpu:1 has (40 GiB)"
    )
    # split over 2 devices, 30 GiB each fit; over 1 they do not
    assert _limits.memory_problem(60 * GIB, "x", device=True, devices=2) is None
    assert "on each device" in _limits.memory_problem(100 * GIB, "x", device=True, devices=2)
    # what lives on the host is still compared with the machine's memory
    assert _limits.memory_problem(60 * GIB, "reading", device=False) is None


def test_a_grid_larger_than_the_gpu_is_a_config_error_naming_the_device(
    monkeypatch, tmp_cwd, capsys
):
    fake_gpus(monkeypatch, 2 * GIB)
    (tmp_cwd / "big.toml").write_text(
        '[model]\nname = "heat"\n[grid]\npoints = [8192, 8192]\n'
        "domain = [[0.0, 6.283185307179586], [0.0, 6.283185307179586]]\n"
        "[time]\nt1 = 0.1\nsave = 3\ndt = 0.05\n"
    )
    with pytest.raises(SystemExit) as info:
        main(["run", "big.toml", "-o", "big.h5"])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and len(err.splitlines()) == 1, err
    assert "grid.points" in err and "gpu:0 has (2 GiB)" in err, err
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["big.toml"]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["sweep", "c.toml", "--scheduler", "local:2"], "false"),
        (["fit", "c.toml", "--scheduler=local:4", "--starts", "8"], "false"),
        (["sweep", "c.toml", "--scheduler", "tcp://10.0.0.1:8786"], None),  # (its own machines)
        (["run", "c.toml", "-o", "local:2"], None),  # (a file named so: not a scheduler)
    ],
)
def test_a_command_that_starts_local_workers_does_not_preallocate_gpus(monkeypatch, args, expected):
    import _sim_entry

    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    _sim_entry._gpus_shared_with_workers(args)
    assert os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE") == expected
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")  # the user's own choice stands
    _sim_entry._gpus_shared_with_workers(args)
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
