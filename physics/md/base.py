"""The abstract particle family: a potential energy of positions in a space."""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Int, PyTree

from .._base import Model
from ._observables import kinetic_energy, number_density, pressure
from ._space import Periodic, Space
from ._topology import Topology
from ._types import (
    Bonds,
    Edges,
    Forces,
    Masses,
    NeighbourIndex,
    Positions,
    Scalar,
    ScalarLike,
    Species,
    Velocities,
)
from ._units import Units, unit_system

OBSERVABLES = (
    "potential_energy",
    "kinetic_energy",
    "total_energy",
    "temperature",
    "pressure",
    "volume",
    "density",
)


class System(eqx.Module):
    """Particles in a space: what an MD run starts from (and what it evolves).

    Attributes:
        position: [n, dim].
        velocity: [n, dim].
        mass: [n] (positive).
        species: [n] integer type of each particle, 0 .. n_species - 1.
        space: `Free` or `Periodic` (geometry is passed in, never built into a model).
        bonds: [b, 2] pairs of bonded particle ids, or None.
        topology: the molecules (`physics.md.Topology`: which particles form one,
            their fixed distances), or None: pairs within one molecule do not interact
            through pair potentials.
    """

    position: Positions
    velocity: Velocities
    mass: Masses
    species: Species
    space: Space
    bonds: Bonds | None = None
    topology: Topology | None = None

    def __check_init__(self):
        n, dim = self.position.shape
        if self.velocity.shape != (n, dim):
            raise ValueError(
                f"velocity must have shape {(n, dim)} like position, got {self.velocity.shape}"
            )
        if self.mass.shape != (n,) or self.species.shape != (n,):
            raise ValueError(
                f"mass and species must have shape ({n},), got {self.mass.shape} and "
                f"{self.species.shape}"
            )
        if dim != self.space.dim:
            raise ValueError(f"positions are {dim}-D but the space is {self.space.dim}-D")
        if self.bonds is not None and (self.bonds.ndim != 2 or self.bonds.shape[1] != 2):
            raise ValueError(f"bonds must have shape (b, 2), got {self.bonds.shape}")
        if self.topology is not None and self.topology.molecule.shape != (n,):
            raise ValueError(
                f"topology.molecule must have shape ({n},), got {self.topology.molecule.shape}"
            )

    @property
    def n(self) -> int:
        return self.position.shape[0]

    @property
    def dim(self) -> int:
        return self.position.shape[1]

    def at(self, position: Positions, velocity: Velocities | None = None) -> System:
        """The same system with new positions (and velocities)."""
        velocity = self.velocity if velocity is None else velocity
        return System(
            position, velocity, self.mass, self.species, self.space, self.bonds, self.topology
        )

    def permuted(self, order: Int[Array, " n"]) -> System:
        """The same particles numbered anew: particle order[k] becomes particle k. Only
        for a system without bonds or molecules (their particle ids would need
        renumbering too)."""
        if self.bonds is not None or self.topology is not None:
            raise ValueError("a system with bonds or molecules cannot be renumbered")
        return System(
            self.position[order],
            self.velocity[order],
            self.mass[order],
            self.species[order],
            self.space,
        )

    def scaled(self, factor: ScalarLike | Edges) -> System:
        """Positions and box lengths multiplied by `factor`, a number or one per axis [dim]
        (for the virial)."""
        return System(
            self.position * factor,
            self.velocity,
            self.mass,
            self.species,
            self.space.scaled(factor),
            self.bonds,
            self.topology,
        )

    def with_box(self, edges: Edges) -> System:
        """The same particles in a periodic box of edge lengths `edges` [dim] (a box that
        a barostat changes during a run)."""
        return System(
            self.position,
            self.velocity,
            self.mass,
            self.species,
            Periodic(edges),
            self.bonds,
            self.topology,
        )

    def astype(self, dtype) -> System:
        """Floating-point arrays (positions, velocities, masses, box) cast to `dtype`."""
        space = (
            Periodic(self.space.edges.astype(dtype))
            if isinstance(self.space, Periodic)
            else self.space
        )
        topology = None if self.topology is None else self.topology.astype(dtype)
        return System(
            self.position.astype(dtype),
            self.velocity.astype(dtype),
            self.mass.astype(dtype),
            self.species,
            space,
            self.bonds,
            topology,
        )


