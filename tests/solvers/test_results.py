"""One enumeration of outcomes: every code its own message, every diffrax outcome mapped,
and each solver reporting the failure that happened (never another one)."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from solvers import Etdrk, FourierGrid, OdeSolver, Result, from_diffrax, result_message
from solvers._results import _FROM_DIFFRAX


def test_every_code_has_its_own_message():
    messages = [result_message(code) for code in Result]
    assert len(set(messages)) == len(Result) and all(messages)
    assert result_message(0) == "successful"
    assert "max_steps" in result_message(Result.max_steps_reached)
    assert "neighbour list" in result_message(Result.neighbour_overflow)
    assert "non-finite" in result_message(Result.nonfinite_state)
    assert result_message(99) == "unknown result code 99"


def test_codes_are_stable():
    # Codes are stored in sweep files (/stats/result): renumbering would change the
    # meaning of every file written before.
    assert {r.name: int(r) for r in Result} == {
        "successful": 0,
        "max_steps_reached": 1,
        "step_size_too_small": 2,
        "implicit_solve_failed": 3,
        "nonfinite_state": 4,
        "neighbour_overflow": 5,
        "internal_error": 6,
        "too_many_events": 7,
        "event_cascade": 8,
    }


# Pins the diffrax outcomes this version knows: a new one must be added to the table
# (until then it maps to internal_error, which this test reports).
EXPECTED = {
    "successful": Result.successful,
    "event_occurred": Result.successful,
    "max_steps_reached": Result.max_steps_reached,
    "max_steps_rejected": Result.step_size_too_small,
    "dt_min_reached": Result.step_size_too_small,
    "nonfinite": Result.nonfinite_state,
    "nonlinear_max_steps_reached": Result.implicit_solve_failed,
    "nonlinear_divergence": Result.implicit_solve_failed,
    "singular": Result.implicit_solve_failed,
    "breakdown": Result.implicit_solve_failed,
    "stagnation": Result.implicit_solve_failed,
    "conlim": Result.implicit_solve_failed,
    "nonfinite_input": Result.implicit_solve_failed,
    "internal_error": Result.internal_error,
}


def test_every_diffrax_outcome_maps_to_its_code():
    known = list(diffrax.RESULTS._name_to_item)  # the outcomes of the installed diffrax
    assert sorted(known) == sorted(EXPECTED), (
        "diffrax's outcomes changed: update solvers/_results.py"
    )
    assert {name for name, _ in _FROM_DIFFRAX} == set(EXPECTED) - {"internal_error"}
    for name in known:
        assert int(from_diffrax(getattr(diffrax.RESULTS, name))) == EXPECTED[name], name
    # batched, under jit
    outcome = lambda failed: from_diffrax(
        diffrax.RESULTS.where(failed, diffrax.RESULTS.dt_min_reached, diffrax.RESULTS.successful)
    )
    codes = jax.jit(jax.vmap(outcome))(jnp.array([True, False]))
    assert codes.tolist() == [Result.step_size_too_small, Result.successful]


def oscillator(t, y, args):
    return jnp.stack([y[1], -args * y[0]])


def test_ode_solver_reports_max_steps():
    sol = OdeSolver(max_steps=4, throw=False).solve(
        oscillator, jnp.linspace(0.0, 100.0, 3), jnp.array([1.0, 0.0]), 1.0
    )
    assert int(sol.result) == Result.max_steps_reached


def test_a_finite_time_blow_up_is_reported_with_its_likely_cause():
    # dy/dt = y^2, y(0) = 1 blows up at t = 1: with no minimum step the controller shrinks
    # the step towards t = 1 until the step budget is spent.
    sol = OdeSolver(throw=False, max_steps=2000).solve(
        lambda t, y, a: y**2, jnp.array([0.0, 2.0]), jnp.array([1.0])
    )
    assert int(sol.result) == Result.max_steps_reached
    assert "blow up" in result_message(int(sol.result))


def test_etdrk_reports_a_non_finite_field():
    grid = FourierGrid((16,), ((0.0, 2 * np.pi),))
    linear = jnp.zeros(grid.spectral_shape)
    growth = lambda u_hat: grid.rfft(grid.irfft(u_hat) ** 2)  # u' = u^2 blows up at t = 1/5
    sol = Etdrk(order=1, steps_per_save=10, dealias=None).solve(
        grid, linear, growth, jnp.full((16,), 5.0), jnp.linspace(0.0, 2.0, 3)
    )
    assert int(sol.result) == Result.nonfinite_state
