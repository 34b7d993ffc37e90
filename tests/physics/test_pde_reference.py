"""PDE models against exact properties of their equations: the growth rate of every
Fourier mode about a uniform state (the dispersion relation of the linearised equation),
exact single-mode and steady solutions of Navier-Stokes, and the Ablowitz-Zeppetella
front of Fisher-KPP. Right-hand sides are evaluated directly (no time stepping)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from physics.pde import SpectralPdeModel
from solvers import FdGrid, FourierGrid

SPECTRAL_MODELS = [n for n in sim.model_names() if issubclass(sim.model_class(n), SpectralPdeModel)]


def spectral_rhs(model, params):
    """(grid, rhs): rhs(u) = L u + N(u) of a spectral model in physical space, jitted."""
    grid = FourierGrid(model.points, model.domain)

    @jax.jit
    def rhs(u):
        u_hat = grid.rfft(u)
        with jax.numpy_dtype_promotion(
            "standard"
        ):  # a real symbol times a complex field, as the solver does
            return grid.irfft(
                model.linear(params, grid) * u_hat + model.nonlinear(u_hat, params, grid)
            )

    return grid, rhs


def nodes(model) -> list[np.ndarray]:
    """The nodes low + j L / n, j = 0..n-1, per axis ('ij'), as the spectral family documents."""
    return np.meshgrid(
        *(
            a + (b - a) * np.arange(n) / n
            for (a, b), n in zip(model.domain, model.points, strict=False)
        ),
        indexing="ij",
    )


def wavevector(model) -> tuple[list[np.ndarray], np.ndarray]:
    """Angular wavenumbers per axis of the real-FFT layout, broadcast to its shape, and a
    mask that drops the Nyquist modes (their derivative is not representable)."""
    points, lengths = model.points, [b - a for a, b in model.domain]
    ms = [np.fft.fftfreq(n, 1 / n) for n in points[:-1]] + [np.arange(points[-1] // 2 + 1)]
    mesh = np.meshgrid(*ms, indexing="ij")
    keep = np.all([np.abs(m) != n // 2 for m, n in zip(mesh, points, strict=False)], axis=0)
    return [2 * np.pi * m / length for m, length in zip(mesh, lengths, strict=False)], keep


def p(**values):
    return {k: jnp.asarray(v, dtype=float) for k, v in values.items()}


# Each entry: (model options, params, uniform base state per channel, growth rate
# sigma(k) per channel of a mode exp(i k . x) about it), from the equation in the
# model's docstring linearised by hand.
def _rates(name):
    if name == "heat":  # u_t = D Lap u
        D = 0.37
        return (
            {"points": [12, 16], "domain": [[-1.0, 2.0], [0.5, 4.5]]},
            p(diffusivity=D),
            [0.7],
            lambda k: [-D * k2(k)],
        )
    if name == "advection_diffusion":  # u_t = -c d.grad u + D Lap u
        c, D, d = -1.3, 0.21, np.array([1.0, 2.0]) / math.sqrt(5.0)
        options = {"points": [12, 16], "domain": [[-1.0, 2.0], [0.5, 4.5]], "direction": [1.0, 2.0]}
        return (
            options,
            p(velocity=c, diffusivity=D),
            [0.0],
            lambda k: [-1j * c * (d[0] * k[0] + d[1] * k[1]) - D * k2(k)],
        )
    if name == "burgers":  # u_t = -(u . grad) u + nu Lap u, about a uniform flow (U, V)
        nu, U, V = 0.05, 0.8, -0.3
        options = {"points": [12, 16], "domain": [[-1.0, 2.0], [0.5, 4.5]]}
        return (
            options,
            p(viscosity=nu),
            [U, V],
            lambda k: [-1j * (U * k[0] + V * k[1]) - nu * k2(k)] * 2,
        )
    if name == "kdv":  # u_t = -a u u_x - b u_xxx, about u = U: sigma = -i a U k + i b k^3
        a, b, U = 6.0, 0.4, 0.25
        return (
            {"points": [64], "domain": [[-10.0, 10.0]]},
            p(nonlinearity=a, dispersion=b),
            [U],
            lambda k: [-1j * a * U * k[0] + 1j * b * k[0] ** 3],
        )
    if name == "kuramoto_sivashinsky":  # defaults (p = q = 1): sigma = k^2 - k^4
        return {"points": [128]}, None, [0.0], lambda k: [k[0] ** 2 - k[0] ** 4]
    if (
        name == "allen_cahn"
    ):  # u_t = D Lap u + r (u - u^3), about u = U: sigma = r (1 - 3 U^2) - D k^2
        D, r, U = 0.03, 1.7, 0.6
        return (
            {"points": [16, 12]},
            p(diffusivity=D, rate=r),
            [U],
            lambda k: [r * (1 - 3 * U**2) - D * k2(k)],
        )
    if (
        name == "gray_scott"
    ):  # about the trivial state u = 1, v = 0: uncoupled, damped by F and F + k
        F, kill, du, dv = 0.03, 0.06, 2e-3, 7e-3
        params = p(feed=F, kill=kill, diffusivity_u=du, diffusivity_v=dv)
        return (
            {"points": [16, 12], "domain": [[0.0, 0.5], [0.0, 0.4]]},
            params,
            [1.0, 0.0],
            lambda k: [-F - du * k2(k), -(F + kill) - dv * k2(k)],
        )
    if name == "navier_stokes_2d":  # about rest: sigma = -(nu |k|^2 + mu)
        nu, mu = 0.02, 0.15
        options = {"points": [16, 12], "domain": [[-1.0, 2.0], [0.5, 4.5]], "forcing_mode": 2}
        return options, p(viscosity=nu, drag=mu, forcing=0.0), [0.0], lambda k: [-(nu * k2(k) + mu)]
    if name == "navier_stokes_3d":  # about rest: sigma = -nu |k|^2 on every component
        nu = 0.02
        options = {"points": [8, 6, 4], "domain": [[-1.0, 2.0], [0.5, 4.5], [0.0, 1.0]]}
        return options, p(viscosity=nu), [0.0, 0.0, 0.0], lambda k: [-nu * k2(k)] * 3
    return None


def k2(k):
    return sum(ki**2 for ki in k)


@pytest.mark.parametrize("name", SPECTRAL_MODELS)
def test_fourier_modes_grow_at_the_linearised_rate(name):
    # About a uniform state the linearised right-hand side is diagonal in Fourier space:
    # J exp(i k . x) = sigma(k) exp(i k . x). A random perturbation carries every mode,
    # so one Jacobian-vector product measures sigma at every wavenumber of the grid.
    case = _rates(name)
    assert case is not None, (
        f"spectral model {name!r} has no dispersion relation in {__file__}: add one"
    )
    options, params, base, sigma = case
    model = sim.get_model(name, **options)
    params = model.default_params() if params is None else params
    assert set(params) == set(model.parameter_names)
    grid, rhs = spectral_rhs(model, params)
    u0 = jnp.asarray(np.stack([np.full(model.points, b) for b in base]))
    du = jnp.asarray(np.random.default_rng(0).normal(size=model.field_shape))
    _, jdu = jax.jvp(rhs, (u0,), (du,))
    measured = np.asarray(grid.rfft(jdu)) / np.asarray(grid.rfft(du))
    k, keep = wavevector(model)
    for c, expected in enumerate(sigma(k)):
        expected = np.broadcast_to(expected, keep.shape)
        error = np.max(np.abs(measured[c] - expected)[keep]) / np.max(np.abs(expected[keep]))
        # measured at most 2.3e-14 (allen_cahn; |sigma| up to 3.5e2 for kdv's k^3); bound
        # 1e-10, far below a wrong coefficient or a swapped one (O(1))
        assert error < 1e-10, (name, model.field_names[c], error)


def test_kuramoto_sivashinsky_grows_below_the_unit_wavenumber_only():
    # sigma = k^2 - k^4 (Kuramoto 1978; Kassam & Trefethen 2005): long waves 0 < k < 1 grow,
    # fastest at k = 1/sqrt(2) with rate 1/4; k = 1 is neutral; shorter waves decay.
    model = sim.get_model("kuramoto_sivashinsky", points=[128])  # [0, 32 pi]: k = m / 16
    grid, rhs = spectral_rhs(model, model.default_params())
    (x,) = nodes(model)
    rates = {}
    for m in (4, 11, 12, 16, 24):  # k = 0.25, 0.6875, 0.75, 1, 1.5
        k = m / 16
        u = 0.8 * np.cos(k * x + 0.4)  # finite amplitude: (u^2)_x only feeds the modes 0 and 2k
        rates[k] = np.asarray(grid.rfft(rhs(jnp.asarray(u[None])))[0, m]) / np.fft.rfft(u)[m]
        # measured 4e-16; bound 1e-12
        assert abs(rates[k] - (k**2 - k**4)) < 1e-12, (k, rates[k])
    assert all(rate.real > 1e-3 for k, rate in rates.items() if k < 1) and rates[1.5].real < -1.0
    assert abs(rates[1.0]) < 1e-12


def test_navier_stokes_single_modes_decay_without_advection():
    # A vorticity made of modes of one |k| (here cos(3x + 4y) and sin(5x)) is a steady
    # solution of the Euler equations: the velocity runs along the vorticity's level
    # lines, so (u . grad) w = 0, and it only decays, at nu |k|^2 + mu (Taylor 1923).
    model = sim.get_model("navier_stokes_2d", points=[32, 32], forcing_mode=2)
    nu, mu = 0.013, 0.21
    _, rhs = spectral_rhs(model, p(viscosity=nu, drag=mu, forcing=0.0))
    x, y = nodes(model)
    w = 2.5 * np.cos(3 * x + 4 * y + 0.3) - 1.7 * np.sin(5 * x)
    got = np.asarray(rhs(jnp.asarray(w[None])))[0]
    expected = -(nu * 25 + mu) * w
    # measured 3.6e-14 relative; bound 1e-12
    assert np.max(np.abs(got - expected)) < 1e-12 * np.max(np.abs(expected))


@pytest.mark.parametrize("drag", [0.0, 0.3])
def test_navier_stokes_laminar_kolmogorov_flow_is_steady(drag):
    # Kolmogorov flow (Arnold & Meshalkin 1960): the body force (A sin(n' y), 0) is balanced
    # by viscosity and drag in the shear flow u = A sin(n' y) / (nu n'^2 + mu), v = 0,
    # whose vorticity w = -u_y = -A n' cos(n' y) / (nu n'^2 + mu) is not advected
    # (u . grad w = 0). Its energy is (1/2) |u|^2 integrated: A^2 L_x L_y / (4 (nu n'^2 + mu)^2).
    n, (ay, by) = 3, (0.7, 4.7)
    model = sim.get_model(
        "navier_stokes_2d", points=[24, 20], domain=[[-0.5, 2.5], [ay, by]], forcing_mode=n
    )
    nu, A = 0.04, 1.3
    params = p(viscosity=nu, drag=drag, forcing=A)
    grid, rhs = spectral_rhs(model, params)
    k = 2 * np.pi * n / (by - ay)
    _, y = nodes(model)
    damping = nu * k**2 + drag
    w = -A * k * np.cos(k * y) / damping
    got = np.asarray(rhs(jnp.asarray(w[None])))[0]
    # rhs = 0 up to round-off of the terms that cancel (each of size A n' = 6.1); measured
    # 6e-15 A n', bound 1e-12 A n'. A flipped forcing sign leaves 2 A n' cos(n' y).
    assert np.max(np.abs(got)) < 1e-12 * A * k, np.max(np.abs(got))
    energy = float(
        jax.jit(lambda u: model.extra_observables(u, params, grid)["energy"])(jnp.asarray(w[None]))
    )
    assert energy == pytest.approx(A**2 * 3.0 * 4.0 / (4 * damping**2), rel=1e-12)


def test_fisher_kpp_right_hand_side_on_the_ablowitz_zeppetella_front():
    # Ablowitz & Zeppetella (1979), Bull. Math. Biol. 41, 835: u = (1 + e^z)^(-2),
    # z = sqrt(r / (6 D)) x - 5 r t / 6, solves u_t = D u_xx + r u (1 - u) exactly, so on the
    # grid D Lap_h(u) + r u (1 - u) = u_t + D (Lap_h - Lap) u, second order in h.
    D, r = 0.4, 1.3
    s = math.sqrt(r / (6 * D))
    errors = []
    for n in (201, 401):
        model = sim.get_model("fisher_kpp", points=[n], domain=[[-20.0, 30.0]])
        x = np.linspace(-20.0, 30.0, n)  # both ends are nodes on a bounded axis
        e = np.exp(s * x)
        u, u_t = (1 + e) ** -2, 5 * r / 3 * e * (1 + e) ** -3
        grid = FdGrid(model.points, model.domain, model.boundary_kinds, model.boundary_values)
        params = p(diffusivity=D, rate=r)
        rhs = jax.jit(
            lambda u: (
                model.diffusivities(params)[:, None] * grid.laplacian(u) + model.reaction(u, params)
            )
        )
        errors.append(
            np.max(np.abs(np.asarray(rhs(jnp.asarray(u[None])))[0] - u_t)[1:-1]) / np.max(u_t)
        )
    # (interior nodes: the Neumann rows are the solver's, tested in tests/solvers.)
    # Measured 5.3e-4 and 1.3e-4 relative to max u_t (ratio 4.0: second order); bounds
    # 5e-4 at 401 nodes and a ratio > 3.5. The wrong reaction r u (1 - u^2) is off by 0.6.
    assert errors[1] < 5e-4 and errors[0] / errors[1] > 3.5, errors
