"""The SDE family: its name, its `[ensemble]` section and its built-in models by name.
Its numerics (`._numerics`: simulate, configs, runs, sweeps) are imported by the first
SDE work."""

from __future__ import annotations

import numpy as np
import pydantic

from physics.sde.base import SdeModel

from ..._config import SEED_MAX
from ..._family import STEP_CONTROL_KEYS, Drawable, Fittable, Sweepable, TextModels
from ..._registry import register_models_of


class EnsembleSection(pydantic.BaseModel):
    """`[ensemble]`: how many paths a run computes, and the seed of their Brownian motions
    (path i of a run uses `fold_in(key(seed), i)`)."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    paths: int = pydantic.Field(default=1, ge=1, le=10**7, description="paths per run")
    seed: int = pydantic.Field(
        default=0, ge=0, le=SEED_MAX, description="seed of the paths' Brownian motions"
    )
    devices: int = pydantic.Field(
        default=1,
        ge=1,
        description="split the paths of one run over this many local devices (it must divide "
        "paths; each path the same numbers as on one); `sim run --devices N` sets it",
    )


class SdeFamily(TextModels, Sweepable, Fittable, Drawable):
    name = "sde"
    model_base = SdeModel
    describes = "SDE models"
    sections = {"ensemble": EnsembleSection}
    devices_key = "ensemble.devices"
    solver_keys = {"max_steps": STEP_CONTROL_KEYS["max_steps"]}

    def text_model(self, config):
        options = config.spec.model.options
        if "noise" not in options:
            return None
        from ._numerics import text_model

        return text_model(config)

    def sweep_values(self, value, save: str, label: str):
        # An ensemble's trailing axis is its paths: a sweep figure shows their mean.
        if value.ndim == (3 if save == "full" else 2):
            return np.nanmean(value, axis=-1), f"{label} (mean of {value.shape[-1]} paths)"
        return value, label

    def draw_run(self, source):
        from ..._plot_run import ensemble

        return ensemble(source)

    def simulate(self, model, params, t, initial, solver, key):
        from ._numerics import simulate

        return simulate(model, params, t, initial, solver, key)

    def sweep_setup(self, config, s):
        if s.solver.devices > 1:
            raise config.error(
                "ensemble.devices",
                f"= {s.solver.devices} splits one run's paths over devices; a sweep splits its "
                "runs over the devices instead (sim sweep --devices N): leave ensemble.devices "
                "out",
            )
        return s

    def setup(self, model, config):
        from ._numerics import setup

        return setup(model, config)

    def plan(self, model, config):
        from ._numerics import plan

        return plan(model, config)

    def sweep_problem(self, s, params, initial, key):
        from ._numerics import sweep_problem

        return sweep_problem(s, params, initial, key)


register_models_of(
    "physics.sde",
    {
        "ornstein_uhlenbeck": "OrnsteinUhlenbeck",
        "geometric_brownian_motion": "GeometricBrownianMotion",
        "stochastic_lotka_volterra": "StochasticLotkaVolterra",
    },
)
SDE = SdeFamily()
