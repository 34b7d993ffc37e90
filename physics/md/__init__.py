"""Molecular dynamics models: particles in free or periodic space with pair potentials,
starting states and observables. Solver-agnostic: integrators and neighbour lists live
in `solvers`, and `sim.simulate` pairs the two."""

from ._initial import (
    LATTICES as LATTICES,
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
from .base import OBSERVABLES as OBSERVABLES, ParticleModel as ParticleModel, System as System
