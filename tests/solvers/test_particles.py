"""Particle integrators on problems with known answers: harmonic oscillators (exact
solutions, exact Boltzmann statistics), the 13-atom Lennard-Jones cluster minimum."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import Fire, LangevinBaoab, NoseHooverChain, VelocityVerlet, integrate, kinetic_energy
from tests.helpers import fitted_order

K_SPRING = jnp.array([1.0, 2.0, 3.0])  # per particle, 3 oscillators in 3-D


def harmonic(position, aux):
    return -K_SPRING[:, None] * position, aux


def run(integrator, state, steps, every=1):
    return integrate(
        integrator,
        state,
        harmonic,
        saves=steps // every,
        steps_per_save=every,
        observe=lambda s: (s.position, s.velocity),
    )


def test_velocity_verlet_is_second_order():
    x0 = jnp.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0], [0.3, 0.2, 0.1]])
    v0 = jnp.zeros((3, 3))
    mass = jnp.ones(3)
    omega = jnp.sqrt(K_SPRING)[:, None]
    t_end = 2.0
    exact = x0 * jnp.cos(omega * t_end)
    dts, errors = [0.1, 0.05, 0.025, 0.0125], []
    for dt in dts:
        vv = VelocityVerlet(dt=dt)
        state = vv.init(harmonic, x0, v0, mass)
        final, _ = run(vv, state, int(round(t_end / dt)))
        errors.append(float(jnp.max(jnp.abs(final.position - exact))))
    order = fitted_order(dts, errors)
    assert 1.9 < order < 2.1, (order, errors)


def test_velocity_verlet_conserves_a_modified_energy():
    x0 = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    vv = VelocityVerlet(dt=0.05)
    state = vv.init(harmonic, x0, jnp.zeros((3, 3)), jnp.ones(3))
    _, (x, v) = run(vv, state, 4000, every=10)
    energy = 0.5 * jnp.sum(v**2, axis=(1, 2)) + 0.5 * jnp.sum(
        K_SPRING[None, :, None] * x**2, axis=(1, 2)
    )
    e0 = 0.5 * float(jnp.sum(K_SPRING))
    # bounded oscillation of size O(dt^2), no drift
    assert float(jnp.max(jnp.abs(energy - e0))) / e0 < 0.002
    late, early = energy[-100:].mean(), energy[:100].mean()
    assert abs(float(late - early)) / e0 < 1e-4


def test_langevin_baoab_samples_the_harmonic_boltzmann_distribution():
    # BAOAB is exact in configuration for harmonic forces (Leimkuhler & Matthews 2013);
    # velocities carry an O(dt^2) error.
    n = 300
    k = jnp.linspace(0.5, 2.0, n)

    def springs(position, aux):
        return -k[:, None] * position, aux

    kt = 1.5
    baoab = LangevinBaoab(dt=0.1, temperature=kt, friction=2.0)
    state = baoab.init(
        springs, jnp.zeros((n, 3)), jnp.zeros((n, 3)), jnp.ones(n), key=jax.random.key(0)
    )
    _, (x, v) = integrate(
        baoab,
        state,
        springs,
        saves=400,
        steps_per_save=10,
        observe=lambda s: (s.position, s.velocity),
    )
    x, v = x[50:], v[50:]
    potential = jnp.mean(0.5 * k[None, :, None] * x**2) * 2  # <k x^2> per degree of freedom
    kinetic = jnp.mean(v**2)
    samples = x.shape[0] * n * 3
    assert abs(float(potential) - kt) < 4 * kt * np.sqrt(2.0 / samples) * 3
    assert abs(float(kinetic) - kt) / kt < 0.02


def test_langevin_needs_a_key():
    with pytest.raises(ValueError, match="PRNG key"):
        LangevinBaoab(dt=0.1, temperature=1.0).init(
            harmonic, jnp.zeros((3, 3)), jnp.zeros((3, 3)), jnp.ones(3)
        )


def test_nose_hoover_chain_conserves_its_extended_energy():
    rng = np.random.default_rng(0)
    n = 64
    k = jnp.asarray(rng.uniform(0.5, 2.0, n))

    def springs(position, aux):
        return -k[:, None] * position, aux

    nhc = NoseHooverChain(dt=0.02, temperature=1.0, tau=0.5)
    x0 = jnp.asarray(rng.normal(size=(n, 3)))
    v0 = jnp.asarray(rng.normal(size=(n, 3))) * 2.0  # far from the target temperature
    state = nhc.init(springs, x0, v0, jnp.ones(n))

    def conserved(s):
        u = 0.5 * jnp.sum(k[:, None] * s.position**2)
        return kinetic_energy(s.velocity, s.mass) + u + nhc.thermostat_energy(s)

    _, h = integrate(nhc, state, springs, saves=200, steps_per_save=10, observe=conserved)
    h0 = float(conserved(state))
    assert float(jnp.max(jnp.abs(h - h0))) / abs(h0) < 1e-3


def lj_cluster_forces(position, aux):
    def energy(r):
        dr = r[:, None, :] - r[None, :, :]
        r2 = jnp.sum(dr**2, -1) + jnp.eye(r.shape[0])
        s6 = 1.0 / r2**3
        return 0.5 * jnp.sum(jnp.where(jnp.eye(r.shape[0], dtype=bool), 0.0, 4.0 * (s6 * s6 - s6)))

    return -jax.grad(energy)(position), aux


def test_fire_finds_the_lj13_icosahedron():
    # Global minimum of the 13-atom Lennard-Jones cluster: E = -44.326801 epsilon
    # (Wales & Doye, J. Phys. Chem. A 101, 5111 (1997); Cambridge Cluster Database).
    phi = (1 + 5**0.5) / 2
    verts = []
    for a in (-1, 1):
        for b in (-1, 1):
            verts += [(0, a, b * phi), (a, b * phi, 0), (b * phi, 0, a)]
    verts = np.asarray(verts) / np.linalg.norm(verts[0]) * 1.1
    start = np.vstack([np.zeros(3), verts]) + np.random.default_rng(0).normal(
        scale=0.05, size=(13, 3)
    )
    state = jax.jit(  # (one program: op by op, the start and the loop took fifty)
        lambda x: Fire(dt_start=0.005, dt_max=0.02).minimize(
            lj_cluster_forces, x, force_tolerance=1e-8, max_steps=20000
        )
    )(jnp.asarray(start))
    r = state.particles.position
    dr = r[:, None, :] - r[None, :, :]
    iu = np.triu_indices(13, 1)
    r2 = np.asarray(jnp.sum(dr**2, -1))[iu]
    energy = float(np.sum(4 * (r2**-6 - r2**-3)))
    assert int(state.steps) < 20000
    assert energy == pytest.approx(-44.326801, abs=1e-5)


def test_fire_grows_its_step_after_n_min_steps_of_positive_power():
    # One particle in the well F = -x, released at rest from x = 1 with dt = 0.01: it
    # moves downhill (positive power F.v) for about 150 steps. FIRE (Bitzek et al. 2006)
    # counts the steps of positive power and, once more than n_min = 5 have passed,
    # multiplies dt by f_inc and alpha by f_alpha at every further step.
    def well(position, aux):
        return -position, aux

    fire = Fire(dt_start=0.01, dt_max=1.0)
    state = fire.init(well, jnp.asarray([[1.0, 0.0]]))
    counts, dts, alphas = [], [], []
    for _ in range(8):
        state = fire.step(state, well)
        counts.append(int(state.positive_steps))
        dts.append(float(state.dt))
        alphas.append(float(state.alpha))
    assert counts == [1, 2, 3, 4, 5, 6, 7, 8]
    np.testing.assert_allclose(dts, [0.01] * 6 + [0.011, 0.0121], rtol=1e-12)
    np.testing.assert_allclose(alphas, [0.1] * 6 + [0.099, 0.09801], rtol=1e-12)
    assert int(state.steps) == 8
