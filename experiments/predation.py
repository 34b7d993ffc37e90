"""A model in a Python file of its own, for `[model] source = "predation.py:RosenzweigMacArthur"`.

The Rosenzweig-MacArthur predator-prey model: logistic prey growth and a predator whose
intake saturates (Holling type II), the classic model of the "paradox of enrichment"
(Rosenzweig 1971; Rosenzweig and MacArthur 1963). Any model class of a family can be
written this way; `sim models experiments/predation.py` lists the ones this file defines.
"""

from typing import ClassVar

import jax.numpy as jnp

from physics import Parameter
from physics.ode import OdeModel


class RosenzweigMacArthur(OdeModel):
    """Prey x and predator y: dx/dt = r x (1 - x/K) - a x y / (1 + a h x),
    dy/dt = c a x y / (1 + a h x) - m y."""

    name: ClassVar[str] = "rosenzweig_macarthur"
    description: ClassVar[str] = "predator-prey with logistic prey and saturating predation"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("r", 1.0, "1/year", "prey growth rate", "positive"),
        Parameter("K", 3.0, "thousand", "prey carrying capacity", "positive"),
        Parameter("a", 1.0, "1/(year*thousand)", "attack rate", "positive"),
        Parameter("h", 1.0, "year", "handling time", "positive"),
        Parameter("c", 0.5, "1", "conversion efficiency", "positive"),
        Parameter("m", 0.2, "1/year", "predator death rate", "positive"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("prey", "predator")
    initial_defaults: ClassVar[dict[str, float]] = {"prey": 1.0, "predator": 0.5}
    initial_units: ClassVar[str] = "thousand"
    initial_constraint: ClassVar[str] = "positive"

    def vector_field(self, t, y, params):
        x, z = y[0], y[1]
        intake = params["a"] * x / (1.0 + params["a"] * params["h"] * x)
        dx = params["r"] * x * (1.0 - x / params["K"]) - intake * z
        dz = params["c"] * intake * z - params["m"] * z
        return jnp.stack([dx, dz])
