"""The MD family's declaration: its name, its `[system]` section, `[time]` keys and
`[checks]`, and its built-in models by name. Its numerics (`sim._md` and the
`sim._md_*` modules it imports: systems, simulate, configs, runs, sweeps) are imported by
the first MD work (`sim._family.deferred`)."""

from __future__ import annotations

import pydantic

from physics.md.base import ParticleModel

from ._config import Value
from ._family import Family, deferred, register_family
from ._registry import register_models_of


class MdFamily(Family):
    name = "md"
    model_base = ParticleModel
    describes = "MD models"
    sections = {"system": dict[str, Value], "rdf": dict[str, Value]}
    time_keys = {
        "steps": (int | None, pydantic.Field(default=None, ge=1)),
        "save_every": (int | None, pydantic.Field(default=None, ge=1)),
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
        from ._plot_run import md

        return md(source)

    def recognises(self, record) -> bool:
        return "h5md" in record or "particles" in record

    simulate = deferred("sim._md", "MdMethods", "simulate")
    drive = deferred("sim._md", "MdMethods", "drive")
    setup = deferred("sim._md", "MdMethods", "setup")
    plan = deferred("sim._md", "MdMethods", "plan")
    fit_solver = deferred("sim._md", "MdMethods", "fit_solver")
    sweep_setup = deferred("sim._md", "MdMethods", "sweep_setup")
    run_bounds = deferred("sim._md", "MdMethods", "run_bounds")
    resized = deferred("sim._md", "MdMethods", "resized")
    settle = deferred("sim._md", "MdMethods", "settle")
    sweep_problem = deferred("sim._md", "MdMethods", "sweep_problem")


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
MD = register_family(MdFamily())
