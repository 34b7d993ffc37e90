"""Write data/lj_observations.h5: the potential energy and pressure of a short NVE run of
experiments/lj_calibration.toml at epsilon = 1.2, sigma = 1.05, with 5% Gaussian noise
(5% of each series' mean magnitude) and that noise level as per-point sigma.

    python experiments/data/make_lj_observations.py
"""

from pathlib import Path

import h5py
import numpy as np

import sim

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)

HERE = Path(__file__).resolve().parent
TRUTH = {"epsilon": 1.2, "sigma": 1.05}
NOISE = 0.05


def observations(config_path, truth=TRUTH, seed=0, noise=NOISE):
    """(times, {name: noisy values}, {name: sigma}) of a run of the config at `truth`."""
    run = sim.run(sim.load_config(config_path, [f"params.{k}={v}" for k, v in truth.items()]))
    rng = np.random.default_rng(seed)
    values, sigma = {}, {}
    for name in ("potential_energy", "pressure"):
        exact = np.asarray(run.observables[name])
        scale = noise * float(np.mean(np.abs(exact)))
        values[name] = exact + scale * rng.standard_normal(exact.shape)
        sigma[name] = np.full(exact.shape, scale)
    return np.asarray(run.time), values, sigma


def write(path, time, values, sigma):
    with h5py.File(path, "w") as f:
        f["t"] = time
        for name in values:
            f[name] = values[name]
            f[f"{name}_sigma"] = sigma[name]
    return path


if __name__ == "__main__":
    out = write(HERE / "lj_observations.h5", *observations(HERE.parent / "lj_calibration.toml"))
    print(f"wrote {out}")
