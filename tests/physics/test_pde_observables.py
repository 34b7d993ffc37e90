"""The observables of the PDE models against their definitions and their time derivatives.

Each model's observables are evaluated at a random band-limited field on a grid that is
not square, over a domain that does not start at 0, with parameters that are not the
defaults, and compared with NumPy sums written here from the definitions in the model
docstrings: integrals are sums times the cell volume (periodic axes) or the trapezoidal
rule (bounded axes, end nodes included), derivatives are taken by FFT, and the velocity
of Navier-Stokes comes from its streamfunction, -Laplacian(psi) = w.

Then the rate of change of each observable along the model's own right-hand side (a
Jacobian-vector product) is compared with the balance law of the equation: conserved
quantities (mass of diffusion and advection, the three KdV invariants, inviscid energy
and enstrophy of 2D Navier-Stokes, Burgers' mass and inviscid energy) have rate 0, and
the others follow their energy identities (Allen-Cahn's free energy decreases at minus
the integral of u_t^2, Kuramoto-Sivashinsky's energy changes at p |u_x|^2 - q |u_xx|^2,
...). The fields are band-limited to |m| < n / 4 so that the pseudo-spectral products,
up to quartic, are exact on the grid and the balance laws hold to round-off.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from physics.pde import SpectralPdeModel
from solvers import FdGrid, FourierGrid

from .test_pde_initial import DOMAIN_2D, derivative

# Measured (float64): largest relative error 7e-16 (observables and balance laws alike,
# the rates relative to the size of the terms that cancel); bound 1e-11, far below a
# wrong coefficient, sign or term (O(1)).
RTOL = 1e-11


def p(**values) -> dict[str, jax.Array]:
    return {k: jnp.asarray(v, dtype=float) for k, v in values.items()}


def grid_of(model):
    if isinstance(model, SpectralPdeModel):
        return FourierGrid(model.points, model.domain)
    return FdGrid(model.points, model.domain, model.boundary_kinds, model.boundary_values)


def observe(model, u: np.ndarray, params) -> dict[str, np.ndarray]:
    """Every observable of `model` at the field `u`: each field under its name, and the
    extras as scalars."""
    got = {k: np.asarray(v) for k, v in _evaluate(model, params, jnp.asarray(u))[0].items()}
    assert set(got) == set(model.observable_names)
    for i, field in enumerate(model.field_names):
        np.testing.assert_array_equal(got[field], u[i])
    assert all(got[k].shape == () for k in model.extra_observable_names)
    return got


def rates(model, u: np.ndarray, params) -> dict[str, float]:
    """d/dt of every extra observable at `u` along the model's right-hand side."""
    return {k: float(v) for k, v in _evaluate(model, params, jnp.asarray(u))[1].items()}


@eqx.filter_jit
def _evaluate(model, params, u):
    # One compiled program per model and grid (eager JAX would compile every operation
    # of the Jacobian-vector product on its own, several times slower).
    grid = grid_of(model)

    def rhs(v):
        if isinstance(model, SpectralPdeModel):
            v_hat = grid.rfft(v)
            with jax.numpy_dtype_promotion(
                "standard"
            ):  # a real symbol times a complex field, as the solver does
                return grid.irfft(
                    model.linear(params, grid) * v_hat + model.nonlinear(v_hat, params, grid)
                )
        d = model.diffusivities(params).reshape((-1,) + (1,) * model.ndim)
        return d * grid.laplacian(v) + model.reaction(v, params)

    _, rate = jax.jvp(lambda v: model.extra_observables(v, params, grid), (u,), (rhs(u),))
    return model.observables(u, params, grid), rate


def band_limited(rng, points, channels: int = 1) -> np.ndarray:
    """A random real field [channels, *points] with modes |m_i| < n_i / 4 only, and a mean."""
    out = []
    for _ in range(channels):
        c = rng.normal(size=points) + 1j * rng.normal(size=points)
        ms = np.meshgrid(*(np.fft.fftfreq(n, 1.0 / n) for n in points), indexing="ij")
        keep = np.all([np.abs(m) < n / 4 for m, n in zip(ms, points, strict=False)], axis=0)
        u = np.real(np.fft.ifftn(c * keep))
        out.append(0.3 + u / np.max(np.abs(u)))
    return np.stack(out)


def cell_volume(model) -> float:
    return math.prod((b - a) / n for (a, b), n in zip(model.domain, model.points, strict=False))


def assert_close(got, expected, scale, what):
    error = abs(float(got) - float(expected)) / scale
    assert error < RTOL, (what, float(got), float(expected), error)


# ----------------------------------------------------------------------------- periodic


