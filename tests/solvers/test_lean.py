"""The lean explicit Runge-Kutta core (`solvers._lean`): the steps and values of the
diffrax path on every built-in ODE model and on config-defined ones (text, SBML), forward
sensitivities against finite differences, failures reported as the diffrax path
reports them."""

import contextlib
from pathlib import Path
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import sim
import solvers._ode
from physics.ode import OdeModel
from solvers import OdeSolver, Result, checks_as_nan
from solvers._lean import lean_predict, lean_solve, lean_solve_sensitivities
from solvers._ode import _sensitivity_field, _state_norm

REPO = Path(__file__).resolve().parents[2]
ODE_MODELS = [n for n in sim.model_names() if issubclass(sim.model_class(n), OdeModel)]
# Spans short enough for an explicit method on the stiff Robertson model.
SPAN = {"robertson": 0.5}
DEFAULT_MODELS = ("lotka_volterra", "lorenz", "robertson", "neural_ode")


def _flat_problem(model):
    """The model as f(t, y, theta) on its flat state and the flat vector of its
    parameters (network weights included), with theta and y0."""
    params = model.default_params()
    theta, unravel = ravel_pytree(params)
    y0 = jnp.asarray(model.initial_state(), dtype=float)
    return (lambda t, y, v: model.vector_field(t, y, unravel(v))), theta, y0


@contextlib.contextmanager
def _through_diffrax():
    """`OdeSolver.solve` through diffrax, the path the lean core replaces: the lean core
    takes a solve only while its recorded steps stay under a limit, here none."""
    with mock.patch.object(solvers._ode, "_LEAN_RECORD_LIMIT", 0):
        yield


def _diffrax_sensitivities(solver, field, ts, y0, theta, s0):
    """`OdeSolver.solve_sensitivities` as it was before the lean core: the variational
    system through diffrax with the error norm on the state."""
    sol = solver.solve(_sensitivity_field(field), ts, (y0, s0), theta, error_norm=_state_norm)
    return sol.ys[0], sol.ys[1], sol.num_steps, sol.result


@pytest.mark.parametrize(
    "name, method",
    # (four of the nine models by default; all of them, and dopri5 on a second, with -m slow)
    [
        (name, "tsit5")
        if name in DEFAULT_MODELS
        else pytest.param(name, "tsit5", marks=pytest.mark.slow)
        for name in ODE_MODELS
    ]
    + [("lotka_volterra", "dopri5"), pytest.param("van_der_pol", "dopri5", marks=pytest.mark.slow)],
)
def test_the_lean_core_takes_diffrax_s_steps_on_every_built_in_model(name, method):
    model = sim.get_model(name)
    field, theta, y0 = _flat_problem(model)
    ts = jnp.linspace(0.0, SPAN.get(name, 3.0), 13)
    solver = OdeSolver(method=method, rtol=1e-7, atol=1e-9, max_steps=20_000, throw=False)
    with _through_diffrax():
        assert not solver._lean_solve(field, ts, y0, None, None, None)
        reference = jax.jit(lambda v: solver.solve(field, ts, y0, v))(theta)
    ys, steps, accepted, result = jax.jit(
        lambda v: lean_solve(
            field, ts, y0, v, method=method, rtol=1e-7, atol=1e-9, max_steps=20_000
        )
    )(theta)
    assert int(result) == int(reference.result) == 0
    assert (int(steps), int(accepted)) == (
        int(reference.num_steps),
        int(reference.num_accepted_steps),
    )
    # the same steps, the same arithmetic: equal to rounding
    np.testing.assert_allclose(
        ys, reference.ys, rtol=1e-12, atol=1e-12 * float(jnp.max(jnp.abs(reference.ys)))
    )


