"""The root finder of the stages of the implicit methods (`solvers._newton`)."""

import diffrax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

from solvers import OdeSolver
from solvers._newton import NEWTON_MAX_STATES, StageChord, StageNewton, StageRootFinder

SCALE = 1e8


def _large_states(t, y, args):
    # dy/dt = -1000 (y - g) + g' with g = 1e8 (1 + sin(t) / 2): y = g from y(0) = 1e8
    g = SCALE * (1 + 0.5 * jnp.sin(t))
    return -1000.0 * (y - g) + 0.5 * SCALE * jnp.cos(t)


# (implicit Euler's stages end by the same rate test: with -m slow)
@pytest.mark.parametrize(
    "method", ["kvaerno5", pytest.param("implicit_euler", marks=pytest.mark.slow)]
)
def test_a_stiff_solve_with_states_of_1e8_reaches_the_exact_solution(method):
    """States of 1e8 with atol 1e-10: the stage residuals cannot fall below atol in
    floating point (rounding alone is 1e-8), so a Newton that waits for them never ends
    its iterations, rejects every step and runs out of steps (as optimistix's Newton with
    its residual test does below); `StageNewton` ends them by the contraction rate."""
    ts = jnp.linspace(0.0, 10.0, 11)
    rtol = 1e-8 if method == "kvaerno5" else 1e-4
    sol = OdeSolver(method=method, rtol=rtol, atol=1e-10, max_steps=200_000).solve(
        _large_states, ts, jnp.array([SCALE])
    )
    exact = SCALE * (1 + 0.5 * np.sin(np.asarray(ts)))
    error = np.max(np.abs(np.asarray(sol.ys[:, 0]) - exact) / exact)
    assert error < 100 * rtol, error
    assert int(sol.result) == 0 and int(sol.num_steps) < (
        1_000 if method == "kvaerno5" else 100_000
    ), int(sol.num_steps)

    # the same solve with the residual test alone does not finish: the check can fail
    residual_only = diffrax.Kvaerno5(
        root_finder=diffrax.with_stepsize_controller_tols(optx.Newton)()
    )
    failed = diffrax.diffeqsolve(
        diffrax.ODETerm(_large_states),
        residual_only,
        0.0,
        10.0,
        None,
        jnp.array([SCALE]),
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10),
        max_steps=1_000,
        throw=False,
    )
    assert failed.result == diffrax.RESULTS.max_steps_reached


def test_stage_newton_reads_the_iteration_state_of_the_installed_optimistix():
    """`StageNewton.terminate` reads optimistix's Newton state (`step`, `diffsize`,
    `diffsize_prev`, `result`): a root find through it converges to the root, ends by
    the rate test where the residual test cannot, and reports divergence."""
    # x^3 = 8 with a residual test at atol 0: only the rate test can end it
    solution = optx.root_find(
        lambda x, _: x**3 - 8.0,
        StageNewton(rtol=1e-10, atol=0.0),
        jnp.asarray(3.0),
        max_steps=50,
        throw=False,
    )
    assert solution.result == optx.RESULTS.successful and abs(float(solution.value) - 2.0) < 1e-12
    assert int(solution.stats["num_steps"]) < 20
    # x^(1/5) = 0: each Newton step maps x to -4x, corrections (in units of atol) grow
    # by 4 each time: diverged
    diverging = optx.root_find(
        lambda x, _: jnp.sign(x) * jnp.abs(x) ** 0.2,
        StageNewton(rtol=0.0, atol=1e-10),
        jnp.asarray(1.0),
        max_steps=50,
        throw=False,
    )
    assert diverging.result == optx.RESULTS.nonlinear_divergence
    assert int(diverging.stats["num_steps"]) <= 3


def test_implicit_methods_solve_small_states_by_newton_and_large_ones_by_chords():
    for method in ("kvaerno3", "kvaerno4", "kvaerno5", "implicit_euler"):
        assert isinstance(OdeSolver(method=method).diffrax_solver().root_finder, StageRootFinder), (
            method
        )
    for method in ("kencarp3", "kencarp4", "kencarp5"):  # (Newton at every size)
        assert isinstance(OdeSolver(method=method).diffrax_solver().root_finder, StageNewton), (
            method
        )
    finder = StageRootFinder(rtol=1e-8, atol=1e-10)  # (as diffeqsolve fills in the tolerances)
    assert isinstance(finder.inner(jnp.zeros(NEWTON_MAX_STATES)), StageNewton)
    assert isinstance(finder.inner({"a": jnp.zeros((8, 8)), "b": jnp.zeros(1)}), StageChord)


def test_the_chord_path_reaches_the_exact_solution_of_a_large_stiff_system():
    """100 states relaxing at rates 1 to 1e4 toward g(t) = 1 + sin(t) / 2, each with its
    own start: y_i = g + (y_i(0) - 1) exp(-k_i t), exactly. Solved by the chord method
    (more than NEWTON_MAX_STATES numbers)."""
    rates = jnp.geomspace(1.0, 1e4, 100)

    def field(t, y, args):
        g = 1 + 0.5 * jnp.sin(t)
        return -rates * (y - g) + 0.5 * jnp.cos(t)

    ts = jnp.linspace(0.0, 5.0, 6)
    y0 = jnp.linspace(0.0, 2.0, 100)
    sol = OdeSolver(method="kvaerno5", rtol=1e-8, atol=1e-10, max_steps=10_000).solve(field, ts, y0)
    t = np.asarray(ts)[:, None]
    exact = 1 + 0.5 * np.sin(t) + (np.asarray(y0) - 1) * np.exp(-np.asarray(rates) * t)
    np.testing.assert_allclose(np.asarray(sol.ys), exact, rtol=0, atol=1e-6)
    assert int(sol.result) == 0 and int(sol.num_steps) < 1_000, int(sol.num_steps)
