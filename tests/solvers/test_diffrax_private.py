"""Pins each private diffrax detail that `solvers/_diffrax_private.py` reproduces against
the installed diffrax: an upgrade that changes one fails here, by name."""

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
from diffrax._misc import linear_rescale as diffrax_linear_rescale
from diffrax._solver.tsit5 import _Tsit5Interpolation

from solvers import _diffrax_private as private


def test_the_imported_markers_exist():
    assert private.WrapTerm is not None and private.USE_STEPSIZE_TOL is not None


def test_tsit5_dense_output_weights():
    key = jax.random.key(0)
    ks = jax.random.normal(key, (7, 3))
    y0 = jnp.array([0.3, -1.0, 2.0])
    interp = _Tsit5Interpolation(t0=jnp.asarray(1.0), t1=jnp.asarray(1.5), y0=y0, y1=y0, k=ks)
    for t in np.linspace(1.0, 1.5, 7):
        w = private.tsit5_dense_weights(private.linear_rescale(1.0, t, 1.5))
        mine = y0 + sum(w[j] * ks[j] for j in range(7))
        np.testing.assert_allclose(mine, interp.evaluate(t), rtol=1e-14, atol=1e-15)


def test_linear_rescale_and_the_end_clip():
    for a, t, b in [(0.0, 0.25, 1.0), (2.0, 2.0, 2.0), (-1.0, 3.0, 5.0)]:
        assert float(private.linear_rescale(a, t, b)) == float(diffrax_linear_rescale(a, t, b))
    for t1 in (1.0, 1e-3, 7.25e5):
        floor = jnp.asarray(t1)
        for _ in range(100):
            floor = eqxi.prevbefore(floor)
        assert float(private.clip_floor(jnp.asarray(t1))) == float(floor)


def test_the_first_step_of_diffeqsolve_without_dt0():
    # diffeqsolve wraps its terms, so the PID controller starts with the fixed step.
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, a: -y),
        diffrax.Tsit5(),
        0.0,
        1.0,
        None,
        jnp.array([1.0]),
        stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8),
        saveat=diffrax.SaveAt(steps=True),
        max_steps=64,
    )
    assert float(sol.ts[0]) == private.FIRST_STEP


def test_error_order_is_the_controllers_choice():
    term = diffrax.ODETerm(lambda t, y, a: -y)
    assert (
        private.error_order(diffrax.PIDController(rtol=1e-6, atol=1e-8), diffrax.Tsit5(), term) == 5
    )
    assert (
        private.error_order(
            diffrax.PIDController(rtol=1e-6, atol=1e-8, error_order=3), diffrax.Tsit5(), term
        )
        == 3
    )
