"""ODE models against exact invariants and published reference values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from solvers import OdeSolver


def test_lotka_volterra_invariant_is_conserved():
    # V = delta x - gamma ln x + beta y - alpha ln y is a first integral of the
    # Lotka-Volterra system (Volterra 1926; e.g. Hirsch, Smale & Devaney, "Differential
    # Equations, Dynamical Systems, and an Introduction to Chaos", section 11.2).
    model = sim.get_model("lotka_volterra")
    p = model.default_params()
    t = jnp.linspace(0.0, 50.0, 501)
    traj = sim.simulate(model, p, t, solver=OdeSolver(method="dopri8", rtol=1e-12, atol=1e-12))
    x, y = traj.observables["prey"], traj.observables["predator"]
    v = p["delta"] * x - p["gamma"] * jnp.log(x) + p["beta"] * y - p["alpha"] * jnp.log(y)
    drift = float(jnp.max(jnp.abs(v - v[0])) / jnp.abs(v[0]))
    assert drift < 1e-8, drift
    # The populations really cycle (the invariant is not trivially constant).
    assert float(jnp.max(x) / jnp.min(x)) > 3.0


def test_robertson_matches_hairer_wanner_reference():
    # Reference solution at t = 40 from Hairer & Wanner, "Solving Ordinary Differential
    # Equations II" (2nd ed., 1996), section IV.10, Robertson problem:
    # y1 = 0.7158270687e0, y2 = 0.9185534764e-5, y3 = 0.2841637457e0.
    reference = np.array([0.7158270687, 0.9185534764e-5, 0.2841637457])
    model = sim.get_model("robertson")
    t = jnp.array([0.0, 40.0])
    traj = sim.simulate(model, None, t, solver=OdeSolver(method="kvaerno5", rtol=1e-8, atol=1e-12))
    final = np.array([traj.observables[n][-1] for n in ("y1", "y2", "y3")])
    # Measured relative errors 7.3e-11, 7.1e-10, 4.6e-11 (the reference has 10 digits);
    # bound 2e-9, about three times the largest.
    np.testing.assert_allclose(final, reference, rtol=2e-9)
    # Mass is conserved: y1 + y2 + y3 = 1 (measured 4.4e-16).
    assert abs(final.sum() - 1.0) < 1e-14


def test_damped_pendulum_energy_decays_and_undamped_conserves():
    model = sim.get_model("damped_pendulum")
    t = jnp.linspace(0.0, 10.0, 101)
    tight = OdeSolver(rtol=1e-11, atol=1e-12)
    free = sim.simulate(model, {"damping": 0.0}, t, solver=tight).observables["energy"]
    assert float(jnp.max(jnp.abs(free - free[0]))) < 1e-8
    damped = sim.simulate(model, {"damping": 0.3}, t, solver=tight).observables["energy"]
    assert bool(jnp.all(jnp.diff(damped) <= 1e-12)) and float(damped[-1]) < 0.1 * float(damped[0])


def test_sir_conserves_population_and_final_size():
    # Final-size relation of the SIR model (Kermack & McKendrick 1927):
    # ln(s_inf / s0) = R0 (s_inf - s0) / N with R0 = beta / gamma, i_inf = 0.
    model = sim.get_model("sir")
    t = jnp.linspace(0.0, 400.0, 401)
    traj = sim.simulate(model, None, t, solver=OdeSolver(rtol=1e-10, atol=1e-12))
    s, i, r = (traj.observables[k] for k in ("susceptible", "infected", "recovered"))
    np.testing.assert_allclose(s + i + r, 1.0, atol=1e-10)
    r0 = 0.3 / 0.1
    s0, s_inf = float(s[0]), float(s[-1])
    assert abs(np.log(s_inf / s0) - r0 * (s_inf - 1.0)) < 1e-6


def test_lorenz_matches_scipy_over_short_horizon():
    from scipy.integrate import solve_ivp

    model = sim.get_model("lorenz")
    t = np.linspace(0.0, 2.0, 21)
    traj = sim.simulate(
        model, None, jnp.asarray(t), solver=OdeSolver(method="dopri8", rtol=1e-12, atol=1e-12)
    )
    ref = solve_ivp(
        lambda t, y: [10 * (y[1] - y[0]), y[0] * (28 - y[2]) - y[1], y[0] * y[1] - 8 / 3 * y[2]],
        (0, 2),
        [1.0, 1.0, 1.0],
        method="DOP853",
        t_eval=t,
        rtol=1e-12,
        atol=1e-12,
    )
    np.testing.assert_allclose(traj.observables["x"], ref.y[0], rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("name", ["van_der_pol", "fitzhugh_nagumo"])
def test_limit_cycles_are_periodic(name):
    # Both systems settle on an attracting limit cycle (Van der Pol 1926; FitzHugh 1961):
    # after the transient, the state returns close to where it was one period earlier.
    model = sim.get_model(name)
    t = jnp.linspace(0.0, 300.0, 30001)
    x = np.asarray(
        sim.simulate(
            model, None, t, solver=OdeSolver(rtol=1e-10, atol=1e-10, max_steps=100_000)
        ).observables[model.state_names[0]]
    )
    tail = x[15000:]
    crossings = np.where((tail[:-1] < 0) & (tail[1:] >= 0))[0]
    periods = np.diff(crossings) * 0.01
    assert len(periods) >= 3
    assert np.std(periods) < 0.02 * np.mean(periods)


def test_van_der_pol_limit_cycle_has_the_published_period():
    # For mu = 1 the limit cycle crosses v = 0 (going down, at its largest x) at x = A,
    # and returns there after the period T (A and T to 29 digits as the van der Pol
    # sample of the russell_ode test-problem collection quotes them from Hairer & Wanner;
    # T = 6.6633 is the classic value; both are confirmed here by SciPy to 2.4e-14).
    # The model's vector field is integrated by SciPy's DOP853 from (A, 0), and the
    # period measured as the time of the next downward crossing of v = 0 (event root).
    from scipy.integrate import solve_ivp

    A = 2.00861986087484313650940188
    T = 6.6632868593231301896996820305
    model = sim.get_model("van_der_pol")
    params = {"mu": jnp.asarray(1.0)}
    f = jax.jit(lambda y: model.vector_field(jnp.asarray(0.0), y, params))

    def crossing(t, y):
        return y[1]

    crossing.direction = -1
    sol = solve_ivp(
        lambda t, y: np.asarray(f(jnp.asarray(y))),
        (0.0, 1.5 * T),
        [A, 0.0],
        method="DOP853",
        rtol=1e-13,
        atol=1e-13,
        events=crossing,
    )
    later = sol.t_events[0] > 1.0  # the start is a crossing too
    (period,), (state,) = sol.t_events[0][later], sol.y_events[0][later]
    # measured: period 2.4e-14 from T, x 1.4e-14 from A; bound 1e-11. With mu halved the
    # crossing comes 0.28 early (at 6.38) at x = A - 0.006.
    assert abs(period - T) < 1e-11, period - T
    assert abs(state[0] - A) < 1e-11, state[0] - A


def test_derived_observables_match_their_formulas():
    # The observables models add to their state, against NumPy at random states and
    # parameters: SIR's effective reproduction number R_eff = beta / gamma * S / N, and
    # the pendulum's energy per unit mass L^2 omega^2 / 2 + g L (1 - cos theta).
    rng = np.random.default_rng(7)
    for _ in range(3):
        s, i, r = rng.uniform(1.0, 100.0, 3)
        beta, gamma = rng.uniform(0.1, 2.0, 2)
        model = sim.get_model("sir")
        got = model.extra_observables(
            0.0, jnp.array([s, i, r]), {"beta": jnp.asarray(beta), "gamma": jnp.asarray(gamma)}
        )
        assert float(got["reproduction_number"]) == pytest.approx(
            beta / gamma * s / (s + i + r), rel=1e-14
        )

        theta, omega = rng.uniform(-3.0, 3.0, 2)
        g, length, damping = rng.uniform(1.0, 20.0), rng.uniform(0.2, 3.0), rng.uniform(0.0, 1.0)
        model = sim.get_model("damped_pendulum")
        params = {
            "g": jnp.asarray(g),
            "length": jnp.asarray(length),
            "damping": jnp.asarray(damping),
        }
        got = model.extra_observables(0.0, jnp.array([theta, omega]), params)
        expected = 0.5 * length**2 * omega**2 + g * length * (1 - np.cos(theta))
        assert float(got["energy"]) == pytest.approx(expected, rel=1e-13)


# Defaults that are published values, with their sources (defaults that are only a
# choice, such as Van der Pol's mu = 1 or the SIR rates, are not pinned).
PUBLISHED_DEFAULTS = {
    # Lorenz, "Deterministic nonperiodic flow", J. Atmos. Sci. 20 (1963): the classic values.
    "lorenz": {"sigma": 10.0, "rho": 28.0, "beta": 8.0 / 3.0},
    # FitzHugh, Biophys. J. 1 (1961): a = 0.7, b = 0.8, and the time-scale ratio 12.5.
    "fitzhugh_nagumo": {"a": 0.7, "b": 0.8, "tau": 12.5},
    # Robertson (1966), as in Hairer & Wanner, Solving ODEs II, section IV.10, with
    # y(0) = (1, 0, 0).
    "robertson": {
        "k1": 0.04,
        "k2": 3.0e7,
        "k3": 1.0e4,
        "initial": {"y1": 1.0, "y2": 0.0, "y3": 0.0},
    },
    # Carpenter, "Predator-Prey Population Dynamics: the Lotka-Volterra model in Stan"
    # (2018): posterior means of the lynx-hare fit (theta = 0.55, 0.028, 0.80, 0.024).
    "lotka_volterra": {"alpha": 0.55, "beta": 0.028, "gamma": 0.80, "delta": 0.024},
}


@pytest.mark.parametrize("name", list(PUBLISHED_DEFAULTS))
def test_defaults_are_the_published_values(name):
    model = sim.get_model(name)
    expected = dict(PUBLISHED_DEFAULTS[name])
    initial = expected.pop("initial", None)
    params = model.default_params()
    for key, value in expected.items():
        assert float(params[key]) == value, (key, float(params[key]))
    if initial is not None:
        got = model.default_initial()
        assert {k: float(v) for k, v in got.items()} == initial


def test_brusselator_settles_at_its_fixed_point_below_the_hopf_bifurcation():
    # x' = A + x^2 y - (B + 1) x, y' = B x - x^2 y has one fixed point, (A, B / A), whose
    # Jacobian [[B - 1, A^2], [-B, -A^2]] has trace B - 1 - A^2 and determinant A^2 > 0:
    # stable for B < 1 + A^2 (Prigogine & Lefever 1968), where every run ends there; at
    # B > 1 + A^2 a run keeps its distance from it (a limit cycle).
    model = sim.get_model("brusselator")
    t = jnp.linspace(0.0, 200.0, 3)
    solver = OdeSolver(rtol=1e-10, atol=1e-12, max_steps=100_000)
    settled = sim.simulate(model, {"A": 1.0, "B": 1.5}, t, solver=solver).final_state
    np.testing.assert_allclose(settled, [1.0, 1.5], atol=1e-8)
    cycling = sim.simulate(model, {"A": 1.0, "B": 3.0}, t, solver=solver).final_state
    assert np.hypot(cycling[0] - 1.0, cycling[1] - 3.0) > 0.5
