"""PDE configs sweep like ODE ones: every run of a spectral and of a finite-difference
sweep equals the exact solution and a single `sim run` of its values, and the statistics
of a summary sweep equal NumPy's of single runs."""

from pathlib import Path

import numpy as np
import pytest

import sim
from tests.helpers import cli

SPECTRAL = """
[model]
name = "heat"
[grid]
points = [16]
domain = [[0.0, 6.283185307179586]]
[initial]
kind = "sine"
[time]
t1 = 0.5
save = 6
dt = 0.01
[sweep]
mode = "grid"
[sweep.params]
diffusivity = { values = [0.1, 0.3, 0.5, 1.0] }
"""

FD = """
[model]
name = "heat_fd"
[grid]
points = [17]
domain = [[0.0, 1.0]]
[initial]
kind = "sine"
[time]
t1 = 0.1
save = 6
[solver]
method = "kvaerno5"
rtol = 1e-10
atol = 1e-12
[sweep]
mode = "grid"
[sweep.params]
diffusivity = { linspace = [0.05, 0.2, 3] }
"""


@pytest.mark.parametrize("text", [SPECTRAL, FD], ids=["spectral", "finite_differences"])
def test_pde_sweep_runs_equal_single_runs(text, tmp_cwd, capsys):
    Path("s.toml").write_text(text)
    code, err = cli(["sweep", "s.toml", "-o", "sweep.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("sweep.h5")
    assert record.format == "simjax.sweep"
    values = record.params["diffusivity"]
    u = record.observables["u"]
    assert u.shape[0] == len(values) and np.all(record.status == 1)
    for i, d in enumerate(values):
        single = sim.run(sim.load_config("s.toml", [f"params.diffusivity={float(d)}"]))
        np.testing.assert_allclose(u[i], single.observables["u"], rtol=1e-9, atol=1e-12)
        x = single.groups["grid"]["x"]
        t = record.time
        if "heat_fd" in text:
            # u(0) = u(1) = 0 and u0 = sin(2 pi x): an eigenvector of the second-order
            # Laplacian, so the semi-discrete solution is exp(-lambda D t) u0 with the
            # discrete eigenvalue lambda = (4 / h^2) sin^2(pi h) (-> 4 pi^2 as h -> 0).
            h = x[1] - x[0]
            lam = (4 / h**2) * np.sin(np.pi * h) ** 2
            exact = np.exp(-lam * d * t)[:, None] * np.sin(2 * np.pi * x)[None, :]
            np.testing.assert_allclose(u[i], exact, atol=1e-8)
        else:
            # u = exp(-D t) sin(x): the Fourier mode k = 1 decays at D k^2 (exact in ETDRK).
            exact = np.exp(-d * t)[:, None] * np.sin(x)[None, :]
            np.testing.assert_allclose(u[i], exact, atol=1e-10)


def test_pde_sweep_summary_equals_numpy_of_single_runs(tmp_cwd, capsys):
    # save = "summary": per run, min, max and mean over the save times and the grid, and
    # the final value, of every observable (the field u [T, N] and the mass [T]) equal
    # NumPy's of a single `sim run` of its values (measured: to 3e-17). The spectral sweep
    # above, summarised (the finite-difference one would compile its implicit solver's
    # batch again: 7 s).
    Path("s.toml").write_text(SPECTRAL.replace('mode = "grid"', 'mode = "grid"\nsave = "summary"'))
    code, err = cli(["sweep", "s.toml", "-o", "summary.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("summary.h5")
    values = record.params["diffusivity"]
    assert len(values) == 4 and np.all(record.status == 1)
    for i, d in enumerate(values):
        single = sim.run(sim.load_config("s.toml", [f"params.diffusivity={float(d)}"]))
        assert set(record.observables) == set(single.observables) == {"u", "mass"}
        for name, value in single.observables.items():
            value = np.asarray(value)
            stats = record.observables[name]
            assert set(stats) == {"min", "max", "mean", "final"}
            assert stats["final"][i].shape == value.shape[1:]
            np.testing.assert_allclose(stats["final"][i], value[-1], rtol=1e-9, atol=1e-12)
            for stat, reduce in (("min", np.min), ("max", np.max), ("mean", np.mean)):
                np.testing.assert_allclose(
                    stats[stat][i],
                    reduce(value),
                    rtol=1e-9,
                    atol=1e-12,
                    err_msg=f"{name} {stat} run {i}",
                )
