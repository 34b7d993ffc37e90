"""The smooth radial distribution function: the ideal gas, perfect crystals (coordination
numbers from integrating g), species pairs, and its derivative with respect to the
positions against finite differences."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import physics.md as md
from physics.md import radial_distribution_frames, rdf_pairs


def _shells(r_max: float, bins: int) -> np.ndarray:
    edges = np.linspace(0.0, r_max, bins + 1)
    return 4.0 / 3.0 * math.pi * np.diff(edges**3)


@pytest.mark.parametrize("smoothing", [0.0, 0.5])
def test_an_ideal_gas_gives_one_within_its_statistical_error(smoothing):
    # Uniform random positions: every bin's expected g is 1 (the normalisation counts
    # the N (N - 1) ordered pairs); the frames are independent, so their spread gives
    # each bin's standard error.
    rng = np.random.default_rng(0)
    n, frames, box, bins = 200, 24, 8.0, 16
    x = jnp.asarray(rng.uniform(0.0, box, (frames, n, 3)))
    edges = jnp.full((frames, 3), box)
    _, g = jax.jit(
        lambda x: radial_distribution_frames(x, edges, r_max=4.0, bins=bins, smoothing=smoothing)
    )(x)
    g = np.asarray(g)[:, 0, 4:]  # (the first bins hold few pairs)
    mean, error = g.mean(axis=0), g.std(axis=0, ddof=1) / math.sqrt(frames)
    z = (mean - 1.0) / error
    assert np.all(np.abs(z) < 4), z
    assert abs(float(np.mean(z))) < 4 / math.sqrt(len(z))  # no common bias either
    # an error of 1/N (the N^2 normalisation) would show: the bins' mean is closer to 1
    assert abs(float(np.average(mean, weights=1 / error**2)) - 1.0) < 0.5 / n


@pytest.mark.parametrize("smoothing", [0.0, 0.5, 1.5])
def test_a_perfect_fcc_lattice_has_its_neighbour_shells(smoothing):
    # fcc with cube edge a: 12 neighbours at a / sqrt 2, 6 at a, 24 at a sqrt(3/2), 12 at
    # a sqrt 2 (the coordination shells of a face-centred cubic lattice). Integrating
    # rho' g(r) 4 pi r^2 dr over a window around each shell counts them (rho' = (N - 1)
    # / V, the density of the others).
    system = md.lattice("fcc", 4, 1.0)
    a = 4 ** (1 / 3)  # (4 particles per cube of volume a^3 at density 1)
    r_max, bins = 0.5 * 4 * a, 200
    space = system.space
    centres, g = md.radial_distribution(
        system.position, space, bins=bins, r_max=r_max, smoothing=smoothing
    )
    centres, g = np.asarray(centres), np.asarray(g)
    counts = (system.n - 1) / system.n * g * _shells(r_max, bins)  # (rho = 1)
    radii = a * np.array([1 / math.sqrt(2), 1.0, math.sqrt(1.5), math.sqrt(2.0)])
    beyond = a * math.sqrt(2.5)  # the next shell (24 at a sqrt(5/2))
    cuts = np.concatenate(
        [[0.5 * radii[0]], 0.5 * (radii[1:] + radii[:-1]), [0.5 * (radii[-1] + beyond)]]
    )
    for k, expected in enumerate([12, 6, 24, 12]):
        inside = (centres > cuts[k]) & (centres < cuts[k + 1])
        assert float(np.sum(counts[inside])) == pytest.approx(expected, abs=1e-6)
        peak = centres[inside][np.argmax(g[inside])]
        assert abs(peak - radii[k]) <= r_max / bins  # the peak in the shell's bin or next to it
    assert float(np.sum(counts[centres < cuts[0]])) == pytest.approx(0.0, abs=1e-12)


def test_rock_salt_pairs_of_species():
    # NaCl with cube edge a: each ion has 6 of the other kind at a / 2, then 12 of its
    # own at a / sqrt 2, then 8 of the other kind at a sqrt 3 / 2; g_01 = g_10, so one
    # row serves both orders.
    system = md.lattice("rocksalt", 3, 1.0)
    a = 8 ** (1 / 3)
    r_max, bins = 0.5 * 3 * a, 150
    centres, g = md.radial_distribution(
        system.position,
        system.space,
        bins=bins,
        r_max=r_max,
        smoothing=0.5,
        species=system.species,
        n_species=2,
    )
    assert rdf_pairs(2) == ((0, 0), (0, 1), (1, 1))
    centres, g = np.asarray(centres), np.asarray(g)
    assert g.shape == (3, bins)
    n = system.n // 2  # of each species
    rho_other, rho_same = n / system.n, (n - 1) / system.n  # (N / V = 1)
    shells = _shells(r_max, bins)
    first = centres < 0.5 * (0.5 * a + a / math.sqrt(2))
    second = (centres > 0.5 * (0.5 * a + a / math.sqrt(2))) & (
        centres < 0.5 * (a / math.sqrt(2) + a * math.sqrt(3) / 2)
    )
    assert float(np.sum(rho_other * g[1] * shells * first)) == pytest.approx(6.0, abs=1e-9)
    assert float(np.sum(rho_other * g[1] * shells * second)) == pytest.approx(0.0, abs=1e-9)
    for same in (0, 2):
        assert float(np.sum(rho_same * g[same] * shells * first)) == pytest.approx(0.0, abs=1e-9)
        assert float(np.sum(rho_same * g[same] * shells * second)) == pytest.approx(12.0, abs=1e-9)


def test_the_smooth_g_is_differentiable_in_the_positions():
    # The derivative of a weighted sum of g against central differences of the positions
    # (a liquid-like random packing; the kernel spans a bin, so g is smooth).
    system = md.random_packing(jax.random.key(3), 24, 0.6, min_distance=0.8)
    space = system.space
    weights = jnp.linspace(-1.0, 1.0, 30)

    r_max = float(0.5 * np.min(np.asarray(space.box)))

    def f(x):
        return jnp.sum(
            weights * md.radial_distribution(x, space, bins=30, r_max=r_max, smoothing=1.0)[1]
        )

    x = system.position
    grad = np.asarray(jax.jit(jax.grad(f))(x))
    fd = np.zeros_like(grad)
    h = 1e-6
    f_jit = jax.jit(f)
    for i in range(0, 24, 5):
        for d in range(3):
            e = jnp.zeros_like(x).at[i, d].set(h)
            fd[i, d] = (float(f_jit(x + e)) - float(f_jit(x - e))) / (2 * h)
    rows = np.arange(0, 24, 5)
    assert np.max(np.abs(grad[rows])) > 1e-2
    np.testing.assert_allclose(grad[rows], fd[rows], rtol=1e-5, atol=1e-7)


def test_each_frame_in_its_own_box():
    # The same particles scaled with their box (a barostat's frames) keep g(r / L).
    system = md.random_packing(jax.random.key(0), 40, 0.5, min_distance=0.8)
    x = system.position
    box = system.space.box
    frames = jnp.stack([x, 1.1 * x])
    edges = jnp.stack([box, 1.1 * box])
    _, g = radial_distribution_frames(frames, edges, r_max=1.0, bins=20, smoothing=0.0)
    _, g_scaled = radial_distribution_frames(
        frames[1:], edges[1:], r_max=1.1, bins=20, smoothing=0.0
    )
    np.testing.assert_allclose(np.asarray(g[0]), np.asarray(g_scaled[0]), rtol=1e-12)
