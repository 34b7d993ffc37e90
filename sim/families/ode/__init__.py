"""The ODE family: its name, its models and what a config of it may say. Its numerics
(`._numerics`: the solver from a config, runs, sweeps) are imported by the first ODE
work, so that `import sim`, `sim plot` and the runs of other families do not import
diffrax."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pydantic

from physics import ode
from physics.ode import OdeModel

from ..._family import STEP_CONTROL_KEYS, Events, Fittable, Sweepable, TextModels
from ..._registry import register_model, register_models_of

MODELS = (
    ode.LotkaVolterra,
    ode.Lorenz,
    ode.VanDerPol,
    ode.Sir,
    ode.DampedPendulum,
    ode.FitzHughNagumo,
    ode.Brusselator,
    ode.Robertson,
)


class OdeFamily(TextModels, Events, Sweepable, Fittable):
    """Models dy/dt = f(t, y; params) (`physics.ode.OdeModel`), solved by
    `solvers.OdeSolver`."""

    name = "ode"
    model_base = OdeModel
    describes = "ODE models"
    text_flags = ("stiff",)
    traced_solver_floats = True
    solver_keys = {
        "rtol": STEP_CONTROL_KEYS["rtol"],
        "atol": STEP_CONTROL_KEYS["atol"],
        "dt0": (
            float | None,
            pydantic.Field(default=None, gt=0, description="the first step (none: chosen)"),
        ),
        "max_steps": STEP_CONTROL_KEYS["max_steps"],
        "adjoint": STEP_CONTROL_KEYS["adjoint"],
    }

    def text_model(self, config):
        options = config.spec.model.options
        if "states" not in options or "noise" in options:
            return None
        if "fields" in options:
            raise ValueError("fields: a model has states (an ODE) or fields (a PDE), not both")
        stiff = options.get("stiff", False)
        if not isinstance(stiff, bool):
            raise ValueError(f"stiff: expected true or false, got {stiff!r}")
        return ode.ode_model(
            config.spec.model.name,
            options["states"],
            options.get("parameters"),
            options.get("observables"),
            stiff=stiff,
        )

    def observable_shapes(self, model) -> dict[str, tuple[int, ...]]:
        y = jnp.zeros(len(model.state_names))
        found = jax.eval_shape(lambda: model.observables(jnp.zeros(()), y, model.default_params()))
        return {name: tuple(value.shape) for name, value in found.items()}

    def fit_solver(self, s, gradient):
        # Failed trial solves become large residuals, not errors; the sensitivity
        # equations do not jump at events, so a model with events is differentiated
        # through its solve.
        adjoint = s.solver.adjoint if gradient == "reverse" else "forward"
        solver = dataclasses.replace(s.solver, throw=False, adjoint=adjoint)
        return solver, gradient == "forward_sensitivity" and not s.model.events()

    def sensitivities(self, model, solver):
        return True

    def forward_mode(self, solver):
        return dataclasses.replace(solver, adjoint="forward")

    def primal_solver(self, solver):
        # (an adjoint the lean core accepts: a diffrax solve's run-time checks of traced
        # save times keep a program out of the persistent compilation cache)
        return (
            dataclasses.replace(solver, adjoint="direct") if solver.adjoint == "forward" else solver
        )

    def dense_saves(self, solver):
        # (an ODE solve takes the same steps whatever its save times and fills them
        # from its dense output)
        return True

    def chains_spread(self, solver):
        # Explicit and implicit methods run as one-chain programs (a PEtab problem by
        # Kvaerno5 on 1 and 2 devices: the same draws). IMEX methods, of Python models
        # with a split right-hand side only, keep their chains vectorised on one device:
        # no such model's chain has been run as a one-chain program.
        return solver.kind != "imex"

    def preequilibrates(self, model, solver):
        return solver.kind != "imex"

    def simulate(self, model, params, t, initial, solver, key):
        from ._numerics import simulate

        return simulate(model, params, t, initial, solver)

    def with_events(self, model, config):
        from ._numerics import with_events

        return with_events(model, config)

    def setup(self, model, config):
        from ._numerics import setup

        return setup(model, config)

    def solver_notes(self, model, config):
        from ._numerics import solver_notes

        return solver_notes(model, config)

    def plan(self, model, config):
        from ._numerics import plan

        return plan(model, config)

    def sweep_setup(self, config, s):
        from ._numerics import sweep_setup

        return sweep_setup(config, s)

    def sweep_problem(self, s, params, initial, key):
        from ._numerics import sweep_problem

        return sweep_problem(s, params, initial, key)

    def batched(self, s, save):
        from ._numerics import batched

        return batched(s, save)


for _cls in MODELS:
    register_model(_cls)
# (the neural models, with equinox's layers, are imported when one is asked for)
register_models_of(
    "physics.ode", {"neural_ode": "NeuralOde", "hybrid_lotka_volterra": "HybridLotkaVolterra"}
)
ODE = OdeFamily()