@pytest.mark.parametrize("name", ["heat", "advection_diffusion"])
def test_mass_of_diffusion_and_advection_is_the_integral_and_is_conserved(name):
    # mass = integral of u = sum u * cell volume; u_t = -c d.grad u + D Lap u keeps it.
    options = {"points": [16, 12], "domain": DOMAIN_2D}
    params = p(diffusivity=0.37)
    if name == "advection_diffusion":
        options["direction"] = [1.0, 2.0]
        params = p(velocity=-1.3, diffusivity=0.21)
    model = sim.get_model(name, **options)
    u = band_limited(np.random.default_rng(1), model.points)
    mass = u.sum() * cell_volume(model)
    assert_close(observe(model, u, params)["mass"], mass, abs(mass), "mass")
    scale = np.abs(u).sum() * cell_volume(model)
    assert abs(rates(model, u, params)["mass"]) < RTOL * scale


def test_burgers_1d_mass_and_energy_and_their_balance():
    # mass = int u, energy = int u^2 / 2; u_t + (u^2 / 2)_x = nu u_xx: the mass is
    # conserved, and d energy / dt = -nu int u_x^2 (0 for nu = 0).
    model = sim.get_model("burgers", points=[32], domain=[[-2.0, 3.0]])
    u = band_limited(np.random.default_rng(2), model.points)
    dv = cell_volume(model)
    for nu in (0.0, 0.07):
        params = p(viscosity=nu)
        got = observe(model, u, params)
        assert_close(got["mass"], u.sum() * dv, np.abs(u).sum() * dv, "mass")
        assert_close(got["energy"], 0.5 * (u**2).sum() * dv, 0.5 * (u**2).sum() * dv, "energy")
        ux = derivative(u[0], 0, 5.0)
        rate = rates(model, u, params)
        scale = (np.abs(u) ** 3).sum() * dv + (
            ux**2
        ).sum() * dv  # size of the advective and viscous terms
        assert abs(rate["mass"]) < RTOL * scale
        assert_close(rate["energy"], -nu * (ux**2).sum() * dv, scale, ("energy rate", nu))


def test_burgers_2d_energy_of_a_taylor_green_flow():
    # energy = int (u^2 + v^2) / 2. For u = A sin(kx x') cos(ky y'), v = -A (kx / ky)
    # cos(kx x') sin(ky y') with whole periods in the box each square averages 1/4:
    # energy = A^2 (1 + kx^2 / ky^2) area / 8 (A^2 area / 4 when kx = ky).
    model = sim.get_model("burgers", points=[24, 16], domain=DOMAIN_2D)
    amplitude, kx, ky = 0.7, 2 * np.pi * 2 / 3.0, 2 * np.pi * 3 / 4.0
    u = model.initial_field("taylor_green", amplitude=amplitude, modes=[2, 3])
    expected = amplitude**2 * (1 + kx**2 / ky**2) * 12.0 / 8
    got = observe(model, u, p(viscosity=0.1))
    assert_close(got["energy"], expected, expected, "taylor-green energy")
    # and at a random velocity field, the definition
    w = band_limited(np.random.default_rng(3), model.points, channels=2)
    energy = 0.5 * (w**2).sum() * cell_volume(model)
    assert_close(observe(model, w, p(viscosity=0.1))["energy"], energy, energy, "energy")
    square = sim.get_model("burgers", points=[16, 16], domain=[[0.5, 2.5], [-1.0, 1.0]])
    got = observe(square, square.initial_field("taylor_green", amplitude=1.5), p(viscosity=0.1))[
        "energy"
    ]
    assert_close(got, 1.5**2 * 4.0 / 4, 1.0, "square taylor-green energy")


def test_kdv_invariants_are_their_integrals_and_are_conserved():
    # mass = int u, momentum = int u^2 / 2, energy = int (b u_x^2 / 2 - a u^3 / 6), all
    # three conserved by u_t + a u u_x + b u_xxx = 0.
    a, b = 3.5, 0.4
    model = sim.get_model("kdv", points=[64], domain=[[-7.0, 13.0]])
    params = p(nonlinearity=a, dispersion=b)
    u = band_limited(np.random.default_rng(4), model.points)
    dv = cell_volume(model)
    ux = derivative(u[0], 0, 20.0)
    expected = {
        "mass": u.sum() * dv,
        "momentum": 0.5 * (u**2).sum() * dv,
        "energy": (0.5 * b * ux**2 - a / 6 * u[0] ** 3).sum() * dv,
    }
    scales = {
        "mass": np.abs(u).sum() * dv,
        "momentum": expected["momentum"],
        "energy": (0.5 * b * ux**2 + a / 6 * np.abs(u[0]) ** 3).sum() * dv,
    }
    got = observe(model, u, params)
    for k in expected:
        assert_close(got[k], expected[k], scales[k], k)
    # d/dt: each term of the rate is at most about |u_t| |dQ/du| integrated
    ut = -a * u[0] * ux - b * derivative(u[0], 0, 20.0, 3)
    gradients = {
        "mass": 1.0,
        "momentum": np.abs(u[0]),
        "energy": b * np.abs(derivative(u[0], 0, 20.0, 2)) + a / 2 * u[0] ** 2,
    }
    for k, rate in rates(model, u, params).items():
        assert abs(rate) < RTOL * (np.abs(ut) * gradients[k]).sum() * dv, (k, rate)


