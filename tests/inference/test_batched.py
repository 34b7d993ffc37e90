"""`inference._lbfgsb.run_batched`, the loop under every PEtab multistart: each start is a
thread running scipy's L-BFGS-B, the points they ask for evaluated together by one
vmapped call. The minima are checked against the exact minimum of a quadratic; the
early ends (a start that raises, an interrupt between rounds) against the threads left
behind: none, the other starts stopped where they waited."""

import threading

import jax.numpy as jnp
import numpy as np
import pytest

from inference import _lbfgsb

CENTRE = np.array([0.3, -1.2, 2.0])
SCALE = np.array([1.0, 4.0, 0.25])


def quadratic(x):
    value = jnp.sum(SCALE * (x - CENTRE) ** 2)
    return value, 2 * SCALE * (x - CENTRE)


def starts(n, seed=0):
    return np.random.default_rng(seed).uniform(-3.0, 3.0, (n, 3))


def test_every_start_reaches_the_exact_minimum():
    ends, values, success = _lbfgsb.minimize_batched(
        quadratic, starts(4), -5 * np.ones(3), 5 * np.ones(3), max_steps=100
    )
    # (scipy stops at a projected gradient of 1e-5: within 1e-5 / 0.5, the smallest
    # curvature, of the centre)
    np.testing.assert_allclose(ends, np.broadcast_to(CENTRE, (4, 3)), atol=2e-5)
    np.testing.assert_allclose(values, 0.0, atol=1e-9)
    assert success.all()


def test_a_start_within_bounds_that_exclude_the_minimum_stops_on_the_bound():
    # (x2 held within [-5, 1]: the minimum along it is the bound, 1, the others free)
    upper = np.array([5.0, 5.0, 1.0])
    ends, values, _ = _lbfgsb.minimize_batched(
        quadratic, starts(3), -5 * np.ones(3), upper, max_steps=100
    )
    np.testing.assert_allclose(ends, np.broadcast_to([0.3, -1.2, 1.0], (3, 3)), atol=2e-5)
    np.testing.assert_allclose(values, 0.25 * 1.0**2, rtol=1e-8)


def lbfgsb_tasks(points, *, fail_at=None, asks=None):
    """A task per point (L-BFGS-B on the quadratic); the task `fail_at` raises on its
    third evaluation; `asks[k]` counts task k's evaluations."""

    def task(k):
        def run(ask):
            def counted(x):
                asks[k] += 1
                if k == fail_at and asks[k] == 3:
                    raise ValueError("the model failed")
                return ask(x)

            return _lbfgsb._lbfgsb(counted, points[k], -5 * np.ones(3), 5 * np.ones(3), 100)

        return run

    return [task(k) for k in range(len(points))]


def test_a_start_that_raises_ends_the_run_and_leaves_no_thread():
    before = threading.active_count()
    asks = [0] * 4
    with pytest.raises(ValueError, match="the model failed"):
        _lbfgsb.run_batched(quadratic, lbfgsb_tasks(starts(4), fail_at=1, asks=asks), 3)
    assert threading.active_count() == before
    # (the others were stopped where they waited: no start ran on to its minimum alone)
    assert asks == [3, 3, 3, 3], asks


def test_an_interrupt_between_rounds_leaves_no_thread():
    before = threading.active_count()
    asks = [0] * 3

    def between(rounds):
        if rounds == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _lbfgsb.run_batched(quadratic, lbfgsb_tasks(starts(3), asks=asks), 3, between=between)
    assert threading.active_count() == before
    assert asks == [3, 3, 3]
