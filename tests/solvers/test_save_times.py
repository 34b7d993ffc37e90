"""Values at save times: every ODE method's declared orders, measured, and its saved
values as accurate as the ends of its steps, against SciPy's Radau at tight tolerances."""

import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest
from hypothesis import given, settings, strategies as st
from scipy.integrate import solve_ivp

from solvers import OdeSolver
from solvers._grid_steps import GridThroughSaveTimes
from solvers._ode import METHODS
from tests.helpers import fitted_order

# Each check compiles a program per method: the methods at the rule's edges run by
# default (an explicit method that interpolates, one that steps to the save times, the
# implicit method of order 5 and the IMEX one of order 4), the rest with `-m slow`
# (Kvaerno4 among them: its steps land on the save times as Kvaerno5's do).
DEFAULT = ("tsit5", "dopri8", "kvaerno5", "kencarp4")
ALL = [m if m in DEFAULT else pytest.param(m, marks=pytest.mark.slow) for m in METHODS]


def _stepping_alone(solver):
    """A diffrax solver whose steps are taken outside `diffeqsolve`: an implicit one's
    stage equations solved to rounding (no step-size controller lends its tolerances)."""
    if isinstance(solver, diffrax.AbstractImplicitSolver):
        return eqx.tree_at(
            lambda s: (s.root_finder.rtol, s.root_finder.atol, s.root_finder.norm),
            solver,
            (1e-14, 1e-14, optx.rms_norm),
        )
    return solver


def test_declared_orders_are_diffrax_orders():
    for name, method in METHODS.items():
        solver = method.make()
        terms = OdeSolver(method=name, adaptive=False, dt0=0.1).terms(
            (_one, _square) if method.kind == "imex" else _logistic
        )
        assert solver.order(terms) == method.order, name
        assert 1 <= method.dense_order <= method.order, name
        # A method is adaptive where its step estimates its error.
        assert isinstance(solver, diffrax.AbstractAdaptiveSolver) == method.adaptive, name


def test_steps_land_on_save_times_where_the_dense_output_is_short():
    ts = jnp.linspace(0.0, 1.0, 3)
    # The rule: explicit methods need a dense output one order below theirs, implicit
    # ones (long steps on stiff problems) their own order.
    stepping = {name for name, method in METHODS.items() if method.steps_to_save_times}
    assert stepping == {"dopri8", "kvaerno4", "kvaerno5", "kencarp3", "kencarp4", "kencarp5"}
    for name in (name for name, method in METHODS.items() if method.adaptive):
        controller = OdeSolver(method=name)._controller(None, ts)
        assert isinstance(controller, diffrax.ClipStepSizeController) == (name in stepping), name
    # Constant steps of the same methods keep their grid and add the save times to it;
    # the lean core and the batched loop (tsit5, dopri5) interpolate, as their methods'
    # dense outputs allow.
    assert isinstance(
        OdeSolver(method="dopri8", adaptive=False, dt0=0.1)._controller(None, ts),
        GridThroughSaveTimes,
    )
    assert isinstance(
        OdeSolver(method="tsit5", adaptive=False, dt0=0.1)._controller(None, ts),
        diffrax.ConstantStepSize,
    )
    assert OdeSolver(method="tsit5").lean and OdeSolver(method="dopri5").lean


def _saved_errors(method, step_sizes, ts):
    """Max error of a constant-step logistic solve at `ts` for each step size, and its
    step counts."""
    errors, steps = [], []
    for dt in step_sizes:
        # (the step traced: one program for every step size, and for every 7 save times)
        sol = OdeSolver(method=method, adaptive=False, dt0=jnp.asarray(dt)).solve(
            _logistic, jnp.asarray(ts), jnp.array(0.1)
        )
        errors.append(np.max(np.abs(np.asarray(sol.ys) - _exact("explicit", np.asarray(ts)))))
        steps.append(int(sol.num_steps))
    return errors, steps


