"""Lennard-Jones forces and energy through neighbour lists against independent sums over
all pairs, and whole trajectories on lists against trajectories without them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from physics import md
from solvers import NeighbourList, VelocityVerlet
from tests.helpers import optimised

CUTOFF, SKIN = 2.5, 0.3


def brute_lj(position, edges, cutoff):
    """Energy and forces of the truncated LJ 12-6 potential (epsilon = sigma = 1) summed
    over every pair in numpy, minimum images by rounding: no cell, list or JAX code."""
    x = np.asarray(position, dtype=np.float64)
    dr = x[:, None, :] - x[None, :, :]
    dr -= edges * np.round(dr / edges)
    r2 = np.sum(dr * dr, axis=-1)
    np.fill_diagonal(r2, np.inf)
    inside = r2 < cutoff * cutoff
    s6 = np.where(inside, 1.0 / r2**3, 0.0)
    energy = 0.5 * np.sum(4.0 * (s6 * s6 - s6))
    # F_i = sum_j 24 (2 s^12 - s^6) / r^2 (x_i - x_j)
    scale = np.where(inside, 24.0 * (2.0 * s6 * s6 - s6) / np.where(inside, r2, 1.0), 0.0)
    return energy, np.sum(scale[:, :, None] * dr, axis=1)


def random_liquid(seed, edges, n):
    """n particles at random in a box, pushed apart until no pair is closer than 0.85
    (LJ forces stay moderate), then moved by whole random box lengths: the positions
    an integrator carries are never wrapped."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (n, 3)) * edges
    for _ in range(200):
        dr = x[:, None, :] - x[None, :, :]
        dr -= edges * np.round(dr / edges)
        r2 = np.sum(dr * dr, axis=-1)
        np.fill_diagonal(r2, np.inf)
        close = r2 < 0.85**2
        if not close.any():
            break
        x = x + 0.05 * np.sum(
            np.where(close[:, :, None], dr / np.sqrt(r2)[:, :, None], 0.0), axis=1
        )
    x = x + edges * rng.integers(-3, 4, (n, 3))
    return x


@pytest.mark.parametrize(
    "edges",
    [(8.5, 10.3, 12.1), pytest.param((9.0, 9.0, 9.0), marks=pytest.mark.slow)],
    ids=["orthorhombic", "cube"],
)
def test_listed_forces_and_energy_equal_the_all_pairs_sums(edges):
    edges = np.asarray(edges)
    n = int(0.6 * np.prod(edges))
    x = random_liquid(7, edges, n)
    # particles on the box's faces and far outside it: the cells and images must hold them
    x[0] = (edges[0], 0.5, 0.5)
    x[1] = (0.0, edges[1], -0.0)
    x[2] = x[2] + 1000.0 * edges
    position = jnp.asarray(x)
    box = jnp.asarray(edges)
    system = md.System(
        position, jnp.zeros_like(position), jnp.ones(n), jnp.zeros(n, jnp.int32), md.Periodic(box)
    )
    model = md.LennardJones(cutoff=CUTOFF)
    params = model.default_params()
    nl = NeighbourList.allocate(position, box, CUTOFF, SKIN)
    assert min(nl.cells) >= 3  # the cell list, not its all-pairs fallback
    nbrs = jax.jit(nl.build)(position, box)
    assert not bool(nbrs.overflow)
    energy, force = brute_lj(x, edges, CUTOFF)
    listed_energy, listed_force = jax.jit(
        lambda s: (model.energy(s, params, nbrs.index), model.forces(s, params, nbrs.index))
    )(system)
    listed_energy, listed_force = float(listed_energy), np.asarray(listed_force)
    assert abs(listed_energy - energy) <= 1e-12 * abs(energy)
    np.testing.assert_allclose(listed_force, force, rtol=0, atol=1e-12 * np.max(np.abs(force)))


def test_a_trajectory_on_lists_is_the_trajectory_over_all_pairs():
    """100 NVE steps of a 3 x 3 x 3 cell liquid: with lists rebuilt as particles move
    (several times here) the positions and velocities, in the particles' own order, are
    those of the run that sums over all pairs at every step."""
    edges = np.full(3, 8.8)
    n = int(0.35 * np.prod(edges))
    x = random_liquid(3, edges, n)
    rng = np.random.default_rng(4)
    v = rng.normal(0.0, 1.2, (n, 3))
    v -= v.mean(axis=0)
    position, velocity, box = jnp.asarray(x), jnp.asarray(v), jnp.asarray(edges)
    system = md.System(position, velocity, jnp.ones(n), jnp.zeros(n, jnp.int32), md.Periodic(box))
    model = md.LennardJones(cutoff=CUTOFF)
    params = model.default_params()
    nl = NeighbourList.allocate(position, box, CUTOFF, SKIN, factor=1.5)
    vv = VelocityVerlet(dt=0.002)

    def listed(p, nbrs):
        nbrs = nl.update(nbrs, p, box)
        return model.forces(system.at(p), params, nbrs.index), nbrs

    def all_pairs(p, aux):
        return model.forces(system.at(p), params, None), aux

    @jax.jit
    def run():
        a = vv.init(listed, position, velocity, system.mass, nl.build(position, box))
        b = vv.init(all_pairs, position, velocity, system.mass)
        a = jax.lax.fori_loop(0, 100, lambda i, s: vv.step(s, listed), a)
        b = jax.lax.fori_loop(0, 100, lambda i, s: vv.step(s, all_pairs), b)
        return a, b

    # (100 steps of 238 particles, over all pairs too: compiled with LLVM's optimisations, they run
    # in less than half the time)
    with optimised():
        a, b = run()
    assert not bool(a.aux.overflow)
    assert int(a.aux.builds) >= 3
    np.testing.assert_allclose(np.asarray(a.position), np.asarray(b.position), rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.asarray(a.velocity), np.asarray(b.velocity), rtol=0, atol=1e-9)
