"""Write data/lj_rdf_target.h5: the time-averaged g(r) of a run of
experiments/lj_rdf_fit.toml at epsilon = sigma = 1, seed 1 (not the fit's) and 64,000
steps, so that its own noise (0.4% in epsilon) stays below a step of the fit's (what
`sim run` of that config with those settings writes to /observables/rdf: its last row,
the whole average, and the bin centres), the target that
`sim fit experiments/lj_rdf_fit.toml` fits.

    python experiments/data/make_lj_rdf_target.py
"""

from pathlib import Path

import h5py
import numpy as np

import sim

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)

HERE = Path(__file__).resolve().parent
CONFIG = HERE.parent / "lj_rdf_fit.toml"
TRUTH = {"epsilon": 1.0, "sigma": 1.0}
SETTINGS = ["system.seed=1", "time.steps=64000"]


def write(path: Path = HERE / "lj_rdf_target.h5", truth=TRUTH) -> Path:
    config = sim.load_config(
        CONFIG,
        [
            *(f"params.{k}={v}" for k, v in truth.items()),
            *SETTINGS,
            f'data.file="{HERE / "unused.h5"}"',
        ],
    )
    record = sim.run(config).to_record()
    with h5py.File(path, "w") as f:
        f["observables/rdf/value"] = np.asarray(record["observables/rdf/value"])[-1]
        f["observables/rdf/r"] = np.asarray(record["observables/rdf/r"])
        for name, value in truth.items():
            f[f"truth/{name}"] = value
    return path


if __name__ == "__main__":
    print(write())
