"""A spectral stepper: ETDRK coefficients built once per parameter set and step, reused."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from solvers import Etdrk

T = jnp.linspace(0.0, 0.5, 6)


@pytest.fixture(scope="module")
def burgers():
    return sim.get_model("burgers", points=[64])


def test_stepper_runs_equal_simulate(burgers):
    solver = Etdrk(order=4, steps_per_save=5)
    stepper = sim.spectral_stepper(burgers, {"viscosity": 0.07}, 0.02, solver=solver)
    run = eqx.filter_jit(lambda s, u0: s.simulate(T, initial=u0).final_state)
    (x,) = burgers.coordinates()
    for u0 in (np.sin(x), np.cos(2 * x) + 0.3):
        expected = sim.simulate(
            burgers, {"viscosity": 0.07}, T, initial=u0, solver=solver
        ).final_state
        # Equal to rounding: dt = 0.02 given vs (t[1] - t[0]) / 5 computed, separate compilations.
        np.testing.assert_allclose(run(stepper, jnp.asarray(u0)), expected, rtol=0, atol=1e-14)


@pytest.mark.raising_checks
def test_stepper_refuses_save_times_of_another_step(burgers):
    stepper = sim.spectral_stepper(burgers, None, 0.02, solver=Etdrk(steps_per_save=5))
    with pytest.raises(eqx.EquinoxRuntimeError, match="another step"):
        stepper.simulate(jnp.linspace(0.0, 0.5, 11))


def test_gradient_through_a_stepper_built_from_the_parameters(burgers):
    solver = Etdrk(order=1, steps_per_save=5, checkpoint_levels=1)  # small graphs: quick to compile
    (x,) = burgers.coordinates()
    u0 = jnp.asarray(np.sin(x))

    def via_stepper(nu):
        stepper = sim.spectral_stepper(burgers, {"viscosity": nu}, 0.02, solver=solver)
        return jnp.sum(stepper.simulate(T, initial=u0).final_state ** 2)

    def via_simulate(nu):
        return jnp.sum(
            sim.simulate(burgers, {"viscosity": nu}, T, initial=u0, solver=solver).final_state ** 2
        )

    g1, g2 = jax.jit(jax.grad(via_stepper))(0.07), jax.jit(jax.grad(via_simulate))(0.07)
    assert float(g1) != 0.0
    np.testing.assert_allclose(g1, g2, rtol=1e-10)
