"""The ODE family's declaration: its name, its models and what a config of it may say.
Its numerics (`sim._ode`: the solver from a config, runs, sweeps) are imported by the
first ODE work (`sim._family.deferred`), so that `import sim`, `sim plot` and the runs of
other families do not import diffrax."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from physics import ode
from physics.ode import OdeModel

from ._family import Family, deferred, register_family
from ._registry import register_model, register_models_of

MODELS = (
    ode.LotkaVolterra,
    ode.Lorenz,
    ode.VanDerPol,
    ode.Sir,
    ode.DampedPendulum,
    ode.FitzHughNagumo,
    ode.Robertson,
)


class OdeFamily(Family):
    """Models dy/dt = f(t, y; params) (`physics.ode.OdeModel`), solved by
    `solvers.OdeSolver`."""

    name = "ode"
    model_base = OdeModel
    describes = "ODE models"
    traced_solver_floats = True

    def text_model(self, config):
        options = config.spec.model.options
        if "states" not in options or "noise" in options:
            return None
        if "fields" in options:
            raise ValueError("fields: a model has states (an ODE) or fields (a PDE), not both")
        return ode.ode_model(
            config.spec.model.name,
            options["states"],
            options.get("parameters"),
            options.get("observables"),
        )

    def observable_shapes(self, model) -> dict[str, tuple[int, ...]]:
        y = jnp.zeros(len(model.state_names))
        found = jax.eval_shape(lambda: model.observables(jnp.zeros(()), y, model.default_params()))
        return {name: tuple(value.shape) for name, value in found.items()}

    simulate = deferred("sim._ode", "OdeMethods", "simulate")
    with_events = deferred("sim._ode", "OdeMethods", "with_events")
    setup = deferred("sim._ode", "OdeMethods", "setup")
    plan = deferred("sim._ode", "OdeMethods", "plan")
    sweep_setup = deferred("sim._ode", "OdeMethods", "sweep_setup")
    sweep_problem = deferred("sim._ode", "OdeMethods", "sweep_problem")
    batched = deferred("sim._ode", "OdeMethods", "batched")


for _cls in MODELS:
    register_model(_cls)
# (the neural models, with equinox's layers, are imported when one is asked for)
register_models_of(
    "physics.ode", {"neural_ode": "NeuralOde", "hybrid_lotka_volterra": "HybridLotkaVolterra"}
)
ODE = register_family(OdeFamily())
