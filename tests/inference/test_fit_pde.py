"""Calibrating PDE parameters from noisy field snapshots stored in HDF5."""

from pathlib import Path

import h5py
import jax
import numpy as np
import pytest

import sim
from inference import fit, infer

CONFIG = """
[model]
name = "{model}"
[grid]
points = [32]
domain = [[0.0, 6.283185307179586]]
[params]
{param} = {start}
[initial]
kind = "{kind}"
[time]
t1 = 1.0
save = 11
dt = 0.02
[data]
file = "snap.h5"
time = "/t"
[data.observables]
u = "/u"
[fit]
free = ["{param}"]
loss = "normal"
[infer]
chains = 1
warmup = 150
samples = 150
[infer.priors]
{param} = {{ dist = "lognormal", loc = -1.5, scale = 1.0 }}
[infer.noise]
model = "normal"
sigma = {{ dist = "halfnormal", scale = 0.2 }}
"""


def noisy_snapshots(tmp_path, model, param, truth, start, kind, seed):
    """Write 5%-noise snapshots of a run at `truth`; return a config that starts at `start`."""
    path = tmp_path / "c.toml"
    path.write_text(CONFIG.format(model=model, param=param, start=start, kind=kind))
    run = sim.run(sim.load_config(path, [f"params.{param}={truth}"]))
    u = run.observables["u"]
    rng = np.random.default_rng(seed)
    with h5py.File(tmp_path / "snap.h5", "w") as f:
        f["t"] = run.time
        f["u"] = u + 0.05 * np.abs(u).max() * rng.standard_normal(u.shape)
    return sim.load_config(path)


@pytest.mark.parametrize(
    "model, param, truth, start, kind",
    [("heat", "diffusivity", 0.35, 0.2, "gaussian"), ("burgers", "viscosity", 0.05, 0.1, "sine")],
)
def test_recovers_pde_coefficient_within_two_standard_errors(tmp_path, model, param, truth, start, kind):
    config = noisy_snapshots(tmp_path, model, param, truth, start, kind, seed=0)
    result = fit(config)
    assert result.converged, result.message
    estimate, stderr = result.estimate[param], result.stderr[param]
    assert 0 < stderr < 0.5 * truth
    assert abs(estimate - truth) < 2 * stderr, (estimate, stderr)


def test_heat_diffusivity_posterior_covers_the_truth(tmp_path):
    config = noisy_snapshots(tmp_path, "heat", "diffusivity", 0.35, 0.2, "gaussian", seed=1)
    with jax.numpy_dtype_promotion("standard"):
        posterior = infer(config)
    draws = posterior.posterior["diffusivity"]
    lo, hi = np.quantile(draws, [0.05, 0.95])
    assert lo < 0.35 < hi, (lo, hi)
    assert posterior.divergences == 0
