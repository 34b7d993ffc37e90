"""Neural ODE models by name: `sim models` lists them and configs name them."""

from __future__ import annotations

from physics import ode

from ._registry import register_model

MODELS = (ode.NeuralOde, ode.HybridLotkaVolterra)
for _cls in MODELS:
    register_model(_cls)