def test_kuramoto_sivashinsky_mass_and_energy_balance():
    # mass = int u (conserved), energy = int u^2 / 2; from u_t = -a u u_x - p u_xx - q u_xxxx,
    # d energy / dt = p int u_x^2 - q int u_xx^2 (int u^2 u_x = 0).
    a, pp, q = 1.7, 0.6, 2.1
    model = sim.get_model("kuramoto_sivashinsky", points=[64], domain=[[-4.0, 26.0]])
    params = p(nonlinearity=a, anti_diffusivity=pp, hyper_diffusivity=q)
    u = band_limited(np.random.default_rng(5), model.points)
    dv = cell_volume(model)
    got = observe(model, u, params)
    assert_close(got["mass"], u.sum() * dv, np.abs(u).sum() * dv, "mass")
    assert_close(got["energy"], 0.5 * (u**2).sum() * dv, 0.5 * (u**2).sum() * dv, "energy")
    ux, uxx = derivative(u[0], 0, 30.0), derivative(u[0], 0, 30.0, 2)
    rate = rates(model, u, params)
    scale = (pp * ux**2 + q * uxx**2 + a * np.abs(u[0] ** 2 * ux)).sum() * dv
    assert abs(rate["mass"]) < RTOL * np.abs(u).sum() * dv
    assert_close(rate["energy"], (pp * ux**2 - q * uxx**2).sum() * dv, scale, "energy rate")


def test_allen_cahn_free_energy_and_its_gradient_flow():
    # F = int D |grad u|^2 / 2 + r (u^2 - 1)^2 / 4, and u_t = -dF/du, so dF/dt = -int u_t^2.
    D, r = 0.03, 1.7
    model = sim.get_model("allen_cahn", points=[16, 12], domain=DOMAIN_2D)
    params = p(diffusivity=D, rate=r)
    u = band_limited(np.random.default_rng(6), model.points)
    dv = cell_volume(model)
    ux, uy = derivative(u[0], 0, 3.0), derivative(u[0], 1, 4.0)
    density = 0.5 * D * (ux**2 + uy**2) + 0.25 * r * (u[0] ** 2 - 1) ** 2
    got = observe(model, u, params)
    assert_close(got["free_energy"], density.sum() * dv, np.abs(density).sum() * dv, "free energy")
    lap = derivative(u[0], 0, 3.0, 2) + derivative(u[0], 1, 4.0, 2)
    ut = D * lap + r * (u[0] - u[0] ** 3)
    dissipation = (ut**2).sum() * dv
    assert_close(
        rates(model, u, params)["free_energy"], -dissipation, dissipation, "free energy rate"
    )


def navier_stokes_velocity(w: np.ndarray, lengths) -> tuple[np.ndarray, np.ndarray]:
    """(psi_y, -psi_x) with -Lap psi = w (psi of zero mean), by FFT."""
    kx, ky = (
        2 * np.pi * np.fft.fftfreq(n, 1.0 / n) / length
        for n, length in zip(w.shape, lengths, strict=False)
    )
    k2 = kx[:, None] ** 2 + ky[None, :] ** 2
    psi_hat = np.fft.fft2(w) / np.where(k2 == 0, 1.0, k2) * (k2 != 0)
    psi = np.real(np.fft.ifft2(psi_hat))
    return derivative(psi, 1, lengths[1]), -derivative(psi, 0, lengths[0])


def test_navier_stokes_energy_and_enstrophy_and_their_balance():
    # energy = int |u|^2 / 2 with u = (psi_y, -psi_x), enstrophy = int w^2 / 2. Unforced,
    # w_t + u . grad w = nu Lap w - mu w gives d energy / dt = -nu int w^2 - 2 mu energy
    # and d enstrophy / dt = -nu int |grad w|^2 - 2 mu enstrophy: both conserved when
    # nu = mu = 0 (advection moves w around without changing either).
    model = sim.get_model("navier_stokes_2d", points=[16, 20], domain=DOMAIN_2D, forcing_mode=2)
    w = band_limited(np.random.default_rng(7), model.points)
    w = w - w.mean()  # a periodic vorticity has no mean (the velocity would not be periodic)
    dv = cell_volume(model)
    u, v = navier_stokes_velocity(w[0], (3.0, 4.0))
    energy, enstrophy = 0.5 * (u**2 + v**2).sum() * dv, 0.5 * (w**2).sum() * dv
    wx, wy = derivative(w[0], 0, 3.0), derivative(w[0], 1, 4.0)
    grad2 = (wx**2 + wy**2).sum() * dv
    advection = (np.abs(w[0] * (u * wx + v * wy))).sum() * dv  # the size of what cancels
    for nu, mu in ((0.0, 0.0), (0.013, 0.21)):
        params = p(viscosity=nu, drag=mu, forcing=0.0)
        got = observe(model, w, params)
        assert_close(got["energy"], energy, energy, "energy")
        assert_close(got["enstrophy"], enstrophy, enstrophy, "enstrophy")
        rate = rates(model, w, params)
        assert_close(
            rate["energy"],
            -nu * 2 * enstrophy - 2 * mu * energy,
            advection + energy,
            ("energy rate", nu),
        )
        assert_close(
            rate["enstrophy"],
            -nu * grad2 - 2 * mu * enstrophy,
            advection + grad2,
            ("enstrophy rate", nu),
        )


