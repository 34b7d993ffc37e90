"""The sections of an MD config (`sim run`): [params] into the model and its parameters,
[system] into the starting particles, [time] into save times, [solver] into the
integrator and neighbour list, all checked into one `Setup`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import pydantic
from jaxtyping import Array

from physics import float_array
from physics.md import (
    LATTICES,
    UNITS,
    ParticleModel,
    System,
    Units,
    lattice,
    other_method_options,
    random_packing,
    read_h5md,
    thermalize,
    unit_system,
)
from solvers import (
    COUPLINGS,
    LangevinBaoab,
    NeighbourList,
    NoseHooverChain,
    ParticleSolver,
    StochasticCellRescaling,
    VelocityVerlet,
    did_you_mean,
)

from ..._config import Config, seed_problem
from ..._limits import memory_problem, physical_memory
from ..._registry import model_options
from ..._run import Setup, number, resolve_params
from . import MD
from ._molecules import file_molecules, molecular_system, water_params, with_constraints
from ._rdf import rdf_spec
from ._runs import DEFAULT_DT, check_system

DEFAULT_SKIN = {"reduced": 0.3, "real": 0.1}
"""The neighbour-list skin by unit system: 0.3 sigma, 0.1 nm."""
DEFAULT_COMPRESSIBILITY = {"reduced": 0.1, "real": 4.5e-5}
"""The barostat's compressibility estimate by unit system (real: water's, 1/bar)."""
# Memory per particle at least: positions, velocities, forces and their copies, and a
# neighbour list of some tens of ids.
PARTICLE_BYTES = 1024


class MdSolverExtras(pydantic.BaseModel):
    """The `[solver]` keys of MD runs beyond `method` and `dtype` (`method`: verlet,
    langevin or nose_hoover; a thermostat's keys go with its method)."""

    temperature: float | None = pydantic.Field(
        None,
        description="the thermostat's temperature (langevin, nose_hoover; required there)",
        json_schema_extra={"unit": "temperature (K in real units)"},
    )
    friction: float = pydantic.Field(
        1.0, description="Langevin friction coefficient", json_schema_extra={"unit": "1/time"}
    )
    tau: float | None = pydantic.Field(
        None,
        description="Nose-Hoover coupling time",
        json_schema_extra={"unit": "time", "default": "100 * dt"},
    )
    chain_length: int = pydantic.Field(3, description="thermostats in the Nose-Hoover chain")
    barostat: dict[str, Any] | None = pydantic.Field(
        None,
        description="stochastic cell rescaling at a pressure: a table of the keys below "
        "(solver.barostat.*)",
    )
    skin: float | None = pydantic.Field(
        None,
        description="neighbour-list skin beyond the cut-off",
        json_schema_extra={"unit": "length", "default": "0.3 (reduced), 0.1 nm (real)"},
    )
    neighbour_list: bool = pydantic.Field(
        True, description="use a neighbour list (false: every pair, each step)"
    )
    slabs: int | None = pydantic.Field(
        None,
        description="split the run over this many devices by slabs of the box, each "
        "owning its slab's particles (pair models, or lj_coulomb by pme; periodic box; "
        "no barostat)",
    )


class BarostatTable(pydantic.BaseModel):
    """`[solver] barostat = { ... }` of an MD run with a thermostat."""

    pressure: float | None = pydantic.Field(
        None,
        description="the target pressure (required)",
        json_schema_extra={"unit": "pressure (bar in real units)", "required": True},
    )
    tau: float | None = pydantic.Field(
        None,
        description="the barostat's relaxation time (at least one step)",
        json_schema_extra={"unit": "time", "default": "200 * dt"},
    )
    compressibility: float | None = pydantic.Field(
        None,
        description="the compressibility estimate the box moves by",
        json_schema_extra={
            "unit": "1/pressure (1/bar in real units)",
            "default": "0.1 (reduced), 4.5e-5 1/bar (real: water's)",
        },
    )
    coupling: Literal[COUPLINGS] = pydantic.Field(
        "isotropic", description="one scale for the three edges, or one per edge"
    )


# (their defaults, units and meanings: `sim._catalogue.SYSTEM_KEYS`, which `sim models` and
# the config reference show; tests/sim/test_catalogue.py checks that the keys are these)
_SYSTEM_KEYS = (
    "lattice",
    "cells",
    "density",
    "temperature",
    "seed",
    "file",
    "frame",
    "group",
    "particles",
    "min_distance",
    "units",
    "molecule",
    "molecules",
)
_MD_SOLVER_KEYS = ("method", *MdSolverExtras.model_fields, "dtype")
_BAROSTAT_KEYS = tuple(BarostatTable.model_fields)
_MODEL_OPTION_PARAMS = (
    "cutoff",
    "shift",
    "force_shift",
    "tail_correction",
    "n_species",
    "electrostatics",
    "ewald_accuracy",
    "ewald_alpha",
    "ewald_kmax",
    "pme_mesh",
    "pme_order",
)
# (options the model itself checks: a method's name, lists of sizes)
_CHECKED_BY_MODEL = ("electrostatics", "ewald_kmax", "pme_mesh")


def _md_model(config: Config, model: ParticleModel) -> ParticleModel:
    """The model with options given under [params] (cutoff, shift,
    tail_correction and the others the model class accepts) applied."""
    allowed = model_options(type(model))
    options = {}
    for key in _MODEL_OPTION_PARAMS:
        if key in config.spec.params:
            if key not in allowed:
                raise config.error(
                    f"params.{key}",
                    f"model {model.name!r} has no option {key!r} (options: {', '.join(allowed)})",
                )
            value = config.spec.params[key]
            kind = (
                bool
                if key in ("shift", "force_shift", "tail_correction")
                else (int if key in ("n_species", "pme_order") else float)
            )
            if key in _CHECKED_BY_MODEL:
                kind = None
            if kind is bool and not isinstance(value, bool):
                raise config.error(f"params.{key}", f"expected true or false, got {value!r}")
            if kind is float:
                value = number(config, f"params.{key}", value)
                if not value > 0:
                    raise config.error(
                        f"params.{key}", f"expected a positive number, got {value!r}"
                    )
            if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise config.error(f"params.{key}", f"expected a whole number >= 1, got {value!r}")
            options[key] = value
    if options:
        try:
            model = dataclasses.replace(model, **options)
        except (TypeError, ValueError) as e:
            named = [
                key for key in options if f" {key} =" in str(e)
            ]  # the model names the option it refuses
            raise config.error(f"params.{named[0]}" if named else "params", str(e)) from None
    given = config.raw.get("model", {})
    given = given if isinstance(given, dict) else {}
    for key, value in options.items():  # (each valid: the model took them)
        if key in given and given[key] != value:
            raise config.error(
                f"params.{key}",
                f"[model] {key} = {given[key]!r} and [params] {key} = {value!r} disagree; give it "
                "once",
            )
    method = getattr(model, "electrostatics", None)
    if method is not None:  # an option of the other method, even at its default, is a mistake
        for key in other_method_options(method):
            for section, keys in (("model", given), ("params", config.spec.params)):
                if key in keys:
                    raise config.error(
                        f"{section}.{key}",
                        f"applies to electrostatics = {'pme' if method == 'ewald' else 'ewald'!r}, "
                        f"not {method!r}; leave it out",
                    )
    return model


def _md_params(config: Config, model: ParticleModel) -> dict[str, Array]:
    rest = {k: v for k, v in config.spec.params.items() if k not in _MODEL_OPTION_PARAMS}
    # Per-species parameters (a declared default with one value per species, such as
    # charges) are lists of n_species numbers.
    per_species = {}
    for key in list(rest):
        if key in model.parameter_names and np.ndim(model.parameter(key).default) == 1:
            value, count = rest.pop(key), model.n_species
            if not isinstance(value, list) or len(value) != count:
                raise config.error(
                    f"params.{key}",
                    f"expected a list of {count} numbers, one per species (n_species = {count}), "
                    f"got {value!r}",
                )
            per_species[key] = float_array([number(config, f"params.{key}", v) for v in value])
    raw = dict(config.raw)
    raw["params"] = rest
    return resolve_params(Config(raw, config.path), model) | per_species


def _positive(config: Config, key: str, value, *, allow_zero: bool = False) -> float:
    v = number(config, key, value)
    if v < 0 or (v == 0 and not allow_zero):
        raise config.error(
            key, f"expected a {'non-negative' if allow_zero else 'positive'} number, got {value!r}"
        )
    return v


def _md_units(config: Config, model: ParticleModel) -> Units:
    """`[system] units`: "reduced" (the default, or the model's option) or "real"."""
    name = (config.spec.system or {}).get("units", model.units)
    try:
        return unit_system(name)
    except ValueError as e:
        raise config.error("system.units", f"{e}.{did_you_mean(str(name), tuple(UNITS))}") from None


def _md_system(
    config: Config, dtype, units: Units = UNITS["reduced"], *, bonded: bool = False
) -> tuple[System, int]:
    """The `[system]` of a config and its seed. A start file's bonds are the molecules'
    constraints (`sim.families.md._molecules.file_molecules`) unless the model is `bonded` (its
    energy has bond terms: bead-spring chains), which keeps them as `System.bonds`."""
    section = dict(config.spec.system or {})
    for key in section:
        if key not in _SYSTEM_KEYS:
            raise config.error(
                f"system.{key}",
                "unknown key (expected one of: "
                f"{', '.join(_SYSTEM_KEYS)}).{did_you_mean(key, _SYSTEM_KEYS)}",
            )
    seed = section.get("seed", 0)
    problem = seed_problem(seed)
    if problem:
        raise config.error("system.seed", problem)
    key = jax.random.key(seed)
    temperature = section.get("temperature")
    if temperature is not None:
        temperature = _positive(config, "system.temperature", temperature, allow_zero=True)
    for key_name in ("frame", "group"):
        if key_name in section and "file" not in section:
            raise config.error(
                f"system.{key_name}", "is a setting of a start file: give [system] file too"
            )
    if "file" not in section and (
        "molecule" in section or "molecules" in section
    ):  # rigid molecules
        if "molecule" not in section:
            raise config.error(
                "system.molecule",
                "required key is missing (a water model, spce or tip3p, or a table of sites)",
            )
        return molecular_system(config, units, key, temperature).astype(dtype), seed
    if "file" in section:
        path, system = _start_file(config, section, units)
        if system.bonds is not None and not bonded:
            return file_molecules(config, path, system, units, key, temperature).astype(dtype), seed
        if "molecule" in section:
            raise config.error(
                "system.molecule",
                f"{path} has no bonds in /connectivity for /particles/{section.get('group', 'all')}"
                ": the molecules of a file are its bonded groups",
            )
    else:
        system = _generated_system(config, section, key)
    if temperature is not None:
        system = _thermalized(config, system, key, units, temperature)
    return system.astype(dtype), seed


def _start_file(config: Config, section: dict, units: Units) -> tuple[Path, System]:
    """`[system] file` (with its frame and group): the path and the system read from it."""
    for other in ("lattice", "cells", "density", "particles", "min_distance", "molecules"):
        if other in section:
            raise config.error(
                f"system.{other}",
                "give either file (an H5MD start) or a lattice/random system, not both",
            )
    if not isinstance(section["file"], str):
        raise config.error("system.file", f"expected a file path, got {section['file']!r}")
    frame = section.get("frame", -1)
    if isinstance(frame, bool) or not isinstance(frame, int):
        raise config.error(
            "system.frame",
            f"expected a whole number (a frame of the file; -1 for the last), got {frame!r}",
        )
    group = section.get("group", "all")
    if not isinstance(group, str) or not group or "/" in group:
        raise config.error(
            "system.group", f"expected the name of a group of /particles, got {group!r}"
        )
    path = config.resolve_path(section["file"])
    try:
        system = read_h5md(
            path,
            group=group,
            frame=frame,
            dtype=float,
            max_bytes=physical_memory(),
            units=units,
        )
    except ValueError as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise config.error(
            "system.file", message if str(path) in message else f"{path}: {message}"
        ) from None
    except (OSError, RuntimeError, KeyError, TypeError) as e:  # h5py on damaged files
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise config.error(
            "system.file", f"{path}: cannot be read ({detail}); expected an H5MD file"
        ) from None
    return path, system


def _generated_system(config: Config, section: dict, key: Array) -> System:
    """`[system] lattice` (a crystal of `cells`, or "random": `particles` packed at
    `min_distance`) at `density`."""
    kind = section.get("lattice", "fcc")
    if kind not in LATTICES + ("random",):
        raise config.error(
            "system.lattice",
            f"unknown lattice {kind!r} (expected one of: "
            f"{', '.join(LATTICES + ('random',))})."
            f"{did_you_mean(kind, LATTICES + ('random',))}",
        )
    if "density" not in section:
        raise config.error(
            "system.density", "required key is missing (number density, e.g. 0.8442)"
        )
    density = _positive(config, "system.density", section["density"])
    if kind == "random":
        return _random_system(config, section, key, density)
    cells = section.get("cells", 4)
    ok = isinstance(cells, int) and not isinstance(cells, bool) and cells >= 1
    ok = ok or (
        isinstance(cells, list)
        and len(cells) == 3
        and all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in cells)
    )
    if not ok:
        raise config.error(
            "system.cells", f"expected a whole number >= 1 or three of them, got {cells!r}"
        )
    n = 4 * (cells**3 if isinstance(cells, int) else math.prod(cells))  # at most 4 per cell
    problem = memory_problem(PARTICLE_BYTES * n, f"about {n:,} particles", device=True)
    if problem:
        raise config.error("system.cells", problem)
    return lattice(kind, cells if isinstance(cells, int) else tuple(cells), density)


