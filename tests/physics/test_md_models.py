"""Particle models: forces are minus the energy gradient, neighbour lists change nothing,
tail corrections and virial agree with direct integration and differentiation,
starting states and observables do what they say."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

from physics import md
from solvers import NeighbourList

MODELS = {
    "lennard_jones": (md.LennardJones(cutoff=2.5, shift=True, tail_correction=True), {}),
    "lennard_jones_truncated": (md.LennardJones(cutoff=2.2), {}),
    "lennard_jones_force_shifted": (md.LennardJones(cutoff=2.5, force_shift=True), {}),
    "wca": (md.Wca(), {}),
    "morse": (md.Morse(cutoff=2.0, shift=True), {"alpha": 3.0}),
    "soft_sphere": (md.SoftSphere(), {"sigma": 1.2}),
}


def liquid(n_cells=3, density=0.8, seed=0):
    system = md.lattice("fcc", n_cells, density)
    jitter = jax.random.normal(jax.random.key(seed), system.position.shape) * 0.08
    return md.thermalize(system.at(system.position + jitter), jax.random.key(seed + 1), 1.0)


@pytest.mark.parametrize("name", list(MODELS))
def test_forces_are_minus_the_energy_gradient(name):
    model, extra = MODELS[name]
    params = {**model.default_params(), **{k: jnp.asarray(v) for k, v in extra.items()}}
    system = liquid()

    @jax.jit  # one compilation instead of op-by-op dispatch
    def both(r):
        return model.forces(system.at(r), params), jax.grad(
            lambda x: model.energy(system.at(x), params)
        )(r)

    forces, grad = both(system.position)
    np.testing.assert_allclose(np.asarray(forces), -np.asarray(grad), atol=1e-10, rtol=1e-10)


# the Lennard-Jones variants differ only in pair_energy, which the test above covers. The
# list is the same for every potential (the pairs within cutoff + skin): the default run
# checks the longest cutoff (Lennard-Jones, 2.5) and the shortest (WCA, 2^(1/6), where
# most listed pairs lie beyond the cutoff and must be left out); Morse and the soft
# spheres repeat it with `-m slow`.
@pytest.mark.parametrize(
    "name",
    [
        "lennard_jones",
        "wca",
        pytest.param("morse", marks=pytest.mark.slow),
        pytest.param("soft_sphere", marks=pytest.mark.slow),
    ],
)
def test_neighbour_list_gives_the_all_pairs_forces(name):
    model, extra = MODELS[name]
    params = {**model.default_params(), **{k: jnp.asarray(v) for k, v in extra.items()}}
    system = liquid(n_cells=4, density=0.85)
    box = system.space.box
    nl = NeighbourList.allocate(system.position, box, model.cutoff, 0.3)
    index = jax.jit(nl.build)(system.position, box).index

    @jax.jit
    def evaluate(index):  # one compilation per layout instead of op-by-op dispatch
        return (
            model.forces(system, params, index),
            model.energy(system, params, index),
            model.virial(system, params, index),
        )

    (f_list, e_list, w_list), (f_all, e_all, w_all) = evaluate(index), evaluate(None)
    assert float(jnp.max(jnp.abs(f_list - f_all))) < 1e-12
    assert abs(float(e_list - e_all)) < 1e-11
    assert abs(float(w_list - w_all)) < 1e-10


def test_virial_is_the_volume_derivative_of_the_energy():
    # W = -dU/d(lambda) under r -> lambda r, L -> lambda L; compare the fused pair-pass
    # virial with a central finite difference of the energy.
    model = md.LennardJones(cutoff=2.5, shift=True)
    params = model.default_params()
    system = liquid()
    h = 1e-6
    energy = jax.jit(
        lambda s: model.interaction_energy(system.scaled(s), params)
    )  # one compilation for both points
    fd = -(energy(1 + h) - energy(1 - h)) / (2 * h)
    assert float(jax.jit(lambda s: model.virial(s, params))(system)) == pytest.approx(
        float(fd), rel=1e-7
    )


def test_lennard_jones_tail_correction_matches_the_integral():
    # E_tail / N = 2 pi rho int_rc^inf phi(r) r^2 dr, P_tail = -(2 pi / 3) rho^2 int r^3 phi'(r) dr
    model = md.LennardJones(cutoff=2.5, tail_correction=True)
    params = {"epsilon": jnp.asarray(1.3), "sigma": jnp.asarray(0.9)}
    system = md.lattice("fcc", 4, 0.7)
    n, rho = system.n, 0.7
    eps, sig = 1.3, 0.9

    def phi(r):
        return 4 * eps * ((sig / r) ** 12 - (sig / r) ** 6)

    def dphi(r):
        return 4 * eps * (-12 * sig**12 / r**13 + 6 * sig**6 / r**7)

    e_int = scipy.integrate.quad(lambda r: phi(r) * r * r, 2.5, np.inf)[0]
    p_int = scipy.integrate.quad(lambda r: r**3 * dphi(r), 2.5, np.inf)[0]
    assert float(model.tail_energy(system, params)) / n == pytest.approx(
        2 * math.pi * rho * e_int, rel=1e-6
    )
    assert float(model.tail_pressure(system, params)) == pytest.approx(
        -2 * math.pi / 3 * rho**2 * p_int, rel=1e-6
    )


def test_two_species_use_per_pair_parameters():
    model = md.LennardJones(cutoff=2.5, n_species=2)
    system = liquid()
    species = jnp.asarray(np.arange(system.n) % 2, jnp.int32)
    system = md.System(system.position, system.velocity, system.mass, species, system.space)
    eps = jnp.array([[1.0, 1.5], [1.5, 0.5]])
    sig = jnp.array([[1.0, 0.8], [0.8, 0.88]])
    params = {"epsilon": eps, "sigma": sig}
    # brute force over pairs
    r = np.asarray(system.position)
    box = np.asarray(system.space.box)
    s = np.asarray(species)
    total = 0.0
    for i in range(system.n):
        dr = r[i] - r[i + 1 :]
        dr -= box * np.round(dr / box)
        d = np.linalg.norm(dr, axis=1)
        e, g = np.asarray(eps)[s[i], s[i + 1 :]], np.asarray(sig)[s[i], s[i + 1 :]]
        total += np.sum(np.where(d < 2.5, 4 * e * ((g / d) ** 12 - (g / d) ** 6), 0.0))

    @jax.jit  # one compilation instead of op-by-op dispatch
    def evaluate(r):
        energy = lambda x: model.energy(system.at(x), params)  # noqa: E731
        return energy(r), model.forces(system.at(r), params), jax.grad(energy)(r)

    energy, forces, grad = evaluate(system.position)
    assert float(energy) == pytest.approx(total, rel=1e-12)
    np.testing.assert_allclose(np.asarray(forces), -np.asarray(grad), atol=1e-10)
    with pytest.raises(ValueError, match="symmetric"):
        model.check_params(system, {"epsilon": jnp.array([[1.0, 2.0], [1.0, 1.0]]), "sigma": sig})
    with pytest.raises(ValueError, match=r"\[2, 2\] matrix"):
        model.check_params(system, {"epsilon": jnp.ones((3, 3)), "sigma": sig})


def test_bead_spring_bonds_are_harmonic():
    system = md.chains(jax.random.key(0), 4, 10, density=0.3)
    assert system.bonds.shape == (36, 2)
    model = md.BeadSpring()
    params = {**model.default_params(), "bond_length": jnp.asarray(0.97)}
    r = np.asarray(system.position)
    box = np.asarray(system.space.box)
    b = np.asarray(system.bonds)
    dr = r[b[:, 0]] - r[b[:, 1]]
    dr -= box * np.round(dr / box)
    expected = 0.5 * 100.0 * np.sum((np.linalg.norm(dr, axis=1) - 0.97) ** 2)

    @jax.jit  # one compilation instead of op-by-op dispatch
    def evaluate(r):
        return (
            md.harmonic_bond_energy(system.at(r), 100.0, 0.97),
            model.forces(system.at(r), params),
            jax.grad(lambda x: model.energy(system.at(x), params))(r),
        )

    bond_energy, forces, grad = evaluate(system.position)
    assert float(bond_energy) == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(np.asarray(forces), -np.asarray(grad), atol=1e-9)


def test_wca_range_must_fit_in_the_cutoff():
    with pytest.raises(ValueError, match="raise the model option cutoff"):
        md.Wca(cutoff=1.2).check_params(
            md.lattice("fcc", 3, 0.5), {"epsilon": jnp.asarray(1.0), "sigma": jnp.asarray(1.2)}
        )


@pytest.mark.parametrize("kind, per_cell", [("fcc", 4), ("bcc", 2), ("sc", 1)])
def test_lattices_have_the_density_and_nearest_neighbour_distance(kind, per_cell):
    system = md.lattice(kind, 3, 0.9)
    assert system.n == per_cell * 27
    assert system.n / float(system.space.volume()) == pytest.approx(0.9)
    a = (per_cell / 0.9) ** (1 / 3)
    r = np.asarray(system.position)
    box = np.asarray(system.space.box)
    dr = r[0] - r[1:]
    dr -= box * np.round(dr / box)
    nearest = {"fcc": a / math.sqrt(2), "bcc": a * math.sqrt(3) / 2, "sc": a}[kind]
    assert np.min(np.linalg.norm(dr, axis=1)) == pytest.approx(nearest)


def test_unknown_lattice_suggests_a_name():
    with pytest.raises(ValueError, match="Perhaps you meant 'fcc'"):
        md.lattice("fc", 3, 0.8)


def test_maxwell_boltzmann_has_zero_momentum_and_the_temperature():
    mass = jnp.asarray(np.random.default_rng(0).uniform(1, 3, 500))
    v = md.maxwell_boltzmann(jax.random.key(3), mass, 1.7)
    np.testing.assert_allclose(np.asarray(jnp.sum(mass[:, None] * v, axis=0)), 0.0, atol=1e-12)
    assert float(md.temperature(v, mass, 3 * 499)) == pytest.approx(1.7, rel=1e-12)
    # the unscaled draw is Maxwellian: per-component m v^2 averages kT
    raw = md.maxwell_boltzmann(jax.random.key(4), jnp.ones(20000), 1.7, exact=False)
    assert float(jnp.mean(raw**2)) == pytest.approx(1.7, rel=0.02)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        md.maxwell_boltzmann(jax.random.key(0), mass, -1.0)


def test_random_packing_keeps_the_minimum_distance():
    system = md.random_packing(jax.random.key(0), 200, 0.5, min_distance=0.9)
    r = np.asarray(system.position)
    box = np.asarray(system.space.box)
    dr = r[:, None] - r[None]
    dr -= box * np.round(dr / box)
    d = np.linalg.norm(dr, axis=-1) + np.eye(200) * 10
    assert d.min() >= 0.9
    with pytest.raises(ValueError, match="lower the density"):
        md.random_packing(jax.random.key(0), 200, 1.6, min_distance=1.0, tries=8)


def test_radial_distribution_of_an_ideal_gas_is_one():
    rng = np.random.default_rng(0)
    frames = jnp.asarray(rng.uniform(0, 10, (20, 400, 3)))
    r, g = jax.jit(lambda f: md.radial_distribution(f, md.Periodic(jnp.full(3, 10.0)), bins=20))(
        frames
    )
    assert float(r[-1]) < 5.0
    np.testing.assert_allclose(np.asarray(g[4:]), 1.0, atol=0.08)


def test_msd_vacf_and_diffusion_of_a_random_walk():
    # Brownian steps of variance 2 D dt per component: MSD = 6 D t, D recovered both ways
    rng = np.random.default_rng(0)
    d_true, dt = 0.3, 0.1
    v = rng.normal(scale=math.sqrt(2 * d_true / dt), size=(400, 300, 3))
    x = np.cumsum(v * dt, axis=0)
    # (compiled whole: one compilation each instead of op-by-op dispatch)
    msd = jax.jit(md.mean_squared_displacement)(jnp.asarray(x[:100]))
    assert abs(float(msd[0])) < 1e-9
    assert float(md.diffusion_coefficient(msd, dt)) == pytest.approx(d_true, rel=0.05)
    autocorrelation = jax.jit(md.velocity_autocorrelation, static_argnames="normalize")
    vacf = autocorrelation(jnp.asarray(v[:50]))
    # white-noise velocities are uncorrelated beyond lag 0, so the trapezoidal Green-Kubo
    # integral over a few lags is C(0) dt / 2 / 3 = D (C(0) = 3 * 2 D / dt). Window of 5
    # lags: statistical error about 1.7% (std, 50 x 300 samples per lag), measured 0.5%;
    # bound 5%. A lost 1/dim, dt or end-point half weight is a factor 3, 10 or 2.
    assert float(md.green_kubo_diffusion(vacf[:5], dt)) == pytest.approx(d_true, rel=0.05)
    assert float(vacf[0]) == pytest.approx(3 * 2 * d_true / dt, rel=0.02)
    assert abs(float(vacf[5])) < 0.05 * float(vacf[0])
    assert float(autocorrelation(jnp.asarray(v[:50]), normalize=True)[0]) == pytest.approx(
        1.0, rel=1e-14
    )


def test_h5md_start_round_trips(tmp_path):
    import h5py

    system = liquid()
    path = tmp_path / "start.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("particles/all")
        g["position/value"] = np.asarray(system.position)[None]
        g["velocity/value"] = np.asarray(system.velocity)[None]
        g.create_group("box").attrs["boundary"] = np.array([b"periodic"] * 3)
        g["box/edges"] = np.asarray(system.space.box)
    back = md.read_h5md(path)
    np.testing.assert_array_equal(np.asarray(back.position), np.asarray(system.position))
    np.testing.assert_array_equal(np.asarray(back.velocity), np.asarray(system.velocity))
    np.testing.assert_array_equal(np.asarray(back.space.box), np.asarray(system.space.box))
    with pytest.raises(ValueError, match="no such H5MD file"):
        md.read_h5md(tmp_path / "missing.h5")


def test_force_shifted_lennard_jones_is_continuous_at_the_cutoff():
    model = md.LennardJones(cutoff=2.5, force_shift=True)
    p = {"epsilon": jnp.asarray(1.2), "sigma": jnp.asarray(0.95)}
    rc2 = jnp.asarray(2.5**2)
    e, de = jax.jvp(lambda r2: model.pair_energy(r2, p), (rc2,), (jnp.asarray(1.0),))
    assert abs(float(e)) < 1e-15 and abs(float(de)) < 1e-15


@pytest.mark.parametrize("dim", [2, 3])
def test_green_kubo_integral_of_an_exponential_vacf(dim):
    # C(t) = C0 exp(-t / tau) integrates to C0 tau, so D = C0 tau / dim. The trapezoidal
    # rule with step h over [0, T] gives exactly
    #   (h C0 / dim) [(1 - q^N) / (1 - q) - (1 + q^(N-1)) / 2],  q = exp(-h / tau),
    # which exceeds C0 tau / dim by (h / tau)^2 / 12 (here 3.3e-5) when T >> tau.
    c0, tau, h, n = 2.7, 0.5, 0.01, 2001  # T = 20 = 40 tau: truncation exp(-40)
    vacf = c0 * np.exp(-np.arange(n) * h / tau)
    d = float(md.green_kubo_diffusion(jnp.asarray(vacf), h, dim=dim))
    q = math.exp(-h / tau)
    trapezoid = h * c0 / dim * ((1 - q**n) / (1 - q) - (1 + q ** (n - 1)) / 2)
    assert d == pytest.approx(trapezoid, rel=1e-12)  # measured 2e-15
    exact = c0 * tau / dim
    assert d == pytest.approx(
        exact * (1 + (h / tau) ** 2 / 12), rel=1e-8
    )  # measured 2.2e-10 (the next term, h^4)
    assert d == pytest.approx(exact, rel=4e-5)  # measured 3.3e-5


# Pair potentials at distances where their closed forms give round numbers (reduced units):
# (model, params, r, phi(r), -phi'(r) the repulsive force along the pair axis).
_E, _S = 1.3, 0.9  # epsilon, sigma
_R0, _A = 1.1, 4.0  # Morse r0 and alpha
CLOSED_FORMS = {
    # Lennard-Jones (1924): phi = 4 eps [(s/r)^12 - (s/r)^6], -phi' = (4 eps / r) [12 (s/r)^12
    # - 6 (s/r)^6]; zero at sigma, minimum -eps at 2^(1/6) sigma; at 2 sigma
    # 4 eps (2^-12 - 2^-6) = -63 eps / 1024.
    "lennard_jones": (
        md.LennardJones(cutoff=2.5),
        {"epsilon": _E, "sigma": _S},
        [
            (_S, 0.0, 24 * _E / _S),
            (2 ** (1 / 6) * _S, -_E, 0.0),
            (2 * _S, -63 * _E / 1024, 4 * _E * (12 / 4096 - 6 / 64) / (2 * _S)),
        ],
    ),
    # WCA (Weeks, Chandler & Andersen 1971): LJ + eps inside 2^(1/6) sigma, zero beyond.
    "wca": (
        md.Wca(cutoff=1.5),
        {"epsilon": _E, "sigma": _S},
        [
            (_S / 2, 16129 * _E, 4 * _E * (12 * 4096 - 6 * 64) / (_S / 2)),
            (_S, _E, 24 * _E / _S),
            (2 ** (1 / 6) * _S, 0.0, 0.0),
            (1.2, 0.0, 0.0),
        ],
    ),
    # Morse (1929): phi = eps [(1 - q)^2 - 1], q = e^{-a (r - r0)}, -phi' = -2 eps a q (1 - q);
    # -eps at r0 (no force), 0 at r0 - ln 2 / a (q = 2), -3 eps / 4 at r0 + ln 2 / a (q = 1/2).
    "morse": (
        md.Morse(cutoff=2.5),
        {"epsilon": _E, "alpha": _A, "r0": _R0},
        [
            (_R0, -_E, 0.0),
            (_R0 - math.log(2) / _A, 0.0, 4 * _E * _A),
            (_R0 + math.log(2) / _A, -0.75 * _E, -0.5 * _E * _A),
        ],
    ),
    # Soft spheres (O'Hern, Silbert, Liu & Nagel, Phys. Rev. E 68, 011306, 2003):
    # phi = eps / alpha (1 - r / sigma)^alpha inside sigma, -phi' = (eps / sigma) (1 - r /
    # sigma)^(alpha - 1); alpha = 2.5 at r = 0.36 sigma: 0.64^2.5 = 0.8^5 = 0.32768.
    "soft_sphere": (
        md.SoftSphere(cutoff=1.5),
        {"epsilon": _E, "sigma": _S, "alpha": 2.5},
        [(0.36 * _S, _E / 2.5 * 0.32768, _E / _S * 0.8**3), (_S, 0.0, 0.0), (1.2, 0.0, 0.0)],
    ),
}


@pytest.mark.parametrize("name", list(CLOSED_FORMS))
def test_pair_energy_and_force_match_their_closed_forms(name):
    model, values, table = CLOSED_FORMS[name]
    params = {k: jnp.asarray(v) for k, v in values.items()}
    r = np.array([row[0] for row in table])
    direction = np.array([0.48, -0.6, 0.64])  # a unit vector
    positions = np.stack([np.zeros((len(r), 3)), r[:, None] * direction], axis=1)  # [cases, 2, 3]
    system = md.System(
        jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.ones(2), jnp.zeros(2, jnp.int32), md.Free(ndim=3)
    )

    @jax.jit  # one compilation for all distances
    def evaluate(positions):
        def one(x):
            s = system.at(x)
            return model.energy(s, params), model.forces(s, params)

        return jax.vmap(one)(positions)

    energy, forces = evaluate(jnp.asarray(positions))
    repulsion = (
        np.asarray(forces)[:, 1] @ direction
    )  # the force on particle 1 along the axis from 0 to 1
    # measured: energies exact, forces within 2.1e-16 relative (1.6e-14 absolute at the LJ
    # minimum, where terms of size 50 cancel); bound 1e-12 relative plus 1e-12 absolute
    np.testing.assert_allclose(
        np.asarray(energy), [row[1] for row in table], rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(repulsion, [row[2] for row in table], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(forces)[:, 0], -np.asarray(forces)[:, 1], rtol=1e-12, atol=1e-12
    )


def test_all_pairs_in_row_blocks_match_the_pair_sums():
    # Without a neighbour list, more than a few hundred particles are evaluated a block
    # of rows at a time (here 500 rows in blocks of 262: two blocks, the second padded).
    # Energy, forces and virial against NumPy sums over all pairs with the minimum image.
    model = md.LennardJones(cutoff=2.5, shift=True)
    params = {"epsilon": jnp.asarray(1.1), "sigma": jnp.asarray(0.95)}
    system = liquid(n_cells=5, density=0.8)
    assert system.n == 500

    @jax.jit  # one compilation instead of op-by-op dispatch
    def evaluate(system):
        return (
            model.energy(system, params),
            model.forces(system, params),
            model.virial(system, params),
        )

    energy, forces, virial = evaluate(system)
    r = np.asarray(system.position)
    box = np.asarray(system.space.box)
    d = r[:, None, :] - r[None, :, :]
    d -= box * np.round(d / box)
    dist = np.sqrt(np.sum(d * d, axis=-1)) + np.eye(500) * 10.0
    inside = dist < 2.5
    s6 = np.where(inside, (0.95 / dist) ** 6, 0.0)
    s6c = (0.95 / 2.5) ** 6
    phi = np.where(inside, 4 * 1.1 * (s6 * s6 - s6) - 4 * 1.1 * (s6c * s6c - s6c), 0.0)
    minus_dphi_over_r = np.where(
        inside, 4 * 1.1 * (12 * s6 * s6 - 6 * s6) / dist**2, 0.0
    )  # -phi'(r) / r
    assert float(energy) == pytest.approx(0.5 * phi.sum(), rel=1e-12)
    np.testing.assert_allclose(
        np.asarray(forces),
        np.sum(minus_dphi_over_r[:, :, None] * d, axis=1),
        rtol=1e-10,
        atol=1e-10,
    )
    assert float(virial) == pytest.approx(0.5 * np.sum(minus_dphi_over_r * dist**2), rel=1e-12)


def test_scalar_parameters_do_not_stop_the_matrix_checks():
    model = md.LennardJones(cutoff=2.5, n_species=2)
    system = md.lattice("sc", 2, 0.5)
    with pytest.raises(ValueError, match="sigma matrix must be symmetric"):
        model.check_params(
            system, {"epsilon": jnp.asarray(1.0), "sigma": jnp.array([[1.0, 0.9], [0.8, 1.0]])}
        )
    with pytest.raises(ValueError, match=r"sigma must be a scalar or a \[2, 2\] matrix"):
        model.check_params(system, {"epsilon": jnp.asarray(1.0), "sigma": jnp.ones(2)})
    with pytest.raises(ValueError, match=r"species must be in 0..1"):
        model.check_params(
            md.System(
                system.position, system.velocity, system.mass, system.species + 2, system.space
            ),
            model.default_params(),
        )


@pytest.mark.parametrize(
    "model, sigma, reach",
    [(md.Wca(cutoff=1.2), 1.2, 2 ** (1 / 6) * 1.2), (md.SoftSphere(cutoff=1.5), 2.0, 2.0)],
)
def test_range_check_reports_the_range(model, sigma, reach):
    # WCA reaches 2^(1/6) sigma, soft spheres sigma: the message names that distance
    params = {**model.default_params(), "sigma": jnp.asarray(sigma)}
    with pytest.raises(
        ValueError, match=rf"= {reach:g} \(from sigma = {sigma:g}\) exceeds the model's cutoff"
    ):
        model.check_params(md.lattice("sc", 3, 0.5), params)


def test_two_species_tail_correction_matches_the_integrals():
    # E_tail = (2 pi / V) sum_ab N_a N_b int_rc^inf phi_ab r^2 dr,
    # P_tail = -(2 pi / 3V^2) sum_ab N_a N_b int_rc^inf r^3 phi_ab' dr (ordered pairs a, b)
    rc = 2.2
    model = md.LennardJones(cutoff=rc, tail_correction=True, n_species=2)
    eps = np.array([[1.0, 1.5], [1.5, 0.5]])
    sig = np.array([[1.0, 0.8], [0.8, 0.9]])
    params = {"epsilon": jnp.asarray(eps), "sigma": jnp.asarray(sig)}
    base = md.lattice("sc", 4, 0.6)
    species = np.asarray([0, 1, 1] * 21 + [1])  # 22 of species 0, 42 of species 1
    system = md.System(
        base.position, base.velocity, base.mass, jnp.asarray(species, jnp.int32), base.space
    )
    volume = float(system.space.volume())
    counts = np.bincount(species)
    energy = pressure = 0.0
    for a in range(2):
        for b in range(2):
            e, s = eps[a, b], sig[a, b]
            phi = lambda r: 4 * e * ((s / r) ** 12 - (s / r) ** 6)  # noqa: E731, B023
            dphi = lambda r: 4 * e * (-12 * s**12 / r**13 + 6 * s**6 / r**7)  # noqa: E731, B023
            energy += (
                2
                * math.pi
                / volume
                * counts[a]
                * counts[b]
                * scipy.integrate.quad(lambda r: phi(r) * r * r, rc, np.inf)[0]  # noqa: B023
            )
            pressure -= (
                2
                * math.pi
                / (3 * volume**2)
                * counts[a]
                * counts[b]
                * scipy.integrate.quad(lambda r: r**3 * dphi(r), rc, np.inf)[0]  # noqa: B023
            )
    assert float(model.tail_energy(system, params)) == pytest.approx(energy, rel=1e-9)
    assert float(model.tail_pressure(system, params)) == pytest.approx(pressure, rel=1e-9)
    # no correction without the option, nor in free space
    plain = md.LennardJones(cutoff=rc, n_species=2)
    assert (
        float(plain.tail_energy(system, params)) == 0.0
        and float(plain.tail_pressure(system, params)) == 0.0
    )
    free = md.System(
        base.position, base.velocity, base.mass, jnp.asarray(species, jnp.int32), md.Free(ndim=3)
    )
    assert (
        float(model.tail_energy(free, params)) == 0.0
        and float(model.tail_pressure(free, params)) == 0.0
    )


# ---------------------------------------------------------------- space and system helpers


def test_periodic_space_minimum_image_wrap_volume_and_scaling():
    edges = np.array([2.0, 3.0, 5.0])
    space = md.Periodic(jnp.asarray(edges))
    rng = np.random.default_rng(4)
    raw = rng.uniform(-4, 4, (200, 3)) * edges
    d = np.asarray(space.displacement(jnp.asarray(raw)))
    # the minimum image: within half a box per axis, and a whole number of boxes from raw
    assert np.all(np.abs(d) <= edges / 2)
    shift = (raw - d) / edges
    np.testing.assert_allclose(shift, np.round(shift), atol=1e-12)
    for axis in range(3):
        np.testing.assert_array_equal(
            np.asarray(space.displacement_component(jnp.asarray(raw[:, axis]), axis)), d[:, axis]
        )
    wrapped = np.asarray(space.wrap(jnp.asarray(raw)))
    assert np.all(wrapped >= 0) and np.all(wrapped < edges)
    shift = (raw - wrapped) / edges
    np.testing.assert_allclose(shift, np.round(shift), atol=1e-12)
    assert float(space.volume()) == 30.0 and space.dim == 3 and space.periodic
    np.testing.assert_array_equal(np.asarray(space.scaled(1.5).box), 1.5 * edges)
    assert float(md.Periodic(jnp.asarray([2.0, 4.0])).volume()) == 8.0  # an area in 2-D
    assert md.Periodic(jnp.asarray([2, 3])).box.dtype == jnp.float64
    with pytest.raises(ValueError, match="vector of 1 to 3 lengths"):
        md.Periodic(jnp.ones((2, 2)))


def test_free_space_has_no_box():
    space = md.Free(ndim=2)
    raw = jnp.asarray([[7.0, -9.0]])
    np.testing.assert_array_equal(np.asarray(space.displacement(raw)), [[7.0, -9.0]])
    np.testing.assert_array_equal(np.asarray(space.displacement_component(raw[:, 1], 1)), [-9.0])
    np.testing.assert_array_equal(np.asarray(space.wrap(raw)), [[7.0, -9.0]])
    assert space.dim == 2 and space.box is None and not space.periodic and md.Free().dim == 3
    assert math.isnan(float(space.volume())) and space.scaled(2.0) is space


def test_system_scaling_and_shape_checks(monkeypatch):
    base = md.lattice("sc", 2, 0.5)
    system = md.System(
        base.position,
        base.velocity,
        base.mass,
        base.species,
        base.space,
        jnp.asarray([[0, 1], [1, 3]], jnp.int32),
    )
    scaled = system.scaled(1.25)
    np.testing.assert_allclose(
        np.asarray(scaled.position), 1.25 * np.asarray(system.position), rtol=1e-15
    )
    np.testing.assert_allclose(
        np.asarray(scaled.space.box), 1.25 * np.asarray(system.space.box), rtol=1e-15
    )
    np.testing.assert_array_equal(np.asarray(scaled.velocity), np.asarray(system.velocity))
    np.testing.assert_array_equal(np.asarray(scaled.bonds), np.asarray(system.bonds))
    # The system checks its own shapes, also where runtime type checking is off (as it is
    # outside the test suite, which turns jaxtyping's checks on for the packages).
    import jaxtyping

    monkeypatch.setattr(jaxtyping.config, "jaxtyping_disable", True)
    r, v, m, s, space = system.position, system.velocity, system.mass, system.species, system.space
    for bonds in (
        jnp.zeros((3, 1), jnp.int32),
        jnp.zeros((3, 3), jnp.int32),
        jnp.zeros(4, jnp.int32),
    ):
        with pytest.raises(ValueError, match=r"bonds must have shape \(b, 2\)"):
            md.System(r, v, m, s, space, bonds)
    with pytest.raises(ValueError, match="velocity must have shape"):
        md.System(r, v[:, :2], m, s, space)
    with pytest.raises(ValueError, match="mass and species must have shape"):
        md.System(r, v, m[:-1], s, space)
    with pytest.raises(ValueError, match="positions are 3-D but the space is 2-D"):
        md.System(r, v, m, s, md.Free(ndim=2))
