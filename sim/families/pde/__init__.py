"""The PDE family: its name, its `[grid]` section, its `[checks]` and its built-in
models by name. Its numerics (`._numerics`, `._config`, `._solve`: simulate, configs, runs,
sweeps) are imported by the first PDE work."""

from __future__ import annotations


from physics.pde.base import PdeModel

from ..._config import Value
from ..._family import STEP_CONTROL_KEYS, Drawable, Fittable, Sweepable, TextModels
from ..._registry import register_models_of


class PdeFamily(TextModels, Sweepable, Fittable, Drawable):
    """Fields on a grid: periodic spectral models (`SpectralPdeModel`, ETDRK) and
    finite-difference models on bounded domains (`GridPdeModel`, method of lines)."""

    name = "pde"
    model_base = PdeModel
    describes = "PDE models"
    sections = {"grid": dict[str, Value]}
    devices_key = "grid.devices"
    # (of the method of lines; spectral solvers take none of them)
    solver_keys = STEP_CONTROL_KEYS
    checks = {
        "max_growth": (
            1000.0,
            "the largest root-mean-square of the fields (all of them, over the grid) allowed, as a "
            "multiple of max(its initial value, growth_floor)",
        ),
        "growth_floor": (
            1.0,
            "the floor of that reference, so that a field starting at or near zero may grow to "
            "max_growth * growth_floor (in the field's units)",
        ),
    }

    def text_model(self, config):
        options = config.spec.model.options
        if "fields" not in options or "states" in options or "noise" in options:
            return None
        from ._numerics import text_model

        return text_model(config)

    def draw_run(self, source):
        from ..._plot_run import pde

        return pde(source)

    def recognises(self, record) -> bool:
        return "grid" in record

    def observable_shapes(self, model) -> dict[str, tuple[int, ...]]:
        grid = tuple(int(n) for n in model.points)
        return {name: grid if name in model.field_names else () for name in model.observable_names}

    def model_options(self, config):
        from ._numerics import model_options

        return model_options(config)

    def simulate(self, model, params, t, initial, solver, key):
        from ._numerics import simulate

        return simulate(model, params, t, initial, solver, key)

    def setup(self, model, config):
        from ._numerics import setup

        return setup(model, config)

    def plan(self, model, config):
        from ._numerics import plan

        return plan(model, config)

    def sweep_setup(self, config, s):
        from ._numerics import sweep_setup

        return sweep_setup(config, s)

    def run_bounds(self, s):
        from ._numerics import run_bounds

        return run_bounds(s)

    def sweep_problem(self, s, params, initial, key):
        from ._numerics import sweep_problem

        return sweep_problem(s, params, initial, key)


register_models_of(
    "physics.pde",
    {
        "heat": "Heat",
        "advection_diffusion": "AdvectionDiffusion",
        "burgers": "Burgers",
        "kdv": "KortewegDeVries",
        "kuramoto_sivashinsky": "KuramotoSivashinsky",
        "allen_cahn": "AllenCahn",
        "gray_scott": "GrayScott",
        "navier_stokes_2d": "NavierStokes2d",
        "navier_stokes_3d": "NavierStokes3d",
        "heat_fd": "HeatFd",
        "fisher_kpp": "FisherKpp",
    },
)
PDE = PdeFamily()