def test_navier_stokes_energy_and_enstrophy_of_a_taylor_green_vortex():
    # psi = A sin(kx x') sin(ky y'), w = |k|^2 psi: each square of a sine or cosine
    # product averages 1/4 over whole periods, so energy = A^2 |k|^2 area / 8 and
    # enstrophy = A^2 |k|^4 area / 8.
    model = sim.get_model("navier_stokes_2d", points=[24, 16], domain=DOMAIN_2D, forcing_mode=2)
    amplitude, kx, ky = 1.3, 2 * np.pi * 2 / 3.0, 2 * np.pi * 3 / 4.0
    k2, area = kx**2 + ky**2, 12.0
    got = observe(
        model,
        model.initial_field("taylor_green", amplitude=amplitude, modes=[2, 3]),
        model.default_params(),
    )
    assert_close(
        got["energy"], amplitude**2 * k2 * area / 8, amplitude**2 * k2 * area / 8, "energy"
    )
    assert_close(
        got["enstrophy"],
        amplitude**2 * k2**2 * area / 8,
        amplitude**2 * k2**2 * area / 8,
        "enstrophy",
    )


def test_gray_scott_observes_its_two_fields():
    model = sim.get_model("gray_scott", points=[8, 6], domain=DOMAIN_2D)
    assert model.observable_names == ("u", "v")
    u = band_limited(np.random.default_rng(8), model.points, channels=2)
    got = observe(model, u, model.default_params())
    np.testing.assert_array_equal(got["u"], u[0])
    np.testing.assert_array_equal(got["v"], u[1])


# ----------------------------------------------------------------------------- bounded


def trapezoid_weights(model) -> np.ndarray:
    """Cell volume per node: h on periodic axes, h with half weight at both ends on bounded ones."""
    weights = []
    for (a, b), n, periodic in zip(model.domain, model.points, model.periodic_axes, strict=False):
        if periodic:
            weights.append(np.full(n, (b - a) / n))
        else:
            w = np.full(n, (b - a) / (n - 1))
            w[[0, -1]] /= 2
            weights.append(w)
    return math.prod(np.meshgrid(*weights, indexing="ij"))


@pytest.mark.parametrize(
    "boundary", ["dirichlet", "neumann", [["dirichlet", "neumann"], "periodic"]]
)
def test_mass_of_the_bounded_models_is_the_trapezoidal_integral(boundary):
    rng = np.random.default_rng(9)
    for name, params in (
        ("heat_fd", p(diffusivity=0.3)),
        ("fisher_kpp", p(diffusivity=0.02, rate=1.4)),
    ):
        model = sim.get_model(name, points=[11, 9], domain=DOMAIN_2D, boundary=boundary)
        u = rng.uniform(0.0, 1.0, model.field_shape)
        mass = (u[0] * trapezoid_weights(model)).sum()
        assert_close(observe(model, u, params)["mass"], mass, mass, (name, boundary))


def test_bounded_mass_balance_on_a_periodic_box():
    # With periodic sides the discrete Laplacian sums to zero over the nodes, so the mass
    # of heat_fd is conserved and that of Fisher-KPP grows at int r u (1 - u).
    rng = np.random.default_rng(10)
    r = 1.4
    for name, params in (
        ("heat_fd", p(diffusivity=0.3)),
        ("fisher_kpp", p(diffusivity=0.02, rate=r)),
    ):
        model = sim.get_model(name, points=[11, 9], domain=DOMAIN_2D, boundary="periodic")
        u = rng.uniform(0.0, 1.0, model.field_shape)
        weights = trapezoid_weights(model)
        growth = 0.0 if name == "heat_fd" else (r * u[0] * (1 - u[0]) * weights).sum()
        scale = (np.abs(u[0]) * weights).sum() * (0.3 / min(3.0 / 11, 4.0 / 9) ** 2 + r)
        assert_close(rates(model, u, params)["mass"], growth, scale, name)