def test_constant_steps_end_on_the_save_times_where_the_dense_output_is_short():
    # Dopri8 (order 8, dense output of order 5) with steps of 1, 0.5 and 0.25 on the
    # logistic equation, saved between its grid points: filled from the dense output,
    # the saved values converged as h^5.8 (6.6e-8, 6.6e-10, 2.2e-11); now each save time
    # off the grid is one more step end and they converge as h^8. The grid stays: the
    # steps are the grid's 8, 16, 32 plus one per save time off it (4 of them; 4 and 8
    # lie on every grid).
    ts = [0.0, 0.37, 1.13, 2.71, 4.0, 5.55, 8.0]
    errors, steps = _saved_errors("dopri8", [1.0, 0.5, 0.25], ts)
    assert fitted_order([1.0, 0.5, 0.25], errors) > 7.5, errors
    assert steps == [12, 20, 36]
    # Tsit5's fourth-order output keeps its fifth order: interpolated, on the grid alone.
    errors, steps = _saved_errors("tsit5", [1.0, 0.5, 0.25], ts)
    assert fitted_order([1.0, 0.5, 0.25], errors) > 5.5, errors
    assert steps == [8, 16, 32]


def test_the_constant_grid_through_save_times_takes_no_sliver_steps():
    # Save times that the grid reaches only to rounding (0.1 k against 0 + 1.0 k / 10:
    # k = 3, 6, 7 differ in the last bit) are grid points, not a grid point and a step of
    # 1e-17 after it; a save time one millionth of a spacing off the grid is a step of its
    # own. (Seven save times and the step traced: the program of the test above.)
    solver = OdeSolver(method="dopri8", adaptive=False, dt0=jnp.asarray(0.1))
    ks = (0, 1, 3, 6, 7, 9, 10)
    rounded = [0.1 * k for k in ks]
    assert [k for k, t in zip(ks, rounded, strict=True) if t != k / 10] == [3, 6, 7]
    sol = solver.solve(_logistic, jnp.asarray(rounded), jnp.array(0.1))
    assert int(sol.num_steps) == 10
    off = np.array([0.0, 0.1, 0.2, 0.3 + 1e-7, 0.5, 0.8, 1.0])
    sol = solver.solve(_logistic, jnp.asarray(off), jnp.array(0.1))
    assert int(sol.num_steps) == 11
    np.testing.assert_allclose(np.asarray(sol.ys), _exact("explicit", off), rtol=1e-12)


# ----------------------------------------------------------------------------- dense order


def _logistic(t, y, args):
    return y * (1.0 - y)


def _one(t, y, args):
    return jnp.ones_like(y)


def _square(t, y, args):
    return -(y**2)


def _exact(method_kind, t):
    """The exact solution from y(0) = 0.1: the logistic equation y' = y (1 - y) for
    one-piece methods, y' = 1 - y^2 (split as 1 and -y^2) for IMEX ones."""
    if method_kind == "imex":
        return np.tanh(t + np.arctanh(0.1))
    return 1.0 / (1.0 + 9.0 * np.exp(-t))


@pytest.mark.parametrize("name", list(METHODS))
def test_declared_orders_are_measured(name):
    # One step of size h from the exact value at t = 0: the step's end is off by
    # C h^(order + 1) and the dense output at theta = 0.5 by C h^(dense_order + 1) (with
    # the step's own error, of higher order or the same). Each slope is fitted over the
    # three smallest steps whose errors stand clear of rounding (the values are about
    # 0.1): above 1e-12 for the end (Dopri8's reaches rounding from h = 0.4 down), above
    # 1e-14 for the middle, from h = 0.8 down. Every method that declares its orders is
    # measured.
    method = METHODS[name]
    solver = _stepping_alone(method.make())
    terms = OdeSolver(method=name, adaptive=False, dt0=0.1).terms(
        (_one, _square) if method.kind == "imex" else _logistic
    )

    @jax.jit
    @jax.vmap
    def end_and_middle(h):
        t0, y0 = jnp.zeros(()), jnp.array([0.1])
        state = solver.init(terms, t0, h, y0, None)
        y1, _, dense, _, _ = solver.step(terms, t0, h, y0, None, state, False)
        middle = solver.interpolation_cls(t0=t0, t1=h, **dense).evaluate(0.5 * h)
        return y1[0], middle[0]

    hs = 3.2 * 0.5 ** np.arange(12)
    ends, middles = (np.asarray(v) for v in end_and_middle(jnp.asarray(hs)))
    for values, at, steps, order, rounding in (
        (ends, hs, hs, method.order, 1e-12),
        (middles[2:], 0.5 * hs[2:], hs[2:], method.dense_order, 1e-14),
    ):
        errors = np.abs(values - _exact(method.kind, at))
        clear = np.flatnonzero(errors > rounding)[-3:]
        assert len(clear) == 3, errors
        assert abs(fitted_order(steps[clear], errors[clear]) - (order + 1)) < 0.5, (order, errors)


