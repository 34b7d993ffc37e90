"""`OdeSolver.steady_state` and its derivative, against exact steady states."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import OdeSolver

# (the derivative does not depend on the method that found the steady state: the
# non-stiff cases take tsit5, which compiles in a fraction of kvaerno5's time)
SOLVER = OdeSolver(method="tsit5", rtol=1e-10, atol=1e-12)


def relax(t, y, args):
    k, c = args
    return -k * (y - c)


def exchange(t, y, rates):
    # A <-> B at rates k1 (forward) and k2 (back): A + B is conserved and the steady
    # state is A* = T k2 / (k1 + k2), B* = T k1 / (k1 + k2) with T = A0 + B0.
    flux = rates[0] * y[0] - rates[1] * y[1]
    return jnp.stack([-flux, flux])


def test_a_start_at_the_steady_state_moves_with_it():
    # dy/dt = -k (y - c) started at y = c: the solve stops at once, its sensitivities are
    # those of its start (zero), but the steady state is c: dy*/dc = 1, dy*/dk = 0 and
    # dy*/dy0 = 0, by forward and by reverse mode.
    args, y0 = (jnp.asarray(2.0), jnp.asarray(3.0)), jnp.array([3.0])
    steady = lambda a, y: (lambda v: (v, v))(SOLVER.steady_state(relax, y, a))  # noqa: E731
    for jac in (jax.jacfwd, jax.jacrev):
        # (the steady state as the derivative's aux: one program gives both)
        ((d_k, d_c), d_y0), value = jax.jit(jac(steady, argnums=(0, 1), has_aux=True))(args, y0)
        np.testing.assert_allclose(value, [3.0], rtol=1e-12)
        np.testing.assert_allclose(np.ravel(d_c), [1.0], rtol=1e-12)
        np.testing.assert_allclose(np.ravel(d_k), [0.0], atol=1e-12)
        np.testing.assert_allclose(np.ravel(d_y0), [0.0], atol=1e-12)


@pytest.mark.slow
def test_the_derivative_of_a_solve_stopped_at_the_steady_state_is_not_that_of_the_steady_state():
    # The derivative of the stopped solve itself, which `steady_state` replaces, is far
    # from the steady state's dy*/dc = 1 (above).
    y0 = jnp.array([3.0])

    def stopped(c):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, c: relax(t, y, (2.0, c))), diffrax.Tsit5(), 0.0, jnp.inf,
            None, y0, c,
            saveat=diffrax.SaveAt(t1=True),
            stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-12),
            event=diffrax.Event(diffrax.steady_state_event()),
        )  # fmt: skip

    assert stopped(jnp.asarray(3.0)).result == diffrax.RESULTS.event_occurred
    d_c_stopped = float(jax.grad(lambda c: stopped(c).ys[-1, 0])(jnp.asarray(3.0)))
    assert abs(d_c_stopped - 1.0) > 0.5, d_c_stopped


def test_a_conserved_total_follows_the_start():
    rates, y0 = jnp.array([0.7, 0.3]), jnp.array([2.0, 1.0])
    k1, k2, total = 0.7, 0.3, 3.0
    steady = lambda r, y: (lambda v: (v, v))(SOLVER.steady_state(exchange, y, r))  # noqa: E731
    d_a_d_rates = [-total * k2 / (k1 + k2) ** 2, total * k1 / (k1 + k2) ** 2]
    for jac in (jax.jacfwd, jax.jacrev):
        # (the steady state as the derivative's aux: one program gives both)
        (d_rates, d_y0), value = jax.jit(jac(steady, argnums=(0, 1), has_aux=True))(rates, y0)
        np.testing.assert_allclose(
            value, [total * k2 / (k1 + k2), total * k1 / (k1 + k2)], rtol=1e-9
        )
        np.testing.assert_allclose(d_rates[0], d_a_d_rates, rtol=1e-8)
        np.testing.assert_allclose(d_rates[1], -np.asarray(d_a_d_rates), rtol=1e-8)
        np.testing.assert_allclose(d_y0, [[k2 / (k1 + k2)] * 2, [k1 / (k1 + k2)] * 2], rtol=1e-8)


def test_a_slow_direction_that_is_not_conserved_is_not_taken_for_one():
    # Two independent decays to c1 and c2, one a million times slower (a singular value of
    # the Jacobian 1e-6 of the largest): its steady state is still c2 whatever the start.
    def field(t, y, c):
        return jnp.stack([-1.0 * (y[0] - c[0]), -1e-6 * (y[1] - c[1])])

    c, y0 = jnp.array([1.0, 2.0]), jnp.array([0.0, 0.0])

    def steady(c, y):  # (the steady state twice: to differentiate, and as it is)
        value = OdeSolver(
            method="kvaerno5", rtol=1e-10, atol=1e-12, max_steps=100_000
        ).steady_state(field, y, c)
        return value, value

    # (one trace of the implicit solve gives the steady state and its derivative)
    (d_c, d_y0), value = jax.jacrev(steady, argnums=(0, 1), has_aux=True)(c, y0)
    # (the solve stops once the field is below the tolerances: on the slow decay that
    # is 1e-4 short of its end, 1e-6 x 2e-4 against rtol x 2)
    np.testing.assert_allclose(value, [1.0, 2.0], rtol=2e-4)
    np.testing.assert_allclose(d_c, np.eye(2), atol=1e-9)
    np.testing.assert_allclose(d_y0, np.zeros((2, 2)), atol=1e-9)


def test_a_failed_solve_has_a_nan_derivative():
    def runaway(t, y, k):
        return k * y  # grows without end: no steady state, the step budget runs out

    def steady(k):  # (the steady state twice: to differentiate, and as it is)
        value = OdeSolver(method="tsit5", max_steps=50).steady_state(runaway, jnp.array([1.0]), k)
        return value, value

    # (one program gives the steady state and its derivative)
    derivative, value = jax.jit(jax.jacfwd(steady, has_aux=True))(jnp.asarray(1.0))
    assert np.isnan(value).all()
    assert np.isnan(derivative).all()
