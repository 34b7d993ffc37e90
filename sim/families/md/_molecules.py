"""Rigid molecules in MD configs: `[system] molecule` (a built-in water model, "spce" or
"tip3p", or a table of sites and constraints) with `molecules` copies at a mass
`density`, or the molecules of an H5MD start file (`[system] file`, found from its
connectivity), the water model's parameters as defaults, the constraints that the
integrator holds (SETTLE for rigid triangles, SHAKE/RATTLE for the rest), and the bonds
a run writes back to its H5MD file."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from physics.md import (
    WATER_MODELS,
    Molecule,
    System,
    Units,
    bonded_molecules,
    dependent_constraints,
    molecular_box,
)
from solvers import ParticleSolver, StochasticCellRescaling, constraints_of, did_you_mean

from ..._config import Config
from ..._limits import memory_problem
from ..._run import number

MOLECULE_KEYS = ("species", "mass", "sites", "constraints")
MOLECULE_SYSTEM_KEYS = (
    "molecule",
    "molecules",
    "density",
    "temperature",
    "seed",
    "min_distance",
    "units",
)
MIN_DISTANCE = {"real": 0.17, "reduced": 0.5}
"""The least distance between sites of different molecules at the start, by unit system:
0.17 nm is above half an oxygen's sigma (which the start check asks for) and below the
O-H distance of a hydrogen bond."""


def water_model(config: Config):
    """The built-in water model `[system] molecule` names, or None."""
    name = (config.spec.system or {}).get("molecule")
    return WATER_MODELS.get(name) if isinstance(name, str) else None


def molecule_of(config: Config, units: Units) -> Molecule:
    """The molecule of `[system] molecule`: a water model by name (real units) or a table
    {species, mass, sites, constraints}."""
    value = config.spec.system["molecule"]
    if isinstance(value, str):
        if value not in WATER_MODELS:
            raise config.error(
                "system.molecule",
                f"unknown molecule {value!r} (built in: {', '.join(WATER_MODELS)}; or a table of "
                f"species, mass, sites, constraints).{did_you_mean(value, tuple(WATER_MODELS))}",
            )
        if units.name != "real":
            raise config.error(
                "system.molecule",
                f"the {value} water model is in real units (nm, kJ/mol, e): set [system] units = "
                '"real"',
            )
        return WATER_MODELS[value].molecule()
    if not isinstance(value, dict):
        raise config.error(
            "system.molecule",
            "expected a water model name or a table of species, mass, sites, constraints, got "
            f"{value!r}",
        )
    for key in value:
        if key not in MOLECULE_KEYS:
            raise config.error(
                f"system.molecule.{key}",
                "unknown key (expected one of: "
                f"{', '.join(MOLECULE_KEYS)}).{did_you_mean(key, MOLECULE_KEYS)}",
            )
    missing = [key for key in MOLECULE_KEYS if key not in value]
    if missing:
        raise config.error(f"system.molecule.{missing[0]}", "required key is missing")
    sites = value["sites"]
    if not (
        isinstance(sites, list)
        and sites
        and all(isinstance(s, list) and len(s) == 3 for s in sites)
    ):
        raise config.error(
            "system.molecule.sites", f"expected a list of [x, y, z] positions, got {sites!r}"
        )
    k = len(sites)
    sites = tuple(tuple(number(config, "system.molecule.sites", c) for c in s) for s in sites)
    species = value["species"]
    if not (
        isinstance(species, list)
        and len(species) == k
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in species)
    ):
        raise config.error(
            "system.molecule.species",
            f"expected {k} whole numbers >= 0, one per site, got {species!r}",
        )
    mass = value["mass"]
    if not (isinstance(mass, list) and len(mass) == k):
        raise config.error(
            "system.molecule.mass", f"expected {k} masses, one per site, got {mass!r}"
        )
    mass = tuple(number(config, "system.molecule.mass", m) for m in mass)
    if not all(m > 0 for m in mass):
        raise config.error("system.molecule.mass", f"every mass must be positive, got {list(mass)}")
    pairs = value["constraints"]
    ok = isinstance(pairs, list) and all(
        isinstance(p, list)
        and len(p) == 2
        and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < k for i in p)
        and p[0] != p[1]
        for p in pairs
    )
    if not ok:
        raise config.error(
            "system.molecule.constraints",
            f"expected pairs [i, j] of distinct site numbers 0..{k - 1}, got {pairs!r}",
        )
    if len({tuple(sorted(p)) for p in pairs}) != len(pairs):
        raise config.error("system.molecule.constraints", "a pair of sites is constrained twice")
    molecule = Molecule("molecule", tuple(species), mass, sites, tuple(tuple(p) for p in pairs))
    if np.any(molecule.lengths() <= 0):
        raise config.error("system.molecule.sites", "two constrained sites are at the same place")
    problem = dependent_constraints(molecule.sites, molecule.constraints)
    if problem is not None:
        raise config.error("system.molecule.constraints", problem)
    return molecule


def molecular_system(config: Config, units: Units, key, temperature: float | None) -> System:
    """The `[system]` of copies of a rigid molecule, with velocities on its constraints
    at `temperature` (Maxwell-Boltzmann, projected on the constraints and scaled to the
    temperature of the 3n - 3 - c degrees of freedom)."""
    section = config.spec.system
    for key_name in section:
        if key_name not in MOLECULE_SYSTEM_KEYS:
            raise config.error(
                f"system.{key_name}",
                "is not a key of a system of molecules (expected one of: "
                f"{', '.join(MOLECULE_SYSTEM_KEYS)})."
                f"{did_you_mean(key_name, MOLECULE_SYSTEM_KEYS)}",
            )
    molecule = molecule_of(config, units)
    count = section.get("molecules")
    if isinstance(count, bool) or not isinstance(count, int) or count < 2:
        raise config.error(
            "system.molecules", f"expected a whole number >= 2 of molecules, got {count!r}"
        )
    problem = memory_problem(
        1024 * count * len(molecule.sites), f"{count:,} molecules", device=True
    )
    if problem:
        raise config.error("system.molecules", problem)
    if "density" not in section:
        raise config.error(
            "system.density",
            "required key is missing (the mass density, "
            f"{'g/cm^3' if units.name == 'real' else 'mass / length^3'})",
        )
    density = number(config, "system.density", section["density"])
    if not density > 0:
        raise config.error(
            "system.density", f"expected a positive mass density, got {section['density']!r}"
        )
    min_distance = number(
        config, "system.min_distance", section.get("min_distance", MIN_DISTANCE[units.name])
    )
    if not min_distance > 0:
        raise config.error(
            "system.min_distance", f"expected a positive distance, got {min_distance!r}"
        )
    mass_density = density * (units.mass_density or 1.0)  # in mass / length^3
    try:
        system = molecular_box(
            jax.random.fold_in(key, 1), molecule, count, mass_density, min_distance=min_distance
        )
    except ValueError as e:
        raise config.error("system.density", str(e)) from None
    if temperature:
        system = thermalized(system, jax.random.fold_in(key, 2), units.boltzmann * temperature)
    return system


def file_molecules(
    config: Config, path, system: System, units: Units, key, temperature: float | None
) -> System:
    """The rigid molecules of an H5MD start file (`system` as `physics.md.read_h5md`
    read it, with bonds): one molecule per connected group of bonds, every bond held at
    its length (from the geometry, the same for every molecule of a kind; a water
    model's when `[system] molecule` names one, which the file's molecules must then
    be), each molecule made whole, positions and velocities put on the constraints
    (new velocities at `temperature` when given)."""
    water = None
    if "molecule" in config.spec.system:
        value = config.spec.system["molecule"]
        water = WATER_MODELS.get(value) if isinstance(value, str) else None
        if water is None:
            raise config.error(
                "system.molecule",
                "with a file, molecule names the water model of the file's molecules "
                f"({', '.join(WATER_MODELS)}); got {value!r}"
                f"""{
                    did_you_mean(str(value), tuple(WATER_MODELS)) if isinstance(value, str) else ""
                }""",
            )
        if units.name != "real":
            raise config.error(
                "system.molecule",
                f"the {value} water model is in real units (nm, kJ/mol, e): set [system] units = "
                '"real"',
            )
    edges = np.asarray(system.space.box, dtype=float) if system.space.periodic else None
    claimed = None if system.topology is None else np.asarray(system.topology.molecule)
    mass = np.asarray(system.mass, dtype=float)
    try:
        position, topology = bonded_molecules(
            system.position, system.species, mass, system.bonds, edges, claimed=claimed
        )
    except ValueError as e:
        raise config.error("system.file", f"{path}: /connectivity: {e}") from None
    if water is not None:
        try:
            topology, mass = water.waters(position, system.species, topology)
        except ValueError as e:
            raise config.error("system.molecule", f"{path}: {e}") from None
    constraints = constraints_of(
        np.asarray(topology.constraints), np.asarray(topology.lengths), mass
    )
    position = jnp.asarray(position)
    mass = jnp.asarray(mass)
    position = constraints.positions(position, position, mass)
    velocity = constraints.velocities(position, jnp.asarray(system.velocity, dtype=float), mass)
    out = System(position, velocity, mass, system.species, system.space, None, topology)
    if temperature is not None:
        out = thermalized(out, jax.random.fold_in(key, 2), units.boltzmann * temperature)
    return out


def written_bonds(system: System) -> np.ndarray | None:
    """The bonds [b, 2] an MD run writes to `/connectivity/all/bonds`: the system's
    bonds and the constraints of its molecules, without the base of each rigid triangle
    that SETTLE holds (the two sides from its apex are the bonds of a three-site water;
    reading the file back closes the triangle again), or None."""
    parts = []
    if system.bonds is not None:
        parts.append(np.asarray(system.bonds, dtype=np.int64).reshape(-1, 2))
    topology = system.topology
    if topology is not None and topology.constraints.shape[0]:
        constraints = constraints_of(
            np.asarray(topology.constraints), np.asarray(topology.lengths), np.asarray(system.mass)
        )
        triangles = np.asarray(constraints.triangles, dtype=np.int64)
        parts += [
            triangles[:, [0, 1]],
            triangles[:, [0, 2]],
            np.asarray(constraints.pairs, dtype=np.int64),
        ]
    if not parts:
        return None
    bonds = np.sort(np.concatenate(parts), axis=1)
    return bonds[np.lexsort((bonds[:, 1], bonds[:, 0]))]


def thermalized(system: System, key, kt: float) -> System:
    """Maxwell-Boltzmann velocities at kT on the constraints of `system`: drawn, their
    components along the bonds removed (RATTLE) and the total momentum, then scaled so
    that 2K / (3n - 3 - c) = kT."""
    constraints = constraints_of(system.topology.constraints, system.topology.lengths, system.mass)
    velocity = _constrained_velocities(
        constraints, key, system.position, system.mass, jnp.asarray(kt, system.mass.dtype)
    )
    return system.at(system.position, velocity)


@eqx.filter_jit
def _constrained_velocities(constraints, key, position, mass, kt):
    """`thermalized`'s velocities, compiled as one program (op by op, SETTLE and SHAKE
    compiled some 70 small ones: 1.9 s of a water run's start)."""
    from physics.md import maxwell_boltzmann

    n, dim = position.shape
    velocity = maxwell_boltzmann(key, mass, kt, dim=dim)
    velocity = constraints.velocities(position, velocity, mass)
    velocity = velocity - jnp.sum(mass[:, None] * velocity, axis=0) / jnp.sum(mass)
    dof = dim * n - dim - constraints.count
    kinetic2 = jnp.sum(mass[:, None] * velocity * velocity)
    return velocity * jnp.sqrt(dof * kt / kinetic2)


