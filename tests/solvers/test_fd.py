"""Finite differences: stencils, boundary rows, observed orders 2 and 4, stability checks."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import FdGrid, MethodOfLines, stencil_weights
from tests.helpers import fitted_order


def test_centred_stencils_are_the_classic_ones():
    w, _ = stencil_weights((-1, 0, 1))
    np.testing.assert_allclose(w, [1, -2, 1], atol=1e-14)
    w, _ = stencil_weights((-2, -1, 0, 1, 2))
    np.testing.assert_allclose(w, np.array([-1, 16, -30, 16, -1]) / 12, atol=1e-13)


def test_a_one_sided_stencil_with_a_flux_datum_is_exact_on_quintics():
    offsets = (0, 1, 2, 3, 4)
    w, wf = stencil_weights(offsets, flux_at=0.0)
    h = 0.1
    for p in range(6):
        # u = x^p on nodes j h; u''(0) and u'(0) from the monomial.
        values = np.array([(j * h) ** p for j in offsets])
        flux = 1.0 if p == 1 else 0.0
        second = 2.0 if p == 2 else 0.0
        assert abs((w @ values + wf * h * flux) / h**2 - second) < 1e-9


def _grid(kind, n, order, values=(0.0, 0.0), domain=(0.0, 1.0)):
    return FdGrid((n,), (domain,), ((kind, kind),), (values,), order=order)


@pytest.mark.parametrize("order", [2, 4])
@pytest.mark.parametrize("kind", ["dirichlet", "neumann", "periodic"])
def test_laplacian_converges_at_its_order(kind, order):
    errors, steps = [], []
    for n in (33, 65, 129, 257):
        grid = _grid(kind, n, order)
        (x,) = grid.coordinates()
        # A smooth field whose boundary values/derivatives are the grid's conditions
        # (zero), not a Fourier mode of the discrete operator.
        if kind == "dirichlet":
            u = np.sin(np.pi * x) * np.exp(x)
            lap = np.exp(x) * ((1 - np.pi**2) * np.sin(np.pi * x) + 2 * np.pi * np.cos(np.pi * x))
        elif kind == "neumann":
            u = np.cos(np.pi * x) + 0.3 * x**2 * (1 - x) ** 2
            lap = -(np.pi**2) * np.cos(np.pi * x) + 0.3 * (2 - 12 * x + 12 * x**2)
        else:
            u, lap = (
                np.exp(np.sin(2 * np.pi * x)),
                np.exp(np.sin(2 * np.pi * x))
                * 4
                * np.pi**2
                * (np.cos(2 * np.pi * x) ** 2 - np.sin(2 * np.pi * x)),
            )
        approx = np.asarray(grid.laplacian(jnp.asarray(u)))
        free = ~grid.fixed_mask()
        errors.append(np.max(np.abs(approx - lap)[free]))
        steps.append(grid.spacing[0])
    assert abs(fitted_order(steps, errors) - order) < 0.35


@pytest.mark.parametrize("order", [2, 4])
def test_nonzero_boundary_data_are_exact_on_a_linear_steady_state(order):
    # u = 2 + 3x: Laplacian 0; Dirichlet u(0) = 2, u(1) = 5; Neumann outward du/dn:
    # -3 on the left, +3 on the right.
    x = np.linspace(0.0, 1.0, 21)
    u = jnp.asarray(2 + 3 * x)
    dirichlet = FdGrid(
        (21,), ((0.0, 1.0),), (("dirichlet", "dirichlet"),), ((2.0, 5.0),), order=order
    )
    np.testing.assert_allclose(
        dirichlet.apply_boundary(jnp.zeros(21))[jnp.asarray([0, -1])], [2.0, 5.0]
    )
    np.testing.assert_allclose(dirichlet.laplacian(u), 0.0, atol=1e-9)
    neumann = FdGrid((21,), ((0.0, 1.0),), (("neumann", "neumann"),), ((-3.0, 3.0),), order=order)
    np.testing.assert_allclose(neumann.laplacian(u), 0.0, atol=1e-9)


@pytest.mark.parametrize("order", [2, 4])
@pytest.mark.parametrize("kind", ["dirichlet", "neumann"])
def test_the_discrete_laplacian_is_dissipative(kind, order):
    # Every eigenvalue real and <= 0 (no spurious growth from the boundary rows), within
    # the Gershgorin bound used for explicit step limits.
    grid = _grid(kind, 25, order)
    a = np.asarray(jax.jacfwd(grid.laplacian)(jnp.zeros(25)))
    free = ~grid.fixed_mask()
    eig = np.linalg.eigvals(a[np.ix_(free, free)])
    assert np.max(eig.real) < 1e-9 and np.max(np.abs(eig.imag)) < 1e-9
    assert np.max(np.abs(eig)) <= grid.spectral_radius() * (1 + 1e-12)


def test_two_dimensional_laplacian_mixes_boundary_kinds():
    grid = FdGrid(
        (33, 32),
        ((0.0, 1.0), (0.0, 2 * math.pi)),
        (("dirichlet", "dirichlet"), ("periodic", "periodic")),
        ((0.0, 0.0), (0.0, 0.0)),
    )
    x, y = np.meshgrid(*grid.coordinates(), indexing="ij")
    u = np.sin(np.pi * x) * np.cos(y)
    lap = np.asarray(grid.laplacian(jnp.asarray(u)))
    free = ~grid.fixed_mask()
    # Second-order truncation: (h_x^2 pi^4 + h_y^2) / 12 ~ 0.011 here.
    assert np.max(np.abs(lap + (np.pi**2 + 1) * u)[free]) < 0.015


def test_trapezoidal_integral():
    grid = _grid("neumann", 101, 2)
    (x,) = grid.coordinates()
    assert abs(float(grid.integral(jnp.asarray(x**2))) - 1 / 3) < 1e-4


def test_the_integral_of_several_fields_integrates_each_over_the_box():
    # x y on [0, 1] x [0, 2] (bounded: exact for the trapezoid on a bilinear field) and 3
    # (periodic in y), one channel each: 1 and 6, not a mix of the channels
    for kinds, expected in ((("neumann",) * 2, 2.0), (("periodic",) * 2, 2.0 - 2 / 11)):
        grid = FdGrid(
            (9, 11), ((0.0, 1.0), (0.0, 2.0)), (("neumann",) * 2, kinds), ((0.0, 0.0),) * 2
        )
        x, y = np.meshgrid(*grid.coordinates(), indexing="ij")
        fields = jnp.asarray(np.stack([x * y, np.full_like(x, 3.0)]))
        got = np.asarray(grid.integral(fields))
        assert got.shape == (2,)
        np.testing.assert_allclose(got, [expected * 0.5, 6.0], rtol=1e-13)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"boundaries": (("dirichlet", "robin"),)}, "'robin': unknown boundary kind"),
        ({"boundaries": (("periodic", "dirichlet"),)}, "periodic must be on both sides"),
        ({"points": (4,)}, "at least 5 nodes"),
        ({"order": 3}, "order must be 2 or 4"),
    ],
)
def test_bad_grids_are_rejected(kwargs, match):
    base = dict(
        points=(21,),
        domain=((0.0, 1.0),),
        boundaries=(("dirichlet", "dirichlet"),),
        values=((0.0, 0.0),),
    )
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        FdGrid(**base)


def test_bad_method_of_lines_settings_are_rejected():
    with pytest.raises(ValueError, match="Perhaps you meant 'kvaerno5'"):
        MethodOfLines(method="kvaerno6")
    with pytest.raises(ValueError, match="dt0 must be positive"):
        MethodOfLines(method="euler", adaptive=False, dt0=-0.1)
    with pytest.raises(ValueError, match="needs dt0"):
        MethodOfLines(method="euler", adaptive=False)


@pytest.mark.raising_checks
def test_an_explicit_step_beyond_the_diffusive_limit_is_refused():
    grid = _grid("dirichlet", 21, 2)
    h = grid.spacing[0]
    u0 = jnp.sin(jnp.pi * jnp.asarray(grid.coordinates()[0]))[None]
    zero = lambda u: jnp.zeros_like(u)  # noqa: E731
    stable = MethodOfLines(method="euler", adaptive=False, dt0=0.4 * h**2)
    assert stable.stability_limit(grid, 1.0) == pytest.approx(0.5 * h**2)
    stable.solve(grid, jnp.ones(1), zero, u0, jnp.asarray([0.0, 100 * 0.4 * h**2]))
    unstable = MethodOfLines(method="euler", adaptive=False, dt0=0.6 * h**2)
    with pytest.raises(Exception, match="beyond the diffusive stability limit"):
        unstable.solve(grid, jnp.ones(1), zero, u0, jnp.asarray([0.0, 100 * 0.6 * h**2]))


def test_imex_methods_take_few_steps_on_stiff_diffusion():
    """Fisher-KPP u_t = D u_xx + u (1 - u) split into implicit diffusion and explicit
    reaction: KenCarp4 agrees with Tsit5 on the whole right-hand side, and the stiff
    part costs it no more steps than the accuracy asks for (tens, not the thousands of
    rejected steps a poorly converging stage solve gives)."""
    grid = _grid("dirichlet", 33, 2)
    x = jnp.asarray(grid.coordinates()[0])
    u0 = (0.5 * jnp.sin(jnp.pi * x))[None]
    t = jnp.linspace(0.0, 0.5, 3)
    logistic = lambda u: u * (1 - u)  # noqa: E731
    imex = MethodOfLines(method="kencarp4", rtol=1e-8, atol=1e-10).solve(
        grid, jnp.asarray([0.5]), logistic, u0, t
    )
    whole = MethodOfLines(method="tsit5", rtol=1e-10, atol=1e-12).solve(
        grid, jnp.asarray([0.5]), logistic, u0, t
    )
    np.testing.assert_allclose(imex.saved, whole.saved, atol=1e-6)
    assert int(imex.result) == 0 and int(imex.num_steps) < 200, int(imex.num_steps)


@pytest.mark.parametrize("n", [21, 64])
def test_the_jacobian_spectral_radius_is_the_laplacians_largest_eigenvalue(n):
    """Euler's step limit 2 / rho from the spectral radius estimated by Jacobian-vector
    products, against the exact largest |eigenvalue| rho of the second-difference matrix
    with Dirichlet sides, (4 / h^2) cos^2(pi / (2 (n - 1))), for D * laplace(u) and
    laplace(D * u) alike (the same right-hand side)."""
    euler = MethodOfLines(method="euler", adaptive=False, dt0=1.0)
    grid = _grid("dirichlet", n, 2)
    h = grid.spacing[0]
    free = jnp.asarray(~grid.fixed_mask(), float)
    exact = 4 / h**2 * np.cos(np.pi / (2 * (n - 1))) ** 2
    for field in (
        lambda t, u, a: free * 0.3 * grid.laplacian(u),
        lambda t, u, a: free * grid.laplacian(0.3 * u),
    ):
        np.testing.assert_allclose(
            euler.stable_step(field, 0.0, jnp.zeros((1, n))), 2 / (0.3 * exact), rtol=1e-10
        )
