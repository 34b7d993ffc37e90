"""Neighbour lists in cell order (`NeighbourList.ordered`): each build numbers the
particles by cell and the force pass runs over them in that order. The list must be the
particles' list renumbered, and a run on it the same run: within a row the neighbours
come in the same order (cell by cell of the stencil, by id within a cell), so every
particle's force is the same sum, and an NVE run is the same bits."""

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import solvers._particle_run as particle_run
from physics import md
from solvers import NeighbourList, ParticleRun, ParticleSolver, VelocityVerlet
from tests.helpers import host_devices, script_command

ROOT = Path(__file__).resolve().parents[2]


def _shuffled_liquid(n_cells: int = 6, seed: int = 0):
    """An fcc lattice at rho* 0.8442, sites shaken by up to 0.15 sigma, numbered at
    random (the order a long run drifts to), with velocities of temperature about 1.4."""
    system = md.lattice("fcc", n_cells, 0.8442)
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(system.n)
    position = np.asarray(system.position)[shuffled] + rng.uniform(
        -0.15, 0.15, size=system.position.shape
    )
    velocity = rng.normal(0.0, 1.2, size=system.position.shape)
    return system.at(jnp.asarray(position), jnp.asarray(velocity - velocity.mean(0)))


@pytest.mark.parametrize("periodic", [True, False])
def test_a_list_in_cell_order_is_the_particles_list_renumbered(periodic):
    system = _shuffled_liquid()
    box = system.space.box if periodic else None
    plain = NeighbourList.allocate(system.position, box, 2.5, 0.3)
    assert plain.cells  # (a grid: what the order is made from)
    # (one program: both builds and the particles' cells)
    ordered, own, coords = jax.jit(
        lambda x, box: (
            NeighbourList.build(dataclasses.replace(plain, ordered=True), x, box),
            NeighbourList.build(plain, x, box),
            plain._cell_coords(plain._wrapped(x, box), box),
        )
    )(system.position, box)
    n = system.n
    order, place = np.asarray(ordered.order), np.asarray(ordered.place)
    assert sorted(order.tolist()) == list(range(n))
    np.testing.assert_array_equal(order[place], np.arange(n))
    # the particles of each row are sorted by cell: the cells of order[0], order[1], ... never
    # decrease
    cell = np.asarray(coords) @ np.cumprod((1,) + plain.cells[:-1])
    assert np.all(np.diff(cell[order]) >= 0) and np.any(order != np.arange(n))
    # row place[i] is particle i's row, its entries rows too: renumbered, the same ids
    # in the same slots (padding n stays n)
    renumbered = np.where(
        np.asarray(ordered.index) < n, order[np.minimum(np.asarray(ordered.index), n - 1)], n
    )[place]
    np.testing.assert_array_equal(renumbered, np.asarray(own.index))
    assert own.order is None and own.place is None
    np.testing.assert_array_equal(
        np.asarray(ordered.reference), np.asarray(system.position)
    )  # (the particles' order)


def _binary(system):
    """`system` as a mixture of two species (at random), the second twice as heavy."""
    species = jnp.asarray(np.random.default_rng(5).integers(0, 2, system.n))
    return md.System(
        system.position,
        system.velocity,
        1.0 + species.astype(system.mass.dtype),
        species,
        system.space,
    )


MIXTURE = {
    "epsilon": np.array([[1.0, 1.2], [1.2, 0.8]]),
    "sigma": np.array([[1.0, 0.95], [0.95, 0.9]]),
}


def _run(system, ordered_from, monkeypatch, capacity, frames=6):
    monkeypatch.setattr(particle_run, "ORDERED_FROM", ordered_from)
    model = md.LennardJones(cutoff=2.5, n_species=2)
    run = ParticleRun(
        model,
        MIXTURE,
        system,
        ParticleSolver(VelocityVerlet(dt=0.005), capacity=capacity),
        times=np.linspace(0.0, 0.1 * frames, frames + 1),
        every=20,
    )
    state = run.start()
    state, rows = run.advance(state, 0, frames)
    return run, state, rows


