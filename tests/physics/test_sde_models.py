"""SDE models: declarations, noise kinds, observables (drift and diffusion against their
docstring equations: tests/physics/test_rhs_reference.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from physics import CONSTRAINTS, Parameter
from physics.ode import LotkaVolterra
from physics.sde import (
    NOISE_KINDS,
    GeometricBrownianMotion,
    OrnsteinUhlenbeck,
    SdeModel,
    StochasticLotkaVolterra,
)

SDE_MODELS = [OrnsteinUhlenbeck, GeometricBrownianMotion, StochasticLotkaVolterra]


def test_additive_noise_does_not_depend_on_the_state():
    model = OrnsteinUhlenbeck()
    p = model.default_params()
    g = [model.diffusion(jnp.asarray(0.0), jnp.array([x]), p) for x in (-5.0, 0.0, 7.0)]
    assert all(bool(jnp.all(gi == g[0])) for gi in g)


@pytest.mark.parametrize(
    "cls", [GeometricBrownianMotion, StochasticLotkaVolterra], ids=lambda c: c.name
)
def test_diagonal_noise_is_commutative(cls):
    # Milstein's method needs commutative noise; for diagonal noise that means each g_i
    # depends on y_i alone: the Jacobian of the diffusion is diagonal.
    model = cls()
    y = jnp.arange(2.0, 2.0 + len(model.state_names))
    jac = np.asarray(
        jax.jacfwd(lambda x: model.diffusion(jnp.asarray(0.0), x, model.default_params()))(y)
    )
    assert np.all(jac[~np.eye(len(y), dtype=bool)] == 0.0) and np.all(np.diag(jac) != 0.0)


@pytest.mark.parametrize("cls", SDE_MODELS, ids=lambda c: c.name)
def test_every_sde_model_declares_itself(cls):
    model = cls()
    assert isinstance(model, SdeModel) and model.noise in NOISE_KINDS
    assert model.name and model.description
    params = model.default_params()
    assert set(params) == set(model.parameter_names)
    assert len(model.parameter_names) == len(set(model.parameter_names))
    for p in model.parameters:
        assert p.unit and p.doc and p.constraint in CONSTRAINTS
        assert p.violation(p.default) is None
    assert model.initial_constraint in CONSTRAINTS
    y0 = model.initial_state()
    assert y0.shape == (len(model.state_names),)
    assert set(model.default_initial()) == set(model.state_names)
    for name, value in model.default_initial().items():
        # the default initial values satisfy the declared initial constraint
        assert (
            Parameter(name, float(value), "1", "initial value", model.initial_constraint).violation(
                value
            )
            is None
        )
    f = model.drift(jnp.zeros(()), y0, params)
    g = model.diffusion(jnp.zeros(()), y0, params)
    assert f.shape == y0.shape and g.shape == model.diffusion_shape
    assert bool(jnp.all(jnp.isfinite(f))) and bool(jnp.all(jnp.isfinite(g)))


# Declared units, constraints and defaults (the noise defaults are choices: 10% noise on
# each per-capita rate of the predator-prey model).
DECLARED = {
    "ornstein_uhlenbeck": {
        "theta": (1.0, "1/s", "positive"),
        "mu": (0.0, "1", "real"),
        "sigma": (0.5, "1/sqrt(s)", "nonnegative"),
    },
    "geometric_brownian_motion": {
        "mu": (0.05, "1/year", "real"),
        "sigma": (0.2, "1/sqrt(year)", "nonnegative"),
    },
    "stochastic_lotka_volterra": {
        "sigma_prey": (0.1, "1/sqrt(year)", "nonnegative"),
        "sigma_predator": (0.1, "1/sqrt(year)", "nonnegative"),
    },
}


@pytest.mark.parametrize("cls", SDE_MODELS, ids=lambda c: c.name)
def test_parameters_are_declared_with_units_and_constraints(cls):
    model = cls()
    for name, (default, unit, constraint) in DECLARED[model.name].items():
        p = model.parameter(name)
        assert (p.default, p.unit, p.constraint) == (default, unit, constraint), name


def test_stochastic_lotka_volterra_shares_the_deterministic_model():
    # Same drift parameters (names, defaults, units), states and initial values as the
    # ODE model, and the same drift as its vector field: the noise is the only addition.
    ode, sde = LotkaVolterra(), StochasticLotkaVolterra()
    assert sde.parameters[: len(ode.parameters)] == ode.parameters
    assert sde.state_names == ("prey", "predator") == ode.state_names
    assert sde.initial_defaults == ode.initial_defaults and sde.initial_units == ode.initial_units
    params = sde.default_params()
    y = jnp.array([12.0, 7.0])
    np.testing.assert_array_equal(sde.drift(0.0, y, params), ode.vector_field(0.0, y, params))
    assert sde.noise == "diagonal" and GeometricBrownianMotion.noise == "diagonal"
    assert OrnsteinUhlenbeck.noise == "additive"


@pytest.mark.parametrize("cls", SDE_MODELS, ids=lambda c: c.name)
def test_observables_are_the_named_state(cls):
    model = cls()
    assert model.observable_names == model.state_names
    y = jnp.arange(1.0, len(model.state_names) + 1.0)
    obs = model.observables(jnp.asarray(0.0), y, model.default_params())
    assert list(obs) == list(model.state_names)
    for i, name in enumerate(model.state_names):
        assert float(obs[name]) == float(y[i])
    named = model.initial_state({model.state_names[0]: jnp.asarray(3.25)})
    assert float(named[0]) == 3.25
    assert [float(v) for v in named[1:]] == [
        model.initial_defaults[n] for n in model.state_names[1:]
    ]


def toy_model(kind, dims=None):
    """A one-component SDE model declaring noise `kind` and `dims` Brownian motions."""

    class Toy(SdeModel):
        name = "toy"
        description = "a declaration to check"
        parameters = ()
        state_names = ("x",)
        initial_defaults = {"x": 0.0}
        noise = kind
        brownian_dims = dims

        def drift(self, t, y, params):
            return -y

        def diffusion(self, t, y, params):
            return jnp.ones((1, dims)) if kind == "general" else jnp.ones(1)

    return Toy


def test_misdeclared_models_are_refused():
    with pytest.raises(ValueError, match="'diagnoal' is not one of diagonal, additive, general"):
        toy_model("diagnoal")()
    with pytest.raises(ValueError, match="general noise needs brownian_dims"):
        toy_model("general")()
    with pytest.raises(ValueError, match="brownian_dims is for general noise only"):
        toy_model("diagonal", 2)()
    model = toy_model("general", 3)()
    assert model.diffusion_shape == (1, 3)
    assert model.diffusion(0.0, jnp.zeros(1), {}).shape == model.diffusion_shape