@pytest.mark.parametrize("source", ["text", "sbml"])
def test_the_lean_core_takes_diffrax_s_steps_on_config_defined_models(source):
    # A model written as text in a config (from the config's start), and one read from
    # SBML (SBML Test Suite case 00257, tests/data/sbml, over its span of 4): the steps
    # and values of the diffrax path.
    from physics.ode import sbml_model

    if source == "text":
        setup = sim.setup(sim.load_config(REPO / "experiments" / "sir_boarding_school.toml"))
        field, theta, _ = _flat_problem(setup.model)
        y0, span = (
            jnp.asarray(setup.model.initial_state(setup.initial), dtype=float),
            float(setup.t[-1]),
        )
    else:
        field, theta, y0 = _flat_problem(
            sbml_model(REPO / "tests" / "data" / "sbml" / "cases" / "00257" / "00257-sbml-l3v2.xml")
        )
        span = 4.0
    ts = jnp.linspace(0.0, span, 11)
    solver = OdeSolver(rtol=1e-8, atol=1e-10, max_steps=20_000, throw=False)
    with _through_diffrax():
        reference = jax.jit(lambda v: solver.solve(field, ts, y0, v))(theta)
    ys, steps, accepted, result = jax.jit(
        lambda v: lean_solve(field, ts, y0, v, rtol=1e-8, atol=1e-10, max_steps=20_000)
    )(theta)
    assert int(result) == int(reference.result) == 0 and int(steps) > 10
    assert (int(steps), int(accepted)) == (
        int(reference.num_steps),
        int(reference.num_accepted_steps),
    )
    np.testing.assert_allclose(
        ys, reference.ys, rtol=1e-12, atol=1e-12 * float(jnp.max(jnp.abs(reference.ys)))
    )


