"""The MD family: its name, its `[system]` and `[rdf]` sections, `[time]` keys and
`[checks]`, and its built-in models by name. Its numerics (`._numerics`, `._config`,
`._runs`, `._h5md`, `._limits`, `._molecules`, `._rdf`: systems, runs, files, sweeps) are
imported by the first MD work."""

from __future__ import annotations

import pydantic

from physics.md.base import ParticleModel

from ..._config import Value
from ..._family import Drawable, Driven, Fittable, Sweepable
from ..._registry import register_models_of


class MdFamily(Driven, Sweepable, Fittable, Drawable):
    """Particles under pair (and bonded) forces, integrated by `solvers.ParticleSolver`;
    runs write H5MD."""

    name = "md"
    model_base = ParticleModel
    describes = "MD models"
    devices_key = "solver.slabs"
    sections = {"system": dict[str, Value], "rdf": dict[str, Value]}
    time_keys = {
        "steps": (
            int | None,
            pydantic.Field(default=None, ge=1, description="MD: the number of steps of dt"),
        ),
        "save_every": (
            int | None,
            pydantic.Field(default=None, ge=1, description="MD: a frame every this many steps"),
        ),
    }
    checks = {
        "energy_drift": (
            0.1,
            "the largest |E(t) - E(0)| allowed (verlet, nose_hoover and barostats), as a fraction "
            "of the initial energy scale max(|E(0)|, K(0)); E is the total energy (the conserved "
            "energy of a Nose-Hoover chain or a barostat), K the kinetic energy",
        ),
        "max_temperature_factor": (
            100.0,
            "the largest temperature allowed, as a multiple of the reference max(thermostat "
            "temperature, 2 max(|E(0)|, K(0)) / degrees of freedom), at least the initial "
            "temperature",
        ),
    }
    static_runs = True
    no_free_initial = "MD runs have no initial values to fit; they start from [system]"

    def draw_run(self, source):
        from ..._plot_run import md

        return md(source)

    def recognises(self, record) -> bool:
        return "h5md" in record or "particles" in record

    def simulate(self, model, params, t, initial, solver, key):
        from ._runs import run_md

        return run_md(model, params, t, initial=initial, solver=solver, key=key)

    def drive(self, model, params, t, initial, solver, key):
        from ._runs import run_md

        return run_md(model, params, t, initial=initial, solver=solver, key=key)

    def setup(self, model, config):
        from ._config import setup

        return setup(model, config)

    def plan(self, model, config):
        from ._numerics import plan

        return plan(model, config)

    def fit_solver(self, s, gradient):
        # The list cannot grow inside a compiled fit (an overflow makes the run NaN, never wrong).
        from ._numerics import _fixed_list

        return _fixed_list(s), False

    def sweep_setup(self, config, s):
        from ._numerics import sweep_setup

        return sweep_setup(config, s)

    def run_bounds(self, s):
        from ._limits import MdLimits

        return MdLimits.of(s).within

    def resized(self, s, size):
        from ._numerics import with_capacity

        return with_capacity(s, size)

    def settle(self, s, values, rerun):
        from ._numerics import settle_overflows

        return settle_overflows(s, values, rerun)

    def sweep_problem(self, s, params, initial, key):
        from ._runs import sweep_problem

        return sweep_problem(s, params, key)


register_models_of(
    "physics.md",
    {
        "lennard_jones": "LennardJones",
        "wca": "Wca",
        "morse": "Morse",
        "soft_sphere": "SoftSphere",
        "bead_spring": "BeadSpring",
        "lj_coulomb": "LennardJonesCoulomb",
    },
)
MD = MdFamily()
