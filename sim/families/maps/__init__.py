"""The family of discrete-time maps (`physics.maps.MapModel`): its name and its built-in
models by name. Its numerics (`._numerics`: iterating, configs, runs) are imported by
the first work of the family."""

from __future__ import annotations

from physics.maps.base import MapModel

from ..._family import Drawable
from ..._registry import register_models_of


class MapFamily(Drawable):
    """Maps y_{n+1} = f(n, y_n; params) iterated from the first save time; save times
    are iteration counts (whole numbers)."""

    name = "map"
    model_base = MapModel
    describes = "discrete maps"

    def draw_run(self, source):
        # Each saved iterate a point over the step count (`ode(discrete=True)`).
        from ..._plot_run import ode

        return ode(source, discrete=True)

    def simulate(self, model, params, t, initial, solver, key):
        from ._numerics import simulate

        return simulate(model, params, t, initial)

    def setup(self, model, config):
        from ._numerics import setup

        return setup(model, config)

    def plan(self, model, config):
        from ._numerics import plan

        return plan(model, config)


register_models_of("physics.maps", {"logistic_map": "LogisticMap", "henon_map": "HenonMap"})
MAP = MapFamily()