def _same_runs(monkeypatch, capacity):
    """A run on a list in cell order against the run on the particles' list, from a list
    of `capacity`: (the capacities each ended with)."""
    # (a mixture: species and masses are renumbered with the positions)
    system = _binary(_shuffled_liquid())
    plain_run, plain_state, plain = _run(system, 10**9, monkeypatch, capacity)
    run, state, rows = _run(system, 1, monkeypatch, capacity)
    assert run.problem.neighbour_list.ordered and not plain_run.problem.neighbour_list.ordered
    assert state.aux.order is not None and np.any(
        np.asarray(state.aux.order) != np.arange(system.n)
    )
    assert int(state.aux.builds) == int(plain_state.aux.builds) > 2
    for name in ("position", "velocity"):
        np.testing.assert_array_equal(rows[name], plain[name])
    # sums over the particles, taken in another order: equal to rounding
    for name in ("potential_energy", "kinetic_energy", "pressure", "total_energy"):
        np.testing.assert_allclose(rows[name], plain[name], rtol=1e-13)
    drift = abs(rows["total_energy"][-1] - rows["total_energy"][0]) / abs(rows["total_energy"][0])
    assert drift < 1e-2  # (a real run: the energy kept)
    return run.problem.neighbour_list.capacity, plain_run.problem.neighbour_list.capacity


def test_a_run_on_a_list_in_cell_order_is_the_same_run(monkeypatch):
    # A list with room for every neighbour of the run (89 at most): it never grows, and
    # each run compiles its start and its frames once. (Grown mid-run: with -m slow below.)
    assert _same_runs(monkeypatch, 96) == (96, 96)


@pytest.mark.slow  # (each run compiles its frames a second time, for the grown list)
def test_a_run_on_a_list_in_cell_order_grows_as_the_particles_list_does(monkeypatch):
    # A capacity of 86 holds the start's neighbours (81 at most) and overflows as the
    # lattice melts: the list grows and frames are redone, in cell order as in the
    # particles'. (A capacity the start overflows would compile the start twice more.)
    ordered, plain = _same_runs(monkeypatch, 86)
    assert ordered == plain > 86  # grown alike, mid-run


@pytest.mark.slow  # (particle-mesh Ewald compiled twice)
def test_charges_on_a_list_in_cell_order_give_the_same_forces(monkeypatch):
    # Species (and with them charges) are renumbered with the positions; the mesh part
    # of particle-mesh Ewald then sums the charges in another order, so the forces agree
    # to rounding rather than to the bit.
    system = _shuffled_liquid()
    system = md.System(
        system.position, system.velocity, system.mass, jnp.arange(system.n) % 2, system.space
    )
    model = md.LennardJonesCoulomb(
        cutoff=2.5, electrostatics="pme", ewald_accuracy=1e-4
    ).for_system(system)
    params = model.default_params()
    solver = ParticleSolver(VelocityVerlet(dt=0.005))
    forces = {}
    for ordered_from in (10**9, 1):
        monkeypatch.setattr(particle_run, "ORDERED_FROM", ordered_from)
        problem = particle_run.ParticleProblem(
            model,
            params,
            system,
            solver.integrator,
            particle_run.neighbour_list(model, system, solver),
        )
        assert problem.neighbour_list.ordered == (ordered_from == 1)
        nbrs = problem.neighbour_list.build(system.position, system.space.box)
        forces[ordered_from] = np.asarray(
            jax.jit(lambda x, nb, p=problem: p.force_fn(x, nb)[0])(system.position, nbrs)
        )
    scale = np.max(np.abs(forces[1]))
    assert scale > 1.0
    np.testing.assert_allclose(forces[1], forces[10**9], rtol=0, atol=1e-12 * scale)


