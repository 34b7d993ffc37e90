"""An SDE ensemble's paths split over several devices (`SdeEnsemble(devices=N)`,
`[ensemble] devices`, `sim run --devices N`), on simulated CPU devices
(`--xla_force_host_platform_device_count`): each device holds paths/N of them, every path
is the numbers it is on one device (its key does not depend on the split), the compiled
step gathers no ensemble onto one device, and the ensemble still has the exact
Ornstein-Uhlenbeck moments. One process of 4 devices runs every case (1 and 4 devices
as meshes of its first devices)."""

import os
import subprocess

import numpy as np
import pytest

import sim
from tests.helpers import cli, host_devices, script_command

OU = """
[model]
name = "ornstein_uhlenbeck"
[params]
theta = 1.5
mu = 0.4
sigma = 0.7
[initial]
x = 2.0
[time]
t1 = 1.0
save = 11
[solver]
method = "euler"
dt = 0.01
[ensemble]
paths = {paths}
seed = 7
{extra}
"""

CASES = r"""
import contextlib
import io
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np

import sim
from sim.cli import main
from solvers import SdeEnsemble, SdeSolver

sim.configure_jax()
assert len(jax.devices()) == 4, jax.devices()
out = sys.argv[1]
model = sim.get_model("ornstein_uhlenbeck")
params = {"theta": jnp.asarray(1.5), "mu": jnp.asarray(0.4), "sigma": jnp.asarray(0.7)}
t = jnp.linspace(0.0, 1.0, 11)
saved = {}
for devices in (1, 4):
    ensemble = SdeEnsemble(SdeSolver(method="euler", dt=0.01), paths=4096, devices=devices)
    run = jax.jit(
        lambda p: sim.simulate(
            model, p, t, initial={"x": 2.0}, solver=ensemble, key=jax.random.key(7)
        )
    )
    compiled = run.lower(params).compile()
    traj = compiled(params)
    final = traj.final_state  # [paths, 1]
    blocks = {s.data.shape for s in final.addressable_shards}
    assert blocks == {(4096 // devices, 1)}, blocks
    assert len(final.sharding.device_set) == devices
    if devices > 1:
        # no all-gather of the paths (only the step count and result code are reduced)
        gathers = re.findall(r"= \w+\[([\d,]*)\]\{[^}]*\} all-gather", compiled.as_text())
        assert not [g for g in gathers if g and int(g.split(",")[0]) >= 4096], gathers
    saved[f"x_{devices}"] = np.asarray(traj.observables["x"])
# the streamed run of a config, through the command line, on 1 and 4 devices
for devices, name in ((None, "one.h5"), (4, "four.h5")):
    argv = ["run", "ou.toml", "-o", name, "--quiet"] + (["--devices", "4"] if devices else [])
    try:
        main(argv)
    except SystemExit as e:
        assert e.code in (0, None), e.code
# a sweep splits its runs, not each run's paths: refused in one line, nothing written
with open("sweep.toml", "w") as f:
    f.write(open("ou.toml").read().replace("seed = 7", "seed = 7\ndevices = 2")
            + "[sweep.params]\ntheta = [1.0, 2.0]\n")
err = io.StringIO()
with contextlib.redirect_stderr(err):
    try:
        main(["sweep", "sweep.toml", "-o", "sweep.h5"])
        code = 0
    except SystemExit as e:
        code = e.code
saved["sweep_code"] = np.asarray(code)
saved["sweep_err"] = np.asarray(err.getvalue())
np.savez(out, **saved)
"""


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sde_devices")
    (folder / "ou.toml").write_text(OU.format(paths=64, extra=""))
    env = {**os.environ, "XLA_FLAGS": host_devices(4)}
    env.pop("NPROC", None)
    done = subprocess.run(
        script_command(CASES, str(folder / "cases.npz")),
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    with np.load(folder / "cases.npz") as f:
        return folder, dict(f)


def test_the_paths_split_over_devices_are_the_paths_of_one(cases):
    _, saved = cases
    one = saved["x_1"]  # [T, paths]
    np.testing.assert_allclose(saved["x_4"], one, rtol=1e-14, atol=1e-14)
    # The ensemble has the exact Ornstein-Uhlenbeck moments: mean mu + (x0 - mu) e^{-theta t},
    # variance sigma^2 (1 - e^{-2 theta t}) / (2 theta) (Euler-Maruyama's bias at dt = 0.01
    # is far below the sampling error of 4,096 paths).
    t = np.linspace(0.0, 1.0, 11)
    mean = 0.4 + (2.0 - 0.4) * np.exp(-1.5 * t)
    var = 0.7**2 * (1 - np.exp(-3.0 * t)) / 3.0
    x = saved["x_4"]
    assert np.all(np.abs(x.mean(axis=1)[1:] - mean[1:]) < 4 * np.sqrt(var[1:] / x.shape[1]))
    assert np.all(np.abs(x.var(axis=1)[1:] / var[1:] - 1) < 4 * np.sqrt(2 / x.shape[1]))


def test_sim_run_on_4_devices_writes_the_file_of_one(cases):
    folder, _ = cases
    one, four = sim.read(folder / "one.h5"), sim.read(folder / "four.h5")
    a, b = np.asarray(one.observables["x"]), np.asarray(four.observables["x"])
    assert a.shape == (11, 64) and np.all(np.isfinite(a))
    np.testing.assert_allclose(b, a, rtol=1e-14, atol=1e-14)
    assert "devices = 4" in four.attrs["config"]


@pytest.mark.parametrize(
    "extra, argv, key",
    [
        (
            "devices = 3",
            ["run", "ou.toml", "-o", "out.h5"],
            "ensemble.devices",
        ),  # (3 does not divide 64)
        ("devices = 64", ["run", "ou.toml", "-o", "out.h5"], "ensemble.devices"),  # too many
        ("", ["run", "ou.toml", "-o", "out.h5", "--devices", "3"], "ensemble.devices"),
    ],
)
def test_a_split_that_cannot_be_is_one_line_and_writes_nothing(tmp_cwd, capsys, extra, argv, key):
    (tmp_cwd / "ou.toml").write_text(OU.format(paths=64, extra=extra))
    code, err = cli(argv, capsys)
    err = err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and key in err, (code, err)
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["ou.toml"]


def test_a_sweep_refuses_to_split_each_run_s_paths(cases):
    folder, saved = cases
    err = str(saved["sweep_err"]).strip()
    assert int(saved["sweep_code"]) == 2 and len(err.splitlines()) == 1, err
    assert "ensemble.devices" in err and "sim sweep --devices N" in err, err
    assert not (folder / "sweep.h5").exists()


def test_devices_of_a_model_that_runs_on_one_device_is_refused(tmp_cwd, capsys):
    (tmp_cwd / "lv.toml").write_text('[model]\nname = "lotka_volterra"\n[time]\nt1 = 1.0\n')
    code, err = cli(["run", "lv.toml", "-o", "out.h5", "--devices", "2"], capsys)
    err = err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--devices" in err, (code, err)
    assert "ODE models run on one device" in err, err
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["lv.toml"]