def _random_system(config: Config, section: dict, key: Array, density: float) -> System:
    """`[system] lattice = "random"`: `particles` packed at least `min_distance` apart."""
    n = section.get("particles")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise config.error(
            "system.particles",
            f"expected a whole number >= 2 for a random system, got {n!r}",
        )
    problem = memory_problem(PARTICLE_BYTES * n, f"{n:,} particles", device=True)
    if problem:
        raise config.error("system.particles", problem)
    min_distance = _positive(config, "system.min_distance", section.get("min_distance", 0.8))
    try:
        return random_packing(jax.random.fold_in(key, 1), n, density, min_distance=min_distance)
    except ValueError as e:
        raise config.error("system.density", str(e)) from None


def _thermalized(
    config: Config, system: System, key: Array, units: Units, temperature: float
) -> System:
    """The system with Maxwell-Boltzmann velocities at `[system] temperature`."""
    if temperature > 0 and system.n < 2:
        raise config.error(
            "system.temperature",
            "one particle has no thermal velocity to draw (the total momentum is removed); "
            "give no temperature, or more particles",
        )
    system = thermalize(system, key, units.boltzmann * temperature)
    if not bool(jnp.all(jnp.isfinite(system.velocity))) or (
        temperature > 0 and not bool(jnp.any(system.velocity != 0))
    ):
        raise config.error(
            "system.temperature",
            f"{temperature!r} gives velocities beyond the float range; expected a temperature "
            "the run can represent",
        )
    return system


