"""One MD run split over devices by slabs (`solvers.SlabRun`) against the same run split
by particle rows (`solvers.ParticleRun`, the state replicated and the forces all-gathered
each step), in one process of simulated CPU devices
(`--xla_force_host_platform_device_count`), rounds interleaved.

Lennard-Jones at the triple-point density, melting from an fcc lattice (hot random
velocities), cutoff 2.5, skin 0.3, float64, velocity Verlet at dt = 0.005. Prints per
device count: ms a step (builds included), bytes of one device's state, bytes a device
sends a step (ghost positions to two neighbours, against the all-gathered forces of the
row split), the builds, and the largest difference in positions between the two.

With `--charges`: ions by particle-mesh Ewald instead (`lj_coulomb`, a rock-salt crystal at
density 0.6 that melts, cutoff 2.5, mesh from ewald_accuracy 1e-5, dt = 0.002), the slab
run against the replicated run of one device (the row split takes pair models only).

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python experiments/benchmarks/md_slabs.py
"""

from __future__ import annotations

import argparse
import os
import time

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    )

import jax  # noqa: E402
import numpy as np  # noqa: E402

import sim  # noqa: E402
from physics import md  # noqa: E402
from solvers import ParticleRun, ParticleSolver, SlabRun, VelocityVerlet  # noqa: E402

EVERY = 20


def melting(cells: int):
    system = md.lattice("fcc", cells, 0.8442)
    v = 1.2 * jax.random.normal(jax.random.key(0), system.position.shape)
    return system.at(system.position, v - v.mean(0))


def ions(cells: int):
    return md.thermalize(md.lattice("rocksalt", cells, 0.6), jax.random.key(0), 1.0)


def timed_slabs(model, system, devices: int, saves: int, dt: float):
    times = np.linspace(0.0, saves * EVERY * dt, saves + 1)
    run = SlabRun(
        model,
        model.default_params(),
        system,
        dt,
        times=times,
        every=EVERY,
        devices=devices,
        chunk=saves,
    )
    state = run.start()
    run.advance(state, 0, saves)  # (compiles)
    before = run.builds
    began = time.perf_counter()
    state, rows = run.advance(state, 0, saves)
    seconds = time.perf_counter() - began
    run.builds -= before  # (the builds of the timed round)
    return seconds, run, rows["position"][-1]


def timed_rows(model, system, devices: int, saves: int, dt: float):
    times = np.linspace(0.0, saves * EVERY * dt, saves + 1)
    shards = devices if model.rows_apart else None
    solver = ParticleSolver(VelocityVerlet(dt=dt), shards=shards)
    run = ParticleRun(model, model.default_params(), system, solver, times=times, every=EVERY)
    run.chunk = saves
    run.advance(run.start(), 0, saves)  # (compiles, and grows the list if it overflows)
    state = run.start()  # (on the list as grown)
    began = time.perf_counter()
    state, rows = run.advance(state, 0, saves)
    seconds = time.perf_counter() - began
    return seconds, run, rows["position"][-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=20, help="fcc cells a side (4 n^3 atoms)")
    parser.add_argument("--saves", type=int, default=10, help=f"saves of {EVERY} steps")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--charges", action="store_true", help="ions by particle-mesh Ewald")
    args = parser.parse_args()
    sim.configure_jax()
    if args.charges:
        model, system, dt = md.LennardJonesCoulomb(cutoff=2.5), ions(args.cells), 0.002
    else:
        model, system, dt = md.LennardJones(cutoff=2.5), melting(args.cells), 0.005
    n, steps = system.n, args.saves * EVERY
    edge = float(system.space.box[0])
    print(f"{n} particles, box {edge:.2f}, {steps} steps a round, {jax.device_count()} devices")
    if args.charges:
        part = model.mesh_part(system, 4)  # (a first mesh size that 4 slabs divide)
        print(f"mesh {list(part.mesh)}, alpha {part.alpha:.4f}")
        model = md.LennardJonesCoulomb(cutoff=2.5, ewald_alpha=part.alpha, pme_mesh=part.mesh)
    print(
        "| devices | round | slabs ms/step | rows ms/step | ratio | slabs MB/device "
        "| rows MB/device | slabs kB sent/step | rows kB gathered/step | builds | max |dx| |"
    )
    print("| --- " * 11 + "|")
    if args.charges:
        k = part.mesh
        whole = np.prod(k) * 8 / 1e6
        print(
            f"(the mesh: {whole:.1f} MB a float64 array on one device; on 4 slabs "
            f"{k[0] // 4} planes of {k[0]} and those around them, "
            f"{whole * (k[0] // 4 + part.order + 2) / k[0]:.1f} MB a device)"
        )
    for r in range(1, args.rounds + 1):
        for devices in (1, 2, 4):
            if n % devices:
                continue
            slab_s, slab_run, slab_x = timed_slabs(model, system, devices, args.saves, dt)
            # (charges: the replicated run of one device, whatever the slabs)
            replicated = 1 if args.charges else devices
            rows_s, _, rows_x = timed_rows(model, system, replicated, args.saves, dt)
            # the ghosts a device sends each step: particles within the list's radius of
            # its two faces (none with one device, whose ghosts are its own images)
            radius = model.cutoff + slab_run.slabs.skin
            ghosts = 0 if devices == 1 else 2 * n * radius / edge
            sent = ghosts * 3 * 8 / 1e3
            gathered = 0 if replicated == 1 else n * (devices - 1) / devices * 3 * 8 / 1e3
            rows_mb = (n * (3 * 3 * 8) + n * slab_run.slabs.neighbours * 4 / devices) / 1e6
            print(
                f"| {devices} | {r} | {slab_s / steps * 1e3:.1f} | {rows_s / steps * 1e3:.1f} "
                f"| {rows_s / slab_s:.2f} | {slab_run.memory_per_device() / 1e6:.1f} "
                f"| {rows_mb:.1f} | {sent:.0f} | {gathered:.0f} | {slab_run.builds} "
                f"| {float(np.max(np.abs(slab_x - rows_x))):.1e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
