"""A sweep killed with SIGKILL mid-way and resumed ends with the same file, bitwise, as
an uninterrupted run. Every run here is sharded over two host devices (the same device
count throughout: a batch split another way may round differently in the last bits)."""

import os
import signal
import subprocess
import sys
import time

import h5py
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from sim.cli import main
from tests.helpers import host_devices

# Every chunk of 2 runs holds one diverging run (negative predators), which takes the
# solver to max_steps: chunks are slow enough to kill the sweep between them.
CONFIG = """
[model]
name = "lotka_volterra"
[time]
t1 = 10.0
save = 21
[solver]
max_steps = 16384
[sweep]
chunk = 2
[sweep.params]
alpha = { linspace = [0.3, 0.8, 20] }
"initial.predator" = { values = [-1.0, 4.0] }
"""
RUNS = 40
ENV = {**os.environ, "XLA_FLAGS": host_devices(2)}


RESUME_THEN_REFERENCE = """
import sim
from sim.cli import main
try:
    main(["sweep", "sweep.toml", "-o", "out.h5", "--resume"])
except SystemExit as e:
    assert e.code == 0, e.code
sim.sweep(sim.load_config("sweep.toml"), "reference.h5")
"""


def datasets(path) -> dict[str, np.ndarray]:
    out = {}
    with h5py.File(path, "r", locking=False) as f:
        f.visititems(
            lambda name, item: (
                out.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
            )
        )
        attrs = {k: v for k, v in f.attrs.items() if k != "created"}
    return out, attrs


def finished_runs(partial) -> int:
    try:
        with h5py.File(partial, "r", locking=False) as f:
            return int(np.sum(f["status"][()] != 0))
    except (OSError, KeyError):
        return 0


def sim_command(*args) -> list[str]:
    return [sys.executable, "-c", "from sim.cli import main; main()", *args]


def test_sigkill_then_resume_equals_uninterrupted(tmp_cwd, capsys):
    (tmp_cwd / "sweep.toml").write_text(CONFIG)
    killed = subprocess.Popen(
        sim_command("sweep", "sweep.toml", "-o", "out.h5", "--quiet", "--devices", "2"),
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    partial = tmp_cwd / ".out.h5.partial"
    deadline = time.monotonic() + 240
    try:
        while finished_runs(partial) < 4:  # at least two chunks written
            assert killed.poll() is None, killed.stderr.read().decode()
            assert time.monotonic() < deadline, "the sweep wrote no chunk in time"
            time.sleep(0.02)
        killed.send_signal(signal.SIGKILL)
    finally:
        killed.wait(timeout=60)
    assert killed.returncode == -signal.SIGKILL
    done = finished_runs(partial)
    assert 0 < done < RUNS, done
    assert not (tmp_cwd / "out.h5").exists()

    # The unfinished file only resumes with the config it was started from.
    with pytest.raises(SystemExit) as info:
        main(["sweep", "sweep.toml", "-o", "out.h5", "--resume", "-q", "--set", "solver.rtol=1e-7"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1
    assert ".out.h5.partial" in err and "different config" in err and "rtol" in err

    # Resume in a fresh process; then, in that process, the same sweep uninterrupted.
    resumed = subprocess.run(
        [sys.executable, "-c", RESUME_THEN_REFERENCE],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"{done} resumed" in resumed.stderr
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["out.h5", "reference.h5", "sweep.toml"]

    got, got_attrs = datasets(tmp_cwd / "out.h5")
    want, want_attrs = datasets(tmp_cwd / "reference.h5")
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
        assert got[name].tobytes() == want[name].tobytes(), name
    assert got_attrs == want_attrs
    status = want["status"]
    assert np.all(status != 0) and np.sum(status == 2) == RUNS // 2  # the negative predators

    # The sharded values are those of single runs.
    model = sim.get_model("lotka_volterra")
    t = jnp.asarray(want["time"])
    for i in (1, 17, 39):
        params = {**model.default_params(), "alpha": want["params/alpha"][i]}
        traj = sim.simulate(model, params, t, initial={"predator": want["initial/predator"][i]})
        np.testing.assert_allclose(got["observables/prey"][i], traj.observables["prey"], rtol=1e-11)