def test_runs_of_bonded_or_few_particles_keep_their_own_order(monkeypatch):
    model = md.LennardJones(cutoff=2.5)
    solver = ParticleSolver(VelocityVerlet(dt=0.005))
    assert not particle_run.neighbour_list(
        model, _shuffled_liquid(), solver
    ).ordered  # 864 < ORDERED_FROM
    chains = md.chains(jax.random.key(0), 9, 20, density=0.5)
    monkeypatch.setattr(particle_run, "ORDERED_FROM", 1)
    assert not particle_run.neighbour_list(
        md.BeadSpring(), chains, solver
    ).ordered  # bonds name particle ids
    assert particle_run.neighbour_list(model, _shuffled_liquid(), solver).ordered
    with pytest.raises(ValueError, match="bonds or molecules"):
        chains.permuted(jnp.arange(chains.n))


_TWO_DEVICES = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import solvers._particle_run as particle_run
from physics import md
from solvers import LangevinBaoab, ParticleRun, ParticleSolver, StochasticCellRescaling, VelocityVerlet

assert jax.device_count() == 2
model = md.LennardJones(cutoff=2.5)
system = md.lattice("fcc", 6, 0.8442)
rng = np.random.default_rng(1)
position = np.asarray(system.position)[rng.permutation(system.n)] + rng.uniform(-0.15, 0.15, system.position.shape)
system = system.at(jnp.asarray(position), jnp.asarray(rng.normal(0.0, 1.2, system.position.shape)))
out = {}
for name, integrator, key in [
    ("nve", VelocityVerlet(dt=0.005), None),
    ("npt", StochasticCellRescaling(LangevinBaoab(0.004, 1.0, 5.0), pressure=2.0, tau=0.2, compressibility=0.05), jax.random.key(3)),
]:
    runs = {}
    for ordered_from in (10**9, 1):
        particle_run.ORDERED_FROM = ordered_from
        run = ParticleRun(model, model.default_params(), system, ParticleSolver(integrator, chunk_steps=100, shards=2), times=np.linspace(0.0, 0.8, 5), every=50, key=key)
        obs, state, stats = run.run()
        runs[ordered_from] = (obs, state, stats, run.problem.neighbour_list.ordered)
    (a, sa, ta, oa), (b, sb, tb, ob) = runs[10**9], runs[1]
    out[name] = {
        "ordered": [oa, ob],
        "devices": [int(ta["devices"]), int(tb["devices"])],
        "builds": [int(ta["neighbour_builds"]), int(tb["neighbour_builds"])],
        "same_bits": {k: bool(np.array_equal(np.asarray(a[k]), np.asarray(b[k]))) for k in ("position", "velocity", "box") if k in a},
        "apart": {k: float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k]))) / np.max(np.abs(np.asarray(a[k])))) for k in ("position", "velocity")},
        "sums": max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])) / np.max(np.abs(np.asarray(a[k]))))) for k in ("potential_energy", "pressure")),
    }
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow  # (four runs' programs compiled for two devices)
def test_runs_split_over_two_devices_on_a_list_in_cell_order_are_the_same_runs(tmp_path):
    # Each device holds rows of the list in cell order and computes the forces of its
    # block of the renumbered particles; gathered and put back in the particles' order
    # they are the forces of the particles' own list. NVE runs are the same bits. Under
    # the barostat the two programs are compiled differently enough (with XLA's
    # optimisations off, as in this suite) that positions part in the last bits from
    # the second frame (measured: 2e-15 of the largest; the same bits with them on);
    # the box, which follows the summed virial, stays the same bits.
    env = {**os.environ, "XLA_FLAGS": host_devices(2)}
    proc = subprocess.run(
        script_command(_TWO_DEVICES),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(
        next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[
            len("RESULT ") :
        ]
    )
    for name in ("nve", "npt"):
        leg = out[name]
        assert leg["ordered"] == [False, True] and leg["devices"] == [2, 2], leg
        assert leg["builds"][0] == leg["builds"][1] > 1, leg
        assert len(leg["same_bits"]) == (3 if name == "npt" else 2), leg
        if name == "nve":
            assert all(leg["same_bits"].values()), leg
        else:
            assert leg["same_bits"]["box"] and max(leg["apart"].values()) < 1e-12, leg
        assert leg["sums"] < 1e-12, leg
