import jax.numpy as jnp
import pytest

import sim
from physics.ode import OdeModel

ODE_MODELS = [n for n in sim.model_names() if issubclass(sim.model_class(n), OdeModel)]


@pytest.mark.parametrize("name", ODE_MODELS)
def test_every_ode_model_declares_itself(name):
    model = sim.get_model(name)
    params = model.default_params()
    assert set(params) == set(model.parameter_names)
    for p in model.parameters:
        assert p.unit and p.doc
        if not isinstance(p.default, str):  # str defaults describe network weights the model builds
            assert p.violation(p.default) is None
    y0 = model.initial_state()
    dy = model.vector_field(jnp.zeros(()), y0, params)
    assert dy.shape == y0.shape and bool(jnp.all(jnp.isfinite(dy)))
    assert set(model.state_names) <= set(model.observable_names)
