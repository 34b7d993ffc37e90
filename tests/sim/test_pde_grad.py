"""Gradients through PDE time stepping against central finite differences (float64)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from solvers import Etdrk, MethodOfLines


def _central(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_gradient_with_respect_to_viscosity_and_initial_field():
    model = sim.get_model("burgers", points=[64])
    (x,) = model.coordinates()
    u0 = jnp.asarray(np.sin(x) + 0.3 * np.cos(2 * x))
    t = jnp.asarray([0.0, 0.5])
    solver = Etdrk(steps_per_save=50)

    def loss_of(nu, u0):
        u = sim.simulate(model, {"viscosity": nu}, t, initial=u0, solver=solver).final_state
        return jnp.sum(u**3)

    # one program gives the loss and its gradient; the finite differences take the loss
    # from it too (the gradient of the compiled loss compiled two programs beside it)
    both = jax.jit(jax.value_and_grad(loss_of, argnums=(0, 1)))
    loss = lambda nu, u0: both(nu, u0)[0]  # noqa: E731
    nu = jnp.asarray(0.05)
    g_nu, g_u0 = both(nu, u0)[1]
    fd = _central(lambda v: loss(v, u0), nu, 1e-5)
    assert abs(g_nu - fd) / abs(fd) < 1e-5
    direction = jnp.asarray(np.cos(3 * x) + 0.5 * np.sin(x))
    fd_dir = _central(lambda e: loss(nu, u0 + e * direction), 0.0, 1e-5)
    assert abs(jnp.vdot(g_u0, direction) - fd_dir) / abs(fd_dir) < 1e-5


def _bounded_gradient_check(adjoint, value_and_derivative):
    model = sim.get_model("fisher_kpp", points=[21], domain=[[0.0, 1.0]])
    t = jnp.asarray([0.0, 0.5])
    # fixed steps: a smooth map of D
    solver = MethodOfLines(method="tsit5", adaptive=False, dt0=0.01, adjoint=adjoint)

    def loss(d):
        traj = sim.simulate(model, {"diffusivity": d, "rate": 2.0}, t, solver=solver)
        return traj.observables["mass"][-1]

    # one program gives the loss and its derivative; the finite differences take the loss
    # from it too (a program of the loss alone took about a second more)
    both = jax.jit(value_and_derivative(loss))
    d = jnp.asarray(0.01)
    g = both(d)[1]
    fd = _central(lambda x: both(x)[0], d, 1e-6)
    assert abs(g - fd) / abs(fd) < 1e-5


def test_gradient_with_respect_to_diffusivity_on_a_bounded_domain():
    # Reverse mode through the default adjoint (recursive checkpointing), as fits and
    # training take gradients.
    _bounded_gradient_check("recursive_checkpoint", jax.value_and_grad)


# Forward mode with `-m slow`: by default tests/solvers/test_ode.py checks the forward-mode
# adjoint (the same diffrax adjoint the method of lines uses), and the test above the
# derivative through this model's right-hand side.
@pytest.mark.slow
def test_forward_mode_gradient_with_respect_to_diffusivity_on_a_bounded_domain():
    _bounded_gradient_check("forward", lambda f: lambda d: jax.jvp(f, (d,), (jnp.ones_like(d),)))


def test_simulate_vmaps_over_parameters_and_jits():
    model = sim.get_model("heat", points=[16])
    (x,) = model.coordinates()
    t = jnp.asarray([0.0, 1.0])
    ds = jnp.asarray([0.1, 0.2, 0.3])

    @jax.jit
    def final(d):
        return sim.simulate(model, {"diffusivity": d}, t, initial=np.sin(x)).final_state[0]

    batch = jax.vmap(final)(ds)
    assert batch.shape == (3, 16)
    np.testing.assert_allclose(
        batch, np.exp(-np.asarray(ds))[:, None] * np.sin(x)[None], atol=1e-12
    )