@pytest.mark.parametrize(
    "name",
    [
        "lotka_volterra",
        "sir",
        pytest.param("lorenz", marks=pytest.mark.slow),
        pytest.param("neural_ode", marks=pytest.mark.slow),
    ],
)
def test_lean_sensitivities_equal_the_diffrax_path_and_finite_differences(name):
    model = sim.get_model(name)
    field, theta, y0 = _flat_problem(model)
    ts = jnp.linspace(0.0, 2.0, 9)
    solver = OdeSolver(rtol=1e-9, atol=1e-11, throw=False)
    s0 = jnp.zeros((y0.shape[0], theta.shape[0]))
    ys, sens, steps, result = jax.jit(
        lambda v: lean_solve_sensitivities(field, ts, y0, v, s0, rtol=1e-9, atol=1e-11)
    )(theta)
    ref_ys, ref_sens, ref_steps, ref_result = jax.jit(
        lambda v: _diffrax_sensitivities(solver, field, ts, y0, v, s0)
    )(theta)
    assert int(result) == int(ref_result) == 0 and int(steps) == int(ref_steps)
    np.testing.assert_allclose(ys, ref_ys, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(
        sens, ref_sens, rtol=1e-9, atol=1e-9 * float(jnp.max(jnp.abs(ref_sens)))
    )
    # central differences of tight solves (a step of 1e-5 relative: error ~1e-10)
    tight = jax.jit(
        lambda v: lean_solve(field, ts, y0, v, rtol=1e-12, atol=1e-14, max_steps=100_000)[0]
    )
    for j in range(min(theta.shape[0], 4)):
        h = 1e-5 * max(abs(float(theta[j])), 1.0)
        fd = (tight(theta.at[j].add(h)) - tight(theta.at[j].add(-h))) / (2 * h)
        scale = float(jnp.max(jnp.abs(fd))) + 1e-12
        np.testing.assert_allclose(
            sens[:, :, j], fd, atol=2e-6 * scale, err_msg=f"{name}: d/d theta[{j}]"
        )


def test_the_sensitivities_of_fits_and_nuts_go_through_the_lean_core():
    # OdeSolver.solve_sensitivities (what fits and NUTS call) of a config-defined model:
    # the lean core for tsit5 and dopri5 with adaptive steps, with the steps and values
    # of the diffrax path; a fixed step or an implicit method keeps diffrax.
    config = sim.load_config(REPO / "experiments" / "sir_boarding_school.toml")
    model = sim.setup(config).model
    assert type(model).__name__ != "SIR"  # (written as text in the config)
    field, theta, y0 = _flat_problem(model)
    ts = jnp.linspace(0.0, 14.0, 15)
    s0 = jnp.zeros((y0.shape[0], theta.shape[0]))
    for solver in (
        OdeSolver(method="dopri5", rtol=1e-8, atol=1e-10, throw=False),
        OdeSolver(method="tsit5", rtol=1e-8, atol=1e-10, throw=False),
    ):
        assert solver.lean
        got = jax.jit(lambda v: solver.solve_sensitivities(field, ts, y0, v, s0))(theta)
        ys, sens, steps, result = jax.jit(
            lambda v: _diffrax_sensitivities(solver, field, ts, y0, v, s0)
        )(theta)
        assert int(got.result) == int(result) == 0 and int(got.num_steps) == int(steps)
        np.testing.assert_allclose(got.ys, ys, rtol=1e-12)
        np.testing.assert_allclose(
            got.sensitivities, sens, rtol=1e-9, atol=1e-9 * float(jnp.max(jnp.abs(sens)))
        )
    assert (
        not OdeSolver(method="kvaerno5").lean
        and not OdeSolver(dt0=0.1, adaptive=False).lean
        and not OdeSolver(method="dopri8").lean
    )


def test_lean_predict_differentiates_by_its_sensitivities_in_every_mode():
    # d/dy0 and d/dtheta of a prediction: reverse mode (by transposing the forward
    # sensitivities), forward mode, under vmap; against central differences.
    def field(t, y, p):
        return jnp.stack(
            [p["a"] * y[0] - p["b"] * y[0] * y[1], p["b"] * y[0] * y[1] - p["c"] * y[1]]
        )

    ts = jnp.linspace(0.0, 5.0, 11)
    p = {"a": jnp.asarray(0.8), "b": jnp.asarray(0.5), "c": jnp.asarray(0.6)}
    y0 = jnp.array([1.2, 0.7])

    def loss(y0, p):
        return jnp.sum(
            lean_predict(field, ts, y0, p, rtol=1e-11, atol=1e-13, max_steps=100_000) ** 2
        )

    # (one program gives the gradient and the values the differences take: op by op,
    # each difference's solves compiled their loops anew)
    value_and_gradient = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    value = lambda *a: value_and_gradient(*a)[0]  # noqa: E731
    g_y0, g_p = value_and_gradient(y0, p)[1]
    fwd = jax.jit(jax.jacfwd(loss, argnums=1))(y0, p)
    for k in p:
        h = 1e-6
        fd = (value(y0, {**p, k: p[k] + h}) - value(y0, {**p, k: p[k] - h})) / (2 * h)
        assert float(g_p[k]) == pytest.approx(float(fd), rel=1e-6), k
        assert float(fwd[k]) == pytest.approx(float(g_p[k]), rel=1e-12), k
    for i in range(2):
        h = 1e-6
        fd = (value(y0.at[i].add(h), p) - value(y0.at[i].add(-h), p)) / (2 * h)
        assert float(g_y0[i]) == pytest.approx(float(fd), rel=1e-6), i
    batched = jax.jit(jax.vmap(jax.grad(loss, argnums=1), in_axes=(0, None)))(
        jnp.stack([y0, 2 * y0]), p
    )
    assert float(batched["a"][0]) == pytest.approx(float(g_p["a"]), rel=1e-12)


@pytest.mark.raising_checks
def test_failures_are_reported_with_the_codes_of_the_diffrax_path():
    ts = jnp.linspace(0.0, 2.0, 5)
    field = lambda t, y, k: -k * y  # noqa: E731
    # The codes (throw=False) do not depend on how run-time checks are traced: with them
    # as NaN the programs hold no host callback and the compilation cache keeps them.
    with checks_as_nan():
        # dy/dt = y^2 from y = 1 blows up at t = 1: no state after it, the failure flagged
        # (the steps shrink towards t = 1 until the budget is spent, on both paths)
        square = lambda t, y, _: y**2  # noqa: E731
        ys, steps, _, result = jax.jit(
            lambda y0: lean_solve(square, ts, y0, None, max_steps=2_000)
        )(jnp.ones(1))
        with _through_diffrax():
            reference = jax.jit(
                lambda y0: OdeSolver(max_steps=2_000, throw=False).solve(square, ts, y0)
            )(jnp.ones(1))
        assert (
            int(result) == int(reference.result) == int(Result.max_steps_reached)
            and int(steps) == 2_000
        )
        assert bool(jnp.all(jnp.isnan(ys[3:]))) and float(ys[1, 0]) == pytest.approx(
            2.0, rel=1e-5
        )  # (y(0.5) = 2)
        # too few steps: max_steps_reached, as diffrax says it
        with _through_diffrax():
            short = OdeSolver(max_steps=3, throw=False).solve(field, ts, jnp.ones(1), 50.0)
        # (compiled: op by op, the lean core's loops compiled some forty small programs)
        ys, steps, _, result = jax.jit(lambda y0: lean_solve(field, ts, y0, 50.0, max_steps=3))(
            jnp.ones(1)
        )
        assert int(result) == int(short.result) == int(Result.max_steps_reached) and int(steps) == 3
    # throw=True (the default) raises from the sensitivities, as the diffrax path does
    with pytest.raises(Exception, match="steps"):
        jax.jit(
            lambda y0: (
                OdeSolver(max_steps=3)
                .solve_sensitivities(field, ts, y0, jnp.ones(1) * 50.0, jnp.zeros((1, 1)))
                .ys
            )
        )(jnp.ones(1)).block_until_ready()


def test_a_solve_that_can_no_longer_advance_ends_at_once_where_diffrax_spins():
    # The one documented departure (solvers/_lean.py): once a rejected step no longer
    # moves the time, diffrax spins until max_steps; the lean core ends with a code that
    # says why. Before t = 0.6 both saved the same values.
    import diffrax

    ts = jnp.linspace(0.0, 1.0, 5)
    cases = {
        # undefined past t = 0.6 (NaN error estimates): nonfinite_state
        "nan": (lambda t, y, _: y * jnp.sqrt(0.6 - t), Result.nonfinite_state),
        # a finite jump too large for any step across it: step_size_too_small
        "jump": (
            lambda t, y, _: jnp.where(t > 0.6, 1e300, 0.0) * jnp.ones_like(y),
            Result.step_size_too_small,
        ),
    }
    for name, (field, code) in cases.items():
        reference = jax.jit(
            lambda y0: diffrax.diffeqsolve(
                diffrax.ODETerm(field),
                diffrax.Tsit5(),
                ts[0],
                ts[-1],
                None,
                y0,
                None,
                saveat=diffrax.SaveAt(ts=ts),
                stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8),
                max_steps=4_000,
                throw=False,
            )
        )(jnp.ones(1))
        ys, steps, _, result = jax.jit(
            lambda y0: lean_solve(field, ts, y0, None, rtol=1e-6, atol=1e-8, max_steps=4_000)
        )(jnp.ones(1))
        assert int(reference.stats["num_steps"]) == 4_000 and not bool(
            jnp.all(reference.result == diffrax.RESULTS.successful)
        ), name
        assert int(result) == int(code) and int(steps) < 400, (name, int(result), int(steps))
        np.testing.assert_allclose(ys[:3], reference.ys[:3], rtol=1e-12)
        assert not bool(jnp.any(jnp.isfinite(ys[3:]))), name  # (nothing saved past the failure)


