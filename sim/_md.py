"""The MD family: particle models by name, the checks of a system before it runs, the
`[system]` and `[solver]` sections of a config, the H5MD file a run writes, its blow-up
limits, and how sweeps and fits size neighbour lists. The run itself, compiled chunks
with neighbour lists that grow when they overflow, is `solvers.ParticleRun`. The
family's declaration (name, sections, keys, checks, models) is `sim._md_family`; this
module, its numerics, is imported by the first MD work."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from physics import float_array
from physics.md import (
    LATTICES,
    UNITS,
    BeadSpring,
    LennardJonesCoulomb,
    Morse,
    ParticleModel,
    SoftSphere,
    System,
    Units,
    chains,
    lattice,
    other_method_options,
    random_packing,
    read_h5md,
    thermalize,
    unit_system,
)
from solvers import (
    ALL_PAIRS,
    COUPLINGS,
    LangevinBaoab,
    NeighbourList,
    NoseHooverChain,
    ParticleFrames,
    ParticleIntegrator,
    ParticleProblem,
    ParticleRun,
    ParticleSolver,
    StochasticCellRescaling,
    VelocityVerlet,
    concrete,
    did_you_mean,
    fixed_capacity,
    largest_divisor_at_most,
    neighbour_list,
    redo_overflowed,
)

from ._config import Config, seed_problem
from ._errors import SimulationError
from ._limits import memory_problem, physical_memory
from ._md_family import MD, MdFamily
from ._md_molecules import (
    file_molecules,
    molecular_system,
    water_params,
    with_constraints,
    written_bonds,
)
from ._md_rdf import RdfSpec, rdf_spec, write_rdf
from ._registry import model_options
from ._run import RunPlan, Setup, number, resolve_params, resolved_toml
from ._store import Result, package_versions, write_root_attrs
from ._stream import chunk_frames
from ._sweep_spec import sweep_section
from ._trajectory import Trajectory

DEFAULT_DT = 0.005
DEFAULT_SKIN = {"reduced": 0.3, "real": 0.1}
"""The neighbour-list skin by unit system: 0.3 sigma, 0.1 nm."""
DEFAULT_COMPRESSIBILITY = {"reduced": 0.1, "real": 4.5e-5}
"""The barostat's compressibility estimate by unit system (real: water's, 1/bar)."""
# Memory per particle at least: positions, velocities, forces and their copies, and a
# neighbour list of some tens of ids.
PARTICLE_BYTES = 1024


# ----------------------------------------------------------------------------- set-up


def default_system(model: ParticleModel, key: Array | None = None) -> System:
    """The system a particle model starts from when none is given: 256 particles on an
    fcc lattice at density 0.8442 with Maxwell-Boltzmann velocities at T = 1.0 (bead
    springs: 16 chains of 16 beads grown at density 0.3, as dense as random growth with
    beads 0.9 apart reliably reaches; charged particles: 216 ions of two species on a
    rock-salt lattice at the same density)."""
    key = jax.random.key(0) if key is None else key
    if isinstance(model, BeadSpring):
        return thermalize(chains(key, 16, 16, density=0.3), jax.random.fold_in(key, 1), 1.0)
    if isinstance(model, LennardJonesCoulomb):
        return thermalize(lattice("rocksalt", 3, 0.8442), key, 1.0)
    return thermalize(lattice("fcc", 4, 0.8442), key, 1.0)


def as_solver(solver) -> ParticleSolver:
    """A `ParticleSolver` from what `simulate` was given (None: velocity Verlet, dt 0.005)."""
    if solver is None:
        return ParticleSolver(VelocityVerlet(dt=DEFAULT_DT))
    if isinstance(solver, ParticleIntegrator):
        return ParticleSolver(solver)
    if isinstance(solver, ParticleSolver):
        return solver
    raise TypeError(
        "a particle model needs a particle integrator (VelocityVerlet, LangevinBaoab, "
        "NoseHooverChain) "
        f"or a ParticleSolver, got {type(solver).__name__}"
    )


def steps_per_save(t, dt) -> int:
    """The fixed number of dt steps between consecutive save times `t`.

    Raises:
        ValueError: times not concrete, not equally spaced, or not a multiple of dt.
    """
    times = concrete(t)
    step = concrete(dt)
    if times is None or step is None:
        raise ValueError(
            "MD save times and the time step must be concrete numbers (the number of steps is "
            "fixed "
            "before compiling); pass them from outside jax.jit"
        )
    step = float(step)
    if not step > 0:
        raise ValueError(f"the time step dt must be > 0, got {step}")
    gaps = np.diff(times)
    if np.any(gaps <= 0) or not np.allclose(gaps, gaps[0], rtol=1e-9, atol=1e-12):
        raise ValueError(
            "MD save times must be equally spaced and increasing (e.g. jnp.linspace(0, 10, 101))"
        )
    count = int(round(gaps[0] / step))
    if count < 1 or abs(count * step - gaps[0]) > 1e-6 * gaps[0]:
        raise ValueError(
            f"the save interval {gaps[0]:g} must be a whole number of time steps dt = {step:g}"
        )
    return count


def check_system(model: ParticleModel, system: System, params: PyTree) -> None:
    """Raise ValueError for a system the model cannot start from: parameters that do not
    fit it, a box shorter than twice the cutoff, overlapping particles. Checks only
    what is concrete (under jax.jit, values are unknown and skipped)."""
    if not isinstance(system, System):
        raise TypeError(f"initial must be a physics.md.System, got {type(system).__name__}")
    concrete_params = {k: concrete(v) for k, v in params.items()}
    if all(v is not None for v in concrete_params.values()):
        model.check_params(system, {k: jnp.asarray(v) for k, v in concrete_params.items()})
    position = concrete(system.position)
    if system.space.periodic:
        edges = concrete(system.space.box)
        if edges is not None and np.any(edges < 2 * model.cutoff):
            raise ValueError(
                f"the box {np.round(edges, 6).tolist()} is shorter than twice the cutoff "
                f"{model.cutoff:g} "
                f"in some direction: use more particles (a larger box) or a shorter cutoff"
            )
    else:
        edges = None
    if position is None:
        return
    if not np.all(np.isfinite(position)):
        raise ValueError("initial positions contain NaN or infinity")
    n = position.shape[0]
    if n < 2:
        return
    molecule = None if system.topology is None else concrete(system.topology.molecule)
    # Sites without a Lennard-Jones core of their own (a water's hydrogens: epsilon 0
    # with every species) come close to other molecules' sites in a liquid; only the
    # cores are checked.
    cores = np.arange(n)
    epsilon, species = concrete_params.get("epsilon"), concrete(system.species)
    if epsilon is not None and np.ndim(epsilon) == 2 and species is not None:
        cores = np.flatnonzero(np.diag(np.asarray(epsilon))[np.asarray(species)] > 0)
        if cores.shape[0] < 2:
            return
    i, j, r = _closest_pair(position[cores], edges, None if molecule is None else molecule[cores])
    i, j = int(cores[i]), int(cores[j])
    sigma = concrete_params.get("sigma")
    limit = (
        0.5 * float(np.min(sigma))
        if sigma is not None and not isinstance(model, (SoftSphere, Morse))
        else 1e-6
    )
    if r < limit:
        what = "" if molecule is None else f" (molecules {int(molecule[i])} and {int(molecule[j])})"
        raise ValueError(
            f"particles {i} and {j}{what} overlap: distance {r:.3g} < {limit:.3g}; spread them out "
            "(lower the density, or start from a lattice or random_packing with min_distance)"
        )


def _closest_pair(
    position: np.ndarray, edges: np.ndarray | None, molecule: np.ndarray | None = None
) -> tuple[int, int, float]:
    """The closest pair of particles (of different molecules when `molecule` [n] gives
    each particle's), chunked so memory stays O(n * 1024)."""
    best = (0, 1, math.inf)
    n = position.shape[0]
    for start in range(0, n, 1024):
        block = position[start : start + 1024]
        dr = block[:, None, :] - position[None, :, :]
        if edges is not None:
            dr = dr - edges * np.round(dr / edges)
        r2 = np.sum(dr * dr, axis=-1)
        r2[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf
        if molecule is not None:
            r2[molecule[start : start + 1024][:, None] == molecule[None, :]] = np.inf
        k = int(np.argmin(r2))
        a, b = divmod(k, n)
        if r2[a, b] < best[2] ** 2:
            best = (start + a, b, float(np.sqrt(r2[a, b])))
    return best


# ----------------------------------------------------------------------------- the run


def particle_run(
    model: ParticleModel,
    params: PyTree,
    t,
    *,
    initial: System | None = None,
    solver=None,
    key: Array | None = None,
) -> ParticleRun:
    """The run of `simulate` and of `sim run` (`solvers.ParticleRun`), once the system,
    the parameters and the save times have been checked."""
    system = default_system(model, key) if initial is None else initial
    solver = with_constraints(as_solver(solver), system)
    check_system(model, system, params)
    model = model.for_system(system)
    every = steps_per_save(t, solver.integrator.dt)
    dtype = system.position.dtype
    params = {k: jnp.asarray(v).astype(dtype) for k, v in params.items()}
    run_key = None if key is None else jax.random.fold_in(key, 7)
    return ParticleRun(model, params, system, solver, times=concrete(t), every=every, key=run_key)


def run_md(
    model: ParticleModel,
    params: PyTree,
    t: Array | np.ndarray,
    *,
    initial: System | None = None,
    solver=None,
    key: Array | None = None,
    progress: Callable[[int], None] | None = None,
) -> Trajectory:
    """Simulate a particle model, saving at the equally spaced times `t` (what
    `sim.simulate` does for particle models).

    The run is split into compiled chunks of about `solver.chunk_steps` steps. After each
    chunk the neighbour-list overflow flag is read; if set, the list is reallocated with
    room for what was seen and the chunk is rerun from its start. Under `jax.jit` or
    `jax.vmap` the flag cannot be read mid-run: an overflow then makes
    `stats["result"]` `Result.neighbour_overflow` and the affected observables NaN.

    Returns:
        A `Trajectory` with observables potential_energy, kinetic_energy, total_energy,
        temperature, pressure (and conserved_energy with a Nose-Hoover chain) [T],
        position and velocity [T, n, dim] (unwrapped), the final `ParticleState`, and
        stats num_steps, result, neighbour_builds, capacity, devices (over how many
        devices the particles were split).
    """
    observables, state, stats = particle_run(
        model, params, t, initial=initial, solver=solver, key=key
    ).run(progress)
    return Trajectory(time=jnp.asarray(t), observables=observables, final_state=state, stats=stats)


# ----------------------------------------------------------------------------- configs (`sim run`)

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


def sweep_problem(s: Setup, params: PyTree, key: Array | None) -> ParticleFrames:
    """One run of an MD sweep in the engine protocol (`solvers.ParticleFrames`): the
    run `particle_run` makes of `simulate`'s arguments, on the set-up's list, which
    cannot grow inside a vmapped batch."""
    solver = as_solver(s.solver)
    system = s.initial
    dtype = system.position.dtype
    params = {k: jnp.asarray(v).astype(dtype) for k, v in params.items()}
    problem = ParticleProblem(
        s.model, params, system, solver.integrator, neighbour_list(s.model, system, solver)
    )
    run_key = None if key is None else jax.random.fold_in(key, 7)
    return ParticleFrames(
        problem=problem, key=run_key, every=steps_per_save(s.t, solver.integrator.dt)
    )


_MD_METHODS = ("verlet", "langevin", "nose_hoover")
_MD_SOLVER_KEYS = (
    "method",
    "temperature",
    "friction",
    "tau",
    "chain_length",
    "barostat",
    "skin",
    "neighbour_list",
    "dtype",
)
_BAROSTAT_KEYS = ("pressure", "tau", "compressibility", "coupling")
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
    constraints (`sim._md_molecules.file_molecules`) unless the model is `bonded` (its
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
        if system.bonds is not None and not bonded:
            return file_molecules(config, path, system, units, key, temperature).astype(dtype), seed
        if "molecule" in section:
            raise config.error(
                "system.molecule",
                f"{path} has no bonds in /connectivity for /particles/{group}: the molecules of a "
                "file are its bonded groups",
            )
    else:
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
            n = section.get("particles")
            if isinstance(n, bool) or not isinstance(n, int) or n < 2:
                raise config.error(
                    "system.particles",
                    f"expected a whole number >= 2 for a random system, got {n!r}",
                )
            problem = memory_problem(PARTICLE_BYTES * n, f"{n:,} particles")
            if problem:
                raise config.error("system.particles", problem)
            min_distance = _positive(
                config, "system.min_distance", section.get("min_distance", 0.8)
            )
            try:
                system = random_packing(
                    jax.random.fold_in(key, 1), n, density, min_distance=min_distance
                )
            except ValueError as e:
                raise config.error("system.density", str(e)) from None
        else:
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
            problem = memory_problem(PARTICLE_BYTES * n, f"about {n:,} particles")
            if problem:
                raise config.error("system.cells", problem)
            system = lattice(kind, cells if isinstance(cells, int) else tuple(cells), density)
    if temperature is not None:
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
    return system.astype(dtype), seed


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


def _md_solver(config: Config, dt: float, units: Units) -> tuple[ParticleSolver, str, dict]:
    """`[solver]` of an MD config: the integrator (temperatures in the config's units,
    handed to the integrator as kT) and the neighbour-list settings; the resolved section."""
    spec = config.spec.solver
    for key in ("rtol", "atol", "dt0", "max_steps", "adjoint"):
        if getattr(spec, key) is not None:
            raise config.error(
                f"solver.{key}",
                f"is not an MD solver setting (MD keys: {', '.join(_MD_SOLVER_KEYS)})",
            )
    extras = spec.extras
    for key in extras:
        if key not in _MD_SOLVER_KEYS:
            raise config.error(
                f"solver.{key}",
                "unknown key for MD solvers (expected one of: "
                f"{', '.join(_MD_SOLVER_KEYS)}).{did_you_mean(key, _MD_SOLVER_KEYS)}",
            )
    method = spec.method or "verlet"
    if method not in _MD_METHODS:
        raise config.error(
            "solver.method",
            f"unknown MD method {method!r} (methods: "
            f"{', '.join(_MD_METHODS)}).{did_you_mean(method, _MD_METHODS)}",
        )
    resolved: dict = {"method": method}
    if method == "verlet":
        for key in ("temperature", "friction", "tau", "chain_length"):
            if key in extras:
                raise config.error(
                    f"solver.{key}",
                    "is a thermostat setting; method = 'verlet' is NVE (use langevin or "
                    "nose_hoover)",
                )
        integrator = VelocityVerlet(dt=dt)
    else:
        if "temperature" not in extras:
            raise config.error(
                "solver.temperature",
                f"required key is missing (the target temperature of {method})",
            )
        temperature = _positive(config, "solver.temperature", extras["temperature"])
        resolved["temperature"] = temperature
        kt = units.boltzmann * temperature
        if method == "langevin":
            for key in ("tau", "chain_length"):
                if key in extras:
                    raise config.error(
                        f"solver.{key}",
                        "is a Nose-Hoover setting; langevin takes temperature and friction",
                    )
            friction = _positive(config, "solver.friction", extras.get("friction", 1.0))
            resolved["friction"] = friction
            integrator = LangevinBaoab(dt=dt, temperature=kt, friction=friction)
        else:
            if "friction" in extras:
                raise config.error(
                    "solver.friction",
                    "is a Langevin setting; nose_hoover takes temperature and tau",
                )
            tau = _positive(config, "solver.tau", extras.get("tau", 100 * dt))
            chain = extras.get("chain_length", 3)
            if isinstance(chain, bool) or not isinstance(chain, int) or chain < 1:
                raise config.error(
                    "solver.chain_length", f"expected a whole number >= 1, got {chain!r}"
                )
            resolved.update(tau=tau, chain_length=chain)
            integrator = NoseHooverChain(dt=dt, temperature=kt, tau=tau, chain_length=chain)
    if "barostat" in extras:
        integrator = _barostat(config, extras["barostat"], method, integrator, dt, resolved, units)
    skin = _positive(
        config, "solver.skin", extras.get("skin", DEFAULT_SKIN[units.name]), allow_zero=True
    )
    use_list = extras.get("neighbour_list", True)
    if not isinstance(use_list, bool):
        raise config.error("solver.neighbour_list", f"expected true or false, got {use_list!r}")
    resolved.update(skin=skin, neighbour_list=use_list, dtype=spec.dtype or "float64")
    return (
        ParticleSolver(integrator, neighbour_list=use_list, skin=skin),
        spec.dtype or "float64",
        resolved,
    )


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
    if method == "verlet":
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


def _setup(model: ParticleModel, config: Config) -> Setup:
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


_PARTICLE_ROWS = ("position", "velocity", "box")
"""Rows of a run that H5MD keeps under /particles/all rather than /observables."""
_QUANTITY = {
    "potential_energy": "energy",
    "kinetic_energy": "energy",
    "total_energy": "energy",
    "conserved_energy": "energy",
    "temperature": "temperature",
    "pressure": "pressure",
    "volume": "volume",
    "density": "density",
    "mass_density": "mass_density",
    "position": "length",
    "velocity": "velocity",
    "edges": "length",
}
"""The quantity of each H5MD element, whose unit its `unit` attribute names."""


@dataclasses.dataclass
class MdSink:
    """The H5MD 1.1 layout of an MD run, written frame by frame: /h5md, /particles/all
    (box with time-dependent edges, wrapped position with image, velocity, species,
    mass), /observables/<name>, /parameters/<name>, /stats."""

    model: str
    config: str
    time: np.ndarray
    step: np.ndarray
    system: System
    params: dict[str, np.ndarray]
    seed: int | None = None
    units: str = "reduced"
    rdf: RdfSpec | None = None  # `[rdf]`: written by `finish` from the frames

    def create(self, f, rows: dict[str, np.ndarray]) -> None:
        write_root_attrs(
            f, format="simjax.run", model=self.model, config=self.config, seed=self.seed
        )
        h5md = f.create_group("h5md")
        h5md.attrs["version"] = np.asarray([1, 1], dtype=np.int32)
        h5md.create_group("author").attrs["name"] = "simjax"
        creator = h5md.create_group("creator")
        creator.attrs["name"] = "simjax"
        creator.attrs["version"] = package_versions().get("simjax", "0")
        system = self.system
        dim = system.dim
        frames = len(self.time)
        particles = f.create_group("particles/all")
        box = particles.create_group("box")
        box.attrs["dimension"] = np.int32(dim)
        position = np.asarray(rows["position"])
        if system.space.periodic:
            edges = np.asarray(system.space.box, dtype=float)
            box.attrs["boundary"] = np.array([b"periodic"] * dim)
            # (a barostat's box changes: its edges are written frame by frame from the "box" rows)
            self._element(box, "edges", (dim,), float)[...] = np.broadcast_to(edges, (frames, dim))
            self._element(particles, "image", position.shape[1:], np.int32)
        else:
            box.attrs["boundary"] = np.array([b"none"] * dim)
        self._element(particles, "position", position.shape[1:], position.dtype)
        velocity = np.asarray(rows["velocity"])
        self._element(particles, "velocity", velocity.shape[1:], velocity.dtype)
        particles.create_dataset("species", data=np.asarray(system.species, dtype=np.int32))
        mass = particles.create_dataset("mass", data=np.asarray(system.mass, dtype=float))
        if self._labels:
            mass.attrs["unit"] = self._labels["mass"]
        bonds = written_bonds(system)
        if bonds is not None:  # H5MD 1.1 connectivity: pairs of particle indices of /particles/all
            f.create_dataset("connectivity/all/bonds", data=bonds.astype(np.int32)).attrs[
                "particles_group"
            ] = particles.ref
        if system.topology is not None:
            particles.create_dataset(
                "molecule", data=np.asarray(system.topology.molecule, dtype=np.int32)
            )
        observables = f.require_group("observables")
        for name, values in rows.items():
            if name not in _PARTICLE_ROWS:
                values = np.asarray(values)
                self._element(observables, name, values.shape[1:], values.dtype)
        params = f.create_group("parameters")
        for name, value in self.params.items():
            params.create_dataset(name, data=np.asarray(value))

    @property
    def _labels(self) -> dict[str, str]:
        return unit_system(self.units).labels

    def _element(self, group, name: str, shape: tuple[int, ...], dtype):
        """An H5MD time-dependent element {step, time, value}; returns `value`, allocated.
        Outside reduced units, `time` and `value` carry the H5MD `unit` attribute (H5MD
        1.1, units module: "nm", "ps", "kJ mol-1", ...)."""
        g = group.create_group(name)
        g.create_dataset("step", data=np.asarray(self.step, dtype=np.int64))
        time = g.create_dataset("time", data=np.asarray(self.time, dtype=float))
        fill = np.nan if np.issubdtype(np.dtype(dtype), np.floating) else 0
        value = g.create_dataset(
            "value", shape=(len(self.time), *shape), dtype=dtype, fillvalue=fill
        )
        labels = self._labels
        if labels:
            time.attrs["unit"] = labels["time"]
            if name in _QUANTITY:
                value.attrs["unit"] = labels[_QUANTITY[name]]
        return value

    def write(self, f, k: int, rows: dict[str, np.ndarray]) -> None:
        particles = f["particles/all"]
        position = np.asarray(rows["position"])
        end = k + position.shape[0]
        if self.system.space.periodic:
            if "box" in rows:  # each frame in its own box
                edges = np.asarray(rows["box"], dtype=position.dtype)
                particles["box/edges/value"][k:end] = edges
                edges = edges[:, None, :]
            else:
                edges = np.asarray(self.system.space.box, dtype=position.dtype)
            with np.errstate(invalid="ignore"):
                image = np.floor(position / edges)
            if not np.all(
                np.abs(image) <= IMAGE_LIMIT
            ):  # NaN included: never a wrapped-around counter
                frame = k + int(np.argmin(np.all(np.abs(image) <= IMAGE_LIMIT, axis=(1, 2))))
                raise SimulationError(
                    f"{self.model}: the run blew up at step {int(self.step[frame])} (t = "
                    f"{float(self.time[frame]):g}): "
                    "a particle is beyond the int32 image counters of the output (limit "
                    f"{IMAGE_LIMIT} box lengths)"
                )
            image = image.astype(np.int32)
            particles["position/value"][k:end] = position - image * edges
            particles["image/value"][k:end] = image
        else:
            particles["position/value"][k:end] = position
        particles["velocity/value"][k:end] = np.asarray(rows["velocity"])
        for name, values in rows.items():
            if name not in _PARTICLE_ROWS:
                f["observables"][name]["value"][k:end] = np.asarray(values)

    def finish(self, f, stats: dict[str, Any]) -> None:
        if self.rdf is not None:
            write_rdf(f, self.rdf, np.asarray(self.system.species))
        group = f.require_group("stats")
        for key, value in stats.items():
            group.attrs[key] = value


@dataclasses.dataclass
class MdRunResult(Result):
    """A finished MD run; `save` writes H5MD 1.1 (readable by MDAnalysis, VMD, ...).

    Attributes:
        model: registry name; config: the resolved TOML text.
        time, step: save times and step numbers [T].
        observables: potential_energy, kinetic_energy, total_energy, temperature,
            pressure [T] (conserved_energy with Nose-Hoover), position and velocity
            [T, n, dim] (unwrapped).
        system: the starting system (box, species, masses).
        params: parameter values; seed: the [system] seed; stats: engine statistics.
    """

    model: str
    config: str
    time: np.ndarray
    step: np.ndarray
    observables: dict[str, np.ndarray]
    system: System
    params: dict[str, np.ndarray]
    seed: int | None = None
    stats: dict[str, int] = dataclasses.field(default_factory=dict)
    units: str = "reduced"
    rdf: RdfSpec | None = None

    def sink(self) -> MdSink:
        return MdSink(
            self.model,
            self.config,
            self.time,
            self.step,
            self.system,
            self.params,
            self.seed,
            self.units,
            self.rdf,
        )

    def write(self, f) -> None:
        """The H5MD layout (docs/architecture.md, File layouts) in `f`."""
        sink = self.sink()
        sink.create(f, self.observables)
        sink.write(f, 0, self.observables)
        sink.finish(f, self.stats)

    def to_xarray(self):
        """An `xarray.Dataset`: the scalar observables over `time` (with the MD `step` as
        a second coordinate of it), positions and velocities over `time`, `particle` and
        `spatial` (x, y, z), each particle's `species` and `mass` as coordinates.

        Raises:
            ImportError: xarray is not installed.
        """
        import xarray as xr

        n, dim = self.observables["position"].shape[1:]
        data = {}
        for name, value in self.observables.items():
            value = np.asarray(value)
            data[name] = (
                ("time", "spatial")
                if name == "box"
                else ("time", "particle", "spatial")[: value.ndim],
                value,
            )
        coords = {
            "time": np.asarray(self.time),
            "step": ("time", np.asarray(self.step)),
            "particle": np.arange(n),
            "spatial": ["x", "y", "z"][:dim],
            "species": ("particle", np.asarray(self.system.species)),
            "mass": ("particle", np.asarray(self.system.mass)),
        }
        attrs = {
            "model": self.model,
            "config": self.config,
            **({"seed": self.seed} if self.seed is not None else {}),
        }
        return xr.Dataset(data, coords=coords, attrs=attrs)

    def __repr__(self) -> str:
        n = self.observables["position"].shape[1]
        return (
            f"MdRunResult(model={self.model!r}, n={n}, T={len(self.time)}, "
            f"steps={int(self.step[-1])})"
        )


def write_h5md(f, result: MdRunResult) -> None:
    """H5MD 1.1 groups of an MD run into an open h5py file `f`."""
    sink = result.sink()
    sink.create(f, result.observables)
    sink.write(f, 0, result.observables)
    sink.finish(f, result.stats)


# ----------------------------------------------------------------------------- blow-up checks

# H5MD image counters (`/particles/all/image`) are int32: a particle farther than this
# many box lengths from the box cannot be written, and is a blown-up run.
IMAGE_LIMIT = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class MdLimits:
    """The `[checks]` bounds of an MD run, checked at saved frames (`sim run` stops, a
    sweep flags the run). Each measure is taken over its limit, so that a value above 1
    (or NaN) is a blow-up:

    - energy drift (verlet: total energy; nose_hoover and barostats: the conserved
      energy including the thermostat's and barostat's; none for langevin without a
      barostat): |E(t) - E(0)| / (scale * energy_drift) with
      scale = max(|E(0)|, K(0)), K the kinetic energy;
    - temperature: T(t) / (max_temperature_factor * T_ref) with T_ref = max(thermostat
      temperature, 2 scale / (degrees of freedom k_B)), which is at least T(0);
    - image counters (periodic boxes): the box lengths a particle is away from the box,
      over `IMAGE_LIMIT`.

    The neighbour list needs no check of its own: it is checked at every step (rebuilt
    whenever a particle moved more than half the skin since the last build), so it never
    misses a pair, however far a step goes.
    """

    energy: str | None  # the observable whose drift is checked
    energy_drift: float
    temperature_factor: float
    target: float  # the thermostat's temperature; 0 for NVE
    dof: int
    edges: np.ndarray | None
    boltzmann: float = 1.0  # k_B of the run's units (the temperature of an energy scale)
    cutoff: float | None = (
        None  # a barostat's run: its forces are NaN in a box shorter than twice this
    )

    @classmethod
    def of(cls, s: Setup) -> MdLimits:
        bounds = s.resolved["checks"]
        integrator = s.solver.integrator
        energy = None
        if "energy_drift" in bounds:
            energy = "conserved_energy" if integrator.has_conserved_energy else "total_energy"
        system = s.initial
        return cls(
            energy=energy,
            energy_drift=float(bounds.get("energy_drift", math.inf)),
            temperature_factor=float(bounds["max_temperature_factor"]),
            target=float(s.resolved["solver"].get("temperature", 0.0)),
            dof=int(integrator.degrees_of_freedom(system.n, system.dim)),
            boltzmann=s.model.unit_system.boltzmann,
            edges=np.asarray(system.space.box, dtype=float) if system.space.periodic else None,
            cutoff=float(s.model.cutoff) if integrator.changes_box else None,
        )

    @property
    def reference_names(self) -> tuple[str, ...]:
        """The observables of frame 0 that `reference` takes."""
        return (
            ("kinetic_energy", "total_energy")
            if self.energy is None
            else ("kinetic_energy", self.energy)
        )

    def reference(self, first: dict, xp=np) -> dict:
        """E(0), K(0), the energy scale and the reference temperature, from frame 0's
        observables."""
        k0 = first["kinetic_energy"]
        e0 = first[self.energy or "total_energy"]
        scale = xp.maximum(xp.maximum(xp.abs(e0), k0), 1e-30)
        return {
            "e0": e0,
            "k0": k0,
            "scale": scale,
            "t_ref": xp.maximum(2.0 * scale / (self.dof * self.boltzmann), self.target),
        }

    def excess(self, obs: dict, ref: dict, xp=np) -> dict:
        """Per saved frame [T], each measure over its limit (> 1 or NaN: blown up)."""
        out = {}
        if self.energy is not None:
            out["drift"] = xp.abs(obs[self.energy] - ref["e0"]) / (ref["scale"] * self.energy_drift)
        out["temperature"] = obs["temperature"] / (ref["t_ref"] * self.temperature_factor)
        if self.edges is not None:
            position = obs["position"]
            # a barostat's box changes: each frame's own ("box" [..., dim])
            edges = (
                obs["box"][..., None, :]
                if "box" in obs
                else xp.asarray(self.edges, dtype=position.dtype)
            )
            images = xp.floor(position / edges)
            out["image"] = xp.max(xp.abs(images), axis=(-2, -1)) / IMAGE_LIMIT
        return out

    def within(self, obs: dict) -> jax.Array:
        """Whether a whole run (observables [T, ...], frame 0 first) stayed within the
        bounds (traceable: a sweep's per-run test)."""
        ref = self.reference({name: obs[name][0] for name in self.reference_names}, jnp)
        ok = jnp.asarray(True)
        for value in self.excess(obs, ref, jnp).values():
            ok = ok & jnp.all(value <= 1)
        return ok

    def first_failure(self, rows: dict[str, np.ndarray], ref: dict) -> tuple[int, str] | None:
        """The first frame of `rows` beyond a bound and what went wrong, or None."""
        rows = {name: np.asarray(v) for name, v in rows.items()}
        frames = len(rows["temperature"])
        failed = {}
        for name in ("total_energy", "temperature", "position"):
            finite = np.all(np.isfinite(rows[name].reshape(frames, -1)), axis=1)
            failed[f"finite:{name}"] = ~finite
        with np.errstate(all="ignore"):
            excess = self.excess(rows, ref)
        failed.update({name: ~(value <= 1) for name, value in excess.items()})
        bad = np.any(np.stack(list(failed.values())), axis=0)
        if not np.any(bad):
            return None
        i = int(np.argmax(bad))
        check = next(name for name, flags in failed.items() if flags[i])
        return i, self._describe(check, rows, i, ref, excess)

    def _describe(self, check: str, rows: dict, i: int, ref: dict, excess: dict) -> str:
        if check.startswith("finite:"):
            name = check.partition(":")[2]
            # (a barostat's run gone non-finite keeps the box it had then)
            shortest = float(np.min(rows["box"][i])) if self.cutoff is not None else math.inf
            if shortest < 2 * (self.cutoff or 0.0):
                return (
                    f"{name} became non-finite: the barostat shrank the box to an edge of "
                    f"{shortest:.4g}, shorter than twice "
                    f"the cutoff ({2 * self.cutoff:g}); use more particles (a larger box) or a "
                    "shorter cutoff"
                )
            return (
                f"{name} became non-finite (the run diverged); lower time.dt or start from a "
                "relaxed configuration"
            )
        if check == "drift":
            label = "conserved energy" if self.energy == "conserved_energy" else "total energy"
            drift = abs(float(rows[self.energy][i]) - float(ref["e0"])) / float(ref["scale"])
            return (
                f"{label} drifted by {_percent(drift)} of its initial scale max(|E0|, K0) = "
                f"{float(ref['scale']):.4g} "
                f"(limit checks.energy_drift = {_percent(self.energy_drift)}); lower time.dt or "
                "loosen the bound"
            )
        if check == "temperature":
            t = float(rows["temperature"][i])
            return (
                f"temperature reached {t:.3g}, {t / float(ref['t_ref']):.3g} times the reference "
                f"{float(ref['t_ref']):.3g} "
                f"(limit checks.max_temperature_factor = {self.temperature_factor:g}); lower "
                "time.dt or loosen the bound"
            )
        far = float(excess["image"][i]) * IMAGE_LIMIT
        return (
            f"a particle is {far:.3g} box lengths from the box, beyond the int32 image counters of "
            "the output "
            f"(limit {IMAGE_LIMIT}); lower time.dt"
        )


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.3g}%"


def _plan(model: ParticleModel, config: Config) -> RunPlan:
    s = _setup(model, config)
    engine = particle_run(s.model, s.params, s.t, initial=s.initial, solver=s.solver, key=s.key)
    frames = engine.n_saves
    frame_bytes = 8 * 2 * int(np.prod(s.initial.position.shape)) + 64
    wanted = chunk_frames(frame_bytes, frames, config.spec.output.chunk, config=config)
    # Chunks of equal length (one compiled program): the largest divisor of the frames
    # within both the memory budget and the solver's steps per chunk.
    engine.chunk = largest_divisor_at_most(frames, min(wanted, engine.chunk))
    times = np.asarray(s.t)
    every = int(round((float(times[1]) - float(times[0])) / float(s.solver.integrator.dt)))
    sink = MdSink(
        model=s.model.name,
        config=resolved_toml(config, **s.resolved),
        time=times,
        step=np.arange(len(times), dtype=np.int64) * every,
        system=s.initial,
        params={k: np.asarray(v) for k, v in s.params.items()},
        seed=int((config.spec.system or {}).get("seed", 0)),
        units=s.model.units,
        rdf=RdfSpec(**s.resolved["rdf"], n_species=s.model.n_species)
        if "rdf" in s.resolved
        else None,
    )

    limits = MdLimits.of(s)
    reference: dict[str, float] = {}

    def check(rows: dict[str, np.ndarray], k: int) -> None:
        if not reference:  # frame 0: in the first chunk's rows, or recomputed on a resume
            if k == 0:
                first = {name: rows[name][0] for name in limits.reference_names}
            else:
                first = engine.first_observables()
            reference.update(
                limits.reference({name: np.asarray(first[name]) for name in limits.reference_names})
            )
        failure = limits.first_failure(rows, reference)
        if failure is not None:
            i, what = failure
            frame = i + (k if k == 0 else k + 1)
            raise SimulationError(
                f"{config.source}: the run blew up at step {int(sink.step[frame])} (t = "
                f"{float(times[frame]):g}): {what}"
            )

    def result(rows: dict[str, np.ndarray], stats: dict[str, int]) -> MdRunResult:
        return MdRunResult(
            model=sink.model,
            config=sink.config,
            time=times,
            step=sink.step,
            observables=rows,
            system=s.initial,
            params=sink.params,
            seed=sink.seed,
            stats=stats,
            units=sink.units,
            rdf=sink.rdf,
        )

    return RunPlan(
        engine=engine,
        sink=sink,
        config=sink.config,
        check=check,
        result=result,
        description=s.model.name,
    )


# ----------------------------------------------------------------------------- sweeps


def sweep_setup(config: Config, s: Setup) -> Setup:
    """An MD set-up for vmapped runs: only [params] may be swept (the system is shared),
    and the neighbour list, which cannot grow inside a batch, is sized by
    `solvers.fixed_capacity` (a chunk whose runs overflow it is rerun with larger lists:
    `solvers.redo_overflowed`)."""
    section = sweep_section(config)
    if config.raw.get("rdf") is not None:
        raise config.error(
            "rdf",
            "a sweep file keeps no g(r) of its runs; run one of them with sim run to get its [rdf]",
        )
    for name in section.params:
        head, dot, _ = name.partition(".")
        if dot or name in _MD_SETTINGS:
            what = (
                "initial values"
                if head == "initial"
                else f"[{head}] keys"
                if dot
                else f"{name!r} (a [system] or [solver] key)"
            )
            raise config.error(
                f"sweep.params.{name}",
                f"MD sweeps vary [params] only (such as epsilon and sigma); {what} cannot be "
                "swept: every run starts from the same [system] with the same [solver]",
            )
    return dataclasses.replace(s, solver=_fixed_list(s))


def _fixed_list(s: Setup):
    """The set-up's solver with a list that cannot grow (vmapped sweeps, compiled fits):
    sized by `solvers.fixed_capacity` unless the config sets a capacity."""
    solver = s.solver
    if not solver.neighbour_list or solver.capacity is not None:
        return solver
    box = s.initial.space.box if s.initial.space.periodic else None
    capacity = fixed_capacity(
        np.asarray(s.initial.position),
        None if box is None else np.asarray(box),
        s.model.cutoff,
        solver.skin,
    )
    return dataclasses.replace(solver, capacity=capacity)


_MD_SETTINGS = (
    "lattice",
    "cells",
    "density",
    "particles",
    "min_distance",
    "temperature",
    "friction",
    "tau",
    "chain_length",
    "skin",
    "dt",
    "steps",
)


def with_capacity(s: Setup, capacity: int | None) -> Setup:
    """The set-up with the neighbour list holding `capacity` neighbours per particle
    (`solvers.ALL_PAIRS`: no list); None leaves it as it is."""
    if capacity is None:
        return s
    if capacity == ALL_PAIRS:
        return dataclasses.replace(
            s, solver=dataclasses.replace(s.solver, neighbour_list=False, capacity=None)
        )
    return dataclasses.replace(s, solver=dataclasses.replace(s.solver, capacity=capacity))


def settle_overflows(s: Setup, values: dict, rerun) -> dict:
    """A sweep chunk's results with the runs whose neighbour list overflowed rerun by
    `rerun(capacity)` with larger lists (`solvers.redo_overflowed`)."""
    solver = s.solver
    if not solver.neighbour_list:
        return values
    return redo_overflowed(values, solver.capacity, s.initial.n, rerun)


class MdMethods(MdFamily):
    """The MD family's methods that need its numerics (`sim._md_family.MdFamily` calls
    them)."""

    def simulate(self, model, params, t, initial, solver, key) -> Trajectory:
        return run_md(model, params, t, initial=initial, solver=solver, key=key)

    def drive(self, model, params, t, initial, solver, key) -> Trajectory:
        return run_md(model, params, t, initial=initial, solver=solver, key=key)

    def setup(self, model, config: Config) -> Setup:
        return _setup(model, config)

    def plan(self, model, config: Config) -> RunPlan:
        return _plan(model, config)

    def fit_solver(self, s: Setup):
        # The list cannot grow inside a compiled fit (an overflow makes the run NaN, never wrong).
        return _fixed_list(s)

    def sweep_setup(self, config: Config, s: Setup) -> Setup:
        return sweep_setup(config, s)

    def run_bounds(self, s: Setup):
        return MdLimits.of(s).within

    def resized(self, s: Setup, size: int) -> Setup:
        return with_capacity(s, size)

    def settle(self, s: Setup, values: dict, rerun) -> dict:
        return settle_overflows(s, values, rerun)

    def sweep_problem(self, s: Setup, params: dict, initial, key):
        return sweep_problem(s, params, key)