class ParticleModel(Model):
    """Particles interacting through a potential energy U(positions; params) in a space.

    Concrete models implement `interaction_energy` and set `cutoff` (the largest distance
    at which two particles interact: the neighbour-list range, static) and `n_species`.
    Forces default to minus the autodiff gradient and the virial to the derivative of the
    energy under a uniform scaling of positions and box; pair models override both with
    one fused pass over the neighbour list.

    Observables (per save): potential_energy, kinetic_energy, total_energy, temperature,
    pressure, volume and number density (totals; volume and density are NaN in free
    space), in the model's `units`: "reduced" (Boltzmann's constant 1, temperature an
    energy) or "real" (nm, ps, kJ/mol, amu, e; temperature in K, pressure in bar, and
    the mass density in g/cm^3 as the observable mass_density).

    A model whose own terms act on `System.bonds` (springs, as `BeadSpring`'s) sets the
    class attribute `bonded = True`: the bonds of a start file then stay bonds. Otherwise
    a start file's bonded groups become rigid molecules (fixed bond lengths).

    Arguments:
        units: the unit system, "reduced" or "real" (a keyword of every particle model;
            a config sets it with [system] units).
    """

    cutoff: eqx.AbstractVar[float]
    n_species: eqx.AbstractVar[int]
    units: str = eqx.field(static=True, default="reduced", kw_only=True)
    bonded: ClassVar[bool] = False
    rows_apart: ClassVar[bool] = False
    """True for models whose `forces` and `forces_and_virial` take `rows=` (particle ids,
    with the neighbour rows of those particles) and give the forces on those particles
    and their share of the virial: a run may then split the particles over devices."""

    def __check_init__(self):
        unit_system(self.units)

    def mesh_part(self, system: System, multiple: int = 1):
        """For a model whose forces are pairs within the cutoff plus a part computed on a
        mesh (particle-mesh Ewald): that part as `physics.md.MeshEwald`, the first mesh
        size a multiple of `multiple` (a run split into that many slabs); its pair part is
        then `pair_forces_and_virial` and `rows_energy_and_virial` with `rows`. None for
        a model without one.

        Raises:
            ValueError: a long-range part that cannot be computed in pieces, in one line.
        """
        return None

    @property
    def unit_system(self) -> Units:
        """The `physics.md.Units` of `units` (k_B, Coulomb's constant, the pressure unit)."""
        return unit_system(self.units)

    @property
    def observable_names(self) -> tuple[str, ...]:
        return OBSERVABLES + (("mass_density",) if self.unit_system.mass_density else ())

    @abc.abstractmethod
    def interaction_energy(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Scalar:
        """Potential energy of the configuration (without tail corrections).

        Arguments:
            system: positions, species, bonds and space.
            params: the model's parameter dict.
            neighbours: dense neighbour ids [n, k] padded with n holding every pair within
                `cutoff` (a Verlet list), or None to sum over all pairs.
        """

    def tail_energy(self, system: System, params: PyTree) -> Scalar:
        """Analytic correction for interactions beyond the cutoff (0 unless the model has one)."""
        return jnp.zeros((), system.position.dtype)

    def tail_pressure(self, system: System, params: PyTree) -> Scalar:
        """Analytic pressure correction for interactions beyond the cutoff."""
        return jnp.zeros((), system.position.dtype)

    def energy(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Scalar:
        """Total potential energy: interactions plus tail correction."""
        return self.interaction_energy(system, params, neighbours) + self.tail_energy(
            system, params
        )

    def forces(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Forces:
        """Minus the gradient of the energy with respect to positions [n, dim]."""
        return -jax.grad(lambda r: self.interaction_energy(system.at(r), params, neighbours))(
            system.position
        )

    def virial(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Scalar:
        """W = sum over pairs of r_ij . f_ij = -dU/d(lambda) under r -> lambda r, L -> lambda L."""
        one = jnp.ones((), system.position.dtype)
        return -jax.grad(lambda s: self.interaction_energy(system.scaled(s), params, neighbours))(
            one
        )

    def virial_diagonal(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Edges:
        """The diagonal of the virial tensor [dim], W_aa = sum over pairs of x_ij,a f_ij,a
        = -dU/d(lambda_a) under x_a -> lambda_a x_a, L_a -> lambda_a L_a (it sums to `virial`)."""
        ones = jnp.ones(system.dim, system.position.dtype)
        return -jax.grad(lambda s: self.interaction_energy(system.scaled(s), params, neighbours))(
            ones
        )

    def forces_and_virial(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> tuple[Forces, Edges]:
        """Forces [n, dim] and the diagonal of the virial tensor [dim] (without the tail
        correction): what a barostat needs at every step. Models that get both from one
        pass override it."""
        return self.forces(system, params, neighbours), self.virial_diagonal(
            system, params, neighbours
        )

    def check_params(self, system: System, params: PyTree) -> None:
        """Raise ValueError for parameters that cannot work with this model or system
        (called outside jit with concrete values; no-op by default)."""

    def for_system(self, system: System) -> ParticleModel:
        """The model with whatever it sizes from a concrete system fixed as static options
        (a k-space mesh from the box), so that compiled runs, where the box is traced,
        can use it. Runs call it before they compile; the model itself by default."""
        return self

    def measure(
        self,
        system: System,
        params: PyTree,
        neighbours: NeighbourIndex | None,
        degrees_of_freedom: int,
        constraint_virial: Scalar | float = 0.0,
    ) -> dict[str, Array]:
        """The standard observables of one configuration (see the class docstring);
        `constraint_virial` (sum over particles of r . G, G the constraint forces of
        rigid molecules) joins the virial of the pressure."""
        potential = self.energy(system, params, neighbours)
        kinetic = kinetic_energy(system.velocity, system.mass)
        virial = self.virial(system, params, neighbours) + constraint_virial
        return self.observables_of(
            potential,
            kinetic,
            virial,
            system.space,
            system.n,
            degrees_of_freedom,
            jnp.sum(system.mass),
            self.tail_pressure(system, params),
            system.position.dtype,
        )

    def observables_of(
        self,
        potential: Scalar,
        kinetic: Scalar,
        virial: Scalar,
        space: Space,
        n: int,
        degrees_of_freedom: int,
        total_mass: Scalar,
        tail_pressure: Scalar,
        dtype=None,
    ) -> dict[str, Array]:
        """The standard observables (see the class docstring) from the totals over the
        particles: the potential energy (tail correction included), the kinetic energy,
        the virial, the total mass and the tail correction of the pressure (what a run
        split over devices sums over them)."""
        volume = space.volume() if dtype is None else space.volume().astype(dtype)
        units = self.unit_system
        out = {
            "potential_energy": potential,
            "kinetic_energy": kinetic,
            "total_energy": potential + kinetic,
            "temperature": 2.0 * kinetic / (degrees_of_freedom * units.boltzmann),
            "pressure": (pressure(kinetic, virial, space) + tail_pressure) / units.pressure,
            "volume": volume,
            "density": number_density(n, volume),
        }
        if units.mass_density:
            out["mass_density"] = total_mass / volume / units.mass_density
        return out
