"""Fourier grids and ETDRK: transforms, dealiasing, coefficients, convergence orders."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import Etdrk, FourierGrid
from tests.helpers import fitted_order

TWO_PI = 2 * math.pi


@pytest.mark.parametrize("points", [(16,), (16, 8), (8, 12, 6)])
def test_derivatives_of_trigonometric_fields_are_exact(points):
    domain = tuple((0.0, TWO_PI * (i + 1)) for i in range(len(points)))
    grid = FourierGrid(points, domain)
    mesh = grid.mesh()
    k = [TWO_PI / (b - a) for a, b in domain]
    u = math.prod(jnp.sin(ki * x) for ki, x in zip(k, mesh, strict=False))
    u_hat = grid.rfft(u)
    np.testing.assert_allclose(grid.irfft(u_hat), u, atol=1e-14)
    dx = grid.irfft(grid.derivative(0) * u_hat)
    expected = (
        k[0]
        * jnp.cos(k[0] * mesh[0])
        * math.prod(jnp.sin(ki * x) for ki, x in zip(k[1:], mesh[1:], strict=False))
    )
    np.testing.assert_allclose(dx, expected, atol=1e-13)
    lap = grid.irfft(grid.laplacian().astype(u_hat.dtype) * u_hat)
    np.testing.assert_allclose(lap, -sum(ki**2 for ki in k) * u, atol=1e-12)
    np.testing.assert_allclose(
        grid.integral(u**2), math.prod(b - a for a, b in domain) / 2 ** len(points), rtol=1e-13
    )


def test_two_thirds_rule_keeps_modes_below_a_third_of_the_points():
    grid = FourierGrid((64,), ((0.0, TWO_PI),))
    mask = np.asarray(grid.dealias_mask())
    assert mask.shape == (33,) and mask[:22].all() and not mask[22:].any()  # |m| <= 21 < 64/3
    grid2 = FourierGrid((12, 12), ((0.0, 1.0), (0.0, 1.0)))
    m2 = np.asarray(grid2.dealias_mask())
    kept = np.abs(np.fft.fftfreq(12, 1 / 12)) < 4
    np.testing.assert_array_equal(m2, kept[:, None] & (np.arange(7) < 4)[None, :])


def test_the_two_thirds_rule_removes_every_alias_of_a_quadratic_product():
    # Orszag (1971): with modes |m| < N/3 the aliases of u^2 land on removed modes only.
    grid = FourierGrid((48,), ((0.0, TWO_PI),))
    mask = grid.dealias_mask()
    rng = np.random.default_rng(0)
    u_hat = (rng.normal(size=25) + 1j * rng.normal(size=25)) * np.asarray(mask)
    u_hat[0] = u_hat[0].real
    u = grid.irfft(jnp.asarray(u_hat))
    fine = FourierGrid((192,), ((0.0, TWO_PI),))  # u^2 exact on a grid 4x finer
    u_fine = fine.irfft(jnp.pad(jnp.asarray(u_hat), (0, 97 - 25)) * 4)
    exact = fine.rfft(u_fine**2)[:25] / 4
    mask = np.asarray(mask)
    np.testing.assert_allclose(
        mask * np.asarray(grid.rfft(u**2)), mask * np.asarray(exact), atol=1e-11
    )


@pytest.mark.parametrize(
    "points, domain, match",
    [
        ((15,), ((0.0, 1.0),), "even whole number"),
        ((16,), ((1.0, 1.0),), "low < high"),
        ((16, 16), ((0.0, 1.0),), "domain has 1 axes but points has 2"),
        ((2,), ((0.0, 1.0),), "even whole number >= 4"),
    ],
)
def test_malformed_grids_are_rejected(points, domain, match):
    with pytest.raises(ValueError, match=match):
        FourierGrid(points, domain)


@pytest.mark.parametrize("pair", [[0.0], [0.0, 1.0, 2.0]])
def test_a_domain_that_is_no_pair_is_rejected(pair):
    # (checked before a FourierGrid is built, where its annotations would refuse it)
    from solvers._spectral import check_periodic_grid

    with pytest.raises(ValueError, match=r"domain\[0\] = .*: expected a \[low, high\] pair"):
        check_periodic_grid((16,), (pair,))


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_contour_coefficients_match_the_direct_formulas(order):
    # Where the direct formulas are well conditioned (|z| >= 0.5), Kassam-Trefethen's
    # contour mean must agree with them to rounding.
    z = jnp.asarray([-0.5, -1.0, -3.0, -20.0, -400.0, 2.0])
    dt = 0.1
    c = Etdrk(order=order).coefficients(z / dt, dt)
    zz = np.asarray(z)
    np.testing.assert_allclose(c.exp, np.exp(zz), rtol=1e-14)
    if order <= 2:
        np.testing.assert_allclose(c.q, dt * (np.exp(zz) - 1) / zz, rtol=1e-12)
    if order == 2:
        np.testing.assert_allclose(c.b[0], dt * (np.exp(zz) - 1 - zz) / zz**2, rtol=1e-11)
    if order >= 3:
        np.testing.assert_allclose(c.q, dt * (np.exp(zz / 2) - 1) / zz, rtol=1e-12)
        f1 = dt * (-4 - zz + np.exp(zz) * (4 - 3 * zz + zz**2)) / zz**3
        f3 = dt * (-4 - 3 * zz - zz**2 + np.exp(zz) * (4 - zz)) / zz**3
        np.testing.assert_allclose(c.b[0], f1, rtol=1e-10)
        np.testing.assert_allclose(c.b[2], f3, rtol=1e-10)


def test_contour_coefficients_have_the_right_limit_at_zero():
    # phi1(0) = 1 and f1(0) = f2(0) = f3(0) = 1/6 (Cox and Matthews 2002: the classical
    # RK4 weights 1/6, 2 f2 = 1/3, 2 f2 = 1/3, 1/6),
    # where the direct formulas lose every digit.
    dt = 0.5
    c = Etdrk(order=4).coefficients(jnp.asarray([0.0, 1e-9]), dt)
    np.testing.assert_allclose(c.q, dt / 2, rtol=1e-8)
    np.testing.assert_allclose(c.b[0], dt / 6, rtol=1e-8)
    np.testing.assert_allclose(c.b[1], dt / 6, rtol=1e-8)
    np.testing.assert_allclose(c.b[2], dt / 6, rtol=1e-8)


def _bernoulli_error(order, steps, lam=-2.0, u0=0.5, t1=1.0, dtype="float64"):
    """u' = lam u + u^2 for a uniform field; exact solution of this Bernoulli equation
    u(t) = lam u0 e^{lam t} / (lam + u0 (1 - e^{lam t}))."""
    grid = FourierGrid((8,), ((0.0, TWO_PI),), dtype=dtype)
    solver = Etdrk(order=order, steps_per_save=steps, dtype=dtype)
    linear = jnp.full((5,), lam, dtype=dtype)

    def nonlinear(u_hat):
        u = grid.irfft(u_hat)
        return grid.rfft(u * u)

    sol = solver.solve(grid, linear, nonlinear, jnp.full((1, 8), u0), jnp.asarray([0.0, t1]))
    exact = lam * u0 * math.exp(lam * t1) / (lam + u0 * (1 - math.exp(lam * t1)))
    return float(jnp.max(jnp.abs(sol.final - exact))), sol


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_etdrk_converges_at_its_order(order):
    # (a compilation per step count; measured orders 1.03, 1.99, 2.99, 3.92)
    steps = [20, 40, 80]
    errors = [_bernoulli_error(order, n)[0] for n in steps]
    assert abs(fitted_order([1 / n for n in steps], errors) - order) < 0.3


def test_float32_runs_stay_in_float32():
    error, sol = _bernoulli_error(4, 16, dtype="float32")
    assert sol.final.dtype == jnp.float32 and sol.saved.dtype == jnp.float32
    assert error < 1e-5


@pytest.mark.raising_checks
def test_unequal_or_decreasing_save_times_are_rejected():
    grid = FourierGrid((8,), ((0.0, TWO_PI),))
    solver = Etdrk()
    u0 = jnp.ones((1, 8))
    zero = jnp.zeros((5,))
    with pytest.raises(Exception, match="equally spaced"):
        solver.solve(grid, zero, lambda u: u * 0, u0, jnp.asarray([0.0, 1.0, 3.0]))
    with pytest.raises(Exception, match="must increase"):
        solver.solve(grid, zero, lambda u: u * 0, u0, jnp.asarray([1.0, 0.0]))
    with pytest.raises(ValueError, match="trailing grid shape"):
        solver.solve(grid, zero, lambda u: u * 0, jnp.ones((1, 6)), jnp.asarray([0.0, 1.0]))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"order": 5}, "order must be one of 1, 2, 3, 4"),
        ({"steps_per_save": 0}, "steps_per_save"),
        ({"dtype": "float16"}, "dtype"),
        ({"dealias": 1.5}, "dealias"),
        # A fraction of the modes kept: zero keeps none, and a negative one is no fraction.
        ({"dealias": 0.0}, r"dealias must be a fraction in \(0, 1\]"),
        ({"dealias": -0.5}, r"dealias must be a fraction in \(0, 1\]"),
    ],
)
def test_bad_solver_settings_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Etdrk(**kwargs)


def test_a_diverging_run_reports_a_nonfinite_result():
    grid = FourierGrid((8,), ((0.0, TWO_PI),))
    linear = jnp.zeros((5,))

    def nonlinear(u_hat):
        u = grid.irfft(u_hat)
        return grid.rfft(u * u * u)

    sol = Etdrk(order=1, steps_per_save=20).solve(
        grid, linear, nonlinear, jnp.full((1, 8), 10.0), jnp.asarray([0.0, 10.0])
    )
    assert int(sol.result) != 0
    jax.block_until_ready(sol.final)
