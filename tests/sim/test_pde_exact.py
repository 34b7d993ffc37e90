"""PDE models against exact solutions (float64), each with its source."""

import math

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from solvers import Etdrk, MethodOfLines
from tests.helpers import fitted_order

TWO_PI = 2 * math.pi


@pytest.mark.parametrize(
    "points, domain",
    [
        ((32,), ((0.0, TWO_PI),)),
        pytest.param((16, 24), ((0.0, TWO_PI), (-1.0, 2.0)), marks=pytest.mark.slow),
        ((8, 8, 12), ((0.0, 1.0), (0.0, 2.0), (0.0, 3.0))),
    ],
)
def test_heat_fourier_modes_decay_exactly(points, domain):
    # Fourier (1822): sin(k . x) decays as exp(-D |k|^2 t) under u_t = D Laplacian(u).
    model = sim.get_model("heat", points=list(points), domain=[list(d) for d in domain])
    mesh = model.mesh()
    ks = [TWO_PI * (i + 1) / (b - a) for i, (a, b) in enumerate(domain)]
    phase = sum(k * (x - a) for k, x, (a, _) in zip(ks, mesh, domain, strict=False))
    u0 = np.sin(phase) + 0.3 * np.cos(2 * phase)
    D = 0.05
    t = jnp.linspace(0.0, 2.0, 5)
    traj = sim.simulate(model, {"diffusivity": D}, t, initial=u0, solver=Etdrk(steps_per_save=3))
    k2 = sum(k * k for k in ks)
    for i, ti in enumerate(np.asarray(t)):
        exact = np.exp(-D * k2 * ti) * np.sin(phase) + 0.3 * np.exp(-4 * D * k2 * ti) * np.cos(
            2 * phase
        )
        np.testing.assert_allclose(traj.observables["u"][i], exact, atol=1e-12)
    np.testing.assert_allclose(traj.observables["mass"], 0.0, atol=1e-12)


def test_advection_diffusion_translates_and_damps_each_mode():
    # u = sin(k (x - c t)) exp(-D k^2 t) solves u_t + c u_x = D u_xx.
    model = sim.get_model("advection_diffusion", points=[16, 16], direction=[3.0, 4.0])
    x, y = model.mesh()
    c, D = 1.5, 0.02
    t = jnp.linspace(0.0, 1.0, 3)
    u0 = np.sin(x + 2 * y)
    traj = sim.simulate(
        model, {"velocity": c, "diffusivity": D}, t, initial=u0, solver=Etdrk(steps_per_save=2)
    )
    shift = c * (0.6 * 1 + 0.8 * 2) * 1.0
    exact = np.sin(x + 2 * y - shift) * np.exp(-D * 5 * 1.0)
    np.testing.assert_allclose(traj.observables["u"][-1], exact, atol=1e-12)


@pytest.mark.parametrize(
    "modes, lengths",
    [
        pytest.param((1, 1), (TWO_PI, TWO_PI), marks=pytest.mark.slow),
        pytest.param((1, 2), (TWO_PI, TWO_PI), marks=pytest.mark.slow),
        ((2, 1), (TWO_PI, 4.0)),
    ],
)
def test_taylor_green_vortex_decays_exactly(modes, lengths):
    # Taylor and Green (1937): w = (kx^2 + ky^2) A sin(kx x) sin(ky y) exp(-(nu |k|^2 + mu) t)
    # is an exact solution of 2D Navier-Stokes (the advection term vanishes identically),
    # also for kx != ky.
    model = sim.get_model(
        "navier_stokes_2d", points=[32, 32], domain=[[0.0, lengths[0]], [0.0, lengths[1]]]
    )
    nu, mu = 0.01, 0.05
    w0 = model.initial_field("taylor_green", modes=list(modes))
    t = jnp.asarray([0.0, 1.0])
    traj = sim.simulate(
        model, {"viscosity": nu, "drag": mu}, t, initial=w0, solver=Etdrk(steps_per_save=100)
    )
    k2 = sum((TWO_PI * m / length) ** 2 for m, length in zip(modes, lengths, strict=False))
    exact = w0[0] * math.exp(-(nu * k2 + mu) * 1.0)
    assert int(traj.stats["num_steps"]) == 100
    np.testing.assert_allclose(traj.observables["vorticity"][-1], exact, atol=1e-10)
    np.testing.assert_allclose(
        traj.observables["enstrophy"][-1],
        0.5 * np.sum(exact**2) * math.prod(lengths) / 1024,
        rtol=1e-10,
    )


