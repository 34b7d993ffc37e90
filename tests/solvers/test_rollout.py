"""The checkpointed rollout: same numbers as a plain loop, and memory sublinear in steps."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import advance, rollout
from tests.helpers import fitted_order


def _step(u):
    # A nonlinear, non-trivial step (a damped logistic map on a vector).
    return u + 0.01 * (u * (1.0 - u) - 0.1 * jnp.roll(u, 1))


def _loop(u, n):
    for _ in range(n):
        u = _step(u)
    return u


@pytest.mark.parametrize("levels", [1, 2, 3])
@pytest.mark.parametrize("n", [0, 1, 7, 64, 101])
def test_advance_matches_a_python_loop(levels, n):
    u0 = jnp.linspace(0.1, 0.9, 5)
    np.testing.assert_allclose(advance(_step, u0, n, levels), _loop(u0, n), rtol=1e-14)


def test_rollout_saves_every_interval_and_the_initial_state():
    u0 = jnp.linspace(0.1, 0.9, 5)
    final, saved = rollout(
        _step, u0, 12, save_every=4, observe=lambda u: {"sum": jnp.sum(u), "u": u}
    )
    assert saved["u"].shape == (4, 5) and saved["sum"].shape == (4,)
    for i in range(4):
        np.testing.assert_allclose(saved["u"][i], _loop(u0, 4 * i), rtol=1e-14)
    np.testing.assert_allclose(final, _loop(u0, 12), rtol=1e-14)
    _, without = rollout(_step, u0, 12, save_every=4, include_initial=False)
    assert without.shape == (3, 5)


def test_rollout_rejects_a_save_interval_that_does_not_divide_the_steps():
    with pytest.raises(ValueError, match="save_every = 5 must divide n_steps = 12"):
        rollout(_step, jnp.ones(3), 12, save_every=5)
    with pytest.raises(ValueError, match="save_every"):
        rollout(_step, jnp.ones(3), 12, save_every=0)


@pytest.mark.parametrize("levels", [2, 3])
def test_checkpointed_gradients_equal_plain_gradients(levels):
    def loss(u0, levels):
        final, saved = rollout(_step, u0, 60, save_every=20, levels=levels)
        return jnp.sum(final**2) + jnp.sum(saved**3)

    u0 = jnp.linspace(0.1, 0.9, 5)
    np.testing.assert_allclose(jax.grad(loss)(u0, levels), jax.grad(loss)(u0, 1), rtol=1e-12)


def _backward_memory(n, levels):
    """Bytes of temporary buffers XLA assigns to the gradient of an n-step rollout of a
    1D pseudo-spectral step on 256 points (a deterministic compile-time figure)."""

    def step(u):
        u_hat = jnp.fft.rfft(u)
        symbol = (-(jnp.arange(129.0) ** 2) * 1e-3).astype(jnp.complex128)
        return u + 1e-3 * jnp.fft.irfft(symbol * u_hat, n=256) - 1e-3 * u**3

    def loss(u0):
        final, _ = rollout(step, u0, n, save_every=n, include_initial=False, levels=levels)
        return jnp.sum(final**2)

    u0 = jnp.sin(jnp.linspace(0.0, 2 * np.pi, 256))
    return jax.jit(jax.grad(loss)).lower(u0).compile().memory_analysis().temp_size_in_bytes


def test_reverse_mode_memory_grows_like_the_square_root_of_the_steps():
    # (each figure is a compile: three step counts, where the fixed buffers no longer
    # dominate; measured slopes 0.996 and 0.472, 0.989 and 0.460 with 100 steps as well)
    steps = [400, 1600, 6400]
    nested = [_backward_memory(n, 2) for n in steps]
    plain = [_backward_memory(n, 1) for n in steps]
    # Memory ~ steps^p: p ~ 1 for a plain scan, ~ 1/2 for two checkpoint levels.
    assert fitted_order(steps, plain) > 0.9
    assert fitted_order(steps, nested) < 0.6
    assert nested[-1] < plain[-1] / 20
