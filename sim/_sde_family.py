"""The SDE family's declaration: its name, its `[ensemble]` section and its built-in
models by name. Its numerics (`sim._sde`: simulate, configs, runs, sweeps) are imported
by the first SDE work (`sim._family.deferred`)."""

from __future__ import annotations

import numpy as np
import pydantic

from physics.sde.base import SdeModel

from ._config import SEED_MAX
from ._family import Family, deferred, register_family
from ._registry import register_models_of


class EnsembleSection(pydantic.BaseModel):
    """`[ensemble]`: how many paths a run computes, and the seed of their Brownian motions
    (path i of a run uses `fold_in(key(seed), i)`)."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    paths: int = pydantic.Field(default=1, ge=1, le=10**7)
    seed: int = pydantic.Field(default=0, ge=0, le=SEED_MAX)


class SdeFamily(Family):
    name = "sde"
    model_base = SdeModel
    describes = "SDE models"
    sections = {"ensemble": EnsembleSection}

    def text_model(self, config):
        options = config.spec.model.options
        if "noise" not in options:
            return None
        return deferred("sim._sde", "SdeMethods", "text_model")(self, config)

    def sweep_values(self, value, save: str, label: str):
        # An ensemble's trailing axis is its paths: a sweep figure shows their mean.
        if value.ndim == (3 if save == "full" else 2):
            return np.nanmean(value, axis=-1), f"{label} (mean of {value.shape[-1]} paths)"
        return value, label

    def draw_run(self, source):
        from ._plot_run import ensemble

        return ensemble(source)

    simulate = deferred("sim._sde", "SdeMethods", "simulate")
    setup = deferred("sim._sde", "SdeMethods", "setup")
    plan = deferred("sim._sde", "SdeMethods", "plan")
    sweep_problem = deferred("sim._sde", "SdeMethods", "sweep_problem")


register_models_of(
    "physics.sde",
    {
        "ornstein_uhlenbeck": "OrnsteinUhlenbeck",
        "geometric_brownian_motion": "GeometricBrownianMotion",
        "stochastic_lotka_volterra": "StochasticLotkaVolterra",
    },
)
SDE = register_family(SdeFamily())