def _cole_hopf_1d(x, t, nu):
    # Cole (1951), Hopf (1950): u = -2 nu phi_x / phi with phi_t = nu phi_xx solves
    # u_t + u u_x = nu u_xx; phi = 2 + e^{-nu t} cos x + e^{-4 nu t} cos(2x) / 2 > 0.
    phi = 2 + np.exp(-nu * t) * np.cos(x) + 0.5 * np.exp(-4 * nu * t) * np.cos(2 * x)
    phi_x = -np.exp(-nu * t) * np.sin(x) - np.exp(-4 * nu * t) * np.sin(2 * x)
    return -2 * nu * phi_x / phi


def test_burgers_matches_the_cole_hopf_solution():
    model = sim.get_model("burgers", points=[128])
    (x,) = model.coordinates()
    nu = 0.1
    t = jnp.linspace(0.0, 2.0, 5)
    traj = sim.simulate(
        model,
        {"viscosity": nu},
        t,
        initial=_cole_hopf_1d(x, 0.0, nu),
        solver=Etdrk(steps_per_save=50),
    )
    for i, ti in enumerate(np.asarray(t)):
        np.testing.assert_allclose(traj.observables["u"][i], _cole_hopf_1d(x, ti, nu), atol=1e-6)
    np.testing.assert_allclose(traj.observables["mass"], traj.observables["mass"][0], atol=1e-12)


@pytest.mark.parametrize(
    "order", [pytest.param(o, marks=pytest.mark.slow) for o in (1, 2, 3)] + [4]
)
def test_etdrk_orders_on_burgers(order):
    model = sim.get_model("burgers", points=[64])
    (x,) = model.coordinates()
    nu = 0.1
    steps = [10, 20, 40]
    errors = []
    for n in steps:
        traj = sim.simulate(
            model,
            {"viscosity": nu},
            jnp.asarray([0.0, 1.0]),
            initial=_cole_hopf_1d(x, 0.0, nu),
            solver=Etdrk(order=order, steps_per_save=n),
        )
        errors.append(np.max(np.abs(traj.observables["u"][-1] - _cole_hopf_1d(x, 1.0, nu))))
    assert abs(fitted_order([1 / n for n in steps], errors) - order) < 0.3


def test_two_dimensional_burgers_matches_cole_hopf():
    # Vector Cole-Hopf: u = -2 nu grad(phi) / phi with phi_t = nu Laplacian(phi).
    model = sim.get_model("burgers", points=[48, 48])
    x, y = model.mesh()
    nu = 0.1

    def exact(t):
        e1, e2 = np.exp(-nu * t), np.exp(-2 * nu * t)
        phi = 3 + e1 * np.cos(x) + e1 * np.cos(y) + 0.5 * e2 * np.cos(x) * np.cos(y)
        px = -e1 * np.sin(x) - 0.5 * e2 * np.sin(x) * np.cos(y)
        py = -e1 * np.sin(y) - 0.5 * e2 * np.cos(x) * np.sin(y)
        return -2 * nu * px / phi, -2 * nu * py / phi

    u0, v0 = exact(0.0)
    traj = sim.simulate(
        model,
        {"viscosity": nu},
        jnp.asarray([0.0, 1.0]),
        initial={"u": u0, "v": v0},
        solver=Etdrk(steps_per_save=20),
    )
    u1, v1 = exact(1.0)
    np.testing.assert_allclose(traj.observables["u"][-1], u1, atol=1e-6)
    np.testing.assert_allclose(traj.observables["v"][-1], v1, atol=1e-6)


