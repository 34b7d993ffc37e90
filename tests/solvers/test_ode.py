"""The diffrax ODE strategy: accuracy, convergence order, stiffness, failures, adjoints."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import OdeSolver, result_message
from tests.helpers import fitted_order


def oscillator(t, y, args):
    return jnp.stack([y[1], -args * y[0]])


def test_tsit5_observed_order_is_five():
    # Exact solution of y'' = -y with y(0) = 1, y'(0) = 0: y = cos t (harmonic oscillator).
    ts = jnp.linspace(0.0, 10.0, 2)
    y0 = jnp.array([1.0, 0.0])
    dts, errors = [], []
    for n in (16, 24, 32, 48, 64):
        dt = 10.0 / n
        # the step as an array: one compilation serves every step size
        solver = OdeSolver(method="tsit5", dt0=jnp.asarray(dt), adaptive=False)
        sol = solver.solve(oscillator, ts, y0, jnp.asarray(1.0))
        errors.append(abs(float(sol.ys[-1, 0]) - np.cos(10.0)))
        dts.append(dt)
    order = fitted_order(dts, errors)
    assert abs(order - 5.0) < 0.3, (order, errors)


# The default method and the implicit one by default; dopri5 is checked bit for bit
# against diffrax below, dopri8 against SciPy and an invariant in
# tests/physics/test_ode_reference.py; they repeat this check with `-m slow`.
@pytest.mark.parametrize(
    "method",
    [
        "tsit5",
        pytest.param("dopri5", marks=pytest.mark.slow),
        pytest.param("dopri8", marks=pytest.mark.slow),
        "kvaerno5",
    ],
)
def test_adaptive_methods_meet_tolerance(method):
    ts = jnp.linspace(0.0, 10.0, 11)
    sol = OdeSolver(method=method, rtol=1e-10, atol=1e-12).solve(
        oscillator, ts, jnp.array([1.0, 0.0]), jnp.asarray(1.0)
    )
    assert int(sol.result) == 0
    np.testing.assert_allclose(sol.ys[:, 0], np.cos(np.asarray(ts)), atol=1e-8)


def test_tolerance_change_does_not_recompile():
    ts = jnp.linspace(0.0, 1.0, 5)
    compiled = []

    @eqx.filter_jit
    def solve(solver):
        compiled.append(1)
        return solver.solve(oscillator, ts, jnp.array([1.0, 0.0]), jnp.asarray(1.0)).ys

    solve(OdeSolver(rtol=jnp.asarray(1e-6), atol=jnp.asarray(1e-8)))
    solve(OdeSolver(rtol=jnp.asarray(1e-9), atol=jnp.asarray(1e-11)))
    assert len(compiled) == 1


@pytest.mark.raising_checks
def test_failure_is_reported_not_silent():
    ts = jnp.linspace(0.0, 100.0, 3)
    quiet = OdeSolver(max_steps=4, throw=False)
    sol = quiet.solve(oscillator, ts, jnp.array([1.0, 0.0]), jnp.asarray(1.0))
    assert int(sol.result) != 0
    assert "max_steps" in result_message(int(sol.result))
    assert bool(jnp.all(jnp.isnan(sol.ys)))
    with pytest.raises(Exception, match="maximum number of solver steps"):
        OdeSolver(max_steps=4).solve(
            oscillator, ts, jnp.array([1.0, 0.0]), jnp.asarray(1.0)
        ).ys.block_until_ready()


def test_bad_solver_options_name_the_problem():
    with pytest.raises(ValueError, match="Perhaps you meant 'tsit5'"):
        OdeSolver(method="tsit4")
    with pytest.raises(ValueError, match="unknown adjoint"):
        OdeSolver(adjoint="magic")
    with pytest.raises(ValueError, match="needs dt0"):
        OdeSolver(adaptive=False)


@eqx.filter_jit  # compiled whole (quicker than the solve and its transpose apart), once per adjoint
def squares_gradient(k, solver):
    ts = jnp.linspace(0.0, 3.0, 7)
    y0 = jnp.array([1.0, 0.0])
    return jax.grad(lambda k: jnp.sum(solver.solve(oscillator, ts, y0, k).ys ** 2))(k)


def exact_squares_gradient(k: float) -> float:
    """d/dk of sum_t (y^2 + y'^2) for y'' = -k y, y(0) = 1, y'(0) = 0 at the times of
    `squares_gradient`: y = cos(w t), y' = -w sin(w t), w = sqrt(k), so each term
    cos^2 + k sin^2 has the derivative sin^2(w t) + (k - 1) t sin(2 w t) / (2 w)."""
    t = np.linspace(0.0, 3.0, 7)
    w = np.sqrt(k)
    return float(np.sum(np.sin(w * t) ** 2 + (k - 1.0) * t * np.sin(2 * w * t) / (2 * w)))


@pytest.mark.parametrize(
    "adjoint",
    [
        pytest.param("backsolve", marks=pytest.mark.slow),
        "direct",
        pytest.param("recursive_checkpoint", marks=pytest.mark.slow),
    ],
)
def test_adjoints_give_the_exact_gradient(adjoint):
    gradient = squares_gradient(
        jnp.asarray(2.0), OdeSolver(rtol=1e-10, atol=1e-12, adjoint=adjoint)
    )
    np.testing.assert_allclose(gradient, exact_squares_gradient(2.0), rtol=1e-6)


def test_forward_mode_adjoint_gives_jacobian():
    ts = jnp.linspace(0.0, 2.0, 3)
    y0 = jnp.array([1.0, 0.0])
    solver = OdeSolver(rtol=1e-10, atol=1e-12, adjoint="forward")
    jac = jax.jit(jax.jacfwd(lambda k: solver.solve(oscillator, ts, y0, k).ys[-1, 0]))(
        jnp.asarray(1.0)
    )  # (compiled whole: op by op took longer)
    # y = cos(sqrt(k) t): dy/dk = -sin(sqrt(k) t) t / (2 sqrt(k)); at k = 1, t = 2.
    np.testing.assert_allclose(jac, -np.sin(2.0) * 2.0 / 2.0, rtol=1e-7)


def test_matches_raw_diffrax():
    # The same steps, and the same values to rounding: the two are different programs,
    # and with LLVM's optimisations on (JAX_DISABLE_MOST_OPTIMIZATIONS=0) XLA may contract
    # their multiplications and additions differently (measured: 4e-15 apart).
    ts = jnp.linspace(0.0, 5.0, 11)
    y0 = jnp.array([1.0, 0.0])
    ours = OdeSolver(method="dopri5", rtol=1e-7, atol=1e-9).solve(
        oscillator, ts, y0, jnp.asarray(1.5)
    )
    raw = diffrax.diffeqsolve(
        diffrax.ODETerm(oscillator),
        diffrax.Dopri5(),
        ts[0],
        ts[-1],
        None,
        y0,
        jnp.asarray(1.5),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-7, atol=1e-9),
        max_steps=4096,
    )
    assert int(ours.num_accepted_steps) == int(raw.stats["num_accepted_steps"])
    assert int(ours.num_steps) == int(raw.stats["num_steps"])
    np.testing.assert_allclose(ours.ys, raw.ys, rtol=1e-13, atol=1e-14)


def test_imex_methods_take_the_right_hand_side_in_two_parts():
    # y' = -50 (y - cos t) - sin t has the exact solution y = cos t from y(0) = 1: the
    # stiff relaxation is the implicit part, the forcing the explicit one. A pair given to
    # an explicit or implicit method is summed.
    def stiff(t, y, args):
        return -50.0 * (y - jnp.cos(t))

    def forcing(t, y, args):
        return -jnp.sin(t)

    ts = jnp.linspace(0.0, 2.0, 5)
    for method in ("kencarp3", "tsit5"):
        sol = OdeSolver(method=method, rtol=1e-8, atol=1e-10).solve(
            (forcing, stiff), ts, jnp.array(1.0)
        )
        np.testing.assert_allclose(sol.ys, np.cos(ts), atol=1e-6, err_msg=method)
    with pytest.raises(TypeError, match="kencarp3 needs the right-hand side as a pair"):
        OdeSolver(method="kencarp3").solve(stiff, ts, jnp.array(1.0))
    assert OdeSolver(method="kencarp4").kind == "imex" and OdeSolver(method="kvaerno3").implicit
