"""Observables of the particle models against their definitions and physical laws.

Each observable is recomputed here with NumPy from the definition in its docstring:
energies and the virial W = sum over pairs of r_ij . f_ij as sums over pairs with the
minimum image, the tail corrections as the integrals of the pair potential beyond the
cutoff (scipy quadrature), the pressure as (2K + W) / (dim V) plus the tail, the MSD and
the VACF as plain averages over particles and every time origin. Where a law fixes the
value it is checked too: the ideal-gas pressure n T / V of particles out of each other's
range, g(r) of a perfect lattice (its shells of neighbours, counted here from the
integer lattice vectors) and the Einstein slope of an MSD that is a line.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

from physics import md

# ---------------------------------------------------------------- energies, temperature, pressure


def test_kinetic_energy_and_temperature_are_their_sums():
    rng = np.random.default_rng(0)
    m, v = rng.uniform(0.5, 3.0, 7), rng.normal(size=(7, 2))
    kinetic = 0.5 * sum(m[i] * (v[i, 0] ** 2 + v[i, 1] ** 2) for i in range(7))
    assert float(md.kinetic_energy(jnp.asarray(v), jnp.asarray(m))) == pytest.approx(
        kinetic, rel=1e-14
    )
    # 2K / N_f with N_f = dim (n - 1) = 12
    assert float(md.temperature(jnp.asarray(v), jnp.asarray(m), 12)) == pytest.approx(
        kinetic / 6, rel=1e-14
    )


def test_pressure_is_the_virial_pressure_and_undefined_in_free_space():
    box = md.Periodic(jnp.asarray([2.0, 3.0, 5.0]))
    # P = (2K + W) / (dim V): (2 * 4.5 + 6.0) / (3 * 30)
    assert float(md.pressure(jnp.asarray(4.5), jnp.asarray(6.0), box)) == pytest.approx(
        15.0 / 90.0, rel=1e-14
    )
    assert (
        float(
            md.pressure(jnp.asarray(1.0), jnp.asarray(-2.0), md.Periodic(jnp.asarray([2.0, 4.0])))
        )
        == 0.0
    )
    assert math.isnan(float(md.pressure(jnp.asarray(1.0), jnp.asarray(0.0), md.Free(ndim=3))))


def test_ideal_gas_pressure_is_n_t_over_v():
    # particles on a simple cubic lattice of spacing 2.15 never meet (WCA range 1.12,
    # cutoff 1.5): U = W = 0, and P V = n T with T = 2K / (3n), all degrees of freedom
    model = md.Wca()
    system = md.lattice("sc", 4, 0.1)
    v = md.maxwell_boltzmann(jax.random.key(2), system.mass, 1.4, exact=False)
    system = system.at(system.position, v)
    n, volume = system.n, float(system.space.volume())
    measure = jax.jit(
        lambda s: model.measure(s, model.default_params(), None, 3 * n)
    )  # one compilation
    out = {k: float(x) for k, x in measure(system).items()}
    kinetic = 0.5 * float(np.sum(np.asarray(v) ** 2))
    assert out["potential_energy"] == 0.0
    assert out["kinetic_energy"] == pytest.approx(kinetic, rel=1e-13)
    assert out["total_energy"] == pytest.approx(kinetic, rel=1e-13)
    t = 2 * kinetic / (3 * n)
    assert out["temperature"] == pytest.approx(t, rel=1e-13)
    assert out["pressure"] == pytest.approx(n * t / volume, rel=1e-13)


def lj(r, eps, sig):
    return 4 * eps * ((sig / r) ** 12 - (sig / r) ** 6)


def dlj(r, eps, sig):
    return 4 * eps * (-12 * sig**12 / r**13 + 6 * sig**6 / r**7)


def scatter(rng, n, edge, min_distance):
    """n points in a periodic cube, none closer than min_distance (rejection)."""
    points = []
    while len(points) < n:
        x = rng.uniform(0, edge, 3)
        d = np.asarray(points) - x if points else np.zeros((0, 3))
        d -= edge * np.round(d / edge)
        if np.all(np.sum(d * d, axis=1) >= min_distance**2):
            points.append(x)
    return np.asarray(points)


@pytest.mark.parametrize("tail", [True, False])
def test_measured_observables_of_a_two_species_lennard_jones_mixture(tail):
    # Shifted Lennard-Jones, two species with per-pair epsilon and sigma, unequal masses.
    # U = sum over pairs within rc of [phi(r) - phi(rc)] + E_tail,
    # W = sum over pairs within rc of -r phi'(r), P = (2K + W) / (3V) + P_tail, where
    # (uniform fluid beyond rc, g = 1; ordered species pairs a, b)
    #   E_tail = (2 pi / V) sum_ab N_a N_b int_rc^inf phi_ab(r) r^2 dr,
    #   P_tail = -(2 pi / 3V^2) sum_ab N_a N_b int_rc^inf r^3 phi_ab'(r) dr.
    rng = np.random.default_rng(11)
    n, edge, rc = 48, 5.4, 2.5
    position = scatter(rng, n, edge, 0.85)
    species = rng.integers(0, 2, n)
    mass = rng.uniform(0.5, 2.0, n)
    velocity = rng.normal(size=(n, 3))
    eps = np.array([[1.0, 1.4], [1.4, 0.6]])
    sig = np.array([[1.0, 0.85], [0.85, 0.9]])
    model = md.LennardJones(cutoff=rc, shift=True, tail_correction=tail, n_species=2)
    params = {"epsilon": jnp.asarray(eps), "sigma": jnp.asarray(sig)}
    system = md.System(
        jnp.asarray(position),
        jnp.asarray(velocity),
        jnp.asarray(mass),
        jnp.asarray(species, jnp.int32),
        md.Periodic(jnp.full(3, edge)),
    )
    model.check_params(system, params)
    dof = 3 * (n - 1)
    out = {
        k: float(v)
        for k, v in jax.jit(lambda s: model.measure(s, params, None, dof))(system).items()
    }

    i, j = np.triu_indices(n, 1)
    d = position[i] - position[j]
    d -= edge * np.round(d / edge)
    r = np.sqrt(np.sum(d * d, axis=1))
    inside = r < rc
    e, s = eps[species[i], species[j]][inside], sig[species[i], species[j]][inside]
    assert inside.sum() > 200  # many pairs interact
    pair_energy = np.sum(lj(r[inside], e, s) - lj(rc, e, s))
    virial = np.sum(-r[inside] * dlj(r[inside], e, s))
    volume = edge**3
    counts = np.bincount(species, minlength=2)
    e_tail = p_tail = 0.0
    if tail:
        for a in range(2):
            for b in range(2):
                ea, sa = eps[a, b], sig[a, b]
                e_int = scipy.integrate.quad(lambda x: lj(x, ea, sa) * x * x, rc, np.inf)[0]
                p_int = scipy.integrate.quad(lambda x: x**3 * dlj(x, ea, sa), rc, np.inf)[0]
                e_tail += 2 * math.pi / volume * counts[a] * counts[b] * e_int
                p_tail -= 2 * math.pi / (3 * volume**2) * counts[a] * counts[b] * p_int
        assert e_tail < 0 and p_tail < 0  # the attraction beyond rc lowers both
    kinetic = 0.5 * np.sum(mass[:, None] * velocity**2)
    # bound 1e-10: rounding of sums of a few hundred terms, and quadratures good to 1e-12
    assert out["potential_energy"] == pytest.approx(pair_energy + e_tail, rel=1e-10)
    assert out["kinetic_energy"] == pytest.approx(kinetic, rel=1e-12)
    assert out["total_energy"] == pytest.approx(pair_energy + e_tail + kinetic, rel=1e-10)
    assert out["temperature"] == pytest.approx(2 * kinetic / dof, rel=1e-12)
    assert out["pressure"] == pytest.approx(
        (2 * kinetic + virial) / (3 * volume) + p_tail, rel=1e-10
    )


# ---------------------------------------------------------------- radial distribution function


def lattice_shells(dim: int, edges: np.ndarray) -> np.ndarray:
    """Neighbours per particle of a unit simple cubic (square) lattice in each bin with
    the given edges: the integer vectors whose length falls in the bin."""
    span = int(np.ceil(edges[-1]))
    grid = np.stack(np.meshgrid(*[np.arange(-span, span + 1)] * dim, indexing="ij"), -1).reshape(
        -1, dim
    )
    length = np.sqrt(np.sum(grid * grid, axis=1))
    return np.histogram(length[length > 0], bins=edges)[0]


@pytest.mark.parametrize("dim", [2, 3])
def test_radial_distribution_of_a_perfect_lattice(dim):
    # g(r) = (neighbours per particle in the shell) / (density x shell volume); the
    # shells of a unit lattice: 4 (6) at 1, 4 (12) at sqrt 2, ... The box holds 7 (6)
    # cells per side so that every shell up to r_max lies within half the box. Two
    # frames, the second translated: the average is the same.
    cells = 7 if dim == 2 else 6
    r_max, bins = (3.3, 22) if dim == 2 else (2.9, 20)  # no shell on a bin edge
    grid = (
        np.stack(np.meshgrid(*[np.arange(cells)] * dim, indexing="ij"), -1)
        .reshape(-1, dim)
        .astype(float)
    )
    space = md.Periodic(jnp.full(dim, float(cells)))
    frames = jnp.asarray(np.stack([grid, np.mod(grid + 0.37, cells)]))
    centres, g = jax.jit(lambda f: md.radial_distribution(f, space, bins=bins, r_max=r_max))(frames)
    edges = np.linspace(0.0, r_max, bins + 1)
    shell = math.pi * np.diff(edges**2) if dim == 2 else 4 / 3 * math.pi * np.diff(edges**3)
    n = len(grid)
    expected = lattice_shells(dim, edges) / (
        (n - 1) / n * shell
    )  # the others' density (n - 1) / V, V = n
    np.testing.assert_allclose(np.asarray(centres), 0.5 * (edges[1:] + edges[:-1]), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-12, atol=1e-12)
    # normalisation: sum of g rho' dV over the bins counts the neighbours within r_max
    assert float(np.sum((n - 1) / n * np.asarray(g) * shell)) == pytest.approx(
        lattice_shells(dim, np.array([0.0, r_max]))[0], rel=1e-12
    )


def test_radial_distribution_defaults_and_refusals():
    # default: 100 bins up to half the shortest edge (a larger r_max is cut there)
    rng = np.random.default_rng(1)
    space = md.Periodic(jnp.asarray([6.0, 7.0, 8.0]))
    x = jnp.asarray(rng.uniform(0, 6, (30, 3)))

    @jax.jit  # one compilation instead of op-by-op dispatch
    def both(x):
        return md.radial_distribution(x, space), md.radial_distribution(
            x, space, bins=10, r_max=10.0
        )[0]

    (centres, g), wide = both(x)
    assert centres.shape == g.shape == (100,)
    np.testing.assert_allclose(np.asarray(centres), (np.arange(100) + 0.5) * 3.0 / 100, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(wide), (np.arange(10) + 0.5) * 0.3, rtol=1e-14)
    with pytest.raises(ValueError, match="periodic space"):
        md.radial_distribution(x, md.Free(ndim=3))


# ---------------------------------------------------------------- MSD, VACF, diffusion


def test_msd_and_vacf_are_averages_over_every_time_origin():
    rng = np.random.default_rng(3)
    t, n = 17, 4
    v = rng.normal(size=(t, n, 3))
    x = np.cumsum(v, axis=0) + rng.uniform(0, 5, (n, 3))
    msd = np.array(
        [np.mean([np.sum((x[s + m] - x[s]) ** 2, axis=-1) for s in range(t - m)]) for m in range(t)]
    )
    vacf = np.array(
        [np.mean([np.sum(v[s + m] * v[s], axis=-1) for s in range(t - m)]) for m in range(t)]
    )

    # bound 1e-11: FFT rounding is of order 1e-15 relative
    @jax.jit  # one compilation instead of op-by-op dispatch
    def observe(x, v):
        return (
            md.mean_squared_displacement(x),
            md.velocity_autocorrelation(v),
            md.velocity_autocorrelation(v, normalize=True),
        )

    got_msd, got_vacf, normalized = observe(jnp.asarray(x), jnp.asarray(v))
    np.testing.assert_allclose(np.asarray(got_msd), msd, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(np.asarray(got_vacf), vacf, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(np.asarray(normalized), vacf / vacf[0], rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("dim", [2, 3])
def test_diffusion_coefficient_is_the_einstein_slope(dim):
    # MSD = 2 dim D t exactly over the fitted lags (20% to 80% of the trajectory), and
    # something else outside them (a ballistic start, a plateau at the end): the fit sees
    # the line only.
    d_true, dt, t = 0.35, 0.05, 101
    lag = np.arange(t) * dt
    msd = 2 * dim * d_true * lag + 0.2
    msd[:20] = 0.2 + 40.0 * lag[:20] ** 2
    msd[81:] = msd[80]
    assert float(md.diffusion_coefficient(jnp.asarray(msd), dt, dim=dim)) == pytest.approx(
        d_true, rel=1e-12
    )
    # a line with a small zig-zag on it: the fit over the 60 lags averages it away
    zigzag = 2 * dim * d_true * lag + 0.01 * (-1.0) ** np.arange(t)
    assert float(md.diffusion_coefficient(jnp.asarray(zigzag), dt, dim=dim)) == pytest.approx(
        d_true, rel=0.01
    )


def test_diffusion_coefficient_of_a_short_trajectory():
    # four frames: still a line through two lags at least, exact for an exact line
    msd = 6 * 0.8 * np.arange(4) * 0.5
    assert float(md.diffusion_coefficient(jnp.asarray(msd), 0.5, start=0.5)) == pytest.approx(
        0.8, rel=1e-12
    )


def test_block_average_of_known_blocks():
    # ten blocks of ten equal values 0..9 (and five more samples, dropped): mean 4.5,
    # standard error std(0..9) / sqrt(10) = sqrt(55 / 6) / sqrt(10)
    values = np.concatenate([np.repeat(np.arange(10.0), 10), np.full(5, 100.0)])
    mean, error = md.block_average(values)
    assert mean == pytest.approx(4.5, rel=1e-14)
    assert error == pytest.approx(math.sqrt(55 / 6 / 10), rel=1e-14)
    with pytest.raises(ValueError, match="at least 10 samples"):
        md.block_average(np.ones(9))