def with_constraints(solver: ParticleSolver, system: System) -> ParticleSolver:
    """`solver` with its integrator (a barostat's thermostat) holding the constraints of
    `system`'s topology, unless it holds some already or there are none."""
    topology = system.topology
    if topology is None or topology.constraints.shape[0] == 0:
        return solver
    integrator = solver.integrator
    if integrator.constraints is not None:
        return solver
    constraints = constraints_of(
        np.asarray(topology.constraints), np.asarray(topology.lengths), np.asarray(system.mass)
    )
    if isinstance(integrator, StochasticCellRescaling):
        inner = dataclasses.replace(integrator.thermostat, constraints=constraints)
        integrator = StochasticCellRescaling(
            inner,
            pressure=integrator.pressure,
            tau=integrator.tau,
            compressibility=integrator.compressibility,
            coupling=integrator.coupling,
        )
    else:
        integrator = dataclasses.replace(integrator, constraints=constraints)
    return dataclasses.replace(solver, integrator=integrator)


def water_params(config: Config, params: dict) -> dict:
    """`params` with the water model's epsilon, sigma and charges where `[params]` gives
    none (a `[system] molecule` that names a water model)."""
    water = water_model(config)
    if water is None:
        return params
    given = config.spec.params
    return params | {
        k: jnp.asarray(v, dtype=float)
        for k, v in water.params().items()
        if k in params and k not in given
    }