def _md_time(config: Config) -> tuple[float, np.ndarray]:
    time = config.spec.time
    dt = time.dt if time.dt is not None else DEFAULT_DT
    if time.save_at is not None:
        raise config.error(
            "time.save_at",
            "MD runs save every few steps: give steps and save_every (or t1 and save)",
        )
    if time.steps is not None:
        if time.t1 is not None:
            raise config.error("time.t1", "give either steps or t1, not both")
        steps = time.steps
        every = time.save_every if time.save_every is not None else max(1, steps // 100)
        if time.save is not None:
            raise config.error(
                "time.save", "with steps, give save_every (steps between saves) instead of save"
            )
    elif time.t1 is not None:
        span = (time.t1 - time.t0) / dt
        if not 0.5 <= span < 2**62:
            raise config.error(
                "time.t1",
                f"t1 - t0 = {time.t1 - time.t0:g} is not a usable number of steps dt = {dt:g}",
            )
        steps = int(round(span))
        if abs(steps - span) > 1e-6 * max(span, 1.0):
            raise config.error(
                "time.t1",
                f"t1 - t0 = {time.t1 - time.t0:g} must be a whole number of steps dt = {dt:g}",
            )
        if time.save_every is not None:
            every = time.save_every
        else:
            saves = (time.save if time.save is not None else 101) - 1
            if steps % saves or steps < saves:
                raise config.error(
                    "time.save",
                    f"{steps} steps cannot be split into {saves} equal save intervals; pick save "
                    f"so that save - 1 divides {steps}",
                )
            every = steps // saves
    else:
        raise config.error(
            "time.steps", "required key is missing: give steps (and save_every), or t1"
        )
    if steps % every:
        raise config.error("time.save_every", f"save_every = {every} must divide steps = {steps}")
    saves = steps // every + 1  # the save times, and a row per save of each observable
    problem = memory_problem(4 * 8 * saves, f"{saves:,} saved frames")
    if problem:
        raise config.error("time.steps" if time.steps is not None else "time.t1", problem)
    with np.errstate(over="ignore", invalid="ignore"):
        times = time.t0 + dt * np.arange(0, steps + 1, every)
        end = time.t0 + dt * float(steps)
    if not (np.all(np.isfinite(times)) and np.all(np.diff(times) > 0)):
        raise config.error(
            "time.dt",
            f"{steps:,} steps of dt = {dt:g} from t0 = {time.t0:g} end at t = {end:g}: save times "
            "beyond the float range or too close to tell apart",
        )
    return dt, times


def _temperature(config: Config, extras: dict, method: str, units: Units, resolved: dict):
    """kT of a thermostat's `[solver] temperature` (required), in the integrator's units."""
    if "temperature" not in extras:
        raise config.error(
            "solver.temperature", f"required key is missing (the target temperature of {method})"
        )
    temperature = _positive(config, "solver.temperature", extras["temperature"])
    resolved["temperature"] = temperature
    return units.boltzmann * temperature


def _verlet(config: Config, extras: dict, dt: float, units: Units, resolved: dict):
    return VelocityVerlet(dt=dt)


def _langevin(config: Config, extras: dict, dt: float, units: Units, resolved: dict):
    kt = _temperature(config, extras, "langevin", units, resolved)
    friction = _positive(config, "solver.friction", extras.get("friction", 1.0))
    resolved["friction"] = friction
    return LangevinBaoab(dt=dt, temperature=kt, friction=friction)


def _nose_hoover(config: Config, extras: dict, dt: float, units: Units, resolved: dict):
    kt = _temperature(config, extras, "nose_hoover", units, resolved)
    tau = _positive(config, "solver.tau", extras.get("tau", 100 * dt))
    chain = extras.get("chain_length", 3)
    if isinstance(chain, bool) or not isinstance(chain, int) or chain < 1:
        raise config.error("solver.chain_length", f"expected a whole number >= 1, got {chain!r}")
    resolved.update(tau=tau, chain_length=chain)
    return NoseHooverChain(dt=dt, temperature=kt, tau=tau, chain_length=chain)


@dataclasses.dataclass(frozen=True)
class Integrator:
    """What an MD `[solver] method` is, in one place: its ensemble's name in messages, the
    `[solver]` settings it takes (a thermostat's), and how it is built from them
    (config, extras, dt, units, the resolved section it adds to) -> the integrator of
    `solvers`."""

    label: str
    keys: tuple[str, ...]
    build: Callable[[Config, dict, float, Units, dict], Any]

    @property
    def thermostat(self) -> bool:
        """Whether it holds a temperature (a barostat needs one)."""
        return "temperature" in self.keys


INTEGRATORS = {
    "verlet": Integrator("NVE", (), _verlet),
    "langevin": Integrator("Langevin", ("temperature", "friction"), _langevin),
    "nose_hoover": Integrator("Nose-Hoover", ("temperature", "tau", "chain_length"), _nose_hoover),
}
_THERMOSTAT_KEYS = tuple(dict.fromkeys(k for i in INTEGRATORS.values() for k in i.keys))


def _not_a_setting_of(method: str, key: str) -> str:
    """Why `[solver] key` is refused with `method`: whose setting it is."""
    chosen = INTEGRATORS[method]
    if not chosen.thermostat:
        takers = " or ".join(n for n, i in INTEGRATORS.items() if i.thermostat)
        return f"is a thermostat setting; method = {method!r} is {chosen.label} (use {takers})"
    owner = next(i.label for i in INTEGRATORS.values() if key in i.keys)
    return f"is a {owner} setting; {method} takes {', '.join(chosen.keys)}"


def _md_solver(config: Config, dt: float, units: Units) -> tuple[ParticleSolver, str, dict]:
    """`[solver]` of an MD config: the integrator (temperatures in the config's units,
    handed to the integrator as kT) and the neighbour-list settings; the resolved section."""
    spec = config.spec.solver
    MD.check_solver_keys(config, _MD_SOLVER_KEYS)
    extras = spec.extras
    method = spec.method or "verlet"
    if method not in INTEGRATORS:
        raise config.error(
            "solver.method",
            f"unknown MD method {method!r} (methods: "
            f"{', '.join(INTEGRATORS)}).{did_you_mean(method, INTEGRATORS)}",
        )
    chosen = INTEGRATORS[method]
    for key in _THERMOSTAT_KEYS:
        if key in extras and key not in chosen.keys:
            raise config.error(f"solver.{key}", _not_a_setting_of(method, key))
    resolved: dict = {"method": method}
    integrator = chosen.build(config, extras, dt, units, resolved)
    if "barostat" in extras:
        integrator = _barostat(config, extras["barostat"], method, integrator, dt, resolved, units)
    skin = _positive(
        config, "solver.skin", extras.get("skin", DEFAULT_SKIN[units.name]), allow_zero=True
    )
    use_list = extras.get("neighbour_list", True)
    if not isinstance(use_list, bool):
        raise config.error("solver.neighbour_list", f"expected true or false, got {use_list!r}")
    resolved.update(skin=skin, neighbour_list=use_list, dtype=spec.dtype or "float64")
    slabs = _slabs(config, extras.get("slabs"), "barostat" in extras, use_list)
    if slabs is not None:
        resolved["slabs"] = slabs
    return (
        ParticleSolver(integrator, neighbour_list=use_list, skin=skin, slabs=slabs),
        spec.dtype or "float64",
        resolved,
    )


def _slabs(config: Config, slabs, barostat: bool, use_list: bool) -> int | None:
    """`[solver] slabs`: a whole number of devices, within those JAX has, for a run in a
    box of fixed size (no barostat) with a neighbour list (None when not given)."""
    if slabs is None:
        return None
    if isinstance(slabs, bool) or not isinstance(slabs, int) or slabs < 1:
        raise config.error(
            "solver.slabs", f"expected a whole number of devices >= 1, got {slabs!r}"
        )
    if barostat:
        raise config.error(
            "solver.slabs", "a run split by slabs keeps its box (no barostat); leave one out"
        )
    if not use_list:
        raise config.error("solver.slabs", "a run split by slabs needs neighbour_list = true")
    import jax

    if slabs > jax.device_count():
        raise config.error(
            "solver.slabs",
            f"{slabs} devices asked for, {jax.device_count()} there (CPU devices: "
            "XLA_FLAGS=--xla_force_host_platform_device_count=N before the run)",
        )
    return slabs


def _check_slabs(config: Config, model, system, solver) -> None:
    """A run split by slabs that `solvers.SlabRun` can run (an error naming
    `solver.slabs` otherwise)."""
    from solvers import cannot_split_by_slabs

    problem = cannot_split_by_slabs(model, system, solver.slabs, solver.skin)
    if problem is not None:
        raise config.error("solver.slabs", problem)


def _barostat(
    config: Config, table, method: str, thermostat, dt: float, resolved: dict, units: Units
) -> StochasticCellRescaling:
    """`[solver] barostat = {pressure, tau, compressibility, coupling}`: stochastic cell
    rescaling around the thermostat of `method` (its settings join `resolved`). The
    pressure is in the config's units (bar in real units) and the compressibility in
    their inverse (1/bar; water's 4.5e-5 by default in real units)."""
    if not isinstance(table, dict):
        raise config.error(
            "solver.barostat",
            f"expected a table such as {{ pressure = 1.0, tau = 1.0 }}, got {table!r}",
        )
    for key in table:
        if key not in _BAROSTAT_KEYS:
            raise config.error(
                f"solver.barostat.{key}",
                "unknown key (expected one of: "
                f"{', '.join(_BAROSTAT_KEYS)}).{did_you_mean(key, _BAROSTAT_KEYS)}",
            )
    if not INTEGRATORS[method].thermostat:
        raise config.error(
            "solver.barostat",
            "a barostat needs a thermostat: method = 'langevin' or 'nose_hoover' (stochastic cell "
            "rescaling samples the volume at a temperature)",
        )
    if "pressure" not in table:
        raise config.error(
            "solver.barostat.pressure",
            "required key is missing (the target pressure, "
            f"{units.labels.get('pressure', 'reduced units')})",
        )
    pressure = _positive(config, "solver.barostat.pressure", table["pressure"], allow_zero=True)
    tau = _positive(config, "solver.barostat.tau", table.get("tau", 200 * dt))
    if (
        tau < dt
    ):  # (the box would move further in a step than its relaxation asks: 1e-300 blew up at once)
        raise config.error(
            "solver.barostat.tau",
            f"expected a coupling time of at least one step (dt = {dt:g}), got {tau!r}",
        )
    compressibility = _positive(
        config,
        "solver.barostat.compressibility",
        table.get("compressibility", DEFAULT_COMPRESSIBILITY[units.name]),
    )
    coupling = table.get("coupling", "isotropic")
    if coupling not in COUPLINGS:
        raise config.error(
            "solver.barostat.coupling",
            f"unknown coupling {coupling!r} (expected one of: "
            f"{', '.join(COUPLINGS)}).{did_you_mean(str(coupling), COUPLINGS)}",
        )
    resolved["barostat"] = {
        "pressure": pressure,
        "tau": tau,
        "compressibility": compressibility,
        "coupling": coupling,
    }
    return StochasticCellRescaling(
        thermostat,
        pressure=pressure * units.pressure,
        tau=tau,
        compressibility=compressibility / units.pressure,
        coupling=coupling,
    )


def setup(model: ParticleModel, config: Config) -> Setup:
    model = _md_model(config, model)
    units = _md_units(config, model)
    model = dataclasses.replace(model, units=units.name)
    params = water_params(config, _md_params(config, model))
    if config.spec.initial:
        raise config.error(
            "initial", "MD runs start from [system] (a lattice, a random packing or an H5MD file)"
        )
    dt, t = _md_time(config)
    solver, dtype, solver_section = _md_solver(config, dt, units)
    if (
        solver_section["method"] == "langevin" and not solver.integrator.has_conserved_energy
    ):  # no conserved energy to drift
        checks = MD.resolve_checks(
            config, ("max_temperature_factor",), "Langevin MD runs (no conserved energy to drift)"
        )
    else:
        checks = MD.resolve_checks(config, what="MD runs")
    system, seed = _md_system(
        config, jnp.float32 if dtype == "float32" else jnp.float64, units, bonded=model.bonded
    )
    solver = with_constraints(solver, system)
    if solver.slabs is not None:
        _check_slabs(config, model, system, solver)
    if solver.integrator.changes_box and not system.space.periodic:
        raise config.error(
            "solver.barostat",
            "a barostat needs a periodic box; the [system] file starts in free space",
        )
    if solver.integrator.changes_box:
        # (P V is a term of the conserved energy: it must be a number of the run's dtype, with room
        # to grow)
        work = (
            solver_section["barostat"]["pressure"]
            * units.pressure
            * float(np.prod(np.asarray(system.space.box, dtype=float)))
        )
        if not work * 1e6 < np.finfo(dtype).max:
            raise config.error(
                "solver.barostat.pressure",
                f"{solver_section['barostat']['pressure']!r} times the box's volume ({work:.3g}) "
                f"is beyond the {dtype} range; expected a pressure the run can represent",
            )
    try:
        check_system(model, system, params)
        model = model.for_system(system)  # (what it sizes from the box: in the resolved config)
        if solver.neighbour_list and system.space.periodic:
            NeighbourList.allocate(system.position, system.space.box, model.cutoff, solver.skin)
    except ValueError as e:
        start = (config.spec.system or {}).get("file")
        if start is not None:  # a start file the model cannot begin from
            raise config.error("system.file", f"{config.resolve_path(start)}: {e}") from None
        raise config.error("system", str(e)) from None
    model_section = {k: getattr(model, k) for k in model_options(type(model))}
    rdf = rdf_spec(
        config, np.asarray(system.space.box) if system.space.periodic else None, model.n_species, t
    )
    return Setup(
        model=model,
        params=params,
        initial=system,
        t=jnp.asarray(t),
        solver=solver,
        key=jax.random.fold_in(jax.random.key(seed), 2),
        resolved={
            "params": params,
            "solver": solver_section,
            "model": model_section,
            "checks": checks,
            **({"rdf": rdf.resolved()} if rdf else {}),
        },
    )