def _forced(t, y, p):
    # Lotka-Volterra with a time-dependent forcing (so that moving a save time or t0
    # changes more than where the solution is read)
    return jnp.stack(
        [
            p["a"] * y[0] - p["b"] * y[0] * y[1] + 0.1 * jnp.sin(t),
            p["d"] * y[0] * y[1] - p["g"] * y[1],
        ]
    )


def _diffrax_solve(solver, ts, y0, p):
    """diffrax's own diffeqsolve with OdeSolver's settings (the path the lean core replaces)."""
    import diffrax

    return diffrax.diffeqsolve(
        diffrax.ODETerm(_forced),
        diffrax.Tsit5(),
        ts[0],
        ts[-1],
        None,
        y0,
        p,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=solver.rtol, atol=solver.atol),
        max_steps=solver.max_steps,
    ).ys


FORCED_P = {
    "a": jnp.asarray(0.55),
    "b": jnp.asarray(0.028),
    "g": jnp.asarray(0.8),
    "d": jnp.asarray(0.024),
}


# (compiles diffrax's backpropagation; finite differences check the same by default below)
@pytest.mark.slow
def test_reverse_mode_through_the_lean_core_is_backpropagation_through_diffrax_s_steps():
    # jax.grad of a solve with respect to y0, the parameters and every save time (t0 and
    # t1 included): the derivative of the same discrete solution diffrax's
    # backpropagation gives, to rounding.
    y0, ts, p = jnp.array([30.0, 4.0]), jnp.linspace(0.3, 20.0, 21), FORCED_P
    solver = OdeSolver(rtol=1e-7, atol=1e-9)
    assert solver._lean_solve(_forced, ts, y0, None, None, None)

    def ours(y0, p, ts):
        return jnp.sum(solver.solve(_forced, ts, y0, p).ys ** 2)

    def theirs(y0, p, ts):
        return jnp.sum(_diffrax_solve(solver, ts, y0, p) ** 2)

    got = jax.jit(jax.grad(ours, argnums=(0, 1, 2)))(y0, p, ts)
    want = jax.jit(jax.grad(theirs, argnums=(0, 1, 2)))(y0, p, ts)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=False):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * float(jnp.max(jnp.abs(b))))