def test_kdv_soliton_keeps_its_speed_and_shape_over_one_transit():
    # Korteweg and de Vries (1895): u = (c/2) sech^2(sqrt(c) (x - c t) / 2) for
    # u_t + 6 u u_x + u_xxx = 0; after one transit of a period L it is back in place.
    model = sim.get_model("kdv", points=[256], domain=[[-20.0, 20.0]])
    c = 1.0
    u0 = model.initial_field("soliton", speed=c, position=0.0)
    period = 40.0 / c
    traj = sim.simulate(
        model, None, jnp.linspace(0.0, period, 5), initial=u0, solver=Etdrk(steps_per_save=1000)
    )
    u = np.asarray(traj.observables["u"])
    (x,) = model.coordinates()
    assert abs(u[-1].max() - c / 2) / (c / 2) < 0.01
    assert np.max(np.abs(u[-1] - u0[0])) / (c / 2) < 0.01
    # At a quarter transit the peak sits a quarter period downstream.
    assert abs(x[np.argmax(u[1])] - 10.0) <= 2 * (x[1] - x[0])
    for name in ("mass", "momentum", "energy"):
        values = np.asarray(traj.observables[name])
        np.testing.assert_allclose(values, values[0], rtol=1e-6)


@pytest.mark.slow
def test_inviscid_navier_stokes_conserves_energy_and_enstrophy():
    ns = sim.get_model("navier_stokes_2d", points=[32, 32])
    w0 = ns.initial_field("random", seed=3, max_mode=5)
    traj = sim.simulate(
        ns,
        {"viscosity": 0.0},
        jnp.linspace(0.0, 1.0, 3),
        initial=w0,
        solver=Etdrk(steps_per_save=50),
    )
    for name in ("energy", "enstrophy"):
        np.testing.assert_allclose(traj.observables[name], traj.observables[name][0], rtol=1e-8)


def test_inviscid_burgers_conserves_energy():
    # The 2/3-dealiased Galerkin forms conserve the quadratic invariants exactly in
    # space; only ETDRK4's time error (~1e-10 here) remains.
    burgers = sim.get_model("burgers", points=[64])
    (x,) = burgers.coordinates()
    traj = sim.simulate(
        burgers,
        {"viscosity": 0.0},
        jnp.linspace(0.0, 0.5, 3),
        initial=0.5 * np.sin(x) + 0.2,
        solver=Etdrk(steps_per_save=100),
    )
    np.testing.assert_allclose(traj.observables["energy"], traj.observables["energy"][0], rtol=1e-8)


def test_kuramoto_sivashinsky_conserves_its_mean():
    model = sim.get_model("kuramoto_sivashinsky", points=[64], domain=[[0.0, 32.0]])
    traj = sim.simulate(model, None, jnp.linspace(0.0, 20.0, 5), solver=Etdrk(steps_per_save=80))
    np.testing.assert_allclose(traj.observables["mass"], traj.observables["mass"][0], atol=1e-10)
    assert np.isfinite(traj.observables["u"]).all() and np.std(traj.observables["u"][-1]) > 0.1


def test_allen_cahn_uniform_state_follows_its_ode_and_free_energy_decreases():
    # Uniform u: u' = r (u - u^3), solved by u = u0 e^{rt} / sqrt(1 + u0^2 (e^{2rt} - 1)).
    model = sim.get_model("allen_cahn", points=[64])
    u0, r = 0.2, 1.5
    traj = sim.simulate(
        model,
        {"rate": r},
        jnp.asarray([0.0, 2.0]),
        initial=np.full(64, u0),
        solver=Etdrk(steps_per_save=1000),
    )
    e = math.exp(r * 2.0)
    np.testing.assert_allclose(
        traj.observables["u"][-1], u0 * e / math.sqrt(1 + u0**2 * (e * e - 1)), rtol=1e-10
    )
    traj = sim.simulate(model, None, jnp.linspace(0.0, 5.0, 11), solver=Etdrk(steps_per_save=20))
    assert np.all(np.diff(np.asarray(traj.observables["free_energy"])) < 0)


