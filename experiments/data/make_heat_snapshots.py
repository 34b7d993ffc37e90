"""Noisy snapshots of a heat-equation run, the data of experiments/heat_diffusivity_fit.toml.

The run is that config's own model, grid, initial field and save times with the true
diffusivity D = 0.35; Gaussian noise of 5% of the field's maximum is added (seed 0).

Run: python experiments/data/make_heat_snapshots.py  (writes heat_snapshots.h5 beside this script)
"""

from pathlib import Path

import h5py
import numpy as np

import sim

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)

HERE = Path(__file__).resolve().parent
CONFIG = HERE.parent / "heat_diffusivity_fit.toml"
TRUTH = 0.35
NOISE = 0.05


def main() -> None:
    run = sim.run(sim.load_config(CONFIG, [f"params.diffusivity={TRUTH}"]))
    u = run.observables["u"]
    rng = np.random.default_rng(0)
    noisy = u + NOISE * np.abs(u).max() * rng.standard_normal(u.shape)
    with h5py.File(HERE / "heat_snapshots.h5", "w") as f:
        f.attrs["source"] = (
            f"sim run of {CONFIG.name} with diffusivity = {TRUTH}, {NOISE:.0%} Gaussian noise, "
            "seed 0"
        )
        f.attrs["diffusivity"] = TRUTH
        f.create_dataset("t", data=run.time)
        f.create_dataset("x", data=run.groups["grid"]["x"])
        f.create_dataset("u", data=noisy)


if __name__ == "__main__":
    main()