# ----------------------------------------------------------------------------- saved values

# Van der Pol, x'' - mu (1 - x^2) x' + x = 0 from (2, 0): non-stiff at mu = 1 over two
# periods for the explicit methods; stiff at mu = 100 (the Jacobian's eigenvalues about
# -300 and -0.003 at the start) on its slow branch before the first jump, near
# t = (3/2 - ln 2) mu = 81, for the implicit and IMEX ones (IMEX: the damping implicit).
_PROBLEMS = {"explicit": (1.0, 10.0, 11), "implicit": (100.0, 70.0, 8)}
_TOL = 1e-6


def _van_der_pol(t, y, mu):
    return jnp.stack([y[1], mu * (1.0 - y[0] ** 2) * y[1] - y[0]])


def _oscillator(t, y, mu):
    return jnp.stack([y[1], -y[0]])


def _damping(t, y, mu):
    return jnp.stack([jnp.zeros_like(y[0]), mu * (1.0 - y[0] ** 2) * y[1]])


@functools.cache
def _reference(mu, t_end, n):
    """SciPy's Radau at rtol = atol = 1e-13 with the exact Jacobian, at linspace(0, t_end, n)."""

    def f(t, y):
        return [y[1], mu * (1.0 - y[0] ** 2) * y[1] - y[0]]

    def jacobian(t, y):
        return [[0.0, 1.0], [-2.0 * mu * y[0] * y[1] - 1.0, mu * (1.0 - y[0] ** 2)]]

    sol = solve_ivp(
        f,
        (0.0, t_end),
        [2.0, 0.0],
        method="Radau",
        rtol=1e-13,
        atol=1e-13,
        jac=jacobian,
        t_eval=np.linspace(0.0, t_end, n),
    )
    assert sol.success
    return sol.y.T


def _problem(name):
    """The van der Pol problem of a method's kind: (mu, t_end, n)."""
    return _PROBLEMS["explicit" if METHODS[name].kind == "explicit" else "implicit"]


@functools.cache
def _saving(name):
    """The compiled solve of `name` on its van der Pol problem: save times -> saved values
    (one program per method, shared by the tests below)."""
    method = METHODS[name]
    mu = _problem(name)[0]
    # (Euler has no error estimate: constant steps, saved by linear interpolation)
    steps = {"adaptive": False, "dt0": 1e-3} if name == "euler" else {}
    solver = OdeSolver(method=name, rtol=_TOL, atol=_TOL, max_steps=20_000, **steps)
    field = (_oscillator, _damping) if method.kind == "imex" else _van_der_pol
    return jax.jit(lambda ts: solver.solve(field, ts, jnp.array([2.0, 0.0]), mu).ys)


@pytest.mark.parametrize("name", ALL)
def test_values_at_save_times_are_as_accurate_as_step_ends(name):
    # Each saved value against the end value of the same solve stopped there (the same
    # save times up to it, then repeated: the same steps up to its last one), both
    # against SciPy. Before steps landed on the save times, Kvaerno5 saved values 660
    # times less accurate than the ends, Kvaerno4 115, Dopri8 98 and KenCarp4 58 times.
    mu, t_end, n = _problem(name)
    reference = _reference(mu, t_end, n)
    scale = np.max(np.abs(reference), axis=0)
    solve = _saving(name)
    ts = np.linspace(0.0, t_end, n)

    def error(y, k):
        return np.max(np.abs(np.asarray(y) - reference[k]) / scale)

    saved = solve(jnp.asarray(ts))
    for k in range(1, n):
        ended = solve(jnp.asarray(np.concatenate([ts[: k + 1], np.full(n - k - 1, ts[k])])))
        at_end, at_save = error(ended[-1], k), error(saved[k], k)
        # (a floor of 1e-3 tolerances where the end's error is near zero by chance)
        assert at_save <= 4.0 * (at_end + 1e-3 * _TOL), (k, at_save, at_end)