def test_gray_scott_uniform_state_follows_its_kinetics():
    # A uniform state obeys the reaction ODEs; reference: diffrax Tsit5 at tight tolerance.
    model = sim.get_model("gray_scott", points=[8, 8])
    params = {"feed": 0.04, "kill": 0.06}
    u0, v0 = 0.6, 0.3
    t1 = 20.0
    traj = sim.simulate(
        model,
        params,
        jnp.asarray([0.0, t1]),
        initial={"u": np.full((8, 8), u0), "v": np.full((8, 8), v0)},
        solver=Etdrk(steps_per_save=400),
    )

    def kinetics(t, y, args):
        u, v = y[0], y[1]
        return jnp.stack([-u * v * v + 0.04 * (1 - u), u * v * v - 0.1 * v])

    ref = diffrax.diffeqsolve(
        diffrax.ODETerm(kinetics),
        diffrax.Tsit5(),
        0.0,
        t1,
        0.01,
        jnp.asarray([u0, v0]),
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
        max_steps=100000,
    ).ys[-1]
    np.testing.assert_allclose(traj.observables["u"][-1], ref[0], rtol=1e-9)
    np.testing.assert_allclose(traj.observables["v"][-1], ref[1], rtol=1e-9)


def _heat_fd_error(boundary, order, n):
    model = sim.get_model("heat_fd", points=[n], boundary=boundary)
    (x,) = model.coordinates()
    D, T = 0.1, 0.5
    mode = np.sin if boundary == "dirichlet" else np.cos
    traj = sim.simulate(
        model,
        {"diffusivity": D},
        jnp.asarray([0.0, T]),
        initial=mode(np.pi * x),
        solver=MethodOfLines(method="kvaerno5", order=order, rtol=1e-12, atol=1e-14),
    )
    return np.max(np.abs(traj.observables["u"][-1] - mode(np.pi * x) * np.exp(-(np.pi**2) * D * T)))


def test_bounded_heat_decays_like_its_first_mode():
    # sin(pi x) decays as exp(-pi^2 D t) on [0, 1] with u = 0 at both ends.
    model = sim.get_model("heat_fd", points=[41])
    (x,) = model.coordinates()
    traj = sim.simulate(
        model,
        {"diffusivity": 0.1},
        jnp.asarray([0.0, 0.5]),
        initial=np.sin(np.pi * x),
        solver=MethodOfLines(method="tsit5", rtol=1e-10, atol=1e-12),
    )
    # Second-order truncation: pi^2 h^2 / 12 relative, h = 1/40.
    np.testing.assert_allclose(
        traj.observables["u"][-1], np.sin(np.pi * x) * np.exp(-(np.pi**2) * 0.05), atol=5e-4
    )


@pytest.mark.slow
@pytest.mark.parametrize("boundary", ["dirichlet", "neumann"])
@pytest.mark.parametrize("order", [2, 4])
def test_bounded_heat_converges_at_the_finite_difference_order(boundary, order):
    # sin(pi x) (Dirichlet) and cos(pi x) (Neumann) decay as exp(-pi^2 D t) on [0, 1].
    # Even data about a Neumann side may converge faster than the design order.
    ns = [21, 41, 81]
    errors = [_heat_fd_error(boundary, order, n) for n in ns]
    observed = fitted_order([1 / (n - 1) for n in ns], errors)
    assert observed > order - 0.3 and (boundary == "neumann" or observed < order + 0.3)


@pytest.mark.slow
@pytest.mark.parametrize("order", [2, 4])
def test_fisher_kpp_front_matches_ablowitz_zeppetella(order):
    # Ablowitz and Zeppetella (1979): u = (1 + C e^{z})^{-2}, z = sqrt(r/(6D)) x - 5 r t / 6,
    # solves u_t = D u_xx + r u (1 - u). Neumann sides far from the front.
    D, r = 1.0, 1.0

    def exact(x, t):
        return (1 + np.exp(np.sqrt(r / (6 * D)) * x - 5 * r * t / 6)) ** -2

    errors, ns = [], [201, 401, 801]
    for n in ns:
        model = sim.get_model("fisher_kpp", points=[n], domain=[[-60.0, 90.0]])
        (x,) = model.coordinates()
        traj = sim.simulate(
            model,
            {"diffusivity": D, "rate": r},
            jnp.asarray([0.0, 5.0]),
            initial=exact(x, 0.0),
            solver=MethodOfLines(method="kvaerno5", order=order, rtol=1e-11, atol=1e-13),
        )
        errors.append(np.max(np.abs(traj.observables["u"][-1] - exact(x, 5.0))))
    assert errors[-1] < (1e-4 if order == 2 else 1e-7)
    assert abs(fitted_order([1 / (n - 1) for n in ns], errors) - order) < 0.35