def test_reverse_mode_through_the_lean_core_matches_finite_differences():
    # jax.grad with respect to y0, a parameter, interior save times, t0 and t1 and an
    # array the vector field closes over (tight tolerances, so that central differences
    # of the adaptive solve are accurate to ~1e-7); also under vmap.
    y0, ts, p = jnp.array([30.0, 4.0]), jnp.linspace(0.3, 20.0, 21), FORCED_P
    solver = OdeSolver(rtol=1e-11, atol=1e-11, max_steps=100_000)
    one = jnp.asarray(1.0)

    def ours(y0, p, ts, scale):
        # (the field closes over `scale`, an array: at 1 the values of `_forced`'s solve)
        field = lambda t, y, args: scale * _forced(t, y, args)  # noqa: E731
        assert solver._lean_solve(field, ts, y0, None, None, None)
        return jnp.sum(solver.solve(field, ts, y0, p).ys ** 2)

    # (every solve compiled: op by op, each took as long as compiling it; one program
    # gives the gradient and the values the differences take, the closed-over array's
    # included, which a program of its own checked before)
    value_and_gradient = jax.jit(jax.value_and_grad(ours, argnums=(0, 1, 2, 3)))
    value = lambda *a: value_and_gradient(*a)[0]  # noqa: E731
    g_y0, g_p, g_ts, g_scale = value_and_gradient(y0, p, ts, one)[1]
    checks = [
        (g_y0[1], lambda h: value(y0.at[1].add(h), p, ts, one), 1e-4),
        (g_p["b"], lambda h: value(y0, {**p, "b": p["b"] + h}, ts, one), 1e-7),
        (g_scale, lambda h: value(y0, p, ts, one + h), 1e-6),
    ]
    checks += [
        (g_ts[i], lambda h, i=i: value(y0, p, ts.at[i].add(h), one), 1e-5) for i in (0, 7, 20)
    ]
    for exact, shifted, h in checks:
        fd = (float(shifted(h)) - float(shifted(-h))) / (2 * h)
        assert float(exact) == pytest.approx(fd, rel=2e-5, abs=1e-6 * abs(float(g_y0[1]))), (
            float(exact),
            fd,
        )
    # batched: each lane's gradient is the lane's own
    y0s = jnp.stack([y0, 1.2 * y0])
    batched = jax.jit(jax.vmap(jax.grad(ours), in_axes=(0, None, None, None)))(y0s, p, ts, one)
    np.testing.assert_allclose(batched[1], value_and_gradient(y0s[1], p, ts, one)[1][0], rtol=1e-10)


def test_which_solves_the_lean_core_takes():
    y0, ts = jnp.ones(3), jnp.linspace(0.0, 1.0, 5)
    field = lambda t, y, args: -y  # noqa: E731
    lean = OdeSolver()
    assert lean._lean_solve(field, ts, y0, None, None, None)
    # diffrax keeps: other adjoints, implicit or fixed-step methods, pytree or large
    # states, a custom error norm, observed saves, IMEX pairs
    assert not OdeSolver(adjoint="backsolve")._lean_solve(field, ts, y0, None, None, None)
    assert not OdeSolver(adjoint="forward")._lean_solve(field, ts, y0, None, None, None)
    assert not OdeSolver(method="kvaerno5")._lean_solve(field, ts, y0, None, None, None)
    assert not OdeSolver(dt0=0.1, adaptive=False)._lean_solve(field, ts, y0, None, None, None)
    assert not lean._lean_solve(field, ts, {"y": y0}, None, None, None)
    assert not lean._lean_solve(field, ts, jnp.ones(2_000), None, None, None)
    assert not lean._lean_solve(field, ts, y0, lambda e: jnp.max(jnp.abs(e)), None, None)
    assert not lean._lean_solve(field, ts, y0, None, lambda y: y[0], None)
    assert not lean._lean_solve((field, field), ts, y0, None, None, None)
    # a large state is still solved, by diffrax, with the same values
    big = jnp.linspace(1.0, 2.0, 2_000)
    np.testing.assert_allclose(lean.solve(field, ts, big).ys[-1], big * np.exp(-1.0), rtol=1e-6)


def test_the_methods_that_declare_a_faster_loop_are_the_ones_it_runs():
    # An ODE method declares in its entry of the table whether the lean core and the
    # batched sweep loop reproduce its solve; each loop has the tableau of exactly those.
    from solvers._batched_ode import _SOLVERS
    from solvers._lean import _TABLEAUS
    from solvers._ode import METHODS

    assert {name for name, m in METHODS.items() if m.lean} == set(_TABLEAUS)
    assert {name for name, m in METHODS.items() if m.batched} == set(_SOLVERS)