def test_stepping_to_save_times_keeps_one_program_per_tolerance():
    ts = jnp.linspace(0.0, 1.0, 4)
    traces = []

    @eqx.filter_jit
    def solve(solver, ts):
        traces.append(1)
        return solver.solve(_van_der_pol, ts, jnp.array([2.0, 0.0]), 5.0)

    # (an explicit method: the test suite's run-time type checks refuse the traced
    # tolerances that the implicit methods' root finder would take)
    for rtol in (1e-6, 1e-8):
        sol = solve(OdeSolver(method="dopri8", rtol=jnp.asarray(rtol), atol=jnp.asarray(rtol)), ts)
        assert int(sol.result) == 0
    solve(OdeSolver(method="dopri8", rtol=jnp.asarray(1e-8), atol=jnp.asarray(1e-8)), ts + 0.5)
    assert len(traces) == 1


def test_a_solve_with_events_saves_the_ends_of_its_steps_too():
    # The same stiff van der Pol with an event that never fires (x > 10): the segments of
    # `solve_with_events` step onto the save times as a plain solve does. Interpolated,
    # Kvaerno5's saved values were up to 660 times less accurate than the step ends.
    from solvers import OdeEvent, solve_with_events

    mu, t_end, n = _PROBLEMS["implicit"]
    reference = _reference(mu, t_end, n)
    scale = np.max(np.abs(reference), axis=0)
    solver = OdeSolver(method="kvaerno5", rtol=_TOL, atol=_TOL, max_steps=20_000)
    never = OdeEvent(trigger=lambda t, y, args: y[0] - 10.0, apply=lambda t, y, args: (y, args))
    ts = jnp.linspace(0.0, t_end, n)
    sol, fired = jax.jit(
        lambda ts: solve_with_events(solver, _van_der_pol, ts, jnp.array([2.0, 0.0]), mu, (never,))
    )(ts)
    plain = _saving("kvaerno5")(ts)  # (the same solver: the program of the test above)
    assert int(fired) == 0
    with_events = np.max(np.abs(np.asarray(sol.ys) - reference) / scale)
    without = np.max(np.abs(np.asarray(plain) - reference) / scale)
    assert with_events <= 4.0 * (without + 1e-3 * _TOL), (with_events, without)


# (the controller's calls compiled, one program for each number of save times: op by
# op, the examples' loops took seconds)
@eqx.filter_jit
def _first_step(controller, t1, dt):
    return controller.init(None, 0.0, t1, None, dt, None, lambda *a: None, None)


@eqx.filter_jit
def _next_step(controller, start, end, state):
    return controller.adapt_step_size(start, end, None, None, None, None, None, state)


@settings(max_examples=60, deadline=None)
@given(
    dt=st.floats(0.01, 2.0),
    length=st.floats(0.05, 5.0),
    fractions=st.lists(st.floats(0.0, 1.0), min_size=0, max_size=6),
)
def test_constant_grid_through_save_times_steps_on_every_grid_point_and_save_time(
    dt, length, fractions
):
    # The controller's own loop, as diffeqsolve drives it: the step ends are the grid's
    # points (t0 + k length / n, n = ceil(length / dt)) and the save times between them,
    # increasing, the last one the end, and none closer than rounding to the one before.
    t0, t1 = 0.0, length
    ts = np.unique(np.concatenate([[t0], np.asarray(fractions) * length, [t1]]))
    controller = GridThroughSaveTimes(jnp.asarray(ts))
    end, state = _first_step(controller, jnp.asarray(t1), jnp.asarray(dt))
    ends, start = [t0], t0
    while start < t1 and len(ends) < 10_000:
        ends.append(float(end))
        _, start, end, _, state, _ = _next_step(controller, jnp.asarray(start), end, state)
        start = float(start)
    n = int(np.ceil(length / np.nextafter(dt, np.inf)))
    grid = t0 + length * np.arange(1, n + 1) / n
    spacing = length / n
    ends = np.asarray(ends)
    assert ends[-1] == t1 and np.all(np.diff(ends) > 1e-10 * spacing)
    for point in np.concatenate([grid, ts[1:]]):
        assert np.min(np.abs(ends - point)) <= 1e-9 * spacing * 1.001, point
    assert len(ends) - 1 <= n + len(ts)
