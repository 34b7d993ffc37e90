"""The PDE family's declaration: its name, its `[grid]` section, its `[checks]` and its
built-in models by name. Its numerics (`sim._pde` and the `sim._pde_*` modules it imports:
simulate, configs, runs, sweeps) are imported by the first PDE work
(`sim._family.deferred`)."""

from __future__ import annotations

from physics.pde.base import PdeModel

from ._config import Value
from ._family import Family, deferred, register_family
from ._registry import register_models_of


class PdeFamily(Family):
    """Fields on a grid: periodic spectral models (`SpectralPdeModel`, ETDRK) and
    finite-difference models on bounded domains (`GridPdeModel`, method of lines)."""

    name = "pde"
    model_base = PdeModel
    describes = "PDE models"
    sections = {"grid": dict[str, Value]}
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
        return deferred("sim._pde", "PdeMethods", "text_model")(self, config)

    def draw_run(self, source):
        from ._plot_run import pde

        return pde(source)

    def recognises(self, record) -> bool:
        return "grid" in record

    def observable_shapes(self, model) -> dict[str, tuple[int, ...]]:
        grid = tuple(int(n) for n in model.points)
        return {name: grid if name in model.field_names else () for name in model.observable_names}

    model_options = deferred("sim._pde", "PdeMethods", "model_options")
    simulate = deferred("sim._pde", "PdeMethods", "simulate")
    setup = deferred("sim._pde", "PdeMethods", "setup")
    plan = deferred("sim._pde", "PdeMethods", "plan")
    sweep_setup = deferred("sim._pde", "PdeMethods", "sweep_setup")
    run_bounds = deferred("sim._pde", "PdeMethods", "run_bounds")
    sweep_problem = deferred("sim._pde", "PdeMethods", "sweep_problem")


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
        "heat_fd": "HeatFd",
        "fisher_kpp": "FisherKpp",
    },
)
PDE = register_family(PdeFamily())
