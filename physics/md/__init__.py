"""Molecular dynamics models: particles in free or periodic space with pair potentials
and point charges (Ewald and particle-mesh Ewald sums), starting states and observables.
Solver-agnostic: integrators and neighbour lists live in `solvers`, and `sim.simulate` pairs the
two.

Its names are loaded from their modules when first used, so that importing one
model family (or the base class of this one) does not import every model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

# name -> (module, name in the module)
_NAMES: dict[str, tuple[str, str]] = {
    "LATTICES": ("._initial", "LATTICES"),
    "LATTICE_BASIS": ("._initial", "LATTICE_BASIS"),
    "chains": ("._initial", "chains"),
    "lattice": ("._initial", "lattice"),
    "maxwell_boltzmann": ("._initial", "maxwell_boltzmann"),
    "random_packing": ("._initial", "random_packing"),
    "read_h5md": ("._initial", "read_h5md"),
    "thermalize": ("._initial", "thermalize"),
    "LennardJonesCoulomb": ("._electrostatics", "LennardJonesCoulomb"),
    "MeshEwald": ("._mesh_ewald", "MeshEwald"),
    "ewald_reciprocal_energy": ("._electrostatics", "ewald_reciprocal_energy"),
    "pme_reciprocal_energy": ("._electrostatics", "pme_reciprocal_energy"),
    "other_method_options": ("._electrostatics", "other_method_options"),
    "block_average": ("._observables", "block_average"),
    "diffusion_coefficient": ("._observables", "diffusion_coefficient"),
    "green_kubo_diffusion": ("._observables", "green_kubo_diffusion"),
    "kinetic_energy": ("._observables", "kinetic_energy"),
    "mean_squared_displacement": ("._observables", "mean_squared_displacement"),
    "pressure": ("._observables", "pressure"),
    "radial_distribution": ("._observables", "radial_distribution"),
    "radial_distribution_frames": ("._observables", "radial_distribution_frames"),
    "rdf_pairs": ("._observables", "rdf_pairs"),
    "temperature": ("._observables", "temperature"),
    "velocity_autocorrelation": ("._observables", "velocity_autocorrelation"),
    "BeadSpring": ("._potentials", "BeadSpring"),
    "LennardJones": ("._potentials", "LennardJones"),
    "Morse": ("._potentials", "Morse"),
    "PairModel": ("._potentials", "PairModel"),
    "SoftSphere": ("._potentials", "SoftSphere"),
    "Wca": ("._potentials", "Wca"),
    "harmonic_bond_energy": ("._potentials", "harmonic_bond_energy"),
    "Molecule": ("._topology", "Molecule"),
    "Topology": ("._topology", "Topology"),
    "WATER_MODELS": ("._topology", "WATER_MODELS"),
    "WaterModel": ("._topology", "WaterModel"),
    "bonded_molecules": ("._topology", "bonded_molecules"),
    "dependent_constraints": ("._topology", "dependent_constraints"),
    "molecular_box": ("._topology", "molecular_box"),
    "molecules_of": ("._topology", "molecules_of"),
    "topology_of": ("._topology", "topology_of"),
    "topology_of_molecules": ("._topology", "topology_of_molecules"),
    "Free": ("._space", "Free"),
    "Periodic": ("._space", "Periodic"),
    "Space": ("._space", "Space"),
    "UNITS": ("._units", "UNITS"),
    "Units": ("._units", "Units"),
    "unit_system": ("._units", "unit_system"),
    "OBSERVABLES": (".base", "OBSERVABLES"),
    "ParticleModel": (".base", "ParticleModel"),
    "System": (".base", "System"),
}


__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())


__all__ = sorted(_NAMES)

if TYPE_CHECKING:
    from ._electrostatics import (
        LennardJonesCoulomb as LennardJonesCoulomb,
        ewald_reciprocal_energy as ewald_reciprocal_energy,
        pme_reciprocal_energy as pme_reciprocal_energy,
        other_method_options as other_method_options,
    )
    from ._mesh_ewald import MeshEwald as MeshEwald
    from ._initial import (
        LATTICES as LATTICES,
        LATTICE_BASIS as LATTICE_BASIS,
        chains as chains,
        lattice as lattice,
        maxwell_boltzmann as maxwell_boltzmann,
        random_packing as random_packing,
        read_h5md as read_h5md,
        thermalize as thermalize,
    )
    from ._observables import (
        block_average as block_average,
        diffusion_coefficient as diffusion_coefficient,
        green_kubo_diffusion as green_kubo_diffusion,
        kinetic_energy as kinetic_energy,
        mean_squared_displacement as mean_squared_displacement,
        pressure as pressure,
        radial_distribution as radial_distribution,
        radial_distribution_frames as radial_distribution_frames,
        rdf_pairs as rdf_pairs,
        temperature as temperature,
        velocity_autocorrelation as velocity_autocorrelation,
    )
    from ._potentials import (
        BeadSpring as BeadSpring,
        LennardJones as LennardJones,
        Morse as Morse,
        PairModel as PairModel,
        SoftSphere as SoftSphere,
        Wca as Wca,
        harmonic_bond_energy as harmonic_bond_energy,
    )
    from ._space import Free as Free, Periodic as Periodic, Space as Space
    from ._topology import (
        WATER_MODELS as WATER_MODELS,
        Molecule as Molecule,
        Topology as Topology,
        WaterModel as WaterModel,
        bonded_molecules as bonded_molecules,
        dependent_constraints as dependent_constraints,
        molecular_box as molecular_box,
        molecules_of as molecules_of,
        topology_of as topology_of,
        topology_of_molecules as topology_of_molecules,
    )
    from ._units import UNITS as UNITS, Units as Units, unit_system as unit_system
    from .base import OBSERVABLES as OBSERVABLES, ParticleModel as ParticleModel, System as System
